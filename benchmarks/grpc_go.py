"""grpc-go beside trio_h2t.grpc: the same benchmark service, side by side in one run.

grpc-go's own benchmark commands (``grpc-go-bench-server`` and ``grpc-go-bench-client``,
from grpc-go's ``benchmark/server`` and ``benchmark/client``; built by
``../shared/tools/build-conformance-tools.sh``) serve and call
``grpc.testing.BenchmarkService``. This script serves and calls the same service with
trio_h2t.grpc: ``benchmark.proto``, written here from the field list of grpc-go's
``benchmark/grpc_testing/messages.proto`` and ``services.proto`` (package, service,
message and field names and numbers as published, only the messages the two methods
use), compiled with grpc_tools into a temporary directory at run time. So every client
can call every server, and four pairs run:

- ``go/go``: grpc-go client -> grpc-go server, the reference;
- ``go/trio``: grpc-go client -> trio_h2t.grpc server (the server's cost);
- ``trio/go``: trio_h2t.grpc client -> grpc-go server (the client's cost);
- ``trio/trio``: trio_h2t.grpc client -> trio_h2t.grpc server.

Workloads (``WORKLOADS``): ``unary``, 100 concurrent unary calls of 0-byte payloads,
``streaming``, 100 ping-pong streams of 100-byte payloads, and ``unary_1mib``, 10
concurrent unary calls of 1 MiB each way, each over one TCP connection on 127.0.0.1.
A request is grpc-go's: ``SimpleRequest`` with
``response_type`` COMPRESSABLE, ``response_size`` and a ``payload`` of the request
size; the servers answer a ``SimpleResponse`` with a payload of ``response_size``
zero bytes (what grpc-go's server does).

A run is ``--rounds`` rounds; each round runs every workload on every pair, in an
order rotated round by round, each run a fresh server and client process. Both
clients warm up ``--warmup`` seconds then measure ``--duration`` seconds and print
grpc-go's client lines (``qps: N``, ``Latency: (50/90/99 %ile): ...``); the trio_h2t
client also prints ``START`` and ``END`` at the window's edges. The runner reads each
process's CPU time (``/proc/PID/stat``) at the window's start (the ``START`` line, or
the grpc-go client's start + warmup) and at its end (the ``END`` line; for the grpc-go
client, its exit, with its ``wait4`` resource usage: that includes writing its CPU and
heap profiles, a few ms, and its CPU profiler runs all along), so CPU per call is
over the window.

Printed per workload and pair: medians over the rounds of QPS, p50/p99 (as the client
reports them), server and client CPU µs per call; then each pair against ``go/go``:
the ratio of medians with a 95 % percentile-bootstrap interval (``stats.py``) of QPS,
server CPU per call and client CPU per call. On a shared machine CPU per call is the
steadier figure; the load average at the start and end is printed beside them.

Run: ``.venv/bin/python benchmarks/grpc_go.py`` (5 rounds, 3 s windows: ~3 min),
``--quick`` (2 rounds, 1 s windows), ``--pair go/trio --workload unary``,
``--json FILE``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

if not __package__:  # run as a script: benchmarks/_bootstrap.py registers the package
    importlib.import_module("_bootstrap")

from benchmarks._backends import child_env, start_port_printer
from benchmarks.stats import bootstrap_ratio, median, percentile

GO_SERVER = "grpc-go-bench-server"
GO_CLIENT = "grpc-go-bench-client"
BUILD_SCRIPT = "../shared/tools/build-conformance-tools.sh"
SERVICE = "grpc.testing.BenchmarkService"
PAIRS = ("go/go", "go/trio", "trio/go", "trio/trio")
REFERENCE = "go/go"
PROTO_NAME = "benchmark.proto"
#: name -> (grpc-go's -rpc_type, concurrent calls or streams, request and response bytes)
WORKLOADS: dict[str, tuple[str, int, int]] = {
    "unary": ("unary", 100, 0),
    "streaming": ("streaming", 100, 100),
    "unary_1mib": ("unary", 10, 1 << 20),
}

#: grpc.testing's messages, as grpc-go's benchmark/grpc_testing publishes them (the
#: fields the two methods use) and its BenchmarkService.
PROTO = """\
syntax = "proto3";

package grpc.testing;

enum PayloadType {
  COMPRESSABLE = 0;
  UNCOMPRESSABLE = 1;
  RANDOM = 2;
}

message Payload {
  PayloadType type = 1;
  bytes body = 2;
}

message EchoStatus {
  int32 code = 1;
  string message = 2;
}

message SimpleRequest {
  PayloadType response_type = 1;
  int32 response_size = 2;
  Payload payload = 3;
  bool fill_username = 4;
  bool fill_oauth_scope = 5;
  EchoStatus response_status = 7;
}

message SimpleResponse {
  Payload payload = 1;
  string username = 2;
  string oauth_scope = 3;
}

service BenchmarkService {
  rpc UnaryCall(SimpleRequest) returns (SimpleResponse);
  rpc StreamingCall(stream SimpleRequest) returns (stream SimpleResponse);
}
"""


# ---------------------------------------------------------------- generated code


def compile_proto(out: Path) -> None:
    """Write ``benchmark.proto`` into ``out`` and compile it there (``benchmark_pb2``)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / PROTO_NAME).write_text(PROTO)
    subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", f"-I{out}", f"--python_out={out}", PROTO_NAME],
        check=True,
    )


def load_pb2(gen: str) -> Any:
    if gen not in sys.path:
        sys.path.insert(0, gen)
    return importlib.import_module("benchmark_pb2")


# ---------------------------------------------------------------- trio_h2t roles


def mark(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def trio_server(args: argparse.Namespace) -> None:
    """Serve BenchmarkService on 127.0.0.1 until stdin ends; print ``PORT N`` first."""
    import trio

    import trio_h2t
    from trio_h2t import grpc as tg

    pb2 = load_pb2(args.gen)
    ser, deser = pb2.SimpleResponse.SerializeToString, pb2.SimpleRequest.FromString

    def answer(request: Any) -> Any:
        body = bytes(request.response_size)
        return pb2.SimpleResponse(payload=pb2.Payload(type=request.response_type, body=body))

    async def unary_call(request: Any, context: tg.ServicerContext) -> Any:
        return answer(request)

    async def streaming_call(requests: AsyncIterator[Any], context: tg.ServicerContext) -> None:
        async for request in requests:
            await context.write(answer(request))

    handlers = tg.method_handlers_generic_handler(
        SERVICE,
        {
            "UnaryCall": tg.unary_unary_handler(
                unary_call, request_deserializer=deser, response_serializer=ser
            ),
            "StreamingCall": tg.stream_stream_handler(
                streaming_call, request_deserializer=deser, response_serializer=ser
            ),
        },
    )
    config = trio_h2t.TransportConfig(max_concurrent_streams=args.concurrency + 1)
    async with trio_h2t.open_server(
        tg.Server([handlers]), 0, host="127.0.0.1", config=config
    ) as server:
        mark(f"PORT {server.port}")
        stdin = trio.lowlevel.FdStream(os.dup(0))
        while await stdin.receive_some(1024):
            pass
        await stdin.aclose()


async def trio_client(args: argparse.Namespace) -> None:
    """grpc-go's client loop over trio_h2t.grpc: ``concurrency`` workers calling back
    to back; print ``START`` at the window's start and grpc-go's result lines at its end."""
    import trio

    from trio_h2t import grpc as tg

    pb2 = load_pb2(args.gen)
    request = pb2.SimpleRequest(
        response_type=pb2.COMPRESSABLE,
        response_size=args.resp,
        payload=pb2.Payload(type=pb2.COMPRESSABLE, body=bytes(args.req)),
    )
    ser, deser = pb2.SimpleRequest.SerializeToString, pb2.SimpleResponse.FromString
    latencies: list[float] = []
    bad = [0]
    window = [math.inf, math.inf]  # start, end (perf_counter)

    def record(started: float, response: Any) -> None:
        if len(response.payload.body) != args.resp:
            bad[0] += 1
        if started >= window[0]:
            latencies.append(time.perf_counter() - started)

    async with tg.open_channel("127.0.0.1", args.port) as channel:
        unary = channel.unary_unary(
            f"/{SERVICE}/UnaryCall", request_serializer=ser, response_deserializer=deser
        )
        streaming = channel.stream_stream(
            f"/{SERVICE}/StreamingCall", request_serializer=ser, response_deserializer=deser
        )

        async def unary_worker() -> None:
            while (started := time.perf_counter()) < window[1]:
                record(started, await unary(request))

        async def streaming_worker() -> None:
            async with streaming.open() as call:
                while (started := time.perf_counter()) < window[1]:
                    await call.send_message(request)
                    record(started, await call.receive_message())
                await call.done_writing()
                async for _ in call:
                    pass

        worker = unary_worker if args.rpc_type == "unary" else streaming_worker
        async with trio.open_nursery() as nursery:
            now = time.perf_counter()
            window[:] = [now + args.warmup, now + args.warmup + args.duration]
            for _ in range(args.concurrency):
                nursery.start_soon(worker)
            await trio.sleep_until(trio.current_time() + args.warmup)
            mark("START")
            await trio.sleep(args.duration)
            mark("END")
    if bad[0]:
        raise SystemExit(f"{bad[0]} responses had the wrong payload size")
    ordered = sorted(latencies)
    p50, p90, p99 = (percentile(ordered, p) * 1e3 for p in (50, 90, 99))
    mark(f"qps: {len(ordered) / args.duration:.0f}")
    mark(f"Latency: (50/90/99 %ile): {p50:.6f}ms/{p90:.6f}ms/{p99:.6f}ms")


# ---------------------------------------------------------------- runner


def missing_tools(pairs: list[str]) -> list[str]:
    needed = set()
    for pair in pairs:
        client, server = pair.split("/")
        if client == "go":
            needed.add(GO_CLIENT)
        if server == "go":
            needed.add(GO_SERVER)
    return sorted(tool for tool in needed if shutil.which(tool) is None)


def proc_cpu(pid: int) -> float:
    """utime + stime of a live process, in seconds (``/proc/PID/stat``)."""
    with open(f"/proc/{pid}/stat") as file:
        fields = file.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def go_duration(text: str) -> float:
    """A Go ``time.Duration`` string (``5.5ms``, ``950µs``, ``1.2s``) in milliseconds."""
    match = re.fullmatch(r"([0-9.]+)(ns|us|µs|μs|ms|s)", text.strip())
    if match is None:
        raise ValueError(f"not a Go duration: {text!r}")
    scale = {"ns": 1e-6, "us": 1e-3, "µs": 1e-3, "μs": 1e-3, "ms": 1.0, "s": 1e3}
    return float(match[1]) * scale[match[2]]


def parse_client(output: str) -> dict[str, float]:
    """QPS and p50/p90/p99 (ms) from grpc-go's client lines (both clients print them)."""
    qps = re.search(r"^qps: ([0-9.]+)", output, re.M)
    latency = re.search(r"^Latency: \(50/90/99 %ile\): (\S+)/(\S+)/(\S+)", output, re.M)
    if qps is None or latency is None:
        raise RuntimeError(f"no result in the client's output:\n{output}")
    p50, p90, p99 = (go_duration(latency[i]) for i in (1, 2, 3))
    return {"qps": float(qps[1]), "p50_ms": p50, "p90_ms": p90, "p99_ms": p99}


def one_run(
    pair: str, workload: str, args: argparse.Namespace, gen: Path, scratch: Path
) -> dict[str, Any]:
    """One server process and one client process; the figures of the client's window."""
    client_kind, server_kind = pair.split("/")
    rpc_type, concurrency, size = WORKLOADS[workload]
    me = [sys.executable, str(Path(__file__).resolve())]
    server: subprocess.Popen[str]
    if server_kind == "go":
        port = free_port()
        server = subprocess.Popen(
            [GO_SERVER, "-port", str(port), "-test_name", f"{scratch.name}-server"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            text=True,
            cwd=scratch,
        )
        deadline = time.monotonic() + 10
        while True:  # listening yet?
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    server.kill()
                    raise RuntimeError(f"{GO_SERVER} did not listen on {port}") from None
                time.sleep(0.02)
    else:
        server, port = start_port_printer(
            [*me, "serve", "--gen", str(gen), "--concurrency", str(concurrency)]
        )
    try:
        common = ["-r", str(concurrency), "-req", str(size), "-resp", str(size)]
        common += ["-rpc_type", rpc_type, "-port", str(port)]
        common += ["-w", str(args.warmup), "-d", str(args.duration)]
        if client_kind == "go":
            cmd = [GO_CLIENT, *common, "-c", "1", "-test_name", f"{scratch.name}-client"]
        else:
            cmd = [*me, "client", "--gen", str(gen), *common]
        started = time.monotonic()
        client = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, text=True, env=child_env(), cwd=scratch
        )
        assert client.stdout is not None
        lines: list[str] = []

        def read_until(word: str) -> None:
            assert client.stdout is not None
            while (line_ := client.stdout.readline()) and line_.strip() != word:
                lines.append(line_)

        if client_kind == "go":  # its window starts `-w` seconds after it connects
            time.sleep(max(0.0, started + args.warmup - time.monotonic()))
        else:
            read_until("START")
        client_cpu0, server_cpu0 = proc_cpu(client.pid), proc_cpu(server.pid)
        if client_kind == "trio":
            read_until("END")
            client_cpu1, server_cpu1 = proc_cpu(client.pid), proc_cpu(server.pid)
        output = "".join(lines) + client.stdout.read()
        _, status, usage = os.wait4(client.pid, 0)
        if client_kind == "go":  # up to its exit (its profiles written: a few ms)
            client_cpu1, server_cpu1 = usage.ru_utime + usage.ru_stime, proc_cpu(server.pid)
        client.returncode = os.waitstatus_to_exitcode(status)
        if client.returncode != 0:
            raise RuntimeError(f"{pair} {workload}: the client exited {client.returncode}")
    finally:
        if server_kind == "go":
            server.terminate()
        elif server.stdin is not None:
            server.stdin.close()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    result: dict[str, Any] = {"pair": pair, "workload": workload} | parse_client(output)
    calls = result["qps"] * args.duration
    client_cpu = client_cpu1 - client_cpu0
    result["calls"] = calls
    result["server_cpu_us"] = (server_cpu1 - server_cpu0) / calls * 1e6 if calls else math.nan
    result["client_cpu_us"] = client_cpu / calls * 1e6 if calls else math.nan
    return result


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def summarise(results: list[dict[str, Any]], workloads: list[str], pairs: list[str]) -> list[str]:
    """The table: medians per pair, then each pair's ratios to the reference with intervals."""
    lines: list[str] = []
    figures = ("qps", "server_cpu_us", "client_cpu_us")
    for workload in workloads:
        rpc_type, concurrency, size = WORKLOADS[workload]
        lines.append(f"\n{workload}: {rpc_type}, {concurrency} in flight, {size} B, one connection")
        lines.append(
            f"  {'client/server':<14}{'QPS':>9}{'p50 ms':>9}{'p99 ms':>9}"
            f"{'srv µs/call':>13}{'cli µs/call':>13}"
        )
        runs = {
            p: [r for r in results if r["pair"] == p and r["workload"] == workload] for p in pairs
        }
        for pair in pairs:
            med = {k: median([r[k] for r in runs[pair]]) for k in (*figures, "p50_ms", "p99_ms")}
            lines.append(
                f"  {pair:<14}{med['qps']:>9.0f}{med['p50_ms']:>9.2f}{med['p99_ms']:>9.2f}"
                f"{med['server_cpu_us']:>13.1f}{med['client_cpu_us']:>13.1f}"
            )
        if REFERENCE not in pairs:
            continue
        lines.append(f"  against {REFERENCE}: ratio of medians [95 % bootstrap interval]")
        for pair in pairs:
            if pair == REFERENCE:
                continue
            cells = []
            for key, label in zip(
                figures, ("QPS", "server CPU/call", "client CPU/call"), strict=True
            ):
                top = [r[key] for r in runs[pair]]
                bottom = [r[key] for r in runs[REFERENCE]]
                lo, hi = bootstrap_ratio(top, bottom, level=0.95)
                ratio = median(top) / median(bottom) if top and bottom else math.nan
                cells.append(f"{label} {ratio:.2f} [{lo:.2f}, {hi:.2f}]")
            lines.append(f"  {pair:<14}" + "; ".join(cells))
    return lines


def run(args: argparse.Namespace) -> int:
    pairs = args.pair or list(PAIRS)
    workloads = args.workload or list(WORKLOADS)
    missing = missing_tools(pairs)
    if missing:
        sys.stderr.write(
            f"grpc_go.py: {', '.join(missing)} not on PATH: build grpc-go's benchmark "
            f"commands with {BUILD_SCRIPT} (or pick pairs without them: --pair trio/trio)\n"
        )
        return 2
    results: list[dict[str, Any]] = []
    load_start = loadavg()
    print(f"load average at start: {load_start}; {os.cpu_count()} CPUs", flush=True)
    with tempfile.TemporaryDirectory(prefix="grpc-go-bench-") as tmp:
        gen, scratch = Path(tmp) / "gen", Path(tmp)
        compile_proto(gen)
        order = [(w, p) for w in workloads for p in pairs]
        try:
            for round_ in range(args.rounds):
                shift = round_ % len(order)
                for workload, pair in order[shift:] + order[:shift]:
                    result = one_run(pair, workload, args, gen, scratch) | {"round": round_}
                    results.append(result)
                    print(
                        f"round {round_ + 1} {workload:<10} {pair:<9} QPS {result['qps']:8.0f}  "
                        f"p50 {result['p50_ms']:6.2f} ms  p99 {result['p99_ms']:6.2f} ms  "
                        f"server {result['server_cpu_us']:6.1f} µs/call  "
                        f"client {result['client_cpu_us']:6.1f} µs/call",
                        flush=True,
                    )
        finally:  # grpc-go's commands write their profiles to /tmp/<test_name>.{cpu,mem}
            for suffix in ("server.cpu", "server.mem", "client.cpu", "client.mem"):
                Path(f"/tmp/{scratch.name}-{suffix}").unlink(missing_ok=True)
    load_end = loadavg()
    for line in summarise(results, workloads, pairs):
        print(line)
    print(f"\nload average at start {load_start}, at end {load_end}")
    if args.json:
        meta = {"load_start": load_start, "load_end": load_end, "rounds": args.rounds}
        meta |= {"duration": args.duration, "warmup": args.warmup}
        Path(args.json).write_text(json.dumps({"meta": meta, "runs": results}, indent=1))
    return 0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="role")
    serve = sub.add_parser("serve", help="(internal) the trio_h2t.grpc server")
    serve.add_argument("--gen", required=True)
    serve.add_argument("--concurrency", type=int, default=100)
    client = sub.add_parser("client", help="(internal) the trio_h2t.grpc client")
    client.add_argument("--gen", required=True)
    client.add_argument("-port", "--port", type=int, required=True)
    client.add_argument("-rpc_type", "--rpc-type", choices=("unary", "streaming"), default="unary")
    client.add_argument("-r", dest="concurrency", type=int, default=100)
    client.add_argument("-req", "--req", type=int, default=0)
    client.add_argument("-resp", "--resp", type=int, default=0)
    client.add_argument("-w", dest="warmup", type=float, default=1.0)
    client.add_argument("-d", dest="duration", type=float, default=3.0)
    parser.add_argument("--pair", action="append", choices=PAIRS, help="client/server (repeatable)")
    parser.add_argument("--workload", action="append", choices=tuple(WORKLOADS))
    parser.add_argument("--rounds", type=int, help="rounds (5; --quick: 2)")
    parser.add_argument("--duration", type=int, help="seconds measured, whole (3; --quick: 1)")
    parser.add_argument("--warmup", type=int, help="seconds of warm-up, whole (1)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 2 rounds of 1 s")
    parser.add_argument("--json", help="write every run and the load average here")
    args = parser.parse_args(argv)
    if args.role is None:
        for name, default, quick in (("rounds", 5, 2), ("duration", 3, 1), ("warmup", 1, 1)):
            if getattr(args, name) is None:
                setattr(args, name, quick if args.quick else default)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.role in ("serve", "client"):
        import trio

        trio.run(trio_server if args.role == "serve" else trio_client, args)
        return 0
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
