"""send_allocs: what one ``send_data`` costs the sending process, from the call to the
socket (grpc-go #8668: no closure or bound-method allocations per write).

A trio_h2t client opens one stream to a *sink* in another process (``send_allocs.py
--sink``: a raw socket that sends SETTINGS with 2**31-1 stream windows and
``--peer-frame`` SETTINGS_MAX_FRAME_SIZE, a connection WINDOW_UPDATE to 2**31-1, a
SETTINGS ACK, and then only reads and discards). No flow control ever stops the
sender and the sink adds nothing to this process's counts, so what is counted is
the send path alone: ``send_data`` (the checks, the ``Data`` item, the control
buffer, the checkpoint), loopy (the item, the DATA framing, the flush's vectored
write) and the trio scheduling between them.

After ``--warmup`` writes, ``--writes`` more are counted with ``allochook.py`` (every
allocation CPython's allocators are asked for, and the bytes; tracemalloc cannot
count what is freed again). The payload kinds (``--kind``, repeatable): ``bytes`` (one
object sent again and again), ``memoryview`` (slices of one buffer, as
``bulk.py`` sends them), ``bytearray``. The figures are deterministic enough to
compare two trees A/B (``PYTHONPATH=<tree>``); the machine's load does not move them.

Run: ``.venv/bin/python benchmarks/send_allocs.py`` (a few seconds).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import socket
import struct
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import trio

import trio_h2t

if not __package__:  # run as a script: benchmarks/_bootstrap.py registers the package
    importlib.import_module("_bootstrap")

from benchmarks.allochook import alloc_counter

__all__ = ["count_writes", "main", "sink_preface"]

KINDS = ("bytes", "memoryview", "bytearray")
MAX_WINDOW = 2**31 - 1


def _frame(kind: int, flags: int, stream_id: int, payload: bytes) -> bytes:
    return (
        struct.pack(">I", len(payload))[1:]
        + bytes((kind, flags))
        + struct.pack(">I", stream_id)
        + payload
    )


def sink_preface(peer_frame: int) -> bytes:
    """The sink's whole output: SETTINGS (INITIAL_WINDOW_SIZE, MAX_FRAME_SIZE), the
    connection window opened to 2**31-1, and the ACK of the client's SETTINGS."""
    settings = struct.pack(">HIHI", 0x4, MAX_WINDOW, 0x5, peer_frame)
    return (
        _frame(0x4, 0, 0, settings)
        + _frame(0x8, 0, 0, struct.pack(">I", MAX_WINDOW - 65535))
        + _frame(0x4, 0x1, 0, b"")
    )


def run_sink(peer_frame: int) -> None:
    """``--sink``: accept one connection, send the preface, read until EOF."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        print(listener.getsockname()[1], flush=True)
        conn, _ = listener.accept()
        with conn:
            conn.sendall(sink_preface(peer_frame))
            buf = bytearray(1 << 20)
            while conn.recv_into(buf):
                pass


def _payloads(kind: str, size: int) -> list[bytes | bytearray | memoryview]:
    """Eight payloads of ``kind``, sent in turn (a view is sliced once, here)."""
    if kind == "bytes":
        return [b"x" * size] * 8
    if kind == "bytearray":
        return [bytearray(size) for _ in range(8)]
    base = memoryview(bytes(8 * size))
    return [base[i * size : (i + 1) * size] for i in range(8)]


async def count_writes(
    port: int, kind: str, size: int, warmup: int, writes: int
) -> tuple[int, int] | None:
    """(allocations, bytes) asked for during ``writes`` send_data calls on a warm
    stream, or None without the counter. Checkpoint: always."""
    counter = alloc_counter()
    payloads = _payloads(kind, size)
    async with trio_h2t.open_connection("127.0.0.1", port) as conn:
        headers = conn.request_headers("POST", "/sink")
        async with conn.open_stream(headers) as stream:
            for i in range(warmup):
                await stream.send_data(payloads[i % 8])
            gc.collect()
            counter.start()
            for i in range(writes):
                await stream.send_data(payloads[i % 8])
            counted = counter.stop()
            stream.reset()
    return counted


def measure(kind: str, args: argparse.Namespace) -> dict[str, Any]:
    sink = subprocess.Popen(
        [sys.executable, __file__, "--sink", "--peer-frame", str(args.peer_frame)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert sink.stdout is not None
        port = int(sink.stdout.readline())
        counted = trio.run(count_writes, port, kind, args.size, args.warmup, args.writes)
    finally:
        sink.kill()
        sink.wait()
    result: dict[str, Any] = {"kind": kind, "size": args.size, "writes": args.writes}
    if counted is not None:
        result["allocs_per_write"] = counted[0] / args.writes
        result["bytes_per_write"] = counted[1] / args.writes
    return result


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kind", action="append", choices=KINDS, help="payload kind (repeatable)")
    p.add_argument("--size", type=int, default=16 * 1024, help="bytes per write (16 KiB)")
    p.add_argument("--writes", type=int, default=20_000, help="writes counted")
    p.add_argument("--warmup", type=int, default=2_000, help="writes before counting")
    p.add_argument(
        "--peer-frame",
        type=int,
        default=1 << 20,
        help="the sink's SETTINGS_MAX_FRAME_SIZE (1 MiB, as trio_h2t advertises)",
    )
    p.add_argument("--sink", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.sink:
        run_sink(args.peer_frame)
        return 0
    if not alloc_counter().available:
        print(f"send_allocs: {alloc_counter().why_unavailable}", file=sys.stderr)
        return 1
    print(f"trio_h2t from {Path(trio_h2t.__file__).parent}")
    for kind in args.kind or KINDS:
        r = measure(kind, args)
        print(
            f"{kind:<11} {args.size:>8} B x {args.writes}: "
            f"{r['allocs_per_write']:6.2f} allocations, {r['bytes_per_write']:8.1f} bytes "
            "asked per send_data (sender process)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
