"""The reader task: read from the transport, feed h2, dispatch the events to streams.

Theory of operation
-------------------
``Reader.run`` repeats: wait on the control buffer's throttle gate, read (unless h2
still holds unparsed frames), hand h2 at most ``max_frames_per_read`` frames, and
dispatch the events they produced. It never waits on a stream, and never writes:
frames h2 queues by itself in response to the peer (PING ack, SETTINGS ack,
RST_STREAM) are announced to loopy as throttled ``PeerResponse`` items, so a peer
that floods them without reading is stopped by the gate instead of being buffered
without bound (window items are not throttled; ``_items.py`` says why and what
bounds them).

Each event goes to the handler of its class (``_HANDLERS``: ``Reader._on_data``,
``_on_stream_ended``, ``_on_request_received``...), one method per event kind; the
handlers of a call's events (headers, DATA, END_STREAM) are its hot path, guarded by
benchmarks/micro/reader_dispatch.py against a plain ``if``/``elif`` chain.

Ownership: every field of ``Reader`` is the reader's (its tags say so), and so is
what it keeps per stream: the streams holding views of its frame buffers. What it
writes on a stream is a hand-off to the stream task (``H2Stream.reader_deliver_*``:
headers, data, trailers, the end); nothing on the stream is the reader's alone
(tests/test_stream_privacy.py).

The reader changes the connection's shared state (``ConnectionCore``) only between
two awaits, and hands loopy everything that must be written as a control item.
What a new request becomes is not the reader's business: a server gives it an
``admit`` callable (``_server.py``'s admission, which starts the handler); without
one every request is refused with RST_STREAM(REFUSED_STREAM).

Anything unexpected raised while reading, parsing or dispatching (admission
included) ends the reader through ``ConnectionCore.fault``: the connection ends,
the other connections do not notice.

A GOAWAY from the peer (``_on_goaway``) fails the client streams above its last
stream id with ``StreamRefusedError`` (caused by a ``GoAwayError``) and makes every
later ``open_stream`` raise a ``GoAwayError``; if its code is not NO_ERROR, the
connection's ``error`` becomes that ``GoAwayError`` when the connection ends
(``ConnectionCore.fail``), so the code and debug data reach the user.
``docs/errors.md`` has the tables.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import h2.events
import h2.exceptions
import trio
from h2.errors import ErrorCodes
from h2.events import (
    DataReceived,
    InformationalResponseReceived,
    PingAckReceived,
    PingReceived,
    RemoteSettingsChanged,
    RequestReceived,
    ResponseReceived,
    SettingsAcknowledged,
    StreamEnded,
    StreamReset,
    TrailersReceived,
    WindowUpdated,
)
from h2.settings import SettingCodes

from ._connection import ConnectionCore
from ._exceptions import (
    ConnectionClosingError,
    ConnectionLostError,
    RemoteProtocolError,
    StreamRefusedError,
    StreamResetError,
)
from ._flow import BDP_PING_DATA
from ._h2state import GoAwayReceived, H2State, IgnoredFrameReceived, PriorityFrameReceived
from ._items import (
    CloseConnection,
    ControlItem,
    PeerResponse,
    Ping,
    Settings,
    StreamDone,
    WindowKind,
    WindowOpened,
    WindowUpdate,
)
from ._pings import DRAIN_PING_DATA, TOO_MANY_PINGS, PingEnforcer
from ._ratelimit import TokenBucket
from ._sockopts import stdlib_socket, stream_error, wait_readable

if TYPE_CHECKING:
    from ._stream import H2Stream

__all__ = ["Admit", "Reader"]

#: What the reader calls for each new request (server side): True if it put a
#: ``PeerResponse`` (the request was refused with a RST_STREAM h2 framed).
Admit = Callable[[h2.events.RequestReceived], bool]

log = logging.getLogger("trio_h2t")

#: A WINDOW_UPDATE opening less than this many bytes may count against the flood
#: budget (``Reader._flood``): a peer that opens its window a byte at a time makes
#: us send DATA frames that small (the "data dribble", CVE-2019-9511). grpc-go, h2
#: and Go's x/net coalesce their updates, but grpcio's C core answers small
#: messages with small updates (a stream's and the connection's, per message read):
#: so small updates are free while they number at most SMALL_UPDATES_PER_FRAME per
#: HEADERS or DATA frame we wrote (what a reading peer may answer), and only those
#: beyond take tokens. 1000 concurrent grpcio calls were cut off without it
#: (tests/grpc_layer/test_interop.py).
SMALL_WINDOW_UPDATE = 1024
SMALL_UPDATES_PER_FRAME = 2


class _OverBudget(Exception):
    """The peer went over a budget; the connection is ending: stop reading."""


class _PeerClosed(Exception):
    """The transport reached EOF."""


#: A read shorter than this drops the connection's read buffer (once its frames are
#: parsed): the next read waits for the socket to be readable without one, so an
#: idle connection holds no ``read_buffer_size`` (64 KiB) buffer, most of what it
#: used to cost.
SMALL_READ = 1024


def _buffer_reader(
    transport: trio.abc.ReceiveStream, state: H2State
) -> Callable[[], Awaitable[int]]:
    """A read function for the reader task: it puts the next bytes from ``transport``
    into h2's frame buffer (``FixedFrameBuffer``) and returns how many (0 at EOF).

    On a ``trio.SocketStream`` it ``recv_into``s the frame buffer itself (its
    ``read_target``), where the frames are then parsed in place: no copy. A buffer
    dropped after a short read (``SMALL_READ``) is allocated again only once the
    socket is readable (a read is never split in two by a smaller buffer). Any other
    stream is read with ``receive_some(read_size)`` and copied in (``add_data``).
    Errors follow ``trio.abc.ReceiveStream``: BrokenResourceError for the network,
    ClosedResourceError if the stream was closed (before the read, or while it
    waits). Checkpoint: only while it waits for the socket, as it always does first
    when the buffer was dropped (a read that succeeds at once has no schedule point,
    and no cancellation check: the reader's loop calls it right after
    ``wait_unthrottled``, whose checkpoint checks cancellation last, unless the read
    waits first). On cancellation: nothing was read.
    """
    buffer = state.incoming_buffer
    if not isinstance(transport, trio.SocketStream):
        receive_some = transport.receive_some
        size = buffer.read_size

        async def receive() -> int:
            data = await receive_some(size)
            state.feed(data)
            return len(data)

        return receive
    sock = transport.socket
    # The stdlib socket is read directly: the reader's loop already has the schedule
    # point and the cancellation check of each read (wait_unthrottled). What trio's
    # recv_into does besides is done here (_sockopts.py): the same stream errors, and
    # a socket already closed is ClosedResourceError, not a wait on file descriptor -1.
    raw = stdlib_socket(sock)
    recv_into = raw.recv_into if raw is not None else None

    async def read() -> int:
        # No cancellation check of its own: the wait for the socket is one, and
        # otherwise the read loop calls it right after
        # ``ControlBuffer.wait_unthrottled``, whose checkpoint checks last.
        try:
            if buffer.idle:
                await wait_readable(sock)
            target = buffer.read_target()
            if recv_into is None:
                n = await sock.recv_into(target)
            else:
                while True:
                    try:
                        n = recv_into(target)
                    except BlockingIOError:
                        await wait_readable(sock)
                    else:
                        break
        except OSError as exc:
            err = stream_error(exc)
            raise err from err.__cause__
        state.commit_read(n)
        return n

    return read


# The fewest holders ``Reader._prune_holders`` looks through.
_MIN_PRUNE = 32


def _views_live(buf: bytearray, holders: set[H2Stream]) -> bool:
    """Whether a stream in ``holders`` still queues a view of ``buf``."""
    return any(stream.reader_holds_view(buf) for stream in holders)


class Reader:
    """The reader task of one connection (client or server)."""

    def __init__(self, core: ConnectionCore, *, admit: Admit | None = None) -> None:
        self._core = core  # immutable after init
        self._h2 = core.h2  # immutable after init
        self._cbuf = core.cbuf  # immutable after init
        # immutable after init: what a new request becomes (refused without admit).
        self._on_request: Admit = admit if admit is not None else self._refuse_request
        # immutable after init: the core's objects, held for the hot path (their
        # contents have the owners the core's tags give).
        self._streams = core.streams_by_id
        self._in_flow = core.in_flow  # immutable after init (as above)
        self._bdp = core.bdp  # immutable after init (as above)
        # owner: reader: the server's budget of RST_STREAM frames from the client
        # (the Rapid Reset defence; _ratelimit.py). None on a client.
        self._resets = (
            None
            if core.client_side
            else TokenBucket(core.config.reset_burst, core.config.reset_rate, trio.current_time())
        )
        # owner: reader: the streams handed views of the frame buffer since it was
        # last reused (``_reuse_buffer``).
        self._holders: set[H2Stream] = set()
        # owner: reader: the size of ``_holders`` at which ``_prune_holders`` runs.
        self._prune_at = _MIN_PRUNE
        # owner: reader: the frame buffer's other buffer (``_reuse_buffer``), None
        # until one is needed.
        self._spare: bytearray | None = None
        # owner: reader: the streams handed views of ``_spare``.
        self._spare_holders: set[H2Stream] = set()
        # owner: reader: WINDOW_UPDATEs under SMALL_WINDOW_UPDATE received so far.
        self._small_updates = 0
        # owner: reader: PRIORITY_UPDATE frames received so far (server: one per
        # stream the client opened is free; IgnoredFrameReceived in _dispatch).
        self._priority_updates = 0
        # owner: reader: PING ACKs received so far (those beyond the PINGs we wrote,
        # ConnectionCore.pings_sent, answer nothing of ours).
        self._ping_acks = 0
        # owner: reader: the peer's budget of frames that make us work for nothing
        # (TransportConfig.flood_burst, flood_rate; _flood).
        self._floods = TokenBucket(
            core.config.flood_burst, core.config.flood_rate, trio.current_time()
        )
        # owner: reader: the server's policy on client PINGs (None on a client,
        # which only acks the server's pings, as grpc-go's does).
        self._enforcer = (
            None
            if core.client_side
            else PingEnforcer(
                min_interval=core.config.ping_min_interval,
                permit_without_stream=core.config.ping_permit_without_stream,
            )
        )

    def _put(self, item: ControlItem) -> None:
        # After finish the connection is going away: nothing more is owed.
        with contextlib.suppress(ConnectionClosingError):
            self._cbuf.put(item)

    async def run(self) -> None:
        """Read until EOF, a protocol error, or the connection is finished (loopy ended).

        Never raises but for cancellation: a connection ending becomes ``core.error``,
        and an unexpected exception (a bug here, in h2, in admission or in a stream's
        dispatch; an odd one from the transport's ``receive_some``) is the
        connection's fault (``ConnectionCore.fault``). Checkpoint: always.
        """
        core = self._core
        try:
            try:
                await self._read_loop()
            except _PeerClosed:
                self._on_eof()
            except _OverBudget:
                pass  # the connection is ending (enhance_your_calm): read no more
            except ConnectionClosingError:
                pass  # finished: the connection is going away
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                if core.error is None:
                    err = ConnectionLostError("the connection was lost")
                    err.__cause__ = exc
                    core.fail(err)
        except Exception as exc:
            core.fault(exc, "the connection's reader")
        finally:
            core.reader_stopped.set()

    async def _read_loop(self) -> None:
        """``run``'s loop: returns after a protocol error or a transport fault; raises
        ``_PeerClosed`` at EOF, and trio's resource errors as they come."""
        core = self._core
        state = self._h2
        buffer = state.incoming_buffer
        # DATA payloads reach the streams as views of the frame buffer; before the
        # bytes under them are overwritten, the views still queued become copies.
        buffer.views = True
        buffer.on_reuse = self._reuse_buffer
        buffer.on_release = self._release_buffer
        read = _buffer_reader(core.transport, state)
        # At most this many frames go through h2 per step; between steps the
        # handlers and loopy run, so a large read is answered while it is still
        # being parsed and the two peers work in parallel instead of in turns.
        max_frames = core.config.max_frames_per_read
        cbuf = self._cbuf
        # The keepalive task's news (any bytes are a sign of life), kept only when
        # a keepalive task runs: a client without keepalive_time pays nothing.
        now = trio.lowlevel.current_clock().current_time if core.tracks_reads else None
        # The last read was short: drop the buffer once it is parsed (at first too:
        # bytes a server sniffed, ``prime``, may be all a quiet client sends).
        small = True
        # The read waits for the socket before it reads (a trio.SocketStream whose
        # frame buffer was dropped: the usual case between small reads): that wait
        # is the step's schedule point and cancellation check.
        waits_first = isinstance(core.transport, trio.SocketStream)
        # Cancelled when loopy ends: nothing more can be written, so the
        # connection is over even if the peer never closes its side.
        with core.reader_scope:
            while True:
                if not (waits_first and buffer.idle and cbuf.gate_open):
                    # A schedule point before any other read: a read that succeeds
                    # at once has none of its own. Where the read waits for the
                    # socket first, a checkpoint here would be one more trip
                    # through trio's scheduler for each read, for nothing
                    # (docs/wakeups.md, "Task steps per unary call").
                    await cbuf.wait_unthrottled()
                if not state.input_pending:  # else frames are still buffered: no read
                    try:
                        n = await read()
                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                        raise
                    except Exception as exc:
                        core.fault(exc, "the transport's receive_some")
                        return
                    if not n:
                        raise _PeerClosed
                    small = n < SMALL_READ
                    if now is not None:
                        core.last_read = now()
                if cbuf.finished:
                    # The connection failed (ConnectionCore.fail: loopy's write broke,
                    # a keepalive timeout, a close) while the read waited, or while
                    # the reader was runnable at its schedule point: what came is for
                    # a connection that is over. Dispatching it would admit requests
                    # whose handlers start on a finished control buffer.
                    return
                before = state.pending_bytes()
                try:
                    events = state.receive_data(b"", max_frames)
                except h2.exceptions.ProtocolError as exc:
                    self._dispatch(state.events_before_error)
                    # h2 queued GOAWAY(code); let loopy flush it, then stop.
                    code = getattr(exc, "error_code", ErrorCodes.PROTOCOL_ERROR)
                    error = RemoteProtocolError(str(exc) or type(exc).__name__, error_code=code)
                    error.__cause__ = exc
                    self._put(CloseConnection())
                    core.fail(error, finish=False)
                    return
                announced = self._dispatch(events)
                if not announced and state.pending_bytes() > before:
                    self._put(PeerResponse("auto"))
                if small and not state.input_pending:
                    buffer.release()

    def _prune_holders(self, holders: set[H2Stream], buf: object) -> None:
        """Forget the holders that no longer queue a view of ``buf``.

        A frame buffer carries hundreds of small messages before it is reused,
        and a finished stream held here would stay alive, with all it refers to,
        until then (benchmarks/results/2026-12-06.md, "What kept the client's
        objects alive"). Run when the set has doubled since the last pruning, so
        the cost is constant per view handed out.
        """
        assert isinstance(buf, bytearray)
        holders.difference_update([s for s in holders if not s.reader_holds_view(buf)])
        self._prune_at = max(_MIN_PRUNE, 2 * len(holders))

    def _reuse_buffer(self, buf: bytearray) -> bytearray | None:
        """The frame buffer's ``on_reuse``: ``buf`` is about to be overwritten.

        While a stream still queues views of it (its application is a read or two
        behind), the reader goes on in a second buffer of the same size, kept for
        that (allocated the first time), if that one's views are all read; only if
        both hold unread views are those of ``buf`` copied, and ``buf`` reused.
        So a connection holds at most two buffers, and a byte is copied twice only
        when its application falls more than a buffer behind.
        """
        holders = self._holders
        self._prune_at = _MIN_PRUNE
        if not _views_live(buf, holders):
            holders.clear()
            return None
        spare = self._spare
        if spare is None or len(spare) != len(buf):
            spare = bytearray(len(buf))
            self._spare_holders.clear()
        elif _views_live(spare, self._spare_holders):
            for stream in holders:
                stream.reader_detach(buf)
            holders.clear()
            return None
        self._spare = buf
        self._holders, self._spare_holders = self._spare_holders, holders
        self._holders.clear()
        return spare

    def _release_buffer(self, buf: bytearray) -> None:
        # The frame buffer's ``on_release``: a quiet connection keeps no buffer, not
        # even one pinned by views (they become copies).
        spare = self._spare
        if spare is not None:
            for stream in self._spare_holders:
                stream.reader_detach(spare)
        for stream in self._holders:
            stream.reader_detach(buf)
        self._holders.clear()
        self._spare_holders.clear()
        self._prune_at = _MIN_PRUNE
        self._spare = None

    def _on_eof(self) -> None:
        core = self._core
        core.eof_seen = True
        if core.error is not None:
            return
        goaway = core.goaway_received
        if goaway is not None and goaway.error_code != ErrorCodes.NO_ERROR:
            # The peer said why it ends the connection: that is the error.
            core.fail(core.goaway_error())
        elif not core.streams_by_id and (goaway is not None or core.closing):
            # A clean end: nothing was open, as both sides agreed.
            exc = ConnectionClosingError("the connection was closed")
            if goaway is not None:
                exc.__cause__ = core.goaway_error()
            core.fail(exc)
        else:
            core.fail(ConnectionLostError("the peer closed the connection"))

    def _dispatch(self, events: list[h2.events.Event]) -> bool:
        """Hand each event to its handler (``_HANDLERS``, by the event's class).
        Returns True if a handler put a PeerResponse."""
        announced = False
        handlers = _HANDLERS
        for ev in events:
            handler = handlers.get(type(ev))
            if handler is None:
                handler = _handler_of(type(ev))
            if handler(self, ev):
                announced = True
        return announced

    # -- the handlers, one per event class: each returns True if it put a PeerResponse

    def _on_data(self, ev: DataReceived) -> bool:
        """DATA: to its stream, then the connection window and the BDP sample."""
        n = ev.flow_controlled_length
        stream = self._streams.get(ev.stream_id)
        if stream is not None:
            # First: the bytes count against the inbound budget before the
            # connection window is given back (_flow.py). A view of the frame buffer
            # is kept as a view only if the stream's application has read all before
            # it (else it is copied now, once: that application may stay behind for a
            # window, longer than the buffer can wait); its holder is then remembered.
            data = ev.data
            if stream.reader_deliver_data(data, n):
                holders = self._holders
                if len(holders) >= self._prune_at:
                    self._prune_holders(holders, memoryview(data).obj)
                holders.add(stream)
        if not n and ev.stream_ended is None:
            self._flood("empty_data")  # RFC 9113 allows it; costs us a frame
        inc = self._in_flow.on_data(n)
        if inc:
            self._put(WindowUpdate(None, inc))
        bdp = self._bdp
        if bdp is not None and bdp.add(n):
            flushed = self._in_flow.reset()
            if flushed:
                self._put(WindowUpdate(None, flushed))
            self._put(Ping(BDP_PING_DATA))
        return False

    def _on_stream_ended(self, ev: StreamEnded) -> bool:
        """The peer's END_STREAM; the stream closes if our side is over too."""
        stream = self._streams.get(ev.stream_id)
        if stream is not None:
            # A body short of (or over) its content-length never gets here:
            # _h2fixes ends that stream as malformed (RFC 9113 §8.1.1).
            stream.reader_deliver_end()
            if stream.core_output_over:
                self._core.stream_closed(stream)
        return False

    def _on_request_received(self, ev: RequestReceived) -> bool:
        """A new request (server): admitted, or refused with RST_STREAM(REFUSED_STREAM)."""
        if self._on_request(ev):
            self._flood("refused_streams")
            return True
        return False

    def _on_response_received(self, ev: ResponseReceived) -> bool:
        """The final response headers (client)."""
        stream = self._streams.get(ev.stream_id)
        if stream is not None:
            stream.reader_deliver_headers(list(ev.headers))
        return False

    def _on_trailers_received(self, ev: TrailersReceived) -> bool:
        stream = self._streams.get(ev.stream_id)
        if stream is not None:
            stream.reader_deliver_trailers(list(ev.headers))
        return False

    def _on_informational_received(self, ev: InformationalResponseReceived) -> bool:
        """A 1xx (client side): kept apart from the final response; h2 resets a
        stream past _h2state.MAX_INFORMATIONAL of them."""
        stream = self._streams.get(ev.stream_id)
        if stream is not None:
            stream.reader_deliver_informational(list(ev.headers))
        return False

    def _on_window_updated(self, ev: WindowUpdated) -> bool:
        if ev.delta is not None and ev.delta < SMALL_WINDOW_UPDATE:
            self._small_updates += 1
            if (
                self._small_updates
                > SMALL_UPDATES_PER_FRAME * self._core.loopy.stream_frames_written
            ):
                self._flood("window_updates")
        sid = ev.stream_id
        self._window_opened(WindowKind.STREAM if sid else WindowKind.CONNECTION, sid)
        return False

    def _on_ping_received(self, ev: PingReceived) -> bool:
        self._put(PeerResponse("ping-ack"))  # the ACK first, as grpc-go
        if self._cbuf.throttled > 1:
            # An earlier answer is still unwritten: PINGs faster than loopy answers
            # them (nghttp2 counts such queued ACKs, its max_outbound_ack). A BDP
            # probe, one per round trip, finds the previous ACK long written.
            self._flood("pings")
        if self._enforcer is not None:
            self._police_ping()
        return True

    def _on_ping_ack_received(self, ev: PingAckReceived) -> bool:
        core = self._core
        self._ping_acks += 1
        if self._ping_acks > core.pings_sent:
            # An ACK of no PING of ours (each is answered once): ignored, and counted.
            self._flood("ping_acks")
        elif ev.ping_data == BDP_PING_DATA and self._bdp is not None:
            self._on_bdp_ack()
        elif ev.ping_data == DRAIN_PING_DATA:
            core.on_drain_ping_ack()
        return False

    def _on_stream_reset(self, ev: h2.events.StreamReset) -> bool:
        """RST_STREAM from the peer, or one h2 answered a stream error with."""
        announced = False
        if not ev.remote_reset:
            self._put(PeerResponse("rst"))  # h2 answered with RST_STREAM
            announced = True
            self._flood("stream_errors")
        self._close_reset_stream(ev)
        return announced

    def _on_remote_settings_changed(self, ev: RemoteSettingsChanged) -> bool:
        self._put(PeerResponse("settings-ack"))
        self._flood("settings")
        self._apply_settings(ev)
        return True

    def _on_settings_acknowledged(self, ev: SettingsAcknowledged) -> bool:
        if not ev.changed_settings:
            # An ACK of no SETTINGS of ours: h2 reports the settings the acknowledged
            # SETTINGS carried, and each of ours carries one at least (h2's first its
            # initial values, ours a window). Go's x/net and nghttp2 end the
            # connection (PROTOCOL_ERROR).
            self._flood("settings_acks")
        self._core.settings_acked = True
        return False

    def _on_priority_frame(self, ev: PriorityFrameReceived) -> bool:
        self._flood("priority")  # RFC 9113 §5.3.2 deprecates it; we ignore it
        return False

    def _on_ignored_frame(self, ev: IgnoredFrameReceived) -> bool:
        """ALTSVC, unknown frame types, empty CONTINUATIONs: work for nothing
        (docs/security.md, "Floods")."""
        core = self._core
        if ev.kind == "priority_updates" and not core.client_side:
            # A browser may reprioritize the requests it made (RFC 9218 §7.1): one
            # per stream the client opened is free.
            self._priority_updates += 1
            if self._priority_updates > core.streams_opened:
                self._flood(ev.kind)
        else:
            self._flood(ev.kind)
        return False

    def _ignore(self, ev: h2.events.Event) -> bool:
        """Events that need nothing from us (PriorityUpdated,
        AlternativeServiceAvailable, ...)."""
        return False

    def _flood(self, kind: str) -> None:
        """The peer sent a frame that makes us work for nothing (``kind``: what, in
        the GOAWAY's debug data ``too_many_<kind>``): take a token from its flood
        budget; once it is empty, queue GOAWAY(ENHANCE_YOUR_CALM) and CloseConnection,
        fail the connection and stop reading (raises ``_OverBudget``)."""
        if self._floods.take(trio.current_time()):
            return
        config = self._core.config
        self._core.enhance_your_calm(
            f"too_many_{kind}".encode(),
            f"the peer sent {kind.replace('_', ' ')} faster than flood_rate="
            f"{config.flood_rate:g}/s after a burst of flood_burst={config.flood_burst}"
            " (frames that do nothing for the application: docs/security.md)",
        )
        raise _OverBudget

    def _police_ping(self) -> None:
        """Server: apply the ping policy to a client PING; past the third strike,
        queue GOAWAY(ENHANCE_YOUR_CALM, ``too_many_pings``) and CloseConnection,
        fail the connection and stop reading (raises ``_OverBudget``)."""
        core = self._core
        enforcer = self._enforcer
        assert enforcer is not None
        if not enforcer.on_ping(
            trio.current_time(),
            streams_open=bool(self._streams),
            writes=core.loopy.stream_frames_written,
        ):
            return
        core.enhance_your_calm(
            TOO_MANY_PINGS,
            f"the client pinged too often ({enforcer.strikes} strikes; TransportConfig"
            ".ping_min_interval, ping_permit_without_stream)",
        )
        raise _OverBudget

    def _refuse_request(self, ev: h2.events.RequestReceived) -> bool:
        """Refuse a new stream (no ``admit``): RST_STREAM(REFUSED_STREAM), put as a
        ``PeerResponse``. h2 already decoded the header block, so HPACK stays in sync."""
        return self._core.refuse_stream(ev.stream_id)

    def _close_reset_stream(self, ev: h2.events.StreamReset) -> None:
        core = self._core
        resets = self._resets
        if ev.remote_reset and resets is not None and not resets.take(trio.current_time()):
            core.enhance_your_calm(
                b"too_many_resets",
                f"the client reset streams faster than reset_rate={core.config.reset_rate:g}/s"
                f" after a burst of reset_burst={core.config.reset_burst}",
            )
            raise _OverBudget
        stream = core.streams_by_id.get(ev.stream_id)
        if stream is None:
            return
        code = ev.error_code if ev.error_code is not None else ErrorCodes.NO_ERROR
        if ev.remote_reset and code == ErrorCodes.NO_ERROR and stream.core_peer_ended:
            # The peer finished its side and does not want the rest of ours
            # (RFC 9113 §8.1): what we received stays readable. A server's handler is
            # cancelled all the same (cancel_reason "peer-reset", NO_ERROR): nothing
            # it sends can arrive now, and like any reset stream it must not go on to
            # write after its connection ended as if the stream were still there.
            core.cancel_handler(stream, "peer-reset", code)
            self._put(StreamDone(stream))
            core.stream_closed(stream)
            return
        if ev.remote_reset and code == ErrorCodes.REFUSED_STREAM:
            error: StreamResetError = StreamRefusedError(ev.stream_id, code, remote=True)
        else:
            error = StreamResetError(ev.stream_id, code, remote=ev.remote_reset)
        # Cancel the handler first: a handler parked on the stream then sees
        # Cancelled (as documented), not a StreamResetError logged as its failure.
        core.cancel_handler(stream, "peer-reset" if ev.remote_reset else "stream-error", code)
        stream.core_fail(error)
        self._put(StreamDone(stream))
        core.stream_closed(stream)

    def _apply_settings(self, ev: h2.events.RemoteSettingsChanged) -> None:
        core = self._core
        changed = ev.changed_settings
        mcs = changed.get(SettingCodes.MAX_CONCURRENT_STREAMS)
        if mcs is not None and core.client_side:
            core.set_peer_max_streams(mcs.new_value)
        elif core.client_side and not core.settings_received.is_set():
            # The first SETTINGS omitted it: no limit (RFC 9113 §6.5.2).
            core.set_peer_max_streams(2**31)
        iws = changed.get(SettingCodes.INITIAL_WINDOW_SIZE)
        if iws is not None and (iws.original_value is None or iws.new_value > iws.original_value):
            self._window_opened(WindowKind.ALL_STREAMS)
        core.settings_received.set()

    def _window_opened(self, kind: WindowKind, stream_id: int = 0) -> None:
        core = self._core
        if not core.loopy.parked_on_windows:
            # Nobody waits: the next frame loopy writes reads the window h2 now
            # holds. (A bulk transfer's WINDOW_UPDATEs arrive long before its
            # window runs out: each woke loopy for nothing.)
            return
        item = WindowOpened(kind, stream_id)
        opened = core.windows_opened
        if item not in opened:
            opened.add(item)
            self._put(item)

    def _on_bdp_ack(self) -> None:
        core = self._core
        bdp = self._bdp
        assert bdp is not None
        window = bdp.calculate(trio.current_time())
        if not window:
            return
        core.initial_window_size = window
        inc = self._in_flow.new_limit(window)
        if inc:
            self._put(WindowUpdate(None, inc))
        # The SETTINGS change itself credits every open stream with the difference
        # (RFC 9113 §6.9.2: the peer adjusts all its stream windows), so the streams
        # only record their new limit; a WINDOW_UPDATE as well would credit them
        # twice and let a peer buffer twice the growth in an unread stream. grpc-go's
        # updateFlowControl does the same (inFlow.newLimit sends nothing).
        for stream in core.streams_by_id.values():
            stream.reader_new_window_limit(window)
        self._put(Settings(((SettingCodes.INITIAL_WINDOW_SIZE, window),)))

    def _on_goaway(self, ev: GoAwayReceived) -> bool:
        """GOAWAY from the peer (the module docstring says what it does)."""
        core = self._core
        previous = core.goaway_received
        core.goaway_received = ev
        core.not_accepting.set()
        if core.client_side and previous is None and core.goaway_error().too_many_pings:
            log.warning(
                "the server sent GOAWAY(ENHANCE_YOUR_CALM, too_many_pings): this client"
                " pings too often for its policy; double keepalive_time for the next"
                " connection (docs/keepalive-and-shutdown.md)"
            )
        if not core.client_side:
            # The client opens no more streams: close once the open ones are done
            # (h2spec generic/3.8/1, http2/7/1 expect an idle connection to close).
            core.check_idle()
            return False
        upper = previous.last_stream_id if previous is not None else 2**31
        for sid, stream in list(core.streams_by_id.items()):
            if ev.last_stream_id < sid <= upper:
                # RFC 9113 §6.8: the server never processed it: safe to retry elsewhere.
                refused = StreamRefusedError(sid, ErrorCodes.REFUSED_STREAM, remote=True)
                refused.__cause__ = core.goaway_error()
                stream.core_fail(refused)
                self._put(StreamDone(stream))
                core.stream_closed(stream)
        core.wake_quota_waiters()  # waiters in open_stream must now fail
        core.check_idle()
        return False


_Handler = Callable[[Reader, Any], bool]

#: The reader's handler of each h2 event class (``Reader._dispatch``): each returns
#: True if it put a PeerResponse. A class missing here is looked up once through its
#: bases (``_handler_of``) and added. shared: the readers of every connection add to
#: it (one thread; each addition is synchronous and always the same for a class).
_HANDLERS: dict[type[h2.events.Event], _Handler] = {
    DataReceived: Reader._on_data,
    StreamEnded: Reader._on_stream_ended,
    RequestReceived: Reader._on_request_received,
    ResponseReceived: Reader._on_response_received,
    TrailersReceived: Reader._on_trailers_received,
    WindowUpdated: Reader._on_window_updated,
    PingReceived: Reader._on_ping_received,
    PingAckReceived: Reader._on_ping_ack_received,
    StreamReset: Reader._on_stream_reset,
    InformationalResponseReceived: Reader._on_informational_received,
    RemoteSettingsChanged: Reader._on_remote_settings_changed,
    SettingsAcknowledged: Reader._on_settings_acknowledged,
    GoAwayReceived: Reader._on_goaway,
    PriorityFrameReceived: Reader._on_priority_frame,
    IgnoredFrameReceived: Reader._on_ignored_frame,
}


def _handler_of(cls: type[h2.events.Event]) -> _Handler:
    """The handler of an event class missing from ``_HANDLERS``: that of its nearest
    base listed there (as a class pattern would match it), else ``Reader._ignore``;
    added to the table."""
    handler = next(
        (_HANDLERS[base] for base in cls.__mro__[1:] if base in _HANDLERS), Reader._ignore
    )
    _HANDLERS[cls] = handler
    return handler
