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

from trio_h2t import H2Stream


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
