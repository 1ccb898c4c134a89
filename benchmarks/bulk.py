"""Bulk throughput: trio_h2t against a raw ``trio.SocketStream``, side by side in one run.

Two processes on 127.0.0.1: this one is the client, a child (``bulk.py --serve``) the
server. Each measurement opens a fresh TCP connection (as a new user would: windows
start at their defaults) and moves ``--size`` MiB each way (``--direction both``:
client to server and server to client at once; ``down`` or ``up``: one way only):

``raw``
    a bare ``trio.SocketStream``: a 16-byte header (bytes up, bytes down), then the
    bodies, ``send_all`` of ``--chunk``-byte slices and ``receive_some(--chunk)``; the
    server ends with a 1-byte verdict on what it received. The physical limit for a
    Trio program here.
``h2t`` (and ``h2t:KEY=VALUE:...``, ``h2t-16m``)
    trio_h2t at its defaults (or with these ``TransportConfig`` fields on *both*
    sides; ``h2t-16m`` is 16 MiB stream and connection windows set by hand). The
    scenario ``1`` is one stream carrying the whole size each way; ``8`` (``--streams``)
    is that many concurrent streams on one connection, the size split between them.
    ``send_data`` of ``--chunk``-byte memoryview slices, ``receive_some(--chunk)``; the
    server's trailers give its verdict.

Real bytes: the body is a pseudo-random pattern (period ``PERIOD``, the same in both
processes). Every receiver checks the length and, per chunk received, its first and
last bytes against the pattern at their offsets (``--check sample``, cheap enough not
to weigh on the raw figure), or a CRC-32 of every byte (``--check crc32``, which costs
about as much CPU as the raw transfer itself). A mismatch fails the run.

Rounds alternate the implementations (the order reverses every other round, ABBA) so
a drift of the machine lands on all of them alike. Per scenario and implementation it
prints the median MB/s each way (10^6 bytes per second: ``--size`` MiB / wall time, per
direction), CPU seconds per GB moved (10^9 payload bytes, both directions counted)
of each process, and ratios of medians with a percentile-bootstrap interval
(``stats.bootstrap_ratio``): every implementation against ``raw``, and every other
trio_h2t variant against the first one.

Run: ``.venv/bin/python benchmarks/bulk.py`` (defaults: 256 MiB, chunk 64 KiB,
5 rounds, ``raw`` and ``h2t``, scenarios 1 and 8 streams; a few minutes);
``--size 50 --direction down --impl h2t --impl h2t-16m`` compares windows.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import math
import os
import random
import subprocess
import sys
import time
import zlib
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

import trio

import trio_h2t

if not __package__:  # run as a script: benchmarks/_bootstrap.py registers the package
    importlib.import_module("_bootstrap")

from benchmarks import record
from benchmarks.harness import stop_server_process
from benchmarks.stats import bootstrap_ratio, median

MIB = 1024 * 1024
#: The body's pattern repeats every PERIOD bytes: a prime, so chunk and frame
#: boundaries never line up with it and a misplaced chunk shows.
PERIOD = 1_048_573
PRESETS = {
    "h2t-16m": "h2t:initial_window_size=16777216:connection_window_size=16777216",
}


class BulkError(Exception):
    """A receiver got bytes the sender did not send: the benchmark is wrong."""


# ---------------------------------------------------------------- the bytes


@dataclasses.dataclass
class Pattern:
    """The body bytes: ``PERIOD`` pseudo-random bytes, repeated. Immutable after init."""

    chunk: int
    block: bytes = b""
    buffer: bytes = b""

    def __post_init__(self) -> None:
        self.block = random.Random(PERIOD).randbytes(PERIOD)
        # block + its start: any chunk of the stream is one slice of this buffer.
        self.buffer = self.block + self.block[: self.chunk]
        self._crcs: dict[int, int] = {}

    def chunks(self, size: int) -> list[memoryview]:
        """The body of ``size`` bytes as ``--chunk``-byte views (no copies)."""
        view = memoryview(self.buffer)
        out = []
        pos = 0
        while pos < size:
            n = min(self.chunk, size - pos)
            off = pos % PERIOD
            out.append(view[off : off + n])
            pos += n
        return out

    def crc(self, size: int) -> int:
        """CRC-32 of the first ``size`` bytes (cached: computed outside the timing)."""
        if size not in self._crcs:
            crc = 0
            for part in self.chunks(size):
                crc = zlib.crc32(part, crc)
            self._crcs[size] = crc
        return self._crcs[size]


class Checker:
    """The receiver's check of one body, chunk by chunk. Owner: the receiving task."""

    def __init__(self, pattern: Pattern, size: int, mode: str) -> None:
        self.block = pattern.block
        self.size = size
        self.crc_mode = mode == "crc32"
        self.expected_crc = pattern.crc(size) if self.crc_mode else 0
        self.got = 0
        self.crc = 0
        self.bad = ""

    def feed(self, chunk: bytes | bytearray | memoryview) -> None:
        n = len(chunk)
        if not n:
            return
        pos = self.got
        self.got = pos + n
        if self.crc_mode:
            self.crc = zlib.crc32(chunk, self.crc)
        elif not self.bad and (
            chunk[0] != self.block[pos % PERIOD] or chunk[-1] != self.block[(pos + n - 1) % PERIOD]
        ):
            self.bad = f"wrong bytes in the chunk at offset {pos}"

    def verdict(self) -> str:
        """The empty string if the body was right, else what was wrong."""
        if self.got != self.size:
            return f"received {self.got} bytes, expected {self.size}"
        if self.crc_mode and self.crc != self.expected_crc:
            return f"CRC-32 {self.crc:#x}, expected {self.expected_crc:#x}"
        return self.bad


def split(total: int, parts: int) -> list[int]:
    """``total`` bytes over ``parts`` streams (the first ones take the remainder)."""
    base, extra = divmod(total, parts)
    return [base + (i < extra) for i in range(parts)]


# ---------------------------------------------------------------- implementations


def parse_impl(spec: str) -> tuple[str, dict[str, Any]]:
    """``raw``, ``h2t``, ``h2t:KEY=VALUE:...`` or a preset -> (kind, config fields)."""
    kind, *items = spec.split(":")
    if kind in PRESETS:  # a preset, maybe with more fields
        kind, *items = PRESETS[kind].split(":") + items
    if kind not in ("raw", "h2t") or (kind == "raw" and items):
        raise ValueError(f"unknown implementation {spec!r}")
    fields = {f.name: f for f in dataclasses.fields(trio_h2t.TransportConfig)}
    options: dict[str, Any] = {}
    for item in items:
        key, _, value = item.partition("=")
        if key not in fields:
            raise ValueError(f"{key!r} is not a TransportConfig field")
        default = getattr(trio_h2t.TransportConfig(), key)
        if isinstance(default, bool):
            options[key] = value.lower() in ("1", "true", "yes", "on")
        else:
            options[key] = type(default)(value)
    trio_h2t.TransportConfig(**options)  # validate now, not in the middle of a run
    return kind, options


# ---------------------------------------------------------------- the server


class Server:
    """The child process: one listener per implementation. Owner: its trio run."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.pattern = Pattern(args.chunk)
        self.check = args.check
        self.chunk = args.chunk

    async def raw(self, sock: trio.SocketStream) -> None:
        async with sock:
            header = b""
            while len(header) < 16:
                more = await sock.receive_some(16 - len(header))
                if not more:
                    return
                header += more
            up, down = int.from_bytes(header[:8], "big"), int.from_bytes(header[8:], "big")
            checker = Checker(self.pattern, up, self.check)
            chunk = self.chunk

            async def receive() -> None:
                while checker.got < up:
                    data = await sock.receive_some(chunk)
                    if not data:
                        break
                    checker.feed(data)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(receive)
                for part in self.pattern.chunks(down):
                    await sock.send_all(part)
            await sock.send_all(b"\x01" if not checker.verdict() else b"\x00")

    async def h2t(self, stream: trio_h2t.H2Stream) -> None:
        headers = dict(stream.headers or ())
        up = int(headers[b"x-up"])
        down = int(headers[b"x-down"])
        checker = Checker(self.pattern, up, self.check)
        chunk = self.chunk

        async def receive() -> None:
            while True:
                data = await stream.receive_some(chunk)
                if not data:
                    break
                checker.feed(data)

        await stream.send_headers([(b":status", b"200")])
        async with trio.open_nursery() as nursery:
            nursery.start_soon(receive)
            for part in self.pattern.chunks(down):
                await stream.send_data(part)
        await stream.send_trailers([(b"x-verdict", checker.verdict().encode() or b"ok")])


async def serve_main(args: argparse.Namespace) -> None:
    """``--serve``: listeners on 127.0.0.1, their ports as one JSON line on stdout;
    ``cpu`` on stdin prints this process's CPU seconds; EOF stops it.

    Checkpoint: always. On cancellation: the listeners and connections close.
    """
    server = Server(args)
    ports: dict[str, int] = {}
    async with trio.open_nursery() as nursery:
        for spec in args.impl:
            kind, options = parse_impl(spec)
            if kind == "raw":
                listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
                nursery.start_soon(trio.serve_listeners, server.raw, listeners)
                ports[spec] = listeners[0].socket.getsockname()[1]
            else:
                config = trio_h2t.TransportConfig(**options)
                h2 = await nursery.start(
                    partial(trio_h2t.serve_tcp, server.h2t, 0, host="127.0.0.1", config=config)
                )
                ports[spec] = h2.port
        print(json.dumps(ports), flush=True)
        stdin = trio.lowlevel.FdStream(os.dup(sys.stdin.fileno()))
        async with stdin:
            buffered = b""
            while data := await stdin.receive_some():
                buffered += data
                while b"\n" in buffered:
                    _, buffered = buffered.split(b"\n", 1)
                    print(time.process_time(), flush=True)
        nursery.cancel_scope.cancel()


class ServerProcess:
    """``bulk.py --serve`` in a child process with the same options."""

    def __init__(self, args: argparse.Namespace) -> None:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--serve"]
        cmd += ["--chunk", str(args.chunk), "--check", args.check]
        for spec in args.impl:
            cmd += ["--impl", spec]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        try:
            self.ports: dict[str, int] = json.loads(line)
        except ValueError:
            self.close()
            raise RuntimeError(f"the bulk server did not start (it said {line!r})") from None

    def cpu(self) -> float:
        """The server's CPU seconds so far (a blocking round trip over the pipe)."""
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.proc.stdin.write("cpu\n")
        self.proc.stdin.flush()
        return float(self.proc.stdout.readline())

    def close(self) -> None:
        stop_server_process(self.proc)


# ---------------------------------------------------------------- the client


async def raw_client(port: int, up: int, down: int, pattern: Pattern, check: str) -> None:
    """One raw transfer. Checkpoint: always. On cancellation: the socket closes."""
    sock = await trio.open_tcp_stream("127.0.0.1", port)
    async with sock:
        await sock.send_all(up.to_bytes(8, "big") + down.to_bytes(8, "big"))
        checker = Checker(pattern, down, check)
        verdict = bytearray()
        chunk = pattern.chunk

        async def receive() -> None:
            while True:
                data = await sock.receive_some(chunk)
                if not data:
                    raise BulkError("the raw server closed before its verdict")
                left = down - checker.got
                if len(data) > left:  # the verdict byte follows the body
                    checker.feed(data[:left])
                    verdict.extend(data[left:])
                    return
                checker.feed(data)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(receive)
            for part in pattern.chunks(up):
                await sock.send_all(part)
    if checker.verdict() or bytes(verdict) != b"\x01":
        raise BulkError(f"raw: client {checker.verdict()!r}, server verdict {bytes(verdict)!r}")


async def h2t_client(
    port: int,
    config: trio_h2t.TransportConfig,
    sizes: Sequence[tuple[int, int]],
    pattern: Pattern,
    check: str,
) -> trio_h2t.ConnectionStatistics:
    """One trio_h2t transfer: one stream per (up, down) in ``sizes``, all at once.
    Returns the client connection's statistics at the end.

    Checkpoint: always. On cancellation: the connection closes.
    """
    async with trio_h2t.open_connection("127.0.0.1", port, config=config) as conn:

        async def one(up: int, down: int) -> None:
            headers = [
                *conn.request_headers("POST", "/bulk"),
                (b"x-up", str(up).encode()),
                (b"x-down", str(down).encode()),
            ]
            checker = Checker(pattern, down, check)
            chunk = pattern.chunk
            async with conn.open_stream(headers) as stream:

                async def send() -> None:
                    for part in pattern.chunks(up):
                        await stream.send_data(part)
                    await stream.end()

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(send)
                    await stream.receive_headers()
                    while True:
                        data = await stream.receive_some(chunk)
                        if not data:
                            break
                        checker.feed(data)
                trailers = dict(stream.trailers or ())
            if checker.verdict() or trailers.get(b"x-verdict") != b"ok":
                raise BulkError(f"h2t: client {checker.verdict()!r}, server {trailers!r}")

        async with trio.open_nursery() as nursery:
            for up, down in sizes:
                nursery.start_soon(one, up, down)
        return conn.statistics()


@dataclasses.dataclass
class Result:
    """One measurement."""

    impl: str
    streams: int
    size: int  # bytes each way (per direction that moves)
    moved: int  # payload bytes, both directions
    seconds: float
    client_cpu: float
    server_cpu: float
    #: frames the client wrote and read (h2t only; 0 for raw): control overhead
    frames_sent: int = 0
    frames_received: int = 0

    @property
    def mb_s(self) -> float:
        return self.size / self.seconds / 1e6

    def cpu_per_gb(self, cpu: float) -> float:
        return cpu / (self.moved / 1e9)


def measure(
    args: argparse.Namespace, server: ServerProcess, pattern: Pattern, spec: str, streams: int
) -> Result:
    size = args.size_bytes
    up = size if args.direction in ("both", "up") else 0
    down = size if args.direction in ("both", "down") else 0
    kind, options = parse_impl(spec)
    port = server.ports[spec]

    frames = [0, 0]

    async def transfer() -> None:
        with trio.fail_after(args.timeout):
            if kind == "raw":
                await raw_client(port, up, down, pattern, args.check)
            else:
                sizes = list(zip(split(up, streams), split(down, streams), strict=True))
                config = trio_h2t.TransportConfig(**options)
                st = await h2t_client(port, config, sizes, pattern, args.check)
                frames[:] = st.frames_sent, st.frames_received

    server_before = server.cpu()
    cpu_before = time.process_time()
    start = time.perf_counter()
    trio.run(transfer)
    seconds = time.perf_counter() - start
    client_cpu = time.process_time() - cpu_before
    server_cpu = server.cpu() - server_before
    return Result(spec, streams, size, up + down, seconds, client_cpu, server_cpu, *frames)


def configurations(args: argparse.Namespace) -> list[tuple[str, int]]:
    """(implementation, streams) pairs of one round; raw has no streams (1)."""
    out = []
    for spec in args.impl:
        if parse_impl(spec)[0] == "raw":
            out.append((spec, 1))
        else:
            out.extend((spec, s) for s in args.scenario)
    return out


def summarise(results: Sequence[Result], args: argparse.Namespace) -> str:
    level = args.level
    width = max([28, *(len(spec) + 1 for spec in args.impl)])
    lines = [
        f"bulk: {args.size} MiB each way ({args.direction}), chunk {args.chunk} B,"
        f" {args.rounds} round(s), check {args.check}; MB/s = 10^6 B/s per direction,"
        " CPU s/GB per process per 10^9 payload bytes moved; frames/MiB: frames the"
        " client wrote and read per MiB moved; ratios of medians"
        f" [{level:.0%} bootstrap]",
        f"{'impl':<{width}}{'streams':>8}{'MB/s':>10}{'CPU s/GB cli':>14}{'srv':>7}"
        f"{'frames/MiB':>12}  {'vs raw':<26}vs first h2t",
    ]
    raw_specs = [s for s in args.impl if parse_impl(s)[0] == "raw"]
    h2t_specs = [s for s in args.impl if parse_impl(s)[0] == "h2t"]

    def rates(spec: str, streams: int) -> list[float]:
        return [r.mb_s for r in results if r.impl == spec and r.streams == streams]

    def ratio(top: list[float], bottom: list[float]) -> str:
        if not top or not bottom:
            return "-"
        lo, hi = bootstrap_ratio(top, bottom, level=level)
        return f"{median(top) / median(bottom):.3f}x [{lo:.3f}, {hi:.3f}]"

    for spec, streams in configurations(args):
        mine = [r for r in results if r.impl == spec and r.streams == streams]
        if not mine:
            continue
        mb = [r.mb_s for r in mine]
        cli = median([r.cpu_per_gb(r.client_cpu) for r in mine])
        srv = median([r.cpu_per_gb(r.server_cpu) for r in mine])
        vs_raw = ratio(mb, rates(raw_specs[0], 1)) if raw_specs and spec not in raw_specs else ""
        vs_first = ""
        if spec in h2t_specs and spec != h2t_specs[0]:
            vs_first = ratio(mb, rates(h2t_specs[0], streams))
        frames = median([(r.frames_sent + r.frames_received) / (r.moved / MIB) for r in mine])
        lines.append(
            f"{spec:<{width}}{streams:>8}{median(mb):>10,.0f}{cli:>14.2f}{srv:>7.2f}{frames:>12.1f}"
            f"  {vs_raw:<26}{vs_first}"
        )
    return "\n".join(lines)


def record_rows(
    results: Sequence[Result], args: argparse.Namespace, tree: str
) -> list[dict[str, Any]]:
    """``--record``'s rows (benchmarks/results.json, block ``bulk``): the first raw
    run's medians (``impl`` ``raw``, one connection), then per stream count the first
    trio_h2t variant's (``impl`` ``h2t``), each against the raw run's MB/s."""
    raw_specs = [s for s in args.impl if parse_impl(s)[0] == "raw"]
    h2t_specs = [s for s in args.impl if parse_impl(s)[0] == "h2t"]
    raw = [r for r in results if raw_specs and r.impl == raw_specs[0] and r.streams == 1]
    raw_mb_s = median([r.mb_s for r in raw]) if raw else math.nan

    def row(impl: str, streams: int, mine: list[Result]) -> dict[str, Any]:
        frames = [(r.frames_sent + r.frames_received) / (r.moved / MIB) for r in mine]
        return {
            "tree": tree,
            "impl": impl,
            "streams": streams,
            "client_cpu_s_per_gb": round(median([r.cpu_per_gb(r.client_cpu) for r in mine]), 2),
            "server_cpu_s_per_gb": round(median([r.cpu_per_gb(r.server_cpu) for r in mine]), 2),
            "frames_per_mib": round(median(frames), 1),
            "mb_s": round(median([r.mb_s for r in mine])),
            "vs_raw": round(median([r.mb_s for r in mine]) / raw_mb_s, 3),
        }

    rows = [row("raw", 1, raw)] if raw else []
    if h2t_specs:
        for streams in sorted({r.streams for r in results if r.impl == h2t_specs[0]}):
            mine = [r for r in results if r.impl == h2t_specs[0] and r.streams == streams]
            rows.append(row("h2t", streams, mine))
    return rows


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", type=float, default=256.0, help="MiB each way (default 256)")
    p.add_argument("--chunk", type=int, default=64 * 1024, help="bytes per write/read (64 KiB)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument(
        "--impl",
        action="append",
        default=None,
        help="raw, h2t, h2t:KEY=VALUE[:KEY=VALUE...], h2t-16m[:...] (repeatable; raw and h2t)",
    )
    p.add_argument(
        "--scenario",
        action="append",
        type=int,
        default=None,
        help="concurrent streams of an h2t transfer (repeatable; default 1 and 8)",
    )
    p.add_argument("--direction", choices=("both", "down", "up"), default="both")
    p.add_argument("--check", choices=("sample", "crc32"), default="sample")
    p.add_argument("--level", type=float, default=0.95, help="bootstrap interval level")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per transfer")
    p.add_argument("--json", type=Path, help="write every result to this file")
    p.add_argument("--quiet", action="store_true", help="no line per measurement")
    record.add_record_option(p)
    p.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    args.impl = args.impl or ["raw", "h2t"]
    args.scenario = args.scenario or [1, 8]
    for spec in args.impl:
        parse_impl(spec)
    if args.serve:
        trio.run(serve_main, args)
        return 0
    args.size_bytes = int(args.size * MIB)
    if args.size_bytes < 1 or args.chunk < 1 or args.rounds < 1:
        raise SystemExit("--size, --chunk and --rounds must be positive")
    pattern = Pattern(args.chunk)
    if args.check == "crc32":
        for streams in {1, *args.scenario}:
            for part in set(split(args.size_bytes, streams)):
                pattern.crc(part)  # computed before any timing
    started = record.begin()
    server = ServerProcess(args)
    results: list[Result] = []
    try:
        configs = configurations(args)
        for round_no in range(args.rounds):
            for spec, streams in configs if round_no % 2 == 0 else configs[::-1]:
                r = measure(args, server, pattern, spec, streams)
                results.append(r)
                if not args.quiet:
                    print(
                        f"round {round_no + 1} {spec} x{streams}: {r.mb_s:,.0f} MB/s,"
                        f" {r.seconds:.2f} s, CPU client {r.client_cpu:.2f} s"
                        f" server {r.server_cpu:.2f} s",
                        file=sys.stderr,
                        flush=True,
                    )
    finally:
        server.close()
    print(summarise(results, args))
    if args.json:
        records = [
            dict(dataclasses.asdict(r), mb_s=r.mb_s, direction=args.direction, chunk=args.chunk)
            for r in results
        ]
        args.json.write_text(json.dumps(records, indent=1))
    if args.record:
        path = record.record(
            args.record,
            "bulk",
            record_rows(results, args, started["commit"]),
            started,
            merge_on="tree",
        )
        print(f"recorded: {path} (block bulk, tree {started['commit']})")
    return 0 if all(math.isfinite(r.mb_s) for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
