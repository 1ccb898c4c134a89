"""Per-call credentials (``call_credentials=``): metadata added to every call,
refused without TLS unless ``insecure_call_credentials=True``, and a failing
callable ending the call with UNAVAILABLE; real servers on 127.0.0.1."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

import trio_h2t
from trio_h2t import grpc

from .echo import Echo
from .test_interceptors import EXPECTED, Proceed, four_calls

LIMIT = 20


@asynccontextmanager
async def echo_server(
    seen: list[Any], ssl_context: ssl.SSLContext | None = None
) -> AsyncIterator[int]:
    """``test.Echo`` on 127.0.0.1, recording each call's path and authorization; its port."""

    async def record(details: grpc.ServerCallDetails, proceed: Proceed) -> None:
        seen.append((details.method, details.invocation_metadata.get("authorization")))
        await proceed()

    server = grpc.Server([Echo()], interceptors=[record])
    async with trio_h2t.open_server(
        server, 0, host="127.0.0.1", ssl_context=ssl_context
    ) as h2server:
        yield h2server.port


async def test_credentials_added_to_every_call() -> None:
    """A sync credentials callable adds its metadata to each call of the four kinds,
    told the service URL and the method name."""
    contexts: list[grpc.CallCredentialsContext] = []

    def token(context: grpc.CallCredentialsContext) -> list[tuple[str, str]]:
        contexts.append(context)
        return [("authorization", "Bearer t")]

    seen: list[Any] = []
    with trio.fail_after(LIMIT):
        async with (
            echo_server(seen) as port,
            grpc.open_channel(
                "127.0.0.1", port, call_credentials=token, insecure_call_credentials=True
            ) as channel,
        ):
            assert await four_calls(channel) == EXPECTED
    assert [auth for _, auth in seen] == ["Bearer t"] * 4
    assert [c.method_name for c in contexts] == ["Unary", "Count", "Concat", "Upper"]
    assert contexts[0].service_url == f"http://127.0.0.1:{port}/test.Echo"


async def test_async_credentials_over_tls(
    server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext
) -> None:
    """An async credentials callable is accepted on a TLS channel with no override."""

    async def token(context: grpc.CallCredentialsContext) -> list[tuple[str, str]]:
        await trio.lowlevel.checkpoint()
        return [("authorization", "Bearer tls")]

    seen: list[Any] = []
    with trio.fail_after(LIMIT):
        async with (
            echo_server(seen, server_ctx) as port,
            grpc.open_channel(
                "127.0.0.1", port, ssl_context=client_ctx, call_credentials=token
            ) as channel,
        ):
            assert await channel.unary_unary("/test.Echo/Unary")(b"u") == b"u"
    assert seen == [("/test.Echo/Unary", "Bearer tls")]


async def test_credentials_refused_without_tls() -> None:
    """call_credentials on a plaintext channel is a ValueError naming the override,
    at open_channel (before connecting) and at Channel(...)."""

    def token(context: grpc.CallCredentialsContext) -> list[tuple[str, str]]:
        return [("authorization", "Bearer t")]

    with pytest.raises(ValueError, match="insecure_call_credentials=True"):
        grpc.open_channel("127.0.0.1", 1, call_credentials=token)
    seen: list[Any] = []
    with trio.fail_after(LIMIT):
        async with (
            echo_server(seen) as port,
            trio_h2t.open_connection("127.0.0.1", port) as conn,
        ):
            with pytest.raises(ValueError, match="ssl_context"):
                grpc.Channel(conn, call_credentials=token)
            channel = grpc.Channel(conn, call_credentials=token, insecure_call_credentials=True)
            assert await channel.unary_unary("/test.Echo/Unary")(b"u") == b"u"
    assert seen == [("/test.Echo/Unary", "Bearer t")]


async def test_failing_credentials_end_call_with_unavailable() -> None:
    """A credentials callable that raises ends the call with UNAVAILABLE carrying the
    error; no stream is opened and the server sees no call."""

    def broken(context: grpc.CallCredentialsContext) -> list[tuple[str, str]]:
        raise OSError("token service down")

    seen: list[Any] = []
    with trio.fail_after(LIMIT):
        async with (
            echo_server(seen) as port,
            grpc.open_channel(
                "127.0.0.1", port, call_credentials=broken, insecure_call_credentials=True
            ) as channel,
        ):
            with pytest.raises(grpc.RpcError) as info:
                await channel.unary_unary("/test.Echo/Unary")(b"u")
            assert channel.connection.statistics().streams_opened == 0
    assert info.value.code == grpc.StatusCode.UNAVAILABLE
    assert "token service down" in info.value.details
    assert isinstance(info.value.__cause__, OSError)
    assert seen == []


async def test_credentials_run_inside_user_interceptors() -> None:
    """The credentials' metadata is added after the user's interceptors saw the call."""
    saw: list[list[tuple[str, Any]]] = []

    @asynccontextmanager
    async def look(details: grpc.ClientCallDetails) -> AsyncIterator[None]:
        saw.append(list(details.metadata))
        yield
        saw.append(list(details.metadata))

    def token(context: grpc.CallCredentialsContext) -> list[tuple[str, str]]:
        return [("authorization", "Bearer t")]

    seen: list[Any] = []
    with trio.fail_after(LIMIT):
        async with (
            echo_server(seen) as port,
            grpc.open_channel(
                "127.0.0.1",
                port,
                interceptors=[look],
                call_credentials=token,
                insecure_call_credentials=True,
            ) as channel,
        ):
            await channel.unary_unary("/test.Echo/Unary")(b"u")
    assert saw == [[], [("authorization", "Bearer t")]]
    assert seen == [("/test.Echo/Unary", "Bearer t")]


def test_credentials_must_be_callable() -> None:
    """A non-callable call_credentials is a TypeError naming what it should be."""
    with pytest.raises(TypeError, match="callable"):
        grpc.open_channel(
            "127.0.0.1",
            1,
            call_credentials="token",  # type: ignore[arg-type]
            insecure_call_credentials=True,
        )
