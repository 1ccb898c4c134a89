"""ClientConnection.accepting_streams / wait_not_accepting (the seam a balancer uses
to stop picking a connection: the peer's GOAWAY, our own close, or the end)."""

from __future__ import annotations

import trio
import trio.testing

from trio_h2t import H2Server, H2Stream, open_connection, serve_tcp


async def _handler(stream: H2Stream) -> None:
    await stream.read_all()
    await stream.send_headers([(":status", "200")])
    await stream.send_data(b"ok", end_stream=True)


async def test_server_drain_ends_accepting_and_wakes_the_waiter() -> None:
    """A server's drain (its first GOAWAY) makes accepting_streams False and wakes
    wait_not_accepting, while the connection still exists."""
    with trio.fail_after(10):
        async with trio.open_nursery() as outer:
            serving = trio.CancelScope()

            async def run_server(task_status: trio.TaskStatus[H2Server]) -> None:
                with serving:
                    await serve_tcp(_handler, 0, host="127.0.0.1", task_status=task_status)

            server: H2Server = await outer.start(run_server)
            async with open_connection("127.0.0.1", server.port) as conn:
                assert (await conn.request("GET", "/")).body == b"ok"
                assert conn.accepting_streams
                woke = trio.Event()

                async def waiter() -> None:
                    await conn.wait_not_accepting()
                    woke.set()

                outer.start_soon(waiter)
                await trio.testing.wait_all_tasks_blocked()
                assert not woke.is_set()
                serving.cancel()
                await woke.wait()
                assert not conn.accepting_streams


async def test_own_close_ends_accepting_and_wait_checkpoints() -> None:
    """After aclose, accepting_streams is False and wait_not_accepting returns at
    once, still checkpointing."""
    with trio.fail_after(10):
        async with trio.open_nursery() as outer:
            server: H2Server = await outer.start(
                lambda task_status: serve_tcp(
                    _handler, 0, host="127.0.0.1", task_status=task_status
                )
            )
            async with open_connection("127.0.0.1", server.port) as conn:
                assert conn.accepting_streams
            assert not conn.accepting_streams
            with trio.testing.assert_checkpoints():
                await conn.wait_not_accepting()
            outer.cancel_scope.cancel()
