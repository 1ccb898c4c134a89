"""The server: a method registry, one task per RPC, and the servicer context.

Theory of operation
-------------------
A :class:`Server` is a trio_h2t ``Handler``: give it to ``trio_h2t.serve_tcp``,
``open_server``, ``serve_listeners`` or ``serve_connection``. The transport already
runs one task per stream (so one per RPC) in the connection's nursery, cancels it
when the client resets the stream, and resets the request side with NO_ERROR when
the response has ended before the client half-closed (grpc/grpc
``doc/PROTOCOL-HTTP2.md``: the server may end a call before the client is done).

For each stream the server checks the request (POST, else HTTP 405; a gRPC
content-type, else HTTP 415; a known method, else UNIMPLEMENTED, through the
server's interceptors when it has some; a well-formed ``grpc-timeout`` and a
supported ``grpc-encoding``), then runs the method's handler inside a cancel scope
whose deadline is the ``grpc-timeout`` (``H2Stream.move_on_at``, so the stream's
``cancel_reason`` says "deadline"): when it expires the handler is cancelled and
the call ends with DEADLINE_EXCEEDED.

The status goes in the trailers, or, when nothing was sent before it, in a
trailers-only response (one HEADERS frame with END_STREAM). A handler that raises
:class:`RpcError` ends its call with that status (its ``details`` as ``grpc-message``,
its ``status_details`` as ``grpc-status-details-bin``, whether or not its trailing
metadata holds them); any other exception ends it with
UNKNOWN, logged on the ``trio_h2t.grpc`` logger with its traceback, none of which
goes on the wire.

Only trio_h2t's public API is used (``tests/grpc_layer/test_wire.py`` checks it).
"""

from __future__ import annotations

import enum
import inspect
import logging
import math
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, NoReturn, Protocol, TypeAlias, final, runtime_checkable

import trio

import trio_h2t
from trio_h2t import H2Stream
from trio_h2t._shared import only_exception as _unwrap

from ._codec import Deserializer, Serializer, identity_deserializer, identity_serializer
from ._framing import (
    ACCEPT_ENCODING,
    DEFAULT_MAX_RECEIVE_MESSAGE_SIZE,
    SUPPORTED_ENCODINGS,
    MessageDecoder,
    check_encoding,
    compress as compress_payload,
    decompress,
    encode_message,
)
from ._interceptors import (
    ServerCallDetails,
    ServerInterceptor,
    check_server_interceptors,
    run_server_chain,
)
from ._metadata import (
    NO_METADATA,
    STATUS_DETAILS_KEY,
    Metadata,
    MetadataLike,
    metadata_from_headers,
    metadata_to_headers,
    parse_timeout,
)
from ._status import RpcError, StatusCode, encode_grpc_message
from ._util import NoPublicConstructor, check_bool, check_size

__all__ = [
    "GenericHandler",
    "MethodHandler",
    "MethodKind",
    "Server",
    "ServicerContext",
    "method_handlers_generic_handler",
    "rpc",
    "stream_stream_handler",
    "stream_unary_handler",
    "unary_stream_handler",
    "unary_unary_handler",
]

log = logging.getLogger("trio_h2t.grpc")

_TRANSPORT_ERRORS = (trio.BrokenResourceError, trio.ClosedResourceError)
_NO_MESSAGES: list[tuple[bool, bytes]] = []  # _Requests._messages before any (never appended)

# Built once, not per RPC (the hot path of a small unary call).
_STATUS_VALUES = {code: str(int(code)).encode() for code in StatusCode}
_ACCEPT_ENCODING = ACCEPT_ENCODING.encode()
_STATUS_BLOCKS = {code: ((b"grpc-status", value),) for code, value in _STATUS_VALUES.items()}
_RESPONSE_HEAD = (
    (b":status", b"200"),
    (b"content-type", b"application/grpc"),
    (b"grpc-accept-encoding", _ACCEPT_ENCODING),
)
_NO_HEADERS: list[tuple[bytes, bytes]] = []  # ServicerContext._initial by default (never appended)
_TRAILERS_ONLY_HEAD = (
    (b":status", b"200"),
    (b"content-type", b"application/grpc"),
    (b"grpc-accept-encoding", _ACCEPT_ENCODING),
)
# grpc-accept-encoding values seen -> their parsed sets (clients send one or two
# values for a whole connection); bounded so a peer cannot grow it without limit.
_ACCEPT_CACHE: dict[bytes, frozenset[str]] = {}
_ACCEPT_CACHE_MAX = 64


def _parse_accept(value: bytes | None) -> frozenset[str]:
    if value is None:
        return frozenset()
    found = _ACCEPT_CACHE.get(value)
    if found is None:
        text = value.decode("utf-8", "surrogateescape")  # as Headers.get(str) decodes
        found = frozenset(e.strip() for e in text.split(",") if e.strip())
        if len(_ACCEPT_CACHE) < _ACCEPT_CACHE_MAX:
            _ACCEPT_CACHE[value] = found
    return found


@final
class MethodKind(enum.Enum):
    """The four kinds of gRPC method: whether each direction is a stream."""

    UNARY_UNARY = "unary_unary"
    UNARY_STREAM = "unary_stream"
    STREAM_UNARY = "stream_unary"
    STREAM_STREAM = "stream_stream"

    @property
    def request_streaming(self) -> bool:
        return self in (MethodKind.STREAM_UNARY, MethodKind.STREAM_STREAM)

    @property
    def response_streaming(self) -> bool:
        return self in (MethodKind.UNARY_STREAM, MethodKind.STREAM_STREAM)


HandlerFn: TypeAlias = Callable[..., Any]


@final
@dataclass(frozen=True, slots=True)
class MethodHandler:
    """How to run one method: its kind, the handler and the (de)serializers.

    The handler is ``async def handler(request, context)`` (unary request) or
    ``async def handler(requests, context)`` (``requests`` an async iterator). A
    unary response is its return value; a streaming response is what it yields
    (an async generator), what it passes to ``await context.write(response)``, or
    the items of an async iterator a plain function returns.
    """

    kind: MethodKind
    handler: HandlerFn
    request_deserializer: Deserializer = identity_deserializer
    response_serializer: Serializer = identity_serializer


def _check_handler(kind: MethodKind, handler: HandlerFn) -> None:
    """A unary-response handler must be an ``async def`` that returns the response:
    say so at registration, not as UNKNOWN on every call. Only plain functions are
    checked (a callable object or a ``functools.partial`` is trusted)."""
    if not callable(handler):
        raise TypeError(f"a gRPC method handler must be callable, not {handler!r}")
    if kind.response_streaming or not (inspect.isfunction(handler) or inspect.ismethod(handler)):
        return
    if inspect.iscoroutinefunction(handler):
        return
    what = handler.__qualname__
    if inspect.isasyncgenfunction(handler):
        streaming = "stream_stream" if kind.request_streaming else "unary_stream"
        raise TypeError(
            f"{what} is an async generator, but a {kind.value} method returns one "
            f"response: make it {streaming} (rpc({streaming!r}), {streaming}_handler) "
            "or return the response"
        )
    raise TypeError(f"a {kind.value} method must be an async def; {what} is a plain function")


def _make(kind: MethodKind) -> Callable[..., MethodHandler]:
    def make(
        handler: HandlerFn,
        *,
        request_deserializer: Deserializer | None = None,
        response_serializer: Serializer | None = None,
    ) -> MethodHandler:
        _check_handler(kind, handler)
        return MethodHandler(
            kind,
            handler,
            request_deserializer or identity_deserializer,
            response_serializer or identity_serializer,
        )

    make.__name__ = f"{kind.value}_handler"
    make.__doc__ = f"A :class:`MethodHandler` for a {kind.value.replace('_', '-')} method."
    return make


unary_unary_handler = _make(MethodKind.UNARY_UNARY)
unary_stream_handler = _make(MethodKind.UNARY_STREAM)
stream_unary_handler = _make(MethodKind.STREAM_UNARY)
stream_stream_handler = _make(MethodKind.STREAM_STREAM)


@runtime_checkable
class GenericHandler(Protocol):
    """Anything with ``service(method) -> MethodHandler | None`` (``method`` is the
    path, ``/package.Service/Method``); the server asks each in turn."""

    def service(self, method: str) -> MethodHandler | None: ...


@final
class _PathHandler:
    __slots__ = ("_methods",)

    def __init__(self, methods: Mapping[str, MethodHandler]) -> None:
        self._methods = dict(methods)  # immutable after init

    def service(self, method: str) -> MethodHandler | None:
        return self._methods.get(method)


def method_handlers_generic_handler(
    service: str, handlers: Mapping[str, MethodHandler]
) -> GenericHandler:
    """A handler for ``service`` (``package.Service``) from ``{method_name: handler}``."""
    return _PathHandler({f"/{service}/{name}": h for name, h in handlers.items()})


_RPC_ATTR = "__trio_h2t_grpc_rpc__"


def rpc(
    kind: MethodKind | str = MethodKind.UNARY_UNARY,
    *,
    name: str | None = None,
    request_deserializer: Deserializer | None = None,
    response_serializer: Serializer | None = None,
) -> Callable[[HandlerFn], HandlerFn]:
    """Mark a method of a service class as an RPC (``Server.add_service``).

    ``kind`` is a :class:`MethodKind` or its value (``"unary_stream"``...); ``name``
    the method's name on the wire (default: the function's name).
    """
    kind = MethodKind(kind)

    def mark(fn: HandlerFn) -> HandlerFn:
        _check_handler(kind, fn)
        setattr(fn, _RPC_ATTR, (kind, name, request_deserializer, response_serializer))
        return fn

    return mark


def _peer_string(peer: tuple[str, int] | None) -> str:
    if peer is None:
        return "unknown"
    host, port = peer
    return f"ipv6:[{host}]:{port}" if ":" in host else f"ipv4:{host}:{port}"


@final
class ServicerContext(metaclass=NoPublicConstructor):
    """What a handler knows about its call, and how it shapes the response.

    Built by the server, one per RPC; see ``docs/grpc.md``.
    """

    __slots__ = (
        "_accept",
        "_code",
        "_deadline",
        "_details",
        "_encoding",
        "_ended",
        "_headers_sent",
        "_initial",
        "_metadata",
        "_request_compressed",
        "_serializer",
        "_server",
        "_stream",
        "_trailing",
        "method",
    )

    def __init__(
        self,
        server: Server,
        stream: H2Stream,
        method: str,
        metadata: Metadata | None,
        deadline: float,
        accept: frozenset[str],
        response_serializer: Serializer,
    ) -> None:
        self._server = server  # immutable after init
        self._stream = stream  # immutable after init
        #: The method's path, ``/package.Service/Method``.
        self.method = method  # immutable after init
        # owner: the handler task. The request's metadata; None: not parsed yet (it
        # is parsed from the stream's headers when the handler first asks for it).
        self._metadata = metadata
        self._deadline = deadline  # immutable after init
        self._accept = accept  # immutable after init: the client's grpc-accept-encoding
        self._serializer = response_serializer  # immutable after init
        # owner: the handler task
        self._headers_sent = False
        self._initial: list[tuple[bytes, bytes]] = _NO_HEADERS
        self._trailing = NO_METADATA
        self._code: StatusCode | None = None
        self._details = ""
        self._encoding: str | None = self._pick(server.compression)
        self._ended = False
        self._request_compressed: bool | None = None  # written by the call's _Requests

    @property
    def invocation_metadata(self) -> Metadata:
        """The metadata the client sent with its request headers."""
        metadata = self._metadata
        if metadata is None:
            # Cannot fail: a block with a -bin field was parsed before the handler ran.
            metadata = self._metadata = metadata_from_headers(self._stream.headers or ())
        return metadata

    # ------------------------------------------------------------------ call info

    @property
    def peer(self) -> str:
        """The client's address as grpcio writes it, such as ``ipv4:127.0.0.1:5000``."""
        return _peer_string(self._stream.request.peer)

    @property
    def peer_address(self) -> tuple[str, int] | None:
        """The client's ``(host, port)`` over TCP, else None."""
        return self._stream.request.peer

    @property
    def request(self) -> trio_h2t.Request:
        """The HTTP request head (``trio_h2t.Request``): authority, TLS state..."""
        return self._stream.request

    @property
    def deadline(self) -> float | None:
        """The call's deadline on the Trio clock (from ``grpc-timeout``), or None."""
        return None if self._deadline == math.inf else self._deadline

    def time_remaining(self) -> float | None:
        """Seconds left before the deadline, or None if the call has none."""
        if self._deadline == math.inf:
            return None
        return max(0.0, self._deadline - trio.current_time())

    @property
    def cancelled(self) -> bool:
        """True once the call was cancelled, by the client (it reset its stream), by
        its deadline, or by the connection ending under it (the server shutting down,
        a lost connection). :attr:`cancel_reason` says which."""
        return self._stream.cancel_reason is not None

    @property
    def cancel_reason(self) -> trio_h2t.CancelReason | None:
        """Why this call's handler was cancelled (``trio_h2t.CancelReason``), or None.

        ``kind`` is ``"deadline"`` (the ``grpc-timeout`` expired), ``"peer-reset"``
        (the client reset the stream; ``error_code`` CANCEL when it cancelled the
        call), ``"shutdown"`` (the server is shutting down and its grace period ran
        out), ``"connection-lost"`` or ``"stream-error"``. The first reason stays
        (``H2Stream.cancel_reason``).
        """
        return self._stream.cancel_reason

    @property
    def request_compressed(self) -> bool | None:
        """Whether the last request message read had its Compressed-Flag set on the
        wire (None before the first one). For a unary request, the request's."""
        return self._request_compressed

    # ------------------------------------------------------------------ response

    def set_code(self, code: StatusCode | int) -> None:
        """The status the call ends with when the handler returns."""
        self._code = StatusCode(code)

    def set_details(self, details: str) -> None:
        """The status message the call ends with."""
        self._details = details

    def set_trailing_metadata(self, metadata: MetadataLike) -> None:
        """Metadata sent with the status (ValueError for reserved keys)."""
        md = Metadata(metadata)
        metadata_to_headers(md)  # check now, in the handler, not at the end
        self._trailing = md

    def abort(
        self, code: StatusCode | int, details: str = "", trailing_metadata: MetadataLike = ()
    ) -> NoReturn:
        """End the call now with ``code`` (not OK): raises RpcError, which the server
        turns into the status."""
        raise RpcError(code, details, trailing_metadata=trailing_metadata or self._trailing)

    def set_compression(self, encoding: str | None) -> None:
        """Compress the response messages with ``encoding`` ("gzip", "deflate"; None or
        "identity" for none), if the client accepts it; before the first message."""
        if self._headers_sent:
            raise RuntimeError("set_compression() must come before the response headers")
        self._encoding = self._pick(check_encoding(encoding))

    def _pick(self, encoding: str | None) -> str | None:
        return encoding if encoding is not None and encoding in self._accept else None

    async def send_initial_metadata(self, metadata: MetadataLike = ()) -> None:
        """Send the response headers now, with ``metadata``.

        Checkpoint: always. On cancellation: the headers were not queued.
        Raises RuntimeError if they were already sent.
        """
        if self._headers_sent:
            raise RuntimeError("the initial metadata was already sent")
        self._initial = [*self._initial, *metadata_to_headers(Metadata(metadata))]
        await self._send_headers()

    def add_initial_metadata(self, metadata: MetadataLike) -> None:
        """Metadata for the response headers, sent with them when they go (after
        any added before; a server interceptor's way to add headers). RuntimeError
        if the headers were already sent; ValueError for reserved keys."""
        if self._headers_sent:
            raise RuntimeError("add_initial_metadata() must come before the response headers")
        self._initial = [*self._initial, *metadata_to_headers(Metadata(metadata))]

    def add_trailing_metadata(self, metadata: MetadataLike) -> None:
        """Metadata sent with the status, after what was set or added before
        (:meth:`set_trailing_metadata` replaces it). ValueError for reserved keys."""
        md = Metadata(metadata)
        metadata_to_headers(md)  # check now
        self._trailing = Metadata([*self._trailing, *md])

    async def _send_headers(self) -> None:
        await self._stream.send_headers(self._head_block())
        self._headers_sent = True  # after: a cancelled send_headers queued nothing

    def _head_block(self) -> Sequence[tuple[bytes, bytes]]:
        if self._encoding is None and not self._initial:
            return _RESPONSE_HEAD  # send_headers copies it
        head = [(b":status", b"200"), (b"content-type", b"application/grpc")]
        if self._encoding is not None:
            head.append((b"grpc-encoding", self._encoding.encode()))
        head.append((b"grpc-accept-encoding", _ACCEPT_ENCODING))
        head.extend(self._initial)
        return head

    async def write(self, message: Any, *, compress: bool = True) -> None:
        """Send one response message (sending the headers first if needed).

        ``compress=False`` sends this message uncompressed (its Compressed-Flag
        clear) when the call compresses (:meth:`set_compression`); it changes
        nothing otherwise.

        Checkpoint: always. On cancellation: the message was not queued (the
        headers may have been). Raises RpcError(RESOURCE_EXHAUSTED) if the
        serialized message exceeds the server's ``max_send_message_size``.
        """
        payload = self._serialized(message)
        if not self._headers_sent:
            await self._send_headers()
        await self._stream.send_data(self._framed(payload, compress))

    def _write_nowait(self, message: Any) -> None:
        """``write`` without a checkpoint: the unary response, which
        ``Server.__call__`` queues with its status in the same scheduling step
        (``H2Stream.send_*_nowait``). Raises trio.WouldBlock, the message not queued
        (the headers may have been), if the stream's write quota is used up."""
        payload = self._serialized(message)
        if not self._headers_sent:
            self._stream.send_headers_nowait(self._head_block())
            self._headers_sent = True
        self._stream.send_data_nowait(self._framed(payload, True))

    def _serialized(self, message: Any) -> bytes:
        payload = self._serializer(message)
        limit = self._server.max_send_message_size
        if limit is not None and len(payload) > limit:
            raise RpcError(
                StatusCode.RESOURCE_EXHAUSTED,
                f"trying to send message larger than max ({len(payload)} vs. {limit})",
            )
        return payload

    def _framed(self, payload: bytes, compress: bool) -> bytes:
        encoding = self._encoding if compress else None
        if encoding is not None:
            payload = compress_payload(payload, encoding)
        return encode_message(payload, compressed=encoding is not None)

    async def _send_status(self, code: StatusCode, details: str, trailing: Metadata) -> None:
        """Queue the status (trailers, or a trailers-only response), once.
        Checkpoint: always, unless it was sent already. On cancellation: not sent."""
        if self._ended:
            return
        await trio.lowlevel.checkpoint_if_cancelled()
        self._send_status_nowait(code, details, trailing)
        await trio.lowlevel.cancel_shielded_checkpoint()

    def _send_status_nowait(self, code: StatusCode, details: str, trailing: Metadata) -> None:
        """``_send_status`` without a checkpoint (queuing headers never waits)."""
        if self._ended:
            return
        self._ended = True
        if not details and not trailing:
            block: list[tuple[bytes, bytes]] | tuple[tuple[bytes, bytes], ...]
            block = _STATUS_BLOCKS[code]  # a tuple, built once: send_* copy what they keep
        else:
            block = self._status_block(code, details, trailing)
        try:
            if self._headers_sent:
                self._stream.send_trailers_nowait(block)
            else:
                # Trailers-only (PROTOCOL-HTTP2.md): one HEADERS frame, END_STREAM.
                self._headers_sent = True
                self._stream.send_headers_nowait([*_TRAILERS_ONLY_HEAD, *block], end_stream=True)
        except _TRANSPORT_ERRORS as exc:
            log.debug("status of %s not sent: %r", self.method, exc)

    def _status_block(
        self, code: StatusCode, details: str, trailing: Metadata
    ) -> list[tuple[bytes, bytes]]:
        block = [(b"grpc-status", _STATUS_VALUES[code])]
        if details:
            block.append((b"grpc-message", encode_grpc_message(details).encode("ascii")))
        if trailing:
            try:
                block.extend(metadata_to_headers(trailing))
            except ValueError:
                log.exception("trailing metadata of %s refused", self.method)
        return block


@final
class _Requests:
    """The request messages of one call, decoded as they arrive (an async iterator)."""

    __slots__ = (
        "_context",
        "_decoder",
        "_deserializer",
        "_encoding",
        "_ended",
        "_max",
        "_messages",
        "_stream",
        "_taken",
    )

    def __init__(
        self,
        stream: H2Stream,
        max_size: int | None,
        encoding: str | None,
        deserializer: Deserializer,
        context: ServicerContext,
        buffer_reuse: bool,
    ) -> None:
        self._stream = stream  # immutable after init
        self._context = context  # immutable after init: told each message's flag
        self._decoder = MessageDecoder(max_size, buffer_reuse=buffer_reuse)  # owner: handler
        self._max = max_size  # immutable after init
        self._encoding = encoding  # immutable after init
        self._deserializer = deserializer  # immutable after init
        # owner: the handler task. The messages of the last chunk decoded (a list per
        # chunk, replaced once all are taken) and how many of them were taken.
        self._messages: list[tuple[bool, bytes]] = _NO_MESSAGES
        self._taken = 0
        self._ended = False  # owner: the handler task

    def __aiter__(self) -> _Requests:
        return self

    async def __anext__(self) -> Any:
        payload = await self.next_payload()
        if payload is None:
            raise StopAsyncIteration
        return self._deserialize(payload)

    def _deserialize(self, payload: bytes) -> Any:
        try:
            return self._deserializer(payload)
        except Exception as exc:
            raise RpcError(
                StatusCode.INTERNAL, f"failed to deserialize the request: {type(exc).__name__}"
            ) from exc

    async def next_payload(self) -> bytes | None:
        """The next request message's bytes, or None once the client half-closed.

        Checkpoint: always (once, without waiting, when a message is buffered or the
        requests had already ended; else each read of the stream is one).
        """
        if self._taken == len(self._messages):
            if self._ended:
                await trio.lowlevel.checkpoint()
                return None
            while True:
                chunk = await self._stream.receive_some()  # a checkpoint
                if self._fed(chunk):
                    break
                if self._ended:
                    return None
        else:
            await trio.lowlevel.checkpoint()
        return self._pop()

    def next_payload_nowait(self) -> bytes | None:
        """``next_payload`` from what the stream has already received, without a
        checkpoint; raises trio.WouldBlock (nothing lost: bytes read so far stay in
        the decoder) if the next message, or the end, has not arrived."""
        if self._taken == len(self._messages):
            if self._ended:
                return None
            while True:
                if self._fed(self._stream.receive_some_nowait()):
                    break
                if self._ended:
                    return None
        return self._pop()

    def _fed(self, chunk: bytes) -> bool:
        """Decode a chunk read (``b""``: the end); True if it completed messages."""
        if chunk:
            self._messages = self._decoder.feed(chunk)  # all taken: replaced
            self._taken = 0
            return bool(self._messages)
        if self._decoder.pending:
            raise RpcError(StatusCode.INTERNAL, "the request ended inside a message")
        self._ended = True
        return False

    def _pop(self) -> bytes:
        """The next decoded message's payload (decompressed); there is one."""
        messages = self._messages
        taken = self._taken
        compressed, payload = messages[taken]
        taken += 1
        if taken == len(messages):
            # All taken: not kept until the next read (a handler may wait long).
            self._messages = _NO_MESSAGES
            taken = 0
        self._taken = taken
        self._context._request_compressed = compressed
        if compressed:
            if self._encoding is None:
                raise RpcError(StatusCode.INTERNAL, "compressed message without a grpc-encoding")
            payload = decompress(payload, self._encoding, self._max)
        return payload

    async def single(self) -> Any:
        """The one request of a unary-request call (INTERNAL for none or several).

        Checkpoint: always; once when the whole request has arrived (it usually
        comes in one read with its headers): each schedule point is a trip of every
        call in flight through trio's scheduler, and keeps their objects alive
        meanwhile (``docs/grpc.md``, "Latency and the cyclic collector").
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        first = False
        try:
            payload = self.next_payload_nowait()
            first = True
            more = None if payload is None else self.next_payload_nowait()
        except trio.WouldBlock:
            # The rest is on its way: read it as it comes (each read a checkpoint).
            if not first:
                payload = await self.next_payload()
            more = None if payload is None else await self.next_payload()
        else:
            await trio.lowlevel.cancel_shielded_checkpoint()
        if payload is None:
            raise RpcError(StatusCode.INTERNAL, "the client sent no request message")
        if more is not None:
            raise RpcError(StatusCode.INTERNAL, "the client sent more than one request message")
        return self._deserialize(payload)


_GRPC_CT = b"application/grpc"


def _is_grpc_content_type(value: bytes | None) -> bool:
    # PROTOCOL-HTTP2.md: "application/grpc" [("+proto" / "+json" / {custom})]
    return value is not None and (
        value == _GRPC_CT or value.startswith((_GRPC_CT + b"+", _GRPC_CT + b";"))
    )


@final
class Server:
    """A gRPC server: a registry of methods, and a trio_h2t handler that runs them.

    ``Server(handlers)`` takes generic handlers (:class:`GenericHandler`, e.g. from
    :func:`method_handlers_generic_handler`), mappings ``{path: MethodHandler}`` and
    service objects (see :meth:`add_service`). Options (keyword-only):
    ``max_receive_message_size`` (default 4 MiB; None: no limit),
    ``max_send_message_size`` (default None), ``compression`` (the response
    compression when the client accepts it; None), ``buffer_reuse`` (default True:
    each call's request decoder keeps one buffer for messages of 1 KiB and more, see
    :class:`MessageDecoder`), ``interceptors`` (server interceptors, the first the
    outermost; ``docs/grpc.md``, "Interceptors").

    Serve it with any trio_h2t server: ``trio_h2t.open_server(server, port)``.
    """

    def __init__(
        self,
        handlers: Iterable[GenericHandler | Mapping[str, MethodHandler] | object] = (),
        *,
        max_receive_message_size: int | None = DEFAULT_MAX_RECEIVE_MESSAGE_SIZE,
        max_send_message_size: int | None = None,
        compression: str | None = None,
        buffer_reuse: bool = True,
        interceptors: Sequence[ServerInterceptor] = (),
    ) -> None:
        self.buffer_reuse = check_bool(buffer_reuse, "buffer_reuse")  # immutable after init
        # immutable after init: () when none, so a call tests one attribute
        self._interceptors = check_server_interceptors(interceptors)
        # immutable after init
        self.max_receive_message_size = check_size(
            max_receive_message_size, "max_receive_message_size"
        )
        # immutable after init
        self.max_send_message_size = check_size(max_send_message_size, "max_send_message_size")
        self.compression = check_encoding(compression)  # immutable after init
        # owner: set-up code (add_*), before serving; read by every RPC task
        self._generic: list[GenericHandler] = []
        self._methods: dict[str, MethodHandler] = {}
        for handler in handlers:
            if isinstance(handler, GenericHandler):
                self.add_generic_handler(handler)
            elif isinstance(handler, Mapping):
                for path, method in handler.items():
                    self.add_method(path, method)
            else:
                self.add_service(handler)

    def __aenter__(self) -> NoReturn:
        """Not a context manager: ``async with grpc.Server(...)`` raises TypeError
        naming the transport's ``open_server``, which serves it (Python's own error
        says only that Server is not a context manager)."""
        raise TypeError(
            "a grpc.Server is a handler, not a running server: serve it with"
            " `async with trio_h2t.open_server(server, port) as h2server:`"
        )

    async def __aexit__(self, *args: object) -> None:
        """Never reached (``__aenter__`` raises); Python looks for it first.

        Checkpoint: never (it is never entered). On cancellation: nothing."""

    def add_generic_handler(self, handler: GenericHandler) -> None:
        """Ask ``handler.service(path)`` for methods not registered by path."""
        self._generic.append(handler)

    def add_method(self, path: str, handler: MethodHandler) -> None:
        """Register ``handler`` for ``path`` (``/package.Service/Method``).

        Raises, at once: TypeError if ``path`` is not a str or ``handler`` not a
        :class:`MethodHandler` (build one with :func:`unary_unary_handler`...);
        ValueError if ``path`` is not of the form ``/package.Service/Method``.
        """
        if not isinstance(path, str):
            raise TypeError(f"a method path must be a str, not {type(path).__name__}")
        service, _, method = path[1:].partition("/")
        if not path.startswith("/") or not service or not method or "/" in method:
            raise ValueError(f"a method path is /package.Service/Method, not {path!r}")
        if not isinstance(handler, MethodHandler):
            raise TypeError(
                f"the handler for {path} must be a grpc.MethodHandler (from "
                f"grpc.unary_unary_handler(fn) and the like), not {type(handler).__name__}"
            )
        self._methods[path] = handler

    def add_service(self, service: object, name: str | None = None) -> None:
        """Register the :func:`rpc`-marked methods of ``service`` (an instance) under
        ``name`` (default: its ``SERVICE_NAME`` attribute, ``package.Service``)."""
        name = name or getattr(service, "SERVICE_NAME", None)
        if not isinstance(name, str):
            raise TypeError(f"{service!r} has no SERVICE_NAME; pass name='package.Service'")
        found = False
        for attr in dir(type(service)):
            fn = getattr(type(service), attr, None)
            spec = getattr(fn, _RPC_ATTR, None)
            if spec is None:
                continue
            kind, wire_name, deser, ser = spec
            self._methods[f"/{name}/{wire_name or attr}"] = MethodHandler(
                kind,
                getattr(service, attr),
                deser or identity_deserializer,
                ser or identity_serializer,
            )
            found = True
        if not found:
            raise ValueError(f"{service!r} has no method marked with @rpc")

    def lookup(self, path: str) -> MethodHandler | None:
        """The handler for ``path``, or None."""
        found = self._methods.get(path)
        if found is not None:
            return found
        for generic in self._generic:
            found = generic.service(path)
            if found is not None:
                return found
        return None

    def _requests(
        self,
        stream: H2Stream,
        encoding: str | None,
        method: MethodHandler,
        context: ServicerContext,
    ) -> _Requests:
        return _Requests(
            stream,
            self.max_receive_message_size,
            encoding,
            method.request_deserializer,
            context,
            self.buffer_reuse,
        )

    def _unimplemented(self, path: str) -> str:
        """UNIMPLEMENTED's details for ``path``: an unknown method or service."""
        service = path.rsplit("/", 1)[0].lstrip("/")
        paths = [*self._methods]
        for generic in self._generic:
            paths.extend(getattr(generic, "_methods", ()))
        if any(p.startswith(f"/{service}/") for p in paths):
            return f"unknown method {path.rsplit('/', 1)[-1]} for service {service}"
        return f"unknown service {service}"

    async def _intercepted(
        self,
        method: MethodHandler,
        stream: H2Stream,
        encoding: str | None,
        context: ServicerContext,
    ) -> None:
        """Run the call's handler through the server's interceptors."""
        requests = self._requests(stream, encoding, method, context)
        details = ServerCallDetails(context.method, method.kind, context)

        async def handler() -> None:
            await _dispatch(method, requests, context)

        await run_server_chain(self._interceptors, details, handler)

    def _open_call(self, stream: H2Stream) -> tuple[ServicerContext, MethodHandler, str | None]:
        """Check the request's head and build the call's context: the context, the
        method to run and the request's ``grpc-encoding`` (None: identity).

        Raises _Refused, the answer to send instead: HTTP 405 (not POST), HTTP 415
        (not a gRPC content-type), INTERNAL (malformed metadata or grpc-timeout),
        UNIMPLEMENTED (an unknown method, with no interceptors to see it; an
        unsupported grpc-encoding).
        """
        raw = stream.headers or ()
        fields, binary = _scan_head(raw)
        http_method, raw_path, content_type, raw_accept, timeout, raw_encoding = fields
        if http_method != b"POST":
            raise _Refused(
                StatusCode.INTERNAL, f"method {stream.request.method} is not POST", http=b"405"
            )
        if not _is_grpc_content_type(content_type):
            raise _Refused(
                StatusCode.INVALID_ARGUMENT,
                f"invalid gRPC request content-type {content_type!r}",
                http=b"415",
            )
        path = "" if raw_path is None else raw_path.decode("utf-8", "surrogateescape")
        method = self.lookup(path)
        serializer = method.response_serializer if method else identity_serializer
        accept = _parse_accept(raw_accept)
        try:
            # Metadata is parsed here only when a -bin field could make it fail (the
            # call then ends before its handler), else when the handler asks for it.
            metadata = metadata_from_headers(raw) if binary else None
            deadline = math.inf if timeout is None else trio.current_time() + parse_timeout(timeout)
        except ValueError as exc:
            raise _Refused(StatusCode.INTERNAL, str(exc), http=b"200") from None
        context = ServicerContext._create(
            self, stream, path, metadata, deadline, accept, serializer
        )
        if method is None:
            if not self._interceptors:
                raise _Refused(StatusCode.UNIMPLEMENTED, self._unimplemented(path), context=context)
            # As grpcio and grpc-go's unknown-service handler: the interceptors see
            # the call (a logger logs it, an auth check may refuse it first); the
            # "handler" inside them ends it UNIMPLEMENTED.
            method = _unimplemented_handler(self._unimplemented(path))
        return context, method, _request_encoding(raw_encoding, context)

    async def _serve_unary(
        self,
        method: MethodHandler,
        stream: H2Stream,
        encoding: str | None,
        context: ServicerContext,
    ) -> None:
        """Run a unary-unary handler without interceptors (the unary fast path):
        ``_dispatch``'s first case, with the response queued without a checkpoint,
        so that ``__call__`` queues the status after it in the same scheduling step
        (``single()`` checkpointed). The ``_Requests`` (and its decoder) is a
        temporary: nothing keeps it while the handler runs."""
        request = await self._requests(stream, encoding, method, context).single()
        response = await method.handler(request, context)
        if context._code is None or context._code is StatusCode.OK:
            if response is None:
                _returned_none(method)
            try:
                context._write_nowait(response)
            except trio.WouldBlock:
                await context.write(response)  # waits for write quota

    async def _serve_dispatched(
        self,
        method: MethodHandler,
        stream: H2Stream,
        encoding: str | None,
        context: ServicerContext,
    ) -> None:
        """Run any other handler without interceptors (``_dispatch``)."""
        await _dispatch(method, self._requests(stream, encoding, method, context), context)

    async def __call__(self, stream: H2Stream) -> None:
        """Serve one RPC on ``stream`` (the trio_h2t handler).

        Checkpoint: always. On cancellation: (the client reset the stream, or the
        connection ended) the handler is cancelled and nothing more is sent.
        """
        try:
            context, method, encoding = self._open_call(stream)
        except _Refused as refused:
            await refused.send(stream)
            return
        # No deadline, no scope (the transport's own scope still cancels the handler
        # when the client resets the stream). A grpc-timeout's scope is made by the
        # stream (move_on_at), so the handler's cancel_reason says "deadline" once it
        # expires (unless the transport cancelled it first). It is entered and left
        # by hand, as a with statement would (tests/grpc_layer/test_footprint.py
        # pins what a call in flight keeps).
        deadline = context._deadline
        scope = None if deadline == math.inf else stream.move_on_at(deadline)
        unary = False  # the unary path went through: its status goes out without a wait
        failure = _NO_FAILURE
        try:
            if scope is not None:
                scope.__enter__()
            try:
                if self._interceptors:
                    await self._intercepted(method, stream, encoding, context)
                elif method.kind is MethodKind.UNARY_UNARY:
                    await self._serve_unary(method, stream, encoding, context)
                    unary = True
                else:
                    await self._serve_dispatched(method, stream, encoding, context)
            except BaseException as exc:
                if not _scope_caught(scope, exc):
                    raise
            else:
                if scope is not None:
                    scope.__exit__(None, None, None)
        except Exception as exc:
            failure = _failure_status(exc, stream, context.method)
        code, details, trailing = _final_status(context, scope, failure)
        if unary:
            context._send_status_nowait(code, details, trailing)
        else:
            await context._send_status(code, details, trailing)


# The request headers Server.__call__ reads, by name: their index in _scan_head's list.
_HEAD_FIELDS = {
    b":method": 0,
    b":path": 1,
    b"content-type": 2,
    b"grpc-accept-encoding": 3,
    b"grpc-timeout": 4,
    b"grpc-encoding": 5,
}


def _scan_head(raw: Sequence[tuple[bytes, bytes]]) -> tuple[list[bytes | None], bool]:
    """One pass over the raw request block (the transport checked it: lowercase
    names, pseudo-headers first and once each): the first value of each of
    ``_HEAD_FIELDS`` (as Headers.get), None when absent, in that order; and True if
    some other field is a binary (``-bin``) one."""
    found: list[bytes | None] = [None, None, None, None, None, None]
    binary = False
    for name, value in raw:
        index = _HEAD_FIELDS.get(name)
        if index is None:
            if name[-4:] == b"-bin":
                binary = True
        elif found[index] is None:
            found[index] = value
    return found, binary


def _request_encoding(raw: bytes | None, context: ServicerContext) -> str | None:
    """The request's ``grpc-encoding`` (None: absent or identity); raises _Refused
    (UNIMPLEMENTED) for one the server does not support."""
    if raw is None:
        return None
    encoding = raw.decode("utf-8", "surrogateescape")
    if encoding == "identity":
        return None
    if encoding not in SUPPORTED_ENCODINGS:
        raise _Refused(
            StatusCode.UNIMPLEMENTED,
            f"grpc-encoding {encoding!r} is not supported",
            context=context,
        )
    return encoding


class _Refused(Exception):
    """A call refused before its handler runs, and how it is answered (``send``):
    with ``http``, by ``_early_abort`` (the request is not a gRPC call the server
    can read); with ``context``, by the call's status, trailers-only."""

    def __init__(
        self,
        code: StatusCode,
        details: str,
        *,
        http: bytes = b"200",
        context: ServicerContext | None = None,
    ) -> None:
        super().__init__(code, details)
        self.code = code
        self.details = details
        self.http = http
        self.context = context

    async def send(self, stream: H2Stream) -> None:
        """Answer the refused call. Checkpoint: always. On cancellation: not sent."""
        if self.context is None:
            await _early_abort(stream, self.http, self.code, self.details)
        else:
            await self.context._send_status(self.code, self.details, NO_METADATA)


#: (code, details, trailing metadata, status details) of a handler that raised nothing.
_Failure: TypeAlias = tuple[StatusCode, str, Metadata, bytes | None]
_NO_FAILURE: _Failure = (StatusCode.OK, "", NO_METADATA, None)


def _scope_caught(scope: trio.CancelScope | None, exc: BaseException) -> bool:
    """Leave the call's deadline scope (None: it has none) with ``exc`` raised, as
    a with statement would: True if the scope caught it (its own cancellation)."""
    return scope is not None and bool(scope.__exit__(type(exc), exc, exc.__traceback__))


def _failure_status(exc: Exception, stream: H2Stream, path: str) -> _Failure:
    """The status a handler's exception ends its call with: an RpcError's own, else
    UNKNOWN (logged with its traceback). Raises ``exc`` again when the stream is
    gone under the handler (nothing to answer)."""
    err = _unwrap(exc)
    if isinstance(err, RpcError):
        return err.code, err.details, err.trailing_metadata, err.status_details
    if isinstance(err, _TRANSPORT_ERRORS) and _stream_gone(stream):
        raise exc
    log.exception("handler for %s raised", path)
    return (
        StatusCode.UNKNOWN,
        f"Exception calling application: {type(err).__name__}",
        NO_METADATA,
        None,
    )


def _final_status(
    context: ServicerContext, scope: trio.CancelScope | None, failure: _Failure
) -> tuple[StatusCode, str, Metadata]:
    """The status the call ends with: DEADLINE_EXCEEDED if its deadline cancelled
    the handler; else what the handler set on its context (it returned, or raised
    an OK RpcError); else its failure's, with the context's trailing metadata when
    the failure has none. RpcError(status_details=...) adds them to the trailing
    metadata when its own lacks them."""
    code, details, trailing, status_details = failure
    if scope is not None and scope.cancelled_caught:
        code, details, trailing = StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded", NO_METADATA
    elif code == StatusCode.OK:
        code = context._code if context._code is not None else StatusCode.OK
        details = context._details
        trailing = context._trailing
    elif not trailing:
        trailing = context._trailing
    if status_details is not None and trailing.get(STATUS_DETAILS_KEY) != status_details:
        # RpcError(status_details=...) without the key in its trailing metadata.
        pairs = [(k, v) for k, v in trailing if k != STATUS_DETAILS_KEY]
        trailing = Metadata([*pairs, (STATUS_DETAILS_KEY, status_details)])
    return code, details, trailing


def _unimplemented_handler(details: str) -> MethodHandler:
    """The handler an unknown method runs inside the server's interceptors: it
    ends the call UNIMPLEMENTED with ``details``, reading nothing. Its kind is
    STREAM_STREAM, as grpc-go's unknown-service handler is a bidi stream."""

    async def unimplemented(requests: object, context: ServicerContext) -> None:
        raise RpcError(StatusCode.UNIMPLEMENTED, details)

    return MethodHandler(MethodKind.STREAM_STREAM, unimplemented)


def _returned_none(method: MethodHandler) -> None:
    """A unary-response handler returned None with no status set. A serializer that
    takes None (``json.dumps``, say) is left to it; one that refuses it fails here
    with an error that says what happened (its own blames NoneType, or protobuf's
    descriptor)."""
    try:
        method.response_serializer(None)
    except Exception:
        name = getattr(method.handler, "__qualname__", repr(method.handler))
        raise TypeError(
            f"{name} returned None, but a {method.kind.value} method returns its response:"
            " return the response message, or end the call with context.abort(code, details)"
            " or context.set_code(...) before returning"
        ) from None


def _stream_gone(stream: H2Stream) -> bool:
    """True if the stream is gone under the handler: the transport cancelled it (a
    reset, the connection's end), or, after its deadline, the stream was closed too
    (a reset or the connection's end after the deadline leave "deadline" the reason)."""
    reason = stream.cancel_reason
    return reason is not None and (reason.kind != "deadline" or stream.closed)


async def _early_abort(stream: H2Stream, http: bytes, code: StatusCode, details: str) -> None:
    """Refuse a request before any handler runs: one HEADERS frame, END_STREAM."""
    await stream.send_headers(
        [
            (b":status", http),
            (b"content-type", b"application/grpc"),
            (b"grpc-status", str(int(code)).encode()),
            (b"grpc-message", encode_grpc_message(details).encode("ascii")),
        ],
        end_stream=True,
    )


async def _dispatch(method: MethodHandler, requests: _Requests, context: ServicerContext) -> None:
    kind = method.kind
    fn = method.handler
    arg: Any = await requests.single() if not kind.request_streaming else requests
    if not kind.response_streaming:
        response = await fn(arg, context)
        if context._code in (None, StatusCode.OK):
            if response is None:
                _returned_none(method)
            await context.write(response)
        return
    # A streaming response: an async generator's yields, or what the coroutine
    # passes to context.write (an async iterator returned by a plain function too).
    result = fn(arg, context)
    if inspect.isawaitable(result):
        result = await result
    if result is None:
        return
    if not hasattr(result, "__anext__"):
        raise TypeError(f"a streaming handler returned {type(result).__name__}, not None")
    if inspect.isasyncgen(result):
        async with aclosing(result) as responses:
            async for response in responses:
                await context.write(response)
        return
    iterator: AsyncIterator[Any] = result
    async for response in iterator:
        await context.write(response)
