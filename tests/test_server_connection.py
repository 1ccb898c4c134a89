"""``ServerConnection`` (what ``serve_connection`` reports through ``task_status``)
and ``ConnectionStatistics`` on both kinds of connection."""

from __future__ import annotations

import dataclasses
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio
import trio.testing
from _helpers_common import echo

import trio_h2t
from trio_h2t import (
    ClientConnection,
    ConnectionClosingError,
    ConnectionStatistics,
    GoAwayError,
    H2Stream,
    LoopyStatistics,
    ServerConnection,
    TransportConfig,
    open_client_connection,
    serve_connection,
)

LIMIT = 10


@asynccontextmanager
async def memory_pair(
    handler: trio_h2t.Handler = echo,
    *,
    server_config: TransportConfig | None = None,
    client_config: TransportConfig | None = None,
) -> AsyncIterator[tuple[ClientConnection, ServerConnection, trio.Event]]:
    """A client and ``serve_connection`` over a memory stream pair; the event is set
    when ``serve_connection`` returns."""
    client_t, server_t = trio.testing.memory_stream_pair()
    returned = trio.Event()

    async def run(task_status: trio.TaskStatus[ServerConnection]) -> None:
        await serve_connection(server_t, handler, config=server_config, task_status=task_status)
        returned.set()

    async with trio.open_nursery() as nursery:
        server: ServerConnection = await nursery.start(run)
        async with open_client_connection(client_t, config=client_config) as conn:
            yield conn, server, returned


async def test_serve_connection_reports_a_public_server_connection() -> None:
    """task_status gives a ServerConnection (no public constructor), not the runtime
    object; over memory streams it has no addresses and no TLS."""
    with trio.fail_after(LIMIT):
        async with memory_pair() as (conn, server, _):
            assert type(server) is ServerConnection
            assert not hasattr(server, "loopy")
            assert not hasattr(server, "h2")
            assert (server.peer, server.local, server.tls) == (None, None, None)
            assert server.error is None
            assert server.open_streams == 0
            assert (await conn.request("GET", "/")).status == 200
    with pytest.raises(TypeError):
        ServerConnection()  # type: ignore[call-arg]


async def test_server_connection_over_tcp_and_tls_knows_addresses_and_alpn(
    server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext
) -> None:
    """Over TLS on TCP, the ServerConnection has the client's and its own (host, port)
    and the negotiated ALPN protocol."""
    server_ctx.set_alpn_protocols(["h2"])
    got: list[ServerConnection] = []
    ready = trio.Event()
    with trio.fail_after(LIMIT):
        (listener,) = await trio.open_tcp_listeners(0, host="127.0.0.1")
        port = listener.socket.getsockname()[1]

        async def serve_one() -> None:
            tcp = await listener.accept()
            tls = trio.SSLStream(tcp, server_ctx, server_side=True, https_compatible=True)
            async with trio.open_nursery() as nursery:
                got.append(await nursery.start(serve_connection, tls, echo))
                ready.set()

        async with listener, trio.open_nursery() as nursery:
            nursery.start_soon(serve_one)
            async with trio_h2t.open_connection("127.0.0.1", port, ssl_context=client_ctx) as conn:
                assert (await conn.request("GET", "/")).status == 200
                await ready.wait()
                server = got[0]
                assert server.local == ("127.0.0.1", port)
                assert server.peer is not None
                assert server.peer[0] == "127.0.0.1"
                assert server.tls is not None
                assert server.tls.alpn_protocol == "h2"
                await server.aclose()


async def test_aclose_drains_then_serve_connection_returns() -> None:
    """aclose sends GOAWAY, lets the request in progress finish, then ends the
    connection: serve_connection returns and new streams get a retryable GoAwayError."""
    started = trio.Event()
    release = trio.Event()

    async def slow(stream: H2Stream) -> None:
        started.set()
        await release.wait()
        await echo(stream)

    with trio.fail_after(LIMIT):
        async with memory_pair(slow) as (conn, server, returned), trio.open_nursery() as nursery:
            responses: list[trio_h2t.Response] = []

            async def ask() -> None:
                responses.append(await conn.request("POST", "/", body=b"in flight"))

            nursery.start_soon(ask)
            await started.wait()
            async with trio.open_nursery() as closer:
                closer.start_soon(server.aclose)
                await trio.testing.wait_all_tasks_blocked()
                with pytest.raises(GoAwayError) as info:
                    await conn.request("GET", "/late")
                assert info.value.retryable
                release.set()
            await returned.wait()
            assert responses[0].body == b"in flight"
            assert isinstance(server.error, ConnectionClosingError)


async def test_aclose_grace_runs_out_and_handlers_are_cancelled_with_shutdown() -> None:
    """A handler still running when ``grace`` runs out is cancelled with
    cancel_reason "shutdown", and serve_connection returns."""
    reasons: list[trio_h2t.CancelReason | None] = []
    started = trio.Event()

    async def forever(stream: H2Stream) -> None:
        started.set()
        try:
            await trio.sleep_forever()
        finally:
            reasons.append(stream.cancel_reason)

    with trio.fail_after(LIMIT):
        async with memory_pair(forever) as (conn, server, returned):
            async with trio.open_nursery() as nursery:

                async def ask() -> None:
                    with pytest.raises(trio.BrokenResourceError):
                        await conn.request("GET", "/")

                nursery.start_soon(ask)
                await started.wait()
                await server.aclose(grace=0.05)
            await returned.wait()
    assert [r.kind if r else None for r in reasons] == ["shutdown"]


async def test_cancelled_aclose_still_closes_the_connection() -> None:
    """aclose cancelled at once still ends the connection (handlers cancelled,
    serve_connection returns); it checkpoints."""
    started = trio.Event()

    async def forever(stream: H2Stream) -> None:
        started.set()
        await trio.sleep_forever()

    with trio.fail_after(LIMIT):
        async with memory_pair(forever) as (conn, server, returned):
            async with trio.open_nursery() as nursery:

                async def ask() -> None:
                    with pytest.raises(trio.BrokenResourceError):
                        await conn.request("GET", "/")

                nursery.start_soon(ask)
                await started.wait()
                with trio.CancelScope() as scope:
                    scope.cancel()
                    with trio.testing.assert_checkpoints():
                        await server.aclose()
            await returned.wait()
            assert server.error is not None


async def test_statistics_agree_across_the_link() -> None:
    """After three requests on a quiet link, each side's statistics count the same
    streams, and what one side sent is what the other received, windows included."""
    config = TransportConfig(initial_window_size=100_000, dynamic_window=False)
    with trio.fail_after(LIMIT):
        async with memory_pair(server_config=config, client_config=config) as (conn, server, _):
            for i in range(3):
                response = await conn.request("POST", "/", body=b"x" * (30_000 * i))
                assert len(response.body) == 30_000 * i
            await trio.testing.wait_all_tasks_blocked()
            with trio.testing.assert_no_checkpoints():
                c = conn.statistics()
                s = server.statistics()
    for stats in (c, s):
        assert type(stats) is ConnectionStatistics
        assert type(stats.loopy) is LoopyStatistics
        assert stats.streams_opened == 3
        assert stats.streams_open == 0
        assert stats.loopy.batches >= 1
        assert stats.loopy.send_alls >= 1
        assert stats.loopy.frames_per_write > 0
        assert stats.stream_send_window == stats.stream_receive_window == 100_000
    assert c.bytes_sent == s.bytes_received > 90_000
    assert s.bytes_sent == c.bytes_received > 90_000
    # Preface (SETTINGS, WINDOW_UPDATE), 3 HEADERS, and at least the DATA frames.
    assert c.frames_sent >= 2 + 3 + 2
    assert s.frames_received >= 2 + 3 + 2
    assert c.loopy.data_frames >= 2
    assert c.send_window == s.receive_window
    assert s.send_window == c.receive_window
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.streams_open = 1  # type: ignore[misc]
