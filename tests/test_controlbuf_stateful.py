"""Stateful test of ``ControlBuffer``: Hypothesis drives real Trio tasks, one step at a time.

Theory of operation
-------------------
A :class:`~hypothesis.stateful.RuleBasedStateMachine` is synchronous, but what matters
most in the control buffer needs tasks that stay parked *across* steps: readers in
``wait_unthrottled``, loopy in ``get``. So every example runs one Trio run in guest mode
(``trio.lowlevel.start_guest_run``) whose host loop is :class:`GuestRun`: a queue of
callbacks that the machine itself pumps, synchronously, inside each rule. The run holds:

- a driver task, which runs the jobs the host posts in its mailbox;
- four producer tasks and a control task (cancels), each running the commands sent to it;
- loopy, the single consumer: ``get_nowait``, draining a batch, ``get``, ``discard_batch``,
  ``close_consumer``;
- readers, started on demand, each making one ``wait_unthrottled`` call.

A rule posts commands, then pumps the run until the driver comes back from
``trio.testing.wait_all_tasks_blocked()``: every task has done what it could and is
parked or gone, and only then does the machine look. ``race`` (any two or three
commands) and ``take_and_put_at_the_limit`` release several commands at once, each
after 0-2 extra checkpoints, so their interleaving is chosen by Hypothesis, as is the
order of Trio's run queue (``st.random_module()`` seeds Trio's scheduler, which Trio's
Hypothesis plugin registers). Hypothesis shrinks all of it.

Tasks write down what they did at the moment they did it (no checkpoint in between):
results, exceptions, orphan hooks firing, and a ``statistics()`` snapshot where timing
matters. After every step the machine replays the new entries against its model (the
FIFO of pending items, the throttled count, whether and why the buffer finished) and
then checks the invariants. A violation raises :class:`InvariantViolation`, whose
``invariant`` names the rule that broke:

- ``a``: ``statistics().throttled`` == throttled items put, minus taken, minus orphaned.
- ``b``: the gate is closed iff ``count >= limit and not finished``: the parked readers
  are exactly the readers still inside ``wait_unthrottled``, and a reader returns only
  at a moment when the gate was open.
- ``c``: no reader stays parked while ``count < limit`` or after ``finish``; a reader
  woken by ``finish`` raises ``ConnectionClosingError`` from the finish error.
- ``d``: every item put is handed out once or orphaned once, never both, never lost,
  in FIFO order (so per producer too).
- ``e``: after ``finish`` nothing is handed out and ``put`` raises.
- ``wakeup``: a parked ``get`` is woken by the next put or by ``finish``;
  ``consumer_wakeups`` never exceeds the number of times the consumer parked; more
  tightly, it is at least the parked gets that returned an item and at most those
  that were neither cancelled nor still waiting (a put after a cancel wakes nobody).
- ``batch``: draining a batch takes what the batch held (or, if empty, the whole queue).
- ``api``: no operation raises anything its docstring does not promise.

``buffer_class`` is a class attribute so ``test_controlbuf_mutants.py`` can run this
same machine against broken buffers and check that it fails.
"""

from __future__ import annotations

import math
import queue
import sys
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import ClassVar, Final, Literal, assert_never

import outcome
import trio
import trio.lowlevel
import trio.testing
from helpers import QuotaRecorder, RecordingStarter
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from trio_h2t import ConnectionClosingError
from trio_h2t._controlbuf import ControlBuffer, ControlBufferStatistics
from trio_h2t._items import ControlItem, Data, PeerResponse, Ping, StartStream, WindowUpdate

PRODUCERS: Final = (1, 2, 3, 4)
MAX_READERS: Final = 4  # readers alive at once
MAX_DELAY: Final = 2  # extra checkpoints a raced command takes before it acts
PUMP_TIMEOUT: Final = 30.0  # seconds one step may take before the harness gives up

Kind = Literal["ping", "window", "peer", "start", "data"]
#: Two throttled kinds and an unthrottled one (real classes, subclassed only to
#: observe ``orphan``), and two unthrottled ones with their own orphan hooks.
KINDS: Final[tuple[Kind, ...]] = ("ping", "window", "peer", "start", "data")
THROTTLED_KINDS: Final[tuple[Kind, ...]] = ("ping", "peer")
Stats = ControlBufferStatistics


class InvariantViolation(AssertionError):
    """The buffer broke one of the invariants listed in this module's docstring."""

    def __init__(self, invariant: str, message: str) -> None:
        super().__init__(f"({invariant}) {message}")
        self.invariant = invariant


# ---------------------------------------------------------------- the host loop


class GuestRun:
    """A Trio run in guest mode whose host loop is this object, pumped synchronously.

    Trio hands its host callbacks (from its I/O thread too, hence the thread-safe
    queue); :meth:`pump_until` runs them in order until a condition holds.
    """

    def __init__(self, async_fn: Callable[[], Awaitable[None]]) -> None:
        self._callbacks: queue.SimpleQueue[Callable[[], object]] = queue.SimpleQueue()
        self._result: outcome.Outcome[None] | None = None
        trio.lowlevel.start_guest_run(
            async_fn, run_sync_soon_threadsafe=self._callbacks.put, done_callback=self._done
        )

    def _done(self, result: outcome.Outcome[None]) -> None:
        self._result = result

    @property
    def done(self) -> bool:
        """True once the run has returned or raised."""
        return self._result is not None

    def pump_until(self, condition: Callable[[], bool]) -> None:
        """Run Trio's callbacks until ``condition()`` holds.

        Raises whatever the run raised if it ends first, and RuntimeError if the
        condition still fails after ``PUMP_TIMEOUT`` seconds (a task that spins).
        """
        deadline = time.monotonic() + PUMP_TIMEOUT
        while not condition():
            if self._result is not None:
                self._result.unwrap()
                raise RuntimeError("the Trio run ended before the condition held")
            timeout = deadline - time.monotonic()
            try:
                if timeout <= 0:
                    raise queue.Empty
                callback = self._callbacks.get(timeout=timeout)
            except queue.Empty:
                raise RuntimeError(f"no settled state within {PUMP_TIMEOUT} s") from None
            callback()


# ---------------------------------------------------------------- items and records


@dataclass(eq=False)
class ItemRecord:
    """One item a producer tried to put, and what became of it."""

    producer: int
    seq: int  # per producer, from 1: the FIFO tag
    kind: Kind
    item: ControlItem | None = None  # kept alive, so its id() stays unique
    throttled: bool = False
    accepted: bool = False  # put() returned
    delivered: int = 0  # times handed to the consumer
    orphaned: list[BaseException | None] = field(default_factory=list)  # errors passed

    def __repr__(self) -> str:
        return f"<{self.kind} {self.producer}.{self.seq}>"


@dataclass(frozen=True, slots=True, eq=False)
class TrackedPing(Ping):
    """A real (throttled) ``Ping`` that reports being orphaned."""

    on_orphan: Callable[[BaseException], None]

    def orphan(self, error: BaseException) -> None:
        self.on_orphan(error)


@dataclass(frozen=True, slots=True, eq=False)
class TrackedWindowUpdate(WindowUpdate):
    """A real (unthrottled) ``WindowUpdate`` that reports being orphaned."""

    on_orphan: Callable[[BaseException], None]

    def orphan(self, error: BaseException) -> None:
        self.on_orphan(error)


@dataclass(frozen=True, slots=True, eq=False)
class TrackedPeerResponse(PeerResponse):
    """A real (throttled) ``PeerResponse`` that reports being orphaned."""

    on_orphan: Callable[[BaseException], None]

    def orphan(self, error: BaseException) -> None:
        self.on_orphan(error)


def make_item(record: ItemRecord, on_orphan: Callable[[BaseException | None], None]) -> ControlItem:
    """Build the item ``record`` describes; ``on_orphan`` runs if the buffer orphans it."""
    tag = f"{record.producer}.{record.seq}".encode()
    match record.kind:
        case "ping":
            return TrackedPing(data=tag.ljust(8, b".")[:8], on_orphan=on_orphan)
        case "window":
            return TrackedWindowUpdate(stream=None, increment=record.seq, on_orphan=on_orphan)
        case "peer":
            return TrackedPeerResponse(kind=f"ping-ack {tag!r}", on_orphan=on_orphan)
        case "start":
            return StartStream(
                headers=[(b"x-tag", tag)],
                end_stream=False,
                starter=RecordingStarter(on_orphan),
            )
        case "data":
            # Data's ``stream`` is not the buffer's business (tests/test_controlbuf.py
            # uses a QuotaRecorder too): the quota it returns on release is its
            # orphan hook.
            return Data(
                stream=QuotaRecorder(lambda _: on_orphan(None)),  # type: ignore[arg-type]
                payload=tag,
                end_stream=False,
                quota=1,
            )
        case _:
            assert_never(record.kind)


@dataclass(eq=False)
class ReaderRecord:
    """One reader task: a single ``wait_unthrottled`` call."""

    rid: int
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    state: Literal["starting", "waiting", "done"] = "starting"
    before: Stats | None = None  # statistics() just before the call
    cancel_requested: bool = False

    def __repr__(self) -> str:
        return f"<reader {self.rid} {self.state}>"


# ---------------------------------------------------------------- commands


@dataclass(frozen=True)
class Put:
    """A producer puts a burst of items (no checkpoint between them)."""

    producer: int
    kinds: tuple[Kind, ...]


@dataclass(frozen=True)
class Finish:
    """A producer calls ``finish`` (any task may)."""

    producer: int


@dataclass(frozen=True)
class TakeOne:
    """Loopy calls ``get_nowait`` once."""


@dataclass(frozen=True)
class DrainBatch:
    """Loopy takes items until ``statistics().in_batch`` is 0."""


@dataclass(frozen=True)
class Get:
    """Loopy calls ``await get()``: parks if there is nothing to take."""


@dataclass(frozen=True)
class Discard:
    """Loopy calls ``discard_batch`` (its exit path)."""


@dataclass(frozen=True)
class CloseConsumer:
    """Loopy exits: ``close_consumer`` (finish if nobody did, then discard_batch)."""


@dataclass(frozen=True)
class StartReader:
    """A new reader task calls ``wait_unthrottled``."""


@dataclass(frozen=True)
class CancelReader:
    """The control task cancels a parked reader's scope."""

    rid: int


@dataclass(frozen=True)
class CancelConsumer:
    """The control task cancels the scope of loopy's parked ``get``."""


Op = (
    Put
    | Finish
    | TakeOne
    | DrainBatch
    | Get
    | Discard
    | CloseConsumer
    | StartReader
    | CancelReader
    | CancelConsumer
)


@dataclass(frozen=True)
class Command:
    """An operation, run after ``delay`` extra checkpoints."""

    op: Op
    delay: int = 0


def worker_of(op: Op) -> str:
    """The task that runs ``op``; commands for one worker run in order."""
    match op:
        case Put(producer=producer) | Finish(producer=producer):
            return f"producer-{producer}"
        case TakeOne() | DrainBatch() | Get() | Discard() | CloseConsumer():
            return "consumer"
        case CancelReader() | CancelConsumer():
            return "control"
        case StartReader():
            return "reader"
        case _:
            assert_never(op)


WORKERS: Final = (*(f"producer-{p}" for p in PRODUCERS), "consumer", "control")


# ---------------------------------------------------------------- the log


@dataclass(frozen=True)
class PutDone:
    record: ItemRecord
    error: Exception | None


@dataclass(frozen=True)
class Orphaned:
    record: ItemRecord
    error: BaseException | None  # None from Data.release, which gets no error


@dataclass(frozen=True)
class Taken:  # one get_nowait
    item: ControlItem | None
    error: Exception | None


@dataclass(frozen=True)
class Drained:
    before: Stats
    count: int


@dataclass(frozen=True)
class GetCalled:
    before: Stats


@dataclass(frozen=True)
class GetDone:
    item: ControlItem | None = None
    error: Exception | None = None
    cancelled: bool = False
    items_taken: int = 0  # statistics().items_taken when get returned


@dataclass(frozen=True)
class Discarded:
    error: Exception | None


@dataclass(frozen=True)
class FinishCalled:
    error: BaseException
    before: Stats


@dataclass(frozen=True)
class FinishDone:
    error: Exception | None


@dataclass(frozen=True)
class ReaderCalled:
    reader: ReaderRecord
    before: Stats


@dataclass(frozen=True)
class ReaderDone:
    reader: ReaderRecord
    result: Literal["passed", "closing", "cancelled", "error"]
    error: Exception | None
    after: Stats


@dataclass(frozen=True)
class CancelSent:
    reader: ReaderRecord | None  # None: the consumer's get


LogEntry = (
    PutDone
    | Orphaned
    | Taken
    | Drained
    | GetCalled
    | GetDone
    | Discarded
    | FinishCalled
    | FinishDone
    | ReaderCalled
    | ReaderDone
    | CancelSent
)


def STOP() -> None:
    """The job that ends the Trio run (compared by identity, never called)."""


class FinishCause(Exception):
    """The error given to ``finish``; one instance per call, so causes are traceable."""


def gate_open(stats: Stats) -> bool:
    """Whether ``stats`` shows the gate open (readers may pass)."""
    return stats.throttled < stats.throttle_limit and not stats.finished


# Strategies for raced operations, built once (building them per step is slow).
PUT_OPS: Final[st.SearchStrategy[Op]] = st.builds(
    Put,
    st.sampled_from(PRODUCERS),
    st.lists(st.sampled_from(KINDS), min_size=1, max_size=3).map(tuple),
)
FINISH_OPS: Final[st.SearchStrategy[Op]] = st.builds(Finish, st.sampled_from(PRODUCERS))
CONSUMER_OPS: Final[st.SearchStrategy[Op]] = st.sampled_from(
    [TakeOne(), DrainBatch(), Get(), Discard()]
)
CLOSE_CONSUMER_OPS: Final[st.SearchStrategy[Op]] = st.just(CloseConsumer())
CANCEL_GET_OPS: Final[st.SearchStrategy[Op]] = st.just(CancelConsumer())
START_READER_OPS: Final[st.SearchStrategy[Op]] = st.just(StartReader())
DELAYS: Final = st.integers(0, MAX_DELAY)


# ---------------------------------------------------------------- the machine


class ControlBufferMachine(RuleBasedStateMachine):
    """Producers, loopy and readers as real Trio tasks around one control buffer."""

    #: The class under test; the mutant tests swap in broken ones.
    buffer_class: ClassVar[type[ControlBuffer]] = ControlBuffer

    def __init__(self) -> None:
        super().__init__()
        # Set once by start(); every other rule runs after it.
        self._cb: ControlBuffer
        self._limit = 0
        self._finish_from = 0  # finish is enabled from this step on
        self._steps = 0
        self._run: GuestRun | None = None
        # Guest-side handles, set by _main() before the first step settles.
        self._nursery: trio.Nursery | None = None
        self._inboxes: dict[str, trio.MemorySendChannel[Command]] = {}
        # The host's mailbox to the driver: set by the host between pumps, taken by the
        # driver. None: no job; STOP: end the run.
        self._job: Callable[[], None] | None = None
        self._settled = False  # set by the driver when every task is blocked
        self._consumer_scope: trio.CancelScope | None = None
        self._seq = dict.fromkeys(PRODUCERS, 0)
        self._finishes = 0
        # The log: appended by tasks as things happen, replayed by the host.
        self._logbook: list[LogEntry] = []
        self._replayed = 0
        # The model, updated only by replaying the log.
        self._records: list[ItemRecord] = []  # every item put, accepted or not
        self._by_id: dict[int, ItemRecord] = {}  # id(record.item) -> record
        self._pending: deque[ItemRecord] = deque()  # queued, in FIFO order
        self._throttled = 0
        self._finished = False
        self._error: BaseException | None = None
        self._taken_at_finish = 0
        self._consumer_in_get = False  # after a step: loopy is parked in get()
        # Parked gets: get() calls made with nothing to take, so the consumer parked.
        self._parks = 0
        self._parked_now = False  # the current get() parked
        self._parks_cancelled = 0  # parked gets that ended Cancelled: no put woke them
        self._parks_delivered = 0  # parked gets that returned an item: a put woke them
        self._readers: dict[int, ReaderRecord] = {}
        self._next_rid = 0
        # Teardown runs the final check only if every step so far completed.
        self._broken = False

    # ------------------------------------------------------------ the guest side

    async def _main(self) -> None:
        """The driver: run each job the host posts, then wait until every task blocks.

        Between steps the driver polls the mailbox at a checkpoint instead of parking,
        so the run always has a runnable task and never hands its wait to Trio's I/O
        thread: pumping stays synchronous and cheap, and the host simply stops pumping
        while it checks the invariants.
        """
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            for name in WORKERS:
                inbox_send, inbox_receive = trio.open_memory_channel[Command](math.inf)
                self._inboxes[name] = inbox_send
                nursery.start_soon(self._worker, inbox_receive, name=name)
            while True:
                await trio.testing.wait_all_tasks_blocked()
                self._settled = True
                while self._job is None:
                    await trio.lowlevel.checkpoint()
                job, self._job = self._job, None
                if job is STOP:
                    break
                job()
            nursery.cancel_scope.cancel()

    async def _worker(self, inbox: trio.MemoryReceiveChannel[Command]) -> None:
        async for command in inbox:
            for _ in range(command.delay):
                await trio.lowlevel.checkpoint()
            await self._execute(command.op)

    async def _execute(self, op: Op) -> None:
        match op:
            case Put(producer=producer, kinds=kinds):
                self._put(producer, kinds)
            case Finish():
                self._finish()
            case TakeOne():
                self._take()
            case DrainBatch():
                self._drain()
            case Get():
                await self._get()
            case Discard():
                try:
                    self._cb.discard_batch()
                except Exception as exc:
                    self._logbook.append(Discarded(exc))
                else:
                    self._logbook.append(Discarded(None))
            case CloseConsumer():
                error = self._finish_cause()
                self._logbook.append(FinishCalled(error, self._cb.statistics()))
                try:
                    self._cb.close_consumer(error)
                except Exception as exc:
                    self._logbook.append(Discarded(exc))
                else:
                    self._logbook.append(Discarded(None))
            case CancelReader(rid=rid):
                reader = self._readers[rid]
                self._logbook.append(CancelSent(reader))
                reader.scope.cancel()
            case CancelConsumer():
                assert self._consumer_scope is not None
                self._logbook.append(CancelSent(None))
                self._consumer_scope.cancel()
            case StartReader():
                raise AssertionError("readers are started by the driver, not a worker")
            case _:
                assert_never(op)

    def _put(self, producer: int, kinds: tuple[Kind, ...]) -> None:
        for kind in kinds:
            self._seq[producer] += 1
            record = ItemRecord(producer, self._seq[producer], kind)

            def on_orphan(error: BaseException | None, record: ItemRecord = record) -> None:
                self._logbook.append(Orphaned(record, error))

            item = record.item = make_item(record, on_orphan)
            record.throttled = item.throttled
            self._by_id[id(item)] = record
            try:
                self._cb.put(item)
            except Exception as exc:
                self._logbook.append(PutDone(record, exc))
            else:
                self._logbook.append(PutDone(record, None))

    def _finish_cause(self) -> FinishCause:
        self._finishes += 1
        return FinishCause(f"finish #{self._finishes}")

    def _finish(self) -> None:
        error = self._finish_cause()
        self._logbook.append(FinishCalled(error, self._cb.statistics()))
        try:
            self._cb.finish(error)
        except Exception as exc:
            self._logbook.append(FinishDone(exc))
        else:
            self._logbook.append(FinishDone(None))

    def _take(self) -> bool:
        """One get_nowait; True if it handed out an item."""
        try:
            item = self._cb.get_nowait()
        except Exception as exc:
            self._logbook.append(Taken(None, exc))
            return False
        self._logbook.append(Taken(item, None))
        return True

    def _drain(self) -> None:
        before = self._cb.statistics()
        count = 0
        while self._take():
            count += 1
            if self._cb.statistics().in_batch == 0:
                break
        self._logbook.append(Drained(before, count))

    async def _get(self) -> None:
        self._logbook.append(GetCalled(self._cb.statistics()))
        done: GetDone | None = None
        with trio.CancelScope() as scope:
            self._consumer_scope = scope
            try:
                item = await self._cb.get()
            except Exception as exc:
                done = GetDone(error=exc)
            else:
                done = GetDone(item=item, items_taken=self._cb.statistics().items_taken)
        self._logbook.append(done if done is not None else GetDone(cancelled=True))

    async def _reader(self, reader: ReaderRecord, delay: int) -> None:
        done: ReaderDone | None = None
        with reader.scope:
            for _ in range(delay):
                await trio.lowlevel.checkpoint()
            self._logbook.append(ReaderCalled(reader, self._cb.statistics()))
            try:
                await self._cb.wait_unthrottled()
            except ConnectionClosingError as exc:
                done = ReaderDone(reader, "closing", exc, self._cb.statistics())
            except Exception as exc:
                done = ReaderDone(reader, "error", exc, self._cb.statistics())
            else:
                done = ReaderDone(reader, "passed", None, self._cb.statistics())
        if done is None:
            done = ReaderDone(reader, "cancelled", None, self._cb.statistics())
        self._logbook.append(done)

    def _dispatch(self, commands: list[tuple[Command, ReaderRecord | None]]) -> None:
        assert self._nursery is not None
        for command, reader in commands:
            if reader is not None:
                self._nursery.start_soon(self._reader, reader, command.delay)
            else:
                self._inboxes[worker_of(command.op)].send_nowait(command)

    # ------------------------------------------------------------ the host side

    def _step(self, *commands: Command) -> None:
        """Release ``commands`` at once, wait until every task is blocked, replay."""
        assert self._run is not None
        self._broken = True
        self._steps += 1
        batch: list[tuple[Command, ReaderRecord | None]] = []
        for command in commands:
            reader = None
            if isinstance(command.op, StartReader):
                reader = ReaderRecord(self._next_rid)
                self._readers[reader.rid] = reader
                self._next_rid += 1
            batch.append((command, reader))
        self._settled = False
        self._job = lambda: self._dispatch(batch)
        self._run.pump_until(lambda: self._settled)
        self._replay()
        self._broken = False

    def _check(self, condition: bool, invariant: str, message: str) -> None:
        if not condition:
            self._broken = True
            raise InvariantViolation(invariant, message)

    def _replay(self) -> None:
        while self._replayed < len(self._logbook):
            entry = self._logbook[self._replayed]
            self._replayed += 1
            self._apply(entry)

    def _apply(self, entry: LogEntry) -> None:
        match entry:
            case PutDone(record=record, error=None):
                self._records.append(record)
                self._check(not self._finished, "e", f"put({record}) succeeded after finish")
                record.accepted = True
                self._pending.append(record)
                self._throttled += record.throttled
            case PutDone(record=record, error=error):
                self._records.append(record)
                self._check(
                    isinstance(error, ConnectionClosingError) and self._finished,
                    "api",
                    f"put({record}) raised {error!r}",
                )
                assert error is not None
                self._check(
                    error.__cause__ is self._error,
                    "e",
                    f"put({record}) after finish: __cause__ is {error.__cause__!r}",
                )
            case Orphaned(record=record, error=error):
                self._orphan(record, error)
            case Taken(item=item, error=error):
                if self._finished:
                    self._check(item is None, "e", f"get_nowait handed out {item!r} after finish")
                    self._check_closing(error, "get_nowait")
                    self._check(
                        not self._pending,
                        "d",
                        f"get_nowait after finish left {list(self._pending)} unorphaned",
                    )
                elif item is not None:
                    self._deliver(item)
                elif isinstance(error, trio.WouldBlock):
                    self._check(
                        not self._pending,
                        "d",
                        f"get_nowait raised WouldBlock with {list(self._pending)} queued",
                    )
                else:
                    self._check(False, "api", f"get_nowait raised {error!r}")
            case Drained(before=before, count=count):
                expected = before.in_batch or before.queued
                if before.finished:
                    expected = 0
                self._check(
                    count == expected,
                    "batch",
                    f"drained {count} items, expected {expected} from {before}",
                )
            case GetCalled(before=before):
                self._consumer_in_get = True
                self._parked_now = before.queued + before.in_batch == 0 and not before.finished
                self._parks += self._parked_now
            case GetDone(item=item, error=error, cancelled=cancelled, items_taken=taken):
                self._consumer_in_get = False
                if self._parked_now:
                    self._parks_cancelled += cancelled
                    self._parks_delivered += item is not None
                self._parked_now = False
                if cancelled:
                    pass  # nothing taken: the final check would find the item lost
                elif item is not None:
                    if self._finished:
                        self._check(
                            taken <= self._taken_at_finish,
                            "e",
                            f"get handed out {item!r} after finish",
                        )
                    self._deliver(item)
                else:
                    self._check_closing(error, "get")
                    self._check(
                        not self._pending,
                        "d",
                        f"get after finish left {list(self._pending)} unorphaned",
                    )
            case Discarded(error=error):
                self._check(error is None, "api", f"discard_batch raised {error!r}")
                if self._finished:
                    self._check(
                        not self._pending,
                        "d",
                        f"after finish and discard_batch, {list(self._pending)} are "
                        "neither handed out nor orphaned",
                    )
            case FinishCalled(error=error, before=before):
                if not self._finished:
                    self._finished = True
                    self._error = error
                    self._taken_at_finish = before.items_taken
            case FinishDone(error=error):
                self._check(error is None, "api", f"finish raised {error!r}")
            case ReaderCalled(reader=reader, before=before):
                reader.state = "waiting"
                reader.before = before
            case ReaderDone(reader=reader, result=result, error=error, after=after):
                self._reader_done(reader, result, error, after)
            case CancelSent(reader=reader):
                if reader is not None:
                    reader.cancel_requested = True
            case _:
                assert_never(entry)

    def _deliver(self, item: ControlItem) -> None:
        record = self._by_id.get(id(item))
        self._check(record is not None, "d", f"handed out {item!r}, which nobody put")
        assert record is not None
        self._check(record.accepted, "d", f"handed out {record}, whose put() raised")
        self._check(record.delivered == 0, "d", f"handed out {record} twice")
        self._check(not record.orphaned, "d", f"handed out {record} after orphaning it")
        head = self._pending[0] if self._pending else None
        self._check(head is record, "d", f"FIFO: handed out {record}, expected {head}")
        self._pending.popleft()
        record.delivered += 1
        self._throttled -= record.throttled

    def _orphan(self, record: ItemRecord, error: BaseException | None) -> None:
        self._check(self._finished, "d", f"{record} orphaned before finish")
        self._check(record.accepted, "d", f"{record} orphaned, but its put() raised")
        self._check(record.delivered == 0, "d", f"{record} orphaned after being handed out")
        self._check(not record.orphaned, "d", f"{record} orphaned twice")
        self._check(
            error is None or error is self._error,
            "d",
            f"{record} orphaned with {error!r}, not the finish error {self._error!r}",
        )
        record.orphaned.append(error)
        self._check(record in self._pending, "d", f"{record} orphaned while not queued")
        self._pending.remove(record)
        self._throttled -= record.throttled

    def _check_closing(self, error: Exception | None, what: str) -> None:
        self._check(isinstance(error, ConnectionClosingError), "api", f"{what} raised {error!r}")
        assert error is not None
        self._check(self._finished, "api", f"{what} raised {error!r} before finish")
        self._check(
            error.__cause__ is self._error,
            "e",
            f"{what}: __cause__ is {error.__cause__!r}, not {self._error!r}",
        )

    def _reader_done(
        self,
        reader: ReaderRecord,
        result: Literal["passed", "closing", "cancelled", "error"],
        error: Exception | None,
        after: Stats,
    ) -> None:
        before = reader.before
        reader.state = "done"
        if result == "cancelled":
            self._check(reader.cancel_requested, "api", f"{reader} cancelled by nobody")
            return
        assert before is not None
        if result == "passed":
            self._check(
                gate_open(before) or gate_open(after),
                "b",
                f"{reader} passed a closed gate (before: {before}, after: {after})",
            )
        elif result == "closing":
            self._check(
                before.finished or after.finished,
                "api",
                f"{reader} raised {error!r} before finish",
            )
            assert error is not None
            self._check(
                error.__cause__ is self._error,
                "c",
                f"{reader} woken by finish: __cause__ is {error.__cause__!r}",
            )
        else:
            self._check(False, "api", f"wait_unthrottled raised {error!r}")

    # ------------------------------------------------------------ rules

    @initialize(
        limit=st.integers(1, 5), finish_from=st.integers(0, 40), scheduler=st.random_module()
    )
    def start(self, limit: int, finish_from: int, scheduler: object) -> None:
        """Start the Trio run (its scheduler now seeded by Hypothesis) and the tasks."""
        self._limit = limit
        self._finish_from = finish_from
        self._cb = self.buffer_class(throttle_limit=limit)
        self._run = GuestRun(self._main)
        self._run.pump_until(lambda: self._settled)

    @rule(
        producer=st.sampled_from(PRODUCERS),
        kinds=st.lists(st.sampled_from(KINDS), min_size=1, max_size=4).map(tuple),
    )
    def put(self, producer: int, kinds: tuple[Kind, ...]) -> None:
        """A producer puts a burst of items."""
        self._step(Command(Put(producer, kinds)))

    @rule(
        producer=st.sampled_from(PRODUCERS),
        kinds=st.lists(st.sampled_from(THROTTLED_KINDS), min_size=1, max_size=3).map(tuple),
    )
    def put_responses(self, producer: int, kinds: tuple[Kind, ...]) -> None:
        """A producer puts a burst of throttled items, as a flooding peer makes us do."""
        self._step(Command(Put(producer, kinds)))

    @precondition(lambda self: not self._consumer_in_get)
    @rule()
    def take_one(self) -> None:
        """Loopy takes one item with get_nowait (swapping if its batch is empty)."""
        self._step(Command(TakeOne()))

    @precondition(lambda self: not self._consumer_in_get)
    @rule()
    def drain_batch(self) -> None:
        """Loopy takes items until its batch is empty."""
        self._step(Command(DrainBatch()))

    @precondition(lambda self: not self._consumer_in_get)
    @rule()
    def get(self) -> None:
        """Loopy awaits get(), parking if there is nothing to take."""
        self._step(Command(Get()))

    @precondition(lambda self: self._finished and not self._consumer_in_get)
    @rule()
    def discard_batch(self) -> None:
        """Loopy, on its way out after finish, orphans what is left of its batch."""
        self._step(Command(Discard()))

    @precondition(lambda self: self._may_finish() and not self._consumer_in_get)
    @rule()
    def close_consumer(self) -> None:
        """Loopy exits through close_consumer: finish (if needed), then discard_batch."""
        self._step(Command(CloseConsumer()))

    @precondition(lambda self: self._consumer_in_get)
    @rule()
    def cancel_get(self) -> None:
        """The parked get is cancelled."""
        self._step(Command(CancelConsumer()))

    @precondition(lambda self: self._may_finish())
    @rule(producer=st.sampled_from(PRODUCERS))
    def finish(self, producer: int) -> None:
        """A producer finishes the buffer (again, maybe: finish is idempotent)."""
        self._step(Command(Finish(producer)))

    @precondition(lambda self: self._live_readers() < MAX_READERS)
    @rule()
    def start_reader(self) -> None:
        """A new reader calls wait_unthrottled."""
        self._step(Command(StartReader()))

    @precondition(lambda self: bool(self._waiting_readers()))
    @rule(data=st.data())
    def cancel_reader(self, data: st.DataObject) -> None:
        """A parked reader is cancelled."""
        rid = data.draw(st.sampled_from(self._waiting_readers()), label="rid")
        self._step(Command(CancelReader(rid)))

    @precondition(
        lambda self: (
            self._waiting_readers() and self._throttled == self._limit and not self._consumer_in_get
        )
    )
    @rule(
        producer=st.sampled_from(PRODUCERS),
        kind=st.sampled_from(THROTTLED_KINDS),
        delays=st.tuples(DELAYS, DELAYS),
    )
    def take_and_put_at_the_limit(self, producer: int, kind: Kind, delays: tuple[int, int]) -> None:
        """With readers parked at exactly the limit, loopy takes as a producer puts one
        more: a reader woken by the take may find the gate shut again when it runs."""
        self._step(Command(TakeOne(), delays[0]), Command(Put(producer, (kind,)), delays[1]))

    @rule(data=st.data())
    def race(self, data: st.DataObject) -> None:
        """Two or three commands are released at once and interleave."""
        commands = data.draw(
            st.lists(
                st.builds(Command, op=self._op_strategy(), delay=DELAYS),
                min_size=2,
                max_size=3,
                unique_by=lambda command: worker_of(command.op),
            ),
            label="commands",
        )
        self._step(*commands)

    def _op_strategy(self) -> st.SearchStrategy[Op]:
        options = [PUT_OPS, PUT_OPS]  # twice: puts are the most common operation
        if self._may_finish():
            options.append(FINISH_OPS)
            if not self._consumer_in_get:
                options.append(CLOSE_CONSUMER_OPS)
        options.append(CANCEL_GET_OPS if self._consumer_in_get else CONSUMER_OPS)
        if self._live_readers() < MAX_READERS:
            options.append(START_READER_OPS)
        if waiting := self._waiting_readers():
            options.append(st.sampled_from(waiting).map(CancelReader))
        return st.one_of(options)

    def _may_finish(self) -> bool:
        # Finishing ends the interesting part of a run, so it waits for a drawn number
        # of steps (which shrinks towards 0, i.e. finish at any time).
        return self._steps >= self._finish_from

    def _live_readers(self) -> int:
        return sum(reader.state != "done" for reader in self._readers.values())

    def _waiting_readers(self) -> list[int]:
        return [rid for rid, reader in self._readers.items() if reader.state == "waiting"]

    # ------------------------------------------------------------ invariants

    @invariant()
    def throttled_count_matches_model(self) -> None:
        """(a) The throttle count is exactly the throttled items queued or in the batch."""
        stats = self._cb.statistics()
        self._check(
            stats.throttled == self._throttled,
            "a",
            f"statistics().throttled == {stats.throttled}, model says {self._throttled}",
        )
        self._check(
            stats.queued + stats.in_batch == len(self._pending),
            "d",
            f"{stats.queued} queued + {stats.in_batch} in batch, model has {list(self._pending)}",
        )

    @invariant()
    def readers_parked_iff_gate_closed(self) -> None:
        """(b, c) Readers stay parked exactly while count >= limit and not finished."""
        stats = self._cb.statistics()
        waiting = [self._readers[rid] for rid in self._waiting_readers()]
        closed = self._throttled >= self._limit and not self._finished
        self._check(
            closed or not waiting,
            "c",
            f"{waiting} still parked with count {self._throttled}, limit {self._limit}, "
            f"finished={self._finished}",
        )
        self._check(
            stats.readers_waiting == len(waiting),
            "b",
            f"statistics().readers_waiting == {stats.readers_waiting}, but {waiting} wait",
        )

    @invariant()
    def consumer_is_woken(self) -> None:
        """A parked get never sleeps through an item or finish, and is woken once per park."""
        self._check(
            not (self._consumer_in_get and (self._pending or self._finished)),
            "wakeup",
            f"get still parked with {list(self._pending)} queued, finished={self._finished}",
        )
        wakeups = self._cb.statistics().consumer_wakeups
        self._check(
            wakeups <= self._parks,
            "wakeup",
            f"{wakeups} consumer wake-ups for {self._parks} parks",
        )
        # Tighter: every parked get that returned an item was woken by a put; one that
        # ended Cancelled, or is still parked, was not (a put after the cancel finds
        # nobody to wake). Finish wakes the consumer too, but is not a put.
        lowest = self._parks_delivered
        highest = self._parks - self._parks_cancelled - self._parked_now
        self._check(
            lowest <= wakeups <= highest,
            "wakeup",
            f"consumer_wakeups == {wakeups}, but puts woke between {lowest} and {highest} "
            f"parked gets",
        )

    @invariant()
    def nothing_after_finish(self) -> None:
        """(e) Once finished, the buffer hands out nothing and holds no producer items."""
        stats = self._cb.statistics()
        self._check(stats.finished == self._finished, "e", f"finished is {stats.finished}")
        if self._finished:
            self._check(
                stats.items_taken == self._taken_at_finish,
                "e",
                f"{stats.items_taken - self._taken_at_finish} items handed out after finish",
            )
            self._check(stats.queued == 0, "e", f"{stats.queued} items queued after finish")

    # ------------------------------------------------------------ the end

    def teardown(self) -> None:
        """Finish and discard, check every item's fate, then end the Trio run."""
        run = self._run
        if run is None:
            return
        try:
            # Hypothesis calls teardown from a ``finally``: while a failure (or its own
            # StopTest) unwinds, sys.exc_info() shows it, and then only the Trio run
            # is ended, so that nothing masks the original exception.
            if not self._broken and sys.exc_info()[1] is None:
                self._check_every_item_accounted_for()
        finally:
            self._job = STOP
            run.pump_until(lambda: run.done)

    def _check_every_item_accounted_for(self) -> None:
        """(d) After finish and loopy's discard_batch, each item put met exactly one fate."""
        if not self._finished:
            self._step(Command(Finish(PRODUCERS[0])))
        self._step(Command(Discard()))  # a parked get was woken by finish: loopy is free
        for check in (
            self.throttled_count_matches_model,
            self.readers_parked_iff_gate_closed,
            self.consumer_is_woken,
            self.nothing_after_finish,
        ):
            check()
        for record in self._records:
            fates = record.delivered + len(record.orphaned)
            self._check(
                fates == (1 if record.accepted else 0),
                "d",
                f"{record} (accepted={record.accepted}) was handed out {record.delivered} "
                f"times and orphaned {len(record.orphaned)} times",
            )
        for producer in PRODUCERS:
            seqs = [r.seq for r in self._records if r.producer == producer and r.delivered]
            self._check(seqs == sorted(seqs), "d", f"producer {producer} out of order: {seqs}")


def test_control_buffer_keeps_its_invariants() -> None:
    """The real ControlBuffer keeps every invariant under Hypothesis-chosen steps."""
    run_state_machine_as_test(ControlBufferMachine)
