"""trio_h2t.grpc's client against its server: calls, metadata, deadlines,
cancellation, status, limits, compression, the registry and channel close.

Most tests run over ``trio.testing.memory_stream_pair`` (with the autojump clock
where time matters); the peer-address test uses TCP on 127.0.0.1.
"""

from __future__ import annotations

import functools
import logging
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import h2.events
import pytest
import trio
import trio.testing

import trio_h2t
from trio_h2t import grpc

from .echo import Echo

LIMIT = 30


@asynccontextmanager
async def grpc_pair(
    server: grpc.Server | trio_h2t.Handler, **channel_options: Any
) -> AsyncIterator[grpc.Channel]:
    """A Channel connected to ``server`` over a memory stream pair."""
    client_t, server_t = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio_h2t.serve_connection, server_t, server)
        async with trio_h2t.open_client_connection(client_t) as conn:
            channel = grpc.Channel(conn, **channel_options)
            yield channel
            await channel.aclose()


@asynccontextmanager
async def echo_pair(**channel_options: Any) -> AsyncIterator[tuple[grpc.Channel, Echo]]:
    echo = Echo()
    async with grpc_pair(grpc.Server([echo]), **channel_options) as channel:
        yield channel, echo


# ---------------------------------------------------------------------- calls


async def test_four_call_types() -> None:
    """Unary-unary, unary-stream, stream-unary (sync and async iterables), stream-stream."""

    async def agen() -> AsyncIterator[bytes]:
        yield b"x"
        yield b"yz"

    with trio.fail_after(LIMIT):
        async with echo_pair() as (ch, _):
            assert await ch.unary_unary("/test.Echo/Unary")(b"hi") == b"hi"
            async with ch.unary_stream("/test.Echo/Count")(b"4") as call:
                assert [m async for m in call] == [b"0", b"1", b"2", b"3"]
            assert call.code == grpc.StatusCode.OK
            assert call.details == ""
            assert await ch.stream_unary("/test.Echo/Concat")([b"a", b"b"]) == b"ab"
            assert await ch.stream_unary("/test.Echo/Concat")(agen()) == b"xyz"
            assert await ch.stream_unary("/test.Echo/Concat")([]) == b""
            async with ch.stream_stream("/test.Echo/Upper")(agen()) as call:
                assert [m async for m in call] == [b"X", b"YZ"]
            async with ch.stream_unary("/test.Echo/Concat").open() as call:
                await call.send_message(b"1")
                await call.send_message(b"2")
                await call.done_writing()
                assert await call.receive_response() == b"12"


async def test_protobuf_messages(tmp_path: Any) -> None:
    """Messages of a .proto compiled at test time go through SerializeToString/FromString."""
    import importlib
    import sys

    from grpc_tools import protoc

    (tmp_path / "hello.proto").write_text(
        'syntax = "proto3"; package hello;'
        " message Req { string name = 1; repeated int32 nums = 2; }"
        " message Resp { string greeting = 1; int64 total = 2; }"
    )
    assert protoc.main(["protoc", f"-I{tmp_path}", f"--python_out={tmp_path}", "hello.proto"]) == 0
    sys.path.insert(0, str(tmp_path))
    try:
        pb: Any = importlib.import_module("hello_pb2")
    finally:
        sys.path.remove(str(tmp_path))

    async def say(request: Any, context: grpc.ServicerContext) -> Any:
        return pb.Resp(greeting=f"hello {request.name}", total=sum(request.nums))

    server = grpc.Server(
        [
            {
                "/hello.Greeter/Say": grpc.unary_unary_handler(
                    say,
                    request_deserializer=pb.Req.FromString,
                    response_serializer=pb.Resp.SerializeToString,
                )
            }
        ]
    )
    with trio.fail_after(LIMIT):
        async with grpc_pair(server) as ch:
            say_stub = ch.unary_unary(
                "/hello.Greeter/Say",
                request_serializer=pb.Req.SerializeToString,
                response_deserializer=pb.Resp.FromString,
            )
            reply = await say_stub(pb.Req(name="trio", nums=[1, 2, 3]))
    assert reply.greeting == "hello trio"
    assert reply.total == 6


async def test_registry_forms_and_unknown_methods() -> None:
    """Generic handlers, path mappings and service objects; unknown paths UNIMPLEMENTED."""

    async def one(request: bytes, context: grpc.ServicerContext) -> bytes:
        return b"one"

    async def two(request: bytes, context: grpc.ServicerContext) -> bytes:
        return b"two"

    server = grpc.Server(
        [
            grpc.method_handlers_generic_handler("a.A", {"One": grpc.unary_unary_handler(one)}),
            {"/b.B/Two": grpc.unary_unary_handler(two)},
            Echo(),
        ]
    )
    with trio.fail_after(LIMIT):
        async with grpc_pair(server) as ch:
            assert await ch.unary_unary("/a.A/One")(b"") == b"one"
            assert await ch.unary_unary("/b.B/Two")(b"") == b"two"
            assert await ch.unary_unary("/test.Echo/Unary")(b"e") == b"e"
            for path, what in [
                ("/a.A/Nope", "unknown method Nope for service a.A"),
                ("/test.Echo/Nope", "unknown method Nope for service test.Echo"),
                ("/zz.Z/One", "unknown service zz.Z"),
            ]:
                with pytest.raises(grpc.RpcError) as info:
                    await ch.unary_unary(path)(b"")
                assert info.value.code == grpc.StatusCode.UNIMPLEMENTED
                assert info.value.details == what
    with pytest.raises(ValueError, match="@rpc"):
        grpc.Server().add_service(object(), "x.X")
    with pytest.raises(TypeError, match="SERVICE_NAME"):
        grpc.Server([object()])


# ---------------------------------------------------------------------- metadata


async def test_metadata_both_ways() -> None:
    """Channel and call metadata reach the handler; initial/trailing metadata come back."""
    seen: list[grpc.Metadata] = []

    async def meta(request: bytes, context: grpc.ServicerContext) -> bytes:
        seen.append(context.invocation_metadata)
        await context.send_initial_metadata([("x-init", "1"), ("x-init-bin", b"\x00")])
        context.set_trailing_metadata({"x-trail": "2"})
        return b"ok"

    server = grpc.Server([{"/m.M/Meta": grpc.unary_unary_handler(meta)}])
    with trio.fail_after(LIMIT):
        async with grpc_pair(server, metadata=[("x-channel", "c")]) as ch:
            resp, call = await ch.unary_unary("/m.M/Meta").with_call(
                b"", metadata=[("x-call", "v"), ("x-call-bin", b"\xff\x00")]
            )
    assert resp == b"ok"
    md = seen[0]
    assert md.get_all("x-channel") == ["c"]
    assert md["x-call"] == "v"
    assert md["x-call-bin"] == b"\xff\x00"
    assert str(md["user-agent"]).startswith("trio_h2t-grpc/")
    assert "grpc-timeout" not in md
    assert "content-type" not in md
    assert await call.initial_metadata() == [("x-init", "1"), ("x-init-bin", b"\x00")]
    assert call.trailing_metadata == [("x-trail", "2")]


async def test_reserved_metadata_is_refused_by_the_client() -> None:
    """A call with a grpc-* key fails with ValueError before anything is sent."""
    with trio.fail_after(LIMIT):
        async with echo_pair() as (ch, _):
            with pytest.raises(ValueError, match="reserved"):
                await ch.unary_unary("/test.Echo/Unary")(b"", metadata=[("grpc-x", "1")])
            assert await ch.unary_unary("/test.Echo/Unary")(b"after") == b"after"


# ---------------------------------------------------------------------- status


async def test_handler_rpc_error_and_abort_send_their_status() -> None:
    """RpcError, context.abort and set_code/set_details end the call with that status."""

    async def raises(request: bytes, context: grpc.ServicerContext) -> bytes:
        context.set_trailing_metadata([("x-t", "kept")])
        raise grpc.RpcError(grpc.StatusCode.NOT_FOUND, "no such thing: caf\u00e9 50%")

    async def aborts(request: bytes, context: grpc.ServicerContext) -> bytes:
        context.abort(
            grpc.StatusCode.PERMISSION_DENIED,
            "nope",
            trailing_metadata=[("grpc-status-details-bin", b"\x08\x07")],
        )

    async def sets(request: bytes, context: grpc.ServicerContext) -> bytes:
        context.set_code(grpc.StatusCode.ABORTED)
        context.set_details("set")
        return b"not sent"

    async def streams_then_fails(request: bytes, context: grpc.ServicerContext) -> None:
        await context.write(b"first")
        raise grpc.RpcError(grpc.StatusCode.DATA_LOSS, "after one")

    server = grpc.Server(
        [
            grpc.method_handlers_generic_handler(
                "s.S",
                {
                    "Raises": grpc.unary_unary_handler(raises),
                    "Aborts": grpc.unary_unary_handler(aborts),
                    "Sets": grpc.unary_unary_handler(sets),
                    "Stream": grpc.unary_stream_handler(streams_then_fails),
                },
            )
        ]
    )
    with trio.fail_after(LIMIT):
        async with grpc_pair(server) as ch:
            with pytest.raises(grpc.RpcError) as info:
                await ch.unary_unary("/s.S/Raises")(b"")
            assert info.value.code == grpc.StatusCode.NOT_FOUND
            assert info.value.details == "no such thing: caf\u00e9 50%"
            assert info.value.trailing_metadata == [("x-t", "kept")]
            with pytest.raises(grpc.RpcError) as info:
                await ch.unary_unary("/s.S/Aborts")(b"")
            assert info.value.code == grpc.StatusCode.PERMISSION_DENIED
            assert info.value.status_details == b"\x08\x07"
            with pytest.raises(grpc.RpcError) as info:
                await ch.unary_unary("/s.S/Sets")(b"")
            assert info.value.code == grpc.StatusCode.ABORTED
            assert info.value.details == "set"
            async with ch.unary_stream("/s.S/Stream")(b"") as call:
                assert await call.receive_message() == b"first"
                with pytest.raises(grpc.RpcError) as info:
                    await call.receive_message()
            assert info.value.code == grpc.StatusCode.DATA_LOSS
            assert call.code == grpc.StatusCode.DATA_LOSS


async def test_rpc_error_status_details_are_sent_without_trailing_metadata() -> None:
    """RpcError(details, status_details=...) raised by a handler sends grpc-message and
    grpc-status-details-bin, though its trailing metadata does not hold the latter."""

    async def raises(request: bytes, context: grpc.ServicerContext) -> bytes:
        if request == b"kept":
            context.set_trailing_metadata([("x-t", "kept")])
        raise grpc.RpcError(
            grpc.StatusCode.NOT_FOUND, "gone: caf\u00e9", status_details=b"\x08\x05"
        )

    server = grpc.Server([{"/s.S/Raises": grpc.unary_unary_handler(raises)}])
    with trio.fail_after(LIMIT):
        async with grpc_pair(server) as ch:
            for request, extra in ((b"", []), (b"kept", [("x-t", "kept")])):
                with pytest.raises(grpc.RpcError) as info:
                    await ch.unary_unary("/s.S/Raises")(request)
                assert info.value.code == grpc.StatusCode.NOT_FOUND
                assert info.value.details == "gone: caf\u00e9"
                assert info.value.status_details == b"\x08\x05"
                assert info.value.trailing_metadata == [
                    *extra,
                    ("grpc-status-details-bin", b"\x08\x05"),
                ]


async def test_handler_exception_is_unknown_without_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Any other exception: UNKNOWN, its type only on the wire; traceback in the log."""
    with trio.fail_after(LIMIT), caplog.at_level(logging.ERROR, "trio_h2t.grpc"):
        async with echo_pair() as (ch, _):
            with pytest.raises(grpc.RpcError) as info:
                await ch.unary_unary("/test.Echo/Fail")(b"")
    assert info.value.code == grpc.StatusCode.UNKNOWN
    assert info.value.details == "Exception calling application: ValueError"
    assert "secret" not in info.value.details
    [record] = [r for r in caplog.records if r.name == "trio_h2t.grpc"]
    assert record.exc_info is not None
    assert "secret internals" in str(record.exc_info[1])


async def test_trailers_only_response_and_http_checks() -> None:
    """Errors before any message are one HEADERS frame; non-POST is 405, non-gRPC 415."""
    with trio.fail_after(LIMIT):
        async with echo_pair() as (ch, _):
            conn = ch.connection
            grpc_headers = [("content-type", "application/grpc"), ("te", "trailers")]
            headers = conn.request_headers("POST", "/test.Echo/Nope", grpc_headers)
            async with conn.open_stream(headers, end_stream=True) as stream:
                block = dict(await stream.receive_headers())
                assert await stream.read_all() == b""
            assert block[b":status"] == b"200"
            assert block[b"grpc-status"] == b"12"
            assert stream.trailers is None  # the status came in the headers
            response = await conn.request("POST", "/test.Echo/Unary", headers=[("te", "trailers")])
            assert response.status == 415
            assert response.headers["grpc-status"] == str(int(grpc.StatusCode.INVALID_ARGUMENT))
            response = await conn.request(
                "GET", "/test.Echo/Unary", headers=[("content-type", "application/grpc")]
            )
            assert response.status == 405


async def test_rst_no_error_after_trailers_when_client_has_not_half_closed() -> None:
    """The server ends a call whose client is still sending: trailers, RST_STREAM(NO_ERROR)."""

    async def early(requests: AsyncIterator[bytes], context: grpc.ServicerContext) -> bytes:
        return b"done early"

    from helpers import open_peer_client

    server = grpc.Server([{"/e.E/Early": grpc.stream_unary_handler(early)}])
    with trio.fail_after(LIMIT):
        async with open_peer_client(server) as (peer, _):
            sid = peer.h2.get_next_available_stream_id()
            peer.h2.send_headers(
                sid,
                [
                    (b":method", b"POST"),
                    (b":scheme", b"http"),
                    (b":authority", b"x"),
                    (b":path", b"/e.E/Early"),
                    (b"content-type", b"application/grpc"),
                    (b"te", b"trailers"),
                ],
            )
            peer.h2.send_data(sid, grpc.encode_message(b"more to come"))
            await peer.flush()
            reset = await peer.receive_until(lambda ev: isinstance(ev, h2.events.StreamReset))
    assert reset.error_code == 0  # NO_ERROR
    trailers = peer.events_of(h2.events.TrailersReceived)
    assert (b"grpc-status", b"0") in trailers[0].headers
    data = b"".join(ev.data for ev in peer.events_of(h2.events.DataReceived))
    assert grpc.MessageDecoder().feed(data) == [(False, b"done early")]


async def test_client_maps_http_status_rst_and_missing_trailers() -> None:
    """Without grpc-status, the client derives the code from HTTP, RST_STREAM, or INTERNAL."""

    async def handler(stream: trio_h2t.H2Stream) -> None:
        path = stream.request.path
        if path == "/h.H/NotFound":
            await stream.send_headers([(":status", "404")], end_stream=True)
        elif path == "/h.H/Text":
            await stream.send_headers([(":status", "200"), ("content-type", "text/plain")])
            await stream.send_data(b"hello", end_stream=True)
        elif path == "/h.H/Calm":
            await stream.send_headers([(":status", "200"), ("content-type", "application/grpc")])
            stream.reset(0xB)  # ENHANCE_YOUR_CALM
        elif path == "/h.H/NoTrailers":
            await stream.send_headers([(":status", "200"), ("content-type", "application/grpc")])
            await stream.send_data(grpc.encode_message(b"x"), end_stream=True)
        elif path == "/h.H/Truncated":
            await stream.send_headers([(":status", "200"), ("content-type", "application/grpc")])
            await stream.send_data(grpc.encode_message(b"xyz")[:-1], end_stream=True)

    expected = {
        "/h.H/NotFound": grpc.StatusCode.UNIMPLEMENTED,
        "/h.H/Text": grpc.StatusCode.UNKNOWN,
        "/h.H/Calm": grpc.StatusCode.RESOURCE_EXHAUSTED,
        "/h.H/NoTrailers": grpc.StatusCode.INTERNAL,
        "/h.H/Truncated": grpc.StatusCode.INTERNAL,
    }
    with trio.fail_after(LIMIT):
        async with grpc_pair(handler) as ch:
            for path, code in expected.items():
                with pytest.raises(grpc.RpcError) as info:
                    await ch.unary_unary(path)(b"")
                assert info.value.code == code, (path, info.value)


# ---------------------------------------------------------------------- deadlines


async def test_timeout_and_surrounding_deadline_are_sent(autojump_clock: object) -> None:
    """grpc-timeout is the call's timeout, or the surrounding scope's deadline if earlier."""
    with trio.fail_after(LIMIT):
        async with echo_pair() as (ch, _):
            deadline = ch.unary_unary("/test.Echo/Deadline")
            assert float(await deadline(b"", timeout=5)) == pytest.approx(5, abs=0.01)
            with trio.move_on_after(3):
                assert float(await deadline(b"", timeout=5)) == pytest.approx(3, abs=0.01)
            with trio.move_on_after(8):
                assert float(await deadline(b"")) == pytest.approx(8, abs=0.01)


async def test_deadline_exceeded_on_both_sides(autojump_clock: object) -> None:
    """The timeout raises DEADLINE_EXCEEDED; the server cancels its handler on grpc-timeout."""
    with trio.fail_after(LIMIT):
        async with echo_pair() as (ch, echo):
            with pytest.raises(grpc.RpcError) as info:
                await ch.unary_unary("/test.Echo/Sleep")(b"100", timeout=1)
            assert info.value.code == grpc.StatusCode.DEADLINE_EXCEEDED
            await echo.wait_for("sleep cancelled")
            with pytest.raises(grpc.RpcError) as info:
                await ch.unary_unary("/test.Echo/Sleep")(b"1", timeout=0)
            assert info.value.code == grpc.StatusCode.DEADLINE_EXCEEDED
            assert await ch.unary_unary("/test.Echo/Sleep")(b"1", timeout=5) == b"slept"


async def test_server_deadline_sends_deadline_exceeded(autojump_clock: object) -> None:
    """A raw client's grpc-timeout: the server answers DEADLINE_EXCEEDED itself."""
    with trio.fail_after(LIMIT):
        async with echo_pair() as (ch, echo):
            conn = ch.connection
            extra = [("content-type", "application/grpc"), ("te", "trailers")]
            headers = conn.request_headers(
                "POST", "/test.Echo/Sleep", [*extra, ("grpc-timeout", "2S")]
            )
            async with conn.open_stream(headers) as stream:
                await stream.send_data(grpc.encode_message(b"100"), end_stream=True)
                block = dict(await stream.receive_headers())
            assert block[b"grpc-status"] == b"4"
            assert "sleep cancelled" in echo.events
            headers = conn.request_headers(
                "POST", "/test.Echo/Sleep", [*extra, ("grpc-timeout", "2x")]
            )
            async with conn.open_stream(headers, end_stream=True) as stream:
                block = dict(await stream.receive_headers())
            assert block[b"grpc-status"] == b"13"  # INTERNAL: malformed grpc-timeout


# ---------------------------------------------------------------------- cancellation


async def test_cancelling_the_calling_task_resets_and_cancels_the_handler() -> None:
    """Cancelling the caller sends RST_STREAM(CANCEL): the handler's task is cancelled."""
    with trio.fail_after(LIMIT):
        async with echo_pair() as (ch, echo):
            with trio.CancelScope() as scope:
                async with ch.unary_stream("/test.Echo/Forever")(b"") as call:
                    assert await call.receive_message() == b"tick"
                    scope.cancel()
                    await call.receive_message()
            assert scope.cancelled_caught
            await echo.wait_for("forever cancelled")
    reason = echo.cancel_reasons[0]
    assert isinstance(reason, trio_h2t.CancelReason)
    assert (reason.kind, reason.error_code) == ("peer-reset", 8)


async def test_context_cancelled_becomes_true_after_the_client_resets() -> None:
    """context.cancelled is False during the call, True once the client reset it."""
    seen: list[tuple[str, bool]] = []
    started, ended = trio.Event(), trio.Event()

    async def waits(request: bytes, context: grpc.ServicerContext) -> bytes:
        seen.append(("before", context.cancelled))
        started.set()
        try:
            await trio.sleep_forever()
        finally:
            seen.append(("after", context.cancelled))
            ended.set()

    server = grpc.Server([{"/s.S/Waits": grpc.unary_unary_handler(waits)}])
    with trio.fail_after(LIMIT):
        async with grpc_pair(server) as ch:
            with trio.CancelScope() as scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(ch.unary_unary("/s.S/Waits"), b"")
                    await started.wait()
                    scope.cancel()
            await ended.wait()
    assert seen == [("before", False), ("after", True)]


async def test_call_cancel_and_leaving_early() -> None:
    """call.cancel() makes later receives CANCELLED; a break out of the block cancels too."""
    with trio.fail_after(LIMIT):
        async with echo_pair() as (ch, echo):
            async with ch.unary_stream("/test.Echo/Forever")(b"") as call:
                assert await call.receive_message() == b"tick"
                call.cancel()
                with pytest.raises(grpc.RpcError) as info:
                    await call.receive_message()
                assert info.value.code == grpc.StatusCode.CANCELLED
            await echo.wait_for("forever cancelled")
            async with ch.unary_stream("/test.Echo/Count")(b"1000") as call:
                async for _ in call:
                    break
            assert call.code is None  # never ended: it was cancelled
            assert await ch.unary_unary("/test.Echo/Unary")(b"still fine") == b"still fine"


# ------------------------------------------------- why a handler was cancelled


class Why:
    """``test.Why/Wait`` waits forever. When cancelled it records what its context
    says (``cancelled``, ``cancel_reason``), and, if the request names a number of
    seconds, records it again that long later (shielded), then re-raises."""

    SERVICE_NAME = "test.Why"

    def __init__(self) -> None:
        self.seen: list[tuple[bool, trio_h2t.CancelReason | None]] = []
        self.started = trio.Event()
        self.cancelled = trio.Event()

    @grpc.rpc()
    async def Wait(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        assert (context.cancelled, context.cancel_reason) == (False, None)
        self.started.set()
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            self.seen.append((context.cancelled, context.cancel_reason))
            self.cancelled.set()
            if request:
                with trio.CancelScope(shield=True):
                    await trio.sleep(float(request))
                self.seen.append((context.cancelled, context.cancel_reason))
            raise


def _raw_headers(conn: trio_h2t.ClientConnection, path: str, timeout: str) -> Any:
    extra = [("content-type", "application/grpc"), ("te", "trailers"), ("grpc-timeout", timeout)]
    return conn.request_headers("POST", path, extra)


DEADLINE = trio_h2t.CancelReason("deadline")


async def test_handler_cancelled_by_its_deadline_sees_deadline(autojump_clock: object) -> None:
    """The grpc-timeout expires: the handler's context says cancelled, reason
    "deadline", and the call ends DEADLINE_EXCEEDED."""
    why = Why()
    with trio.fail_after(LIMIT):
        async with grpc_pair(grpc.Server([why])) as ch:
            conn = ch.connection
            async with conn.open_stream(_raw_headers(conn, "/test.Why/Wait", "1S")) as stream:
                await stream.send_data(grpc.encode_message(b""), end_stream=True)
                block = dict(await stream.receive_headers())
    assert block[b"grpc-status"] == b"4"
    assert why.seen == [(True, DEADLINE)]


async def test_deadline_stays_the_reason_when_the_client_resets_afterwards(
    autojump_clock: object,
) -> None:
    """A handler cancelled by its deadline, still running when the client resets the
    stream (as a client whose own deadline fires does): the reason stays "deadline"."""
    why = Why()
    with trio.fail_after(LIMIT):
        async with grpc_pair(grpc.Server([why])) as ch:
            conn = ch.connection
            async with conn.open_stream(_raw_headers(conn, "/test.Why/Wait", "1S")) as stream:
                await stream.send_data(grpc.encode_message(b"5"), end_stream=True)
                await why.cancelled.wait()
                stream.reset(trio_h2t.ErrorCodes.CANCEL)
    assert why.seen == [(True, DEADLINE), (True, DEADLINE)]


async def test_handler_whose_client_cancels_sees_a_peer_reset_with_cancel(
    autojump_clock: object,
) -> None:
    """The client cancels the call before its deadline: "peer-reset" with CANCEL, which
    stays the reason after the deadline passes."""
    why = Why()
    with trio.fail_after(LIMIT):
        async with grpc_pair(grpc.Server([why])) as ch, trio.open_nursery() as nursery:

            async def call() -> None:
                await ch.unary_unary("/test.Why/Wait")(b"10", timeout=5)

            nursery.start_soon(call)
            await why.started.wait()
            nursery.cancel_scope.cancel()
    reset = trio_h2t.CancelReason("peer-reset", trio_h2t.ErrorCodes.CANCEL)
    assert why.seen == [(True, reset), (True, reset)]


async def test_handler_on_a_server_shutting_down_sees_shutdown(autojump_clock: object) -> None:
    """The server closes the connection and its grace period runs out before the
    call's deadline: "shutdown"."""
    why = Why()
    client_t, server_t = trio.testing.memory_stream_pair()
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            served = await nursery.start(trio_h2t.serve_connection, server_t, grpc.Server([why]))
            async with trio_h2t.open_client_connection(client_t) as conn:
                ch = grpc.Channel(conn)
                async with trio.open_nursery() as calls:

                    async def call() -> None:
                        with pytest.raises(grpc.RpcError) as info:
                            await ch.unary_unary("/test.Why/Wait")(b"", timeout=30)
                        assert info.value.code == grpc.StatusCode.UNAVAILABLE

                    calls.start_soon(call)
                    await why.started.wait()
                    await served.aclose(grace=1)
    assert why.seen == [(True, trio_h2t.CancelReason("shutdown"))]


# ---------------------------------------------------------------------- limits


async def test_message_size_limits() -> None:
    """Receive limits on both sides are RESOURCE_EXHAUSTED; so is the send limit."""
    echo = Echo()
    server = grpc.Server([echo], max_receive_message_size=1000, max_send_message_size=2000)
    with trio.fail_after(LIMIT):
        async with grpc_pair(server, max_receive_message_size=1500) as ch:
            unary = ch.unary_unary("/test.Echo/Unary")
            assert await unary(b"x" * 1000) == b"x" * 1000
            with pytest.raises(grpc.RpcError) as info:
                await unary(b"x" * 1001)
            assert info.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
            concat = ch.stream_unary("/test.Echo/Concat")
            with pytest.raises(grpc.RpcError) as info:
                await concat([b"x" * 900, b"y" * 900])  # 1800 > the client's 1500
            assert info.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
            with pytest.raises(grpc.RpcError) as info:
                await concat([b"x" * 900] * 3)  # 2700 > the server's send limit
            assert info.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
        async with grpc_pair(server, max_send_message_size=10) as ch:
            with pytest.raises(grpc.RpcError) as info:
                await ch.unary_unary("/test.Echo/Unary")(b"x" * 11)
            assert info.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "larger than max" in info.value.details


async def test_unary_request_cardinality() -> None:
    """A unary method given no request message, or two, answers INTERNAL."""
    with trio.fail_after(LIMIT):
        async with echo_pair() as (ch, _):
            for messages in ([], [b"a", b"b"]):
                async with ch.stream_unary("/test.Echo/Unary").open() as call:
                    for m in messages:
                        await call.send_message(m)
                    await call.done_writing()
                    with pytest.raises(grpc.RpcError) as info:
                        await call.receive_response()
                assert info.value.code == grpc.StatusCode.INTERNAL


# ---------------------------------------------------------------------- compression


async def test_compression_per_channel_and_per_call() -> None:
    """The channel's compression, a call's override, and the server's response compression."""
    body = b"squeeze me " * 500
    with trio.fail_after(LIMIT):
        async with echo_pair(compression="gzip") as (ch, _):
            assert await ch.unary_unary("/test.Echo/Encoding")(body) == b"gzip " + body
            enc = ch.unary_unary("/test.Echo/Encoding")
            assert await enc(body, compression="deflate") == b"deflate " + body
            assert await enc(body, compression=None) == b"identity " + body
            resp, call = await ch.unary_unary("/test.Echo/Compressed").with_call(body)
            assert resp == body
            assert call.response_encoding == "gzip"
    server = grpc.Server([Echo()], compression="deflate")
    with trio.fail_after(LIMIT):
        async with grpc_pair(server) as ch:
            async with ch.unary_stream("/test.Echo/Count")(b"2") as stream_call:
                assert [m async for m in stream_call] == [b"0", b"1"]
            assert stream_call.response_encoding == "deflate"


async def test_per_message_compression_both_ways() -> None:
    """send_message/write(compress=False) clear one message's flag; both sides see each flag."""

    async def flags(requests: AsyncIterator[bytes], context: grpc.ServicerContext) -> None:
        context.set_compression("gzip")
        async for r in requests:
            seen = b"c" if context.request_compressed else b"u"
            await context.write(seen + r, compress=r.startswith(b"z"))

    handler = grpc.method_handlers_generic_handler(
        "test.Flags", {"Echo": grpc.stream_stream_handler(flags)}
    )
    body = b"zzz " * 300
    with trio.fail_after(LIMIT):
        async with grpc_pair(grpc.Server([handler]), compression="gzip") as ch:
            async with ch.stream_stream("/test.Flags/Echo").open() as call:
                assert call.last_message_compressed is None
                await call.send_message(body)
                assert await call.receive_message() == b"c" + body
                assert call.last_message_compressed is True
                assert call.response_encoding == "gzip"
                await call.send_message(b"plain", compress=False)
                assert await call.receive_message() == b"uplain"
                assert call.last_message_compressed is False
                await call.done_writing()
            async with ch.stream_stream("/test.Flags/Echo").open(compression=None) as call:
                # No grpc-encoding on the call: compress=True sends it uncompressed.
                await call.send_message(b"zz")
                assert await call.receive_message() == b"uzz"
                assert call.last_message_compressed is True
                await call.done_writing()


async def test_unsupported_request_encoding_is_unimplemented() -> None:
    """grpc-encoding the server lacks: UNIMPLEMENTED, naming what it accepts."""
    with trio.fail_after(LIMIT):
        async with echo_pair() as (ch, _):
            conn = ch.connection
            extra = [("content-type", "application/grpc"), ("grpc-encoding", "snappy")]
            headers = conn.request_headers("POST", "/test.Echo/Unary", extra)
            async with conn.open_stream(headers, end_stream=True) as stream:
                block = dict(await stream.receive_headers())
    assert block[b"grpc-status"] == b"12"
    assert block[b"grpc-accept-encoding"] == b"identity,deflate,gzip"


async def test_server_falls_back_to_identity_when_the_client_does_not_accept() -> None:
    """The server compresses (Server(compression=) or set_compression) only with an
    algorithm the client's grpc-accept-encoding lists: with identity only, or no such
    header, the response goes uncompressed."""

    async def gzips(request: bytes, context: grpc.ServicerContext) -> bytes:
        context.set_compression("gzip")
        return b"z" * 2000

    async def default(request: bytes, context: grpc.ServicerContext) -> bytes:
        return b"z" * 2000

    handlers = {
        "/s.S/Gzips": grpc.unary_unary_handler(gzips),
        "/s.S/Default": grpc.unary_unary_handler(default),
    }
    results: list[tuple[str, bytes | None, bool]] = []
    with trio.fail_after(LIMIT):
        async with grpc_pair(grpc.Server([handlers], compression="gzip")) as ch:
            conn = ch.connection
            for path in handlers:
                # identity only; no grpc-accept-encoding; one that lists gzip (a control).
                for accept in (["identity"], [], ["identity,deflate,gzip"]):
                    extra = [("content-type", "application/grpc")]
                    extra += [("grpc-accept-encoding", value) for value in accept]
                    headers = conn.request_headers("POST", path, extra)
                    async with conn.open_stream(headers) as stream:
                        await stream.send_data(grpc.encode_message(b""), end_stream=True)
                        block = dict(await stream.receive_headers())
                        [(flag, _)] = grpc.MessageDecoder().feed(await stream.read_all())
                    results.append((path, block.get(b"grpc-encoding"), bool(flag)))
    assert results == [
        (path, encoding, encoding is not None)
        for path in handlers
        for encoding in (None, None, b"gzip")
    ]


# ---------------------------------------------------------------------- channel, peer


async def test_channel_close_drains(autojump_clock: object) -> None:
    """aclose waits for calls in progress; later calls fail with UNAVAILABLE."""
    results: list[bytes] = []
    with trio.fail_after(LIMIT):
        async with echo_pair() as (ch, _):

            async def slow() -> None:
                results.append(await ch.unary_unary("/test.Echo/Sleep")(b"5"))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(slow)
                await trio.testing.wait_all_tasks_blocked()
                await ch.aclose()
                assert results == [b"slept"]
            with pytest.raises(grpc.RpcError) as info:
                await ch.unary_unary("/test.Echo/Unary")(b"")
            assert info.value.code == grpc.StatusCode.UNAVAILABLE


async def test_context_peer_and_request_over_tcp() -> None:
    """Over TCP the context names the client as grpcio does (ipv4:host:port)."""
    seen: dict[str, Any] = {}

    async def who(request: bytes, context: grpc.ServicerContext) -> bytes:
        seen.update(
            peer=context.peer,
            address=context.peer_address,
            method=context.method,
            deadline=context.deadline,
            cancelled=context.cancelled,
        )
        return b""

    server = grpc.Server([{"/w.W/Who": grpc.unary_unary_handler(who)}])
    with trio.fail_after(LIMIT):
        async with (
            trio_h2t.open_server(server, 0, host="127.0.0.1") as h2server,
            grpc.open_channel("127.0.0.1", h2server.port) as ch,
        ):
            await ch.unary_unary("/w.W/Who")(b"")
    assert seen["peer"] == f"ipv4:127.0.0.1:{seen['address'][1]}"
    assert seen["method"] == "/w.W/Who"
    assert seen["deadline"] is not None  # fail_after's deadline travelled as grpc-timeout
    assert seen["cancelled"] is False


async def test_many_concurrent_calls_on_one_connection() -> None:
    """1000 concurrent unary calls on one channel all complete."""
    results: list[bytes] = []
    with trio.fail_after(120):
        async with echo_pair() as (ch, _):
            unary = ch.unary_unary("/test.Echo/Unary")

            async def one(i: int) -> None:
                results.append(await unary(str(i).encode()))

            async with trio.open_nursery() as nursery:
                for i in range(1000):
                    nursery.start_soon(functools.partial(one, i))
    assert sorted(results) == sorted(str(i).encode() for i in range(1000))


async def test_server_answering_early_ends_the_call() -> None:
    """A stream-unary server answering before the requests end: the call returns; a
    later send raises ClosedResourceError; an endless request iterator is stopped."""

    async def early(requests: AsyncIterator[bytes], context: grpc.ServicerContext) -> bytes:
        await requests.__anext__()
        return b"enough"

    async def endless() -> AsyncIterator[bytes]:
        while True:
            yield b"x" * 10_000

    server = grpc.Server([{"/e.E/Early": grpc.stream_unary_handler(early)}])
    with trio.fail_after(LIMIT):
        async with grpc_pair(server) as ch:
            assert await ch.stream_unary("/e.E/Early")(endless()) == b"enough"
            async with ch.stream_unary("/e.E/Early").open() as call:
                await call.send_message(b"1")
                assert await call.receive_response() == b"enough"
                with pytest.raises(trio.ClosedResourceError, match="already ended"):
                    await call.send_message(b"2")


async def test_receives_checkpoint_even_when_a_message_is_buffered() -> None:
    """receive_message, initial_metadata and the server's request iteration always
    checkpoint, also when what they return is already buffered (three messages in
    one DATA frame)."""
    three = b"".join(grpc.encode_message(m) for m in (b"a", b"b", b"c"))
    counted: list[int] = []

    async def count_requests(
        requests: AsyncIterator[bytes], context: grpc.ServicerContext
    ) -> bytes:
        n = 0
        while True:
            with trio.testing.assert_checkpoints():
                try:
                    await requests.__anext__()
                except StopAsyncIteration:
                    break
            n += 1
        counted.append(n)
        return b""

    async def raw(stream: trio_h2t.H2Stream) -> None:
        if stream.request.path == "/c.C/Count":
            await grpc.Server([{"/c.C/Count": grpc.stream_unary_handler(count_requests)}])(stream)
            return
        await stream.send_headers([(":status", "200"), ("content-type", "application/grpc")])
        await stream.send_data(three)
        await stream.send_trailers([("grpc-status", "0")])

    with trio.fail_after(LIMIT):
        async with grpc_pair(raw) as ch:
            async with ch.unary_stream("/r.R/Three")(b"") as call:
                await call.initial_metadata()
                with trio.testing.assert_checkpoints():
                    await call.initial_metadata()  # already there
                assert await call.receive_message() == b"a"
                for expected in (b"b", b"c"):  # decoded with the first, buffered
                    with trio.testing.assert_checkpoints():
                        assert await call.receive_message() == expected
            conn = ch.connection
            extra = [("content-type", "application/grpc"), ("te", "trailers")]
            async with conn.open_stream(conn.request_headers("POST", "/c.C/Count", extra)) as s:
                await s.send_data(three, end_stream=True)
                await s.receive_headers()
                assert dict(await s.receive_trailers())[b"grpc-status"] == b"0"
    assert counted == [3]


async def test_messages_split_byte_by_byte_across_data_frames() -> None:
    """Messages cut into one-byte DATA frames are reassembled, both ways."""
    wire = b"".join(grpc.encode_message(m) for m in (b"", b"hello", b"x" * 300))

    async def raw(stream: trio_h2t.H2Stream) -> None:
        if stream.request.path == "/test.Echo/Concat":
            await grpc.Server([Echo()])(stream)
            return
        await stream.send_headers([(":status", "200"), ("content-type", "application/grpc")])
        for i in range(len(wire)):
            await stream.send_data(wire[i : i + 1])
        await stream.send_trailers([("grpc-status", "0")])

    with trio.fail_after(LIMIT):
        async with grpc_pair(raw) as ch:
            async with ch.unary_stream("/r.R/Split")(b"") as call:
                assert [m async for m in call] == [b"", b"hello", b"x" * 300]
            conn = ch.connection
            extra = [("content-type", "application/grpc"), ("te", "trailers")]
            headers = conn.request_headers("POST", "/test.Echo/Concat", extra)
            async with conn.open_stream(headers) as stream:
                for i in range(len(wire)):
                    await stream.send_data(wire[i : i + 1])
                await stream.end()
                await stream.receive_headers()
                body = await stream.read_all()
                assert dict(stream.trailers or ())[b"grpc-status"] == b"0"
    assert grpc.MessageDecoder().feed(body) == [(False, b"hello" + b"x" * 300)]


async def test_rpc_error_carries_initial_metadata() -> None:
    """A call failing after its headers raises an RpcError with their metadata."""

    async def fails_late(request: bytes, context: grpc.ServicerContext) -> bytes:
        await context.send_initial_metadata([("x-early", "yes")])
        raise grpc.RpcError(grpc.StatusCode.UNAVAILABLE, "later")

    server = grpc.Server([{"/l.L/Late": grpc.unary_unary_handler(fails_late)}])
    with trio.fail_after(LIMIT):
        async with grpc_pair(server) as ch:
            with pytest.raises(grpc.RpcError) as info:
                await ch.unary_unary("/l.L/Late")(b"")
    assert info.value.code == grpc.StatusCode.UNAVAILABLE
    assert info.value.initial_metadata == [("x-early", "yes")]
    assert info.value.trailing_metadata == []


async def test_calls_over_tls(server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext) -> None:
    """open_channel(ssl_context=...) talks to a Server behind open_server(ssl_context=...)."""
    seen: list[object] = []

    async def tls(request: bytes, context: grpc.ServicerContext) -> bytes:
        seen.append(context.request.tls)
        return request

    server = grpc.Server([{"/t.T/Tls": grpc.unary_unary_handler(tls)}])
    with trio.fail_after(LIMIT):
        async with (
            trio_h2t.open_server(server, 0, host="127.0.0.1", ssl_context=server_ctx) as h2server,
            grpc.open_channel("127.0.0.1", h2server.port, ssl_context=client_ctx) as ch,
        ):
            assert await ch.unary_unary("/t.T/Tls")(b"secret") == b"secret"
    [info] = seen
    assert isinstance(info, trio_h2t.TLSInfo)
    assert info.alpn_protocol == "h2"


async def test_streaming_handler_forms() -> None:
    """A streaming response may come from an async generator, context.write, or an
    async iterator a plain function returns; anything else is UNKNOWN."""

    class Countdown:
        def __init__(self, n: int) -> None:
            self.n = n

        def __aiter__(self) -> Countdown:
            return self

        async def __anext__(self) -> bytes:
            await trio.lowlevel.checkpoint()
            if self.n == 0:
                raise StopAsyncIteration
            self.n -= 1
            return str(self.n).encode()

    def iterator(request: bytes, context: grpc.ServicerContext) -> Countdown:
        return Countdown(int(request))

    def wrong(request: bytes, context: grpc.ServicerContext) -> int:
        return 5

    server = grpc.Server(
        [
            {
                "/f.F/Iter": grpc.unary_stream_handler(iterator),
                "/f.F/Wrong": grpc.unary_stream_handler(wrong),
            }
        ]
    )
    with trio.fail_after(LIMIT):
        async with grpc_pair(server) as ch:
            async with ch.unary_stream("/f.F/Iter")(b"3") as call:
                assert [m async for m in call] == [b"2", b"1", b"0"]
            async with ch.unary_stream("/f.F/Wrong")(b"") as call:
                with pytest.raises(grpc.RpcError) as info:
                    await call.receive_message()
    assert info.value.code == grpc.StatusCode.UNKNOWN


async def test_lost_connection_is_unavailable() -> None:
    """The server's side going away mid-call: the call fails with UNAVAILABLE."""
    started = trio.Event()

    async def hang(request: bytes, context: grpc.ServicerContext) -> bytes:
        started.set()
        await trio.sleep_forever()
        raise AssertionError("not reached")

    server = grpc.Server([{"/h.H/Hang": grpc.unary_unary_handler(hang)}])
    client_t, server_t = trio.testing.memory_stream_pair()
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as outer:
            serving = trio.CancelScope()

            async def serve() -> None:
                with serving:
                    await trio_h2t.serve_connection(server_t, server)

            outer.start_soon(serve)
            async with trio_h2t.open_client_connection(client_t) as conn:
                ch = grpc.Channel(conn)

                async def kill() -> None:
                    await started.wait()
                    serving.cancel()  # closes the server's transport at once

                outer.start_soon(kill)
                with pytest.raises(grpc.RpcError) as info:
                    await ch.unary_unary("/h.H/Hang")(b"")
    assert info.value.code == grpc.StatusCode.UNAVAILABLE


@pytest.mark.parametrize("reuse", [True, False], ids=["reuse", "no-reuse"])
async def test_buffer_reuse_on_and_off_carry_the_same_messages(reuse: bool) -> None:
    """Both decoders (the kept buffer, and the plain one) on both sides carry
    messages from 0 B to 1 MiB whole, over the real transport's DATA frames."""
    sizes = [0, 100, 1023, 1024, 8192, 70_000, 1 << 20]
    messages = [bytes([i % 251]) * n for i, n in enumerate(sizes)]
    server = grpc.Server([Echo()], buffer_reuse=reuse)
    with trio.fail_after(LIMIT):
        async with grpc_pair(server, buffer_reuse=reuse) as channel:
            assert channel.buffer_reuse is reuse
            unary = channel.unary_unary("/test.Echo/Unary")
            for message in messages:
                assert await unary(message) == message
            concat = channel.stream_unary("/test.Echo/Concat")
            assert await concat(messages) == b"".join(messages)


def test_unary_response_handler_that_is_not_async_def_is_refused_at_registration() -> None:
    """A plain def or an async generator for a unary-response method is a TypeError at once."""

    def plain(request: bytes, context: grpc.ServicerContext) -> bytes:
        return request

    async def generator(request: bytes, context: grpc.ServicerContext) -> AsyncIterator[bytes]:
        yield request

    with pytest.raises(TypeError, match=r"must be an async def; .*plain is a plain function"):
        grpc.unary_unary_handler(plain)
    with pytest.raises(TypeError, match=r"async generator.*make it unary_stream"):
        grpc.rpc()(generator)
    with pytest.raises(TypeError, match=r"async generator.*make it stream_stream"):
        grpc.stream_unary_handler(generator)
    with pytest.raises(TypeError, match="must be callable"):
        grpc.unary_unary_handler(b"not a function")
    # Streaming responses accept both forms, and callables other than functions pass.
    assert grpc.unary_stream_handler(generator).kind is grpc.MethodKind.UNARY_STREAM
    assert grpc.stream_stream_handler(plain).kind is grpc.MethodKind.STREAM_STREAM
    assert grpc.unary_unary_handler(functools.partial(plain)).handler is not None
