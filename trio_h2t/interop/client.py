"""The interop client: the cases of grpc/grpc ``doc/interop-test-descriptions.md``.

Each case is a coroutine taking a ``trio_h2t.grpc.Channel``; it raises
``AssertionError`` (or RpcError) when what the description asserts does not hold.
``python -m trio_h2t.interop.client --server_host H --server_port N --test_case
NAME`` runs one case, or every case in ``CASES`` with ``--test_case all``, on one
connection: one line per case (``PASS name`` or ``FAIL name: why``), then
``N passed, M failed``; the exit status is 1 if any case failed.

The compressed-request cases send with gzip; they read the response's
Compressed-Flag through ``Call.last_message_compressed``.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import trio

import trio_h2t
from trio_h2t import grpc
from trio_h2t._shared import only_exception as _leaf

from .protos import empty_pb2, messages_pb2

__all__ = ["CASES", "main", "run_cases"]

_SERVICE = "/grpc.testing.TestService/"
ECHO_INITIAL: tuple[str, str | bytes] = ("x-grpc-test-echo-initial", "test_initial_metadata_value")
ECHO_TRAILING: tuple[str, str | bytes] = ("x-grpc-test-echo-trailing-bin", b"\xab\xab\xab")
#: How long one case may take before it fails (it is not a case's own deadline).
CASE_TIMEOUT = 30.0

M = messages_pb2
Case = Callable[[grpc.Channel], Awaitable[None]]


def _payload(size: int) -> messages_pb2.Payload:
    return M.Payload(body=bytes(size))


def _params(*sizes: int) -> list[messages_pb2.ResponseParameters]:
    return [M.ResponseParameters(size=s) for s in sizes]


def _method(ch: grpc.Channel, kind: str, name: str, req: Any, resp: Any) -> Any:
    make = getattr(ch, kind)
    return make(
        _SERVICE + name,
        request_serializer=req.SerializeToString,
        response_deserializer=resp.FromString,
    )


def _unary(ch: grpc.Channel) -> grpc.UnaryUnaryMethod[Any, Any]:
    return _method(ch, "unary_unary", "UnaryCall", M.SimpleRequest, M.SimpleResponse)  # type: ignore[no-any-return]


def _output(ch: grpc.Channel) -> grpc.UnaryStreamMethod[Any, Any]:
    return _method(  # type: ignore[no-any-return]
        ch,
        "unary_stream",
        "StreamingOutputCall",
        M.StreamingOutputCallRequest,
        M.StreamingOutputCallResponse,
    )


def _input(ch: grpc.Channel) -> grpc.StreamUnaryMethod[Any, Any]:
    return _method(  # type: ignore[no-any-return]
        ch,
        "stream_unary",
        "StreamingInputCall",
        M.StreamingInputCallRequest,
        M.StreamingInputCallResponse,
    )


def _duplex(ch: grpc.Channel) -> grpc.StreamStreamMethod[Any, Any]:
    return _method(  # type: ignore[no-any-return]
        ch,
        "stream_stream",
        "FullDuplexCall",
        M.StreamingOutputCallRequest,
        M.StreamingOutputCallResponse,
    )


def _check(cond: bool, what: str) -> None:
    if not cond:
        raise AssertionError(what)


def _check_body(payload: messages_pb2.Payload, size: int) -> None:
    body = payload.body
    _check(len(body) == size, f"payload body is {len(body)} bytes, expected {size}")
    _check(body == bytes(size), "payload body is not all zeros")


async def _expect_status(
    code: grpc.StatusCode, fn: Callable[[], Awaitable[Any]], details: str | None = None
) -> grpc.RpcError:
    try:
        await fn()
    except grpc.RpcError as exc:
        _check(exc.code == code, f"status {exc.code.name} ({exc.details!r}), expected {code.name}")
        if details is not None:
            _check(exc.details == details, f"status message {exc.details!r}, expected {details!r}")
        return exc
    raise AssertionError(f"the call succeeded; expected {code.name}")


# ---------------------------------------------------------------------- cases


async def empty_unary(ch: grpc.Channel) -> None:
    """EmptyCall with an empty request: an empty response."""
    method = ch.unary_unary(
        _SERVICE + "EmptyCall",
        request_serializer=empty_pb2.Empty.SerializeToString,
        response_deserializer=empty_pb2.Empty.FromString,
    )
    resp = await method(empty_pb2.Empty())
    _check(isinstance(resp, empty_pb2.Empty), f"response is {type(resp).__name__}")
    _check(resp.ByteSize() == 0, "the response is not empty")


async def large_unary(ch: grpc.Channel) -> None:
    """UnaryCall 271828 B in, 314159 zero bytes back."""
    req = M.SimpleRequest(response_size=314159, payload=_payload(271828))
    resp = await _unary(ch)(req)
    _check_body(resp.payload, 314159)


async def client_compressed_unary(ch: grpc.Channel) -> None:
    """The probe (expect_compressed, sent uncompressed) fails INVALID_ARGUMENT; a
    compressed request expecting compression and an uncompressed one not expecting
    it both succeed."""
    unary = _unary(ch)

    def req(expect: bool) -> messages_pb2.SimpleRequest:
        return M.SimpleRequest(
            expect_compressed=M.BoolValue(value=expect),
            response_size=314159,
            payload=_payload(271828),
        )

    await _expect_status(
        grpc.StatusCode.INVALID_ARGUMENT, lambda: unary(req(True), compression=None)
    )
    resp = await unary(req(True), compression="gzip")
    _check_body(resp.payload, 314159)
    resp = await unary(req(False), compression=None)
    _check_body(resp.payload, 314159)


async def server_compressed_unary(ch: grpc.Channel) -> None:
    """response_compressed true: the response's Compressed-Flag is set; false: clear."""
    unary = _unary(ch)
    for compressed in (True, False):
        req = M.SimpleRequest(
            response_compressed=M.BoolValue(value=compressed),
            response_size=314159,
            payload=_payload(271828),
        )
        resp, call = await unary.with_call(req)
        _check(
            call.last_message_compressed is compressed,
            f"response_compressed={compressed}: the flag is {call.last_message_compressed}",
        )
        _check_body(resp.payload, 314159)


async def client_streaming(ch: grpc.Channel) -> None:
    """StreamingInputCall with 27182, 8, 1828 and 45904 B: aggregated 74922."""
    reqs = [M.StreamingInputCallRequest(payload=_payload(n)) for n in (27182, 8, 1828, 45904)]
    resp = await _input(ch)(reqs)
    _check(resp.aggregated_payload_size == 74922, f"aggregated {resp.aggregated_payload_size}")


async def client_compressed_streaming(ch: grpc.Channel) -> None:
    """The probe fails INVALID_ARGUMENT; then a compressed and an uncompressed
    message on one call: aggregated 73086."""
    method = _input(ch)

    def req(expect: bool, size: int) -> messages_pb2.StreamingInputCallRequest:
        return M.StreamingInputCallRequest(
            expect_compressed=M.BoolValue(value=expect), payload=_payload(size)
        )

    async def probe() -> None:
        async with method.open(compression=None) as call:
            await call.send_message(req(True, 27182))
            await call.done_writing()
            await call.receive_response()

    await _expect_status(grpc.StatusCode.INVALID_ARGUMENT, probe)
    async with method.open(compression="gzip") as call:
        await call.send_message(req(True, 27182))
        await call.send_message(req(False, 45904), compress=False)
        await call.done_writing()
        resp = await call.receive_response()
    _check(resp.aggregated_payload_size == 73086, f"aggregated {resp.aggregated_payload_size}")


async def server_streaming(ch: grpc.Channel) -> None:
    """StreamingOutputCall: four responses of 31415, 9, 2653 and 58979 zero bytes."""
    sizes = (31415, 9, 2653, 58979)
    req = M.StreamingOutputCallRequest(response_parameters=_params(*sizes))
    async with _output(ch)(req) as call:
        got = [r async for r in call]
    _check(len(got) == len(sizes), f"{len(got)} responses, expected {len(sizes)}")
    for resp, size in zip(got, sizes, strict=True):
        _check_body(resp.payload, size)
    _check(call.code == grpc.StatusCode.OK, f"status {call.code}")


async def server_compressed_streaming(ch: grpc.Channel) -> None:
    """Two responses, the first with its Compressed-Flag set, the second clear."""
    params = [
        M.ResponseParameters(compressed=M.BoolValue(value=True), size=31415),
        M.ResponseParameters(compressed=M.BoolValue(value=False), size=92653),
    ]
    req = M.StreamingOutputCallRequest(response_parameters=params)
    flags: list[bool | None] = []
    got = []
    async with _output(ch)(req) as call:
        async for resp in call:
            got.append(resp)
            flags.append(call.last_message_compressed)
    _check(len(got) == 2, f"{len(got)} responses, expected 2")
    _check(flags == [True, False], f"compressed flags {flags}, expected [True, False]")
    _check_body(got[0].payload, 31415)
    _check_body(got[1].payload, 92653)
    _check(call.code == grpc.StatusCode.OK, f"status {call.code}")


async def ping_pong(ch: grpc.Channel) -> None:
    """FullDuplexCall, one request then its response, four times; then OK."""
    pairs = ((31415, 27182), (9, 8), (2653, 1828), (58979, 45904))
    async with _duplex(ch).open() as call:
        for size, body in pairs:
            await call.send_message(
                M.StreamingOutputCallRequest(
                    response_parameters=_params(size), payload=_payload(body)
                )
            )
            resp = await call.receive_message()
            _check_body(resp.payload, size)
        await call.done_writing()
        try:
            extra = await call.receive_message()
        except trio.EndOfChannel:
            pass
        else:
            raise AssertionError(f"a fifth response: {extra!r}")
    _check(call.code == grpc.StatusCode.OK, f"status {call.code}")


async def empty_stream(ch: grpc.Channel) -> None:
    """FullDuplexCall half-closed at once: zero responses, OK."""
    async with _duplex(ch).open() as call:
        await call.done_writing()
        got = [r async for r in call]
    _check(got == [], f"{len(got)} responses, expected none")
    _check(call.code == grpc.StatusCode.OK, f"status {call.code}")


async def cancel_after_begin(ch: grpc.Channel) -> None:
    """StreamingInputCall cancelled before any message: CANCELLED."""
    async with _input(ch).open() as call:
        call.cancel()
        await _expect_status(grpc.StatusCode.CANCELLED, call.receive_response)
    _check(call.code == grpc.StatusCode.CANCELLED, f"status {call.code}")


async def cancel_after_first_response(ch: grpc.Channel) -> None:
    """FullDuplexCall cancelled after its first response: CANCELLED."""
    async with _duplex(ch).open() as call:
        await call.send_message(
            M.StreamingOutputCallRequest(
                response_parameters=_params(31415), payload=_payload(27182)
            )
        )
        resp = await call.receive_message()
        _check_body(resp.payload, 31415)
        call.cancel()
        await _expect_status(grpc.StatusCode.CANCELLED, call.receive_message)
    _check(call.code == grpc.StatusCode.CANCELLED, f"status {call.code}")


async def timeout_on_sleeping_server(ch: grpc.Channel) -> None:
    """FullDuplexCall with a 1 ms timeout: DEADLINE_EXCEEDED."""

    async def run() -> None:
        async with _duplex(ch).open(timeout=0.001) as call:
            # The description allows the send to fail already.
            with contextlib.suppress(grpc.RpcError):
                await call.send_message(M.StreamingOutputCallRequest(payload=_payload(27182)))
            await call.receive_message()

    await _expect_status(grpc.StatusCode.DEADLINE_EXCEEDED, run)


async def _status_case(ch: grpc.Channel, code: int, message: str) -> None:
    status = M.EchoStatus(code=code, message=message)
    expected = grpc.StatusCode(code)
    await _expect_status(
        expected, lambda: _unary(ch)(M.SimpleRequest(response_status=status)), message
    )

    async def duplex() -> None:
        async with _duplex(ch).open() as call:
            await call.send_message(M.StreamingOutputCallRequest(response_status=status))
            await call.done_writing()
            await call.receive_message()

    await _expect_status(expected, duplex, message)


async def status_code_and_message(ch: grpc.Channel) -> None:
    """Echo Status over UnaryCall and FullDuplexCall: code 2, "test status message"."""
    await _status_case(ch, 2, "test status message")


async def special_status_message(ch: grpc.Channel) -> None:
    """Echo Status with whitespace and BMP and non-BMP characters, exactly."""
    message = "\t\ntest with whitespace\r\nand Unicode BMP \u263a and non-BMP \U0001f608\t\n"
    status = M.EchoStatus(code=2, message=message)
    await _expect_status(
        grpc.StatusCode.UNKNOWN,
        lambda: _unary(ch)(M.SimpleRequest(response_status=status)),
        message,
    )


async def custom_metadata(ch: grpc.Channel) -> None:
    """Echo Metadata over UnaryCall and FullDuplexCall: the text key comes back in
    the initial metadata, the -bin key in the trailing metadata."""
    md = [ECHO_INITIAL, ECHO_TRAILING]

    def check(initial: grpc.Metadata, trailing: grpc.Metadata | None) -> None:
        _check(ECHO_INITIAL in list(initial), f"initial metadata {list(initial)}")
        _check(ECHO_TRAILING in list(trailing or ()), f"trailing metadata {trailing}")

    req = M.SimpleRequest(response_size=314159, payload=_payload(271828))
    resp, call = await _unary(ch).with_call(req, metadata=md)
    _check_body(resp.payload, 314159)
    check(await call.initial_metadata(), call.trailing_metadata)
    dreq = M.StreamingOutputCallRequest(
        response_parameters=_params(314159), payload=_payload(271828)
    )
    async with _duplex(ch).open(metadata=md) as dcall:
        await dcall.send_message(dreq)
        await dcall.done_writing()
        got = [r async for r in dcall]
    _check(len(got) == 1, f"{len(got)} responses, expected 1")
    _check_body(got[0].payload, 314159)
    check(await dcall.initial_metadata(), dcall.trailing_metadata)


async def _empty_call(ch: grpc.Channel, path: str) -> None:
    method = ch.unary_unary(
        path,
        request_serializer=empty_pb2.Empty.SerializeToString,
        response_deserializer=empty_pb2.Empty.FromString,
    )
    await _expect_status(grpc.StatusCode.UNIMPLEMENTED, lambda: method(empty_pb2.Empty()))


async def unimplemented_method(ch: grpc.Channel) -> None:
    """grpc.testing.TestService/UnimplementedCall: UNIMPLEMENTED."""
    await _empty_call(ch, _SERVICE + "UnimplementedCall")


async def unimplemented_service(ch: grpc.Channel) -> None:
    """grpc.testing.UnimplementedService/UnimplementedCall: UNIMPLEMENTED."""
    await _empty_call(ch, "/grpc.testing.UnimplementedService/UnimplementedCall")


#: Every case, in the description's order, by its ``--test_case`` name.
CASES: dict[str, Case] = {
    f.__name__: f
    for f in (
        empty_unary,
        large_unary,
        client_compressed_unary,
        server_compressed_unary,
        client_streaming,
        client_compressed_streaming,
        server_streaming,
        server_compressed_streaming,
        ping_pong,
        empty_stream,
        cancel_after_begin,
        cancel_after_first_response,
        timeout_on_sleeping_server,
        status_code_and_message,
        special_status_message,
        custom_metadata,
        unimplemented_method,
        unimplemented_service,
    )
}


async def run_cases(
    host: str, port: int, names: Sequence[str], out: Callable[[str], None] = print
) -> tuple[int, int]:
    """Run the named cases on one channel to ``host:port``; print one line each
    and the summary; return ``(passed, failed)``.

    Checkpoint: always. On cancellation: the channel closes; nothing is printed
    for the case in progress.
    """
    passed = failed = 0
    async with grpc.open_channel(host, port) as ch:
        for name in names:
            try:
                with trio.fail_after(CASE_TIMEOUT):
                    await CASES[name](ch)
            except (AssertionError, grpc.RpcError, trio.TooSlowError) as exc:
                failed += 1
                out(f"FAIL {name}: {exc!r}")
            else:
                passed += 1
                out(f"PASS {name}")
    out(f"{passed} passed, {failed} failed")
    return passed, failed


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (grpc/grpc's interop client flags; plaintext only)."""
    parser = argparse.ArgumentParser(prog="python -m trio_h2t.interop.client")
    parser.add_argument("--server_host", default="localhost")
    parser.add_argument("--server_port", type=int, required=True)
    parser.add_argument("--test_case", default="large_unary", help="a case name, or all")
    parser.add_argument("--use_tls", default="false", choices=["true", "false"])
    args = parser.parse_args(argv)
    if args.use_tls == "true":
        parser.error("--use_tls=true is not supported (plaintext h2c only)")
    if args.test_case == "all":
        names = list(CASES)
    elif args.test_case in CASES:
        names = [args.test_case]
    else:
        parser.error(f"unknown --test_case {args.test_case!r}; known: all, {', '.join(CASES)}")

    def out(line: str) -> None:
        print(line, flush=True)

    try:
        _, failed = trio.run(run_cases, args.server_host, args.server_port, names, out)
    except BaseException as exc:
        leaf = _leaf(exc)
        if isinstance(leaf, KeyboardInterrupt):
            return 130
        if isinstance(leaf, trio_h2t.ConnectionLostError):  # could not connect, or lost it
            print(f"{parser.prog}: {leaf}", file=sys.stderr)
            return 1
        raise
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
