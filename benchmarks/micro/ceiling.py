"""The ceiling: benchmain's unary exchange between two bare h2 connections, no I/O.

Two ``h2`` connections, a client and a server, configured as trio_h2t configures its
own (``trio_h2t/_h2state.py`` ``make_h2_state``: ``header_encoding=None``, inbound
header validation on, outbound validation and both normalisations off; the same
initial SETTINGS; the same 4 MiB connection window), are wired back to back in this
process: bytes from one's ``data_to_send()`` go straight into the other's
``receive_data()``. No socket, no event loop, no scheduler.

The exchange is the one ``benchmain.py --workload unary`` puts on the wire:

- client: HEADERS ``:method POST``, ``:scheme http``, ``:authority``, ``:path
  /bench/unary``, with END_STREAM when ``--req-size`` is 0 (else one DATA frame
  of that many bytes with END_STREAM);
- server: HEADERS ``:status 200``, a DATA frame of ``--resp-size`` bytes (none when
  0), then the trailers ``x-bench-status: 0`` with END_STREAM.

Streams go in batches, as a transport with ``--concurrency`` streams in flight would
see them: open ``concurrency`` streams, pass the bytes, answer every request, pass the
bytes back, check that every response ended. RPCs/s = RPCs / wall time of the batches
(``time.perf_counter``; CPU µs/RPC uses ``time.process_time`` instead); each run uses
fresh connections and does ``--rpcs`` RPCs; the median of ``--runs`` runs is reported.
The garbage collector is off while timing, so a collection does not land in one
side's rounds only (``--gc`` leaves it on).

``--state h2`` (the default) uses stock ``h2.connection.H2Connection``, which counts
open streams by scanning them on every new stream (h2 #1184). ``--state trio_h2t``
uses trio_h2t's own connection as the transport builds it (``make_h2_state``: the
correctness and speed layers, ``_h2fixes.py`` and ``_h2fast.py``), the tighter ceiling
for trio_h2t in particular; ``--state fixes`` the correctness layer alone. Either way
this is what h2 alone costs: an upper bound for any h2-based transport on this machine, per core.

Run: ``.venv/bin/python benchmarks/micro/ceiling.py`` (``--help`` for options).
"""

from __future__ import annotations

import argparse
import datetime
import gc
import importlib.metadata
import json
import logging
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import h2.connection
import h2.events
import h2.settings

# Keep in step with the unary workload (benchmarks/workloads.py ``Unary``).
UNARY_PATH = b"/bench/unary"
RESPONSE_HEADERS: list[tuple[bytes, bytes]] = [(b":status", b"200")]
TRAILERS: list[tuple[bytes, bytes]] = [(b"x-bench-status", b"0")]
# trio_h2t's TransportConfig defaults (``_config.py``).
INITIAL_WINDOW_SIZE = 65_535
CONNECTION_WINDOW_SIZE = 4 * 1024 * 1024
MAX_HEADER_LIST_SIZE = 65_536
CLIENT_MAX_CONCURRENT_STREAMS = 100
WINDOW_UPDATE_RATIO = 0.25

STATES = ("h2", "fixes", "trio_h2t")


def make_connection(state: str, *, client_side: bool, max_streams: int) -> Any:
    """One side, configured as ``trio_h2t._h2state.make_h2_state`` does."""
    if state in ("fixes", "trio_h2t"):
        from trio_h2t._h2state import make_h2_state

        return make_h2_state(
            client_side=client_side,
            max_concurrent_streams=max_streams,
            initial_window_size=INITIAL_WINDOW_SIZE,
            max_header_list_size=MAX_HEADER_LIST_SIZE,
            speed_layer=state == "trio_h2t",
        )
    from trio_h2t._h2state import h2_configuration

    conn = h2.connection.H2Connection(config=h2_configuration(client_side))
    codes = h2.settings.SettingCodes
    initial: dict[h2.settings.SettingCodes, int] = {
        codes.MAX_CONCURRENT_STREAMS: max_streams,
        codes.INITIAL_WINDOW_SIZE: INITIAL_WINDOW_SIZE,
        codes.MAX_HEADER_LIST_SIZE: MAX_HEADER_LIST_SIZE,
    }
    if client_side:
        initial[codes.ENABLE_PUSH] = 0
    conn.local_settings = h2.settings.Settings(client=client_side, initial_values=initial)
    conn.decoder.max_header_list_size = MAX_HEADER_LIST_SIZE
    return conn


class Pair:
    """A client and a server connection, handshaken, with the exchange's parts."""

    def __init__(self, state: str, concurrency: int, req_size: int, resp_size: int) -> None:
        self.client = make_connection(
            state, client_side=True, max_streams=CLIENT_MAX_CONCURRENT_STREAMS
        )
        self.server = make_connection(state, client_side=False, max_streams=concurrency + 1)
        self.prune = state in ("fixes", "trio_h2t")
        self.concurrency = concurrency
        self.request_headers = [
            (b":method", b"POST"),
            (b":scheme", b"http"),
            (b":authority", b"127.0.0.1:40000"),
            (b":path", UNARY_PATH),
        ]
        self.req_body = b"x" * req_size
        self.resp_body = b"x" * resp_size
        # Connection-window bytes received and not yet returned, per side.
        self._unacked = {id(self.client): 0, id(self.server): 0}
        self._update_at = int(CONNECTION_WINDOW_SIZE * WINDOW_UPDATE_RATIO)
        for conn in (self.client, self.server):
            conn.initiate_connection()
            conn.increment_flow_control_window(CONNECTION_WINDOW_SIZE - INITIAL_WINDOW_SIZE)
        # Preface and SETTINGS both ways, then the SETTINGS acks.
        self.server.receive_data(self.client.data_to_send())
        self.client.receive_data(self.server.data_to_send())
        self.server.receive_data(self.client.data_to_send())
        self.client.data_to_send()
        self.server.data_to_send()

    def _received(self, conn: Any, n: int) -> None:
        # trio_h2t returns connection window once a quarter of it is used.
        key = id(conn)
        self._unacked[key] += n
        if self._unacked[key] >= self._update_at:
            conn.increment_flow_control_window(self._unacked[key])
            self._unacked[key] = 0

    def batch(self) -> None:
        """One batch: ``concurrency`` whole unary RPCs."""
        client, server = self.client, self.server
        req_body, resp_body = self.req_body, self.resp_body
        for _ in range(self.concurrency):
            sid = client.get_next_available_stream_id()
            client.send_headers(sid, self.request_headers, end_stream=not req_body)
            if req_body:
                client.send_data(sid, req_body, end_stream=True)
        for ev in server.receive_data(client.data_to_send()):
            kind = type(ev)
            if kind is h2.events.DataReceived:
                self._received(server, ev.flow_controlled_length)
            elif kind is h2.events.StreamEnded:  # the whole request is in: answer it
                sid = ev.stream_id
                server.send_headers(sid, RESPONSE_HEADERS)
                if resp_body:
                    server.send_data(sid, resp_body)
                server.send_headers(sid, TRAILERS, end_stream=True)
        ended = 0
        for ev in client.receive_data(server.data_to_send()):
            kind = type(ev)
            if kind is h2.events.DataReceived:
                self._received(client, ev.flow_controlled_length)
            elif kind is h2.events.StreamEnded:
                ended += 1
        if ended != self.concurrency:
            raise AssertionError(f"{ended} of {self.concurrency} responses ended")
        if self.prune:  # what trio_h2t's loopy does as streams close
            client.prune_closed_streams()
            server.prune_closed_streams()
        # Window updates (if any) go back too; nothing else is pending.
        client.receive_data(server.data_to_send())
        server.receive_data(client.data_to_send())


def one_run(args: argparse.Namespace) -> tuple[float, float]:
    """(RPCs per wall-clock second, RPCs per CPU second) of one run, fresh connections."""
    pair = Pair(args.state, args.concurrency, args.req_size, args.resp_size)
    pair.batch()  # warm: HPACK tables, caches
    batches = max(1, args.rpcs // args.concurrency)
    gc.collect()
    if not args.gc:
        gc.disable()
    try:
        start, cpu = time.perf_counter(), time.process_time()
        for _ in range(batches):
            pair.batch()
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    finally:
        gc.enable()
    rpcs = batches * args.concurrency
    return rpcs / elapsed, rpcs / max(cpu, 1e-9)


def measure(args: argparse.Namespace) -> dict[str, Any]:
    both = [one_run(args) for _ in range(args.runs)]
    runs = [wall for wall, _ in both]
    cpu_runs = [cpu for _, cpu in both]
    return {
        "kind": "ceiling",
        "state": args.state,
        "concurrency": args.concurrency,
        "req_size": args.req_size,
        "resp_size": args.resp_size,
        "rpcs_per_run": max(1, args.rpcs // args.concurrency) * args.concurrency,
        "gc": bool(args.gc),
        "runs": runs,
        "rpcs_per_s": statistics.median(runs),
        "us_per_rpc": 1e6 / statistics.median(runs),
        "cpu_runs": cpu_runs,
        "cpu_us_per_rpc": 1e6 / statistics.median(cpu_runs),
        "python": platform.python_version(),
        "h2": importlib.metadata.version("h2"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ceiling.py",
        description="benchmain's unary exchange between two in-process h2 connections "
        "(no I/O, no scheduler): the RPCs/s ceiling of h2 itself.",
    )
    p.add_argument("--concurrency", type=int, default=100, help="streams per batch")
    p.add_argument("--req-size", type=int, default=0)
    p.add_argument("--resp-size", type=int, default=0)
    p.add_argument("--rpcs", type=int, default=3000, help="RPCs per run")
    p.add_argument("--runs", type=int, default=7, help="runs; the median is reported")
    p.add_argument(
        "--state", choices=STATES, default="h2", help="stock h2, our correctness layer, or both"
    )
    p.add_argument("--gc", action="store_true", help="leave the garbage collector on")
    p.add_argument("--json", metavar="FILE", help="append the result to FILE (a JSON list)")
    return p


def main(argv: list[str] | None = None) -> int:
    logging.getLogger("hpack").setLevel(
        logging.WARNING
    )  # docs/architecture.md: hpack logs per header
    args = parser().parse_args(argv)
    if args.concurrency < 1 or args.runs < 1 or args.req_size < 0 or args.resp_size < 0:
        parser().error("--concurrency and --runs must be >= 1, sizes >= 0")
    result = measure(args)
    runs = ", ".join(f"{r:,.0f}" for r in result["runs"])
    print(
        f"ceiling ({args.state}, {args.concurrency} streams/batch, req {args.req_size} B, "
        f"resp {args.resp_size} B, gc {'on' if args.gc else 'off'}): "
        f"{result['rpcs_per_s']:,.0f} RPCs/s median ({result['us_per_rpc']:.1f} µs/RPC, "
        f"both sides; CPU time {result['cpu_us_per_rpc']:.1f} µs/RPC); runs: {runs}"
    )
    if args.json:
        path = Path(args.json)
        existing: list[Any] = []
        if path.exists() and path.stat().st_size:
            loaded = json.loads(path.read_text())
            existing = loaded if isinstance(loaded, list) else [loaded]
        existing.append(result)
        path.write_text(json.dumps(existing, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
