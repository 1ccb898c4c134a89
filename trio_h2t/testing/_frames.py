"""HTTP/2 frames as they go on the wire, valid or not, and Hypothesis strategies of them.

Theory of operation
-------------------
A fuzzer must be able to write what no well-behaved encoder writes: a DATA frame on
stream 0, a PING of 7 bytes, a length field that lies, a reserved bit set. So a frame
here is a :class:`WireFrame`: its nine-byte header's fields (RFC 9113 §4.1) and a
payload, all free. Well-formed payloads come from ``hyperframe`` (each frame class's
``serialize_body``), header blocks from ``hpack``; :meth:`WireFrame.from_frame` turns
a ``hyperframe`` frame into a WireFrame so either can be mixed in.

A sequence is a list of :data:`Chunk` (a WireFrame, or raw bytes written as they are:
the client preface, garbage, a frame mutated after it was serialized). :func:`serialize`
gives its bytes and :func:`describe` reads any bytes back as a list of readable
frames, so a shrunk example can be shown both ways.

Header blocks are encoded without state (:func:`encode_header_block`): every field is
a literal "never indexed" or a static-table reference, so a block decodes the same
whatever the receiver's dynamic table holds, and a block can be moved, dropped or
repeated by the shrinker without corrupting the ones after it.

The strategies (:func:`frame_sequences` and the smaller ones it is built from) draw
well-formed requests or responses, frames of every type with random fields, frames in
wrong orders, raw bytes, and bytes mutated after serialization.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import hpack
import hyperframe.frame
from hypothesis import strategies as st

import trio_h2t._h2.frames as _codec

from ._strategies import request_headers, response_headers

__all__ = [
    "PREFACE",
    "Chunk",
    "FrameType",
    "WireFrame",
    "any_frames",
    "describe",
    "encode_header_block",
    "frame_sequences",
    "parse_frames",
    "request_frames",
    "serialize",
]

#: The client connection preface (RFC 9113 §3.4), before the client's SETTINGS.
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

Side = Literal["client", "server"]


class FrameType:
    """Frame type codes (RFC 9113 §6; §11.2's registry), taken from the codec
    (``trio_h2t._h2.frames``) so that the codes are written once."""

    DATA = _codec.DATA
    HEADERS = _codec.HEADERS
    PRIORITY = _codec.PRIORITY
    RST_STREAM = _codec.RST_STREAM
    SETTINGS = _codec.SETTINGS
    PUSH_PROMISE = _codec.PUSH_PROMISE
    PING = _codec.PING
    GOAWAY = _codec.GOAWAY
    WINDOW_UPDATE = _codec.WINDOW_UPDATE
    CONTINUATION = _codec.CONTINUATION


#: Each of :class:`FrameType`'s codes by its name.
_TYPE_NAMES: dict[int, str] = {
    value: name
    for name, value in vars(FrameType).items()
    if not name.startswith("_") and isinstance(value, int)
}
#: Flags each type defines (RFC 9113 §6), by bit; other bits are shown as hex.
_FLAG_NAMES: dict[int, dict[int, str]] = {
    0x0: {0x1: "END_STREAM", 0x8: "PADDED"},
    0x1: {0x1: "END_STREAM", 0x4: "END_HEADERS", 0x8: "PADDED", 0x20: "PRIORITY"},
    0x4: {0x1: "ACK"},
    0x5: {0x4: "END_HEADERS", 0x8: "PADDED"},
    0x6: {0x1: "ACK"},
    0x9: {0x4: "END_HEADERS"},
}
_ERROR_NAMES = {
    0x0: "NO_ERROR",
    0x1: "PROTOCOL_ERROR",
    0x2: "INTERNAL_ERROR",
    0x3: "FLOW_CONTROL_ERROR",
    0x4: "SETTINGS_TIMEOUT",
    0x5: "STREAM_CLOSED",
    0x6: "FRAME_SIZE_ERROR",
    0x7: "REFUSED_STREAM",
    0x8: "CANCEL",
    0x9: "COMPRESSION_ERROR",
    0xA: "CONNECT_ERROR",
    0xB: "ENHANCE_YOUR_CALM",
    0xC: "INADEQUATE_SECURITY",
    0xD: "HTTP_1_1_REQUIRED",
}
_SETTING_NAMES = {
    0x1: "HEADER_TABLE_SIZE",
    0x2: "ENABLE_PUSH",
    0x3: "MAX_CONCURRENT_STREAMS",
    0x4: "INITIAL_WINDOW_SIZE",
    0x5: "MAX_FRAME_SIZE",
    0x6: "MAX_HEADER_LIST_SIZE",
    0x8: "ENABLE_CONNECT_PROTOCOL",
}
#: The largest payload a peer must accept before any SETTINGS (RFC 9113 §4.2).
DEFAULT_MAX_FRAME_SIZE = 16_384
#: The largest stream id and window (RFC 9113 §5.1.1, §6.9.1).
MAX_31_BIT = 2**31 - 1


def error_name(code: int) -> str:
    """An error code's name (RFC 9113 §7), or its number when it is not registered."""
    return _ERROR_NAMES.get(code, f"0x{code:x}")


@dataclass(frozen=True, slots=True)
class WireFrame:
    """One frame exactly as written: any type, flags, stream id and payload.

    ``stream_id`` is the header's 32-bit field, reserved bit included (RFC 9113 §4.1).
    ``length``, when not None, is the length field written instead of the payload's
    real length (a frame that lies about its size). Immutable.
    """

    type: int
    flags: int
    stream_id: int
    payload: bytes = b""
    length: int | None = None

    def to_bytes(self) -> bytes:
        """The frame's bytes: the nine-byte header, then the payload."""
        length = len(self.payload) if self.length is None else self.length
        header = struct.pack(
            ">BHBBL",
            (length >> 16) & 0xFF,
            length & 0xFFFF,
            self.type & 0xFF,
            self.flags & 0xFF,
            self.stream_id & 0xFFFFFFFF,
        )
        return header + self.payload

    @classmethod
    def from_frame(cls, frame: hyperframe.frame.Frame) -> WireFrame:
        """A hyperframe frame, serialized by hyperframe, as a WireFrame."""
        data = frame.serialize()
        return cls(
            type=data[3],
            flags=data[4],
            stream_id=struct.unpack(">L", data[5:9])[0],
            payload=data[9:],
        )

    def __str__(self) -> str:
        return describe_frame(self.type, self.flags, self.stream_id, self.payload, self.length)


#: One element of a sequence: a frame, or bytes written as they are.
Chunk = WireFrame | bytes


def serialize(chunks: Iterable[Chunk]) -> bytes:
    """The bytes of a sequence, in order."""
    return b"".join(c if isinstance(c, bytes) else c.to_bytes() for c in chunks)


def encode_header_block(headers: Iterable[tuple[bytes | str, bytes | str]]) -> bytes:
    """An HPACK header block (RFC 7541) that needs no dynamic table state to decode.

    Every field is a static-table reference or a literal "never indexed" (§6.2.3), so
    the block adds nothing to the receiver's dynamic table and decodes the same in any
    position of any connection.
    """
    encoder = hpack.Encoder()
    fields = [
        hpack.NeverIndexedHeaderTuple(
            name if isinstance(name, bytes) else name.encode(),
            value if isinstance(value, bytes) else value.encode(),
        )
        for name, value in headers
    ]
    return bytes(encoder.encode(fields))


def _flags_text(frame_type: int, flags: int) -> str:
    names = _FLAG_NAMES.get(frame_type, {})
    parts = [name for bit, name in names.items() if flags & bit]
    rest = flags & ~sum(bit for bit in names if flags & bit)
    if rest:
        parts.append(f"0x{rest:02x}")
    return "|".join(parts) or "-"


def _block_text(block: bytes) -> str:
    try:
        fields = hpack.Decoder().decode(block, raw=True)
    except Exception:  # any hpack failure: show the bytes instead
        return f"block={block.hex()}"
    return (
        "block=["
        + ", ".join(f"{n.decode('latin-1')}: {v.decode('latin-1')}" for n, v in fields)
        + "]"
    )


def _hex32(data: bytes) -> str:
    return f"{data[:32].hex()}{'...' if len(data) > 32 else ''}"


def _priority_text(fields: bytes) -> str:
    dep, weight = struct.unpack(">LB", fields)
    return f" dep={dep & MAX_31_BIT} excl={dep >> 31} weight={weight}"


# One function per frame type: the payload's fields as text (padding already taken off),
# or None when the payload has not the type's shape (it is then shown as bytes).


def _data_text(flags: int, body: bytes) -> str | None:
    return f" data={_hex32(body)}"


def _headers_text(flags: int, body: bytes) -> str | None:
    detail = ""
    if flags & 0x20 and len(body) >= 5:
        detail = _priority_text(body[:5])
        body = body[5:]
    return detail + " " + _block_text(body)


def _priority_frame_text(flags: int, body: bytes) -> str | None:
    return _priority_text(body) if len(body) == 5 else None


def _rst_stream_text(flags: int, body: bytes) -> str | None:
    return f" error={error_name(struct.unpack('>L', body)[0])}" if len(body) == 4 else None


def _settings_text(flags: int, body: bytes) -> str | None:
    if len(body) % 6:
        return None
    pairs = [struct.unpack(">HL", body[i : i + 6]) for i in range(0, len(body), 6)]
    return " " + ", ".join(f"{_SETTING_NAMES.get(k, f'0x{k:x}')}={v}" for k, v in pairs)


def _push_promise_text(flags: int, body: bytes) -> str | None:
    if len(body) < 4:
        return None
    promised = struct.unpack(">L", body[:4])[0] & MAX_31_BIT
    return f" promised={promised} " + _block_text(body[4:])


def _ping_text(flags: int, body: bytes) -> str | None:
    return f" opaque={body.hex()}"


def _goaway_text(flags: int, body: bytes) -> str | None:
    if len(body) < 8:
        return None
    last, code = struct.unpack(">LL", body[:8])
    detail = f" last_stream={last & MAX_31_BIT} error={error_name(code)}"
    return detail + (f" debug={body[8:]!r}" if body[8:] else "")


def _window_update_text(flags: int, body: bytes) -> str | None:
    return f" increment={struct.unpack('>L', body)[0]}" if len(body) == 4 else None


def _continuation_text(flags: int, body: bytes) -> str | None:
    return f" fragment={body.hex()}"


_PAYLOAD_TEXT: dict[int, Callable[[int, bytes], str | None]] = {
    FrameType.DATA: _data_text,
    FrameType.HEADERS: _headers_text,
    FrameType.PRIORITY: _priority_frame_text,
    FrameType.RST_STREAM: _rst_stream_text,
    FrameType.SETTINGS: _settings_text,
    FrameType.PUSH_PROMISE: _push_promise_text,
    FrameType.PING: _ping_text,
    FrameType.GOAWAY: _goaway_text,
    FrameType.WINDOW_UPDATE: _window_update_text,
    FrameType.CONTINUATION: _continuation_text,
}
#: The types that may carry padding (RFC 9113 §6.1, §6.2, §6.6: the PADDED flag, 0x8).
_PADDED_TYPES = (FrameType.DATA, FrameType.HEADERS, FrameType.PUSH_PROMISE)


def _payload_text(frame_type: int, flags: int, payload: bytes) -> str:
    """A payload's fields as text: the padding's length, then what the type carries."""
    detail = ""
    body = payload
    if frame_type in _PADDED_TYPES and flags & 0x8 and body:
        pad = body[0]
        body = body[1 : len(body) - pad] if pad <= len(body) - 1 else b""
        detail = f" pad={pad}"
    text_of = _PAYLOAD_TEXT.get(frame_type)
    text = text_of(flags, body) if text_of is not None else None
    if text is not None:
        return detail + text
    return detail + (f" payload={_hex32(payload)}" if payload else "")


def describe_frame(
    frame_type: int, flags: int, stream_id: int, payload: bytes, length: int | None = None
) -> str:
    """One frame as one readable line (fields decoded where the payload allows it)."""
    name = _TYPE_NAMES.get(frame_type, f"UNKNOWN(0x{frame_type:02x})")
    head = f"{name} stream={stream_id & MAX_31_BIT}"
    if stream_id & ~MAX_31_BIT & 0xFFFFFFFF:
        head += " R=1"
    head += f" flags={_flags_text(frame_type, flags)}"
    if length is not None and length != len(payload):
        head += f" length={length} (payload {len(payload)})"
    else:
        head += f" length={len(payload)}"
    try:
        detail = _payload_text(frame_type, flags, payload)
    except (struct.error, IndexError):
        detail = f" payload={payload.hex()}"
    return head + detail


def parse_frames(data: bytes, *, preface: bool = False) -> tuple[list[WireFrame], bytes]:
    """Split bytes into frames; returns them and the bytes left over (an incomplete frame).

    With ``preface``, a leading client preface is skipped. Lengths are trusted: a
    frame whose length runs past the end is left over, not parsed.
    """
    if preface and data.startswith(PREFACE):
        data = data[len(PREFACE) :]
    frames: list[WireFrame] = []
    pos = 0
    while len(data) - pos >= 9:
        length = int.from_bytes(data[pos : pos + 3], "big")
        if len(data) - pos - 9 < length:
            break
        frames.append(
            WireFrame(
                type=data[pos + 3],
                flags=data[pos + 4],
                stream_id=int.from_bytes(data[pos + 5 : pos + 9], "big"),
                payload=data[pos + 9 : pos + 9 + length],
            )
        )
        pos += 9 + length
    return frames, data[pos:]


def describe(data: bytes) -> list[str]:
    """Bytes as readable lines: the preface, each frame, then any incomplete rest."""
    lines: list[str] = []
    if data.startswith(PREFACE):
        lines.append("PREFACE")
        data = data[len(PREFACE) :]
    elif data and PREFACE.startswith(data[: len(PREFACE)]):
        lines.append(f"PREFACE (first {len(data)} bytes only)")
        return lines
    frames, rest = parse_frames(data)
    lines.extend(str(f) for f in frames)
    if rest:
        lines.append(f"incomplete frame / raw bytes ({len(rest)}): {rest[:64].hex()}")
    return lines


#### Strategies

#: Stream ids a fuzzer tries beyond the ones its requests use: 0, small ids of both
#: parities, the largest id, and the reserved bit set (RFC 9113 §4.1, §5.1.1).
_ODD_IDS = st.sampled_from([1, 3, 5, 7])
stream_ids = st.one_of(
    st.sampled_from([0, 1, 2, 3, 4, 5, 7, MAX_31_BIT, 1 | 0x80000000]),
    st.integers(0, 0xFFFFFFFF),
)


def header_blocks(
    side: Side = "client", *, methods: Sequence[str] = ("GET", "POST", "HEAD", "PUT", "OPTIONS")
) -> st.SearchStrategy[list[tuple[bytes, bytes]]]:
    """A valid request (``side="client"``) or response header block: the kit's
    ``request_headers`` and ``response_headers`` (one definition of a valid block),
    kept small (a few fields of at most 24 bytes) so that a block fits one frame and
    a shrunk finding stays readable. Responses include a 103 (informational)."""
    if side == "client":
        return request_headers(
            methods=methods, max_fields=4, max_value_size=24, max_header_list_size=1024
        )
    return response_headers(
        statuses=(200, 204, 404, 500, 103),
        max_fields=3,
        max_value_size=24,
        max_header_list_size=1024,
    )


@st.composite
def _headers_frames(
    draw: st.DrawFn, stream_id: int, block: bytes, *, end_stream: bool
) -> list[WireFrame]:
    """HEADERS (maybe padded, maybe with priority) and CONTINUATIONs carrying ``block``."""
    cuts = sorted(draw(st.lists(st.integers(0, len(block)), max_size=2, unique=True)))
    pieces = [block[a:b] for a, b in zip([0, *cuts], [*cuts, len(block)], strict=True)]
    flags = 0x1 if end_stream else 0
    prefix = b""
    if draw(st.booleans()):
        flags |= 0x20
        # never on itself (RFC 9113 §5.3.1: a stream error)
        dep = draw(st.sampled_from([d for d in (0, 1, 3) if d != stream_id]))
        prefix = struct.pack(">LB", dep, draw(st.integers(0, 255)))
    # A padded HEADERS may leave its fragment empty (RFC 9113 §6.2; hyperframe
    # refuses it, trio_h2t's FixedFrameBuffer does not): drawn like any other.
    padding = draw(st.sampled_from([None, 0, 3]))
    first = prefix + pieces[0]
    if padding is not None:
        flags |= 0x8
        first = bytes([padding]) + first + b"\0" * padding
    if len(pieces) == 1:
        flags |= 0x4
    frames = [WireFrame(FrameType.HEADERS, flags, stream_id, first)]
    for i, piece in enumerate(pieces[1:], start=2):
        frames.append(
            WireFrame(FrameType.CONTINUATION, 0x4 if i == len(pieces) else 0, stream_id, piece)
        )
    return frames


@st.composite
def _request_frames(
    draw: st.DrawFn, stream_id: int = 1, *, side: Side = "client"
) -> list[WireFrame]:
    """One well-formed message on ``stream_id``: a request (``side="client"``) or a response.

    Headers (split across CONTINUATION frames at random), an optional body in DATA
    frames (padded or not), and END_STREAM on the last frame.
    """
    headers = draw(header_blocks(side))
    body = draw(st.lists(st.binary(max_size=64), max_size=3))
    frames = draw(_headers_frames(stream_id, encode_header_block(headers), end_stream=not body))
    for i, piece in enumerate(body):
        hf = hyperframe.frame.DataFrame(stream_id, piece)
        if i == len(body) - 1:
            hf.flags.add("END_STREAM")
        if draw(st.booleans()):
            hf.flags.add("PADDED")
            hf.pad_length = draw(st.integers(0, 8))
        frames.append(WireFrame.from_frame(hf))
    return frames


_SETTING_VALUES = st.one_of(
    st.sampled_from([0, 1, 100, 16_384, 65_535, 16_777_215, MAX_31_BIT]),
    st.integers(0, 0xFFFFFFFF),
)


@st.composite
def settings_payloads(draw: st.DrawFn) -> bytes:
    """A SETTINGS payload: known and unknown identifiers, values in and out of range."""
    pairs = draw(
        st.lists(
            st.tuples(st.one_of(st.integers(1, 8), st.integers(0, 0xFFFF)), _SETTING_VALUES),
            max_size=4,
        )
    )
    return b"".join(struct.pack(">HL", k, v) for k, v in pairs)


@st.composite
def _any_frames(draw: st.DrawFn, *, side: Side = "client") -> WireFrame:
    """A frame of any type (unknown ones too), with random flags, stream id and payload.

    Payloads are mostly of the right shape for the type (so the frame reaches the
    receiver's state machine), sometimes random bytes of any length.
    """
    frame_type = draw(st.one_of(st.integers(0, 9), st.integers(10, 255)))
    flags = draw(
        st.one_of(st.sampled_from([0, 0x1, 0x4, 0x5, 0x8, 0x20, 0x25]), st.integers(0, 255))
    )
    sid = draw(st.one_of(_ODD_IDS, stream_ids))
    payload: bytes
    shaped = draw(st.integers(0, 9)) > 1
    if not shaped:
        payload = draw(st.binary(max_size=40))
    elif frame_type == FrameType.DATA:
        payload = draw(st.binary(max_size=64))
        flags &= ~0x8
    elif frame_type in (FrameType.HEADERS, FrameType.PUSH_PROMISE, FrameType.CONTINUATION):
        headers = draw(header_blocks(side))
        payload = encode_header_block(headers)
        flags &= ~0x28
        if frame_type == FrameType.PUSH_PROMISE:
            payload = struct.pack(">L", draw(st.sampled_from([2, 4, 1, 0]))) + payload
    elif frame_type == FrameType.PRIORITY:
        payload = struct.pack(">LB", draw(st.integers(0, 0xFFFFFFFF)), draw(st.integers(0, 255)))
    elif frame_type in (FrameType.RST_STREAM, FrameType.WINDOW_UPDATE):
        payload = struct.pack(
            ">L",
            draw(
                st.one_of(
                    st.integers(0, 14),
                    st.sampled_from([1, 65_535, MAX_31_BIT]),
                    st.integers(0, 0xFFFFFFFF),
                )
            ),
        )
    elif frame_type == FrameType.SETTINGS:
        payload = b"" if flags & 0x1 else draw(settings_payloads())
    elif frame_type == FrameType.PING:
        payload = draw(st.binary(min_size=8, max_size=8))
    elif frame_type == FrameType.GOAWAY:
        payload = struct.pack(">LL", draw(stream_ids), draw(st.integers(0, 14))) + draw(
            st.binary(max_size=8)
        )
    else:
        payload = draw(st.binary(max_size=16))
    return WireFrame(frame_type, flags, sid, payload)


@st.composite
def _mutated(draw: st.DrawFn, chunk: Chunk) -> bytes:
    """``chunk``'s bytes with one mutation: a byte changed, bytes cut, or bytes added."""
    data = bytearray(chunk if isinstance(chunk, bytes) else chunk.to_bytes())
    how = draw(st.sampled_from(["flip", "truncate", "extend"]))
    if how == "flip" and data:
        i = draw(st.integers(0, len(data) - 1))
        data[i] ^= draw(st.integers(1, 255))
    elif how == "truncate" and data:
        del data[draw(st.integers(0, len(data) - 1)) :]
    else:
        data += draw(st.binary(min_size=1, max_size=8))
    return bytes(data)


@st.composite
def _frame_sequences(
    draw: st.DrawFn, *, side: Side = "client", max_segments: int = 12
) -> list[Chunk]:
    """What a misbehaving peer writes: ``side="client"`` to a server, else to a client.

    A client's sequence starts with the preface (rarely mutated) and, usually, its
    SETTINGS; a server's with its SETTINGS. Then segments in any order: well-formed
    messages (requests on odd stream ids 1, 3, 5, ...; responses on the ids a client
    opens first), frames of any type with random fields, SETTINGS acks, and raw
    bytes. Finally, sometimes, frames are swapped (valid frames in wrong orders) and
    one chunk is mutated after serialization.
    """
    chunks: list[Chunk] = []
    if side == "client":
        chunks.append(PREFACE if draw(st.integers(0, 19)) else draw(_mutated(PREFACE)))
    if draw(st.integers(0, 9)):
        chunks.append(WireFrame(FrameType.SETTINGS, 0, 0, draw(settings_payloads())))
    next_id = 1
    kinds = st.sampled_from(["message", "message", "frame", "frame", "ack", "raw"])
    for kind in draw(st.lists(kinds, max_size=max_segments)):
        if kind == "message":
            chunks.extend(draw(_request_frames(next_id, side=side)))
            next_id += 2
        elif kind == "frame":
            chunks.append(draw(_any_frames(side=side)))
        elif kind == "ack":
            chunks.append(WireFrame(FrameType.SETTINGS, 0x1, 0))
        else:
            chunks.append(draw(st.binary(min_size=1, max_size=24)))
    start = 1 if side == "client" else 0
    if len(chunks) > start + 1:
        for _ in range(draw(st.integers(0, 2))):
            i = draw(st.integers(start, len(chunks) - 1))
            j = draw(st.integers(start, len(chunks) - 1))
            chunks[i], chunks[j] = chunks[j], chunks[i]
    if chunks and not draw(st.integers(0, 4)):
        i = draw(st.integers(0, len(chunks) - 1))
        chunks[i] = draw(_mutated(chunks[i]))
    return chunks


def max_stream_id(frames: Sequence[WireFrame]) -> int:
    """The largest stream id (reserved bit cleared) among ``frames``; 0 if none."""
    return max((f.stream_id & MAX_31_BIT for f in frames), default=0)


#### Public strategy constructors (plain functions, so their signatures are typed)


def request_frames(
    stream_id: int = 1, *, side: Side = "client"
) -> st.SearchStrategy[list[WireFrame]]:
    """Frames of one well-formed message on ``stream_id``: a request (``side="client"``)
    or a response. Headers split across CONTINUATION frames at random, an optional body
    in DATA frames (padded or not), END_STREAM on the last frame."""
    return _request_frames(stream_id, side=side)


def any_frames(*, side: Side = "client") -> st.SearchStrategy[WireFrame]:
    """A frame of any type (unknown ones too) with random flags, stream id and payload;
    payloads mostly of the right shape for the type, sometimes random bytes."""
    return _any_frames(side=side)


def frame_sequences(
    *, side: Side = "client", max_segments: int = 12
) -> st.SearchStrategy[list[Chunk]]:
    """What a misbehaving peer writes: ``side="client"`` to a server, else to a client.

    A client's sequence starts with the preface (rarely mutated) and, usually, its
    SETTINGS; a server's with its SETTINGS. Then up to ``max_segments`` segments in any
    order: well-formed messages (requests on odd ids 1, 3, 5, ...; responses on the ids
    a client opens first), frames of any type with random fields, SETTINGS acks, raw
    bytes. Sometimes frames are then swapped (valid frames in wrong orders) and one
    chunk is mutated after serialization.
    """
    return _frame_sequences(side=side, max_segments=max_segments)
