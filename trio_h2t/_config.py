"""Transport configuration: one frozen, self-validating object per connection."""

from __future__ import annotations

from dataclasses import dataclass
from typing import final

from ._controlbuf import DEFAULT_THROTTLE_LIMIT

__all__ = ["TransportConfig"]

#: RFC 9113 §6.5.2: the initial flow-control window and the smallest MAX_FRAME_SIZE.
RFC_DEFAULT_WINDOW = 65_535
RFC_MIN_FRAME_SIZE = 16_384
#: RFC 9113 §6.9.1: a window may never exceed 2^31 - 1.
MAX_WINDOW = 2**31 - 1
#: RFC 9113 §6.5.2: the largest SETTINGS_MAX_FRAME_SIZE.
RFC_MAX_FRAME_SIZE = 2**24 - 1


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class TransportConfig:
    """Settings shared by clients and servers. Every field is keyword-only.

    The defaults follow grpc-go's transport unless a comment says otherwise.
    """

    #: SETTINGS_MAX_CONCURRENT_STREAMS we advertise. A server refuses streams beyond
    #: it with RST_STREAM(REFUSED_STREAM); h2 would kill the connection instead
    #: (hypercorn #335). 100 is h2's and httpcore's default.
    max_concurrent_streams: int = 100
    #: SETTINGS_INITIAL_WINDOW_SIZE we advertise for each stream: 1 MiB, not the RFC's
    #: (and grpc-go's) 64 KiB, so a new connection moves bulk data near full speed
    #: before the BDP estimator has grown anything (docs/flow-control.md). Go's HTTP/2
    #: server uses 1 MiB too (x/net/http2 ``initialStreamRecvWindowSize``).
    initial_window_size: int = 1024 * 1024
    #: Our connection-level receive window; announced with a WINDOW_UPDATE at start.
    #: It is replenished on receipt, so it bounds bytes in flight, not what we buffer
    #: (the stream windows do): 16 MiB, the BDP cap, so it never limits a stream.
    connection_window_size: int = 16 * 1024 * 1024
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
    #: Send a WINDOW_UPDATE once this fraction of a window is pending (grpc-go: 1/4).
    window_update_ratio: float = 0.25
    #: SETTINGS_MAX_HEADER_LIST_SIZE we advertise and enforce (h2's default, 64 KiB).
    max_header_list_size: int = 65_536
    #: Bytes a stream may queue ahead of flow control before send_data waits
    #: (grpc-go's ``defaultWriteQuota``). May go negative: one big write is admitted.
    write_quota: int = 64 * 1024
    #: Bytes asked of the socket per read (grpc-go's ReadBufferSize: 32 KiB).
    read_buffer_size: int = 64 * 1024
    #: Frames the reader hands h2 per step before it yields to the other tasks
    #: (0 = all that were read). 32 lets the two peers overlap over TCP instead of
    #: taking turns (the unary figures are in benchmarks/README.md, Results).
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
    #: Seconds active streams get to finish after a graceful close sends GOAWAY.
    graceful_close_timeout: float = 10.0
    #: Seconds a client waits for the server's preface (its first SETTINGS frame),
    #: and a server for the client's preface and first SETTINGS (after that, the
    #: server closes the connection); TLS listeners also bound their handshake by it.
    handshake_timeout: float = 20.0

    def __post_init__(self) -> None:
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
        check("graceful_close_timeout", self.graceful_close_timeout >= 0, ">= 0")
        check("handshake_timeout", self.handshake_timeout > 0, "> 0")
