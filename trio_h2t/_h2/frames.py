"""HTTP/2 frames: the codec of RFC 9113 §4 (the frame format) and §6 (the frame types).

Holds no state: pure functions from bytes to records and from fields to bytes,
and the records and errors they use. Nothing here is owned by a task; the caller
owns the buffer it hands in.

Theory of operation
-------------------
Parsing happens where the bytes lie. The caller keeps a buffer (the reader's frame
buffer, ``_h2fixes.FixedFrameBuffer``) and asks, at an offset:

1. :func:`parse_frame_header`: the 9-byte header as ``(length, type, flags,
   stream_id)``, the reserved bit of the stream id dropped (§4.1: "MUST be ignored
   when receiving");
2. :func:`check_frame_header`: the rules a header alone decides, raised as the
   connection errors they are: a frame over our SETTINGS_MAX_FRAME_SIZE (§4.2,
   before its payload is buffered), a stream id where the type forbids one or none
   where it needs one (§6.1-§6.10), SETTINGS with ACK and a payload (§6.5);
3. once ``length`` more bytes are there, :func:`parse_payload`: the type's payload
   as an immutable record (a ``NamedTuple``: cheap to build, a tuple underneath),
   with the length and padding rules of each type (§6). DATA's payload is a
   ``memoryview`` of the caller's buffer, not a copy: the caller decides whether
   to copy it (a view is only good until the buffer's bytes are reused). Every
   other payload (header block fragments, debug data, opaque data) is copied into
   ``bytes``, since it may outlive the buffer (a header block waits for its
   CONTINUATION frames across reads).

:func:`parse_frame` strings the three together for a buffer that holds whole
frames (tests, benchmarks).

Errors: :class:`FrameError` and its kinds carry the HTTP/2 error code of the
connection error (§5.4.1): :class:`FrameSizeError` (FRAME_SIZE_ERROR; its kind
:class:`FrameTooLarge` for §4.2's limit) and :class:`FrameProtocolError`
(PROTOCOL_ERROR). Where RFC 9113 makes a rule a *stream* error (a PRIORITY of the
wrong length, §6.3; a WINDOW_UPDATE of 0 on a stream, §6.9) this codec, like
h2 and hyperframe, makes it a connection error. XX: the connection module may
narrow those to the stream.

Where this codec and hyperframe differ, this codec follows RFC 9113 and
``tests/test_h2_frames.py`` says so case by case: padding that leaves a HEADERS
or PUSH_PROMISE fragment empty is valid, padding that runs into the fields
before the fragment is not (§6.2, §6.6; hyperframe is off by one both ways); the
reserved bit of a WINDOW_UPDATE increment, a GOAWAY's last stream id and a
PUSH_PROMISE's promised stream id is ignored (§6.9, §6.8, §6.6); a SETTINGS ACK
with a payload is a FRAME_SIZE_ERROR (§6.5).

Serializing is plain: one function per frame type we send, each returning the
frame's bytes. The two hot ones write less: :func:`data_header` frames only DATA's
9-byte header, so that the payload is written from the caller's buffer (loopy's
zero-copy path), and :func:`append_headers` appends a field block's HEADERS and
CONTINUATION frames to the caller's buffer (h2's, in the fast layer) instead of
returning them.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from typing import NamedTuple, TypeAlias

__all__ = [
    "ACK",
    "ALTSVC",
    "CONTINUATION",
    "DATA",
    "END_HEADERS",
    "END_STREAM",
    "FRAME_SIZE_ERROR",
    "GOAWAY",
    "HEADERS",
    "MAX_FRAME_SIZE_LIMIT",
    "PADDED",
    "PING",
    "PRIORITY",
    "PRIORITY_FLAG",
    "PROTOCOL_ERROR",
    "PUSH_PROMISE",
    "RST_STREAM",
    "SETTINGS",
    "SETTINGS_ACK",
    "WINDOW_UPDATE",
    "AltSvc",
    "Continuation",
    "Data",
    "Frame",
    "FrameError",
    "FrameProtocolError",
    "FrameSizeError",
    "FrameTooLarge",
    "GoAway",
    "Headers",
    "Ping",
    "Priority",
    "PushPromise",
    "RstStream",
    "Settings",
    "Unknown",
    "WindowUpdate",
    "append_headers",
    "check_frame_header",
    "data_bounds",
    "data_header",
    "frame_header",
    "parse_frame",
    "parse_frame_header",
    "parse_payload",
    "serialize_data",
    "serialize_goaway",
    "serialize_headers",
    "serialize_ping",
    "serialize_rst_stream",
    "serialize_settings",
    "serialize_window_update",
]

#: What the parsers read: anything indexable by byte with the buffer protocol.
Buffer: TypeAlias = bytes | bytearray | memoryview

# -- the registry: frame types (§6; ALTSVC is RFC 7838 §4), flags, error codes ------

DATA = 0x0
HEADERS = 0x1
PRIORITY = 0x2
RST_STREAM = 0x3
SETTINGS = 0x4
PUSH_PROMISE = 0x5
PING = 0x6
GOAWAY = 0x7
WINDOW_UPDATE = 0x8
CONTINUATION = 0x9
ALTSVC = 0xA

END_STREAM = 0x1  # DATA, HEADERS
ACK = 0x1  # SETTINGS, PING
END_HEADERS = 0x4  # HEADERS, PUSH_PROMISE, CONTINUATION
PADDED = 0x8  # DATA, HEADERS, PUSH_PROMISE
PRIORITY_FLAG = 0x20  # HEADERS

PROTOCOL_ERROR = 0x1  # §7
FRAME_SIZE_ERROR = 0x6  # §7

#: §4.2: the largest frame length the 24-bit field and SETTINGS_MAX_FRAME_SIZE allow.
MAX_FRAME_SIZE_LIMIT = (1 << 24) - 1

_NAMES = (
    "DATA",
    "HEADERS",
    "PRIORITY",
    "RST_STREAM",
    "SETTINGS",
    "PUSH_PROMISE",
    "PING",
    "GOAWAY",
    "WINDOW_UPDATE",
    "CONTINUATION",
)
#: By type (§6.1-§6.10): 1 needs a stream id, -1 must be on stream 0, 0 either.
_STREAM_RULE = (1, 1, 1, 1, -1, 1, -1, -1, 0, 1)

_HEADER = struct.Struct(">HBBBL")  # the length as 16 + 8 bits, type, flags, stream id
_DATA_HEADER = struct.Struct(">HBxBL")  # the same with type 0
_PRIORITY_FIELDS = struct.Struct(">LB")  # E + Stream Dependency, Weight (§6.3)
_U32 = struct.Struct(">L")
_U32X2 = struct.Struct(">LL")
_SETTING = struct.Struct(">HL")
_U16 = struct.Struct(">H")


# -- errors ---------------------------------------------------------------------------


class FrameError(Exception):
    """A frame breaks a rule of RFC 9113 §4 or §6: a connection error (§5.4.1) of
    type ``error_code``. Not raised itself: one of its kinds is."""

    error_code = PROTOCOL_ERROR


class FrameSizeError(FrameError):
    """A frame's length is wrong for its type (§4.2): FRAME_SIZE_ERROR."""

    error_code = FRAME_SIZE_ERROR


class FrameTooLarge(FrameSizeError):
    """A frame is longer than our SETTINGS_MAX_FRAME_SIZE (§4.2): FRAME_SIZE_ERROR,
    decided from the frame's header before its payload is buffered."""


class FrameProtocolError(FrameError):
    """A frame's stream id, padding or a field's value breaks §6: PROTOCOL_ERROR."""

    error_code = PROTOCOL_ERROR


# -- records: one per frame type; ``flags`` is the header's flag byte as sent -------


class Data(NamedTuple):
    """DATA (§6.1). ``data`` is the payload without padding, a view of the parsed
    buffer; ``flow_controlled_length`` is the whole payload (padding and the Pad
    Length octet included), what the frame takes from the flow-control windows."""

    stream_id: int
    flags: int
    data: memoryview
    pad_length: int
    flow_controlled_length: int


class Headers(NamedTuple):
    """HEADERS (§6.2): a field block fragment, with the priority fields (deprecated,
    §5.3.2) as parsed when PRIORITY is set, else zeros."""

    stream_id: int
    flags: int
    fragment: bytes
    pad_length: int = 0
    exclusive: bool = False
    depends_on: int = 0
    weight: int = 0


class Priority(NamedTuple):
    """PRIORITY (§6.3; deprecated, parsed for its length rule and its stream id)."""

    stream_id: int
    flags: int
    exclusive: bool
    depends_on: int
    weight: int


class RstStream(NamedTuple):
    """RST_STREAM (§6.4)."""

    stream_id: int
    flags: int
    error_code: int


class Settings(NamedTuple):
    """SETTINGS (§6.5): ``settings`` in the order sent, repeats kept (the last value
    of an identifier is the one that holds, §6.5.3)."""

    stream_id: int
    flags: int
    settings: tuple[tuple[int, int], ...]


class PushPromise(NamedTuple):
    """PUSH_PROMISE (§6.6)."""

    stream_id: int
    flags: int
    promised_stream_id: int
    fragment: bytes
    pad_length: int = 0


class Ping(NamedTuple):
    """PING (§6.7): eight opaque octets."""

    stream_id: int
    flags: int
    opaque_data: bytes


class GoAway(NamedTuple):
    """GOAWAY (§6.8)."""

    stream_id: int
    flags: int
    last_stream_id: int
    error_code: int
    debug_data: bytes


class WindowUpdate(NamedTuple):
    """WINDOW_UPDATE (§6.9): ``increment`` from 1 to 2**31 - 1."""

    stream_id: int
    flags: int
    increment: int


class Continuation(NamedTuple):
    """CONTINUATION (§6.10)."""

    stream_id: int
    flags: int
    fragment: bytes


class AltSvc(NamedTuple):
    """ALTSVC (RFC 7838 §4), which h2 reports; parsed for its length rule."""

    stream_id: int
    flags: int
    origin: bytes
    field: bytes


class Unknown(NamedTuple):
    """A frame of a type this codec does not know (§5.5: to be ignored)."""

    stream_id: int
    flags: int
    type: int
    payload: bytes


Frame: TypeAlias = (
    Data
    | Headers
    | Priority
    | RstStream
    | Settings
    | PushPromise
    | Ping
    | GoAway
    | WindowUpdate
    | Continuation
    | AltSvc
    | Unknown
)


# -- parsing --------------------------------------------------------------------------


def parse_frame_header(buf: Buffer, offset: int) -> tuple[int, int, int, int]:
    """The 9-byte frame header at ``offset`` as ``(length, type, flags, stream_id)``,
    the stream id's reserved bit dropped (§4.1). ``buf`` must hold the 9 bytes."""
    high, low, kind, flags, stream_id = _HEADER.unpack_from(buf, offset)
    return high << 8 | low, kind, flags, stream_id & 0x7FFFFFFF


def check_frame_header(
    length: int, kind: int, flags: int, stream_id: int, max_frame_size: int
) -> None:
    """Raise the :class:`FrameError` a frame's header alone shows (module docstring):
    its length over ``max_frame_size`` (our SETTINGS_MAX_FRAME_SIZE, §4.2), SETTINGS
    with ACK and a payload (§6.5), a stream id its type forbids or needs (§6)."""
    if length > max_frame_size:
        raise FrameTooLarge(
            f"frame of {length} bytes, over our SETTINGS_MAX_FRAME_SIZE {max_frame_size}"
        )
    if kind == SETTINGS and flags & ACK and length:
        raise FrameSizeError(f"SETTINGS with ACK and a payload of {length} bytes")
    if kind < len(_STREAM_RULE):
        rule = _STREAM_RULE[kind]
        if rule > 0 and not stream_id:
            raise FrameProtocolError(f"{_NAMES[kind]} on stream 0")
        if rule < 0 and stream_id:
            raise FrameProtocolError(f"{_NAMES[kind]} on stream {stream_id}, not 0")


def _pad_length(buf: Buffer, start: int, length: int, kind: str) -> int:
    # The Pad Length octet at ``start`` of a padded frame's payload (§6.1, §6.2, §6.6).
    if not length:
        raise FrameSizeError(f"padded {kind} without its Pad Length")
    return buf[start]


def data_bounds(buf: Buffer, start: int, length: int, flags: int) -> tuple[int, int, int]:
    """Where the data of the DATA payload of ``length`` bytes at ``start`` lies, as
    ``(first, end, pad_length)`` (§6.1): the per-frame hot path of :func:`parse_data`,
    for a caller that slices ``buf`` itself. Padding as long as the payload (or
    longer) is a PROTOCOL_ERROR."""
    if not flags & PADDED:
        return start, start + length, 0
    pad = _pad_length(buf, start, length, "DATA")
    if pad >= length:
        raise FrameProtocolError(f"DATA padding of {pad} bytes in a {length}-byte payload")
    return start + 1, start + length - pad, pad


def parse_data(buf: Buffer, start: int, length: int, flags: int, stream_id: int) -> Data:
    """DATA's payload of ``length`` bytes at ``start`` (§6.1): the data a view of
    ``buf`` (:func:`data_bounds`)."""
    first, end, pad = data_bounds(buf, start, length, flags)
    return Data(stream_id, flags, memoryview(buf)[first:end], pad, length)


def parse_headers(buf: Buffer, start: int, length: int, flags: int, stream_id: int) -> Headers:
    """HEADERS' payload (§6.2): a frame too short for its Pad Length and priority
    fields is a FRAME_SIZE_ERROR; padding longer than what follows them a
    PROTOCOL_ERROR (padding that takes all of it leaves an empty fragment: valid)."""
    end = start + length
    pad = 0
    if flags & PADDED:
        pad = _pad_length(buf, start, length, "HEADERS")
        start += 1
    exclusive = False
    depends_on = weight = 0
    if flags & PRIORITY_FLAG:
        if end - start < 5:
            raise FrameSizeError(f"HEADERS of {length} bytes, too short for its priority fields")
        depends_on, weight = _PRIORITY_FIELDS.unpack_from(buf, start)
        exclusive = depends_on >> 31 == 1
        depends_on &= 0x7FFFFFFF
        start += 5
    if pad > end - start:
        raise FrameProtocolError(
            f"HEADERS padding of {pad} bytes, but {end - start} follow its fields"
        )
    fragment = bytes(buf[start : end - pad])
    return Headers(stream_id, flags, fragment, pad, exclusive, depends_on, weight)


def parse_priority(buf: Buffer, start: int, length: int, flags: int, stream_id: int) -> Priority:
    """PRIORITY's payload (§6.3): exactly 5 bytes."""
    if length != 5:
        raise FrameSizeError(f"PRIORITY of {length} bytes, not 5")
    depends_on, weight = _PRIORITY_FIELDS.unpack_from(buf, start)
    return Priority(stream_id, flags, depends_on >> 31 == 1, depends_on & 0x7FFFFFFF, weight)


def parse_rst_stream(buf: Buffer, start: int, length: int, flags: int, stream_id: int) -> RstStream:
    """RST_STREAM's payload (§6.4): exactly 4 bytes."""
    if length != 4:
        raise FrameSizeError(f"RST_STREAM of {length} bytes, not 4")
    return RstStream(stream_id, flags, _U32.unpack_from(buf, start)[0])


def parse_settings(buf: Buffer, start: int, length: int, flags: int, stream_id: int) -> Settings:
    """SETTINGS' payload (§6.5): 6-byte entries; an ACK carries none."""
    if flags & ACK and length:
        raise FrameSizeError(f"SETTINGS with ACK and a payload of {length} bytes")
    if length % 6:
        raise FrameSizeError(f"SETTINGS of {length} bytes, not a multiple of 6")
    entries = tuple(_SETTING.iter_unpack(memoryview(buf)[start : start + length]))
    return Settings(stream_id, flags, entries)


def parse_push_promise(
    buf: Buffer, start: int, length: int, flags: int, stream_id: int
) -> PushPromise:
    """PUSH_PROMISE's payload (§6.6): the promised stream id must be a server's
    (even, not 0); padding as in HEADERS."""
    end = start + length
    pad = 0
    if flags & PADDED:
        pad = _pad_length(buf, start, length, "PUSH_PROMISE")
        start += 1
    if end - start < 4:
        raise FrameSizeError(f"PUSH_PROMISE of {length} bytes, too short for its stream id")
    promised = _U32.unpack_from(buf, start)[0] & 0x7FFFFFFF
    start += 4
    if not promised or promised & 1:
        raise FrameProtocolError(f"PUSH_PROMISE of stream {promised}")
    if pad > end - start:
        raise FrameProtocolError(
            f"PUSH_PROMISE padding of {pad} bytes, but {end - start} follow its fields"
        )
    return PushPromise(stream_id, flags, promised, bytes(buf[start : end - pad]), pad)


def parse_ping(buf: Buffer, start: int, length: int, flags: int, stream_id: int) -> Ping:
    """PING's payload (§6.7): exactly 8 bytes."""
    if length != 8:
        raise FrameSizeError(f"PING of {length} bytes, not 8")
    return Ping(stream_id, flags, bytes(buf[start : start + 8]))


def parse_goaway(buf: Buffer, start: int, length: int, flags: int, stream_id: int) -> GoAway:
    """GOAWAY's payload (§6.8): at least 8 bytes; the rest is debug data."""
    if length < 8:
        raise FrameSizeError(f"GOAWAY of {length} bytes, fewer than 8")
    last, code = _U32X2.unpack_from(buf, start)
    debug = bytes(buf[start + 8 : start + length])
    return GoAway(stream_id, flags, last & 0x7FFFFFFF, code, debug)


def parse_window_update(
    buf: Buffer, start: int, length: int, flags: int, stream_id: int
) -> WindowUpdate:
    """WINDOW_UPDATE's payload (§6.9): exactly 4 bytes, an increment of 1 or more
    once its reserved bit is ignored."""
    if length != 4:
        raise FrameSizeError(f"WINDOW_UPDATE of {length} bytes, not 4")
    increment = _U32.unpack_from(buf, start)[0] & 0x7FFFFFFF
    if not increment:
        raise FrameProtocolError(f"WINDOW_UPDATE of 0 on stream {stream_id}")
    return WindowUpdate(stream_id, flags, increment)


def parse_continuation(
    buf: Buffer, start: int, length: int, flags: int, stream_id: int
) -> Continuation:
    """CONTINUATION's payload (§6.10): a fragment, possibly empty."""
    return Continuation(stream_id, flags, bytes(buf[start : start + length]))


def parse_altsvc(buf: Buffer, start: int, length: int, flags: int, stream_id: int) -> AltSvc:
    """ALTSVC's payload (RFC 7838 §4): a 2-byte origin length, the origin, the field."""
    if length < 2:
        raise FrameSizeError(f"ALTSVC of {length} bytes, too short for its origin length")
    origin_length = _U16.unpack_from(buf, start)[0]
    if 2 + origin_length > length:
        raise FrameSizeError(f"ALTSVC origin of {origin_length} bytes in {length}")
    origin = bytes(buf[start + 2 : start + 2 + origin_length])
    return AltSvc(stream_id, flags, origin, bytes(buf[start + 2 + origin_length : start + length]))


_PARSERS: tuple[Callable[[Buffer, int, int, int, int], Frame], ...] = (
    parse_data,
    parse_headers,
    parse_priority,
    parse_rst_stream,
    parse_settings,
    parse_push_promise,
    parse_ping,
    parse_goaway,
    parse_window_update,
    parse_continuation,
    parse_altsvc,
)


def parse_payload(
    buf: Buffer, start: int, length: int, kind: int, flags: int, stream_id: int
) -> Frame:
    """The payload of ``length`` bytes at ``start`` of a frame whose header said
    ``kind``, ``flags``, ``stream_id`` (and passed :func:`check_frame_header`), as
    its record; raises the :class:`FrameError` of a payload that breaks its type's
    rules. An unknown type is an :class:`Unknown` (§5.5)."""
    if kind < len(_PARSERS):
        return _PARSERS[kind](buf, start, length, flags, stream_id)
    return Unknown(stream_id, flags, kind, bytes(buf[start : start + length]))


def parse_frame(
    buf: Buffer, offset: int = 0, max_frame_size: int = MAX_FRAME_SIZE_LIMIT
) -> tuple[Frame, int] | None:
    """The frame at ``offset`` and the offset after it, or None if ``buf`` does not
    hold all of it yet. The header's errors are raised as soon as its 9 bytes are
    there, the payload's once the payload is."""
    if len(buf) - offset < 9:
        return None
    length, kind, flags, stream_id = parse_frame_header(buf, offset)
    check_frame_header(length, kind, flags, stream_id, max_frame_size)
    end = offset + 9 + length
    if len(buf) < end:
        return None
    return parse_payload(buf, offset + 9, length, kind, flags, stream_id), end


# -- serializing ----------------------------------------------------------------------


def frame_header(length: int, kind: int, flags: int, stream_id: int) -> bytes:
    """A frame's 9-byte header (§4.1), the reserved bit unset."""
    return _HEADER.pack(length >> 8, length & 0xFF, kind, flags, stream_id & 0x7FFFFFFF)


def data_header(length: int, stream_id: int, end_stream: bool) -> bytes:
    """The 9-byte header of an unpadded DATA frame of ``length`` bytes (§6.1): the
    payload goes right after it, from the caller's own buffer."""
    return _DATA_HEADER.pack(length >> 8, length & 0xFF, END_STREAM if end_stream else 0, stream_id)


def serialize_data(stream_id: int, data: Buffer, end_stream: bool = False) -> bytes:
    """A whole unpadded DATA frame (tests and benchmarks; loopy uses :func:`data_header`)."""
    return data_header(len(data), stream_id, end_stream) + bytes(data)


def serialize_headers(
    stream_id: int, block: bytes, max_frame_size: int, end_stream: bool = False
) -> bytes:
    """A field block as HEADERS and as many CONTINUATION frames as the peer's
    SETTINGS_MAX_FRAME_SIZE needs (§4.3, §6.2, §6.10): END_HEADERS on the last one,
    END_STREAM (when asked) on the HEADERS; no padding, no priority fields."""
    size = len(block)
    flags = END_STREAM if end_stream else 0
    if size <= max_frame_size:
        return frame_header(size, HEADERS, flags | END_HEADERS, stream_id) + block
    parts = [frame_header(max_frame_size, HEADERS, flags, stream_id), block[:max_frame_size]]
    for start in range(max_frame_size, size, max_frame_size):
        chunk = block[start : start + max_frame_size]
        last = END_HEADERS if start + max_frame_size >= size else 0
        parts += (frame_header(len(chunk), CONTINUATION, last, stream_id), chunk)
    return b"".join(parts)


def append_headers(
    out: bytearray, stream_id: int, block: bytes, max_frame_size: int, end_stream: bool = False
) -> None:
    """:func:`serialize_headers`' frames, appended to ``out`` (h2's outbound buffer)
    instead of returned: the header, then the block itself, with no bytes object
    joining them.

    A hot path (each HEADERS the fast layer sends, ``_h2fast.FastConnection``):
    ``benchmarks/micro/frames.py`` compares it with ``out += serialize_headers(...)``,
    and ``tests/test_h2_frames.py`` checks that both give the same bytes.
    """
    size = len(block)
    flags = END_STREAM if end_stream else 0
    stream_id &= 0x7FFFFFFF
    if size <= max_frame_size:
        out += _HEADER.pack(size >> 8, size & 0xFF, HEADERS, flags | END_HEADERS, stream_id)
        out += block
        return
    view = memoryview(block)  # pieces appended from the block, not copied out first
    out += _HEADER.pack(max_frame_size >> 8, max_frame_size & 0xFF, HEADERS, flags, stream_id)
    out += view[:max_frame_size]
    for start in range(max_frame_size, size, max_frame_size):
        chunk = view[start : start + max_frame_size]
        n = len(chunk)
        last = END_HEADERS if start + max_frame_size >= size else 0
        out += _HEADER.pack(n >> 8, n & 0xFF, CONTINUATION, last, stream_id)
        out += chunk


def serialize_settings(settings: Iterable[tuple[int, int]]) -> bytes:
    """A SETTINGS frame with these ``(identifier, value)`` entries, in order (§6.5)."""
    body = b"".join(_SETTING.pack(ident, value) for ident, value in settings)
    return frame_header(len(body), SETTINGS, 0, 0) + body


#: The SETTINGS ACK frame (§6.5): no payload.
SETTINGS_ACK = frame_header(0, SETTINGS, ACK, 0)


def serialize_ping(opaque_data: bytes, ack: bool = False) -> bytes:
    """A PING (or, with ``ack``, its ACK) of exactly eight opaque octets (§6.7)."""
    if len(opaque_data) != 8:
        raise ValueError(f"PING carries 8 opaque octets, not {len(opaque_data)}")
    return frame_header(8, PING, ACK if ack else 0, 0) + opaque_data


def serialize_goaway(last_stream_id: int, error_code: int, debug_data: bytes = b"") -> bytes:
    """A GOAWAY (§6.8)."""
    body = _U32X2.pack(last_stream_id & 0x7FFFFFFF, error_code) + debug_data
    return frame_header(len(body), GOAWAY, 0, 0) + body


def serialize_rst_stream(stream_id: int, error_code: int) -> bytes:
    """A RST_STREAM (§6.4)."""
    return frame_header(4, RST_STREAM, 0, stream_id) + _U32.pack(error_code)


def serialize_window_update(stream_id: int, increment: int) -> bytes:
    """A WINDOW_UPDATE (§6.9) of 1 to 2**31 - 1 bytes, on a stream or (0) the connection."""
    if not 1 <= increment <= 0x7FFFFFFF:
        raise ValueError(f"a WINDOW_UPDATE increment is 1 to 2**31 - 1, not {increment}")
    return frame_header(4, WINDOW_UPDATE, 0, stream_id) + _U32.pack(increment)
