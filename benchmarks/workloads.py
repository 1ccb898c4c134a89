"""The workloads: what each benchmark operation puts on the wire, both sides.

Each workload is a class built from the request and response sizes, with one
``client`` coroutine (a worker: it loops, one operation after another, until the
:class:`Recorder` says stop) and one ``serve`` coroutine (the server's handler for its
path). Both use trio_h2t's public API only. Every operation checks what it received,
so a workload that stopped doing its work would fail, not get faster:

``unary``
    plain HTTP/2, one stream per operation: HEADERS ``:method POST`` ``:path
    /bench/unary`` (END_STREAM on it when the request size is 0, else one body with
    END_STREAM); the server reads the body and answers ``:status 200``, a body of the
    response size (no DATA frame when 0) and the trailer ``x-bench-status: 0``. This is
    the exchange ``micro/ceiling.py`` replays between two bare h2 connections (keep the
    two in step by hand: the ceiling must not import trio).
``grpc-unary``
    a gRPC unary call: ``content-type: application/grpc`` and ``te: trailers`` on the
    request, one length-prefixed message in DATA with END_STREAM (5 bytes on the wire
    even for an empty message), the response headers with ``content-type:
    application/grpc``, one length-prefixed message, trailers ``grpc-status: 0``. Both
    sides parse the prefix and check the length; the client checks ``grpc-status``.
``streaming``
    a gRPC bidirectional stream per concurrency slot, ping-pong: the client sends one
    length-prefixed message, the server answers one; an operation is one round trip.
    Headers and trailers as ``grpc-unary``.
``grpc-layer-unary``
    what ``grpc-unary`` puts on the wire, made by trio_h2t.grpc's public ``Channel``
    (``unary_unary``) and ``Server`` (a ``unary_unary_handler`` echoing a response of
    the response size) instead of by hand: the layer's cost per call against the
    hand-framed floor (``icount.py --workload grpc-layer-unary`` beside
    ``--workload grpc-unary``). One ``Channel`` and one ``Server`` per process.
``grpc-layer-streaming``
    ``streaming`` made by trio_h2t.grpc: one ``stream_stream`` call per concurrency
    slot, ``send_message`` then ``receive_message`` per operation; the server's
    handler writes one response per request (``context.write``). The per-message
    cost of the layer against the hand-framed ``streaming``.
``bulk``
    one stream per operation moving real bytes: the client sends its request body (the
    request size, with its length and CRC-32 in headers) and the server checks both,
    then sends the response size (1 MiB unless given) in 64 KiB writes, and its CRC-32
    in the trailers; the client reads every byte and checks length and CRC-32. The
    payload is pseudo-random bytes made once per process.
"""

from __future__ import annotations

import importlib
import random
import time
import zlib
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, ClassVar

import trio_h2t

if TYPE_CHECKING:
    from trio_h2t import grpc
else:
    # Imported when a gRPC-layer workload is built, not here: run.py and icount.py
    # measure older trees of trio_h2t too, from before trio_h2t.grpc existed.
    grpc = None

__all__ = [
    "MESSAGE_PREFIX",
    "WORKLOADS",
    "Bulk",
    "GrpcLayerStreaming",
    "GrpcLayerUnary",
    "GrpcUnary",
    "Recorder",
    "Streaming",
    "Unary",
    "Workload",
    "WorkloadError",
    "grpc_message",
    "header_value",
    "make_workload",
]

HeaderList = list[tuple[bytes, bytes]]

MESSAGE_PREFIX = 5  # gRPC framing: 1 flag byte (compressed or not), 4 length bytes
GRPC_REQUEST_HEADERS: HeaderList = [(b"content-type", b"application/grpc"), (b"te", b"trailers")]
GRPC_RESPONSE_HEADERS: HeaderList = [(b":status", b"200"), (b"content-type", b"application/grpc")]
GRPC_OK: HeaderList = [(b"grpc-status", b"0")]
BULK_CHUNK = 64 * 1024  # bytes per send_data call of the bulk workload


class WorkloadError(Exception):
    """A side received something its workload does not send: the benchmark is wrong."""


def grpc_message(size: int) -> bytes:
    """A gRPC length-prefixed message of ``size`` payload bytes (uncompressed)."""
    return b"\x00" + size.to_bytes(4, "big") + b"x" * size


def header_value(headers: Sequence[tuple[bytes, bytes]] | None, name: bytes) -> bytes | None:
    """The first value of ``name`` in a raw header list, or None."""
    for key, value in headers or ():
        if key == name:
            return value
    return None


def _payload(size: int) -> bytes:
    """``size`` pseudo-random bytes, the same in every process (seeded)."""
    return random.Random(size).randbytes(size)


async def receive_message(stream: trio_h2t.H2Stream, expected: int | None = None) -> int | None:
    """Read one length-prefixed message; its payload length, or None at a clean end."""
    prefix = await stream.receive_exactly(MESSAGE_PREFIX)
    if not prefix:
        return None
    if len(prefix) < MESSAGE_PREFIX or prefix[0] != 0:
        raise WorkloadError(f"bad gRPC message prefix {prefix!r}")
    size = int.from_bytes(prefix[1:], "big")
    if size and len(await stream.receive_exactly(size)) != size:
        raise WorkloadError(f"gRPC message cut short (expected {size} bytes)")
    if expected is not None and size != expected:
        raise WorkloadError(f"gRPC message of {size} bytes, expected {expected}")
    return size


def check_grpc_status(trailers: Sequence[tuple[bytes, bytes]] | None) -> None:
    status = header_value(trailers, b"grpc-status")
    if status != b"0":
        raise WorkloadError(f"grpc-status {status!r} in the trailers {trailers!r}")


class Recorder:
    """Counts operations and keeps the latencies of those completed in the window.

    Written by the workers (``total_ops``, ``latencies``, ``bytes_moved``) and by the
    harness's run loop (the phase flags); all in one trio run, between awaits.
    """

    def __init__(self) -> None:
        self.measuring = False  # owner: run loop
        self.stopping = False  # owner: run loop
        self.phase = "warm-up"  # owner: run loop
        self.started = time.perf_counter()  # immutable after init
        self.window_start = 0.0  # owner: run loop
        self.total_ops = 0  # owner: workers; every completed operation
        self.latencies: list[float] = []  # owner: workers; operations in the window
        self.bytes_moved = 0  # owner: workers; body bytes both ways, window only (bulk)
        #: operations left to start (None: no limit; icount.py runs an exact number)
        self.budget: int | None = None  # owner: workers (set before they start)

    def take(self) -> bool:
        """May a worker start one more operation? (Called once per operation.)"""
        if self.stopping:
            return False
        if self.budget is None:
            return True
        self.budget -= 1
        return self.budget >= 0


class Workload:
    """One workload's two sides; see the module docstring."""

    name: ClassVar[str]
    path: ClassVar[str]
    default_resp_size: ClassVar[int] = 0

    def __init__(self, req_size: int, resp_size: int) -> None:
        self.req_size = req_size  # immutable after init
        self.resp_size = resp_size  # immutable after init

    async def client(self, conn: trio_h2t.ClientConnection, rec: Recorder) -> None:
        """One worker: operations back to back until ``rec.stopping``."""
        raise NotImplementedError

    async def serve(self, stream: trio_h2t.H2Stream) -> None:
        """The server's handler for one stream on :attr:`path`."""
        raise NotImplementedError


class Unary(Workload):
    name = "unary"
    path = "/bench/unary"

    response_headers: ClassVar[HeaderList] = [(b":status", b"200")]
    trailers: ClassVar[HeaderList] = [(b"x-bench-status", b"0")]

    async def client(self, conn: trio_h2t.ClientConnection, rec: Recorder) -> None:
        headers = conn.request_headers("POST", self.path)
        body = b"x" * self.req_size
        expected = self.resp_size
        perf_counter = time.perf_counter
        latencies = rec.latencies
        while rec.take():
            start = perf_counter()
            got = 0
            async with conn.open_stream(headers, end_stream=not body) as stream:
                if body:
                    await stream.send_data(body, end_stream=True)
                await stream.receive_headers()
                async for chunk in stream:
                    got += len(chunk)
            end = perf_counter()
            if got != expected:
                raise WorkloadError(f"unary response of {got} bytes, expected {expected}")
            rec.total_ops += 1
            if rec.measuring:
                latencies.append(end - start)

    async def serve(self, stream: trio_h2t.H2Stream) -> None:
        got = 0
        async for chunk in stream:
            got += len(chunk)
        if got != self.req_size:
            raise WorkloadError(f"unary request of {got} bytes, expected {self.req_size}")
        await stream.send_headers(self.response_headers)
        if self.resp_size:
            await stream.send_data(b"x" * self.resp_size)
        await stream.send_trailers(self.trailers)


class GrpcUnary(Workload):
    name = "grpc-unary"
    path = "/bench.Bench/UnaryCall"

    async def client(self, conn: trio_h2t.ClientConnection, rec: Recorder) -> None:
        headers = conn.request_headers("POST", self.path) + GRPC_REQUEST_HEADERS
        request = grpc_message(self.req_size)
        expected = self.resp_size
        perf_counter = time.perf_counter
        latencies = rec.latencies
        while rec.take():
            start = perf_counter()
            async with conn.open_stream(headers) as stream:
                await stream.send_data(request, end_stream=True)
                response = await stream.receive_headers()
                if header_value(response, b"content-type") != b"application/grpc":
                    raise WorkloadError(f"not a gRPC response: {response!r}")
                await receive_message(stream, expected)
                check_grpc_status(await stream.receive_trailers())
            end = perf_counter()
            rec.total_ops += 1
            if rec.measuring:
                latencies.append(end - start)

    async def serve(self, stream: trio_h2t.H2Stream) -> None:
        if header_value(stream.headers, b"content-type") != b"application/grpc":
            raise WorkloadError(f"not a gRPC request: {stream.headers!r}")
        await receive_message(stream, self.req_size)
        if await stream.receive_some():
            raise WorkloadError("a unary call carries one request message")
        await stream.send_headers(GRPC_RESPONSE_HEADERS)
        await stream.send_data(grpc_message(self.resp_size))
        await stream.send_trailers(GRPC_OK)


class Streaming(Workload):
    name = "streaming"
    path = "/bench.Bench/StreamingCall"

    async def client(self, conn: trio_h2t.ClientConnection, rec: Recorder) -> None:
        headers = conn.request_headers("POST", self.path) + GRPC_REQUEST_HEADERS
        request = grpc_message(self.req_size)
        expected = self.resp_size
        perf_counter = time.perf_counter
        latencies = rec.latencies
        async with conn.open_stream(headers) as stream:
            first = True
            while rec.take():
                start = perf_counter()
                await stream.send_data(request)
                if first:
                    response = await stream.receive_headers()
                    if header_value(response, b"content-type") != b"application/grpc":
                        raise WorkloadError(f"not a gRPC response: {response!r}")
                    first = False
                if await receive_message(stream, expected) is None:
                    raise WorkloadError("the server ended the stream early")
                end = perf_counter()
                rec.total_ops += 1
                if rec.measuring:
                    latencies.append(end - start)
            await stream.end()
            check_grpc_status(await stream.receive_trailers())

    async def serve(self, stream: trio_h2t.H2Stream) -> None:
        if header_value(stream.headers, b"content-type") != b"application/grpc":
            raise WorkloadError(f"not a gRPC request: {stream.headers!r}")
        await stream.send_headers(GRPC_RESPONSE_HEADERS)
        reply = grpc_message(self.resp_size)
        while await receive_message(stream, self.req_size) is not None:
            await stream.send_data(reply)
        await stream.send_trailers(GRPC_OK)


class _GrpcLayer(Workload):
    """A workload made by trio_h2t.grpc: one Channel per client connection (kept in
    a dict keyed by the connection, built by the first worker), one Server."""

    method: ClassVar[str]

    def __init__(self, req_size: int, resp_size: int) -> None:
        global grpc
        grpc = importlib.import_module("trio_h2t.grpc")
        super().__init__(req_size, resp_size)
        self.request = b"x" * req_size  # immutable after init
        self.response = b"x" * resp_size  # immutable after init
        self.server = grpc.Server([{self.path: self.method_handler()}])  # immutable after init
        # owner: the client's workers (one trio run, no await between get and set)
        self._channels: dict[int, grpc.Channel] = {}

    def method_handler(self) -> grpc.MethodHandler:
        raise NotImplementedError

    def channel(self, conn: trio_h2t.ClientConnection) -> grpc.Channel:
        channel = self._channels.get(id(conn))
        if channel is None:
            channel = self._channels[id(conn)] = grpc.Channel(conn)
        return channel

    async def serve(self, stream: trio_h2t.H2Stream) -> None:
        await self.server(stream)


class GrpcLayerUnary(_GrpcLayer):
    name = "grpc-layer-unary"
    path = "/bench.Bench/UnaryCall"

    def method_handler(self) -> grpc.MethodHandler:
        response = self.response
        req_size = self.req_size

        async def unary(request: bytes, context: grpc.ServicerContext) -> bytes:
            if len(request) != req_size:
                raise WorkloadError(f"request of {len(request)} bytes, expected {req_size}")
            return response

        return grpc.unary_unary_handler(unary)

    async def client(self, conn: trio_h2t.ClientConnection, rec: Recorder) -> None:
        call = self.channel(conn).unary_unary(self.path)
        request = self.request
        expected = self.resp_size
        perf_counter = time.perf_counter
        latencies = rec.latencies
        while rec.take():
            start = perf_counter()
            response = await call(request)
            end = perf_counter()
            if len(response) != expected:
                raise WorkloadError(f"response of {len(response)} bytes, expected {expected}")
            rec.total_ops += 1
            if rec.measuring:
                latencies.append(end - start)


class GrpcLayerStreaming(_GrpcLayer):
    name = "grpc-layer-streaming"
    path = "/bench.Bench/StreamingCall"

    def method_handler(self) -> grpc.MethodHandler:
        response = self.response
        req_size = self.req_size

        async def pingpong(requests: AsyncIterator[bytes], context: grpc.ServicerContext) -> None:
            async for request in requests:
                if len(request) != req_size:
                    raise WorkloadError(f"request of {len(request)} bytes, expected {req_size}")
                await context.write(response)

        return grpc.stream_stream_handler(pingpong)

    async def client(self, conn: trio_h2t.ClientConnection, rec: Recorder) -> None:
        method = self.channel(conn).stream_stream(self.path)
        request = self.request
        expected = self.resp_size
        perf_counter = time.perf_counter
        latencies = rec.latencies
        async with method() as call:
            while rec.take():
                start = perf_counter()
                await call.send_message(request)
                response = await call.receive_message()
                end = perf_counter()
                if len(response) != expected:
                    raise WorkloadError(f"response of {len(response)} bytes, expected {expected}")
                rec.total_ops += 1
                if rec.measuring:
                    latencies.append(end - start)
            await call.done_writing()
            async for _ in call:
                raise WorkloadError("the server answered a request never sent")
            if call.code != grpc.StatusCode.OK:
                raise WorkloadError(f"the call ended with {call.code}")


class Bulk(Workload):
    name = "bulk"
    path = "/bench/bulk"
    default_resp_size = 1024 * 1024

    def __init__(self, req_size: int, resp_size: int) -> None:
        super().__init__(req_size, resp_size)
        self.request = _payload(req_size)  # immutable after init
        self.request_crc = zlib.crc32(self.request)  # immutable after init
        response = _payload(resp_size)
        self.response_crc = zlib.crc32(response)  # immutable after init
        # Slices made once: every operation sends the same bytes objects, no copies.
        self.response_chunks = [  # immutable after init
            response[i : i + BULK_CHUNK] for i in range(0, resp_size, BULK_CHUNK)
        ]

    async def client(self, conn: trio_h2t.ClientConnection, rec: Recorder) -> None:
        extra: HeaderList = [
            (b"x-bench-length", str(self.req_size).encode()),
            (b"x-bench-crc32", str(self.request_crc).encode()),
        ]
        headers = conn.request_headers("POST", self.path) + extra
        body = self.request
        moved = self.req_size + self.resp_size
        perf_counter = time.perf_counter
        crc32 = zlib.crc32
        latencies = rec.latencies
        while rec.take():
            start = perf_counter()
            got = crc = 0
            async with conn.open_stream(headers, end_stream=not body) as stream:
                if body:
                    await stream.send_data(body, end_stream=True)
                await stream.receive_headers()
                async for chunk in stream:
                    got += len(chunk)
                    crc = crc32(chunk, crc)
                trailers = stream.trailers
            end = perf_counter()
            if (
                got != self.resp_size
                or header_value(trailers, b"x-bench-crc32") != str(crc).encode()
            ):
                raise WorkloadError(
                    f"bulk response of {got} bytes (crc {crc}), expected {self.resp_size}"
                    f" (trailers {trailers!r})"
                )
            rec.total_ops += 1
            if rec.measuring:
                latencies.append(end - start)
                rec.bytes_moved += moved

    async def serve(self, stream: trio_h2t.H2Stream) -> None:
        got = crc = 0
        async for chunk in stream:
            got += len(chunk)
            crc = zlib.crc32(chunk, crc)
        want = (
            header_value(stream.headers, b"x-bench-length"),
            header_value(stream.headers, b"x-bench-crc32"),
        )
        if want != (str(got).encode(), str(crc).encode()):
            raise WorkloadError(f"bulk request of {got} bytes (crc {crc}), expected {want!r}")
        await stream.send_headers([(b":status", b"200")])
        for chunk in self.response_chunks:
            await stream.send_data(chunk)
        await stream.send_trailers([(b"x-bench-crc32", str(self.response_crc).encode())])


WORKLOADS: dict[str, type[Workload]] = {
    w.name: w for w in (Unary, GrpcUnary, Streaming, GrpcLayerUnary, GrpcLayerStreaming, Bulk)
}


def make_workload(name: str, req_size: int | None, resp_size: int | None) -> Workload:
    """The workload ``name`` with the given sizes (None: the workload's default)."""
    cls = WORKLOADS[name]
    return cls(req_size or 0, cls.default_resp_size if resp_size is None else resp_size)
