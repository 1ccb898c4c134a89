"""Wrong options to the gRPC layer's constructors fail at once, where they are written.

Each case raises TypeError or ValueError from the call that takes the option, before
any connection is made or any RPC runs (before this, a negative size limit failed
every call with RESOURCE_EXHAUSTED, and a str limit with a TypeError from deep inside
the decoder).
"""

from __future__ import annotations

import socket
from typing import Any

import pytest
import trio
import trio.testing

import trio_h2t
from trio_h2t import grpc

SIZE_CASES: list[tuple[dict[str, Any], type[Exception], str]] = [
    ({"max_receive_message_size": -1}, ValueError, "max_receive_message_size must be >= 0"),
    ({"max_receive_message_size": "4"}, TypeError, "max_receive_message_size must be an int"),
    ({"max_receive_message_size": True}, TypeError, "not bool"),
    ({"max_send_message_size": 1.5}, TypeError, "max_send_message_size must be an int"),
    ({"max_send_message_size": -5}, ValueError, "max_send_message_size must be >= 0"),
    ({"buffer_reuse": "yes"}, TypeError, "buffer_reuse must be a bool"),
    ({"compression": "zstd"}, ValueError, "unsupported compression"),
]


@pytest.mark.parametrize(("options", "error", "message"), SIZE_CASES)
def test_server_refuses_wrong_options(
    options: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        grpc.Server([], **options)


@pytest.mark.parametrize(("options", "error", "message"), SIZE_CASES)
async def test_channel_refuses_wrong_options(
    options: dict[str, Any], error: type[Exception], message: str
) -> None:
    client_t, server_t = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio_h2t.serve_connection, server_t, grpc.Server([]))
        async with trio_h2t.open_client_connection(client_t) as conn:
            with pytest.raises(error, match=message):
                grpc.Channel(conn, **options)
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize(("options", "error", "message"), SIZE_CASES)
async def test_open_channel_refuses_wrong_options_before_connecting(
    options: dict[str, Any], error: type[Exception], message: str
) -> None:
    # A port nothing listens on: a check made after connecting would fail with
    # ConnectionLostError instead of the option's own error.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with trio.fail_after(5), pytest.raises(error, match=message):
        async with grpc.open_channel("127.0.0.1", port, **options):
            pass  # pragma: no cover - never entered


def test_channel_needs_a_client_connection() -> None:
    with pytest.raises(TypeError, match="ClientConnection"):
        grpc.Channel("127.0.0.1:50051")  # type: ignore[arg-type]


async def echo(request: bytes, context: grpc.ServicerContext) -> bytes:
    return request


@pytest.mark.parametrize(
    ("path", "handler", "error", "message"),
    [
        ("s.S/M", grpc.unary_unary_handler(echo), ValueError, "/package.Service/Method"),
        ("/s.S", grpc.unary_unary_handler(echo), ValueError, "/package.Service/Method"),
        ("//M", grpc.unary_unary_handler(echo), ValueError, "/package.Service/Method"),
        ("/s.S/M/x", grpc.unary_unary_handler(echo), ValueError, "/package.Service/Method"),
        (b"/s.S/M", grpc.unary_unary_handler(echo), TypeError, "must be a str"),
        ("/s.S/M", echo, TypeError, "grpc.unary_unary_handler"),
    ],
)
def test_registry_refuses_wrong_paths_and_handlers(
    path: Any, handler: Any, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        grpc.Server().add_method(path, handler)
    with pytest.raises(error, match=message):
        grpc.Server([{path: handler}])


async def test_right_options_still_serve() -> None:
    """The checks accept what is valid: 0 and None limits, bools, every encoding."""
    handlers = {"/s.S/M": grpc.unary_unary_handler(echo)}
    server = grpc.Server([handlers], max_receive_message_size=None, max_send_message_size=0)
    client_t, server_t = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio_h2t.serve_connection, server_t, server)
        async with trio_h2t.open_client_connection(client_t) as conn:
            channel = grpc.Channel(
                conn, max_receive_message_size=0, buffer_reuse=False, compression="gzip"
            )
            assert await channel.unary_unary("/s.S/M")(b"") == b""
            await channel.aclose()
        nursery.cancel_scope.cancel()
