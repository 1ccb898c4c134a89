"""The length-prefixed message codec and message compression (sans-IO).

Theory of operation
-------------------
Every gRPC message on a stream is a 1-byte Compressed-Flag, a 4-byte big-endian
Message-Length and the message (grpc/grpc ``doc/PROTOCOL-HTTP2.md``,
"Length-Prefixed-Message"). DATA frame boundaries mean nothing: a message may be
split across frames in any way, and a frame may carry several messages, so the
:class:`MessageDecoder` is fed whatever bytes arrive and returns the messages they
complete.

The receive limit is checked on the prefix, before a byte of the body is buffered
(so a peer announcing 4 GiB costs us 5 bytes), and again on the decompressed size
(decompression stops at the limit: a small compressed message cannot expand
without bound). Either way the call fails with RESOURCE_EXHAUSTED.

Buffers: a decoder with ``buffer_reuse`` (the default) copies a message found whole
in a chunk straight out of it, and gathers a body of 1 KiB or more that arrives in
pieces in a bytearray it keeps (grpc-go reuses pooled buffers from 1 KiB in its
codec), copying it out once; payloads are always fresh ``bytes``, so the kept
buffer is never aliased. Encoding builds each message once (prefix + payload) and
keeps nothing: ``H2Stream.send_data`` holds its argument until loopy frames it, so
a reused send buffer would be overwritten while still queued.

Compression (grpc/grpc ``doc/compression.md``): the sender names its algorithm in
``grpc-encoding`` and sets the flag on each compressed message; ``identity``,
``gzip`` (RFC 1952) and ``deflate`` (the zlib format, RFC 1950, as grpc core and
grpc-go write it; a raw RFC 1951 stream is accepted too) are supported.

Nothing here does I/O or imports trio.
"""

from __future__ import annotations

import struct
import zlib
from typing import Final, final

from ._status import RpcError, StatusCode

__all__ = [
    "DEFAULT_MAX_RECEIVE_MESSAGE_SIZE",
    "SUPPORTED_ENCODINGS",
    "REUSE_MIN_SIZE",
    "MessageDecoder",
    "compress",
    "decompress",
    "encode_message",
]

#: grpc-go's and grpcio's default receive limit: 4 MiB.
DEFAULT_MAX_RECEIVE_MESSAGE_SIZE: Final = 4 * 1024 * 1024
#: The largest length a prefix can state (a 32-bit field).
MAX_MESSAGE_LENGTH: Final = 2**32 - 1
#: What we accept, in the order announced in ``grpc-accept-encoding``.
SUPPORTED_ENCODINGS: Final = ("identity", "deflate", "gzip")
ACCEPT_ENCODING: Final = ",".join(SUPPORTED_ENCODINGS)

#: The body size from which a decoder with ``buffer_reuse`` gathers a message
#: arriving in pieces in its kept buffer (grpc-go's codec pools buffers from 1 KiB).
REUSE_MIN_SIZE: Final = 1024

_PREFIX = struct.Struct(">BI")
_NO_BODY = bytearray()  # MessageDecoder._body before its first large body (never written)
_NO_VIEW = memoryview(_NO_BODY)
PREFIX_SIZE: Final = _PREFIX.size  # 5


def check_encoding(name: str | None) -> str | None:
    """``name`` if it is a supported encoding (None and "identity" mean none)."""
    if name is None or name == "identity":
        return None
    if name not in SUPPORTED_ENCODINGS:
        raise ValueError(f"unsupported compression {name!r}; supported: {SUPPORTED_ENCODINGS}")
    return name


def compress(data: bytes, encoding: str) -> bytes:
    """``data`` compressed with ``encoding`` ("gzip" or "deflate")."""
    if encoding == "gzip":
        obj = zlib.compressobj(wbits=31)
    elif encoding == "deflate":
        obj = zlib.compressobj(wbits=15)
    else:
        raise ValueError(f"unsupported compression {encoding!r}")
    return obj.compress(data) + obj.flush()


def decompress(data: bytes, encoding: str, max_size: int | None) -> bytes:
    """``data`` decompressed; at most ``max_size`` bytes, else RESOURCE_EXHAUSTED.

    Raises RpcError(INTERNAL) if ``data`` is not valid for ``encoding``.
    """
    limit = 0 if max_size is None else max_size + 1
    candidates: tuple[int, ...]
    if encoding == "gzip":
        candidates = (31,)
    elif encoding == "deflate":
        candidates = (15, -15)  # the zlib format, else a raw deflate stream
    else:
        raise RpcError(StatusCode.INTERNAL, f"message compressed with unsupported {encoding!r}")
    for wbits in candidates:
        obj = zlib.decompressobj(wbits=wbits)
        try:
            out = obj.decompress(data, limit)
        except zlib.error:
            continue
        if max_size is not None and len(out) > max_size:
            raise RpcError(
                StatusCode.RESOURCE_EXHAUSTED,
                f"decompressed message larger than max ({max_size} bytes)",
            )
        if not obj.eof:
            break
        return out
    raise RpcError(StatusCode.INTERNAL, f"could not decompress a {encoding} message")


def encode_message(payload: bytes, *, compressed: bool = False) -> bytes:
    """One length-prefixed message (the 5-byte prefix and ``payload``)."""
    if len(payload) > MAX_MESSAGE_LENGTH:
        raise ValueError("a gRPC message cannot exceed 2**32-1 bytes")
    return _PREFIX.pack(1 if compressed else 0, len(payload)) + payload


@final
class MessageDecoder:
    """Incremental decoder: :meth:`feed` bytes, get ``(compressed, payload)`` pairs.

    ``max_message_size`` (None: no limit but the prefix's 32 bits) bounds the length
    a prefix may state; a larger one raises RpcError(RESOURCE_EXHAUSTED) from
    :meth:`feed` before its body is kept. A flag byte other than 0 or 1 raises
    RpcError(INTERNAL). After either, the decoder must not be used again.

    ``buffer_reuse`` (default True): a message found whole in the bytes fed is copied
    straight out of them (one copy, nothing buffered), and the body of a message of
    ``REUSE_MIN_SIZE`` bytes or more that arrives in pieces is gathered in one
    bytearray the decoder keeps for its life (sized once to the largest such
    message), then copied out once. Every payload returned is a fresh ``bytes`` the
    caller owns: the kept buffer is never handed out, so nothing aliases it. With
    False, everything goes through one growing buffer (bytes are copied in, sliced
    out and converted: three copies); ``benchmarks/grpc_codec.py`` compares the two.
    """

    __slots__ = (
        "_body",
        "_buf",
        "_filled",
        "_flag",
        "_need",
        "_view",
        "buffer_reuse",
        "max_message_size",
    )

    def __init__(
        self,
        max_message_size: int | None = DEFAULT_MAX_RECEIVE_MESSAGE_SIZE,
        *,
        buffer_reuse: bool = True,
    ) -> None:
        self.max_message_size = max_message_size  # immutable after init
        self.buffer_reuse = buffer_reuse  # immutable after init
        # Every field below: owner: the one task reading the stream (feed).
        # A partial prefix, or (small body, or buffer_reuse off) the buffered bytes.
        self._buf = bytearray()
        self._need = -1  # body length of the message in progress; -1: reading a prefix
        self._flag = 0
        # The kept buffer for large bodies in pieces, and a view of it (never resized:
        # replaced); both built on the first such body (most calls never need them).
        self._body = _NO_BODY
        self._view = _NO_VIEW
        self._filled = -1  # bytes of the current body in _body; -1: not using _body

    @property
    def pending(self) -> bool:
        """True if part of a message (a prefix or a body) is buffered."""
        return bool(self._buf) or self._need >= 0

    def _start(self, flag: int, length: int) -> None:
        if flag > 1:
            raise RpcError(StatusCode.INTERNAL, f"invalid compressed-flag {flag} in message prefix")
        limit = self.max_message_size
        if limit is not None and length > limit:
            raise RpcError(
                StatusCode.RESOURCE_EXHAUSTED,
                f"received message larger than max ({length} vs. {limit})",
            )
        self._flag = flag
        self._need = length

    def feed(self, data: bytes | bytearray | memoryview) -> list[tuple[bool, bytes]]:
        """Add ``data``; return the messages it completes, in order. ``data`` is not
        kept: the caller may reuse it once this returns."""
        if not self.buffer_reuse:
            return self._feed_buffered(data)
        if type(data) is not bytes:
            data = bytes(data)  # the transport gives bytes; slicing bytes gives bytes
        out: list[tuple[bool, bytes]] = []
        pos = 0
        end = len(data)
        while pos < end:
            if self._need < 0:
                pos = self._read_prefix(data, pos, end)
                if pos < 0:
                    break  # a partial prefix, buffered
            need = self._need
            if end - pos >= need and self._filled < 0 and not self._buf:
                # The whole body is here: one copy, straight out of ``data``.
                out.append((self._flag == 1, data[pos : pos + need]))
                pos += need
                self._need = -1
            elif pos < end:
                pos = self._read_body_piece(data, pos, end, out)
        return out

    def _read_prefix(self, data: bytes, pos: int, end: int) -> int:
        """Read the next message's prefix from ``data[pos:end]`` (there is some),
        after the part of it buffered: the position after it, or -1 if it is not
        whole yet (what there is, buffered)."""
        buf = self._buf
        if buf or end - pos < PREFIX_SIZE:
            take = min(PREFIX_SIZE - len(buf), end - pos)
            buf += data[pos : pos + take]
            if len(buf) < PREFIX_SIZE:
                return -1
            flag, length = _PREFIX.unpack(buf)
            buf.clear()
            pos += take
        else:
            flag, length = _PREFIX.unpack_from(data, pos)
            pos += PREFIX_SIZE
        self._start(flag, length)
        return pos

    def _read_body_piece(
        self, data: bytes, pos: int, end: int, out: list[tuple[bool, bytes]]
    ) -> int:
        """Take a piece of the current body, which is not whole in ``data[pos:end]``
        (there is some) with what is buffered; append the message to ``out`` if the
        piece completes it. Returns the position after the piece."""
        if self._filled < 0 and not self._buf and self._need >= REUSE_MIN_SIZE:
            if len(self._body) < self._need:
                self._body = bytearray(self._need)  # the largest so far; kept
                self._view = memoryview(self._body)
            self._filled = 0
        if self._filled >= 0:
            return self._into_kept(data, pos, end, out)
        buf = self._buf
        take = min(self._need - len(buf), end - pos)
        buf += data[pos : pos + take]
        if len(buf) == self._need:
            out.append((self._flag == 1, bytes(buf)))
            buf.clear()
            self._need = -1
        return pos + take

    def _into_kept(self, data: bytes, pos: int, end: int, out: list[tuple[bool, bytes]]) -> int:
        """``_read_body_piece`` for a large body: into the kept buffer."""
        filled = self._filled
        need = self._need
        take = min(need - filled, end - pos)
        if take == end:
            self._view[filled : filled + take] = data
        else:
            self._view[filled : filled + take] = memoryview(data)[pos : pos + take]
        filled += take
        if filled < need:
            self._filled = filled
        else:
            body = self._body
            payload = bytes(body) if len(body) == need else bytes(self._view[:need])
            out.append((self._flag == 1, payload))
            self._filled = -1
            self._need = -1
        return pos + take

    def _feed_buffered(self, data: bytes | bytearray | memoryview) -> list[tuple[bool, bytes]]:
        buf = self._buf
        if not buf and self._need < 0 and len(data) >= PREFIX_SIZE:
            # The common case of small calls: ``data`` is exactly one whole message.
            # Its body is sliced out once, not copied into the buffer first.
            flag, length = _PREFIX.unpack_from(data, 0)
            limit = self.max_message_size
            if (
                len(data) == PREFIX_SIZE + length
                and flag <= 1
                and (limit is None or length <= limit)
            ):
                return [(flag == 1, bytes(data[PREFIX_SIZE:]))]
        buf += data
        out: list[tuple[bool, bytes]] = []
        pos = 0
        end = len(buf)
        while True:
            if self._need < 0:
                if end - pos < PREFIX_SIZE:
                    break
                flag, length = _PREFIX.unpack_from(buf, pos)
                pos += PREFIX_SIZE
                self._start(flag, length)
            if end - pos < self._need:
                break
            stop = pos + self._need
            with memoryview(buf) as view:  # one copy of the body, not two
                out.append((self._flag == 1, bytes(view[pos:stop])))
            pos = stop
            self._need = -1
        if pos:
            del buf[:pos]
        return out
