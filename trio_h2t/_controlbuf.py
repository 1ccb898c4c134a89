"""The control buffer between stream tasks (producers) and loopy (the consumer).

Theory of operation
-------------------
After the preface (written by ``ConnectionCore.send_preface`` before loopy starts),
every frame trio_h2t writes reaches the socket through a control item (``_items.py``)
that some task ``put()``s here. Exactly one task, loopy, takes items out and writes
the bytes. Most items are turned into frames by loopy; a ``PeerResponse`` instead
flushes a frame the reader already had h2 frame (a SETTINGS or PING ACK, the
RST_STREAM of a refused stream), so it reaches the wire and counts toward the gate.

Two deques::

    producers --put()--> [ queue ]  --swap when batch is empty-->  [ batch ] --get()--> loopy
                             |                                        |
                             +------ throttled count covers both -----+
                                              |
                     reader --wait_unthrottled()--> gate: closed iff count >= limit
                                                         and not finished

- ``put`` appends to ``queue`` and never blocks. If loopy is parked in ``get`` it is
  woken, once: the flag that says "the consumer is waiting" is cleared by the first
  put, so the rest of a burst of puts wakes nobody.
- ``get_nowait`` (and ``poll``, which says None instead of raising) serves from
  ``batch``. When the batch is empty it *swaps* the two deques (O(1), nothing
  allocated) and serves from what was the queue. Producers keep appending to the
  (now empty) other deque without touching loopy's batch.
- Throttled items are counted from ``put`` until loopy *takes* them (``get``), in
  either deque; the swap changes nothing about the count. Readers call
  ``wait_unthrottled`` before each socket read, so a peer that makes us queue
  responses faster than loopy writes them is stopped, not buffered without bound.
- The gate is not a stored object that can be replaced while a reader waits on it:
  it is the predicate ``count >= limit and not finished``, re-evaluated from the
  current count after every decrement and at ``finish``. Whenever it is false, every
  parked reader is woken (``ParkingLot.unpark_all``); each one re-checks on waking.
  Waking is therefore idempotent and level-triggered, so no reader can be left parked
  on a gate nobody will open (the bug an edge-triggered create/close design invites).
- ``finish(error)`` closes the buffer: later puts raise ``ConnectionClosingError``,
  nothing more is handed out (not even what is left in loopy's batch), and everything
  still queued is orphaned exactly once (``ControlItem.orphan``). ``finish`` only
  touches the producers' deque; loopy orphans its own batch with ``discard_batch()``
  (``get``/``get_nowait`` after finish do it too), so no task ever touches state
  another task owns.

Invariants (checked by ``tests/test_controlbuf_stateful.py`` after every step):

1. ``throttled == number of throttled items in queue + batch``.
2. The gate is closed iff ``throttled >= limit and not finished``; no reader stays
   parked while it is open.
3. Every item put is handed out exactly once or orphaned exactly once, in FIFO order.
4. After ``finish`` nothing is handed out.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import final

import trio

from ._exceptions import ConnectionClosingError
from ._items import ControlItem

__all__ = ["DEFAULT_THROTTLE_LIMIT", "ControlBuffer", "ControlBufferStatistics"]

#: grpc-go's ``maxQueuedControlBufferItems`` (v1.82.1+): 100 throttled items.
DEFAULT_THROTTLE_LIMIT = 100


@final
@dataclass(frozen=True, slots=True)
class ControlBufferStatistics:
    """A snapshot of a :class:`ControlBuffer` (see ``ControlBuffer.statistics``)."""

    queued: int  #: items in the producers' queue
    in_batch: int  #: items in loopy's current batch, not yet taken
    throttled: int  #: throttled items in both, not yet taken
    throttle_limit: int
    finished: bool
    batches: int  #: swaps done (batches started)
    items_taken: int  #: items handed to the consumer
    consumer_wakeups: int  #: times a put woke a parked consumer
    throttle_waits: int  #: times a reader parked on the gate
    readers_waiting: int  #: readers parked on the gate now


@final
class ControlBuffer:
    """A multi-producer, single-consumer queue of control items, drained in batches.

    Producers call :meth:`put` (synchronous, never blocks). The single consumer (loopy)
    calls :meth:`get` / :meth:`get_nowait`. Readers call :meth:`wait_unthrottled`
    before each socket read. Any task may call :meth:`finish`.
    """

    __slots__ = (
        "_abort_get",
        "_batch",
        "_batches",
        "_consumer",
        "_error",
        "_finished",
        "_gate_lot",
        "_limit",
        "_queue",
        "_taken",
        "_throttle_waits",
        "_throttled",
        "_wakeups",
    )

    def __init__(self, *, throttle_limit: int = DEFAULT_THROTTLE_LIMIT) -> None:
        if throttle_limit < 1:
            raise ValueError(f"throttle_limit must be >= 1, not {throttle_limit}")
        self._limit = throttle_limit  # immutable after init
        # shared: producers append; the consumer swaps it with _batch (no await between).
        self._queue: deque[ControlItem] = deque()
        self._batch: deque[ControlItem] = deque()  # owner: consumer
        # shared: +1 in put, -1 when the consumer takes or discards a throttled item.
        # Invariant: == throttled items in _queue + _batch.
        self._throttled = 0
        self._finished = False  # shared: set once, by finish()
        self._error: BaseException | None = None  # immutable once _finished is set
        # shared: the consumer sets it when it parks in get(); whoever wakes it (the
        # first put of a burst, finish, or its cancellation) clears it, so the rest
        # of the burst wakes nobody. A waiter slot, not a ParkingLot: a park built a
        # closure and a coroutine, an unpark a list and a generator, once per batch
        # (once per write in ping-pong traffic; docs/architecture.md, "Allocations
        # per write").
        self._consumer: trio.lowlevel.Task | None = None
        # The abort callback of that wait, bound once (immutable after init).
        self._abort_get = self._consumer_aborted
        self._gate_lot = trio.lowlevel.ParkingLot()  # immutable after init; readers parked
        # Statistics counters; each is only ever incremented.
        self._batches = 0  # owner: consumer
        self._taken = 0  # owner: consumer
        self._wakeups = 0  # shared: producers, in put (any task)
        self._throttle_waits = 0  # owner: readers (wait_unthrottled)

    # ------------------------------------------------------------------ producers

    def put(self, item: ControlItem) -> None:
        """Queue ``item`` for loopy. Synchronous: never blocks, never checkpoints.

        Raises:
            ConnectionClosingError: if :meth:`finish` was called (``__cause__`` is the
                error given to ``finish``). Nothing is queued and ``item`` is *not*
                orphaned: the caller still owns it.
        """
        if self._finished:
            raise self._closing_error()
        self._queue.append(item)
        if item.throttled:
            self._throttled += 1
        consumer = self._consumer
        if consumer is not None:
            # First put since the consumer parked: wake it. Later puts in the same
            # burst find the slot empty and wake nobody (one wake-up per batch).
            self._consumer = None
            self._wakeups += 1
            trio.lowlevel.reschedule(consumer)

    # ------------------------------------------------------------------ consumer

    def get_nowait(self) -> ControlItem:
        """Take the next item (consumer only). Synchronous, never checkpoints.

        Raises:
            trio.WouldBlock: if both the batch and the queue are empty.
            ConnectionClosingError: after :meth:`finish`; the items left in the batch
                are orphaned first (as :meth:`discard_batch` does).
        """
        item = self.poll()
        if item is None:
            raise trio.WouldBlock
        return item

    def poll(self) -> ControlItem | None:
        """:meth:`get_nowait`, but None when both deques are empty.

        Loopy's drain ends on an empty buffer once or twice per batch: a raised
        ``WouldBlock`` allocated an exception and a traceback entry per frame there.

        Raises:
            ConnectionClosingError: as :meth:`get_nowait`.
        """
        if self._finished:
            self.discard_batch()
            raise self._closing_error()
        batch = self._batch
        if not batch:
            if not self._queue:
                return None
            # The swap: the producers' deque becomes the batch and the empty batch
            # becomes the producers' deque. O(1), nothing allocated.
            self._batch, self._queue = self._queue, batch
            batch = self._batch
            self._batches += 1
        item = batch.popleft()
        self._taken += 1
        if item.throttled:
            self._throttled -= 1
            self._update_gate()
        return item

    async def get(self) -> ControlItem:
        """Take the next item, waiting while both deques are empty (consumer only).

        Checkpoint: always (also when an item is ready at once).

        On cancellation: nothing was taken; the item stays queued for the next call.

        Raises:
            ConnectionClosingError: after :meth:`finish`, also if it is called while
                this task waits.
            trio.BusyResourceError: if another task is already waiting in ``get``.
        """
        if self._batch or self._queue or self._finished:
            await trio.lowlevel.checkpoint_if_cancelled()
            item = self.get_nowait()
            await trio.lowlevel.cancel_shielded_checkpoint()
            return item
        if self._consumer is not None:
            raise trio.BusyResourceError("another task is already waiting in get()")
        # No check of our own before parking: trio delivers a cancellation that is
        # already pending as the task parks (``wait_task_rescheduled`` calls the
        # abort function at once), and nothing was taken.
        while True:
            self._consumer = trio.lowlevel.current_task()
            await trio.lowlevel.wait_task_rescheduled(self._abort_get)
            if self._batch or self._queue or self._finished:
                return self.get_nowait()

    def _consumer_aborted(self, _: object) -> trio.lowlevel.Abort:
        # The consumer was cancelled while parked in get(): nothing was taken.
        self._consumer = None
        return trio.lowlevel.Abort.SUCCEEDED

    def discard_batch(self) -> None:
        """Orphan every item left in the consumer's batch (consumer only, after finish).

        ``finish`` never touches loopy-owned state, so the consumer cleans its own
        batch. Idempotent; does nothing before ``finish`` (use :meth:`close_consumer`
        on the consumer's way out: it finishes first).
        """
        if not self._finished:
            return
        assert self._error is not None
        self._orphan_all(self._batch, self._error)

    def close_consumer(self, error: BaseException) -> None:
        """The consumer is exiting: ``finish(error)`` (if nobody did yet), then
        :meth:`discard_batch`. Consumer only; synchronous; idempotent.

        This is the order loopy's exit path needs: discarding first would leave the
        batch un-orphaned, because ``discard_batch`` does nothing before ``finish``.
        """
        try:
            self.finish(error)
        finally:
            self.discard_batch()

    # ------------------------------------------------------------------ readers

    async def wait_unthrottled(self) -> None:
        """Wait until fewer than ``throttle_limit`` throttled items are queued.

        The reader calls this before every socket read. Returns at once (after a
        checkpoint) if the gate is open; otherwise parks until a ``get`` brings the
        count below the limit, re-checking on every wake-up.

        Checkpoint: always.

        On cancellation: nothing changes (the task simply stops waiting).

        Raises:
            ConnectionClosingError: after :meth:`finish`, also if it is called while
                this task waits.
        """
        if self._finished:
            await trio.lowlevel.checkpoint_if_cancelled()  # Cancelled wins, as before
            raise self._closing_error()
        if self._throttled < self._limit:
            # The schedule point, then the cancellation check (trio's checkpoint):
            # a caller that reads next needs no check of its own (the reader's
            # ``read`` has none).
            await trio.lowlevel.checkpoint()
            return
        await trio.lowlevel.checkpoint_if_cancelled()
        while self._throttled >= self._limit:
            self._throttle_waits += 1
            await self._gate_lot.park()
            if self._finished:
                raise self._closing_error()

    # ------------------------------------------------------------------ closing

    def finish(self, error: BaseException) -> None:
        """Close the buffer because of ``error``. Any task may call it; idempotent.

        Synchronous, never checkpoints. After it returns, ``put`` raises, nothing is
        handed out, every item in the producers' queue has been orphaned (the
        consumer's batch is orphaned by the consumer), and every task waiting in
        ``get`` or ``wait_unthrottled`` has been woken to raise
        ``ConnectionClosingError`` (``__cause__`` = ``error``).
        """
        if self._finished:
            return
        self._finished = True
        self._error = error
        try:
            self._orphan_all(self._queue, error)
        finally:
            consumer = self._consumer
            if consumer is not None:
                self._consumer = None
                trio.lowlevel.reschedule(consumer)
            self._gate_lot.unpark_all()

    @property
    def gate_open(self) -> bool:
        """Whether :meth:`wait_unthrottled` would return at once: fewer than
        ``throttle_limit`` throttled items are queued, and the buffer is not
        finished. Synchronous: a reader whose read waits for the socket first (a
        schedule point and cancellation check of its own) reads on without the
        checkpoint of ``wait_unthrottled``."""
        return self._throttled < self._limit and not self._finished

    @property
    def throttled(self) -> int:
        """Throttled items queued and not yet taken (the gate's count)."""
        return self._throttled

    @property
    def finished(self) -> bool:
        """True once :meth:`finish` has been called."""
        return self._finished

    def statistics(self) -> ControlBufferStatistics:
        """Return a frozen snapshot of the buffer's state and counters."""
        return ControlBufferStatistics(
            queued=len(self._queue),
            in_batch=len(self._batch),
            throttled=self._throttled,
            throttle_limit=self._limit,
            finished=self._finished,
            batches=self._batches,
            items_taken=self._taken,
            consumer_wakeups=self._wakeups,
            throttle_waits=self._throttle_waits,
            readers_waiting=len(self._gate_lot),
        )

    # ------------------------------------------------------------------ internals

    def _update_gate(self) -> None:
        # Idempotent re-evaluation: if the gate is open, wake every parked reader.
        # Called after every decrement; cheap when nobody is parked.
        if self._gate_lot and (self._finished or self._throttled < self._limit):
            self._gate_lot.unpark_all()

    def _orphan_all(self, items: deque[ControlItem], error: BaseException) -> None:
        # Orphan every item exactly once. A failing orphan hook does not stop the
        # others; the first failure is re-raised at the end (never swallowed).
        failure: BaseException | None = None
        while items:
            item = items.popleft()
            if item.throttled:
                self._throttled -= 1
            try:
                item.orphan(error)
            except BaseException as exc:  # re-raised below
                if failure is None:
                    failure = exc
        if failure is not None:
            raise failure

    def _closing_error(self) -> ConnectionClosingError:
        exc = ConnectionClosingError("the connection is closing")
        exc.__cause__ = self._error
        return exc
