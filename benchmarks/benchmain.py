"""benchmain: unary and streaming HTTP/2 exchanges over trio_h2t (after grpc-go's benchmain).

Run one configuration, print its figures, optionally append them to a JSON file;
``compare`` prints two such files side by side (after grpc-go's benchresult)::

    .venv/bin/python benchmarks/benchmain.py --workload unary --concurrency 100 --network tcp
    .venv/bin/python benchmarks/benchmain.py --network memory --allocs --json new.json
    .venv/bin/python benchmarks/benchmain.py compare old.json new.json

Workloads (what goes on the wire; ``benchmarks/ceiling.py`` replays the same unary
exchange between two bare h2 connections):

``unary``
    one request and one response per stream. The client opens a stream with
    ``:method POST``, ``:scheme``, ``:authority`` and ``:path /bench/unary`` (END_STREAM
    on the HEADERS frame when ``--req-size`` is 0, else one body of that many bytes
    with END_STREAM); the server reads the body, answers ``:status 200``, a body of
    ``--resp-size`` bytes (no DATA frame when 0) and the trailer ``x-bench-status: 0``.
``streaming``
    one long-lived stream per concurrency slot, ping-pong: the client sends one
    message, the server answers one. Messages are gRPC-style (a 5-byte prefix: flag,
    32-bit big-endian length) so that 0-byte messages still exist on the wire.

``--concurrency N`` streams are in flight on **one** connection (one task per slot).
``--network memory`` runs client and server in this process over
``trio.testing.memory_stream_pair``; ``--network tcp`` starts the server as a separate
process (``benchmain.py --serve``) and connects to it on 127.0.0.1. The server
advertises MAX_CONCURRENT_STREAMS = concurrency + 1, as grpc-go's benchmain does (the
spare stream carries the harness's control requests, below).

How each number is measured
---------------------------
- **Warm-up** (``--warmup`` s) runs the workload without recording. Then every
  operation that *completes* during the next ``--duration`` seconds is counted.
- **QPS** = operations completed in the window / window length (wall clock).
- **Latency** of an operation: ``time.perf_counter()`` from entering ``open_stream``
  (unary) or before ``send_data`` (streaming) to the end of the response (trailers
  received, or the whole reply message). p50/p90/p99 read the sorted latencies at
  index ``count * p / 100 - 1``, as grpc-go does; avg is the mean.
- **frames/write** is loopy's ``LoopyStatistics``: frames framed / ``send_all``
  calls over the window (client: ``ClientConnection.statistics().loopy``; server:
  ``statistics().loopy`` of the ``ServerConnection`` that ``serve_connection``
  reports through ``task_status``, fetched by a control request when the server is in
  another process).
- **wire bytes/op** = bytes both loopies wrote in the window / operations.
- **GC share** = wall time inside the cyclic garbage collector (``gc.callbacks``)
  during the window / CPU time of both sides; with the collections per generation.
  ``--gc-freeze`` calls ``gc.freeze()`` after start-up and ``--gc-threshold N`` sets
  the generation-0 threshold, in both processes (both off by default).
- **CPU** = ``time.process_time()`` over the window / its length, per process (1.0 =
  one core busy). Over memory there is one process: client and server together.
  **CPU/op** = CPU seconds of both sides over the window / operations: what an
  operation costs, whatever else runs on the machine (QPS is wall-clock, so other
  processes competing for the cores lower it; CPU/op much less so).
- **Allocs/op and Bytes/op** (only with ``--allocs``) come from a *separate* pass run
  after the QPS pass on the same, warm connection, so that the QPS pass is never
  slowed by counting. A small C hook (compiled on first use with the system C
  compiler, cached in the temp directory, loaded with ctypes) wraps CPython's three
  allocator domains (``PyMem_SetAllocator``, as tracemalloc does) and counts every
  ``malloc``/``calloc``/``realloc`` and the bytes requested, like Go's
  ``runtime.MemStats.Mallocs`` / ``TotalAlloc`` (a ``realloc`` counts as one
  allocation of its new size; raw allocations made on behalf of pymalloc are not
  counted twice). tracemalloc cannot give this: it tracks only live blocks. The
  figures cover client *and* server (in TCP mode the server counts its own and
  reports them), plus the harness's own loop (a couple of floats per operation).
  Without a C compiler they are reported as null. The same pass counts trio **task
  steps** (a task running from one yield to the next) and scheduler I/O waits per
  operation, both sides, with a ``trio.abc.Instrument``.

Control requests: when a server runs in another process, the client asks it for its
counters with ``GET /_bench/stats`` (and ``/_bench/allocs/start|stop``) on the same
connection, at the window's edges; these few requests are not counted.

Profiling: ``--profile FILE`` runs cProfile over the measurement window only
(client, or client and server over memory); ``--server-profile FILE`` does the same in
the TCP server process. Print them with ``python -m pstats FILE`` or
``--profile-top N``. cProfile slows everything down: never read QPS off a profiled run.
"""

from __future__ import annotations

import argparse
import cProfile
import ctypes
import dataclasses
import datetime
import gc
import hashlib
import importlib.metadata
import json
import logging
import math
import os
import platform
import pstats
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import trio
import trio.testing

import trio_h2t

WORKLOADS = ("unary", "streaming")
NETWORKS = ("memory", "tcp")

# ---------------------------------------------------------------- the wire shapes
# ceiling.py imports nothing from here (it must not depend on trio); keep these two
# files in step by hand.

UNARY_PATH = "/bench/unary"
STREAMING_PATH = "/bench/streaming"
RESPONSE_HEADERS: list[tuple[bytes, bytes]] = [(b":status", b"200")]
TRAILERS: list[tuple[bytes, bytes]] = [(b"x-bench-status", b"0")]
CONTROL_PREFIX = b"/_bench/"
MESSAGE_PREFIX = 5  # gRPC framing: 1 flag byte, 4 length bytes


def message(size: int) -> bytes:
    """A streaming-workload message of ``size`` payload bytes, prefix included."""
    return b"\x00" + size.to_bytes(4, "big") + b"x" * size


def header_value(headers: Sequence[tuple[bytes, bytes]] | None, name: bytes) -> bytes | None:
    for key, value in headers or ():
        if key == name:
            return value
    return None


# ---------------------------------------------------------------- allocation counter

_ALLOC_SOURCE = r"""
#include <Python.h>
#include <stdint.h>

/* Wraps CPython's allocator domains (as tracemalloc does) and counts what is asked
   of them. RAW calls made while a MEM/OBJ call is in progress (pymalloc falling back
   to PyMem_RawMalloc for big blocks) are not counted twice. */
typedef struct { PyMemAllocatorEx orig; int raw; } hook_t;
static hook_t hooks[3];
static uint64_t n_allocs, n_bytes;
static __thread int depth;
static int installed;
static const PyMemAllocatorDomain domains[3] = {
    PYMEM_DOMAIN_RAW, PYMEM_DOMAIN_MEM, PYMEM_DOMAIN_OBJ};

static inline void count(int raw, size_t size) {
    if (raw && depth) return;
    __atomic_fetch_add(&n_allocs, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&n_bytes, (uint64_t)size, __ATOMIC_RELAXED);
}
static void *h_malloc(void *ctx, size_t size) {
    hook_t *h = (hook_t *)ctx; void *p; count(h->raw, size);
    depth++; p = h->orig.malloc(h->orig.ctx, size); depth--; return p;
}
static void *h_calloc(void *ctx, size_t n, size_t size) {
    hook_t *h = (hook_t *)ctx; void *p; count(h->raw, n * size);
    depth++; p = h->orig.calloc(h->orig.ctx, n, size); depth--; return p;
}
static void *h_realloc(void *ctx, void *ptr, size_t size) {
    hook_t *h = (hook_t *)ctx; void *p; count(h->raw, size);
    depth++; p = h->orig.realloc(h->orig.ctx, ptr, size); depth--; return p;
}
static void h_free(void *ctx, void *ptr) {
    hook_t *h = (hook_t *)ctx; depth++; h->orig.free(h->orig.ctx, ptr); depth--;
}
int bench_alloc_start(void) {
    if (installed) return -1;
    for (int i = 0; i < 3; i++) {
        PyMemAllocatorEx a;
        PyMem_GetAllocator(domains[i], &hooks[i].orig);
        hooks[i].raw = domains[i] == PYMEM_DOMAIN_RAW;
        a.ctx = &hooks[i]; a.malloc = h_malloc; a.calloc = h_calloc;
        a.realloc = h_realloc; a.free = h_free;
        PyMem_SetAllocator(domains[i], &a);
    }
    installed = 1;
    return 0;
}
int bench_alloc_stop(void) {
    if (!installed) return -1;
    for (int i = 2; i >= 0; i--) PyMem_SetAllocator(domains[i], &hooks[i].orig);
    installed = 0;
    return 0;
}
void bench_alloc_read(uint64_t *out) {
    out[0] = __atomic_load_n(&n_allocs, __ATOMIC_RELAXED);
    out[1] = __atomic_load_n(&n_bytes, __ATOMIC_RELAXED);
}
"""


class AllocCounter:
    """Counts allocations made through CPython's allocators while started."""

    def __init__(self) -> None:
        self._lib: ctypes.PyDLL | None = None
        self.why_unavailable = ""
        self._start: tuple[int, int] = (0, 0)
        try:
            self._lib = ctypes.PyDLL(str(self._build()))
        except (OSError, subprocess.CalledProcessError) as exc:
            self.why_unavailable = f"cannot build the allocation counter: {exc}"

    @staticmethod
    def _build() -> Path:
        compiler = sysconfig.get_config_var("CC") or "cc"
        compiler = compiler.split()[0]
        if shutil.which(compiler) is None:
            compiler = "cc"
        include = sysconfig.get_paths()["include"]
        key = hashlib.sha256(
            (_ALLOC_SOURCE + sys.version + include + str(os.getuid())).encode()
        ).hexdigest()[:16]
        so = Path(tempfile.gettempdir()) / f"trio_h2t_bench_alloc_{key}.so"
        if not so.exists():
            with tempfile.TemporaryDirectory() as tmp:
                src = Path(tmp) / "alloc.c"
                src.write_text(_ALLOC_SOURCE)
                out = Path(tmp) / "alloc.so"
                subprocess.run(
                    [compiler, "-O2", "-shared", "-fPIC", "-I", include, "-o", str(out), str(src)],
                    check=True,
                    capture_output=True,
                )
                os.replace(out, so)  # atomic: concurrent builders do not clash
        return so

    @property
    def available(self) -> bool:
        return self._lib is not None

    def _read(self) -> tuple[int, int]:
        assert self._lib is not None
        buf = (ctypes.c_uint64 * 2)()
        self._lib.bench_alloc_read(buf)
        return int(buf[0]), int(buf[1])

    def start(self) -> None:
        if self._lib is None:
            return
        self._lib.bench_alloc_start()
        self._start = self._read()

    def stop(self) -> tuple[int, int] | None:
        """Stop counting; return (allocations, bytes) since :meth:`start`."""
        if self._lib is None:
            return None
        end = self._read()
        self._lib.bench_alloc_stop()
        return end[0] - self._start[0], end[1] - self._start[1]


_alloc_counter: AllocCounter | None = None


class StepCounter(trio.abc.Instrument):
    """Counts task steps (a task running until its next yield) and scheduler
    loop iterations (waits for I/O) while installed."""

    def __init__(self) -> None:
        self.steps = 0
        self.io_waits = 0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self.steps += 1

    def before_io_wait(self, timeout: float) -> None:
        self.io_waits += 1


def alloc_counter() -> AllocCounter:
    global _alloc_counter
    if _alloc_counter is None:
        _alloc_counter = AllocCounter()
    return _alloc_counter


# ---------------------------------------------------------------- garbage collector


class GcTimer:
    """Wall time spent in the cyclic garbage collector (via ``gc.callbacks``)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.collections = [0, 0, 0]
        self._started = 0.0
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._started
            self.collections[info["generation"]] += 1


_gc_timer: GcTimer | None = None


def gc_timer() -> GcTimer:
    global _gc_timer
    if _gc_timer is None:
        _gc_timer = GcTimer()
    return _gc_timer


def prepare_gc(freeze: bool, threshold: int = 0) -> None:
    """Start timing the collector; with ``freeze``, move every object that exists now
    out of its reach (``gc.freeze()``, as long-running servers do after start-up);
    with ``threshold``, set the generation-0 threshold (CPython's default: 700)."""
    gc_timer()
    if threshold:
        _, gen1, gen2 = gc.get_threshold()
        gc.set_threshold(threshold, gen1, gen2)
    if freeze:
        gc.collect()
        gc.freeze()


# ---------------------------------------------------------------- the server


class BenchServer:
    """The server side of both workloads, plus the harness's control endpoints."""

    def __init__(self, *, workload: str, resp_size: int, remote: bool) -> None:
        self.workload = workload
        self.resp_body = b"x" * resp_size
        self.resp_message = message(resp_size)
        self.remote = remote  # in its own process: counts its own CPU and allocations
        self.connections: list[trio_h2t.ServerConnection] = []
        self.profile_path: str | None = None
        self._profiler: cProfile.Profile | None = None
        self._steps: StepCounter | None = None

    async def serve(
        self,
        transport: trio.abc.Stream,
        config: trio_h2t.TransportConfig,
    ) -> None:
        """Serve one connection; keep it to read loopy's counters."""
        async with trio.open_nursery() as nursery:
            connection = await nursery.start(
                _serve_connection_with_config, transport, self.handle, config
            )
            self.connections.append(connection)

    async def handle(self, stream: trio_h2t.H2Stream) -> None:
        path = header_value(stream.headers, b":path") or b""
        if path.startswith(CONTROL_PREFIX):
            await self._control(stream, path)
        elif self.workload == "unary":
            async for _ in stream:  # the request body, if any
                pass
            await stream.send_headers(RESPONSE_HEADERS)
            if self.resp_body:
                await stream.send_data(self.resp_body)
            await stream.send_trailers(TRAILERS)
        else:
            await stream.send_headers(RESPONSE_HEADERS)
            reply = self.resp_message
            while True:
                prefix = await stream.receive_exactly(MESSAGE_PREFIX)
                if len(prefix) < MESSAGE_PREFIX:
                    break
                size = int.from_bytes(prefix[1:], "big")
                if size:
                    await stream.receive_exactly(size)
                await stream.send_data(reply)
            await stream.send_trailers(TRAILERS)

    def stats(self) -> dict[str, Any]:
        frames = send_alls = written = 0
        for connection in self.connections:
            snap = connection.statistics().loopy
            frames += snap.frames
            send_alls += snap.send_alls
            written += snap.bytes_written
        return {
            "frames": frames,
            "send_alls": send_alls,
            "bytes_written": written,
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
        body = json.dumps(reply).encode()
        await stream.send_headers(RESPONSE_HEADERS)
        await stream.send_data(body)
        await stream.send_trailers(TRAILERS)


async def _serve_connection_with_config(
    transport: trio.abc.Stream,
    handler: Callable[[trio_h2t.H2Stream], Awaitable[None]],
    config: trio_h2t.TransportConfig,
    *,
    task_status: trio.TaskStatus[trio_h2t.ServerConnection] = trio.TASK_STATUS_IGNORED,
) -> None:
    await trio_h2t.serve_connection(transport, handler, config=config, task_status=task_status)


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


async def serve_main(args: argparse.Namespace) -> None:
    """``--serve``: a TCP server on 127.0.0.1; prints its port; stops at stdin EOF."""
    prepare_gc(args.gc_freeze, args.gc_threshold)
    server = BenchServer(workload=args.workload, resp_size=args.resp_size, remote=True)
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

    def __init__(self, args: argparse.Namespace) -> None:
        cmd = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--serve",
            "--port",
            "0",
            "--workload",
            args.workload,
            "--resp-size",
            str(args.resp_size),
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
        if self.proc.stdin is not None:
            self.proc.stdin.close()  # EOF: the server stops
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# ---------------------------------------------------------------- the client


class Recorder:
    """Counts operations and keeps the latencies of those completed in the window."""

    def __init__(self) -> None:
        self.measuring = False
        self.stopping = False
        self.total_ops = 0  # every completed operation (for the progress line)
        self.latencies: list[float] = []
        self.phase = "warm-up"
        self.started = time.perf_counter()
        self.window_start = 0.0


async def unary_worker(
    conn: trio_h2t.ClientConnection, rec: Recorder, headers: list[tuple[bytes, bytes]], body: bytes
) -> None:
    perf_counter = time.perf_counter
    latencies = rec.latencies
    while not rec.stopping:
        start = perf_counter()
        async with conn.open_stream(headers, end_stream=not body) as stream:
            if body:
                await stream.send_data(body, end_stream=True)
            await stream.receive_headers()
            async for _ in stream:
                pass
        end = perf_counter()
        rec.total_ops += 1
        if rec.measuring:
            latencies.append(end - start)


async def streaming_worker(
    conn: trio_h2t.ClientConnection,
    rec: Recorder,
    headers: list[tuple[bytes, bytes]],
    request: bytes,
) -> None:
    perf_counter = time.perf_counter
    latencies = rec.latencies
    async with conn.open_stream(headers) as stream:
        first = True
        while not rec.stopping:
            start = perf_counter()
            await stream.send_data(request)
            if first:
                await stream.receive_headers()
                first = False
            prefix = await stream.receive_exactly(MESSAGE_PREFIX)
            size = int.from_bytes(prefix[1:], "big")
            if size:
                await stream.receive_exactly(size)
            end = perf_counter()
            rec.total_ops += 1
            if rec.measuring:
                latencies.append(end - start)
        await stream.end()
        await stream.receive_trailers()


async def progress(rec: Recorder, label: str, total: float) -> None:
    """One updating line on a TTY; a line a second otherwise."""
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
    frames: int
    send_alls: int
    bytes_written: int
    server: dict[str, Any] | None


async def control(conn: trio_h2t.ClientConnection, what: str) -> dict[str, Any]:
    response = await conn.request("GET", f"/_bench/{what}")
    result: dict[str, Any] = json.loads(response.body)
    return result


async def snapshot(
    conn: trio_h2t.ClientConnection, server: BenchServer | None, what: str
) -> Snapshot:
    loopy = conn.statistics().loopy
    when = time.perf_counter()
    cpu = time.process_time()
    timer = gc_timer()
    gc_seconds, collections = timer.seconds, list(timer.collections)
    server_stats = server.stats() if server is not None else await control(conn, what)
    return Snapshot(
        when,
        cpu,
        gc_seconds,
        collections,
        loopy.frames,
        loopy.send_alls,
        loopy.bytes_written,
        server_stats,
    )


def percentile(ordered: Sequence[float], p: float) -> float:
    """grpc-go's percentile: ``ordered[count * p / 100 - 1]`` (clamped)."""
    if not ordered:
        return math.nan
    index = int(len(ordered) * p / 100) - 1
    return ordered[min(max(index, 0), len(ordered) - 1)]


def versions() -> dict[str, str]:
    def version(name: str) -> str:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            return "?"

    return {
        "python": platform.python_version(),
        "trio_h2t": trio_h2t.__version__,
        "h2": version("h2"),
        "trio": trio.__version__,
    }


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} cores, {platform.system()} {platform.release()}"


def run_name(r: dict[str, Any]) -> str:
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
    configs = tuple(tuple(r.get(f"{side}_config") or ()) for side in ("client", "server"))
    return (r["workload"], r["network"], r["concurrency"], r["req_size"], r["resp_size"], configs)


async def client_main(
    args: argparse.Namespace,
    conn: trio_h2t.ClientConnection,
    server: BenchServer | None,
) -> dict[str, Any]:
    """Warm up, measure, then (``--allocs``) count allocations; return the result."""
    rec = Recorder()
    if args.workload == "unary":
        headers = conn.request_headers("POST", UNARY_PATH)
        payload = b"x" * args.req_size
        worker: Callable[..., Awaitable[None]] = unary_worker
    else:
        headers = conn.request_headers("POST", STREAMING_PATH)
        payload = message(args.req_size)
        worker = streaming_worker
    label = f"{args.workload} c={args.concurrency} {args.network}"
    profiler = cProfile.Profile() if args.profile else None
    result: dict[str, Any] = {}

    async with trio.open_nursery() as nursery:
        if not args.quiet:
            nursery.start_soon(progress, rec, label, args.warmup + args.duration)
        async with trio.open_nursery() as workers:
            for _ in range(args.concurrency):
                workers.start_soon(worker, conn, rec, headers, payload)
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
    frames = end.frames - start.frames
    send_alls = end.send_alls - start.send_alls
    wire = end.bytes_written - start.bytes_written
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
    result = {
        "name": "",
        "workload": args.workload,
        "network": args.network,
        "concurrency": args.concurrency,
        "req_size": args.req_size,
        "resp_size": args.resp_size,
        "client_config": list(args.client_config),
        "server_config": list(args.server_config),
        "duration": args.duration,
        "warmup": args.warmup,
        "ops": ops,
        "qps": ops / window if window > 0 else 0.0,
        "p50_ms": percentile(lat, 50) * 1e3,
        "p90_ms": percentile(lat, 90) * 1e3,
        "p99_ms": percentile(lat, 99) * 1e3,
        "avg_ms": (statistics.fmean(lat) * 1e3) if lat else math.nan,
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
    trio task steps and scheduler I/O waits, with an Instrument)."""
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
    prepare_gc(args.gc_freeze, args.gc_threshold)
    server = BenchServer(workload=args.workload, resp_size=args.resp_size, remote=False)
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
    prepare_gc(args.gc_freeze, args.gc_threshold)
    config = client_config(args.client_config)
    async with trio_h2t.open_connection("127.0.0.1", port, config=config) as conn:
        return await client_main(args, conn, None)


def run_once(args: argparse.Namespace) -> dict[str, Any]:
    """One configuration, start to end (spawning the server for TCP)."""
    if args.network == "memory":
        return trio.run(run_memory, args)
    server = ServerProcess(args)
    try:
        return trio.run(run_tcp, args, server.port)
    finally:
        server.close()


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
        description="Unary/streaming HTTP/2 benchmark over trio_h2t (after grpc-go's "
        "benchmain). 'benchmain.py compare OLD.json NEW.json' compares two result files.",
    )
    p.add_argument("--workload", choices=WORKLOADS, default="unary")
    p.add_argument("--concurrency", type=int, default=100, help="streams in flight (one conn)")
    p.add_argument("--req-size", type=int, default=0, help="request body/message bytes")
    p.add_argument("--resp-size", type=int, default=0, help="response body/message bytes")
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
    if args.concurrency < 1 or args.req_size < 0 or args.resp_size < 0:
        parser().error("--concurrency must be >= 1 and sizes >= 0")
    if args.server_profile and args.network != "tcp":
        parser().error("--server-profile needs --network tcp (over memory, --profile covers both)")
    result = run_once(args)
    print_result(result)
    if args.json:
        append_json(args.json, result)
    if args.profile and args.profile_top:
        print_profile(args.profile, args.profile_top, "client" if args.network == "tcp" else "both")
    if args.server_profile and args.profile_top:
        print_profile(args.server_profile, args.profile_top, "server")
    return 0


if __name__ == "__main__":
    sys.exit(main())
