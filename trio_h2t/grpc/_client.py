"""The client: ``Channel``, its four kinds of method, and ``Call``.

Theory of operation
-------------------
A :class:`Channel` wraps one ``trio_h2t.ClientConnection``; every call is one
HTTP/2 stream opened with ``open_stream`` (its context manager is the call's
lifetime), so the transport's rules apply as they are: leaving the call's block
before the call completed, for any reason (an exception, a cancellation, a
``break``), resets the stream with CANCEL, which is how gRPC cancels a call
(grpc/grpc ``doc/PROTOCOL-HTTP2.md``, "Errors").

Deadlines are Trio cancel scopes. A call's ``timeout`` is a scope of its own
around the stream; the deadline sent as ``grpc-timeout`` is the earlier of that
and the caller's effective deadline (``trio.current_effective_deadline``), so a
surrounding ``trio.move_on_after`` bounds the server too. When the call's own
scope expires it raises RpcError(DEADLINE_EXCEEDED); when a surrounding scope
expires, that scope's cancellation proceeds as usual (the stream is reset).

Receiving is done by the task that asks for a message: a :class:`Call` decodes
the response's DATA with a sans-IO ``MessageDecoder`` and reads the status from
the trailers (or from the headers of a trailers-only response, or derives it from
the HTTP status or the RST_STREAM code, ``_status.py``).

Only trio_h2t's public API is used (``tests/grpc_layer/test_wire.py`` checks it).
"""

from __future__ import annotations

import dataclasses
import math
import ssl
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from types import TracebackType
from typing import Any, ClassVar, Generic, NoReturn, TypeVar, final

import trio

import trio_h2t
from trio_h2t import ClientConnection, H2Stream

from ._backoff import ConnectionBackoff
from ._balancer import LB_POLICIES, Address, Balancer, ConnectivityState
from ._codec import Deserializer, Serializer, identity_deserializer, identity_serializer
from ._framing import (
    ACCEPT_ENCODING,
    DEFAULT_MAX_RECEIVE_MESSAGE_SIZE,
    MessageDecoder,
    check_encoding,
    compress as compress_payload,
    decompress,
    encode_message,
)
from ._interceptors import (
    CallCredentials,
    ClientCallDetails,
    ClientInterceptor,
    check_client_interceptors,
    credentials_interceptor,
    intercepted_call,
)
from ._metadata import (
    NO_METADATA,
    Metadata,
    MetadataLike,
    encode_timeout,
    metadata_from_headers,
    metadata_to_headers,
)
from ._retry import CallRetryState, RetryBufferPool, RetryThrottle
from ._retrying import (
    open_with_retries,
    run_with_retries,
    stream_unary_attempt,
    unary_stream_attempt,
    unary_unary_attempt,
)
from ._server import MethodKind
from ._service_config import ServiceConfig, parse_service_config
from ._status import (
    RpcError,
    StatusCode,
    code_from_wire,
    decode_grpc_message,
    status_from_http,
    status_from_rst,
)
from ._target import Target, parse_target
from ._util import AsyncWithOnly, NoPublicConstructor, check_bool, check_size

__all__ = [
    "Call",
    "Channel",
    "StreamStreamMethod",
    "StreamUnaryMethod",
    "UnaryStreamMethod",
    "UnaryUnaryMethod",
    "open_channel",
]

Req = TypeVar("Req")
Resp = TypeVar("Resp")

USER_AGENT = f"trio_h2t-grpc/{trio_h2t.__version__}"
_FIXED_REQUEST_HEADERS = (
    (b"te", b"trailers"),
    (b"content-type", b"application/grpc"),
    (b"user-agent", USER_AGENT.encode()),
    (b"grpc-accept-encoding", ACCEPT_ENCODING.encode()),
)
_PLAIN_HEADERS_MAX = 256
#: RST_STREAM CANCEL (RFC 9113 §7): how a client cancels a call.
RST_CANCEL = 0x8
# LocalProtocolError: this side failed to frame the stream's HEADERS (INTERNAL).
_TRANSPORT_ERRORS = (
    trio.BrokenResourceError,
    trio.ClosedResourceError,
    trio_h2t.LocalProtocolError,
)
_NO_MESSAGES: list[tuple[bool, bytes]] = []  # Call._messages before any (never appended to)


#: Transparent retries of one call (a stream that never reached a handler) on a
#: balanced channel, at most; then the call fails UNAVAILABLE.
MAX_TRANSPARENT_RETRIES = 10
_NEVER_PROCESSED = (
    trio_h2t.StreamRefusedError,
    trio_h2t.GoAwayError,
    trio_h2t.ConnectionClosingError,
)


def _never_processed(exc: BaseException) -> bool:
    """Whether ``exc`` (or the transport error an RpcError came from) says the
    server never processed the stream: a transparent retry may resend it."""
    if isinstance(exc, RpcError):
        cause = exc.__cause__
        if cause is None:
            return False
        exc = cause
    return isinstance(exc, _NEVER_PROCESSED) and exc.retryable


def _error_from_transport(exc: BaseException) -> tuple[StatusCode, str]:
    """The status a call reports when the transport ended its stream with ``exc``."""
    if isinstance(exc, trio_h2t.StreamRefusedError):
        return StatusCode.UNAVAILABLE, "the server refused the stream (it was not processed)"
    if isinstance(exc, trio_h2t.StreamResetError):
        who = "the server" if exc.remote else "this side"
        code = exc.error_code
        name = getattr(code, "name", str(code))
        return status_from_rst(code), f"stream reset by {who} with {name}"
    if isinstance(exc, trio_h2t.ConnectionClosingError):
        return StatusCode.UNAVAILABLE, "the connection is closing"
    if isinstance(exc, trio.ClosedResourceError):
        return StatusCode.CANCELLED, "the call was cancelled by this side"
    if isinstance(exc, trio_h2t.LocalProtocolError):
        return StatusCode.INTERNAL, f"this side could not send the call: {exc}"
    text = str(exc)
    if text.startswith("the connection was lost"):  # ConnectionLostError's own words
        return StatusCode.UNAVAILABLE, text
    return StatusCode.UNAVAILABLE, f"the connection was lost: {text}"


@final
class Call(Generic[Req, Resp], metaclass=NoPublicConstructor):
    """One RPC in progress (built by a channel method; see ``docs/grpc.md``).

    Send with :meth:`send_message` and :meth:`done_writing`; receive with
    :meth:`receive_message` (or ``async for``) or :meth:`receive_response` (a
    single response). ``code``, ``details`` and ``trailing_metadata`` are None
    until the call has ended; :meth:`initial_metadata` waits for the headers.

    One task may send while another receives; two tasks receiving (or sending) at
    once get ``trio.BusyResourceError``.
    """

    __slots__ = (
        "_channel",
        "_code",
        "_decoder",
        "_deserializer",
        "_details",
        "_encoding",
        "_initial",
        "_last_compressed",
        "_messages",
        "_response_encoding",
        "_serializer",
        "_stream",
        "_taken",
        "_trailing",
        "_waits",
        "_writing_done",
        "method",
    )

    def __init__(
        self,
        channel: Channel,
        stream: H2Stream,
        method: str,
        serializer: Serializer,
        deserializer: Deserializer,
        encoding: str | None,
    ) -> None:
        self._channel = channel  # immutable after init
        self._stream = stream  # immutable after init
        #: The method's path, ``/package.Service/Method``.
        self.method = method  # immutable after init
        self._serializer = serializer  # immutable after init
        self._deserializer = deserializer  # immutable after init
        self._encoding = encoding  # immutable after init: what we compress with
        # owner: the sending task
        self._writing_done = False
        # owner: the receiving task. Built with the first DATA: a unary call waits
        # for its response without it.
        self._decoder: MessageDecoder | None = None
        # The messages of the last chunk decoded, and how many of them were taken.
        self._messages: list[tuple[bool, bytes]] = _NO_MESSAGES
        self._taken = 0
        self._initial: Metadata | None = None
        self._response_encoding: str | None = None
        self._last_compressed: bool | None = None
        self._code: StatusCode | None = None
        self._details: str | None = None
        self._trailing: Metadata | None = None
        # Awaits on the stream so far: a public receive that made none still
        # schedules once (cancel_shielded_checkpoint), as trio's rule asks.
        self._waits = 0

    def __repr__(self) -> str:
        state = "active" if self._code is None else self._code.name
        return f"<trio_h2t.grpc.Call {self.method} {state}>"

    # ------------------------------------------------------------------ status

    @property
    def code(self) -> StatusCode | None:
        """The call's status code, once it has ended (else None)."""
        return self._code

    @property
    def details(self) -> str | None:
        """The status message (decoded ``grpc-message``), once the call has ended."""
        return self._details

    @property
    def trailing_metadata(self) -> Metadata | None:
        """The trailing metadata, once the call has ended."""
        return self._trailing

    @property
    def response_encoding(self) -> str | None:
        """The response's ``grpc-encoding`` ("gzip", "deflate"), once its headers
        arrived; None for identity (no compression)."""
        return self._response_encoding

    @property
    def last_message_compressed(self) -> bool | None:
        """Whether the last response message received had its Compressed-Flag set
        on the wire (None before the first one)."""
        return self._last_compressed

    def cancel(self) -> None:
        """Cancel the call: RST_STREAM(CANCEL). Synchronous and idempotent; later
        receives raise RpcError(CANCELLED)."""
        if self._code is None:
            self._set_status(StatusCode.CANCELLED, "the call was cancelled by this side")
        self._stream.reset(RST_CANCEL)

    def _set_status(self, code: StatusCode, details: str, trailing: Metadata | None = None) -> None:
        if self._code is None:
            self._code = code
            self._details = details
            self._trailing = trailing if trailing is not None else NO_METADATA

    def _rpc_error(self) -> RpcError:
        assert self._code is not None
        assert self._code != StatusCode.OK
        return RpcError(
            self._code,
            self._details or "",
            trailing_metadata=self._trailing or (),
            initial_metadata=self._initial or (),
        )

    # ------------------------------------------------------------------ sending

    async def send_message(self, message: Req, *, compress: bool = True) -> None:
        """Serialize and send one request message.

        ``compress=False`` sends this message uncompressed (its Compressed-Flag
        clear) on a call that compresses with ``grpc-encoding``; it changes nothing
        on a call without compression.

        Checkpoint: always. On cancellation: the message may or may not have been
        queued; the call's block resets the stream anyway.

        Raises:
            RpcError: RESOURCE_EXHAUSTED if the message exceeds the channel's
                ``max_send_message_size`` (nothing sent); the call's status if the
                stream ended under it (a reset, the connection lost).
            trio.ClosedResourceError: :meth:`done_writing` was called, or the call
                already ended with status OK (the server needed no more requests).
        """
        await self._send(message, end=False, compress=compress)

    async def done_writing(self) -> None:
        """Half-close: tell the server no more requests follow. Idempotent.

        Checkpoint: always. On cancellation: END_STREAM may or may not have been
        queued; the call's block resets the stream anyway.
        """
        if self._writing_done:
            await trio.lowlevel.checkpoint()
            return
        self._writing_done = True
        try:
            await self._stream.end()
        except _TRANSPORT_ERRORS as exc:
            self._raise_send_failure(exc)

    async def _send(self, message: Req, *, end: bool, compress: bool = True) -> None:
        if self._writing_done:
            raise trio.ClosedResourceError("done_writing() was called on this call")
        if self._code is not None:
            # The call has ended (its status was received): nothing more is read.
            if self._code != StatusCode.OK:
                raise self._rpc_error()
            raise trio.ClosedResourceError("the call has already ended with status OK")
        payload = self._serializer(message)
        limit = self._channel.max_send_message_size
        if limit is not None and len(payload) > limit:
            raise RpcError(
                StatusCode.RESOURCE_EXHAUSTED,
                f"trying to send message larger than max ({len(payload)} vs. {limit})",
            )
        encoding = self._encoding if compress else None
        frame = encode_message(
            compress_payload(payload, encoding) if encoding else payload,
            compressed=encoding is not None,
        )
        if end:
            self._writing_done = True
        try:
            await self._stream.send_data(frame, end_stream=end)
        except _TRANSPORT_ERRORS as exc:
            self._raise_send_failure(exc)

    def _raise_send_failure(self, exc: BaseException) -> None:
        if self._code is not None and self._code != StatusCode.OK:
            raise self._rpc_error() from exc
        code, details = _error_from_transport(exc)
        if code == StatusCode.CANCELLED and self._code is None:
            raise exc
        raise RpcError(code, details) from exc

    # ------------------------------------------------------------------ receiving

    async def initial_metadata(self) -> Metadata:
        """Wait for the response headers; return their metadata.

        Checkpoint: always. On cancellation: nothing is consumed.
        Raises RpcError if the call ends without headers.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        if self._need_headers():
            try:
                headers = await self._stream.receive_headers()
            except _TRANSPORT_ERRORS as exc:
                self._headers_lost(exc)
            self._take_headers(headers)
        else:
            await trio.lowlevel.cancel_shielded_checkpoint()
        assert self._initial is not None
        return self._initial

    # Receiving the headers is _need_headers(), then ``await stream.receive_headers()``
    # in the caller's own frame, then _take_headers: no coroutine of its own (one
    # object less per call in flight while it waits for its response).

    def _need_headers(self) -> bool:
        """True if the response headers are still to come (the caller then waits for
        them); False if they came, or the call ended without them (raising its
        status unless OK)."""
        if self._initial is not None:
            return False
        if self._code is not None:  # ended (cancelled) before any headers
            self._initial = NO_METADATA
            if self._code != StatusCode.OK:
                raise self._rpc_error()
            return False
        self._waits += 1
        return True

    def _headers_lost(self, exc: BaseException) -> NoReturn:
        self._initial = NO_METADATA
        self._set_status(*_error_from_transport(exc))
        raise self._rpc_error() from exc

    def _take_headers(self, headers: Sequence[tuple[bytes, bytes]]) -> None:
        status = grpc_status = content_type = encoding = None
        for name, value in headers:
            if name == b":status":
                status = value
            elif name == b"grpc-status":
                grpc_status = value
            elif name == b"content-type":
                content_type = value
            elif name == b"grpc-encoding":
                encoding = value
        try:
            self._initial = metadata_from_headers(headers)
        except ValueError as exc:
            self._initial = NO_METADATA
            self._set_status(StatusCode.INTERNAL, f"malformed response metadata: {exc}")
            raise self._rpc_error() from None
        if grpc_status is None and status != b"200":
            http = int(status) if status is not None and status.isdigit() else 0
            self._set_status(status_from_http(http), f"unexpected HTTP status code {http}")
            raise self._rpc_error()
        if grpc_status is not None:
            # Trailers-only (PROTOCOL-HTTP2.md): the status is in the headers, and
            # their metadata is trailing metadata (as grpc-go and grpcio read it).
            self._initial = NO_METADATA
            self._finish(headers)
            return
        if content_type is None or not content_type.startswith(b"application/grpc"):
            self._set_status(
                StatusCode.UNKNOWN, f"unexpected content-type {content_type!r} in the response"
            )
            raise self._rpc_error()
        if encoding is not None and encoding != b"identity":
            algorithm = encoding.decode("ascii", "replace")
            try:
                self._response_encoding = check_encoding(algorithm)
            except ValueError:
                self._set_status(
                    StatusCode.INTERNAL, f"response compressed with unsupported {algorithm!r}"
                )
                raise self._rpc_error() from None

    def _finish(self, block: Sequence[tuple[bytes, bytes]]) -> None:
        """Read the status from ``block`` (the trailers, or trailers-only headers)."""
        grpc_status = message = None
        for name, value in block:
            if name == b"grpc-status":
                grpc_status = value
            elif name == b"grpc-message":
                message = value
        try:
            trailing = metadata_from_headers(block)
        except ValueError as exc:
            self._set_status(StatusCode.INTERNAL, f"malformed trailing metadata: {exc}")
            return
        if grpc_status is None:
            self._set_status(StatusCode.INTERNAL, "the server ended the call without a grpc-status")
            return
        details = decode_grpc_message(message) if message is not None else ""
        self._set_status(code_from_wire(grpc_status), details, trailing)

    async def _next_payload(self) -> bytes | None:
        """The next response message's bytes, or None at the end of an OK call."""
        stream = self._stream
        if self._need_headers():
            try:
                headers = await stream.receive_headers()
            except _TRANSPORT_ERRORS as exc:
                self._headers_lost(exc)
            self._take_headers(headers)
        while self._taken == len(self._messages):
            if self._code is not None:
                if self._code != StatusCode.OK:
                    raise self._rpc_error()
                return None
            try:
                self._waits += 1
                chunk = await stream.receive_some()
            except _TRANSPORT_ERRORS as exc:
                self._set_status(*_error_from_transport(exc))
                continue
            self._fed(chunk)
        return self._pop()

    def _next_payload_nowait(self) -> bytes | None:
        """``_next_payload`` from what the stream has already received (the headers
        taken), without a checkpoint; raises trio.WouldBlock (nothing lost: bytes
        read so far stay in the decoder) if the next message or the end has not
        arrived."""
        stream = self._stream
        while self._taken == len(self._messages):
            if self._code is not None:
                if self._code != StatusCode.OK:
                    raise self._rpc_error()
                return None
            try:
                chunk = stream.receive_some_nowait()
            except _TRANSPORT_ERRORS as exc:
                self._set_status(*_error_from_transport(exc))
                continue
            self._fed(chunk)
        return self._pop()

    def _fed(self, chunk: bytes) -> None:
        """Decode a chunk read from the stream (``b""``: its end, the status)."""
        decoder = self._decoder
        if chunk:
            if decoder is None:
                channel = self._channel
                decoder = self._decoder = MessageDecoder(
                    channel.max_receive_message_size, buffer_reuse=channel.buffer_reuse
                )
            try:
                # All taken: the chunk's messages replace them (a list per chunk).
                self._messages = decoder.feed(chunk)
                self._taken = 0
            except RpcError as exc:
                self._set_status(exc.code, exc.details)
        elif decoder is not None and decoder.pending:
            self._set_status(StatusCode.INTERNAL, "the response ended inside a message")
        else:
            self._finish(self._stream.trailers or ())

    def _pop(self) -> bytes:
        """The next decoded message's payload (decompressed); there is one."""
        messages = self._messages
        taken = self._taken
        compressed, payload = messages[taken]
        taken += 1
        if taken == len(messages):
            # All taken: not kept until the next read (which may wait long).
            self._messages = _NO_MESSAGES
            taken = 0
        self._taken = taken
        self._last_compressed = compressed
        if compressed:
            if self._response_encoding is None:
                self._set_status(StatusCode.INTERNAL, "compressed message without a grpc-encoding")
                raise self._rpc_error()
            try:
                payload = decompress(
                    payload, self._response_encoding, self._channel.max_receive_message_size
                )
            except RpcError as exc:
                self._set_status(exc.code, exc.details)
                raise self._rpc_error() from None
        return payload

    def _deserialize(self, payload: bytes) -> Resp:
        try:
            return self._deserializer(payload)  # type: ignore[no-any-return]
        except Exception as exc:
            self._set_status(StatusCode.INTERNAL, f"failed to deserialize the response: {exc!r}")
            raise self._rpc_error() from exc

    async def receive_message(self) -> Resp:
        """The next response message.

        Checkpoint: always. On cancellation: no message is lost.

        Raises:
            trio.EndOfChannel: the call ended with status OK and no more messages.
            RpcError: the call ended with another status (after the messages sent
                before it were received).
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        waits = self._waits
        payload = await self._next_payload()
        if waits == self._waits:
            await trio.lowlevel.cancel_shielded_checkpoint()
        if payload is None:
            raise trio.EndOfChannel
        return self._deserialize(payload)

    def __aiter__(self) -> Call[Req, Resp]:
        return self

    async def __anext__(self) -> Resp:
        """The next response message; the iteration ends with an OK status.

        Checkpoint: always. On cancellation: no message is lost.
        """
        try:
            return await self.receive_message()
        except trio.EndOfChannel:
            raise StopAsyncIteration from None

    async def receive_response(self) -> Resp:
        """The single response of a unary-response call, once the call has ended OK.

        Checkpoint: always. On cancellation: the message read so far is lost (the
        call's block resets the stream anyway). Raises RpcError: the status, or
        INTERNAL if the server sent no message or more than one.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        waits = self._waits
        payload = await self._next_payload()
        if waits == self._waits:
            await trio.lowlevel.cancel_shielded_checkpoint()
        if payload is None:
            raise self._fail(StatusCode.INTERNAL, "the server sent no response message")
        if await self._next_payload() is not None:
            raise self._fail(StatusCode.INTERNAL, "the server sent more than one response message")
        return self._deserialize(payload)

    def _fail(self, code: StatusCode, details: str) -> RpcError:
        """The call ends with ``code`` (whatever status it had): its RpcError to raise."""
        self._code = code
        self._details = details
        return self._rpc_error()


def _to_float(timeout: float | None) -> float:
    if timeout is None:
        return math.inf
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise TypeError(f"timeout must be a number of seconds, not {type(timeout).__name__}")
    return float(timeout)


def _config_timeout(timeout: float | None, configured: float | None) -> float | None:
    """The smaller of a call's ``timeout`` and its method config's."""
    if configured is None:
        return timeout
    return configured if timeout is None else min(_to_float(timeout), configured)


def _deadlines(timeout: float | None) -> tuple[float, float]:
    """A call's own deadline (``timeout`` from now; inf without one) and the deadline
    it sends as ``grpc-timeout`` (the earlier of that and the caller's effective one)."""
    if timeout is None:
        return math.inf, trio.current_effective_deadline()
    now = trio.current_time()
    own = now + _to_float(timeout)
    if own <= now:
        raise RpcError(StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded (timeout <= 0)")
    return own, min(own, trio.current_effective_deadline())


@asynccontextmanager
async def _unwrap_single() -> AsyncIterator[None]:
    try:
        yield
    except BaseExceptionGroup as group:
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from group.exceptions[0].__cause__
        raise


def _interceptors_of(
    scheme: str,
    authority: str,
    interceptors: Sequence[ClientInterceptor],
    credentials: CallCredentials | None,
    insecure: bool,
) -> tuple[ClientInterceptor, ...]:
    """A channel's interceptor chain: the user's, then the call credentials' (the
    innermost). Credentials on a plaintext connection are refused unless ``insecure``."""
    found = check_client_interceptors(interceptors)
    check_bool(insecure, "insecure_call_credentials")
    if credentials is None:
        return found
    if scheme != "https" and not insecure:
        raise ValueError(
            "call_credentials would send their metadata in clear on a channel without TLS:"
            " give the channel an ssl_context, or pass insecure_call_credentials=True"
        )
    base_url = f"{scheme}://{authority}"
    return (*found, credentials_interceptor(credentials, base_url))


@final
class Channel:
    """A gRPC channel over one ``trio_h2t.ClientConnection``.

    ``Channel(connection)`` wraps a connection you opened (:func:`open_channel`
    opens one for you). Options, all keyword-only: ``compression`` (None,
    "identity", "gzip" or "deflate"; per call it can be overridden),
    ``max_receive_message_size`` (default 4 MiB; None: no limit),
    ``max_send_message_size`` (default None: no limit), ``metadata`` sent on every
    call before the call's own, ``buffer_reuse`` (default True: each call's response
    decoder keeps one buffer for messages of 1 KiB and more, see
    :class:`MessageDecoder`), ``service_config`` (JSON text, its mapping or a
    :class:`ServiceConfig`: ``methodConfig`` timeouts and, for unary-unary,
    unary-stream and stream-unary methods, retry policies; see ``docs/grpc.md``,
    "Service config and retries"), ``interceptors`` (client interceptors, the first
    the outermost), ``call_credentials`` (a callable adding metadata to each call,
    refused without TLS unless ``insecure_call_credentials=True``): see
    ``docs/grpc.md``, "Interceptors" and "Call credentials".

    ``wait_for_ready`` (default False) is the calls' default (each call can
    override it); ``authority`` overrides the ``:authority`` of every call.

    ``Channel(connection)`` has one connection and no reconnection: calls wait for
    stream quota (the server's MAX_CONCURRENT_STREAMS) and fail fast with
    UNAVAILABLE once the connection is lost or closing. A channel from
    ``open_channel(target)`` balances over a subchannel per backend address,
    reconnecting with backoff (docs/grpc-channels.md): :meth:`get_state`,
    :meth:`wait_for_state_change` and :meth:`subchannels` show its connectivity.
    """

    def __init__(
        self,
        connection: ClientConnection,
        *,
        compression: str | None = None,
        max_receive_message_size: int | None = DEFAULT_MAX_RECEIVE_MESSAGE_SIZE,
        max_send_message_size: int | None = None,
        metadata: MetadataLike = (),
        buffer_reuse: bool = True,
        interceptors: Sequence[ClientInterceptor] = (),
        call_credentials: CallCredentials | None = None,
        insecure_call_credentials: bool = False,
        wait_for_ready: bool = False,
        authority: str | None = None,
        service_config: str | Mapping[str, Any] | ServiceConfig | None = None,
    ) -> None:
        if isinstance(connection, Balancer):
            # open_channel's balanced form (a private type, so not in the public
            # signature): picks go through the balancer.
            self._conn: ClientConnection | None = None  # immutable after init
            self._balancer: Balancer | None = connection  # immutable after init
            scheme = b"https" if connection.tls else b"http"
            default_authority = b"localhost"
        elif isinstance(connection, ClientConnection):
            self._conn = connection
            self._balancer = None
            scheme, default_authority = connection.scheme, connection.authority
        else:
            raise TypeError(
                "Channel needs a trio_h2t.ClientConnection (or use grpc.open_channel), "
                f"not {type(connection).__name__}"
            )
        self._scheme = scheme  # immutable after init
        # immutable after init: the :authority of every call (grpc: the target's)
        self._authority = default_authority if authority is None else authority.encode("ascii")
        self.wait_for_ready = check_bool(wait_for_ready, "wait_for_ready")  # immutable after init
        self.buffer_reuse = check_bool(buffer_reuse, "buffer_reuse")  # immutable after init
        self.compression = check_encoding(compression)  # immutable after init
        # immutable after init
        self.max_receive_message_size = check_size(
            max_receive_message_size, "max_receive_message_size"
        )
        # immutable after init
        self.max_send_message_size = check_size(max_send_message_size, "max_send_message_size")
        self._metadata_headers = metadata_to_headers(Metadata(metadata))  # immutable after init
        # immutable after init; None when no config was given (the call path's fast test)
        self._service_config = (
            service_config
            if isinstance(service_config, ServiceConfig) or service_config is None
            else parse_service_config(service_config)
        )
        throttling = None if self._service_config is None else self._service_config.retry_throttling
        # shared: the calls' tasks (one trio thread; _retry.py's rule)
        self._retry_throttle = None if throttling is None else RetryThrottle(throttling)
        self._retry_pool = RetryBufferPool()  # shared: the calls' tasks (_retry.py's rule)
        # owner: the calls' tasks (one trio thread). Method path -> the request header
        # block of a call with no deadline, compression or per-call metadata (the same
        # every time), built once per method; bounded by _PLAIN_HEADERS_MAX.
        self._plain_headers: dict[str, tuple[tuple[bytes, bytes], ...]] = {}
        self._closing = False  # owner: aclose (set once)
        self._active = 0  # owner: the calling tasks (no await between read and write)
        self._idle = trio.Event()  # set when _active drops to 0 while closing
        # immutable after init: () when none, so a call tests one attribute
        self._interceptors = _interceptors_of(
            scheme.decode("ascii"),
            self._authority.decode("ascii"),
            interceptors,
            call_credentials,
            insecure_call_credentials,
        )

    def unary_unary(
        self,
        method: str,
        *,
        request_serializer: Serializer | None = None,
        response_deserializer: Deserializer | None = None,
    ) -> UnaryUnaryMethod[Any, Any]:
        """A unary-unary method: ``await channel.unary_unary(path)(request)``."""
        return UnaryUnaryMethod._create(self, method, request_serializer, response_deserializer)

    def unary_stream(
        self,
        method: str,
        *,
        request_serializer: Serializer | None = None,
        response_deserializer: Deserializer | None = None,
    ) -> UnaryStreamMethod[Any, Any]:
        """A unary-stream method: ``async with m(request) as call: async for r in call``."""
        return UnaryStreamMethod._create(self, method, request_serializer, response_deserializer)

    def stream_unary(
        self,
        method: str,
        *,
        request_serializer: Serializer | None = None,
        response_deserializer: Deserializer | None = None,
    ) -> StreamUnaryMethod[Any, Any]:
        """A stream-unary method: ``await m(requests)`` or ``async with m.open() as call``."""
        return StreamUnaryMethod._create(self, method, request_serializer, response_deserializer)

    def stream_stream(
        self,
        method: str,
        *,
        request_serializer: Serializer | None = None,
        response_deserializer: Deserializer | None = None,
    ) -> StreamStreamMethod[Any, Any]:
        """A stream-stream method: ``async with m(requests) as call`` or ``m.open()``."""
        return StreamStreamMethod._create(self, method, request_serializer, response_deserializer)

    @property
    def connection(self) -> ClientConnection:
        """The transport connection the calls run on (a channel made with
        ``Channel(connection)``; a balanced channel: the one a call would pick now).

        Raises: RpcError(UNAVAILABLE) if a balanced channel has no READY backend.
        """
        if self._conn is not None:
            return self._conn
        assert self._balancer is not None
        conn = self._balancer.pick()
        if conn is None:
            raise RpcError(StatusCode.UNAVAILABLE, "no backend is READY")
        return conn

    def get_state(self) -> ConnectivityState:
        """The channel's connectivity state (READY for a single-connection channel
        that takes streams, SHUTDOWN once it ended or closed). Never checkpoints."""
        if self._balancer is not None:
            return self._balancer.state
        assert self._conn is not None
        if self._closing or not self._conn.accepting_streams:
            return ConnectivityState.SHUTDOWN
        return ConnectivityState.READY

    async def wait_for_state_change(self, last: ConnectivityState) -> ConnectivityState:
        """Wait until the state is not ``last``; return the new one.

        Checkpoint: always. On cancellation: nothing changes.
        """
        if self._balancer is not None:
            return await self._balancer.wait_for_state_change(last)
        assert self._conn is not None
        if self.get_state() is last:
            await self._conn.wait_not_accepting()
        await trio.lowlevel.checkpoint()
        return self.get_state()

    def subchannels(self) -> list[tuple[str, ConnectivityState]]:
        """Each backend address (``host:port`` or a socket path) and its state."""
        if self._balancer is None:
            assert self._conn is not None
            return [(self._conn.authority.decode(), self.get_state())]
        return [
            (a if isinstance(a, str) else f"{a[0]}:{a[1]}", sub.state)
            for sub in self._balancer.subchannels
            for a in (sub.address,)
        ]

    def _pick_nowait(self) -> ClientConnection | None:
        # The hot path: the one connection, or an O(1) pick.
        conn = self._conn
        if conn is not None:
            return conn
        assert self._balancer is not None
        return self._balancer.pick()

    async def _pick(self, wait_for_ready: bool | None) -> ClientConnection:
        """Wait for a connection to pick (inside the call's deadline scope).

        Without wait_for_ready, fail UNAVAILABLE at once in TRANSIENT_FAILURE (with
        the last connect error), and wait while CONNECTING or IDLE (grpcio's rule).
        """
        balancer = self._balancer
        assert balancer is not None
        wait = self.wait_for_ready if wait_for_ready is None else wait_for_ready
        while True:
            if self._closing or balancer.state is ConnectivityState.SHUTDOWN:
                raise RpcError(StatusCode.UNAVAILABLE, "the channel is closed")
            conn = balancer.pick()
            if conn is not None:
                return conn
            if balancer.state is ConnectivityState.TRANSIENT_FAILURE and not wait:
                error = balancer.last_error()
                raise RpcError(
                    StatusCode.UNAVAILABLE, f"no backend is reachable (last error: {error})"
                )
            await balancer.wait_for_any_change()

    async def aclose(self) -> None:
        """Drain: refuse new calls (UNAVAILABLE), wait for the calls in progress to
        end, then close the connection gracefully.

        Checkpoint: always. On cancellation: the connection is not closed by this
        call (its owner's block still closes it).
        """
        self._closing = True
        if self._active:
            await self._idle.wait()
        if self._conn is not None:
            await self._conn.aclose()
        else:
            await trio.lowlevel.checkpoint()

    def _call_ended(self) -> None:
        self._active -= 1
        if self._closing and not self._active:
            self._idle.set()

    def _encoding_for(self, compression: str | bool | None) -> str | None:
        """A call's compression: ``compression`` (False: the channel's)."""
        if compression is False:
            return self.compression
        return check_encoding(compression if isinstance(compression, str) else None)

    def _headers(
        self, method: str, deadline: float, metadata: MetadataLike, encoding: str | None
    ) -> Sequence[tuple[bytes, bytes]]:
        plain = encoding is None and deadline == math.inf and not metadata
        if plain:
            cached = self._plain_headers.get(method)
            if cached is not None:
                return cached  # a tuple: open_stream copies what it keeps
        extra = list(_FIXED_REQUEST_HEADERS)
        if encoding is not None:
            extra.append((b"grpc-encoding", encoding.encode()))
        if deadline != math.inf:
            remaining = max(deadline - trio.current_time(), 1e-9)
            extra.append((b"grpc-timeout", encode_timeout(remaining).encode()))
        extra.extend(self._metadata_headers)
        if metadata:
            extra.extend(metadata_to_headers(Metadata(metadata)))
        block = [
            (b":method", b"POST"),
            (b":scheme", self._scheme),
            (b":authority", self._authority),
            (b":path", method.encode("ascii")),
            *extra,
        ]
        if plain and len(self._plain_headers) < _PLAIN_HEADERS_MAX:
            self._plain_headers[method] = tuple(block)
        return block

    def _open(
        self,
        method: str,
        serializer: Serializer,
        deserializer: Deserializer,
        timeout: float | None,
        metadata: MetadataLike,
        compression: str | bool | None,
        wait_for_ready: bool | None = None,
    ) -> _CallOpener:
        return _CallOpener(
            self, method, serializer, deserializer, timeout, metadata, compression, wait_for_ready
        )


@final
class _CallOpener:
    """A call's context manager (``_Method.open``): the call's stream, and its own
    deadline scope when it has a ``timeout``.

    A class, not an ``asynccontextmanager`` generator: no async generator (trio
    registers each one with its asyncgen hooks), no ``AsyncExitStack``, and no
    cancel scope for a call without a timeout (an infinite deadline of its own
    could never fire; a surrounding deadline still goes out as ``grpc-timeout``).
    Owner: the task that enters it (one use).
    """

    __slots__ = (
        "_channel",
        "_compression",
        "_deserializer",
        "_metadata",
        "_method",
        "_opener",
        "_scope",
        "_serializer",
        "_timeout",
        "_wait_for_ready",
    )

    def __init__(
        self,
        channel: Channel,
        method: str,
        serializer: Serializer,
        deserializer: Deserializer,
        timeout: float | None,
        metadata: MetadataLike,
        compression: str | bool | None,
        wait_for_ready: bool | None,
    ) -> None:
        self._channel = channel  # immutable after init
        self._wait_for_ready = wait_for_ready  # immutable after init
        self._method = method  # immutable after init
        self._serializer = serializer  # immutable after init
        self._deserializer = deserializer  # immutable after init
        self._timeout = timeout  # immutable after init
        self._metadata = metadata  # immutable after init
        self._compression = compression  # immutable after init
        # owner: the entering task; set on entering
        self._opener: AbstractAsyncContextManager[H2Stream] | None = None
        self._scope: trio.CancelScope | None = None

    async def __aenter__(self) -> Call[Any, Any]:
        if self._opener is not None:
            raise RuntimeError("a call's open(...) can be entered only once")
        await trio.lowlevel.checkpoint_if_cancelled()
        channel = self._channel
        if channel._closing:
            raise RpcError(StatusCode.UNAVAILABLE, "the channel is closed")
        own, deadline = _deadlines(self._timeout)
        encoding = channel._encoding_for(self._compression)
        method = self._method
        headers = channel._headers(method, deadline, self._metadata, encoding)
        channel._active += 1
        scope = None
        try:
            if own != math.inf:
                scope = self._scope = trio.CancelScope(deadline=own)
                scope.__enter__()
            stream = await self._open_attempt(headers)
        except BaseException as exc:
            try:
                if scope is not None and scope.__exit__(type(exc), exc, exc.__traceback__):
                    # Our own deadline expired while waiting for stream quota.
                    raise RpcError(StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded") from None
            finally:
                channel._call_ended()
            raise
        return Call._create(channel, stream, method, self._serializer, self._deserializer, encoding)

    async def _open_attempt(self, headers: Sequence[tuple[bytes, bytes]]) -> H2Stream:
        """Open the call's stream on a picked connection: one attempt, again (a
        transparent retry) while a balanced channel's streams fail before any byte
        of them reached a handler (GOAWAY, closing, refused)."""
        channel = self._channel
        retries = 0
        while True:
            conn = channel._pick_nowait()
            if conn is None:
                conn = await channel._pick(self._wait_for_ready)
            opener = self._opener = conn.open_stream(headers)
            try:
                return await opener.__aenter__()
            except _TRANSPORT_ERRORS as exc:
                if (
                    channel._balancer is not None
                    and retries < MAX_TRANSPARENT_RETRIES
                    and _never_processed(exc)
                ):
                    retries += 1
                    continue
                raise RpcError(*_error_from_transport(exc)) from exc

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        # Not a checkpoint: leaving never blocks (the stream's exit does not).
        opener = self._opener
        assert opener is not None
        scope = self._scope
        try:
            try:
                await opener.__aexit__(exc_type, exc, tb)
            except BaseException as inner:
                if scope is None or not scope.__exit__(type(inner), inner, inner.__traceback__):
                    raise
            else:
                if scope is None or not scope.__exit__(exc_type, exc, tb):
                    return False
            if scope.cancelled_caught:
                # Our own deadline's cancellation, caught by our scope: the call timed out.
                raise RpcError(StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded") from None
            return True
        finally:
            self._channel._call_ended()


class _Method(Generic[Req, Resp], metaclass=NoPublicConstructor):
    __slots__ = ("_channel", "_deserializer", "_serializer", "method")
    _kind: ClassVar[MethodKind]  # what the channel's interceptors are told

    def __init__(
        self,
        channel: Channel,
        method: str,
        serializer: Serializer | None,
        deserializer: Deserializer | None,
    ) -> None:
        if not method.startswith("/"):
            raise ValueError(
                f"a method path starts with '/': /package.Service/Method, not {method!r}"
            )
        self._channel = channel  # immutable after init
        self.method = method  # immutable after init
        self._serializer = serializer or identity_serializer  # immutable after init
        self._deserializer = deserializer or identity_deserializer  # immutable after init

    def open(
        self,
        *,
        timeout: float | None = None,
        metadata: MetadataLike = (),
        compression: str | bool | None = False,
        wait_for_ready: bool | None = None,
    ) -> AbstractAsyncContextManager[Call[Req, Resp]]:
        """Start a call and give its :class:`Call` for the duration of the block.

        ``timeout`` (seconds) bounds the call (RpcError(DEADLINE_EXCEEDED) when it
        expires; the service config's ``methodConfig.timeout`` when that is smaller);
        ``metadata`` is sent with the request headers; ``compression`` overrides the
        channel's (None: no compression); ``wait_for_ready`` overrides the channel's
        (None: the service config's ``methodConfig.waitForReady``, else the
        channel's): True waits, inside the deadline, for a READY backend instead of
        failing UNAVAILABLE while the channel is in TRANSIENT_FAILURE.

        Checkpoint: entering (it may wait for stream quota). On cancellation, or
        leaving the block before the call ended: RST_STREAM(CANCEL).

        Raises (entering): RpcError(UNAVAILABLE) if the channel or connection is
        closed or lost; ValueError for reserved or malformed metadata.
        """
        channel = self._channel
        if channel._service_config is not None:  # methodConfig.timeout (no retries here)
            configured = channel._service_config.method_config(self.method)
            timeout = _config_timeout(timeout, configured.timeout)
            if wait_for_ready is None:
                wait_for_ready = configured.wait_for_ready
        if channel._interceptors:
            details = ClientCallDetails(self.method, self._kind, list(Metadata(metadata)), timeout)
            serializer, deserializer = self._serializer, self._deserializer

            def open_call(d: ClientCallDetails) -> _CallOpener:
                return channel._open(
                    d.method,
                    serializer,
                    deserializer,
                    d.timeout,
                    d.metadata,
                    compression,
                    wait_for_ready,
                )

            return intercepted_call(channel._interceptors, details, open_call)
        return channel._open(
            self.method,
            self._serializer,
            self._deserializer,
            timeout,
            metadata,
            compression,
            wait_for_ready,
        )


async def _send_all(call: Call[Any, Any], requests: Iterable[Any] | AsyncIterable[Any]) -> None:
    """Send ``requests`` then half-close; a failed stream is reported by the receiver."""
    try:
        if isinstance(requests, AsyncIterable):
            async for request in requests:
                await call.send_message(request)
        else:
            for request in requests:
                await call.send_message(request)
        await call.done_writing()
    except RpcError:
        pass  # the call failed: the receiving side raises its status
    except trio.ClosedResourceError:
        if call.code is None:
            raise
        # The call ended first (the server answered before all requests were sent).


@final
class UnaryUnaryMethod(_Method[Req, Resp]):
    """A unary-unary method of a channel (``Channel.unary_unary``)."""

    _kind = MethodKind.UNARY_UNARY

    async def __call__(
        self,
        request: Req,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 (sent as grpc-timeout)
        metadata: MetadataLike = (),
        compression: str | bool | None = False,
        wait_for_ready: bool | None = None,
    ) -> Resp:
        """Send ``request``; return the response. ``wait_for_ready``: as for
        ``open``. On a balanced channel a call whose stream never reached a
        handler (GOAWAY, REFUSED_STREAM) is sent again, transparently.

        Checkpoint: always. On cancellation: RST_STREAM(CANCEL).

        Raises:
            RpcError: any status but OK (DEADLINE_EXCEEDED when ``timeout`` expires).
        """
        # _CallOpener's work and receive_response's body, inline: while the call
        # waits for its response, this coroutine and the Call are all the layer keeps
        # (no _CallOpener, no bound __aexit__ of a with statement, no coroutine per
        # receiving step). The cyclic collector's work grows with what calls in flight
        # keep (benchmarks/README.md, "Why W1's p99 misses").
        channel = self._channel
        if channel._interceptors:
            intercepted, _ = await self.with_call(
                request,
                timeout=timeout,
                metadata=metadata,
                compression=compression,
                wait_for_ready=wait_for_ready,
            )
            return intercepted
        await trio.lowlevel.checkpoint_if_cancelled()
        if channel._closing:
            raise RpcError(StatusCode.UNAVAILABLE, "the channel is closed")
        method = self.method
        if channel._service_config is not None:
            config = channel._service_config.method_config(method)
            timeout = _config_timeout(timeout, config.timeout)
            if wait_for_ready is None:
                wait_for_ready = config.wait_for_ready
            if config.retry_policy is not None:
                state = CallRetryState(
                    config.retry_policy, throttle=channel._retry_throttle, pool=channel._retry_pool
                )
                attempt = unary_unary_attempt(
                    self, request, metadata=metadata, compression=compression
                )
                retried: Resp = await run_with_retries(state, attempt, timeout=timeout)
                return retried
        own, deadline = _deadlines(timeout)
        encoding = channel._encoding_for(compression)
        headers = channel._headers(method, deadline, metadata, encoding)
        channel._active += 1
        scope = None
        retries = 0
        try:
            if own != math.inf:
                scope = trio.CancelScope(deadline=own)
                scope.__enter__()
            try:
                while True:  # one attempt a turn: again only for a transparent retry
                    conn = channel._pick_nowait()
                    if conn is None:
                        conn = await channel._pick(wait_for_ready)
                    opener = conn.open_stream(headers)
                    if channel._balancer is None:
                        # No second attempt: drop the block now (the footprint of a
                        # call in flight, tests/grpc_layer/test_footprint.py).
                        headers = ()
                    try:
                        stream = await opener.__aenter__()
                    except _TRANSPORT_ERRORS as exc:
                        if (
                            channel._balancer is not None
                            and retries < MAX_TRANSPARENT_RETRIES
                            and _never_processed(exc)
                        ):
                            retries += 1
                            continue
                        raise RpcError(*_error_from_transport(exc)) from exc
                    call: Call[Any, Any] = Call._create(
                        channel, stream, method, self._serializer, self._deserializer, encoding
                    )
                    try:
                        await call._send(request, end=True)
                        # Opening and sending were checkpoints: none of its own here. The
                        # wait for the headers is in this frame (see Call._need_headers).
                        if call._need_headers():
                            try:
                                head = await stream.receive_headers()
                            except _TRANSPORT_ERRORS as exc:
                                call._headers_lost(exc)
                            call._take_headers(head)
                        # The response usually arrives whole (headers, message, trailers
                        # in one read): taken without a schedule point, each of which
                        # is a trip of every call in flight through trio's scheduler
                        # (docs/grpc.md, "Latency and the cyclic collector").
                        first = False
                        try:
                            payload = call._next_payload_nowait()
                            first = True
                            more = None if payload is None else call._next_payload_nowait()
                        except trio.WouldBlock:
                            if not first:
                                payload = await call._next_payload()
                            more = None if payload is None else await call._next_payload()
                        if payload is None:
                            raise call._fail(
                                StatusCode.INTERNAL, "the server sent no response message"
                            )
                        if more is not None:
                            raise call._fail(
                                StatusCode.INTERNAL,
                                "the server sent more than one response message",
                            )
                        response: Resp = call._deserialize(payload)
                    except BaseException as exc:
                        await opener.__aexit__(type(exc), exc, exc.__traceback__)
                        if (
                            channel._balancer is not None
                            and retries < MAX_TRANSPARENT_RETRIES
                            and _never_processed(exc)
                        ):
                            retries += 1
                            continue
                        raise
                    await opener.__aexit__(None, None, None)
                    break
            except BaseException as exc:
                if scope is None or not scope.__exit__(type(exc), exc, exc.__traceback__):
                    raise
                # Our own deadline's cancellation, caught by our scope: the call timed out
                # (waiting for stream quota, or for the response).
                raise RpcError(StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded") from None
            if scope is not None:
                scope.__exit__(None, None, None)
        finally:
            channel._call_ended()
        return response

    async def with_call(
        self,
        request: Req,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 (sent as grpc-timeout)
        metadata: MetadataLike = (),
        compression: str | bool | None = False,
        wait_for_ready: bool | None = None,
    ) -> tuple[Resp, Call[Req, Resp]]:
        """As calling it, and the ended :class:`Call` (its metadata and status).

        Checkpoint: always. On cancellation: RST_STREAM(CANCEL).
        """
        async with self.open(
            timeout=timeout,
            metadata=metadata,
            compression=compression,
            wait_for_ready=wait_for_ready,
        ) as call:
            await call._send(request, end=True)
            response = await call.receive_response()
        return response, call


@final
class UnaryStreamMethod(_Method[Req, Resp]):
    """A unary-stream method of a channel (``Channel.unary_stream``)."""

    _kind = MethodKind.UNARY_STREAM

    def __call__(
        self,
        request: Req,
        *,
        timeout: float | None = None,
        metadata: MetadataLike = (),
        compression: str | bool | None = False,
    ) -> AbstractAsyncContextManager[Call[Req, Resp]]:
        """``async with method(request) as call: async for response in call: ...``.

        Checkpoint: entering. Leaving before the call ended cancels it. Awaiting it
        or iterating it without ``async with`` raises TypeError naming the fix.
        """
        return AsyncWithOnly(
            self._call(request, timeout, metadata, compression),
            "a unary_stream call",
            "async with method(request) as call:` and `async for response in call:",
        )

    @asynccontextmanager
    async def _call(
        self,
        request: Req,
        timeout: float | None,  # noqa: ASYNC109 (sent as grpc-timeout)
        metadata: MetadataLike,
        compression: str | bool | None,
    ) -> AsyncIterator[Call[Req, Resp]]:
        channel = self._channel
        if channel._service_config is not None:
            config = channel._service_config.method_config(self.method)
            if config.retry_policy is not None:
                state = CallRetryState(
                    config.retry_policy, throttle=channel._retry_throttle, pool=channel._retry_pool
                )
                opener = unary_stream_attempt(
                    self, request, metadata=metadata, compression=compression
                )
                timeout = _config_timeout(timeout, config.timeout)
                async with open_with_retries(state, opener, timeout=timeout) as retried:
                    yield retried
                return
        async with self.open(timeout=timeout, metadata=metadata, compression=compression) as call:
            await call._send(request, end=True)
            yield call


@final
class StreamUnaryMethod(_Method[Req, Resp]):
    """A stream-unary method of a channel (``Channel.stream_unary``)."""

    _kind = MethodKind.STREAM_UNARY

    async def __call__(
        self,
        requests: Iterable[Req] | AsyncIterable[Req],
        *,
        timeout: float | None = None,  # noqa: ASYNC109 (sent as grpc-timeout)
        metadata: MetadataLike = (),
        compression: str | bool | None = False,
    ) -> Resp:
        """Send every request of ``requests`` (an iterable or async iterable); return
        the response. The requests are sent by a second task while this one waits
        for the response, so a server answering early ends the call.

        Checkpoint: always. On cancellation: RST_STREAM(CANCEL).
        """
        channel = self._channel
        if channel._service_config is not None:
            config = channel._service_config.method_config(self.method)
            if config.retry_policy is not None:
                state = CallRetryState(
                    config.retry_policy, throttle=channel._retry_throttle, pool=channel._retry_pool
                )
                attempt = stream_unary_attempt(
                    self, requests, metadata=metadata, compression=compression
                )
                timeout = _config_timeout(timeout, config.timeout)
                retried: Resp = await run_with_retries(state, attempt, timeout=timeout)
                return retried
        response, _ = await self.with_call(
            requests, timeout=timeout, metadata=metadata, compression=compression
        )
        return response

    async def with_call(
        self,
        requests: Iterable[Req] | AsyncIterable[Req],
        *,
        timeout: float | None = None,  # noqa: ASYNC109 (sent as grpc-timeout)
        metadata: MetadataLike = (),
        compression: str | bool | None = False,
    ) -> tuple[Resp, Call[Req, Resp]]:
        """As calling it, and the ended :class:`Call`.

        Checkpoint: always. On cancellation: RST_STREAM(CANCEL).
        """
        async with (
            self.open(timeout=timeout, metadata=metadata, compression=compression) as call,
            _unwrap_single(),
            trio.open_nursery() as nursery,
        ):
            nursery.start_soon(_send_all, call, requests)
            response = await call.receive_response()
            nursery.cancel_scope.cancel()
        return response, call


@final
class StreamStreamMethod(_Method[Req, Resp]):
    """A stream-stream method of a channel (``Channel.stream_stream``)."""

    _kind = MethodKind.STREAM_STREAM

    def __call__(
        self,
        requests: Iterable[Req] | AsyncIterable[Req] | None = None,
        *,
        timeout: float | None = None,
        metadata: MetadataLike = (),
        compression: str | bool | None = False,
    ) -> AbstractAsyncContextManager[Call[Req, Resp]]:
        """``async with method(requests) as call: async for response in call: ...``.

        ``requests`` (an iterable or async iterable) are sent by a second task
        while the block reads; without it, send with ``call.send_message`` and end
        with ``call.done_writing()``. Leaving before the call ended cancels it.

        Checkpoint: entering. Awaiting it or iterating it without ``async with``
        raises TypeError naming the fix.
        """
        return AsyncWithOnly(
            self._call(requests, timeout, metadata, compression),
            "a stream_stream call",
            "async with method(requests) as call:` and `async for response in call:",
        )

    @asynccontextmanager
    async def _call(
        self,
        requests: Iterable[Req] | AsyncIterable[Req] | None,
        timeout: float | None,  # noqa: ASYNC109 (sent as grpc-timeout)
        metadata: MetadataLike,
        compression: str | bool | None,
    ) -> AsyncIterator[Call[Req, Resp]]:
        async with self.open(timeout=timeout, metadata=metadata, compression=compression) as call:
            if requests is None:
                yield call
                return
            async with _unwrap_single(), trio.open_nursery() as nursery:
                nursery.start_soon(_send_all, call, requests)
                yield call
                nursery.cancel_scope.cancel()


def open_channel(
    target: str,
    port: int | None = None,
    *,
    ssl_context: ssl.SSLContext | None = None,
    config: trio_h2t.TransportConfig | None = None,
    connect_timeout: float | None = None,
    compression: str | None = None,
    max_receive_message_size: int | None = DEFAULT_MAX_RECEIVE_MESSAGE_SIZE,
    max_send_message_size: int | None = None,
    metadata: MetadataLike = (),
    buffer_reuse: bool = True,
    interceptors: Sequence[ClientInterceptor] = (),
    call_credentials: CallCredentials | None = None,
    insecure_call_credentials: bool = False,
    wait_for_ready: bool = False,
    backoff: ConnectionBackoff | None = None,
    keepalive_time: float | None = None,
    keepalive_timeout: float | None = None,
    keepalive_permit_without_calls: bool | None = None,
    service_config: str | Mapping[str, Any] | ServiceConfig | None = None,
) -> AbstractAsyncContextManager[Channel]:
    """Give a :class:`Channel`: ``async with grpc.open_channel(target) as channel``.

    ``target`` is a gRPC target string (grpc's doc/naming.md, :func:`parse_target`):
    ``dns:///host:port`` or ``host:port`` (every address the name resolves to),
    ``ipv4:a:p,b:p``, ``ipv6:[a]:p,...``, ``unix:path`` / ``unix:///abs/path``; the
    port defaults to 443. Such a channel has a subchannel per address, each one
    connection kept up with reconnect ``backoff`` (:class:`ConnectionBackoff`), and
    picks by the ``service_config``'s ``loadBalancingConfig`` (``pick_first``, the
    default, or ``round_robin``; grpcio's ``grpc.service_config`` option, a JSON str,
    a dict or a :class:`ServiceConfig`); a backend's GOAWAY
    drains its connection and a new one replaces it, and a call that never reached
    a handler is resent transparently (docs/grpc-channels.md). ``wait_for_ready``
    is the calls' default (grpcio's semantics: without it a call fails UNAVAILABLE
    at once while the channel is in TRANSIENT_FAILURE).

    ``open_channel(host, port)`` (a port given) is the single-connection channel of
    before: one ``trio_h2t.open_connection``, no reconnection, and entering fails
    with ConnectionLostError if it cannot connect.

    ``connect_timeout`` (seconds) bounds the TCP connect and TLS handshake of the
    ``(host, port)`` form; a target channel bounds each connect by its backoff
    instead (the larger of the current backoff and ``min_connect_timeout``).
    ``keepalive_time``, ``keepalive_timeout`` (seconds) and
    ``keepalive_permit_without_calls`` set ``config``'s ``keepalive_time``,
    ``keepalive_timeout`` and ``keepalive_permit_without_stream`` (grpcio's
    ``grpc.keepalive_time_ms``, ``grpc.keepalive_timeout_ms``,
    ``grpc.keepalive_permit_without_calls``, in seconds). The other options are the
    Channel's.

    Leaving the block drains the channel (:meth:`Channel.aclose`), then every
    connection closes; leaving with an exception closes them at once.

    Checkpoint: entering and leaving. Raises: TypeError or ValueError for a wrong
    option or a malformed target, at once, before connecting; TypeError naming the
    fix if the result is awaited or used without ``async with``.
    """
    # The channel's options are checked before connecting, so a wrong one fails with
    # no connection made (Channel checks them again; that costs nothing).
    check_encoding(compression)
    check_size(max_receive_message_size, "max_receive_message_size")
    check_size(max_send_message_size, "max_send_message_size")
    check_bool(buffer_reuse, "buffer_reuse")
    check_bool(wait_for_ready, "wait_for_ready")
    Metadata(metadata)
    check_client_interceptors(interceptors)
    check_bool(insecure_call_credentials, "insecure_call_credentials")
    if call_credentials is not None:
        credentials_interceptor(call_credentials, "")  # TypeError if not callable
    if call_credentials is not None and ssl_context is None and not insecure_call_credentials:
        raise ValueError(
            "call_credentials would send their metadata in clear on a channel without TLS:"
            " give open_channel an ssl_context, or pass insecure_call_credentials=True"
        )
    if not isinstance(service_config, ServiceConfig):
        service_config = None if service_config is None else parse_service_config(service_config)
    config = _keepalive_config(
        config, keepalive_time, keepalive_timeout, keepalive_permit_without_calls
    )
    options = {
        "compression": compression,
        "max_receive_message_size": max_receive_message_size,
        "max_send_message_size": max_send_message_size,
        "metadata": metadata,
        "buffer_reuse": buffer_reuse,
        "wait_for_ready": wait_for_ready,
        "service_config": service_config,
        "interceptors": interceptors,
        "call_credentials": call_credentials,
        "insecure_call_credentials": insecure_call_credentials,
    }
    if port is not None:
        return AsyncWithOnly(
            _open_single(target, port, ssl_context, config, connect_timeout, options),
            "grpc.open_channel(...)",
            "async with grpc.open_channel(host, port) as channel:",
        )
    parsed = parse_target(target)
    lb_policy = "pick_first" if service_config is None else service_config.lb_policy
    if lb_policy not in LB_POLICIES:
        raise ValueError(
            f"load-balancing policy {lb_policy!r} is not supported:"
            f" use one of {', '.join(LB_POLICIES)}"
        )
    if backoff is not None and not isinstance(backoff, ConnectionBackoff):
        raise TypeError(f"backoff takes a grpc.ConnectionBackoff, not {type(backoff).__name__}")
    return AsyncWithOnly(
        _open_balanced(
            parsed, lb_policy, ssl_context, config, backoff or ConnectionBackoff(), options
        ),
        "grpc.open_channel(...)",
        "async with grpc.open_channel(target) as channel:",
    )


def _keepalive_config(
    config: trio_h2t.TransportConfig | None,
    keepalive_time: float | None,
    keepalive_timeout: float | None,
    permit: bool | None,
) -> trio_h2t.TransportConfig | None:
    """``config`` with the channel's keepalive options in (None: unchanged)."""
    changes: dict[str, Any] = {}
    if keepalive_time is not None:
        changes["keepalive_time"] = keepalive_time
    if keepalive_timeout is not None:
        changes["keepalive_timeout"] = keepalive_timeout
    if permit is not None:
        changes["keepalive_permit_without_stream"] = check_bool(
            permit, "keepalive_permit_without_calls"
        )
    if not changes:
        return config
    return dataclasses.replace(config or trio_h2t.TransportConfig(), **changes)


@asynccontextmanager
async def _open_single(
    host: str,
    port: int,
    ssl_context: ssl.SSLContext | None,
    config: trio_h2t.TransportConfig | None,
    connect_timeout: float | None,
    options: dict[str, Any],
) -> AsyncIterator[Channel]:
    async with trio_h2t.open_connection(
        host, port, ssl_context=ssl_context, config=config, connect_timeout=connect_timeout
    ) as conn:
        channel = Channel(conn, **options)
        yield channel
        await channel.aclose()


async def _resolve(target: Target) -> list[Address]:
    """The backend addresses of ``target``: a dns name through trio's getaddrinfo
    (every A/AAAA record, in the resolver's order, duplicates dropped)."""
    if target.path is not None:
        return [target.path]
    if target.host is None:
        return list(target.addresses)
    assert target.port is not None
    infos = await trio.socket.getaddrinfo(target.host, target.port, type=trio.socket.SOCK_STREAM)
    seen: list[Address] = []
    for _family, _type, _proto, _name, sockaddr in infos:
        address = (str(sockaddr[0]), int(sockaddr[1]))
        if address not in seen:
            seen.append(address)
    if not seen:
        raise RpcError(StatusCode.UNAVAILABLE, f"{target.host!r} resolves to no address")
    return seen


@asynccontextmanager
async def _open_balanced(
    target: Target,
    lb_policy: str,
    ssl_context: ssl.SSLContext | None,
    config: trio_h2t.TransportConfig | None,
    backoff: ConnectionBackoff,
    options: dict[str, Any],
) -> AsyncIterator[Channel]:
    addresses = await _resolve(target)
    balancer = Balancer(
        addresses,
        policy=lb_policy,  # type: ignore[arg-type]
        ssl_context=ssl_context,
        config=config,
        backoff=backoff,
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(balancer.run)
        channel = Channel(balancer, authority=target.authority, **options)  # type: ignore[arg-type]
        yield channel
        await channel.aclose()
        nursery.cancel_scope.cancel()
