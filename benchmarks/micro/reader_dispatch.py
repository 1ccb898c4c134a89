"""Micro-benchmark: the reader's dispatch of inbound events, by handler table or plainly.

``Reader._dispatch`` (``trio_h2t/_reader.py``) hands each h2 event to the handler of
its class, one named method per event kind (``_HANDLERS``). This compares it, side by
side in one process, with a plain version kept here, :func:`plain_dispatch`: the
``if``/``elif`` chain the table replaced, with the bodies of a call's events (DATA,
response headers, trailers, END_STREAM) inline as they were, and any other event sent
through the reader's own handlers. Two workloads, on a client connection:

``unary``
    ``--calls`` unary calls' inbound events, each call's four (ResponseReceived,
    DataReceived of ``--size`` bytes, TrailersReceived, StreamEnded) dispatched in one
    batch, as the reader does a read that carries one response. Our END_STREAM is
    written already, so the peer's closes the stream.
``data``
    ``--streams`` open streams each get ``--frames`` small DATA frames (``--size``
    bytes, views of one buffer, as the reader hands views of its frame buffer), in
    batches of one frame per stream.

Each repetition builds a fresh connection core (``ConnectionCore`` over a memory
stream, no task running) and its ``Reader``, registers the streams, builds the
events, then times the dispatch alone (``time.perf_counter_ns``; the garbage
collector off). The two designs alternate within a repetition, in rotating order;
``--reps`` repetitions; medians per event, and the ratio (table / plain) with a 90 %
bootstrap interval (``benchmarks/stats.py``). After each repetition both designs'
results are compared: every stream's headers, trailers, end, closed state, inbound
flow accounting and queued bytes, the connection window, and the control items put
(type and fields); the script fails if they differ.

Run: ``.venv/bin/python benchmarks/micro/reader_dispatch.py`` (defaults are
embedded; ``--help``). ``--quick`` runs it tiny (the test in tests/test_benchmarks.py).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

if not __package__:  # run as a script: benchmarks/_bootstrap.py registers the package
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    importlib.import_module("_bootstrap")

import h2.events
import trio
import trio.testing
from h2.events import DataReceived, ResponseReceived, StreamEnded, TrailersReceived

from benchmarks.micro._report import compare
from trio_h2t import TransportConfig
from trio_h2t._connection import ConnectionCore
from trio_h2t._controlbuf import ControlBuffer
from trio_h2t._flow import BDP_PING_DATA
from trio_h2t._items import ControlItem, Ping, WindowUpdate
from trio_h2t._reader import Reader
from trio_h2t._stream import H2Stream

DESIGNS = ("table", "plain")
WORKLOADS = ("unary", "data")
DEFAULT_CALLS = 2000
DEFAULT_STREAMS = 100
DEFAULT_FRAMES = 20
DEFAULT_SIZE = 64
DEFAULT_REPS = 15

RESPONSE = [(b":status", b"200"), (b"content-type", b"application/grpc")]
TRAILERS = [(b"grpc-status", b"0")]

Dispatch = Callable[[Reader, list[h2.events.Event]], bool]


# ---------------------------------------------------------------- the plain version


def _plain_data(reader: Reader, ev: DataReceived) -> None:
    """The DATA branch of the chain, as it was inline."""
    n = ev.flow_controlled_length
    stream = reader._streams.get(ev.stream_id)
    if stream is not None:
        data = ev.data
        if stream.reader_deliver_data(data, n):
            holders = reader._holders
            if len(holders) >= reader._prune_at:
                reader._prune_holders(holders, memoryview(data).obj)
            holders.add(stream)
    if not n and ev.stream_ended is None:
        reader._flood("empty_data")
    inc = reader._in_flow.on_data(n)
    if inc:
        reader._put(WindowUpdate(None, inc))
    bdp = reader._bdp
    if bdp is not None and bdp.add(n):
        flushed = reader._in_flow.reset()
        if flushed:
            reader._put(WindowUpdate(None, flushed))
        reader._put(Ping(BDP_PING_DATA))


def plain_dispatch(reader: Reader, events: list[h2.events.Event]) -> bool:
    """The ``if``/``elif`` chain: a call's events inline, the rest through the reader."""
    announced = False
    streams = reader._streams
    for ev in events:
        if type(ev) is DataReceived:
            _plain_data(reader, ev)
        elif isinstance(ev, StreamEnded):
            stream = streams.get(ev.stream_id)
            if stream is not None:
                stream.reader_deliver_end()
                if stream.core_output_over:
                    reader._core.stream_closed(stream)
        elif isinstance(ev, ResponseReceived):
            stream = streams.get(ev.stream_id)
            if stream is not None:
                stream.reader_deliver_headers(list(ev.headers))
        elif isinstance(ev, TrailersReceived):
            stream = streams.get(ev.stream_id)
            if stream is not None:
                stream.reader_deliver_trailers(list(ev.headers))
        elif reader._dispatch([ev]):
            announced = True
    return announced


def table_dispatch(reader: Reader, events: list[h2.events.Event]) -> bool:
    """The reader's own dispatch: the handler table."""
    return reader._dispatch(events)


DISPATCH: dict[str, Dispatch] = {"table": table_dispatch, "plain": plain_dispatch}


# ---------------------------------------------------------------- the workloads


@dataclass
class Setup:
    """One repetition's connection, its reader, its streams and the batches to dispatch."""

    core: ConnectionCore
    reader: Reader
    streams: list[H2Stream]
    batches: list[list[h2.events.Event]]

    @property
    def events(self) -> int:
        return sum(len(batch) for batch in self.batches)


def _pattern(size: int) -> bytearray:
    """``size`` bytes that differ from one offset to the next (within 251)."""
    return bytearray(i % 251 for i in range(size))


def _view(buffer: bytearray) -> bytes:
    """A view of ``buffer`` where h2's events say bytes: the reader's frame buffer
    hands its DATA payloads out as views (``_h2fixes.FixedFrameBuffer``)."""
    return cast("bytes", memoryview(buffer))


def _new_core() -> tuple[ConnectionCore, Reader]:
    client_side, _ = trio.testing.memory_stream_pair()
    core = ConnectionCore(client_side, client_side=True, config=TransportConfig())
    return core, Reader(core)


def _open(core: ConnectionCore, count: int, *, ended_here: bool) -> list[H2Stream]:
    streams = []
    for i in range(count):
        stream = H2Stream._create(core, stream_id=0, headers=None)
        core.register_client_stream(stream, 2 * i + 1)
        if ended_here:
            stream.loopy_output_ended()  # our END_STREAM is written (a unary request)
        streams.append(stream)
    return streams


def unary_setup(args: argparse.Namespace) -> Setup:
    core, reader = _new_core()
    streams = _open(core, args.calls, ended_here=True)
    body = _view(_pattern(args.size))
    batches: list[list[h2.events.Event]] = []
    for stream in streams:
        sid = stream.stream_id
        ended = StreamEnded(stream_id=sid)
        batches.append(
            [
                ResponseReceived(stream_id=sid, headers=RESPONSE),
                DataReceived(stream_id=sid, data=body, flow_controlled_length=len(body)),
                TrailersReceived(stream_id=sid, headers=TRAILERS, stream_ended=ended),
                ended,
            ]
        )
    return Setup(core, reader, streams, batches)


def data_setup(args: argparse.Namespace) -> Setup:
    core, reader = _new_core()
    streams = _open(core, args.streams, ended_here=False)
    view = _view(_pattern(args.size * args.streams * args.frames))
    batches: list[list[h2.events.Event]] = []
    at = 0
    for _ in range(args.frames):
        batch: list[h2.events.Event] = []
        for stream in streams:
            chunk = view[at : at + args.size]
            at += args.size
            batch.append(
                DataReceived(
                    stream_id=stream.stream_id, data=chunk, flow_controlled_length=args.size
                )
            )
        batches.append(batch)
    return Setup(core, reader, streams, batches)


SETUPS: dict[str, Callable[[argparse.Namespace], Setup]] = {
    "unary": unary_setup,
    "data": data_setup,
}


def _item_state(item: ControlItem) -> tuple[Any, ...]:
    fields = getattr(type(item), "__slots__", ())
    values = []
    for name in fields:
        value = getattr(item, name)
        values.append(value.stream_id if isinstance(value, H2Stream) else value)
    return (type(item).__name__, *values)


def _drain(cbuf: ControlBuffer) -> list[tuple[Any, ...]]:
    items = []
    while True:
        try:
            items.append(_item_state(cbuf.get_nowait()))
        except trio.WouldBlock:
            return items


def outcome(setup: Setup) -> dict[str, Any]:
    """What a dispatch left behind: each stream's state, the connection window, the
    control items put. Drains the streams' queued bytes and the control buffer."""
    streams = []
    for stream in setup.streams:
        flow = stream.core_in_flow
        queued = bytearray()
        while flow.pending_data and not stream.core_closed:
            queued += stream.receive_some_nowait(flow.pending_data)
        streams.append(
            (
                stream.stream_id,
                stream.headers,
                stream.trailers,
                stream.core_peer_ended,
                stream.core_closed,
                (flow.acked, flow.pending_update),
                bytes(queued),
            )
        )
    conn = setup.core.in_flow
    return {
        "streams": streams,
        "window": (conn.received, conn.unacked, conn.buffered),
        "items": _drain(setup.core.cbuf),
        "open": sorted(setup.core.streams_by_id),
    }


def one_run(args: argparse.Namespace, design: str) -> tuple[float, dict[str, Any]]:
    """(ns per event, outcome) of one design on a fresh setup."""
    setup = SETUPS[args.workload](args)
    dispatch = DISPATCH[design]
    reader = setup.reader
    batches = setup.batches
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter_ns()
        for batch in batches:
            dispatch(reader, batch)
        elapsed = time.perf_counter_ns() - start
    finally:
        gc.enable()
    return elapsed / setup.events, outcome(setup)


def measure(args: argparse.Namespace) -> dict[str, list[float]]:
    """Interleaved repetitions; raises AssertionError if the designs disagree."""
    times: dict[str, list[float]] = {design: [] for design in DESIGNS}
    for rep in range(args.reps):
        order = DESIGNS[rep % 2 :] + DESIGNS[: rep % 2]
        results = {}
        for design in order:
            ns, results[design] = one_run(args, design)
            times[design].append(ns)
        if results["table"] != results["plain"]:
            raise AssertionError(f"the designs disagree ({args.workload}, repetition {rep})")
    return times


def report(workload: str, times: dict[str, list[float]]) -> str:
    c = compare(times["table"], times["plain"])
    return (
        f"{workload:6} table {c.top:7.1f} ns/event   plain {c.bottom:7.1f} ns/event   "
        f"table/plain {c.ratio:.3f} (90% interval {c.low:.3f}-{c.high:.3f}; "
        f"medians of {len(times['table'])} repetitions); results agree"
    )


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="reader_dispatch.py",
        description="The reader's dispatch of inbound events through its handler table "
        "against a plain if/elif chain: ns per event, ratio, and a check that both "
        "leave the same stream states.",
    )
    p.add_argument("--workload", choices=(*WORKLOADS, "all"), default="all")
    p.add_argument("--calls", type=int, default=DEFAULT_CALLS, help="unary calls per run")
    p.add_argument("--streams", type=int, default=DEFAULT_STREAMS, help="streams (data)")
    p.add_argument("--frames", type=int, default=DEFAULT_FRAMES, help="DATA frames per stream")
    p.add_argument("--size", type=int, default=DEFAULT_SIZE, help="DATA payload bytes")
    p.add_argument("--reps", type=int, default=DEFAULT_REPS, help="repetitions per design")
    p.add_argument("--quick", action="store_true", help="tiny counts (a smoke test)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.quick:
        args.calls, args.streams, args.frames, args.reps = 20, 10, 3, 2
    if min(args.calls, args.streams, args.frames, args.size, args.reps) < 1:
        parser().error("every count must be >= 1")
    workloads = WORKLOADS if args.workload == "all" else (args.workload,)

    async def run() -> None:
        for workload in workloads:
            args.workload = workload
            print(report(workload, measure(args)))

    trio.run(run)
    return 0


if __name__ == "__main__":
    sys.exit(main())
