"""ConnectionCore: the state one HTTP/2 connection shares between its tasks, and the reader.

Theory of operation
-------------------
A connection runs in one nursery holding (``docs/architecture.md`` has the picture):

- the **reader** (``run_reader``): waits on the control buffer's throttle gate, reads
  from the transport, feeds ``h2``, and dispatches the events to streams. It never
  waits on a stream, and never writes: frames h2 queues by itself in response to the
  peer (PING ack, SETTINGS ack, RST_STREAM) are announced to loopy as throttled
  ``PeerResponse`` items, so a peer that floods them without reading is stopped by
  the gate instead of being buffered without bound (window items are not throttled;
  ``_items.py`` says why and what bounds them);
- **loopy** (``_loopy.py``): the only task that frames bytes and writes;
- the **stream tasks**: handlers on a server, the user's tasks on a client.

Ownership: fields are tagged with the task that owns them. Everything runs on one
thread and every shared mutation happens between two awaits.

Errors are sticky: the first error that ends the connection is kept in ``error``;
every stream still open fails with it, the control buffer is finished with it (so
queued stream starts are orphaned with a clear error), and every later call fails
fast with a ``ConnectionClosingError`` whose ``__cause__`` is that error.

A GOAWAY from the peer (``_on_goaway``) fails the client streams above its last
stream id with ``StreamRefusedError`` (caused by a ``GoAwayError``) and makes every
later ``open_stream`` raise a ``GoAwayError``; if its code is not NO_ERROR, the
connection's ``error`` becomes that ``GoAwayError`` when the connection ends (``fail``),
so the code and debug data reach the user. ``docs/errors.md`` has the tables.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable

import h2.events
import h2.exceptions
import trio
from h2.errors import ErrorCodes
from h2.settings import SettingCodes

from ._config import RFC_DEFAULT_WINDOW, TransportConfig
from ._controlbuf import ControlBuffer
from ._exceptions import (
    ConnectionClosingError,
    ConnectionLostError,
    GoAwayError,
    H2ProtocolError,
    RemoteProtocolError,
    StreamRefusedError,
    StreamResetError,
)
from ._flow import BDP_PING_DATA, BdpEstimator, ConnectionInFlow
from ._h2state import GoAwayReceived, H2State, make_h2_state
from ._items import (
    CloseConnection,
    ControlItem,
    Data,
    GoAway,
    Headers,
    PeerResponse,
    Ping,
    ResetStream,
    Settings,
    StreamDone,
    WindowOpened,
    WindowUpdate,
)
from ._loopy import Loopy
from ._messages import CancelKind, CancelReason, ConnectionInfo, connection_info
from ._stream import H2Stream, HeaderList

__all__ = ["ConnectionCore", "Handler"]

log = logging.getLogger("trio_h2t")
# hpack logs at DEBUG per header; with its logger at NOTSET each call walks up to
# the root logger once per level change (the result is cached). Importing us leaves
# logging alone (no process-wide side effect); docs/architecture.md tells
# applications how to pin the "hpack" logger themselves.

Handler = Callable[[H2Stream], Awaitable[None]]

#: What a server answers when its handler raised (or returned) before sending headers.
INTERNAL_ERROR_BODY = b"internal server error\n"
INTERNAL_ERROR_RESPONSE = (
    (b":status", b"500"),
    (b"content-type", b"text/plain; charset=utf-8"),
    (b"content-length", str(len(INTERNAL_ERROR_BODY)).encode()),
)

#: Seconds a cancelled (or overrunning) graceful close waits, shielded, for loopy to
#: close the connection before failing it outright (trio's ``aclose`` rule: graceful
#: under a bounded, shielded deadline, then forceful).
FORCE_CLOSE_WAIT = 1.0
#: Streams a server accepts before the client has acknowledged our SETTINGS (h2's
#: and httpcore's default limit), if our own limit is lower.
PRE_ACK_STREAM_LIMIT = 100


class _PeerClosed(Exception):
    """The transport reached EOF."""


def _buffer_reader(
    transport: trio.abc.ReceiveStream, size: int
) -> Callable[[], Awaitable[bytes | bytearray | memoryview]]:
    """A read function for the reader task.

    On a ``trio.SocketStream`` it reads into one reused buffer of ``size`` bytes
    (``recv_into``) and returns a view of it, valid until the next read: h2 copies
    what it is given into its own frame buffer at once, so nothing keeps the view.
    Any other stream is read with ``receive_some(size)``. Errors follow
    ``trio.abc.ReceiveStream``: BrokenResourceError for the network,
    ClosedResourceError if the stream was closed.
    """
    if not isinstance(transport, trio.SocketStream):
        return functools.partial(transport.receive_some, size)
    sock = transport.socket
    buffer = bytearray(size)
    view = memoryview(buffer)

    async def read() -> memoryview:
        try:
            n = await sock.recv_into(buffer)
        except trio.ClosedResourceError:
            raise
        except OSError as exc:
            if sock.fileno() == -1:
                raise trio.ClosedResourceError("the socket was closed") from exc
            raise trio.BrokenResourceError(f"socket read failed: {exc}") from exc
        return view[:n]

    return read


def _content_length(headers: HeaderList) -> int | None:
    """The request's content-length: None if absent, -1 if invalid."""
    value = None
    for name, v in headers:
        if name == b"content-length":
            if value is not None and v != value:
                return -1  # RFC 9110 §8.6: differing values make it invalid
            value = v
    if value is None:
        return None
    return int(value) if value.isdigit() else -1


class ConnectionCore:
    """Shared state of one connection (client or server). Built by client/server code."""

    def __init__(
        self,
        transport: trio.abc.Stream,
        *,
        client_side: bool,
        config: TransportConfig,
        handler: Handler | None = None,
    ) -> None:
        self.config = config  # immutable after init
        self.client_side = client_side  # immutable after init
        self.transport = transport  # reads: reader; writes: loopy
        self.h2: H2State = make_h2_state(
            client_side=client_side,
            max_concurrent_streams=config.max_concurrent_streams,
            initial_window_size=config.initial_window_size,
            max_header_list_size=config.max_header_list_size,
        )
        self.cbuf = ControlBuffer(throttle_limit=config.throttle_limit)
        self.loopy = Loopy(self, transport)
        self._handler = handler  # immutable after init (server only)
        self.handler_nursery: trio.Nursery | None = None  # set once by the server

        #: Stream window for new streams (grows with the BDP estimate). Owner: reader.
        self.initial_window_size = config.initial_window_size
        # owner: reader (loopy adds client streams when it writes their HEADERS).
        self._streams: dict[int, H2Stream] = {}
        self._in_flow = ConnectionInFlow(config.connection_window_size, config.window_update_ratio)
        # shared: the WindowOpened stream ids queued and not yet handled; the reader
        # adds (and queues an item only for an id not in it), loopy discards when it
        # handles one. Bounds those unthrottled items by the streams, whatever the
        # number of WINDOW_UPDATE frames the peer sends.
        self.windows_opened: set[int] = set()
        self._bdp = (
            BdpEstimator(config.initial_window_size, config.max_window_size)
            if config.dynamic_window
            else None
        )

        # -- lifecycle, shared: set once each
        self.error: BaseException | None = None  # sticky: why the connection ended
        self.goaway_received: GoAwayReceived | None = None  # owner: reader
        self.goaway_sent_last_id: int | None = None  # owner: loopy
        self.closing = False  # graceful close started: no new streams from us
        self._idle = trio.Event()  # set when no stream is open while closing
        self.settings_received = trio.Event()  # the peer's first SETTINGS arrived
        # Set once the connection is over: by fail(), or (after a protocol error,
        # once the GOAWAY is flushed) when loopy exits.
        self.done = trio.Event()
        self.eof_seen = False  # owner: reader: the peer closed its side
        # shared: entered once by the reader around its loop; cancelled by
        # run_loopy on exit (nothing more can be written, so stop reading).
        self._reader_scope = trio.CancelScope()

        # -- stream quota (client): how many more streams the peer allows us
        self._peer_max_streams = 100  # grpc-go's default until the first SETTINGS
        self._open_outbound = 0  # shared: +1 in open_stream, -1 when a stream closes
        self._quota_lot = trio.lowlevel.ParkingLot()
        self._open_inbound = 0  # owner: reader (server)
        # shared: +1 by the reader when it starts a handler, -1 when the handler
        # task ends; a graceful close waits for it to reach 0.
        self._handlers_running = 0
        self._settings_acked = False  # owner: reader: the peer acked our SETTINGS
        # shared: set once, by the first stream task that asks (connection_info()).
        self._info: ConnectionInfo | None = None

    # ------------------------------------------------------------------ start-up

    async def send_preface(self) -> None:
        """Write the preface, our SETTINGS and the connection WINDOW_UPDATE.

        Written directly, before loopy starts (as grpc-go does). Checkpoint: always.
        """
        self.h2.initiate_connection()
        extra = self.config.connection_window_size - RFC_DEFAULT_WINDOW
        if extra > 0:
            self.h2.increment_flow_control_window(extra)
        await self.transport.send_all(self.h2.data_to_send())

    # ------------------------------------------------------------------ reader

    async def run_reader(self) -> None:
        """Read until EOF, a protocol error, or the connection is finished (loopy ended).

        Never raises for a connection ending (that becomes ``self.error``); raises
        only for bugs. Checkpoint: always.
        """
        read = _buffer_reader(self.transport, self.config.read_buffer_size)
        # At most this many frames go through h2 per step; between steps the
        # handlers and loopy run, so a large read is answered while it is still
        # being parsed and the two peers work in parallel instead of in turns.
        max_frames = self.config.max_frames_per_read
        state = self.h2
        cbuf = self.cbuf
        try:
            # Cancelled when loopy ends: nothing more can be written, so the
            # connection is over even if the peer never closes its side.
            with self._reader_scope:
                while True:
                    await cbuf.wait_unthrottled()  # always a schedule point
                    data: bytes | bytearray | memoryview
                    if state.input_pending:
                        data = b""  # frames are still buffered: no read
                    else:
                        try:
                            data = await read()
                        except (trio.BrokenResourceError, trio.ClosedResourceError):
                            raise
                        except Exception as exc:
                            self.transport_fault(exc, "receive_some")
                            return
                        if not data:
                            raise _PeerClosed
                    before = state.pending_bytes()
                    try:
                        events = state.receive_data(data, max_frames)
                    except h2.exceptions.ProtocolError as exc:
                        self._dispatch(state.events_before_error)
                        # h2 queued GOAWAY(code); let loopy flush it, then stop.
                        code = getattr(exc, "error_code", ErrorCodes.PROTOCOL_ERROR)
                        error = RemoteProtocolError(str(exc) or type(exc).__name__, error_code=code)
                        error.__cause__ = exc
                        self._put(CloseConnection())
                        self.fail(error, finish=False)
                        return
                    announced = self._dispatch(events)
                    if not announced and state.pending_bytes() > before:
                        self._put(PeerResponse("auto"))
        except _PeerClosed:
            self._on_eof()
        except ConnectionClosingError:
            pass  # finished: the connection is going away
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            if self.error is None:
                err = ConnectionLostError("the connection was lost")
                err.__cause__ = exc
                self.fail(err)

    def _on_eof(self) -> None:
        self.eof_seen = True
        if self.error is not None:
            return
        goaway = self.goaway_received
        if goaway is not None and goaway.error_code != ErrorCodes.NO_ERROR:
            # The peer said why it ends the connection: that is the error.
            self.fail(self.goaway_error())
        elif not self._streams and (goaway is not None or self.closing):
            # A clean end: nothing was open, as both sides agreed.
            exc = ConnectionClosingError("the connection was closed")
            if goaway is not None:
                exc.__cause__ = self.goaway_error()
            self.fail(exc)
        else:
            self.fail(ConnectionLostError("the peer closed the connection"))

    def _dispatch(self, events: list[h2.events.Event]) -> bool:
        """Hand events to streams. Returns True if a PeerResponse was put."""
        announced = False
        streams = self._streams
        for ev in events:
            kind = type(ev)
            if kind is h2.events.DataReceived:
                assert isinstance(ev, h2.events.DataReceived)
                n = ev.flow_controlled_length
                inc = self._in_flow.on_data(n)
                if inc:
                    self._put(WindowUpdate(None, inc))
                if self._bdp is not None and self._bdp.add(n):
                    flushed = self._in_flow.reset()
                    if flushed:
                        self._put(WindowUpdate(None, flushed))
                    self._put(Ping(BDP_PING_DATA))
                stream = streams.get(ev.stream_id)
                if stream is not None:
                    stream._body_received += len(ev.data)
                    stream._on_data(ev.data, n)
            elif kind is h2.events.RequestReceived:
                assert isinstance(ev, h2.events.RequestReceived)
                announced |= self._on_request(ev)
            elif kind is h2.events.ResponseReceived:
                assert isinstance(ev, h2.events.ResponseReceived)
                stream = streams.get(ev.stream_id)
                if stream is not None:
                    stream._on_headers(list(ev.headers))
            elif kind is h2.events.TrailersReceived:
                assert isinstance(ev, h2.events.TrailersReceived)
                stream = streams.get(ev.stream_id)
                if stream is not None:
                    stream._on_trailers(list(ev.headers))
            elif kind is h2.events.StreamEnded:
                assert isinstance(ev, h2.events.StreamEnded)
                stream = streams.get(ev.stream_id)
                if stream is not None:
                    expected = stream._content_length
                    if expected is not None and expected != stream._body_received:
                        self._malformed(stream)  # h2 checks only END_STREAM on DATA
                        announced = True
                        continue
                    stream._on_end()
                    if stream._out_done:
                        self.stream_closed(stream)
            elif kind is h2.events.StreamReset:
                assert isinstance(ev, h2.events.StreamReset)
                if not ev.remote_reset:
                    self._put(PeerResponse("rst"))  # h2 answered with RST_STREAM
                    announced = True
                self._on_stream_reset(ev)
            elif kind is h2.events.WindowUpdated:
                assert isinstance(ev, h2.events.WindowUpdated)
                self._window_opened(ev.stream_id)
            elif kind is h2.events.RemoteSettingsChanged:
                assert isinstance(ev, h2.events.RemoteSettingsChanged)
                self._put(PeerResponse("settings-ack"))
                announced = True
                self._on_settings(ev)
            elif kind is h2.events.PingReceived:
                self._put(PeerResponse("ping-ack"))
                announced = True
            elif kind is h2.events.PingAckReceived:
                assert isinstance(ev, h2.events.PingAckReceived)
                if ev.ping_data == BDP_PING_DATA and self._bdp is not None:
                    self._on_bdp_ack()
            elif kind is h2.events.SettingsAcknowledged:
                self._settings_acked = True
            elif kind is GoAwayReceived:
                assert isinstance(ev, GoAwayReceived)
                self._on_goaway(ev)
            # Others (PriorityUpdated, InformationalResponse,
            # UnknownFrameReceived, ...) need nothing from us.
        return announced

    def _inbound_stream_limit(self) -> int:
        # RFC 9113 §6.5.3: a peer may open streams before it has seen our SETTINGS,
        # under the initial "unlimited"; until it acknowledges them, refusing at our
        # limit would fail requests that were legal when sent (nghttp -m 50 and h2load
        # do not retry REFUSED_STREAM). Tolerate at least h2's default of 100 until then.
        limit = self.config.max_concurrent_streams
        if not self._settings_acked:
            limit = max(limit, PRE_ACK_STREAM_LIMIT)
        return limit

    def _on_request(self, ev: h2.events.RequestReceived) -> bool:
        sid = ev.stream_id
        assert ev.headers is not None
        if (
            self.closing
            or self._handler is None
            or self.handler_nursery is None
            or self._open_inbound >= self._inbound_stream_limit()
        ):
            # Refused before any handler sees it; h2 already decoded the header
            # block, so HPACK stays in sync, and the connection lives on.
            self.h2.reset_stream(sid, ErrorCodes.REFUSED_STREAM)
            self._put(PeerResponse("rst"))
            return True
        headers = list(ev.headers)
        content_length = _content_length(headers)
        if content_length == -1 or (ev.stream_ended and content_length not in (None, 0)):
            # RFC 9113 §8.1.1: malformed (a bad content-length, or one that a request
            # ending with its HEADERS cannot match): stream error PROTOCOL_ERROR.
            self.h2.reset_stream(sid, ErrorCodes.PROTOCOL_ERROR)
            self._put(PeerResponse("rst"))
            return True
        stream = H2Stream._create(self, stream_id=sid, headers=headers)
        stream._content_length = content_length
        # Created here, not in the handler task: a reset that arrives before the
        # handler first runs must still cancel it.
        stream._cancel_scope = trio.CancelScope()
        streams = self._streams
        streams[sid] = stream
        self._open_inbound += 1
        self._handlers_running += 1
        self.handler_nursery.start_soon(self._run_handler, stream, name=f"h2-stream-{sid}")
        return False

    def _malformed(self, stream: H2Stream) -> None:
        """RFC 9113 §8.1.1: a malformed request is a stream error PROTOCOL_ERROR."""
        code = ErrorCodes.PROTOCOL_ERROR
        self.h2.reset_stream(stream.stream_id, code)
        self._put(PeerResponse("rst"))
        stream._reset_sent = True
        self._cancel_handler(stream, "stream-error", code)
        stream._fail(StreamResetError(stream.stream_id, code, remote=False))
        self._put(StreamDone(stream))
        self.stream_closed(stream)

    async def _run_handler(self, stream: H2Stream) -> None:
        handler = self._handler
        assert handler is not None
        scope = stream._cancel_scope
        assert scope is not None
        raised = False
        try:
            with scope:
                await handler(stream)
        except (StreamResetError, ConnectionClosingError, ConnectionLostError) as exc:
            raised = True
            if stream._error is None:
                self._handler_failed(stream)
            else:
                # The stream failed under the handler (the peer reset it, or the
                # connection ended) before it could be cancelled: not its bug.
                log.debug("handler for stream %d stopped: %r", stream.stream_id, exc)
        except Exception:
            raised = True
            self._handler_failed(stream)
        finally:
            self._handlers_running -= 1
            if not raised and not scope.cancelled_caught and self._answer_500(stream):
                log.warning(
                    "handler for stream %d returned without a response; answered 500",
                    stream.stream_id,
                )
            if not stream._closed:
                if stream._end_queued and stream._error is None:
                    # The response is complete: close the request side too
                    # (RST_STREAM(NO_ERROR) after the response, if still open).
                    if stream._out_done:
                        if not stream._recv_ended:
                            self.reset_stream(stream, ErrorCodes.NO_ERROR, None)
                    else:
                        stream._rst_on_end = True
                else:
                    if not raised and not scope.cancelled_caught:
                        log.warning(
                            "handler for stream %d returned without ending its response;"
                            " resetting it",
                            stream.stream_id,
                        )
                    code = (
                        ErrorCodes.CANCEL if scope.cancelled_caught else ErrorCodes.INTERNAL_ERROR
                    )
                    stream.reset(code)
            self._check_idle()

    def _handler_failed(self, stream: H2Stream) -> None:
        # Called from an except clause: log.exception records the handler's traceback.
        if self._answer_500(stream):
            log.exception("handler for stream %d raised; answered 500", stream.stream_id)
        else:
            log.exception("handler for stream %d raised; resetting it", stream.stream_id)
            stream.reset(ErrorCodes.INTERNAL_ERROR)

    def _answer_500(self, stream: H2Stream) -> bool:
        """Queue a whole 500 response if the handler sent no headers. Synchronous.

        The body says only that the server failed: no traceback goes on the wire.
        Returns False (nothing queued) if headers were sent, or the stream or the
        connection is over; the caller then resets the stream.
        """
        if stream._headers_sent or stream._closed or stream._error is not None:
            return False
        # RFC 9110 §9.3.2: a response to HEAD carries no content.
        head = (b":method", b"HEAD") in (stream._headers or ())
        try:
            stream._put_output(Headers(stream, INTERNAL_ERROR_RESPONSE, head))
        except ConnectionClosingError:
            return False
        stream._headers_sent = True
        if not head:
            stream._put_output(Data(stream, INTERNAL_ERROR_BODY, True, None))
        stream._end_queued = True
        return True

    def _on_stream_reset(self, ev: h2.events.StreamReset) -> None:
        stream = self._streams.get(ev.stream_id)
        if stream is None:
            return
        code = ev.error_code if ev.error_code is not None else ErrorCodes.NO_ERROR
        if ev.remote_reset and code == ErrorCodes.NO_ERROR and stream._recv_ended:
            # The peer finished its side and does not want the rest of ours
            # (RFC 9113 §8.1): what we received stays readable.
            self._put(StreamDone(stream))
            stream._out_done = True
            self.stream_closed(stream)
            return
        if ev.remote_reset and code == ErrorCodes.REFUSED_STREAM:
            error: StreamResetError = StreamRefusedError(ev.stream_id, code, remote=True)
        else:
            error = StreamResetError(ev.stream_id, code, remote=ev.remote_reset)
        # Cancel the handler first: a handler parked on the stream then sees
        # Cancelled (as documented), not a StreamResetError logged as its failure.
        self._cancel_handler(stream, "peer-reset" if ev.remote_reset else "stream-error", code)
        stream._fail(error)
        self._put(StreamDone(stream))
        self.stream_closed(stream)

    def _on_settings(self, ev: h2.events.RemoteSettingsChanged) -> None:
        changed = ev.changed_settings
        mcs = changed.get(SettingCodes.MAX_CONCURRENT_STREAMS)
        if mcs is not None and self.client_side:
            self._peer_max_streams = mcs.new_value
            self._quota_lot.unpark_all()
        elif self.client_side and not self.settings_received.is_set():
            # The first SETTINGS omitted it: no limit (RFC 9113 §6.5.2).
            self._peer_max_streams = 2**31
            self._quota_lot.unpark_all()
        iws = changed.get(SettingCodes.INITIAL_WINDOW_SIZE)
        if iws is not None and (iws.original_value is None or iws.new_value > iws.original_value):
            self._window_opened(-1)
        self.settings_received.set()

    def _window_opened(self, stream_id: int) -> None:
        if stream_id not in self.windows_opened:
            self.windows_opened.add(stream_id)
            self._put(WindowOpened(stream_id))

    def _on_bdp_ack(self) -> None:
        assert self._bdp is not None
        window = self._bdp.calculate(trio.current_time())
        if not window:
            return
        self.initial_window_size = window
        inc = self._in_flow.new_limit(window)
        if inc:
            self._put(WindowUpdate(None, inc))
        # The SETTINGS change itself credits every open stream with the difference
        # (RFC 9113 §6.9.2: the peer adjusts all its stream windows), so the streams
        # only record their new limit; a WINDOW_UPDATE as well would credit them
        # twice and let a peer buffer twice the growth in an unread stream. grpc-go's
        # updateFlowControl does the same (inFlow.newLimit sends nothing).
        for stream in self._streams.values():
            stream._in_flow.new_limit(window)
        self._put(Settings(((SettingCodes.INITIAL_WINDOW_SIZE, window),)))

    def _on_goaway(self, ev: GoAwayReceived) -> None:
        previous = self.goaway_received
        self.goaway_received = ev
        if not self.client_side:
            # The client opens no more streams: close once the open ones are done
            # (h2spec generic/3.8/1, http2/7/1 expect an idle connection to close).
            self._check_idle()
            return
        upper = previous.last_stream_id if previous is not None else 2**31
        for sid, stream in list(self._streams.items()):
            if ev.last_stream_id < sid <= upper:
                # RFC 9113 §6.8: the server never processed it: safe to retry elsewhere.
                refused = StreamRefusedError(sid, ErrorCodes.REFUSED_STREAM, remote=True)
                refused.__cause__ = self.goaway_error()
                stream._fail(refused)
                self._put(StreamDone(stream))
                self.stream_closed(stream)
        self._quota_lot.unpark_all()  # waiters in open_stream must now fail
        self._check_idle()

    # ------------------------------------------------------------------ streams

    def _put(self, item: ControlItem) -> None:
        # After finish the connection is going away: nothing more is owed.
        with contextlib.suppress(ConnectionClosingError):
            self.cbuf.put(item)

    def _cancel_handler(self, stream: H2Stream, kind: CancelKind, code: int | None) -> None:
        """Cancel a server stream's handler, recording why (the first reason wins)."""
        scope = stream._cancel_scope
        if scope is None:
            return  # a client stream: its task is the user's, not ours to cancel
        if stream._cancel_reason is None:
            stream._cancel_reason = CancelReason._make(kind, code)
        scope.cancel()

    def connection_info(self) -> ConnectionInfo:
        """The transport's addresses and TLS state, computed on the first call."""
        info = self._info
        if info is None:
            info = self._info = connection_info(self.transport)
        return info

    def find_stream(self, stream_id: int) -> H2Stream | None:
        return self._streams.get(stream_id)

    def register_client_stream(self, stream: H2Stream, stream_id: int) -> None:
        """Loopy wrote the HEADERS of a client stream: it now has an id."""
        stream.stream_id = stream_id
        self._streams[stream_id] = stream

    def stream_closed(self, stream: H2Stream) -> None:
        """Both directions are over, or the stream was reset. Idempotent."""
        if stream._closed:
            return
        stream._closed = True
        stream._in_flow.release()
        stream._wake()
        if self._streams.pop(stream.stream_id, None) is not None or stream.stream_id == 0:
            if self.client_side:
                self._open_outbound -= 1
                if self._quota_lot:
                    self._quota_lot.unpark()
            else:
                self._open_inbound -= 1
        # Every close path comes here, so h2's stream table is pruned here (amortised
        # O(1)); h2 itself would only prune while counting streams, which we don't.
        self.h2.prune_closed_streams(stream.stream_id)
        self._check_idle()

    def _check_idle(self) -> None:
        # Idle = no stream open at the protocol level *and* no handler still running
        # (a handler may finish its work after its stream closed). Only meaningful
        # once closing, or after the peer's GOAWAY.
        if self._streams or self._handlers_running:
            return
        if self.closing or self.goaway_received is not None:
            self._idle.set()
            self._close_if_done_after_goaway()

    def _close_if_done_after_goaway(self) -> None:
        # Server side: after the client's GOAWAY, the connection ends with its last
        # stream and handler: answer with our own GOAWAY, flush, stop.
        if self.client_side or self.closing or self.goaway_received is None:
            return
        self.closing = True
        self._put(GoAway(ErrorCodes.NO_ERROR))
        self._put(CloseConnection())

    def local_end_written(self, stream: H2Stream) -> None:
        """Loopy wrote our END_STREAM for ``stream``."""
        if stream._recv_ended or stream._reset_sent:
            self.stream_closed(stream)

    def reset_stream(self, stream: H2Stream, code: int, error: BaseException | None) -> None:
        """Reset ``stream`` from a stream task: fail it now, RST_STREAM via loopy."""
        if stream._closed:
            return
        if error is not None:
            stream._fail(error)
        # RST_STREAM first: closing the stream may make the connection idle, and a
        # server that answered a client's GOAWAY then queues GOAWAY + CloseConnection,
        # behind which loopy would never write this RST (the client would wait on the
        # stream until the connection dropped).
        self._put(ResetStream(stream, code))
        self.stream_closed(stream)

    def send_window_update(self, stream: H2Stream, increment: int) -> None:
        self._put(WindowUpdate(stream, increment))

    # -- client stream quota --------------------------------------------------------

    def goaway_error(self) -> GoAwayError:
        """A fresh GoAwayError with the fields of the peer's (latest) GOAWAY."""
        ev = self.goaway_received
        assert ev is not None
        return GoAwayError(ev.error_code, ev.last_stream_id, ev.debug_data)

    def refuse_new_stream_error(self) -> BaseException | None:
        """Why a new stream may not start now, or None.

        This side closing comes first (ConnectionClosingError: you closed it), then
        the peer's GOAWAY (GoAwayError, retryable), then any other end of the
        connection (ConnectionClosingError caused by ``error``).
        """
        if self.closing:
            if self.error is not None:
                return self.closing_error()
            return ConnectionClosingError("the connection is closing; retry elsewhere")
        if self.goaway_received is not None:
            exc = self.goaway_error()
            if self.error is not None and not isinstance(self.error, GoAwayError):
                exc.__cause__ = self.error
            return exc
        if self.error is not None:
            return self.closing_error()
        return None

    async def acquire_stream_quota(self) -> None:
        """Wait until the peer's MAX_CONCURRENT_STREAMS admits one more stream.

        Checkpoint: always. On cancellation: no quota is held.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        parked = False
        while True:
            error = self.refuse_new_stream_error()
            if error is not None:
                raise error
            if self._open_outbound < self._peer_max_streams:
                break
            parked = True
            await self._quota_lot.park()
        self._open_outbound += 1
        if self._open_outbound < self._peer_max_streams and self._quota_lot:
            self._quota_lot.unpark()  # chain: the limit may have grown by more than one
        if not parked:
            await trio.lowlevel.cancel_shielded_checkpoint()

    def release_stream_quota(self) -> None:
        self._open_outbound -= 1
        if self._quota_lot:
            self._quota_lot.unpark()

    # -- loopy callbacks ---------------------------------------------------------------

    def on_ping_written(self, data: bytes) -> None:
        if data == BDP_PING_DATA and self._bdp is not None:
            self._bdp.timesnap(trio.current_time())

    def on_goaway_written(self, last_stream_id: int) -> None:
        self.goaway_sent_last_id = last_stream_id

    # ------------------------------------------------------------------ shutdown

    def closing_error(self) -> ConnectionClosingError:
        exc = ConnectionClosingError("the connection is closed")
        exc.__cause__ = self.error
        return exc

    def fail(self, error: BaseException, *, finish: bool = True) -> None:
        """End the connection because of ``error``. Synchronous and idempotent.

        Every open stream fails with a ConnectionLostError / ConnectionClosingError
        caused by ``error``; with ``finish`` the control buffer is finished too, so
        queued stream starts are orphaned and nothing more is written. (The reader
        passes ``finish=False`` after a protocol error so loopy can still flush h2's
        GOAWAY; loopy finishes the buffer, and sets ``done``, on its way out.)
        """
        if self.error is None:
            goaway = self.goaway_received
            if (
                goaway is not None
                and goaway.error_code != ErrorCodes.NO_ERROR
                and not isinstance(error, GoAwayError | H2ProtocolError)
            ):
                # The peer's GOAWAY said why the connection ends: keep its code
                # visible (the ending itself, a lost link or our close, is the cause).
                goaway_error = self.goaway_error()
                goaway_error.__cause__ = error
                error = goaway_error
            self.error = error
        kind: CancelKind = "shutdown"
        code = None
        if isinstance(error, trio.BrokenResourceError):
            kind = "connection-lost"
            if isinstance(error, H2ProtocolError):
                code = error.error_code
        for stream in list(self._streams.values()):
            if isinstance(error, trio.BrokenResourceError):
                stream_error: BaseException = ConnectionLostError("the connection was lost")
            else:
                stream_error = ConnectionClosingError("the connection was closed")
            stream_error.__cause__ = error
            self._cancel_handler(stream, kind, code)  # first, as in _on_stream_reset
            stream._fail(stream_error)
            self.stream_closed(stream)
        self._quota_lot.unpark_all()
        self._idle.set()
        self.settings_received.set()
        if finish:
            self.cbuf.finish(error)
            # Without finish, loopy is still to flush the GOAWAY: ``done`` waits for
            # it (run_loopy sets it), or whoever waits on ``done`` would tear the
            # connection down before the GOAWAY is written.
            self.done.set()

    def transport_fault(self, exc: Exception, method: str) -> None:
        """End the connection because the transport's ``method`` raised ``exc``, an
        exception outside trio's resource-error family (a broken Stream wrapper).

        Only this connection ends: its streams fail with ConnectionLostError caused
        (through the connection's error) by ``exc``. The first such fault is logged
        at ERROR with its traceback on the ``trio_h2t`` logger; a later one (the
        other task hitting the same broken transport) only at DEBUG.
        """
        if self.error is None:
            log.error("the transport's %s raised; closing the connection", method, exc_info=exc)
        else:
            log.debug("the transport's %s raised again: %r", method, exc)
        err = ConnectionLostError(f"the transport's {method} raised {type(exc).__name__}")
        err.__cause__ = exc
        self.fail(err)

    async def watch_handshake(self) -> None:
        """Fail the connection if the peer's first SETTINGS has not arrived within
        ``config.handshake_timeout`` seconds; return as soon as it has (or the
        connection ended: ``fail`` sets ``settings_received`` too).

        Run by the server in the connection nursery, so an idle socket whose peer
        never completes the handshake is not held forever. Checkpoint: always.
        On cancellation: returns at once, failing nothing.
        """
        timeout = self.config.handshake_timeout
        with trio.move_on_after(timeout):
            await self.settings_received.wait()
        if not self.settings_received.is_set():
            self.fail(
                ConnectionLostError(
                    f"the client did not complete the HTTP/2 handshake within {timeout:g} s"
                )
            )

    async def run_loopy(self) -> None:
        """Run loopy; turn how it ends into the connection's fate. Checkpoint: always."""
        try:
            await self.loopy.run()
        except ConnectionClosingError:
            pass
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            err = ConnectionLostError("writing to the connection failed")
            err.__cause__ = exc
            self.fail(err)
        except Exception as exc:
            if not self.loopy.io_failed:
                raise  # not from the transport: a bug in loopy, left to surface
            self.transport_fault(exc, "send_all")
        finally:
            try:
                if self.error is None:
                    self.fail(ConnectionClosingError("the connection was closed"))
                else:
                    self.cbuf.finish(self.error)
                # Loopy's batch after a CloseConnection was never handed out: orphan
                # it (this task is the consumer), so every item is taken or orphaned.
                self.cbuf.discard_batch()
            finally:
                self._reader_scope.cancel()  # the connection is over: stop reading
                self.done.set()

    async def graceful_close(self, *, timeout: float | None = None) -> None:  # noqa: ASYNC109
        """Send GOAWAY, let open streams finish (up to ``timeout``), then stop loopy.

        Checkpoint: always. On cancellation (or if loopy has not stopped in time): the
        drain is cut short, not the close: loopy is told to close now (open streams
        fail, the GOAWAY goes out), waited for under a shield for at most
        ``FORCE_CLOSE_WAIT`` seconds, and the connection is failed if it is still
        not over (``tests/test_cancellation.py``).
        """
        if timeout is None:
            timeout = self.config.graceful_close_timeout
        try:
            if not self.closing and self.error is None:
                self.closing = True
                last = 0 if self.client_side else None
                self._put(GoAway(ErrorCodes.NO_ERROR, last_stream_id=last))
                self._check_idle()
            with trio.move_on_after(timeout):
                await self._idle.wait()
            if self.error is None:
                self._put(CloseConnection())
            with trio.move_on_after(max(timeout, 1.0)):
                await self.done.wait()
        finally:
            if not self.done.is_set():
                if self.error is None:
                    self._put(CloseConnection())
                with trio.CancelScope(shield=True), trio.move_on_after(FORCE_CLOSE_WAIT):
                    await self.done.wait()
                if not self.done.is_set():
                    self.fail(ConnectionClosingError("the connection was closed"))

    @property
    def open_streams(self) -> int:
        return len(self._streams)

    def streams(self) -> list[H2Stream]:
        return list(self._streams.values())
