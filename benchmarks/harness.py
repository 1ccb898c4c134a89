"""The benchmark harness: client and server setup, the run loop, the result record.

After grpc-go's ``benchmark/benchmain`` run loop, over trio_h2t's public API:

- :class:`BenchServer` serves one workload (``workloads.py``) plus the harness's
  control endpoints (``/_bench/...``); over TCP it runs in its own process
  (:func:`serve_main`, started by :class:`ServerProcess`: ``benchmain.py --serve``,
  port read from its stdout, stopped by closing its stdin) with
  MAX_CONCURRENT_STREAMS = concurrency + 1 (grpc-go's rule; the spare stream carries
  the control requests);
- :func:`client_main` runs ``concurrency`` workers on one connection: a warm-up, the
  measured window (counters read at both edges, :func:`snapshot`), then with
  ``--allocs`` a separate counted pass (:func:`count_allocations`), and returns the
  result record that ``benchmain.py`` prints and ``--json`` keeps;
- :func:`run_once` runs one configuration over the memory network (both sides in this
  process, ``trio.testing.memory_stream_pair``) or TCP (127.0.0.1).

Control requests, when the server is another process: ``GET /_bench/start`` and
``/_bench/stop`` at the window's edges (the server's counters, and its profiler with
``--server-profile``), ``/_bench/allocs/start`` and ``/_bench/allocs/stop`` around the
allocation pass. They ride on the measured connection and are not counted.
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import datetime
import gc
import importlib.metadata
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import trio
import trio.testing

import trio_h2t

from .allochook import alloc_counter
from .connstats import WriteCounters, client_writes, server_writes
from .stats import Histogram, StepCounter, gc_timer, percentile, prepare_gc
from .workloads import Recorder, Workload, header_value, make_workload

__all__ = [
    "NETWORKS",
    "BenchServer",
    "ServerProcess",
    "client_main",
    "parse_config",
    "run_key",
    "run_name",
    "run_once",
    "serve_main",
    "stop_server_process",
]

NETWORKS = ("memory", "tcp")
BENCHMAIN = Path(__file__).resolve().with_name("benchmain.py")
CONTROL_PREFIX = b"/_bench/"
CONTROL_RESPONSE: list[tuple[bytes, bytes]] = [(b":status", b"200")]


# ---------------------------------------------------------------- the server


class BenchServer:
    """The server side of one workload, plus the harness's control endpoints."""

    def __init__(self, workload: Workload, *, remote: bool) -> None:
        self.workload = workload  # immutable after init
        self.remote = remote  # immutable after init; own process: reports its CPU, allocs
        self.connections: list[Any] = []  # owner: serve; what serve_connection reported
        self.profile_path: str | None = None  # immutable after start-up
        self._profiler: cProfile.Profile | None = None  # owner: control handler
        self._steps: StepCounter | None = None  # owner: control handler

    async def serve(self, transport: trio.abc.Stream, config: trio_h2t.TransportConfig) -> None:
        """Serve one connection; keep what ``serve_connection`` reports, for its counters.

        Checkpoint: always. On cancellation: the connection ends (serve_connection's).
        """
        async with trio.open_nursery() as nursery:
            started = await nursery.start(self._serve_connection, transport, config)
            self.connections.append(started)

    async def _serve_connection(
        self,
        transport: trio.abc.Stream,
        config: trio_h2t.TransportConfig,
        *,
        task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        await trio_h2t.serve_connection(
            transport, self.handle, config=config, task_status=task_status
        )

    async def handle(self, stream: trio_h2t.H2Stream) -> None:
        path = header_value(stream.headers, b":path") or b""
        if path.startswith(CONTROL_PREFIX):
            await self._control(stream, path)
        else:
            await self.workload.serve(stream)

    def writes(self) -> WriteCounters:
        frames = send_alls = written = 0
        for started in self.connections:
            snap = server_writes(started)
            frames += snap.frames
            send_alls += snap.send_alls
            written += snap.bytes_written
        return WriteCounters(frames, send_alls, written)

    def stats(self) -> dict[str, Any]:
        w = self.writes()
        return {
            "frames": w.frames,
            "send_alls": w.send_alls,
            "bytes_written": w.bytes_written,
            "cpu": time.process_time() if self.remote else None,
            "gc": gc_timer().seconds if self.remote else None,
            "gc_collections": list(gc_timer().collections) if self.remote else None,
        }

    async def _control(self, stream: trio_h2t.H2Stream, path: bytes) -> None:
        async for _ in stream:
            pass
        reply: dict[str, Any] = {}
        if path == b"/_bench/stats":
            reply = self.stats()
        elif path == b"/_bench/start":
            if self.profile_path and self._profiler is None:
                self._profiler = cProfile.Profile()
                self._profiler.enable()
            reply = self.stats()
        elif path == b"/_bench/stop":
            reply = self.stats()
            if self._profiler is not None:
                self._profiler.disable()
                assert self.profile_path is not None
                self._profiler.dump_stats(self.profile_path)
                self._profiler = None
        elif path == b"/_bench/allocs/start" and self.remote:
            self._steps = StepCounter()
            trio.lowlevel.add_instrument(self._steps)
            alloc_counter().start()
        elif path == b"/_bench/allocs/stop" and self.remote:
            counted = alloc_counter().stop()
            steps = self._steps
            if steps is not None:
                trio.lowlevel.remove_instrument(steps)
            reply = {
                "allocs": list(counted) if counted else None,
                "steps": steps.steps if steps else None,
                "io_waits": steps.io_waits if steps else None,
            }
        await stream.send_headers(CONTROL_RESPONSE)
        await stream.send_data(json.dumps(reply).encode())
        await stream.end()


def parse_config(items: Sequence[str]) -> dict[str, Any]:
    """``KEY=VALUE`` strings -> TransportConfig keyword arguments (typed by the field)."""
    fields = {f.name: f for f in dataclasses.fields(trio_h2t.TransportConfig)}
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or key not in fields:
            raise SystemExit(f"benchmain: bad config {item!r}; fields: {', '.join(fields)}")
        default = getattr(trio_h2t.TransportConfig(), key)
        if isinstance(default, bool):
            out[key] = value.lower() in ("1", "true", "yes", "on")
        else:
            out[key] = type(default)(value)
    return out


def server_config(concurrency: int, extra: Sequence[str] = ()) -> trio_h2t.TransportConfig:
    options: dict[str, Any] = {"max_concurrent_streams": concurrency + 1}
    options.update(parse_config(extra))
    return trio_h2t.TransportConfig(**options)


def client_config(extra: Sequence[str] = ()) -> trio_h2t.TransportConfig:
    return trio_h2t.TransportConfig(**parse_config(extra))


def workload_of(args: argparse.Namespace) -> Workload:
    return make_workload(args.workload, args.req_size, args.resp_size)


async def serve_main(args: argparse.Namespace) -> None:
    """``--serve``: a TCP server on 127.0.0.1; prints its port; stops at stdin EOF.

    Checkpoint: always. On cancellation: the listeners and connections close.
    """
    prepare_gc(args.gc_freeze, args.gc_threshold)
    server = BenchServer(workload_of(args), remote=True)
    server.profile_path = args.profile
    config = server_config(args.max_concurrent_streams - 1, args.server_config)
    listeners = await trio.open_tcp_listeners(args.port, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    print(f"listening on 127.0.0.1:{port}", flush=True)
    async with trio.open_nursery() as nursery:

        async def accept_loop(listener: trio.SocketListener) -> None:
            while True:
                transport = await listener.accept()
                nursery.start_soon(server.serve, transport, config)

        async def until_stdin_closes() -> None:
            stdin = trio.lowlevel.FdStream(os.dup(sys.stdin.fileno()))
            async with stdin:
                while await stdin.receive_some():
                    pass
            nursery.cancel_scope.cancel()

        nursery.start_soon(until_stdin_closes)
        for listener in listeners:
            nursery.start_soon(accept_loop, listener)


class ServerProcess:
    """``benchmain.py --serve`` in a child process (the TCP network)."""

    def __init__(self, args: argparse.Namespace, workload: Workload) -> None:
        cmd = [
            sys.executable,
            str(BENCHMAIN),
            "--serve",
            "--port",
            "0",
            "--workload",
            workload.name,
            "--req-size",
            str(workload.req_size),
            "--resp-size",
            str(workload.resp_size),
            "--max-concurrent-streams",
            str(args.concurrency + 1),
        ]
        if args.server_profile:
            cmd += ["--profile", args.server_profile]
        for item in args.server_config:
            cmd += ["--server-config", item]
        if args.gc_freeze:
            cmd.append("--gc-freeze")
        if args.gc_threshold:
            cmd += ["--gc-threshold", str(args.gc_threshold)]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("listening on "):
            self.close()
            raise RuntimeError(f"the benchmark server did not start (it said {line!r})")
        self.port = int(line.rsplit(":", 1)[1])

    def close(self) -> None:
        stop_server_process(self.proc)


# ---------------------------------------------------------------- the client


async def progress(rec: Recorder, label: str, total: float) -> None:
    """One updating line on a TTY; a line a second otherwise.

    Checkpoint: always (it runs until cancelled). On cancellation: the line is erased.
    """
    tty = sys.stderr.isatty()
    interval = 0.25 if tty else 1.0
    width = 0
    try:
        while True:
            await trio.sleep(interval)
            elapsed = time.perf_counter() - rec.started
            qps = ""
            if rec.measuring:
                window = time.perf_counter() - rec.window_start
                if window > 0:
                    qps = f"  {len(rec.latencies) / window:,.0f} ops/s"
            line = f"{label}: {rec.phase} {elapsed:5.1f}/{total:.0f}s  ops {rec.total_ops:,}{qps}"
            if tty:
                width = max(width, len(line))
                sys.stderr.write("\r" + line.ljust(width))
                sys.stderr.flush()
            else:
                print(line, file=sys.stderr, flush=True)
    finally:
        if tty and width:
            sys.stderr.write("\r" + " " * width + "\r")
            sys.stderr.flush()


@dataclasses.dataclass
class Snapshot:
    """Counters at one edge of the window."""

    when: float
    cpu: float
    gc: float
    gc_collections: list[int]
    writes: WriteCounters
    server: dict[str, Any] | None


async def control(conn: trio_h2t.ClientConnection, what: str) -> dict[str, Any]:
    """A control request to a server in another process; its JSON reply.

    Checkpoint: always. On cancellation: the control stream is reset.
    """
    headers = conn.request_headers("GET", f"/_bench/{what}")
    async with conn.open_stream(headers, end_stream=True) as stream:
        await stream.receive_headers()
        body = b"".join([chunk async for chunk in stream])
    result: dict[str, Any] = json.loads(body)
    return result


async def snapshot(
    conn: trio_h2t.ClientConnection, server: BenchServer | None, what: str
) -> Snapshot:
    """The counters now (the server's by a control request when it is remote).

    Checkpoint: when the server is remote. On cancellation: nothing is recorded.
    """
    writes = client_writes(conn)
    when = time.perf_counter()
    cpu = time.process_time()
    timer = gc_timer()
    gc_seconds, collections = timer.seconds, list(timer.collections)
    server_stats = server.stats() if server is not None else await control(conn, what)
    return Snapshot(when, cpu, gc_seconds, collections, writes, server_stats)


def versions() -> dict[str, str]:
    def version(name: str) -> str:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            return "?"

    return {
        "python": platform.python_version(),
        "trio_h2t": trio_h2t.__version__,
        "trio_h2t_file": str(Path(trio_h2t.__file__ or "?").resolve()),
        "h2": version("h2"),
        "trio": trio.__version__,
    }


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} cores, {platform.system()} {platform.release()}"


def run_name(r: dict[str, Any]) -> str:
    """grpc-go's benchmark name for a result (workload, network, sizes, configs)."""
    name = (
        f"{r['workload'].capitalize()}-network_{r['network']}"
        f"-maxConcurrentCalls_{r['concurrency']}-reqSize_{r['req_size']}B"
        f"-respSize_{r['resp_size']}B"
    )
    for side in ("client", "server"):
        for item in r.get(f"{side}_config") or ():
            name += f"-{side}_{item}"
    return name


def run_key(r: dict[str, Any]) -> tuple[Any, ...]:
    """What makes two results the same configuration (for ``compare``)."""
    configs = tuple(tuple(r.get(f"{side}_config") or ()) for side in ("client", "server"))
    return (r["workload"], r["network"], r["concurrency"], r["req_size"], r["resp_size"], configs)


async def client_main(
    args: argparse.Namespace,
    conn: trio_h2t.ClientConnection,
    server: BenchServer | None,
) -> dict[str, Any]:
    """Warm up, measure, then (``--allocs``) count allocations; return the result.

    Checkpoint: always. On cancellation: the workers are cancelled, nothing returned.
    """
    workload = workload_of(args)
    rec = Recorder()
    label = f"{workload.name} c={args.concurrency} {args.network}"
    profiler = cProfile.Profile() if args.profile else None
    result: dict[str, Any] = {}

    async with trio.open_nursery() as nursery:
        if not args.quiet:
            nursery.start_soon(progress, rec, label, args.warmup + args.duration)
        async with trio.open_nursery() as workers:
            for _ in range(args.concurrency):
                workers.start_soon(workload.client, conn, rec)
            await trio.sleep(args.warmup)
            start = await snapshot(conn, server, "start")
            rec.phase = "measuring"
            rec.window_start = time.perf_counter()
            rec.measuring = True
            if profiler is not None:
                profiler.enable()
            await trio.sleep(args.duration)
            rec.measuring = False
            if profiler is not None:
                profiler.disable()
            end = await snapshot(conn, server, "stop")
            window = time.perf_counter() - rec.window_start
            ops = len(rec.latencies)
            if args.allocs:
                rec.phase = "allocs"
                result.update(await count_allocations(args, conn, server, rec))
            rec.phase = "stopping"
            rec.stopping = True
        nursery.cancel_scope.cancel()

    lat = sorted(rec.latencies)
    frames = end.writes.frames - start.writes.frames
    send_alls = end.writes.send_alls - start.writes.send_alls
    wire = end.writes.bytes_written - start.writes.bytes_written
    s0, s1 = start.server or {}, end.server or {}
    server_frames = s1.get("frames", 0) - s0.get("frames", 0)
    server_send_alls = s1.get("send_alls", 0) - s0.get("send_alls", 0)
    wire += s1.get("bytes_written", 0) - s0.get("bytes_written", 0)
    elapsed = end.when - start.when
    server_cpu = None
    cpu_seconds = end.cpu - start.cpu
    gc_seconds = end.gc - start.gc
    collections = [b - a for a, b in zip(start.gc_collections, end.gc_collections, strict=True)]
    if s0.get("cpu") is not None and s1.get("cpu") is not None:
        server_cpu = (s1["cpu"] - s0["cpu"]) / elapsed
        cpu_seconds += s1["cpu"] - s0["cpu"]
        gc_seconds += s1["gc"] - s0["gc"]
        collections = [
            c + b - a
            for c, a, b in zip(collections, s0["gc_collections"], s1["gc_collections"], strict=True)
        ]
    histogram = Histogram()
    histogram.extend(lat)
    result = {
        "name": "",
        "workload": workload.name,
        "network": args.network,
        "concurrency": args.concurrency,
        "req_size": workload.req_size,
        "resp_size": workload.resp_size,
        "client_config": list(args.client_config),
        "server_config": list(args.server_config),
        "duration": args.duration,
        "warmup": args.warmup,
        "ops": ops,
        "qps": ops / window if window > 0 else 0.0,
        "mb_per_s": rec.bytes_moved / window / 1e6 if rec.bytes_moved and window > 0 else None,
        "p50_ms": percentile(lat, 50) * 1e3,
        "p90_ms": percentile(lat, 90) * 1e3,
        "p99_ms": percentile(lat, 99) * 1e3,
        "avg_ms": (statistics.fmean(lat) * 1e3) if lat else math.nan,
        "histogram": histogram.lines(),
        "bytes_per_op": None,
        "allocs_per_op": None,
        "allocs_ops": None,
        "task_steps_per_op": None,
        "io_waits_per_op": None,
        "wire_bytes_per_op": wire / ops if ops else None,
        "frames_per_write": frames / send_alls if send_alls else 0.0,
        "client_frames": frames,
        "client_send_alls": send_alls,
        "server_frames_per_write": (server_frames / server_send_alls if server_send_alls else 0.0),
        "server_frames": server_frames,
        "server_send_alls": server_send_alls,
        "client_cpu": (end.cpu - start.cpu) / elapsed,
        "server_cpu": server_cpu,
        "cpu_us_per_op": cpu_seconds / ops * 1e6 if ops else None,
        "gc_share": gc_seconds / cpu_seconds if cpu_seconds > 0 else None,
        "gc_collections": collections,
        "gc_freeze": bool(args.gc_freeze),
        "gc_threshold": args.gc_threshold or gc.get_threshold()[0],
        **result,
        **versions(),
        "machine": machine(),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }
    result["name"] = run_name(result)
    if profiler is not None:
        profiler.dump_stats(args.profile)
    return result


async def count_allocations(
    args: argparse.Namespace,
    conn: trio_h2t.ClientConnection,
    server: BenchServer | None,
    rec: Recorder,
) -> dict[str, Any]:
    """The separate allocation pass: ``--allocs-duration`` seconds, counted (also
    trio task steps and scheduler I/O waits, with an Instrument).

    Checkpoint: always. On cancellation: the counters may stay installed.
    """
    counter = alloc_counter()
    if not counter.available:
        print(f"benchmain: allocs/op unavailable: {counter.why_unavailable}", file=sys.stderr)
    if server is None:
        await control(conn, "allocs/start")
    ops_before = rec.total_ops
    steps = StepCounter()
    trio.lowlevel.add_instrument(steps)
    counter.start()
    await trio.sleep(args.allocs_duration)
    counted = counter.stop()
    trio.lowlevel.remove_instrument(steps)
    ops = rec.total_ops - ops_before
    remote: dict[str, Any] = {}
    if server is None:
        remote = await control(conn, "allocs/stop")
    if not ops:
        return {}
    result: dict[str, Any] = {"allocs_ops": ops}
    task_steps, io_waits = steps.steps, steps.io_waits
    if remote.get("steps") is not None:
        task_steps += remote["steps"]
        io_waits += remote["io_waits"]
    result["task_steps_per_op"] = task_steps / ops
    result["io_waits_per_op"] = io_waits / ops
    if counted is not None:
        allocs, nbytes = counted
        if remote.get("allocs"):
            allocs += remote["allocs"][0]
            nbytes += remote["allocs"][1]
        result["allocs_per_op"] = allocs / ops
        result["bytes_per_op"] = nbytes / ops
    return result


async def run_memory(args: argparse.Namespace) -> dict[str, Any]:
    """Both sides in this process over a memory stream pair. Checkpoint: always."""
    prepare_gc(args.gc_freeze, args.gc_threshold)
    server = BenchServer(workload_of(args), remote=False)
    client_stream, server_stream = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            server.serve, server_stream, server_config(args.concurrency, args.server_config)
        )
        config = client_config(args.client_config)
        async with trio_h2t.open_client_connection(client_stream, config=config) as conn:
            result = await client_main(args, conn, server)
        nursery.cancel_scope.cancel()
    return result


async def run_tcp(args: argparse.Namespace, port: int) -> dict[str, Any]:
    """The client of a server in another process. Checkpoint: always."""
    prepare_gc(args.gc_freeze, args.gc_threshold)
    config = client_config(args.client_config)
    async with trio_h2t.open_connection("127.0.0.1", port, config=config) as conn:
        return await client_main(args, conn, None)


def run_once(args: argparse.Namespace) -> dict[str, Any]:
    """One configuration, start to end (spawning the server for TCP)."""
    if args.network == "memory":
        return trio.run(run_memory, args)
    server = ServerProcess(args, workload_of(args))
    try:
        return trio.run(run_tcp, args, server.port)
    finally:
        server.close()


def stop_server_process(proc: subprocess.Popen[str]) -> None:
    """Stop a server process that serves until its stdin ends: EOF, then a kill if it
    has not exited within 10 s."""
    if proc.stdin is not None:
        proc.stdin.close()  # EOF: the server stops
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
