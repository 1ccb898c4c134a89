"""How a connection ends on the wire (docs/cancellation.md, "How a connection ends"):
a hard close or a cancellation still sends GOAWAY, bounded in time."""

from __future__ import annotations

import functools

import h2.events
import pytest
import trio
import trio.testing
from _helpers_common import read_to_eof as _read_to_eof
from helpers import REQUEST, ScriptedPeer, clogged_pair, h2t_tasks, open_peer_server
from hyperframe.frame import Frame, GoAwayFrame, HeadersFrame, RstStreamFrame

from trio_h2t import (
    H2Stream,
    ServerConnection,
    TransportConfig,
    open_client_connection,
    serve_connection,
)


def _last(frames: list[Frame]) -> list[tuple[str, int, int]]:
    """GOAWAY and RST_STREAM frames as (kind, stream or last id, code)."""
    out = []
    for f in frames:
        if isinstance(f, GoAwayFrame):
            out.append(("GOAWAY", f.last_stream_id, f.error_code))
        elif isinstance(f, RstStreamFrame):
            out.append(("RST_STREAM", f.stream_id, f.error_code))
    return out


async def test_client_body_raises_sends_rst_then_goaway() -> None:
    """The body of open_client_connection raises with a stream open: the server gets
    RST_STREAM(1, CANCEL), then GOAWAY(NO_ERROR, last 0), then EOF."""
    raised: list[BaseException] = []
    with trio.fail_after(5):
        try:
            async with (
                open_peer_server() as (conn, peer),
                conn.open_stream(REQUEST, end_stream=True),
            ):
                await peer.receive_until(lambda ev: isinstance(ev, h2.events.RequestReceived))
                raise KeyError("boom")
        except* KeyError as group:
            raised.extend(group.exceptions)
        await _read_to_eof(peer)
    assert [str(e) for e in raised] == ["'boom'"]
    assert _last(peer.frames) == [("RST_STREAM", 1, 8), ("GOAWAY", 0, 0)]


async def test_client_cancelled_sends_goaway() -> None:
    """The client's block is cancelled with a stream open: GOAWAY(NO_ERROR, last 0)
    still goes out before EOF."""
    with trio.fail_after(5):
        with trio.CancelScope() as scope:
            async with (
                open_peer_server() as (conn, peer),
                conn.open_stream(REQUEST, end_stream=True),
            ):
                await peer.receive_until(lambda ev: isinstance(ev, h2.events.RequestReceived))
                scope.cancel()
                await trio.sleep_forever()
        assert scope.cancelled_caught
        await _read_to_eof(peer)
    assert _last(peer.frames)[-1:] == [("GOAWAY", 0, 0)]


async def test_server_cancelled_sends_goaway_with_last_stream() -> None:
    """serve_connection cancelled while a handler is mid-response: the client gets
    GOAWAY(NO_ERROR, last 1) before EOF."""
    in_handler = trio.Event()

    async def handler(stream: H2Stream) -> None:
        await stream.send_headers([(b":status", b"200")])
        in_handler.set()
        await trio.sleep_forever()

    server_t, client_t = trio.testing.memory_stream_pair()
    peer = ScriptedPeer(client_t, client_side=True)
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            await nursery.start(functools.partial(serve_connection, server_t, handler))
            await peer.handshake()
            peer.h2.send_headers(1, REQUEST, end_stream=True)
            await peer.flush()
            await in_handler.wait()
            await peer.read_until(lambda: bool(peer.frames_of(HeadersFrame)))
            nursery.cancel_scope.cancel()
        await _read_to_eof(peer)
    assert _last(peer.frames) == [("GOAWAY", 1, 0)]


async def test_hard_close_is_bounded_when_the_peer_does_not_read(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A peer that never reads cannot hold a hard close: leaving the block with an
    exception returns (bounded by FINAL_WRITE_TIMEOUT) and raises the exception."""
    ours, theirs = clogged_pair()
    peer = ScriptedPeer(theirs, client_side=False)

    async def handshake_then_stop_reading() -> None:
        peer.h2.initiate_connection()
        await peer.flush()
        await peer.receive_until(lambda ev: isinstance(ev, h2.events.RemoteSettingsChanged))

    async def client() -> None:
        async with open_client_connection(ours) as conn:
            stream = await conn.open_stream(REQUEST).__aenter__()
            await stream.send_data(b"x" * 60_000)
            await trio.testing.wait_all_tasks_blocked()  # loopy is stuck in send_all
            raise ValueError("leave")

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(handshake_then_stop_reading)
            with pytest.raises(ValueError, match="leave"):
                await client()


async def test_graceful_close_out_of_time_ends_a_connection_whose_peer_stopped_reading(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A peer that stops reading (and never hangs up) cannot hold a server connection
    whose graceful close ran out of time: serve_connection returns, loopy's write is
    cut off and the handler's write quota comes back (found by the stateful machine)."""
    config = TransportConfig(write_quota=1)
    ours, theirs = clogged_pair()
    peer = ScriptedPeer(theirs, client_side=True)
    sent = trio.Event()
    streams: list[H2Stream] = []
    returned: list[str] = []

    async def handler(stream: H2Stream) -> None:
        streams.append(stream)
        await stream.send_headers([(b":status", b"200")])
        await stream.send_data(b"x" * 100_000, end_stream=True)  # more than the window
        sent.set()

    async def serve(task_status: trio.TaskStatus[ServerConnection]) -> None:
        await serve_connection(ours, handler, config=config, task_status=task_status)
        returned.append("serve_connection")

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            conn: ServerConnection = await nursery.start(serve)
            await peer.handshake()
            peer.h2.send_headers(1, REQUEST, end_stream=True)
            await peer.flush()
            await sent.wait()  # the peer reads no more: loopy blocks in send_all
            await conn.aclose(grace=0)
            await trio.testing.wait_all_tasks_blocked()
            assert returned == ["serve_connection"]
            assert h2t_tasks() == []
            assert streams[0]._write_quota == config.write_quota
            await peer.transport.aclose()
