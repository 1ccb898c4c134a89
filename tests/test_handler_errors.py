"""A handler cancelled by the connection gets no 500.

The 500 / reset / warning cases of failing handlers are in tests/test_messages.py
("handler errors").
"""

from __future__ import annotations

import logging

import pytest
import trio
import trio.testing
from h2.errors import ErrorCodes
from helpers import REQUEST, connected_pair

from trio_h2t import ClientConnection, H2Stream, open_client_connection, serve_connection


async def test_cancelled_handler_is_reset_not_answered(caplog: pytest.LogCaptureFixture) -> None:
    """A handler cancelled because the peer reset its stream gets no 500."""
    started = trio.Event()
    cancelled = trio.Event()

    async def handler(stream: H2Stream) -> None:
        if dict(stream.headers or [])[b":path"] != b"/":
            return  # /again: returns without answering
        started.set()
        try:
            await trio.sleep_forever()
        finally:
            cancelled.set()

    caplog.set_level(logging.DEBUG, logger="trio_h2t")
    with trio.fail_after(10):
        async with connected_pair(handler) as (conn, core):
            async with conn.open_stream(REQUEST, end_stream=True) as s:
                await started.wait()
                s.reset(ErrorCodes.CANCEL)
            await cancelled.wait()
            await trio.testing.wait_all_tasks_blocked()
            assert core.open_streams == 0
            response = await conn.request("GET", "/again")  # the connection goes on
    assert response.status == 500  # this one returns without answering
    answered = [r.getMessage() for r in caplog.records if "answered 500" in r.getMessage()]
    assert answered == ["handler for stream 3 returned without a response; answered 500"]


async def test_handler_cancelled_from_outside_the_server_is_not_blamed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Cancelling the task that runs serve_connection cancels the handler: no 500, no WARNING."""
    caplog.set_level(logging.DEBUG, logger="trio_h2t")
    started = trio.Event()
    finished: list[str] = []
    outcome: list[type[BaseException]] = []
    client_t, server_t = trio.testing.memory_stream_pair()
    server_scope = trio.CancelScope()

    async def handler(stream: H2Stream) -> None:
        started.set()
        try:
            await trio.sleep_forever()
        finally:
            finished.append("cancelled")

    async def run_server(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        with server_scope:
            await serve_connection(server_t, handler)

    async def ask(conn: ClientConnection) -> None:
        try:
            await conn.request("GET", "/")
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            outcome.append(type(exc))

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run_server)
            try:
                async with open_client_connection(client_t) as conn:
                    nursery.start_soon(ask, conn)
                    await started.wait()
                    server_scope.cancel()
                    await trio.testing.wait_all_tasks_blocked()
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass
    assert finished == ["cancelled"]
    assert outcome  # the request failed; it was not answered 500
    blamed = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert blamed == []
