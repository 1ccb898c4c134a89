"""Unit tests for ``trio_h2t._controlbuf.ControlBuffer`` (grpc-go controlbuf_test.go analogues)."""

from __future__ import annotations

import pytest
import trio
import trio.testing
from helpers import QuotaRecorder, RecordingStarter

from trio_h2t import ConnectionClosingError
from trio_h2t._controlbuf import ControlBuffer
from trio_h2t._items import ControlItem, Data, Ping, StartStream, WindowUpdate


def ping() -> Ping:
    return Ping(data=b"12345678")


def data(stream_id: int = 1, released: list[int] | None = None) -> Data:
    def release(size: int) -> None:
        if released is not None:
            released.append(stream_id)

    stream = QuotaRecorder(release)
    return Data(stream=stream, payload=b"x", end_stream=False, quota=1)  # type: ignore[arg-type]


def start(orphaned: list[BaseException]) -> StartStream:
    return StartStream(headers=[], end_stream=False, starter=RecordingStarter(orphaned.append))


def test_put_get_fifo_and_batch_swap() -> None:
    """Items come out in FIFO order; one swap starts each batch."""
    cb = ControlBuffer()
    items = [ping(), data(), ping()]
    for it in items:
        cb.put(it)
    assert cb.statistics().queued == 3
    assert cb.get_nowait() is items[0]
    stats = cb.statistics()
    assert (stats.queued, stats.in_batch, stats.batches) == (0, 2, 1)
    late = ping()
    cb.put(late)  # goes to the producers' deque, not the batch
    assert cb.statistics().queued == 1
    assert [cb.get_nowait() for _ in range(3)] == [items[1], items[2], late]
    assert cb.statistics().batches == 2
    with pytest.raises(trio.WouldBlock):
        cb.get_nowait()


def test_throttle_count_drops_on_take_not_on_swap() -> None:
    """The count covers both deques; the swap does not change it."""
    cb = ControlBuffer(throttle_limit=3)
    for _ in range(3):
        cb.put(ping())
    cb.put(data())
    assert cb.statistics().throttled == 3
    cb.get_nowait()  # swap + take one
    stats = cb.statistics()
    assert stats.in_batch == 3
    assert stats.throttled == 2


async def test_throttle_blocks_reader_until_a_get() -> None:
    """After `limit` throttled puts the reader waits; one get releases it."""
    cb = ControlBuffer(throttle_limit=5)
    for _ in range(5):
        cb.put(ping())
    released = False

    async def reader() -> None:
        nonlocal released
        await cb.wait_unthrottled()
        released = True

    async with trio.open_nursery() as nursery:
        nursery.start_soon(reader)
        await trio.testing.wait_all_tasks_blocked()
        assert not released
        assert cb.statistics().readers_waiting == 1
        cb.get_nowait()
        await trio.testing.wait_all_tasks_blocked()
        assert released


async def test_no_throttle_for_data_items() -> None:
    """limit + 10 DATA items never close the gate."""
    cb = ControlBuffer(throttle_limit=5)
    for _ in range(15):
        cb.put(data())
    with trio.testing.assert_checkpoints():
        await cb.wait_unthrottled()
    assert cb.statistics().throttled == 0


async def test_reader_rechecks_when_count_climbs_back() -> None:
    """A reader woken by a get parks again if puts refilled the gate first."""
    cb = ControlBuffer(throttle_limit=2)
    cb.put(ping())
    cb.put(ping())
    done = False

    async def reader() -> None:
        nonlocal done
        await cb.wait_unthrottled()
        done = True

    async with trio.open_nursery() as nursery:
        nursery.start_soon(reader)
        await trio.testing.wait_all_tasks_blocked()
        cb.get_nowait()  # 1 < 2: gate opens, reader is woken...
        cb.put(ping())  # ...but the count is back at the limit before it runs
        await trio.testing.wait_all_tasks_blocked()
        assert not done
        assert cb.statistics().readers_waiting == 1
        cb.get_nowait()
        await trio.testing.wait_all_tasks_blocked()
        assert done


async def test_get_blocks_and_one_wakeup_per_burst() -> None:
    """A parked consumer is woken once for a burst of puts."""
    cb = ControlBuffer()
    got: list[ControlItem] = []

    async def consumer() -> None:
        got.append(await cb.get())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(consumer)
        await trio.testing.wait_all_tasks_blocked()
        burst = [data(i) for i in range(10)]
        for it in burst:
            cb.put(it)
    assert got == [burst[0]]
    assert cb.statistics().consumer_wakeups == 1


async def test_get_checkpoints_even_when_ready() -> None:
    """get() always checkpoints, also on the fast path."""
    cb = ControlBuffer()
    cb.put(ping())
    with trio.testing.assert_checkpoints():
        await cb.get()


async def test_cancelled_get_takes_nothing() -> None:
    """A get cancelled before it runs leaves the item queued."""
    cb = ControlBuffer()
    it = ping()
    cb.put(it)
    with trio.CancelScope() as scope:
        scope.cancel()
        await cb.get()
    assert cb.statistics().items_taken == 0
    assert cb.get_nowait() is it


async def test_second_consumer_is_busy() -> None:
    """Two tasks waiting in get() is a bug: the second gets BusyResourceError."""
    cb = ControlBuffer()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(cb.get)
        await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(trio.BusyResourceError):
            await cb.get()
        nursery.cancel_scope.cancel()


def test_put_after_finish_raises_and_queues_nothing() -> None:
    """After finish(), put raises ConnectionClosingError carrying the cause."""
    cb = ControlBuffer()
    cause = RuntimeError("boom")
    cb.finish(cause)
    with pytest.raises(ConnectionClosingError) as info:
        cb.put(ping())
    assert info.value.__cause__ is cause
    assert cb.statistics().queued == 0


def test_finish_orphans_queue_once_and_is_idempotent() -> None:
    """Stream starts get on_orphaned(error), data is released, each exactly once."""
    cb = ControlBuffer()
    orphaned: list[BaseException] = []
    released: list[int] = []
    cb.put(start(orphaned))
    cb.put(data(7, released))
    cause = RuntimeError("closing")
    cb.finish(cause)
    cb.finish(RuntimeError("again"))
    assert orphaned == [cause]
    assert released == [7]


def test_nothing_handed_out_after_finish_batch_is_orphaned() -> None:
    """Items left in the consumer's batch are orphaned, never delivered."""
    cb = ControlBuffer()
    orphaned: list[BaseException] = []
    released: list[int] = []
    cb.put(ping())
    cb.put(start(orphaned))
    cb.put(data(3, released))
    cb.get_nowait()  # batch now holds the start and the data
    cause = RuntimeError("x")
    cb.finish(cause)
    assert orphaned == []  # finish leaves loopy's batch alone...
    with pytest.raises(ConnectionClosingError):
        cb.get_nowait()  # ...and loopy orphans it itself
    assert orphaned == [cause]
    assert released == [3]
    cb.discard_batch()  # idempotent
    assert orphaned == [cause]
    assert cb.statistics().in_batch == 0
    assert cb.statistics().throttled == 0


async def test_finish_wakes_get_and_readers_with_error() -> None:
    """A parked consumer and every parked reader wake with the finish error."""
    cb = ControlBuffer(throttle_limit=1)
    cb.put(WindowUpdate(stream=None, increment=1))
    cb.get_nowait()
    cb.put(ping())  # count == limit: the gate is closed
    cb.get_nowait()
    cb.put(ping())
    errors: list[BaseException] = []

    async def reader() -> None:
        try:
            await cb.wait_unthrottled()
        except ConnectionClosingError as exc:
            errors.append(exc)

    cb2 = ControlBuffer()

    async def consumer() -> None:
        try:
            await cb2.get()
        except ConnectionClosingError as exc:
            errors.append(exc)

    async with trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(reader)
        nursery.start_soon(consumer)
        await trio.testing.wait_all_tasks_blocked()
        assert cb.statistics().readers_waiting == 3
        cause = RuntimeError("bye")
        cb.finish(cause)
        cb2.finish(cause)
    assert len(errors) == 4
    assert all(e.__cause__ is cause for e in errors)


async def test_wait_unthrottled_after_finish_raises() -> None:
    """The gate is open after finish, but waiting on it reports the closing."""
    cb = ControlBuffer()
    cb.finish(RuntimeError())
    with pytest.raises(ConnectionClosingError):
        await cb.wait_unthrottled()


def test_failing_orphan_hook_does_not_stop_the_others() -> None:
    """One raising orphan hook still lets every other item be orphaned; it re-raises."""
    cb = ControlBuffer()

    def bad(_: BaseException) -> None:
        raise ValueError("hook")

    orphaned: list[BaseException] = []
    cb.put(StartStream(headers=[], end_stream=False, starter=RecordingStarter(bad)))
    cb.put(start(orphaned))
    with pytest.raises(ValueError, match="hook"):
        cb.finish(RuntimeError())
    assert len(orphaned) == 1
    assert cb.finished


def test_invalid_limit() -> None:
    """throttle_limit must be positive."""
    with pytest.raises(ValueError, match="throttle_limit"):
        ControlBuffer(throttle_limit=0)


def test_close_consumer_finishes_then_orphans_batch() -> None:
    """The consumer's exit path orphans its batch even when nobody finished yet."""
    cb = ControlBuffer()
    orphaned: list[BaseException] = []
    cb.put(ping())
    cb.put(start(orphaned))
    cb.get_nowait()  # the stream start is now in loopy's batch
    cb.discard_batch()  # before finish: a no-op, the trap close_consumer avoids
    assert orphaned == []
    cause = RuntimeError("loopy exited")
    cb.close_consumer(cause)
    assert orphaned == [cause]
    assert cb.finished
    cb.close_consumer(RuntimeError("again"))  # idempotent
    assert orphaned == [cause]


async def test_cancelled_get_counts_no_wakeup() -> None:
    """A put after a cancelled get() wakes nobody and counts no wake-up."""
    cb = ControlBuffer()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(cb.get)
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
        cb.put(ping())
    assert cb.statistics().consumer_wakeups == 0
    assert cb.statistics().queued == 1
