"""What the pieces of one unary gRPC exchange cost through public APIs, per side.

Issue 29 asks whether trio_h2t's HTTP/2 layer should be a narrow layer over h2's
public API or a state machine of its own with h2 as the reference, decided by
measurement. ``ceiling.py`` measures whole h2 connections back to back (stock h2,
the correctness layer, both layers); this measures the parts a layer of our own
would still call, each on its own, in CPU µs per operation
(``time.process_time``, the garbage collector off, the median of ``--runs``):

``hpack encode (request)`` / ``hpack encode (response)`` / ``hpack encode (trailers)``
    ``hpack.Encoder().encode`` of a unary gRPC call's header lists, with the dynamic
    table warm (the steady state of a long-lived connection).
``hpack decode (request)`` / ``(response)`` / ``(trailers)``
    ``hpack.Decoder().decode`` of those blocks, table warm.
``hyperframe parse (HEADERS)`` / ``(DATA)``
    ``hyperframe.frame.Frame.parse_frame_header`` and ``parse_body`` of one frame.
``frame header (int.from_bytes)``
    splitting a 9-byte frame header with ``int.from_bytes`` and indexing: what a
    frame layer of our own does instead.

One unary exchange costs a side one encode and one decode of each of its blocks'
kinds (the client encodes the request and decodes response and trailers), and about
four frames parsed. The sum is the floor under any layer that keeps hpack and
hyperframe; ``ceiling.py --state h2`` minus that floor is what h2's state machine
and event objects add.

Run: ``.venv/bin/python benchmarks/micro/h2_budget.py`` (``--runs``, ``--ops``).
"""

from __future__ import annotations

import argparse
import functools
import gc
import statistics
import time
from collections.abc import Callable

import hpack
from hyperframe.frame import DataFrame, Frame, HeadersFrame

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
BLOCKS = {"request": REQUEST, "response": RESPONSE, "trailers": TRAILERS}


def per_op(fn: Callable[[], object], ops: int, runs: int) -> float:
    """Median CPU µs of one ``fn()`` over ``runs`` runs of ``ops`` calls."""
    samples = []
    for _ in range(runs):
        gc.disable()
        start = time.process_time()
        for _ in range(ops):
            fn()
        samples.append((time.process_time() - start) / ops * 1e6)
        gc.enable()
    return statistics.median(samples)


def measure(ops: int, runs: int) -> dict[str, float]:
    """Each piece's median CPU µs per operation."""
    results: dict[str, float] = {}
    for name, headers in BLOCKS.items():
        encoder = hpack.Encoder()
        first = encoder.encode(headers)  # adds the block's fields to the table
        indexed = encoder.encode(headers)  # the steady state: mostly table indices
        encode = functools.partial(encoder.encode, headers)
        results[f"hpack encode ({name})"] = per_op(encode, ops, runs)
        decoder = hpack.Decoder()
        decoder.decode(first)  # the same table on the decoding side
        decode = functools.partial(decoder.decode, indexed)
        results[f"hpack decode ({name})"] = per_op(decode, ops, runs)
    headers_frame = HeadersFrame(1, hpack.Encoder().encode(REQUEST), flags=["END_HEADERS"])
    data_frame = DataFrame(1, b"\x00\x00\x00\x00\x00", flags=["END_STREAM"])
    for label, frame in (("HEADERS", headers_frame), ("DATA", data_frame)):
        wire = frame.serialize()
        header, body = memoryview(wire[:9]), memoryview(wire[9:])

        def parse(header: memoryview = header, body: memoryview = body) -> object:
            parsed, _length = Frame.parse_frame_header(header)
            parsed.parse_body(body)
            return parsed

        results[f"hyperframe parse ({label})"] = per_op(parse, ops, runs)
    wire = headers_frame.serialize()[:9]

    def split(header: bytes = wire) -> tuple[int, int, int, int]:
        return (
            int.from_bytes(header[:3], "big"),
            header[3],
            header[4],
            int.from_bytes(header[5:9], "big") & 0x7FFF_FFFF,
        )

    results["frame header (int.from_bytes)"] = per_op(split, ops, runs)
    return results


def main(argv: list[str] | None = None) -> None:
    """Print each piece and the per-side floor of one unary exchange."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ops", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    results = measure(args.ops, args.runs)
    for name, value in results.items():
        print(f"{name:<32} {value:8.2f} µs")
    client = (
        results["hpack encode (request)"]
        + results["hpack decode (response)"]
        + results["hpack decode (trailers)"]
        + 2 * results["hyperframe parse (HEADERS)"]
        + results["hyperframe parse (DATA)"]
    )
    server = (
        results["hpack decode (request)"]
        + results["hpack encode (response)"]
        + results["hpack encode (trailers)"]
        + results["hyperframe parse (HEADERS)"]
        + results["hyperframe parse (DATA)"]
    )
    print(f"{'floor, client side':<32} {client:8.2f} µs per unary call")
    print(f"{'floor, server side':<32} {server:8.2f} µs per unary call")


if __name__ == "__main__":
    main()
