"""How a connection ends on the wire (docs/cancellation.md, "How a connection ends"):
a hard close or a cancellation still sends GOAWAY, bounded in time."""

from __future__ import annotations

import functools

import h2.events
import pytest
import trio
import trio.testing
from helpers import REQUEST, ScriptedPeer, clogged_pair, open_peer_server
from hyperframe.frame import Frame, GoAwayFrame, HeadersFrame, RstStreamFrame

from trio_h2t import H2Stream, open_client_connection, serve_connection


def _last(frames: list[Frame]) -> list[tuple[str, int, int]]:
    """GOAWAY and RST_STREAM frames as (kind, stream or last id, code)."""
    out = []
    for f in frames:
        if isinstance(f, GoAwayFrame):
            out.append(("GOAWAY", f.last_stream_id, f.error_code))
        elif isinstance(f, RstStreamFrame):
            out.append(("RST_STREAM", f.stream_id, f.error_code))
    return out


async def _read_to_eof(peer: ScriptedPeer) -> None:
    while not peer.eof:
        try:
            await peer.receive()
        except trio.BrokenResourceError:
            return


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
