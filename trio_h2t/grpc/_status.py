"""Status codes, ``RpcError``, and the mappings onto HTTP (sans-IO).

Theory of operation
-------------------
A gRPC call ends with a status: ``grpc-status`` (a decimal code) and an optional
``grpc-message`` in the trailers, or in the only HEADERS of a trailers-only response
(grpc/grpc ``doc/PROTOCOL-HTTP2.md``, "Responses"). The message is UTF-8,
percent-encoded on the wire: the printable ASCII characters except ``%`` go as they
are, every other byte as ``%XX``; a receiver decodes what it can and never fails on
a malformed sequence (it keeps it literally).

When no status arrives, the client derives one: from the HTTP ``:status`` of a
non-200 response (grpc/grpc ``doc/http-grpc-status-mapping.md``) or from the
RST_STREAM code that ended the stream (``PROTOCOL-HTTP2.md``, "Errors").

Nothing here does I/O or imports trio.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Any, final

from ._metadata import Metadata, MetadataLike

__all__ = [
    "RpcError",
    "StatusCode",
    "decode_grpc_message",
    "encode_grpc_message",
    "status_from_http",
    "status_from_rst",
]


@final
class StatusCode(enum.IntEnum):
    """The gRPC status codes (grpc/grpc ``doc/statuscodes.md``)."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16

    def __str__(self) -> str:
        return f"StatusCode.{self.name}"  # not IntEnum's bare number


def code_from_wire(value: bytes | str) -> StatusCode:
    """``grpc-status`` as a StatusCode; UNKNOWN for a value that is not a known code.

    (grpc-go's ``http_util.go`` takes any integer; a code outside 0..16 is not one the
    application can act on, so it becomes UNKNOWN, as ``doc/statuscodes.md`` advises.)
    """
    try:
        return StatusCode(int(value))
    except ValueError:
        return StatusCode.UNKNOWN


#: Bytes a ``grpc-message`` carries as they are: printable ASCII but ``%``
#: (PROTOCOL-HTTP2.md: %x20-%x24 / %x26-%x7E).
_UNRESERVED = frozenset(range(0x20, 0x7F)) - {0x25}


def encode_grpc_message(details: str) -> str:
    """Percent-encode ``details`` (UTF-8) for the ``grpc-message`` field."""
    raw = details.encode("utf-8", "surrogatepass")
    if all(b in _UNRESERVED for b in raw):
        return details
    return "".join(chr(b) if b in _UNRESERVED else f"%{b:02X}" for b in raw)


_HEX = frozenset(b"0123456789abcdefABCDEF")


def decode_grpc_message(value: bytes | str) -> str:
    """Undo ``encode_grpc_message``; a malformed ``%`` sequence is kept literally,
    and bytes that are not UTF-8 become U+FFFD (a receiver never fails on it)."""
    raw = value.encode("latin-1", "replace") if isinstance(value, str) else value
    if b"%" not in raw:
        return raw.decode("utf-8", "replace")
    out = bytearray()
    i, n = 0, len(raw)
    while i < n:
        b = raw[i]
        if b == 0x25 and i + 2 < n and raw[i + 1] in _HEX and raw[i + 2] in _HEX:
            out.append(int(raw[i + 1 : i + 3], 16))
            i += 3
        else:
            out.append(b)
            i += 1
    return out.decode("utf-8", "replace")


#: grpc/grpc ``doc/http-grpc-status-mapping.md``: a non-200 HTTP status without a
#: ``grpc-status``; any other status is UNKNOWN.
HTTP_TO_GRPC: dict[int, StatusCode] = {
    400: StatusCode.INTERNAL,
    401: StatusCode.UNAUTHENTICATED,
    403: StatusCode.PERMISSION_DENIED,
    404: StatusCode.UNIMPLEMENTED,
    429: StatusCode.UNAVAILABLE,
    502: StatusCode.UNAVAILABLE,
    503: StatusCode.UNAVAILABLE,
    504: StatusCode.UNAVAILABLE,
}


def status_from_http(http_status: int) -> StatusCode:
    """The gRPC code a client reports for a non-200 response without ``grpc-status``."""
    return HTTP_TO_GRPC.get(http_status, StatusCode.UNKNOWN)


#: PROTOCOL-HTTP2.md, "Errors": the code a client reports when RST_STREAM ends a
#: call. STREAM_CLOSED has no mapping there; it and unknown codes are INTERNAL.
RST_TO_GRPC: dict[int, StatusCode] = {
    0x0: StatusCode.INTERNAL,  # NO_ERROR (before the status: the call is incomplete)
    0x1: StatusCode.INTERNAL,  # PROTOCOL_ERROR
    0x2: StatusCode.INTERNAL,  # INTERNAL_ERROR
    0x3: StatusCode.INTERNAL,  # FLOW_CONTROL_ERROR
    0x4: StatusCode.INTERNAL,  # SETTINGS_TIMEOUT
    0x6: StatusCode.INTERNAL,  # FRAME_SIZE_ERROR
    0x7: StatusCode.UNAVAILABLE,  # REFUSED_STREAM: the server did not process it
    0x8: StatusCode.CANCELLED,  # CANCEL
    0x9: StatusCode.INTERNAL,  # COMPRESSION_ERROR
    0xA: StatusCode.INTERNAL,  # CONNECT_ERROR
    0xB: StatusCode.RESOURCE_EXHAUSTED,  # ENHANCE_YOUR_CALM
    0xC: StatusCode.PERMISSION_DENIED,  # INADEQUATE_SECURITY
}


def status_from_rst(error_code: int) -> StatusCode:
    """The gRPC code a client reports when RST_STREAM(``error_code``) ends a call."""
    return RST_TO_GRPC.get(int(error_code), StatusCode.INTERNAL)


#: The trailing-metadata key carrying a serialized ``google.rpc.Status``.
STATUS_DETAILS_KEY = "grpc-status-details-bin"


class RpcError(Exception):
    """A call ended with a status other than OK.

    A client call raises it (``code``, ``details``, ``initial_metadata``,
    ``trailing_metadata``, ``status_details``); a server handler may raise it to end
    its call with that status (and trailing metadata). ``status_details`` is the
    ``grpc-status-details-bin`` value (a serialized ``google.rpc.Status``), passed
    through untouched, or None.
    """

    def __init__(
        self,
        code: StatusCode | int,
        details: str = "",
        *,
        trailing_metadata: MetadataLike = (),
        initial_metadata: MetadataLike = (),
        status_details: bytes | None = None,
    ) -> None:
        self.code = StatusCode(code)
        if self.code == StatusCode.OK:
            raise ValueError("an RpcError cannot carry the status OK")
        self.details = details
        self.trailing_metadata = Metadata(trailing_metadata)
        self.initial_metadata = Metadata(initial_metadata)
        if status_details is None:
            found = self.trailing_metadata.get(STATUS_DETAILS_KEY)
            status_details = found if isinstance(found, bytes) else None
        self.status_details = status_details
        super().__init__(self.code, details)

    def __str__(self) -> str:
        return f"{self.code.name}: {self.details}" if self.details else self.code.name

    def __repr__(self) -> str:
        return f"RpcError({self.code.name}, {self.details!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        # Every field survives pickling (e.g. across a process pool); the signature
        # has keyword-only arguments, which the default reduction cannot pass.
        return (
            _rebuild,
            (
                self.code,
                self.details,
                tuple(self.trailing_metadata),
                tuple(self.initial_metadata),
                self.status_details,
            ),
        )


def _rebuild(
    code: StatusCode,
    details: str,
    trailing: Iterable[tuple[str, Any]],
    initial: Iterable[tuple[str, Any]] = (),
    status_details: bytes | None = None,
) -> RpcError:
    return RpcError(
        code,
        details,
        trailing_metadata=list(trailing),
        initial_metadata=list(initial),
        status_details=status_details,
    )
