"""grpcio on the other end of the interop tests (``tests/grpc_layer/test_interop.py``).

``python grpcio_peer.py server`` serves ``test.Echo`` with grpcio on 127.0.0.1 (a
free port), prints ``port N``, then one line per event the tests wait for
(``cancelled <method>``), until its stdin closes.

``python grpcio_peer.py client PORT CASE...`` runs grpcio client cases against a
server at 127.0.0.1:PORT and prints ``ok CASE`` or ``FAIL CASE: why`` for each; the
exit status is 0 only if every case passed.

Both sides use bytes messages (no serializers): each method's behaviour is chosen by
its name, as ``tests/grpc_layer/echo.py`` implements it for trio_h2t.grpc.
"""

from __future__ import annotations

import json
import sys
import time
import zlib
from collections.abc import Callable, Iterator
from concurrent import futures
from typing import Any

import grpc

SERVICE = "test.Echo"
CODES = {c.value[0]: c for c in grpc.StatusCode}


def _print(line: str) -> None:
    print(line, flush=True)


# ---------------------------------------------------------------------- server


def unary(request: bytes, context: Any) -> bytes:
    return request


def meta(request: bytes, context: Any) -> bytes:
    md = tuple((k, v) for k, v in context.invocation_metadata() if k.startswith("x-"))
    context.send_initial_metadata(md)
    context.set_trailing_metadata(md)
    return request


def status(request: bytes, context: Any) -> bytes:
    spec = json.loads(request)
    if spec.get("details_bin") is not None:
        context.set_trailing_metadata(
            (("grpc-status-details-bin", bytes.fromhex(spec["details_bin"])),)
        )
    context.abort(CODES[spec["code"]], spec["details"])
    return b""  # not reached


def deadline(request: bytes, context: Any) -> bytes:
    remaining = context.time_remaining()
    return b"none" if remaining is None else repr(remaining).encode()


def sleep(request: bytes, context: Any) -> bytes:
    end = time.monotonic() + float(request)
    while time.monotonic() < end and context.is_active():
        time.sleep(0.01)
    return b"slept"


def compressed(request: bytes, context: Any) -> bytes:
    context.set_compression(grpc.Compression.Gzip)
    return request


def deflated(request: bytes, context: Any) -> bytes:
    context.set_compression(grpc.Compression.Deflate)
    return request


def big(request: bytes, context: Any) -> bytes:
    return b"x" * int(request)


def count(request: bytes, context: Any) -> Iterator[bytes]:
    for i in range(int(request)):
        yield str(i).encode()


def forever(request: bytes, context: Any) -> Iterator[bytes]:
    context.add_callback(lambda: _print("cancelled /test.Echo/Forever"))
    while context.is_active():
        yield b"tick"
        time.sleep(0.05)


def concat(requests: Iterator[bytes], context: Any) -> bytes:
    return b"".join(requests)


def upper(requests: Iterator[bytes], context: Any) -> Iterator[bytes]:
    for r in requests:
        yield r.upper()


def serve() -> None:
    handler = grpc.method_handlers_generic_handler(
        SERVICE,
        {
            "Unary": grpc.unary_unary_rpc_method_handler(unary),
            "Meta": grpc.unary_unary_rpc_method_handler(meta),
            "Status": grpc.unary_unary_rpc_method_handler(status),
            "Deadline": grpc.unary_unary_rpc_method_handler(deadline),
            "Sleep": grpc.unary_unary_rpc_method_handler(sleep),
            "Compressed": grpc.unary_unary_rpc_method_handler(compressed),
            "Deflated": grpc.unary_unary_rpc_method_handler(deflated),
            "Big": grpc.unary_unary_rpc_method_handler(big),
            "Count": grpc.unary_stream_rpc_method_handler(count),
            "Forever": grpc.unary_stream_rpc_method_handler(forever),
            "Concat": grpc.stream_unary_rpc_method_handler(concat),
            "Upper": grpc.stream_stream_rpc_method_handler(upper),
        },
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16), handlers=[handler])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    _print(f"port {port}")
    sys.stdin.read()
    server.stop(0)


# ---------------------------------------------------------------------- client


def _expect_error(fn: Callable[[], Any], code: grpc.StatusCode) -> grpc.RpcError:
    try:
        fn()
    except grpc.RpcError as exc:
        if exc.code() != code:
            raise AssertionError(f"{exc.code()} ({exc.details()!r}), expected {code}") from exc
        return exc
    raise AssertionError(f"no error; expected {code}")


def case_calls(ch: grpc.Channel) -> None:
    assert ch.unary_unary("/test.Echo/Unary")(b"hello", timeout=10) == b"hello"
    assert ch.unary_unary("/test.Echo/Unary")(b"", timeout=10) == b""
    out = list(ch.unary_stream("/test.Echo/Count")(b"3", timeout=10))
    assert out == [b"0", b"1", b"2"], out
    assert ch.stream_unary("/test.Echo/Concat")(iter([b"a", b"b", b"c"]), timeout=10) == b"abc"
    out = list(ch.stream_stream("/test.Echo/Upper")(iter([b"x", b"y"]), timeout=10))
    assert out == [b"X", b"Y"], out


MIB4 = 4 * 1024 * 1024  # grpcio's and trio_h2t's default receive limit


def case_sizes(ch: grpc.Channel) -> None:
    for size in (16 * 1024, MIB4):  # a request and a response of exactly 4 MiB too
        body = bytes(range(256)) * (size // 256)
        assert ch.unary_unary("/test.Echo/Unary")(body, timeout=30) == body
    over = b"x" * (MIB4 + 1)
    _expect_error(  # over trio_h2t's default receive limit
        lambda: ch.unary_unary("/test.Echo/Unary")(over, timeout=30),
        grpc.StatusCode.RESOURCE_EXHAUSTED,
    )
    big = ch.unary_unary("/test.Echo/Big")
    assert big(str(MIB4).encode(), timeout=30) == b"x" * MIB4
    _expect_error(  # a response over grpcio's default receive limit
        lambda: big(str(MIB4 + 1).encode(), timeout=30),
        grpc.StatusCode.RESOURCE_EXHAUSTED,
    )


def case_concurrent(ch: grpc.Channel) -> None:
    """1000 calls in flight at once on the one channel (one connection)."""
    peer = ch.unary_unary("/test.Echo/Peer")
    calls = [peer.future(str(i).encode(), timeout=60) for i in range(1000)]
    got = [c.result() for c in calls]
    assert got == [str(i).encode() for i in range(1000)], got[:5]


def case_metadata(ch: grpc.Channel) -> None:
    md = (("x-text", "hello world"), ("x-data-bin", b"\x00\x01\xfe\xff"))
    resp, call = ch.unary_unary("/test.Echo/Meta").with_call(b"m", metadata=md, timeout=10)
    assert resp == b"m"
    initial = [(k, v) for k, v in call.initial_metadata() if k.startswith("x-")]
    trailing = [(k, v) for k, v in call.trailing_metadata() if k.startswith("x-")]
    assert initial == list(md), initial
    assert trailing == list(md), trailing


def case_status(ch: grpc.Channel) -> None:
    details = "caf\u00e9 100% \u2603\nline two \t end"
    spec = json.dumps({"code": 5, "details": details, "details_bin": "0805120161"})
    exc = _expect_error(
        lambda: ch.unary_unary("/test.Echo/Status")(spec.encode(), timeout=10),
        grpc.StatusCode.NOT_FOUND,
    )
    assert exc.details() == details, repr(exc.details())
    trailing = dict(exc.trailing_metadata())
    assert trailing.get("grpc-status-details-bin") == bytes.fromhex("0805120161"), trailing


def case_unimplemented(ch: grpc.Channel) -> None:
    _expect_error(
        lambda: ch.unary_unary("/test.Echo/NoSuchMethod")(b"", timeout=10),
        grpc.StatusCode.UNIMPLEMENTED,
    )
    _expect_error(
        lambda: ch.unary_unary("/no.Such/Service")(b"", timeout=10),
        grpc.StatusCode.UNIMPLEMENTED,
    )


def case_failure(ch: grpc.Channel) -> None:
    exc = _expect_error(
        lambda: ch.unary_unary("/test.Echo/Fail")(b"", timeout=10), grpc.StatusCode.UNKNOWN
    )
    assert "secret" not in exc.details(), exc.details()
    assert "Traceback" not in exc.details(), exc.details()


def case_deadline(ch: grpc.Channel) -> None:
    remaining = float(ch.unary_unary("/test.Echo/Deadline")(b"", timeout=10))
    assert 0 < remaining <= 10, remaining
    _expect_error(
        lambda: ch.unary_unary("/test.Echo/Sleep")(b"30", timeout=0.3),
        grpc.StatusCode.DEADLINE_EXCEEDED,
    )


def case_cancel(ch: grpc.Channel) -> None:
    call = ch.unary_stream("/test.Echo/Forever")(b"", timeout=30)
    assert next(call) == b"tick"
    call.cancel()
    assert call.code() == grpc.StatusCode.CANCELLED, call.code()


def case_compression(ch: grpc.Channel) -> None:
    body = b"compressible " * 2000
    for algo, name in ((grpc.Compression.Gzip, b"gzip"), (grpc.Compression.Deflate, b"deflate")):
        got = ch.unary_unary("/test.Echo/Encoding")(body, compression=algo, timeout=10)
        assert got == name + b" " + body, got[:40]
        out = list(ch.stream_stream("/test.Echo/Upper")(iter([body, b"b"]), compression=algo))
        assert out == [body.upper(), b"B"], [o[:20] for o in out]
    assert ch.unary_unary("/test.Echo/Compressed")(body, timeout=10) == body
    assert ch.unary_unary("/test.Echo/Deflated")(body, timeout=10) == body


def case_deflate_response(ch: grpc.Channel, raw: grpc.Channel) -> None:
    """The response of Deflated came deflate-compressed (on ``raw``, as on the wire)."""
    body = b"compressible " * 2000
    wire = raw.unary_unary("/test.Echo/Deflated")(body, timeout=10)
    assert wire[:1] == b"\x78", wire[:8]  # a zlib stream (RFC 1950), as grpc writes deflate
    assert zlib.decompress(wire) == body


def client(port: int, cases: list[str]) -> int:
    failed = 0
    target = f"127.0.0.1:{port}"
    # ``raw`` hands each message over as it was on the wire (grpc core's
    # GRPC_ARG_ENABLE_PER_MESSAGE_DECOMPRESSION off): compressed messages stay so.
    raw_messages = [("grpc.per_message_decompression", 0)]
    with (
        grpc.insecure_channel(target) as ch,
        grpc.insecure_channel(target, options=raw_messages) as raw,
    ):
        for name in cases:
            case = globals()[f"case_{name}"]
            try:
                if name == "deflate_response":
                    case(ch, raw)
                else:
                    case(ch)
            except Exception as exc:
                failed += 1
                _print(f"FAIL {name}: {exc!r}")
            else:
                _print(f"ok {name}")
    return 1 if failed else 0


if __name__ == "__main__":
    if sys.argv[1] == "server":
        serve()
    else:
        sys.exit(client(int(sys.argv[2]), sys.argv[3:]))
