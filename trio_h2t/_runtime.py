"""run_connection: one connection's tasks, started and ended the same way on both sides.

Theory of operation
-------------------
A client connection (``_client.py``) and a server connection (``_server.py``) run
the same tasks, in one nursery, in the same order, and end through the same path;
only what runs *inside* differs (the client's user block, the server's handlers,
which ``admit`` starts in this nursery). ``run_connection`` is that common frame:

1. **Preface.** Our connection preface, SETTINGS and connection WINDOW_UPDATE are
   written directly, before loopy exists (grpc-go does the same, reference §0). A
   trio resource error here is the peer going away and propagates; any other
   exception is the connection's fault (``ConnectionCore.fault``): no task is
   started, and the body finds ``core.error`` set.
2. **Tasks**, in this order, each in the connection's nursery:

   - ``h2-loopy``: the only writer (``ConnectionCore.run_loopy``);
   - ``h2-reader``: reads, feeds h2, dispatches (``Reader.run``);
   - ``h2-handshake-timeout``: fails the connection if the peer's first SETTINGS
     has not arrived by ``deadline`` (``ConnectionCore.watch_handshake``);
   - ``h2-keepalive``: only if the side's config asks for it (``_keepalive.py``).

   The handler tasks of a server are started later, by the reader's admission.
3. **Body.** The caller's block runs. It ends the connection its own way: a client
   closes gracefully or aborts (``ConnectionCore.graceful_close`` / ``abort``); a
   server waits for its reader to stop (EOF, protocol error, or a drain that
   finished).
4. **End.** The same for both: loopy gets a bounded moment
   (``FINAL_WRITE_TIMEOUT``) to flush its last GOAWAY and stop, the connection is
   failed if nothing else ended it (every stream still open fails, the control
   buffer is finished), and the nursery is cancelled, so no task outlives the block.
   What happens to the transport after that (the client's clean close, the server's
   linger, closing it) is the side's.

Nothing below this module imports it: the core, the reader and loopy know nothing
of how they are wired together (tests/test_import.py).
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import trio

from ._connection import ConnectionCore
from ._exceptions import ConnectionClosingError
from ._keepalive import (
    client_keepalive_enabled,
    run_client_keepalive,
    run_server_keepalive,
    server_keepalive_enabled,
)
from ._loopy import FINAL_WRITE_TIMEOUT
from ._reader import Admit, Reader

__all__ = ["run_connection"]


@asynccontextmanager
async def run_connection(
    core: ConnectionCore,
    *,
    deadline: float,
    admit: Callable[[trio.Nursery], Admit] | None = None,
) -> AsyncIterator[None]:
    """Run ``core``'s tasks around the block; end the connection when it exits.

    ``deadline`` (``trio.current_time()`` based) is when the peer's first SETTINGS
    must have arrived. ``admit`` (server side) builds, from the connection's nursery,
    what the reader calls for each new request. The block must end the connection
    itself (module docstring, step 3); on exit the common ending runs (step 4).

    Checkpoint: always, entering (the preface is written) and leaving.
    On cancellation: entering, the preface may be partly written and no task runs;
    leaving, the wait for loopy is cut short and every task is cancelled.

    Raises:
        trio.BrokenResourceError, trio.ClosedResourceError: writing the preface failed.
    """
    async with trio.open_nursery() as nursery:
        reader = Reader(core, admit=None if admit is None else admit(nursery))
        if await _send_preface(core):
            _start_tasks(core, nursery, reader, deadline)
        try:
            yield
        finally:
            await _end(core)
            nursery.cancel_scope.cancel()


async def _send_preface(core: ConnectionCore) -> bool:
    """Step 1; False if it faulted (the connection is over). Checkpoint: always."""
    try:
        await core.send_preface()
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        raise
    except Exception as exc:  # a broken Stream wrapper: this connection only
        core.fault(exc, "the transport's send_all")
        core.reader_stopped.set()  # no reader will run
        return False
    return True


def _start_tasks(
    core: ConnectionCore, nursery: trio.Nursery, reader: Reader, deadline: float
) -> None:
    """Step 2: loopy, the reader, the handshake timer, keepalive (if enabled)."""
    nursery.start_soon(core.run_loopy, name="h2-loopy")
    nursery.start_soon(reader.run, name="h2-reader")
    nursery.start_soon(
        core.run_task,
        functools.partial(core.watch_handshake, deadline),
        "the connection's handshake timer",
        name="h2-handshake-timeout",
    )
    config = core.config
    if core.client_side:
        if client_keepalive_enabled(config):
            keepalive = functools.partial(run_client_keepalive, core)
            nursery.start_soon(
                core.run_task, keepalive, "the connection's keepalive task", name="h2-keepalive"
            )
    elif server_keepalive_enabled(config):
        keepalive = functools.partial(run_server_keepalive, core)
        nursery.start_soon(
            core.run_task, keepalive, "the connection's keepalive task", name="h2-keepalive"
        )


async def _end(core: ConnectionCore) -> None:
    """Step 4 (before the nursery is cancelled): let loopy flush its last GOAWAY,
    bounded, then make sure the connection is over.

    Checkpoint: only if loopy has not stopped yet (a block that ended the connection
    itself, then raised under a cancelled scope, keeps its own exception).
    """
    if not core.done.is_set():
        with trio.move_on_after(FINAL_WRITE_TIMEOUT):
            await core.done.wait()
    if core.error is None:
        core.fail(ConnectionClosingError("the connection was closed"))
