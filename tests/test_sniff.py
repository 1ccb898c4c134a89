"""An HTTP/1.x request on our h2c (prior-knowledge) port gets a short HTTP/1.1 505
saying so, then a close (``_sniff.py``); HTTP/2 and anything else go on to h2; a
silent or slow client is bounded by the handshake deadline."""

from __future__ import annotations

import functools

import pytest
import trio
import trio.testing

from trio_h2t import (
    H2Stream,
    TransportConfig,
    open_connection,
    open_server,
    serve_connection,
    serve_tcp,
)
from trio_h2t._sniff import HTTP1_RESPONSE, MAX_REQUEST_LINE, PREFACE, sniff_preface


async def _read_to_eof(stream: trio.abc.ReceiveStream) -> bytes:
    parts = []
    while chunk := await stream.receive_some(65536):
        parts.append(chunk)
    return b"".join(parts)


@pytest.mark.parametrize(
    "first",
    [PREFACE + b"\x00\x00\x00\x04\x00", PREFACE, b"INVALID CONNECTION PREFACE\r\n\r\n"],
    ids=["preface-and-more", "preface", "h2spec-invalid-preface"],
)
async def test_http2_or_other_bytes_are_handed_back_at_once(first: bytes) -> None:
    """The whole preface, or bytes that are no request line: returned as read, for h2
    to answer (no waiting for more)."""
    ours, theirs = trio.testing.memory_stream_pair()
    with trio.fail_after(5):
        await theirs.send_all(first)
        got = await sniff_preface(ours, trio.current_time() + 60)
    assert got == first


async def test_long_line_without_newline_is_not_http1() -> None:
    """A "request line" past MAX_REQUEST_LINE without LF is handed on, not waited for."""
    ours, theirs = trio.testing.memory_stream_pair()
    first = b"GET /" + b"a" * MAX_REQUEST_LINE
    with trio.fail_after(5):
        await theirs.send_all(first)
        assert await sniff_preface(ours, trio.current_time() + 60) == first


@pytest.mark.parametrize(
    "request_line",
    [b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", b"POST /upload HTTP/1.0\n\n", b"OPTIONS * HTTP/1.1\r\n"],
)
async def test_http1_request_gets_505_then_close(request_line: bytes) -> None:
    """An HTTP/1.x request line, even split in tiny pieces, is answered with the 505
    and the server's side ends; the client's close ends the drain."""
    ours, theirs = trio.testing.memory_stream_pair()
    got: list[bytes | None] = []

    async def server() -> None:
        got.append(await sniff_preface(ours, trio.current_time() + 60))

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(server)
            for i in range(len(request_line)):
                await theirs.send_all(request_line[i : i + 1])
                await trio.testing.wait_all_tasks_blocked()
            answer = await _read_to_eof(theirs)
            await theirs.aclose()
    assert got == [None]
    assert answer == HTTP1_RESPONSE
    assert answer.startswith(b"HTTP/1.1 505 HTTP Version Not Supported\r\n")
    assert b"prior knowledge" in answer


async def test_slow_partial_request_line_is_answered_at_the_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A request line that never completes: at the deadline the client gets the 505 and
    the end of the stream, without hanging."""
    ours, theirs = trio.testing.memory_stream_pair()
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            start = trio.current_time()
            nursery.start_soon(sniff_preface, ours, start + 10)
            await theirs.send_all(b"GET /slow HT")
            answer = await _read_to_eof(theirs)
            ended = trio.current_time()
    assert answer == HTTP1_RESPONSE
    assert 10 <= ended - start <= 12


async def test_preface_in_pieces_is_read_whole() -> None:
    """A preface sent byte by byte ("P", "PR", ... could still be "POST") is read to
    its end before it is handed back."""
    ours, theirs = trio.testing.memory_stream_pair()
    got: list[bytes | None] = []

    async def server() -> None:
        got.append(await sniff_preface(ours, trio.current_time() + 60))

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(server)
            for i in range(len(PREFACE)):
                assert not got
                await theirs.send_all(PREFACE[i : i + 1])
                await trio.testing.wait_all_tasks_blocked()
    assert got == [PREFACE]


async def test_silent_client_is_handed_back_empty_at_the_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Nothing before the deadline: b"" comes back then (the caller closes)."""
    ours, _theirs = trio.testing.memory_stream_pair()
    with trio.fail_after(60):
        start = trio.current_time()
        assert await sniff_preface(ours, start + 10) == b""
    assert trio.current_time() - start == pytest.approx(10)


# ------------------------------------------------------------------ a real server


async def _tcp_exchange(port: int, *pieces: bytes) -> bytes:
    """Send ``pieces`` over a fresh TCP connection (one write each), read to EOF."""
    sock = await trio.open_tcp_stream("127.0.0.1", port)
    async with sock:
        for piece in pieces:
            await sock.send_all(piece)
        return await _read_to_eof(sock)


async def test_raw_http11_request_to_serve_tcp_gets_505_and_http2_still_works() -> None:
    """Over TCP: an HTTP/1.1 request gets the 505 and EOF; an HTTP/2 client on the same
    server is served as before."""

    async def handler(stream: H2Stream) -> None:
        await stream.send_headers([(b":status", b"200")], end_stream=True)

    with trio.fail_after(10):
        async with open_server(handler, 0, host="127.0.0.1") as server:
            answer = await _tcp_exchange(
                server.port, b"GET / HTTP/1.1\r\nHost: localhost\r\nUser-Agent: raw\r\n\r\n"
            )
            async with open_connection("127.0.0.1", server.port) as conn:
                response = await conn.request("GET", "/")
    assert answer == HTTP1_RESPONSE
    assert response.status == 200


async def test_slow_partial_http11_line_over_tcp_is_bounded_by_handshake_timeout() -> None:
    """A client that sends half a request line and waits: the server answers the 505 and
    closes once handshake_timeout (1 s here) runs out; nothing hangs."""

    async def handler(stream: H2Stream) -> None:
        raise AssertionError("no HTTP/2 stream can start")

    config = TransportConfig(handshake_timeout=1)
    with trio.fail_after(10):
        async with open_server(handler, 0, host="127.0.0.1", config=config) as server:
            answer = await _tcp_exchange(server.port, b"GET /slow HT")
    assert answer == HTTP1_RESPONSE


async def test_serve_connection_sends_nothing_of_http2_to_an_http1_client() -> None:
    """serve_connection over a memory stream: the client reads exactly the 505 (no
    SETTINGS frame before it) and serve_connection returns."""
    ours, theirs = trio.testing.memory_stream_pair()

    async def handler(stream: H2Stream) -> None:
        raise AssertionError("no HTTP/2 stream can start")

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve_connection, ours, handler)
            await theirs.send_all(b"HEAD / HTTP/1.1\r\nHost: x\r\n\r\n")
            answer = await _read_to_eof(theirs)
            await theirs.aclose()
    assert answer == HTTP1_RESPONSE


async def test_server_aclose_does_not_wait_for_a_silent_connection() -> None:
    """H2Server.aclose with a connected client that sent nothing yet: that connection is
    not drained (it has no HTTP/2 state), it is closed, and aclose returns well before
    the 60 s grace period."""

    async def handler(stream: H2Stream) -> None:
        raise AssertionError("no stream")

    config = TransportConfig(graceful_close_timeout=60)
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            server = await nursery.start(
                functools.partial(serve_tcp, handler, 0, host="127.0.0.1", config=config)
            )
            sock = await trio.open_tcp_stream("127.0.0.1", server.port)
            await trio.testing.wait_all_tasks_blocked()  # accepted, sniffing
            await server.aclose()
            assert await _read_to_eof(sock) == b""
            await sock.aclose()
