"""What balancing costs the client: round robin over 3 backends against one connection.

Three backend processes (this script's ``backend`` role: trio_h2t.grpc, a unary
method answering its request) run for the whole benchmark, each on its own loopback
port. Each run is a fresh client process (the ``client`` role) that opens

- ``single``: ``grpc.open_channel("127.0.0.1", port)``, the one-connection channel,
  to the first backend, or
- ``round_robin``: ``grpc.open_channel("ipv4:127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3")``
  with ``loadBalancingConfig`` ``round_robin``, one connection to each,

and runs ``--concurrency`` tasks calling back to back (``--size`` bytes each way).
After ``--warmup`` seconds it reads its own process CPU time (``time.process_time``:
the backends' CPU is in other processes) and its connections' write counters
(``statistics().loopy.send_alls``), and counts the calls that end in the next
``--duration`` seconds; it prints one JSON line (calls, CPU seconds, writes).
The client is pinned to one CPU and the backends to the others (``--no-pin``: not),
so that the backends, one busy in ``single`` and three in ``round_robin``, never
share the client's CPU. For a diagnosis: ``--also rr_one`` / ``--also three_single``
add the two modes that take a difference apart (``EXTRA_MODES``), ``--steps`` counts
the client's trio task steps and I/O waits per call, ``--gc freeze|off`` changes the
client's cyclic collector in the window, ``--profile DIR`` runs it under cProfile.
``--icount N`` counts the client's instructions per call under callgrind instead
(``icount.py``'s way: runs of N and 3N calls, the difference per call), a figure the
machine's load does not move (it is slow: minutes per mode on a loaded machine).

A run is ``--rounds`` rounds; each round runs both modes, ``single`` first in odd
rounds and ``round_robin`` first in even ones, so a drift of the machine lands on
both alike. Printed: per mode the medians over the rounds of QPS, client CPU µs
per call and client writes (``send_all``) per call, then each mode / single as the
ratio of medians with a 95 % percentile-bootstrap interval (``stats.bootstrap_ratio``,
as ``grpc_go.py`` and ``run.py`` give theirs), for CPU per call (and its user and
system parts: on loopback the kernel usually runs the receiving side's TCP
input inside the sender's ``sendmsg``, so more, smaller writes cost the writer more than on a
network), and QPS. The target is a CPU-per-call ratio within 1.05.

Run: ``.venv/bin/python benchmarks/grpc_balancing.py`` (7 rounds of 3 s: ~1.5 min),
``--rounds``, ``--duration``, ``--warmup``, ``--concurrency``, ``--size``, ``--json FILE``.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import importlib
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

if not __package__:  # run as a script: benchmarks/_bootstrap.py registers the package
    importlib.import_module("_bootstrap")

import trio

import trio_h2t
from benchmarks._backends import child_env, start_backends, stop_backends
from benchmarks.stats import StepCounter, bootstrap_ratio, median
from trio_h2t import grpc

SCRIPT = Path(__file__).resolve()
METHOD = "/balancing.Echo/Call"
BACKENDS = 3
MODES = ("single", "round_robin")
#: Modes that take the difference apart (``--mode``): ``rr_one``, a round-robin
#: channel over the first backend alone (the balancer's pick path, one connection);
#: ``three_single``, three one-connection channels, one per backend, the tasks
#: dealt over them (three connections, no balancer).
EXTRA_MODES = ("rr_one", "three_single")
#: Bound on a backend's start and on one client run beyond its warmup and window.
PROCESS_TIMEOUT = 60.0


# ---------------------------------------------------------------- roles


async def backend(concurrency: int) -> None:
    """Serve METHOD on 127.0.0.1 (a free port, printed as ``PORT N``) until stdin ends."""

    async def call(request: bytes, context: grpc.ServicerContext) -> bytes:
        return request

    server = grpc.Server([{METHOD: grpc.unary_unary_handler(call)}])
    config = trio_h2t.TransportConfig(max_concurrent_streams=concurrency + 16)
    async with trio_h2t.open_server(server, 0, host="127.0.0.1", config=config) as h2server:
        print(f"PORT {h2server.port}", flush=True)
        stdin = trio.lowlevel.FdStream(os.dup(0))
        async with stdin:
            while await stdin.receive_some():
                pass


async def client(args: argparse.Namespace) -> None:
    """One run: ``args.concurrency`` tasks calling back to back over the mode's
    channel; print a JSON line with the window's calls and process CPU seconds."""
    ports = [int(p) for p in args.ports.split(",")]
    config: dict[str, Any] = {"loadBalancingConfig": [{"round_robin": {}}]}
    openers = []
    if args.mode == "single":
        openers.append(grpc.open_channel("127.0.0.1", ports[0]))
    elif args.mode == "three_single":
        openers.extend(grpc.open_channel("127.0.0.1", port) for port in ports)
    else:
        chosen = ports[:1] if args.mode == "rr_one" else ports
        target = "ipv4:" + ",".join(f"127.0.0.1:{p}" for p in chosen)
        openers.append(grpc.open_channel(target, service_config=config, wait_for_ready=True))
    request = bytes(args.size)
    counted = [0]
    errors = [0]
    counting = [False]
    stop = [False]
    async with AsyncExitStack() as stack:
        channels = [await stack.enter_async_context(opener) for opener in openers]
        calls = [channel.unary_unary(METHOD) for channel in channels]
        for channel in channels:  # every subchannel READY before the warm-up
            with trio.fail_after(10):
                while any(  # noqa: ASYNC110 (no public event for one subchannel)
                    state is not grpc.ConnectivityState.READY for _, state in channel.subchannels()
                ):
                    await trio.sleep(0.01)

        # Every connection the calls use (a round-robin channel's picks go round them).
        conns: list[trio_h2t.ClientConnection] = []
        for channel in channels:
            for _ in range(2 * BACKENDS):
                conn = channel.connection  # a pick: round robin takes the next one
                if conn not in conns:
                    conns.append(conn)

        def writes() -> int:
            return sum(conn.statistics().loopy.send_alls for conn in conns)

        async def worker(call: grpc.UnaryUnaryMethod[bytes, bytes]) -> None:
            while not stop[0]:
                try:
                    answer = await call(request)
                except grpc.RpcError:
                    errors[0] += 1
                    continue
                if len(answer) != args.size:
                    errors[0] += 1
                if counting[0]:
                    counted[0] += 1

        if args.calls:  # --icount's child: a fixed number of calls, no window
            left = [args.calls]

            async def counted_worker(call: grpc.UnaryUnaryMethod[bytes, bytes]) -> None:
                while left[0] > 0:
                    left[0] -= 1
                    await call(request)

            async with trio.open_nursery() as nursery:
                for i in range(args.concurrency):
                    nursery.start_soon(counted_worker, calls[i % len(calls)])
            print(json.dumps({"calls": args.calls}), flush=True)
            return
        async with trio.open_nursery() as nursery:
            for i in range(args.concurrency):
                nursery.start_soon(worker, calls[i % len(calls)])
            await trio.sleep(args.warmup)
            if args.gc == "freeze":
                gc.freeze()  # the warm-up's objects: no collection walks them again
            elif args.gc == "off":
                gc.disable()
            gen2_0 = gc.get_stats()[2]["collections"]
            profile = cProfile.Profile() if args.profile else None
            steps = StepCounter() if args.steps else None
            times0, wall0, writes0 = os.times(), time.perf_counter(), writes()
            counting[0] = True
            if profile is not None:
                profile.enable()
            if steps is not None:
                trio.lowlevel.add_instrument(steps)
            await trio.sleep(args.duration)
            if steps is not None:
                trio.lowlevel.remove_instrument(steps)
            if profile is not None:
                profile.disable()
            counting[0] = False
            times1, wall1, writes1 = os.times(), time.perf_counter(), writes()
            stop[0] = True
    if profile is not None:
        profile.dump_stats(args.profile)
    user, system = times1.user - times0.user, times1.system - times0.system
    figures = {"calls": counted[0], "cpu": user + system, "user": user, "system": system}
    figures |= {"wall": wall1 - wall0, "errors": errors[0]}
    figures |= {"writes": writes1 - writes0, "connections": len(conns)}
    if steps is not None:
        figures |= {"steps": steps.steps, "io_waits": steps.io_waits}
    figures["gen2_collections"] = gc.get_stats()[2]["collections"] - gen2_0
    print(json.dumps(figures), flush=True)


# ---------------------------------------------------------------- runner


def _pinned(cpus: set[int] | None) -> Any:
    """A ``preexec_fn`` that pins the child to ``cpus`` (None: no pinning)."""
    if cpus is None:
        return None
    return lambda: os.sched_setaffinity(0, cpus)


def cpu_sets(pin: bool) -> tuple[set[int] | None, set[int] | None]:
    """The client's and the backends' CPUs: with ``pin`` and two CPUs or more, the
    client alone on the first one and the backends on the others, so that the
    backends (one busy in ``single``, three in ``round_robin``) never share the
    client's CPU; else no pinning."""
    if not pin or not hasattr(os, "sched_getaffinity"):
        return None, None
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return None, None
    return {cpus[0]}, set(cpus[1:])


def _start_backends(
    n: int, concurrency: int, err: Any, cpus: set[int] | None = None
) -> list[tuple[subprocess.Popen[str], int]]:
    """``n`` backend processes and their ports (stop them with ``stop_backends``)."""
    argv = [sys.executable, str(SCRIPT), "backend", "--concurrency", str(concurrency)]
    return start_backends(argv, n, stderr=err, preexec_fn=_pinned(cpus))


def one_run(
    mode: str,
    ports: list[int],
    args: argparse.Namespace,
    round_: int = 0,
    cpus: set[int] | None = None,
) -> dict[str, Any]:
    """One client process in ``mode``; its window's figures."""
    cmd = [sys.executable, str(SCRIPT), "client", "--mode", mode]
    cmd += ["--ports", ",".join(map(str, ports)), "--concurrency", str(args.concurrency)]
    cmd += ["--size", str(args.size), "--warmup", str(args.warmup)]
    cmd += ["--duration", str(args.duration)]
    if args.profile:
        cmd += ["--profile", str(Path(args.profile) / f"{mode}-{round_}.pstats")]
    if args.steps:
        cmd += ["--steps"]
    cmd += ["--gc", args.gc]
    done = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=PROCESS_TIMEOUT + args.warmup + args.duration,
        check=False,
        preexec_fn=_pinned(cpus),
    )
    if done.returncode != 0:
        raise RuntimeError(f"the {mode} client exited {done.returncode}:\n{done.stderr}")
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    calls = figures["calls"]
    figures["mode"] = mode
    figures["qps"] = calls / figures["wall"]
    figures["cpu_us"] = figures["cpu"] / calls * 1e6 if calls else math.nan
    figures["writes_per_call"] = figures["writes"] / calls if calls else math.nan
    figures["user_us"] = figures["user"] / calls * 1e6 if calls else math.nan
    figures["system_us"] = figures["system"] / calls * 1e6 if calls else math.nan
    if "steps" in figures:
        figures["steps_per_call"] = figures["steps"] / calls if calls else math.nan
        figures["io_waits_per_call"] = figures["io_waits"] / calls if calls else math.nan
    return figures


def _steps(result: dict[str, Any]) -> str:
    if "steps_per_call" not in result:
        return ""
    return (
        f"  {result['steps_per_call']:.2f} task steps/call"
        f"  {result['io_waits_per_call']:.3f} I/O waits/call"
    )


def icount(mode: str, ports: list[int], args: argparse.Namespace, calls: int) -> int:
    """Instructions of one client run of ``calls`` calls under callgrind (``icount.py``'s
    way: hash seed fixed; the backends run outside valgrind)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
        cmd += [sys.executable, str(SCRIPT), "client", "--mode", mode]
        cmd += ["--ports", ",".join(map(str, ports)), "--concurrency", str(args.concurrency)]
        cmd += ["--size", str(args.size), "--calls", str(calls)]
        subprocess.run(
            cmd,
            check=True,
            env=dict(child_env(), PYTHONHASHSEED="0"),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=1800,
        )
        match = re.search(r"^summary: (\d+)", out.read_text(), re.M)
        assert match, "no summary line in callgrind's output"
        return int(match.group(1))


def run_icount(args: argparse.Namespace) -> int:
    """``--icount N``: client instructions per call of each mode, from runs of N and
    3N calls under callgrind (the difference leaves out start-up and connecting)."""
    modes = ("single", *args.only) if args.only else (*MODES, *args.also)
    with tempfile.TemporaryFile("w+") as err:
        backends = _start_backends(BACKENDS, args.concurrency, err)
        ports = [port for _, port in backends]
        per_call: dict[str, float] = {}
        try:
            for mode in modes:
                small = icount(mode, ports, args, args.icount)
                large = icount(mode, ports, args, 3 * args.icount)
                per_call[mode] = (large - small) / (2 * args.icount)
                print(f"{mode:<14} {per_call[mode]:>12,.0f} instructions per call", flush=True)
        finally:
            stop_backends(backends)
    for mode in modes[1:]:
        print(f"  {mode} / single: {per_call[mode] / per_call['single']:.3f}")
    return 0


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def summarise(results: list[dict[str, Any]], level: float = 0.95) -> list[str]:
    """Medians per mode, then each mode / single with bootstrap intervals."""
    modes = [m for m in (*MODES, *EXTRA_MODES) if any(r["mode"] == m for r in results)]
    by = {m: [r for r in results if r["mode"] == m] for m in modes}
    lines = [f"  {'mode':<14}{'QPS':>9}{'client CPU µs/call':>21}{'writes/call':>13}{'runs':>6}"]
    for mode in modes:
        qps = median([r["qps"] for r in by[mode]])
        cpu = median([r["cpu_us"] for r in by[mode]])
        wpc = median([r["writes_per_call"] for r in by[mode]])
        lines.append(f"  {mode:<14}{qps:>9.0f}{cpu:>21.1f}{wpc:>13.2f}{len(by[mode]):>6}")
    pct = round(level * 100)
    lines.append(f"  against single: ratio of medians [{pct} % bootstrap interval]")
    for mode in modes[1:]:
        cells = []
        for key, label in (
            ("cpu_us", "client CPU per call"),
            ("user_us", "user"),
            ("system_us", "system"),
            ("qps", "QPS"),
        ):
            top = [r[key] for r in by[mode]]
            bottom = [r[key] for r in by["single"]]
            if not bottom or min(bottom) <= 0:  # a short run can round system time to 0
                cells.append(f"{label} n/a")
                continue
            lo, hi = bootstrap_ratio(top, bottom, level=level)
            ratio = median(top) / median(bottom) if top and bottom else math.nan
            cells.append(f"{label} {ratio:.3f} [{lo:.3f}, {hi:.3f}]")
        lines.append(f"    {mode:<14}" + "; ".join(cells))
    return lines


def run(args: argparse.Namespace) -> int:
    load_start = loadavg()
    print(f"load average at start: {load_start}; {os.cpu_count()} CPUs", flush=True)
    results: list[dict[str, Any]] = []
    client_cpus, backend_cpus = cpu_sets(args.pin)
    if client_cpus is not None:
        print(
            f"client pinned to CPU {sorted(client_cpus)}, backends to {sorted(backend_cpus or ())}"
        )
    with tempfile.TemporaryFile("w+") as err:
        backends = _start_backends(BACKENDS, args.concurrency, err, backend_cpus)
        ports = [port for _, port in backends]
        try:
            for round_ in range(args.rounds):
                modes = ("single", *args.only) if args.only else (*MODES, *args.also)
                order = modes if round_ % 2 == 0 else modes[::-1]
                for mode in order:
                    result = one_run(mode, ports, args, round_, client_cpus) | {"round": round_}
                    results.append(result)
                    print(
                        f"round {round_ + 1} {mode:<12} QPS {result['qps']:8.0f}  client"
                        f" {result['cpu_us']:6.1f} µs/call (user {result['user_us']:.0f},"
                        f" sys {result['system_us']:.0f})  {result['writes_per_call']:.2f}"
                        f" writes/call{_steps(result)}  errors {result['errors']}",
                        flush=True,
                    )
        finally:
            stop_backends(backends)
        err.seek(0)
        if err.read():
            print("a backend wrote to stderr", file=sys.stderr)
            return 1
    load_end = loadavg()
    for line in summarise(results):
        print(line)
    print(f"load average at start {load_start}, at end {load_end}")
    if args.json:
        meta = {"load_start": load_start, "load_end": load_end, "rounds": args.rounds}
        meta |= {"duration": args.duration, "warmup": args.warmup}
        meta |= {"concurrency": args.concurrency, "size": args.size}
        Path(args.json).write_text(json.dumps({"meta": meta, "runs": results}, indent=1))
    return 1 if any(r["errors"] for r in results) else 0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="role")
    serve = sub.add_parser("backend", help="(internal) one backend process")
    serve.add_argument("--concurrency", type=int, default=32)
    cli = sub.add_parser("client", help="(internal) one client run")
    cli.add_argument("--mode", choices=MODES + EXTRA_MODES, required=True)
    cli.add_argument("--ports", required=True)
    cli.add_argument("--profile", help="write the window's cProfile stats here")
    cli.add_argument("--steps", action="store_true", help="count trio task steps")
    cli.add_argument("--gc", choices=("on", "freeze", "off"), default="on")
    cli.add_argument("--calls", type=int, default=0, help=argparse.SUPPRESS)
    for p in (parser, cli):
        p.add_argument("--concurrency", type=int, default=32, help="calling tasks (32)")
        p.add_argument("--size", type=int, default=16, help="request and response bytes (16)")
        p.add_argument("--warmup", type=float, default=1.0, help="seconds (1)")
        p.add_argument("--duration", type=float, default=3.0, help="seconds measured (3)")
    parser.add_argument("--rounds", type=int, default=7, help="rounds of both modes (7)")
    parser.add_argument(
        "--steps",
        action="store_true",
        help="count the client's trio task steps and I/O waits per call (an instrument:"
        " it costs CPU per step)",
    )
    parser.add_argument(
        "--icount",
        type=int,
        metavar="N",
        help="count the client's instructions per call under callgrind instead (runs of"
        " N and 3N calls per mode; needs valgrind; slow)",
    )
    parser.add_argument(
        "--gc",
        choices=("on", "freeze", "off"),
        default="on",
        help="the client's cyclic collector in the window: as Python sets it (on),"
        " gc.freeze() after the warm-up, or disabled (a diagnosis)",
    )
    parser.add_argument(
        "--no-pin",
        dest="pin",
        action="store_false",
        help="do not pin the client to one CPU and the backends to the others",
    )
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        choices=MODES + EXTRA_MODES,
        help="run only these modes (repeatable; single is always run)",
    )
    parser.add_argument(
        "--also",
        action="append",
        default=[],
        choices=EXTRA_MODES,
        help="run this mode too, in every round (repeatable): see EXTRA_MODES",
    )
    parser.add_argument("--json", help="write every run and the load average here")
    parser.add_argument(
        "--profile",
        metavar="DIR",
        help="profile each client's window (cProfile: slower) into DIR/MODE-ROUND.pstats",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.role == "backend":
        trio.run(backend, args.concurrency)
        return 0
    if args.role == "client":
        trio.run(client, args)
        return 0
    if args.icount:
        return run_icount(args)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
