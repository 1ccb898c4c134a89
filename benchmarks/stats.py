"""Statistics for the benchmarks (after grpc-go's ``benchmark/stats``).

Sans-IO, so that every script (``run.py``, ``targets.py``) can use it (only
:class:`StepCounter`, a trio instrument, touches trio):

- :func:`percentile`: grpc-go's rule, ``ordered[count * p / 100 - 1]``;
- :class:`Histogram`: latencies in exponentially growing buckets, printed as grpc-go's
  ``stats.Histogram`` prints them (``--histogram`` in benchmain);
- :func:`median` and :func:`bootstrap_ratio`: the ratio of two medians with a
  percentile-bootstrap interval (each side resampled independently, fixed seed);
- :class:`GcTimer` and :class:`StepCounter`: time in the cyclic collector and trio task
  steps, the two counters the harness reads at the window's edges.

The module is named ``stats``, not ``statistics``: the scripts run with this directory
first on ``sys.path``, where a ``statistics.py`` would hide the standard library's.
"""

from __future__ import annotations

import gc
import math
import random
import statistics
import time
from collections.abc import Sequence
from typing import Any

import trio

__all__ = [
    "GcTimer",
    "Histogram",
    "StepCounter",
    "bootstrap_ratio",
    "gc_timer",
    "median",
    "percentile",
    "prepare_gc",
]


def percentile(ordered: Sequence[float], p: float) -> float:
    """grpc-go's percentile: ``ordered[count * p / 100 - 1]`` (clamped); NaN if empty."""
    if not ordered:
        return math.nan
    index = int(len(ordered) * p / 100) - 1
    return ordered[min(max(index, 0), len(ordered) - 1)]


def median(values: Sequence[float]) -> float:
    """The median, or NaN for no values (a configuration that was not measured)."""
    return statistics.median(values) if values else math.nan


def bootstrap_ratio(
    top: Sequence[float],
    bottom: Sequence[float],
    *,
    resamples: int = 2000,
    level: float = 0.90,
    seed: int = 0,
) -> tuple[float, float]:
    """A ``level`` percentile-bootstrap interval for ``median(top) / median(bottom)``.

    Each side's values are resampled independently, with replacement, ``resamples``
    times; the seed is fixed, so the same values always print the same interval.
    NaN, NaN when either side is empty.
    """
    if not top or not bottom:
        return math.nan, math.nan
    rng = random.Random(seed)
    top, bottom = list(top), list(bottom)
    ratios = sorted(
        statistics.median(rng.choices(top, k=len(top)))
        / statistics.median(rng.choices(bottom, k=len(bottom)))
        for _ in range(resamples)
    )
    tail = (1.0 - level) / 2
    return ratios[int(tail * resamples)], ratios[min(resamples - 1, int((1 - tail) * resamples))]


class Histogram:
    """Counts of values in buckets ``[min * (1 + growth)^k, min * (1 + growth)^(k+1))``.

    grpc-go's ``stats.Histogram`` layout: the first bucket starts at 0, the last one is
    open-ended. Values are seconds; :meth:`lines` prints milliseconds.
    """

    def __init__(self, *, min_value: float = 1e-5, growth: float = 0.5, buckets: int = 24):
        self.min_value = min_value  # immutable after init
        self.growth = growth  # immutable after init
        self.counts = [0] * buckets  # owner: the task that adds
        self.count = 0
        self.total = 0.0
        self._log_base = math.log1p(growth)

    def bucket_of(self, value: float) -> int:
        """The index of the bucket ``value`` falls in."""
        if value < self.min_value:
            return 0
        k = int(math.log(value / self.min_value) / self._log_base) + 1
        return min(k, len(self.counts) - 1)

    def lower_bound(self, index: int) -> float:
        return 0.0 if index == 0 else self.min_value * (1 + self.growth) ** (index - 1)

    def add(self, value: float) -> None:
        self.counts[self.bucket_of(value)] += 1
        self.count += 1
        self.total += value

    def extend(self, values: Sequence[float]) -> None:
        for value in values:
            self.add(value)

    def lines(self, width: int = 40) -> list[str]:
        """One line per non-empty bucket: range in ms, count, share, cumulative, bar."""
        if not self.count:
            return ["(no values)"]
        first = next(i for i, c in enumerate(self.counts) if c)
        last = max(i for i, c in enumerate(self.counts) if c)
        peak = max(self.counts)
        out = [f"Count: {self.count}  Avg: {self.total / self.count * 1e3:.4f} ms"]
        cumulative = 0
        for i in range(first, last + 1):
            c = self.counts[i]
            cumulative += c
            low = self.lower_bound(i) * 1e3
            high = "inf" if i == len(self.counts) - 1 else f"{self.lower_bound(i + 1) * 1e3:.4f}"
            bar = "#" * round(width * c / peak)
            out.append(
                f"[{low:10.4f}, {high:>10}) ms {c:8d} {c / self.count:6.1%} "
                f"{cumulative / self.count:6.1%}  {bar}"
            )
        return out


class GcTimer:
    """Wall time spent in the cyclic garbage collector (via ``gc.callbacks``)."""

    def __init__(self) -> None:
        self.seconds = 0.0  # owner: the gc callback
        self.collections = [0, 0, 0]  # owner: the gc callback
        self._started = 0.0
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._started
            self.collections[info["generation"]] += 1


_gc_timer: GcTimer | None = None


def gc_timer() -> GcTimer:
    """The process's one :class:`GcTimer` (installed on first use)."""
    global _gc_timer
    if _gc_timer is None:
        _gc_timer = GcTimer()
    return _gc_timer


def prepare_gc(freeze: bool, threshold: int = 0) -> None:
    """Start timing the collector; with ``freeze``, move every object that exists now
    out of its reach (``gc.freeze()``, as long-running servers do after start-up);
    with ``threshold``, set the generation-0 threshold (CPython's default: 700)."""
    gc_timer()
    if threshold:
        _, gen1, gen2 = gc.get_threshold()
        gc.set_threshold(threshold, gen1, gen2)
    if freeze:
        gc.collect()
        gc.freeze()


class StepCounter(trio.abc.Instrument):
    """Counts task steps (a task running until its next yield) and scheduler
    loop iterations (waits for I/O) while installed."""

    def __init__(self) -> None:
        self.steps = 0  # owner: the trio run loop (instrument hooks)
        self.io_waits = 0  # owner: the trio run loop (instrument hooks)

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self.steps += 1

    def before_io_wait(self, timeout: float) -> None:
        self.io_waits += 1
