"""The mistakes a new user of trio_h2t.grpc makes get an error that names the fix.

Found by trying the layer from its docs alone (docs/grpc.md, "Mistakes people
make"). Before these checks, ``metadata=("key", "value")`` failed with "too many
values to unpack", a unary handler returning None blamed ``NoneType`` (or
protobuf's descriptor) from inside the serializer, and a stream call or
``open_channel`` used without ``async with`` named ``_AsyncGeneratorContextManager``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing
from _helpers_common import free_port

import trio_h2t
from trio_h2t import grpc

LIMIT = 30


@asynccontextmanager
async def grpc_pair(server: grpc.Server) -> AsyncIterator[grpc.Channel]:
    """A Channel connected to ``server`` over a memory stream pair."""
    client_t, server_t = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio_h2t.serve_connection, server_t, server)
        async with trio_h2t.open_client_connection(client_t) as conn:
            channel = grpc.Channel(conn)
            yield channel
            await channel.aclose()


# ---------------------------------------------------------------------- metadata


def test_one_pair_where_pairs_go_names_the_fix() -> None:
    """metadata=("key", "value") is one pair, not a sequence of pairs: the error says so."""
    with pytest.raises(TypeError, match=r"sequence of \(key, value\) pairs.*\[\(key, value\)\]"):
        grpc.Metadata(("x-key", "value"))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"sequence of \(key, value\) pairs"):
        grpc.Metadata([("x-key", "value", "extra")])  # type: ignore[list-item]
    assert list(grpc.Metadata([("x-key", "value")])) == [("x-key", "value")]


def test_bin_value_of_the_wrong_type_names_the_type() -> None:
    """A -bin key with an int value: the error names the type as the other checks do."""
    with pytest.raises(TypeError, match=r"'x-bin' \(-bin\) needs a bytes value, not int$"):
        grpc.Metadata([("x-bin", 5)])  # type: ignore[list-item]


def test_str_on_a_bin_key_is_sent_as_utf8() -> None:
    """As docs/grpc.md says: a str value on a -bin key is its UTF-8."""
    assert grpc.Metadata([("x-bin", "caf\u00e9")])["x-bin"] == "caf\u00e9".encode()


async def test_one_pair_on_a_call_fails_before_anything_is_sent() -> None:
    """The same mistake on a call raises there, and the channel still works."""

    async def echo(request: bytes, context: grpc.ServicerContext) -> bytes:
        return request

    server = grpc.Server([{"/m.M/Echo": grpc.unary_unary_handler(echo)}])
    with trio.fail_after(LIMIT):
        async with grpc_pair(server) as channel:
            method = channel.unary_unary("/m.M/Echo")
            with pytest.raises(TypeError, match=r"\[\(key, value\)\]"):
                await method(b"a", metadata=("x-key", "v"))  # type: ignore[arg-type]
            assert await method(b"b", metadata=[("x-key", "v")]) == b"b"


# ---------------------------------------------------------------------- handlers


async def returns_none(request: Any, context: grpc.ServicerContext) -> Any:
    return None


async def returns_none_after_reading(requests: Any, context: grpc.ServicerContext) -> Any:
    async for _ in requests:
        pass
    return None


async def sets_code_and_returns_none(request: Any, context: grpc.ServicerContext) -> Any:
    context.set_code(grpc.StatusCode.NOT_FOUND)
    context.set_details("no such thing")
    return None


async def test_unary_handler_returning_none_is_named_in_the_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A unary-response handler that returns None: UNKNOWN for the client (as any
    handler error), and the log says the handler returned None and what to do."""
    server = grpc.Server(
        [
            {
                "/m.M/UU": grpc.unary_unary_handler(returns_none),
                "/m.M/SU": grpc.stream_unary_handler(returns_none_after_reading),
            }
        ]
    )
    with trio.fail_after(LIMIT), caplog.at_level(logging.ERROR, "trio_h2t.grpc"):
        async with grpc_pair(server) as channel:
            with pytest.raises(grpc.RpcError) as info:
                await channel.unary_unary("/m.M/UU")(b"a")
            assert info.value.code == grpc.StatusCode.UNKNOWN
            assert info.value.details == "Exception calling application: TypeError"
            with pytest.raises(grpc.RpcError) as info:
                await channel.stream_unary("/m.M/SU")([b"a", b"b"])
            assert info.value.code == grpc.StatusCode.UNKNOWN
    messages = [str(r.exc_info[1]) for r in caplog.records if r.exc_info]
    assert len(messages) == 2
    assert messages[0].startswith("returns_none returned None, but a unary_unary method")
    assert messages[1].startswith("returns_none_after_reading returned None, but a stream_unary")
    assert all("context.abort(code, details)" in m for m in messages)


async def test_none_with_a_status_set_or_a_serializer_that_takes_it_is_no_mistake() -> None:
    """None after context.set_code(non-OK) ends the call with that status; a
    serializer that serializes None (json.dumps) is left to do so."""
    server = grpc.Server(
        [
            {
                "/m.M/Code": grpc.unary_unary_handler(sets_code_and_returns_none),
                "/m.M/Json": grpc.unary_unary_handler(
                    returns_none, response_serializer=lambda m: json.dumps(m).encode()
                ),
            }
        ]
    )
    with trio.fail_after(LIMIT):
        async with grpc_pair(server) as channel:
            with pytest.raises(grpc.RpcError) as info:
                await channel.unary_unary("/m.M/Code")(b"")
            assert (info.value.code, info.value.details) == (
                grpc.StatusCode.NOT_FOUND,
                "no such thing",
            )
            assert await channel.unary_unary("/m.M/Json")(b"") == b"null"


# ---------------------------------------------------------------------- async with


async def count(request: bytes, context: grpc.ServicerContext) -> AsyncIterator[bytes]:
    for i in range(int(request)):
        yield str(i).encode()


async def shout(requests: AsyncIterator[bytes], context: grpc.ServicerContext) -> None:
    async for request in requests:
        await context.write(request.upper())


def misuses(cm: AbstractAsyncContextManager[Any]) -> list[str]:
    """The errors of awaiting, iterating, ``with`` and reading an attribute of ``cm``."""
    found = []

    async def await_it() -> None:
        await cm  # type: ignore[misc]

    async def iterate_it() -> None:
        async for _ in cm:  # type: ignore[attr-defined]
            pass  # pragma: no cover - never iterates

    for fn in (await_it, iterate_it):
        with pytest.raises(TypeError) as info:
            fn().send(None)
        found.append(str(info.value))
    with pytest.raises(TypeError) as info, cm:  # type: ignore[attr-defined]
        pass  # pragma: no cover - never entered
    found.append(str(info.value))
    with pytest.raises(AttributeError) as attr:
        cm.unary_unary  # type: ignore[attr-defined]  # noqa: B018
    found.append(str(attr.value))
    return found


async def test_stream_calls_without_async_with_name_the_fix() -> None:
    """A unary_stream or stream_stream call awaited, iterated or entered with
    ``with``: TypeError naming ``async with``; the same call entered works."""
    server = grpc.Server(
        [
            {
                "/m.M/Count": grpc.unary_stream_handler(count),
                "/m.M/Shout": grpc.stream_stream_handler(shout),
            }
        ]
    )
    with trio.fail_after(LIMIT):
        async with grpc_pair(server) as channel:
            us = channel.unary_stream("/m.M/Count")
            for message in misuses(us(b"2")):
                assert message.startswith("a unary_stream call ")
                assert "`async with method(request) as call:`" in message
            ss = channel.stream_stream("/m.M/Shout")
            for message in misuses(ss([b"a"])):
                assert message.startswith("a stream_stream call ")
                assert "`async with method(requests) as call:`" in message
            async with us(b"2") as call:
                assert [m async for m in call] == [b"0", b"1"]
            async with ss([b"a"]) as call:
                assert [m async for m in call] == [b"A"]


async def test_open_channel_without_async_with_names_the_fix() -> None:
    """``channel = grpc.open_channel(...)`` then a method, or ``await`` on it:
    the error says to write ``async with grpc.open_channel(host, port) as channel:``;
    nothing connects (the port has no listener)."""
    for message in misuses(grpc.open_channel("127.0.0.1", free_port())):
        assert message.startswith("grpc.open_channel(...) ")
        assert "`async with grpc.open_channel(host, port) as channel:`" in message


# ---------------------------------------------------------------------- connecting


async def test_open_channel_passes_connect_timeout_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """open_channel(connect_timeout=...) bounds the connect as open_connection's
    does (a call's timeout cannot: the connection is made first)."""
    seen: dict[str, Any] = {}
    real = trio_h2t.open_connection

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.update(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(trio_h2t, "open_connection", spy)

    async def echo(request: bytes, context: grpc.ServicerContext) -> bytes:
        return request

    server = grpc.Server([{"/m.M/Echo": grpc.unary_unary_handler(echo)}])
    with trio.fail_after(LIMIT):
        async with (
            trio_h2t.open_server(server, 0, host="127.0.0.1") as h2server,
            grpc.open_channel("127.0.0.1", h2server.port, connect_timeout=5) as ch,
        ):
            assert await ch.unary_unary("/m.M/Echo")(b"x") == b"x"
    assert seen["connect_timeout"] == 5
    with pytest.raises(ValueError, match="connect_timeout"):
        async with grpc.open_channel("127.0.0.1", free_port(), connect_timeout=-1):
            pass  # pragma: no cover - never entered


async def test_async_with_on_a_grpc_server_names_open_server() -> None:
    """``async with grpc.Server(...)`` (grpcio's aio habit): TypeError naming
    ``trio_h2t.open_server``, which serves it."""
    with pytest.raises(TypeError, match=r"serve it with `async with trio_h2t\.open_server"):
        async with grpc.Server([]):
            pass  # pragma: no cover - never entered


async def test_a_stream_cut_by_server_shutdown_says_lost_once() -> None:
    """Closing the server under a call that never ends: after the grace period the
    client's call ends UNAVAILABLE, its details "the connection was lost" once (they
    read "the connection was lost: the connection was lost")."""

    async def forever(request: bytes, context: grpc.ServicerContext) -> AsyncIterator[bytes]:
        while True:
            yield b"tick"
            await trio.sleep(0.01)

    server = grpc.Server([{"/m.M/Forever": grpc.unary_stream_handler(forever)}])
    config = trio_h2t.TransportConfig(graceful_close_timeout=0.1)
    errors: list[grpc.RpcError] = []
    with trio.fail_after(LIMIT):
        async with (
            trio_h2t.open_server(server, 0, host="127.0.0.1", config=config) as h2server,
            grpc.open_channel("127.0.0.1", h2server.port) as channel,
        ):
            started = trio.Event()

            async def watch() -> None:
                try:
                    async with channel.unary_stream("/m.M/Forever")(b"") as call:
                        async for _ in call:
                            started.set()
                except grpc.RpcError as exc:
                    errors.append(exc)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(watch)
                await started.wait()
                await h2server.aclose()
    assert [(e.code, e.details) for e in errors] == [
        (grpc.StatusCode.UNAVAILABLE, "the connection was lost")
    ]
