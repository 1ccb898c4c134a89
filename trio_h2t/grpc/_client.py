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

Retries (gRFC A6) live in the :class:`Call`, so that every call form of every kind
has them: a call whose method has a ``retryPolicy``, or any call on a balanced
channel (transparent retry of a stream that never reached a handler), carries a
``Replay`` (``_retrying.py``) keeping the request frames it sent until it commits
(response headers). Its receiving side, waiting for those headers
(``Call._attempt_headers``), replaces a failed attempt with a new stream from
``_CallOpener._open_next`` and replays the frames; the deadline scope of the
``_CallOpener`` covers them all, and client interceptors, around the opener, see
one call. ``Channel._call_settings`` merges a call's options with its method config
(timeout, waitForReady, retry policy, message-size limits) for every kind. The
unary-unary call without interceptors, credentials or a retry policy keeps its own
inline path (one attempt, transparently resent on a balanced channel).

Only trio_h2t's public API is used (``tests/grpc_layer/test_wire.py`` checks it).
"""

from __future__ import annotations

import contextlib
import dataclasses
import ipaddress
import math
import ssl
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from types import TracebackType
from typing import Any, ClassVar, Generic, NamedTuple, NoReturn, TypeVar, final

import trio

import trio_h2t
from trio_h2t import ClientConnection, H2Stream
from trio_h2t._shared import unwrap_single as _unwrap_single

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
from ._health_check import WATCH_METHOD, OpenWatch
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
from ._resolver import (
    RESOLVE_ERRORS,
    ResolveFunction,
    Resolver,
    check_resolver_options,
    resolve_dns,
)
from ._retry import CallRetryState, RetryBufferPool, RetryThrottle
from ._retrying import (
    MAX_TRANSPARENT_RETRIES as MAX_TRANSPARENT_RETRIES,
    Failure,
    Replay,
    never_processed,
)
from ._server import MethodKind
from ._service_config import RetryPolicy, ServiceConfig, parse_service_config
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


_never_processed = never_processed


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

    A call that is retried (a ``retryPolicy``, a balanced channel's transparent
    retry) stays this one object across its attempts: until response headers
    arrive, the receiving side replaces a failed attempt and the requests sent so
    far are replayed (``docs/grpc.md``, "Service config and retries").
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
        "_max_receive",
        "_max_send",
        "_messages",
        "_replay",
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
        max_send: int | None,
        max_receive: int | None,
        replay: Any = None,  # Replay | None (private: the signature names public types)
    ) -> None:
        self._channel = channel  # immutable after init
        # immutable after init without a replay; with one, owner: the receiving task
        # (it moves the call to the next attempt's stream, _next_attempt)
        self._stream = stream
        self._replay: Replay | None = replay  # immutable after init (None: never sent again)
        self._max_send = max_send  # immutable after init: the smaller of channel's, config's
        self._max_receive = max_receive  # immutable after init: as _max_send
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
        if self._replay is not None:
            self._replay.commit()
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
                ``max_send_message_size`` or the method config's
                ``maxRequestMessageBytes`` (nothing sent; the call ends with that
                status, RST_STREAM(CANCEL)); the call's status if the
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
        replay = self._replay
        if replay is not None and not replay.committed:
            await self._send_replayable(replay, None, end=True)
            return
        try:
            await self._stream.end()
        except _TRANSPORT_ERRORS as exc:
            self._raise_send_failure(exc)

    def _check_sendable(self) -> None:
        if self._code is not None:
            # The call has ended (its status was received): nothing more is read.
            if self._code != StatusCode.OK:
                raise self._rpc_error()
            raise trio.ClosedResourceError("the call has already ended with status OK")

    def _send_nowait(self, message: Req) -> None:
        """The inline unary call's one message, with END_STREAM: ``_send`` without a
        checkpoint when the stream's write quota takes it (a fresh stream's does,
        whatever the size: quota is only waited for once used up). Synchronous; the
        call has no replay buffer (its attempts are not retried)."""
        assert self._replay is None
        frame = self._frame_to_send(message, end=True, compress=True)
        try:
            self._stream.send_data_nowait(frame, end_stream=True)
        except trio.WouldBlock:  # pragma: no cover - a fresh stream has write quota
            raise AssertionError("a fresh stream's write quota is used up") from None
        except _TRANSPORT_ERRORS as exc:
            self._raise_send_failure(exc)

    async def _send(self, message: Req, *, end: bool, compress: bool = True) -> None:
        frame = self._frame_to_send(message, end=end, compress=compress)
        replay = self._replay
        if replay is not None and not replay.committed:
            await self._send_replayable(replay, frame, end=end)
            return
        try:
            await self._stream.send_data(frame, end_stream=end)
        except _TRANSPORT_ERRORS as exc:
            self._raise_send_failure(exc)

    def _frame_to_send(self, message: Req, *, end: bool, compress: bool) -> bytes:
        """``message`` serialized and framed (Length-Prefixed-Message), its size
        checked, the call marked done writing if ``end``. Synchronous.

        Raises:
            trio.ClosedResourceError, RpcError: as ``send_message``.
        """
        if self._writing_done:
            raise trio.ClosedResourceError("done_writing() was called on this call")
        self._check_sendable()
        payload = self._serializer(message)
        limit = self._max_send
        if limit is not None and len(payload) > limit:
            # The message is not sent and the call ends with this status (as grpc
            # does): a receiver waiting for the response is told so at once.
            self._set_status(
                StatusCode.RESOURCE_EXHAUSTED,
                f"trying to send message larger than max ({len(payload)} vs. {limit})",
            )
            if self._replay is not None:
                self._replay.commit()
            self._stream.reset(RST_CANCEL)
            raise self._rpc_error()
        encoding = self._encoding if compress else None
        frame = encode_message(
            compress_payload(payload, encoding) if encoding else payload,
            compressed=encoding is not None,
        )
        if end:
            self._writing_done = True
        return frame

    async def _send_replayable(self, replay: Replay, frame: bytes | None, *, end: bool) -> None:
        """Send ``frame`` (None: END_STREAM alone) on the current attempt, keeping it
        for the next (``_retrying.py``). A failure of an attempt that may yet be
        replaced is not raised: the receiver reads that attempt's status."""
        while replay.switching is not None:  # the receiver is replaying: after it
            await replay.switching.wait()
        if frame is None and self._code is not None:
            await trio.lowlevel.checkpoint()  # the call ended: nothing to half-close
            return
        self._check_sendable()
        if frame is not None:
            replay.keep(frame)
        if end:
            replay.ended = True
        stream = self._stream
        try:
            if frame is None:
                await stream.end()
            else:
                await stream.send_data(frame, end_stream=end)
        except _TRANSPORT_ERRORS as exc:
            if stream is not self._stream or not replay.committed:
                return  # replayed on the next attempt, or kept for it
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
            await self._wait_headers()
        else:
            await trio.lowlevel.cancel_shielded_checkpoint()
        assert self._initial is not None
        return self._initial

    # Every receive starts with ``if self._need_headers(): await self._wait_headers()``.

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

    async def _wait_headers(self) -> None:
        """Wait for the response headers (``_need_headers`` said they are to come)
        and take them. A call that may be sent again waits through
        ``_attempt_headers`` (a failed attempt is replaced); for any other, a stream
        that fails first ends the call with the failure's status.

        Checkpoint: always (the stream's receive_headers). On cancellation: nothing
        is consumed."""
        if self._replay is not None:
            await self._attempt_headers(self._replay)
            return
        try:
            headers = await self._stream.receive_headers()
        except _TRANSPORT_ERRORS as exc:
            self._headers_lost(exc)
        self._take_headers(headers)

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

    async def _attempt_headers(self, replay: Replay) -> None:
        """Wait for the response headers of a call that may be sent again: after a
        failed attempt, retry it (transparently, or as its retry policy says, after
        the backoff) until headers arrive (the call commits), it ends OK, or no
        other attempt is allowed (the failure is the call's)."""
        while True:
            try:
                headers = await self._stream.receive_headers()
            except _TRANSPORT_ERRORS as exc:
                if self._code is not None:  # cancel() was called
                    self._headers_lost(exc)
                if replay.transparent(exc):
                    await self._next_attempt(replay, again=False)
                    continue
                failure, delay = self._attempt_lost(replay, exc)
            else:
                retry = self._attempt_answered(replay, headers)
                if retry is None:
                    return
                failure, delay = retry
            replay.backing_off = failure  # left set if the deadline ends the sleep
            await replay.sleep(delay)
            replay.backing_off = None
            if self._code is not None:  # cancel() was called during the backoff
                self._initial = NO_METADATA
                raise self._rpc_error()
            await self._next_attempt(replay, again=True)

    def _attempt_lost(self, replay: Replay, exc: BaseException) -> tuple[Failure, float]:
        """An attempt's stream failed before its headers (and not transparently
        retried): the failure and the backoff before the next attempt; raises the
        call's status if its retry policy allows no other."""
        code, details = _error_from_transport(exc)
        delay = replay.retry_delay(code, None)
        if delay is None:
            self._initial = NO_METADATA
            self._set_status(code, replay.final_details(details))
            raise self._rpc_error() from exc
        return (code, details, exc), delay

    def _attempt_answered(
        self, replay: Replay, headers: Sequence[tuple[bytes, bytes]]
    ) -> tuple[Failure, float] | None:
        """An attempt's response headers arrived: None if the call goes on with them
        (they committed it, or they are an OK trailers-only response), else the
        failure their status is and the backoff before the next attempt (the
        attempt's status cleared); raises the call's status if its retry policy
        allows no other attempt."""
        raised = False
        try:
            self._take_headers(headers)
        except RpcError:
            raised = True  # its status is set: decided as a trailers-only one
        status = self._code
        if status is None:
            replay.commit()  # headers: the server answered
            return None
        if status == StatusCode.OK:
            replay.succeeded()
            return None
        delay = replay.retry_delay(status, self._trailing)
        if delay is None:
            self._details = replay.final_details(self._details or "")
            if raised:
                raise self._rpc_error()
            return None
        failure: Failure = (status, self._details or "", None)
        self._code = self._details = self._trailing = None
        self._initial = self._response_encoding = None
        return failure, delay

    async def _next_attempt(self, replay: Replay, *, again: bool) -> None:
        """Leave this attempt's stream and open the next (``again``: a counted
        attempt, with ``grpc-previous-rpc-attempts``), replaying what was sent.
        A replay that fails leaves the failure to the next wait for headers."""
        switching = replay.switching = trio.Event()
        try:
            extra = replay.state.start_attempt() if again else None
            try:
                stream = self._stream = await replay.open_next(extra)
            except RpcError as exc:  # no stream: the call's failure
                replay.commit()
                self._initial = NO_METADATA
                self._set_status(exc.code, replay.final_details(exc.details), exc.trailing_metadata)
                raise self._rpc_error() from exc
            try:
                index = 0
                while index < len(replay.frames):
                    await stream.send_data(replay.frames[index])
                    index += 1
                if replay.ended:
                    await stream.end()
            except _TRANSPORT_ERRORS:
                pass  # the stream failed: receive_headers says how
        finally:
            replay.switching = None
            switching.set()

    async def _next_payload(self) -> bytes | None:
        """The next response message's bytes, or None at the end of an OK call."""
        if self._need_headers():
            await self._wait_headers()
        stream = self._stream
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
                decoder = self._decoder = MessageDecoder(
                    self._max_receive, buffer_reuse=self._channel.buffer_reuse
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
            replay = self._replay
            if replay is not None:  # the status after headers (committed)
                if self._code == StatusCode.OK:
                    replay.succeeded()  # refills the channel's retry throttle
                else:
                    self._details = replay.final_details(self._details or "")

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
                payload = decompress(payload, self._response_encoding, self._max_receive)
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

    async def _single_response(self) -> Resp:
        """The single response of the inline unary call, its headers taken.

        The response usually arrives whole (headers, message, trailers in one read):
        then it is taken without a schedule point, each of which is a trip of every
        call in flight through trio's scheduler (docs/grpc.md, "Latency and the
        cyclic collector"); else each read is a checkpoint. Raises RpcError: the
        status, or INTERNAL if the server sent no message or more than one.
        """
        first = False
        try:
            payload = self._next_payload_nowait()
            first = True
            more = None if payload is None else self._next_payload_nowait()
        except trio.WouldBlock:
            if not first:
                payload = await self._next_payload()
            more = None if payload is None else await self._next_payload()
        if payload is None:
            raise self._fail(StatusCode.INTERNAL, "the server sent no response message")
        if more is not None:
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


class CallSettings(NamedTuple):
    """What one call runs with: its options merged with its method's config and the
    channel's (``Channel._call_settings``)."""

    #: Seconds: the smaller of the call's ``timeout`` and ``methodConfig.timeout``.
    timeout: float | None
    #: The call's ``wait_for_ready``, else ``methodConfig.waitForReady``, else the channel's.
    wait_for_ready: bool
    #: ``methodConfig.retryPolicy`` (None: no policy retries).
    retry_policy: RetryPolicy | None
    #: The smaller of ``max_send_message_size`` and ``maxRequestMessageBytes``.
    max_send: int | None
    #: The smaller of ``max_receive_message_size`` and ``maxResponseMessageBytes``.
    max_receive: int | None


def _smaller(limit: int | None, configured: int | None) -> int | None:
    if configured is None:
        return limit
    return configured if limit is None else min(limit, configured)


def _shut_down() -> trio.ClosedResourceError:
    return trio.ClosedResourceError(
        "the channel is SHUTDOWN (closed, or its one connection ended): its state never"
        " changes again; open a new channel"
    )


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
    return (*found, credentials_interceptor(credentials, f"{scheme}://{authority}"))


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
    :class:`ServiceConfig`: ``methodConfig`` timeouts, waitForReady,
    message-size limits and retry policies, for every call form of every kind; see
    ``docs/grpc.md``, "Service config and retries"), ``interceptors`` (client
    interceptors, the first the outermost; they wrap whole calls, retries happen
    below them), ``call_credentials`` (a callable adding metadata to each call,
    refused without TLS unless ``insecure_call_credentials=True``, which also lets
    calls pass their own ``credentials=``): see ``docs/grpc.md``, "Interceptors"
    and "Call credentials".

    ``wait_for_ready`` (default False) is the calls' default (each call can
    override it); ``authority`` overrides the ``:authority`` of every call.

    ``Channel(connection)`` has one connection and no reconnection: calls wait for
    stream quota (the server's MAX_CONCURRENT_STREAMS) and fail fast with
    UNAVAILABLE once the connection is lost or closing. A channel from
    ``open_channel(target)`` balances over a subchannel per backend address,
    reconnecting with backoff (docs/grpc-channels.md): :meth:`get_state`,
    :meth:`wait_for_state_change`, :meth:`subchannels` and
    :meth:`wait_for_subchannel_change` show its connectivity.
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
        self._insecure_call_credentials = insecure_call_credentials  # immutable after init

    def _call_settings(
        self, method: str, timeout: float | None, wait_for_ready: bool | None
    ) -> CallSettings:
        """What a call of ``method`` runs with (:class:`CallSettings`): its options,
        its method config's (service config), the channel's, merged. Never checkpoints."""
        if wait_for_ready is not None:
            check_bool(wait_for_ready, "wait_for_ready")
        config = self._service_config
        if config is None:
            return CallSettings(
                timeout,
                self.wait_for_ready if wait_for_ready is None else wait_for_ready,
                None,
                self.max_send_message_size,
                self.max_receive_message_size,
            )
        found = config.method_config(method)
        if wait_for_ready is None:
            wait_for_ready = found.wait_for_ready
        return CallSettings(
            _config_timeout(timeout, found.timeout),
            self.wait_for_ready if wait_for_ready is None else wait_for_ready,
            found.retry_policy,
            _smaller(self.max_send_message_size, found.max_request_message_bytes),
            _smaller(self.max_receive_message_size, found.max_response_message_bytes),
        )

    def _call_interceptors(
        self, credentials: CallCredentials | None
    ) -> tuple[ClientInterceptor, ...]:
        """The interceptors of one call: the channel's, then the call's own
        ``credentials`` (the innermost), refused without TLS unless the channel was
        opened with ``insecure_call_credentials=True``."""
        if credentials is None:
            return self._interceptors
        base_url = f"{self._scheme.decode('ascii')}://{self._authority.decode('ascii')}"
        interceptor = credentials_interceptor(credentials, base_url, "credentials")
        if self._scheme != b"https" and not self._insecure_call_credentials:
            raise ValueError(
                "credentials= would send their metadata in clear on a channel without TLS:"
                " give the channel an ssl_context, or open it with"
                " insecure_call_credentials=True"
            )
        return (*self._interceptors, interceptor)

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

    def get_state(self, try_to_connect: bool = False) -> ConnectivityState:
        """The channel's connectivity state (READY for a single-connection channel
        that takes streams, SHUTDOWN once it ended or closed). ``try_to_connect``
        (grpcio's): IDLE subchannels start connecting. Never checkpoints."""
        if self._balancer is not None:
            if try_to_connect:
                self._balancer.exit_idle()
            return self._balancer.state
        assert self._conn is not None
        if self._closing or not self._conn.accepting_streams:
            return ConnectivityState.SHUTDOWN
        return ConnectivityState.READY

    async def wait_for_state_change(self, last: ConnectivityState) -> ConnectivityState:
        """Wait until the state is not ``last``; return the new one.

        Checkpoint: always. On cancellation: nothing changes. Raises:
        trio.ClosedResourceError if the channel is SHUTDOWN and ``last`` is SHUTDOWN
        (its state never changes again; grpcio's aio raises UsageError there).
        """
        if last is ConnectivityState.SHUTDOWN and self.get_state() is last:
            await trio.lowlevel.checkpoint()
            raise _shut_down()
        if self._balancer is not None:
            return await self._balancer.wait_for_state_change(last)
        assert self._conn is not None
        if self.get_state() is last:
            await self._conn.wait_not_accepting()
        await trio.lowlevel.checkpoint()
        return self.get_state()

    async def wait_for_subchannel_change(self) -> None:
        """Return at the next change of :meth:`subchannels`: a subchannel's state,
        or an address added or removed by re-resolution (a balanced channel; a
        single-connection one: when it stops taking streams).

        Checkpoint: always. On cancellation: nothing changes. Raises:
        trio.ClosedResourceError if the channel is SHUTDOWN (nothing changes again).
        """
        if self.get_state() is ConnectivityState.SHUTDOWN:
            await trio.lowlevel.checkpoint()
            raise _shut_down()
        if self._balancer is not None:
            await self._balancer.wait_for_any_change()
        else:
            await self.wait_for_state_change(self.get_state())

    def subchannels(self) -> list[tuple[str, ConnectivityState]]:
        """Each backend address (``host:port`` or a socket path) and its state."""
        if self._balancer is None:
            assert self._conn is not None
            return [(self._conn.authority.decode(), self.get_state())]
        return [(Balancer.format(sub.address), sub.state) for sub in self._balancer.subchannels]

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
        settings = self._call_settings(method, timeout, wait_for_ready)
        return _CallOpener(self, method, serializer, deserializer, settings, metadata, compression)


@final
class _CallOpener:
    """A call's context manager (``_Method.open``): the call's stream, and its own
    deadline scope when it has a ``timeout``.

    A class, not an ``asynccontextmanager`` generator: no async generator (trio
    registers each one with its asyncgen hooks), no ``AsyncExitStack``, and no
    cancel scope for a call without a timeout (an infinite deadline of its own
    could never fire; a surrounding deadline still goes out as ``grpc-timeout``).
    A call that may be sent again (a retry policy, or a balanced channel's
    transparent retry) gets a :class:`Replay` whose ``open_next`` is
    :meth:`_open_next`: every attempt runs inside this one block and deadline.
    Owner: the task that enters it (one use); ``_open_next``: the call's receiver.
    """

    __slots__ = (
        "_call",
        "_channel",
        "_compression",
        "_deadline",
        "_deserializer",
        "_encoding",
        "_extra",
        "_metadata",
        "_method",
        "_opener",
        "_scope",
        "_serializer",
        "_settings",
    )

    def __init__(
        self,
        channel: Channel,
        method: str,
        serializer: Serializer,
        deserializer: Deserializer,
        settings: CallSettings,
        metadata: MetadataLike,
        compression: str | bool | None,
    ) -> None:
        self._channel = channel  # immutable after init
        self._method = method  # immutable after init
        self._serializer = serializer  # immutable after init
        self._deserializer = deserializer  # immutable after init
        self._settings = settings  # immutable after init
        self._metadata = metadata  # immutable after init
        self._compression = compression  # immutable after init
        # owner: the entering task; set on entering (then the call's receiver's)
        self._opener: AbstractAsyncContextManager[H2Stream] | None = None
        self._scope: trio.CancelScope | None = None
        self._call: Call[Any, Any] | None = None
        self._deadline = math.inf
        self._encoding: str | None = None
        self._extra: list[tuple[str, str]] = []  # the attempt's grpc-previous-rpc-attempts

    async def __aenter__(self) -> Call[Any, Any]:
        if self._call is not None or self._scope is not None:
            raise RuntimeError("a call's open(...) can be entered only once")
        await trio.lowlevel.checkpoint_if_cancelled()
        channel = self._channel
        if channel._closing:
            raise RpcError(StatusCode.UNAVAILABLE, "the channel is closed")
        settings = self._settings
        own, deadline = _deadlines(settings.timeout)
        self._deadline = deadline
        encoding = self._encoding = channel._encoding_for(self._compression)
        method = self._method
        headers = channel._headers(method, deadline, self._metadata, encoding)
        replay = None
        if settings.retry_policy is not None or channel._balancer is not None:
            state = CallRetryState(
                settings.retry_policy, throttle=channel._retry_throttle, pool=channel._retry_pool
            )
            state.start_attempt()
            replay = Replay(state, self._open_next, transparent=channel._balancer is not None)
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
                if replay is not None:
                    replay.commit()
                channel._call_ended()
            raise
        call: Call[Any, Any] = Call._create(
            channel,
            stream,
            method,
            self._serializer,
            self._deserializer,
            encoding,
            settings.max_send,
            settings.max_receive,
            replay,
        )
        self._call = call
        return call

    async def _open_attempt(self, headers: Sequence[tuple[bytes, bytes]]) -> H2Stream:
        """Open the call's stream on a picked connection: one attempt, again (a
        transparent retry) while a balanced channel's streams fail before any byte
        of them reached a handler (GOAWAY, closing, refused)."""
        opener, stream, _ = await _open_stream(
            self._channel, headers, self._settings.wait_for_ready, 0
        )
        self._opener = opener
        return stream

    async def _open_next(self, extra: list[tuple[str, str]] | None) -> H2Stream:
        """The next attempt's stream (``Replay.open_next``): the attempt's stream is
        left (reset if unfinished), a new one opened with ``extra`` metadata
        (None: the last attempt's)."""
        opener = self._opener
        self._opener = None
        if opener is not None:
            with contextlib.suppress(*_TRANSPORT_ERRORS):  # it failed: why it is left
                await opener.__aexit__(None, None, None)
        if extra is not None:
            self._extra = extra
        metadata = [*Metadata(self._metadata), *self._extra]
        headers = self._channel._headers(self._method, self._deadline, metadata, self._encoding)
        return await self._open_attempt(headers)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        # Not a checkpoint: leaving never blocks (the stream's exit does not).
        opener = self._opener
        scope = self._scope
        call = self._call
        if call is not None and call._replay is not None:
            call._replay.commit()  # gives the replay buffer's bytes back
        try:
            try:
                if opener is not None:
                    self._opener = None
                    await opener.__aexit__(exc_type, exc, tb)
            except BaseException as inner:
                if scope is None or not scope.__exit__(type(inner), inner, inner.__traceback__):
                    raise
            else:
                if scope is None or not scope.__exit__(exc_type, exc, tb):
                    return False
            if scope.cancelled_caught:
                # Our own deadline's cancellation, caught by our scope: the call timed out
                # (during a retry backoff: its details say after what).
                if call is None or call._replay is None:
                    raise RpcError(StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded") from None
                details, cause = call._replay.deadline_details()
                raise RpcError(StatusCode.DEADLINE_EXCEEDED, details) from cause
            return True
        finally:
            self._channel._call_ended()


def _retry_transparently(channel: Channel, retries: int, exc: BaseException) -> bool:
    """True if a call's stream that failed with ``exc`` is opened again: on a
    balanced channel, when no byte of it reached a handler (GOAWAY, closing,
    refused), up to ``MAX_TRANSPARENT_RETRIES`` times."""
    return (
        channel._balancer is not None
        and retries < MAX_TRANSPARENT_RETRIES
        and _never_processed(exc)
    )


async def _open_stream(
    channel: Channel,
    headers: Sequence[tuple[bytes, bytes]],
    wait_for_ready: bool | None,
    retries: int,
    *,
    schedule: bool = True,
) -> tuple[AbstractAsyncContextManager[H2Stream], H2Stream, int]:
    """Open a call's stream on a picked connection: again while
    ``_retry_transparently`` says so (``retries``: the transparent retries so far).
    Returns the opener (its ``__aexit__`` leaves the stream), the stream and the
    retries now; raises RpcError with the failure's status.

    Checkpoint: always (opening waits for stream quota); with ``schedule=False``
    only while it waits (a picked READY connection with stream quota opens the
    stream at once: ``open_stream_nowait``), for the inline unary call, which
    checked for cancellation already and whose schedule point is the wait for its
    response. On cancellation: no stream is left open."""
    while True:
        conn = channel._pick_nowait()
        if conn is None:
            conn = await channel._pick(wait_for_ready)
        try:
            if not schedule:
                try:
                    opener, stream = conn.open_stream_nowait(headers)
                except trio.WouldBlock:
                    pass  # no stream quota now: wait for it below
                else:
                    return opener, stream, retries
            opener = conn.open_stream(headers)
            stream = await opener.__aenter__()
        except _TRANSPORT_ERRORS as exc:
            if _retry_transparently(channel, retries, exc):
                retries += 1
                continue
            raise RpcError(*_error_from_transport(exc)) from exc
        return opener, stream, retries


def _scope_caught(scope: trio.CancelScope | None, exc: BaseException) -> bool:
    """Leave a call's own deadline scope (None: it has none) with ``exc`` raised,
    as a with statement would: True if the scope caught it (its own cancellation)."""
    return scope is not None and bool(scope.__exit__(type(exc), exc, exc.__traceback__))


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
        credentials: CallCredentials | None = None,
    ) -> AbstractAsyncContextManager[Call[Req, Resp]]:
        """Start a call and give its :class:`Call` for the duration of the block.

        ``timeout`` (seconds) bounds the call (RpcError(DEADLINE_EXCEEDED) when it
        expires; the service config's ``methodConfig.timeout`` when that is smaller);
        ``metadata`` is sent with the request headers; ``compression`` overrides the
        channel's (None: no compression); ``wait_for_ready`` overrides the channel's
        (None: the service config's ``methodConfig.waitForReady``, else the
        channel's): True waits, inside the deadline, for a READY backend instead of
        failing UNAVAILABLE while the channel is in TRANSIENT_FAILURE;
        ``credentials`` (a call-credentials callable, as the channel's
        ``call_credentials``) adds its metadata to this call, after the channel's.

        Under the method config's ``retryPolicy``, and on a balanced channel for a
        stream that never reached a handler, the call is sent again on a new stream
        until response headers arrive, replaying the requests sent so far (within
        the replay buffer's bounds; see ``docs/grpc.md``, "Service config and
        retries"); the :class:`Call` given to the block stays the same.

        Checkpoint: entering (it may wait for stream quota). On cancellation, or
        leaving the block before the call ended: RST_STREAM(CANCEL).

        Raises (entering): RpcError(UNAVAILABLE) if the channel or connection is
        closed or lost; ValueError for reserved or malformed metadata. At once:
        TypeError for a ``wait_for_ready`` that is not a bool or None, or
        ``credentials`` that are not callable; ValueError for ``credentials`` on a
        channel without TLS not opened with ``insecure_call_credentials=True``.
        """
        channel = self._channel
        if wait_for_ready is not None:
            check_bool(wait_for_ready, "wait_for_ready")
        interceptors = channel._call_interceptors(credentials)
        if interceptors:
            # The interceptors wrap the whole call (every attempt below them), and
            # see its own timeout: the method config's applies below them too.
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

            return intercepted_call(interceptors, details, open_call)
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
        credentials: CallCredentials | None = None,
    ) -> Resp:
        """Send ``request``; return the response. ``wait_for_ready``,
        ``credentials``: as for ``open``. On a balanced channel a call whose stream
        never reached a handler (GOAWAY, REFUSED_STREAM) is sent again,
        transparently; under a ``retryPolicy`` failed attempts are retried.

        Checkpoint: always. On cancellation: RST_STREAM(CANCEL).

        Raises:
            RpcError: any status but OK (DEADLINE_EXCEEDED when ``timeout`` expires).
        """
        # _CallOpener's work and receive_response's body, inline: while the call
        # waits for its response, this coroutine, Call._wait_headers and the Call
        # are all the layer keeps (tests/grpc_layer/test_footprint.py). The cyclic
        # collector's work grows with what calls in flight keep
        # (benchmarks/results/2026-12-05.md, "Why W1's p99 misses").
        channel = self._channel
        settings = self._inline_settings(timeout, wait_for_ready, credentials)
        if settings is None:
            # The general path: interceptors around the whole call, attempts below.
            general, _ = await self.with_call(
                request,
                timeout=timeout,
                metadata=metadata,
                compression=compression,
                wait_for_ready=wait_for_ready,
                credentials=credentials,
            )
            return general
        own_timeout, ready, send_limit, receive_limit = settings  # not kept while it waits
        await trio.lowlevel.checkpoint_if_cancelled()
        own, encoding, headers = self._request_head(own_timeout, metadata, compression)
        channel._active += 1
        scope = None
        retries = 0
        try:
            if own != math.inf:
                scope = trio.CancelScope(deadline=own)
                scope.__enter__()
            try:
                while True:  # one attempt a turn: again only for a transparent retry
                    opener, stream, retries = await _open_stream(
                        channel, headers, ready, retries, schedule=False
                    )
                    if channel._balancer is None:
                        # No second attempt: drop the block now (the footprint of a
                        # call in flight, tests/grpc_layer/test_footprint.py).
                        headers = ()
                    call: Call[Any, Any] = Call._create(
                        channel,
                        stream,
                        self.method,
                        self._serializer,
                        self._deserializer,
                        encoding,
                        send_limit,
                        receive_limit,
                    )
                    try:
                        # Opening and sending need not wait (stream quota was there,
                        # a fresh stream has its write quota): then the wait for the
                        # response is the call's one schedule point, and the task is
                        # stepped twice a call, not four times (a step is a trip
                        # through trio's scheduler; docs/wakeups.md, "Task steps per unary
                        # call"). The cancellation check was made above.
                        call._send_nowait(request)
                        if call._need_headers():
                            await call._wait_headers()
                        response: Resp = await call._single_response()
                    except BaseException as exc:
                        await opener.__aexit__(type(exc), exc, exc.__traceback__)
                        if _retry_transparently(channel, retries, exc):
                            retries += 1
                            continue
                        raise
                    await opener.__aexit__(None, None, None)
                    break
            except BaseException as exc:
                if not _scope_caught(scope, exc):
                    raise
                # Our own deadline's cancellation, caught by our scope: the call timed out
                # (waiting for stream quota, or for the response).
                raise RpcError(StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded") from None
            if scope is not None:
                scope.__exit__(None, None, None)
        finally:
            channel._call_ended()
        return response

    def _inline_settings(
        self, timeout: float | None, wait_for_ready: bool | None, credentials: object
    ) -> tuple[float | None, bool | None, int | None, int | None] | None:
        """The call's settings for the inline path: its timeout, wait_for_ready and
        message-size limits (the method config merged in); None when the call takes
        the general path (interceptors, call credentials, a retry policy)."""
        channel = self._channel
        ready: bool | None
        if channel._service_config is not None:
            own_timeout, ready, retry_policy, send_limit, receive_limit = channel._call_settings(
                self.method, timeout, wait_for_ready
            )
        else:
            own_timeout, retry_policy = timeout, None
            send_limit = channel.max_send_message_size
            receive_limit = channel.max_receive_message_size
            if wait_for_ready is not None:
                check_bool(wait_for_ready, "wait_for_ready")
            ready = wait_for_ready
        if channel._interceptors or credentials is not None or retry_policy is not None:
            return None
        return own_timeout, ready, send_limit, receive_limit

    def _request_head(
        self, timeout: float | None, metadata: MetadataLike, compression: str | bool | None
    ) -> tuple[float, str | None, Sequence[tuple[bytes, bytes]]]:
        """The inline call's own deadline (the Trio clock; inf: none), its request
        compression and its request headers; RpcError(UNAVAILABLE) if the channel
        is closed."""
        channel = self._channel
        if channel._closing:
            raise RpcError(StatusCode.UNAVAILABLE, "the channel is closed")
        own, deadline = _deadlines(timeout)
        encoding = channel._encoding_for(compression)
        return own, encoding, channel._headers(self.method, deadline, metadata, encoding)

    async def with_call(
        self,
        request: Req,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 (sent as grpc-timeout)
        metadata: MetadataLike = (),
        compression: str | bool | None = False,
        wait_for_ready: bool | None = None,
        credentials: CallCredentials | None = None,
    ) -> tuple[Resp, Call[Req, Resp]]:
        """As calling it (retries included), and the ended :class:`Call` (its
        metadata and status).

        Checkpoint: always. On cancellation: RST_STREAM(CANCEL).
        """
        async with self.open(
            timeout=timeout,
            metadata=metadata,
            compression=compression,
            wait_for_ready=wait_for_ready,
            credentials=credentials,
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
        wait_for_ready: bool | None = None,
        credentials: CallCredentials | None = None,
    ) -> AbstractAsyncContextManager[Call[Req, Resp]]:
        """``async with method(request) as call: async for response in call: ...``.

        The options are ``open``'s (retries included: an attempt that fails before
        any response header is sent again while the block waits for its first
        message or its headers).

        Checkpoint: entering. Leaving before the call ended cancels it. Awaiting it
        or iterating it without ``async with`` raises TypeError naming the fix.
        """
        opened = self.open(
            timeout=timeout,
            metadata=metadata,
            compression=compression,
            wait_for_ready=wait_for_ready,
            credentials=credentials,
        )
        return AsyncWithOnly(
            self._call(request, opened),
            "a unary_stream call",
            "async with method(request) as call:` and `async for response in call:",
        )

    @asynccontextmanager
    async def _call(
        self, request: Req, opened: AbstractAsyncContextManager[Call[Req, Resp]]
    ) -> AsyncIterator[Call[Req, Resp]]:
        async with opened as call:
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
        wait_for_ready: bool | None = None,
        credentials: CallCredentials | None = None,
    ) -> Resp:
        """Send every request of ``requests`` (an iterable or async iterable); return
        the response. The requests are sent by a second task while this one waits
        for the response, so a server answering early ends the call. The options
        are ``open``'s (retries replay the requests sent so far).

        Checkpoint: always. On cancellation: RST_STREAM(CANCEL).
        """
        response, _ = await self.with_call(
            requests,
            timeout=timeout,
            metadata=metadata,
            compression=compression,
            wait_for_ready=wait_for_ready,
            credentials=credentials,
        )
        return response

    async def with_call(
        self,
        requests: Iterable[Req] | AsyncIterable[Req],
        *,
        timeout: float | None = None,  # noqa: ASYNC109 (sent as grpc-timeout)
        metadata: MetadataLike = (),
        compression: str | bool | None = False,
        wait_for_ready: bool | None = None,
        credentials: CallCredentials | None = None,
    ) -> tuple[Resp, Call[Req, Resp]]:
        """As calling it, and the ended :class:`Call`.

        Checkpoint: always. On cancellation: RST_STREAM(CANCEL).
        """
        async with (
            self.open(
                timeout=timeout,
                metadata=metadata,
                compression=compression,
                wait_for_ready=wait_for_ready,
                credentials=credentials,
            ) as call,
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
        wait_for_ready: bool | None = None,
        credentials: CallCredentials | None = None,
    ) -> AbstractAsyncContextManager[Call[Req, Resp]]:
        """``async with method(requests) as call: async for response in call: ...``.

        ``requests`` (an iterable or async iterable) are sent by a second task
        while the block reads; without it, send with ``call.send_message`` and end
        with ``call.done_writing()``. Leaving before the call ended cancels it. The
        options are ``open``'s (retries replay the requests sent so far, until
        response headers arrive).

        Checkpoint: entering. Awaiting it or iterating it without ``async with``
        raises TypeError naming the fix.
        """
        opened = self.open(
            timeout=timeout,
            metadata=metadata,
            compression=compression,
            wait_for_ready=wait_for_ready,
            credentials=credentials,
        )
        return AsyncWithOnly(
            self._call(requests, opened),
            "a stream_stream call",
            "async with method(requests) as call:` and `async for response in call:",
        )

    @asynccontextmanager
    async def _call(
        self,
        requests: Iterable[Req] | AsyncIterable[Req] | None,
        opened: AbstractAsyncContextManager[Call[Req, Resp]],
    ) -> AsyncIterator[Call[Req, Resp]]:
        async with opened as call:
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
    resolver: ResolveFunction | None = None,
    dns_refresh_interval: float | None = 30.0,
    dns_min_time_between_resolutions: float = 5.0,
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
    at once while the channel is in TRANSIENT_FAILURE). With the service config's
    ``healthCheckConfig.serviceName``, ``round_robin`` picks only backends whose
    ``grpc.health.v1.Health/Watch`` says SERVING (or that have no health service).

    A dns target is resolved again ``dns_refresh_interval`` seconds (default 30;
    None: never on a timer) after the last resolution, and when a subchannel's
    connection ends or fails to connect, never sooner than
    ``dns_min_time_between_resolutions`` (default 5) seconds after the last one;
    new addresses get subchannels, vanished ones are drained. ``resolver`` replaces
    the system resolver: an async function ``(host, port)`` returning a list of
    ``(host, port)`` pairs (or Unix socket paths).

    A dns target whose name does not resolve when the channel opens (the resolver
    raises, or finds no address) fails the open with RpcError UNAVAILABLE naming the
    host (the resolver's error is its ``__cause__``).

    ``open_channel(host, port)`` (a port given) is the single-connection channel of
    before: one ``trio_h2t.open_connection``, no reconnection, and entering fails
    with ConnectionLostError if it cannot connect. The options only a target channel
    uses (``backoff``, ``resolver``, the ``dns_*`` ones, a ``round_robin`` or
    ``healthCheckConfig`` service config) are a ValueError there, as is a target
    string (``"ipv4:..."``, ``"host:port"``) with a separate port.

    ``connect_timeout`` (seconds) bounds the TCP connect and TLS handshake of the
    ``(host, port)`` form; on a target channel it is the backoff's
    ``min_connect_timeout`` (each connect gets the larger of it and the current
    backoff). On both forms an exception raised in the block comes out as itself,
    not in an ExceptionGroup.
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
    fix if the result is awaited or used without ``async with``; RuntimeError if
    the same result is entered twice.
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
    # Every option is checked the same way on both forms; one that only a target
    # channel uses is refused on the (host, port) form, never ignored.
    lb_policy = "pick_first" if service_config is None else service_config.lb_policy
    if lb_policy not in LB_POLICIES:
        raise ValueError(
            f"load-balancing policy {lb_policy!r} is not supported:"
            f" use one of {', '.join(LB_POLICIES)}"
        )
    if backoff is not None and not isinstance(backoff, ConnectionBackoff):
        raise TypeError(f"backoff takes a grpc.ConnectionBackoff, not {type(backoff).__name__}")
    check_resolver_options(resolver, dns_refresh_interval, dns_min_time_between_resolutions)
    _check_connect_timeout(connect_timeout)
    if port is not None:
        _check_single_form(
            target,
            port,
            lb_policy,
            service_config,
            backoff,
            resolver,
            dns_refresh_interval,
            dns_min_time_between_resolutions,
        )
        return AsyncWithOnly(
            _open_single(target, port, ssl_context, config, connect_timeout, options),
            "grpc.open_channel(...)",
            "async with grpc.open_channel(host, port) as channel:",
        )
    parsed = parse_target(target)
    backoff = backoff or ConnectionBackoff()
    if connect_timeout is not None:
        # A target channel's connects are its subchannels': each one gets the larger
        # of the current backoff and this (grpc's min_connect_timeout).
        backoff = dataclasses.replace(backoff, min_connect_timeout=connect_timeout)
    dns = (resolver or resolve_dns, dns_refresh_interval, dns_min_time_between_resolutions)
    return AsyncWithOnly(
        _open_balanced(parsed, lb_policy, ssl_context, config, backoff, options, dns),
        "grpc.open_channel(...)",
        "async with grpc.open_channel(target) as channel:",
    )


def _check_connect_timeout(connect_timeout: float | None) -> None:
    if connect_timeout is None:
        return
    if isinstance(connect_timeout, bool) or not isinstance(connect_timeout, int | float):
        raise TypeError(f"connect_timeout takes seconds as a number, not {connect_timeout!r}")
    if not connect_timeout > 0:
        raise ValueError(f"connect_timeout must be > 0 seconds, not {connect_timeout!r}")


def _check_single_form(
    host: str,
    port: int,
    lb_policy: str,
    service_config: ServiceConfig | None,
    backoff: ConnectionBackoff | None,
    resolver: ResolveFunction | None,
    refresh_interval: float | None,
    min_interval: float,
) -> None:
    """ValueError naming the fix for an option that only a target channel uses,
    given to the (host, port) form (one connection: no balancing, no reconnection,
    no resolution)."""
    if not isinstance(host, str):
        raise TypeError(f"open_channel's host is a str, not {type(host).__name__}")
    if (":" in host and not _is_ip_literal(host)) or host.startswith(_SCHEMES):
        raise ValueError(
            f"open_channel({host!r}, port): a target string takes no separate port;"
            f" write open_channel({host!r}) (its port inside), or open_channel(host, port)"
        )
    wrong = []
    if lb_policy != "pick_first":
        wrong.append(f"loadBalancingConfig {lb_policy!r}")
    if service_config is not None and service_config.health_check_service_name is not None:
        wrong.append("healthCheckConfig")
    if backoff is not None:
        wrong.append("backoff=")
    if resolver is not None:
        wrong.append("resolver=")
    if refresh_interval != 30.0:
        wrong.append("dns_refresh_interval=")
    if min_interval != 5.0:
        wrong.append("dns_min_time_between_resolutions=")
    if wrong:
        raise ValueError(
            f"{', '.join(wrong)} only apply to a target channel (subchannels, reconnection,"
            " name resolution); open_channel(host, port) is one connection: use a target"
            f" string instead, e.g. open_channel({_as_target(host, port)!r})"
        )


_SCHEMES = ("dns:", "ipv4:", "ipv6:", "unix:")


def _is_ip_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _as_target(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


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


def _watch_opener(
    authority: str, options: dict[str, Any]
) -> Callable[[ClientConnection], OpenWatch]:
    """How a subchannel opens its health watch: a plain unary-stream call on its
    connection, with the channel's call credentials (gRFC A17), no interceptors."""

    def for_connection(conn: ClientConnection) -> OpenWatch:
        channel = Channel(
            conn,
            authority=authority,
            call_credentials=options["call_credentials"],
            insecure_call_credentials=options["insecure_call_credentials"],
        )
        watch: UnaryStreamMethod[bytes, bytes] = channel.unary_stream(WATCH_METHOD)
        return watch

    return for_connection


@asynccontextmanager
async def _open_balanced(
    target: Target,
    lb_policy: str,
    ssl_context: ssl.SSLContext | None,
    config: trio_h2t.TransportConfig | None,
    backoff: ConnectionBackoff,
    options: dict[str, Any],
    dns: tuple[ResolveFunction, float | None, float],
) -> AsyncIterator[Channel]:
    resolver = None
    addresses: list[Address]
    if target.path is not None:
        addresses = [target.path]
    elif target.host is None:
        addresses = list(target.addresses)
    else:
        assert target.port is not None
        resolve, refresh_interval, min_interval = dns
        resolver = Resolver(
            target.host,
            target.port,
            resolve=resolve,
            refresh_interval=refresh_interval,
            min_interval=min_interval,
        )
        # A name that does not resolve fails the open, as a (host, port) channel
        # that cannot connect does: one error, UNAVAILABLE, naming the host.
        try:
            addresses = await resolver.resolve()
        except RESOLVE_ERRORS as exc:
            raise RpcError(
                StatusCode.UNAVAILABLE, f"cannot resolve {target.host!r}: {exc}"
            ) from exc
        if not addresses:
            raise RpcError(StatusCode.UNAVAILABLE, f"{target.host!r} resolves to no address")
    service_config: ServiceConfig | None = options["service_config"]
    health_service = None if service_config is None else service_config.health_check_service_name
    balancer = Balancer(
        addresses,
        policy=lb_policy,  # type: ignore[arg-type]
        ssl_context=ssl_context,
        config=config,
        backoff=backoff,
        resolver=resolver,
        health_service=health_service,
        open_watch=_watch_opener(target.authority, options),
    )
    # Unwrapped as the (host, port) form's block is (trio_h2t.open_connection's): an
    # exception raised in the user's block comes out as itself, not in a group.
    async with _unwrap_single(), trio.open_nursery() as nursery:
        await nursery.start(balancer.run)
        channel = Channel(balancer, authority=target.authority, **options)  # type: ignore[arg-type]
        yield channel
        await channel.aclose()
        nursery.cancel_scope.cancel()
