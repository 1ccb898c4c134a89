"""The HTTP/2 client: ``open_connection`` / ``open_client_connection`` and ``open_stream``."""

from __future__ import annotations

import math
import os
import ssl
from collections.abc import AsyncIterable, AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from types import TracebackType
from typing import final

import trio
from h2.errors import ErrorCodes

from ._config import TransportConfig, resolve_config
from ._connection import ConnectionCore
from ._exceptions import (
    ConnectionClosingError,
    ConnectionLostError,
    H2ProtocolError,
    LocalProtocolError,
)
from ._headers import PERCENT_ENCODE_HINT, BodyRule
from ._items import StartStream
from ._linger import close_cleanly
from ._messages import Response
from ._runtime import run_connection
from ._statistics import ConnectionStatistics
from ._stream import (
    H2Stream,
    HeaderList,
    _as_header_list,
    _block_to_send,
    _check_bool,
    _check_payload,
)
from ._util import (
    ALPN_H2,
    NOT_TLS_REASONS,
    NoPublicConstructor,
    async_with_only,
    check_ascii,
    check_host,
    check_path,
    check_port,
    check_ssl_context,
    check_stream,
    check_timeout,
    looks_like_tls,
    require_trio,
    unwrap_single,
)

__all__ = [
    "ClientConnection",
    "open_client_connection",
    "open_connection",
    "open_unix_connection",
]


@final
class _StreamOpener:
    """``open_stream``'s context manager, and loopy's :class:`StreamStarter` for it.

    One object per request (a class, not an ``asynccontextmanager`` generator: no
    generator, no asyncgen hooks, no closures). Owner: the stream task, except
    ``started``/``orphaned``, which loopy calls (between the task's awaits).
    """

    __slots__ = ("_body_rule", "_core", "_end_stream", "_headers", "_stream")

    def __init__(
        self,
        core: ConnectionCore,
        headers: HeaderList,
        end_stream: bool,
        rule: BodyRule | None,
    ) -> None:
        self._core = core  # immutable after init
        # owner: stream task. Checked (validate_to_send), bytes; handed to StartStream
        # on entering, then dropped: not kept for the life of the request.
        self._headers: HeaderList | None = headers
        self._end_stream = end_stream  # immutable after init
        # immutable after init: what our content-length lets the body be (body_rule).
        self._body_rule = rule
        self._stream: H2Stream | None = None  # owner: stream task; set once, on entering

    async def __aenter__(self) -> H2Stream:
        if self._stream is not None:
            raise RuntimeError("open_stream(...) can be entered only once")
        await self._core.acquire_stream_quota()
        return self._start()

    def enter_nowait(self) -> H2Stream:
        """``__aenter__`` without waiting or checkpointing (``open_stream_nowait``).

        Raises:
            trio.WouldBlock: entering would wait for stream quota; nothing was done
                (the opener can still be entered).
            As ``__aenter__`` otherwise.
        """
        if self._stream is not None:
            raise RuntimeError("open_stream(...) can be entered only once")
        self._core.acquire_stream_quota_nowait()
        return self._start()

    def _start(self) -> H2Stream:
        """The stream quota is held: make the stream and queue its ``StartStream``."""
        core = self._core
        stream = H2Stream._create(core, stream_id=0, headers=None)
        stream.client_opened(self._body_rule, end_stream=self._end_stream)
        self._stream = stream
        headers = self._headers
        assert headers is not None
        self._headers = None
        try:
            core.cbuf.put(StartStream(headers, self._end_stream, self, stream))
        except ConnectionClosingError:
            core.release_stream_quota()
            raise core.closing_error() from None
        return stream

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # Not a checkpoint: leaving never blocks.
        stream = self._stream
        assert stream is not None
        if stream.core_closed:
            return
        if exc is not None or not (
            stream.core_end_queued and stream.core_peer_ended and stream.core_error is None
        ):
            stream.reset(ErrorCodes.CANCEL)
        # Otherwise the response is complete and our whole body is queued: loopy
        # finishes writing it (leaving must not truncate a request the server is
        # still reading), and the stream closes when its END_STREAM is written.

    # -- StreamStarter: called by loopy ---------------------------------------------

    def started(self, stream_id: int) -> None:
        """Loopy framed the HEADERS."""
        stream = self._stream
        assert stream is not None
        if stream.core_closed:  # reset before its HEADERS went out
            stream.stream_id = stream_id
            return
        self._core.register_client_stream(stream, stream_id)
        # With END_STREAM on the HEADERS, loopy marks our side done next.

    def failed(self, error: Exception) -> None:
        """Loopy could not frame the HEADERS: fail the stream; nothing was sent."""
        stream = self._stream
        assert stream is not None
        exc = LocalProtocolError(
            "the stream could not start: framing its HEADERS failed (see __cause__)",
            error_code=ErrorCodes.INTERNAL_ERROR,
        )
        exc.__cause__ = error
        stream.core_fail(exc)
        self._core.stream_closed(stream)

    def orphaned(self, error: BaseException) -> None:
        """The connection closed before the HEADERS went out."""
        stream = self._stream
        assert stream is not None
        exc = ConnectionClosingError("the stream could not start: the connection is closing")
        exc.__cause__ = error
        stream.core_fail(exc)
        self._core.stream_closed(stream)


async def _read_response(stream: H2Stream) -> Response:
    headers = await stream.receive_headers()
    body = await stream.read_all()
    return Response._from_parts(headers, body, stream.trailers or (), stream.informational)


async def _send_body(stream: H2Stream, body: AsyncIterable[bytes]) -> None:
    """Send ``body`` then END_STREAM; the reading task reports a failed stream."""
    try:
        async for chunk in body:
            await stream.send_data(chunk)
        await stream.end()
    except (trio.BrokenResourceError, trio.ClosedResourceError, LocalProtocolError):
        if stream.core_error is None:
            raise
        # The stream failed (a reset, the connection's end): the task reading the
        # response raises the same sticky error, so it is reported once.


@final
class ClientConnection(metaclass=NoPublicConstructor):
    """An HTTP/2 client connection; open streams on it with :meth:`open_stream`."""

    #: The ``:authority`` and ``:scheme`` of this connection's requests (ASCII).
    authority: bytes
    scheme: bytes

    def __init__(self, core: ConnectionCore, authority: bytes, scheme: bytes) -> None:
        self._core = core  # immutable after init
        self.authority = authority  # immutable after init
        self.scheme = scheme  # immutable after init

    def open_stream(
        self,
        headers: Sequence[tuple[bytes | str, bytes | str]],
        *,
        end_stream: bool = False,
    ) -> AbstractAsyncContextManager[H2Stream]:
        """Start a request: ``async with conn.open_stream(headers) as stream``.

        ``headers`` must include the pseudo-headers (``:method``, ``:path``,
        ``:scheme``, ``:authority``); :meth:`request_headers` builds them. With
        ``end_stream`` the request has no body.

        Checkpoint: entering always checkpoints (it may wait for stream quota under
        the server's MAX_CONCURRENT_STREAMS). Leaving resets the stream with CANCEL
        unless both directions completed, or the response completed and the whole
        request body is queued (loopy then finishes writing it); it does not block.

        On cancellation: while waiting for quota, nothing was sent. Inside the block,
        the stream is reset (RST_STREAM CANCEL) and its state freed.

        Raises:
            ValueError: at once, from ``open_stream`` itself: ``headers`` is not a
                valid request header block (RFC 9113 §8.1-§8.3: the pseudo-headers
                first, lowercase names, no connection-specific fields...), its
                content-length is not a number, or ``end_stream`` would end the
                request short of it. The stream's ``send_data`` and ``end`` then
                keep the body to that content-length (docs/errors.md).
            TypeError: at once: a header field is not bytes or str, or
                ``end_stream`` is not a bool.
        Raises (on entering):
            GoAwayError: the peer sent GOAWAY (``retryable``: nothing was sent);
                ``error_code``, ``last_stream_id`` and ``debug_data`` are the frame's.
            ConnectionClosingError: this side is closing the connection, or it is
                closed (``retryable``: nothing was sent).
            RuntimeError: this ``open_stream(...)`` was already entered once (call
                ``open_stream`` again for another request).
        """
        return self._opener(headers, end_stream)

    def _opener(
        self, headers: Sequence[tuple[bytes | str, bytes | str]], end_stream: bool
    ) -> _StreamOpener:
        """``open_stream``'s checks, then its context manager (not yet entered)."""
        _check_bool(end_stream, "end_stream")
        block, rule = _block_to_send(headers, response=False, trailer=False)
        if end_stream and rule is not None and rule[0]:
            raise ValueError(
                f"end_stream=True would end the request without the body {rule[2]} "
                "announces (RFC 9113 §8.1.1); nothing was queued"
            )
        return _StreamOpener(self._core, block, end_stream, rule)

    def open_stream_nowait(
        self,
        headers: Sequence[tuple[bytes | str, bytes | str]],
        *,
        end_stream: bool = False,
    ) -> tuple[AbstractAsyncContextManager[H2Stream], H2Stream]:
        """:meth:`open_stream`, entered at once without a checkpoint, for a caller
        that checkpoints once around several operations (trio's ``op_nowait``
        convention: the gRPC layer's unary call, whose one schedule point is the
        wait for its response). Returns the context manager, already entered, and
        its stream; the caller must leave it (``await opener.__aexit__(...)``), as
        the ``async with`` block of :meth:`open_stream` would.

        Checkpoint: never (synchronous). Otherwise it raises as :meth:`open_stream`
        and its entering do.

        Raises:
            trio.WouldBlock: entering would wait for stream quota (the server's
                MAX_CONCURRENT_STREAMS is reached, or other tasks wait for it);
                nothing was queued and no quota is held: use :meth:`open_stream`.
        """
        opener = self._opener(headers, end_stream)
        return opener, opener.enter_nowait()

    def request_headers(
        self,
        method: str,
        path: str,
        extra: Sequence[tuple[bytes | str, bytes | str]] = (),
    ) -> list[tuple[bytes, bytes]]:
        """Pseudo-headers for a request on this connection, followed by ``extra``.

        Raises:
            TypeError: ``method`` or ``path`` is not a str.
            ValueError: ``method`` or ``path`` is not ASCII (the message says how to
                percent-encode a path). Spaces and other bytes a path may not carry
                are refused by ``open_stream`` (origin-form, RFC 9113 §8.3.1).
        """
        if not isinstance(method, str) or not isinstance(path, str):
            bad = method if not isinstance(method, str) else path
            what = "method" if bad is method else "path"
            raise TypeError(f"{what} must be a str, not {type(bad).__name__}")
        if not path.isascii():
            raise ValueError(f"path {path!r} is not ASCII: {PERCENT_ENCODE_HINT}")
        if not method.isascii():
            raise ValueError(f"method {method!r} is not ASCII (RFC 9110 §5.6.2: a token)")
        return [
            (b":method", method.encode("ascii")),
            (b":scheme", self.scheme),
            (b":authority", self.authority),
            (b":path", path.encode("ascii")),
            *_as_header_list(extra),
        ]

    async def request(
        self,
        method: str,
        path: str,
        *,
        headers: Sequence[tuple[bytes | str, bytes | str]] = (),
        body: bytes | bytearray | memoryview | AsyncIterable[bytes] = b"",
    ) -> Response:
        """Convenience: one whole request; returns the whole :class:`Response`.

        ``body`` is ``bytes`` (none if empty), or an async iterable of ``bytes``
        chunks, each sent with ``send_data`` as it comes: the body is sent by a
        second task while this one reads the response, so a server that answers as
        it reads (an echo) cannot stall on the stream windows. Once the response is
        complete, a body still being sent is cancelled (the server did not need the
        rest of it). The response's ``informational`` holds any 1xx before it. An
        ``expect: 100-continue`` header is sent as given, but the body is not held
        back for the 100: to wait for it, use :meth:`open_stream` and
        ``H2Stream.receive_informational``.

        Checkpoint: always. On cancellation: the stream is reset (CANCEL), as when
        leaving ``open_stream`` early; what was already sent stays sent.

        Raises what :meth:`open_stream` and ``H2Stream``'s receive methods raise; an
        error raised by iterating ``body`` passes through (the stream is reset).

        Raises:
            RemoteProtocolError: the ``:status`` is not three digits.
            TypeError: ``method`` or ``path`` is not a str, ``body`` is neither
                bytes-like nor an async iterable (raised before anything is
                queued), or a header field is neither bytes nor str; a chunk of an
                async-iterable ``body`` that is not bytes-like raises in the call.
            ValueError: a malformed header block, or a non-ASCII method or path;
                a ``content-length`` in ``headers`` that ``body`` does not match
                (raised by the call that would break it; the stream is reset).
        """
        if not isinstance(body, AsyncIterable):
            if not isinstance(body, bytes | bytearray | memoryview):
                raise TypeError(
                    "body must be bytes, bytearray, memoryview or an async iterable of bytes,"
                    f" not {type(body).__name__}"
                    + (
                        ": join it first, or yield it from an async generator"
                        if isinstance(body, list | tuple)
                        else ""
                    )
                )
            _check_payload(body)
        extra = self.request_headers(method, path, headers)
        if isinstance(body, bytes | bytearray | memoryview):
            async with self.open_stream(extra, end_stream=not body) as stream:
                if body:
                    await stream.send_data(body, end_stream=True)
                return await _read_response(stream)
        async with self.open_stream(extra) as stream, unwrap_single():
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_send_body, stream, body, name="h2-request-body")
                response = await _read_response(stream)
                nursery.cancel_scope.cancel()
            return response

    @property
    def open_streams(self) -> int:
        """Streams currently open on this connection."""
        return self._core.open_streams

    @property
    def error(self) -> BaseException | None:
        """Why the connection ended, or None while it is usable.

        After the peer's GOAWAY with a code other than NO_ERROR, this is the
        :class:`GoAwayError` (its ``error_code`` and ``debug_data``) once the
        connection ends; a clean end after a NO_ERROR GOAWAY is a
        ConnectionClosingError whose ``__cause__`` is the GoAwayError.
        """
        return self._core.error

    @property
    def accepting_streams(self) -> bool:
        """Whether this connection still takes new streams. Never checkpoints.

        False, for good, once the peer's GOAWAY arrived (whatever its code), this side
        began closing (``aclose``, a drain, an ENHANCE_YOUR_CALM), or the connection
        ended. Streams already open may still finish. A pool or balancer stops picking
        the connection then and opens a new one (docs/grpc-channels.md).
        """
        return not self._core.not_accepting.is_set()

    async def wait_not_accepting(self) -> None:
        """Return once :attr:`accepting_streams` is False.

        Checkpoint: always. On cancellation: nothing changes (the wait ends, the
        connection is untouched).
        """
        await self._core.not_accepting.wait()
        # Event.wait does not checkpoint when the event is already set.
        await trio.lowlevel.checkpoint()

    def statistics(self) -> ConnectionStatistics:
        """A snapshot of the connection's counters and windows. Never checkpoints."""
        return self._core.statistics()

    async def aclose(self) -> None:
        """Close gracefully: GOAWAY, let open streams finish (bounded), then stop.

        Checkpoint: always. On cancellation: the connection is closed anyway, at once
        (open streams fail with ``ConnectionClosingError``, the reader and loopy end,
        the transport is closed).
        """
        try:
            await self._core.graceful_close()
            await close_cleanly(self._core)
        finally:
            await trio.aclose_forcefully(self._core.transport)


@async_with_only(
    "trio_h2t.open_client_connection(...)",
    "async with trio_h2t.open_client_connection(transport) as conn:",
)
@asynccontextmanager
async def open_client_connection(
    transport: trio.abc.Stream,
    *,
    authority: str = "localhost",
    scheme: str = "http",
    config: TransportConfig | None = None,
) -> AsyncIterator[ClientConnection]:
    """Run an HTTP/2 client over any ``trio.abc.Stream`` (prior knowledge).

    The connection's tasks (loopy, the reader, the handshake timer, keepalive) run
    in a nursery owned by this context manager (``_runtime.run_connection``).
    Leaving the block closes the connection gracefully (GOAWAY, bounded wait), or at
    once if the block raised; either way no task outlives it, and the transport is
    closed.

    A fault inside the connection (a bug in its reader or loopy, an odd exception
    from the transport) ends it like a lost connection: the calls waiting on it raise
    ConnectionLostError with the bug in their ``__cause__`` chain, the server gets
    GOAWAY(INTERNAL_ERROR), and the fault is logged once at ERROR; it does not come
    out of the block itself. An exception raised in the block (a trio_h2t call's
    included) comes out unchanged, after the connection was closed (docs/errors.md,
    "When a connection faults").

    Checkpoint: entering (it waits for the server's SETTINGS, at most
    ``config.handshake_timeout``) and leaving.

    Raises:
        ConnectionLostError: the server did not complete the handshake.
        TypeError: at once, before any I/O: ``transport`` is not a trio.abc.Stream,
            ``authority`` or ``scheme`` not a str, ``config`` not a TransportConfig.
        ValueError: at once: ``authority`` or ``scheme`` is not ASCII.
    """
    require_trio("trio_h2t.open_client_connection")
    check_stream(transport)
    check_ascii("authority", authority)
    check_ascii("scheme", scheme)
    config = resolve_config(config)
    core = ConnectionCore(transport, client_side=True, config=config)
    graceful = False
    deadline = trio.current_time() + config.handshake_timeout
    try:
        async with unwrap_single(), run_connection(core, deadline=deadline):
            # The handshake timer (run_connection) fails the connection at the
            # deadline, which sets settings_received too.
            await core.settings_received.wait()
            if core.error is not None:
                cause = None if core.handshake_timed_out else core.error
                err = _handshake_error(cause, config.handshake_timeout, _unparsed(core), scheme)
                # GOAWAY before closing, also here: the protocol error's code (h2
                # framed it), else NO_ERROR; bounded (ConnectionCore.abort).
                await core.abort(err)
                raise err
            conn = ClientConnection._create(core, authority.encode("ascii"), scheme.encode())
            try:
                yield conn
            except BaseException:
                # A hard close: GOAWAY (NO_ERROR, or the protocol error's code) after
                # the RST_STREAMs the streams queued, bounded; then tear down.
                await core.abort(ConnectionClosingError("the client connection was closed"))
                raise
            else:
                with trio.CancelScope(shield=True):
                    await core.graceful_close()
                graceful = True
        if graceful:
            # Not shielded: a cancelled close closes at once (_linger.py).
            await close_cleanly(core)
    finally:
        await trio.aclose_forcefully(transport)


def _unparsed(core: ConnectionCore) -> bytes:
    """The first bytes the server sent that h2 could not parse (the handshake failed
    before any frame was taken), for the error message; b"" if none."""
    return core.h2.incoming_buffer.unparsed(16)


def _handshake_error(
    error: BaseException | None, timeout: float, first: bytes = b"", scheme: str = "http"
) -> ConnectionLostError:
    """What ``open_client_connection`` raises when the handshake did not give a
    usable connection: the message names the real cause, which is ``__cause__``.
    ``first`` is what the server sent that h2 could not parse: a TLS record there
    means a plain (h2c) client reached a TLS server. Over plain TCP, a peer that
    closes before its SETTINGS is most often a server that speaks only TLS (it drops
    our preface as a bad ClientHello): say so too."""
    if scheme == "http" and looks_like_tls(first):
        message = (
            f"the server answered with TLS (its first bytes {first!r} are a TLS record):"
            " it serves HTTP/2 over TLS; connect with"
            " open_connection(host, port, ssl_context=ssl.create_default_context())"
        )
    elif isinstance(error, H2ProtocolError):
        code = getattr(error.error_code, "name", error.error_code)
        message = f"the server broke HTTP/2 during the handshake (GOAWAY {code} sent): {error}"
    elif error is not None:
        message = f"the connection ended during the HTTP/2 handshake: {error}"
        if scheme == "http" and isinstance(error, trio.BrokenResourceError):
            message += " (a server that speaks only TLS does this: pass ssl_context=)"
    else:
        message = f"the server did not complete the HTTP/2 handshake within {timeout:g} s"
    exc = ConnectionLostError(message)
    exc.__cause__ = error
    return exc


def _reason(exc: OSError) -> str:
    # trio reports "all attempts to connect ... failed" and keeps the real reasons
    # (one per address tried) in __cause__; name the first one.
    cause = exc.__cause__
    while isinstance(cause, BaseExceptionGroup):
        cause = cause.exceptions[0] if cause.exceptions else None
    if isinstance(cause, OSError) and cause.strerror:
        return cause.strerror
    return exc.strerror or str(exc)


@async_with_only(
    "trio_h2t.open_connection(...)",
    "async with trio_h2t.open_connection(host, port) as conn:",
)
@asynccontextmanager
async def open_connection(
    host: str,
    port: int,
    *,
    ssl_context: ssl.SSLContext | None = None,
    connect_timeout: float | None = None,
    config: TransportConfig | None = None,
) -> AsyncIterator[ClientConnection]:
    """Connect over TCP and run a client connection: h2c (prior knowledge), or
    HTTP/2 over TLS (scheme "https") when ``ssl_context`` is given.

    With ``ssl_context``, this calls ``ssl_context.set_alpn_protocols(["h2"])`` on
    the context you pass (an ``SSLContext`` cannot be copied), verifies the server
    as ``host`` (``server_hostname``), and requires the server to select "h2"
    (RFC 9113 §3.2). ``connect_timeout`` bounds the TCP connect and TLS handshake
    (``None``: no bound); the HTTP/2 handshake is bounded by
    ``config.handshake_timeout``.

    Checkpoint: always. On cancellation: the socket is closed; nothing remains. See
    :func:`open_client_connection`.

    Raises:
        ConnectionLostError: cannot connect (the reason is in the message), no
            connection within ``connect_timeout``, the TLS handshake failed, or the
            server did not select ALPN "h2".
        TypeError: at once, before any I/O: ``host`` is not a str, ``port`` not an
            int, ``ssl_context`` not an ssl.SSLContext, ``connect_timeout`` not a
            number, ``config`` not a TransportConfig.
        ValueError: at once: ``host`` is empty or not a host name or address (a URL,
            say), ``port`` is not in 1..65535, ``connect_timeout`` is not > 0, or
            ``ssl_context`` is a server-side context (``PROTOCOL_TLS_SERVER``).
    """
    require_trio("trio_h2t.open_connection")
    check_host(host, optional=False)
    check_port(port, lowest=1)
    check_ssl_context(ssl_context)
    check_timeout("connect_timeout", connect_timeout)
    config = resolve_config(config)
    if "/" in host:
        raise ValueError(
            f"host must be a host name or IP address, not {host!r}"
            " (for a URL, pass its host and port: open_connection('example.com', 443,"
            " ssl_context=ctx))"
        )
    if ssl_context is not None and ssl_context.protocol == ssl.PROTOCOL_TLS_SERVER:
        raise ValueError(
            "ssl_context is a server-side context; a client needs"
            " ssl.create_default_context() (Purpose.SERVER_AUTH)"
        )
    where = f"{host}:{port}"
    deadline = math.inf if connect_timeout is None else connect_timeout
    transport: trio.abc.Stream | None = None
    try:
        with trio.fail_after(deadline):
            try:
                transport = await trio.open_tcp_stream(host, port)
            except OSError as exc:
                raise ConnectionLostError(f"cannot connect to {where}: {_reason(exc)}") from exc
            if ssl_context is not None:
                transport = await _start_tls(transport, ssl_context, host, where)
    except trio.TooSlowError as exc:
        if transport is not None:
            await trio.aclose_forcefully(transport)
        raise ConnectionLostError(
            f"cannot connect to {where}: no connection within connect_timeout={connect_timeout} s"
        ) from exc
    scheme, default_port = ("https", 443) if ssl_context is not None else ("http", 80)
    name = f"[{host}]" if ":" in host else host  # RFC 3986 §3.2.2: IPv6 in brackets
    authority = f"{name}:{port}" if port != default_port else name
    async with open_client_connection(
        transport, authority=authority, scheme=scheme, config=config
    ) as conn:
        yield conn


async def _start_tls(
    tcp: trio.SocketStream, ssl_context: ssl.SSLContext, host: str, where: str
) -> trio.SSLStream[trio.SocketStream]:
    ssl_context.set_alpn_protocols([ALPN_H2])
    tls = trio.SSLStream(tcp, ssl_context, server_hostname=host, https_compatible=True)
    try:
        await tls.do_handshake()
    except trio.BrokenResourceError as exc:
        await trio.aclose_forcefully(tls)
        cause = exc.__cause__
        if isinstance(cause, ssl.SSLError) and cause.reason in NOT_TLS_REASONS:
            raise ConnectionLostError(
                f"TLS handshake with {where} failed: the server did not answer the TLS"
                f" handshake (its answer is not TLS: {cause.reason}); is it a plain h2c"
                " server? Connect without ssl_context for HTTP/2 with prior knowledge"
            ) from exc
        raise ConnectionLostError(f"TLS handshake with {where} failed: {cause or exc}") from exc
    except BaseException:
        await trio.aclose_forcefully(tls)
        raise
    selected = tls.selected_alpn_protocol()
    if selected != ALPN_H2:
        await trio.aclose_forcefully(tls)
        raise ConnectionLostError(
            f"{where} did not select HTTP/2 by ALPN (offered 'h2', server selected {selected!r});"
            " RFC 9113 §3.2 requires ALPN 'h2' for HTTP/2 over TLS"
        )
    return tls


@async_with_only(
    "trio_h2t.open_unix_connection(...)",
    "async with trio_h2t.open_unix_connection(path) as conn:",
)
@asynccontextmanager
async def open_unix_connection(
    path: str | os.PathLike[str],
    *,
    config: TransportConfig | None = None,
) -> AsyncIterator[ClientConnection]:
    """Connect to a Unix socket at ``path`` (h2c, prior knowledge; authority
    "localhost") and run a client connection.

    Checkpoint: always. On cancellation: the socket is closed; nothing remains. See
    :func:`open_client_connection`.

    Raises:
        ConnectionLostError: cannot connect (the reason is in the message).
        TypeError: at once, before any I/O: ``path`` is not a str or os.PathLike,
            ``config`` not a TransportConfig.
    """
    require_trio("trio_h2t.open_unix_connection")
    check_path(path)
    config = resolve_config(config)
    try:
        transport = await trio.open_unix_socket(os.fspath(path))
    except OSError as exc:
        raise ConnectionLostError(
            f"cannot connect to unix socket {os.fspath(path)!r}: {exc.strerror or exc}"
        ) from exc
    async with open_client_connection(transport, authority="localhost", config=config) as conn:
        yield conn
