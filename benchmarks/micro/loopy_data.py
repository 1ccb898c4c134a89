"""Micro-benchmark: loopy's DATA path against the same logic written plainly.

Two writers frame the same DATA on identical h2 states (trio_h2t's own client-side
connection, ``make_h2_state``, past a peer SETTINGS that opens every window to
2**31 - 1, with the streams open), in one process, with no I/O:

``loopy``
    the real ``trio_h2t._loopy.Loopy``: each item goes through ``_handle`` (the
    dispatch by class, ``_handle_data``), and each turn is ``_process_data``, the
    round-robin step, which frames one quantum with ``_send_window`` (the windows,
    read from the stream h2 holds) and ``_frame_quantum`` (h2 frames the 9-byte
    header, ``H2State.frame_data``; the payload is queued as it came, or as a
    view: no copy).
``plain``
    :class:`PlainWriter` below: the same round robin written plainly, with h2's own
    calls: ``local_flow_control_window`` for the window, ``send_data`` of a slice of
    the payload (which h2 copies into its buffer) for the frame.

Two workloads, each on fresh connections for every repetition:

``quantum``
    one stream holding one large payload; each turn frames one quantum (one
    16 KiB DATA frame, the peer's SETTINGS_MAX_FRAME_SIZE). Per quantum.
``grpc``
    a batch of small gRPC-shaped messages (5-byte prefix + ``--message-size``
    bytes) across ``--streams`` streams: each writer handles each item and writes
    one quantum after it, as loopy's loop does, then turns until nothing is left;
    ``--batches`` batches a repetition. Per message.

Before the clock starts, each repetition checks that both writers put the same bytes
out: loopy's pieces (h2's buffers and the payloads between them) joined, against
h2's ``data_to_send()`` of the plain writer. The clock is the process's CPU time
(``time.process_time``: on a shared machine, time spent waiting for a core is not
counted) over the writes only; the garbage collector is off while it runs. The designs
alternate within each repetition (in rotating order); the medians of ``--reps``
repetitions are printed, and each workload's ratio plain/loopy (above 1: loopy is
faster) with a 90 % bootstrap interval (``benchmarks/stats.py``).

Run: ``.venv/bin/python benchmarks/micro/loopy_data.py`` (defaults are embedded;
``--help``). ``--quick`` runs tiny counts (the test in tests/test_benchmarks.py).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if not __package__:  # run as a script: benchmarks/_bootstrap.py registers the package
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    importlib.import_module("_bootstrap")

import trio.testing
from h2.settings import SettingCodes
from hyperframe.frame import SettingsFrame, WindowUpdateFrame

from benchmarks.micro._report import compare
from benchmarks.workloads import grpc_message
from trio_h2t._config import TransportConfig
from trio_h2t._controlbuf import ControlBuffer
from trio_h2t._exceptions import ConnectionClosingError
from trio_h2t._h2state import H2State, make_h2_state
from trio_h2t._items import Data, WindowOpened
from trio_h2t._loopy import Loopy

DESIGNS = ("loopy", "plain")
WORKLOADS = ("quantum", "grpc")
DEFAULT_QUANTA = 2_000
DEFAULT_STREAMS = 100
DEFAULT_MESSAGE_SIZE = 100
DEFAULT_BATCHES = 50
DEFAULT_REPS = 9
MAX_WINDOW = 2**31 - 1
FRAME = 16_384
REQUEST = [(b":method", b"POST"), (b":scheme", b"http"), (b":authority", b"x"), (b":path", b"/")]


# ---------------------------------------------------------------- the plain version


class PlainWriter:
    """Loopy's DATA path written plainly: a deque of items per stream, a round robin
    of stream ids, and h2's own calls for the window and the frame.

    The workloads never shut a window and never end a stream, so it has no parking;
    a shut window is an error here.
    """

    def __init__(self, h2: H2State, max_frame: int) -> None:
        self.h2 = h2
        self.max_frame = max_frame
        self.queues: dict[int, deque[Data]] = {}
        self.offsets: dict[int, int] = {}
        self.active: deque[int] = deque()

    def handle(self, item: Data) -> None:
        sid = item.stream.stream_id
        queue = self.queues.setdefault(sid, deque())
        if not queue:
            self.active.append(sid)
        queue.append(item)

    def process_data(self) -> bool:
        if not self.active:
            return False
        sid = self.active.popleft()
        queue = self.queues[sid]
        item = queue[0]
        offset = self.offsets.get(sid, 0)
        window = self.h2.local_flow_control_window(sid)
        if window <= 0:
            raise RuntimeError("a window shut: the workload must keep them open")
        remaining = len(item.payload) - offset
        size = min(remaining, window, self.h2.max_outbound_frame_size, self.max_frame)
        done = size == remaining
        chunk = bytes(item.payload[offset : offset + size])
        self.h2.send_data(sid, chunk, end_stream=done and item.end_stream)
        if done:
            queue.popleft()
            self.offsets[sid] = 0
            item.release()
        else:
            self.offsets[sid] = offset + size
        if queue:
            self.active.append(sid)
        return True

    def output(self) -> bytes:
        return bytes(self.h2.data_to_send())


# ---------------------------------------------------------------- loopy, alone


class _Stream:
    """Stands in for the ``H2Stream`` an item names: what loopy's DATA path reads of
    it (its id, whether its output is over) and the write quota each item returns."""

    __slots__ = ("released", "stream_id")

    def __init__(self, stream_id: int) -> None:
        self.stream_id = stream_id
        self.released = 0

    @property
    def core_output_over(self) -> bool:
        return False

    def loopy_released(self, quota: int, cancel_after: bool) -> None:
        self.released += quota


class _Core:
    """Stands in for the connection (``LoopyCore``): the h2 state, a control buffer
    loopy does not read here, the default configuration, and news nobody reads."""

    def __init__(self, h2: H2State) -> None:
        self.h2 = h2
        self.cbuf = ControlBuffer()
        self.config = TransportConfig()
        self.error: BaseException | None = None

    def closing_error(self) -> ConnectionClosingError:
        return ConnectionClosingError("benchmark")

    def refuse_new_stream_error(self) -> BaseException | None:
        return None

    def window_opened_handled(self, item: WindowOpened) -> None:
        pass

    def on_ping_written(self, data: bytes) -> None:
        pass

    def on_goaway_written(self, last_stream_id: int) -> None:
        pass

    def final_goaway_code(self) -> int | None:
        return None

    def local_end_written(self, stream: Any) -> None:
        pass

    def stream_closed(self, stream: Any) -> None:
        pass

    def fault(self, exc: BaseException, where: str) -> None:
        raise exc


class LoopyWriter:
    """The real loopy, driven one item and one turn at a time."""

    def __init__(self, h2: H2State) -> None:
        self.h2 = h2
        self.loopy = Loopy(_Core(h2), trio.testing.MemorySendStream())
        self.handle: Callable[[Data], None] = self.loopy._handle
        self.process_data: Callable[[], bool] = self.loopy._process_data

    def output(self) -> bytes:
        return b"".join([*self.loopy._chunks, self.h2.take_outbound()])


def make_h2(streams: int) -> H2State:
    """A client connection past a peer SETTINGS that opens every window, ``streams``
    streams open, its output so far taken."""
    h2 = make_h2_state(
        client_side=True,
        max_concurrent_streams=100,
        initial_window_size=65_535,
        max_header_list_size=65_536,
    )
    h2.initiate_connection()
    peer = SettingsFrame(0)
    peer.settings = {SettingCodes.INITIAL_WINDOW_SIZE: MAX_WINDOW}
    window = WindowUpdateFrame(0)
    window.window_increment = MAX_WINDOW - 65_535
    h2.receive_data(peer.serialize() + window.serialize())
    for n in range(streams):
        h2.send_headers(2 * n + 1, REQUEST)
    h2.data_to_send()
    return h2


def make_writer(design: str, streams: int) -> LoopyWriter | PlainWriter:
    h2 = make_h2(streams)
    return (
        LoopyWriter(h2) if design == "loopy" else PlainWriter(h2, TransportConfig().max_frame_size)
    )


# ---------------------------------------------------------------- workloads


def quantum_items(quanta: int) -> list[Data]:
    """One stream, one payload of ``quanta`` frames."""
    payload = bytes(range(256)) * (FRAME * quanta // 256)
    return [Data(_Stream(1), payload, False, quota=len(payload))]


def grpc_items(streams: int, message_size: int, batches: int) -> list[list[Data]]:
    """``batches`` batches of one gRPC message on each of ``streams`` streams."""
    message = grpc_message(message_size)
    owners = [_Stream(2 * n + 1) for n in range(streams)]
    return [
        [Data(stream, message, False, quota=len(message)) for stream in owners]
        for _ in range(batches)
    ]


def run_quantum(writer: LoopyWriter | PlainWriter, items: list[Data], quanta: int) -> float:
    """Seconds for ``quanta`` turns of the one stream."""
    writer.handle(items[0])
    process = writer.process_data
    start = time.process_time()
    for _ in range(quanta):
        process()
    return time.process_time() - start


def run_grpc(writer: LoopyWriter | PlainWriter, batches: list[list[Data]]) -> float:
    """Seconds for every batch: each item handled and followed by a turn, as loopy's
    loop does, then turns until no stream has anything left."""
    handle, process = writer.handle, writer.process_data
    start = time.process_time()
    for batch in batches:
        for item in batch:
            handle(item)
            process()
        while process():
            pass
    return time.process_time() - start


@dataclass(frozen=True, slots=True)
class Trial:
    workload: str
    design: str
    rep: int
    ops: int  #: quanta (quantum) or messages (grpc)
    seconds: float
    output: bytes  #: what the writer put out (compared between the designs)

    @property
    def us_per_op(self) -> float:
        return self.seconds / self.ops * 1e6


def trial(workload: str, design: str, rep: int, args: argparse.Namespace) -> Trial:
    streams = 1 if workload == "quantum" else args.streams
    writer = make_writer(design, streams)
    gc.collect()
    gc.disable()
    try:
        if workload == "quantum":
            seconds = run_quantum(writer, quantum_items(args.quanta), args.quanta)
            ops = args.quanta
        else:
            batches = grpc_items(args.streams, args.message_size, args.batches)
            seconds = run_grpc(writer, batches)
            ops = args.streams * args.batches
    finally:
        gc.enable()
    output = writer.output()
    size = FRAME if workload == "quantum" else args.message_size + 5
    if len(output) != ops * (9 + size):  # one DATA frame per quantum or message
        raise RuntimeError(f"{design} put out {len(output)} bytes, not {ops} DATA frames")
    return Trial(workload, design, rep, ops, seconds, output)


# ---------------------------------------------------------------- reporting


@dataclass(frozen=True, slots=True)
class Summary:
    workload: str
    loopy_us: float  #: median µs per op
    plain_us: float
    ratio: float  #: plain / loopy (above 1: loopy is faster)
    low: float  #: the ratio's 90 % bootstrap interval
    high: float
    same_output: bool  #: both designs put out the same bytes in every repetition


def summarize(trials: Sequence[Trial]) -> list[Summary]:
    rows = []
    for workload in WORKLOADS:
        mine = [t for t in trials if t.workload == workload]
        if not mine:
            continue
        by = {d: [t.us_per_op for t in mine if t.design == d] for d in DESIGNS}
        outputs = {(t.rep, t.design): t.output for t in mine}
        reps = {t.rep for t in mine}
        same = all(outputs[(r, "loopy")] == outputs[(r, "plain")] for r in reps)
        c = compare(by["plain"], by["loopy"])
        rows.append(Summary(workload, c.bottom, c.top, c.ratio, c.low, c.high, same))
    return rows


def print_table(rows: Sequence[Summary], args: argparse.Namespace) -> None:
    print(
        f"{'workload':<8} | {'loopy µs/op':>11} | {'plain µs/op':>11} | "
        f"{'plain/loopy [90 % CI]':>22} | same bytes"
    )
    print(f"{'-' * 8}-+-{'-' * 11}-+-{'-' * 11}-+-{'-' * 22}-+-{'-' * 10}")
    for r in rows:
        interval = f"{r.ratio:.2f}x [{r.low:.2f}, {r.high:.2f}]"
        print(
            f"{r.workload:<8} | {r.loopy_us:>11.3f} | {r.plain_us:>11.3f} | "
            f"{interval:>22} | {'yes' if r.same_output else 'NO'}"
        )
    print(
        f"quantum: µs per {FRAME}-byte DATA frame of one stream ({args.quanta} a repetition); "
        f"grpc: µs per {args.message_size + 5}-byte message, {args.streams} streams, "
        f"{args.batches} batches a repetition; medians of {args.reps} repetitions"
    )


# ---------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--quanta", type=int, default=DEFAULT_QUANTA, help="quanta a repetition")
    ap.add_argument("--streams", type=int, default=DEFAULT_STREAMS, help="grpc: streams")
    ap.add_argument(
        "--message-size", type=int, default=DEFAULT_MESSAGE_SIZE, help="grpc: payload bytes"
    )
    ap.add_argument("--batches", type=int, default=DEFAULT_BATCHES, help="grpc: batches a rep")
    ap.add_argument("--reps", type=int, default=DEFAULT_REPS, help="repetitions (medians)")
    ap.add_argument(
        "--workload", choices=WORKLOADS, action="append", help="one workload (default: both)"
    )
    ap.add_argument("--quick", action="store_true", help="tiny counts: a smoke run")
    args = ap.parse_args(argv)
    if args.quick:
        args.quanta, args.batches, args.streams, args.reps = 20, 2, 10, 2
    if min(args.quanta, args.streams, args.batches, args.reps, args.message_size) < 1:
        ap.error("every count must be positive")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    workloads = args.workload or list(WORKLOADS)
    print(f"loopy data-path benchmark; Python {sys.version.split()[0]}")
    trials: list[Trial] = []
    for rep in range(args.reps):
        for workload in workloads:
            # Rotate the order so that neither design always runs first.
            order = DESIGNS[rep % 2 :] + DESIGNS[: rep % 2]
            trials += [trial(workload, design, rep, args) for design in order]
    rows = summarize(trials)
    print_table(rows, args)
    if not all(r.same_output for r in rows):
        print("the designs put out different bytes")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
