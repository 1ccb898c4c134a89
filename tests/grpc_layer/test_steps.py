"""How often a unary call's tasks are stepped (docs/wakeups.md, "Task steps per unary call").

Each step of a task is a trip through trio's scheduler. These tests count steps with a
trio instrument (counts, not time): the calling task of a unary call is stepped twice
(once to open, send and park, once when its response arrives; calls back to back share
a step: one a call), and a reader over a
socket once per read (it parks on the socket with no checkpoint before the wait).
"""

from __future__ import annotations

import collections

import trio

import trio_h2t
from trio_h2t import grpc, testing

PATH = "/bench.Bench/Unary"
LIMIT = 30
CALLS = 20


class _Steps(trio.abc.Instrument):
    """Task steps by task."""

    def __init__(self) -> None:
        self.by_task: collections.Counter[trio.lowlevel.Task] = collections.Counter()

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self.by_task[task] += 1


async def _echo(request: bytes, context: grpc.ServicerContext) -> bytes:
    return request


async def test_a_unary_call_steps_its_task_twice() -> None:
    server = grpc.Server([{PATH: grpc.unary_unary_handler(_echo)}])
    with trio.fail_after(LIMIT):
        async with testing.open_memory_server(server) as conn:
            call = grpc.Channel(conn).unary_unary(PATH)
            assert await call(b"warm") == b"warm"
            steps = _Steps()
            done = trio.Event()

            async def caller() -> None:
                for _ in range(CALLS):
                    assert await call(b"x") == b"x"
                done.set()

            async with trio.open_nursery() as nursery:
                trio.lowlevel.add_instrument(steps)
                try:
                    nursery.start_soon(caller, name="caller")
                    await done.wait()
                finally:
                    trio.lowlevel.remove_instrument(steps)
    (caller_steps,) = [n for task, n in steps.by_task.items() if task.name == "caller"]
    # Its first step starts the first call; each later one takes a response, ends
    # that call and starts the next (the last one ends the task): one a call.
    assert caller_steps == CALLS + 1


async def test_a_reader_on_a_socket_is_stepped_once_per_read() -> None:
    server = grpc.Server([{PATH: grpc.unary_unary_handler(_echo)}])
    with trio.fail_after(LIMIT):
        async with (
            trio_h2t.open_server(server, 0, host="127.0.0.1") as h2server,
            grpc.open_channel("127.0.0.1", h2server.port) as channel,
        ):
            call = channel.unary_unary(PATH)
            assert await call(b"warm") == b"warm"
            steps = _Steps()
            trio.lowlevel.add_instrument(steps)
            try:
                for _ in range(CALLS):  # one at a time: one read a response
                    assert await call(b"x") == b"x"
            finally:
                trio.lowlevel.remove_instrument(steps)
    readers = [n for task, n in steps.by_task.items() if task.name == "h2-reader"]
    assert len(readers) == 2  # the client's and the server's
    # About one step a read; a checkpoint before each wait would make it two.
    assert all(n <= CALLS + 3 for n in readers), readers
