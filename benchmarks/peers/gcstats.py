"""What CPython's cyclic collector does in one benchmark process, per call.

Standard library only: ``grpc_peers.py`` imports it in every role process, purerpc's
interpreter included. ``GcStats`` hooks ``gc.callbacks`` and has two phases:

* **The counting window** (``start`` .. ``stop``): collections per generation, the
  objects each young collection found alive and promoted (a generation-0 collection
  promotes its survivors into generation 1, a generation-1 collection into the old
  generation: the count that Modules/gcmodule.c's ``long_lived_pending`` adds up and
  that lets a full collection run once it exceeds a quarter of the old generation),
  the objects the automatic collections found unreachable and freed (cyclic garbage),
  the objects each full collection walked, the wall time spent collecting, and
  what generation 0 held when it was collected, by type (``detail``).
  The collector runs as it always does.
* **The garbage census** (``census_start`` .. ``census_report``): ``gc.collect()``,
  then ``gc.set_debug(gc.DEBUG_SAVEALL)`` and ``tracemalloc.start()``, the process
  goes on serving or calling, then ``gc.collect()`` again: every object the
  collector found unreachable meanwhile is in ``gc.garbage``, classified by type
  (with a detail: a frame's or coroutine's code, a function's name, an exception's
  class) and by where it was allocated (tracemalloc's two innermost frames; Python
  3.11's tracemalloc has none for an object reused from a free list, such as most
  lists, dicts and tuples, nor for an instance with a ``__dict__``). Slower
  (tracemalloc), so it comes after the counting window, never in it.

The figures per 1,000 calls need the process's calls in each phase: the caller
counts them (``calls`` arguments).
"""

from __future__ import annotations

import gc
import os
import time
import tracemalloc
import types
from collections import Counter
from typing import Any

#: Frames tracemalloc keeps per allocation in the census.
TRACE_DEPTH = 8


def _short(path: str) -> str:
    """A file name from its package on (``trio/_core/_run.py``, ``trio_h2t/_loopy.py``)."""
    parts = path.split(os.sep)
    for marker in ("site-packages", "python3.11", "python3.12", "python3.13"):
        if marker in parts:
            return "/".join(parts[len(parts) - parts[::-1].index(marker) :])
    if "trio_h2t" in parts:
        return "/".join(parts[parts.index("trio_h2t") :])
    return os.path.basename(path)


def detail(obj: object) -> str:
    """What a garbage object is beyond its type: the code a frame, coroutine or
    traceback runs, a function's name, a cell's content type."""
    if isinstance(obj, types.FrameType):
        return obj.f_code.co_qualname
    if isinstance(obj, types.CoroutineType):
        return obj.cr_code.co_qualname
    if isinstance(obj, types.GeneratorType):
        return obj.gi_code.co_qualname
    if isinstance(obj, types.FunctionType):
        return obj.__qualname__
    if isinstance(obj, types.MethodType):
        return str(getattr(obj.__func__, "__qualname__", "?"))
    if isinstance(obj, types.TracebackType):
        return obj.tb_frame.f_code.co_qualname
    if isinstance(obj, types.CellType):
        try:
            return type(obj.cell_contents).__name__
        except ValueError:
            return "(empty)"
    if isinstance(obj, dict):
        return ",".join(sorted(str(k) for k in list(obj)[:4]))
    return ""


class GcStats:
    """The collector's work in this process; see the module docstring."""

    def __init__(self) -> None:
        self.counting = False  # owner: the caller (start, stop)
        self.collections = [0, 0, 0]  # owner: the gc callback
        self.survivors = [0, 0, 0]  # owner: the gc callback; promoted, by generation collected
        self.collected = 0  # owner: the gc callback; unreachable objects freed
        self.walked = 0  # owner: the gc callback; objects full collections walked
        self.seconds = [0.0, 0.0, 0.0]  # owner: the gc callback
        self.longest = 0.0  # owner: the gc callback; the longest full collection
        self.young_by_type: Counter[str] = Counter()  # owner: the gc callback
        self._young = 0  # owner: the gc callback; objects in the generations collected
        self._t0 = 0.0  # owner: the gc callback
        self.calls = 0  # owner: the caller (stop)
        self._census_calls = 0  # owner: the caller (census_start)
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if not self.counting:
            return
        gen = info["generation"]
        if phase == "start":
            # What this collection will look at: generations 0..gen (merged into gen
            # before it starts); survivors move to gen + 1 (or stay in the old one).
            objects = gc.get_objects(0)
            for obj in objects:
                text = detail(obj)
                self.young_by_type[type(obj).__name__ + (f" {text}" if text else "")] += 1
            young = len(objects) + (len(gc.get_objects(1)) if gen else 0)
            del objects
            if gen == 2:
                self.walked += len(gc.get_objects())
            self._young = young
            self._t0 = time.perf_counter()
            return
        spent = time.perf_counter() - self._t0
        self.collections[gen] += 1
        self.seconds[gen] += spent
        self.collected += info["collected"]
        if gen < 2:
            self.survivors[gen] += max(0, self._young - info["collected"])
        else:
            self.longest = max(self.longest, spent)

    def start(self) -> None:
        """Begin the counting window."""
        self.collections = [0, 0, 0]
        self.survivors = [0, 0, 0]
        self.seconds = [0.0, 0.0, 0.0]
        self.collected = self.walked = 0
        self.longest = 0.0
        self.young_by_type.clear()
        self.counting = True

    def stop(self, calls: int) -> None:
        """End the counting window, in which this process completed ``calls``."""
        self.counting = False
        self.calls = calls

    def census_start(self, calls: int) -> None:
        """Collect what is garbage now, then keep (and trace) what the collector finds
        from here on; ``calls`` is this process's count of completed calls so far."""
        gc.collect()
        gc.garbage.clear()
        tracemalloc.start(TRACE_DEPTH)
        gc.set_debug(gc.DEBUG_SAVEALL)
        self._census_calls = calls

    def census_report(self, calls: int, top: int = 40) -> dict[str, Any]:
        """The window's figures and the census, as a JSON-able dict; ``calls`` is this
        process's count of completed calls so far. Frees the garbage kept."""
        gc.collect()
        gc.set_debug(0)
        garbage = list(gc.garbage)
        gc.garbage.clear()
        census_calls = max(1, calls - self._census_calls)
        by_type: Counter[str] = Counter()
        by_site: Counter[str] = Counter()
        for obj in garbage:
            text = detail(obj)
            by_type[type(obj).__name__ + (f" {text}" if text else "")] += 1
            trace = tracemalloc.get_object_traceback(obj)
            if trace is None:
                by_site["(no site: before the census, from a free list, or with a __dict__)"] += 1
            else:
                # tracemalloc lists the oldest frame first: the two most recent
                frames = [f for f in reversed(trace) if not f.filename.endswith("gcstats.py")][:2]
                by_site[" < ".join(f"{_short(f.filename)}:{f.lineno}" for f in frames)] += 1
        tracemalloc.stop()
        del garbage
        per = 1000 / max(1, self.calls)
        return {
            "calls": self.calls,
            "collections_per_1000": [n * per for n in self.collections],
            "promoted_to_1_per_1000": self.survivors[0] * per,
            "promoted_to_old_per_1000": self.survivors[1] * per,
            "collected_per_1000": self.collected * per,
            "gc_ms_per_1000": [s * 1e3 * per for s in self.seconds],
            "full_walked_mean": self.walked / self.collections[2] if self.collections[2] else 0,
            "full_longest_ms": self.longest * 1e3,
            "census_calls": census_calls,
            "garbage_per_call": sum(by_type.values()) / census_calls,
            "young_per_1000": [(what, n * per) for what, n in self.young_by_type.most_common(top)],
            "garbage_by_type": by_type.most_common(top),
            "garbage_by_site": by_site.most_common(top),
        }


def format_report(side: str, impl: str, reports: list[dict[str, Any]]) -> list[str]:
    """Lines for one implementation's side: medians over ``reports`` (one per round)
    of the window's figures, and the census of the last."""
    import statistics

    def med(key: str, index: int | None = None) -> float:
        values: list[float] = [r[key] if index is None else r[key][index] for r in reports]
        return statistics.median(values)

    last = reports[-1]
    lines = [
        f"{impl} {side}: per 1000 calls (median of {len(reports)}):"
        f" collections gen0 {med('collections_per_1000', 0):.1f}"
        f" gen1 {med('collections_per_1000', 1):.2f} gen2 {med('collections_per_1000', 2):.3f};"
        f" promoted to gen1 {med('promoted_to_1_per_1000'):.0f},"
        f" to old {med('promoted_to_old_per_1000'):.0f};"
        f" cyclic garbage collected {med('collected_per_1000'):.0f};"
        f" GC ms gen0/1/2 {med('gc_ms_per_1000', 0):.2f}/{med('gc_ms_per_1000', 1):.2f}"
        f"/{med('gc_ms_per_1000', 2):.2f}; a full collection walks"
        f" {med('full_walked_mean'):.0f} objects, longest {med('full_longest_ms'):.1f} ms",
        f"  census ({last['census_calls']} calls): {last['garbage_per_call']:.2f} garbage"
        " objects per call",
    ]
    lines += [f"    {n:6d}  {what}" for what, n in last["garbage_by_type"]]
    lines += ["  generation 0 at its collections (what they promote), per 1000 calls, last run:"]
    lines += [f"    {n:8.0f}  {what}" for what, n in last["young_per_1000"]]
    lines += ["  allocated at:"] + [f"    {n:6d}  {site}" for site, n in last["garbage_by_site"]]
    return lines
