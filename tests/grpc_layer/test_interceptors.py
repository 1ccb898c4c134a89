"""Server and client interceptors (``_interceptors.py``) against real servers on
127.0.0.1: the four call kinds, their order, metadata both ways, refusing and
ending calls with a status, interceptors that raise, and interop with grpcio."""

from __future__ import annotations

import functools
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

import trio_h2t
from trio_h2t import grpc

from .echo import Echo
from .test_interop import PEER, _read_line, _run_grpcio_client

LIMIT = 20
Proceed = Callable[[], Awaitable[None]]


@asynccontextmanager
async def serving(
    server_interceptors: list[grpc.ServerInterceptor] | None = None,
    **channel_options: Any,
) -> AsyncIterator[tuple[grpc.Channel, Echo]]:
    """Echo served on 127.0.0.1 with ``server_interceptors``, and a channel to it."""
    echo = Echo()
    server = grpc.Server([echo], interceptors=server_interceptors or [])
    async with (
        trio_h2t.open_server(server, 0, host="127.0.0.1") as h2server,
        grpc.open_channel("127.0.0.1", h2server.port, **channel_options) as channel,
    ):
        yield channel, echo


async def four_calls(channel: grpc.Channel) -> list[Any]:
    """One call of each kind on ``test.Echo``; their results."""
    unary = await channel.unary_unary("/test.Echo/Unary")(b"u")
    async with channel.unary_stream("/test.Echo/Count")(b"2") as call:
        counted = [m async for m in call]
    concat = await channel.stream_unary("/test.Echo/Concat")([b"a", b"b"])
    async with channel.stream_stream("/test.Echo/Upper")([b"x", b"y"]) as call:
        upper = [m async for m in call]
    return [unary, counted, concat, upper]


EXPECTED = [b"u", [b"0", b"1"], b"ab", [b"X", b"Y"]]
KINDS = [
    ("/test.Echo/Unary", grpc.MethodKind.UNARY_UNARY),
    ("/test.Echo/Count", grpc.MethodKind.UNARY_STREAM),
    ("/test.Echo/Concat", grpc.MethodKind.STREAM_UNARY),
    ("/test.Echo/Upper", grpc.MethodKind.STREAM_STREAM),
]


# ---------------------------------------------------------------------- server


def recording_server(name: str, log: list[Any]) -> grpc.ServerInterceptor:
    async def interceptor(details: grpc.ServerCallDetails, proceed: Proceed) -> None:
        log.append((name, "in", details.method, details.kind))
        try:
            await proceed()
        except grpc.RpcError as exc:
            log.append((name, "error", exc.code))
            raise
        log.append((name, "out", details.method))

    return interceptor


async def test_server_interceptor_wraps_all_four_kinds() -> None:
    """A server interceptor runs around the handler of each of the four kinds."""
    log: list[Any] = []
    with trio.fail_after(LIMIT):
        async with serving([recording_server("a", log)]) as (channel, _):
            assert await four_calls(channel) == EXPECTED
    assert [(m, k) for _, what, m, *k in log if what == "in"] == [(m, [k]) for m, k in KINDS]
    assert [m for _, what, m, *_ in log if what == "out"] == [m for m, _ in KINDS]


async def test_server_interceptors_first_is_outermost() -> None:
    """With [a, b], a enters first and leaves last."""
    log: list[Any] = []
    interceptors = [recording_server("a", log), recording_server("b", log)]
    with trio.fail_after(LIMIT):
        async with serving(interceptors) as (channel, _):
            await channel.unary_unary("/test.Echo/Unary")(b"u")
    assert [(n, w) for n, w, *_ in log] == [("a", "in"), ("b", "in"), ("b", "out"), ("a", "out")]


async def test_server_interceptor_refuses_unauthenticated() -> None:
    """An interceptor aborting with UNAUTHENTICATED ends the call; the handler never runs."""
    ran: list[str] = []

    async def auth(details: grpc.ServerCallDetails, proceed: Proceed) -> None:
        if details.invocation_metadata.get("authorization") != "Bearer good":
            details.context.abort(grpc.StatusCode.UNAUTHENTICATED, "bad token")
        await proceed()

    async def handler(request: bytes, context: grpc.ServicerContext) -> bytes:
        ran.append("handler")
        return request

    server = grpc.Server([{"/t.S/M": grpc.unary_unary_handler(handler)}], interceptors=[auth])
    with trio.fail_after(LIMIT):
        async with (
            trio_h2t.open_server(server, 0, host="127.0.0.1") as h2server,
            grpc.open_channel("127.0.0.1", h2server.port) as channel,
        ):
            method = channel.unary_unary("/t.S/M")
            with pytest.raises(grpc.RpcError) as info:
                await method(b"x", metadata=[("authorization", "Bearer bad")])
            assert info.value.code == grpc.StatusCode.UNAUTHENTICATED
            assert info.value.details == "bad token"
            assert ran == []
            assert await method(b"x", metadata=[("authorization", "Bearer good")]) == b"x"
            assert ran == ["handler"]


async def test_server_interceptor_reads_and_adds_metadata() -> None:
    """An interceptor sees the client's metadata and adds initial and trailing metadata."""
    seen: list[str | bytes | None] = []

    async def tag(details: grpc.ServerCallDetails, proceed: Proceed) -> None:
        seen.append(details.invocation_metadata.get("x-client"))
        assert details.peer.startswith("ipv4:127.0.0.1:")
        details.context.add_initial_metadata([("x-server-head", "h")])
        await proceed()
        details.context.add_trailing_metadata([("x-server-tail", "t")])

    with trio.fail_after(LIMIT):
        async with serving([tag]) as (channel, _):
            method = channel.unary_unary("/test.Echo/Unary")
            _, call = await method.with_call(b"u", metadata=[("x-client", "c")])
            assert (await call.initial_metadata()).get("x-server-head") == "h"
            assert call.trailing_metadata is not None
            assert call.trailing_metadata.get("x-server-tail") == "t"
            async with channel.unary_stream("/test.Echo/Count")(b"1") as stream_call:
                assert [m async for m in stream_call] == [b"0"]
                assert (await stream_call.initial_metadata()).get("x-server-head") == "h"
            assert stream_call.trailing_metadata is not None
            assert stream_call.trailing_metadata.get("x-server-tail") == "t"
    assert seen == ["c", None]


async def test_server_interceptor_raising_ends_call_with_unknown() -> None:
    """An interceptor raising a plain exception ends the call with UNKNOWN (handler not run)."""

    async def broken(details: grpc.ServerCallDetails, proceed: Proceed) -> None:
        raise ValueError("interceptor bug")

    with trio.fail_after(LIMIT):
        async with serving([broken]) as (channel, _):
            with pytest.raises(grpc.RpcError) as info:
                await channel.unary_unary("/test.Echo/Unary")(b"u")
    assert info.value.code == grpc.StatusCode.UNKNOWN


async def test_server_interceptor_sees_handler_status() -> None:
    """A handler's RpcError comes out of proceed(), and the call keeps its status."""
    log: list[Any] = []
    with trio.fail_after(LIMIT):
        async with serving([recording_server("a", log)]) as (channel, _):
            with pytest.raises(grpc.RpcError) as info:
                await channel.unary_unary("/test.Echo/Status")(b'{"code": 5, "details": "nope"}')
    assert info.value.code == grpc.StatusCode.NOT_FOUND
    assert log[-1] == ("a", "error", grpc.StatusCode.NOT_FOUND)


def test_server_interceptor_must_be_callable() -> None:
    """A non-callable server interceptor is a TypeError at Server(...)."""
    with pytest.raises(TypeError, match="async def interceptor"):
        grpc.Server([], interceptors=[object()])  # type: ignore[list-item]


# ---------------------------------------------------------------------- client


def recording_client(name: str, log: list[Any]) -> grpc.ClientInterceptor:
    @asynccontextmanager
    async def interceptor(details: grpc.ClientCallDetails) -> AsyncIterator[None]:
        log.append((name, "in", details.method, details.kind))
        try:
            yield
        except grpc.RpcError as exc:
            log.append((name, "error", exc.code))
            raise
        log.append((name, "out", details.method))

    return interceptor


async def test_client_interceptor_wraps_all_four_kinds() -> None:
    """A client interceptor's block covers each of the four kinds of call."""
    log: list[Any] = []
    with trio.fail_after(LIMIT):
        async with serving(interceptors=[recording_client("a", log)]) as (channel, _):
            assert await four_calls(channel) == EXPECTED
            async with channel.unary_stream("/test.Echo/Count").open() as call:
                await call.send_message(b"1")
                await call.done_writing()
                assert [m async for m in call] == [b"0"]
    assert [(m, k) for _, what, m, *k in log if what == "in"] == [
        *[(m, [k]) for m, k in KINDS],
        ("/test.Echo/Count", [grpc.MethodKind.UNARY_STREAM]),
    ]
    assert len([w for _, w, *_ in log if w == "out"]) == 5


async def test_client_interceptors_order_and_metadata() -> None:
    """With [a, b], a enters first; metadata they add reaches the server, in order."""
    log: list[Any] = []

    def adding(name: str) -> grpc.ClientInterceptor:
        @asynccontextmanager
        async def interceptor(details: grpc.ClientCallDetails) -> AsyncIterator[None]:
            log.append((name, "in", list(details.metadata)))
            details.metadata.append(("x-order", name))
            yield
            log.append((name, "out"))

        return interceptor

    with trio.fail_after(LIMIT):
        async with serving(interceptors=[adding("a"), adding("b")]) as (channel, _):
            _, call = await channel.unary_unary("/test.Echo/Meta").with_call(
                b"m", metadata=[("x-user", "u")]
            )
    assert call.trailing_metadata is not None
    assert call.trailing_metadata.get_all("x-order") == ["a", "b"]
    assert call.trailing_metadata.get("x-user") == "u"
    assert log == [
        ("a", "in", [("x-user", "u")]),
        ("b", "in", [("x-user", "u"), ("x-order", "a")]),
        ("b", "out"),
        ("a", "out"),
    ]


async def test_client_interceptor_ends_call_before_sending() -> None:
    """A client interceptor raising RpcError ends the call; the server sees no call."""
    server_log: list[Any] = []

    @asynccontextmanager
    async def refuse(details: grpc.ClientCallDetails) -> AsyncIterator[None]:
        raise grpc.RpcError(grpc.StatusCode.PERMISSION_DENIED, "not from here")
        yield  # pragma: no cover

    with trio.fail_after(LIMIT):
        async with serving([recording_server("s", server_log)], interceptors=[refuse]) as (
            channel,
            _,
        ):
            with pytest.raises(grpc.RpcError) as info:
                await channel.unary_unary("/test.Echo/Unary")(b"u")
            assert info.value.code == grpc.StatusCode.PERMISSION_DENIED
            with pytest.raises(grpc.RpcError):
                async with channel.stream_stream("/test.Echo/Upper")([b"x"]) as call:
                    raise AssertionError(f"the block ran: {call}")  # pragma: no cover
            assert channel.connection.statistics().streams_opened == 0
    assert server_log == []


async def test_client_interceptor_raising_propagates() -> None:
    """A plain exception from a client interceptor reaches the caller unchanged."""

    @asynccontextmanager
    async def broken(details: grpc.ClientCallDetails) -> AsyncIterator[None]:
        raise KeyError("interceptor bug")
        yield  # pragma: no cover

    with trio.fail_after(LIMIT):
        async with serving(interceptors=[broken]) as (channel, _):
            with pytest.raises(KeyError):
                await channel.unary_unary("/test.Echo/Unary")(b"u")


async def test_client_interceptor_sees_status_and_sets_timeout() -> None:
    """An interceptor's timeout applies to the call, and its DEADLINE_EXCEEDED comes
    out of the interceptor's yield."""
    log: list[Any] = []

    @asynccontextmanager
    async def short(details: grpc.ClientCallDetails) -> AsyncIterator[None]:
        details.timeout = 0.2
        yield

    with trio.fail_after(LIMIT):
        async with serving(interceptors=[recording_client("a", log), short]) as (channel, echo):
            with pytest.raises(grpc.RpcError) as info:
                await channel.unary_unary("/test.Echo/Sleep")(b"10")
            assert info.value.code == grpc.StatusCode.DEADLINE_EXCEEDED
            await echo.wait_for("sleep cancelled")
    assert log[-1] == ("a", "error", grpc.StatusCode.DEADLINE_EXCEEDED)


def test_client_interceptor_must_be_callable() -> None:
    """A non-callable client interceptor is a TypeError at open_channel(...)."""
    with pytest.raises(TypeError, match="asynccontextmanager"):
        grpc.open_channel("127.0.0.1", 1, interceptors=[42])  # type: ignore[list-item]


# ---------------------------------------------------------------------- interop


async def test_grpcio_client_through_our_server_interceptors() -> None:
    """grpcio's client (four kinds, metadata) passes through our server interceptors."""
    log: list[Any] = []
    echo = Echo()
    server = grpc.Server([echo], interceptors=[recording_server("a", log)])
    with trio.fail_after(60):
        async with trio_h2t.open_server(server, 0, host="127.0.0.1") as h2server:
            await _run_grpcio_client(h2server.port, ["calls", "metadata"])
    methods = {m for _, what, m, *_ in log if what == "in"}
    assert {m for m, _ in KINDS} <= methods
    assert "/test.Echo/Meta" in methods


async def test_our_client_interceptors_against_grpcio_server() -> None:
    """Our client interceptors run around calls to a grpcio server, adding metadata."""
    log: list[Any] = []

    @asynccontextmanager
    async def add(details: grpc.ClientCallDetails) -> AsyncIterator[None]:
        details.metadata.append(("x-added", "yes"))
        yield

    with trio.fail_after(60):
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
            assert proc.stdin is not None
            line = await _read_line(proc.stdout)
            port = int(line.split()[1])
            try:
                interceptors = [recording_client("a", log), add]
                async with grpc.open_channel(
                    "127.0.0.1", port, interceptors=interceptors
                ) as channel:
                    assert await four_calls(channel) == EXPECTED
                    _, call = await channel.unary_unary("/test.Echo/Meta").with_call(b"m")
                    assert call.trailing_metadata is not None
                    assert call.trailing_metadata.get("x-added") == "yes"
            finally:
                await proc.stdin.aclose()
    assert len([w for _, w, *_ in log if w == "out"]) == 5
