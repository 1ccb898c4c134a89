"""gRPC against the Python peers: trio_h2t.grpc, grpclib (asyncio and uvloop), grpcio aio, purerpc.

Every implementation serves and calls the same service (``bench.proto``: a ``Payload``
with one ``bytes`` field; ``Unary`` echoes the request, ``PingPong`` echoes each
message of a bidirectional stream), compiled with grpc_tools for grpcio
(``--grpc_python_out``), grpclib (its own plugin, ``--grpclib_python_out``) and
purerpc (``protoc-gen-purerpc``); trio_h2t.grpc uses the same protobuf messages
(``SerializeToString`` / ``FromString``), so the bytes on the wire are the same: a
5-byte length prefix in a DATA frame even for an empty message, trailers with
``grpc-status``.

A run measures each preset (``PRESETS``) for ``--rounds`` rounds. In each round
every implementation runs once, in an order rotated round by round; a run is a fresh
server process and a fresh client process (one connection, over 127.0.0.1 TCP).
The client warms up for ``--warmup`` seconds, then measures for ``--duration``
seconds; it prints ``START`` and ``END`` on its stdout at the edges of the measured
window, and the runner reads the server's CPU time from ``/proc`` at each (the
client measures its own with ``time.process_time``: every thread of the process).

Per preset and implementation it prints the medians over the rounds of QPS, p50 and
p99 latency, and the server's and the client's CPU µs per call, with the ratio of
QPS (and p99) to trio_h2t's and a 95 % percentile-bootstrap interval
(``stats.bootstrap_ratio``); then the targets (``targets``), PASS/FAIL; and writes a PNG
(``--plot``, matplotlib). ``--json FILE`` keeps every run. ``--record`` writes the
table's medians, with the commit, date, command and load, into
``benchmarks/results.json`` (``benchmarks/record.py``), from which
``benchmarks/plot_results.py`` draws the documentation's plots.

purerpc pins h2 < 4, so it runs from its own virtual environment, which
``scripts/purerpc-venv.sh [DIR]`` creates with pinned versions (purerpc==0.8.0,
"protobuf>=7.35.1,<8", trio; DIR defaults to /tmp/purerpc-venv) and whose
interpreter it prints: pass it as ``--purerpc-python``, e.g.
``--purerpc-python "$(scripts/purerpc-venv.sh)"`` (``--dry-run`` shows the commands
and creates nothing). Without it purerpc is skipped with the reason printed.

The roles ``serve`` and ``client`` are this same file run as a subprocess; they
import only what their implementation needs (purerpc's interpreter has no trio_h2t
dependencies beyond trio). ``--profile FILE`` (trio_h2t only) runs the last round's server
and client under cProfile and dumps their statistics when the run ends
(``FILE.PRESET`` and ``FILE.PRESET.client``).

``--gc-freeze`` applies the same thing to every implementation's server and client
process alike: ``gc.collect()`` then ``gc.freeze()`` once started (the server
listening, the client connected, before any call), so CPython's cyclic collector
no longer walks the objects of start-up (the modules, the event loop, the
connection) in its full collections: what an application may do after start-up
(``docs/grpc.md``, "Latency and the cyclic collector"). Off by default.

``--gc-stats`` measures the collector instead of speed (``gcstats.py``): in the
measured window, per 1,000 calls and per process (server and client apart),
collections per generation, objects promoted, cyclic garbage freed, time collecting;
then, after the window, a census of the cyclic garbage (``gc.DEBUG_SAVEALL`` and
tracemalloc for ``--census`` seconds more) by type and by allocation site. The runner
passes the client's ``START``/``END``/``SAVE``/``REPORT`` marks on to the server on
its stdin; the server counts the calls its handlers answered. The latencies of such
a run are not comparable (the hook's counting is in them).

Run: ``.venv/bin/python benchmarks/peers/grpc_peers.py --rounds 5`` (all presets,
about 1 min per preset with four implementations), or
``--preset w1 --preset w4 --impl trio_h2t --impl grpcio``.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if not __package__:  # run as a script: benchmarks/_bootstrap.py registers the package
    # benchmarks/ on the path, where a script one level up has it as its own folder
    sys.path.insert(1, str(Path(__file__).resolve().parent.parent))
    importlib.import_module("_bootstrap")

from benchmarks import record
from benchmarks.peers import gcstats

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
UNARY = "/bench.Bench/Unary"
PINGPONG = "/bench.Bench/PingPong"
IMPLS = ("trio_h2t", "grpclib", "grpclib-uvloop", "grpcio", "purerpc")
TRIO_IMPLS = ("trio_h2t", "purerpc")


@dataclass(frozen=True)
class Preset:
    """One workload: ``kind`` unary or pingpong, ``concurrency`` calls (or streams) in
    flight on the one connection, ``size`` bytes in each request and response body."""

    kind: str
    concurrency: int
    size: int
    what: str


PRESETS: dict[str, Preset] = {
    "w1": Preset("unary", 100, 0, "W1, control-buffer batching: unary 100 concurrent 0 B"),
    "w2": Preset("pingpong", 200, 100, "W2, control-buffer batching: ping-pong 200 streams 100 B"),
    "w3": Preset("pingpong", 100, 100, "W3, streaming: ping-pong 100 streams 100 B (vs uvloop)"),
    "alloc": Preset("unary", 200, 100, "allocations: unary 200 concurrent 100 B"),
    "codec": Preset("unary", 6, 8192, "codec buffer reuse: unary 6 concurrent 8 KiB"),
    "zerocopy": Preset("pingpong", 100, 1 << 20, "zero-copy: ping-pong 100 streams 1 MiB"),
    "peers100": Preset("unary", 100, 100, "peers table: unary 100 concurrent 100 B"),
    "w4": Preset("unary", 8, 1 << 20, "W4, peers table: unary 8 concurrent 1 MiB"),
    "c1000": Preset("unary", 1000, 0, "unary 1000 concurrent 0 B (against W1's 100)"),
}


# ---------------------------------------------------------------- generated code


def compile_proto(
    out: Path, purerpc_plugin: Path | None = None, *, peers: bool = True, grpclib: bool = True
) -> None:
    """Compile bench.proto into ``out`` (bench_pb2; with ``peers``, grpcio's
    bench_pb2_grpc and, with ``grpclib`` too, grpclib's bench_grpc: its plugin comes
    with grpclib, the ``bench`` extra) and, with ``purerpc_plugin``, purerpc's stub
    into ``out/purerpc``."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    base = [sys.executable, "-m", "grpc_tools.protoc", f"-I{HERE}"]
    out.mkdir(parents=True, exist_ok=True)
    stubs = [f"--grpc_python_out={out}"] if peers else []
    stubs += [f"--grpclib_python_out={out}"] if peers and grpclib else []
    subprocess.run([*base, f"--python_out={out}", *stubs, "bench.proto"], check=True, env=env)
    if purerpc_plugin is not None:
        (out / "purerpc").mkdir(exist_ok=True)
        subprocess.run(
            [
                *base,
                f"--plugin=protoc-gen-purerpc={purerpc_plugin}",
                f"--python_out={out / 'purerpc'}",
                f"--purerpc_out={out / 'purerpc'}",
                "bench.proto",
            ],
            check=True,
            env=env,
        )


def load(gen: Path, name: str) -> Any:
    """Import a generated module from ``gen``."""
    if str(gen) not in sys.path:
        sys.path.insert(0, str(gen))
    return importlib.import_module(name)


# ---------------------------------------------------------------- client side


@dataclass
class Window:
    """What the workers record; only calls that end inside the measured window count."""

    size: int
    on: bool = False  # owner: the client's main task (the workers read it)
    calls: int = 0  # owner: the workers
    total_calls: int = 0  # owner: the workers
    latencies: list[float] = field(default_factory=list)  # owner: the workers
    errors: int = 0  # owner: the workers
    bad_size: int = 0  # owner: the workers
    first_error: str = ""  # owner: the workers

    def done(self, started: float, body: bytes) -> None:
        self.total_calls += 1
        if len(body) != self.size:
            self.bad_size += 1
        if self.on:
            self.calls += 1
            self.latencies.append(time.perf_counter() - started)

    def failed(self, exc: BaseException) -> None:
        self.errors += 1
        if not self.first_error:
            text = " ".join(f"{type(exc).__name__}: {exc}".split())
            self.first_error = text[:300]


# A session opens what one worker keeps for its life (nothing for unary, a stream for
# ping-pong) and gives the one-operation function: request message in, response body out.
Op = Callable[[Any], Awaitable[bytes]]
Session = Callable[[], AbstractAsyncContextManager[Op]]


async def worker_loop(session: Session, request: Any, window: Window, checkpoint: Any) -> None:
    """One worker: open a session, then run operations back to back; an error is
    counted and the session reopened."""
    while True:
        try:
            async with session() as op:
                while True:
                    started = time.perf_counter()
                    body = await op(request)
                    window.done(started, body)
        except Exception as exc:
            window.failed(exc)
            await checkpoint(0.01)


def summary(window: Window, cpu: float, wall: float) -> dict[str, Any]:
    ordered = sorted(window.latencies)

    def pct(p: float) -> float:
        if not ordered:
            return math.nan
        return ordered[min(len(ordered) - 1, max(0, math.ceil(len(ordered) * p / 100) - 1))]

    return {
        "calls": window.calls,
        "total_calls": window.total_calls,
        "qps": window.calls / wall if wall > 0 else 0.0,
        "p50_ms": pct(50) * 1e3,
        "p99_ms": pct(99) * 1e3,
        "client_cpu_s": cpu,
        "errors": window.errors,
        "bad_size": window.bad_size,
        "first_error": window.first_error,
        "gc_frozen": gc.get_freeze_count(),
    }


#: This process's collector statistics, with ``--gc-stats`` (``started`` makes them).
GC_STATS: list[Any] = []
#: Calls (or ping-pong messages) the server's handlers answered: ``--gc-stats``'s divisor.
SERVED = [0]


def started(args: argparse.Namespace) -> None:
    """A role process is started (imports done, listening or connected): with
    ``--gc-freeze``, move every object tracked so far out of the collector's reach;
    with ``--gc-stats``, hook the collector."""
    if args.gc_freeze:
        gc.collect()
        gc.freeze()
    if args.gc_stats:
        GC_STATS.append(gcstats.GcStats())


def server_command(line: str, marks: list[int]) -> None:
    """One mark the runner passed on from the client (``--gc-stats``): ``marks``
    keeps SERVED at ``START``."""
    if not GC_STATS:
        return
    stats = GC_STATS[0]
    if line == "START":
        marks[:] = [SERVED[0]]
        stats.start()
    elif line == "END":
        stats.stop(SERVED[0] - (marks[0] if marks else 0))
    elif line == "SAVE":
        stats.census_start(SERVED[0])
    elif line == "REPORT":
        mark("GCSTATS " + json.dumps(stats.census_report(SERVED[0])))


async def client_census(args: argparse.Namespace, window: Window, sleep: Any) -> dict[str, Any]:
    """After the window (``--gc-stats``): the census while the workers go on."""
    stats = GC_STATS[0]
    stats.stop(window.calls)
    stats.census_start(window.total_calls)
    mark("SAVE")
    await sleep(args.census)
    report: dict[str, Any] = stats.census_report(window.total_calls)
    mark("REPORT")
    return report


def mark(word: str) -> None:
    sys.stdout.write(word + "\n")
    sys.stdout.flush()


def mark_port(port: int) -> None:
    """The server's first line: its port, and the objects it froze (``--gc-freeze``)."""
    mark(f"PORT {port} {gc.get_freeze_count()}")


def trio_h2t_sessions(channel: Any, pb2: Any) -> tuple[Session, Session]:
    from trio_h2t import grpc as tg

    assert isinstance(channel, tg.Channel)
    ser, deser = pb2.Payload.SerializeToString, pb2.Payload.FromString
    unary = channel.unary_unary(UNARY, request_serializer=ser, response_deserializer=deser)
    pingpong = channel.stream_stream(PINGPONG, request_serializer=ser, response_deserializer=deser)

    @asynccontextmanager
    async def unary_session() -> AsyncIterator[Op]:
        async def op(request: Any) -> bytes:
            response = await unary(request)
            return bytes(response.body)

        yield op

    @asynccontextmanager
    async def pingpong_session() -> AsyncIterator[Op]:
        async with pingpong.open() as call:

            async def op(request: Any) -> bytes:
                await call.send_message(request)
                response = await call.receive_message()
                return bytes(response.body)

            yield op

    return unary_session, pingpong_session


def purerpc_sessions(stub: Any) -> tuple[Session, Session]:
    @asynccontextmanager
    async def unary_session() -> AsyncIterator[Op]:
        async def op(request: Any) -> bytes:
            response = await stub.Unary(request)
            return bytes(response.body)

        yield op

    @asynccontextmanager
    async def pingpong_session() -> AsyncIterator[Op]:
        stream = await stub.PingPong()

        async def op(request: Any) -> bytes:
            await stream.send_message(request)
            response = await stream.receive_message()
            return bytes(response.body)

        yield op

    return unary_session, pingpong_session


async def trio_client(args: argparse.Namespace, preset: Preset) -> dict[str, Any]:
    import trio

    gen = Path(args.gen)
    window = Window(preset.size)
    if args.impl == "trio_h2t":
        from trio_h2t import grpc as tg

        pb2 = load(gen, "bench_pb2")
        opener: Any = tg.open_channel("127.0.0.1", args.port)
    else:
        import purerpc

        pb2 = load(gen / "purerpc", "bench_pb2")
        stubs = load(gen / "purerpc", "bench_grpc")
        opener = purerpc.insecure_channel("127.0.0.1", args.port)
    request = pb2.Payload(body=bytes(preset.size))
    async with opener as channel:
        if args.impl == "trio_h2t":
            unary, pingpong = trio_h2t_sessions(channel, pb2)
        else:
            unary, pingpong = purerpc_sessions(stubs.BenchStub(channel))
        session = unary if preset.kind == "unary" else pingpong
        started(args)
        async with trio.open_nursery() as nursery:
            for _ in range(preset.concurrency):
                nursery.start_soon(worker_loop, session, request, window, trio.sleep)
            await trio.sleep(args.warmup)
            mark("START")
            if GC_STATS:
                GC_STATS[0].start()
            window.on = True
            cpu0, wall0 = time.process_time(), time.perf_counter()
            await trio.sleep(args.duration)
            while window.total_calls < args.min_calls:  # noqa: ASYNC110 - a counter, polled
                await trio.sleep(0.05)
            window.on = False
            cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
            mark("END")
            census = await client_census(args, window, trio.sleep) if GC_STATS else None
            nursery.cancel_scope.cancel()
    return summary(window, cpu, wall) | {"gc": census}


async def asyncio_client(args: argparse.Namespace, preset: Preset) -> dict[str, Any]:
    import asyncio  # noqa: TID251 - the asyncio peers

    gen = Path(args.gen)
    pb2 = load(gen, "bench_pb2")
    window = Window(preset.size)
    request = pb2.Payload(body=bytes(preset.size))
    closers: list[Callable[[], Awaitable[Any]]] = []
    if args.impl.startswith("grpclib"):
        from grpclib.client import Channel

        gstub = load(gen, "bench_grpc").BenchStub
        channel = Channel("127.0.0.1", args.port)
        stub = gstub(channel)

        @asynccontextmanager
        async def unary() -> AsyncIterator[Op]:
            async def op(request: Any) -> bytes:
                return bytes((await stub.Unary(request)).body)

            yield op

        @asynccontextmanager
        async def pingpong() -> AsyncIterator[Op]:
            async with stub.PingPong.open() as stream:

                async def op(request: Any) -> bytes:
                    await stream.send_message(request)
                    return bytes((await stream.recv_message()).body)

                yield op

        async def close_grpclib() -> None:
            channel.close()

        closers.append(close_grpclib)
    else:
        import grpc

        achannel = grpc.aio.insecure_channel(
            f"127.0.0.1:{args.port}",
            options=[
                ("grpc.max_receive_message_length", 8 << 20),
                ("grpc.max_send_message_length", 8 << 20),
            ],
        )
        astub = load(gen, "bench_pb2_grpc").BenchStub(achannel)

        @asynccontextmanager
        async def unary() -> AsyncIterator[Op]:
            async def op(request: Any) -> bytes:
                return bytes((await astub.Unary(request)).body)

            yield op

        @asynccontextmanager
        async def pingpong() -> AsyncIterator[Op]:
            call = astub.PingPong()
            try:

                async def op(request: Any) -> bytes:
                    await call.write(request)
                    return bytes((await call.read()).body)

                yield op
            finally:
                call.cancel()

        closers.append(achannel.close)
    session = unary if preset.kind == "unary" else pingpong
    started(args)
    tasks = [
        asyncio.ensure_future(worker_loop(session, request, window, asyncio.sleep))
        for _ in range(preset.concurrency)
    ]
    await asyncio.sleep(args.warmup)
    mark("START")
    if GC_STATS:
        GC_STATS[0].start()
    window.on = True
    cpu0, wall0 = time.process_time(), time.perf_counter()
    await asyncio.sleep(args.duration)
    while window.total_calls < args.min_calls:  # noqa: ASYNC110 - a counter, polled
        await asyncio.sleep(0.05)
    window.on = False
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    mark("END")
    census = await client_census(args, window, asyncio.sleep) if GC_STATS else None
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    for close in closers:
        await close()
    return summary(window, cpu, wall) | {"gc": census}


def run_trio(profile: str | None, main: Callable[..., Awaitable[Any]], *args: Any) -> Any:
    """``trio.run(main, *args)``, under cProfile with its statistics dumped to
    ``profile`` if one is given (``--profile``, either role)."""
    import trio

    if not profile:
        return trio.run(main, *args)
    import cProfile

    profiler = cProfile.Profile()
    profiler.enable()
    try:
        return trio.run(main, *args)
    finally:
        profiler.disable()
        profiler.dump_stats(profile)


def run_client(args: argparse.Namespace) -> None:
    preset = PRESETS[args.preset]
    if args.impl in TRIO_IMPLS:
        result = run_trio(args.profile, trio_client, args, preset)
    else:
        import asyncio  # noqa: TID251 - the asyncio peers

        if args.impl == "grpclib-uvloop":
            import uvloop

            result = uvloop.run(asyncio_client(args, preset))
        else:
            result = asyncio.run(asyncio_client(args, preset))
    sys.stdout.write("RESULT " + json.dumps(result) + "\n")
    sys.stdout.flush()
    os._exit(0)  # no lingering shutdown of a peer's threads or connections


# ---------------------------------------------------------------- server side


async def trio_h2t_server(args: argparse.Namespace) -> None:
    import trio_h2t
    from trio_h2t import grpc as tg

    pb2 = load(Path(args.gen), "bench_pb2")
    ser, deser = pb2.Payload.SerializeToString, pb2.Payload.FromString

    async def unary(request: Any, context: tg.ServicerContext) -> Any:
        SERVED[0] += 1
        return request

    async def pingpong(requests: AsyncIterator[Any], context: tg.ServicerContext) -> Any:
        async for request in requests:
            SERVED[0] += 1
            await context.write(request)

    handlers = tg.method_handlers_generic_handler(
        "bench.Bench",
        {
            "Unary": tg.unary_unary_handler(
                unary, request_deserializer=deser, response_serializer=ser
            ),
            "PingPong": tg.stream_stream_handler(
                pingpong, request_deserializer=deser, response_serializer=ser
            ),
        },
    )
    config = trio_h2t.TransportConfig(max_concurrent_streams=max(100, args.concurrency + 1))
    async with trio_h2t.open_server(
        tg.Server([handlers]), 0, host="127.0.0.1", config=config
    ) as h2server:
        started(args)
        mark_port(h2server.port)
        await wait_stdin_eof()


async def wait_stdin_eof() -> None:
    """Return when the runner closes our stdin (the end of the run); act on the
    lines it sends before (``server_command``)."""
    import trio

    stdin = trio.lowlevel.FdStream(os.dup(0))
    pending, marks = b"", list[int]()
    while chunk := await stdin.receive_some(1024):
        *lines, pending = (pending + chunk).split(b"\n")
        for line in lines:
            server_command(line.decode().strip(), marks)
    await stdin.aclose()


async def purerpc_server(args: argparse.Namespace) -> None:
    import purerpc
    import trio

    gen = Path(args.gen) / "purerpc"
    servicer: Any = load(gen, "bench_grpc").BenchServicer

    class Servicer(servicer):  # type: ignore[misc]
        async def Unary(self, message: Any) -> Any:
            SERVED[0] += 1
            return message

        async def PingPong(self, messages: Any) -> Any:
            async for message in messages:
                SERVED[0] += 1
                yield message

    server = purerpc.Server(port=0)
    server.add_service(Servicer().service)
    async with trio.open_nursery() as nursery:
        port = await nursery.start(server.serve_async)
        started(args)
        mark_port(port)
        await wait_stdin_eof()
        nursery.cancel_scope.cancel()


async def asyncio_server(args: argparse.Namespace) -> None:
    import asyncio  # noqa: TID251 - the asyncio peers

    gen = Path(args.gen)
    loop = asyncio.get_running_loop()
    if args.impl.startswith("grpclib"):
        from grpclib.server import Server

        base = load(gen, "bench_grpc").BenchBase

        class Handler(base):  # type: ignore[misc, valid-type]
            async def Unary(self, stream: Any) -> None:
                request = await stream.recv_message()
                SERVED[0] += 1
                await stream.send_message(request)

            async def PingPong(self, stream: Any) -> None:
                async for request in stream:
                    SERVED[0] += 1
                    await stream.send_message(request)

        gserver = Server([Handler()])
        await gserver.start("127.0.0.1", 0)
        listening: Any = gserver._server  # grpclib keeps asyncio's Server here
        port = listening.sockets[0].getsockname()[1]
    else:
        import grpc

        servicers = load(gen, "bench_pb2_grpc")
        aservicer: Any = servicers.BenchServicer

        class AioServicer(aservicer):  # type: ignore[misc]
            async def Unary(self, request: Any, context: Any) -> Any:
                SERVED[0] += 1
                return request

            async def PingPong(self, requests: Any, context: Any) -> Any:
                async for request in requests:
                    SERVED[0] += 1
                    yield request

        aserver = grpc.aio.server(
            options=[
                ("grpc.max_receive_message_length", 8 << 20),
                ("grpc.max_send_message_length", 8 << 20),
            ]  # grpc.max_concurrent_streams left unlimited (its default): a lower one
            # refuses the streams the client opens before its SETTINGS arrives
        )
        servicers.add_BenchServicer_to_server(AioServicer(), aserver)
        port = aserver.add_insecure_port("127.0.0.1:0")
        await aserver.start()
    started(args)
    mark_port(port)
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    marks = list[int]()
    while line := await reader.readline():
        server_command(line.decode().strip(), marks)


def run_server(args: argparse.Namespace) -> None:
    if args.impl in TRIO_IMPLS:
        main = trio_h2t_server if args.impl == "trio_h2t" else purerpc_server
        run_trio(args.profile, main, args)
    else:
        import asyncio  # noqa: TID251 - the asyncio peers

        if args.impl == "grpclib-uvloop":
            import uvloop

            uvloop.run(asyncio_server(args))
        else:
            asyncio.run(asyncio_server(args))
    os._exit(0)


# ---------------------------------------------------------------- the runner


def proc_cpu(pid: int) -> float:
    """utime + stime of a process, in seconds (``/proc/PID/stat``)."""
    with open(f"/proc/{pid}/stat") as file:
        fields = file.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def env_for(impl: str) -> dict[str, str]:
    env = dict(os.environ)
    if impl != "purerpc":
        env["PYTHONPATH"] = str(ROOT) + (
            os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""
        )
    else:
        env.pop("PYTHONPATH", None)
    return env


def run_one(
    impl: str,
    preset_name: str,
    *,
    python: str,
    gen: Path,
    duration: float,
    warmup: float,
    profile: str | None = None,
    timeout: float = 120.0,
    min_calls: int = 0,
    gc_freeze: bool = False,
    gc_stats: float = 0.0,
) -> dict[str, Any]:
    """One server process and one client process for ``preset_name``; the client's
    result with the server's CPU seconds over the measured window added (with
    ``min_calls``, the window lasts until that many calls completed: the smoke
    test's bound, not a timing). With ``gc_stats`` (the census's seconds), each side's
    ``gcstats`` report: ``result["gc"]`` the client's, ``result["server_gc"]`` the
    server's."""
    preset = PRESETS[preset_name]
    me = str(Path(__file__).resolve())
    common = ["--impl", impl, "--gen", str(gen), "--concurrency", str(preset.concurrency)]
    common += ["--gc-freeze"] if gc_freeze else []
    common += ["--gc-stats", "--census", str(gc_stats)] if gc_stats else []
    server_cmd = [python, me, "serve", *common] + (["--profile", profile] if profile else [])
    env = env_for(impl)
    server = subprocess.Popen(
        server_cmd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        # purerpc logs every stream the client's exit breaks off
        stderr=subprocess.DEVNULL if impl == "purerpc" else None,
        text=True,
        env=env,
        cwd=ROOT,
    )
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        if not line.startswith("PORT "):
            raise RuntimeError(f"{impl} server did not start: {line!r}")
        port, frozen = line.split()[1:3]
        client_cmd = [python, me, "client", *common, "--port", port, "--preset", preset_name]
        client_cmd += ["--duration", str(duration), "--warmup", str(warmup)]
        client_cmd += ["--min-calls", str(min_calls)]
        client_cmd += ["--profile", profile + ".client"] if profile else []
        client = subprocess.Popen(client_cmd, stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT)
        assert client.stdout is not None
        cpu0 = cpu1 = math.nan
        result: dict[str, Any] | None = None
        server_gc: dict[str, Any] | None = None
        deadline = time.monotonic() + timeout
        for out in client.stdout:
            if out.startswith("START"):
                cpu0 = proc_cpu(server.pid)
            elif out.startswith("END"):
                cpu1 = proc_cpu(server.pid)
            elif out.startswith("RESULT "):
                result = json.loads(out[len("RESULT ") :])
            if gc_stats and out.strip() in ("START", "END", "SAVE", "REPORT"):
                assert server.stdin is not None
                server.stdin.write(out)
                server.stdin.flush()
                if out.strip() == "REPORT":
                    answer = server.stdout.readline()
                    if answer.startswith("GCSTATS "):
                        server_gc = json.loads(answer[len("GCSTATS ") :])
            if time.monotonic() > deadline:
                break
        client.wait(timeout=30)
        if result is None:
            raise RuntimeError(f"{impl} client gave no result (exit {client.returncode})")
    finally:
        if server.stdin is not None:
            server.stdin.close()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    result["server_cpu_s"] = cpu1 - cpu0
    result["server_gc_frozen"] = int(frozen)
    result["server_gc"] = server_gc
    calls = max(1, result["calls"])
    result["server_us_per_call"] = result["server_cpu_s"] / calls * 1e6
    result["client_us_per_call"] = result["client_cpu_s"] / calls * 1e6
    result["cpu_us_per_call"] = result["server_us_per_call"] + result["client_us_per_call"]
    result["impl"], result["preset"] = impl, preset_name
    return result


def ratio_of(top: float, bottom: float) -> float:
    """top / bottom, NaN when bottom is 0 or NaN (no call completed in a window)."""
    return top / bottom if bottom and not math.isnan(bottom) else math.nan


def medians(results: list[dict[str, Any]], key: str) -> float:
    import statistics

    values = [r[key] for r in results if not math.isnan(r[key])]
    return statistics.median(values) if values else math.nan


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="role")
    for role in ("serve", "client"):
        p = sub.add_parser(role)
        p.add_argument("--impl", choices=IMPLS, required=True)
        p.add_argument("--gen", required=True)
        p.add_argument("--concurrency", type=int, default=100)
        p.add_argument("--profile")
        p.add_argument("--gc-freeze", action="store_true")
        p.add_argument("--gc-stats", action="store_true")
        p.add_argument("--census", type=float, default=1.0)
        if role == "client":
            p.add_argument("--port", type=int, required=True)
            p.add_argument("--preset", choices=sorted(PRESETS), required=True)
            p.add_argument("--duration", type=float, default=2.0)
            p.add_argument("--warmup", type=float, default=0.5)
            p.add_argument("--min-calls", type=int, default=0, help="measure at least until")
    parser.add_argument("--preset", action="append", choices=sorted(PRESETS))
    parser.add_argument("--impl", action="append", choices=IMPLS)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--duration", type=float, default=2.0)
    parser.add_argument("--warmup", type=float, default=0.7)
    parser.add_argument("--purerpc-python", help="an interpreter with purerpc installed")
    parser.add_argument("--plot", default="grpc_peers.png", help="PNG file ('' for none)")
    parser.add_argument("--json", help="write every run's result to this file")
    record.add_record_option(parser)
    parser.add_argument(
        "--profile",
        help="cProfile the trio_h2t server (FILE.PRESET) and client (FILE.PRESET.client) "
        "of the last round",
    )
    parser.add_argument(
        "--gc-freeze",
        action="store_true",
        help="gc.collect() + gc.freeze() once started, in every server and client process",
    )
    parser.add_argument(
        "--gc-stats",
        action="store_true",
        help="measure the cyclic collector per 1000 calls in each process (gcstats.py)",
    )
    parser.add_argument(
        "--census", type=float, default=1.0, help="--gc-stats: seconds of the garbage census"
    )
    args = parser.parse_args(argv)
    if args.role == "serve":
        run_server(args)
        return 0
    if args.role == "client":
        run_client(args)
        return 0
    return run_all(args)


def run_all(args: argparse.Namespace) -> int:
    from benchmarks import stats  # imports trio (purerpc's interpreter need not have it)

    started = record.begin()

    presets = args.preset or list(PRESETS)
    impls = list(args.impl or IMPLS)
    plugin: Path | None = None
    if "purerpc" in impls:
        reason = ""
        if not args.purerpc_python:
            reason = "no --purerpc-python given"
        elif not Path(args.purerpc_python).exists():
            reason = f"{args.purerpc_python} does not exist"
        else:
            plugin = Path(args.purerpc_python).parent / "protoc-gen-purerpc"
            if not plugin.exists():
                reason, plugin = f"no protoc-gen-purerpc beside {args.purerpc_python}", None
        if reason:
            print(f"skipping purerpc: {reason}", flush=True)
            impls.remove("purerpc")
    gen = Path(tempfile.mkdtemp(prefix="grpc_peers_"))
    try:
        compile_proto(gen, plugin, grpclib=any(i.startswith("grpclib") for i in impls))
        results: list[dict[str, Any]] = []
        for rnd in range(args.rounds):
            shift = rnd % len(impls)
            order = impls[shift:] + impls[:shift]
            for name in presets:
                for impl in order:
                    python = args.purerpc_python if impl == "purerpc" else sys.executable
                    profile = (
                        f"{args.profile}.{name}"
                        if args.profile and impl == "trio_h2t" and rnd == args.rounds - 1
                        else None
                    )
                    r = run_one(
                        impl,
                        name,
                        python=python,
                        gen=gen,
                        duration=args.duration,
                        warmup=args.warmup,
                        profile=profile,
                        gc_freeze=args.gc_freeze,
                        gc_stats=args.census if args.gc_stats else 0.0,
                    )
                    r["round"] = rnd
                    results.append(r)
                    flag = ""
                    if r["errors"] or r["bad_size"]:
                        flag = f"  errors {r['errors']} bad {r['bad_size']} {r['first_error']}"
                    print(
                        f"round {rnd + 1} {name:9} {impl:15} {r['qps']:9.0f} QPS"
                        f"  p50 {r['p50_ms']:7.2f}  p99 {r['p99_ms']:7.2f} ms"
                        f"  cpu/call srv {r['server_us_per_call']:6.0f}"
                        f" cli {r['client_us_per_call']:6.0f} µs{flag}",
                        flush=True,
                    )
    finally:
        shutil.rmtree(gen, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    table = report(results, presets, impls, stats)
    print(table)
    if args.record:
        path = record.record(
            args.record,
            "grpc_peers",
            summary_rows(results, presets, impls, stats),
            started,
            rounds=args.rounds,
            duration=args.duration,
        )
        print(f"recorded: {path} (block grpc_peers)")
    if args.gc_stats:
        print(gc_report(results, presets, impls))
    if args.plot:
        plot(results, presets, impls, args.plot)
        print(f"plot: {args.plot}")
    return 0


def gc_report(results: list[dict[str, Any]], presets: list[str], impls: list[str]) -> str:
    """``--gc-stats``: per preset, implementation and side, the collector's figures."""
    format_report = gcstats.format_report
    lines: list[str] = []
    for name in presets:
        for impl in impls:
            rs = [r for r in results if r["preset"] == name and r["impl"] == impl]
            for side, key in (("server", "server_gc"), ("client", "gc")):
                reports = [r[key] for r in rs if r.get(key)]
                if reports:
                    lines += [f"[{name}]", *format_report(side, impl, reports)]
    return "\n".join(lines)


def summary_rows(
    results: list[dict[str, Any]], presets: list[str], impls: list[str], stats: Any
) -> list[dict[str, Any]]:
    """``--record``'s rows (benchmarks/results.json, block ``grpc_peers``): per preset
    and implementation, the medians of the report's table and the ratio of QPS to
    trio_h2t's with its 95 % interval."""
    by: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in results:
        by.setdefault((r["preset"], r["impl"]), []).append(r)
    rows: list[dict[str, Any]] = []
    for name in presets:
        ours = by.get((name, "trio_h2t"), [])
        ref = [r["qps"] for r in ours if r["qps"] > 0]
        for impl in impls:
            rs = by.get((name, impl), [])
            if not rs:
                continue
            low, high = (
                stats.bootstrap_ratio([r["qps"] for r in rs], ref, level=0.95)
                if ref
                else (math.nan, math.nan)
            )
            rows.append(
                {
                    "preset": name,
                    "impl": impl,
                    "qps": round(medians(rs, "qps")),
                    "ratio": round(ratio_of(medians(rs, "qps"), medians(ours, "qps")), 2)
                    if ours
                    else math.nan,
                    "ratio_low": round(low, 2),
                    "ratio_high": round(high, 2),
                    "p50_ms": round(medians(rs, "p50_ms"), 2),
                    "p99_ms": round(medians(rs, "p99_ms"), 2),
                    "server_us_per_call": round(medians(rs, "server_us_per_call")),
                    "client_us_per_call": round(medians(rs, "client_us_per_call")),
                    "errors": sum(r["errors"] for r in rs),
                }
            )
    return rows


def report(results: list[dict[str, Any]], presets: list[str], impls: list[str], stats: Any) -> str:
    lines = [
        "| preset | impl | QPS | x trio_h2t [95 %] | p50 ms | p99 ms | p99 x trio_h2t"
        " | srv µs/call | cli µs/call | CPU/call x trio_h2t |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    by: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in results:
        by.setdefault((r["preset"], r["impl"]), []).append(r)
    qps: dict[tuple[str, str], list[float]] = {k: [r["qps"] for r in v] for k, v in by.items()}
    for name in presets:
        # a run with no call in its window (0 QPS) cannot be a divisor
        ref = [q for q in qps.get((name, "trio_h2t"), []) if q > 0]
        for impl in impls:
            rs = by.get((name, impl), [])
            if not rs:
                continue
            q = qps[(name, impl)]
            ratio = ratio_of(medians(rs, "qps"), medians(by[(name, "trio_h2t")], "qps"))
            low, high = stats.bootstrap_ratio(q, ref, level=0.95) if ref else (math.nan, math.nan)
            p99_ratio = ratio_of(medians(rs, "p99_ms"), medians(by[(name, "trio_h2t")], "p99_ms"))
            cpu_ratio = ratio_of(
                medians(rs, "cpu_us_per_call"), medians(by[(name, "trio_h2t")], "cpu_us_per_call")
            )
            lines.append(
                f"| {name} | {impl} | {medians(rs, 'qps'):.0f}"
                f" | {ratio:.2f} [{low:.2f}, {high:.2f}]"
                f" | {medians(rs, 'p50_ms'):.2f} | {medians(rs, 'p99_ms'):.2f} | {p99_ratio:.2f}"
                f" | {medians(rs, 'server_us_per_call'):.0f}"
                f" | {medians(rs, 'client_us_per_call'):.0f}"
                f" | {cpu_ratio:.2f} |"
            )
    lines.append("")
    lines.extend(targets(by, stats))
    return "\n".join(lines)


def targets(by: dict[tuple[str, str], list[dict[str, Any]]], stats: Any) -> list[str]:
    """The targets: trio_h2t's QPS over a peer's (or p99 under), PASS/FAIL."""

    def qps(preset: str, impl: str) -> list[float]:
        return [r["qps"] for r in by.get((preset, impl), [])]

    def per_cpu(preset: str, impl: str) -> list[float]:
        # calls per CPU-second of both processes: what QPS would be with a core
        # each, and far steadier than QPS when other work shares the machine
        return [1e6 / r["cpu_us_per_call"] for r in by.get((preset, impl), [])]

    rows: list[str] = [
        "targets (medians; 95 % bootstrap interval of trio_h2t / peer;"
        " 'per CPU' compares calls per CPU-second of server + client):"
    ]

    def check(label: str, top: list[float], bottom: list[float], bound: float, low: bool) -> None:
        if not top or not bottom:
            rows.append(f"  {label}: not measured")
            return
        import statistics

        value = ratio_of(statistics.median(top), statistics.median(bottom))
        nonzero = [b for b in bottom if b > 0]
        lo, hi = stats.bootstrap_ratio(top, nonzero, level=0.95) if nonzero else (math.nan,) * 2
        ok = value <= bound if low else value >= bound
        sign = "<=" if low else ">="
        rows.append(
            f"  {label}: {value:.2f} [{lo:.2f}, {hi:.2f}] (target {sign} {bound})"
            f" {'PASS' if ok else 'FAIL'}"
        )

    for metric, f in (("QPS", qps), ("per CPU", per_cpu)):
        for label, preset, peer, bound in (
            ("W1 vs grpclib", "w1", "grpclib", 1.8),
            ("W1 vs grpcio", "w1", "grpcio", 1.8),
            ("W3 vs grpclib on uvloop", "w3", "grpclib-uvloop", 1.3),
            ("W4 vs grpclib", "w4", "grpclib", 1.5),
            ("W4 vs grpcio", "w4", "grpcio", 0.75),
        ):
            check(f"{label} ({metric})", f(preset, "trio_h2t"), f(preset, peer), bound, False)
        check(
            f"c=1000 vs W1's c=100 ({metric})",
            f("c1000", "trio_h2t"),
            f("w1", "trio_h2t"),
            0.9,
            False,
        )
    p99 = [[r["p99_ms"] for r in by.get(("w1", i), [])] for i in ("trio_h2t", "grpclib")]
    check("W1 p99 vs grpclib's", p99[0], p99[1], 0.6, True)
    for name in sorted({p for p, _ in by}):
        for impl in sorted({i for p, i in by if p == name}):
            rs = by[(name, impl)]
            rows.append(
                f"  CPU per call {name} {impl}: server {medians(rs, 'server_us_per_call'):.0f} µs,"
                f" client {medians(rs, 'client_us_per_call'):.0f} µs"
            )
    return rows


def plot(results: list[dict[str, Any]], presets: list[str], impls: list[str], path: str) -> None:
    """QPS relative to trio_h2t per preset, one bar per implementation (matplotlib)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(11, 8))
    width = 0.8 / max(1, len(impls))
    for i, impl in enumerate(impls):
        qps_ratio, cpu = [], []
        for name in presets:
            mine = [r for r in results if r["preset"] == name and r["impl"] == impl]
            ref = [r for r in results if r["preset"] == name and r["impl"] == "trio_h2t"]
            ok = bool(mine and ref)
            qps_ratio.append(ratio_of(medians(mine, "qps"), medians(ref, "qps")) if ok else 0.0)
            cpu.append(
                medians(mine, "server_us_per_call") + medians(mine, "client_us_per_call")
                if mine
                else 0.0
            )
        xs = [x + i * width for x in range(len(presets))]
        top.bar(xs, qps_ratio, width, label=impl)
        bottom.bar(xs, cpu, width, label=impl)
    for ax in (top, bottom):
        ax.set_xticks([x + 0.4 - width / 2 for x in range(len(presets))], presets)
        ax.legend(fontsize="small")
    top.axhline(1.0, color="grey", linewidth=0.8)
    top.set_ylabel("QPS / trio_h2t QPS")
    bottom.set_ylabel("CPU µs per call (server + client)")
    bottom.set_yscale("log")
    fig.suptitle("gRPC peers, one connection over 127.0.0.1 (benchmarks/peers/grpc_peers.py)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    sys.exit(main())
