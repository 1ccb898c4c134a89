"""Server connection faults: the handshake timeout, and unexpected transport exceptions
confined to their own connection."""

from __future__ import annotations

import functools

import pytest
import trio
import trio.testing
from helpers import ScriptedPeer, h2t_tasks

from trio_h2t import TransportConfig, serve_connection


async def noop_handler(stream: object) -> None:
    """A handler that is never expected to run."""


async def test_server_closes_a_client_that_never_handshakes(autojump_clock: object) -> None:
    """serve_connection returns (the client sees EOF) after handshake_timeout of silence."""
    client_t, server_t = trio.testing.memory_stream_pair()
    config = TransportConfig(handshake_timeout=3)
    start = trio.current_time()
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                functools.partial(serve_connection, server_t, noop_handler, config=config)
            )
            peer = ScriptedPeer(client_t, client_side=True)
            while not peer.eof:
                await peer.receive()  # the server's SETTINGS, then EOF
    assert trio.current_time() - start == pytest.approx(3)
    assert h2t_tasks() == []


async def test_server_keeps_an_idle_client_that_handshook(autojump_clock: object) -> None:
    """A client that completed the handshake may stay idle longer than handshake_timeout."""
    client_t, server_t = trio.testing.memory_stream_pair()
    config = TransportConfig(handshake_timeout=3)
    async with trio.open_nursery() as nursery:
        core = await nursery.start(
            functools.partial(serve_connection, server_t, noop_handler, config=config)
        )
        peer = ScriptedPeer(client_t, client_side=True)
        await peer.handshake()
        await trio.sleep(30)
        assert core.error is None
        assert "h2-handshake-timeout" not in [t.name for t in h2t_tasks()]
        await client_t.aclose()
    assert core.error is not None
    assert "handshake" not in str(core.error)
