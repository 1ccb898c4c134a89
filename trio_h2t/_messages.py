"""Read-only views of HTTP messages: :class:`Headers`, :class:`Request`, :class:`Response`.

Theory of operation
-------------------
The transport keeps header blocks as it received them, lists of ``(bytes, bytes)``
pairs (``H2Stream.headers``); these classes are views over such a block for
application code, built only when asked for (``H2Stream.request``,
``ClientConnection.request``), so a handler that never uses them pays nothing.

:class:`Headers` is an immutable multi-dict of the *regular* fields of a block:
pseudo-header fields (``:method``, ``:status``...) are left out of it and carried by
:class:`Request` / :class:`Response` as their own attributes (and, for a request, in
``raw_headers``). Names are matched case-insensitively; HTTP/2 names are lowercase on
the wire (RFC 9113 §8.2.1, checked by ``_headers.py``), so a key is lowercased and
compared with them as bytes.

The type of the key picks the type of the value: a ``str`` key gives ``str``
values, decoded as UTF-8 with ``surrogateescape`` (the same encoding ``send_headers``
uses for ``str`` values, so what one side sends as ``str`` the other reads back
unchanged; a byte that is not UTF-8 never raises and survives the round trip
``value.encode("utf-8", "surrogateescape")``); a ``bytes`` key gives the bytes as
received.

Every object here is immutable after init; none touches the transport but
:func:`connection_info`, which the stream calls once per connection.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar, final, overload

import trio
from h2.errors import ErrorCodes

from ._exceptions import RemoteProtocolError, _code

__all__ = [
    "CancelKind",
    "CancelReason",
    "ConnectionInfo",
    "Headers",
    "Request",
    "Response",
    "TLSInfo",
    "connection_info",
]

T = TypeVar("T")

#: How ``str`` values are decoded (and ``str`` keys encoded); see the module docstring.
ENCODING = "utf-8"
ERRORS = "surrogateescape"

RawHeaders = Sequence[tuple[bytes, bytes]]


def _encode(field: bytes | str) -> bytes:
    if isinstance(field, str):
        return field.encode(ENCODING, ERRORS)
    if isinstance(field, bytes | bytearray | memoryview):
        return bytes(field)
    raise TypeError(f"a header field must be bytes or str, not {type(field).__name__}")


def _decode(value: bytes) -> str:
    return value.decode(ENCODING, ERRORS)


@final
class Headers:
    """An immutable, case-insensitive multi-dict of header fields, in wire order.

    ``Headers(pairs)`` takes ``(name, value)`` pairs of ``bytes`` or ``str`` (``str``
    encoded as UTF-8) and keeps the regular fields: pseudo-header fields (names
    starting with ``:``) are left out. Duplicates are kept, in order.

    - ``h["Content-Type"]`` -> the first value, as ``str``; ``h[b"content-type"]`` ->
      as ``bytes``. ``KeyError`` if absent. Names match case-insensitively.
    - ``h.get(name, default=None)``, ``h.get_all(name)`` (alias ``getlist``): every
      value of ``name`` in order, ``[]`` if none.
    - ``name in h``; ``iter(h)`` yields the name (``str``) of every field in order,
      a repeated name once per field, as ``len(h)`` counts fields; ``h.items()`` the
      ``(name, value)`` pairs as ``str``; ``h.raw`` the pairs as ``bytes``.
    - Equal to another ``Headers`` with the same pairs in the same order; hashable.
    """

    __slots__ = ("_index", "_raw")

    def __init__(self, pairs: Iterable[tuple[bytes | str, bytes | str]] = ()) -> None:
        raw: list[tuple[bytes, bytes]] = []
        for pair in pairs:
            name, value = pair
            if type(name) is bytes and type(value) is bytes:
                if name[:1] != b":":
                    raw.append((name, value))
                continue
            bname = _encode(name)
            if bname[:1] != b":":
                raw.append((bname, _encode(value)))
        self._raw: tuple[tuple[bytes, bytes], ...] = tuple(raw)  # immutable after init
        # name -> values, built on the first lookup. Set once; immutable after.
        self._index: dict[bytes, list[bytes]] | None = None

    def _values(self, key: str | bytes) -> list[bytes]:
        index = self._index
        if index is None:
            index = {}
            for name, value in self._raw:
                index.setdefault(name, []).append(value)
            self._index = index
        if isinstance(key, str):
            key = key.encode(ENCODING, ERRORS)
        elif not isinstance(key, bytes):
            raise TypeError(f"a header name must be str or bytes, not {type(key).__name__}")
        return index.get(key.lower(), [])

    @overload
    def __getitem__(self, key: str) -> str: ...
    @overload
    def __getitem__(self, key: bytes) -> bytes: ...
    def __getitem__(self, key: str | bytes) -> str | bytes:
        values = self._values(key)
        if not values:
            raise KeyError(key)
        return _decode(values[0]) if isinstance(key, str) else values[0]

    @overload
    def get(self, key: str) -> str | None: ...
    @overload
    def get(self, key: str, default: T) -> str | T: ...
    @overload
    def get(self, key: bytes) -> bytes | None: ...
    @overload
    def get(self, key: bytes, default: T) -> bytes | T: ...
    def get(self, key: str | bytes, default: object = None) -> object:
        """The first value of ``key`` (``str`` or ``bytes``, as the key), or ``default``."""
        values = self._values(key)
        if not values:
            return default
        return _decode(values[0]) if isinstance(key, str) else values[0]

    @overload
    def get_all(self, key: str) -> list[str]: ...
    @overload
    def get_all(self, key: bytes) -> list[bytes]: ...
    def get_all(self, key: str | bytes) -> list[str] | list[bytes]:
        """Every value of ``key`` in order, duplicates kept; ``[]`` if there is none."""
        values = self._values(key)
        if isinstance(key, str):
            return [_decode(v) for v in values]
        return list(values)

    getlist = get_all

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str | bytes):
            return False
        return bool(self._values(key))

    def __iter__(self) -> Iterator[str]:
        return (_decode(name) for name, _ in self._raw)

    def __len__(self) -> int:
        return len(self._raw)

    def items(self) -> list[tuple[str, str]]:
        """Every ``(name, value)`` pair as ``str``, in order, duplicates kept."""
        return [(_decode(n), _decode(v)) for n, v in self._raw]

    @property
    def raw(self) -> tuple[tuple[bytes, bytes], ...]:
        """The fields as received, ``(name, value)`` byte pairs, in order."""
        return self._raw

    def __repr__(self) -> str:
        return f"trio_h2t.Headers({list(self._raw)!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Headers):
            return NotImplemented
        return self._raw == other._raw

    def __hash__(self) -> int:
        return hash(self._raw)


def _pseudo(raw: RawHeaders, name: bytes) -> bytes | None:
    for n, v in raw:
        if n == name:
            return v
        if n[:1] != b":":
            break  # RFC 9113 §8.3: pseudo-header fields come first
    return None


@final
@dataclass(frozen=True, slots=True)
class TLSInfo:
    """What the TLS layer negotiated (a connection over ``trio.SSLStream``)."""

    #: The ALPN protocol selected in the handshake (``"h2"``), or None.
    alpn_protocol: str | None
    #: The peer's certificate as ``ssl.SSLSocket.getpeercert()`` gives it (an empty
    #: dict if it was not validated), or None if the peer sent none.
    peer_certificate: dict[str, Any] | None


@final
@dataclass(frozen=True, slots=True)
class ConnectionInfo:
    """Addresses and TLS state of one connection, computed once (``connection_info``)."""

    peer: tuple[str, int] | None
    local: tuple[str, int] | None
    tls: TLSInfo | None


def _address(get: Any) -> tuple[str, int] | None:
    try:
        addr = get()
    except OSError:
        return None  # e.g. ENOTCONN: the peer is already gone
    if isinstance(addr, tuple) and len(addr) >= 2:
        return (str(addr[0]), int(addr[1]))  # AF_INET / AF_INET6: (host, port, ...)
    return None  # other families (AF_UNIX: a path) have no host and port


def connection_info(transport: trio.abc.Stream) -> ConnectionInfo:
    """Peer and local ``(host, port)`` of a ``trio.SocketStream`` (also under a
    ``trio.SSLStream``), and the TLS state of a ``trio.SSLStream``; None otherwise.
    """
    tls = None
    inner: object = transport
    if isinstance(transport, trio.SSLStream):
        try:
            alpn = transport.selected_alpn_protocol()
            cert = transport.getpeercert()
        except trio.NeedHandshakeError:
            alpn, cert = None, None
        tls = TLSInfo(alpn, cert)
        inner = transport.transport_stream
    if isinstance(inner, trio.SocketStream):
        sock = inner.socket
        return ConnectionInfo(_address(sock.getpeername), _address(sock.getsockname), tls)
    return ConnectionInfo(None, None, tls)


@final
@dataclass(frozen=True, slots=True)
class Request:
    """A server stream's request head (``H2Stream.request``), decoded.

    ``method``, ``path``, ``scheme`` and ``authority`` are the pseudo-header fields
    (UTF-8 with ``surrogateescape``, as :class:`Headers`); one a request lacks is
    ``""`` (a CONNECT request has no ``:path`` or ``:scheme``), and ``authority``
    falls back to the ``host`` field (RFC 9113 §8.3.1). ``headers`` has the regular
    fields, ``raw_headers`` the whole block as received. ``peer`` / ``local`` are
    the connection's ``(host, port)`` when it runs over TCP, ``tls`` its TLS state
    over ``trio.SSLStream``; None otherwise.
    """

    method: str
    path: str
    scheme: str
    authority: str
    headers: Headers
    raw_headers: tuple[tuple[bytes, bytes], ...] = field(repr=False)
    peer: tuple[str, int] | None = None
    local: tuple[str, int] | None = None
    tls: TLSInfo | None = field(default=None, repr=False)

    @classmethod
    def _from_block(cls, raw: RawHeaders, info: ConnectionInfo) -> Request:
        headers = Headers(raw)

        def pseudo(name: bytes) -> str:
            value = _pseudo(raw, name)
            return "" if value is None else _decode(value)

        authority = pseudo(b":authority") or headers.get("host", "")
        return cls(
            method=pseudo(b":method"),
            path=pseudo(b":path"),
            scheme=pseudo(b":scheme"),
            authority=authority,
            headers=headers,
            raw_headers=tuple(raw),
            peer=info.peer,
            local=info.local,
            tls=info.tls,
        )


@final
@dataclass(frozen=True, slots=True)
class Response:
    """A whole response (``ClientConnection.request``): status, fields, body, trailers.

    ``informational`` holds the 1xx responses that came before it (103 Early Hints,
    100 Continue...), in order, each a Response with an empty body and no trailers.
    """

    status: int
    headers: Headers
    body: bytes = field(repr=False)
    trailers: Headers
    informational: tuple[Response, ...] = ()

    @classmethod
    def _from_parts(
        cls,
        raw: RawHeaders,
        body: bytes,
        trailers: RawHeaders,
        informational: Sequence[RawHeaders] = (),
    ) -> Response:
        status = _pseudo(raw, b":status")
        # _headers.py checks that a response has a :status (RFC 9113 §8.3.2), not
        # its form (RFC 9110 §15: three digits).
        if status is None or len(status) != 3 or not status.isdigit():
            raise RemoteProtocolError(f"the response's :status is not three digits: {status!r}")
        early = tuple(cls._from_parts(block, b"", ()) for block in informational)
        return cls(int(status), Headers(raw), body, Headers(trailers), early)


#: Why a server handler was cancelled (``CancelReason.kind``). By the connection:
#:
#: - ``"peer-reset"``: the peer sent RST_STREAM (``error_code`` is its code);
#: - ``"stream-error"``: this side reset the stream because the peer broke the
#:   protocol on it (a malformed request; ``error_code`` is the code we sent);
#: - ``"connection-lost"``: the peer or the network ended the connection
#:   (``error_code`` is the GOAWAY code for a protocol error, else None);
#: - ``"shutdown"``: this side closed the connection: a graceful close
#:   (``H2Server.aclose``, ``ServerConnection.aclose``, ``ClientConnection.aclose``)
#:   whose grace period ran out, or the server stopping.
#:
#: By the handler's own deadline:
#:
#: - ``"deadline"``: the scope ``H2Stream.move_on_at`` made for the handler was
#:   cancelled (its deadline passed) before the connection cancelled the handler.
CancelKind = Literal["peer-reset", "stream-error", "connection-lost", "shutdown", "deadline"]


@final
@dataclass(frozen=True, slots=True)
class CancelReason:
    """Why a server handler was cancelled (``H2Stream.cancel_reason``)."""

    kind: CancelKind
    error_code: ErrorCodes | int | None = None

    @classmethod
    def _make(cls, kind: CancelKind, error_code: int | None = None) -> CancelReason:
        return cls(kind, None if error_code is None else _code(error_code))


#: The reason of a handler cancelled by its deadline scope (``H2Stream.move_on_at``).
DEADLINE = CancelReason("deadline")
