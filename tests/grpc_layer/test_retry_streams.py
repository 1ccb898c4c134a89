"""Retries of every call form (``open()``, ``with_call``, stream-stream), transparent
retry of streams refused after ``open()``, methodConfig message-size limits and
waitForReady, per-call ``wait_for_ready=`` and ``credentials=``, and interceptors
around retried calls; real trio_h2t.grpc servers on 127.0.0.1, a scripted HTTP/2
peer (the ``h2`` library) that refuses streams, and grpcio's server."""

from __future__ import annotations

import functools
import ssl
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import pytest
import trio
import trio.testing

import trio_h2t
from trio_h2t import grpc
from trio_h2t.grpc import _client as grpc_client

from .echo import Echo
from .test_balancer import FAST, ready
from .test_interop import PEER, _read_line

LIMIT = 10
POLICY = {
    "maxAttempts": 4,
    "initialBackoff": "0.01s",
    "maxBackoff": "0.05s",
    "backoffMultiplier": 2,
    "retryableStatusCodes": ["UNAVAILABLE"],
}


def retries(**policy: Any) -> dict[str, Any]:
    """A service config retrying test.Flaky's methods with POLICY, its fields
    replaced by ``policy``'s."""
    return {"methodConfig": [{"name": [{"service": "test.Flaky"}], "retryPolicy": POLICY | policy}]}


RETRIES = retries()


class Flaky:
    """Each method records the requests of every attempt, and fails UNAVAILABLE
    (trailers-only) for the first ``failures`` attempts."""

    SERVICE_NAME = "test.Flaky"

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.pushback: str | None = None  # grpc-retry-pushback-ms on failures
        self.received: list[list[bytes]] = []
        self.previous: list[str | bytes | None] = []

    def _attempt(self, context: grpc.ServicerContext) -> list[bytes]:
        self.previous.append(context.invocation_metadata.get("grpc-previous-rpc-attempts"))
        got: list[bytes] = []
        self.received.append(got)
        return got

    def _failing(self) -> bool:
        return len(self.received) <= self.failures

    @grpc.rpc("stream_stream")
    async def Upper(
        self, requests: AsyncIterator[bytes], context: grpc.ServicerContext
    ) -> AsyncIterator[bytes]:
        """Reads every request, then fails or answers each upper-cased."""
        got = self._attempt(context)
        async for r in requests:
            got.append(r)
        if self._failing():
            pushback = [] if self.pushback is None else [("grpc-retry-pushback-ms", self.pushback)]
            raise grpc.RpcError(grpc.StatusCode.UNAVAILABLE, "again", trailing_metadata=pushback)
        for r in got:
            yield r.upper()

    @grpc.rpc("stream_stream")
    async def PingPong(
        self, requests: AsyncIterator[bytes], context: grpc.ServicerContext
    ) -> AsyncIterator[bytes]:
        """Answers each request as it comes; a failing attempt fails at the first."""
        got = self._attempt(context)
        async for r in requests:
            got.append(r)
            if self._failing():
                raise grpc.RpcError(grpc.StatusCode.UNAVAILABLE, "again")
            yield r.upper()

    @grpc.rpc("stream_stream")
    async def Midway(
        self, requests: AsyncIterator[bytes], context: grpc.ServicerContext
    ) -> AsyncIterator[bytes]:
        """Answers one message, then fails: committed, never retried."""
        got = self._attempt(context)
        async for r in requests:
            got.append(r)
        yield b"first"
        raise grpc.RpcError(grpc.StatusCode.UNAVAILABLE, "midway")

    @grpc.rpc()
    async def Unary(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        self._attempt(context).append(request)
        if self._failing():
            raise grpc.RpcError(grpc.StatusCode.UNAVAILABLE, "again")
        return request

    @grpc.rpc("unary_stream")
    async def Count(self, request: bytes, context: grpc.ServicerContext) -> AsyncIterator[bytes]:
        self._attempt(context).append(request)
        if self._failing():
            raise grpc.RpcError(grpc.StatusCode.UNAVAILABLE, "again")
        yield b"0"
        yield b"1"

    @grpc.rpc("stream_unary")
    async def Concat(self, requests: AsyncIterator[bytes], context: grpc.ServicerContext) -> bytes:
        got = self._attempt(context)
        async for r in requests:
            got.append(r)
        if self._failing():
            raise grpc.RpcError(grpc.StatusCode.UNAVAILABLE, "again")
        return b"".join(got)


@asynccontextmanager
async def flaky(
    failures: int, config: dict[str, Any] | None = RETRIES, **options: Any
) -> AsyncIterator[tuple[grpc.Channel, Flaky]]:
    """``Flaky(failures)`` on 127.0.0.1 and a single-connection channel to it."""
    servicer = Flaky(failures)
    async with (
        trio_h2t.open_server(grpc.Server([servicer]), 0, host="127.0.0.1") as server,
        grpc.open_channel("127.0.0.1", server.port, service_config=config, **options) as channel,
    ):
        yield channel, servicer


# ---------------------------------------------------------------------- stream-stream


async def test_stream_stream_open_replays_buffered_requests() -> None:
    """A stream-stream call through open(): two failing attempts, each retry replays
    both requests and the half-close; the same Call reads the third's answers."""
    with trio.fail_after(LIMIT):
        async with flaky(2) as (channel, servicer):
            async with channel.stream_stream("/test.Flaky/Upper").open() as call:
                await call.send_message(b"a")
                await call.send_message(b"b")
                await call.done_writing()
                assert [m async for m in call] == [b"A", b"B"]
            assert call.code == grpc.StatusCode.OK
            assert channel._retry_pool.in_use == 0
    assert servicer.received == [[b"a", b"b"]] * 3
    assert servicer.previous == [None, "1", "2"]


async def test_stream_stream_call_form_with_requests_retries() -> None:
    """``method(requests)`` (a second task sending an async iterator) is retried too,
    the iterator read once."""
    taken: list[bytes] = []

    async def requests() -> AsyncIterator[bytes]:
        for part in (b"p", b"q"):
            taken.append(part)
            yield part

    with trio.fail_after(LIMIT):
        async with (
            flaky(1) as (channel, servicer),
            channel.stream_stream("/test.Flaky/Upper")(requests()) as call,
        ):
            assert [m async for m in call] == [b"P", b"Q"]
    assert taken == [b"p", b"q"]
    assert servicer.received == [[b"p", b"q"]] * 2


async def test_stream_stream_ping_pong_replays_what_was_sent() -> None:
    """A ping-pong call failing at its first request: the retry resends it, then the
    call goes on on the new stream."""
    with trio.fail_after(LIMIT):
        async with (
            flaky(1) as (channel, servicer),
            channel.stream_stream("/test.Flaky/PingPong").open() as call,
        ):
            await call.send_message(b"a")
            assert await call.receive_message() == b"A"
            await call.send_message(b"b")
            assert await call.receive_message() == b"B"
            await call.done_writing()
            with pytest.raises(trio.EndOfChannel):
                await call.receive_message()
    assert servicer.received == [[b"a"], [b"a", b"b"]]


async def test_stream_stream_committed_after_first_message() -> None:
    """Response headers and a message commit the call: its later failure is final."""
    with trio.fail_after(LIMIT):
        async with flaky(0) as (channel, servicer):
            got: list[bytes] = []

            async def drain() -> None:
                async with channel.stream_stream("/test.Flaky/Midway")([b"x"]) as call:
                    async for m in call:
                        got.append(m)

            with pytest.raises(grpc.RpcError, match=r"midway \(1 attempt\)"):
                await drain()
    assert got == [b"first"]
    assert servicer.received == [[b"x"]]


async def test_stream_stream_past_buffer_bound_commits() -> None:
    """More than the per-call replay bound (256 KiB) sent: the call commits, its
    failure is final, and nothing stays reserved in the channel's pool."""
    with trio.fail_after(LIMIT):
        async with flaky(1) as (channel, servicer):

            async def big_call() -> None:
                async with channel.stream_stream("/test.Flaky/Upper").open() as call:
                    for _ in range(3):
                        await call.send_message(b"z" * 100_000)
                    await call.done_writing()
                    await call.receive_message()

            with pytest.raises(grpc.RpcError, match=r"again \(1 attempt\)"):
                await big_call()
            assert channel._retry_pool.in_use == 0
    assert len(servicer.received) == 1


async def test_stream_stream_attempts_exhausted() -> None:
    """Always failing: maxAttempts (4) attempts, the count in the details."""
    with trio.fail_after(LIMIT):
        async with flaky(100) as (channel, servicer):

            async def failing_call() -> None:
                async with channel.stream_stream("/test.Flaky/Upper")([b"a"]) as call:
                    await call.receive_message()

            with pytest.raises(grpc.RpcError) as info:
                await failing_call()
    assert info.value.code == grpc.StatusCode.UNAVAILABLE
    assert info.value.details == "again (4 attempts)"
    assert servicer.previous == [None, "1", "2", "3"]


async def test_cancel_during_backoff_starts_no_attempt() -> None:
    """call.cancel() while the call waits out a retry's backoff (a 5 s pushback)
    ends it CANCELLED at once, and no other attempt starts."""
    with trio.fail_after(LIMIT):
        async with flaky(100) as (channel, servicer):
            servicer.pushback = "5000"
            async with channel.stream_stream("/test.Flaky/Upper").open() as call:
                await call.done_writing()

                async def cancel_in_backoff() -> None:
                    await trio.testing.wait_all_tasks_blocked()  # the first attempt failed
                    assert len(servicer.received) == 1
                    call.cancel()

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(cancel_in_backoff)
                    start = trio.current_time()
                    with pytest.raises(grpc.RpcError) as info:
                        await call.receive_message()
                    assert trio.current_time() - start < 2
    assert info.value.code == grpc.StatusCode.CANCELLED
    assert len(servicer.received) == 1


# ---------------------------------------------------------------------- other forms


async def test_with_call_and_open_forms_retry() -> None:
    """unary-unary with_call and open(), unary-stream open(), stream-unary with_call
    and open(): each retried under the policy."""
    with trio.fail_after(LIMIT):
        async with flaky(0) as (channel, servicer):
            unary = channel.unary_unary("/test.Flaky/Unary")
            servicer.failures = len(servicer.received) + 1
            response, call = await unary.with_call(b"u")
            assert (response, call.code) == (b"u", grpc.StatusCode.OK)

            servicer.failures = len(servicer.received) + 1
            async with unary.open() as call:
                await call.send_message(b"o")
                await call.done_writing()
                assert await call.receive_response() == b"o"

            servicer.failures = len(servicer.received) + 1
            async with channel.unary_stream("/test.Flaky/Count").open() as call:
                await call.send_message(b"c")
                await call.done_writing()
                assert [m async for m in call] == [b"0", b"1"]

            concat = channel.stream_unary("/test.Flaky/Concat")
            servicer.failures = len(servicer.received) + 1
            response, call = await concat.with_call([b"s", b"t"])
            assert response == b"st"

            servicer.failures = len(servicer.received) + 1
            async with concat.open() as call:
                await call.send_message(b"v")
                await call.done_writing()
                assert await call.receive_response() == b"v"
    assert servicer.received == [
        *[[b"u"]] * 2,
        *[[b"o"]] * 2,
        *[[b"c"]] * 2,
        *[[b"s", b"t"]] * 2,
        *[[b"v"]] * 2,
    ]
    assert servicer.previous == [None, "1"] * 5


async def test_deadline_covers_every_attempt_of_a_stream() -> None:
    """The call's timeout bounds all attempts and backoffs of an open() call."""
    config = retries(initialBackoff="5s", maxBackoff="5s")
    with trio.fail_after(LIMIT):
        async with flaky(100, config) as (channel, _):
            start = trio.current_time()

            async def slow_call() -> None:
                async with channel.stream_stream("/test.Flaky/Upper").open(timeout=0.3) as call:
                    await call.done_writing()
                    await call.receive_message()  # three backoffs of up to 5 s each

            with pytest.raises(grpc.RpcError) as info:
                await slow_call()
            assert trio.current_time() - start < 3
    assert info.value.code == grpc.StatusCode.DEADLINE_EXCEEDED


# ---------------------------------------------------------------------- transparent retry


@asynccontextmanager
async def refusing_peer(mode: str) -> AsyncIterator[tuple[int, list[int]]]:
    """A scripted HTTP/2 server on 127.0.0.1 (the ``h2`` library) that, when a
    stream's first DATA arrives, refuses it: RST_STREAM(REFUSED_STREAM) (``mode``
    "refuse"), or GOAWAY with last stream id 0 ("goaway"). Its port, and the ids
    of the streams it refused."""
    refused: list[int] = []

    async def handle(stream: trio.SocketStream) -> None:
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
        conn.initiate_connection()
        await stream.send_all(conn.data_to_send())
        seen: set[int] = set()
        while True:
            try:
                data = await stream.receive_some(65536)
            except trio.BrokenResourceError:
                return
            if not data:
                return
            try:
                events = conn.receive_data(data)
            except h2.exceptions.ProtocolError:
                return
            for ev in events:
                if isinstance(ev, h2.events.DataReceived) and ev.stream_id not in seen:
                    seen.add(ev.stream_id)
                    refused.append(ev.stream_id)
                    if mode == "refuse":
                        conn.reset_stream(ev.stream_id, h2.errors.ErrorCodes.REFUSED_STREAM)
                    else:
                        conn.close_connection(last_stream_id=0)
            await stream.send_all(conn.data_to_send())

    async with trio.open_nursery() as nursery:
        serve = functools.partial(trio.serve_tcp, handle, 0, host="127.0.0.1")
        listeners = await nursery.start(serve)
        yield listeners[0].socket.getsockname()[1], refused
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("mode", ["refuse", "goaway"])
async def test_streaming_call_refused_after_open_is_resent(mode: str) -> None:
    """Round robin over a peer that refuses every stream after its first DATA and a
    real server: each stream-stream call (no retry policy) refused after open() is
    resent on the other backend with what it had sent, and none fails."""
    servicer = Flaky(0)
    rr: dict[str, Any] = {"loadBalancingConfig": [{"round_robin": {}}]}
    with trio.fail_after(LIMIT):
        async with (
            refusing_peer(mode) as (peer_port, refused),
            trio_h2t.open_server(grpc.Server([servicer]), 0, host="127.0.0.1") as server,
            grpc.open_channel(
                f"ipv4:127.0.0.1:{peer_port},127.0.0.1:{server.port}",
                service_config=rr,
                backoff=FAST,
            ) as channel,
        ):
            await ready(channel, 2)
            for i in range(4):
                part = str(i).encode()
                async with channel.stream_stream("/test.Flaky/Upper").open() as call:
                    await call.send_message(part)
                    await call.send_message(b"x")
                    await call.done_writing()
                    assert [m async for m in call] == [part, b"X"]
    assert refused
    assert servicer.received == [[str(i).encode(), b"x"] for i in range(4)]


async def test_transparent_resends_are_bounded() -> None:
    """A backend that refuses every stream: a streaming call is resent at most
    MAX_TRANSPARENT_RETRIES (10) times, then fails UNAVAILABLE."""
    with trio.fail_after(LIMIT):
        async with (
            refusing_peer("refuse") as (peer_port, refused),
            grpc.open_channel(f"ipv4:127.0.0.1:{peer_port}", backoff=FAST) as channel,
        ):
            await ready(channel, 1)

            async def refused_call() -> None:
                async with channel.stream_stream("/test.Flaky/Upper").open() as call:
                    await call.send_message(b"a")
                    await call.done_writing()
                    await call.receive_message()

            with pytest.raises(grpc.RpcError) as info:
                await refused_call()
    assert info.value.code == grpc.StatusCode.UNAVAILABLE
    assert len(refused) == 1 + grpc_client.MAX_TRANSPARENT_RETRIES


# ---------------------------------------------------------------------- message sizes


async def test_method_config_message_size_limits() -> None:
    """maxRequestMessageBytes: a larger request fails RESOURCE_EXHAUSTED before it is
    sent; maxResponseMessageBytes: a larger response fails RESOURCE_EXHAUSTED; the
    smaller of the config's and the channel's limit wins."""
    config = {
        "methodConfig": [
            {
                "name": [{"service": "test.Echo"}],
                "maxRequestMessageBytes": 10,
                "maxResponseMessageBytes": 100,
            }
        ]
    }
    echo = Echo()
    with trio.fail_after(LIMIT):
        async with (
            trio_h2t.open_server(grpc.Server([echo]), 0, host="127.0.0.1") as server,
            grpc.open_channel("127.0.0.1", server.port, service_config=config) as channel,
            grpc.open_channel(
                "127.0.0.1", server.port, service_config=config, max_receive_message_size=50
            ) as smaller,
        ):
            unary = channel.unary_unary("/test.Echo/Unary")
            with pytest.raises(grpc.RpcError) as info:
                await unary(b"y" * 11)
            assert info.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
            with pytest.raises(grpc.RpcError) as info:
                await channel.stream_unary("/test.Echo/Concat")([b"y" * 11])
            assert info.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert await unary(b"y" * 10) == b"y" * 10
            big = channel.unary_unary("/test.Echo/Big")
            assert await big(b"100") == b"x" * 100
            with pytest.raises(grpc.RpcError) as info:
                await big(b"101")
            assert info.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
            with pytest.raises(grpc.RpcError) as info:
                await smaller.unary_unary("/test.Echo/Big")(b"60")
            assert info.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED


# ---------------------------------------------------------------------- wait_for_ready

FORMS: dict[str, Callable[[grpc.Channel, dict[str, Any]], Awaitable[Any]]] = {}


def _form(name: str) -> Callable[[Callable[..., Awaitable[Any]]], Callable[..., Awaitable[Any]]]:
    def register(fn: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        FORMS[name] = fn
        return fn

    return register


@_form("unary call")
async def _uu_call(ch: grpc.Channel, kw: dict[str, Any]) -> Any:
    return await ch.unary_unary("/test.Echo/Unary")(b"r", **kw)


@_form("unary with_call")
async def _uu_with(ch: grpc.Channel, kw: dict[str, Any]) -> Any:
    return (await ch.unary_unary("/test.Echo/Unary").with_call(b"r", **kw))[0]


@_form("unary open")
async def _uu_open(ch: grpc.Channel, kw: dict[str, Any]) -> Any:
    async with ch.unary_unary("/test.Echo/Unary").open(**kw) as call:
        await call.send_message(b"r")
        await call.done_writing()
        return await call.receive_response()


@_form("unary_stream call")
async def _us_call(ch: grpc.Channel, kw: dict[str, Any]) -> Any:
    async with ch.unary_stream("/test.Echo/Count")(b"1", **kw) as call:
        return [m async for m in call]


@_form("unary_stream open")
async def _us_open(ch: grpc.Channel, kw: dict[str, Any]) -> Any:
    async with ch.unary_stream("/test.Echo/Count").open(**kw) as call:
        await call.send_message(b"1")
        await call.done_writing()
        return [m async for m in call]


@_form("stream_unary call")
async def _su_call(ch: grpc.Channel, kw: dict[str, Any]) -> Any:
    return await ch.stream_unary("/test.Echo/Concat")([b"r"], **kw)


@_form("stream_unary with_call")
async def _su_with(ch: grpc.Channel, kw: dict[str, Any]) -> Any:
    return (await ch.stream_unary("/test.Echo/Concat").with_call([b"r"], **kw))[0]


@_form("stream_unary open")
async def _su_open(ch: grpc.Channel, kw: dict[str, Any]) -> Any:
    async with ch.stream_unary("/test.Echo/Concat").open(**kw) as call:
        await call.send_message(b"r")
        await call.done_writing()
        return await call.receive_response()


@_form("stream_stream call")
async def _ss_call(ch: grpc.Channel, kw: dict[str, Any]) -> Any:
    async with ch.stream_stream("/test.Echo/Upper")([b"r"], **kw) as call:
        return [m async for m in call]


@_form("stream_stream open")
async def _ss_open(ch: grpc.Channel, kw: dict[str, Any]) -> Any:
    async with ch.stream_stream("/test.Echo/Upper").open(**kw) as call:
        await call.send_message(b"r")
        await call.done_writing()
        return [m async for m in call]


ANSWERS = {"unary": b"r", "unary_stream": [b"0"], "stream_unary": b"r", "stream_stream": [b"R"]}


def _answer(form: str) -> Any:
    return ANSWERS[form.split()[0]]


@asynccontextmanager
async def _passing(details: grpc.ClientCallDetails) -> AsyncIterator[None]:
    yield


@pytest.mark.parametrize("source", ["per call", "method config", "per call, intercepted"])
async def test_wait_for_ready_on_every_form(source: str) -> None:
    """With no backend up, every call form fails UNAVAILABLE at once; with
    wait_for_ready (per call, or methodConfig.waitForReady) it waits for the backend
    that starts later; per call False overrides the config; through an interceptor
    (the unary call's general path) alike."""
    with trio.socket.socket() as s:
        await s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = None
    if source == "method config":
        config = {"methodConfig": [{"name": [{"service": "test.Echo"}], "waitForReady": True}]}
    with trio.fail_after(30):
        async with (
            trio.open_nursery() as nursery,
            grpc.open_channel(
                f"ipv4:127.0.0.1:{port}",
                backoff=FAST,
                service_config=config,
                interceptors=[_passing] if "intercepted" in source else [],
            ) as channel,
        ):
            while channel.get_state() is not grpc.ConnectivityState.TRANSIENT_FAILURE:
                await channel.wait_for_state_change(channel.get_state())
            fast: dict[str, Any] = {"wait_for_ready": False}
            waiting: dict[str, Any] = {"timeout": 5}
            if source.startswith("per call"):
                waiting["wait_for_ready"] = True
            for form in FORMS.values():
                with trio.fail_after(1), pytest.raises(grpc.RpcError) as info:
                    await form(channel, fast)
                assert info.value.code == grpc.StatusCode.UNAVAILABLE
            server = grpc.Server([Echo()])
            results: dict[str, Any] = {}

            async def waiter(name: str) -> None:
                results[name] = await FORMS[name](channel, waiting)

            async with trio.open_nursery() as callers:
                for name in FORMS:
                    callers.start_soon(waiter, name)
                await trio.testing.wait_all_tasks_blocked()
                await nursery.start(
                    functools.partial(trio_h2t.serve_tcp, server, port, host="127.0.0.1")
                )
            nursery.cancel_scope.cancel()
    assert results == {name: _answer(name) for name in FORMS}


def test_wrong_wait_for_ready_and_credentials_raise_at_once() -> None:
    """A non-bool wait_for_ready is a TypeError, non-callable credentials a TypeError,
    before any I/O (here, on a channel that never connects)."""

    async def main() -> None:
        async with (
            trio.open_nursery() as nursery,
            trio_h2t.open_server(grpc.Server([Echo()]), 0, host="127.0.0.1") as server,
            grpc.open_channel("127.0.0.1", server.port, insecure_call_credentials=True) as ch,
        ):
            with pytest.raises(TypeError, match="wait_for_ready must be a bool"):
                ch.stream_stream("/test.Echo/Upper").open(wait_for_ready="yes")  # type: ignore[arg-type]
            with pytest.raises(TypeError, match="wait_for_ready must be a bool"):
                await ch.unary_unary("/test.Echo/Unary")(b"", wait_for_ready=1)  # type: ignore[arg-type]
            with pytest.raises(TypeError, match="credentials is a callable"):
                ch.unary_stream("/test.Echo/Count")(b"1", credentials="token")  # type: ignore[arg-type]
            assert ch.connection.statistics().streams_opened == 0
            nursery.cancel_scope.cancel()

    trio.run(main)


# ---------------------------------------------------------------------- interceptors


async def test_interceptors_see_the_whole_call_once() -> None:
    """A client interceptor on a channel with a retry policy sees one call (one entry,
    one exit with the final result) whatever the number of attempts below it, for the
    plain unary call and a stream-stream call; the interceptor's timeout and
    per-call wait_for_ready hold on the unary path too."""
    log: list[Any] = []

    @asynccontextmanager
    async def record(details: grpc.ClientCallDetails) -> AsyncIterator[None]:
        log.append(("in", details.method, details.timeout))
        try:
            yield
        except grpc.RpcError as exc:
            log.append(("error", exc.code))
            raise
        log.append(("out", details.method))

    with trio.fail_after(LIMIT):
        async with flaky(2, interceptors=[record]) as (channel, servicer):
            unary = channel.unary_unary("/test.Flaky/Unary")
            assert await unary(b"u", timeout=5, wait_for_ready=True) == b"u"
            assert servicer.previous == [None, "1", "2"]
            servicer.failures = len(servicer.received) + 2
            async with channel.stream_stream("/test.Flaky/Upper")([b"s"]) as call:
                assert [m async for m in call] == [b"S"]
            servicer.failures = 100
            with pytest.raises(grpc.RpcError, match=r"again \(4 attempts\)"):
                await unary(b"x")
    assert len(servicer.received) == 3 + 3 + 4
    assert log == [
        ("in", "/test.Flaky/Unary", 5),
        ("out", "/test.Flaky/Unary"),
        ("in", "/test.Flaky/Upper", None),
        ("out", "/test.Flaky/Upper"),
        ("in", "/test.Flaky/Unary", None),
        ("error", grpc.StatusCode.UNAVAILABLE),
    ]


async def test_interceptor_path_honours_method_config_timeout() -> None:
    """The unary call through an interceptor gets methodConfig.timeout (below the
    interceptor, which sees the call's own timeout)."""
    config = {"methodConfig": [{"name": [{"service": "test.Echo"}], "timeout": "0.2s"}]}
    seen: list[float | None] = []

    @asynccontextmanager
    async def look(details: grpc.ClientCallDetails) -> AsyncIterator[None]:
        seen.append(details.timeout)
        yield

    echo = Echo()
    with trio.fail_after(LIMIT):
        async with (
            trio_h2t.open_server(grpc.Server([echo]), 0, host="127.0.0.1") as server,
            grpc.open_channel(
                "127.0.0.1", server.port, service_config=config, interceptors=[look]
            ) as channel,
        ):
            with pytest.raises(grpc.RpcError) as info:
                await channel.unary_unary("/test.Echo/Sleep")(b"10")
            assert info.value.code == grpc.StatusCode.DEADLINE_EXCEEDED
            await echo.wait_for("sleep cancelled")
    assert seen == [None]


# ---------------------------------------------------------------------- per-call credentials


async def test_per_call_credentials_on_every_kind() -> None:
    """``credentials=`` adds its metadata to that call only, after the channel's
    call_credentials; it is told the method; a plaintext channel without
    insecure_call_credentials refuses it with ValueError naming the fix."""
    seen: list[Any] = []

    async def record(
        details: grpc.ServerCallDetails, proceed: Callable[[], Awaitable[None]]
    ) -> None:
        seen.append((details.method, details.invocation_metadata.get_all("authorization")))
        await proceed()

    def channel_token(context: grpc.CallCredentialsContext) -> list[tuple[str, str]]:
        return [("authorization", "Bearer channel")]

    names: list[str] = []

    async def call_token(context: grpc.CallCredentialsContext) -> list[tuple[str, str]]:
        names.append(context.method_name)
        return [("authorization", "Bearer call")]

    server = grpc.Server([Echo()], interceptors=[record])
    with trio.fail_after(LIMIT):
        async with (
            trio_h2t.open_server(server, 0, host="127.0.0.1") as h2server,
            grpc.open_channel(
                "127.0.0.1",
                h2server.port,
                call_credentials=channel_token,
                insecure_call_credentials=True,
            ) as channel,
            grpc.open_channel("127.0.0.1", h2server.port) as plain,
        ):
            kw = {"credentials": call_token}
            for form in FORMS.values():
                await form(channel, kw)
            await channel.unary_unary("/test.Echo/Unary")(b"none")
            with pytest.raises(ValueError, match="insecure_call_credentials=True"):
                await plain.unary_unary("/test.Echo/Unary")(b"", credentials=call_token)
            with pytest.raises(ValueError, match="ssl_context"):
                plain.stream_stream("/test.Echo/Upper").open(credentials=call_token)
    both = ["Bearer channel", "Bearer call"]
    assert [auth for _, auth in seen] == [both] * len(FORMS) + [["Bearer channel"]]
    assert names == ["Unary"] * 3 + ["Count"] * 2 + ["Concat"] * 3 + ["Upper"] * 2


async def test_per_call_credentials_over_tls(
    server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext
) -> None:
    """On a TLS channel per-call credentials need no override, and are told the
    https service URL; a plaintext Channel(connection) refuses them."""
    seen: list[Any] = []
    urls: list[str] = []

    def token(context: grpc.CallCredentialsContext) -> list[tuple[str, str]]:
        urls.append(context.service_url)
        return [("authorization", "Bearer tls")]

    async def record(
        details: grpc.ServerCallDetails, proceed: Callable[[], Awaitable[None]]
    ) -> None:
        seen.append(details.invocation_metadata.get("authorization"))
        await proceed()

    server = grpc.Server([Echo()], interceptors=[record])
    with trio.fail_after(LIMIT):
        async with (
            trio_h2t.open_server(server, 0, host="127.0.0.1", ssl_context=server_ctx) as tls,
            trio_h2t.open_server(server, 0, host="127.0.0.1") as plain,
            grpc.open_channel("127.0.0.1", tls.port, ssl_context=client_ctx) as channel,
            trio_h2t.open_connection("127.0.0.1", plain.port) as conn,
        ):
            assert await channel.unary_unary("/test.Echo/Unary")(b"t", credentials=token) == b"t"
            bare = grpc.Channel(conn)
            with pytest.raises(ValueError, match="insecure_call_credentials"):
                await bare.stream_unary("/test.Echo/Concat")([b"x"], credentials=token)
            assert conn.statistics().streams_opened == 0
    assert seen == ["Bearer tls"]
    assert urls == [f"https://127.0.0.1:{tls.port}/test.Echo"]


# ---------------------------------------------------------------------- grpcio


async def test_retries_and_size_limit_against_grpcio_server() -> None:
    """Against grpcio's server: its trailers-only UNAVAILABLE is retried maxAttempts
    times, and maxResponseMessageBytes fails a larger response RESOURCE_EXHAUSTED."""
    config = {
        "methodConfig": [
            {"name": [{"service": "test.Echo", "method": "Status"}], "retryPolicy": POLICY},
            {"name": [{"service": "test.Echo", "method": "Big"}], "maxResponseMessageBytes": 64},
        ]
    }
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
            port = int((await _read_line(proc.stdout)).split()[1])
            try:
                async with grpc.open_channel("127.0.0.1", port, service_config=config) as channel:
                    with pytest.raises(grpc.RpcError) as info:
                        await channel.unary_unary("/test.Echo/Status")(
                            b'{"code": 14, "details": "busy"}', timeout=10
                        )
                    assert info.value.code == grpc.StatusCode.UNAVAILABLE
                    assert info.value.details == "busy (4 attempts)"
                    big = channel.unary_unary("/test.Echo/Big")
                    assert await big(b"64", timeout=10) == b"x" * 64
                    with pytest.raises(grpc.RpcError) as info:
                        await big(b"65", timeout=10)
                    assert info.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
                    assert channel.connection.statistics().streams_opened == 6
            finally:
                await proc.stdin.aclose()
