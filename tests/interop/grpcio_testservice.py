"""grpcio on the other end of tests/interop/test_interop_service.py.

``python grpcio_testservice.py server`` serves ``grpc.testing.TestService`` with
grpcio's sync server (a thread pool) on 127.0.0.1 (a free port), prints
``port N``, and serves until its stdin closes.

``python grpcio_testservice.py client PORT CASE...`` runs grpcio's sync stubs
through the named interop cases against 127.0.0.1:PORT, one line per case
(``PASS name`` / ``FAIL name: why``); the exit status is 0 only if all passed.

Both use the messages of ``trio_h2t.interop.protos`` and grpcio's service stubs
(``test_pb2_grpc``, generated into a directory on PYTHONPATH by
``scripts/gen_interop_protos.py --grpc-out``).
"""

from __future__ import annotations

import queue
import sys
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from typing import Any

import grpc
import test_pb2_grpc  # type: ignore[import-not-found]

from trio_h2t.interop.protos import empty_pb2, messages_pb2 as M

ECHO_INITIAL = "x-grpc-test-echo-initial"
ECHO_TRAILING = "x-grpc-test-echo-trailing-bin"


def _print(line: str) -> None:
    print(line, flush=True)


# ---------------------------------------------------------------------- server


def _echo(context: Any) -> None:
    md = context.invocation_metadata()
    initial = tuple((k, v) for k, v in md if k == ECHO_INITIAL)
    trailing = tuple((k, v) for k, v in md if k == ECHO_TRAILING)
    if trailing:
        context.set_trailing_metadata(trailing)
    if initial:
        context.send_initial_metadata(initial)


def _abort_if(status: M.EchoStatus, context: Any) -> None:
    if status.code != 0:
        codes = {c.value[0]: c for c in grpc.StatusCode}
        context.abort(codes[status.code], status.message)


def _responses(params: Any, context: Any) -> Iterator[M.StreamingOutputCallResponse]:
    for p in params:
        if p.interval_us:
            time.sleep(p.interval_us / 1e6)
        if p.HasField("compressed") and not p.compressed.value:
            context.disable_next_message_compression()
        yield M.StreamingOutputCallResponse(payload=M.Payload(body=bytes(p.size)))


class Servicer(test_pb2_grpc.TestServiceServicer):  # type: ignore[misc]
    """TestService as grpc/grpc doc/interop-test-descriptions.md "Server" asks.

    grpcio's server API does not expose a request's Compressed-Flag, so
    ``expect_compressed`` (CompressedRequest) is not checked here (grpcio's own
    Python interop server does not implement it either).
    """

    def EmptyCall(self, request: Any, context: Any) -> empty_pb2.Empty:
        _echo(context)
        return empty_pb2.Empty()

    def UnaryCall(self, request: M.SimpleRequest, context: Any) -> M.SimpleResponse:
        if request.HasField("response_compressed"):
            on = request.response_compressed.value
            context.set_compression(grpc.Compression.Gzip if on else grpc.Compression.NoCompression)
        _echo(context)
        _abort_if(request.response_status, context)
        return M.SimpleResponse(payload=M.Payload(body=bytes(request.response_size)))

    def StreamingOutputCall(self, request: Any, context: Any) -> Iterator[Any]:
        if any(p.HasField("compressed") for p in request.response_parameters):
            context.set_compression(grpc.Compression.Gzip)
        _echo(context)
        yield from _responses(request.response_parameters, context)
        _abort_if(request.response_status, context)

    def StreamingInputCall(self, requests: Iterator[Any], context: Any) -> Any:
        _echo(context)
        total = sum(len(r.payload.body) for r in requests)
        return M.StreamingInputCallResponse(aggregated_payload_size=total)

    def FullDuplexCall(self, requests: Iterator[Any], context: Any) -> Iterator[Any]:
        _echo(context)
        for request in requests:
            _abort_if(request.response_status, context)
            yield from _responses(request.response_parameters, context)


def serve() -> None:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    test_pb2_grpc.add_TestServiceServicer_to_server(Servicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    _print(f"port {port}")
    sys.stdin.read()
    server.stop(0)


# ---------------------------------------------------------------------- client
# The checks of doc/interop-test-descriptions.md, compactly, with grpcio's stubs.
# grpcio's client API cannot read a response's Compressed-Flag: the
# server_compressed_* cases check everything else (sizes, order, status) and that
# the call was asked to compress; trio_h2t's own client checks the flag.

T = 30  # seconds: each call's bound


def _zeros(n: int) -> M.Payload:
    return M.Payload(body=bytes(n))


def _expect(code: grpc.StatusCode, fn: Callable[[], Any], details: str | None = None) -> None:
    try:
        fn()
    except grpc.RpcError as exc:
        if exc.code() != code:
            raise AssertionError(f"{exc.code()} ({exc.details()!r}), expected {code}") from exc
        if details is not None and exc.details() != details:
            raise AssertionError(f"details {exc.details()!r}, expected {details!r}") from exc
        return
    raise AssertionError(f"no error; expected {code}")


def _sizes(responses: Any, sizes: list[int]) -> None:
    got = [r.payload.body for r in responses]
    assert [len(b) for b in got] == sizes, [len(b) for b in got]
    assert all(b == bytes(len(b)) for b in got)


def empty_unary(stub: Any, ch: grpc.Channel) -> None:
    assert stub.EmptyCall(empty_pb2.Empty(), timeout=T).ByteSize() == 0


def _large() -> M.SimpleRequest:
    return M.SimpleRequest(response_size=314159, payload=_zeros(271828))


def large_unary(stub: Any, ch: grpc.Channel) -> None:
    _sizes([stub.UnaryCall(_large(), timeout=T)], [314159])


def client_compressed_unary(stub: Any, ch: grpc.Channel) -> None:
    def req(expect: bool) -> M.SimpleRequest:
        r = _large()
        r.expect_compressed.value = expect
        return r

    _expect(grpc.StatusCode.INVALID_ARGUMENT, lambda: stub.UnaryCall(req(True), timeout=T))
    _sizes([stub.UnaryCall(req(True), compression=grpc.Compression.Gzip, timeout=T)], [314159])
    _sizes([stub.UnaryCall(req(False), timeout=T)], [314159])


def server_compressed_unary(stub: Any, ch: grpc.Channel) -> None:
    for on in (True, False):
        r = _large()
        r.response_compressed.value = on
        _sizes([stub.UnaryCall(r, timeout=T)], [314159])


def client_streaming(stub: Any, ch: grpc.Channel) -> None:
    reqs = [M.StreamingInputCallRequest(payload=_zeros(n)) for n in (27182, 8, 1828, 45904)]
    assert stub.StreamingInputCall(iter(reqs), timeout=T).aggregated_payload_size == 74922


def server_streaming(stub: Any, ch: grpc.Channel) -> None:
    sizes = [31415, 9, 2653, 58979]
    req = M.StreamingOutputCallRequest(
        response_parameters=[M.ResponseParameters(size=s) for s in sizes]
    )
    _sizes(list(stub.StreamingOutputCall(req, timeout=T)), sizes)


def server_compressed_streaming(stub: Any, ch: grpc.Channel) -> None:
    params = [
        M.ResponseParameters(size=31415, compressed=M.BoolValue(value=True)),
        M.ResponseParameters(size=92653, compressed=M.BoolValue(value=False)),
    ]
    req = M.StreamingOutputCallRequest(response_parameters=params)
    _sizes(list(stub.StreamingOutputCall(req, timeout=T)), [31415, 92653])


class _Feed:
    """Requests for a bidi call, handed over one at a time (blocking iterator)."""

    def __init__(self) -> None:
        self._q: queue.Queue[Any] = queue.Queue()

    def put(self, item: Any) -> None:
        self._q.put(item)

    def close(self) -> None:
        self._q.put(None)

    def __iter__(self) -> Iterator[Any]:
        while (item := self._q.get()) is not None:
            yield item


def _dreq(size: int, body: int) -> M.StreamingOutputCallRequest:
    return M.StreamingOutputCallRequest(
        response_parameters=[M.ResponseParameters(size=size)], payload=_zeros(body)
    )


def ping_pong(stub: Any, ch: grpc.Channel) -> None:
    feed = _Feed()
    call = stub.FullDuplexCall(iter(feed), timeout=T)
    for size, body in ((31415, 27182), (9, 8), (2653, 1828), (58979, 45904)):
        feed.put(_dreq(size, body))
        _sizes([next(call)], [size])
    feed.close()
    assert list(call) == []
    assert call.code() == grpc.StatusCode.OK


def empty_stream(stub: Any, ch: grpc.Channel) -> None:
    assert list(stub.FullDuplexCall(iter([]), timeout=T)) == []


def cancel_after_begin(stub: Any, ch: grpc.Channel) -> None:
    feed = _Feed()
    future = stub.StreamingInputCall.future(iter(feed), timeout=T)
    future.cancel()
    feed.close()
    assert future.cancelled()
    assert future.code() == grpc.StatusCode.CANCELLED, future.code()


def cancel_after_first_response(stub: Any, ch: grpc.Channel) -> None:
    feed = _Feed()
    call = stub.FullDuplexCall(iter(feed), timeout=T)
    feed.put(_dreq(31415, 27182))
    _sizes([next(call)], [31415])
    call.cancel()
    feed.close()
    assert call.code() == grpc.StatusCode.CANCELLED, call.code()


def timeout_on_sleeping_server(stub: Any, ch: grpc.Channel) -> None:
    feed = _Feed()
    call = stub.FullDuplexCall(iter(feed), timeout=0.001)
    feed.put(M.StreamingOutputCallRequest(payload=_zeros(27182)))
    _expect(grpc.StatusCode.DEADLINE_EXCEEDED, lambda: list(call))
    feed.close()


def _status(stub: Any, message: str, duplex: bool) -> None:
    status = M.EchoStatus(code=2, message=message)
    _expect(
        grpc.StatusCode.UNKNOWN,
        lambda: stub.UnaryCall(M.SimpleRequest(response_status=status), timeout=T),
        message,
    )
    if duplex:
        req = M.StreamingOutputCallRequest(response_status=status)
        _expect(
            grpc.StatusCode.UNKNOWN,
            lambda: list(stub.FullDuplexCall(iter([req]), timeout=T)),
            message,
        )


def status_code_and_message(stub: Any, ch: grpc.Channel) -> None:
    _status(stub, "test status message", duplex=True)


def special_status_message(stub: Any, ch: grpc.Channel) -> None:
    msg = "\t\ntest with whitespace\r\nand Unicode BMP \u263a and non-BMP \U0001f608\t\n"
    _status(stub, msg, duplex=False)


def custom_metadata(stub: Any, ch: grpc.Channel) -> None:
    md = ((ECHO_INITIAL, "test_initial_metadata_value"), (ECHO_TRAILING, b"\xab\xab\xab"))
    resp, call = stub.UnaryCall.with_call(_large(), metadata=md, timeout=T)
    _sizes([resp], [314159])
    assert md[0] in call.initial_metadata(), call.initial_metadata()
    assert md[1] in call.trailing_metadata(), call.trailing_metadata()
    dcall = stub.FullDuplexCall(iter([_dreq(314159, 271828)]), metadata=md, timeout=T)
    _sizes(list(dcall), [314159])
    assert md[0] in dcall.initial_metadata(), dcall.initial_metadata()
    assert md[1] in dcall.trailing_metadata(), dcall.trailing_metadata()


def unimplemented_method(stub: Any, ch: grpc.Channel) -> None:
    _expect(
        grpc.StatusCode.UNIMPLEMENTED,
        lambda: stub.UnimplementedCall(empty_pb2.Empty(), timeout=T),
    )


def unimplemented_service(stub: Any, ch: grpc.Channel) -> None:
    other = test_pb2_grpc.UnimplementedServiceStub(ch)
    _expect(
        grpc.StatusCode.UNIMPLEMENTED,
        lambda: other.UnimplementedCall(empty_pb2.Empty(), timeout=T),
    )


def client(port: int, cases: list[str]) -> int:
    failed = 0
    with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
        stub = test_pb2_grpc.TestServiceStub(ch)
        for name in cases:
            try:
                globals()[name](stub, ch)
            except Exception as exc:
                failed += 1
                _print(f"FAIL {name}: {exc!r}")
            else:
                _print(f"PASS {name}")
    return 1 if failed else 0


if __name__ == "__main__":
    if sys.argv[1] == "server":
        serve()
    else:
        sys.exit(client(int(sys.argv[2]), sys.argv[3:]))
