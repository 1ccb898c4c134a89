"""Micro-benchmark: our frame codec (``trio_h2t._h2.frames``) against hyperframe's.

Two workloads, each a byte string of whole frames built before the clock starts:

``unary``
    the frames of one unary gRPC call, both directions: the request's HEADERS and
    DATA (END_STREAM), the response's HEADERS, DATA and trailers (END_STREAM),
    header blocks as hpack encodes them with a warm table;
``100 DATA``
    100 DATA frames of 32 bytes on one stream (a streaming body in small messages).

Two operations on each:

``parse``
    ours: ``frames.parse_frame`` over the bytes, frame after frame (DATA as a view);
    hyperframe's: ``Frame.parse_frame_header`` and ``parse_body`` of each frame, as
    h2's ``FrameBuffer`` calls them (its bodies are copies, as h2 makes them).
``serialize``
    ours: ``serialize_headers`` and ``data_header`` + payload (as loopy and
    ``_h2fixes.frame_data`` frame DATA: the header, the payload written after it);
    hyperframe's: ``HeadersFrame(...)`` / ``DataFrame(...)`` and ``serialize()``.

Before timing, each pair is checked to agree: the same frames (type, stream id,
flags, payload) from both parsers, the same bytes from both serializers; a
disagreement prints ``agree: NO`` and exits 1. Then ``--rounds`` rounds, the two
sides interleaved in each (order alternating), each side timed over ``--reps``
passes of the workload (CPU time, the collector off). It prints, per workload and
operation, both medians (µs per pass), and the ratio ours/hyperframe's: the
median of the per-round ratios with a 90 % bootstrap interval.

A second table guards the fast layer's HEADERS path: ``append_headers`` (the
frames appended to h2's outbound buffer) against the plain ``out +=
serialize_headers(...)``, over the unary call's three header blocks and a 40,000-byte
block (HEADERS + two CONTINUATIONs at 16,384), checked to give the same bytes first;
ratio append/plain, the same statistic.

Run: ``.venv/bin/python benchmarks/micro/frames.py`` (``--rounds``, ``--reps``).
"""

from __future__ import annotations

import argparse
import functools
import gc
import importlib
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

if not __package__:  # run as a script: benchmarks/_bootstrap.py registers the package
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    importlib.import_module("_bootstrap")

import hpack
from hyperframe.frame import DataFrame, Frame, HeadersFrame

from benchmarks.micro._report import compare
from trio_h2t._h2 import frames

REQUEST = [
    (b":method", b"POST"),
    (b":scheme", b"http"),
    (b":path", b"/grpc.testing.BenchmarkService/UnaryCall"),
    (b":authority", b"127.0.0.1:50051"),
    (b"content-type", b"application/grpc"),
    (b"te", b"trailers"),
    (b"grpc-timeout", b"10S"),
]
RESPONSE = [(b":status", b"200"), (b"content-type", b"application/grpc")]
TRAILERS = [(b"grpc-status", b"0")]
MESSAGE = b"\x00\x00\x00\x00\x0a" + b"0123456789"  # a gRPC length-prefixed message
MAX_FRAME_SIZE = 16_384

#: A workload: (kind, stream id, flags, payload) per frame; kind 0 DATA, 1 HEADERS.
Plan = list[tuple[int, int, int, bytes]]


def _warm_block(headers: list[tuple[bytes, bytes]]) -> bytes:
    encoder = hpack.Encoder()
    encoder.encode(headers)
    block: bytes = encoder.encode(headers)  # the steady state: mostly table indices
    return block


def unary_plan() -> Plan:
    """The frames of one unary call, both directions."""
    return [
        (1, 1, frames.END_HEADERS, _warm_block(REQUEST)),
        (0, 1, frames.END_STREAM, MESSAGE),
        (1, 1, frames.END_HEADERS, _warm_block(RESPONSE)),
        (0, 1, 0, MESSAGE),
        (1, 1, frames.END_HEADERS | frames.END_STREAM, _warm_block(TRAILERS)),
    ]


def data_plan() -> Plan:
    """100 DATA frames of 32 bytes on stream 1."""
    return [(0, 1, 0, bytes(range(32)))] * 100


# -- the four sides -------------------------------------------------------------------


def ours_parse(wire: bytes) -> list[tuple[int, int, int, bytes]]:
    """Our codec over ``wire``: each frame as (type, stream id, flags, payload)."""
    out = []
    offset = 0
    while offset < len(wire):
        parsed = frames.parse_frame(wire, offset, MAX_FRAME_SIZE)
        assert parsed is not None
        record, offset = parsed
        if isinstance(record, frames.Data):
            out.append((0, record.stream_id, record.flags, bytes(record.data)))
        else:
            assert isinstance(record, frames.Headers)
            out.append((1, record.stream_id, record.flags, record.fragment))
    return out


def ours_parse_only(wire: bytes) -> None:
    """What is timed of ours: the parse alone."""
    offset = 0
    end = len(wire)
    while offset < end:
        parsed = frames.parse_frame(wire, offset, MAX_FRAME_SIZE)
        assert parsed is not None
        offset = parsed[1]


def _flag_byte(frame: Frame) -> int:
    return sum(bit for name, bit in frame.defined_flags if name in frame.flags)


def hyperframe_parse(wire: bytes) -> list[tuple[int, int, int, bytes]]:
    """hyperframe over ``wire``, as h2's FrameBuffer calls it, in the same terms."""
    out = []
    for frame in _hyperframe_frames(wire):
        assert isinstance(frame, DataFrame | HeadersFrame)
        out.append((frame.type or 0, frame.stream_id, _flag_byte(frame), frame.data))
    return out


def _hyperframe_frames(wire: bytes) -> list[Frame]:
    view = memoryview(wire)
    out = []
    offset = 0
    while offset < len(wire):
        frame, length = Frame.parse_frame_header(view[offset : offset + 9])
        frame.parse_body(memoryview(wire[offset + 9 : offset + 9 + length]))
        out.append(frame)
        offset += 9 + length
    return out


def ours_serialize(plan: Plan) -> bytes:
    """Our serializers: HEADERS split at the frame size, DATA as header + payload."""
    parts: list[bytes] = []
    for kind, sid, flags, payload in plan:
        if kind == 0:
            parts += (frames.data_header(len(payload), sid, bool(flags & 1)), payload)
        else:
            parts.append(frames.serialize_headers(sid, payload, MAX_FRAME_SIZE, bool(flags & 1)))
    return b"".join(parts)


def append_all(blocks: list[tuple[int, bytes, bool]]) -> bytearray:
    """The blocks' frames appended to one buffer by ``append_headers`` (the fast layer's)."""
    out = bytearray()
    for sid, block, end in blocks:
        frames.append_headers(out, sid, block, MAX_FRAME_SIZE, end)
    return out


def plain_append_all(blocks: list[tuple[int, bytes, bool]]) -> bytearray:
    """The same with the plain serializer: its bytes, then added to the buffer."""
    out = bytearray()
    for sid, block, end in blocks:
        out += frames.serialize_headers(sid, block, MAX_FRAME_SIZE, end)
    return out


def header_blocks() -> dict[str, list[tuple[int, bytes, bool]]]:
    """The header workloads: (stream id, block, END_STREAM) per block."""
    unary = [(sid, payload, bool(flags & 1)) for kind, sid, flags, payload in unary_plan() if kind]
    return {
        "unary": unary,
        "40,000 B": [(1, bytes(range(256)) * 156 + bytes(64), True)],
    }


def hyperframe_serialize(plan: Plan) -> bytes:
    """hyperframe's frames of the same plan, serialized."""
    parts = []
    for kind, sid, flags, payload in plan:
        if kind == 0:
            frame: Frame = DataFrame(sid, payload, flags=["END_STREAM"] if flags & 1 else [])
        else:
            names = ["END_HEADERS", *(["END_STREAM"] if flags & 1 else [])]
            frame = HeadersFrame(sid, payload, flags=names)
        parts.append(frame.serialize())
    return b"".join(parts)


# -- timing ---------------------------------------------------------------------------


def per_pass(fn: Callable[[], object], reps: int) -> float:
    """CPU µs of one ``fn()``, over ``reps`` calls, the collector off."""
    gc.disable()
    try:
        start = time.process_time()
        for _ in range(reps):
            fn()
        return (time.process_time() - start) / reps * 1e6
    finally:
        gc.enable()


def run(rounds: int, reps: int) -> bool:
    """Check, time and print every pair; True when every pair agreed."""
    agreed = True
    print(f"{'workload':<9} | {'op':<9} | {'ours µs':>8} | {'hyperframe µs':>13} | ratio (90 % CI)")
    for name, plan in (("unary", unary_plan()), ("100 DATA", data_plan())):
        wire = hyperframe_serialize(plan)
        pairs: dict[str, tuple[Callable[[], Any], Callable[[], Any], bool]] = {
            "parse": (
                functools.partial(ours_parse_only, wire),
                functools.partial(_hyperframe_frames, wire),
                ours_parse(wire) == hyperframe_parse(wire),
            ),
            "serialize": (
                functools.partial(ours_serialize, plan),
                functools.partial(hyperframe_serialize, plan),
                ours_serialize(plan) == wire,
            ),
        }
        for op, (ours, theirs, agree) in pairs.items():
            agreed &= agree
            mine: list[float] = []
            other: list[float] = []
            for i in range(rounds):
                if i % 2:
                    other.append(per_pass(theirs, reps))
                    mine.append(per_pass(ours, reps))
                else:
                    mine.append(per_pass(ours, reps))
                    other.append(per_pass(theirs, reps))
            c = compare(mine, other, paired=True)
            print(
                f"{name:<9} | {op:<9} | {c.top:>8.2f} |"
                f" {c.bottom:>13.2f} | {c.ratio:.2f} ({c.low:.2f}-{c.high:.2f})"
                f" | agree: {'yes' if agree else 'NO'}"
            )
    print()
    print(f"{'headers':<9} | {'append µs':>9} | {'plain µs':>8} | ratio (90 % CI)")
    for name, blocks in header_blocks().items():
        agree = append_all(blocks) == plain_append_all(blocks)
        agreed &= agree
        mine, other = [], []
        for i in range(rounds):
            pair = [(mine, append_all), (other, plain_append_all)]
            for samples, fn in pair if i % 2 == 0 else pair[::-1]:
                samples.append(per_pass(functools.partial(fn, blocks), reps))
        c = compare(mine, other, paired=True)
        print(
            f"{name:<9} | {c.top:>9.2f} | {c.bottom:>8.2f} |"
            f" {c.ratio:.2f} ({c.low:.2f}-{c.high:.2f}) | agree: {'yes' if agree else 'NO'}"
        )
    return agreed


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--rounds", type=int, default=15, help="interleaved rounds (medians)")
    ap.add_argument("--reps", type=int, default=2000, help="passes of a workload per timing")
    args = ap.parse_args(argv)
    return 0 if run(args.rounds, args.reps) else 1


if __name__ == "__main__":
    sys.exit(main())
