"""The correctness layer: h2's connection and stream, with what a transport must change.

h2 is the protocol core (HPACK, frame parsing, stream states, flow-control windows
and their overrun checks). This module changes only what h2 gets wrong for a
multiplexed, long-lived transport, or what RFC 9113 says differently; every
override below names the h2 function it replaces (h2's ``connection.py``,
``stream.py``, ``frame_buffer.py``) and why ours differs. Besides the patches, it
holds the entry points that spare copies (the frame buffer read into in place, with
DATA as :class:`InboundData`; ``take_outbound``, ``frame_data``); the rest of the
speed work is ``_h2fast.py``, the layer on top of this one, and with it switched
off (``make_h2_state(speed_layer=False)``) trio_h2t behaves the same on the wire
(``tests/test_h2_layers.py`` runs every patch on both layers and on plain h2, and
``tests/conformance`` runs against a server with the speed layer off too).

The patches, by kind (section markers in the code below use the same numbers):

1. **GOAWAY stays ours.** h2 issue #1181: on a received GOAWAY h2 moves to CLOSED,
   clears its outbound buffer and makes every later frame on in-flight streams a
   protocol error. ``FixedConnection`` reports a :class:`GoAwayReceived` event and
   stays OPEN; trio_h2t tracks "GOAWAY sent/received, last stream id" itself and
   frames outgoing GOAWAYs with :func:`goaway_frame`, never ``close_connection``.
2. **Stream limits are ours.** h2 counts open streams (``_open_streams``) and raises
   the connection-killing TooManyStreamsError past SETTINGS_MAX_CONCURRENT_STREAMS
   (hypercorn issue #335). trio_h2t enforces the limits itself (clients wait for
   stream quota; servers refuse the excess with REFUSED_STREAM), so both counts
   report 0 to h2 and closed streams are forgotten by ``prune_closed_streams``,
   which h2 did only while counting. A call on a forgotten stream raises
   StreamClosedError, as on a closed one (``send_headers``, ``send_data``).
3. **Events survive a protocol error.** h2's ``receive_data`` discards the events of
   the frames it processed before the bad one; ours keeps them in
   ``events_before_error`` and can stop after ``max_frames`` frames.
4. **RFC details h2 misses** (found by ``tests/conformance``): the preface must start
   with SETTINGS (§3.4); HPACK failures are COMPRESSION_ERROR (§4.3); DATA after the
   peer's END_STREAM is a connection error STREAM_CLOSED (§5.1); frames the peer had
   in flight on a stream we reset are ignored, not answered with another RST_STREAM
   each (§5.1); SETTINGS ACK with a payload is FRAME_SIZE_ERROR (§6.5); the
   WINDOW_UPDATE reserved bit is ignored (§6.9); a frame longer than our
   SETTINGS_MAX_FRAME_SIZE is refused from its 9-byte header, before its payload is
   buffered (§4.2); RST_STREAM on an idle stream is a PROTOCOL_ERROR, not ignored
   (§6.4); on a client, a server whose first 9 bytes are not a SETTINGS frame
   header (an HTTP/1.1 response, an SSH banner) is refused at once, quoting them
   (§3.4); on a client, HEADERS on an even stream (the server never pushed:
   ENABLE_PUSH is 0) is a PROTOCOL_ERROR, not a reset of that stream (§5.1.1); a
   padded HEADERS whose padding leaves its fragment empty is valid, and padding
   that runs into its priority fields is a PROTOCOL_ERROR (§6.2). (A
   PUSH_PROMISE from a client, §8.4, needs no patch: h2's
   ``_receive_push_promise_frame`` refuses it before decoding, since a server's
   SETTINGS_ENABLE_PUSH is 0.)
5. **A malformed message is a stream error** (§8.1.1): h2 raises a
   connection-killing ProtocolError when header validation fails, and
   InvalidBodyLengthError when a body overruns (or, at END_STREAM, falls short of)
   its content-length; ``FixedStream`` closes just that stream and the connection
   answers RST_STREAM(PROTOCOL_ERROR). The same holds for a body on a response to
   HEAD or on a 204/304 response (RFC 9110 §6.4.1, §9.3.2), and for a message ended
   by HEADERS or trailers short of its content-length. A header list over our
   SETTINGS_MAX_HEADER_LIST_SIZE is a stream error too: our decoder
   (``_h2.hpack.ReadOnDecoder``) reads the whole block, keeping the dynamic table in
   step without keeping the fields past the limit, and ``_header_list_too_large``
   answers a request with 431 (RFC 9113 §10.5.1) and resets any other block's
   stream with ENHANCE_YOUR_CALM; a list over ``_h2.hpack.READ_ON_FACTOR`` times the
   limit stays h2's connection error. A client accepts at most
   :data:`MAX_INFORMATIONAL` 1xx responses per stream (h2 allows any number, and
   each is kept for the application); one more resets the stream.

Besides the numbered patches, two of h2's events are ours under other names, for
the flood counts: an unknown frame (and a PRIORITY_UPDATE) is an
:class:`IgnoredFrameReceived`, not h2's ``UnknownFrameReceived`` holding the frame,
and an empty CONTINUATION or an ALTSVC frame adds one too; a PRIORITY frame is a
:class:`PriorityFrameReceived`, not h2's ``PriorityUpdated``
(``tests/test_h2_connection.py`` calls this entry 0 of its ``PATCHES`` table).

Owner: the connection's tasks, each using it only between awaits. The reader calls
``receive_data`` (inside it h2 frames its ACKs and stream-error RST_STREAMs, and
``_header_list_too_large`` the 431 answer) and resets the streams it refuses;
``send_preface`` takes the preface (``data_to_send``); loopy makes every other
outbound call and is the only caller of ``take_outbound``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import h2.config
import h2.connection
import h2.events
import h2.stream
from h2.connection import AllowedStreamIDs, ConnectionInputs, ConnectionState
from h2.errors import ErrorCodes
from h2.exceptions import (
    DenialOfServiceError,
    FlowControlError,
    FrameDataMissingError,
    FrameTooLargeError,
    InvalidBodyLengthError,
    ProtocolError,
    StreamClosedError,
    StreamIDTooLowError,
)
from h2.frame_buffer import CONTINUATION_BACKLOG
from h2.stream import StreamClosedBy, StreamInputs, StreamState
from h2.utilities import is_informational_response
from hpack.exceptions import HPACKError
from hyperframe.frame import (
    AltSvcFrame,
    ContinuationFrame,
    DataFrame,
    ExtensionFrame,
    Frame,
    GoAwayFrame,
    HeadersFrame,
    PingFrame,
    PriorityFrame,
    PushPromiseFrame,
    RstStreamFrame,
    SettingsFrame,
    WindowUpdateFrame,
)

from ._h2 import frames
from ._h2.hpack import READ_ON_FACTOR, HeaderListTooLarge, ReadOnDecoder

# Enum members as module globals for frame_data, once per DATA frame: on CPython
# 3.11 each ``StreamState.OPEN``-style class attribute read allocates an object.
_CLIENT_OPEN = ConnectionState.CLIENT_OPEN
_SERVER_OPEN = ConnectionState.SERVER_OPEN
_OPEN = StreamState.OPEN
_HALF_CLOSED_REMOTE = StreamState.HALF_CLOSED_REMOTE

__all__ = [
    "HEADER_LIST_TOO_LARGE_RESPONSE",
    "MAX_INFORMATIONAL",
    "FixedConnection",
    "FixedFrameBuffer",
    "InboundData",
    "FixedStream",
    "GoAwayReceived",
    "IgnoredFrameReceived",
    "PriorityFrameReceived",
    "goaway_frame",
    "h2_error",
    "h2_frame",
]


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
    """Serialise a GOAWAY frame without telling h2 (so h2 stays OPEN; patch 1)."""
    return frames.serialize_goaway(last_stream_id, error_code, debug_data)


#: What h2's ``H2Connection._receive_headers_frame`` catches from hpack as a decoding failure.
_HPACK_FAILURES = (HPACKError, IndexError, TypeError, UnicodeDecodeError)

_DATA = frames.DATA
_SETTINGS = frames.SETTINGS
_CONTINUATION = frames.CONTINUATION
_BLOCK_STARTS = (frames.HEADERS, frames.PUSH_PROMISE)
_END_HEADERS = frames.END_HEADERS
#: The client's connection preface (RFC 9113 §3.4), which a server checks first.
_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


class PriorityFrameReceived(h2.events.Event):
    """The peer sent a PRIORITY frame (h2 reports it as ``PriorityUpdated``, as it does
    the priority fields of a HEADERS frame; this one is the frame alone, which does
    nothing for us, so the reader counts it against the flood budget)."""

    def __init__(self, stream_id: int) -> None:
        self.stream_id = stream_id

    def __repr__(self) -> str:
        return f"<PriorityFrameReceived stream_id:{self.stream_id}>"


class IgnoredFrameReceived(h2.events.Event):
    """The peer sent a frame that h2 ignores (or only reports) and that does nothing
    for us, so the reader counts it against the flood budget: ``kind`` names it as
    the GOAWAY's debug data will (``too_many_<kind>``).

    - ``"altsvc"``: ALTSVC (RFC 7838; a server ignores it, and so does our client);
    - ``"priority_updates"``: PRIORITY_UPDATE (type 0x10, RFC 9218), which we do not
      implement, so an unknown type to us (RFC 9113 §5.5: ignored);
    - ``"unknown_frames"``: any other unknown frame type (ORIGIN among them);
    - ``"empty_continuations"``: an empty CONTINUATION (a fragment of no bytes, one
      event per frame, after the HEADERS its block completed).

    Replaces h2's ``UnknownFrameReceived``, which also holds the frame.
    """

    def __init__(self, kind: str, stream_id: int) -> None:
        self.kind = kind
        self.stream_id = stream_id

    def __repr__(self) -> str:
        return f"<IgnoredFrameReceived kind:{self.kind} stream_id:{self.stream_id}>"


#: RFC 9218 §7.1 PRIORITY_UPDATE's frame type (hyperframe parses it as ExtensionFrame).
_PRIORITY_UPDATE = 0x10


class InboundData:
    """A DATA frame that ``FixedFrameBuffer`` parsed in place: the fields h2's
    ``_receive_data_frame`` and ``_handle_data_on_closed_stream`` read of
    hyperframe's ``DataFrame`` (``stream_id``, ``flags``, ``data``,
    ``flow_controlled_length``), without building one. ``data`` is the payload
    without padding: a memoryview of the frame buffer when the buffer's ``views`` is
    set, else ``bytes`` (one copy, where hyperframe's ``parse_body`` made the same).
    Immutable after init."""

    __slots__ = ("data", "flags", "flow_controlled_length", "pad_length", "stream_id")

    def __init__(
        self,
        stream_id: int,
        flags: frozenset[str],
        data: bytes | memoryview,
        pad_length: int,
        flow_controlled_length: int,
    ) -> None:
        self.stream_id = stream_id
        self.flags = flags
        self.data = data
        self.pad_length = pad_length
        self.flow_controlled_length = flow_controlled_length

    def __repr__(self) -> str:
        return (
            f"InboundData(stream_id={self.stream_id}, flags={sorted(self.flags)}):"
            f" {len(self.data)} bytes, padding {self.pad_length}"
        )


#: ``InboundData.flags`` by the DATA frame's END_STREAM (0x1) and PADDED (0x8) bits.
_DATA_FLAGS = {
    0: frozenset(),
    0x1: frozenset({"END_STREAM"}),
    0x8: frozenset({"PADDED"}),
    0x9: frozenset({"END_STREAM", "PADDED"}),
}


# -- the boundary: our codec's records and errors as h2 takes them -------------------
#
# h2's connection code dispatches hyperframe frames (``_frame_dispatch_table``, by
# class) and catches h2's exceptions; until the ``_h2`` layer's own connection
# module replaces it, ``FixedFrameBuffer`` hands h2 our records converted here, and
# only here (DATA goes as ``InboundData``, built by the buffer). This section is
# what the connection module removes.


def _flagged(frame: Frame, flags: int) -> Frame:
    # hyperframe's own reading of a flag byte (``parse_flags``: the bits the type
    # defines, by name), as its ``parse_frame_header`` does.
    frame.parse_flags(flags)
    return frame


def _h2_headers(r: Any) -> Frame:
    frame = HeadersFrame(r.stream_id, r.fragment)
    frame.parse_flags(r.flags)
    frame.pad_length = r.pad_length
    frame.depends_on = r.depends_on
    frame.stream_weight = r.weight
    frame.exclusive = r.exclusive
    return frame


def _h2_push_promise(r: Any) -> Frame:
    frame = PushPromiseFrame(r.stream_id, r.promised_stream_id, r.fragment)
    frame.parse_flags(r.flags)
    frame.pad_length = r.pad_length
    return frame


_H2_FRAMES: dict[type, Callable[[Any], Frame]] = {
    frames.Headers: _h2_headers,
    frames.PushPromise: _h2_push_promise,
    frames.Priority: lambda r: PriorityFrame(r.stream_id, r.depends_on, r.weight, r.exclusive),
    frames.RstStream: lambda r: RstStreamFrame(r.stream_id, r.error_code),
    frames.Settings: lambda r: _flagged(SettingsFrame(0, dict(r.settings)), r.flags),
    frames.Ping: lambda r: _flagged(PingFrame(0, r.opaque_data), r.flags),
    frames.GoAway: lambda r: GoAwayFrame(0, r.last_stream_id, r.error_code, r.debug_data),
    frames.WindowUpdate: lambda r: WindowUpdateFrame(r.stream_id, r.increment),
    frames.Continuation: lambda r: _flagged(ContinuationFrame(r.stream_id, r.fragment), r.flags),
    frames.AltSvc: lambda r: AltSvcFrame(r.stream_id, r.origin, r.field),
    frames.Unknown: lambda r: ExtensionFrame(r.type, r.stream_id, r.flags, r.payload),
}


def h2_frame(record: frames.Frame) -> Frame:
    """Our codec's record (not DATA) as the hyperframe frame h2's dispatch takes: the
    fields hyperframe's ``parse_body`` would have set (``tests/test_h2_frames.py``
    compares them), flags by name."""
    return _H2_FRAMES[type(record)](record)


def h2_error(err: frames.FrameError) -> ProtocolError:
    """Our codec's error as the h2 exception stock h2 raises for the same frame, so
    that ``receive_data`` answers it alike (its ``error_code`` goes in the GOAWAY):
    ``FrameTooLargeError`` for §4.2's limit, ``FrameDataMissingError`` for any other
    length error (both FRAME_SIZE_ERROR), else ``ProtocolError``."""
    if isinstance(err, frames.FrameTooLarge):
        return FrameTooLargeError(str(err))
    if isinstance(err, frames.FrameSizeError):
        return FrameDataMissingError(str(err))
    return ProtocolError(str(err))


class FixedFrameBuffer:
    """h2's ``frame_buffer.py`` ``FrameBuffer``, in its place as the connection's
    ``incoming_buffer``: bytes in, frames out, parsed in place by our codec
    (``_h2.frames``) and handed to h2's dispatch as the hyperframe frames it takes
    (:func:`h2_frame`, the one boundary; DATA as :class:`InboundData`). It also
    decides RFC 9113 rules h2 and hyperframe get wrong or late (patch 4):

    - §6.9: the reserved bit of a WINDOW_UPDATE increment MUST be ignored
      (hyperframe range-checks the increment with the bit still set); so are the
      reserved bits of a GOAWAY's last stream id and a PUSH_PROMISE's promised one
      (§6.8, §6.6; hyperframe keeps them).
    - §6.5: a SETTINGS frame with ACK and a payload is a FRAME_SIZE_ERROR
      (hyperframe's complaint became h2's PROTOCOL_ERROR).
    - §4.2: a frame longer than our SETTINGS_MAX_FRAME_SIZE is a FRAME_SIZE_ERROR as
      soon as its header is here; h2's ``FrameBuffer.__next__`` checks only once the
      whole payload (up to 16 MiB) is buffered.
    - §3.4 (client side): the server's preface must begin with a SETTINGS frame
      header (type 0x4, stream 0, no ACK); anything else (an HTTP/1.1 response, an
      SSH banner) is refused from its first 9 bytes, quoting them, instead of
      waiting for a "frame" of millions of bytes that never completes.
    - §10.5.1 (the CONTINUATION flood): h2 buffers a header block's fragments until
      END_HEADERS, up to 64 frames (its ``CONTINUATION_BACKLOG``, which stays), each
      up to our SETTINGS_MAX_FRAME_SIZE (1 MiB): 64 MiB before HPACK sees a byte.
      A block whose fragments so far add up to more than ``max_header_block``
      bytes is refused while it is still arriving (``DenialOfServiceError``:
      GOAWAY(ENHANCE_YOUR_CALM)). ``make_h2_state`` sets it to
      ``_h2.hpack.READ_ON_FACTOR`` times our SETTINGS_MAX_HEADER_LIST_SIZE: an
      encoder never needs more bytes than the list's size counts (each field
      counts 32 bytes more than its name and value; HPACK spends at most a few on
      it), so such a block decodes to a list past the size whose decoding
      ``_h2.hpack.ReadOnDecoder`` stops as a connection error anyway.
    - §6.2: a padded HEADERS frame's padding may take all that follows the Pad
      Length (and priority) fields, leaving an empty field block fragment; only
      padding *longer* than that is a PROTOCOL_ERROR. hyperframe's
      ``HeadersFrame.parse_body`` is off by one both ways (Go's x/net ``http2``
      had the same fencepost, golang/go#47851); our codec is not. An empty
      fragment that ends the block is an empty header block: a malformed request
      (§8.1.1, patch 5's stream error), not a framing error.

    The header block (§4.3: HEADERS or PUSH_PROMISE, then CONTINUATIONs on the same
    stream up to END_HEADERS, nothing in between) is assembled here, on our records,
    as h2's ``FrameBuffer._update_header_buffer`` does, with its errors and its
    limit of ``CONTINUATION_BACKLOG`` frames; h2 gets the block as one HEADERS (or
    PUSH_PROMISE) frame with END_HEADERS.
    """

    def __init__(self, server: bool = False) -> None:
        #: Our SETTINGS_MAX_FRAME_SIZE (owner: reader; ``receive_data`` sets it to
        #: h2's ``max_inbound_frame_size`` before each parse).
        self.max_frame_size = 16_384
        # owner: reader: what is left to check of the client's connection preface
        # (a server's; §3.4).
        self._preface = _PREFACE if server else b""
        self._first_checked = server  # owner: reader: the server's preface was checked
        #: The most bytes of one header block buffered before END_HEADERS (owner:
        #: reader; set by ``make_h2_state``).
        self.max_header_block = READ_ON_FACTOR * 65_536
        # owner: reader: bytes of the block in _block so far.
        self._block_size = 0
        # owner: reader: the frames of the header block still arriving (empty: none).
        self._block: list[frames.Headers | frames.PushPromise | frames.Continuation] = []
        #: Empty CONTINUATION frames parsed so far, a count that only grows (owner:
        #: reader; ``FixedConnection.receive_data`` reports each as an
        #: ``IgnoredFrameReceived``).
        self.empty_continuations = 0
        #: Bytes of a new buffer (owner: reader; ``make_h2_state`` sets it to
        #: ``read_buffer_size``); it grows for frames that do not fit (``_wrap``).
        self.read_size = 65_536
        #: Hand DATA payloads out as memoryviews of the buffer, not copies (owner:
        #: reader, which sets it with ``on_reuse``).
        self.views = False
        #: Called with the buffer before bytes that may lie under a view handed out
        #: are overwritten: returns a buffer of the same size to go on in instead
        #: (the views keep the old one), or None to overwrite it (owner: reader).
        self.on_reuse: Callable[[bytearray], bytearray | None] | None = None
        #: Called with the buffer before it is dropped (``release``; owner: reader).
        self.on_release: Callable[[bytearray], None] | None = None
        # owner: reader: the bytes read and not yet parsed are _buf[_start:_end]
        # (the frames before _start stay as they were until a wrap); None: no
        # buffer held (``release``).
        self._buf: bytearray | None = None
        self._start = 0  # owner: reader
        self._end = 0  # owner: reader
        # owner: reader: 9 + the longest frame parsed so far (at least 16 KiB, the
        # RFC's default frame size): space a read leaves for the next frame.
        self._slack = 9 + 16_384

    def block_buffered(self) -> int:
        """Bytes of header block fragments buffered before their END_HEADERS."""
        return sum(len(frame.fragment) for frame in self._block)

    # -- the buffer: reads land in it, frames are parsed where they landed ------------

    def pending(self) -> int:
        """Bytes read and not yet parsed (at most one incomplete frame between reads)."""
        return self._end - self._start

    def unparsed(self, n: int) -> bytes:
        """The first ``n`` bytes not yet parsed (fewer if fewer are here)."""
        if self._buf is None:
            return b""
        return bytes(self._buf[self._start : min(self._start + n, self._end)])

    @property
    def idle(self) -> bool:
        """True while no buffer is held (after ``release``, before the next read)."""
        return self._buf is None

    def read_target(self) -> memoryview:
        """Where the next read goes: a non-empty writable view of the buffer after the
        bytes already read, to pass to ``recv_into``; then ``commit`` what was read.

        The buffer is used as a log: each read lands after the previous one, so the
        payloads of frames already parsed stay where they are until a *wrap* (the
        frame being read would run past the end: its bytes move to the start, in a
        larger buffer if it is larger than the buffer; ``on_reuse`` is called
        first, and may give another buffer to go on in). A read ends where a frame
        starting before it would still fit (as long as the longest frame so far), or
        at the end of the frame being read plus the next frame's header: so a wrap
        moves only a frame header; the payload
        bytes of a frame move only if the frame is longer than any before it (the
        first wrap after the peer starts using larger frames).
        """
        buf = self._buf
        if buf is None:
            buf = self._buf = bytearray(self.read_size)
        start = self._start
        end = self._end
        cap = len(buf)
        need = start + 9
        if self._preface:  # the client's preface is not a frame
            need += len(self._preface)
        elif end - start >= 9:
            length = buf[start] << 16 | buf[start + 1] << 8 | buf[start + 2]
            if length <= self.max_frame_size:  # (else __next__ has refused it)
                need += length
        # Wrap when the frame being read does not fit, or when what is left after
        # its start is less than a frame while no more than its header is read:
        # moving at most 9 bytes now lets the next read fill the buffer, where
        # going on would end every read at the next frame's header (one read per
        # frame until one no longer fit: hundreds of reads of small frames).
        if need > cap or (start and end - start <= 9 and cap - start < self._slack):
            need = self._wrap(need - start)
            buf = self._buf
            assert buf is not None
            end = self._end
            cap = len(buf)
        # Frames whose header this read brings must fit after it, if they are no
        # longer than any before (``_slack``); the frame being read, and the next
        # header, are read whatever.
        limit = cap - self._slack + 9
        if limit < need + 9:
            limit = need + 9 if need + 9 < cap else cap
        if limit <= end:  # complete frames not parsed yet (a caller that reads on)
            if end == cap:
                self._wrap(cap + 1)
                buf = self._buf
                assert buf is not None
                end = self._end
            limit = len(buf)
        return memoryview(buf)[end:limit]

    def commit(self, n: int) -> None:
        """``n`` bytes were read into the last ``read_target``."""
        self._end += n

    def _wrap(self, need: int) -> int:
        # Move the unparsed bytes to the start (read_target's docstring): into a new
        # buffer if ``need`` bytes from the frame's start do not fit (four times the
        # frame, two past 256 KiB, so several frames fit one read). Returns where
        # the frame being read ends now.
        buf = self._buf
        assert buf is not None
        start = self._start
        kept = self._end - start
        cap = len(buf)
        new: bytearray | None = None
        if need > cap:  # the old buffer is left to any views of it
            size = max(4 * need if need <= 262_144 else 2 * need, self.read_size)
            new = bytearray(size + (-size) % 4096)
        elif self.on_reuse is not None:
            new = self.on_reuse(buf)
        if new is not None:
            new[:kept] = memoryview(buf)[start : self._end]
            self._buf = new
        elif kept:
            buf[:kept] = buf[start : self._end]
        self._start = 0
        self._end = kept
        return need

    def release(self) -> None:
        """Drop the buffer if it holds no unparsed byte (a quiet connection holds none;
        the next ``read_target`` allocates ``read_size`` bytes again)."""
        buf = self._buf
        if buf is not None and self._start == self._end:
            if self.on_release is not None:
                self.on_release(buf)
            self._buf = None
            self._start = self._end = 0

    def add_data(self, data: Any) -> None:
        """h2's ``add_data``: copy ``data`` into the buffer (a transport that is not a
        socket; the reader ``recv_into``s a socket's bytes straight into it).

        A new buffer is sized to what came (often a small message), not
        ``read_size``; a buffer without room after its unparsed bytes wraps
        (growing if they and ``data`` do not fit)."""
        view = memoryview(data).cast("B")
        size = len(view)
        if not size:
            return
        if self._buf is None:
            self._buf = bytearray(max(size, 1024))
        if self._end + size > len(self._buf):
            self._wrap(self._end - self._start + size)
        end = self._end
        self._buf[end : end + size] = view
        self._end = end + size

    def _check_preface(self) -> None:
        # h2's ``add_data`` checks the client's connection preface as bytes arrive;
        # here the bytes are checked where they landed, then skipped.
        buf = self._buf
        assert buf is not None
        n = min(len(self._preface), self._end - self._start)
        if self._preface[:n] != buf[self._start : self._start + n]:
            raise ProtocolError("Invalid HTTP/2 preamble.")
        self._preface = self._preface[n:]
        self._start += n

    def _count_block(self, kind: int, length: int, end: int) -> None:
        # The header block still arriving (docstring): its size so far, from the
        # frame headers (padding and priority fields included: a slight overcount).
        size = length if kind != _CONTINUATION else self._block_size + length
        if size > self.max_header_block:
            raise DenialOfServiceError(
                f"a header block of more than {self.max_header_block} bytes"
                f" ({READ_ON_FACTOR} times our SETTINGS_MAX_HEADER_LIST_SIZE)"
                " before END_HEADERS"
            )
        self._block_size = 0 if end else size

    def __iter__(self) -> FixedFrameBuffer:
        return self

    def __next__(self) -> Any:
        """The next frame for h2's dispatch (StopIteration: none is complete yet).

        Errors are h2's exceptions (``h2_error``), raised as soon as the part of the
        frame that shows them is here (the header's from its 9 bytes), as h2 raises
        them. A DATA frame outside a header block takes the short way
        (``_inbound_data``: no record, the payload's bounds from the codec).
        """
        while True:
            if self._preface and self._buf is not None:
                self._check_preface()
            buf = self._buf
            start = self._start
            avail = self._end - start
            if buf is None or avail < 9:
                raise StopIteration
            length, kind, flags, sid = frames.parse_frame_header(buf, start)
            if not self._first_checked:
                self._check_first(buf, start, kind, flags, sid)
            try:
                frames.check_frame_header(length, kind, flags, sid, self.max_frame_size)
            except frames.FrameError as err:
                raise h2_error(err) from err
            if avail < 9 + length:
                raise StopIteration
            if kind == _DATA and not self._block:
                return self._inbound_data(buf, start, length, flags, sid)
            frame = self._through_block(self._record(buf, start, length, kind, flags, sid))
            if frame is not None:
                return frame

    def _record(
        self, buf: bytearray, start: int, length: int, kind: int, flags: int, sid: int
    ) -> frames.Frame:
        # The complete frame at ``start`` as our record, its bytes consumed.
        if kind == _CONTINUATION or (kind in _BLOCK_STARTS and not flags & _END_HEADERS):
            self._count_block(kind, length, flags & _END_HEADERS)
            if not length and kind == _CONTINUATION:
                self.empty_continuations += 1
        try:
            record = frames.parse_payload(buf, start + 9, length, kind, flags, sid)
        except frames.FrameError as err:
            raise h2_error(err) from err
        if 9 + length > self._slack:
            self._slack = 9 + length
        self._start = start + 9 + length
        return record

    def _inbound_data(
        self, buf: bytearray, start: int, length: int, flags: int, sid: int
    ) -> InboundData:
        # The complete DATA frame at ``start`` for h2 (and the speed layer's
        # ``_data_event``), its bytes consumed: the payload a view of the buffer
        # when ``views`` is set, else a copy of it.
        try:
            first, end, pad = frames.data_bounds(buf, start + 9, length, flags)
        except frames.FrameError as err:
            raise h2_error(err) from err
        payload: bytes | memoryview = memoryview(buf)[first:end]
        if not self.views:
            payload = bytes(payload)
        if 9 + length > self._slack:
            self._slack = 9 + length
        self._start = start + 9 + length
        return InboundData(sid, _DATA_FLAGS[flags & 0x9], payload, pad, length)

    def _check_first(self, buf: bytearray, start: int, kind: int, flags: int, sid: int) -> None:
        # A client's first frame header from the server (docstring, §3.4).
        if kind != _SETTINGS or flags & 0x1 or sid:
            raise ProtocolError(
                "the server did not answer with HTTP/2:"
                f" {bytes(buf[start : min(start + 64, self._end)])!r}"
            )
        self._first_checked = True

    def _through_block(self, record: frames.Frame) -> Any:
        # h2's ``FrameBuffer._update_header_buffer`` on our records: the frame for
        # h2, or None when it went into the header block still arriving.
        block = self._block
        if block:
            if type(record) is not frames.Continuation or record.stream_id != block[0].stream_id:
                raise ProtocolError("Invalid frame during header block.")
            block.append(record)
            if len(block) > CONTINUATION_BACKLOG:
                raise ProtocolError("Too many continuation frames received.")
            if not record.flags & _END_HEADERS:
                return None
            self._block = []
            first = block[0]
            fragment = b"".join(frame.fragment for frame in block)
            record = first._replace(flags=first.flags | _END_HEADERS, fragment=fragment)
        elif type(record) is frames.Data:  # (only in a header block: refused above)
            raise AssertionError("DATA takes __next__'s short way")
        elif (
            type(record) is frames.Headers or type(record) is frames.PushPromise
        ) and not record.flags & _END_HEADERS:
            block.append(record)
            return None
        return h2_frame(record)


def _bodiless_status(headers: Any) -> bool:
    for name, value in headers:
        if name == b":status":
            return value in (b"204", b"304")
    return False


class _Malformed(Exception):
    """A header block failed validation: a stream error, not a connection error."""

    def __init__(self, stream_id: int, error_code: int = ErrorCodes.PROTOCOL_ERROR) -> None:
        super().__init__(stream_id)
        self.stream_id = stream_id
        self.error_code = error_code


#: Informational (1xx) responses a client accepts per stream; one more resets the
#: stream with ENHANCE_YOUR_CALM. h2 allows any number, and each is kept for the
#: application (``H2Stream.informational``): memory must stay bounded.
MAX_INFORMATIONAL = 32

#: A server's answer to a request whose header list is over our
#: SETTINGS_MAX_HEADER_LIST_SIZE (RFC 9113 §10.5.1; RFC 6585 §5): no body, so it
#: needs no flow-control window.
HEADER_LIST_TOO_LARGE_RESPONSE = ((b":status", b"431"), (b"content-length", b"0"))


class FixedStream(h2.stream.H2Stream):
    """h2's ``stream.py`` ``H2Stream``, with a malformed message made a *stream* error.

    RFC 9113 §8.1.1: malformed requests and responses MUST be treated as a stream
    error PROTOCOL_ERROR; h2 raises a ProtocolError that kills the whole connection.
    The header block is already HPACK-decoded when validation runs, so the
    connection's compression state is intact: close just this stream (as if we had
    sent RST_STREAM) and raise ``_Malformed``, which ``FixedConnection`` answers with
    RST_STREAM(PROTOCOL_ERROR) (patch 5).

    h2's own ``FixedConnection._begin_new_stream`` builds an ``H2Stream`` and turns it
    into this class; the speed layer's ``FastStream`` subclasses it.
    """

    #: 1xx blocks received, bounded by MAX_INFORMATIONAL (a class default: h2's
    #: ``__init__`` builds the stream, ``receive_headers`` counts on the instance).
    informational_received = 0

    def receive_headers(
        self, headers: Any, end_stream: bool, header_encoding: Any
    ) -> tuple[list[Any], list[Any]]:
        """h2's ``H2Stream.receive_headers``, with these differences (patch 5):

        - Trailers leave the content-length alone: h2 calls
          ``_initialize_content_length`` on them too, reading them as a new message
          head and forgetting the length the body must match.
        - A 204 or 304 response has no content, whatever its content-length says
          (RFC 9110 §6.4.1; a 304's describes the selected representation).
        - A message ended by HEADERS or trailers short of its content-length is
          malformed (§8.1.1); h2 checks the length only on DATA.
        - END_STREAM is applied after the checks, so a malformed block ending a
          stream we had already ended still resets just that stream (§8.1.1).

        - A 1xx on a closed stream raises StreamClosedError, as any other HEADERS
          does there (h2's ``recv_on_closed_stream``; the connection then ignores it
          on a stream we reset, RFC 9113 §5.4.2). h2's transition table has no
          (CLOSED, RECV_INFORMATIONAL_HEADERS) entry, so a 1xx that crossed our
          RST_STREAM was a ProtocolError that ended the whole connection.

        A failed validation (``_validated``) closes just this stream.
        """
        machine = self.state_machine
        if is_informational_response(headers):
            if machine.state is StreamState.CLOSED:
                raise StreamClosedError(self.stream_id)
            if end_stream:
                raise ProtocolError("Cannot set END_STREAM on informational responses")
            events = machine.process_input(StreamInputs.RECV_INFORMATIONAL_HEADERS)
            self.informational_received += 1
            if self.informational_received > MAX_INFORMATIONAL:
                machine.process_input(StreamInputs.SEND_RST_STREAM)
                raise _Malformed(self.stream_id, ErrorCodes.ENHANCE_YOUR_CALM)
        else:
            events = machine.process_input(StreamInputs.RECV_HEADERS)
        event: Any = events[0]  # one of the four header events
        kind = type(event)
        trailer = kind is h2.events.TrailersReceived
        if trailer and not end_stream:
            raise ProtocolError("Trailers must have END_STREAM set")
        if not trailer:
            self._initialize_content_length(headers)
            if kind is h2.events.ResponseReceived and _bodiless_status(headers):
                self._expected_content_length = 0
        expected = self._expected_content_length
        if end_stream and expected is not None and expected != self._actual_content_length:
            machine.process_input(StreamInputs.SEND_RST_STREAM)
            raise _Malformed(self.stream_id)
        event.headers = self._validated(headers, events, header_encoding)
        if end_stream:
            # After the checks (h2 ends the stream first): a malformed block that
            # ends a stream our side had already ended must still find the stream
            # open to reset it (RFC 9113 §8.1.1: a stream error, not h2's
            # STREAM_CLOSED connection error).
            ended = machine.process_input(StreamInputs.RECV_END_STREAM)
            event.stream_ended = ended[0]
            events += ended
        return [], events

    def _validated(self, headers: Any, events: list[Any], header_encoding: Any) -> Any:
        """The received block after h2's validation pipeline (``_process_received_headers``).

        The speed layer replaces this step with a one-pass check of the same verdicts.
        """
        flags = self._build_hdr_validation_flags(events)
        return self._process_received_headers(headers, flags, header_encoding)

    def _process_received_headers(self, *args: Any) -> Any:
        # h2's, with a validation failure closing just this stream. Also h2's path for
        # PUSH_PROMISE blocks (never accepted: ENABLE_PUSH is 0).
        try:
            return super()._process_received_headers(*args)
        except ProtocolError as exc:
            self.state_machine.process_input(StreamInputs.SEND_RST_STREAM)
            raise _Malformed(self.stream_id) from exc

    def _initialize_content_length(self, headers: Any) -> None:
        # h2's, with an invalid content-length closing just this stream (§8.1.1).
        try:
            super()._initialize_content_length(headers)
        except ProtocolError as exc:
            self.state_machine.process_input(StreamInputs.SEND_RST_STREAM)
            raise _Malformed(self.stream_id) from exc

    def send_headers(self, headers: Any, encoder: Any, end_stream: bool = False) -> Any:
        # h2's, except that trailers keep the request method: h2 sets
        # ``request_method`` from every block sent, so a client's request trailers
        # (no :method) would forget HEAD and accept a body on its response.
        method = self.request_method
        frames = super().send_headers(headers, encoder, end_stream)
        if self.request_method is None:
            self.request_method = method
        return frames


class FixedConnection(h2.connection.H2Connection):
    """h2's ``connection.py`` ``H2Connection``, with patches 1-5 (module docstring).

    Every method the transport calls is defined here or by h2; the speed layer
    (``_h2fast.FastConnection``) only makes some of them cheaper.
    """

    #: h2's ``_receive_frame`` trace-logs every frame (an eager ``repr(frame)``);
    #: kept here, switched off by the speed layer.
    _trace_frames = True
    #: The class our streams get (``_begin_new_stream``).
    _stream_class: type[FixedStream] = FixedStream

    def __init__(self, config: h2.config.H2Configuration) -> None:
        super().__init__(config=config)
        # Ours in the place of h2's FrameBuffer (h2 only reads it in ``receive_data``,
        # which we override).
        self.incoming_buffer: FixedFrameBuffer = FixedFrameBuffer(  # type: ignore[assignment]
            server=not config.client_side
        )
        # DATA frames parsed in place go where hyperframe's DataFrame goes (h2's
        # handlers read only the fields InboundData has).
        self._frame_dispatch_table[InboundData] = self._receive_data_frame  # type: ignore[index]
        self.events_before_error: list[h2.events.Event] = []  # owner: reader
        self._prune_at = 64  # owner: as the class
        self._preface_checked = False  # owner: reader: the peer's first frame was SETTINGS
        # owner: reader: the frame buffer's empty_continuations already reported.
        self._empty_continuations = 0
        #: True when ``receive_data`` stopped at ``max_frames``: more may be buffered.
        self.input_pending = False  # owner: reader
        # owner: reader (receive_data); for ConnectionStatistics.
        self.bytes_received = 0
        self.frames_received = 0
        self._primed = b""  # owner: reader: bytes read before h2 (``prime``), read first
        # Reads an oversized header block to its end (patch 5); the speed layer
        # replaces it with a caching one.
        self.decoder = ReadOnDecoder()
        self.decoder.max_header_list_size = self.DEFAULT_MAX_HEADER_LIST_SIZE

    def commit_read(self, n: int) -> None:
        """``n`` bytes were read straight into ``incoming_buffer.read_target()``: the
        next ``receive_data`` (with ``b""``) parses them."""
        self.bytes_received += n
        self.incoming_buffer.commit(n)

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Copy ``data`` into the frame buffer; the next ``receive_data`` (with
        ``b""``) parses it (``receive_data(data)`` in two steps)."""
        if data:
            self.bytes_received += len(data)
            self.incoming_buffer.add_data(data)

    def prime(self, data: bytes) -> None:
        """Bytes a server read before h2 saw the connection (``_sniff``): the next
        ``receive_data`` reads them first (``input_pending`` tells the reader to call
        it without reading the transport). Call before the reader starts."""
        self._primed = data
        self.input_pending = bool(data)

    # -- 1. GOAWAY stays ours --------------------------------------------------------

    def _receive_goaway_frame(self, frame: GoAwayFrame) -> tuple[list[Any], list[Any]]:
        # h2's ``_receive_goaway_frame`` feeds RECV_GOAWAY to the connection state
        # machine (CLOSED) and clears the outbound buffer; ours only reports it.
        return [], [
            GoAwayReceived(frame.error_code, frame.last_stream_id, frame.additional_data or b"")
        ]

    # -- 2. stream limits are ours ---------------------------------------------------

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

        h2 prunes ``self.streams`` only while counting open streams
        (``_open_streams``), which we no longer do. ``stream_id``, a stream the
        transport just closed, is forgotten at once if h2 has closed it too (its
        objects are freed now, not at the next scan); the rest are found by a scan
        (h2's own ``_open_streams``) once the dict has doubled since the last one, so
        the cost per stream stays constant. Either way h2 remembers how each stream
        closed (``_closed_streams``), to answer late frames as it would.
        """
        stream = self.streams.get(stream_id)
        if stream is not None and stream.closed:
            del self.streams[stream_id]
            self._closed_streams[stream_id] = stream.closed_by
        if len(self.streams) >= self._prune_at:
            remaining = self._open_streams(0) + self._open_streams(1)
            self._prune_at = max(64, 2 * remaining)

    def send_headers(
        self,
        stream_id: int,
        headers: Any,
        end_stream: bool = False,
        priority_weight: int | None = None,
        priority_depends_on: int | None = None,
        priority_exclusive: bool | None = None,
    ) -> None:
        """h2's ``send_headers``; a stream forgotten by ``prune_closed_streams`` is closed.

        h2 would try to open it again and raise StreamIDTooLowError; its other calls
        say StreamClosedError for such a stream (``_get_stream_by_id``).
        """
        self._check_not_forgotten(stream_id)
        super().send_headers(
            stream_id, headers, end_stream, priority_weight, priority_depends_on, priority_exclusive
        )

    def send_data(
        self,
        stream_id: int,
        data: bytes | memoryview,
        end_stream: bool = False,
        pad_length: Any = None,
    ) -> None:
        """h2's ``send_data``; a stream forgotten by ``prune_closed_streams`` is closed.

        For an empty frame (an END_STREAM alone) h2 >= 4.4 skips the window lookup
        that goes through ``_get_stream_by_id``, and reads ``self.streams`` directly:
        a forgotten stream raised KeyError there. Loopy can hold such a frame for a
        stream already forgotten: it was queued before the peer's RST_STREAM reached
        the reader, which closes the stream, and h2 forgets it
        (``ConnectionCore.stream_closed``) before loopy gets to the frame.
        """
        if stream_id not in self.streams:
            self._check_not_forgotten(stream_id)
        super().send_data(stream_id, data, end_stream, pad_length)

    def _check_not_forgotten(self, stream_id: int) -> None:
        if stream_id in self.streams:
            return
        outbound = self._stream_id_is_outbound(stream_id)
        highest = self.highest_outbound_stream_id if outbound else self.highest_inbound_stream_id
        if stream_id <= highest:
            raise StreamClosedError(stream_id)

    def _begin_new_stream(self, stream_id: int, allowed_ids: Any) -> Any:
        # h2's, with the stream turned into our class (patch 5).
        stream = super()._begin_new_stream(stream_id, allowed_ids)
        stream.__class__ = self._stream_class
        return stream

    # -- 3. events survive a protocol error; 4. RFC details h2 misses ---------------

    def receive_data(self, data: Any, max_frames: int = 0) -> list[h2.events.Event]:
        """h2's ``receive_data``, frame by frame, keeping events seen before an error.

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
        if self._primed:
            self.bytes_received += len(self._primed)
            self.incoming_buffer.add_data(self._primed)
            self._primed = b""
        if data:
            self.bytes_received += len(data)
            self.incoming_buffer.add_data(data)
        buffer = self.incoming_buffer
        buffer.max_frame_size = self.max_inbound_frame_size
        count = 0
        try:
            for frame in buffer:
                if not self._preface_checked:
                    if not isinstance(frame, SettingsFrame) or "ACK" in frame.flags:
                        raise ProtocolError("the peer's preface must start with SETTINGS")
                    self._preface_checked = True
                # The speed layer's usual DATA frame without h2's dispatch
                # (``_receive_frame``): its event; None for any other frame, which
                # takes h2's dispatch. (Our frame buffer's frames are hyperframe's,
                # and InboundData for DATA.)
                event = self._data_event(frame) if frame.__class__ is InboundData else None
                if event is not None:
                    events.append(event)
                else:
                    events.extend(self._receive_frame(frame))
                if buffer.empty_continuations != self._empty_continuations:
                    # The block this frame completed had empty CONTINUATIONs (some
                    # may have arrived in earlier reads).
                    sid = frame.stream_id
                    events.extend(
                        IgnoredFrameReceived("empty_continuations", sid)
                        for _ in range(buffer.empty_continuations - self._empty_continuations)
                    )
                    self._empty_continuations = buffer.empty_continuations
                count += 1
                if count == max_frames:
                    self.input_pending = True
                    break
        except ProtocolError as e:
            # A header list over READ_ON_FACTOR times our limit (h2's
            # DenialOfServiceError) stays a connection error: the decoder stopped
            # mid-block, so its dynamic table is out of step (module docstring,
            # patch 5).
            if type(e) is ProtocolError and isinstance(e.__cause__, _HPACK_FAILURES):
                e.error_code = ErrorCodes.COMPRESSION_ERROR  # RFC 9113 §4.3
            self._terminate_connection(e.error_code)
            raise
        finally:
            self.frames_received += count
        self.events_before_error = []
        return events

    def _data_event(self, frame: InboundData) -> h2.events.DataReceived | None:
        """The speed layer's (``_h2fast.py``) usual DATA frame handled in one call, or
        None: here always None (every frame takes h2's dispatch)."""
        return None

    def _receive_frame(self, frame: Any) -> list[h2.events.Event]:
        # h2's ``_receive_frame``, ignoring frames on a stream *we* reset: RFC 9113
        # §5.1 says an endpoint MUST ignore them (h2 answers each with another
        # RST_STREAM). After the peer's RST_STREAM a frame is still a stream error
        # STREAM_CLOSED (h2's answer), and after END_STREAM a connection error.
        if self._trace_frames:
            self.config.logger.trace("Received frame: %s", repr(frame))
        events: list[h2.events.Event]
        try:
            to_send, events = self._frame_dispatch_table[frame.__class__](frame)
        except StreamClosedError as e:
            # e._events holds the StreamReset of a reset this very frame caused
            # (h2's reset_stream_on_error, which also marks the stream as closed by
            # SEND_RST_STREAM): that RST_STREAM must go out. Without one, the frame
            # arrived on a stream already closed.
            closed_by = self._stream_closed_by(e.stream_id)
            if closed_by is StreamClosedBy.SEND_RST_STREAM and not e._events:
                events = []
            elif closed_by in (StreamClosedBy.SEND_RST_STREAM, StreamClosedBy.RECV_RST_STREAM):
                self._data_to_send += frames.serialize_rst_stream(e.stream_id, e.error_code)
                events = e._events
            else:
                raise
        except StreamIDTooLowError as e:
            closed_by = self._stream_closed_by(e.stream_id)
            if closed_by is StreamClosedBy.SEND_RST_STREAM:
                events = []
            elif closed_by is StreamClosedBy.RECV_RST_STREAM:
                self._data_to_send += frames.serialize_rst_stream(
                    e.stream_id, ErrorCodes.STREAM_CLOSED
                )
                events = []
            elif self._stream_is_closed_by_end(e.stream_id):
                raise StreamClosedError(e.stream_id) from e
            else:
                raise
        else:
            if to_send:
                self._prepare_for_sending(to_send)
        return events

    def _handle_data_on_closed_stream(
        self, events: list[Any], exc: StreamClosedError, frame: DataFrame
    ) -> tuple[list[Any], list[Any]]:
        # RFC 9113 §5.1 (closed): frames after the peer's END_STREAM are a connection
        # error STREAM_CLOSED (h2's ``_handle_data_on_closed_stream`` answers every
        # case with RST_STREAM); after the peer's RST_STREAM, a stream error (h2's
        # answer); after ours, ignored (only the connection window is credited).
        if self._stream_is_closed_by_end(frame.stream_id):
            raise StreamClosedError(frame.stream_id)
        frames, new_events = super()._handle_data_on_closed_stream(events, exc, frame)
        closed_by = self._stream_closed_by(frame.stream_id)
        if closed_by is StreamClosedBy.SEND_RST_STREAM and not exc._events:
            frames = [f for f in frames if not isinstance(f, RstStreamFrame)]
        return frames, new_events

    # -- 5. one malformed message does not kill the connection ----------------------

    def _receive_headers_frame(self, frame: Any) -> tuple[list[Any], list[Any]]:
        # h2's, answering ``FixedStream``'s ``_Malformed`` with RST_STREAM (its code,
        # PROTOCOL_ERROR unless said otherwise), and a header list over our limit
        # with ``_header_list_too_large``.
        sid = frame.stream_id
        # (Stream parity first: it fails at once for every stream the client opened,
        # before the role is read through h2's config descriptor.)
        if not sid & 1 and sid and self.config.client_side and sid not in self.streams:
            # RFC 9113 §5.1.1, §8.4: a server opens even streams only by PUSH_PROMISE,
            # which we disable; h2 would take the block as a new stream and reset it.
            raise ProtocolError(f"the server sent HEADERS on stream {sid}, which nobody opened")
        try:
            result: tuple[list[Any], list[Any]] = super()._receive_headers_frame(frame)
        except _Malformed as bad:
            rst = RstStreamFrame(bad.stream_id)
            rst.error_code = bad.error_code
            event = h2.events.StreamReset(
                stream_id=bad.stream_id, error_code=bad.error_code, remote_reset=False
            )
            return [rst], [event]
        except DenialOfServiceError as exc:
            if not isinstance(exc.__cause__, HeaderListTooLarge):
                raise  # the decoder stopped mid-block: its table is out of step
            return self._header_list_too_large(frame)
        return result

    def _receive_priority_frame(self, frame: Any) -> tuple[list[Any], list[Any]]:
        # h2's, which also reads the priority fields of a HEADERS frame: a PRIORITY
        # frame's PriorityUpdated becomes PriorityFrameReceived, for the flood count.
        frames, events = super()._receive_priority_frame(frame)
        if type(frame) is PriorityFrame:
            events = [
                PriorityFrameReceived(frame.stream_id)
                if isinstance(ev, h2.events.PriorityUpdated)
                else ev
                for ev in events
            ]
        return frames, events

    def _receive_alt_svc_frame(self, frame: Any) -> tuple[list[Any], list[Any]]:
        # h2's (a server ignores ALTSVC; a client reports it), and the flood count.
        frames, events = super()._receive_alt_svc_frame(frame)
        return frames, [*events, IgnoredFrameReceived("altsvc", frame.stream_id)]

    def _receive_unknown_frame(self, frame: Any) -> tuple[list[Any], list[Any]]:
        # h2's ignores it (RFC 9113 §5.5) with a debug log and an UnknownFrameReceived
        # holding the frame; this one only counts it.
        kind = "priority_updates" if frame.type == _PRIORITY_UPDATE else "unknown_frames"
        return [], [IgnoredFrameReceived(kind, frame.stream_id)]

    def _header_list_too_large(self, frame: Any) -> tuple[list[Any], list[Any]]:
        """The block on ``frame.stream_id`` was decoded whole (the dynamic table is in
        step) but its header list is over our SETTINGS_MAX_HEADER_LIST_SIZE.

        RFC 9113 §10.5.1: "A server that receives a larger header section than it is
        willing to handle can send an HTTP 431 (Request Header Fields Too Large)
        status code"; a client "can discard responses that it cannot process". So a
        server answers a new request with ``HEADER_LIST_TOO_LARGE_RESPONSE``
        (END_STREAM), then RST_STREAM(NO_ERROR) if the request is still open (§8.1:
        the rest of it is not needed); no handler ever sees it. Any other block (a
        response, informational response or trailers) gets RST_STREAM
        (ENHANCE_YOUR_CALM) and a StreamReset event, as for a malformed block.
        """
        sid = frame.stream_id
        events: list[Any] = self.state_machine.process_input(ConnectionInputs.RECV_HEADERS)
        stream = self._get_or_create_stream(sid, AllowedStreamIDs(not self.config.client_side))
        machine = stream.state_machine
        if not self.config.client_side and machine.state == StreamState.IDLE:
            machine.process_input(StreamInputs.RECV_HEADERS)  # RequestReceived, dropped
            if "END_STREAM" in frame.flags:
                machine.process_input(StreamInputs.RECV_END_STREAM)
            self.send_headers(sid, HEADER_LIST_TOO_LARGE_RESPONSE, end_stream=True)
            if stream.closed:  # the request had ended too
                return [], events
            self.state_machine.process_input(ConnectionInputs.SEND_RST_STREAM)
            return stream.reset_stream(ErrorCodes.NO_ERROR), events
        code = ErrorCodes.ENHANCE_YOUR_CALM
        machine.process_input(StreamInputs.SEND_RST_STREAM)
        rst = RstStreamFrame(sid)
        rst.error_code = code
        events.append(h2.events.StreamReset(stream_id=sid, error_code=code, remote_reset=False))
        return [rst], events

    def _receive_rst_stream_frame(self, frame: RstStreamFrame) -> tuple[list[Any], list[Any]]:
        # RFC 9113 §6.4: "If a RST_STREAM frame identifying an idle stream is received,
        # the recipient MUST treat this as a connection error of type PROTOCOL_ERROR."
        # h2's ``_receive_rst_stream_frame`` ignores a RST_STREAM on a stream it does
        # not know: a stream it forgot (closed, or pruned) is fine, but one above the
        # highest id the sender could have used is idle.
        sid = frame.stream_id
        if sid not in self.streams:
            outbound = self._stream_id_is_outbound(sid)
            highest = (
                self.highest_outbound_stream_id if outbound else self.highest_inbound_stream_id
            )
            if sid > highest:
                raise ProtocolError(f"RST_STREAM on idle stream {sid}")
        result: tuple[list[Any], list[Any]] = super()._receive_rst_stream_frame(frame)
        return result

    def _receive_data_frame(self, frame: DataFrame) -> tuple[list[Any], list[Any]]:
        # RFC 9113 §8.1.1: a body longer than its content-length (or, at END_STREAM,
        # shorter; a HEAD response's body is expected empty, RFC 9110 §9.3.2) is a
        # malformed message: a stream error PROTOCOL_ERROR. h2's
        # ``_receive_data_frame`` raises InvalidBodyLengthError, a connection error,
        # after the stream consumed the frame's window: close just the stream and
        # answer as for DATA on a stream we reset (h2's
        # ``_handle_data_on_closed_stream``: the connection window is credited,
        # RST_STREAM goes out).
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

    # -- helpers for loopy -----------------------------------------------------------

    def pending_bytes(self) -> int:
        """Bytes h2 has framed and loopy has not yet taken."""
        return len(self._data_to_send)

    def take_outbound(self) -> bytearray:
        """h2's ``data_to_send()`` without its copy: the outbound buffer itself (h2
        starts a new one). The caller owns what it gets."""
        data = self._data_to_send
        self._data_to_send = bytearray()
        return data

    def frame_data(self, stream_id: int, length: int, end_stream: bool) -> bytes | bytearray:
        """h2's ``send_data`` for a ``length``-byte payload the caller writes itself.

        The same checks (the stream is open, ``length`` fits the flow-control
        windows and the peer's SETTINGS_MAX_FRAME_SIZE), state transitions and
        window accounting as h2's ``send_data`` without padding (and its
        ``H2Stream.send_data``), in the same order; the frame's 9-byte header is
        appended to the outbound buffer, which is then handed over as by
        :meth:`take_outbound` (when that buffer is empty, the header alone is
        returned and the buffer stays): the caller must write the ``length`` payload bytes
        right after it, before anything h2 frames next. No hyperframe object, and no
        copy of the payload (h2 copies it into its buffer, a memoryview twice).
        ``tests/test_zero_copy.py`` compares it with h2's ``send_data`` on random
        schedules. ``length`` must be >= 1 (an empty DATA takes h2's own path).
        """
        stream = self.streams.get(stream_id)
        if stream is None:
            stream = self._get_stream_by_id(stream_id)  # raises as h2's lookup does
        window = self.outbound_flow_control_window
        if stream.outbound_flow_control_window < window:
            window = stream.outbound_flow_control_window
        if length > window:
            raise FlowControlError(f"Cannot send {length} bytes, flow control window is {window}")
        if length > self.max_outbound_frame_size:
            raise FrameTooLargeError(
                f"Cannot send frame size {length}, max frame size is {self.max_outbound_frame_size}"
            )
        # In the open states the SEND_DATA transitions keep the state and do nothing
        # else, so they are skipped; any other state takes the transition (and its
        # error). tests/test_h2_guard.py checks that the tables (h2's connection
        # table, and both stream tables: h2's and ours, _h2/streamstates.py) say so.
        conn_state = self.state_machine.state
        if conn_state is not _CLIENT_OPEN and conn_state is not _SERVER_OPEN:
            self.state_machine.process_input(ConnectionInputs.SEND_DATA)
        machine = stream.state_machine
        state = machine.state
        if state is not _OPEN and state is not _HALF_CLOSED_REMOTE:
            machine.process_input(StreamInputs.SEND_DATA)
        if end_stream:
            machine.process_input(StreamInputs.SEND_END_STREAM)
        stream.outbound_flow_control_window -= length
        self.outbound_flow_control_window -= length
        header = frames.data_header(length, stream_id, end_stream)
        data = self._data_to_send
        if not data:
            return header  # the usual case: no new buffer, no copy of the header
        data += header
        self._data_to_send = bytearray()
        return data
