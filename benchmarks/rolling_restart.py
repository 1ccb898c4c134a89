"""A rolling restart under load: three backends, each restarted in turn, no call lost.

Theory of operation
-------------------
Three backend processes (this script's ``backend`` role) serve one unary method,
``/rolling.Counter/Call``, each on its own loopback port, through
``trio_h2t.serve_worker``: on SIGTERM a backend drains (``H2Server.aclose``: the two
GOAWAYs, the calls it accepted finish) and exits. The method takes a call id (bytes),
writes it as one line to the backend's call log, waits ``--delay`` seconds (so that
calls are in flight when a drain starts) and answers the id.

One client process (this one) opens one round-robin channel over
``ipv4:127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3`` with a retry policy (UNAVAILABLE,
5 attempts) and runs ``concurrency`` tasks that call back to back, each call with an
id never used before. Meanwhile the restarter stops each backend in turn: SIGTERM,
wait for the exit (the drain), start a new process on the same port, wait until the
channel's subchannel for it is READY again, then let the load run on for a while
before the next one.

Afterwards every backend generation's call log is read: each id the client sent
must appear exactly once over all logs (a lost call would be missing or failed; a
call the retry layer resent after a backend had run it would appear twice), every
answer must be its own id, and no call may fail. :func:`rolling_restart` returns a
:class:`Result` with all of that; tests/rolling/ runs it for a few seconds, the
command line for longer.

Run: ``.venv/bin/python benchmarks/rolling_restart.py`` (30 s, 32 tasks),
``--duration S``, ``--concurrency N``, ``--delay S``, ``--no-retries`` (no
``retryPolicy``: transparent retries only), ``--png FILE`` (latency over time,
restarts shaded), ``--json FILE``. It prints calls, failures, duplicates, missing
ids, p50/p99 overall, during the restarts and between them, and each restart's
timeline; it exits 1 if any call failed, went missing or ran twice.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

if not __package__:  # run as a script: benchmarks/_bootstrap.py registers the package
    importlib.import_module("_bootstrap")

import trio

import trio_h2t
from benchmarks._backends import child_env
from benchmarks.stats import percentile
from trio_h2t import grpc

SCRIPT = Path(__file__).resolve()
METHOD = "/rolling.Counter/Call"
BACKENDS = 3
#: The channel's service config: round robin, and retries of UNAVAILABLE (gRFC A6).
SERVICE_CONFIG: dict[str, Any] = {
    "loadBalancingConfig": [{"round_robin": {}}],
    "methodConfig": [
        {
            "name": [{"service": "rolling.Counter"}],
            "retryPolicy": {
                "maxAttempts": 5,
                "initialBackoff": "0.01s",
                "maxBackoff": "0.1s",
                "backoffMultiplier": 2,
                "retryableStatusCodes": ["UNAVAILABLE"],
            },
        }
    ],
}
#: Reconnect backoff of the subchannels: a restarted backend is back within ~0.1 s.
BACKOFF = grpc.ConnectionBackoff(initial_backoff=0.05, max_backoff=0.2, jitter=0.2)
#: Bound on one process's start or drain, and on one call.
PROCESS_TIMEOUT = 20.0
CALL_TIMEOUT = 10.0
#: Seconds of load, at least, after a restarted backend is READY again.
SETTLE = 0.3


# ---------------------------------------------------------------- the backend


def _backend_handler(log: TextIO, delay: float) -> grpc.Server:
    async def call(request: bytes, context: grpc.ServicerContext) -> bytes:
        log.write(request.decode("ascii") + "\n")  # line buffered: one write per call
        if delay:
            await trio.sleep(delay)
        return request

    return grpc.Server([{METHOD: grpc.unary_unary_handler(call)}])


async def backend(port: int, log: TextIO, delay: float, grace: float) -> None:
    """The ``backend`` role: serve METHOD on 127.0.0.1:``port`` until SIGTERM (a
    drain) or EOF on stdin; log each call's id to ``log`` (line buffered)."""
    config = trio_h2t.TransportConfig(graceful_close_timeout=grace)
    await trio_h2t.serve_worker(_backend_handler(log, delay), port, host="127.0.0.1", config=config)


# ---------------------------------------------------------------- the run


@dataclass
class Restart:
    """One backend's restart: when it was told to stop, when the old process had
    exited (its drain), when the new one listened, when the channel had it READY."""

    backend: int
    sigterm: float
    exited: float
    listening: float
    ready: float
    exit_code: int


@dataclass
class Result:
    """What a run saw (times are seconds from the start of the load)."""

    duration: float
    concurrency: int
    #: (start, latency in seconds) of each call that succeeded.
    latencies: list[tuple[float, float]] = field(default_factory=list)
    #: (start, "CODE: details") of each call that failed.
    failures: list[tuple[float, str]] = field(default_factory=list)
    #: Answers that were not the call's own id.
    wrong_answers: int = 0
    #: ids sent (each once).
    sent: int = 0
    #: id -> how many times the backends logged it (over every generation).
    logged: Counter[str] = field(default_factory=Counter)
    #: (backend index, generation) -> calls that process answered.
    per_process: dict[tuple[int, int], int] = field(default_factory=dict)
    restarts: list[Restart] = field(default_factory=list)
    #: ids sent but never logged, ids logged more than once, ids logged but never sent.
    missing: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)

    @property
    def calls(self) -> int:
        return len(self.latencies) + len(self.failures)

    def in_restart(self, start: float) -> bool:
        """Whether a call that started at ``start`` started during a restart
        (from a SIGTERM until the channel had the new process READY)."""
        return any(r.sigterm <= start <= r.ready for r in self.restarts)

    def latency_ms(self, p: float, *, during_restarts: bool | None = None) -> float:
        values = sorted(
            lat
            for start, lat in self.latencies
            if during_restarts is None or self.in_restart(start) == during_restarts
        )
        return percentile(values, p) * 1e3

    def summary(self) -> list[str]:
        lines = [
            f"calls {self.calls} ({self.calls / self.duration:.0f}/s over {self.duration:.1f} s,"
            f" {self.concurrency} tasks), failures {len(self.failures)},"
            f" duplicates {len(self.duplicates)}, missing {len(self.missing)},"
            f" unknown {len(self.unknown)}, wrong answers {self.wrong_answers}",
        ]
        for label, during in (("overall", None), ("during restarts", True), ("between", False)):
            n = sum(1 for s, _ in self.latencies if during is None or self.in_restart(s) == during)
            lines.append(
                f"  latency {label:<16} p50 {self.latency_ms(50, during_restarts=during):7.2f} ms"
                f"  p99 {self.latency_ms(99, during_restarts=during):7.2f} ms  ({n} calls)"
            )
        for r in self.restarts:
            lines.append(
                f"  backend {r.backend}: SIGTERM at {r.sigterm:.2f} s, drained and exited"
                f" ({r.exit_code}) after {r.exited - r.sigterm:.2f} s, new process listening"
                f" {r.listening - r.exited:.2f} s later, READY on the channel at {r.ready:.2f} s"
            )
        gens = ", ".join(f"b{b}.{g}: {n}" for (b, g), n in sorted(self.per_process.items()))
        lines.append(f"  calls per process: {gens}")
        for start, what in self.failures[:5]:
            lines.append(f"  failed at {start:.3f} s: {what}")
        return lines


class _Backend:
    """One backend's port and its current process (restarted by the run)."""

    def __init__(self, index: int, port: int, folder: Path, delay: float, grace: float):
        self.index = index  # immutable after init
        self.port = port  # immutable after init
        self._folder = folder  # immutable after init
        self._delay = delay  # immutable after init
        self._grace = grace  # immutable after init
        self.generation = 0  # owner: the run task
        self.proc: trio.Process | None = None  # owner: the run task

    def log(self, generation: int) -> Path:
        return self._folder / f"backend{self.index}.{generation}.calls"

    async def start(self) -> None:
        """Start the next generation and wait until it listens.
        Checkpoint: always. On cancellation: the process is killed."""
        self.generation += 1
        argv = [sys.executable, str(SCRIPT), "backend"]
        argv += ["--port", str(self.port), "--log", str(self.log(self.generation))]
        argv += ["--delay", str(self._delay), "--grace", str(self._grace)]
        stderr = (self._folder / f"backend{self.index}.{self.generation}.stderr").open("wb")
        try:
            proc = await trio.lowlevel.open_process(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, env=child_env()
            )
        finally:
            stderr.close()
        self.proc = proc
        assert proc.stdout is not None
        seen = b""
        try:
            with trio.fail_after(PROCESS_TIMEOUT):
                while b"\n" not in seen:
                    chunk = await proc.stdout.receive_some()
                    if not chunk:
                        raise RuntimeError(f"backend {self.index} exited before it listened")
                    seen += chunk
        except BaseException:
            proc.kill()
            raise
        if not seen.startswith(b"serving on "):
            proc.kill()
            raise RuntimeError(f"backend {self.index} printed {seen!r}")

    async def drain(self) -> int:
        """SIGTERM the current process and wait for its exit (the drain); its code.
        Checkpoint: always. On cancellation: the process is killed."""
        proc = self.proc
        assert proc is not None
        proc.send_signal(signal.SIGTERM)
        try:
            with trio.fail_after(PROCESS_TIMEOUT):
                code = await proc.wait()
        except BaseException:
            proc.kill()
            raise
        await self._close_pipes(proc)
        return code

    async def stop(self) -> None:
        """Stop the current process, however it is (teardown). Checkpoint: always."""
        proc = self.proc
        if proc is None:
            await trio.lowlevel.checkpoint()
            return
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            with trio.move_on_after(PROCESS_TIMEOUT) as scope:
                scope.shield = True
                await proc.wait()
            if proc.returncode is None:
                proc.kill()
                with trio.CancelScope(shield=True):
                    await proc.wait()
        await self._close_pipes(proc)

    @staticmethod
    async def _close_pipes(proc: trio.Process) -> None:
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                with trio.CancelScope(shield=True):
                    await pipe.aclose()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def rolling_restart(
    folder: Path,
    *,
    duration: float,
    concurrency: int,
    delay: float = 0.002,
    grace: float = 10.0,
    retries: bool = True,
) -> Result:
    """Run the load for about ``duration`` seconds with each of the three backends
    restarted in turn (the first after a quarter of it); the processes live and
    log in ``folder``, and are all stopped on return. ``retries=False`` leaves the
    retry policy out of the service config (transparent retries remain).

    Checkpoint: always. On cancellation: the load stops, every backend is stopped.
    """
    backends = [_Backend(i, _free_port(), folder, delay, grace) for i in range(1, BACKENDS + 1)]
    result = Result(duration=duration, concurrency=concurrency)
    try:
        async with trio.open_nursery() as starting:  # the first three start together
            for b in backends:
                starting.start_soon(b.start)
        target = "ipv4:" + ",".join(f"127.0.0.1:{b.port}" for b in backends)
        config = SERVICE_CONFIG if retries else {"loadBalancingConfig": [{"round_robin": {}}]}
        async with grpc.open_channel(
            target, service_config=config, backoff=BACKOFF, wait_for_ready=True
        ) as channel:
            await _run_load(channel, backends, result)
    finally:
        with trio.CancelScope(shield=True):
            for b in backends:
                await b.stop()
    for b in backends:
        for generation in range(1, b.generation + 1):
            ids = b.log(generation).read_text(encoding="ascii").split()
            result.per_process[(b.index, generation)] = len(ids)
            result.logged.update(ids)
    _check(result)
    return result


async def _run_load(channel: grpc.Channel, backends: list[_Backend], result: Result) -> None:
    call = channel.unary_unary(METHOD)
    origin = time.perf_counter()
    stop = [False]
    ids = iter(range(1 << 62))

    async def caller() -> None:
        while not stop[0]:
            ident = str(next(ids))
            result.sent += 1
            started = time.perf_counter()
            try:
                answer = await call(ident.encode("ascii"), timeout=CALL_TIMEOUT)
            except grpc.RpcError as exc:
                result.failures.append((started - origin, f"{exc.code.name}: {exc.details}"))
                continue
            result.latencies.append((started - origin, time.perf_counter() - started))
            if answer != ident.encode("ascii"):
                result.wrong_answers += 1

    def now() -> float:
        return time.perf_counter() - origin

    async def restarter() -> None:
        # A quarter of the run before the first restart, then the rest spread evenly.
        steady = result.duration / (BACKENDS + 1)
        await trio.sleep(steady)
        for b in backends:
            turn_end = now() + steady
            sigterm = now()
            code = await b.drain()
            exited = now()
            await b.start()
            listening = now()
            with trio.fail_after(PROCESS_TIMEOUT):
                # No public event for one subchannel's state: look every 5 ms.
                while _state_of(channel, b.port) is not grpc.ConnectivityState.READY:  # noqa: ASYNC110
                    await trio.sleep(0.005)
            result.restarts.append(Restart(b.index, sigterm, exited, listening, now(), code))
            # The new process takes its share for a while before the next restart.
            await trio.sleep(max(SETTLE, turn_end - now()))

    async with trio.open_nursery() as nursery:
        for _ in range(result.concurrency):
            nursery.start_soon(caller)
        await restarter()
        stop[0] = True
    result.duration = now()


def _state_of(channel: grpc.Channel, port: int) -> grpc.ConnectivityState:
    address = f"127.0.0.1:{port}"
    return next(state for name, state in channel.subchannels() if name == address)


def _check(result: Result) -> None:
    """Fill in the missing, duplicated and unknown ids."""
    sent = {str(i) for i in range(result.sent)}
    result.missing = sorted(sent - set(result.logged), key=int)
    result.duplicates = sorted((i for i, n in result.logged.items() if n > 1), key=int)
    result.unknown = sorted(set(result.logged) - sent)


# ---------------------------------------------------------------- the command line


def plot(result: Result, path: Path) -> None:
    """Latency of each call against its start time (log scale), restarts shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 4.5))
    xs = [s for s, _ in result.latencies]
    ys = [lat * 1e3 for _, lat in result.latencies]
    ax.scatter(xs, ys, s=2, alpha=0.4, color="tab:blue", label="call latency", rasterized=True)
    for r in result.restarts:
        ax.axvspan(r.sigterm, r.ready, color="tab:orange", alpha=0.25)
        ax.axvline(r.sigterm, color="tab:red", linewidth=1)
        ax.text(
            r.sigterm,
            1.0,
            f" b{r.backend} SIGTERM",
            transform=ax.get_xaxis_transform(),
            va="top",
            fontsize=8,
            color="tab:red",
        )
    if result.failures:
        ax.scatter(
            [s for s, _ in result.failures],
            [max(ys or [1.0])] * len(result.failures),
            marker="x",
            color="black",
            label="failed call",
        )
    ax.set_yscale("log")
    ax.set_xlabel("seconds since the load started")
    ax.set_ylabel("latency (ms, log)")
    ax.set_title(
        f"Rolling restart: {result.calls} calls, {len(result.failures)} failed,"
        f" {len(result.duplicates)} duplicated; shaded: SIGTERM until READY again"
    )
    ax.legend(loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="role")
    serve = sub.add_parser("backend", help="(internal) one backend process")
    serve.add_argument("--port", type=int, required=True)
    serve.add_argument("--log", required=True)
    serve.add_argument("--delay", type=float, default=0.002)
    serve.add_argument("--grace", type=float, default=10.0)
    parser.add_argument("--duration", type=float, default=30.0, help="seconds of load (30)")
    parser.add_argument("--concurrency", type=int, default=32, help="calling tasks (32)")
    parser.add_argument(
        "--delay", type=float, default=0.002, help="seconds each call takes in the backend"
    )
    parser.add_argument(
        "--no-retries",
        dest="retries",
        action="store_false",
        help="no retryPolicy in the service config (transparent retries only)",
    )
    parser.add_argument("--png", help="write the latency-over-time plot here")
    parser.add_argument("--json", help="write the figures here")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.role == "backend":
        with open(args.log, "a", buffering=1, encoding="ascii") as log:
            trio.run(backend, args.port, log, args.delay, args.grace)
        return 0
    with tempfile.TemporaryDirectory(prefix="rolling-") as tmp:
        result = trio.run(
            functools.partial(
                rolling_restart,
                Path(tmp),
                duration=args.duration,
                concurrency=args.concurrency,
                delay=args.delay,
                retries=args.retries,
            )
        )
    return report(
        result,
        png=None if args.png is None else Path(args.png),
        json_path=None if args.json is None else Path(args.json),
    )


def report(result: Result, *, png: Path | None = None, json_path: Path | None = None) -> int:
    """Print the summary, write the PNG and the JSON figures if asked; the exit
    status: 1 if any call failed, went missing, ran twice or got a wrong answer."""
    for line in result.summary():
        print(line)
    if png is not None:
        plot(result, png)
        print(f"plot: {png}")
    if json_path is not None:
        figures = {
            "calls": result.calls,
            "failures": len(result.failures),
            "duplicates": len(result.duplicates),
            "missing": len(result.missing),
            "duration": result.duration,
            "concurrency": result.concurrency,
            "p50_ms": result.latency_ms(50),
            "p99_ms": result.latency_ms(99),
            "p50_ms_restarts": result.latency_ms(50, during_restarts=True),
            "p99_ms_restarts": result.latency_ms(99, during_restarts=True),
        }
        json_path.write_text(json.dumps(figures, indent=1))
    bad = result.failures or result.duplicates or result.missing or result.unknown
    return 1 if bad or result.wrong_answers else 0


if __name__ == "__main__":
    sys.exit(main())
