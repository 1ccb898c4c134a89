"""The HTTP/2 server: ``serve_connection`` over any trio Stream, ``serve_tcp`` over TCP."""

from __future__ import annotations

import functools
import logging
from typing import Any, final

import trio

from ._config import TransportConfig
from ._connection import ConnectionCore, Handler
from ._util import NoPublicConstructor

__all__ = ["H2Server", "serve_connection", "serve_tcp"]

log = logging.getLogger("trio_h2t")


async def serve_connection(
    transport: trio.abc.Stream,
    handler: Handler,
    *,
    config: TransportConfig | None = None,
    task_status: trio.TaskStatus[ConnectionCore] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve one HTTP/2 connection (h2c, prior knowledge) over any ``trio.abc.Stream``.

    Each incoming stream runs ``await handler(stream)`` as a task in this
    connection's nursery. Returns when the connection is over (the peer closed it,
    a protocol error, or a graceful close finished); every task of the connection has
    ended by then and the transport is closed. A handler that raises has its stream
    reset with INTERNAL_ERROR and the error logged on the ``trio_h2t`` logger; the
    connection carries on. Peer misbehaviour is answered on the wire (GOAWAY or
    RST_STREAM) and logged at DEBUG; it does not raise here.

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
            await core.send_preface()
            nursery.start_soon(core.run_loopy, name="h2-loopy")
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


@final
class H2Server(metaclass=NoPublicConstructor):
    """A running TCP server (from :func:`serve_tcp`): its address and a graceful stop."""

    def __init__(self, listeners: list[trio.SocketListener], nursery: trio.Nursery) -> None:
        self.listeners = listeners
        self._nursery = nursery
        self._connections: set[ConnectionCore] = set()
        self._stopping = False

    @property
    def port(self) -> int:
        """The TCP port of the first listener."""
        sockname: Any = self.listeners[0].socket.getsockname()
        return int(sockname[1])

    async def aclose(self, *, grace: float | None = None) -> None:
        """Stop accepting, GOAWAY every connection, let streams finish (up to
        ``grace`` seconds, default the config's), then cancel what is left.

        Checkpoint: always.
        """
        self._stopping = True
        for listener in self.listeners:
            await listener.aclose()
        async with trio.open_nursery() as nursery:
            for core in list(self._connections):
                nursery.start_soon(functools.partial(core.graceful_close, timeout=grace))
        self._nursery.cancel_scope.cancel()


async def serve_tcp(
    handler: Handler,
    port: int,
    *,
    host: str | None = None,
    config: TransportConfig | None = None,
    task_status: trio.TaskStatus[H2Server] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve HTTP/2 (h2c, prior knowledge) on TCP ``port`` (0 picks a free one).

    Use with ``nursery.start``: it reports an :class:`H2Server` (``.port``,
    ``.aclose()``). Runs until cancelled or stopped with ``H2Server.aclose``.

    Checkpoint: always. On cancellation: all connections are closed at once.
    """
    config = config or TransportConfig()
    listeners = await trio.open_tcp_listeners(port, host=host)
    async with trio.open_nursery() as nursery:
        server = H2Server._create(listeners, nursery)

        async def one(stream: trio.SocketStream) -> None:
            if server._stopping:
                await stream.aclose()
                return
            await _serve(stream, handler, config, server._connections, trio.TASK_STATUS_IGNORED)

        async def accept_loop(listener: trio.SocketListener) -> None:
            while True:
                try:
                    sock = await listener.accept()
                except trio.ClosedResourceError:
                    return
                except OSError as exc:  # e.g. EMFILE: back off, keep serving
                    log.warning("accept failed: %r", exc)
                    await trio.sleep(0.1)
                    continue
                nursery.start_soon(one, sock)

        for listener in listeners:
            nursery.start_soon(accept_loop, listener)
        task_status.started(server)
