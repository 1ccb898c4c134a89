"""What a unary call keeps for the cyclic collector while it is in flight.

CPython's full collections pause a process for the time it takes to walk every
tracked object, and they come more often the more objects each call in flight keeps
(objects alive at a young collection are promoted): that is what W1's p99 latency
against grpclib is made of (``benchmarks/README.md``, "Why W1's p99 misses"). These
tests pin the layer's per-call figure, counted with ``gc.get_objects()`` (memory,
not timing), so that it cannot creep back, and check that a call leaves no cyclic
garbage (which only the collector could free).
"""

from __future__ import annotations

import gc

import trio
import trio.testing

import trio_h2t
from trio_h2t import grpc

PATH = "/bench.Bench/Unary"
LIMIT = 30

#: Both sides of one unary call, the handler parked with the request read:
#: 45 when this was written (57 before; the hand-framed floor over the same
#: transport, ``benchmarks/grpc_icount.py --objects``, keeps 42). Some headroom for
#: Python and trio versions; an object more per call in the layer should be a choice.
MAX_OBJECTS_PER_CALL = 48


async def _tracked_in_flight(n: int, *, call_timeout: float | None = None) -> int:
    """Objects the collector tracks with ``n`` unary calls in flight, every handler
    parked (its request read, no response yet)."""
    release = trio.Event()
    parked = 0

    async def echo(request: bytes, context: grpc.ServicerContext) -> bytes:
        nonlocal parked
        parked += 1
        await release.wait()
        return request

    server = grpc.Server([{PATH: grpc.unary_unary_handler(echo)}])
    client_side, server_side = trio.testing.memory_stream_pair()
    config = trio_h2t.TransportConfig(max_concurrent_streams=n + 1)
    found = -1
    async with trio.open_nursery() as nursery:
        await nursery.start(
            lambda task_status: trio_h2t.serve_connection(
                server_side, server, config=config, task_status=task_status
            )
        )
        async with trio_h2t.open_client_connection(client_side) as conn:
            call = grpc.Channel(conn).unary_unary(PATH)

            async def client() -> None:
                assert await call(b"x", timeout=call_timeout) == b"x"

            async with trio.open_nursery() as workers:
                # One call first: whatever is built once (header caches) is built before.
                workers.start_soon(client)
                await trio.testing.wait_all_tasks_blocked()
                for _ in range(n - 1):
                    workers.start_soon(client)
                while parked < n:
                    await trio.testing.wait_all_tasks_blocked()
                await trio.testing.wait_all_tasks_blocked()
                gc.collect()
                found = len(gc.get_objects())
                release.set()
        nursery.cancel_scope.cancel()
    return found


async def _per_call(call_timeout: float | None = None) -> float:
    small = await _tracked_in_flight(20, call_timeout=call_timeout)
    large = await _tracked_in_flight(220, call_timeout=call_timeout)
    return (large - small) / 200


# No trio.fail_after around these two: its deadline would go out as grpc-timeout and
# measure the path with deadlines (pytest-timeout bounds a hang).


async def test_unary_call_in_flight_keeps_few_tracked_objects() -> None:
    per_call = await _per_call()
    assert 30 <= per_call <= MAX_OBJECTS_PER_CALL, per_call


async def test_unary_call_with_timeout_keeps_its_scopes_only() -> None:
    """With a ``timeout`` a call has a deadline scope on each side (the client's own,
    the server's from ``grpc-timeout``: a CancelScope, its CancelStatus and their two
    sets each) and a header block of its own (not the cached one): 56 when this was
    written, against 45; no other path's coroutines and context managers."""
    plain = await _per_call()
    timed = await _per_call(call_timeout=LIMIT)
    assert plain < timed <= plain + 12, (plain, timed)


async def test_unary_calls_leave_no_cyclic_garbage() -> None:
    async def echo(request: bytes, context: grpc.ServicerContext) -> bytes:
        return request

    server = grpc.Server([{PATH: grpc.unary_unary_handler(echo)}])
    client_side, server_side = trio.testing.memory_stream_pair()
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio_h2t.serve_connection, server_side, server)
            async with trio_h2t.open_client_connection(client_side) as conn:
                call = grpc.Channel(conn).unary_unary(PATH)

                async def worker(calls: int) -> None:
                    for _ in range(calls):
                        assert await call(b"x") == b"x"

                async with trio.open_nursery() as workers:  # warm-up
                    for _ in range(10):
                        workers.start_soon(worker, 2)
                gc.collect()
                gc.disable()
                try:
                    async with trio.open_nursery() as workers:
                        for _ in range(10):
                            workers.start_soon(worker, 20)
                    unreachable = gc.collect()
                finally:
                    gc.enable()
            nursery.cancel_scope.cancel()
    # 200 calls: garbage per call would be hundreds; a few are the nurseries' own.
    assert unreachable < 50, unreachable
