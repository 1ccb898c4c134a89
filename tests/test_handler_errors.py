"""A server handler that fails before it answers gets a 500 on the wire, not a bare reset."""

from __future__ import annotations

import logging

import pytest
import trio
import trio.testing
from h2.errors import ErrorCodes
from helpers import REQUEST, RESPONSE_200, connected_pair

from trio_h2t import H2Stream, StreamResetError


def _status(headers: list[tuple[bytes, bytes]]) -> bytes:
    return dict(headers)[b":status"]


async def test_handler_raising_before_headers_gets_500(caplog: pytest.LogCaptureFixture) -> None:
    """A 500 with a short body and no traceback; the error is logged with its traceback."""

    async def handler(stream: H2Stream) -> None:
        raise ValueError("secret detail")

    caplog.set_level(logging.DEBUG, logger="trio_h2t")
    with trio.fail_after(10):
        async with connected_pair(handler) as (conn, core):
            response = await conn.request("GET", "/")
            assert core.open_streams == 0
    body = response.body
    assert response.status == 500
    assert response.headers["content-length"] == str(len(body))
    assert body == b"internal server error\n"
    assert b"secret" not in body
    [record] = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert record.levelno == logging.ERROR
    assert record.exc_info is not None
    assert record.exc_info[0] is ValueError
    assert "answered 500" in record.getMessage()


async def test_handler_returning_without_response_gets_500_and_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A handler that returns without sending anything: a 500 and one WARNING."""

    async def handler(stream: H2Stream) -> None:
        return

    caplog.set_level(logging.DEBUG, logger="trio_h2t")
    with trio.fail_after(10):
        async with connected_pair(handler) as (conn, _core):
            response = await conn.request("GET", "/")
    assert response.status == 500
    assert response.body == b"internal server error\n"
    [record] = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert record.levelno == logging.WARNING
    assert "returned without a response" in record.getMessage()


async def test_handler_raising_after_headers_resets_with_internal_error() -> None:
    """Once headers went out, a raise can only reset the stream (INTERNAL_ERROR)."""

    async def handler(stream: H2Stream) -> None:
        await stream.send_headers(RESPONSE_200)
        raise RuntimeError("late")

    with trio.fail_after(10):
        async with (
            connected_pair(handler) as (conn, _core),
            conn.open_stream(REQUEST, end_stream=True) as s,
        ):
            assert _status(await s.receive_headers()) == b"200"
            with pytest.raises(StreamResetError) as info:
                await s.read_all()
    assert info.value.error_code == ErrorCodes.INTERNAL_ERROR


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
