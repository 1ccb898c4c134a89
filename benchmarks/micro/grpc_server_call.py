"""Micro-benchmark: the gRPC server's per-call pieces against the code they replaced.

``Server.__call__`` was one function (complexity 41) until issue 29 split it by
meaning; ``MessageDecoder.feed`` likewise. This measures what the split could have
cost on the sans-IO part of one unary call, the part that runs for every call
before and after its handler, in one process, side by side:

``split``
    the library as it is: ``Server._open_call`` (``_scan_head``, the request checks,
    the path, the method lookup, ``grpc-accept-encoding``, the deadline, the
    ``ServicerContext``, ``_request_encoding``), ``MessageDecoder.feed`` of the
    request (``_read_prefix``, the whole-body case), and ``ServicerContext._framed``
    (``encode_message``) of the response.
``before``
    the code that was there before the split, copied below (:func:`before_open_call`,
    :class:`BeforeDecoder`): the one-pass header scan with its ``elif`` chain and the
    checks written out in one function, and ``feed`` as one loop; the response framed
    with the prefix packed by hand.

Each case is a request head and a request message: ``0 B`` and ``100 B`` (a
message of 0 and of 100 bytes, the head a unary call of ``Channel`` sends) and
``100 B + timeout, metadata`` (the head also has ``grpc-timeout``, two metadata
entries and a ``-bin`` one, so the metadata is parsed before the handler). The
response is the request's payload, framed.

Before timing, both sides run every case once and their results are compared (the
method, path, deadline, accepted encodings, metadata, request encoding, the decoded
messages and the framed response bytes); a difference stops the run. Then for each
case, ``--reps`` repetitions of ``--ops`` calls per side, the sides alternating
within a repetition (the garbage collector off, ``time.perf_counter_ns``), and the
medians in ns per call, ``split / before`` with a 90 % bootstrap interval
(``benchmarks/stats.py``). On this shared 2-core machine read the interval, not one
run; ``benchmarks/grpc_icount.py`` counts a whole call in instructions.

Run: ``.venv/bin/python benchmarks/micro/grpc_server_call.py`` (defaults are
embedded; ``--help``). ``--quick`` runs tiny counts (the agreement check and one
repetition; tests/test_benchmarks.py).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import math
import struct
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

if not __package__:  # run as a script: benchmarks/_bootstrap.py registers the package
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    importlib.import_module("_bootstrap")

import trio
import trio.testing

import trio_h2t
from benchmarks.micro._report import compare
from trio_h2t.grpc import Server, unary_unary_handler
from trio_h2t.grpc._codec import identity_serializer
from trio_h2t.grpc._framing import (
    PREFIX_SIZE,
    REUSE_MIN_SIZE,
    SUPPORTED_ENCODINGS,
    MessageDecoder,
)
from trio_h2t.grpc._metadata import metadata_from_headers, parse_timeout
from trio_h2t.grpc._server import (
    MethodHandler,
    ServicerContext,
    _is_grpc_content_type,
    _parse_accept,
)

DEFAULT_OPS = 20_000  # calls per side per repetition
DEFAULT_REPS = 9
PATH = "/bench.Bench/UnaryCall"

_PREFIX = struct.Struct(">BI")
_NO_BODY = bytearray()
_NO_VIEW = memoryview(_NO_BODY)

#: The head of a unary call as trio_h2t.grpc's Channel sends it.
HEAD: list[tuple[bytes, bytes]] = [
    (b":method", b"POST"),
    (b":scheme", b"http"),
    (b":path", PATH.encode()),
    (b":authority", b"localhost:50051"),
    (b"te", b"trailers"),
    (b"content-type", b"application/grpc"),
    (b"grpc-accept-encoding", b"identity,deflate,gzip"),
    (b"user-agent", b"grpc-python-trio_h2t"),
]
HEAD_TIMEOUT_METADATA = [
    *HEAD,
    (b"grpc-timeout", b"1000m"),
    (b"x-request-id", b"42"),
    (b"x-tenant", b"bench"),
    (b"x-trace-bin", b"AAECAw"),
]
CASES: dict[str, tuple[list[tuple[bytes, bytes]], bytes]] = {
    "0 B": (HEAD, b""),
    "100 B": (HEAD, b"x" * 100),
    "100 B + timeout, metadata": (HEAD_TIMEOUT_METADATA, b"x" * 100),
}


class StreamStandIn:
    """What ``_open_call`` reads of an ``H2Stream``: its request headers (and, for a
    request that is not POST, ``request.method``: never here)."""

    __slots__ = ("headers", "request")

    def __init__(self, headers: list[tuple[bytes, bytes]]) -> None:
        self.headers = headers
        self.request = None


# ---------------------------------------------------------------- the code before the split


#: What ``_open_call`` returns: the context, the method, the request encoding.
Opened = tuple[ServicerContext, MethodHandler | None, str | None]


# The code replaced, complexity and all: C901 (RUF100 until C901 is on).
def before_open_call(server: Server, stream: Any) -> Opened:  # noqa: C901, RUF100
    """``Server.__call__`` before the split, up to its handler (the refusals
    raise RuntimeError: the cases here are all served)."""
    raw = stream.headers or ()
    http_method = raw_path = content_type = raw_accept = timeout = raw_encoding = None
    binary = False
    for name, value in raw:
        if name == b"content-type":
            if content_type is None:
                content_type = value
        elif name == b"grpc-accept-encoding":
            if raw_accept is None:
                raw_accept = value
        elif name == b"grpc-timeout":
            if timeout is None:
                timeout = value
        elif name == b"grpc-encoding":
            if raw_encoding is None:
                raw_encoding = value
        elif name == b":method":
            http_method = value
        elif name == b":path":
            raw_path = value
        elif name[-4:] == b"-bin":
            binary = True
    if http_method != b"POST" or not _is_grpc_content_type(content_type):
        raise RuntimeError("refused")
    path = "" if raw_path is None else raw_path.decode("utf-8", "surrogateescape")
    method = server.lookup(path)
    serializer = method.response_serializer if method else identity_serializer
    accept = _parse_accept(raw_accept)
    metadata = None
    if binary:
        metadata = metadata_from_headers(raw)
    deadline = math.inf
    if timeout is not None:
        deadline = trio.current_time() + parse_timeout(timeout)
    context = ServicerContext._create(server, stream, path, metadata, deadline, accept, serializer)
    if method is None:
        raise RuntimeError("refused")
    encoding = None if raw_encoding is None else raw_encoding.decode("utf-8", "surrogateescape")
    if encoding is not None and encoding != "identity" and encoding not in SUPPORTED_ENCODINGS:
        raise RuntimeError("refused")
    if encoding == "identity":
        encoding = None
    return context, method, encoding


class BeforeDecoder:
    """``MessageDecoder`` (buffer reuse on) as it was before the split: ``feed`` one
    loop. Only what ``feed`` uses."""

    __slots__ = ("_body", "_buf", "_filled", "_flag", "_need", "_view", "max_message_size")

    def __init__(self, max_message_size: int | None) -> None:
        self.max_message_size = max_message_size
        self._buf = bytearray()
        self._need = -1
        self._flag = 0
        self._body = _NO_BODY
        self._view = _NO_VIEW
        self._filled = -1

    def _start(self, flag: int, length: int) -> None:
        if flag > 1:
            raise ValueError(f"invalid compressed-flag {flag}")
        limit = self.max_message_size
        if limit is not None and length > limit:
            raise ValueError("too large")
        self._flag = flag
        self._need = length

    # The code replaced, complexity and all: C901 (RUF100 until C901 is on).
    def feed(self, data: bytes) -> list[tuple[bool, bytes]]:  # noqa: C901, RUF100
        end = len(data)
        filled = self._filled
        if filled >= 0:
            stop = filled + end
            if stop < self._need:
                self._view[filled:stop] = data
                self._filled = stop
                return []
        out: list[tuple[bool, bytes]] = []
        pos = 0
        buf = self._buf
        while True:
            if self._need < 0:
                if buf or end - pos < PREFIX_SIZE:
                    take = min(PREFIX_SIZE - len(buf), end - pos)
                    buf += data[pos : pos + take]
                    pos += take
                    if len(buf) < PREFIX_SIZE:
                        break
                    flag, length = _PREFIX.unpack(buf)
                    buf.clear()
                else:
                    flag, length = _PREFIX.unpack_from(data, pos)
                    pos += PREFIX_SIZE
                self._start(flag, length)
            need = self._need
            avail = end - pos
            filled = self._filled
            if filled < 0 and not buf and avail >= need:
                out.append((self._flag == 1, data[pos : pos + need]))
                pos += need
                self._need = -1
                continue
            if avail == 0:
                break
            if filled < 0 and not buf and need >= REUSE_MIN_SIZE:
                if len(self._body) < need:
                    self._body = bytearray(need)
                    self._view = memoryview(self._body)
                filled = 0
            if filled >= 0:
                take = min(need - filled, avail)
                if take == end:
                    self._view[filled : filled + take] = data
                else:
                    self._view[filled : filled + take] = memoryview(data)[pos : pos + take]
                filled += take
                pos += take
                if filled < need:
                    self._filled = filled
                    break
                body = self._body
                payload = bytes(body) if len(body) == need else bytes(self._view[:need])
                out.append((self._flag == 1, payload))
                self._filled = -1
            else:
                take = min(need - len(buf), avail)
                buf += data[pos : pos + take]
                pos += take
                if len(buf) < need:
                    break
                out.append((self._flag == 1, bytes(buf)))
                buf.clear()
            self._need = -1
        return out


# ---------------------------------------------------------------- one call's pieces, both ways

Result = tuple[Any, ...]


def split_call(server: Server, stream: Any, wire: bytes) -> Result:
    """The pieces as the library runs them now."""
    context, method, encoding = server._open_call(stream)
    decoder = MessageDecoder(server.max_receive_message_size)
    messages = decoder.feed(wire)
    framed = context._framed(messages[0][1], True)
    return context, method, encoding, messages, framed


def before_call(server: Server, stream: Any, wire: bytes) -> Result:
    """The same pieces as they were written before the split."""
    context, method, encoding = before_open_call(server, stream)
    decoder = BeforeDecoder(server.max_receive_message_size)
    messages = decoder.feed(wire)
    payload = messages[0][1]
    framed = _PREFIX.pack(0, len(payload)) + payload
    return context, method, encoding, messages, framed


def comparable(result: Result) -> Result:
    """What the two sides must agree on (a context's fields, not its identity)."""
    context, method, encoding, messages, framed = result
    fields = (context.method, context._deadline, context._accept, context._metadata)
    return (*fields, method, encoding, messages, framed)


SIDES: dict[str, Callable[[Server, Any, bytes], Result]] = {
    "split": split_call,
    "before": before_call,
}


async def _echo(request: bytes, context: ServicerContext) -> bytes:
    return request


def _time(
    fn: Callable[[Server, Any, bytes], Result], server: Server, stream: Any, wire: bytes, ops: int
) -> float:
    """ns per call of ``ops`` calls of ``fn``."""
    start = time.perf_counter_ns()
    for _ in range(ops):
        fn(server, stream, wire)
    return (time.perf_counter_ns() - start) / ops


def run(ops: int, reps: int) -> dict[str, dict[str, list[float]]]:
    """Check that the sides agree on every case, then time them; returns ns per call
    by case and side. Runs in trio (the deadline reads trio's clock: a MockClock that
    does not move, so both sides compute the same deadline)."""
    server = Server([{PATH: unary_unary_handler(_echo)}])
    timings: dict[str, dict[str, list[float]]] = {c: {s: [] for s in SIDES} for c in CASES}

    async def main() -> None:
        for case, (head, payload) in CASES.items():
            stream = StreamStandIn(head)
            wire = _PREFIX.pack(0, len(payload)) + payload
            results = {side: comparable(fn(server, stream, wire)) for side, fn in SIDES.items()}
            if results["split"] != results["before"]:
                raise SystemExit(f"grpc_server_call: the sides disagree on {case!r}: {results}")
            messages = results["split"][6]
            print(f"  {case:<28} agree ({len(messages)} message, {len(messages[0][1])} B)")
        gc.disable()
        try:
            for rep in range(reps):
                for case, (head, payload) in CASES.items():
                    stream = StreamStandIn(head)
                    wire = _PREFIX.pack(0, len(payload)) + payload
                    order = list(SIDES) if rep % 2 == 0 else list(reversed(SIDES))
                    for side in order:
                        timings[case][side].append(_time(SIDES[side], server, stream, wire, ops))
        finally:
            gc.enable()

    trio.run(main, clock=trio.testing.MockClock())
    return timings


def print_table(timings: dict[str, dict[str, list[float]]], reps: int, ops: int) -> None:
    print(f"ns per call, median of {reps} repetitions of {ops} calls (gc off)")
    print(f"  {'case':<28} {'split':>9} {'before':>9}  split/before  90 % interval")
    for case, sides in timings.items():
        c = compare(sides["split"], sides["before"])
        print(
            f"  {case:<28} {c.top:9.0f} {c.bottom:9.0f}  {c.ratio:12.3f}"
            f"  [{c.low:.3f}, {c.high:.3f}]"
        )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--ops", type=int, default=DEFAULT_OPS, help="calls per side per repetition")
    ap.add_argument("--reps", type=int, default=DEFAULT_REPS, help="repetitions (medians)")
    ap.add_argument("--quick", action="store_true", help="tiny counts: check and one repetition")
    return ap.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    ops, reps = (50, 1) if args.quick else (args.ops, args.reps)
    print(f"trio_h2t {trio_h2t.__version__}, Python {sys.version.split()[0]}")
    print("results of both sides, compared:")
    timings = run(ops, reps)
    print_table(timings, reps, ops)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
