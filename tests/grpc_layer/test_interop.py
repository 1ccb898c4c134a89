"""Interop with grpcio over 127.0.0.1, both ways.

grpcio runs in a subprocess (``grpcio_peer.py``): as a client against our server,
and as a server for our client. All four call types, message sizes up to the 4 MiB
limit and over it, text and binary metadata, status codes with special characters
and ``grpc-status-details-bin``, deadlines, cancellation from each side, gzip and
deflate requests and responses each way, 1000 concurrent calls on one connection
each way.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

import trio_h2t
from trio_h2t import grpc

from .echo import Echo

PEER = str(Path(__file__).with_name("grpcio_peer.py"))
LIMIT = 60
MIB4 = 4 * 1024 * 1024  # the default receive limit, ours and grpcio's


async def _run_grpcio_client(port: int, cases: list[str]) -> str:
    result = await trio.run_process(
        [sys.executable, PEER, "client", str(port), *cases],
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    out = result.stdout.decode()
    assert result.returncode == 0, out + result.stderr.decode()[-2000:]
    for case in cases:
        assert f"ok {case}" in out, out
    return out


@asynccontextmanager
async def _our_server() -> AsyncIterator[tuple[Echo, int]]:
    echo = Echo()
    async with trio_h2t.open_server(grpc.Server([echo]), 0, host="127.0.0.1") as server:
        yield echo, server.port


@pytest.mark.parametrize(
    "cases",
    [
        ["calls", "sizes"],
        ["metadata", "status", "unimplemented", "failure"],
        ["deadline", "compression", "deflate_response"],
    ],
    ids=lambda c: "+".join(c),
)
async def test_grpcio_client_against_our_server(cases: list[str]) -> None:
    """grpcio's client passes each case against trio_h2t.grpc's server."""
    with trio.fail_after(LIMIT):
        async with _our_server() as (echo, port):
            await _run_grpcio_client(port, cases)
            if "deadline" in cases:
                await echo.wait_for("sleep cancelled")  # the grpc-timeout cancelled it


async def test_grpcio_client_1000_concurrent_calls_on_one_connection() -> None:
    """grpcio's client makes 1000 concurrent unary calls on one channel to our server:
    all complete, in order, over one connection (one client address)."""
    with trio.fail_after(120):
        async with _our_server() as (echo, port):
            await _run_grpcio_client(port, ["concurrent"])
    assert len(echo.peers) == 1, echo.peers


async def test_grpcio_client_cancel_reaches_our_handler() -> None:
    """grpcio's call.cancel() (RST_STREAM CANCEL) cancels our server's handler task."""
    with trio.fail_after(LIMIT):
        async with _our_server() as (echo, port):
            await _run_grpcio_client(port, ["cancel"])
            await echo.wait_for("forever cancelled")
    reason = echo.cancel_reasons[0]
    assert isinstance(reason, trio_h2t.CancelReason)
    assert reason.kind == "peer-reset"
    assert reason.error_code == 8  # CANCEL


@asynccontextmanager
async def _grpcio_server() -> AsyncIterator[tuple[grpc.Channel, trio.Process]]:
    async with trio.open_nursery() as nursery:
        run = functools.partial(
            trio.run_process,
            [sys.executable, PEER, "server"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            check=False,
        )
        proc: trio.Process = await nursery.start(run)
        assert proc.stdout is not None
        line = await _read_line(proc.stdout)
        assert line.startswith("port "), line
        port = int(line.split()[1])
        try:
            async with grpc.open_channel("127.0.0.1", port) as channel:
                yield channel, proc
        finally:
            assert proc.stdin is not None
            await proc.stdin.aclose()


async def _read_line(stream: trio.abc.ReceiveStream) -> str:
    data = b""
    while not data.endswith(b"\n"):
        chunk = await stream.receive_some(1)
        if not chunk:
            break
        data += chunk
    return data.decode().strip()


async def test_our_client_four_call_types_against_grpcio() -> None:
    """Unary-unary, unary-stream, stream-unary and stream-stream against grpcio."""
    with trio.fail_after(LIMIT):
        async with _grpcio_server() as (ch, _):
            assert await ch.unary_unary("/test.Echo/Unary")(b"hello") == b"hello"
            assert await ch.unary_unary("/test.Echo/Unary")(b"") == b""
            async with ch.unary_stream("/test.Echo/Count")(b"3") as call:
                assert [m async for m in call] == [b"0", b"1", b"2"]
            assert call.code == grpc.StatusCode.OK
            assert await ch.stream_unary("/test.Echo/Concat")([b"a", b"b", b"c"]) == b"abc"
            async with ch.stream_stream("/test.Echo/Upper")([b"x", b"y"]) as call:
                assert [m async for m in call] == [b"X", b"Y"]
            async with ch.stream_stream("/test.Echo/Upper").open() as call:
                await call.send_message(b"ping")
                assert await call.receive_message() == b"PING"
                await call.done_writing()
                with pytest.raises(trio.EndOfChannel):
                    await call.receive_message()


async def test_our_client_message_sizes_against_grpcio() -> None:
    """0 B, 16 KiB and exactly 4 MiB echo; grpcio's real response of 4 MiB + 1 byte is
    over our default 4 MiB limit: RESOURCE_EXHAUSTED."""
    with trio.fail_after(LIMIT):
        async with _grpcio_server() as (ch, _):
            for size in (0, 16 * 1024, MIB4):
                body = bytes(range(256)) * (size // 256)
                assert await ch.unary_unary("/test.Echo/Unary")(body) == body
            big = ch.unary_unary("/test.Echo/Big")
            assert await big(str(MIB4).encode()) == b"x" * MIB4
            with pytest.raises(grpc.RpcError) as info:
                await big(str(MIB4 + 1).encode())
            assert info.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert await ch.unary_unary("/test.Echo/Unary")(b"after") == b"after"
            # grpcio's server refuses a request over its own 4 MiB limit.
            with pytest.raises(grpc.RpcError) as info:
                await ch.unary_unary("/test.Echo/Unary")(b"x" * (4 * 1024 * 1024 + 1))
            assert info.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED


async def test_our_client_metadata_and_status_against_grpcio() -> None:
    """Text and -bin metadata both ways; special-character details and details-bin."""
    with trio.fail_after(LIMIT):
        async with _grpcio_server() as (ch, _):
            md: list[tuple[str, str | bytes]] = [
                ("x-text", "hello world"),
                ("x-data-bin", b"\x00\x01\xfe\xff"),
            ]
            resp, call = await ch.unary_unary("/test.Echo/Meta").with_call(b"m", metadata=md)
            assert resp == b"m"
            assert [p for p in await call.initial_metadata() if p[0].startswith("x-")] == md
            assert call.trailing_metadata is not None
            assert [p for p in call.trailing_metadata if p[0].startswith("x-")] == md
            details = "caf\u00e9 100% \u2603\nline two \t end"
            spec = {"code": 9, "details": details, "details_bin": "0809120161"}
            with pytest.raises(grpc.RpcError) as info:
                await ch.unary_unary("/test.Echo/Status")(json.dumps(spec).encode())
            assert info.value.code == grpc.StatusCode.FAILED_PRECONDITION
            assert info.value.details == details
            assert info.value.status_details == bytes.fromhex("0809120161")
            for path in ("/test.Echo/NoSuchMethod", "/no.Such/Service"):
                with pytest.raises(grpc.RpcError) as info:
                    await ch.unary_unary(path)(b"")
                assert info.value.code == grpc.StatusCode.UNIMPLEMENTED


async def test_our_client_deadlines_against_grpcio() -> None:
    """A timeout, and a surrounding cancel scope's deadline, reach grpcio as grpc-timeout."""
    with trio.fail_after(LIMIT):
        async with _grpcio_server() as (ch, _):
            remaining = float(await ch.unary_unary("/test.Echo/Deadline")(b"", timeout=10))
            assert 0 < remaining <= 10
            with trio.move_on_after(20):
                remaining = float(await ch.unary_unary("/test.Echo/Deadline")(b""))
            assert 10 < remaining <= 20
            with pytest.raises(grpc.RpcError) as info:
                await ch.unary_unary("/test.Echo/Sleep")(b"30", timeout=0.3)
            assert info.value.code == grpc.StatusCode.DEADLINE_EXCEEDED


async def test_our_client_cancellation_reaches_grpcio() -> None:
    """Cancelling the calling task resets the stream; grpcio's handler sees the cancel."""
    with trio.fail_after(LIMIT):
        async with _grpcio_server() as (ch, proc):
            with trio.CancelScope() as scope:
                async with ch.unary_stream("/test.Echo/Forever")(b"") as call:
                    assert await call.receive_message() == b"tick"
                    scope.cancel()
                    await call.receive_message()
            assert scope.cancelled_caught
            assert proc.stdout is not None
            assert await _read_line(proc.stdout) == "cancelled /test.Echo/Forever"


async def test_our_client_compression_against_grpcio() -> None:
    """gzip and deflate requests (per channel and per call); grpcio's gzip and deflate
    responses."""
    with trio.fail_after(LIMIT):
        async with _grpcio_server() as (ch, _):
            body = b"compressible " * 2000
            for algo in ("gzip", "deflate"):
                gz = grpc.Channel(ch.connection, compression=algo)
                assert await gz.unary_unary("/test.Echo/Unary")(body) == body
                async with gz.stream_stream("/test.Echo/Upper")([body, b"b"]) as call:
                    assert [m async for m in call] == [body.upper(), b"B"]
                assert await ch.unary_unary("/test.Echo/Unary")(body, compression=algo) == body
            for method, algo in (("Compressed", "gzip"), ("Deflated", "deflate")):
                resp, call = await ch.unary_unary(f"/test.Echo/{method}").with_call(body)
                assert resp == body
                assert call.response_encoding == algo
                assert call.last_message_compressed is True


async def test_our_client_1000_concurrent_calls_against_grpcio() -> None:
    """1000 concurrent unary calls on one connection to grpcio all complete."""
    results: list[bytes] = []
    with trio.fail_after(120):
        async with _grpcio_server() as (ch, _):
            unary = ch.unary_unary("/test.Echo/Unary")

            async def one(i: int) -> None:
                results.append(await unary(str(i).encode()))

            async with trio.open_nursery() as nursery:
                for i in range(1000):
                    nursery.start_soon(one, i)
    assert sorted(results) == sorted(str(i).encode() for i in range(1000))
