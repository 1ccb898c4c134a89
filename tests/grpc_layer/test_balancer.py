"""Target channels: subchannels, pick_first / round_robin, connectivity states,
wait_for_ready, and GOAWAY drains, against real trio_h2t.grpc servers on loopback
(trio_h2t/grpc/_balancer.py, docs/grpc-channels.md)."""

from __future__ import annotations

import collections
import os
import socket
import tempfile
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import pytest
import trio
import trio.testing

import trio_h2t
from trio_h2t import grpc
from trio_h2t.grpc import ConnectivityState

LIMIT = 10
FAST = grpc.ConnectionBackoff(
    initial_backoff=0.05, multiplier=1.6, jitter=0.2, max_backoff=0.2, min_connect_timeout=1.0
)
WHO = "/t.T/Who"
RR: dict[str, object] = {"loadBalancingConfig": [{"round_robin": {}}]}


def free_port() -> int:
    """A TCP port on 127.0.0.1 free at the time of asking."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Backend:
    """One gRPC server on 127.0.0.1 that answers /t.T/Who with its name and counts
    the calls it answered; ``stop`` drains it (cancelling serve_tcp: GOAWAY)."""

    def __init__(self, name: str, counts: collections.Counter[str], port: int) -> None:
        self.name = name
        self.port = port
        self.counts = counts
        self.scope: trio.CancelScope | None = None

    async def who(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        if request == b"slow":
            await trio.sleep(0.05)
        self.counts[self.name] += 1
        return self.name.encode()

    def handlers(self) -> list[object]:
        """What its grpc.Server serves."""
        return [{WHO: grpc.unary_unary_handler(self.who)}]

    async def start(self, nursery: trio.Nursery) -> None:
        server = grpc.Server(self.handlers())
        scope = self.scope = trio.CancelScope()

        async def run(task_status: trio.TaskStatus[trio_h2t.H2Server]) -> None:
            with scope:
                await trio_h2t.serve_tcp(
                    server, self.port, host="127.0.0.1", task_status=task_status
                )

        await nursery.start(run)

    def stop(self) -> None:
        assert self.scope is not None
        self.scope.cancel()


@asynccontextmanager
async def started(group: Sequence[Backend]) -> AsyncIterator[None]:
    """Every backend of ``group`` serving, one after the other, until the block ends."""
    async with trio.open_nursery() as nursery:
        for b in group:
            await b.start(nursery)
        yield
        nursery.cancel_scope.cancel()


@asynccontextmanager
async def backends(n: int) -> AsyncIterator[tuple[list[Backend], collections.Counter[str]]]:
    counts: collections.Counter[str] = collections.Counter()
    group = [Backend(f"b{i}", counts, free_port()) for i in range(n)]
    async with started(group):
        yield group, counts


def ipv4(group: Sequence[Backend]) -> str:
    return "ipv4:" + ",".join(f"127.0.0.1:{b.port}" for b in group)


async def ready(channel: grpc.Channel, n: int) -> None:
    """Wait until ``n`` subchannels are READY."""
    while sum(s is ConnectivityState.READY for _, s in channel.subchannels()) < n:
        await subchannel_change(channel)


async def subchannel_change(channel: grpc.Channel) -> None:
    """Wait for the next state change of any of the channel's subchannels."""
    await channel.wait_for_subchannel_change()


async def test_round_robin_spreads_calls_evenly_and_skips_a_stopped_backend() -> None:
    """Round robin over 3 READY backends answers 30 calls 10 each; with one stopped,
    the next calls go only to the other two and none fails."""
    with trio.fail_after(LIMIT):
        async with (
            backends(3) as (group, counts),
            grpc.open_channel(ipv4(group), service_config=RR, backoff=FAST) as ch,
        ):
            await ready(ch, 3)
            who = ch.unary_unary(WHO)
            for _ in range(30):
                await who(b"")
            assert counts == {"b0": 10, "b1": 10, "b2": 10}
            group[1].stop()
            while dict(ch.subchannels())[f"127.0.0.1:{group[1].port}"] is ConnectivityState.READY:
                await subchannel_change(ch)
            counts.clear()
            for _ in range(20):
                await who(b"")
            assert counts == {"b0": 10, "b2": 10}


async def test_pick_first_sticks_to_the_first_and_fails_over() -> None:
    """pick_first sends every call to the first READY backend; once it stops, the
    calls go to the next one without failing."""
    with trio.fail_after(LIMIT):
        async with (
            backends(2) as (group, counts),
            grpc.open_channel(ipv4(group), backoff=FAST) as ch,
        ):
            await ready(ch, 2)
            who = ch.unary_unary(WHO)
            assert {await who(b"") for _ in range(10)} == {b"b0"}
            group[0].stop()
            answers = [await who(b"") for _ in range(10)]
            assert answers[-1] == b"b1"
            assert counts["b0"] + counts["b1"] == 20


async def test_a_draining_backend_loses_no_call() -> None:
    """Calls running from 5 tasks while one of 3 backends drains (GOAWAY): zero
    failed calls, each answered once, and the drained backend's later share moves
    to the others."""
    failures: list[BaseException] = []
    done = 0
    with trio.fail_after(LIMIT):
        async with (
            backends(3) as (group, counts),
            grpc.open_channel(ipv4(group), service_config=RR, backoff=FAST) as ch,
        ):
            await ready(ch, 3)
            who = ch.unary_unary(WHO)

            async def worker(n: int) -> None:
                nonlocal done
                for _ in range(n):
                    try:
                        await who(b"slow")
                        done += 1
                    except grpc.RpcError as exc:
                        failures.append(exc)

            async with trio.open_nursery() as nursery:
                for _ in range(5):
                    nursery.start_soon(worker, 20)
                await trio.sleep(0.2)
                group[0].stop()
    assert failures == []
    assert done == 100
    assert sum(counts.values()) == 100


async def test_without_backends_a_call_fails_unavailable_fast_and_wait_for_ready_waits() -> None:
    """With every backend down a call fails UNAVAILABLE at once (the connect error in
    its details); with wait_for_ready it waits, inside its deadline, for the backend
    that starts later."""
    port = free_port()
    counts: collections.Counter[str] = collections.Counter()
    with trio.fail_after(LIMIT):
        async with (
            trio.open_nursery() as nursery,
            grpc.open_channel(f"ipv4:127.0.0.1:{port}", backoff=FAST) as ch,
        ):
            who = ch.unary_unary(WHO)
            while ch.get_state() is not ConnectivityState.TRANSIENT_FAILURE:
                await ch.wait_for_state_change(ch.get_state())
            with trio.fail_after(1):
                with pytest.raises(grpc.RpcError) as info:
                    await who(b"")
            assert info.value.code == grpc.StatusCode.UNAVAILABLE
            assert "cannot connect" in str(info.value.details)
            backend = Backend("late", counts, port)

            async def start_later() -> None:
                await trio.sleep(0.2)
                await backend.start(nursery)

            nursery.start_soon(start_later)
            assert await who(b"", wait_for_ready=True, timeout=5) == b"late"
            nursery.cancel_scope.cancel()


async def test_connectivity_states_in_order() -> None:
    """A channel goes IDLE or CONNECTING, then READY, then SHUTDOWN once left."""
    seen: list[ConnectivityState] = []
    with trio.fail_after(LIMIT):
        async with backends(1) as (group, _):
            async with grpc.open_channel(ipv4(group), backoff=FAST) as ch:
                state = ch.get_state()
                seen.append(state)
                while state is not ConnectivityState.READY:
                    state = await ch.wait_for_state_change(state)
                    seen.append(state)
            seen.append(ch.get_state())
    assert seen[0] in (ConnectivityState.IDLE, ConnectivityState.CONNECTING)
    assert seen[-2:] == [ConnectivityState.READY, ConnectivityState.SHUTDOWN]
    assert ConnectivityState.TRANSIENT_FAILURE not in seen


async def test_dns_target_reaches_every_localhost_record() -> None:
    """dns:///localhost:PORT resolves through trio (one subchannel per record) and
    reaches the server; :authority is the target's name."""
    seen: list[str] = []

    async def who(request: bytes, context: grpc.ServicerContext) -> bytes:
        seen.append(context.request.authority)
        return b"ok"

    server = grpc.Server([{WHO: grpc.unary_unary_handler(who)}])
    infos = socket.getaddrinfo("localhost", 0, type=socket.SOCK_STREAM)
    with trio.fail_after(LIMIT):
        async with trio_h2t.open_server(server, 0, host="127.0.0.1") as h2server:
            target = f"dns:///localhost:{h2server.port}"
            async with grpc.open_channel(target, backoff=FAST) as ch:
                assert len(ch.subchannels()) == len({i[4][0] for i in infos})
                assert await ch.unary_unary(WHO)(b"", wait_for_ready=True) == b"ok"
    assert seen == [f"localhost:{h2server.port}"]


async def test_unix_target() -> None:
    """unix:PATH reaches a server on a Unix socket in a temporary folder."""
    server = grpc.Server([{WHO: grpc.unary_unary_handler(_ok)}])
    with tempfile.TemporaryDirectory() as tmp, trio.fail_after(LIMIT):
        path = os.path.join(tmp, "s")
        sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
        await sock.bind(path)
        sock.listen()
        async with trio.open_nursery() as nursery:
            await nursery.start(trio_h2t.serve_listeners, server, [trio.SocketListener(sock)])
            async with grpc.open_channel(f"unix:{path}", backoff=FAST) as ch:
                assert await ch.unary_unary(WHO)(b"", wait_for_ready=True) == b"ok"
            nursery.cancel_scope.cancel()


async def _ok(request: bytes, context: grpc.ServicerContext) -> bytes:
    return b"ok"


def test_bad_lb_policy_and_target_raise_before_connecting() -> None:
    """A malformed target raises ValueError at once, a wrong backoff TypeError."""
    with pytest.raises(ValueError, match="gRPC target"):
        grpc.open_channel("ipv4:nope")
    with pytest.raises(TypeError, match="ConnectionBackoff"):
        grpc.open_channel("localhost:1", backoff=1.0)  # type: ignore[arg-type]


def test_keepalive_options_map_onto_the_transport_config() -> None:
    """keepalive_time / keepalive_timeout / keepalive_permit_without_calls become
    TransportConfig's keepalive fields; a value the config refuses raises at once."""
    from trio_h2t.grpc._client import _keepalive_config

    config = _keepalive_config(None, 30.0, 5.0, True)
    assert config is not None
    assert (
        config.keepalive_time,
        config.keepalive_timeout,
        config.keepalive_permit_without_stream,
    ) == (30.0, 5.0, True)
    assert _keepalive_config(None, None, None, None) is None
    with pytest.raises(ValueError, match="keepalive_time"):
        grpc.open_channel("localhost:1", keepalive_time=0.001)


async def test_ipv6_target_reaches_a_server_on_loopback() -> None:
    """ipv6:[::1]:PORT reaches a server listening on ::1; :authority is [::1]:PORT."""
    seen: list[str] = []

    async def who(request: bytes, context: grpc.ServicerContext) -> bytes:
        seen.append(context.request.authority)
        return b"six"

    server = grpc.Server([{WHO: grpc.unary_unary_handler(who)}])
    with trio.fail_after(LIMIT):
        async with trio_h2t.open_server(server, 0, host="::1") as h2server:
            target = f"ipv6:[::1]:{h2server.port}"
            async with grpc.open_channel(target, backoff=FAST) as ch:
                assert await ch.unary_unary(WHO)(b"", wait_for_ready=True) == b"six"
    assert seen == [f"[::1]:{h2server.port}"]


async def _states_until(
    channel: grpc.Channel, last: ConnectivityState, goal: ConnectivityState
) -> list[ConnectivityState]:
    """The channel's states after ``last``, up to and including ``goal``."""
    seen = []
    state = last
    while state is not goal:
        state = await channel.wait_for_state_change(state)
        seen.append(state)
    return seen


async def test_pick_first_goes_idle_after_a_lost_connection_and_reconnects_on_a_call() -> None:
    """pick_first: once its backend's connection ends the channel goes IDLE and
    stays IDLE (no reconnect on its own); the next call connects again."""
    counts: collections.Counter[str] = collections.Counter()
    port = free_port()
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            first = Backend("first", counts, port)
            await first.start(nursery)
            async with grpc.open_channel(f"ipv4:127.0.0.1:{port}", backoff=FAST) as ch:
                await ready(ch, 1)
                first.stop()
                assert await _states_until(ch, ConnectivityState.READY, ConnectivityState.IDLE) == [
                    ConnectivityState.IDLE
                ]
                await Backend("second", counts, port).start(nursery)
                await trio.testing.wait_all_tasks_blocked()
                assert ch.get_state() is ConnectivityState.IDLE
                assert ch.subchannels() == [(f"127.0.0.1:{port}", ConnectivityState.IDLE)]
                assert await ch.unary_unary(WHO)(b"") == b"second"
                assert ch.get_state() is ConnectivityState.READY
            nursery.cancel_scope.cancel()


async def test_get_state_try_to_connect_leaves_idle() -> None:
    """pick_first in IDLE: get_state(try_to_connect=True) answers IDLE (as grpcio's)
    and starts connecting: CONNECTING, then READY, without a call."""
    counts: collections.Counter[str] = collections.Counter()
    port = free_port()
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            first = Backend("first", counts, port)
            await first.start(nursery)
            async with grpc.open_channel(f"ipv4:127.0.0.1:{port}", backoff=FAST) as ch:
                await ready(ch, 1)
                first.stop()
                await _states_until(ch, ConnectivityState.READY, ConnectivityState.IDLE)
                await Backend("second", counts, port).start(nursery)
                assert ch.get_state() is ConnectivityState.IDLE
                assert ch.get_state(try_to_connect=True) is ConnectivityState.IDLE
                seen = await _states_until(ch, ConnectivityState.IDLE, ConnectivityState.READY)
                assert seen == [ConnectivityState.CONNECTING, ConnectivityState.READY]
                assert counts == {}
            nursery.cancel_scope.cancel()


async def test_round_robin_reconnects_at_once_without_a_call() -> None:
    """round_robin: a subchannel whose connection ended connects again on its own
    (with backoff while the backend is down), never waiting in IDLE."""
    counts: collections.Counter[str] = collections.Counter()
    port = free_port()
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            first = Backend("first", counts, port)
            await first.start(nursery)
            target = f"ipv4:127.0.0.1:{port}"
            async with grpc.open_channel(target, service_config=RR, backoff=FAST) as ch:
                await ready(ch, 1)
                first.stop()
                seen = await _states_until(
                    ch, ConnectivityState.READY, ConnectivityState.TRANSIENT_FAILURE
                )
                await Backend("second", counts, port).start(nursery)
                seen += await _states_until(
                    ch, ConnectivityState.TRANSIENT_FAILURE, ConnectivityState.READY
                )
                assert ConnectivityState.IDLE not in seen
                assert seen[0] is ConnectivityState.CONNECTING
                assert counts == {}
            nursery.cancel_scope.cancel()


async def test_wait_for_subchannel_change_on_a_single_connection_channel() -> None:
    """Channel(connection).wait_for_subchannel_change() returns once the one
    connection stops taking streams (its only subchannel goes SHUTDOWN)."""
    server = grpc.Server([{WHO: grpc.unary_unary_handler(_ok)}])
    with trio.fail_after(LIMIT):
        async with (
            trio_h2t.open_server(server, 0, host="127.0.0.1") as h2server,
            trio_h2t.open_connection("127.0.0.1", h2server.port) as conn,
        ):
            channel = grpc.Channel(conn)
            assert channel.subchannels()[0][1] is ConnectivityState.READY
            async with trio.open_nursery() as nursery:
                nursery.start_soon(channel.wait_for_subchannel_change)
                await trio.testing.wait_all_tasks_blocked()
                await conn.aclose()
            assert channel.subchannels()[0][1] is ConnectivityState.SHUTDOWN
