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

_PREFIX = struct.Struct(">BI")
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
    """

    __slots__ = ("_buf", "_flag", "_need", "max_message_size")

    def __init__(self, max_message_size: int | None = DEFAULT_MAX_RECEIVE_MESSAGE_SIZE) -> None:
        self.max_message_size = max_message_size  # immutable after init
        self._buf = bytearray()  # owner: the one task reading the stream
        self._need = -1  # body length of the message in progress; -1: reading a prefix
        self._flag = 0

    @property
    def pending(self) -> bool:
        """True if part of a message (a prefix or a body) is buffered."""
        return bool(self._buf) or self._need >= 0

    def feed(self, data: bytes) -> list[tuple[bool, bytes]]:
        """Add ``data``; return the messages it completes, in order."""
        buf = self._buf
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
                if flag > 1:
                    raise RpcError(
                        StatusCode.INTERNAL, f"invalid compressed-flag {flag} in message prefix"
                    )
                limit = self.max_message_size
                if limit is not None and length > limit:
                    raise RpcError(
                        StatusCode.RESOURCE_EXHAUSTED,
                        f"received message larger than max ({length} vs. {limit})",
                    )
                self._flag = flag
                self._need = length
            if end - pos < self._need:
                break
            stop = pos + self._need
            out.append((self._flag == 1, bytes(buf[pos:stop])))
            pos = stop
            self._need = -1
        if pos:
            del buf[:pos]
        return out
