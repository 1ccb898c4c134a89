"""Your own server on several worker processes sharing one port: the two halves.

``trio-h2t serve --workers N`` is built from ``_workers.py`` (the ``SO_REUSEPORT``
listeners and the supervisor); this module gives any server, a gRPC one included,
the same, as two public functions that speak the supervisor's worker protocol
(``_workers.supervise``'s docstring):

- :func:`serve_worker`, in each worker: ``serve_tcp`` with ``reuse_port=True``, one
  ``serving on URL`` line on stdout once it listens, the drain
  (``H2Server.aclose``) on the first SIGTERM or SIGINT or on EOF of stdin (the
  supervisor is gone), an immediate stop on a second signal;
- :func:`supervise_workers`, in the supervisor: reserve the port (``--port 0``
  included), start ``workers`` copies of the command you build for that port,
  restart a worker that dies, and on SIGTERM or SIGINT drain them all and return.

docs/keepalive-and-shutdown.md, "More than one core", has the picture and a sample.
"""

from __future__ import annotations

import functools
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TextIO

import trio

from ._config import TransportConfig
from ._server import Handler, serve_tcp
from ._workers import reserve_port, supervise

__all__ = ["serve_worker", "supervise_workers"]


def _url(host: str, port: int) -> str:
    name = f"[{host}]" if ":" in host else host
    return f"http://{name}:{port}"


async def serve_worker(
    handler: Handler,
    port: int,
    *,
    host: str,
    config: TransportConfig | None = None,
) -> None:
    """Run one worker of :func:`supervise_workers`: serve ``handler`` (a gRPC
    ``grpc.Server`` too) on ``host:port`` with ``SO_REUSEPORT`` until told to stop.

    Prints ``serving on http://HOST:PORT`` once it listens (the supervisor waits for
    that line). The first SIGTERM or SIGINT, or EOF on stdin (the supervisor is
    gone), drains (``H2Server.aclose``: GOAWAY, the open streams finish within
    ``config.graceful_close_timeout``); a second signal stops it at once. Returns
    once the server stopped.

    Checkpoint: always. On cancellation: the server stops at once (no drain).

    Raises:
        OSError: the port cannot be bound (or the platform has no SO_REUSEPORT).
    """
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            server = await nursery.start(
                functools.partial(
                    serve_tcp, handler, port, host=host, config=config, reuse_port=True
                )
            )
            print(f"serving on {_url(host, server.port)}", flush=True)
            async with trio.open_nursery() as waiting:
                waiting.start_soon(_first_signal, signals, waiting.cancel_scope)
                waiting.start_soon(_stdin_eof, waiting.cancel_scope)

            async def on_second_signal() -> None:
                async for _ in signals:
                    nursery.cancel_scope.cancel()

            nursery.start_soon(on_second_signal)
            await server.aclose()
            nursery.cancel_scope.cancel()


async def _first_signal(signals: AsyncIterator[int], done: trio.CancelScope) -> None:
    """Wait for one signal, then cancel ``done``. Checkpoint: always."""
    async for _ in signals:
        break
    done.cancel()


async def _stdin_eof(done: trio.CancelScope) -> None:
    """Wait for EOF on stdin (the supervisor is gone), then cancel ``done``.
    Checkpoint: always."""
    stdin = trio.lowlevel.FdStream(os.dup(sys.stdin.fileno()))
    async with stdin:
        while await stdin.receive_some():
            pass
    done.cancel()


async def supervise_workers(
    command: Callable[[int], Sequence[str]],
    workers: int,
    *,
    host: str,
    port: int,
    log: TextIO | None = None,
) -> int:
    """Run ``workers`` worker processes on one port until SIGTERM or SIGINT.

    Reserves ``host:port`` (0: a free port), then starts ``command(port)`` (with the
    real port) ``workers`` times: a command line whose program calls
    :func:`serve_worker` with that host and port (``[sys.executable, "-m",
    "myservice", "--port", str(port)]``, say). Prints ``serving on
    http://HOST:PORT`` once every worker listens; restarts a worker that exits; on
    SIGTERM or SIGINT passes SIGTERM on (each worker drains), and on a second
    signal again (they stop at once). Events go to ``log`` (stderr by default).

    Returns 0 if every worker exited 0 after the signal, else 1.

    Checkpoint: always. On cancellation: every worker is killed (no drain).

    Raises:
        OSError: the port cannot be reserved; ``WorkerStartError`` (an OSError)
            if a worker exited before it listened, at start.
        ValueError: ``workers`` is not at least 1.
    """
    if not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be an int >= 1, not {workers!r}")
    with reserve_port(host, port) as reserved:
        real = int(reserved.getsockname()[1])
        return await supervise(list(command(real)), workers, url=_url(host, real), log=log)
