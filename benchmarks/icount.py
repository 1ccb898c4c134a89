"""Instructions per unary RPC, counted by callgrind: a figure noise cannot move.

On a shared machine QPS and even CPU time per RPC move by 10-20 % from run to run
(other tenants, CPU steal). ``valgrind --tool=callgrind`` counts the instructions a
program executes instead, which is the same for the same program and input whatever
else the machine does. This script runs a fixed number of unary RPCs (0-byte bodies;
gRPC-shaped headers: benchmain's request plus ``content-type`` and ``te``, its
response plus ``content-type``, its trailer) between a trio_h2t client and server
over the memory network in one process, twice under callgrind (``--rpcs`` and
``--rpcs`` x 5), and prints the difference per RPC, which leaves out start-up,
imports and the connection handshake.
Use it to compare two versions of the code, A/B, on one machine.

Run: ``.venv/bin/python benchmarks/icount.py`` (about 1-2 minutes; needs valgrind,
Debian's ``valgrind`` package). ``--child N`` is the inner run itself.
"""

from __future__ import annotations

import argparse
import functools
import gc
import logging
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import trio
import trio.testing

import trio_h2t

REQUEST = [
    (b":method", b"POST"),
    (b":scheme", b"http"),
    (b":authority", b"bench"),
    (b":path", b"/bench/unary"),
    (b"content-type", b"application/grpc"),
    (b"te", b"trailers"),
]
RESPONSE = [(b":status", b"200"), (b"content-type", b"application/grpc")]
TRAILERS = [(b"x-bench-status", b"0")]


async def handler(stream: trio_h2t.H2Stream) -> None:
    async for _ in stream:
        pass
    await stream.send_headers(RESPONSE)
    await stream.send_trailers(TRAILERS)


async def run_rpcs(total: int, concurrency: int) -> None:
    client_side, server_side = trio.testing.memory_stream_pair()
    left = [total]

    async def worker(conn: trio_h2t.ClientConnection) -> None:
        while left[0] > 0:
            left[0] -= 1
            async with conn.open_stream(REQUEST, end_stream=True) as stream:
                await stream.receive_headers()
                async for _ in stream:
                    pass

    async with trio.open_nursery() as nursery:
        # MAX_CONCURRENT_STREAMS = concurrency + 1, as benchmain's server (grpc-go's rule).
        config = trio_h2t.TransportConfig(max_concurrent_streams=concurrency + 1)
        nursery.start_soon(
            functools.partial(trio_h2t.serve_connection, config=config), server_side, handler
        )
        async with (
            trio_h2t.open_client_connection(client_side) as conn,
            trio.open_nursery() as workers,
        ):
            for _ in range(concurrency):
                workers.start_soon(worker, conn)
        nursery.cancel_scope.cancel()


def count(rpcs: int, concurrency: int, seed: str, no_gc: bool) -> int:
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
    parser.add_argument(
        "--no-gc", action="store_true", help="disable the cyclic collector (to see its share)"
    )
    parser.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        if args.no_gc:
            gc.disable()
        trio.run(run_rpcs, args.child, args.concurrency)
        return
    small = count(args.rpcs, args.concurrency, "0", args.no_gc)
    large = count(5 * args.rpcs, args.concurrency, "0", args.no_gc)
    per_rpc = (large - small) / (4 * args.rpcs)
    gc_note = ", gc off" if args.no_gc else ""
    print(
        f"unary c={args.concurrency}{gc_note}, memory network: {per_rpc:,.0f} instructions per RPC "
        f"(both sides; callgrind, {args.rpcs} vs {5 * args.rpcs} RPCs: {small:,} / {large:,})"
    )


if __name__ == "__main__":
    main()
