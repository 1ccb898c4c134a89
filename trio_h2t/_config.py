"""Transport configuration: one frozen, self-validating object per connection."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Final, final

from ._controlbuf import DEFAULT_THROTTLE_LIMIT

__all__ = ["TransportConfig", "resolve_config"]

#: RFC 9113 §6.5.2: the initial flow-control window and the smallest MAX_FRAME_SIZE.
RFC_DEFAULT_WINDOW = 65_535
RFC_MIN_FRAME_SIZE = 16_384
#: RFC 9113 §6.9.1: a window may never exceed 2^31 - 1.
MAX_WINDOW = 2**31 - 1
#: RFC 9113 §6.5.2: the largest SETTINGS_MAX_FRAME_SIZE.
RFC_MAX_FRAME_SIZE = 2**24 - 1

#: grpc-go's smallest client keepalive time (``keepalive.ClientParameters``: it raises
#: smaller values to 10 s with a warning; we refuse them, see ``keepalive_time``).
MIN_CLIENT_KEEPALIVE_TIME: Final = 10.0
#: grpc-go's smallest server keepalive time (``keepalive.ServerParameters``).
MIN_SERVER_KEEPALIVE_TIME: Final = 1.0


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class TransportConfig:
    """Settings shared by clients and servers. Every field is keyword-only.

    The defaults follow grpc-go's transport unless a comment says otherwise. Each
    field is checked when the object is built: a value of the wrong type is a
    ``TypeError`` (an ``int`` field takes an ``int`` and refuses a ``bool``; a
    ``float`` field takes an ``int`` or a ``float``; ``dynamic_window`` takes only a
    ``bool``), a value out of range a ``ValueError``; either names the field.
    """

    #: SETTINGS_MAX_CONCURRENT_STREAMS we advertise. A server refuses streams beyond
    #: it with RST_STREAM(REFUSED_STREAM); h2 would kill the connection instead
    #: (hypercorn #335). Until the client acknowledges our SETTINGS, a server
    #: enforces at least 100 (``_server.PRE_ACK_STREAM_LIMIT``, RFC 9113 §6.5.3): a
    #: lower value applies only after the ACK. 100 is h2's and httpcore's default.
    max_concurrent_streams: int = 100
    #: SETTINGS_INITIAL_WINDOW_SIZE we advertise for each stream: 8 MiB, not the RFC's
    #: (and grpc-go's) 64 KiB, so a new connection moves bulk data at full speed
    #: before the BDP estimator has grown anything: within a few % of 16 MiB windows,
    #: where 1 MiB was 12-19 % slower, a stream WINDOW_UPDATE coming back every
    #: 256 KiB (docs/flow-control.md). The inbound budget (``max_unread_bytes``)
    #: still caps what all streams together may buffer. Chrome advertises 6 MiB.
    initial_window_size: int = 8 * 1024 * 1024
    #: Our connection-level receive window; announced with a WINDOW_UPDATE at start.
    #: It is replenished on receipt, so it bounds bytes in flight, not what we buffer
    #: (the stream windows do): 16 MiB, the BDP cap, so it never limits a stream.
    connection_window_size: int = 16 * 1024 * 1024
    #: The inbound budget: body bytes received but not yet read by the application,
    #: across all the streams of a connection, never exceed it. The connection
    #: window we give back is capped so that what is buffered plus what the peer may
    #: still send stays within it (docs/flow-control.md, docs/security.md); without
    #: it, a peer could fill the window of every stream the application does not
    #: read (100 streams of up to ``max_window_size`` each). 32 MiB: the connection
    #: window plus the largest stream window, so one stream that stops reading with
    #: its window full never slows the others; two or more can, until the
    #: application reads them or they end. ``connection_window_size`` above it is
    #: lowered to it.
    max_unread_bytes: int = 32 * 1024 * 1024
    #: Grow windows with grpc-go's BDP estimator, up to ``max_window_size``.
    dynamic_window: bool = True
    #: grpc-go's ``bdpLimit``: 16 MiB.
    max_window_size: int = 16 * 1024 * 1024
    #: SETTINGS_MAX_FRAME_SIZE we advertise: the largest frame payload we accept (and
    #: buffer whole before parsing it). Loopy frames DATA up to the smaller of this
    #: and the peer's value. 1 MiB, not the RFC's 16 KiB (grpc-go's): a 64 KiB write
    #: is one frame, not four, and each frame costs Python work on both sides
    #: (docs/flow-control.md, "Defaults and what a peer can make us buffer").
    max_frame_size: int = 1024 * 1024
    #: Send a WINDOW_UPDATE once this fraction of a window is pending: half, as
    #: nghttp2 (``nghttp2_should_send_window_update``); grpc-go waits for a quarter.
    #: Each update is a frame to frame, write, parse and handle on both sides; half of
    #: a window still leaves the peer the other half (and the BDP estimator keeps the
    #: window at twice what a round trip carries) (docs/flow-control.md).
    window_update_ratio: float = 0.5
    #: SETTINGS_MAX_HEADER_LIST_SIZE we advertise and enforce (h2's default, 64 KiB).
    max_header_list_size: int = 65_536
    #: Bytes a stream may queue ahead of flow control before send_data waits. May go
    #: negative: one big write is admitted. 256 KiB, four times grpc-go's
    #: ``defaultWriteQuota``: at 64 KiB a producer of 64 KiB writes waited for loopy
    #: after every write (two trips through trio's scheduler per write instead of
    #: one), and one stream moved 20-25 % fewer bytes per second (docs/flow-control.md,
    #: "Write quota"; benchmarks/results/2026-12-05.md, "Write quota"). The bytes it
    #: bounds are the caller's own buffers, referenced, not copied.
    write_quota: int = 256 * 1024
    #: Bytes of the reader's buffer (grpc-go's ReadBufferSize: 32 KiB), which frames
    #: are parsed in; it grows to four frames for frames that do not fit (at most two
    #: buffers while DATA views wait; docs/architecture.md). The buffer is held only
    #: while reads are 1 KiB or more (``_reader.SMALL_READ``).
    read_buffer_size: int = 64 * 1024
    #: Frames the reader hands h2 per step before it yields to the other tasks
    #: (0 = all that were read). 32 lets the two peers overlap over TCP instead of
    #: taking turns (the unary figures: benchmarks/results/2026-12-02.md, "Experiments").
    max_frames_per_read: int = 32
    #: Loopy flushes once this many bytes are framed (grpc-go's WriteBufferSize).
    write_buffer_size: int = 64 * 1024
    #: Loopy yields once before writing if fewer bytes than this are framed, so
    #: producers can add to the batch (grpc-go's ``minBatchSize``).
    min_batch_size: int = 1000
    #: Throttled control items (frames answering the peer: PING and SETTINGS acks,
    #: RST_STREAM) queued before the reader stops reading. Keep it at 5 or more if
    #: the peer may use as small a limit: BDP probing alone keeps up to four queued
    #: per side, and two ends that both stop reading while both write more than
    #: the link holds would wait for each other (docs/controlbuf.md).
    throttle_limit: int = DEFAULT_THROTTLE_LIMIT
    #: Server: RST_STREAM frames a client may send at once (a token bucket's burst)
    #: before the server ends the connection with GOAWAY(ENHANCE_YOUR_CALM,
    #: "too_many_resets"): the Rapid Reset defence (CVE-2023-44487;
    #: docs/security.md). nghttp2's ``stream_reset_burst``.
    reset_burst: int = 1000
    #: Server: tokens added to that bucket per second, up to ``reset_burst``
    #: (nghttp2's ``stream_reset_rate``). A client cancelling fewer streams than this
    #: per second, on average, is never cut off.
    reset_rate: float = 33.0
    #: Frames that make us work but carry nothing for the application, that one
    #: peer may send at once (a token bucket's burst, one per connection) before
    #: the connection ends with GOAWAY(ENHANCE_YOUR_CALM, ``too_many_<kind>``):
    #: SETTINGS (not ACK), PRIORITY, WINDOW_UPDATE of less than 1 KiB (the "data
    #: dribble": each can make us send a DATA frame that small), empty DATA
    #: without END_STREAM, streams we refuse (past MAX_CONCURRENT_STREAMS), and
    #: streams we reset because of the peer's error, and PINGs that arrive while
    #: an earlier answer is still unwritten (BDP probing pings once per round
    #: trip, so its ACKs are long written; ``ping_min_interval`` polices the
    #: rest), and frames we ignore that answer nothing of ours (ALTSVC, unknown
    #: frame types, PRIORITY_UPDATE beyond one per stream the client opened, empty
    #: CONTINUATION, SETTINGS and PING ACKs we did not ask for). The HTTP/2 floods
    #: of 2019 (CVE-2019-9511 to -9518) and MadeYouReset
    #: (CVE-2025-8671) send these by the million; a browser or gRPC client sends a
    #: handful per connection. docs/security.md.
    flood_burst: int = 1000
    #: Tokens added to that bucket per second, up to ``flood_burst``.
    flood_rate: float = 100.0
    #: Server: connections open at once (TLS handshakes included), per server; one
    #: more is closed as soon as it is accepted, before anything is read or written
    #: (counted in ``H2Server.statistics().connections_refused``). None (the
    #: default): no cap but the process's file descriptors. Each idle connection
    #: costs tens of KiB and a descriptor: set it from the memory a server may spend.
    max_connections: int | None = None
    #: Seconds active streams get to finish after a graceful close sends GOAWAY.
    graceful_close_timeout: float = 10.0
    #: Seconds a client waits for the server's preface (its first SETTINGS frame),
    #: and a server for the client's preface and first SETTINGS (after that, the
    #: server closes the connection); TLS listeners also bound their handshake by it.
    handshake_timeout: float = 20.0

    # -- keepalive (docs/keepalive-and-shutdown.md; grpc-go's keepalive package)
    #: Client: send a PING after this many seconds without any inbound frame, and
    #: close the connection if nothing at all arrives within ``keepalive_timeout``
    #: after it. None (the default, as grpc-go) sends no keepalive PING: a dead
    #: server is only noticed when a write fails. At least 10 s (grpc-go's minimum):
    #: a smaller value raises ValueError instead of being raised to 10 s with a
    #: warning, as grpc-go does, because a frozen config should hold what it says.
    #: Servers police frequent pings (``ping_min_interval``: 5 min by default).
    keepalive_time: float | None = None
    #: Seconds either side waits, after its keepalive PING, for any frame before it
    #: closes the connection with ``KeepaliveTimeoutError`` (grpc-go: 20 s).
    keepalive_timeout: float = 20.0
    #: Client: keep pinging while no stream is open. False (grpc-go's default): the
    #: keepalive task sleeps without a timer until a stream starts, so an idle
    #: connection costs nothing and a server's ping policy sees no pings from it.
    keepalive_permit_without_stream: bool = False
    #: Server: send a PING after this many seconds without any inbound frame, and
    #: close the connection (no drain: the client is presumed gone) if nothing
    #: arrives within ``keepalive_timeout``. grpc-go's default, 2 h, finds dead
    #: clients eventually without pinging live ones often; None turns it off (and,
    #: with max_connection_idle and max_connection_age unset, runs no keepalive task
    #: at all). At least 1 s.
    server_keepalive_time: float | None = 7200.0
    #: Server: close gracefully (GOAWAY NO_ERROR, debug data ``max_idle``) a
    #: connection that has had no open stream for this many seconds. None (the
    #: default, as grpc-go): never, for servers behind a balancer or with clients
    #: that keep pooled connections on purpose; but then an idle connection costs
    #: about 37 KiB for as long as its client keeps it open, so a server facing
    #: the network should set it (``trio-h2t serve`` uses 300 s) or cap
    #: max_connections.
    max_connection_idle: float | None = None
    #: Server: close gracefully (GOAWAY NO_ERROR, debug data ``max_age``) a
    #: connection this many seconds old, plus or minus a random 10 % (so connections
    #: opened together do not all reconnect together; grpc-go's jitter). None (the
    #: default): never. Balancers use it to spread clients over new servers.
    max_connection_age: float | None = None
    #: Server: after ``max_connection_age``'s GOAWAY, seconds the open streams get to
    #: finish before the connection is closed (their handlers cancelled). None (the
    #: default, as grpc-go): as long as they take.
    max_connection_age_grace: float | None = None
    #: Server policy: seconds a client must leave between its PINGs (grpc-go's
    #: ``EnforcementPolicy.MinTime``, 5 min). A PING sooner than that after the last
    #: one is a strike, unless we wrote HEADERS or DATA in between (which clears the
    #: strikes); the third strike gets GOAWAY(ENHANCE_YOUR_CALM, ``too_many_pings``)
    #: and the connection is closed. The first PING never strikes. 0 never strikes
    #: while a stream is open.
    ping_min_interval: float = 300.0
    #: Server policy: allow client PINGs while no stream is open. False (grpc-go's
    #: default): such a PING strikes unless the last one was at least 2 h before.
    ping_permit_without_stream: bool = False

    def __post_init__(self) -> None:
        # Types first (``from __future__ import annotations``: field.type is the
        # annotation's text), so the range checks below compare numbers only. A bool
        # is an int to Python, and True would silently mean 1: refused, as
        # ``end_stream`` refuses 0 and 1.
        for field in fields(self):
            value = getattr(self, field.name)
            annotation = str(field.type)
            kinds, what = _FIELD_KINDS[annotation]
            if not isinstance(value, kinds) or isinstance(value, bool) != (annotation == "bool"):
                raise TypeError(
                    f"{field.name} must be {what}, not {type(value).__name__} ({value!r})"
                )
            if value != value:  # NaN compares false with everything: refuse it here
                raise ValueError(f"{field.name} must be a number, not nan")

        def check(name: str, ok: bool, rule: str) -> None:
            if not ok:
                raise ValueError(f"{name} must be {rule}, not {getattr(self, name)!r}")

        check("max_concurrent_streams", self.max_concurrent_streams >= 1, ">= 1")
        check(
            "initial_window_size",
            RFC_DEFAULT_WINDOW <= self.initial_window_size <= MAX_WINDOW,
            f"in [{RFC_DEFAULT_WINDOW}, 2**31-1]",
        )
        check(
            "connection_window_size",
            RFC_DEFAULT_WINDOW <= self.connection_window_size <= MAX_WINDOW,
            f"in [{RFC_DEFAULT_WINDOW}, 2**31-1]",
        )
        check(
            "max_unread_bytes",
            self.max_unread_bytes >= RFC_DEFAULT_WINDOW,
            f">= {RFC_DEFAULT_WINDOW} (the RFC's initial connection window)",
        )
        check(
            "max_window_size",
            self.initial_window_size <= self.max_window_size <= MAX_WINDOW,
            "in [initial_window_size, 2**31-1]",
        )
        check(
            "max_frame_size",
            RFC_MIN_FRAME_SIZE <= self.max_frame_size <= RFC_MAX_FRAME_SIZE,
            f"in [{RFC_MIN_FRAME_SIZE}, 2**24-1]",
        )
        check("window_update_ratio", 0 < self.window_update_ratio <= 1, "in (0, 1]")
        check("max_header_list_size", self.max_header_list_size >= 1024, ">= 1024")
        check("write_quota", self.write_quota >= 1, ">= 1")
        check("read_buffer_size", self.read_buffer_size >= 1024, ">= 1024")
        check("max_frames_per_read", self.max_frames_per_read >= 0, ">= 0")
        check("write_buffer_size", self.write_buffer_size >= 1024, ">= 1024")
        check("min_batch_size", self.min_batch_size >= 0, ">= 0")
        check("throttle_limit", self.throttle_limit >= 1, ">= 1")
        check("reset_burst", self.reset_burst >= 1, ">= 1")
        check("reset_rate", self.reset_rate >= 0, ">= 0")
        check("flood_burst", self.flood_burst >= 1, ">= 1")
        check(
            "max_connections",
            self.max_connections is None or self.max_connections >= 1,
            ">= 1 or None",
        )
        check("flood_rate", self.flood_rate >= 0, ">= 0")
        check("graceful_close_timeout", self.graceful_close_timeout >= 0, ">= 0")
        check("handshake_timeout", self.handshake_timeout > 0, "> 0")
        if self.keepalive_time is not None:
            check(
                "keepalive_time",
                self.keepalive_time >= MIN_CLIENT_KEEPALIVE_TIME,
                f">= {MIN_CLIENT_KEEPALIVE_TIME:g} (grpc-go's minimum) or None",
            )
        check("keepalive_timeout", self.keepalive_timeout > 0, "> 0")
        if self.server_keepalive_time is not None:
            check(
                "server_keepalive_time",
                self.server_keepalive_time >= MIN_SERVER_KEEPALIVE_TIME,
                f">= {MIN_SERVER_KEEPALIVE_TIME:g} or None",
            )
        for name in ("max_connection_idle", "max_connection_age"):
            value = getattr(self, name)
            check(name, value is None or value > 0, "> 0 or None")
        grace = self.max_connection_age_grace
        check("max_connection_age_grace", grace is None or grace >= 0, ">= 0 or None")
        check("ping_min_interval", self.ping_min_interval >= 0, ">= 0")


#: What a ``TransportConfig`` field of each annotation accepts (a float field takes an
#: int too), and how the error names it.
_FIELD_KINDS: dict[str, tuple[tuple[type, ...], str]] = {
    "int": ((int,), "an int"),
    "float": ((int, float), "a number (int or float)"),
    "float | None": ((int, float, type(None)), "a number (int or float) or None"),
    "int | None": ((int, type(None)), "an int or None"),
    "bool": ((bool,), "a bool"),
}


def resolve_config(config: object) -> TransportConfig:
    """``config`` itself, or the default ``TransportConfig()`` for None.

    Raises:
        TypeError: ``config`` is anything else (a ``dict`` of options, say: the
            message says how to build one).
    """
    if config is None:
        return TransportConfig()
    if not isinstance(config, TransportConfig):
        hint = " (build one: TransportConfig(**options))" if isinstance(config, dict) else ""
        raise TypeError(
            f"config must be a trio_h2t.TransportConfig or None, not {type(config).__name__}" + hint
        )
    return config
