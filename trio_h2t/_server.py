"""The HTTP/2 server: ``serve_connection`` over any trio Stream; ``serve_listeners``
over any trio Listener (TCP, TLS, Unix sockets); ``serve_tcp`` / ``open_server`` over
TCP, optionally TLS.
"""

from __future__ import annotations

import functools
import logging
import ssl
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, final

import trio

from ._client import ALPN_H2, _unwrap_single
from ._config import TransportConfig
from ._connection import ConnectionCore, Handler
from ._util import NoPublicConstructor

__all__ = ["H2Server", "open_server", "serve_connection", "serve_listeners", "serve_tcp"]

log = logging.getLogger("trio_h2t")


async def serve_connection(
    transport: trio.abc.Stream,
    handler: Handler,
    *,
    config: TransportConfig | None = None,
    task_status: trio.TaskStatus[ConnectionCore] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve one HTTP/2 connection (h2c, prior knowledge) over any ``trio.abc.Stream``.

    Each incoming stream runs ``await handler(stream)`` as a task in this connection's
    nursery. Returns when the connection is over (the peer closed it, a protocol error,
    or a graceful close finished); every task of the connection has ended by then and
    the transport is closed. A handler that raises before its headers gets a 500
    response, after them a RST_STREAM(INTERNAL_ERROR); either way the error is logged on
    the ``trio_h2t`` logger (docs/errors.md, "Handler errors") and the connection
    carries on. A handler that returns
    without a response gets a 500 and a warning. Peer misbehaviour is answered on the
    wire (GOAWAY or RST_STREAM) and logged at DEBUG; it does not raise here. A client
    that has not sent its preface and first SETTINGS within ``config.handshake_timeout``
    seconds is disconnected. An unexpected exception from the transport's
    ``receive_some`` or ``send_all`` (not a trio resource error) ends this connection
    only: it is logged once at ERROR and does not raise here.

    Checkpoint: always. On cancellation: every handler is cancelled and the
    transport closed at once (use :meth:`H2Server.aclose` for a graceful drain).
    """
    await _serve(transport, handler, config or TransportConfig(), None, task_status)


async def _serve(
    transport: trio.abc.Stream,
    handler: Handler,
    config: TransportConfig,
    registry: set[ConnectionCore] | None,
    task_status: trio.TaskStatus[ConnectionCore],
) -> None:
    core = ConnectionCore(transport, client_side=False, config=config, handler=handler)
    if registry is not None:
        registry.add(core)
    try:
        async with trio.open_nursery() as nursery:
            core.handler_nursery = nursery
            try:
                await core.send_preface()
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                raise
            except Exception as exc:  # a broken Stream wrapper: this connection only
                core.transport_fault(exc, "send_all")
                return
            nursery.start_soon(core.run_loopy, name="h2-loopy")
            nursery.start_soon(core.watch_handshake, name="h2-handshake-timeout")
            task_status.started(core)
            await core.run_reader()
            # The reader ended: the connection is over (EOF, protocol error, or
            # finished). Let loopy flush a final GOAWAY, then stop everything.
            with trio.move_on_after(1):
                await core.done.wait()
            if core.error is None:
                core.fail(trio.ClosedResourceError("the connection was closed"))
            nursery.cancel_scope.cancel()
        if core.closing and not core.eof_seen and not core.loopy.io_failed:
            await _linger(transport)
    except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
        log.debug("connection ended: %r", exc)
    finally:
        if registry is not None:
            registry.discard(core)
        await trio.aclose_forcefully(transport)
    if core.error is not None:
        log.debug("connection ended: %r", core.error)


#: Seconds a server waits, after closing a connection gracefully, for the client to
#: hang up (Go's HTTP/2 server waits about 1 s too).
LINGER = 1.0


async def _linger(transport: trio.abc.Stream) -> None:
    """Read and discard until the client hangs up, for at most ``LINGER`` seconds.

    Closing at once, with the client's last frames (WINDOW_UPDATEs for the response
    it is still reading) unread, makes the kernel answer with a TCP RST, and a client
    whose next write then fails may lose the tail of a response already sent.
    """
    with trio.move_on_after(LINGER):
        try:
            while await transport.receive_some(65536):
                pass
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass


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

    def __init__(self, listeners: Sequence[trio.abc.Listener[Any]], nursery: trio.Nursery) -> None:
        self.listeners = list(listeners)  # immutable after init
        self._nursery = nursery  # immutable after init
        # Recorded at start: a closed socket has no address, and ``port`` must still
        # answer while (and after) ``aclose`` runs.
        self._port = next(  # immutable after init
            (p for p in map(_tcp_port, self.listeners) if p is not None), None
        )
        self._connections: set[ConnectionCore] = set()  # owner: the connection tasks (_serve)
        self._stopping = False  # owner: aclose (set once; read by the accept loops)

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
        """Stop accepting, GOAWAY every connection, let streams finish (up to
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
    cancelled or stopped with ``H2Server.aclose``. The listeners are closed when
    this returns, whatever the reason (stopped, cancelled, or crashed).

    Checkpoint: always. On cancellation: all connections are closed at once and the
    listeners closed.
    """
    config = config or TransportConfig()
    try:
        async with trio.open_nursery() as nursery:
            server = H2Server._create(listeners, nursery)

            async def one(stream: trio.abc.Stream) -> None:
                if server._stopping:
                    await trio.aclose_forcefully(stream)
                    return
                if isinstance(stream, trio.SSLStream) and not await _tls_ok(stream, config):
                    return
                await _serve(stream, handler, config, server._connections, trio.TASK_STATUS_IGNORED)

            async def accept_loop(listener: trio.abc.Listener[Any]) -> None:
                while True:
                    try:
                        stream = await listener.accept()
                    except trio.ClosedResourceError:
                        return
                    except OSError as exc:  # e.g. EMFILE: back off, keep serving
                        log.warning("accept failed: %r", exc)
                        await trio.sleep(0.1)
                        continue
                    nursery.start_soon(one, stream)

            for listener in listeners:
                nursery.start_soon(accept_loop, listener)
            task_status.started(server)
    finally:
        for listener in listeners:
            await trio.aclose_forcefully(listener)


async def _tls_ok(stream: trio.SSLStream[Any], config: TransportConfig) -> bool:
    """Finish the TLS handshake; True if the client selected h2, else close it."""
    try:
        with trio.fail_after(config.handshake_timeout):
            await stream.do_handshake()
    except (trio.BrokenResourceError, trio.TooSlowError) as exc:
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
    task_status: trio.TaskStatus[H2Server] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve HTTP/2 on TCP ``port`` (0 picks a free one): h2c (prior knowledge), or
    HTTP/2 over TLS when ``ssl_context`` is given.

    With ``ssl_context``, this calls ``ssl_context.set_alpn_protocols(["h2"])`` on
    the context you pass (an ``SSLContext`` cannot be copied), and clients that do
    not select "h2" are disconnected (see :func:`serve_listeners`). TLS streams are
    ``https_compatible`` (no close_notify needed, as for HTTPS).

    Use with ``nursery.start``: it reports an :class:`H2Server` (``.port``,
    ``.aclose()``); or use :func:`open_server`. Runs until cancelled or stopped with
    ``H2Server.aclose``; the listening sockets are closed when it returns.

    Checkpoint: always. On cancellation: all connections are closed at once and the
    listening sockets closed.
    """
    tcp_listeners = await trio.open_tcp_listeners(port, host=host)
    listeners: list[trio.abc.Listener[Any]] = list(tcp_listeners)
    if ssl_context is not None:
        ssl_context.set_alpn_protocols([ALPN_H2])
        listeners = [
            trio.SSLListener(listener, ssl_context, https_compatible=True)
            for listener in tcp_listeners
        ]
    await serve_listeners(handler, listeners, config=config, task_status=task_status)


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
    """
    async with _unwrap_single(), trio.open_nursery() as nursery:
        server: H2Server = await nursery.start(
            functools.partial(
                serve_tcp, handler, port, host=host, ssl_context=ssl_context, config=config
            )
        )
        try:
            yield server
        except BaseException:
            nursery.cancel_scope.cancel()
            raise
        await server.aclose()
