"""Micro-benchmark: stream state transitions, our table against h2's state machine.

Three designs run the same input sequences, one fresh stream each (built before
the clock starts):

``FastStream``
    ``trio_h2t._h2fast.FastStream.process_input``: our table
    (``_h2/streamstates.py``) in h2's terms, building h2's events: what the
    transport runs.
``table``
    ``trio_h2t._h2.streamstates.StreamStateMachine.process_input``: the sans-IO
    machine on its own, reporting our ``StreamEvent`` values.
``h2``
    stock h2's ``h2.stream.H2StreamStateMachine.process_input``, the plain version
    (and the oracle).

The sequences: each side of a unary call (client: request sent, END_STREAM sent,
response, DATA, trailers, END_STREAM received; server: the mirror), and refusals
(DATA on an idle stream, HEADERS after the peer's END_STREAM, an input with no row).
Every design must give the same states and the same events and errors (by name)
on every sequence: the script checks that first and exits 1 if not.

Each repetition times ``--ops`` streams of each set for each design (interleaved,
in rotating order; CPU time, garbage collector off). Printed: median µs per stream
for each design and set, and the ratio h2 / design of the medians with a 90 %
bootstrap interval (``stats.py``).

Run: ``.venv/bin/python benchmarks/micro/streamstates.py`` (``--ops``, ``--reps``, ``--json``).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

if not __package__:  # run as a script: benchmarks/_bootstrap.py registers the package
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent.parent))
    importlib.import_module("_bootstrap")

import h2.config
from h2.exceptions import ProtocolError
from h2.stream import H2StreamStateMachine, StreamInputs

from benchmarks.micro._report import compare, write_samples
from trio_h2t._h2.streamstates import StreamInput, StreamStateError, StreamStateMachine
from trio_h2t._h2fast import FastStream

_N = StreamInput
CLIENT = [
    _N.SEND_HEADERS,
    _N.SEND_END_STREAM,
    _N.RECV_HEADERS,
    _N.RECV_DATA,
    _N.RECV_WINDOW_UPDATE,
    _N.RECV_HEADERS,
    _N.RECV_END_STREAM,
]
SERVER = [
    _N.RECV_HEADERS,
    _N.RECV_END_STREAM,
    _N.SEND_HEADERS,
    _N.SEND_DATA,
    _N.SEND_WINDOW_UPDATE,
    _N.SEND_HEADERS,
    _N.SEND_END_STREAM,
]
REFUSALS = [
    [_N.RECV_DATA],  # DATA on an idle stream: we reset it
    [_N.RECV_HEADERS, _N.RECV_END_STREAM, _N.RECV_HEADERS],  # after the peer's END_STREAM
    [_N.SEND_HEADERS, _N.RECV_CONTINUATION],  # no row: PROTOCOL_ERROR
]
SETS: dict[str, list[list[StreamInput]]] = {
    "unary client": [CLIENT],
    "unary server": [SERVER],
    "refusals": REFUSALS,
}
DESIGNS = ("FastStream", "table", "h2")

_CONFIG = h2.config.H2Configuration(client_side=True, header_encoding=None)


def _fast() -> Any:
    return FastStream(1, _CONFIG, 65_535, 65_535)


def _table() -> Any:
    return StreamStateMachine(1)


def _h2() -> Any:
    return H2StreamStateMachine(1)


MAKERS: dict[str, Callable[[], Any]] = {"FastStream": _fast, "table": _table, "h2": _h2}
#: The inputs each design takes: ours, or h2's of the same name.
INPUTS: dict[str, Callable[[StreamInput], Any]] = {
    "FastStream": lambda i: StreamInputs[i.name],
    "table": lambda i: i,
    "h2": lambda i: StreamInputs[i.name],
}
ERRORS = (ProtocolError, StreamStateError)


def run_stream(machine: Any, inputs: Sequence[Any]) -> None:
    """One stream's inputs; a refused input ends it (as on the wire)."""
    process = machine.process_input
    try:
        for input_ in inputs:
            process(input_)
    except ERRORS:
        pass


def outcome(machine: Any, inputs: Sequence[Any]) -> list[object]:
    """What each input gave (event names, or the error's class name) and the state."""
    seen: list[object] = []
    for input_ in inputs:
        try:
            result = machine.process_input(input_)
        except ERRORS as exc:
            name = type(exc).__name__
            seen.append({"StreamProtocolError": "ProtocolError"}.get(name, name))
            seen.append(int(machine.state))
            break
        if result is None or isinstance(result, list):
            names = [type(e).__name__ for e in result or []]
        else:
            names = [result.value]
        seen.append((names, int(machine.state)))
    return seen


def same_outcomes() -> bool:
    """Every design gives every sequence the same outcome (our StreamClosed is h2's
    StreamClosedError)."""
    ok = True
    for name, sequences in SETS.items():
        for seq in sequences:
            pictures = {}
            for design in DESIGNS:
                picture = outcome(MAKERS[design](), [INPUTS[design](i) for i in seq])
                pictures[design] = [
                    "StreamClosedError" if p == "StreamClosed" else p for p in picture
                ]
            agree = len({repr(p) for p in pictures.values()}) == 1
            ok = ok and agree
            print(f"  {name:<13} {'same' if agree else 'DIFFERENT'}: {pictures['h2']}")
    return ok


def time_set(design: str, sequences: Sequence[Sequence[StreamInput]], ops: int) -> float:
    """CPU µs per stream of ``ops`` rounds of ``sequences``, fresh streams, GC off."""
    inputs = [[INPUTS[design](i) for i in seq] for seq in sequences]
    streams = [MAKERS[design]() for _ in range(ops * len(sequences))]
    gc.disable()
    try:
        start = time.process_time()
        k = 0
        for _ in range(ops):
            for seq in inputs:
                run_stream(streams[k], seq)
                k += 1
        return (time.process_time() - start) / len(streams) * 1e6
    finally:
        gc.enable()


def measure(ops: int, reps: int) -> dict[str, dict[str, list[float]]]:
    """``{set: {design: [µs per stream, one per repetition]}}``."""
    samples: dict[str, dict[str, list[float]]] = {name: {d: [] for d in DESIGNS} for name in SETS}
    for rep in range(reps):
        order = DESIGNS[rep % 3 :] + DESIGNS[: rep % 3]
        for name, sequences in SETS.items():
            for design in order:
                samples[name][design].append(time_set(design, sequences, ops))
    return samples


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--ops", type=int, default=20_000, help="rounds of each set per repetition")
    ap.add_argument("--reps", type=int, default=7, help="repetitions (medians)")
    ap.add_argument("--json", metavar="FILE", help="also write every sample here")
    args = ap.parse_args(argv)
    if args.ops < 1 or args.reps < 1:
        ap.error("--ops and --reps must be positive")

    print("outcomes (h2's, per input: events and state, or the error):")
    agree = same_outcomes()
    print(f"same outcomes: {'yes' if agree else 'NO'}")
    if not agree:
        return 1

    samples = measure(args.ops, args.reps)
    print()
    print(f"{'set':<13} | {'design':<10} | {'µs/stream':>9} | h2 / design (90 % interval)")
    for name, by_design in samples.items():
        for design in DESIGNS:
            c = compare(by_design["h2"], by_design[design])
            print(
                f"{name:<13} | {design:<10} | {c.bottom:>9.2f} |"
                f" {c.ratio:.2f}x ({c.low:.2f}x to {c.high:.2f}x)"
            )
    write_samples(args.json, ops=args.ops, reps=args.reps, samples=samples)
    return 0


if __name__ == "__main__":
    sys.exit(main())
