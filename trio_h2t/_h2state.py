"""Our h2 connection: h2's state machine with the three changes a transport needs.

h2 is the protocol core, but three of its behaviours do not fit a multiplexed,
long-lived transport (see ``docs/architecture.md``):

1. **GOAWAY is terminal in h2** (h2 #1181): receiving one moves h2 to CLOSED, clears
   its outbound buffer and makes every later frame on in-flight streams a protocol
   error. We override the GOAWAY receive hook so h2 stays OPEN and simply reports a
   :class:`GoAwayReceived` event; trio_h2t tracks "GOAWAY sent/received, last stream
   id" itself and frames outgoing GOAWAYs itself (``goaway_frame``), never through
   ``close_connection``.
2. **Counting open streams is O(n)** (h2 #1184): every new stream scans every stream.
   trio_h2t enforces SETTINGS_MAX_CONCURRENT_STREAMS itself (clients wait for stream
   quota; servers refuse the excess with REFUSED_STREAM instead of h2's
   connection-killing TooManyStreamsError, hypercorn #335), so both counts report 0
   to h2's internal checks, and closed streams are pruned in amortised O(1)
   (``prune_closed_streams``).
3. **Events are lost on a mid-buffer protocol error**: ``receive_data`` discards the
   events of frames it already processed. ``events_before_error`` keeps them so the
   caller can still dispatch them.
4. **RFC details h2 misses** (found by ``tests/conformance``): the preface must start
   with SETTINGS (§3.4); HPACK failures are COMPRESSION_ERROR (§4.3); DATA after the
   peer's END_STREAM is a connection error STREAM_CLOSED (§5.1); SETTINGS ACK with a
   payload is FRAME_SIZE_ERROR (§6.5); the WINDOW_UPDATE reserved bit is ignored
   (§6.9); a PUSH_PROMISE from a client is a PROTOCOL_ERROR before any decoding
   (§8.4); frames the peer had in flight on a stream we reset are ignored, not
   answered with another RST_STREAM each (§5.1); a frame longer than our
   SETTINGS_MAX_FRAME_SIZE is a FRAME_SIZE_ERROR from its 9-byte header, before its
   payload is buffered (§4.2); on a client, a server whose first 9 bytes are not a
   SETTINGS frame header (an HTTP/1.1 response, an SSH banner) is refused at once,
   quoting them (§3.4).
5. **A malformed message is a stream error** (§8.1.1): h2 raises a
   connection-killing ProtocolError when header validation fails, and
   InvalidBodyLengthError when a body overruns (or, at END_STREAM, falls short of)
   its content-length; our stream subclass closes just that stream and the
   connection answers RST_STREAM(PROTOCOL_ERROR). The same holds for a body on a
   response to HEAD (h2 expects 0 octets) or on a 204/304 response (RFC 9110
   §6.4.1), and for a message ended by HEADERS or trailers short of its
   content-length. A header list over our SETTINGS_MAX_HEADER_LIST_SIZE stays h2's
   connection error ENHANCE_YOUR_CALM: hpack's decoder stops at the field that
   crosses the limit, so the rest of the block never reaches the dynamic table and
   HPACK would desync; decoding on to the end would need our own literal decoder
   (hpack's copies the rest of the block for each literal, quadratic in a 1 MiB
   block), so the connection ends instead.
6. **The header paths are h2's most expensive per-stream code**: received blocks
   are validated in one pass (``_headers.validate_received``, the same verdicts as
   h2's chain of generators), and sent blocks are framed straight into h2's buffer
   (``send_headers``), with h2's state transitions unchanged; HPACK remembers
   whole blocks that leave its table as it was (``_hpack``).
7. **One object per stream, not three**: ``_Stream`` is also its own state machine
   and inbound window manager, and leaves ``streams`` as soon as the transport and
   h2 both closed it (fewer objects for the cyclic collector at high concurrency).
   How closed streams ended is kept in an array of at most 1 MiB that grows with
   the stream ids (``_ClosedStreams``) instead of h2's dict of the last 65,536,
   which reaches 7.9 MB per connection.

Everything else (HPACK, frame parsing, stream states, flow-control windows and their
overrun checks) is h2's. Only loopy pulls bytes out (``data_to_send``).
"""

from __future__ import annotations

import array
import struct
from typing import Any

import h2.config
import h2.connection
import h2.events
import h2.settings
import h2.stream
import h2.windows
from h2.connection import AllowedStreamIDs, ConnectionInputs
from h2.errors import ErrorCodes
from h2.exceptions import (
    FrameDataMissingError,
    FrameTooLargeError,
    InvalidBodyLengthError,
    ProtocolError,
    StreamClosedError,
    StreamIDTooLowError,
)
from h2.frame_buffer import FrameBuffer
from h2.stream import StreamClosedBy, StreamInputs
from h2.utilities import authority_from_headers, extract_method_header, is_informational_response
from hpack.exceptions import HPACKError
from hyperframe.exceptions import InvalidPaddingError
from hyperframe.frame import DataFrame, GoAwayFrame, RstStreamFrame, SettingsFrame

from ._headers import validate_received
from ._hpack import CachingDecoder, CachingEncoder

__all__ = ["GoAwayReceived", "H2State", "goaway_frame"]


class GoAwayReceived(h2.events.Event):
    """The peer sent GOAWAY. h2 stays OPEN; trio_h2t decides what it means."""

    def __init__(self, error_code: int, last_stream_id: int, debug_data: bytes) -> None:
        self.error_code = error_code
        self.last_stream_id = last_stream_id
        self.debug_data = debug_data

    def __repr__(self) -> str:
        return (
            f"<GoAwayReceived error_code:{self.error_code!r}, "
            f"last_stream_id:{self.last_stream_id}, debug_data:{self.debug_data!r}>"
        )


def goaway_frame(last_stream_id: int, error_code: int, debug_data: bytes = b"") -> bytes:
    """Serialise a GOAWAY frame without telling h2 (so h2 stays OPEN)."""
    frame = GoAwayFrame(0)
    frame.last_stream_id = last_stream_id
    frame.error_code = error_code
    frame.additional_data = debug_data
    return bytes(frame.serialize())


_HPACK_FAILURES = (HPACKError, IndexError, TypeError, UnicodeDecodeError)  # h2's list

_HEADERS = 0x1
_SETTINGS = 0x4
_WINDOW_UPDATE = 0x8
_CONTINUATION = 0x9
_END_STREAM = 0x1
_END_HEADERS = 0x4
# A frame header: 24-bit length (as 16 + 8 bits), type, flags, stream id (RFC 9113 §4.1).
_FRAME_HEADER = struct.Struct(">HBBBL")


class _FrameBuffer(FrameBuffer):
    """h2's frame buffer, with RFC 9113 rules hyperframe and h2 get wrong or late.

    - §6.9: the reserved bit of a WINDOW_UPDATE increment MUST be ignored;
      hyperframe range-checks the increment with the bit still set.
    - §6.5: a SETTINGS frame with ACK and a payload is a FRAME_SIZE_ERROR;
      hyperframe's complaint becomes h2's PROTOCOL_ERROR.
    - §4.2: a frame longer than our SETTINGS_MAX_FRAME_SIZE is a FRAME_SIZE_ERROR
      as soon as its 9-byte header is here; h2's ``frame_buffer.py`` checks only
      once the whole payload (up to 16 MiB) is buffered.
    - §3.4 (client side): the server's preface must begin with a SETTINGS frame
      header (type 0x4, stream 0, no ACK); anything else (an HTTP/1.1 response, an
      SSH banner) is refused from its first 9 bytes, quoting them, instead of
      waiting for a "frame" of millions of bytes that never completes.

    All are decided from the raw frame header before h2 parses the frame.
    """

    def __init__(self, server: bool = False) -> None:
        super().__init__(server=server)
        self._first_checked = server  # owner: reader: the server's preface was checked

    def __next__(self) -> Any:
        data = self._data
        if len(data) >= 9:
            length = int.from_bytes(data[0:3], "big")
            kind = data[3]
            if not self._first_checked:
                if kind != _SETTINGS or data[4] & 0x1 or int.from_bytes(data[5:9], "big"):
                    raise ProtocolError(
                        f"the server did not answer with HTTP/2: {bytes(data[:64])!r}"
                    )
                self._first_checked = True
            if length > self.max_frame_size:
                raise FrameTooLargeError(
                    f"frame of {length} bytes, over our SETTINGS_MAX_FRAME_SIZE "
                    f"{self.max_frame_size}"
                )
            if kind == _WINDOW_UPDATE and length == 4 and len(data) >= 13:
                data[9] &= 0x7F
            elif kind == _SETTINGS and data[4] & 0x1 and length:
                raise FrameDataMissingError("SETTINGS with ACK must have no payload")
        return super().__next__()


def _bodiless_status(headers: Any) -> bool:
    for name, value in headers:
        if name == b":status":
            return value in (b"204", b"304")
    return False


class _Malformed(Exception):
    """A header block failed validation: a stream error, not a connection error."""

    def __init__(self, stream_id: int) -> None:
        super().__init__(stream_id)
        self.stream_id = stream_id


class _Stream(  # type: ignore[misc]  # stream_reset: see below
    h2.stream.H2Stream, h2.stream.H2StreamStateMachine, h2.windows.WindowManager
):
    """h2's stream, with a malformed header block made a *stream* error.

    RFC 9113 §8.1.1: malformed requests and responses MUST be treated as a stream
    error PROTOCOL_ERROR; h2 raises a ProtocolError that kills the whole connection.
    The header block is already HPACK-decoded when validation runs, so the
    connection's compression state is intact: close just this stream (as if we had
    sent RST_STREAM) and let ``H2State`` answer with RST_STREAM(PROTOCOL_ERROR).

    One object, not h2's three: the stream is also its own state machine and its
    own inbound window manager (``state_machine`` and ``_inbound_window_manager``
    return ``self``), so each stream side costs two GC-tracked objects fewer. The
    three classes share one attribute, ``stream_id`` (always the same value), and
    one method name, ``stream_reset``, which the state machine only ever calls
    through its transition table (as a plain function), so h2's own code runs
    unchanged on the merged object.
    """

    def __init__(
        self,
        stream_id: int,
        config: h2.config.H2Configuration,
        inbound_window_size: int,
        outbound_window_size: int,
    ) -> None:
        # h2.stream.H2Stream.__init__, minus building the two helper objects.
        h2.stream.H2StreamStateMachine.__init__(self, stream_id)
        h2.windows.WindowManager.__init__(self, inbound_window_size)
        self.max_outbound_frame_size: int | None = None
        self.request_method: bytes | None = None
        self.outbound_flow_control_window = outbound_window_size
        self._expected_content_length: int | None = None
        self._actual_content_length = 0
        self._authority: bytes | None = None
        self.config = config

    @property
    def state_machine(self) -> _Stream:  # type: ignore[override]
        return self

    @property
    def _inbound_window_manager(self) -> _Stream:  # type: ignore[override]
        return self

    def receive_headers(
        self, headers: Any, end_stream: bool, header_encoding: Any
    ) -> tuple[list[Any], list[Any]]:
        """h2's, with the header block checked in one pass (``_headers``).

        Same state transitions, events and errors as ``h2.stream.H2Stream``'s; only
        the validation differs in cost, not in verdict. A configuration we do not
        use (decoded ``str`` headers, inbound normalisation or no validation) takes
        h2's own path.
        """
        config = self.config
        if (
            header_encoding
            or config.normalize_inbound_headers
            or not config.validate_inbound_headers
        ):
            result: tuple[list[Any], list[Any]] = super().receive_headers(
                headers, end_stream, header_encoding
            )
            return result
        machine = self.state_machine
        if is_informational_response(headers):
            if end_stream:
                raise ProtocolError("Cannot set END_STREAM on informational responses")
            events = machine.process_input(StreamInputs.RECV_INFORMATIONAL_HEADERS)
        else:
            events = machine.process_input(StreamInputs.RECV_HEADERS)
        event: Any = events[0]  # one of the four header events
        if end_stream:
            ended = machine.process_input(StreamInputs.RECV_END_STREAM)
            event.stream_ended = ended[0]
            events += ended
        kind = type(event)
        trailer = kind is h2.events.TrailersReceived
        if trailer and not end_stream:
            raise ProtocolError("Trailers must have END_STREAM set")
        if not trailer:
            # Not for trailers: h2 would read them as a new message head and forget
            # the content-length the body must match.
            self._initialize_content_length(headers)
            if kind is h2.events.ResponseReceived and _bodiless_status(headers):
                # RFC 9110 §6.4.1: a 204 or 304 response has no content, whatever
                # its content-length says (a 304's describes the selected
                # representation).
                self._expected_content_length = 0
        expected = self._expected_content_length
        if end_stream and expected is not None and expected != self._actual_content_length:
            # RFC 9113 §8.1.1: the message ends (HEADERS or trailers with END_STREAM)
            # short of its content-length: malformed. (DATA is checked by h2.)
            machine.process_input(StreamInputs.SEND_RST_STREAM)
            raise _Malformed(self.stream_id)
        try:
            validate_received(
                headers,
                response=kind is h2.events.ResponseReceived
                or kind is h2.events.InformationalResponseReceived,
                trailer=trailer,
            )
        except ProtocolError as exc:
            machine.process_input(StreamInputs.SEND_RST_STREAM)
            raise _Malformed(self.stream_id) from exc
        event.headers = headers
        return [], events

    def _process_received_headers(self, *args: Any) -> Any:
        # Still h2's path for PUSH_PROMISE blocks (never accepted: ENABLE_PUSH is 0).
        try:
            return super()._process_received_headers(*args)
        except ProtocolError as exc:
            self.state_machine.process_input(StreamInputs.SEND_RST_STREAM)
            raise _Malformed(self.stream_id) from exc

    def _initialize_content_length(self, headers: Any) -> None:
        try:
            super()._initialize_content_length(headers)
        except ProtocolError as exc:
            self.state_machine.process_input(StreamInputs.SEND_RST_STREAM)
            raise _Malformed(self.stream_id) from exc


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
    sequential slots. Owner: as ``H2State``.
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


class H2State(h2.connection.H2Connection):
    """``h2.connection.H2Connection`` with GOAWAY and stream counting owned by us.

    Owner: the connection's tasks, each using it only between awaits. The reader
    calls ``receive_data``; loopy makes every outbound call and is the only caller
    of ``data_to_send``.
    """

    def __init__(self, config: h2.config.H2Configuration) -> None:
        super().__init__(config=config)
        self.incoming_buffer = _FrameBuffer(server=not config.client_side)
        # Nothing is encoded or decoded yet: swap in the block-remembering HPACK pair.
        self.encoder = CachingEncoder()
        self.decoder = CachingDecoder()
        self.decoder.max_header_list_size = self.DEFAULT_MAX_HEADER_LIST_SIZE
        self.events_before_error: list[h2.events.Event] = []
        self._closed_streams = _ClosedStreams()  # type: ignore[assignment]
        self._prune_at = 64
        self._preface_checked = False  # the peer's first frame was SETTINGS
        #: True when ``receive_data`` stopped at ``max_frames``: more may be buffered.
        self.input_pending = False
        # owner: reader (receive_data); for ConnectionStatistics.
        self.bytes_received = 0
        self.frames_received = 0

    # -- 2. O(1) stream counting ---------------------------------------------------

    @property
    def open_outbound_streams(self) -> int:
        """Always 0: trio_h2t enforces the peer's limit itself (stream quota)."""
        return 0

    @property
    def open_inbound_streams(self) -> int:
        """Always 0: trio_h2t enforces our limit itself (REFUSED_STREAM)."""
        return 0

    def prune_closed_streams(self, stream_id: int = 0) -> None:
        """Forget closed streams, in amortised O(1) per stream.

        h2 prunes ``self.streams`` only while counting open streams, which we no
        longer do. ``stream_id``, a stream the transport just closed, is forgotten
        at once if h2 has closed it too (its objects are freed now, not at the next
        scan); the rest are found by a scan (h2's own routine) once the dict has
        doubled since the last one, so the cost per stream stays constant. Either
        way h2 remembers how each stream closed (``_closed_streams``), to answer
        late frames as it would.
        """
        stream = self.streams.get(stream_id)
        if stream is not None and stream.closed:
            del self.streams[stream_id]
            self._closed_streams[stream_id] = stream.closed_by
        if len(self.streams) >= self._prune_at:
            remaining = self._open_streams(0) + self._open_streams(1)
            self._prune_at = max(64, 2 * remaining)

    # -- 1. GOAWAY stays ours ------------------------------------------------------

    def _receive_goaway_frame(self, frame: GoAwayFrame) -> tuple[list[Any], list[Any]]:
        # Unlike h2: no RECV_GOAWAY transition, no clearing of the outbound buffer.
        return [], [
            GoAwayReceived(frame.error_code, frame.last_stream_id, frame.additional_data or b"")
        ]

    # -- 3. keep events seen before a protocol error; 4. RFC details h2 misses ------

    def receive_data(self, data: Any, max_frames: int = 0) -> list[h2.events.Event]:
        """Like h2's, but frame by frame, keeping events seen before an error.

        With ``max_frames`` > 0, stop after that many frames and leave the rest in
        the frame buffer; ``input_pending`` then says more may be ready, and a call
        with ``b""`` continues. (The reader uses this to hand work to the other tasks
        between slices of a large read, instead of parsing a whole batch first.)

        Also enforces what h2 does not: the peer's preface must start with SETTINGS
        (RFC 9113 §3.4), and an HPACK decoding failure is a COMPRESSION_ERROR
        (§4.3), not h2's PROTOCOL_ERROR.
        """
        events: list[h2.events.Event] = []
        self.events_before_error = events
        self.input_pending = False
        if data:
            self.bytes_received += len(data)
            self.incoming_buffer.add_data(data)
        self.incoming_buffer.max_frame_size = self.max_inbound_frame_size
        count = 0
        try:
            for frame in self.incoming_buffer:
                if not self._preface_checked:
                    if not isinstance(frame, SettingsFrame) or "ACK" in frame.flags:
                        raise ProtocolError("the peer's preface must start with SETTINGS")
                    self._preface_checked = True
                events.extend(self._receive_frame(frame))
                count += 1
                if count == max_frames:
                    self.input_pending = True
                    break
        except InvalidPaddingError as e:
            self._terminate_connection(ErrorCodes.PROTOCOL_ERROR)
            raise ProtocolError("Received frame with invalid padding.") from e
        except ProtocolError as e:
            # An oversized header list (h2's DenialOfServiceError) stays a connection
            # error: hpack stopped mid-block, so its dynamic table is out of step
            # with the peer's (module docstring, item 5).
            if type(e) is ProtocolError and isinstance(e.__cause__, _HPACK_FAILURES):
                e.error_code = ErrorCodes.COMPRESSION_ERROR  # RFC 9113 §4.3
            self._terminate_connection(e.error_code)
            raise
        finally:
            self.frames_received += count
        self.events_before_error = []
        return events

    def _receive_frame(self, frame: Any) -> list[h2.events.Event]:
        # h2's, minus its trace log, whose argument is an eager ``repr(frame)``
        # (about 3 % of a unary exchange), and ignoring frames on a stream *we*
        # reset: RFC 9113 §5.1 says an endpoint MUST ignore them (h2 answers each
        # with another RST_STREAM). After the peer's RST_STREAM a frame is still a
        # stream error STREAM_CLOSED, and after END_STREAM a connection error.
        events: list[h2.events.Event]
        try:
            frames, events = self._frame_dispatch_table[frame.__class__](frame)
        except StreamClosedError as e:
            # e._events holds the StreamReset of a reset this very frame caused
            # (h2's reset_stream_on_error, which also marks the stream as closed by
            # SEND_RST_STREAM): that RST_STREAM must go out. Without one, the frame
            # arrived on a stream already closed.
            closed_by = self._stream_closed_by(e.stream_id)
            if closed_by is StreamClosedBy.SEND_RST_STREAM and not e._events:
                events = []
            elif closed_by in (StreamClosedBy.SEND_RST_STREAM, StreamClosedBy.RECV_RST_STREAM):
                rst = RstStreamFrame(e.stream_id)
                rst.error_code = e.error_code
                self._prepare_for_sending([rst])
                events = e._events
            else:
                raise
        except StreamIDTooLowError as e:
            closed_by = self._stream_closed_by(e.stream_id)
            if closed_by is StreamClosedBy.SEND_RST_STREAM:
                events = []
            elif closed_by is StreamClosedBy.RECV_RST_STREAM:
                rst = RstStreamFrame(e.stream_id)
                rst.error_code = ErrorCodes.STREAM_CLOSED
                self._prepare_for_sending([rst])
                events = []
            elif self._stream_is_closed_by_end(e.stream_id):
                raise StreamClosedError(e.stream_id) from e
            else:
                raise
        else:
            if frames:
                self._prepare_for_sending(frames)
        return events

    # -- 5. one malformed stream does not kill the connection -----------------------

    def _begin_new_stream(self, stream_id: int, allowed_ids: Any) -> Any:
        # h2's, building our stream subclass directly (assigning ``__class__`` after
        # the fact would materialise every stream's attribute dict: one more
        # GC-tracked object per stream), without its three debug logs.
        outbound = self._stream_id_is_outbound(stream_id)
        highest = self.highest_outbound_stream_id if outbound else self.highest_inbound_stream_id
        if stream_id <= highest:
            raise StreamIDTooLowError(stream_id, highest)
        if (stream_id % 2) != int(allowed_ids):
            raise ProtocolError("Invalid stream ID for peer.")
        stream = _Stream(
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

    def _receive_headers_frame(self, frame: Any) -> tuple[list[Any], list[Any]]:
        try:
            result: tuple[list[Any], list[Any]] = super()._receive_headers_frame(frame)
        except _Malformed as bad:
            rst = RstStreamFrame(bad.stream_id)
            rst.error_code = ErrorCodes.PROTOCOL_ERROR
            event = h2.events.StreamReset(
                stream_id=bad.stream_id, error_code=ErrorCodes.PROTOCOL_ERROR, remote_reset=False
            )
            return [rst], [event]
        return result

    def _receive_data_frame(self, frame: DataFrame) -> tuple[list[Any], list[Any]]:
        # RFC 9113 §8.1.1: a body longer than its content-length (or, at END_STREAM,
        # shorter; a HEAD response's body is expected empty, RFC 9110 §9.3.2) is a
        # malformed message: a stream error PROTOCOL_ERROR. h2 raises
        # InvalidBodyLengthError, a connection error, after the stream consumed the
        # frame's window: close just the stream and answer as for DATA on a stream
        # we reset (h2's _handle_data_on_closed_stream: the connection window is
        # credited, RST_STREAM goes out).
        try:
            result: tuple[list[Any], list[Any]] = super()._receive_data_frame(frame)
        except InvalidBodyLengthError:
            stream = self.streams[frame.stream_id]
            stream.state_machine.process_input(StreamInputs.SEND_RST_STREAM)
            closed = StreamClosedError(frame.stream_id)
            closed.error_code = ErrorCodes.PROTOCOL_ERROR
            closed._events = [
                h2.events.StreamReset(
                    stream_id=frame.stream_id,
                    error_code=ErrorCodes.PROTOCOL_ERROR,
                    remote_reset=False,
                )
            ]
            return h2.connection.H2Connection._handle_data_on_closed_stream(self, [], closed, frame)
        return result

    def _receive_push_promise_frame(self, frame: Any) -> tuple[list[Any], list[Any]]:
        # RFC 9113 §8.4: a client cannot push. h2 would decode the block first and
        # report an HPACK failure instead of the PROTOCOL_ERROR the RFC asks for.
        if not self.config.client_side:
            raise ProtocolError("a client cannot send PUSH_PROMISE")
        result: tuple[list[Any], list[Any]] = super()._receive_push_promise_frame(frame)
        return result

    def _handle_data_on_closed_stream(
        self, events: list[Any], exc: StreamClosedError, frame: DataFrame
    ) -> tuple[list[Any], list[Any]]:
        # RFC 9113 §5.1 (closed): frames after the peer's END_STREAM are a connection
        # error STREAM_CLOSED; after the peer's RST_STREAM, a stream error (h2's
        # answer); after ours, ignored (only the connection window is credited).
        if self._stream_is_closed_by_end(frame.stream_id):
            raise StreamClosedError(frame.stream_id)
        frames, new_events = super()._handle_data_on_closed_stream(events, exc, frame)
        closed_by = self._stream_closed_by(frame.stream_id)
        if closed_by is StreamClosedBy.SEND_RST_STREAM and not exc._events:
            frames = [f for f in frames if not isinstance(f, RstStreamFrame)]
        return frames, new_events

    # -- 6. the outbound header path, framed directly ------------------------------

    def send_headers(
        self,
        stream_id: int,
        headers: Any,
        end_stream: bool = False,
        priority_weight: int | None = None,
        priority_depends_on: int | None = None,
        priority_exclusive: bool | None = None,
    ) -> None:
        """h2's ``send_headers``, framed without hyperframe objects.

        Same checks, state transitions and HPACK encoding as h2 (the stream state
        machine, trailers needing END_STREAM, informational responses, the stream's
        authority and request method), then the block is written straight into h2's
        outbound buffer as one HEADERS frame and as many CONTINUATION frames as the
        peer's SETTINGS_MAX_FRAME_SIZE needs. ``headers`` must be bytes pairs (we
        switched h2's outbound normalisation and validation off). Priority
        information takes h2's own path.
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
            highest = (
                self.highest_outbound_stream_id
                if self._stream_id_is_outbound(stream_id)
                else self.highest_inbound_stream_id
            )
            if stream_id <= highest:
                # A stream that closed and was forgotten (``prune_closed_streams``):
                # closed, as h2's other calls say for it (``_get_stream_by_id``), not
                # a new stream with too low an id.
                raise StreamClosedError(stream_id)
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
        flags = 0
        if end_stream:
            machine.process_input(StreamInputs.SEND_END_STREAM)
            flags = _END_STREAM
        if machine.trailers_sent and not end_stream:
            raise ProtocolError("Trailers must have END_STREAM set.")
        if machine.client and stream._authority is None:
            stream._authority = authority_from_headers(headers)
        method = extract_method_header(headers)
        if method is not None:  # not trailers: a HEAD request's response stays bodiless
            stream.request_method = method

        out = self._data_to_send
        size = len(block)
        limit = self.max_outbound_frame_size
        if size <= limit:
            flags |= _END_HEADERS
            out += _FRAME_HEADER.pack(size >> 8, size & 0xFF, _HEADERS, flags, stream_id)
            out += block
            return
        out += _FRAME_HEADER.pack(limit >> 8, limit & 0xFF, _HEADERS, flags, stream_id)
        out += block[:limit]
        for start in range(limit, size, limit):
            chunk = block[start : start + limit]
            n = len(chunk)
            last = _END_HEADERS if start + limit >= size else 0
            out += _FRAME_HEADER.pack(n >> 8, n & 0xFF, _CONTINUATION, last, stream_id)
            out += chunk

    # -- helpers for loopy ----------------------------------------------------------

    def pending_bytes(self) -> int:
        """Bytes h2 has framed and loopy has not yet taken."""
        return len(self._data_to_send)


def make_h2_state(
    *,
    client_side: bool,
    max_concurrent_streams: int,
    initial_window_size: int,
    max_header_list_size: int,
) -> H2State:
    """An :class:`H2State` configured for the hot path, its first SETTINGS prepared.

    Inbound header validation stays on (malformed requests must be rejected);
    outbound validation and both normalisations are off: h2 calls that chain of
    generators "somewhat expensive" (about 20 % of h2's time per unary exchange,
    python-peers.md §1.6). Outbound blocks are checked by the stream task instead,
    before they are queued (``_headers.validate_to_send``).
    """
    config = h2.config.H2Configuration(
        client_side=client_side,
        header_encoding=None,
        validate_inbound_headers=True,
        normalize_inbound_headers=False,
        validate_outbound_headers=False,
        normalize_outbound_headers=False,
    )
    state = H2State(config)
    codes = h2.settings.SettingCodes
    initial: dict[h2.settings.SettingCodes, int] = {
        codes.MAX_CONCURRENT_STREAMS: max_concurrent_streams,
        codes.INITIAL_WINDOW_SIZE: initial_window_size,
        codes.MAX_HEADER_LIST_SIZE: max_header_list_size,
    }
    if client_side:
        initial[codes.ENABLE_PUSH] = 0
    # Assigning before initiate_connection() makes the first SETTINGS carry these
    # values, saving a second SETTINGS round trip (as purerpc, hypercorn, httpcore do).
    state.local_settings = h2.settings.Settings(client=client_side, initial_values=initial)
    state.decoder.max_header_list_size = max_header_list_size
    return state
