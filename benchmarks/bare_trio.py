"""What 1000 concurrent streams cost trio itself: the unary task shape with no HTTP/2.

``targets.py``'s last target compares QPS at 1000 concurrent streams with QPS at 100. In
trio_h2t's instructions per RPC nothing grows with the number of streams
(``icount.py``), yet over the memory network, where both sides live in one process,
an RPC at 1000 streams costs more CPU time than at 100. This script measures how
much of that trio and CPython charge by themselves: it keeps the task shape of
``benchmain.py --workload unary --network memory`` and drops everything else.

- ``--concurrency`` worker tasks loop: build a request (a small object holding a
  copy of a header list), hand it to the "reader" task (waking it if it sleeps),
  and sleep until the reply wakes them (``wait_task_rescheduled``, as trio_h2t's
  streams do).
- The reader takes every queued request in one batch and starts one handler task
  per request in its nursery, like the server's per-stream tasks.
- A handler checkpoints once, attaches a reply and wakes its worker.

No bytes, no h2, no flow control: the per-request state is a few objects, not the
few dozen of a real stream. So the growth measured here is a floor for any
trio-based transport with this task shape, not an estimate of trio_h2t's.

Each run is a fresh process (``--child``); ``--rounds`` alternate the two
concurrencies and the script prints CPU time per request (``time.process_time()``
over the window / requests) per run, the medians and their ratio.

``targets.py`` runs the same two children in every round, beside trio_h2t's.

Run: ``.venv/bin/python benchmarks/bare_trio.py`` (about 1 minute).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import trio

HEADERS = [(b":method", b"POST"), (b":scheme", b"http"), (b":path", b"/bench/unary")]


class _Request:
    __slots__ = ("headers", "reply", "task")

    def __init__(self, task: trio.lowlevel.Task, headers: list[tuple[bytes, bytes]]) -> None:
        self.task = task
        self.headers = headers
        self.reply: list[tuple[bytes, bytes]] | None = None


def _never_cancelled(_: object) -> trio.lowlevel.Abort:
    return trio.lowlevel.Abort.FAILED  # nothing here is ever cancelled


class _Bench:
    def __init__(self, concurrency: int) -> None:
        self.inbox: list[_Request] = []
        self.reader: trio.lowlevel.Task | None = None
        self.reader_parked = False
        self.stopping = False
        self.workers_left = concurrency
        self.ops = 0

    def wake_reader(self) -> None:
        if self.reader_parked and self.reader is not None:
            self.reader_parked = False
            trio.lowlevel.reschedule(self.reader)

    async def worker(self) -> None:
        me = trio.lowlevel.current_task()
        while not self.stopping:
            self.inbox.append(_Request(me, list(HEADERS)))
            self.wake_reader()
            await trio.lowlevel.wait_task_rescheduled(_never_cancelled)
            self.ops += 1
        self.workers_left -= 1
        self.wake_reader()

    async def handler(self, request: _Request) -> None:
        await trio.lowlevel.checkpoint()
        request.reply = [(b":status", b"200")]
        trio.lowlevel.reschedule(request.task)

    async def read(self, nursery: trio.Nursery) -> None:
        self.reader = trio.lowlevel.current_task()
        while True:
            if not self.inbox:
                if not self.workers_left:
                    return
                self.reader_parked = True
                await trio.lowlevel.wait_task_rescheduled(_never_cancelled)
                continue
            batch, self.inbox = self.inbox, []
            for request in batch:
                nursery.start_soon(self.handler, request)
            await trio.lowlevel.checkpoint()


async def _child(concurrency: int, warmup: float, duration: float) -> float:
    bench = _Bench(concurrency)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(bench.read, nursery)
        for _ in range(concurrency):
            nursery.start_soon(bench.worker)
        await trio.sleep(warmup)
        ops0, cpu0 = bench.ops, time.process_time()
        await trio.sleep(duration)
        ops, cpu = bench.ops - ops0, time.process_time() - cpu0
        bench.stopping = True
    return cpu / ops * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--duration", type=float, default=3.0, help="measured seconds per run")
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--json", metavar="FILE", help="with --child: append the result to FILE")
    args = parser.parse_args()
    if args.child:
        us = trio.run(_child, args.child, args.warmup, args.duration)
        print(us)
        if args.json:
            path = Path(args.json)
            runs = json.loads(path.read_text()) if path.exists() else []
            runs.append({"bench": "bare_trio", "concurrency": args.child, "cpu_us_per_op": us})
            path.write_text(json.dumps(runs, indent=1) + "\n")
        return
    results: dict[int, list[float]] = {100: [], 1000: []}
    for rnd in range(args.rounds):
        order = (100, 1000) if rnd % 2 == 0 else (1000, 100)
        for concurrency in order:
            out = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--child",
                    str(concurrency),
                    "--warmup",
                    str(args.warmup),
                    "--duration",
                    str(args.duration),
                ],
                check=True,
                capture_output=True,
                text=True,
            )
            us = float(out.stdout)
            results[concurrency].append(us)
            print(f"[{rnd + 1}/{args.rounds}] c={concurrency:<5} {us:7.2f} µs CPU per request")
    low, high = (statistics.median(results[c]) for c in (100, 1000))
    print(
        f"bare trio, medians over {args.rounds} rounds: c=100 {low:.2f} µs, c=1000 {high:.2f} µs "
        f"per request (+{high - low:.2f} µs, +{high / low - 1:.0%}); "
        f"as QPS on one core, c=1000 / c=100 = {low / high:.3f}x"
    )


if __name__ == "__main__":
    main()
