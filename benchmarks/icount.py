"""Instructions per operation, counted by callgrind: figures the machine's load cannot move.

On a shared machine QPS and even CPU time per RPC move by 10-20 % from run to run
(other tenants, CPU steal). ``valgrind --tool=callgrind`` counts the instructions a
program executes instead, which other tenants do not change. It is not exactly
repeatable: hash randomisation, the garbage collector's timing and the order in which
trio's scheduler runs tasks make two runs of the same code differ by about 0.1 %
(seen in this repository's A/B runs), so compare differences well above that.

This script runs a fixed number of operations of one workload
(``workloads.py``; ``unary`` by default, 0-byte bodies) between a trio_h2t client and
server over the memory network in one process, twice under callgrind (``--rpcs`` and
``--rpcs`` x 5), and prints the difference per operation, which leaves out start-up,
imports and the connection handshake. Use it to compare two versions of the code,
A/B, on one machine (``run.py --icount`` does, side by side).

Run: ``.venv/bin/python benchmarks/icount.py`` (about 1-2 minutes; needs valgrind,
Debian's ``valgrind`` package). ``--child N`` is the inner run itself.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import logging
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

if not __package__:  # run as a script: benchmarks/_bootstrap.py registers the package
    importlib.import_module("_bootstrap")

import trio
import trio.testing

import trio_h2t
from benchmarks.workloads import WORKLOADS, Recorder, Workload, make_workload


async def run_rpcs(workload: Workload, total: int, concurrency: int) -> None:
    """``total`` operations of ``workload`` over the memory network. Checkpoint: always."""
    client_side, server_side = trio.testing.memory_stream_pair()
    rec = Recorder()
    rec.budget = total

    async def serve(*, task_status: trio.TaskStatus[object] = trio.TASK_STATUS_IGNORED) -> None:
        # MAX_CONCURRENT_STREAMS = concurrency + 1, as benchmain's server (grpc-go's rule).
        config = trio_h2t.TransportConfig(max_concurrent_streams=concurrency + 1)
        await trio_h2t.serve_connection(
            server_side, workload.serve, config=config, task_status=task_status
        )

    async with trio.open_nursery() as nursery:
        await nursery.start(serve)
        async with (
            trio_h2t.open_client_connection(client_side) as conn,
            trio.open_nursery() as workers,
        ):
            for _ in range(concurrency):
                workers.start_soon(workload.client, conn, rec)
        nursery.cancel_scope.cancel()
    if rec.total_ops != total:
        raise SystemExit(f"icount: {rec.total_ops} operations ran, not {total}")


def count(workload: str, rpcs: int, concurrency: int, seed: str, no_gc: bool) -> int:
    """Instructions of one child run of ``rpcs`` RPCs, under callgrind."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        env = dict(os.environ, PYTHONHASHSEED=seed)
        subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={out}",
                sys.executable,
                __file__,
                "--child",
                str(rpcs),
                "--workload",
                workload,
                "--concurrency",
                str(concurrency),
                *(["--no-gc"] if no_gc else []),
            ],
            check=True,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        match = re.search(r"^summary: (\d+)", out.read_text(), re.M)
        assert match, "no summary line in callgrind's output"
        return int(match.group(1))


def main() -> None:
    logging.getLogger("hpack").setLevel(
        logging.WARNING
    )  # docs/architecture.md: hpack logs per header
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rpcs", type=int, default=500, help="RPCs in the small run")
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--workload", choices=list(WORKLOADS), default="unary")
    parser.add_argument(
        "--no-gc", action="store_true", help="disable the cyclic collector (to see its share)"
    )
    parser.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        if args.no_gc:
            gc.disable()
        trio.run(run_rpcs, make_workload(args.workload, 0, None), args.child, args.concurrency)
        return
    small = count(args.workload, args.rpcs, args.concurrency, "0", args.no_gc)
    large = count(args.workload, 5 * args.rpcs, args.concurrency, "0", args.no_gc)
    per_rpc = (large - small) / (4 * args.rpcs)
    gc_note = ", gc off" if args.no_gc else ""
    print(
        f"{args.workload} c={args.concurrency}{gc_note}, memory network: "
        f"{per_rpc:,.0f} instructions per RPC "
        f"(both sides; callgrind, {args.rpcs} vs {5 * args.rpcs} RPCs: {small:,} / {large:,})"
    )


if __name__ == "__main__":
    main()
