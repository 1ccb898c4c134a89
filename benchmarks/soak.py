"""Soak: a mixed load with connection churn for a given time; errors, QPS and memory.

The server runs in its own process (``soak.py --serve``: it prints its port, serves
until its stdin closes); the client, in this process, runs ``--concurrency`` workers
for ``--seconds``. Each worker opens a connection (raw HTTP/2 or a gRPC channel, in
turn), runs a random number of operations on it (``--ops-per-connection``), closes
it and opens the next, so connections start and end all through the run. The
operations, drawn at random:

- ``unary``: a POST of 0-4 KiB, echoed back; the body is compared.
- ``stream``: ping-pong, a few chunks each answered before the next is sent.
- ``large``: a 1 MiB request body, and a 1 MiB response (checked byte for byte).
- ``cancel``: a request the server holds; the client's cancel scope expires
  (RST_STREAM CANCEL; the server's handler is cancelled).
- ``reset``: a request with part of its body, then ``H2Stream.reset()``.
- ``grpc-unary`` and ``grpc-stream`` (on gRPC channels): an echo, and a server
  stream of a few messages.

Every second the client records the operations completed and the resident memory of
both processes (the server answers ``GET /_soak/stats`` on a separate connection).
An *error* is anything an operation did not expect (a wrong body, an exception
other than the cancellation it asked for), or an ERROR the server logged; there must
be none. Memory must be flat after warm-up: the verdict compares the median resident
memory of the last fifth of the run with that of the fifth after warm-up.

    python benchmarks/soak.py --seconds 600 --plot soak.png --json soak.json

Exit status: 0 when there were no errors and memory stayed within
``--max-growth-mb`` on each side, 1 otherwise. The plot (``--plot``) needs
matplotlib (the ``bench`` extra). ``tests/test_benchmarks.py`` runs a short soak.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import random
import resource
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

import trio_h2t
from trio_h2t import grpc

if not __package__:  # run as a script: benchmarks/_bootstrap.py registers the package
    importlib.import_module("_bootstrap")

from benchmarks.harness import stop_server_process

OPS_RAW = ("unary", "stream", "large", "cancel", "reset")
OPS_GRPC = ("grpc-unary", "grpc-stream")
LARGE = 1024 * 1024
SERVICE = "soak.Echo"


class SoakError(Exception):
    """An operation saw something it did not expect."""


def rss_bytes() -> int:
    """This process's resident memory now (Linux ``/proc``), else its peak."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:  # not Linux: the peak is the best there is
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def pattern(size: int, seed: int) -> bytes:
    """``size`` bytes that depend on ``seed``, so a swapped or shifted body shows."""
    unit = seed.to_bytes(4, "big") + bytes(range(252))
    return (unit * (size // len(unit) + 1))[:size]


# ---------------------------------------------------------------- the server


class _ErrorCount(logging.Handler):
    """Counts ERROR records (a handler that raised, a contained fault)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.count = 0  # owned by the server process's only thread
        self.last = ""

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1
        self.last = record.getMessage()


class SoakServer:
    """The server's handler: the raw paths, the gRPC service, and its statistics."""

    def __init__(self) -> None:
        self.errors = _ErrorCount()  # immutable after init
        logging.getLogger().addHandler(self.errors)
        self.handled: Counter[str] = Counter()  # owned by the handler tasks (one thread)
        handlers = grpc.method_handlers_generic_handler(
            SERVICE,
            {
                "Unary": grpc.unary_unary_handler(self._grpc_unary),
                "Stream": grpc.unary_stream_handler(self._grpc_stream),
            },
        )
        self._grpc = grpc.Server([handlers])  # immutable after init

    async def __call__(self, stream: trio_h2t.H2Stream) -> None:
        path = stream.request.path
        self.handled[path] += 1
        if path.startswith(f"/{SERVICE}/"):
            await self._grpc(stream)
        elif path == "/echo":
            body = await stream.read_all()
            await stream.send_headers([(":status", "200")])
            await stream.send_data(body, end_stream=True)
        elif path == "/pingpong":
            await stream.send_headers([(":status", "200")])
            async for chunk in stream:
                await stream.send_data(chunk)
            await stream.end()
        elif path == "/large":
            body = await stream.read_all()
            await stream.send_headers([(":status", "200")])
            await stream.send_data(body, end_stream=True)
        elif path == "/hold":
            await stream.send_headers([(":status", "200")])
            await trio.sleep_forever()  # until the client resets the stream
        elif path == "/_soak/stats":
            stats = {"rss": rss_bytes(), "errors": self.errors.count, "last": self.errors.last}
            await stream.send_headers([(":status", "200")])
            await stream.send_data(json.dumps(stats).encode(), end_stream=True)
        else:
            await stream.send_headers([(":status", "404")], end_stream=True)

    async def _grpc_unary(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        return request

    async def _grpc_stream(self, request: bytes, context: grpc.ServicerContext) -> Any:
        for i in range(int(request)):
            yield str(i).encode()


async def serve_main() -> None:
    server = SoakServer()
    config = trio_h2t.TransportConfig(max_concurrent_streams=1000)
    async with trio_h2t.open_server(server, 0, host="127.0.0.1", config=config) as h2server:
        print(f"port {h2server.port}", flush=True)
        # Serve until the parent closes our stdin.
        await trio.to_thread.run_sync(sys.stdin.read)


# ---------------------------------------------------------------- the client


@dataclass
class Tally:
    """What the workers did; owned by the client's tasks (one thread)."""

    ops: Counter[str] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    connections: int = 0

    def error(self, op: str, exc: BaseException | str) -> None:
        text = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"
        self.errors.append(f"{op}: {text}")


async def raw_op(conn: trio_h2t.ClientConnection, op: str, rng: random.Random) -> None:
    seed = rng.randrange(1 << 30)
    if op == "unary":
        body = pattern(rng.randrange(4097), seed)
        response = await conn.request("POST", "/echo", body=body)
        if response.status != 200 or response.body != body:
            raise SoakError(f"echo of {len(body)} B came back as {len(response.body)} B")
    elif op == "stream":
        async with conn.open_stream(conn.request_headers("POST", "/pingpong")) as stream:
            await stream.receive_headers()
            for i in range(rng.randrange(1, 8)):
                chunk = pattern(rng.randrange(1, 2000), seed + i)
                await stream.send_data(chunk)
                got = await stream.receive_exactly(len(chunk))
                if got != chunk:
                    raise SoakError(f"ping-pong chunk {i} differs")
            await stream.end()
            if await stream.receive_some() != b"":
                raise SoakError("ping-pong: more data after the last answer")
    elif op == "large":
        body = pattern(LARGE, seed)
        response = await conn.request("POST", "/large", body=body)
        if response.body != body:
            raise SoakError(f"1 MiB echo came back as {len(response.body)} B, or different")
    elif op == "cancel":
        with trio.move_on_after(rng.uniform(0.001, 0.02)) as scope:
            await conn.request("GET", "/hold")
        if not scope.cancelled_caught:
            raise SoakError("a held request returned")
    elif op == "reset":
        async with conn.open_stream(conn.request_headers("POST", "/echo")) as stream:
            await stream.send_data(pattern(rng.randrange(1, 10_000), seed))
            stream.reset()
    else:  # pragma: no cover - the op lists are fixed
        raise AssertionError(op)


async def grpc_op(channel: grpc.Channel, op: str, rng: random.Random) -> None:
    if op == "grpc-unary":
        request = pattern(rng.randrange(1025), rng.randrange(1 << 30))
        reply = await channel.unary_unary(f"/{SERVICE}/Unary")(request, timeout=30)
        if reply != request:
            raise SoakError("gRPC echo differs")
    else:
        n = rng.randrange(1, 10)
        async with channel.unary_stream(f"/{SERVICE}/Stream")(str(n).encode()) as call:
            got = [m async for m in call]
        if got != [str(i).encode() for i in range(n)]:
            raise SoakError(f"gRPC stream of {n} came back as {got!r}")


async def worker(
    index: int, port: int, deadline: float, args: argparse.Namespace, tally: Tally
) -> None:
    rng = random.Random(args.seed * 1000 + index)
    use_grpc = bool(index % 2)
    while trio.current_time() < deadline:
        n_ops = rng.randrange(1, args.ops_per_connection + 1)
        try:
            if use_grpc:
                async with grpc.open_channel("127.0.0.1", port) as channel:
                    tally.connections += 1
                    for _ in range(n_ops):
                        op = rng.choice(OPS_GRPC)
                        await grpc_op(channel, op, rng)
                        tally.ops[op] += 1
            else:
                async with trio_h2t.open_connection("127.0.0.1", port) as conn:
                    tally.connections += 1
                    for _ in range(n_ops):
                        op = rng.choice(OPS_RAW)
                        await raw_op(conn, op, rng)
                        tally.ops[op] += 1
        except Exception as exc:  # every unexpected outcome is counted, then go on
            tally.error("grpc" if use_grpc else "raw", exc)
        use_grpc = not use_grpc


async def server_stats(conn: trio_h2t.ClientConnection) -> dict[str, Any]:
    response = await conn.request("GET", "/_soak/stats")
    stats: dict[str, Any] = json.loads(response.body)
    return stats


@dataclass
class Sample:
    t: float
    qps: float
    client_rss: int
    server_rss: int


async def client_main(
    port: int, args: argparse.Namespace
) -> tuple[Tally, list[Sample], dict[str, Any]]:
    tally = Tally()
    samples: list[Sample] = []
    start = trio.current_time()
    deadline = start + args.seconds
    async with trio_h2t.open_connection("127.0.0.1", port) as stats_conn:
        async with trio.open_nursery() as nursery:
            for i in range(args.concurrency):
                nursery.start_soon(worker, i, port, deadline, args, tally)
            last_ops, last_t = 0, start
            while trio.current_time() < deadline:
                await trio.sleep(min(1.0, max(0.0, deadline - trio.current_time())))
                now = trio.current_time()
                ops = sum(tally.ops.values())
                server = await server_stats(stats_conn)
                samples.append(
                    Sample(
                        now - start, (ops - last_ops) / (now - last_t), rss_bytes(), server["rss"]
                    )
                )
                last_ops, last_t = ops, now
                if not args.quiet:
                    print(
                        f"{now - start:7.1f} s  {samples[-1].qps:8.0f} ops/s  "
                        f"client {rss_bytes() / 2**20:6.1f} MiB  "
                        f"server {server['rss'] / 2**20:6.1f} MiB  "
                        f"errors {len(tally.errors) + server['errors']}",
                        flush=True,
                    )
        final = await server_stats(stats_conn)
    return tally, samples, final


def growth(samples: Sequence[Sample], side: str, warmup: float) -> float:
    """MiB between the median of the fifth after warm-up and of the last fifth."""
    values: list[int] = [getattr(s, f"{side}_rss") for s in samples if s.t >= warmup]
    if len(values) < 5:
        return 0.0
    fifth = len(values) // 5
    return float(statistics.median(values[-fifth:]) - statistics.median(values[:fifth])) / 2**20


def plot(samples: Sequence[Sample], path: Path, title: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:  # a clear message, not a traceback
        raise SystemExit(f"--plot needs matplotlib (pip install -e '.[bench]'): {exc}") from None
    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(8, 6))
    t = [s.t for s in samples]
    top.plot(t, [s.qps for s in samples])
    top.set_ylabel("operations/s")
    top.set_title(title)
    bottom.plot(t, [s.server_rss / 2**20 for s in samples], label="server")
    bottom.plot(t, [s.client_rss / 2**20 for s in samples], label="client")
    bottom.set_ylabel("resident memory (MiB)")
    bottom.set_xlabel("seconds")
    bottom.set_ylim(bottom=0)
    bottom.legend()
    fig.tight_layout()
    fig.savefig(path)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="benchmarks/soak.py", description=__doc__.split("\n")[0])
    p.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--seconds", type=float, default=60.0, help="how long to run (default 60)")
    p.add_argument("--concurrency", type=int, default=16, help="workers (default 16)")
    p.add_argument(
        "--ops-per-connection",
        type=int,
        default=50,
        help="each connection runs 1..N operations before it is closed (default 50)",
    )
    p.add_argument(
        "--warmup", type=float, default=None, help="seconds (default: a fifth of the run)"
    )
    p.add_argument(
        "--max-growth-mb", type=float, default=20.0, help="allowed growth per side (default 20)"
    )
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--plot", type=Path, help="write a PNG of QPS and memory over time")
    p.add_argument("--json", type=Path, help="write the samples and the summary as JSON")
    p.add_argument("--quiet", action="store_true", help="no line per second")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.serve:
        trio.run(serve_main)
        return 0
    if args.seconds <= 0 or args.concurrency < 1 or args.ops_per_connection < 1:
        raise SystemExit("--seconds must be > 0, --concurrency and --ops-per-connection >= 1")
    proc = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "--serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("port "):
            raise SystemExit(f"the soak server did not start (it printed {line!r})")
        port = int(line.split()[1])
        wall = time.monotonic()
        tally, samples, final = trio.run(client_main, port, args)
        wall = time.monotonic() - wall
    finally:
        stop_server_process(proc)
    warmup = args.warmup if args.warmup is not None else args.seconds / 5
    summary = {
        "seconds": round(wall, 1),
        "concurrency": args.concurrency,
        "connections": tally.connections,
        "operations": dict(sorted(tally.ops.items())),
        "qps_median": round(statistics.median(s.qps for s in samples if s.t >= warmup), 1)
        if any(s.t >= warmup for s in samples)
        else 0.0,
        "client_errors": tally.errors[:20],
        "client_error_count": len(tally.errors),
        "server_error_count": final["errors"],
        "server_last_error": final["last"],
        "server_rss_mib": round(final["rss"] / 2**20, 1),
        "server_growth_mib": round(growth(samples, "server", warmup), 1),
        "client_growth_mib": round(growth(samples, "client", warmup), 1),
    }
    ok = (
        not tally.errors
        and final["errors"] == 0
        and summary["server_growth_mib"] <= args.max_growth_mb
        and summary["client_growth_mib"] <= args.max_growth_mb
    )
    summary["ok"] = ok
    print(json.dumps(summary, indent=2))
    if args.json:
        args.json.write_text(
            json.dumps({"summary": summary, "samples": [s.__dict__ for s in samples]}, indent=1)
        )
    if args.plot:
        plot(
            samples, args.plot, f"soak: {args.concurrency} workers, {tally.connections} connections"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
