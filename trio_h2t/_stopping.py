"""How a serving process stops: ``trio-h2t serve`` and :func:`serve_worker` alike.

The first SIGINT or SIGTERM, or EOF on stdin for a supervised worker (its supervisor
is gone), starts the drain (``H2Server.aclose``: GOAWAY, the open streams finish
within ``graceful_close_timeout``); a second signal during the drain stops the
process's server at once, by cancelling the scope its caller gives. One function,
so the command and the public worker cannot drift apart.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import AsyncIterator, Callable

import trio

from ._server import H2Server

__all__ = ["drain_on_signal"]


async def drain_on_signal(
    server: H2Server,
    signals: AsyncIterator[int],
    stop_now: trio.CancelScope,
    *,
    watch_stdin: bool,
    say: Callable[[str], None] | None = None,
) -> None:
    """Wait for the first signal (or EOF on stdin with ``watch_stdin``), then drain
    ``server``; a second signal meanwhile cancels ``stop_now``. ``say`` is told why
    the drain began ("SIGTERM", "the supervisor is gone (stdin closed)").

    Checkpoint: always. On cancellation: the wait or the drain is abandoned.
    """
    async with trio.open_nursery() as waiting:
        waiting.start_soon(_first_signal, signals, waiting.cancel_scope, say)
        if watch_stdin:
            waiting.start_soon(_stdin_eof, waiting.cancel_scope, say)
    async with trio.open_nursery() as stopper:

        async def on_second_signal() -> None:
            async for _ in signals:
                stop_now.cancel()

        stopper.start_soon(on_second_signal)
        await server.aclose()
        stopper.cancel_scope.cancel()


async def _first_signal(
    signals: AsyncIterator[int], done: trio.CancelScope, say: Callable[[str], None] | None
) -> None:
    """Wait for one signal, tell ``say``, cancel ``done``. Checkpoint: always."""
    async for signum in signals:
        if say is not None:
            say(signal.Signals(signum).name)
        break
    done.cancel()


async def _stdin_eof(done: trio.CancelScope, say: Callable[[str], None] | None) -> None:
    """Wait for EOF on stdin, tell ``say``, cancel ``done``. Checkpoint: always."""
    stdin = trio.lowlevel.FdStream(os.dup(sys.stdin.fileno()))
    async with stdin:
        while await stdin.receive_some():
            pass
    if say is not None:
        say("the supervisor is gone (stdin closed)")
    done.cancel()
