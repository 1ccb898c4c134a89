"""Micro-benchmark: received-header validation, ours against h2's chain.

The hot path is ``trio_h2t._headers._check``, the checks ``validate_received`` makes
on a block it has not accepted before (``validate_received`` remembers accepted
blocks; this calls ``_check`` itself, so every call is measured, as for a peer whose
blocks vary). The plain version it replaces is h2's own pipeline,
``h2.utilities.validate_headers`` with inbound validation on and normalisation off
(the chain of generators trio_h2t's configuration of h2 would run), drained with
``list()``.

The blocks: a unary gRPC call's request, response and trailers (the valid ones),
and some malformed ones (an uppercase name, a connection-specific field, a duplicate
or late pseudo-header, a request without ``:path``, a bad value, ``te: gzip``, a
response carrying ``:path``). Both designs must give every block the same verdict
(accepted, or ``ProtocolError``): the script checks that first and exits 1 if not.

Each repetition times ``--ops`` passes over the valid blocks, and over the
malformed ones, for each design (interleaved, in rotating order, CPU time, garbage
collector off). Printed: median µs per block for each design and set, and the
ratio h2 / ours of the medians with a 90 % bootstrap interval (``stats.py``).

Run: ``.venv/bin/python benchmarks/micro/headers.py`` (``--ops``, ``--reps``, ``--json``).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import sys
import time
from collections.abc import Callable, Sequence

if not __package__:  # run as a script: benchmarks/_bootstrap.py registers the package
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent.parent))
    importlib.import_module("_bootstrap")

from h2.exceptions import ProtocolError
from h2.utilities import HeaderValidationFlags, validate_headers

from benchmarks.micro._report import compare, write_samples
from trio_h2t._headers import _check

Block = list[tuple[bytes, bytes]]
#: ``(label, kind, block)``; kind is "request", "response" or "trailer".
Case = tuple[str, str, Block]

REQUEST: Block = [
    (b":method", b"POST"),
    (b":scheme", b"http"),
    (b":path", b"/grpc.testing.BenchmarkService/UnaryCall"),
    (b":authority", b"127.0.0.1:50051"),
    (b"content-type", b"application/grpc"),
    (b"te", b"trailers"),
    (b"grpc-timeout", b"10S"),
    (b"user-agent", b"grpc-python-trio_h2t/0"),
]
RESPONSE: Block = [(b":status", b"200"), (b"content-type", b"application/grpc")]
TRAILERS: Block = [(b"grpc-status", b"0"), (b"grpc-message", b"")]

VALID: list[Case] = [
    ("request", "request", REQUEST),
    ("response", "response", RESPONSE),
    ("trailers", "trailer", TRAILERS),
]
MALFORMED: list[Case] = [
    ("uppercase name", "request", [*REQUEST, (b"X-Trace", b"1")]),
    ("connection field", "request", [*REQUEST, (b"connection", b"close")]),
    ("duplicate :path", "request", [*REQUEST[:3], (b":path", b"/x"), *REQUEST[3:]]),
    ("late pseudo-header", "request", [*REQUEST, (b":authority", b"x")]),
    ("no :path", "request", [h for h in REQUEST if h[0] != b":path"]),
    ("value with LF", "response", [*RESPONSE, (b"x-a", b"a\nb")]),
    ("te: gzip", "request", [*REQUEST[:5], (b"te", b"gzip")]),
    ("response with :path", "response", [*RESPONSE[:1], (b":path", b"/"), *RESPONSE[1:]]),
    ("pseudo in trailers", "trailer", [(b":status", b"200"), *TRAILERS]),
]

DESIGNS = ("ours", "h2")


def ours(kind: str, block: Block) -> bool:
    """``_headers._check``: True if accepted."""
    try:
        _check(block, kind == "response", kind == "trailer")
    except ProtocolError:
        return False
    return True


def h2_chain(kind: str, block: Block) -> bool:
    """h2's ``validate_headers`` chain, as h2 runs it on a received block."""
    flags = HeaderValidationFlags(
        is_client=kind != "request",
        is_trailer=kind == "trailer",
        is_response_header=kind == "response",
        is_push_promise=False,
    )
    try:
        list(validate_headers(block, flags))
    except ProtocolError:
        return False
    return True


RUNNERS: dict[str, Callable[[str, Block], bool]] = {"ours": ours, "h2": h2_chain}


def verdicts(cases: Sequence[Case]) -> dict[str, dict[str, bool]]:
    """Each design's verdict on each case."""
    return {d: {label: RUNNERS[d](kind, block) for label, kind, block in cases} for d in DESIGNS}


def time_pass(run: Callable[[str, Block], bool], cases: Sequence[Case], ops: int) -> float:
    """CPU µs per block of ``ops`` passes over ``cases``, the collector off."""
    gc.disable()
    try:
        start = time.process_time()
        for _ in range(ops):
            for _label, kind, block in cases:
                run(kind, block)
        return (time.process_time() - start) / (ops * len(cases)) * 1e6
    finally:
        gc.enable()


def measure(ops: int, reps: int) -> dict[str, dict[str, list[float]]]:
    """``{set: {design: [µs per block, one per repetition]}}``."""
    samples: dict[str, dict[str, list[float]]] = {
        name: {d: [] for d in DESIGNS} for name in ("valid", "malformed")
    }
    for rep in range(reps):
        order = DESIGNS[rep % 2 :] + DESIGNS[: rep % 2]
        for name, cases in (("valid", VALID), ("malformed", MALFORMED)):
            for design in order:
                samples[name][design].append(time_pass(RUNNERS[design], cases, ops))
    return samples


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--ops", type=int, default=20_000, help="passes over each set per repetition")
    ap.add_argument("--reps", type=int, default=7, help="repetitions (medians)")
    ap.add_argument("--json", metavar="FILE", help="also write every sample here")
    args = ap.parse_args(argv)
    if args.ops < 1 or args.reps < 1:
        ap.error("--ops and --reps must be positive")

    seen = verdicts(VALID + MALFORMED)
    agree = seen["ours"] == seen["h2"]
    print("verdicts (accepted?):")
    for label, accepted in seen["ours"].items():
        print(f"  {label:<22} ours {accepted!s:<5}  h2 {seen['h2'][label]!s:<5}")
    print(f"same verdicts: {'yes' if agree else 'NO'}")
    if not agree or not all(seen["ours"][label] for label, _, _ in VALID):
        return 1

    samples = measure(args.ops, args.reps)
    print()
    print(
        f"{'blocks':<10} | {'ours µs/block':>13} | {'h2 µs/block':>11} | h2 / ours (90 % interval)"
    )
    for name, by_design in samples.items():
        c = compare(by_design["h2"], by_design["ours"])
        print(
            f"{name:<10} | {c.bottom:>13.2f} | {c.top:>11.2f} |"
            f" {c.ratio:.2f}x ({c.low:.2f}x to {c.high:.2f}x)"
        )
    write_samples(args.json, ops=args.ops, reps=args.reps, samples=samples)
    return 0


if __name__ == "__main__":
    sys.exit(main())
