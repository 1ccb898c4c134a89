"""H2Stream.as_stream(): trio's own half-closeable stream conformance suite."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest
import trio
import trio.testing
from helpers import REQUEST, RESPONSE_200

from trio_h2t import (
    H2Stream,
    H2StreamView,
    TransportConfig,
    open_client_connection,
    serve_connection,
)

Maker = Callable[[], Awaitable[tuple[H2StreamView, H2StreamView]]]


@asynccontextmanager
async def makers() -> AsyncIterator[tuple[Maker, Maker]]:
    """A stream maker and a clogged one; each pair has its own connection."""
    async with trio.open_nursery() as nursery:

        async def run_pair(
            config: TransportConfig | None,
            *,
            task_status: trio.TaskStatus[tuple[H2StreamView, H2StreamView]],
        ) -> None:
            client_t, server_t = trio.testing.memory_stream_pair()
            got: list[H2Stream] = []
            ready = trio.Event()

            async def handler(stream: H2Stream) -> None:
                await stream.send_headers(RESPONSE_200)
                got.append(stream)
                ready.set()
                await trio.sleep_forever()  # the test drives the stream from its task

            async with trio.open_nursery() as inner:
                await inner.start(
                    functools.partial(serve_connection, server_t, handler, config=config)
                )
                async with (
                    open_client_connection(client_t, config=config) as conn,
                    conn.open_stream(REQUEST) as client,
                ):
                    await client.receive_headers()
                    await ready.wait()
                    task_status.started((client.as_stream(), got[0].as_stream()))
                    await trio.sleep_forever()

        async def maker() -> tuple[H2StreamView, H2StreamView]:
            pair: tuple[H2StreamView, H2StreamView] = await nursery.start(run_pair, None)
            return pair

        async def clogged_maker() -> tuple[H2StreamView, H2StreamView]:
            config = TransportConfig(write_quota=1, dynamic_window=False)
            pair: tuple[H2StreamView, H2StreamView] = await nursery.start(run_pair, config)
            for view in pair:
                await clog(view)
            return pair

        yield maker, clogged_maker
        nursery.cancel_scope.cancel()


async def clog(view: H2StreamView) -> None:
    """Send until ``wait_send_all_might_not_block`` would block (the peer reads nothing)."""
    while True:
        done = False

        async def probe() -> None:
            nonlocal done
            await view.wait_send_all_might_not_block()
            done = True

        async with trio.open_nursery() as nursery:
            nursery.start_soon(probe)
            await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()
        if not done:
            return
        await view.send_all(b"\0" * 70_000)


async def test_check_half_closeable_stream() -> None:
    """The view passes trio.testing.check_half_closeable_stream, clogged cases included."""
    async with makers() as (maker, clogged_maker):
        await trio.testing.check_half_closeable_stream(maker, clogged_maker)


async def test_view_has_no_public_constructor() -> None:
    """H2StreamView is built only by H2Stream.as_stream()."""
    with pytest.raises(TypeError):
        H2StreamView(None)  # type: ignore[arg-type]


async def test_graceful_aclose_delivers_then_cancels() -> None:
    """aclose delivers queued data and END_STREAM, then resets the peer's side with CANCEL."""
    async with makers() as (maker, _):
        client, server = await maker()
        await client.send_all(b"hello")
        await client.aclose()
        assert await server.receive_some() == b"hello"
        assert await server.receive_some() == b""
        with pytest.raises(trio.BrokenResourceError):  # noqa: PT012 - until the RST lands
            while True:
                await server.send_all(b"x" * 100)
        assert client.stream.closed
        await server.aclose()
