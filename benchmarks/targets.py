"""The targets suite: trio_h2t against the h2 ceiling, PASS/FAIL per performance target.

(Comparing two commits of trio_h2t side by side is ``run.py``'s job.)

One invocation runs, ``--rounds`` times, in a rotating order (so that a slow spell on
a shared machine does not land on one configuration only):

- ``micro/ceiling.py --state h2`` and ``--state trio_h2t`` (the unary exchange between two
  bare h2 connections in one process, no I/O; stock h2, and trio_h2t's H2State);
- ``benchmain.py --workload unary`` with 0-byte bodies at 100 and 1000 concurrent
  streams on one connection, over TCP (client here, server in its own process) and
  over the memory network (both in one process). The 100-stream runs add the
  allocation-counting pass (``--allocs``), which runs after their QPS pass;
- ``bare_trio.py`` at 100 and 1000 concurrent workers: the same task shape with no
  HTTP/2 at all, the floor of what more streams cost trio and CPython themselves.

Each run is a fresh process, so no run inherits another's heap or caches. It then
prints every run, the medians per configuration and a summary with PASS/FAIL per
target:

1. TCP QPS at 100 streams >= 1.2 x the ceiling;
2. memory-network QPS at 100 streams >= 0.6 x the ceiling;
3. loopy writes >= 20 frames per ``send_all`` at 100 streams (every side, both
   networks);
4. QPS at 1000 streams >= 0.9 x QPS at 100, in the configuration the targets are
   set for (TCP, client and server in separate processes).

The same ratio over the memory network is printed under the targets, beside bare
trio's: there both sides' 1000 streams share one process and one core's 2 MiB L2
cache, and what grows there (with instructions per RPC unchanged, ``icount.py``) is
the cost of the cyclic collector and of cache misses, which trio alone shows too.

The ratios use the median of each side. The ceiling in targets 1-2 is stock h2's (two
``H2Connection`` objects, ``micro/ceiling.py --state h2``); the ratio to trio_h2t's
own H2State ceiling is shown beside it. Beside each ratio is a 90 % bootstrap interval
(the rounds of each side resampled 2,000 times with a fixed seed; for the ceiling,
each round's median of its runs): on a shared machine single runs of one
configuration spread by 25 % or more, so a median over few rounds can land well away
from the ratio it estimates, and the interval says how far.

**Pooling**: ``--json FILE`` appends every result to FILE; ``--from-json FILE...``
runs nothing and summarises the results in those files (every round of several
invocations pooled), with the same tables and verdicts.

**Contention**: the CPU time other processes used during each run (from
``/proc/stat``, minus this suite's own children) is printed per run; on a shared
2-core machine read the figures with it in mind. ``--max-others CORES`` first waits
(at most ``--wait`` s) until others use no more than that, then discards (prints,
does not count) and repeats a run during which they used more, at most ``--retries``
times; the last attempt is always kept.

Run: ``.venv/bin/python benchmarks/targets.py`` (about 2 minutes; ``--help``).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if not __package__:  # run as a script: benchmarks/_bootstrap.py registers the package
    importlib.import_module("_bootstrap")

from benchmarks.stats import bootstrap_ratio, median

HERE = Path(__file__).resolve().parent
BENCHMAIN = HERE / "benchmain.py"
CEILING = HERE / "micro" / "ceiling.py"
BARE_TRIO = HERE / "bare_trio.py"

TARGET_TCP = 1.2
TARGET_MEMORY = 0.6
TARGET_FRAMES_PER_WRITE = 20.0
TARGET_SCALING = 0.9


def proc_stat_busy() -> float | None:
    """Seconds of non-idle CPU on the whole machine since boot (None if unknown)."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    except OSError:
        return None
    ticks = [int(x) for x in fields]
    # user nice system idle iowait irq softirq steal (guest is inside user)
    busy = sum(ticks[:8]) - ticks[3] - ticks[4]
    return busy / os.sysconf("SC_CLK_TCK")


def wait_quiet(max_others: float, timeout: float) -> float | None:
    """Wait (at most ``timeout`` s) until other processes use at most ``max_others``
    cores over a 2-second window; return what they used in the last window."""
    deadline = time.monotonic() + timeout
    while True:
        b0, o0, t0 = proc_stat_busy(), children_cpu(), time.perf_counter()
        time.sleep(2.0)
        b1, o1, t1 = proc_stat_busy(), children_cpu(), time.perf_counter()
        if b0 is None or b1 is None:
            return None
        used = max(0.0, (b1 - b0) - (o1 - o0)) / (t1 - t0)
        if used <= max_others or time.monotonic() >= deadline:
            return used


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@dataclass(eq=False)  # compared (and hashed) by identity
class Step:
    """One configuration of the suite and the results of its runs."""

    label: str
    command: list[str]
    key: tuple[Any, ...]  # step_key() of its results
    results: list[dict[str, Any]] = field(default_factory=list)
    others: list[float] = field(default_factory=list)  # cores used by other processes


def run_step(step: Step, env: dict[str, str]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        busy0, own0, t0 = proc_stat_busy(), children_cpu(), time.perf_counter()
        proc = subprocess.run(
            [*step.command, "--json", str(out)],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        busy1, own1, t1 = proc_stat_busy(), children_cpu(), time.perf_counter()
        if proc.returncode != 0:
            sys.stderr.write(proc.stdout + proc.stderr)
            raise SystemExit(f"targets.py: {step.label} failed (exit {proc.returncode})")
        result: dict[str, Any] = json.loads(out.read_text())[-1]
    others = None
    if busy0 is not None and busy1 is not None:
        others = max(0.0, (busy1 - busy0) - (own1 - own0)) / (t1 - t0)
    result["others_cpu"] = others
    step.results.append(result)
    if others is not None:
        step.others.append(others)
    return result


def step_key(result: dict[str, Any]) -> tuple[Any, ...]:
    """Which suite configuration a ``--json`` result belongs to."""
    if "state" in result:
        return ("ceiling", result["state"])
    if result.get("bench") == "bare_trio":
        return ("bare", int(result["concurrency"]))
    return (result["network"], int(result["concurrency"]))


def fmt_num(value: float) -> str:
    return "-" if value != value else f"{value:.0f}"  # NaN: not measured


def fmt_others(values: list[float]) -> str:
    return f"{median(values):.2f}" if values else "n/a"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="targets.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3, help="rounds (medians over them)")
    p.add_argument("--duration", type=float, default=4.0, help="benchmain --duration")
    p.add_argument("--warmup", type=float, default=1.0, help="benchmain --warmup")
    p.add_argument("--ceiling-runs", type=int, default=5, help="ceiling runs per round")
    p.add_argument("--ceiling-rpcs", type=int, default=2000, help="RPCs per ceiling run")
    p.add_argument("--json", metavar="FILE", help="append every result to FILE")
    p.add_argument(
        "--max-others",
        type=float,
        metavar="CORES",
        help="discard and repeat (at most --retries times) a run during which other "
        "processes used more than CORES cores; discarded runs are printed, not counted",
    )
    p.add_argument("--retries", type=int, default=2, help="repeats allowed per run")
    p.add_argument(
        "--wait",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="with --max-others: before each run, wait up to this long for others to "
        "use at most CORES (default 60)",
    )
    p.add_argument(
        "--from-json",
        nargs="+",
        metavar="FILE",
        help="run nothing: summarise the results in these --json files (pooled)",
    )
    args = p.parse_args(argv)

    py = sys.executable
    env = dict(os.environ)
    common = ["--duration", str(args.duration), "--warmup", str(args.warmup), "--quiet"]
    ceiling_args = ["--runs", str(args.ceiling_runs), "--rpcs", str(args.ceiling_rpcs)]

    def bench(network: str, concurrency: int, allocs: bool) -> Step:
        cmd = [py, str(BENCHMAIN), "--workload", "unary", "--network", network]
        cmd += ["--concurrency", str(concurrency), *common]
        if allocs:
            cmd.append("--allocs")
        return Step(f"unary c={concurrency} {network}", cmd, (network, concurrency))

    def ceiling_step(label: str, state: str) -> Step:
        cmd = [py, str(CEILING), "--state", state, *ceiling_args]
        return Step(label, cmd, ("ceiling", state))

    ceiling_h2 = ceiling_step("ceiling (stock h2)", "h2")
    ceiling_t = ceiling_step("ceiling (trio_h2t H2State)", "trio_h2t")
    tcp100 = bench("tcp", 100, True)
    mem100 = bench("memory", 100, True)
    tcp1000 = bench("tcp", 1000, False)
    mem1000 = bench("memory", 1000, False)

    def bare(concurrency: int) -> Step:
        cmd = [py, str(BARE_TRIO), "--child", str(concurrency)]
        cmd += ["--duration", str(args.duration), "--warmup", str(args.warmup)]
        return Step(f"bare trio c={concurrency}", cmd, ("bare", concurrency))

    bare100 = bare(100)
    bare1000 = bare(1000)
    steps = [ceiling_h2, tcp100, mem100, bare100, ceiling_t, tcp1000, mem1000, bare1000]
    # Files from before bare_trio joined the suite have no bare runs: fine.
    optional = (bare100, bare1000)

    started = time.perf_counter()
    if args.from_json:
        by_key = {step.key: step for step in steps}
        for name in args.from_json:
            for result in json.loads(Path(name).read_text()):
                step = by_key.get(step_key(result))
                if step is None or result.get("workload", "unary") != "unary":
                    continue
                step.results.append(result)
                if result.get("others_cpu") is not None:
                    step.others.append(result["others_cpu"])
        missing = [s.label for s in steps if not s.results and s not in optional]
        if missing:
            raise SystemExit(f"targets.py: no results for {', '.join(missing)} in --from-json")
        args.rounds = min(len(s.results) for s in steps if s not in optional)
        print(
            f"targets.py: {len(args.from_json)} file(s), {args.rounds} or more rounds of each run"
        )
    else:
        print(
            f"targets.py: {args.rounds} rounds of {len(steps)} runs; load average {os.getloadavg()}"
        )
    for rnd in range(0 if args.from_json else args.rounds):
        shift = rnd % len(steps)
        for step in steps[shift:] + steps[:shift]:
            for attempt in range(args.retries + 1):
                if args.max_others is not None:
                    wait_quiet(args.max_others, args.wait)
                result = run_step(step, env)
                others = result["others_cpu"]
                if (
                    args.max_others is None
                    or others is None
                    or others <= args.max_others
                    or attempt == args.retries
                ):
                    break
                step.results.pop()
                step.others.pop()
                print(
                    f"[{rnd + 1}/{args.rounds}] {step.label:<28}discarded: others used "
                    f"{others:.2f} cores (> {args.max_others:g}); repeating",
                    flush=True,
                )
            if "bench" in result:
                what = f"{result['cpu_us_per_op']:>9.2f} µs CPU per request (no HTTP/2)"
            elif "rpcs_per_s" in result:
                what = f"{result['rpcs_per_s']:>9,.0f} RPCs/s (median of {len(result['runs'])})"
            else:
                what = (
                    f"{result['qps']:>9,.0f} QPS  p50 {result['p50_ms']:6.2f} ms  "
                    f"p99 {result['p99_ms']:6.2f} ms  frames/write "
                    f"{result['frames_per_write']:5.1f}/{result['server_frames_per_write']:5.1f}"
                )
            others = result["others_cpu"]
            contention = "" if others is None else f"  others {others:.2f} cores"
            print(f"[{rnd + 1}/{args.rounds}] {step.label:<28}{what}{contention}", flush=True)
            if args.json:
                path = Path(args.json)
                runs = json.loads(path.read_text()) if path.exists() else []
                runs.append(result)
                path.write_text(json.dumps(runs, indent=1) + "\n")
    elapsed = time.perf_counter() - started

    # ---------------------------------------------------------------- per configuration
    print()
    if args.from_json:
        print(f"Medians over the pooled rounds ({', '.join(args.from_json)})")
    else:
        print(
            f"Medians over {args.rounds} rounds ({elapsed:.0f} s, load average {os.getloadavg()})"
        )
    head = (
        f"{'configuration':<28}{'QPS':>9}{'p50 ms':>9}{'p90 ms':>9}{'p99 ms':>9}"
        f"{'avg ms':>9}{'fr/wr c':>9}{'fr/wr s':>9}{'cpu c':>7}{'cpu s':>7}"
        f"{'µs cpu/op':>10}{'allocs/op':>11}{'B/op':>9}{'others':>8}"
    )
    print(head)
    print("-" * len(head))

    def med(step: Step, key: str) -> float:
        return median([float(r[key]) for r in step.results if r.get(key) is not None])

    for step in (ceiling_h2, ceiling_t):
        pooled = [x for r in step.results for x in r["runs"]]
        cpu_pooled = [x for r in step.results for x in r["cpu_runs"]]
        note = f"  (RPCs/s, median of {len(pooled)} runs; both sides in one process)"
        print(
            f"{step.label:<28}{median(pooled):>9,.0f}{note:<76}"
            f"{1e6 / median(cpu_pooled):>10.1f}{'':>20}{fmt_others(step.others):>8}"
        )
    for step in (tcp100, mem100, tcp1000, mem1000):
        server_cpu = med(step, "server_cpu")
        print(
            f"{step.label:<28}{med(step, 'qps'):>9,.0f}{med(step, 'p50_ms'):>9.2f}"
            f"{med(step, 'p90_ms'):>9.2f}{med(step, 'p99_ms'):>9.2f}{med(step, 'avg_ms'):>9.2f}"
            f"{med(step, 'frames_per_write'):>9.1f}{med(step, 'server_frames_per_write'):>9.1f}"
            f"{med(step, 'client_cpu'):>7.2f}"
            f"{('' if server_cpu != server_cpu else f'{server_cpu:.2f}'):>7}"
            f"{med(step, 'cpu_us_per_op'):>10.1f}"
            f"{fmt_num(med(step, 'allocs_per_op')):>11}{fmt_num(med(step, 'bytes_per_op')):>9}"
            f"{fmt_others(step.others):>8}"
        )
    for step in optional:
        if step.results:
            print(
                f"{step.label:<28}{'  (no HTTP/2: CPU per request)':<77}"
                f"{med(step, 'cpu_us_per_op'):>10.1f}{'':>20}{fmt_others(step.others):>8}"
            )

    # ---------------------------------------------------------------- targets
    ceiling = median([x for r in ceiling_h2.results for x in r["runs"]])
    ceiling_own = median([x for r in ceiling_t.results for x in r["runs"]])
    rows: list[tuple[str, str, str, bool]] = []

    def ratio_row(
        name: str,
        value: float,
        base: float,
        target: float,
        interval: tuple[float, float],
        extra: str = "",
    ) -> None:
        ratio = value / base
        lo, hi = interval
        measured = f"{value:,.0f} / {base:,.0f} = {ratio:.3f}x [{lo:.2f}, {hi:.2f}]{extra}"
        rows.append((name, measured, f">= {target}x", ratio >= target))

    def qps_runs(step: Step) -> list[float]:
        return [float(r["qps"]) for r in step.results]

    # The ceiling's rounds for the bootstrap: each run's median of its own runs.
    ceiling_rounds = [float(r["rpcs_per_s"]) for r in ceiling_h2.results]
    qps = {s: med(s, "qps") for s in (tcp100, mem100, tcp1000, mem1000)}
    ratio_row(
        "unary c=100 TCP QPS / ceiling",
        qps[tcp100],
        ceiling,
        TARGET_TCP,
        bootstrap_ratio(qps_runs(tcp100), ceiling_rounds),
        f" (vs H2State ceiling {qps[tcp100] / ceiling_own:.3f}x)",
    )
    ratio_row(
        "unary c=100 memory QPS / ceiling",
        qps[mem100],
        ceiling,
        TARGET_MEMORY,
        bootstrap_ratio(qps_runs(mem100), ceiling_rounds),
        f" (vs H2State ceiling {qps[mem100] / ceiling_own:.3f}x)",
    )
    fpw = {
        "tcp client": med(tcp100, "frames_per_write"),
        "tcp server": med(tcp100, "server_frames_per_write"),
        "mem client": med(mem100, "frames_per_write"),
        "mem server": med(mem100, "server_frames_per_write"),
    }
    rows.append(
        (
            "loopy frames/send_all at c=100",
            ", ".join(f"{k} {v:.1f}" for k, v in fpw.items()),
            f">= {TARGET_FRAMES_PER_WRITE:g}",
            min(fpw.values()) >= TARGET_FRAMES_PER_WRITE,
        )
    )
    ratio_row(
        "QPS c=1000 / c=100 (TCP)",
        qps[tcp1000],
        qps[tcp100],
        TARGET_SCALING,
        bootstrap_ratio(qps_runs(tcp1000), qps_runs(tcp100)),
    )

    print()
    print(f"Targets (medians over {args.rounds} rounds; [90 % bootstrap interval])")
    width = max(len(r[1]) for r in rows)
    print(f"{'target':<34}{'measured':<{width + 2}}{'goal':<10}result")
    print("-" * (34 + width + 2 + 10 + 6))
    for name, measured, goal, ok in rows:
        print(f"{name:<34}{measured:<{width + 2}}{goal:<10}{'PASS' if ok else 'FAIL'}")
    mem_low, mem_high = bootstrap_ratio(qps_runs(mem1000), qps_runs(mem100))
    print()
    print("One process, both sides (not a target; see the docstring): c=1000 / c=100")
    print(
        f"  trio_h2t, QPS over the memory network   {qps[mem1000]:,.0f} / {qps[mem100]:,.0f} = "
        f"{qps[mem1000] / qps[mem100]:.3f}x [{mem_low:.2f}, {mem_high:.2f}]"
    )
    if bare100.results and bare1000.results:
        cpu100, cpu1000 = ([float(r["cpu_us_per_op"]) for r in b.results] for b in optional)
        bare_low, bare_high = bootstrap_ratio(cpu100, cpu1000)
        b100, b1000 = median(cpu100), median(cpu1000)
        print(
            f"  bare trio, same task shape, no HTTP/2   {b100:.2f} / {b1000:.2f} µs CPU per "
            f"request = {b100 / b1000:.3f}x as QPS [{bare_low:.2f}, {bare_high:.2f}]"
        )
    cpu_ceiling = 1e6 / median([x for r in ceiling_h2.results for x in r["cpu_runs"]])
    cpu_own = 1e6 / median([x for r in ceiling_t.results for x in r["cpu_runs"]])
    print()
    print("Context (not targets): CPU time per RPC, both sides, whatever else ran")
    print(
        f"  h2 alone (ceiling, stock h2 / trio_h2t H2State): {cpu_ceiling:.1f} / {cpu_own:.1f} µs"
    )
    for step in (tcp100, mem100, tcp1000, mem1000):
        cost = med(step, "cpu_us_per_op")
        print(
            f"  trio_h2t {step.label:<22}{cost:8.1f} µs  (h2 alone would be "
            f"{cpu_ceiling / cost:.0%} of it)"
        )
    others_all = [x for s in steps for x in s.others]
    if others_all and median(others_all) > 0.1:
        print(
            f"\nNote: other processes used a median {median(others_all):.2f} cores during "
            f"the runs (max {max(others_all):.2f}); the machine was not quiet."
        )
    return 0 if all(ok for *_, ok in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
