"""Health-checked round robin (healthCheckConfig, gRFC A17) against real trio_h2t.grpc
servers with the standard health service on loopback (trio_h2t/grpc/_health_check.py,
_balancer.py, docs/grpc-channels.md "Health checking")."""

from __future__ import annotations

import collections
import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio
import trio.testing

import trio_h2t
from trio_h2t import grpc
from trio_h2t.grpc import ConnectivityState
from trio_h2t.grpc._health_check import decode_status, encode_request
from trio_h2t.grpc.health import HealthCheckRequest, HealthCheckResponse, HealthServicer

from .test_balancer import (
    FAST,
    LIMIT,
    WHO,
    Backend,
    free_port,
    ipv4,
    ready,
    started,
    subchannel_change,
)

HEALTHY_RR: dict[str, object] = {
    "loadBalancingConfig": [{"round_robin": {}}],
    "healthCheckConfig": {"serviceName": ""},
}


class HealthBackend(Backend):
    """A Backend that also serves grpc.health.v1.Health (unless ``health`` is False)."""

    def __init__(
        self, name: str, counts: collections.Counter[str], port: int, *, health: bool = True
    ) -> None:
        super().__init__(name, counts, port)
        self.health = HealthServicer() if health else None

    def handlers(self) -> list[object]:
        return super().handlers() + ([] if self.health is None else [self.health])

    def set(self, status: str) -> None:
        assert self.health is not None
        self.health.set_status("", status)


@asynccontextmanager
async def health_backends(
    n: int, *, without_health: int = 0
) -> AsyncIterator[tuple[list[HealthBackend], collections.Counter[str]]]:
    counts: collections.Counter[str] = collections.Counter()
    group = [
        HealthBackend(f"b{i}", counts, free_port(), health=i >= without_health) for i in range(n)
    ]
    async with started(group):
        yield group, counts


def state_of(channel: grpc.Channel, backend: Backend) -> ConnectivityState:
    return dict(channel.subchannels())[f"127.0.0.1:{backend.port}"]


async def until(channel: grpc.Channel, backend: Backend, state: ConnectivityState) -> None:
    """Wait until ``backend``'s subchannel is in ``state``."""
    while state_of(channel, backend) is not state:
        await subchannel_change(channel)


async def test_not_serving_backend_leaves_the_rotation_and_comes_back() -> None:
    """3 health-checked backends: one set NOT_SERVING gets no call (its subchannel
    shows TRANSIENT_FAILURE); set SERVING again, it gets its share again."""
    with trio.fail_after(LIMIT):
        async with (
            health_backends(3) as (group, counts),
            grpc.open_channel(ipv4(group), service_config=HEALTHY_RR, backoff=FAST) as ch,
        ):
            await ready(ch, 3)
            who = ch.unary_unary(WHO)
            for _ in range(30):
                await who(b"")
            assert counts == {"b0": 10, "b1": 10, "b2": 10}
            group[1].set("NOT_SERVING")
            await until(ch, group[1], ConnectivityState.TRANSIENT_FAILURE)
            assert ch.get_state() is ConnectivityState.READY
            counts.clear()
            for _ in range(20):
                await who(b"")
            assert counts == {"b0": 10, "b2": 10}
            group[1].set("SERVING")
            await until(ch, group[1], ConnectivityState.READY)
            counts.clear()
            for _ in range(30):
                await who(b"")
            assert counts == {"b0": 10, "b1": 10, "b2": 10}


async def test_service_unknown_counts_as_unhealthy() -> None:
    """A backend whose health service does not know the configured service name
    (Watch answers SERVICE_UNKNOWN) gets no call; the others do."""
    config = {**HEALTHY_RR, "healthCheckConfig": {"serviceName": "t.T"}}
    with trio.fail_after(LIMIT):
        async with health_backends(2) as (group, counts):
            assert group[0].health is not None
            group[0].health.set_status("t.T", "SERVING")
            async with grpc.open_channel(ipv4(group), service_config=config, backoff=FAST) as ch:
                await until(ch, group[0], ConnectivityState.READY)
                await until(ch, group[1], ConnectivityState.TRANSIENT_FAILURE)
                who = ch.unary_unary(WHO)
                for _ in range(10):
                    await who(b"")
                assert counts == {"b0": 10}


async def test_backend_without_health_service_still_gets_calls() -> None:
    """A backend without the health service (Watch answers UNIMPLEMENTED) counts as
    healthy: it gets its share of calls beside a health-checked one."""
    with trio.fail_after(LIMIT):
        async with (
            health_backends(2, without_health=1) as (group, counts),
            grpc.open_channel(ipv4(group), service_config=HEALTHY_RR, backoff=FAST) as ch,
        ):
            await ready(ch, 2)
            who = ch.unary_unary(WHO)
            for _ in range(20):
                await who(b"")
            assert counts == {"b0": 10, "b1": 10}


async def test_all_not_serving_fails_unavailable_and_wait_for_ready_waits() -> None:
    """With every backend NOT_SERVING a call fails UNAVAILABLE at once (the health
    status in its details); a wait_for_ready call waits until one serves again."""
    with trio.fail_after(LIMIT):
        async with (
            health_backends(2) as (group, counts),
            grpc.open_channel(ipv4(group), service_config=HEALTHY_RR, backoff=FAST) as ch,
        ):
            await ready(ch, 2)
            for b in group:
                b.set("NOT_SERVING")
            state = ch.get_state()
            while state is not ConnectivityState.TRANSIENT_FAILURE:
                state = await ch.wait_for_state_change(state)
            who = ch.unary_unary(WHO)
            with pytest.raises(grpc.RpcError) as info:
                await who(b"")
            assert info.value.code == grpc.StatusCode.UNAVAILABLE
            assert "NOT_SERVING" in str(info.value.details)
            assert counts == {}
            answer: list[bytes] = []
            async with trio.open_nursery() as nursery:

                async def call() -> None:
                    answer.append(await who(b"", wait_for_ready=True, timeout=5))

                nursery.start_soon(call)
                await trio.testing.wait_all_tasks_blocked()
                assert answer == []
                group[1].set("SERVING")
            assert answer == [b"b1"]


async def test_a_watch_that_ends_is_restarted() -> None:
    """A Watch that the server ends (its health servicer's graceful shutdown sends
    NOT_SERVING, then OK) is made again (CONNECTING, then the new answer); the
    backend stays out of the rotation meanwhile."""
    with trio.fail_after(LIMIT):
        async with (
            health_backends(2) as (group, counts),
            grpc.open_channel(ipv4(group), service_config=HEALTHY_RR, backoff=FAST) as ch,
        ):
            await ready(ch, 2)
            health = group[0].health
            assert health is not None
            health.enter_graceful_shutdown()  # every Watch: NOT_SERVING, then ends OK
            await until(ch, group[0], ConnectivityState.TRANSIENT_FAILURE)
            # The restarted Watch sees NOT_SERVING (changes are ignored now) ...
            await until(ch, group[0], ConnectivityState.CONNECTING)
            await until(ch, group[0], ConnectivityState.TRANSIENT_FAILURE)
            who = ch.unary_unary(WHO)
            for _ in range(4):
                await who(b"")
            assert counts == {"b1": 4}


async def test_pick_first_ignores_health_checking() -> None:
    """pick_first with a healthCheckConfig sends calls to a NOT_SERVING backend, as
    grpc's pick_first does (it never health-checks)."""
    config = {"healthCheckConfig": {"serviceName": ""}}
    with trio.fail_after(LIMIT):
        async with health_backends(1) as (group, _counts):
            group[0].set("NOT_SERVING")
            async with grpc.open_channel(ipv4(group), service_config=config, backoff=FAST) as ch:
                assert await ch.unary_unary(WHO)(b"", wait_for_ready=True) == b"b0"


def test_health_messages_match_protobuf() -> None:
    """The hand-rolled HealthCheckRequest / HealthCheckResponse codec agrees with the
    generated protobuf messages, for every status and unknown fields."""
    for service in ("", "t.T", "ü" * 200):
        assert encode_request(service) == HealthCheckRequest(service=service).SerializeToString()
    for status in range(4):
        data = HealthCheckResponse(status=status).SerializeToString()  # type: ignore[arg-type]
        assert decode_status(data) == status
    # an unknown length-delimited field 5 and fixed32 field 6 are skipped
    assert decode_status(b"\x2a\x02ab\x35\x00\x00\x00\x00\x08\x02") == 2
    with pytest.raises(ValueError, match="varint"):
        decode_status(b"\x08")


async def test_a_failing_watch_is_retried_with_backoff_and_keeps_the_backend_out() -> None:
    """A backend whose Watch fails (UNAVAILABLE, no answer) stays TRANSIENT_FAILURE
    and out of the rotation; the Watch is made again after the backoff (a handful of
    attempts in 0.6 s with 50..200 ms waits, not a spin)."""
    attempts: list[float] = []

    async def failing_watch(request: bytes, context: grpc.ServicerContext) -> AsyncIterator[bytes]:
        attempts.append(trio.current_time())
        raise grpc.RpcError(grpc.StatusCode.UNAVAILABLE, "health store down")
        yield b""  # pragma: no cover (makes this an async generator)

    with trio.fail_after(LIMIT):
        async with health_backends(1) as (group, counts):
            sick = Backend("sick", counts, free_port())
            server = grpc.Server(
                [
                    {
                        WHO: grpc.unary_unary_handler(sick.who),
                        "/grpc.health.v1.Health/Watch": grpc.unary_stream_handler(failing_watch),
                    }
                ]
            )
            async with trio_h2t.open_server(server, sick.port, host="127.0.0.1"):
                target = f"{ipv4(group)},127.0.0.1:{sick.port}"
                async with grpc.open_channel(target, service_config=HEALTHY_RR, backoff=FAST) as ch:
                    await until(ch, group[0], ConnectivityState.READY)
                    await until(ch, sick, ConnectivityState.TRANSIENT_FAILURE)
                    who = ch.unary_unary(WHO)
                    for _ in range(6):
                        await who(b"")
                    await trio.sleep(0.6)
                    assert state_of(ch, sick) is not ConnectivityState.READY
            assert counts == {"b0": 6}
    assert 3 <= len(attempts) <= 12
    gaps = [later - earlier for earlier, later in itertools.pairwise(attempts)]
    assert all(gap >= 0.03 for gap in gaps)
