"""benchmain: HTTP/2 workloads over trio_h2t (after grpc-go's benchmain).

Run one configuration, print its figures, optionally append them to a JSON file;
``compare`` prints two such files side by side (after grpc-go's benchresult)::

    .venv/bin/python benchmarks/benchmain.py             # unary, c=100, memory, 0 B
    .venv/bin/python benchmarks/benchmain.py --workload grpc-unary --network tcp
    .venv/bin/python benchmarks/benchmain.py --network memory --allocs --json new.json
    .venv/bin/python benchmarks/benchmain.py compare old.json new.json

This file is the command line and the printing; the parts live beside it, as in
grpc-go's ``benchmark`` package:

- ``workloads.py``: what each workload puts on the wire, both sides (``unary``,
  ``grpc-unary``, ``streaming``, ``bulk``);
- ``harness.py``: client and server setup, the run loop, the result record;
- ``stats.py``: percentiles, the latency histogram, medians with bootstrap intervals,
  the collector timer and the task-step counter;
- ``allochook.py``: the allocation counter (a C hook on CPython's allocators);
- ``connstats.py``: loopy's write counters, from the connections' ``statistics()``.

``--concurrency N`` streams are in flight on **one** connection (one task per slot).
``--network memory`` runs client and server in this process over
``trio.testing.memory_stream_pair``; ``--network tcp`` starts the server as a separate
process (``benchmain.py --serve``) and connects to it on 127.0.0.1.

How each number is measured
---------------------------
- **Warm-up** (``--warmup`` s) runs the workload without recording. Then every
  operation that *completes* during the next ``--duration`` seconds is counted.
- **QPS** = operations completed in the window / window length (wall clock);
  **MB/s** (bulk) = body bytes both ways of those operations / window.
- **Latency** of an operation: ``time.perf_counter()`` from its start (entering
  ``open_stream``, or before ``send_data`` for streaming) to the end of the response.
  p50/p90/p99 read the sorted latencies at index ``count * p / 100 - 1``, as grpc-go
  does; avg is the mean; ``--histogram`` prints their distribution.
- **frames/write** is loopy's frames framed / ``send_all`` calls over the window, each
  side (the server's fetched by a control request when it is another process).
- **wire bytes/op** = bytes both loopies wrote in the window / operations.
- **GC share** = wall time inside the cyclic garbage collector (``gc.callbacks``)
  during the window / CPU time of both sides; with the collections per generation.
  ``--gc-freeze`` calls ``gc.freeze()`` after start-up and ``--gc-threshold N`` sets
  the generation-0 threshold, in both processes (both off by default).
- **CPU** = ``time.process_time()`` over the window / its length, per process (1.0 =
  one core busy). Over memory there is one process: client and server together.
  **CPU/op** = CPU seconds of both sides over the window / operations.
- **Allocs/op and Bytes/op** (only with ``--allocs``) come from a *separate* pass run
  after the QPS pass on the same, warm connection, so that the QPS pass is never
  slowed by counting (``allochook.py``). They cover client *and* server, plus the
  harness's own loop. The same pass counts trio **task steps** and scheduler I/O
  waits per operation, both sides, with a ``trio.abc.Instrument``.

Profiling: ``--profile FILE`` runs cProfile over the measurement window only
(client, or client and server over memory); ``--server-profile FILE`` does the same in
the TCP server process. Print them with ``python -m pstats FILE`` or
``--profile-top N``. cProfile slows everything down: never read QPS off a profiled run.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import math
import pstats
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

if not __package__:  # run as a script: benchmarks/_bootstrap.py registers the package
    importlib.import_module("_bootstrap")

import trio

from benchmarks.harness import NETWORKS, run_key, run_name, run_once, serve_main
from benchmarks.workloads import WORKLOADS

# ---------------------------------------------------------------- printing


def fmt_latency(ms: float) -> str:
    if math.isnan(ms):
        return "n/a"
    if ms >= 1000:
        return f"{ms / 1000:.4f} s"
    if ms >= 1:
        return f"{ms:.4f} ms"
    return f"{ms * 1000:.4f} µs"


def fmt_opt(value: float | None, spec: str = ".1f") -> str:
    return "n/a" if value is None else format(value, spec)


def print_result(r: dict[str, Any]) -> None:
    print(f"python{r['python']}/trio_h2t{r['trio_h2t']}/h2 {r['h2']}/trio {r['trio']}")
    print(f"{r['name']}-benchTime_{r['duration']:g}s-warmup_{r['warmup']:g}s:")
    print(
        f"50_Latency: {fmt_latency(r['p50_ms'])} \t90_Latency: {fmt_latency(r['p90_ms'])} "
        f"\t99_Latency: {fmt_latency(r['p99_ms'])} \tAvg_Latency: {fmt_latency(r['avg_ms'])} "
        f"\tBytes/op: {fmt_opt(r['bytes_per_op'])} \tAllocs/op: {fmt_opt(r['allocs_per_op'])}"
    )
    print(f"Number of requests: {r['ops']} \tQPS: {r['qps']:,.1f}")
    if r.get("mb_per_s") is not None:
        print(f"Throughput: {r['mb_per_s']:,.1f} MB/s (body bytes, both ways)")
    if r.get("task_steps_per_op") is not None:
        print(
            f"trio task steps/op: {r['task_steps_per_op']:.2f} \tscheduler I/O waits/op: "
            f"{r['io_waits_per_op']:.3f} (both sides, from the --allocs pass)"
        )
    server_fpw = (
        f"server {r['server_frames_per_write']:.1f} "
        f"({r['server_frames']} frames / {r['server_send_alls']} send_all)"
    )
    print(
        f"loopy frames per send_all: client {r['frames_per_write']:.1f} "
        f"({r['client_frames']} frames / {r['client_send_alls']} send_all), {server_fpw}"
    )
    cpu = f"CPU (cores busy): client {r['client_cpu']:.2f}"
    if r["network"] == "memory":
        cpu = f"CPU (cores busy): client+server {r['client_cpu']:.2f}"
    elif r["server_cpu"] is not None:
        cpu += f", server {r['server_cpu']:.2f}"
    print(
        f"{cpu} \tCPU/op: {fmt_opt(r['cpu_us_per_op'])} µs (both sides)"
        f" \tWire bytes/op: {fmt_opt(r['wire_bytes_per_op'])}"
    )
    gc_share = "n/a" if r["gc_share"] is None else f"{r['gc_share']:.1%}"
    frozen = " (after gc.freeze())" if r["gc_freeze"] else ""
    frozen += f", gen-0 threshold {r['gc_threshold']}"
    print(
        f"GC: {gc_share} of the CPU time, collections per generation {r['gc_collections']}{frozen}"
    )


def append_json(path: str, result: dict[str, Any]) -> None:
    """Append ``result`` to the JSON list in ``path`` (created if missing)."""
    runs: list[dict[str, Any]] = []
    file = Path(path)
    if file.exists() and file.stat().st_size:
        loaded = json.loads(file.read_text())
        runs = loaded if isinstance(loaded, list) else [loaded]
    runs.append(result)
    file.write_text(json.dumps(runs, indent=1) + "\n")


def load_runs(path: str) -> list[dict[str, Any]]:
    loaded = json.loads(Path(path).read_text())
    return loaded if isinstance(loaded, list) else [loaded]


# (title, key, format); the latencies and sizes follow grpc-go's benchresult rows.
COMPARE_ROWS: tuple[tuple[str, str, str], ...] = (
    ("QPS", "qps", ".1f"),
    ("TotalOps", "ops", ".0f"),
    ("Bytes/op", "bytes_per_op", ".1f"),
    ("Allocs/op", "allocs_per_op", ".1f"),
    ("50th-Lat(ms)", "p50_ms", ".4f"),
    ("90th-Lat(ms)", "p90_ms", ".4f"),
    ("99th-Lat(ms)", "p99_ms", ".4f"),
    ("Avg-Lat(ms)", "avg_ms", ".4f"),
    ("Frames/write", "frames_per_write", ".2f"),
    ("Srv-Frames/write", "server_frames_per_write", ".2f"),
    ("WireBytes/op", "wire_bytes_per_op", ".1f"),
    ("Client-CPU", "client_cpu", ".2f"),
    ("Server-CPU", "server_cpu", ".2f"),
    ("CPU-us/op", "cpu_us_per_op", ".1f"),
    ("GC-share", "gc_share", ".3f"),
    ("TaskSteps/op", "task_steps_per_op", ".2f"),
)


def _median_of(runs: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in runs if isinstance(r.get(key), int | float)]
    values = [v for v in values if not math.isnan(v)]
    return statistics.median(values) if values else None


def percentage(before: float | None, after: float | None) -> str:
    if before is None or after is None:
        return ""
    if before == 0:
        return "NaN%" if after == 0 else "Inf%"
    return f"{(after - before) * 100 / before:+.2f}%"


def compare(old_path: str, new_path: str) -> None:
    """Before/After/Percentage per configuration found in both files (medians)."""
    old: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    new: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for path, into in ((old_path, old), (new_path, new)):
        for r in load_runs(path):
            if "workload" in r and "network" in r:  # skip other kinds of records
                into.setdefault(run_key(r), []).append(r)
    common = [k for k in old if k in new]
    if not common:
        print("compare: no configuration is in both files")
        return
    for key in common:
        before, after = old[key], new[key]
        counts = f" (medians of {len(before)} / {len(after)} runs)"
        print(run_name(before[0]) + counts)
        print(f"{'Title':<20}{'Before':>12}{'After':>12}{'Percentage':>12}")
        for title, field, spec in COMPARE_ROWS:
            b, a = _median_of(before, field), _median_of(after, field)
            if b is None and a is None:
                continue
            print(f"{title:<20}{fmt_opt(b, spec):>12}{fmt_opt(a, spec):>12}{percentage(b, a):>12}")
        for title, field in (("PythonVersion", "python"), ("H2Version", "h2")):
            print(f"{title:<20}{before[-1].get(field, '?'):>12}{after[-1].get(field, '?'):>12}")
        print()


# ---------------------------------------------------------------- command line


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="benchmain.py",
        description="HTTP/2 workloads over trio_h2t (after grpc-go's "
        "benchmain). 'benchmain.py compare OLD.json NEW.json' compares two result files.",
    )
    p.add_argument("--workload", choices=list(WORKLOADS), default="unary")
    p.add_argument("--concurrency", type=int, default=100, help="streams in flight (one conn)")
    p.add_argument("--req-size", type=int, default=0, help="request body/message bytes")
    p.add_argument(
        "--resp-size",
        type=int,
        default=None,
        help="response body/message bytes (default: 0; bulk: 1 MiB)",
    )
    p.add_argument("--histogram", action="store_true", help="print the latency histogram")
    p.add_argument("--duration", type=float, default=5.0, help="measured seconds")
    p.add_argument("--warmup", type=float, default=1.0, help="unrecorded seconds first")
    p.add_argument("--network", choices=NETWORKS, default="memory")
    p.add_argument("--allocs", action="store_true", help="add the allocation-counting pass")
    p.add_argument("--allocs-duration", type=float, default=1.0, help="its length (s)")
    p.add_argument("--json", metavar="FILE", help="append this run's result to FILE")
    p.add_argument("--quiet", action="store_true", help="no progress line")
    p.add_argument(
        "--gc-freeze",
        action="store_true",
        help="gc.freeze() after start-up in both processes (long-running-server tuning)",
    )
    p.add_argument(
        "--gc-threshold",
        type=int,
        default=0,
        metavar="N",
        help="generation-0 GC threshold in both processes (CPython's default: 700)",
    )
    p.add_argument("--profile", metavar="FILE", help="cProfile the window (client side)")
    p.add_argument("--server-profile", metavar="FILE", help="cProfile the TCP server too")
    p.add_argument("--profile-top", type=int, default=0, metavar="N", help="print N rows")
    p.add_argument(
        "--client-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a TransportConfig field for the client (repeatable), e.g. read_buffer_size=4096",
    )
    p.add_argument(
        "--server-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a TransportConfig field for the server (repeatable)",
    )
    # Internal: the TCP server process.
    p.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--max-concurrent-streams", type=int, default=101, help=argparse.SUPPRESS)
    return p


# Where the profiled time went: the first group whose key is in "file:function".
PROFILE_GROUPS: tuple[tuple[str, str], ...] = (
    ("'poll' of 'select.epoll'", "idle (waiting in epoll)"),
    ("of '_socket.socket'", "socket syscalls (send/recv)"),
    ("/trio_h2t/", "trio_h2t"),
    ("/benchmarks/", "benchmark harness"),
    ("/h2/", "h2"),
    ("/hpack/", "hpack"),
    ("/hyperframe/", "hyperframe"),
    ("/trio/", "trio"),
    ("/logging/", "logging (hpack's debug calls)"),
)


def profile_breakdown(path: str) -> list[tuple[str, float, float]]:
    """(group, seconds, share) of the profile's own time (tottime), largest first.

    Built-ins (``isinstance``, ``len``, ...) land in "other": cProfile does not say who
    called them, and h2 makes most of those calls.
    """
    raw: dict[tuple[str, int, str], tuple[Any, ...]] = pstats.Stats(path).stats  # type: ignore[attr-defined]
    totals: dict[str, float] = {}
    for (filename, _, function), (_, _, tottime, *_) in raw.items():
        where = f"{filename}:{function}"
        group = next((g for key, g in PROFILE_GROUPS if key in where), "other (built-ins, stdlib)")
        totals[group] = totals.get(group, 0.0) + tottime
    grand = sum(totals.values()) or 1.0
    return sorted(((g, t, t / grand) for g, t in totals.items()), key=lambda x: -x[1])


def print_profile(path: str, top: int, title: str) -> None:
    print(f"\n== {title}: time by package ({path})")
    for group, seconds, share in profile_breakdown(path):
        print(f"  {group:<32}{seconds:8.3f} s {share:6.1%}")
    print(f"\n== {title}: top {top} by tottime")
    pstats.Stats(path, stream=sys.stdout).sort_stats("tottime").print_stats(top)


def main(argv: Sequence[str] | None = None) -> int:
    logging.getLogger("hpack").setLevel(
        logging.WARNING
    )  # docs/architecture.md: hpack logs per header
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "compare":
        cp = argparse.ArgumentParser(prog="benchmain.py compare")
        cp.add_argument("old")
        cp.add_argument("new")
        ns = cp.parse_args(argv[1:])
        compare(ns.old, ns.new)
        return 0
    args = parser().parse_args(argv)
    if args.serve:
        trio.run(serve_main, args)
        if args.profile and args.profile_top:
            print_profile(args.profile, args.profile_top, "server")
        return 0
    if args.concurrency < 1 or args.req_size < 0 or (args.resp_size or 0) < 0:
        parser().error("--concurrency must be >= 1 and sizes >= 0")
    if args.server_profile and args.network != "tcp":
        parser().error("--server-profile needs --network tcp (over memory, --profile covers both)")
    result = run_once(args)
    print_result(result)
    if args.histogram:
        print("Histogram (unit: ms)")
        print("\n".join(result["histogram"]))
    if args.json:
        append_json(args.json, result)
    if args.profile and args.profile_top:
        print_profile(args.profile, args.profile_top, "client" if args.network == "tcp" else "both")
    if args.server_profile and args.profile_top:
        print_profile(args.server_profile, args.profile_top, "server")
    return 0


if __name__ == "__main__":
    sys.exit(main())
