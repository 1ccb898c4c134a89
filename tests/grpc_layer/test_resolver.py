"""DNS re-resolution of a dns: target (trio_h2t/grpc/_resolver.py): on a timer and on
a lost connection, rate-limited; appearing addresses get subchannels, vanished ones
drain. The resolver seam (open_channel(resolver=...)) returns the loopback addresses
of real trio_h2t.grpc servers."""

from __future__ import annotations

import itertools

import pytest
import trio
import trio.testing

from trio_h2t import grpc
from trio_h2t.grpc._resolver import Address, Resolver

from .test_balancer import FAST, LIMIT, RR, WHO, Backend, backends, ready, subchannel_change


class Names:
    """A resolver function whose answer the test changes; counts its calls."""

    def __init__(self, *groups: Backend) -> None:
        self.answer: list[Address] = [("127.0.0.1", b.port) for b in groups]
        self.asked: list[tuple[str, int]] = []
        self.changed = trio.Event()

    def set(self, *group: Backend) -> None:
        self.answer = [("127.0.0.1", b.port) for b in group]

    async def __call__(self, host: str, port: int) -> list[Address]:
        await trio.lowlevel.checkpoint()
        self.asked.append((host, port))
        self.changed.set()
        self.changed = trio.Event()
        return list(self.answer)


def addresses(channel: grpc.Channel) -> set[str]:
    return {address for address, _ in channel.subchannels()}


def address(backend: Backend) -> str:
    return f"127.0.0.1:{backend.port}"


async def test_new_addresses_get_calls_and_vanished_ones_drain_without_a_failed_call() -> None:
    """Resolver answers [A], then [A, B]: calls reach B; then [B]: A's subchannel is
    drained (its calls in flight finish) and removed, and no call fails."""
    failures: list[BaseException] = []
    with trio.fail_after(LIMIT):
        async with backends(2) as (group, counts):
            a, b = group
            names = Names(a)
            async with grpc.open_channel(
                "dns:///svc.test:50051",
                service_config=RR,
                backoff=FAST,
                resolver=names,
                dns_refresh_interval=0.02,
                dns_min_time_between_resolutions=0,
            ) as ch:
                assert names.asked[0] == ("svc.test", 50051)
                assert addresses(ch) == {address(a)}
                await ready(ch, 1)
                names.set(a, b)
                await ready(ch, 2)
                who = ch.unary_unary(WHO)
                for _ in range(10):
                    await who(b"")
                assert counts == {"b0": 5, "b1": 5}

                async def worker() -> None:
                    for _ in range(20):
                        try:
                            await who(b"slow")
                        except grpc.RpcError as exc:
                            failures.append(exc)

                counts.clear()
                async with trio.open_nursery() as nursery:
                    for _ in range(4):
                        nursery.start_soon(worker)
                    while not (counts["b0"] and counts["b1"]):  # calls ran on both  # noqa: ASYNC110
                        await trio.sleep(0.005)
                    names.set(b)
                    while address(a) in addresses(ch):
                        await subchannel_change(ch)
                    after = counts["b0"]
                # Only the calls in flight on A when it was removed (one a worker at
                # most) finished there afterwards; the next calls all go to B.
                assert counts["b0"] - after <= 4
                assert sum(counts.values()) == 80
                assert {await who(b"") for _ in range(5)} == {b"b1"}
    assert failures == []


async def test_a_lost_connection_asks_for_a_new_resolution() -> None:
    """With no timer, a backend's lost connection makes the channel resolve again:
    the new answer's backend gets the calls."""
    with trio.fail_after(LIMIT):
        async with backends(2) as (group, _counts):
            a, b = group
            names = Names(a)
            async with grpc.open_channel(
                "dns:///svc.test:50051",
                service_config=RR,
                backoff=FAST,
                resolver=names,
                dns_refresh_interval=None,
                dns_min_time_between_resolutions=0,
            ) as ch:
                await ready(ch, 1)
                await trio.testing.wait_all_tasks_blocked()
                assert len(names.asked) == 1  # no timer: nothing asks again
                names.set(b)
                a.stop()
                while addresses(ch) != {address(b)}:
                    await subchannel_change(ch)
                assert await ch.unary_unary(WHO)(b"", wait_for_ready=True) == b"b1"
                assert len(names.asked) >= 2


async def test_a_failed_or_empty_resolution_keeps_the_addresses() -> None:
    """A resolution that raises OSError or finds nothing leaves the subchannels as
    they were: calls go on."""
    with trio.fail_after(LIMIT):
        async with backends(1) as (group, _counts):
            calls = 0
            fifth = trio.Event()

            async def flaky(host: str, port: int) -> list[Address]:
                nonlocal calls
                calls += 1
                if calls == 5:
                    fifth.set()
                await trio.lowlevel.checkpoint()
                if calls == 1:
                    return [("127.0.0.1", group[0].port)]
                if calls % 2:
                    raise OSError("no such name")
                return []

            async with grpc.open_channel(
                "dns:///svc.test:50051",
                backoff=FAST,
                resolver=flaky,
                dns_refresh_interval=0.01,
                dns_min_time_between_resolutions=0,
            ) as ch:
                who = ch.unary_unary(WHO)
                assert await who(b"", wait_for_ready=True) == b"b0"
                await fifth.wait()
                await trio.testing.wait_all_tasks_blocked()
                assert addresses(ch) == {address(group[0])}
                assert await who(b"") == b"b0"


async def test_requests_are_rate_limited_by_the_minimum_interval(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Re-resolution requests every 10 ms for 1 s with a 0.25 s minimum between
    resolutions run at most 5 resolutions (virtual clock, no network)."""
    resolved: list[float] = []

    async def resolve(host: str, port: int) -> list[Address]:
        resolved.append(trio.current_time())
        await trio.lowlevel.checkpoint()
        return [("127.0.0.1", port)]

    resolver = Resolver("svc", 1, resolve=resolve, refresh_interval=None, min_interval=0.25)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(resolver.run, lambda found: None)
        for _ in range(100):
            resolver.request()
            await trio.sleep(0.01)
        nursery.cancel_scope.cancel()
    assert 3 <= len(resolved) <= 5
    gaps = [later - earlier for earlier, later in itertools.pairwise(resolved)]
    assert all(gap >= 0.25 - 1e-9 for gap in gaps)


async def test_the_timer_resolves_again_without_requests(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """With only the timer, resolutions come every refresh_interval (virtual clock)."""
    resolved: list[float] = []

    async def resolve(host: str, port: int) -> list[Address]:
        resolved.append(trio.current_time())
        await trio.lowlevel.checkpoint()
        return [("127.0.0.1", port)]

    start = trio.current_time()
    resolver = Resolver("svc", 1, resolve=resolve, refresh_interval=30.0, min_interval=5.0)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(resolver.run, lambda found: None)
        await trio.sleep(95)
        nursery.cancel_scope.cancel()
    assert [round(t - start) for t in resolved] == [30, 60, 90]


def test_wrong_resolver_options_raise_at_once() -> None:
    """A resolver that is not callable, or a negative / non-number interval, raises
    TypeError or ValueError naming the option, before connecting."""
    with pytest.raises(TypeError, match="resolver"):
        grpc.open_channel("dns:///svc:1", resolver=[("127.0.0.1", 1)])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="dns_refresh_interval"):
        grpc.open_channel("dns:///svc:1", dns_refresh_interval=0)
    with pytest.raises(ValueError, match="dns_min_time_between_resolutions"):
        grpc.open_channel("dns:///svc:1", dns_min_time_between_resolutions=-1)
    with pytest.raises(TypeError, match="dns_refresh_interval"):
        grpc.open_channel("dns:///svc:1", dns_refresh_interval="30s")  # type: ignore[arg-type]


async def test_a_resolver_returning_a_wrong_address_raises_type_error() -> None:
    """A resolver whose answer is not (host, port) pairs makes entering the channel
    raise TypeError naming the form."""

    async def wrong(host: str, port: int) -> list[Address]:
        await trio.lowlevel.checkpoint()
        return [("127.0.0.1", "50051")]  # type: ignore[list-item]

    with pytest.raises(TypeError, match=r"\(host, port\) pair"):
        async with grpc.open_channel("dns:///svc:1", resolver=wrong):
            pass
