"""One connection runtime for both sides (``trio_h2t/_runtime.py``).

A client and a server start the same tasks in the same order and end through the
same path; what differs is only the body (the client's block, the server's
handlers).
"""

from __future__ import annotations

import logging

import pytest
import trio
import trio.testing

from trio_h2t import (
    ConnectionLostError,
    H2Stream,
    ServerConnection,
    TransportConfig,
    open_client_connection,
    serve_connection,
)


async def ok(stream: H2Stream) -> None:
    """Handler: an empty 200."""
    await stream.send_headers([(":status", "200")], end_stream=True)


class SpawnOrder(trio.abc.Instrument):
    """Records the names of the trio_h2t tasks spawned under each parent task."""

    def __init__(self) -> None:
        self.by_parent: dict[int, list[str]] = {}

    def task_spawned(self, task: trio.lowlevel.Task) -> None:
        if task.name.startswith("h2-") and not task.name.startswith("h2-stream-"):
            parent = task.parent_nursery
            assert parent is not None
            owner = parent.parent_task
            self.by_parent.setdefault(id(owner), []).append(task.name)


async def test_both_sides_start_the_same_tasks_in_the_same_order() -> None:
    """Client and server each start loopy, the reader, the handshake timer and
    keepalive, in that order, in their connection's nursery."""
    order = SpawnOrder()
    trio.lowlevel.add_instrument(order)
    client_t, server_t = trio.testing.memory_stream_pair()
    client_config = TransportConfig(keepalive_time=60.0)
    try:
        with trio.fail_after(5):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(serve_connection, server_t, ok)
                async with open_client_connection(client_t, config=client_config) as conn:
                    response = await conn.request("GET", "/")
                    assert response.status == 200
    finally:
        trio.lowlevel.remove_instrument(order)
    expected = ["h2-loopy", "h2-reader", "h2-handshake-timeout", "h2-keepalive"]
    assert sorted(order.by_parent.values()) == [expected, expected]


async def test_client_handshake_timeout_is_the_shared_timer(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A server that never sends SETTINGS: the client's handshake timer fails the
    connection, and open_client_connection says the server did not complete it."""
    client_t, _server_t = trio.testing.memory_stream_pair()  # nobody answers
    config = TransportConfig(handshake_timeout=3.0)
    start = trio.current_time()
    with pytest.raises(ConnectionLostError) as info:
        async with open_client_connection(client_t, config=config):
            pytest.fail("the handshake cannot have completed")  # pragma: no cover
    assert "the server did not complete the HTTP/2 handshake within 3 s" in str(info.value)
    assert info.value.__cause__ is None
    assert trio.current_time() - start == pytest.approx(3.0, abs=1.1)


#: What a client sends first (RFC 9113 §3.4): the server's sniff then takes it as HTTP/2.
CLIENT_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


class FaultySend(trio.abc.Stream):
    """A transport whose send_all raises a ValueError (a broken wrapper); it reads
    ``first`` once, then nothing more."""

    def __init__(self, first: bytes = b"") -> None:
        self._first = first

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await trio.lowlevel.checkpoint()
        raise ValueError("broken wrapper")

    async def wait_send_all_might_not_block(self) -> None:
        await trio.lowlevel.checkpoint()

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        if self._first:
            first, self._first = self._first, b""
            await trio.lowlevel.checkpoint()
            return first
        await trio.sleep_forever()
        raise AssertionError("unreachable")  # pragma: no cover

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()


@pytest.mark.injects_faults
async def test_a_preface_fault_ends_either_side_the_same_way(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A send_all that raises something other than trio's resource errors while the
    preface is written is the connection's fault on both sides: logged, the
    connection's error a ConnectionLostError caused by it, and no task left."""
    caplog.set_level(logging.ERROR, logger="trio_h2t")
    with trio.fail_after(5):
        with pytest.raises(ConnectionLostError) as info:
            async with open_client_connection(FaultySend()):
                pytest.fail("the preface was not written")  # pragma: no cover
        client_error = info.value.__cause__  # the connection's error
        assert isinstance(client_error, ConnectionLostError)
        assert isinstance(client_error.__cause__, ValueError)

        async with trio.open_nursery() as nursery:
            conn: ServerConnection = await nursery.start(
                serve_connection, FaultySend(CLIENT_PREFACE), ok
            )
        # serve_connection returned by itself: the connection ended with the fault.
        assert isinstance(conn.error, ConnectionLostError)
        assert isinstance(conn.error.__cause__, ValueError)
    faults = [r for r in caplog.records if "send_all raised ValueError" in r.getMessage()]
    assert len(faults) == 2  # once per connection
