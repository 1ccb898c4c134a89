"""Metadata and ``grpc-timeout`` (sans-IO).

Theory of operation
-------------------
Custom metadata are HTTP/2 header fields (grpc/grpc ``doc/PROTOCOL-HTTP2.md``,
"Custom-Metadata"): lowercase ASCII names; a name ending in ``-bin`` carries a
binary value, base64-encoded on the wire (sent unpadded; padded and unpadded both
accepted), any other name a printable-ASCII value. Names starting with ``grpc-``
are reserved for the protocol, as are the HTTP/2 pseudo-header fields and the
fields the protocol itself sets (``content-type``, ``te``); an application cannot
send them, and they are not shown to it on receipt, except
``grpc-status-details-bin``, which carries the application's rich error status.

``grpc-timeout`` is at most 8 ASCII digits and a unit (H, M, S, m, u, n).

Nothing here does I/O or imports trio.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TypeAlias, final, overload

__all__ = [
    "Metadata",
    "MetadataLike",
    "MetadataValue",
    "NO_METADATA",
    "encode_timeout",
    "metadata_from_headers",
    "metadata_to_headers",
    "parse_timeout",
]

MetadataValue: TypeAlias = str | bytes

#: Reserved names an application may not send (PROTOCOL-HTTP2.md: "grpc-" is
#: reserved; the rest are set by the protocol or are connection-specific, RFC 9113
#: §8.2.2).
RESERVED = frozenset(
    {
        "content-type",
        "te",
        "connection",
        "keep-alive",
        "proxy-connection",
        "host",
        "transfer-encoding",
        "upgrade",
    }
)
#: The one ``grpc-`` name that is application metadata (a serialized google.rpc.Status).
STATUS_DETAILS_KEY = "grpc-status-details-bin"
#: ``grpc-`` names that pass as metadata too (gRFC A6): a server handler sets
#: ``grpc-retry-pushback-ms`` in its trailers and reads ``grpc-previous-rpc-attempts``;
#: the client's retry loop (``_retrying.py``) does the reverse.
_PASSED_GRPC_KEYS = frozenset(
    {STATUS_DETAILS_KEY, "grpc-retry-pushback-ms", "grpc-previous-rpc-attempts"}
)

_NAME = re.compile(r"[0-9a-z_.\-]+\Z")


def _check_name(key: str) -> None:
    if not isinstance(key, str):
        raise TypeError(f"a metadata key must be a str, not {type(key).__name__}")
    if not _NAME.match(key):
        raise ValueError(
            f"metadata key {key!r} is not lowercase ASCII letters, digits, '_', '-', '.'"
        )


def _reserved(key: str) -> bool:
    return key in RESERVED or (key.startswith("grpc-") and key not in _PASSED_GRPC_KEYS)


@final
class Metadata:
    """An immutable, ordered multi-map of gRPC metadata: ``(key, value)`` pairs.

    Keys are lowercase ``str``; a key ending in ``-bin`` has ``bytes`` values, any
    other key printable-ASCII ``str`` values. Iterating yields the pairs (so
    ``dict(md)`` and ``list(md)`` work, as with grpcio's tuples); ``md[key]`` is the
    first value (KeyError if none), ``md.get(key)`` and ``md.get_all(key)`` as usual.
    """

    __slots__ = ("_pairs",)

    def __init__(self, pairs: MetadataLike = ()) -> None:
        if isinstance(pairs, Metadata):
            self._pairs: tuple[tuple[str, MetadataValue], ...] = pairs._pairs
            return
        items = pairs.items() if isinstance(pairs, Mapping) else pairs
        out: list[tuple[str, MetadataValue]] = []
        for item in items:
            try:
                key, value = item
            except (TypeError, ValueError):
                # metadata=("key", "value"): one pair where a sequence of pairs goes.
                raise TypeError(
                    f"metadata is a sequence of (key, value) pairs, and {item!r} is not"
                    " one; for a single pair write [(key, value)]"
                ) from None
            _check_name(key)
            if key.endswith("-bin"):
                if isinstance(value, str):
                    value = value.encode("utf-8")
                elif isinstance(value, bytearray | memoryview):
                    value = bytes(value)
                elif not isinstance(value, bytes):
                    raise TypeError(
                        f"metadata {key!r} (-bin) needs a bytes value, not {type(value).__name__}"
                    )
            else:
                if not isinstance(value, str):
                    raise TypeError(
                        f"metadata {key!r} needs a str value (binary values need a -bin key),"
                        f" not {type(value).__name__}"
                    )
                if not all(0x20 <= ord(c) <= 0x7E for c in value):
                    raise ValueError(
                        f"metadata {key!r}: a value must be printable ASCII; use a -bin key"
                        " for other bytes"
                    )
            out.append((key, value))
        self._pairs = tuple(out)  # immutable after init

    def __iter__(self) -> Iterator[tuple[str, MetadataValue]]:
        return iter(self._pairs)

    def __len__(self) -> int:
        return len(self._pairs)

    def __bool__(self) -> bool:
        return bool(self._pairs)

    def __contains__(self, key: object) -> bool:
        return any(k == key for k, _ in self._pairs)

    def __getitem__(self, key: str) -> MetadataValue:
        for k, v in self._pairs:
            if k == key:
                return v
        raise KeyError(key)

    @overload
    def get(self, key: str) -> MetadataValue | None: ...
    @overload
    def get(self, key: str, default: MetadataValue) -> MetadataValue: ...
    def get(self, key: str, default: MetadataValue | None = None) -> MetadataValue | None:
        """The first value of ``key``, or ``default``."""
        for k, v in self._pairs:
            if k == key:
                return v
        return default

    def get_all(self, key: str) -> list[MetadataValue]:
        """Every value of ``key``, in order."""
        return [v for k, v in self._pairs if k == key]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Metadata):
            return self._pairs == other._pairs
        if isinstance(other, tuple | list):
            return list(self._pairs) == [tuple(p) for p in other]
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._pairs)

    def __repr__(self) -> str:
        return f"Metadata({list(self._pairs)!r})"


#: The empty Metadata, shared (it is immutable): most calls carry none.
NO_METADATA = Metadata()

#: Received header fields that are never metadata and that the layer reads itself
#: (a block of only these and pseudo-headers has no metadata: nothing to parse).
PROTOCOL_FIELDS = frozenset(
    {
        b"content-type",
        b"te",
        b"grpc-accept-encoding",
        b"grpc-encoding",
        b"grpc-timeout",
        b"grpc-status",
        b"grpc-message",
    }
)

#: What a metadata argument accepts: a Metadata, ``(key, value)`` pairs or a mapping.
MetadataLike: TypeAlias = (
    Metadata | Iterable[tuple[str, MetadataValue]] | Mapping[str, MetadataValue]
)


def encode_bin(value: bytes) -> bytes:
    """A ``-bin`` value for the wire: base64, unpadded (PROTOCOL-HTTP2.md)."""
    return base64.b64encode(value).rstrip(b"=")


def decode_bin(value: bytes) -> bytes:
    """A ``-bin`` value from the wire, padded or not. ValueError if not base64."""
    value = value.strip()
    try:
        return base64.b64decode(value + b"=" * (-len(value) % 4), validate=True)
    except binascii.Error as exc:
        raise ValueError(f"malformed base64 in binary metadata: {value[:40]!r}") from exc


def metadata_to_headers(md: Metadata) -> list[tuple[bytes, bytes]]:
    """``md`` as header fields. ValueError for a reserved key."""
    out: list[tuple[bytes, bytes]] = []
    for key, value in md:
        if _reserved(key):
            raise ValueError(f"metadata key {key!r} is reserved for the gRPC protocol")
        name = key.encode("ascii")
        if isinstance(value, bytes):
            out.append((name, encode_bin(value)))
        else:
            out.append((name, value.encode("ascii")))
    return out


def metadata_from_headers(headers: Sequence[tuple[bytes, bytes]]) -> Metadata:
    """The application metadata of a received header block (reserved fields left out).

    ValueError for a ``-bin`` value that is not base64.
    """
    for name, _ in headers:
        if name not in PROTOCOL_FIELDS and name[:1] != b":":
            break
    else:
        return NO_METADATA  # the usual response headers and trailers: nothing to parse
    pairs: list[tuple[str, MetadataValue]] = []
    for name, value in headers:
        if name[:1] == b":":
            continue
        key = name.decode("ascii", "replace")
        if _reserved(key):
            continue
        if key.endswith("-bin"):
            pairs.append((key, decode_bin(value)))
        else:
            pairs.append((key, value.decode("ascii", "replace")))
    md = Metadata.__new__(Metadata)
    md._pairs = tuple(pairs)  # the peer's names: kept as they came (already lowercase)
    return md


#: ``grpc-timeout`` units, smallest first, in seconds (PROTOCOL-HTTP2.md).
TIMEOUT_UNITS: tuple[tuple[str, float], ...] = (
    ("n", 1e-9),
    ("u", 1e-6),
    ("m", 1e-3),
    ("S", 1.0),
    ("M", 60.0),
    ("H", 3600.0),
)
_UNIT_SECONDS = dict(TIMEOUT_UNITS)
#: "positive integer as ASCII string of at most 8 digits".
MAX_TIMEOUT_VALUE = 99_999_999
_TIMEOUT = re.compile(rb"([0-9]{1,8})([HMSmun])\Z")


def encode_timeout(seconds: float) -> str:
    """``seconds`` (> 0) as a ``grpc-timeout`` value, in the finest unit that fits
    in 8 digits, rounded up (a deadline is never sent earlier than it is)."""
    if not seconds > 0 or math.isinf(seconds):
        raise ValueError(f"a grpc-timeout must be positive and finite, not {seconds}")
    for unit, size in TIMEOUT_UNITS:
        value = math.ceil(seconds / size - 1e-9)
        if value <= MAX_TIMEOUT_VALUE:
            return f"{max(value, 1)}{unit}"
    return f"{MAX_TIMEOUT_VALUE}H"  # about 11 000 years: as good as none


def parse_timeout(value: bytes | str) -> float:
    """A ``grpc-timeout`` value in seconds. ValueError if malformed."""
    raw = value.encode("ascii", "replace") if isinstance(value, str) else value
    match = _TIMEOUT.match(raw)
    if match is None:
        raise ValueError(f"malformed grpc-timeout: {raw!r}")
    return int(match.group(1)) * _UNIT_SECONDS[match.group(2).decode()]
