"""What every micro-benchmark reports of two designs: both medians and their ratio
with a 90 % bootstrap interval (:func:`compare`), and, on ``--json``, every sample
(:func:`write_samples`). Each script keeps its own table layout; the figures in it
come from here, so that they are computed the same way everywhere.

Two ratios (``benchmarks/stats.py`` computes both):

- unpaired (the default): ``median(top) / median(bottom)``, each side resampled
  independently (:func:`benchmarks.stats.bootstrap_ratio`);
- ``paired=True``: the two lists are rounds timed side by side, and the ratio is the
  median of the per-round ratios ``top[i] / bottom[i]``, resampled as one list.
"""

from __future__ import annotations

import json
import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from benchmarks.stats import bootstrap_ratio, median

__all__ = ["Comparison", "compare", "write_samples"]


@dataclass(frozen=True, slots=True)
class Comparison:
    """Two designs' samples summarised. Immutable."""

    top: float  #: the median of the ratio's numerator's samples
    bottom: float  #: the median of its denominator's samples
    ratio: float
    low: float  #: the ratio's 90 % bootstrap interval
    high: float


def _paired_interval(ratios: Sequence[float], level: float = 0.90) -> tuple[float, float]:
    """A percentile-bootstrap interval for the median of ``ratios`` (fixed seed)."""
    rng = random.Random(0)
    meds = sorted(statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(2000))
    tail = (1 - level) / 2
    return meds[int(tail * 2000)], meds[min(1999, int((1 - tail) * 2000))]


def compare(top: Sequence[float], bottom: Sequence[float], *, paired: bool = False) -> Comparison:
    """``top`` against ``bottom``: both medians, the ratio and its interval (NaN where
    a side has no samples)."""
    if not paired:
        low, high = bootstrap_ratio(top, bottom)
        return Comparison(median(top), median(bottom), median(top) / median(bottom), low, high)
    ratios = [a / b for a, b in zip(top, bottom, strict=True) if b]
    low, high = _paired_interval(ratios) if ratios else (math.nan, math.nan)
    ratio = statistics.median(ratios) if ratios else math.nan
    return Comparison(median(top), median(bottom), ratio, low, high)


def write_samples(path: str | None, **fields: Any) -> None:
    """Write ``fields`` (the run's counts and its ``samples``) as indented JSON to
    ``path``; nothing when ``path`` is None (no ``--json`` given)."""
    if path is None:
        return
    with open(path, "w", encoding="utf-8") as f:
        json.dump(fields, f, indent=2)
        f.write("\n")
