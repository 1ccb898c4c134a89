"""H2Stream's ``*_nowait`` operations: the async ones without their checkpoint.

trio's ``op`` / ``op_nowait`` convention: the ``_nowait`` form is synchronous, never
a checkpoint, and raises ``trio.WouldBlock`` (nothing changed) where the async form
would wait. The gRPC layer uses them to queue a unary response in one scheduling
step (``docs/grpc.md``, "Latency and the cyclic collector").
"""

from __future__ import annotations

import pytest
import trio
import trio.testing
from helpers import REQUEST, RESPONSE_200, connected_pair

from trio_h2t import H2Stream, TransportConfig

LIMIT = 10


async def test_a_whole_response_queued_without_a_checkpoint() -> None:
    """Headers, body and trailers queued by the _nowait forms arrive as the async
    forms would send them, and queuing them is no checkpoint."""

    async def handler(stream: H2Stream) -> None:
        body = await stream.read_all()
        with trio.testing.assert_no_checkpoints():
            stream.send_headers_nowait(RESPONSE_200)
            stream.send_data_nowait(body[::-1])
            stream.send_trailers_nowait([(b"x-done", b"1")])

    with trio.fail_after(LIMIT):
        async with connected_pair(handler) as (conn, _core):
            response = await conn.request("POST", "/", body=b"abc")
    assert response.status == 200
    assert response.body == b"cba"
    assert response.trailers.raw == ((b"x-done", b"1"),)


async def test_receive_some_nowait_would_block_then_reads_then_ends() -> None:
    """receive_some_nowait raises WouldBlock until bytes arrive, returns them (at
    most max_bytes), and b"" once the body ended; none of it a checkpoint."""
    seen: list[object] = []
    arrived = trio.Event()

    async def handler(stream: H2Stream) -> None:
        with trio.testing.assert_no_checkpoints(), pytest.raises(trio.WouldBlock):
            stream.receive_some_nowait()
        await arrived.wait()
        await trio.testing.wait_all_tasks_blocked()
        with trio.testing.assert_no_checkpoints():
            seen.append(stream.receive_some_nowait(2))
            seen.append(stream.receive_some_nowait())
            seen.append(stream.receive_some_nowait())
        await stream.send_headers(RESPONSE_200, end_stream=True)

    with trio.fail_after(LIMIT):
        async with (
            connected_pair(handler) as (conn, _core),
            conn.open_stream([(b":method", b"POST"), *REQUEST[1:]]) as stream,
        ):
            await trio.testing.wait_all_tasks_blocked()
            await stream.send_data(b"hello", end_stream=True)
            arrived.set()
            await stream.receive_headers()
    assert seen == [b"he", b"llo", b""]


async def test_send_data_nowait_would_block_without_write_quota() -> None:
    """With the write quota used up send_data_nowait raises WouldBlock and queues
    nothing; send_data then waits for the quota and sends."""
    outcome: list[str] = []

    async def handler(stream: H2Stream) -> None:
        await stream.read_all()
        stream.send_headers_nowait(RESPONSE_200)
        stream.send_data_nowait(b"a" * 100)  # quota 1: now used up
        try:
            stream.send_data_nowait(b"b")
        except trio.WouldBlock:
            outcome.append("would block")
        await stream.send_data(b"c", end_stream=True)

    with trio.fail_after(LIMIT):
        async with connected_pair(handler, server_config=TransportConfig(write_quota=1)) as (
            conn,
            _core,
        ):
            response = await conn.request("GET", "/")
    assert outcome == ["would block"]
    assert response.body == b"a" * 100 + b"c"


async def test_nowait_sends_check_as_the_async_ones() -> None:
    """The _nowait forms refuse what the async forms refuse, queuing nothing."""
    errors: list[str] = []

    async def handler(stream: H2Stream) -> None:
        with pytest.raises(RuntimeError, match="send_headers"):
            stream.send_data_nowait(b"x")
        with pytest.raises(RuntimeError, match="send_headers"):
            stream.send_trailers_nowait([(b"x-a", b"1")])
        with pytest.raises(ValueError, match=":status"):
            stream.send_headers_nowait([(b":status", b"99")])
        with pytest.raises(TypeError):
            stream.send_headers_nowait(RESPONSE_200, end_stream=1)  # type: ignore[arg-type]
        errors.append("checked")
        stream.send_headers_nowait(RESPONSE_200, end_stream=True)
        with pytest.raises(trio.ClosedResourceError):
            stream.send_data_nowait(b"late")

    with trio.fail_after(LIMIT):
        async with connected_pair(handler) as (conn, _core):
            response = await conn.request("GET", "/")
    assert errors == ["checked"]
    assert response.status == 200
    assert response.body == b""


async def test_open_stream_nowait_opens_at_once_or_would_block_on_stream_quota() -> None:
    """ClientConnection.open_stream_nowait opens a stream as entering open_stream
    does, without a checkpoint; at the server's MAX_CONCURRENT_STREAMS it raises
    WouldBlock, queuing nothing and holding no quota, and a stream that ends gives
    the quota back to it."""
    release = trio.Event()

    async def handler(stream: H2Stream) -> None:
        await stream.read_all()
        await release.wait()
        await stream.send_headers(RESPONSE_200, end_stream=True)

    config = TransportConfig(max_concurrent_streams=1)
    with trio.fail_after(LIMIT):
        async with connected_pair(handler, server_config=config) as (conn, _core):
            await trio.testing.wait_all_tasks_blocked()  # the server's SETTINGS arrived
            with trio.testing.assert_no_checkpoints():
                first, stream = conn.open_stream_nowait(REQUEST, end_stream=True)
            with trio.testing.assert_no_checkpoints(), pytest.raises(trio.WouldBlock):
                conn.open_stream_nowait(REQUEST, end_stream=True)
            await trio.testing.wait_all_tasks_blocked()
            assert conn.open_streams == 1  # the WouldBlock queued nothing
            release.set()
            assert (await stream.receive_headers())[0] == (b":status", b"200")
            await first.__aexit__(None, None, None)
            await trio.testing.wait_all_tasks_blocked()
            second, again = conn.open_stream_nowait(REQUEST, end_stream=True)
            assert (await again.receive_headers())[0] == (b":status", b"200")
            await second.__aexit__(None, None, None)
