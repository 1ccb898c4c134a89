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
import signal
from collections.abc import Callable, Sequence
from typing import TextIO

import trio

from ._config import TransportConfig
from ._server import Handler, serve_tcp
from ._stopping import drain_on_signal
from ._util import unwrap_single
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
        async with unwrap_single(), trio.open_nursery() as nursery:
            server = await nursery.start(
                functools.partial(
                    serve_tcp, handler, port, host=host, config=config, reuse_port=True
                )
            )
            print(f"serving on {_url(host, server.port)}", flush=True)
            await drain_on_signal(server, signals, nursery.cancel_scope, watch_stdin=True)
            nursery.cancel_scope.cancel()


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
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be an int >= 1, not {workers!r}")
    with reserve_port(host, port) as reserved:
        real = int(reserved.getsockname()[1])
        try:
            return await supervise(list(command(real)), workers, url=_url(host, real), log=log)
        except BaseExceptionGroup as group:
            # supervise's nurseries nest: a worker's WorkerStartError arrives in a
            # group of one inside a group of one. The caller gets it as itself.
            lone: BaseException = group
            while isinstance(lone, BaseExceptionGroup) and len(lone.exceptions) == 1:
                lone = lone.exceptions[0]
            if lone is group:
                raise
            raise lone from lone.__cause__
