"""The speed layer: cheaper versions of h2 code paths, with the same behaviour.

``_h2fixes.py`` says *what* our h2 does; this module only makes it cheaper. Each
override here names the h2 (or correctness-layer) function it replaces, and must
give the same events, state transitions, frames and errors: ``tests/test_h2state.py``
compares the rewrites with h2 byte for byte and event for event,
``tests/test_h2_layers.py`` runs every correctness patch with and without this
layer, and ``tests/conformance`` runs against a server with it switched off
(``make_h2_state(speed_layer=False)``).

1. **The header paths are h2's most expensive per-stream code.** Received blocks
   are validated in one pass (``_headers.validate_received``, the same verdicts as
   the chain of generators in h2's ``utilities.py`` ``validate_headers``, whose
   comment calls it "somewhat expensive"), and sent blocks are framed straight into
   h2's buffer (``send_headers``) instead of through hyperframe objects, with h2's
   state transitions unchanged. HPACK remembers whole blocks that leave its table as
   it was (``_h2.hpack``).
2. **One object per stream, not three.** ``FastStream`` is also its own state
   machine and inbound window manager, and is built directly by
   ``_begin_new_stream``. Its transitions are our table (``_h2/streamstates.py``), in h2's
   terms (``_H2_TRANSITIONS``): h2's own table is not read. Its inbound window is our
   ``_h2/windows.py`` ``ReceiveWindow`` (``H2ReceiveWindow``), and so is the
   connection's: h2's ``WindowManager`` is not used.
3. **Closed streams in an array.** How closed streams ended is kept in an array of
   at most 1 MiB that grows with the stream ids (``_ClosedStreams``) instead of
   h2's dict of the last 65,536, which reaches 7.9 MB per connection
   (``tests/test_h2state.py::test_closed_stream_record_is_bounded_and_small``).
4. **No per-frame logging.** h2's ``_receive_frame`` trace-logs an eager
   ``repr(frame)`` per frame and ``_begin_new_stream`` three debug lines per stream,
   even with logging off.

Owner: as ``_h2fixes.FixedConnection``.
"""

from __future__ import annotations

import array
from collections.abc import Callable
from typing import Any

import h2.config
import h2.connection
import h2.events
import h2.stream
from h2.connection import AllowedStreamIDs, ConnectionInputs
from h2.errors import ErrorCodes
from h2.exceptions import (
    FlowControlError,
    ProtocolError,
    StreamClosedError,
    StreamIDTooLowError,
    TooManyStreamsError,
)
from h2.stream import StreamClosedBy, StreamInputs, StreamState
from h2.utilities import authority_from_headers, extract_method_header, is_informational_response

from ._h2.frames import append_headers
from ._h2.hpack import CachingDecoder, CachingEncoder
from ._h2.streamstates import (
    CLOSES,
    EFFECTS,
    REPORTS,
    TRANSITIONS,
    StreamClosed,
    StreamEvent,
    StreamStateError,
)
from ._h2.windows import ReceiveWindow
from ._h2fixes import FixedConnection, FixedStream, InboundData, _Malformed
from ._headers import validate_received

__all__ = ["FastConnection", "FastStream", "H2ReceiveWindow"]

#: Where a DATA frame leaves both state machines as they were (h2's connection
#: table: RECV_DATA; our stream table, ``_h2/streamstates.py``: RECV_DATA ->
#: DATA_RECEIVED).
_CLIENT_OPEN = h2.connection.ConnectionState.CLIENT_OPEN
_SERVER_OPEN = h2.connection.ConnectionState.SERVER_OPEN
_STREAM_OPEN = h2.stream.StreamState.OPEN
_HALF_CLOSED_LOCAL = h2.stream.StreamState.HALF_CLOSED_LOCAL
_DataReceived = h2.events.DataReceived
_new_object = object.__new__


# ---------------------------------------------------------------- stream states in h2's terms

_Effect = Callable[[Any], StreamEvent | None]
#: A row of our table in h2's terms: the new state, how it closed the stream (h2's
#: StreamClosedBy) or None, the effect or None, the event class it reports
#: regardless of flags or None.
_Row = tuple[StreamState, StreamClosedBy | None, _Effect | None, type[Any] | None]


def _h2_transitions() -> dict[tuple[StreamState, StreamInputs], _Row]:
    """Our table (``_h2/streamstates.py``), keyed by h2's enums. Inputs h2 has no
    member for (PRIORITY, which h2 never feeds a stream) are left out."""
    table: dict[tuple[StreamState, StreamInputs], _Row] = {}
    for (state, input_), (new_state, action) in TRANSITIONS.items():
        h2_input = StreamInputs.__members__.get(input_.name)
        if h2_input is None:
            continue
        closed_by = effect = report = None
        if action is not None:
            closed_by = CLOSES.get(action)
            effect = EFFECTS.get(action)
            report = REPORTS.get(action)
        table[(StreamState(state), h2_input)] = (
            StreamState(new_state),
            None if closed_by is None else StreamClosedBy[closed_by.name],
            effect,
            None if report is None else _H2_EVENT_CLASSES[report][0],
        )
    return table


#: Each of our stream events as h2's class, and whether h2 builds it with the
#: stream id (``H2StreamStateMachine``'s effects); PUSHED_STREAM_RECEIVED, which
#: names the parent stream instead, is ``_pushed_stream_received``.
_H2_EVENT_CLASSES: dict[StreamEvent, tuple[type[Any], bool]] = {
    StreamEvent.REQUEST_SENT: (h2.events._RequestSent, False),
    StreamEvent.RESPONSE_SENT: (h2.events._ResponseSent, False),
    StreamEvent.TRAILERS_SENT: (h2.events._TrailersSent, False),
    StreamEvent.PUSHED_REQUEST_SENT: (h2.events._PushedRequestSent, False),
    StreamEvent.REQUEST_RECEIVED: (h2.events.RequestReceived, True),
    StreamEvent.RESPONSE_RECEIVED: (h2.events.ResponseReceived, True),
    StreamEvent.TRAILERS_RECEIVED: (h2.events.TrailersReceived, True),
    StreamEvent.INFORMATIONAL_RESPONSE_RECEIVED: (h2.events.InformationalResponseReceived, True),
    StreamEvent.DATA_RECEIVED: (h2.events.DataReceived, True),
    StreamEvent.WINDOW_UPDATED: (h2.events.WindowUpdated, True),
    StreamEvent.STREAM_ENDED: (h2.events.StreamEnded, True),
    StreamEvent.STREAM_RESET: (h2.events.StreamReset, True),
    StreamEvent.ALTERNATIVE_SERVICE_AVAILABLE: (h2.events.AlternativeServiceAvailable, False),
}


def _pushed_stream_received(stream_id: int) -> h2.events.Event:
    event = h2.events.PushedStreamReceived()
    event.parent_stream_id = stream_id
    return event


_H2_TRANSITIONS = _h2_transitions()


def _h2_error(exc: StreamStateError) -> ProtocolError:
    """Our refusal as h2 raises it: ``StreamClosedError`` (with the reset h2 hangs on
    it when the frame itself closed the stream) or ``ProtocolError``."""
    if isinstance(exc, StreamClosed):
        error = StreamClosedError(exc.stream_id)
        if exc.reset:
            error._events = [
                h2.events.StreamReset(
                    stream_id=exc.stream_id,
                    error_code=ErrorCodes.STREAM_CLOSED,
                    remote_reset=False,
                )
            ]
        return error
    return ProtocolError(*exc.args)


_STREAM_CLOSED = StreamState.CLOSED


class H2ReceiveWindow(ReceiveWindow):
    """Our inbound window (``_h2/windows.py``) where h2 keeps its ``WindowManager``:
    the same calls and figures (h2's stream and connection code call
    ``window_consumed``, ``window_opened``, ``process_bytes`` and read or set
    ``current_window_size`` and ``max_window_size``), its errors raised as h2's
    ``FlowControlError`` (FLOW_CONTROL_ERROR too), which h2's ``receive_data``
    answers with GOAWAY (``tests/test_h2_guard.py`` checks h2 calls nothing else on
    it). Owner: as the stream or connection that holds it."""

    __slots__ = ()
    flow_control_error = FlowControlError


class FastStream(FixedStream, H2ReceiveWindow):
    """``FixedStream`` as one object, validating received blocks in one pass.

    h2's ``H2Stream.__init__`` builds an ``H2StreamStateMachine`` and a
    ``WindowManager`` per stream; here the stream is both its state machine and its
    inbound window, our ``_h2/windows.py`` ``ReceiveWindow`` in h2's place
    (``state_machine`` and ``_inbound_window_manager`` return ``self``). As a state
    machine it keeps h2's state and flags (h2's code reads them) and runs our table
    (``process_input``). The pieces share one attribute, ``stream_id`` (always the
    same value), so h2's own code runs unchanged on the merged object
    (``tests/test_h2state.py::test_merged_stream_object_behaves_as_h2s_three``
    compares it with the stream built as h2 builds it, h2's ``WindowManager``
    included).
    """

    def __init__(
        self,
        stream_id: int,
        config: h2.config.H2Configuration,
        inbound_window_size: int,
        outbound_window_size: int,
    ) -> None:
        # h2.stream.H2Stream.__init__, minus building the two helper objects, and
        # the flags of h2's H2StreamStateMachine.__init__ (streamstates.StreamFlags).
        self.stream_id = stream_id
        self.state = StreamState.IDLE
        self.client: bool | None = None
        self.headers_sent: bool | None = None
        self.trailers_sent: bool | None = None
        self.headers_received: bool | None = None
        self.trailers_received: bool | None = None
        self.stream_closed_by: StreamClosedBy | None = None
        ReceiveWindow.__init__(self, inbound_window_size)
        self.max_outbound_frame_size: int | None = None
        self.request_method: bytes | None = None
        self.outbound_flow_control_window = outbound_window_size
        self._expected_content_length: int | None = None
        self._actual_content_length = 0
        self._authority: bytes | None = None
        self.config = config

    @property
    def state_machine(self) -> FastStream:  # type: ignore[override]
        return self

    @property
    def _inbound_window_manager(self) -> FastStream:  # type: ignore[override]
        return self

    def process_input(self, input_: StreamInputs) -> list[Any]:
        """h2's ``H2StreamStateMachine.process_input`` on our table: the same
        states, events and errors (``tests/test_h2_streamstates.py``)."""
        old_state = self.state
        try:
            row = _H2_TRANSITIONS[(old_state, input_)]
        except KeyError:
            self.state = _STREAM_CLOSED
            raise ProtocolError(f"Invalid input {input_} in state {old_state}") from None
        self.state, closed_by, effect, report = row
        if closed_by is not None:
            self.stream_closed_by = closed_by
        if effect is None:
            return [] if report is None else [report(stream_id=self.stream_id)]
        try:
            event = effect(self)
        except StreamStateError as exc:
            self.state = _STREAM_CLOSED
            raise _h2_error(exc) from None
        if event is None:
            return []
        entry = _H2_EVENT_CLASSES.get(event)
        if entry is None:
            return [_pushed_stream_received(self.stream_id)]
        cls, with_id = entry
        return [cls(stream_id=self.stream_id)] if with_id else [cls()]

    def _validated(self, headers: Any, events: list[Any], header_encoding: Any) -> Any:
        # FixedStream's (h2's ``_process_received_headers`` pipeline) in one pass:
        # same verdicts, in cost only different. A configuration we do not use
        # (decoded ``str`` headers, inbound normalisation or no validation) takes
        # h2's own path.
        # The two options are read where h2's ``config.py`` ``_BooleanConfigOption``
        # keeps them (``"_" + name``; ``tests/test_h2_guard.py`` pins the names).
        config: Any = self.config
        if (
            header_encoding
            or config._normalize_inbound_headers
            or not config._validate_inbound_headers
        ):
            return super()._validated(headers, events, header_encoding)
        kind = type(events[0])
        try:
            validate_received(
                headers,
                response=kind is h2.events.ResponseReceived
                or kind is h2.events.InformationalResponseReceived,
                trailer=kind is h2.events.TrailersReceived,
            )
        except ProtocolError as exc:
            self.process_input(StreamInputs.SEND_RST_STREAM)
            raise _Malformed(self.stream_id) from exc
        return headers


#: ``_ClosedStreams`` codes: 0 = not recorded, else ``StreamClosedBy`` value + 1.
_CLOSED_BY: tuple[h2.stream.StreamClosedBy | None, ...] = (
    None,
    *sorted(h2.stream.StreamClosedBy, key=lambda member: member.value),
)


class _ClosedStreams:
    """How recent streams closed: the part of a dict h2 uses for ``_closed_streams``.

    h2 keeps an ``OrderedDict`` of the last 65,536 closed streams to answer late
    frames on them (ignore-and-reset after a reset, connection error after
    END_STREAM): 7.9 MB per connection side once full (tracemalloc). This is one
    ``array`` of 8-byte slots, slot ``stream_id % len`` holding ``stream_id << 3 |
    code``. It starts at 64 slots and doubles while stream ids outgrow it, up to
    2**17 (1 MiB), so a connection that opened n streams holds at most about 32 n
    bytes. Once full, a stream is remembered until a stream id 2**17 higher
    reuses its slot (about the last 65,536 streams of each parity); it is never
    confused with another (the slot keeps the whole id). Sequential ids write
    sequential slots. Owner: as ``FixedConnection``.
    """

    __slots__ = ("_mask", "_slots")
    _MAX_SLOTS = 1 << 17

    def __init__(self) -> None:
        self._slots = array.array("Q", [0]) * 64
        self._mask = 63

    def __setitem__(self, stream_id: int, closed_by: h2.stream.StreamClosedBy | None) -> None:
        if stream_id > self._mask and len(self._slots) < self._MAX_SLOTS:
            self._grow(stream_id)
        code = 0 if closed_by is None else closed_by.value + 1
        self._slots[stream_id & self._mask] = stream_id << 3 | code

    def _grow(self, stream_id: int) -> None:
        size = len(self._slots)
        while size <= stream_id and size < self._MAX_SLOTS:
            size *= 2
        slots = array.array("Q", [0]) * size
        mask = size - 1
        for value in self._slots:
            if value:  # two ids apart by a multiple of the new size shared an old slot
                slots[(value >> 3) & mask] = value
        self._slots, self._mask = slots, mask

    def _code(self, stream_id: int) -> int:
        value = self._slots[stream_id & self._mask]
        return value & 7 if value >> 3 == stream_id else 0

    def __contains__(self, stream_id: object) -> bool:
        return isinstance(stream_id, int) and self._code(stream_id) != 0

    def __getitem__(self, stream_id: int) -> h2.stream.StreamClosedBy | None:
        code = self._code(stream_id)
        if not code:
            raise KeyError(stream_id)
        return _CLOSED_BY[code]


def _check_can_open(conn: FixedConnection, stream_id: int) -> None:
    """``FixedConnection.send_headers``'s checks before a new stream: not one
    ``prune_closed_streams`` forgot, and h2's limit check with our count of open
    streams (0, patch 2), which refuses a stream only when the peer allows none
    (``tests/test_h2_connection.py`` found it missing from the speed layer)."""
    conn._check_not_forgotten(stream_id)
    if conn.remote_settings.max_concurrent_streams < 1:
        raise TooManyStreamsError("Max outbound streams is 0, 0 open")


class FastConnection(FixedConnection):
    """``FixedConnection`` with the speed rewrites 1-4 (module docstring)."""

    _trace_frames = False
    _stream_class = FastStream

    def __init__(self, config: h2.config.H2Configuration) -> None:
        super().__init__(config)
        # Nothing is encoded or decoded yet: swap in the block-remembering HPACK pair.
        self.encoder = CachingEncoder()
        self.decoder = CachingDecoder()
        self.decoder.max_header_list_size = self.DEFAULT_MAX_HEADER_LIST_SIZE
        self._closed_streams = _ClosedStreams()  # type: ignore[assignment]
        # Nothing is received yet either: our inbound window in place of h2's.
        self._inbound_flow_control_window_manager = H2ReceiveWindow(  # type: ignore[assignment]
            self.local_settings.initial_window_size
        )

    def _begin_new_stream(self, stream_id: int, allowed_ids: Any) -> Any:
        # h2's ``_begin_new_stream``, building ``FastStream`` directly, without its
        # three debug logs.
        outbound = self._stream_id_is_outbound(stream_id)
        highest = self.highest_outbound_stream_id if outbound else self.highest_inbound_stream_id
        if stream_id <= highest:
            raise StreamIDTooLowError(stream_id, highest)
        if (stream_id % 2) != int(allowed_ids):
            raise ProtocolError("Invalid stream ID for peer.")
        stream = FastStream(
            stream_id,
            config=self.config,
            inbound_window_size=self.local_settings.initial_window_size,
            outbound_window_size=self.remote_settings.initial_window_size,
        )
        stream.max_outbound_frame_size = self.max_outbound_frame_size
        self.streams[stream_id] = stream
        if outbound:
            self.highest_outbound_stream_id = stream_id
        else:
            self.highest_inbound_stream_id = stream_id
        return stream

    def _data_event(self, frame: InboundData) -> h2.events.DataReceived | None:
        """``FixedConnection._receive_data_frame`` (h2's), inline for the common
        DATA frame: the connection open, the stream open (or half-closed by us)
        after its headers, both windows large enough, no content-length to check,
        no END_STREAM. The same two window decrements, content-length count and
        ``DataReceived`` event as h2's, without its two state-machine calls (their
        transitions leave both states as they are here) and its debug log; None for
        any other frame, which takes the correctness layer's path, which raises or
        answers as h2 does (``tests/test_inbound.py`` compares the two on random
        frames). ``FixedConnection.receive_data`` calls it for each DATA frame
        before h2's dispatch, which takes the frames it returns None for.
        """
        stream = self.streams.get(frame.stream_id)
        n = frame.flow_controlled_length
        conn_window = self._inbound_flow_control_window_manager
        conn_state = self.state_machine.state
        if (
            type(stream) is not FastStream
            or (stream.state is not _STREAM_OPEN and stream.state is not _HALF_CLOSED_LOCAL)
            or not stream.headers_received
            or stream.current_window_size < n
            or conn_window.current_window_size < n
            or stream._expected_content_length is not None
            or "END_STREAM" in frame.flags
            or (conn_state is not _CLIENT_OPEN and conn_state is not _SERVER_OPEN)
        ):
            return None
        conn_window.current_window_size -= n
        stream.current_window_size -= n
        data = frame.data
        stream._actual_content_length += len(data)
        # h2's event with the fields its own __init__ sets, set here directly
        # (tests/test_h2_guard.py pins the field list).
        event: Any = _new_object(_DataReceived)
        event.stream_id = stream.stream_id
        event.data = data  # a view of the frame buffer, where h2 types bytes
        event.flow_controlled_length = n
        event.stream_ended = None
        built: h2.events.DataReceived = event
        return built

    def send_headers(
        self,
        stream_id: int,
        headers: Any,
        end_stream: bool = False,
        priority_weight: int | None = None,
        priority_depends_on: int | None = None,
        priority_exclusive: bool | None = None,
    ) -> None:
        """``FixedConnection.send_headers`` (h2's and ``FixedStream.send_headers``),
        framed without hyperframe objects.

        Same checks, state transitions and HPACK encoding (the stream state machine,
        trailers needing END_STREAM, informational responses, the stream's authority
        and request method, a forgotten stream being closed), then the block is
        written straight into h2's outbound buffer as one HEADERS frame and as many
        CONTINUATION frames as the peer's SETTINGS_MAX_FRAME_SIZE needs. ``headers``
        must be bytes pairs (we switched h2's outbound normalisation and validation
        off). The framing is the codec's (``_h2.frames.append_headers``).
        Priority information takes h2's own path.
        """
        if (
            priority_weight is not None
            or priority_depends_on is not None
            or (priority_exclusive is not None)
        ):
            super().send_headers(
                stream_id,
                headers,
                end_stream,
                priority_weight,
                priority_depends_on,
                priority_exclusive,
            )
            return
        stream = self.streams.get(stream_id)
        if stream is None:
            _check_can_open(self, stream_id)
        self.state_machine.process_input(ConnectionInputs.SEND_HEADERS)
        if stream is None:
            stream = self._begin_new_stream(stream_id, AllowedStreamIDs(self.config.client_side))
        machine = stream.state_machine
        if not machine.client and is_informational_response(headers):
            if end_stream:
                raise ProtocolError("Cannot set END_STREAM on informational responses.")
            machine.process_input(StreamInputs.SEND_INFORMATIONAL_HEADERS)
        else:
            machine.process_input(StreamInputs.SEND_HEADERS)
        block = self.encoder.encode(headers)
        if end_stream:
            machine.process_input(StreamInputs.SEND_END_STREAM)
        if machine.trailers_sent and not end_stream:
            raise ProtocolError("Trailers must have END_STREAM set.")
        if machine.client and stream._authority is None:
            stream._authority = authority_from_headers(headers)
        method = extract_method_header(headers)
        if method is not None:  # as FixedStream.send_headers: trailers keep the method
            stream.request_method = method

        append_headers(
            self._data_to_send, stream_id, block, self.max_outbound_frame_size, end_stream
        )
