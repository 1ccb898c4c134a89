"""The HTTP/2 server: ``serve_connection`` over any trio Stream; ``serve_listeners``
over any trio Listener (TCP, TLS, Unix sockets); ``serve_tcp`` / ``open_server`` over
TCP, optionally TLS.

Server side of a connection
---------------------------
``_serve`` builds a ``ConnectionCore``, a ``Reader`` and an ``_Admission``. The
reader hands every new request to ``_Admission.admit`` (synchronously, between two
of its awaits): admission refuses it (RST_STREAM(REFUSED_STREAM)) when the
connection is closing or over its stream limit, resets a malformed one, or creates
the ``H2Stream`` and starts the handler runner (``_Admission.run_handler``) in the
connection's nursery. The runner turns how the handler ended into what the peer
sees: a 500 if no headers went out, a RST_STREAM otherwise (docs/errors.md,
"Handler errors").

Each connection is a fault boundary (docs/errors.md, "When a connection faults"): its
tasks report their own bugs to ``ConnectionCore.fault``, ``_serve`` catches whatever
else leaves the connection, and ``serve_listeners`` guards the step before it (the TLS
handshake), so only cancellation and the listeners' own errors leave ``serve_tcp``.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import logging
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, final

import h2.events
import trio
from h2.errors import ErrorCodes

from ._config import TransportConfig, resolve_config
from ._connection import ConnectionCore
from ._exceptions import ConnectionClosingError, ConnectionLostError, StreamResetError
from ._items import ResetStream
from ._linger import (
    LINGER as LINGER,  # re-exported for the tests' bounds
    linger,
)
from ._messages import TLSInfo
from ._reader import Admit
from ._runtime import run_connection
from ._shared import only_exception as _only
from ._sniff import sniff_preface
from ._statistics import ConnectionStatistics, ServerStatistics
from ._stream import H2Stream, HeaderList
from ._util import (
    ALPN_H2,
    NOT_TLS_REASONS,
    TLS_ALERT_PROTOCOL_VERSION,
    NoPublicConstructor,
    async_with_only,
    check_host,
    check_port,
    check_ssl_context,
    check_stream,
    require_trio,
    unwrap_single,
)
from ._workers import open_reuse_port_listeners

__all__ = [
    "H2Server",
    "Handler",
    "ServerConnection",
    "open_server",
    "serve_connection",
    "serve_listeners",
    "serve_tcp",
]

log = logging.getLogger("trio_h2t")

Handler = Callable[[H2Stream], Awaitable[None]]

#: What a server answers when its handler raised (or returned) before sending headers.
INTERNAL_ERROR_BODY = b"internal server error\n"
INTERNAL_ERROR_RESPONSE = (
    (b":status", b"500"),
    (b"content-type", b"text/plain; charset=utf-8"),
    (b"content-length", str(len(INTERNAL_ERROR_BODY)).encode()),
)

#: Streams a server accepts before the client has acknowledged our SETTINGS (h2's
#: and httpcore's default limit), if our own limit is lower.
PRE_ACK_STREAM_LIMIT = 100


def _check_handler(handler: object) -> None:
    """Refuse a handler that is not callable, before anything is served."""
    if not callable(handler):
        raise TypeError(
            f"handler must be an async function taking the stream, not {type(handler).__name__}"
        )


def _check_listeners(listeners: object) -> None:
    """Refuse ``listeners`` that are not a sequence of ``trio.abc.Listener``."""
    if isinstance(listeners, trio.abc.Listener):
        raise TypeError(
            f"listeners must be a sequence of trio.abc.Listener, not one"
            f" {type(listeners).__name__}: pass [listener]"
        )
    if not isinstance(listeners, Sequence) or isinstance(listeners, str | bytes):
        raise TypeError(
            "listeners must be a sequence (a list) of trio.abc.Listener,"
            f" not {type(listeners).__name__}"
        )
    for i, listener in enumerate(listeners):
        if not isinstance(listener, trio.abc.Listener):
            raise TypeError(
                f"listeners[{i}] must be a trio.abc.Listener, not {type(listener).__name__}"
            )


def _check_tcp_server(
    handler: object,
    port: object,
    host: object,
    ssl_context: ssl.SSLContext | None,
    config: object,
) -> TransportConfig:
    """The checks of ``serve_tcp`` and ``open_server``, before anything is bound;
    returns the config to use."""
    _check_handler(handler)
    check_port(port, lowest=0)
    check_host(host, optional=True)
    check_ssl_context(ssl_context)  # its type first: the side check reads .protocol
    _check_server_context(ssl_context)
    return resolve_config(config)


def _check_server_context(ssl_context: ssl.SSLContext | None) -> None:
    """Refuse a client-side TLS context where a server needs one."""
    if ssl_context is not None and ssl_context.protocol == ssl.PROTOCOL_TLS_CLIENT:
        raise ValueError(
            "ssl_context is a client-side context (ssl.create_default_context() makes"
            " one); a server needs ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)"
        )


def _expects_continue(headers: HeaderList) -> bool:
    """Whether the request expects 100-continue (RFC 9110 §10.1.1: case-insensitive).

    Its content-length needs no look here: ``_h2fixes`` has already reset a request
    whose content-length is invalid or that its HEADERS end short of (§8.1.1)."""
    return any(name == b"expect" and v.lower() == b"100-continue" for name, v in headers)


@final
class _Admission:
    """Server admission and the handler runner of one connection.

    ``admit`` runs in the reader (synchronously); ``run_handler`` is one task per
    admitted stream in the connection's nursery. The counters it changes are the
    core's (``_open_inbound``, ``handlers_running``; their tags say who writes them).

    At most ``max_concurrent_streams`` handlers run at once, whatever the streams: a
    stream the client reset is closed, but its handler runs on until its next
    checkpoint (or longer, if it shields its work), so a client that resets each
    stream as it opens it (Rapid Reset, CVE-2023-44487) would otherwise start
    handlers without bound while never holding more than one stream open. A stream
    admitted while that many handlers run waits in ``_waiting`` (it is open: it
    counts against MAX_CONCURRENT_STREAMS, so at most that many wait) and its handler
    starts when one ends; one reset while it waits never starts. grpc-go caps its
    handlers the same way, but stops reading instead, which would also stop the
    request bodies that the running handlers may be waiting for (docs/security.md).
    """

    __slots__ = ("_core", "_handler", "_nursery", "_waiting")

    def __init__(self, core: ConnectionCore, handler: Handler, nursery: trio.Nursery) -> None:
        self._core = core  # immutable after init
        self._handler = handler  # immutable after init
        self._nursery = nursery  # immutable after init
        # shared: the reader appends (admit), handler tasks pop (_start_waiting, as
        # they end); each synchronously. Streams admitted while the handlers were at
        # their limit, in order.
        # Created on first use: an idle connection does without it (760 bytes).
        self._waiting: collections.deque[H2Stream] | None = None

    def _inbound_stream_limit(self) -> int:
        # RFC 9113 §6.5.3: a peer may open streams before it has seen our SETTINGS,
        # under the initial "unlimited"; until it acknowledges them, refusing at our
        # limit would fail requests that were legal when sent (nghttp -m 50 and h2load
        # do not retry REFUSED_STREAM). Tolerate at least h2's default of 100 until then.
        core = self._core
        limit = core.config.max_concurrent_streams
        if not core.settings_acked:
            limit = max(limit, PRE_ACK_STREAM_LIMIT)
        return limit

    def admit(self, ev: h2.events.RequestReceived) -> bool:
        """Start a handler for the request ``ev``, or refuse it. Called by the reader.

        Returns True if a ``PeerResponse`` was put (the request was refused or reset).
        """
        core = self._core
        sid = ev.stream_id
        assert ev.headers is not None
        if core.error is not None:
            # Invariant: no handler starts on a connection that has ended (its control
            # buffer is finished: nothing it queued could go out). The reader
            # dispatches nothing once the connection failed (Reader._read_loop);
            # this holds it also within one batch of events.
            return False
        limit = self._inbound_stream_limit()
        if core.closing or core.open_inbound >= limit:
            # Refused before any handler sees it; h2 already decoded the header
            # block, so HPACK stays in sync, and the connection lives on.
            return core.refuse_stream(sid)
        headers = list(ev.headers)
        stream = H2Stream._create(core, stream_id=sid, headers=headers)
        # RFC 9110 §10.1.1: the client waits for a 100 before sending its body; the
        # handler's first read sends it. The handler's cancel scope is made here, not
        # in the handler task: a reset before the handler first runs must cancel it.
        stream.server_admit(expects_continue=not ev.stream_ended and _expects_continue(headers))
        core.streams_by_id[sid] = stream
        core.streams_opened += 1
        core.open_inbound += 1
        if core.handlers_running >= limit:
            if self._waiting is None:
                self._waiting = collections.deque()
            self._waiting.append(stream)  # its handler starts when one ends
            return False
        core.handlers_running += 1
        self._nursery.start_soon(self.run_handler, stream, name=f"h2-stream-{sid}")
        return False

    def _start_waiting(self) -> None:
        """A handler ended: start the handlers of waiting streams that are still open,
        up to the limit. Called by the ending handler's task; synchronous."""
        core = self._core
        waiting = self._waiting
        assert waiting is not None  # run_handler calls it only when there are some
        limit = self._inbound_stream_limit()
        while waiting and core.handlers_running < limit:
            stream = waiting.popleft()
            if stream.core_closed:
                continue  # reset (or the connection ended) while it waited
            core.handlers_running += 1
            self._nursery.start_soon(self.run_handler, stream, name=f"h2-stream-{stream.stream_id}")

    async def run_handler(self, stream: H2Stream) -> None:
        """Run the handler on ``stream``; answer for how it ended. Checkpoint: always.

        The handler's own exceptions are answered (a 500 or a reset) and logged; an
        exception from this runner itself (a bug) is the connection's fault
        (``ConnectionCore.fault``), never raised into the connection's nursery. (A
        ``try`` here, not a wrapper task: it costs nothing per request.)
        """
        try:
            core = self._core
            handler = self._handler
            scope = stream.server_handler_scope
            assert scope is not None  # made at admission
            raised = outside = False
            try:
                with scope:
                    await handler(stream)
            except (StreamResetError, ConnectionClosingError, ConnectionLostError) as exc:
                raised = True
                if stream.core_error is None:
                    self._handler_failed(stream)
                else:
                    # The stream failed under the handler (the peer reset it, or the
                    # connection ended) before it could be cancelled: not its bug.
                    log.debug("handler for stream %d stopped: %r", stream.stream_id, exc)
            except Exception as exc:
                raised = True
                tb = exc.__traceback__
                if isinstance(exc, TypeError) and tb is not None and tb.tb_next is None:
                    # Raised by the ``await`` above, not inside the handler: it returned
                    # something that is not awaitable (a plain ``def``). Said here, off the
                    # hot path, instead of checking every handler's result.
                    exc.add_note(f"a handler must be an async function; {handler!r} is not")
                self._handler_failed(stream)
            except BaseException:
                # Cancelled from outside the stream's scope (the task running the server
                # was cancelled), or KeyboardInterrupt: the handler did not return, so no
                # 500 and no warning; the stream is reset with CANCEL below.
                raised = outside = True
                raise
            finally:
                core.handlers_running -= 1
                if self._waiting:
                    self._start_waiting()
                self._handler_ended(stream, scope, raised, outside)
                core.check_idle()
        except Exception as exc:  # not the handler's: this runner's own bug
            self._core.fault(exc, f"the handler runner of stream {stream.stream_id}")

    def _handler_ended(
        self, stream: H2Stream, scope: trio.CancelScope, raised: bool, outside: bool
    ) -> None:
        """Answer for how the handler left ``stream``: a 500 if it returned without
        a response; the request side closed if the response is complete; else the
        stream reset (CANCEL if the handler was cancelled, ``outside``: from beyond
        the stream's scope; INTERNAL_ERROR if it failed or left the response open)."""
        answered = raised or scope.cancelled_caught  # its end says why: no warning
        if not answered and self._answer_500(stream):
            log.warning(
                "handler for stream %d returned without a response; answered 500",
                stream.stream_id,
            )
        if stream.core_closed:
            return
        if stream.core_end_queued and stream.core_error is None:
            self._close_request_side(stream)
            return
        if not answered:
            log.warning(
                "handler for stream %d returned without ending its response; resetting it",
                stream.stream_id,
            )
        stream.reset(
            ErrorCodes.CANCEL if scope.cancelled_caught or outside else ErrorCodes.INTERNAL_ERROR
        )

    def _close_request_side(self, stream: H2Stream) -> None:
        """The response is complete: close the request side too (RST_STREAM(NO_ERROR)
        after the response, if it is still open)."""
        if stream.core_peer_ended:
            return  # closes when loopy writes our END_STREAM
        if stream.core_output_over:
            self._core.reset_stream(stream, ErrorCodes.NO_ERROR, None)
        else:
            # Loopy resets once it has written our END_STREAM.
            self._core.put(ResetStream(stream, ErrorCodes.NO_ERROR, after_end=True))

    def _handler_failed(self, stream: H2Stream) -> None:
        # Called from an except clause: log.exception records the handler's traceback.
        if self._answer_500(stream):
            log.exception("handler for stream %d raised; answered 500", stream.stream_id)
        else:
            log.exception("handler for stream %d raised; resetting it", stream.stream_id)
            stream.reset(ErrorCodes.INTERNAL_ERROR)

    def _answer_500(self, stream: H2Stream) -> bool:
        """Queue a whole 500 response if the handler sent no headers. Synchronous.

        The body says only that the server failed: no traceback goes on the wire.
        Returns False (nothing queued) if headers were sent, or the stream or the
        connection is over; the caller then resets the stream.
        """
        if stream.core_headers_sent:
            return False  # the usual case, without a call
        return stream.server_answer(INTERNAL_ERROR_RESPONSE, INTERNAL_ERROR_BODY)


@final
class ServerConnection(metaclass=NoPublicConstructor):
    """One HTTP/2 connection a server is serving: what :func:`serve_connection`
    reports through ``task_status``.

    Its addresses and TLS state (``peer``, ``local``, ``tls``: the same values
    ``stream.request`` carries), its counters (:meth:`statistics`) and a graceful
    close (:meth:`aclose`). The connection runs in ``serve_connection``'s task; this
    object only looks at it, so it stays valid (and its statistics final) after the
    connection ended.
    """

    __slots__ = ("_core",)

    def __init__(self, core: ConnectionCore) -> None:
        self._core = core  # immutable after init

    def __repr__(self) -> str:
        state = "open" if self._core.error is None else "closed"
        return f"<trio_h2t.ServerConnection peer={self.peer!r} {state}>"

    @property
    def peer(self) -> tuple[str, int] | None:
        """The client's ``(host, port)`` over TCP (also under TLS), else None."""
        return self._core.connection_info().peer

    @property
    def local(self) -> tuple[str, int] | None:
        """This side's ``(host, port)`` over TCP (also under TLS), else None."""
        return self._core.connection_info().local

    @property
    def tls(self) -> TLSInfo | None:
        """The TLS state (ALPN protocol, the client's certificate) over
        ``trio.SSLStream``, else None."""
        return self._core.connection_info().tls

    @property
    def open_streams(self) -> int:
        """Streams open now."""
        return self._core.open_streams

    @property
    def error(self) -> BaseException | None:
        """Why the connection ended (a ``ConnectionClosingError`` after a clean
        close), or None while it is serving."""
        return self._core.error

    def statistics(self) -> ConnectionStatistics:
        """A snapshot of the connection's counters and windows. Never checkpoints."""
        return self._core.statistics()

    async def aclose(self, *, grace: float | None = None) -> None:
        """Close gracefully: drain in two phases (GOAWAY with 2^31-1 and a PING,
        then, on its ACK, GOAWAY with the exact last stream id; the client opens no
        new streams here; docs/keepalive-and-shutdown.md, "The drain"), let the
        streams accepted finish for up to ``grace`` seconds from the first GOAWAY (default
        ``config.graceful_close_timeout``), then cancel the handlers still running
        (``cancel_reason.kind == "shutdown"``) and end the connection;
        ``serve_connection`` then returns. Returns once the connection is over.

        Checkpoint: always. On cancellation: the drain stops at once and the
        connection is ended anyway (every handler cancelled, the transport closed).
        """
        core = self._core
        try:
            await core.graceful_close(timeout=grace)
        finally:
            # Cancelled (or loopy did not stop in time): end it now. fail() cancels
            # the handlers ("shutdown") and finishes the control buffer, so loopy,
            # then the reader, stop and serve_connection returns.
            if core.error is None:
                core.fail(ConnectionClosingError("the connection was closed"))


async def serve_connection(
    transport: trio.abc.Stream,
    handler: Handler,
    *,
    config: TransportConfig | None = None,
    task_status: trio.TaskStatus[ServerConnection] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve one HTTP/2 connection (h2c, prior knowledge) over any ``trio.abc.Stream``.

    Use with ``nursery.start`` to get its :class:`ServerConnection` (addresses,
    statistics, a graceful ``aclose``) once the preface is written.

    Each incoming stream runs ``await handler(stream)`` as a task in this connection's
    nursery. Returns when the connection is over (the peer closed it, a protocol error,
    or a graceful close finished); every task of the connection has ended by then and
    the transport is closed. A handler that raises before its headers gets a 500
    response, after them a RST_STREAM(INTERNAL_ERROR); either way the error is logged on
    the ``trio_h2t`` logger (docs/errors.md, "Handler errors") and the connection
    carries on. A handler that returns without a response gets a 500 and a warning.
    A client whose first bytes are an HTTP/1.x request line gets a short HTTP/1.1 505
    response saying this is an HTTP/2 prior-knowledge server, then the connection
    closes (``_sniff.py``). Peer misbehaviour is answered on the
    wire (GOAWAY or RST_STREAM) and logged at DEBUG; it does not raise here. A client
    that has not sent its preface and first SETTINGS within ``config.handshake_timeout``
    seconds is disconnected. A fault (a bug in one of the connection's tasks, or an
    exception other than trio's resource errors from the transport's
    ``receive_some`` or ``send_all``) ends the connection as any other ending does: its
    client gets GOAWAY(INTERNAL_ERROR) if it can still be written, the fault is
    logged once at ERROR on ``trio_h2t``, ``ServerConnection.error`` is a
    ConnectionLostError caused by it, and this returns: it never raises for anything
    that happened on the connection (docs/errors.md, "When a connection faults").

    Checkpoint: always. On cancellation: every handler is cancelled and the
    transport closed at once (use :meth:`ServerConnection.aclose` or
    :meth:`H2Server.aclose` for a graceful drain).

    Raises:
        TypeError: ``handler`` is not callable, ``transport`` not a trio.abc.Stream,
            or ``config`` not a TransportConfig (nothing is read or written). A
            handler that returns something other than an awaitable (a plain ``def``)
            is answered with a 500 and logged as a TypeError, like any failing
            handler.
    """
    require_trio("trio_h2t.serve_connection")
    _check_handler(handler)
    check_stream(transport)
    config = resolve_config(config)
    await _serve(transport, handler, config, None, task_status)


async def _serve(
    transport: trio.abc.Stream,
    handler: Handler,
    config: TransportConfig,
    registry: set[ConnectionCore] | None,
    task_status: trio.TaskStatus[ServerConnection],
) -> None:
    """Serve one connection until it ends; the transport is closed on return.

    The connection's fault boundary: never raises but for cancellation (and
    ``BaseException`` such as ``KeyboardInterrupt``). How the connection ended is
    ``core.error``. Its tasks report their own faults (``ConnectionCore.fault``);
    whatever else leaves its nursery, or comes from the steps here (the sniff, our
    preface, the lingering close), is caught below: a trio resource error is the
    client going away, anything else a fault. Neither reaches the caller, so one
    connection never ends a server's other connections.
    """
    core = ConnectionCore(transport, client_side=False, config=config)
    # The preface and SETTINGS must arrive by then, the first-bytes sniff included.
    deadline = trio.current_time() + config.handshake_timeout
    try:
        task_status.started(ServerConnection._create(core))
        try:
            # Before our preface: an HTTP/1.x client gets an answer it can read.
            first = await sniff_preface(transport, deadline)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            raise
        except Exception as exc:  # a broken Stream wrapper: this connection only
            core.fault(exc, "the first-bytes sniff (the transport, or a bug in _sniff.py)")
            return
        if first is None:
            return  # an HTTP/1.x request, answered (505); nothing of HTTP/2
        # Only now a connection H2Server.aclose drains; until here it has no
        # HTTP/2 state, and a server stopping just cancels it.
        if registry is not None:
            registry.add(core)
        core.h2.prime(first)

        def admit(nursery: trio.Nursery) -> Admit:
            return _Admission(core, handler, nursery).admit

        async with run_connection(core, deadline=deadline, admit=admit):
            # The reader ends when the connection is over (EOF, protocol error, or
            # finished); run_connection then lets loopy flush a final GOAWAY.
            await core.reader_stopped.wait()
        loopy = core.loopy
        if core.closing and not core.eof_seen and not (loopy.io_failed or loopy.write_cut):
            await _linger(transport)
    except* (trio.BrokenResourceError, trio.ClosedResourceError) as group:
        # The client hung up (or reset) before the reader took over: not a fault.
        gone = _only(group)
        log.debug("connection ended: %r", gone)
        if core.error is None:
            err = ConnectionLostError("the connection was lost")
            err.__cause__ = gone
            core.fail(err)
    except* Exception as group:
        core.fault(_only(group), "the server connection")
    finally:
        if registry is not None:
            registry.discard(core)
        await trio.aclose_forcefully(transport)
    if core.error is not None:
        log.debug("connection ended: %r", core.error)


#: The server's lingering close, a module global so that tests can swap it
#: (tests/test_connection_faults.py).
_linger = linger


def _tcp_port(listener: trio.abc.Listener[Any]) -> int | None:
    """The TCP port ``listener`` (or the listener an SSLListener wraps) is bound to."""
    if isinstance(listener, trio.SSLListener):
        listener = listener.transport_listener
    if isinstance(listener, trio.SocketListener):
        sockname: Any = listener.socket.getsockname()
        if isinstance(sockname, tuple):  # AF_INET / AF_INET6; AF_UNIX gives a str
            return int(sockname[1])
    return None


@final
class H2Server(metaclass=NoPublicConstructor):
    """A running server (from :func:`serve_listeners`, :func:`serve_tcp` or
    :func:`open_server`): its listeners, its port and a graceful stop."""

    #: The listeners it serves on (closed once it stops).
    listeners: list[trio.abc.Listener[Any]]

    def __init__(self, listeners: Sequence[trio.abc.Listener[Any]], nursery: trio.Nursery) -> None:
        self.listeners = list(listeners)  # immutable after init
        self._nursery = nursery  # immutable after init
        # Recorded at start: a closed socket has no address, and ``port`` must still
        # answer while (and after) ``aclose`` runs.
        self._port = next(  # immutable after init
            (p for p in map(_tcp_port, self.listeners) if p is not None), None
        )
        self._connections: set[ConnectionCore] = set()  # owner: the connection tasks (_serve)
        # owner: aclose, _stop_now, or serve_listeners when its nursery fails (set
        # once; read by the accept loops and by the drain on cancellation).
        self._stopping = False
        # shared: set once, by serve_listeners' serving task when it has ended.
        self._finished = trio.Event()
        # shared: +1 by an accept loop for each connection it keeps, -1 when that
        # connection's task ends (``TransportConfig.max_connections``).
        self._open = 0
        self._accepted = 0  # owner: the accept loops (one task at a time, no await)
        self._refused = 0  # owner: the accept loops (as _accepted)

    def statistics(self) -> ServerStatistics:
        """A snapshot of the server's connection counters (``ServerStatistics``)."""
        return ServerStatistics(
            connections_open=self._open,
            connections_accepted=self._accepted,
            connections_refused=self._refused,
        )

    @property
    def port(self) -> int:
        """The TCP port of the first TCP listener (recorded when the server started).

        Raises:
            RuntimeError: no listener is a TCP socket (e.g. only Unix sockets).
        """
        if self._port is None:
            raise RuntimeError("this server has no TCP listener")
        return self._port

    async def aclose(self, *, grace: float | None = None) -> None:
        """Stop accepting, drain every connection (the two GOAWAYs, as
        :meth:`ServerConnection.aclose`), let the accepted streams finish (up to
        ``grace`` seconds, default the config's), then cancel what is left.

        Checkpoint: always. On cancellation: the drain stops at once and the server is
        stopped anyway (listeners closed, every connection cancelled).
        """
        self._stopping = True
        try:
            for listener in self.listeners:
                await trio.aclose_forcefully(listener)
            async with trio.open_nursery() as nursery:
                for core in list(self._connections):
                    nursery.start_soon(functools.partial(core.graceful_close, timeout=grace))
        finally:
            self._nursery.cancel_scope.cancel()

    def _stop_now(self) -> None:
        """Stop without a drain: every connection is cancelled (``open_server`` left
        with an exception). Synchronous."""
        self._stopping = True
        self._nursery.cancel_scope.cancel()


#: Seconds a drain on cancellation may take beyond ``graceful_close_timeout``: the
#: graceful close's bounded final waits (loopy's last write, ``FORCE_CLOSE_WAIT``).
CANCEL_DRAIN_SLACK = 2.0


async def serve_listeners(
    handler: Handler,
    listeners: Sequence[trio.abc.Listener[Any]],
    *,
    config: TransportConfig | None = None,
    task_status: trio.TaskStatus[H2Server] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve HTTP/2 on every listener in ``listeners`` (any ``trio.abc.Listener``).

    A ``trio.SocketListener`` over TCP or over an ``AF_UNIX`` socket speaks h2c
    (prior knowledge). A ``trio.SSLListener`` speaks HTTP/2 over TLS: its context
    must offer ALPN "h2" (``ctx.set_alpn_protocols(["h2"])``; :func:`serve_tcp`
    does it for you); after the handshake, a client that did not select "h2"
    (RFC 9113 §3.2) is disconnected and logged at DEBUG. A handshake is bounded by
    ``config.handshake_timeout``.

    Use with ``nursery.start``: it reports an :class:`H2Server`. Runs until
    cancelled or stopped with ``H2Server.aclose``. Each connection is a fault
    boundary: whatever happens on one (its client leaving, a protocol error, even a
    bug inside it, logged once at ERROR) ends that connection only, never this call.
    The listeners are closed when this returns, whatever the reason (stopped,
    cancelled, or crashed).

    Checkpoint: always. On cancellation: the server drains, as ``H2Server.aclose``
    does (the listeners closed first; each connection gets the two GOAWAYs, and its
    accepted streams may finish), in a shielded scope bounded by
    ``config.graceful_close_timeout`` plus ``CANCEL_DRAIN_SLACK`` seconds; then every
    connection left is cancelled and ``Cancelled`` propagates
    (docs/keepalive-and-shutdown.md, "The drain").

    Raises:
        TypeError: ``handler`` is not callable, ``listeners`` not a sequence of
            trio.abc.Listener, or ``config`` not a TransportConfig (nothing is
            accepted).
        Exception: a listener's ``accept`` raised something other than ``OSError``
            (an ``OSError``, such as EMFILE, is logged and retried): every connection
            is cancelled, the listeners closed, and the error raised (in an
            ExceptionGroup, from this call's nursery).
    """
    require_trio("trio_h2t.serve_listeners")
    _check_handler(handler)
    _check_listeners(listeners)
    config = resolve_config(config)
    try:
        async with unwrap_single(), trio.open_nursery() as guard:
            server: H2Server = await guard.start(
                functools.partial(_serve_shielded, handler, listeners, config)
            )
            task_status.started(server)
            try:
                await server._finished.wait()
            except trio.Cancelled:
                # The caller cancelled us: the connections, shielded from it, drain
                # first (bounded); then Cancelled goes on.
                if not server._stopping:
                    with trio.CancelScope(shield=True) as drain:
                        drain.deadline = (
                            trio.current_time() + config.graceful_close_timeout + CANCEL_DRAIN_SLACK
                        )
                        await server.aclose()
                server._stop_now()
                raise
    finally:
        for listener in listeners:
            await trio.aclose_forcefully(listener)


async def _serve_shielded(
    handler: Handler,
    listeners: Sequence[trio.abc.Listener[Any]],
    config: TransportConfig,
    task_status: trio.TaskStatus[H2Server],
) -> None:
    """``serve_listeners``' serving task: accept loops and connections, in a nursery
    shielded from the caller's cancellation (``serve_listeners`` turns that into a
    drain); reports the H2Server. Ends when the server is stopped (its nursery
    cancelled) or an accept loop raises. Checkpoint: always."""
    server: H2Server | None = None
    with trio.CancelScope(shield=True):
        try:
            async with trio.open_nursery() as nursery:
                server = H2Server._create(listeners, nursery)

                async def one(stream: trio.abc.Stream) -> None:
                    # The accept loop counted this connection in server._open.
                    assert server is not None
                    try:
                        if server._stopping:
                            return
                        if isinstance(stream, trio.SSLStream) and not await _tls_ok(stream, config):
                            return
                        await _serve(
                            stream, handler, config, server._connections, trio.TASK_STATUS_IGNORED
                        )
                    except Exception as exc:
                        # _serve is the connection's own boundary and never raises; this
                        # covers what runs before it (the TLS handshake): one accepted
                        # connection never ends the server.
                        log.error(
                            "taking on an accepted connection raised %s; closing it",
                            type(exc).__name__,
                            exc_info=exc,
                            extra={"h2t_fault": True},
                        )
                    finally:
                        server._open -= 1
                        await trio.aclose_forcefully(stream)

                cap = config.max_connections

                async def accept_loop(listener: trio.abc.Listener[Any]) -> None:
                    assert server is not None
                    while True:
                        try:
                            stream = await listener.accept()
                        except trio.ClosedResourceError:
                            return
                        except OSError as exc:  # e.g. EMFILE: back off, keep serving
                            log.warning("accept failed: %r", exc)
                            await trio.sleep(0.1)
                            continue
                        server._accepted += 1
                        if cap is not None and server._open >= cap:
                            # Over the cap: close at once (a TCP RST or FIN, no
                            # preface); the client sees the connection closed and may
                            # retry.
                            server._refused += 1
                            await trio.aclose_forcefully(stream)
                            continue
                        server._open += 1
                        nursery.start_soon(one, stream)

                for listener in listeners:
                    nursery.start_soon(accept_loop, listener)
                task_status.started(server)
        finally:
            if server is not None:
                server._stopping = True
                server._finished.set()


#: Seconds the TLS alert to a client that does not speak TLS may take to write.
FINAL_ALERT_WAIT = 1.0


async def _tls_ok(stream: trio.SSLStream[Any], config: TransportConfig) -> bool:
    """Finish the TLS handshake; True if the client selected h2, else close it."""
    try:
        with trio.fail_after(config.handshake_timeout):
            await stream.do_handshake()
    except (trio.BrokenResourceError, trio.TooSlowError) as exc:
        cause = exc.__cause__
        if isinstance(cause, ssl.SSLError) and cause.reason in NOT_TLS_REASONS:
            # Not TLS at all (a plain h2c client's preface, an HTTP/1.x request):
            # answer with a TLS alert, so a client that reads it can tell it reached
            # a TLS port, and close at once.
            log.debug(
                "a client that does not speak TLS (%s; a plain h2c client?) reached a"
                " TLS port: sent a TLS alert and closed",
                cause.reason,
            )
            with (
                trio.move_on_after(FINAL_ALERT_WAIT),
                contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError),
            ):
                await stream.transport_stream.send_all(TLS_ALERT_PROTOCOL_VERSION)
        else:
            log.debug("TLS handshake failed: %r", exc)
        await trio.aclose_forcefully(stream)
        return False
    selected = stream.selected_alpn_protocol()
    if selected != ALPN_H2:
        # RFC 9113 §3.2: HTTP/2 over TLS is what ALPN "h2" selects; anything else
        # (http/1.1, or no ALPN at all) is not a conversation we can have.
        log.debug("TLS client did not select ALPN h2 (selected %r): closed", selected)
        await trio.aclose_forcefully(stream)
        return False
    return True


async def serve_tcp(
    handler: Handler,
    port: int,
    *,
    host: str | None = None,
    ssl_context: ssl.SSLContext | None = None,
    config: TransportConfig | None = None,
    reuse_port: bool = False,
    task_status: trio.TaskStatus[H2Server] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve HTTP/2 on TCP ``port`` (0 picks a free one): h2c (prior knowledge), or
    HTTP/2 over TLS when ``ssl_context`` is given.

    With ``reuse_port``, the listening sockets are bound with ``SO_REUSEPORT``, so
    several processes (each with its own Trio run) can serve the same port and the
    kernel spreads new connections over them; ``trio-h2t serve --workers N`` runs
    such workers under a supervisor (docs/keepalive-and-shutdown.md, "More than one
    core").

    With ``ssl_context``, this calls ``ssl_context.set_alpn_protocols(["h2"])`` on
    the context you pass (an ``SSLContext`` cannot be copied), and clients that do
    not select "h2" are disconnected (see :func:`serve_listeners`). TLS streams are
    ``https_compatible`` (no close_notify needed, as for HTTPS).

    Use with ``nursery.start``: it reports an :class:`H2Server` (``.port``,
    ``.aclose()``); or use :func:`open_server`. Runs until cancelled or stopped with
    ``H2Server.aclose``; the listening sockets are closed when it returns, however
    it returns. Nothing that happens on one connection raises here (see
    :func:`serve_listeners`).

    Checkpoint: always. On cancellation: the server drains, bounded, then stops (as
    :func:`serve_listeners` says); the listening sockets are closed.

    Raises:
        TypeError: before anything is bound: ``handler`` is not callable, ``port`` not
            an int, ``host`` not a str or None, ``ssl_context`` not an
            ssl.SSLContext, ``config`` not a TransportConfig.
        ValueError: before anything is bound: ``port`` is not in 0..65535, ``host``
            is empty, or ``ssl_context`` is a client-side context
            (``PROTOCOL_TLS_CLIENT``, what ``ssl.create_default_context()`` makes; a
            server needs ``ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)``).
        OSError: binding ``port`` failed; with ``reuse_port``, also before anything is
            bound where the platform has no ``SO_REUSEPORT`` (errno ENOPROTOOPT, the
            message says so).
    """
    require_trio("trio_h2t.serve_tcp")
    config = _check_tcp_server(handler, port, host, ssl_context, config)
    if not isinstance(reuse_port, bool):
        raise TypeError(f"reuse_port must be a bool, not {type(reuse_port).__name__}")
    tcp_listeners = (
        await open_reuse_port_listeners(port, host=host)
        if reuse_port
        else await trio.open_tcp_listeners(port, host=host)
    )
    listeners: list[trio.abc.Listener[Any]] = list(tcp_listeners)
    if ssl_context is not None:
        ssl_context.set_alpn_protocols([ALPN_H2])
        listeners = [
            trio.SSLListener(listener, ssl_context, https_compatible=True)
            for listener in tcp_listeners
        ]
    await serve_listeners(handler, listeners, config=config, task_status=task_status)


@async_with_only(
    "trio_h2t.open_server(...)",
    "async with trio_h2t.open_server(handler, port) as server:",
)
@asynccontextmanager
async def open_server(
    handler: Handler,
    port: int,
    *,
    host: str | None = None,
    ssl_context: ssl.SSLContext | None = None,
    config: TransportConfig | None = None,
) -> AsyncIterator[H2Server]:
    """Run :func:`serve_tcp` for the duration of an ``async with`` block.

    ``async with open_server(handler, 0) as server:`` gives the running
    :class:`H2Server` (``server.port``). Leaving the block normally stops it
    gracefully (:meth:`H2Server.aclose`); leaving with an exception stops it at once.

    Checkpoint: entering (binding; the server is listening once it returns) and
    leaving. On cancellation: entering, nothing remains listening; leaving, the drain
    stops and every connection is cancelled.

    Raises (entering): as :func:`serve_tcp` (wrong arguments at once, before the
    server's task starts).
    """
    require_trio("trio_h2t.open_server")
    config = _check_tcp_server(handler, port, host, ssl_context, config)
    async with unwrap_single(), trio.open_nursery() as nursery:
        server: H2Server = await nursery.start(
            functools.partial(
                serve_tcp, handler, port, host=host, ssl_context=ssl_context, config=config
            )
        )
        try:
            yield server
        except BaseException:
            server._stop_now()  # at once: no drain
            nursery.cancel_scope.cancel()
            raise
        await server.aclose()
