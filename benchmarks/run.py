"""Two versions of trio_h2t side by side in one run: is this change faster or slower?

``run.py`` measures a base version (A: ``--base``, default ``HEAD~1``) and a new one
(B: the working tree, or ``--new REF``) in the same run, on the same machine, in
interleaved rounds, with the same harness (this directory's ``benchmain.py``) for both:

1. A's ``trio_h2t/`` comes out of git (``git archive REF trio_h2t``) into a temporary
   directory; B is the working tree's ``trio_h2t/`` (a symlink, so uncommitted changes
   count) or another ``git archive``. Only the library differs between the sides.
2. Each run is a fresh ``benchmain.py`` process with ``PYTHONPATH`` set to its side's
   directory (checked: the result names the ``trio_h2t`` it imported; over TCP the
   server process inherits it).
3. Each round runs every workload once per side, A then B for one workload and B then A
   in the next round (ABBA), so a machine that slows down or speeds up during the run
   lands on both sides alike.
4. Per workload it prints the median QPS of each side, the ratio B / A with a 95 %
   bootstrap interval (each side's rounds resampled 2,000 times, fixed seed), the
   latency medians (p50, p99) and CPU time per operation of each side, and a verdict:
   ``faster`` or ``slower`` when the interval excludes 1.0, else ``same``.
5. ``--icount`` adds instructions per operation under callgrind (``icount.py``) for
   each side, once each (it is deterministic): the figure to trust on a noisy machine.
6. ``--allocs`` adds benchmain's allocation pass to every run (``allochook.py``: the
   allocations and bytes CPython's allocators are asked for per operation, both
   processes, in a separate counted second after the timed window) and a line per
   workload with each side's medians.

Run: ``.venv/bin/python benchmarks/run.py`` (about 3 minutes: 5 rounds of 4 workloads;
``--help``). ``benchmarks/methods.md`` says how to read the output.
"""

from __future__ import annotations

import argparse
import importlib
import io
import json
import math
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if not __package__:  # run as a script: benchmarks/_bootstrap.py registers the package
    importlib.import_module("_bootstrap")

from benchmarks.stats import bootstrap_ratio, median
from benchmarks.workloads import WORKLOADS

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BENCHMAIN = HERE / "benchmain.py"
ICOUNT = HERE / "icount.py"
NETWORKS = ("memory", "tcp")

#: The default workloads: (name, network, concurrency, request bytes, response bytes).
DEFAULT_WORKLOADS = (
    "unary:tcp:c=100",
    "grpc-unary:tcp:c=100",
    "streaming:tcp:c=100",
    "bulk:tcp:c=4:resp=1048576",
)


@dataclass(frozen=True)
class Spec:
    """One workload configuration, run on both sides."""

    workload: str
    network: str = "tcp"
    concurrency: int = 100
    req_size: int = 0
    resp_size: int | None = None

    @property
    def label(self) -> str:
        sizes = f" {self.req_size}/{self.resp_size}B" if self.req_size or self.resp_size else ""
        return f"{self.workload} c={self.concurrency} {self.network}{sizes}"


def parse_spec(text: str) -> Spec:
    """``NAME[:memory|tcp][:c=N][:req=B][:resp=B]`` -> :class:`Spec`."""
    name, *parts = text.split(":")
    options: dict[str, Any] = {}
    for part in parts:
        key, sep, value = part.partition("=")
        if not sep and key in NETWORKS:
            options["network"] = key
        elif sep and key in ("c", "req", "resp"):
            field_name = {"c": "concurrency", "req": "req_size", "resp": "resp_size"}[key]
            options[field_name] = int(value)
        else:
            raise argparse.ArgumentTypeError(
                f"bad workload {text!r}: NAME[:memory|tcp][:c=N][:req=BYTES][:resp=BYTES]"
            )
    return Spec(name, **options)


@dataclass(eq=False)
class Side:
    """One version of trio_h2t: where it lives and what it measured."""

    name: str  # "A" or "B"
    ref: str  # what the user asked for
    commit: str  # the commit, or "working tree at <commit>"
    path: Path  # the directory PYTHONPATH points at (holds only trio_h2t/)
    results: dict[Spec, list[dict[str, Any]]] = field(default_factory=dict)
    icount: float | None = None

    def env(self) -> dict[str, str]:
        return dict(os.environ, PYTHONPATH=str(self.path))


def git(*args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"run.py: git {' '.join(args)}: {proc.stderr.strip()}")
    return proc.stdout.strip()


def archive_tree(ref: str, into: Path) -> str:
    """Extract ``ref``'s ``trio_h2t/`` into ``into``; return the commit's short hash."""
    commit = git("rev-parse", "--short", "--verify", f"{ref}^{{commit}}")
    tar = subprocess.run(
        ["git", "archive", "--format=tar", commit, "trio_h2t"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    into.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
        archive.extractall(into, filter="data")
    return commit


def working_tree(into: Path) -> str:
    """Point ``into/trio_h2t`` at the working tree's; describe it."""
    into.mkdir(parents=True)
    (into / "trio_h2t").symlink_to(ROOT / "trio_h2t", target_is_directory=True)
    dirty = git("status", "--porcelain", "--", "trio_h2t")
    return f"working tree at {git('rev-parse', '--short', 'HEAD')}" + (
        " (trio_h2t/ modified)" if dirty else ""
    )


def run_benchmain(side: Side, spec: Spec, args: argparse.Namespace) -> dict[str, Any]:
    """One benchmain.py run of ``spec`` with ``side``'s trio_h2t; its result."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        cmd = [sys.executable, str(BENCHMAIN), "--workload", spec.workload]
        cmd += ["--network", spec.network, "--concurrency", str(spec.concurrency)]
        cmd += ["--req-size", str(spec.req_size)]
        if spec.resp_size is not None:
            cmd += ["--resp-size", str(spec.resp_size)]
        cmd += ["--duration", str(args.duration), "--warmup", str(args.warmup)]
        cmd += ["--quiet", "--json", str(out)]
        if args.allocs:
            cmd += ["--allocs"]
        proc = subprocess.run(cmd, env=side.env(), capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            sys.stderr.write(proc.stdout + proc.stderr)
            raise SystemExit(f"run.py: {spec.label} on {side.name} failed ({proc.returncode})")
        result: dict[str, Any] = json.loads(out.read_text())[-1]
    imported = Path(result["trio_h2t_file"])
    if not imported.is_relative_to(side.path.resolve()) and not imported.is_relative_to(
        (side.path / "trio_h2t").resolve()
    ):
        raise SystemExit(f"run.py: side {side.name} imported {imported}, not {side.path}")
    return result


def run_icount(side: Side, args: argparse.Namespace) -> float:
    """Instructions per operation of ``side`` (icount.py under callgrind)."""
    cmd = [sys.executable, str(ICOUNT), "--rpcs", str(args.icount_rpcs)]
    cmd += ["--workload", args.icount_workload]
    proc = subprocess.run(cmd, env=side.env(), capture_output=True, text=True, check=False)
    match = re.search(r"([\d,]+) instructions per RPC", proc.stdout)
    if proc.returncode != 0 or match is None:
        sys.stderr.write(proc.stdout + proc.stderr)
        raise SystemExit(f"run.py: icount.py on {side.name} failed ({proc.returncode})")
    return float(match.group(1).replace(",", ""))


def values(results: list[dict[str, Any]], key: str) -> list[float]:
    return [float(r[key]) for r in results if isinstance(r.get(key), int | float)]


#: Fewer rounds than this per side give no verdict: a bootstrap over 2-4 values is
#: too narrow to trust (an A/A run of 2 rounds can come out "slower").
MIN_ROUNDS_FOR_VERDICT = 5


def verdict(lo: float, hi: float, rounds: int) -> str:
    if math.isnan(lo) or rounds < MIN_ROUNDS_FOR_VERDICT:
        return "-"
    if lo > 1.0:
        return "faster"
    if hi < 1.0:
        return "slower"
    return "same"


def report(a: Side, b: Side, specs: list[Spec], rounds: int, level: float) -> list[str]:
    """The summary table (see the README's "How to read it")."""
    pct = f"{level:.0%}"
    head = (
        f"{'workload':<30}{'A QPS':>9}{'B QPS':>9}  {'B/A [' + pct + ' interval]':<24}"
        f"{'verdict':<8}{'p50 ms A/B':>15}{'p99 ms A/B':>15}{'CPU µs/op A/B':>17}"
        f"  {'CPU B/A [' + pct + ']'}"
    )
    lines = [
        f"A = {a.ref} ({a.commit}); B = {b.ref} ({b.commit}); {rounds} round(s), medians",
        head,
        "-" * len(head),
    ]
    for spec in specs:
        ra, rb = a.results.get(spec, []), b.results.get(spec, [])
        qa, qb = values(ra, "qps"), values(rb, "qps")
        ratio = median(qb) / median(qa) if qa and qb and median(qa) else math.nan
        lo, hi = bootstrap_ratio(qb, qa, level=level)
        ca, cb = values(ra, "cpu_us_per_op"), values(rb, "cpu_us_per_op")
        cpu_ratio = median(cb) / median(ca) if ca and cb and median(ca) else math.nan
        cpu_lo, cpu_hi = bootstrap_ratio(cb, ca, level=level)
        extra = ""
        mb_a, mb_b = values(ra, "mb_per_s"), values(rb, "mb_per_s")
        if mb_a and mb_b:
            extra = f"   MB/s {median(mb_a):,.0f} / {median(mb_b):,.0f}"

        def pair(
            key: str, fmt: str, ra: list[dict[str, Any]] = ra, rb: list[dict[str, Any]] = rb
        ) -> str:
            return f"{median(values(ra, key)):{fmt}}/{median(values(rb, key)):{fmt}}"

        row = (
            f"{spec.label:<30}{median(qa):>9,.0f}{median(qb):>9,.0f}  "
            f"{f'{ratio:.3f}x [{lo:.3f}, {hi:.3f}]':<24}{verdict(lo, hi, min(len(qa), len(qb))):<8}"
            f"{pair('p50_ms', '.2f'):>15}{pair('p99_ms', '.2f'):>15}"
            f"{pair('cpu_us_per_op', '.1f'):>17}"
            f"  {f'{cpu_ratio:.3f}x [{cpu_lo:.2f}, {cpu_hi:.2f}]':<22}{extra}".rstrip()
        )
        lines.append(row)
        aa, ab = values(ra, "allocs_per_op"), values(rb, "allocs_per_op")
        if aa and ab:  # --allocs
            ba, bb = values(ra, "bytes_per_op"), values(rb, "bytes_per_op")
            lines.append(
                f"{'':<4}allocations/op A/B {median(aa):,.0f}/{median(ab):,.0f}"
                f" ({median(ab) / median(aa):.3f}x), bytes/op A/B"
                f" {median(ba):,.0f}/{median(bb):,.0f} ({median(bb) / median(ba):.3f}x)"
            )
    if a.icount is not None and b.icount is not None:
        lines.append("")
        lines.append(
            f"instructions per operation (icount.py, callgrind): A {a.icount:,.0f}, "
            f"B {b.icount:,.0f}, B/A = {b.icount / a.icount:.4f}x"
        )
    return lines


def spec_of(result: dict[str, Any]) -> Spec:
    return Spec(
        result["workload"],
        result["network"],
        int(result["concurrency"]),
        int(result["req_size"]),
        int(result["resp_size"]),
    )


def summarise(path: Path, level: float) -> int:
    """``--from-json``: the summary of an earlier run, from its ``--json`` file."""
    records: list[dict[str, Any]] = json.loads(path.read_text())
    sides: dict[str, Side] = {}
    specs: list[Spec] = []
    for r in records:
        side = sides.setdefault(r["side"], Side(r["side"], r["ref"], r["commit"], path))
        if "icount" in r:
            side.icount = float(r["icount"])
            continue
        spec = spec_of(r)
        if spec not in specs:
            specs.append(spec)
        side.results.setdefault(spec, []).append(r)
    if set(sides) != {"A", "B"}:
        raise SystemExit(f"run.py: {path} does not hold both sides")
    rounds = min(len(v) for side in sides.values() for v in side.results.values())
    print("\n".join(report(sides["A"], sides["B"], specs, rounds, level)))
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="run.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--base", default="HEAD~1", metavar="REF", help="side A (default HEAD~1)")
    p.add_argument(
        "--new", metavar="REF", help="side B: a commit (default: the working tree's trio_h2t/)"
    )
    p.add_argument(
        "--workload",
        action="append",
        type=parse_spec,
        metavar="SPEC",
        help="NAME[:memory|tcp][:c=N][:req=BYTES][:resp=BYTES], repeatable "
        f"(default: {', '.join(DEFAULT_WORKLOADS)})",
    )
    p.add_argument("--rounds", type=int, default=5, help="rounds (each side once per workload)")
    p.add_argument("--duration", type=float, default=3.0, help="benchmain --duration")
    p.add_argument("--warmup", type=float, default=1.0, help="benchmain --warmup")
    p.add_argument("--level", type=float, default=0.95, help="bootstrap interval level")
    p.add_argument("--icount", action="store_true", help="add icount.py for each side")
    p.add_argument(
        "--allocs", action="store_true", help="add benchmain's allocation pass (allocs/op)"
    )
    p.add_argument("--icount-rpcs", type=int, default=500, help="icount.py --rpcs")
    p.add_argument("--icount-workload", default="unary", help="icount.py --workload")
    p.add_argument("--json", metavar="FILE", help="write every result of both sides to FILE")
    p.add_argument(
        "--from-json", metavar="FILE", help="run nothing: summarise a --json file of an earlier run"
    )
    args = p.parse_args(argv)
    if args.from_json:
        return summarise(Path(args.from_json), args.level)
    specs: list[Spec] = args.workload or [parse_spec(s) for s in DEFAULT_WORKLOADS]
    for spec in specs:
        if spec.workload not in WORKLOADS:
            p.error(f"unknown workload {spec.workload!r} (known: {', '.join(WORKLOADS)})")

    with tempfile.TemporaryDirectory(prefix="trio_h2t_run_") as tmp:
        base = Path(tmp)
        a = Side("A", args.base, archive_tree(args.base, base / "A"), base / "A")
        if args.new:
            b = Side("B", args.new, archive_tree(args.new, base / "B"), base / "B")
        else:
            b = Side("B", "working tree", working_tree(base / "B"), base / "B")
        print(f"run.py: A = {a.ref} ({a.commit}), B = {b.ref} ({b.commit})")
        print(
            f"run.py: {args.rounds} round(s) x {len(specs)} workload(s) x 2 sides; "
            f"load average {os.getloadavg()}",
            flush=True,
        )
        started = time.perf_counter()
        for rnd in range(args.rounds):
            order = (a, b) if rnd % 2 == 0 else (b, a)
            for spec in specs:
                for side in order:
                    result = run_benchmain(side, spec, args)
                    side.results.setdefault(spec, []).append(result)
                    print(
                        f"[{rnd + 1}/{args.rounds}] {side.name} {spec.label:<30}"
                        f"{result['qps']:>9,.0f} QPS  p50 {result['p50_ms']:7.2f} ms  "
                        f"p99 {result['p99_ms']:7.2f} ms  {result['cpu_us_per_op'] or 0:7.1f} "
                        "µs CPU/op",
                        flush=True,
                    )
        if args.icount:
            for side in (a, b):
                side.icount = run_icount(side, args)
                print(f"icount {side.name}: {side.icount:,.0f} instructions per operation")
        elapsed = time.perf_counter() - started
        if args.json:
            dump = [
                {"side": side.name, "ref": side.ref, "commit": side.commit, **r}
                for side in (a, b)
                for results in side.results.values()
                for r in results
            ]
            dump += [
                {"side": side.name, "ref": side.ref, "commit": side.commit, "icount": side.icount}
                for side in (a, b)
                if side.icount is not None
            ]
            Path(args.json).write_text(json.dumps(dump, indent=1) + "\n")
        print()
        print(f"({elapsed:.0f} s, load average {os.getloadavg()})")
        print("\n".join(report(a, b, specs, args.rounds, args.level)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
