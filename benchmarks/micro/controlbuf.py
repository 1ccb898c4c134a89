"""Micro-benchmark: the control buffer against the designs it replaces.

Three multi-producer, single-consumer queues are driven by the same producers and the
same items, side by side in one process, and compared on items/s and on consumer
wake-ups per item:

``ControlBuffer``
    the real ``trio_h2t._controlbuf.ControlBuffer``. The consumer loops as loopy does:
    ``item = await cb.get()``, then drains the rest of the batch with ``get_nowait()``
    until ``trio.WouldBlock``. Wake-ups come from ``statistics().consumer_wakeups``.
``naive``
    a deque and a ``ParkingLot`` (defined below, :class:`NaiveQueue`): every put wakes
    the consumer if it is parked, and the consumer takes exactly one item per wake-up
    (parked and woken by a put, or rescheduled after its per-item checkpoint), then
    parks again if the deque is empty. This is the one-item-per-wake-up design the
    control buffer replaces. Wake-ups are counted here.
``memory channel``
    ``trio.open_memory_channel(math.inf)``; producers ``send_nowait``, the consumer
    ``await receive()`` per item. ``receive`` always yields, so every item costs the
    consumer one pass through the scheduler (one wake-up per item).

Producers put their share of a realistic mix (mostly ``Data``, some throttled
``WindowUpdate`` and ``Ping``), built before the clock starts, and yield with
``await trio.lowlevel.checkpoint()`` after every ``--yield-every`` items, so that they
interleave like stream tasks do. The clock runs from releasing the producers to the
consumer taking the last item. Each design runs ``--reps`` times for each producer
count (designs interleaved within a repetition, in rotating order), and the medians
are reported.

Run: ``.venv/bin/python benchmarks/micro/controlbuf.py`` (defaults are embedded; ``--help``).
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import math
import os
import platform
import statistics
import sys
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import trio
import trio.testing

from trio_h2t._controlbuf import ControlBuffer
from trio_h2t._items import ControlItem, Data, Ping, WindowUpdate

DESIGNS = ("ControlBuffer", "naive", "memory channel")
DEFAULT_PRODUCERS = (1, 10, 100, 1000)
DEFAULT_ITEMS = 40_000  # per run, split evenly between the producers
DEFAULT_REPS = 5
DEFAULT_YIELD_EVERY = 1  # a stream task typically awaits something after each put
TARGET_PRODUCERS = 100
TARGET_RATIO = 2.0

_PAYLOAD = b"x" * 1024


# ---------------------------------------------------------------- the naive design


class NaiveQueue:
    """A deque and a parking lot: one item per consumer wake-up.

    ``put`` appends and wakes the consumer if it is parked. ``get`` returns exactly one
    item per wake-up: it parks when the deque is empty (woken by the next put), and
    otherwise yields once before taking the head, so the consumer goes through the
    scheduler once for every item.
    """

    __slots__ = ("_items", "_lot", "wakeups")

    def __init__(self) -> None:
        self._items: deque[ControlItem] = deque()
        self._lot = trio.lowlevel.ParkingLot()  # at most the consumer
        self.wakeups = 0  # times the consumer resumed to take an item

    def put(self, item: ControlItem) -> None:
        self._items.append(item)
        if self._lot:
            self._lot.unpark()

    async def get(self) -> ControlItem:
        if self._items:
            await trio.lowlevel.checkpoint()
        else:
            await self._lot.park()
        self.wakeups += 1
        return self._items.popleft()


# ---------------------------------------------------------------- workload


class _StreamStandIn:
    """Stands in for the ``H2Stream`` an item names: the control buffer never looks at
    an item's fields (only at its class's ``throttled``), so no connection is needed.
    """

    __slots__ = ("stream_id",)

    def __init__(self, stream_id: int) -> None:
        self.stream_id = stream_id


def make_plan(producers: int, total_items: int) -> list[list[ControlItem]]:
    """Split ``total_items`` between ``producers``: 90 % Data, 5 % WindowUpdate, 5 % Ping.

    Each producer stands for one stream task: DATA on its own stream, now and then a
    stream WINDOW_UPDATE or a PING (both throttled).
    """
    per_producer = max(1, total_items // producers)
    plan: list[list[ControlItem]] = []
    for p in range(producers):
        stream: Any = _StreamStandIn(2 * p + 1)
        items: list[ControlItem] = []
        for i in range(per_producer):
            slot = (i + p) % 20
            if slot == 7:
                items.append(WindowUpdate(stream=stream, increment=65_535))
            elif slot == 13:
                items.append(Ping(data=b"01234567"))
            else:
                items.append(Data(stream=stream, payload=_PAYLOAD, end_stream=False))
        plan.append(items)
    return plan


@dataclass(frozen=True, slots=True)
class Trial:
    """One run of one design on one plan."""

    design: str
    producers: int
    items: int
    seconds: float
    wakeups: int  #: times the consumer was woken / rescheduled to take items
    batches: int  #: ControlBuffer only: swaps (batches started); else 0
    gets: int  #: ControlBuffer only: calls to ``await get()``; else 0
    rep: int = 0  #: which repetition

    @property
    def items_per_s(self) -> float:
        return self.items / self.seconds


async def _drive(
    plan: Sequence[Sequence[ControlItem]],
    put: Callable[[ControlItem], None],
    consume: Callable[[int], Awaitable[None]],
    yield_every: int,
) -> float:
    """Run the producers against ``consume(total)``; return the seconds it took."""
    total = sum(len(items) for items in plan)
    go = trio.Event()
    t_end = 0.0

    async def producer(items: Sequence[ControlItem]) -> None:
        await go.wait()
        for n, item in enumerate(items, 1):
            put(item)
            if n % yield_every == 0:
                await trio.lowlevel.checkpoint()
        await trio.lowlevel.checkpoint()

    async def consumer() -> None:
        nonlocal t_end
        await consume(total)
        t_end = time.perf_counter()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(consumer)
        for items in plan:
            nursery.start_soon(producer, items)
        await trio.testing.wait_all_tasks_blocked()  # consumer parked, producers at `go`
        t_start = time.perf_counter()
        go.set()
    return t_end - t_start


def run_controlbuffer(plan: Sequence[Sequence[ControlItem]], yield_every: int) -> Trial:
    cb = ControlBuffer()
    gets = 0

    async def consume(total: int) -> None:
        nonlocal gets
        taken = 0
        while taken < total:
            await cb.get()  # loopy: wait for the first item of a batch...
            gets += 1
            taken += 1
            while True:  # ...then drain what is there without yielding
                try:
                    cb.get_nowait()
                except trio.WouldBlock:
                    break
                taken += 1

    seconds = trio.run(_drive, plan, cb.put, consume, yield_every)
    stats = cb.statistics()
    total = sum(len(items) for items in plan)
    if stats.queued or stats.in_batch or stats.throttled or stats.items_taken != total:
        raise RuntimeError(f"ControlBuffer left in an inconsistent state: {stats}")
    return Trial(
        design="ControlBuffer",
        producers=len(plan),
        items=stats.items_taken,
        seconds=seconds,
        wakeups=stats.consumer_wakeups,
        batches=stats.batches,
        gets=gets,
    )


def run_naive(plan: Sequence[Sequence[ControlItem]], yield_every: int) -> Trial:
    q = NaiveQueue()
    taken = 0

    async def consume(total: int) -> None:
        nonlocal taken
        while taken < total:
            await q.get()
            taken += 1

    seconds = trio.run(_drive, plan, q.put, consume, yield_every)
    return Trial("naive", len(plan), taken, seconds, q.wakeups, 0, 0)


def run_memory_channel(plan: Sequence[Sequence[ControlItem]], yield_every: int) -> Trial:
    taken = 0

    async def main() -> float:
        send, receive = trio.open_memory_channel[ControlItem](math.inf)

        async def consume(total: int) -> None:
            nonlocal taken
            while taken < total:
                await receive.receive()  # always yields: one wake-up per item
                taken += 1

        async with send, receive:
            return await _drive(plan, send.send_nowait, consume, yield_every)

    seconds = trio.run(main)
    return Trial("memory channel", len(plan), taken, seconds, taken, 0, 0)


RUNNERS: dict[str, Callable[[Sequence[Sequence[ControlItem]], int], Trial]] = {
    "ControlBuffer": run_controlbuffer,
    "naive": run_naive,
    "memory channel": run_memory_channel,
}


# ---------------------------------------------------------------- reporting


@dataclass(frozen=True, slots=True)
class Summary:
    """Medians over the repetitions of one design at one producer count."""

    producers: int
    design: str
    items: int
    items_per_s: float
    wakeups_per_item: float
    ratio_vs_naive: float
    batches: float  #: ControlBuffer only (median)
    wakeups: float  #: median
    max_wakeups_per_batch: float  #: ControlBuffer only: worst repetition
    min_ratio: float  #: lowest ratio vs naive of one repetition (paired by repetition)
    max_ratio: float  #: highest ratio vs naive of one repetition


def summarize(trials: Sequence[Trial], producer_counts: Sequence[int]) -> list[Summary]:
    rows: list[Summary] = []
    for producers in producer_counts:
        naive_ips = statistics.median(
            t.items_per_s for t in trials if t.producers == producers and t.design == "naive"
        )
        naive_by_rep = {
            t.rep: t.items_per_s for t in trials if t.producers == producers and t.design == "naive"
        }
        for design in DESIGNS:
            mine = [t for t in trials if t.producers == producers and t.design == design]
            ips = statistics.median(t.items_per_s for t in mine)
            paired = [t.items_per_s / naive_by_rep[t.rep] for t in mine]
            batches = [t.batches for t in mine]
            rows.append(
                Summary(
                    producers=producers,
                    design=design,
                    items=mine[0].items,
                    items_per_s=ips,
                    wakeups_per_item=statistics.median(t.wakeups / t.items for t in mine),
                    ratio_vs_naive=ips / naive_ips,
                    batches=statistics.median(batches),
                    wakeups=statistics.median(t.wakeups for t in mine),
                    max_wakeups_per_batch=max(
                        (t.wakeups / t.batches for t in mine if t.batches), default=0.0
                    ),
                    min_ratio=min(paired),
                    max_ratio=max(paired),
                )
            )
    return rows


def print_table(rows: Sequence[Summary]) -> None:
    print(
        f"{'producers':>9} | {'design':<14} | {'items/s (median)':>16} | "
        f"{'wakeups/item':>12} | {'ratio vs naive':>14}"
    )
    print(f"{'-' * 9}-+-{'-' * 14}-+-{'-' * 16}-+-{'-' * 12}-+-{'-' * 14}")
    for r in rows:
        print(
            f"{r.producers:>9} | {r.design:<14} | {r.items_per_s:>16,.0f} | "
            f"{r.wakeups_per_item:>12.4f} | {r.ratio_vs_naive:>13.2f}x"
        )
    print(
        "wakeups/item: times the consumer task was woken to take items. ControlBuffer:\n"
        "statistics().consumer_wakeups (a put woke the parked consumer, which then drained\n"
        "the batch). naive and memory channel: one per item by design (woken by a put,\n"
        "or rescheduled after the checkpoint that precedes each item)."
    )


def print_batches(rows: Sequence[Summary], trials: Sequence[Trial]) -> bool:
    """Print ControlBuffer's batches; return True if wakeups <= batches in every trial."""
    print()
    print("ControlBuffer batches (medians; 'worst' = highest wakeups/batch of any repetition)")
    print(
        f"{'producers':>9} | {'items':>7} | {'batches':>8} | {'wakeups':>8} | "
        f"{'items/batch':>11} | {'wakeups/batch':>13} | {'worst':>6}"
    )
    print(f"{'-' * 9}-+-{'-' * 7}-+-{'-' * 8}-+-{'-' * 8}-+-{'-' * 11}-+-{'-' * 13}-+-{'-' * 6}")
    for r in rows:
        if r.design != "ControlBuffer":
            continue
        print(
            f"{r.producers:>9} | {r.items:>7} | {r.batches:>8.0f} | {r.wakeups:>8.0f} | "
            f"{r.items / r.batches:>11.1f} | {r.wakeups / r.batches:>13.3f} | "
            f"{r.max_wakeups_per_batch:>6.3f}"
        )
    return all(t.wakeups <= t.batches for t in trials if t.design == "ControlBuffer")


def machine() -> dict[str, str]:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "cpu": f"{cpu} ({os.cpu_count()} CPUs)",
        "os": platform.platform(),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "trio": trio.__version__,
    }


# ---------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument(
        "--items", type=int, default=DEFAULT_ITEMS, help="items per run (split between producers)"
    )
    ap.add_argument("--reps", type=int, default=DEFAULT_REPS, help="repetitions (medians)")
    ap.add_argument(
        "--producers",
        type=lambda s: tuple(int(x) for x in s.split(",")),
        default=DEFAULT_PRODUCERS,
        help="comma-separated producer counts (default 1,10,100,1000)",
    )
    ap.add_argument(
        "--yield-every",
        type=int,
        default=DEFAULT_YIELD_EVERY,
        help="each producer yields after this many puts (default 1)",
    )
    ap.add_argument("--json", metavar="FILE", help="also write every trial and summary here")
    args = ap.parse_args(argv)
    if args.items < 1 or args.reps < 1 or args.yield_every < 1 or min(args.producers) < 1:
        ap.error("--items, --reps, --yield-every and --producers must be positive")
    if TARGET_PRODUCERS not in args.producers:
        print(f"note: {TARGET_PRODUCERS} producers not measured; the 2x target is not checked")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    info = machine()
    print(f"controlbuf benchmark, {when}")
    print(f"{info['cpu']}; {info['os']}; {info['python']}; trio {info['trio']}")
    print(
        f"items/run={args.items} reps={args.reps} yield-every={args.yield_every} "
        f"mix=90% Data, 5% WindowUpdate, 5% Ping"
    )
    print()

    trials: list[Trial] = []
    for producers in args.producers:
        plan = make_plan(producers, args.items)
        for rep in range(args.reps):
            # Rotate the order so that no design always runs first (warm caches, drift).
            order = DESIGNS[rep % 3 :] + DESIGNS[: rep % 3]
            for design in order:
                gc.collect()
                trials.append(replace(RUNNERS[design](plan, args.yield_every), rep=rep))

    rows = summarize(trials, args.producers)
    print_table(rows)
    one_per_batch = print_batches(rows, trials)

    print()
    print("Targets")
    verdict = "MET" if one_per_batch else "NOT MET"
    print(f"  at most one consumer wake-up per batch (every ControlBuffer trial): {verdict}")
    target_ok: bool | None = None
    for r in rows:
        if r.producers == TARGET_PRODUCERS and r.design == "ControlBuffer":
            target_ok = r.ratio_vs_naive >= TARGET_RATIO
            verdict = "MET" if target_ok else "NOT MET"
            print(
                f"  >= {TARGET_RATIO:.0f}x naive items/s with {TARGET_PRODUCERS} producers: "
                f"{r.ratio_vs_naive:.2f}x (repetitions: {r.min_ratio:.2f}x to "
                f"{r.max_ratio:.2f}x) -> {verdict}"
            )
    elapsed = time.perf_counter() - started
    print(f"\ntotal time {elapsed:.1f} s")

    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(
                {
                    "date": when,
                    "machine": info,
                    "command": " ".join([os.path.basename(sys.executable), *sys.argv]),
                    "config": {
                        "items": args.items,
                        "reps": args.reps,
                        "producers": list(args.producers),
                        "yield_every": args.yield_every,
                    },
                    "targets": {
                        "wakeups_le_batches": one_per_batch,
                        "ratio_at_100_ge_2": target_ok,
                    },
                    "summary": [asdict(r) for r in rows],
                    "trials": [asdict(t) | {"items_per_s": t.items_per_s} for t in trials],
                    "seconds": elapsed,
                },
                f,
                indent=2,
            )
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
