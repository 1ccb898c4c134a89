"""grpc_codec: trio_h2t.grpc's message decoder with and without buffer reuse.

The seed's configuration: unary calls, 6 in flight on one connection, 8 KiB request
and 8 KiB response, through ``trio_h2t.grpc`` itself (``Channel`` and ``Server``,
both in this process over TCP on 127.0.0.1, bytes through the identity codec).
Each round runs once with ``buffer_reuse=True`` on both sides and once with
``buffer_reuse=False`` (the order alternates by round), and reports per side:

- **ops/s**: calls completed in the ``--duration`` window / its length (wall clock,
  after ``--warmup`` seconds unrecorded);
- **allocs/op** and **bytes/op**: what CPython's allocators were asked for during
  the window, over both sides of the call (``allochook.py``, a C hook; tracemalloc
  tracks only live blocks, so it cannot count allocations or bytes asked for).
  ``--tracemalloc`` also reports tracemalloc's peak of live bytes in the window
  (tracing slows every allocation, so ops/s is not comparable then).

The summary prints the medians of the rounds and, for reuse / no reuse, the ratio
of medians with a percentile-bootstrap interval (``stats.bootstrap_ratio``)::

    .venv/bin/python benchmarks/grpc_codec.py                  # 7 rounds of 2 s
    .venv/bin/python benchmarks/grpc_codec.py --size 65536 --rounds 3
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

import trio

import trio_h2t
from trio_h2t import grpc

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.allochook import alloc_counter
from benchmarks.stats import bootstrap_ratio, median

__all__ = ["main", "run_side"]


async def _echo(request: bytes, context: grpc.ServicerContext) -> bytes:
    return request


async def run_side(
    *, reuse: bool, size: int, concurrency: int, warmup: float, duration: float, trace: bool
) -> dict[str, Any]:
    """One measured window for one setting of ``buffer_reuse`` (both sides).

    Checkpoint: always. On cancellation: the server and channel are closed.
    """
    server = grpc.Server(
        [{"/bench.Codec/Echo": grpc.unary_unary_handler(_echo)}], buffer_reuse=reuse
    )
    request = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
    counter = alloc_counter()
    done = 0
    recording = False
    async with (
        trio_h2t.open_server(server, 0, host="127.0.0.1") as listening,
        grpc.open_channel("127.0.0.1", listening.port, buffer_reuse=reuse) as channel,
    ):
        echo = channel.unary_unary("/bench.Codec/Echo")

        async def worker() -> None:
            nonlocal done
            while True:
                response = await echo(request)
                if len(response) != size:
                    raise RuntimeError(f"echoed {len(response)} bytes, not {size}")
                if recording:
                    done += 1

        async with trio.open_nursery() as nursery:
            for _ in range(concurrency):
                nursery.start_soon(worker)
            await trio.sleep(warmup)
            gc.collect()
            if trace:
                tracemalloc.start()
                tracemalloc.reset_peak()
            counter.start()
            recording = True
            start = time.perf_counter()
            await trio.sleep(duration)
            recording = False
            elapsed = time.perf_counter() - start
            allocs = counter.stop()
            peak = None
            if trace:
                peak = tracemalloc.get_traced_memory()[1]
                tracemalloc.stop()
            nursery.cancel_scope.cancel()
    ops = max(done, 1)
    return {
        "reuse": reuse,
        "ops": done,
        "ops_per_s": done / elapsed,
        "allocs_per_op": None if allocs is None else allocs[0] / ops,
        "bytes_per_op": None if allocs is None else allocs[1] / ops,
        "tracemalloc_peak": peak,
    }


def _fmt(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=8192, help="message bytes each way")
    parser.add_argument("--concurrency", type=int, default=6, help="calls in flight")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--warmup", type=float, default=0.5, help="seconds, per side")
    parser.add_argument("--duration", type=float, default=2.0, help="seconds, per side")
    parser.add_argument("--level", type=float, default=0.95, help="bootstrap interval")
    parser.add_argument("--tracemalloc", action="store_true", help="also tracemalloc's peak")
    parser.add_argument("--json", type=Path, help="write every result to this file")
    args = parser.parse_args(argv)
    counter = alloc_counter()
    if not counter.available:
        print(f"note: {counter.why_unavailable}; allocations not counted")
    results: list[dict[str, Any]] = []
    for rnd in range(args.rounds):
        order = (True, False) if rnd % 2 == 0 else (False, True)
        for reuse in order:
            side = functools.partial(
                run_side,
                reuse=reuse,
                size=args.size,
                concurrency=args.concurrency,
                warmup=args.warmup,
                duration=args.duration,
                trace=args.tracemalloc,
            )
            r = trio.run(side)
            r["round"] = rnd
            results.append(r)
            print(
                f"round {rnd} reuse={'on ' if reuse else 'off'} "
                f"{r['ops_per_s']:8.0f} ops/s  {_fmt(r['allocs_per_op'], '7.1f')} allocs/op  "
                f"{_fmt(r['bytes_per_op'], '9.0f')} bytes/op"
                + (f"  peak {r['tracemalloc_peak']} B" if args.tracemalloc else ""),
                flush=True,
            )
    print(
        f"\nunary, {args.concurrency} concurrent, {args.size} B each way, "
        f"{args.rounds} rounds; ratio = reuse on / off, {args.level:.0%} bootstrap interval"
    )
    print(f"{'metric':<11} {'on':>10} {'off':>10} {'ratio':>7}  interval")
    for key, label in (
        ("ops_per_s", "ops/s"),
        ("allocs_per_op", "allocs/op"),
        ("bytes_per_op", "bytes/op"),
    ):
        on = [r[key] for r in results if r["reuse"] and r[key] is not None]
        off = [r[key] for r in results if not r["reuse"] and r[key] is not None]
        if not on or not off:
            continue
        low, high = bootstrap_ratio(on, off, level=args.level)
        m_on, m_off = median(on), median(off)
        print(
            f"{label:<11} {m_on:10.1f} {m_off:10.1f} {m_on / m_off:7.3f}  [{low:.3f}, {high:.3f}]"
        )
    if args.json is not None:
        args.json.write_text(json.dumps({"args": vars(args) | {"json": None}, "results": results}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
