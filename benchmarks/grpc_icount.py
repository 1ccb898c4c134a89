"""trio_h2t.grpc's cost per call against hand-written gRPC framing, in instructions.

Runs ``icount.py``'s measurement (callgrind, ``--rpcs`` and five times as many
operations, the difference per operation) for the gRPC layer's workloads and the
hand-framed ones that put the same bytes on the wire (``workloads.py``):

==========================  ================  =====================================
layer (trio_h2t.grpc)       floor (by hand)   operation
==========================  ================  =====================================
``grpc-layer-unary``        ``grpc-unary``    one unary call, a stream each
``grpc-layer-streaming``    ``streaming``     one ping-pong message pair on a stream
==========================  ================  =====================================

and prints instructions per operation (both sides, one process, memory network),
and each layer workload's ratio to its floor. ``--concurrency`` may be given more
than once (``--concurrency 100 --concurrency 1000``: the scaling check).

``--objects`` measures memory instead: the objects the cyclic GC tracks
(``gc.get_objects()``) with N unary calls in flight, every handler parked (the
request read, no response yet), for N = 100 and 1000; the difference divided by
900 is what one more call in flight keeps alive, both sides together. No valgrind.

Run: ``.venv/bin/python benchmarks/grpc_icount.py`` (4 workloads, two callgrind
runs each, ``--jobs`` at a time; minutes, more on a loaded machine), ``--objects``
(seconds). ``--record`` writes the table (floor, layer, ratio per pair) with commit,
date and command into ``benchmarks/results.json``, block ``grpc_icount``, which
``benchmarks/plot_results.py`` draws (``benchmarks/record.py``).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import logging
import subprocess
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

if not __package__:  # run as a script: benchmarks/_bootstrap.py registers the package
    importlib.import_module("_bootstrap")

import trio
import trio.testing

import trio_h2t
from benchmarks import icount, record
from benchmarks.workloads import (
    GRPC_OK,
    GRPC_REQUEST_HEADERS,
    GRPC_RESPONSE_HEADERS,
    grpc_message,
    receive_message,
)
from trio_h2t import grpc

#: (layer workload, its hand-framed floor).
PAIRS = (("grpc-layer-unary", "grpc-unary"), ("grpc-layer-streaming", "streaming"))
PATH = "/bench.Bench/UnaryCall"


def measure(
    workloads: list[str], concurrencies: list[int], rpcs: int, jobs: int
) -> dict[tuple[str, int], float]:
    """Count every (workload, concurrency) under callgrind, print the table, and
    return instructions per operation by (workload, concurrency)."""
    runs = [(w, c, n) for c in concurrencies for w in workloads for n in (rpcs, 5 * rpcs)]
    with ThreadPoolExecutor(jobs) as pool:
        counts = list(pool.map(lambda r: icount.count(r[0], r[2], r[1], "0", False), runs))
    per_op: dict[tuple[str, int], float] = {}
    for i in range(0, len(runs), 2):
        workload, conc, _ = runs[i]
        per_op[workload, conc] = (counts[i + 1] - counts[i]) / (4 * rpcs)
    print(f"instructions per operation (both sides; callgrind, {rpcs} vs {5 * rpcs} operations)")
    for conc in concurrencies:
        for layer, floor in PAIRS:
            if (layer, conc) not in per_op:
                continue
            mine = per_op[layer, conc]
            line = f"  c={conc:<5} {layer:<22} {mine:>10,.0f}"
            if (floor, conc) in per_op:
                base = per_op[floor, conc]
                line += f"   {floor:<11} {base:>10,.0f}   layer/floor {mine / base:.3f}"
            print(line)
    if len(concurrencies) > 1:
        low, high = min(concurrencies), max(concurrencies)
        for workload in workloads:
            if (workload, low) in per_op and (workload, high) in per_op:
                ratio = per_op[workload, high] / per_op[workload, low]
                print(f"  {workload}: c={high} / c={low} = {ratio:.3f}")
    return per_op


#: How the plot and benchmarks/results.json name each pair's operation.
OPERATION = {"grpc-layer-unary": "unary", "grpc-layer-streaming": "ping-pong message pair"}


def record_rows(per_op: dict[tuple[str, int], float], rpcs: int) -> list[dict[str, Any]]:
    """``--record``'s rows (benchmarks/results.json, block ``grpc_icount``): per
    concurrency and pair measured both ways, the floor's and the layer's instructions
    per operation and their ratio."""
    rows: list[dict[str, Any]] = []
    for (layer, conc), mine in sorted(per_op.items(), key=lambda kv: kv[0][1]):
        floor = dict(PAIRS).get(layer)
        if floor is None or (floor, conc) not in per_op:
            continue
        base = per_op[floor, conc]
        rows.append(
            {
                "workload": f"{OPERATION[layer]}, c={conc} ({rpcs} vs {5 * rpcs})",
                "layer_workload": layer,
                "floor_workload": floor,
                "concurrency": conc,
                "floor": round(base),
                "layer": round(mine),
                "ratio": round(mine / base, 3),
            }
        )
    return rows


# -- objects per call in flight -------------------------------------------------


async def _in_flight(n: int, layer: bool) -> int:
    """Objects the GC tracks with ``n`` unary calls in flight, every handler parked.

    Checkpoint: always.
    """
    release = trio.Event()
    parked = 0

    async def echo(request: bytes, context: grpc.ServicerContext) -> bytes:
        nonlocal parked
        parked += 1
        await release.wait()
        return request

    server = grpc.Server([{PATH: grpc.unary_unary_handler(echo)}])

    async def by_hand(stream: trio_h2t.H2Stream) -> None:
        nonlocal parked
        await receive_message(stream, 0)
        parked += 1
        await release.wait()
        await stream.send_headers(GRPC_RESPONSE_HEADERS)
        await stream.send_data(grpc_message(0))
        await stream.send_trailers(GRPC_OK)

    handler: Callable[[trio_h2t.H2Stream], Awaitable[None]] = server if layer else by_hand
    client_side, server_side = trio.testing.memory_stream_pair()
    config = trio_h2t.TransportConfig(max_concurrent_streams=n + 1)
    async with trio.open_nursery() as nursery:
        await nursery.start(
            lambda task_status: trio_h2t.serve_connection(
                server_side, handler, config=config, task_status=task_status
            )
        )
        async with trio_h2t.open_client_connection(client_side) as conn:
            channel = grpc.Channel(conn)
            call = channel.unary_unary(PATH)
            headers = conn.request_headers("POST", PATH, GRPC_REQUEST_HEADERS)
            request = grpc_message(0)

            async def client() -> None:
                if layer:
                    await call(b"")
                    return
                async with conn.open_stream(headers) as stream:
                    await stream.send_data(request, end_stream=True)
                    await stream.receive_headers()
                    await receive_message(stream, 0)
                    await stream.receive_trailers()

            async with trio.open_nursery() as workers:
                # One call first, so that whatever is built once is built before.
                workers.start_soon(client)
                await trio.testing.wait_all_tasks_blocked()
                for _ in range(n - 1):
                    workers.start_soon(client)
                while parked < n:
                    await trio.testing.wait_all_tasks_blocked()
                await trio.testing.wait_all_tasks_blocked()
                gc.collect()
                found = len(gc.get_objects())
                release.set()
        nursery.cancel_scope.cancel()
    return found


async def _objects() -> None:
    """Print objects per call in flight, layer and by hand. Checkpoint: always."""
    for layer in (False, True):
        small = await _in_flight(100, layer)
        large = await _in_flight(1000, layer)
        what = "trio_h2t.grpc unary" if layer else "hand-framed grpc-unary"
        print(
            f"  {what:<24} {(large - small) / 900:6.1f} GC-tracked objects per call in flight "
            f"(both sides; {small:,} at 100, {large:,} at 1000)"
        )


def main() -> None:
    logging.getLogger("hpack").setLevel(logging.WARNING)  # icount.py's reason
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rpcs", type=int, default=500, help="operations in the small run")
    parser.add_argument(
        "--concurrency", type=int, action="append", help="(repeatable; default 100)"
    )
    parser.add_argument(
        "--workload",
        action="append",
        choices=[w for pair in PAIRS for w in pair],
        help="(repeatable; default: all four)",
    )
    parser.add_argument("--jobs", type=int, default=2, help="callgrind runs at a time")
    parser.add_argument("--objects", action="store_true", help="objects per call in flight")
    record.add_record_option(parser)
    args = parser.parse_args()
    if args.objects:
        trio.run(_objects)
        return
    if subprocess.run(["valgrind", "--version"], capture_output=True).returncode:
        raise SystemExit("grpc_icount: valgrind is needed (Debian's valgrind package)")
    workloads = args.workload or [w for pair in PAIRS for w in pair]
    started = record.begin()
    per_op = measure(workloads, args.concurrency or [100], args.rpcs, args.jobs)
    if args.record:
        rows = record_rows(per_op, args.rpcs)
        if not rows:
            raise SystemExit("grpc_icount: --record needs a layer workload and its floor")
        unit = "instructions per operation (callgrind, both sides in one process)"
        path = record.record(args.record, "grpc_icount", rows, started, unit=unit)
        print(f"recorded: {path} (block grpc_icount, tree {started['commit']})")


if __name__ == "__main__":
    main()
