"""Server interceptors see calls to unknown methods too (UNIMPLEMENTED), as in grpcio
and grpc-go: a logging interceptor logs them, an auth check refuses them first."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from trio_h2t import grpc

from .test_interceptors import LIMIT, Proceed, recording_server, serving


async def test_logging_interceptor_sees_unknown_method() -> None:
    """A call to an unknown method goes through the interceptor; proceed() raises
    UNIMPLEMENTED, and the client gets the same status and details as without one."""
    log: list[Any] = []
    with trio.fail_after(LIMIT):
        async with serving([recording_server("log", log)]) as (channel, _):
            with pytest.raises(grpc.RpcError) as intercepted:
                await channel.unary_unary("/test.Echo/Nope")(b"x")
        async with serving() as (channel, _):
            with pytest.raises(grpc.RpcError) as plain:
                await channel.unary_unary("/test.Echo/Nope")(b"x")
    assert intercepted.value.code == grpc.StatusCode.UNIMPLEMENTED
    assert (
        intercepted.value.details
        == plain.value.details
        == ("unknown method Nope for service test.Echo")
    )
    assert log == [
        ("log", "in", "/test.Echo/Nope", grpc.MethodKind.STREAM_STREAM),
        ("log", "error", grpc.StatusCode.UNIMPLEMENTED),
    ]


async def _read_all(method: grpc.StreamStreamMethod[Any, Any]) -> None:
    async with method([b"a", b"b"]) as call:
        async for _ in call:
            pass


async def test_unknown_service_of_every_call_kind_is_intercepted() -> None:
    """Unary and streaming calls to an unknown service are seen and end UNIMPLEMENTED."""
    log: list[Any] = []
    with trio.fail_after(LIMIT):
        async with serving([recording_server("log", log)]) as (channel, _):
            with pytest.raises(grpc.RpcError) as unary:
                await channel.unary_unary("/no.Such/Unary")(b"x")
            with pytest.raises(grpc.RpcError) as streaming:
                await _read_all(channel.stream_stream("/no.Such/Bidi"))
            # The connection carries on: a known method still works.
            assert await channel.unary_unary("/test.Echo/Unary")(b"u") == b"u"
    assert unary.value.code == streaming.value.code == grpc.StatusCode.UNIMPLEMENTED
    assert unary.value.details == "unknown service no.Such"
    assert [entry[2] for entry in log if entry[1] == "in"] == [
        "/no.Such/Unary",
        "/no.Such/Bidi",
        "/test.Echo/Unary",
    ]


async def test_auth_interceptor_refuses_unknown_method_before_unimplemented() -> None:
    """An interceptor that aborts before proceed() decides the status of an unknown
    method's call (UNAUTHENTICATED, not UNIMPLEMENTED), as grpcio's interceptors do."""

    async def auth(details: grpc.ServerCallDetails, proceed: Proceed) -> None:
        if details.invocation_metadata.get("authorization") != "Bearer ok":
            details.context.abort(grpc.StatusCode.UNAUTHENTICATED, "no token")
        await proceed()

    with trio.fail_after(LIMIT):
        async with serving([auth]) as (channel, _):
            method = channel.unary_unary("/test.Echo/Nope")
            with pytest.raises(grpc.RpcError) as refused:
                await method(b"x")
            with pytest.raises(grpc.RpcError) as unknown:
                await method(b"x", metadata=[("authorization", "Bearer ok")])
    assert refused.value.code == grpc.StatusCode.UNAUTHENTICATED
    assert unknown.value.code == grpc.StatusCode.UNIMPLEMENTED


async def test_interceptor_metadata_reaches_client_with_unimplemented() -> None:
    """Trailing metadata an interceptor adds goes out with the UNIMPLEMENTED status."""

    async def tag(details: grpc.ServerCallDetails, proceed: Proceed) -> None:
        details.context.add_trailing_metadata([("x-seen-by", "tag")])
        await proceed()

    with trio.fail_after(LIMIT):
        async with serving([tag]) as (channel, _):
            with pytest.raises(grpc.RpcError) as info:
                await channel.unary_unary("/test.Echo/Nope")(b"x")
    assert info.value.code == grpc.StatusCode.UNIMPLEMENTED
    assert info.value.trailing_metadata.get("x-seen-by") == "tag"
