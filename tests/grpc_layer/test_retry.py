"""Retries from a channel's service config against a real trio_h2t.grpc server on
127.0.0.1 (_retry.py, _retrying.py, gRFC A6): unary-unary, unary-stream, stream-unary."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing

import trio_h2t
from trio_h2t import grpc

CONFIG_JSON: dict[str, Any] = {
    "methodConfig": [
        {
            "name": [{"service": "test.Flaky"}],
            "retryPolicy": {
                "maxAttempts": 4,
                "initialBackoff": "0.01s",
                "maxBackoff": "0.05s",
                "backoffMultiplier": 2,
                "retryableStatusCodes": ["UNAVAILABLE"],
            },
        }
    ],
    "retryThrottling": {"maxTokens": 4, "tokenRatio": 0.5},
}
CONFIG = grpc.parse_service_config(CONFIG_JSON)
_POLICY = CONFIG.method_config("/test.Flaky/Fail").retry_policy
assert _POLICY is not None
POLICY: grpc.RetryPolicy = _POLICY


class Flaky:
    """Fails with the status the request names, ``failures`` times, then echoes."""

    SERVICE_NAME = "test.Flaky"

    def __init__(self, failures: int, code: grpc.StatusCode = grpc.StatusCode.UNAVAILABLE) -> None:
        self.failures = failures
        self.code = code
        self.pushback: str | None = None
        self.previous: list[str | bytes | None] = []

    @grpc.rpc()
    async def Fail(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        self.previous.append(context.invocation_metadata.get("grpc-previous-rpc-attempts"))
        if len(self.previous) <= self.failures:
            trailing = [] if self.pushback is None else [("grpc-retry-pushback-ms", self.pushback)]
            raise grpc.RpcError(self.code, "try again", trailing_metadata=trailing)
        return request

    @grpc.rpc()
    async def Headers(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        self.previous.append(context.invocation_metadata.get("grpc-previous-rpc-attempts"))
        await context.send_initial_metadata([("x-sent", "1")])
        raise grpc.RpcError(grpc.StatusCode.UNAVAILABLE, "after headers")


@asynccontextmanager
async def _channel(
    servicer: object, config: dict[str, Any] | None = None
) -> AsyncIterator[grpc.Channel]:
    """``servicer`` on 127.0.0.1 and a channel to it with ``config`` (default: retries
    without throttling)."""
    if config is None:
        config = {"methodConfig": CONFIG_JSON["methodConfig"]}
    async with (
        trio_h2t.open_server(grpc.Server([servicer]), 0, host="127.0.0.1") as server,
        grpc.open_channel("127.0.0.1", server.port, service_config=config) as channel,
    ):
        yield channel


async def _call(
    channel: grpc.Channel,
    method: str = "/test.Flaky/Fail",
    timeout: float | None = 5,  # noqa: ASYNC109 (the call's deadline, sent as grpc-timeout)
) -> bytes:
    result: bytes = await channel.unary_unary(method)(b"hi", timeout=timeout)
    return result


async def test_two_failures_then_success() -> None:
    """UNAVAILABLE twice, then OK: three attempts, previous-attempts 1 and 2 sent."""
    servicer = Flaky(2)
    with trio.fail_after(5):
        async with _channel(servicer) as channel:
            assert await _call(channel) == b"hi"
    assert servicer.previous == [None, "1", "2"]


async def test_non_retryable_code_not_retried() -> None:
    """INTERNAL is not in retryableStatusCodes: one attempt, its error raised."""
    servicer = Flaky(5, grpc.StatusCode.INTERNAL)
    with trio.fail_after(5):
        async with _channel(servicer) as channel:
            with pytest.raises(grpc.RpcError) as info:
                await _call(channel)
    assert info.value.code == grpc.StatusCode.INTERNAL
    assert info.value.details == "try again (1 attempt)"
    assert servicer.previous == [None]


async def test_max_attempts_honoured() -> None:
    """Always UNAVAILABLE: exactly maxAttempts (4) attempts, the count in details."""
    servicer = Flaky(100)
    with trio.fail_after(5):
        async with _channel(servicer) as channel:
            with pytest.raises(grpc.RpcError) as info:
                await _call(channel)
    assert info.value.code == grpc.StatusCode.UNAVAILABLE
    assert info.value.details == "try again (4 attempts)"
    assert servicer.previous == [None, "1", "2", "3"]


async def test_pushback_delays_and_negative_stops() -> None:
    """A pushback of 300 ms delays the retry that long; a negative one stops retrying."""
    servicer = Flaky(1)
    servicer.pushback = "300"
    with trio.fail_after(5):
        async with _channel(servicer) as channel:
            start = trio.current_time()
            assert await _call(channel) == b"hi"
            assert trio.current_time() - start >= 0.3
            servicer.previous.clear()
            servicer.pushback = "-1"
            with pytest.raises(grpc.RpcError, match=r"\(1 attempt\)"):
                await _call(channel)
    assert servicer.previous == [None]


async def test_throttling_stops_retries() -> None:
    """With maxTokens 4, after the bucket falls to half, failing calls are not retried."""
    servicer = Flaky(100)
    with trio.fail_after(5):
        async with _channel(servicer, CONFIG_JSON) as channel:
            with pytest.raises(grpc.RpcError, match=r"\(2 attempts\)"):
                await _call(channel)
            servicer.previous.clear()
            with pytest.raises(grpc.RpcError, match=r"\(1 attempt\)"):
                await _call(channel)
            throttle = channel._retry_throttle
    assert servicer.previous == [None]
    assert throttle is not None
    assert throttle.tokens == 1


async def test_successful_calls_refill_the_throttle() -> None:
    """Each call ending OK (after response headers) gives back tokenRatio (0.5)."""
    servicer = Flaky(1)
    with trio.fail_after(5):
        async with _channel(servicer, CONFIG_JSON) as channel:
            assert await _call(channel) == b"hi"  # one failure (a token), then OK
            throttle = channel._retry_throttle
            assert throttle is not None
            assert throttle.tokens == 3.5
            async with channel.unary_unary("/test.Flaky/Fail").open() as call:
                await call.send_message(b"x")
                await call.done_writing()
                assert await call.receive_response() == b"x"
            assert throttle.tokens == 4


async def test_headers_commit_the_call() -> None:
    """A failure after response headers is not retried."""
    servicer = Flaky(0)
    with trio.fail_after(5):
        async with _channel(servicer) as channel:
            with pytest.raises(grpc.RpcError, match=r"after headers \(1 attempt\)"):
                await _call(channel, "/test.Flaky/Headers")
    assert servicer.previous == [None]


async def test_deadline_bounds_the_sequence() -> None:
    """The timeout covers every attempt and backoff: DEADLINE_EXCEEDED when it passes."""
    servicer = Flaky(100)
    servicer.pushback = "10000"  # each retry would wait 10 s
    with trio.fail_after(5):
        async with _channel(servicer) as channel:
            start = trio.current_time()
            with pytest.raises(grpc.RpcError) as info:
                await _call(channel, timeout=0.3)
            assert trio.current_time() - start < 2
    assert info.value.code == grpc.StatusCode.DEADLINE_EXCEEDED
    assert servicer.previous == [None]


async def test_channel_retries_unary_unary_from_service_config() -> None:
    """open_channel(service_config=...): a unary-unary call retries per its methodConfig."""
    servicer = Flaky(2)
    with trio.fail_after(5):
        async with (
            trio_h2t.open_server(grpc.Server([servicer]), 0, host="127.0.0.1") as server,
            grpc.open_channel(
                "127.0.0.1",
                server.port,
                service_config={"methodConfig": CONFIG_JSON["methodConfig"]},
            ) as channel,
        ):
            assert await channel.unary_unary("/test.Flaky/Fail")(b"hi") == b"hi"
            servicer.previous.clear()
            servicer.failures = 100
            with pytest.raises(grpc.RpcError, match=r"try again \(4 attempts\)"):
                await channel.unary_unary("/test.Flaky/Fail")(b"hi")
    assert servicer.previous == [None, "1", "2", "3"]


async def test_method_config_timeout_applies() -> None:
    """methodConfig.timeout is sent as the call's deadline when smaller than the call's."""
    config = {"methodConfig": [{"name": [{"service": "test.Flaky"}], "timeout": "0.5s"}]}
    seen: list[float | None] = []

    class Timed(Flaky):
        @grpc.rpc()
        async def Fail(self, request: bytes, context: grpc.ServicerContext) -> bytes:
            seen.append(context.time_remaining())
            return request

    with trio.fail_after(5):
        async with (
            trio_h2t.open_server(grpc.Server([Timed(0)]), 0, host="127.0.0.1") as server,
            grpc.open_channel("127.0.0.1", server.port, service_config=config) as channel,
        ):
            method = channel.unary_unary("/test.Flaky/Fail")
            await method(b"a")
            await method(b"b", timeout=0.2)
            await method(b"c", timeout=30)
            async with method.open() as call:
                await call.send_message(b"d")
                await call.done_writing()
                await call.receive_response()
    assert len(seen) == 4
    for remaining, bound in zip(seen, [0.5, 0.2, 0.5, 0.5], strict=True):
        assert remaining is not None
        assert 0 < remaining <= bound


class FlakyStream:
    """A unary-stream method: fails ``failures`` times before answering, then streams."""

    SERVICE_NAME = "test.Flaky"

    def __init__(self, failures: int, *, fail_after_first: bool = False) -> None:
        self.failures = failures
        self.fail_after_first = fail_after_first
        self.previous: list[str | bytes | None] = []

    @grpc.rpc("unary_stream")
    async def Count(self, request: bytes, context: grpc.ServicerContext) -> AsyncIterator[bytes]:
        self.previous.append(context.invocation_metadata.get("grpc-previous-rpc-attempts"))
        if len(self.previous) <= self.failures:
            raise grpc.RpcError(grpc.StatusCode.UNAVAILABLE, "not yet")
        yield b"0"
        if self.fail_after_first:
            raise grpc.RpcError(grpc.StatusCode.UNAVAILABLE, "midway")
        yield b"1"


async def _drain(channel: grpc.Channel, got: list[bytes]) -> None:
    async with channel.unary_stream("/test.Flaky/Count")(b"") as call:
        async for message in call:
            got.append(message)


async def test_unary_stream_retries_until_headers() -> None:
    """A unary-stream call failing before any response is retried; its messages arrive."""
    servicer = FlakyStream(2)
    with trio.fail_after(5):
        async with (
            trio_h2t.open_server(grpc.Server([servicer]), 0, host="127.0.0.1") as server,
            grpc.open_channel(
                "127.0.0.1",
                server.port,
                service_config={"methodConfig": CONFIG_JSON["methodConfig"]},
            ) as channel,
        ):
            async with channel.unary_stream("/test.Flaky/Count")(b"") as call:
                assert [m async for m in call] == [b"0", b"1"]
            assert call.code == grpc.StatusCode.OK
    assert servicer.previous == [None, "1", "2"]


async def test_unary_stream_committed_after_first_message() -> None:
    """A failure after the first response message is the call's status: no retry."""
    servicer = FlakyStream(0, fail_after_first=True)
    with trio.fail_after(5):
        async with (
            trio_h2t.open_server(grpc.Server([servicer]), 0, host="127.0.0.1") as server,
            grpc.open_channel(
                "127.0.0.1",
                server.port,
                service_config={"methodConfig": CONFIG_JSON["methodConfig"]},
            ) as channel,
        ):
            got: list[bytes] = []
            with pytest.raises(grpc.RpcError, match="midway"):
                await _drain(channel, got)
    assert got == [b"0"]
    assert servicer.previous == [None]


async def test_unary_stream_attempts_exhausted() -> None:
    """Always failing before headers: maxAttempts attempts, then the call's failure."""
    servicer = FlakyStream(100)
    with trio.fail_after(5):
        async with (
            trio_h2t.open_server(grpc.Server([servicer]), 0, host="127.0.0.1") as server,
            grpc.open_channel(
                "127.0.0.1",
                server.port,
                service_config={"methodConfig": CONFIG_JSON["methodConfig"]},
            ) as channel,
        ):
            with pytest.raises(grpc.RpcError, match="not yet") as info:
                await _drain(channel, [])
    assert info.value.code == grpc.StatusCode.UNAVAILABLE
    assert servicer.previous == [None, "1", "2", "3"]


def test_bad_service_config_fails_before_connecting() -> None:
    """open_channel checks service_config at once, naming the bad field's path."""
    with pytest.raises(ValueError, match=r"^methodConfig: must be a list"):
        grpc.open_channel("127.0.0.1", 1, service_config={"methodConfig": 3})


class FlakyUpload:
    """A stream-unary method: reads every request, fails ``failures`` times, then counts."""

    SERVICE_NAME = "test.Flaky"

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.received: list[list[bytes]] = []

    @grpc.rpc("stream_unary")
    async def Upload(self, requests: AsyncIterator[bytes], context: grpc.ServicerContext) -> bytes:
        got = [r async for r in requests]
        self.received.append(got)
        if len(self.received) <= self.failures:
            raise grpc.RpcError(grpc.StatusCode.UNAVAILABLE, "again")
        return b"".join(got)


async def test_stream_unary_replays_buffered_requests() -> None:
    """A retried stream-unary attempt sends every request again from the replay buffer."""
    servicer = FlakyUpload(1)
    with trio.fail_after(5):
        async with _channel(servicer) as channel:
            upload = channel.stream_unary("/test.Flaky/Upload")
            assert await upload([b"a", b"b"], timeout=5) == b"ab"
    assert servicer.received == [[b"a", b"b"], [b"a", b"b"]]


async def test_stream_unary_past_buffer_bound_not_retried() -> None:
    """Requests past the per-call replay bound (256 KiB) commit the call: its failure
    is final, and the channel's replay pool is given back."""
    servicer = FlakyUpload(1)
    with trio.fail_after(5):
        async with _channel(servicer) as channel:
            upload = channel.stream_unary("/test.Flaky/Upload")
            with pytest.raises(grpc.RpcError, match=r"again \(1 attempt\)"):
                await upload([b"x" * 200_000, b"y" * 100_000], timeout=5)
            assert channel._retry_pool.in_use == 0
    assert len(servicer.received) == 1


async def test_channel_retries_stream_unary() -> None:
    """A channel's stream-unary call retries per its methodConfig, replaying its requests."""
    servicer = FlakyUpload(2)

    async def requests() -> AsyncIterator[bytes]:
        for part in (b"p", b"q", b"r"):
            yield part

    with trio.fail_after(5):
        async with (
            trio_h2t.open_server(grpc.Server([servicer]), 0, host="127.0.0.1") as server,
            grpc.open_channel(
                "127.0.0.1",
                server.port,
                service_config={"methodConfig": CONFIG_JSON["methodConfig"]},
            ) as channel,
        ):
            assert await channel.stream_unary("/test.Flaky/Upload")(requests()) == b"pqr"
    assert servicer.received == [[b"p", b"q", b"r"]] * 3
