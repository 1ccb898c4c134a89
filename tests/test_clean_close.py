"""A client that closes gracefully ends with a FIN, never a RST (``_linger.py``).

A raw-socket server (h2's state machine over a plain trio socket on 127.0.0.1, so
every byte and the socket's ending are visible) answers the client's GOAWAY with its
own, and then reads the client's side to its end: an orderly EOF (``recv`` returns
``b""``), not ECONNRESET, which is what the kernel gives when a socket is closed with
bytes (that GOAWAY) still unread.
"""

from __future__ import annotations

import errno
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import h2.config
import h2.connection
import h2.events
import trio

import trio_h2t
import trio_h2t.grpc
from trio_h2t._linger import LINGER

#: Seconds any one step of a test may take.
TIMEOUT = 5.0

RESPONSE = [(b":status", b"200"), (b"content-type", b"application/grpc")]


class RawServer:
    """One accepted connection, played by h2 over a raw socket; what it saw."""

    def __init__(self, *, answer_goaway: bool, hang_up: bool) -> None:
        self.answer_goaway = answer_goaway  # immutable after init
        self.hang_up = hang_up  # immutable after init
        self.ending: str | None = None  # owner: serve: "eof", "reset" or None (none yet)
        self.goaway_seen = trio.Event()  # owner: serve
        self.release = trio.Event()  # owner: the test: lets a server that never hangs up go

    async def serve(self, sock: trio.socket.SocketType) -> None:
        """Answer every request (200, an empty gRPC message, grpc-status 0), answer the
        client's GOAWAY (if asked) and read to the end of the client's side."""
        conn = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=False, header_encoding=None)
        )
        conn.initiate_connection()
        await sock.send(conn.data_to_send())
        while True:
            try:
                data = await sock.recv(65536)
            except ConnectionResetError:
                self.ending = "reset"
                break
            except OSError as exc:
                self.ending = errno.errorcode.get(exc.errno or 0, repr(exc))
                break
            if not data:
                self.ending = "eof"
                break
            for event in conn.receive_data(data):
                if isinstance(event, h2.events.RequestReceived):
                    sid = event.stream_id
                    conn.send_headers(sid, RESPONSE)
                    conn.send_data(sid, b"\x00\x00\x00\x00\x00")
                    conn.send_headers(sid, [(b"grpc-status", b"0")], end_stream=True)
                elif isinstance(event, h2.events.ConnectionTerminated):
                    self.goaway_seen.set()
                    if self.answer_goaway:
                        conn.close_connection()
            out = conn.data_to_send()
            if out:
                await sock.send(out)
        if not self.hang_up:
            await self.release.wait()


@asynccontextmanager
async def raw_server(
    *, answer_goaway: bool = True, hang_up: bool = True
) -> AsyncIterator[tuple[RawServer, int]]:
    """A RawServer listening on 127.0.0.1 (one connection), and its port."""
    server = RawServer(answer_goaway=answer_goaway, hang_up=hang_up)
    listener = trio.socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    with listener:
        await listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]

        async def accept_one() -> None:
            sock, _ = await listener.accept()
            with sock:
                await server.serve(sock)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(accept_one)
            yield server, port
            server.release.set()


async def timed(close: Callable[[], Awaitable[None]]) -> float:
    """Seconds ``close`` took."""
    start = trio.current_time()
    await close()
    return trio.current_time() - start


async def test_client_close_with_the_servers_goaway_in_flight_ends_in_eof() -> None:
    """A client's graceful close reads the server's answering GOAWAY: the server sees EOF."""
    with trio.fail_after(TIMEOUT):
        async with (
            raw_server() as (server, port),
            trio_h2t.open_connection("127.0.0.1", port) as conn,
        ):
            response = await conn.request("GET", "/")
            assert response.status == 200
        assert server.goaway_seen.is_set()
        assert server.ending == "eof"


async def test_client_aclose_ends_in_eof() -> None:
    """``ClientConnection.aclose`` closes as cleanly as leaving the block: the server sees EOF."""
    with trio.fail_after(TIMEOUT):
        async with (
            raw_server() as (server, port),
            trio_h2t.open_connection("127.0.0.1", port) as conn,
        ):
            await conn.request("GET", "/")
            elapsed = await timed(conn.aclose)
        assert server.ending == "eof"
        assert elapsed < LINGER / 2  # the server hung up at once: no lingering


async def test_grpc_channel_close_ends_in_eof() -> None:
    """A gRPC channel's close (after a call) reaches the server as an orderly EOF, no RST."""
    with trio.fail_after(TIMEOUT):
        async with (
            raw_server() as (server, port),
            trio_h2t.grpc.open_channel("127.0.0.1", port) as channel,
        ):
            reply = await channel.unary_unary("/test.Svc/Call")(b"")
            assert reply == b""
        assert server.goaway_seen.is_set()
        assert server.ending == "eof"


async def test_close_is_bounded_when_the_peer_never_answers_nor_hangs_up() -> None:
    """A peer that neither answers GOAWAY nor closes: the client's close returns within LINGER."""
    with trio.fail_after(TIMEOUT):
        async with raw_server(answer_goaway=False, hang_up=False) as (server, port):
            async with trio_h2t.open_connection("127.0.0.1", port) as conn:
                await conn.request("GET", "/")
                start = trio.current_time()
            elapsed = trio.current_time() - start
            assert server.ending == "eof"  # our half-close reached it
        assert LINGER <= elapsed < LINGER + 1


async def test_cancelled_close_does_not_linger() -> None:
    """A close cancelled while it waits for the peer's EOF closes at once (aclose's contract)."""
    with trio.fail_after(TIMEOUT):
        async with raw_server(answer_goaway=False, hang_up=False) as (_server, port):
            with trio.CancelScope() as scope:
                async with trio_h2t.open_connection("127.0.0.1", port) as conn:
                    await conn.request("GET", "/")
                    start = trio.current_time()
                    scope.deadline = start + 0.1
            elapsed = trio.current_time() - start
            assert scope.cancelled_caught
        assert elapsed < LINGER / 2


async def test_open_server_and_client_close_without_lingering() -> None:
    """Through open_server and open_connection, closes are quick: each side sees the other's EOF."""

    async def handler(stream: trio_h2t.H2Stream) -> None:
        await stream.send_headers([(":status", "200")], end_stream=True)

    with trio.fail_after(TIMEOUT):
        async with trio_h2t.open_server(handler, 0, host="127.0.0.1") as server:
            for _ in range(5):
                async with trio_h2t.open_connection("127.0.0.1", server.port) as conn:
                    await conn.request("GET", "/")
                    start = trio.current_time()
                assert trio.current_time() - start < LINGER / 2
