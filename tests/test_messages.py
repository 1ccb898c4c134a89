"""Tests for ``_messages.py`` and what uses it: the ``Headers`` multi-dict, the request
view of a served stream, what a failing handler answers, ``cancel_reason``, and
``ClientConnection.request``'s ``Response`` and streamed body."""

from __future__ import annotations

import functools
import logging
import ssl
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import h2.events
import pytest
import trio
import trio.testing
from h2.errors import ErrorCodes
from helpers import REQUEST, RESPONSE_200, connected_pair, open_peer_client, open_peer_server
from hyperframe.frame import DataFrame, HeadersFrame, RstStreamFrame

import trio_h2t
from trio_h2t import (
    CancelReason,
    H2Server,
    H2Stream,
    Headers,
    RemoteProtocolError,
    Request,
    Response,
    StreamResetError,
    TransportConfig,
    open_client_connection,
    open_connection,
    serve_connection,
    serve_tcp,
)

if TYPE_CHECKING:
    import trustme

BODY_500 = b"internal server error\n"  # trio_h2t._connection.INTERNAL_ERROR_BODY

#: Windows pinned at the RFC default, so a large body must wait on flow control.
SMALL = TransportConfig(dynamic_window=False, connection_window_size=65_535)


# ============================================================ Headers


def test_headers_lookup_is_case_insensitive_with_str_and_bytes_keys() -> None:
    """A str key gives str values, a bytes key bytes; names match in any case."""
    h = Headers([(b"content-type", b"text/plain"), (b"x-id", b"7")])
    assert h["Content-Type"] == "text/plain"
    assert h["CONTENT-TYPE"] == "text/plain"
    assert h[b"Content-Type"] == b"text/plain"
    assert h.get("X-Id") == "7"
    assert h.get(b"x-id") == b"7"
    assert "content-TYPE" in h
    assert b"X-ID" in h


def test_headers_keep_duplicates_in_order() -> None:
    """get/[] give the first value, get_all/getlist all of them; iteration, len and
    items() count every field, in wire order."""
    pairs = [(b"set-cookie", b"a=1"), (b"x", b"y"), (b"set-cookie", b"b=2")]
    h = Headers(pairs)
    assert h["set-cookie"] == "a=1"
    assert h.get_all("Set-Cookie") == ["a=1", "b=2"]
    assert h.getlist(b"set-cookie") == [b"a=1", b"b=2"]
    assert list(h) == ["set-cookie", "x", "set-cookie"]
    assert len(h) == 3
    assert h.items() == [("set-cookie", "a=1"), ("x", "y"), ("set-cookie", "b=2")]
    assert h.raw == tuple(pairs)


def test_headers_missing_names() -> None:
    """An absent name: KeyError for [], the default for get, [] for get_all."""
    h = Headers([(b"a", b"1")])
    with pytest.raises(KeyError):
        h["b"]
    with pytest.raises(KeyError):
        h[b"b"]
    assert h.get("b") is None
    assert h.get("b", "dflt") == "dflt"
    assert h.get_all("b") == []
    assert "b" not in h
    assert 3 not in h
    with pytest.raises(TypeError):
        h.get_all(3)  # type: ignore[call-overload]


def test_headers_leave_out_pseudo_headers() -> None:
    """Pseudo-header fields are not part of the regular view (nor of raw)."""
    h = Headers([(b":status", b"200"), (b"server", b"t"), (":path", "/")])
    assert ":status" not in h
    assert b":status" not in h
    assert h.raw == ((b"server", b"t"),)
    assert len(h) == 1


def test_headers_are_immutable() -> None:
    """No item assignment or deletion, no new attributes, and raw is a tuple: changing
    the list it was built from changes nothing."""
    source = [(b"a", b"1")]
    h = Headers(source)
    source.append((b"b", b"2"))
    assert len(h) == 1
    with pytest.raises(TypeError):
        h["a"] = "2"  # type: ignore[index]
    with pytest.raises(TypeError):
        del h["a"]  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        h.extra = 1  # type: ignore[attr-defined]
    assert isinstance(h.raw, tuple)
    assert not hasattr(h, "append")


def test_headers_equality_hash_and_repr() -> None:
    """Equal when the same fields are in the same order; hashable; repr shows them."""
    a = Headers([(b"a", b"1"), (b"b", b"2")])
    assert a == Headers([("a", "1"), ("b", "2")])
    assert a != Headers([(b"b", b"2"), (b"a", b"1")])
    assert a != [(b"a", b"1"), (b"b", b"2")]
    assert hash(a) == hash(Headers([(b"a", b"1"), (b"b", b"2")]))
    assert repr(a) == "trio_h2t.Headers([(b'a', b'1'), (b'b', b'2')])"


def test_headers_decode_utf8_losslessly() -> None:
    """str values are UTF-8 (what send_headers encodes str to); a byte that is not
    UTF-8 decodes with surrogateescape and encodes back to the same byte."""
    h = Headers([(b"x-name", "café".encode()), (b"x-raw", b"\xff\xfe")])
    assert h["x-name"] == "café"
    value = h["x-raw"]
    assert value == "\udcff\udcfe"
    assert value.encode("utf-8", "surrogateescape") == b"\xff\xfe"
    assert Headers([("x-name", "café")]).raw == ((b"x-name", "café".encode()),)
    with pytest.raises(TypeError):
        Headers([(b"a", 1)])  # type: ignore[list-item]


def test_public_types_are_final_and_frozen() -> None:
    """Request, Response, CancelReason are frozen dataclasses; Headers is exported."""
    r = Response(200, Headers(), b"", Headers())
    with pytest.raises(AttributeError):
        r.status = 404  # type: ignore[misc]
    reason = CancelReason("peer-reset", ErrorCodes.CANCEL)
    with pytest.raises(AttributeError):
        reason.kind = "shutdown"  # type: ignore[misc]
    for name in ("Headers", "Request", "Response", "Handler", "CancelReason", "TLSInfo"):
        assert name in trio_h2t.__all__


# ============================================================ the request view


async def test_request_view_on_a_served_stream() -> None:
    """stream.request decodes the pseudo-headers and holds the regular fields; it is
    built once; over a memory stream there are no addresses and no TLS."""
    seen: list[Request] = []

    async def handler(stream: H2Stream) -> None:
        seen.append(stream.request)
        assert stream.request is seen[0]  # built once
        await stream.send_headers(RESPONSE_200, end_stream=True)

    extra = [("x-trace", "a"), ("x-trace", "b"), ("accept", "*/*")]
    with trio.fail_after(5):
        async with connected_pair(handler) as (conn, _):
            response = await conn.request("DELETE", "/items/7?x=1", headers=extra)
    assert response.status == 200
    [req] = seen
    assert (req.method, req.path, req.scheme, req.authority) == (
        "DELETE",
        "/items/7?x=1",
        "http",
        "localhost",
    )
    assert req.headers.get_all("X-Trace") == ["a", "b"]
    assert req.headers["accept"] == "*/*"
    assert ":method" not in req.headers
    assert req.raw_headers[0] == (b":method", b"DELETE")
    assert (b"x-trace", b"b") in req.raw_headers
    assert (req.peer, req.local, req.tls) == (None, None, None)


async def test_request_view_authority_falls_back_to_host() -> None:
    """A request without :authority takes it from the host field."""
    seen: list[Request] = []

    async def handler(stream: H2Stream) -> None:
        seen.append(stream.request)
        await stream.send_headers(RESPONSE_200, end_stream=True)

    block = [(b":method", b"GET"), (b":scheme", b"http"), (b":path", b"/")]
    with trio.fail_after(5):
        async with open_peer_client(handler) as (peer, _):
            peer.h2.send_headers(1, [*block, (b"host", b"example.org")], end_stream=True)
            await peer.flush()
            await peer.receive_until(lambda ev: isinstance(ev, h2.events.StreamEnded))
    assert seen[0].authority == "example.org"
    assert seen[0].headers["host"] == "example.org"


async def test_request_view_over_tcp_has_both_addresses() -> None:
    """Over TCP, peer and local are the connection's (host, port) pairs."""
    seen: list[Request] = []

    async def handler(stream: H2Stream) -> None:
        seen.append(stream.request)
        await stream.send_headers(RESPONSE_200, end_stream=True)

    async with trio.open_nursery() as nursery:
        server: H2Server = await nursery.start(
            functools.partial(serve_tcp, handler, 0, host="127.0.0.1")
        )
        port = server.port
        with trio.fail_after(5):
            async with open_connection("127.0.0.1", port) as conn:
                assert (await conn.request("GET", "/")).status == 200
                client_addr = conn._core.transport.socket.getsockname()  # type: ignore[attr-defined]
        await server.aclose()
    [req] = seen
    assert req.local == ("127.0.0.1", port)
    assert req.peer == ("127.0.0.1", client_addr[1])
    assert req.tls is None


async def test_request_view_over_tls_reports_alpn_and_peer_certificate(
    ca: trustme.CA, server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext
) -> None:
    """Over trio.SSLStream, tls has the ALPN protocol and the client's certificate."""
    ca.configure_trust(server_ctx)  # the fixtures' contexts, with a client certificate
    server_ctx.verify_mode = ssl.CERT_REQUIRED
    server_ctx.set_alpn_protocols(["h2"])
    ca.issue_cert("client.example").configure_cert(client_ctx)
    client_ctx.set_alpn_protocols(["h2"])
    seen: list[Request] = []

    async def handler(stream: H2Stream) -> None:
        seen.append(stream.request)
        await stream.send_headers(RESPONSE_200, end_stream=True)

    client_raw, server_raw = trio.testing.memory_stream_pair()
    server_t = trio.SSLStream(server_raw, server_ctx, server_side=True)
    client_t = trio.SSLStream(client_raw, client_ctx, server_hostname="localhost")
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve_connection, server_t, handler)
            async with open_client_connection(client_t) as conn:
                assert (await conn.request("GET", "/")).status == 200
    [req] = seen
    assert req.tls is not None
    assert req.tls.alpn_protocol == "h2"
    assert req.tls.peer_certificate is not None
    assert req.tls.peer_certificate["subjectAltName"] == (("DNS", "client.example"),)
    assert (req.peer, req.local) == (None, None)  # not over a socket


async def test_request_view_on_a_client_stream_is_an_error() -> None:
    """A client stream has no request to read: RuntimeError."""

    async def handler(stream: H2Stream) -> None:
        await stream.send_headers(RESPONSE_200, end_stream=True)

    with trio.fail_after(5):
        async with (
            connected_pair(handler) as (conn, _),
            conn.open_stream(REQUEST, end_stream=True) as s,
        ):
            with pytest.raises(RuntimeError):
                s.request  # noqa: B018
            await s.receive_headers()
            assert s.cancel_reason is None


# ============================================================ handler errors


async def test_handler_raising_before_headers_answers_500(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Our client sees a complete 500 (status, text body, no traceback); the error is
    logged with its traceback; the stream closes normally; the connection serves on."""

    async def handler(stream: H2Stream) -> None:
        if stream.request.path == "/boom":
            raise ValueError("secret detail")
        await stream.send_headers(RESPONSE_200, end_stream=True)

    caplog.set_level(logging.DEBUG, logger="trio_h2t")
    with trio.fail_after(5):
        async with connected_pair(handler) as (conn, core):
            response = await conn.request("GET", "/boom")
            assert response.status == 500
            assert response.headers["content-type"].startswith("text/plain")
            assert response.headers["content-length"] == str(len(BODY_500))
            assert response.body == BODY_500
            assert b"secret" not in response.body
            assert (await conn.request("GET", "/")).status == 200
            assert core.open_streams == 0
    [record] = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert record.levelno == logging.ERROR
    assert record.exc_info is not None
    assert record.exc_info[0] is ValueError
    assert "500" in record.getMessage()


async def test_500_on_the_wire_ends_the_stream_without_a_reset() -> None:
    """On the wire: HEADERS(:status 500), DATA with END_STREAM, and no RST_STREAM for a
    request that had ended; RST_STREAM(NO_ERROR) after it for one still sending."""

    async def handler(stream: H2Stream) -> None:
        raise ValueError("boom")

    with trio.fail_after(5):
        async with open_peer_client(handler) as (peer, core):
            peer.h2.send_headers(1, REQUEST, end_stream=True)
            peer.h2.send_headers(3, REQUEST)  # its body never ends
            peer.h2.send_data(3, b"partial")
            await peer.flush()
            await peer.read_until(
                lambda: (
                    len(peer.events_of(h2.events.StreamEnded)) == 2
                    and bool(peer.frames_of(RstStreamFrame))
                )
            )
            responses = peer.events_of(h2.events.ResponseReceived)
            # The two handlers run in either order (trio schedules them so).
            assert sorted((ev.stream_id, dict(ev.headers)[b":status"]) for ev in responses) == [
                (1, b"500"),
                (3, b"500"),
            ]
            bodies = [f for f in peer.frames_of(DataFrame) if f.data]
            assert {f.stream_id for f in bodies} == {1, 3}
            assert all(f.data == BODY_500 for f in bodies)
            [rst] = peer.frames_of(RstStreamFrame)
            assert (rst.stream_id, rst.error_code) == (3, ErrorCodes.NO_ERROR)
            await trio.testing.wait_all_tasks_blocked()
            assert core.open_streams == 0


async def test_500_to_a_head_request_has_no_body() -> None:
    """RFC 9110 §9.3.2: the 500 answering a HEAD request ends with its HEADERS."""

    async def handler(stream: H2Stream) -> None:
        raise ValueError("boom")

    with trio.fail_after(5):
        async with open_peer_client(handler) as (peer, _):
            head = [(b":method", b"HEAD"), *REQUEST[1:]]
            peer.h2.send_headers(1, head, end_stream=True)
            await peer.flush()
            await peer.receive_until(lambda ev: isinstance(ev, h2.events.StreamEnded))
            [response] = peer.events_of(h2.events.ResponseReceived)
            assert dict(response.headers)[b":status"] == b"500"
            assert peer.frames_of(DataFrame) == []
            assert peer.frames_of(RstStreamFrame) == []


async def test_handler_raising_after_headers_resets_with_internal_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Once the headers are out, a raising handler's stream is reset (INTERNAL_ERROR)
    and the traceback logged; no 500 follows the 200."""

    async def handler(stream: H2Stream) -> None:
        await stream.send_headers(RESPONSE_200)
        raise KeyError("late")

    caplog.set_level(logging.ERROR, logger="trio_h2t")
    with trio.fail_after(5):
        async with open_peer_client(handler) as (peer, _):
            peer.h2.send_headers(1, REQUEST, end_stream=True)
            await peer.flush()
            await peer.read_until(lambda: bool(peer.frames_of(RstStreamFrame)))
            [rst] = peer.frames_of(RstStreamFrame)
            assert rst.error_code == ErrorCodes.INTERNAL_ERROR
            assert len(peer.frames_of(HeadersFrame)) == 1
    [record] = [r for r in caplog.records if r.name == "trio_h2t"]
    assert record.exc_info is not None
    assert record.exc_info[0] is KeyError


async def test_handler_returning_without_a_response_answers_500_and_warns(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A handler that returns having sent nothing: 500 to the client, a WARNING log."""

    async def handler(stream: H2Stream) -> None:
        await stream.read_all()

    caplog.set_level(logging.DEBUG, logger="trio_h2t")
    with trio.fail_after(5):
        async with connected_pair(handler) as (conn, _):
            response = await conn.request("POST", "/", body=b"data")
    assert (response.status, response.body) == (500, BODY_500)
    [record] = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert record.levelno == logging.WARNING
    assert record.exc_info is None
    assert "returned without a response" in record.getMessage()


async def test_handler_returning_with_its_response_unfinished_resets_and_warns(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Headers sent but the response never ended: RST_STREAM(INTERNAL_ERROR), a warning."""

    async def handler(stream: H2Stream) -> None:
        await stream.send_headers(RESPONSE_200)
        await stream.send_data(b"half")

    caplog.set_level(logging.DEBUG, logger="trio_h2t")
    with trio.fail_after(5):
        async with (
            connected_pair(handler) as (conn, _),
            conn.open_stream(REQUEST, end_stream=True) as s,
        ):
            assert await s.receive_headers() == RESPONSE_200
            with pytest.raises(StreamResetError) as info:
                await s.read_all()
            assert info.value.error_code == ErrorCodes.INTERNAL_ERROR
    [record] = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert record.levelno == logging.WARNING
    assert "without ending its response" in record.getMessage()


# ============================================================ cancel_reason


async def test_cancel_reason_for_a_peer_reset_has_its_code() -> None:
    """The peer resets the stream: the handler is cancelled, cancel_reason is
    ("peer-reset", code), and nothing (no 500) is sent on the reset stream."""
    reasons: list[CancelReason | None] = []
    started = trio.Event()

    async def handler(stream: H2Stream) -> None:
        assert stream.cancel_reason is None
        started.set()
        try:
            await stream.read_all()
        finally:
            reasons.append(stream.cancel_reason)

    with trio.fail_after(5):
        async with open_peer_client(handler) as (peer, core):
            peer.h2.send_headers(1, REQUEST)
            await peer.flush()
            await started.wait()
            peer.h2.reset_stream(1, ErrorCodes.ENHANCE_YOUR_CALM)
            await peer.flush()
            await trio.testing.wait_all_tasks_blocked()
            assert core.open_streams == 0
            assert peer.frames_of(HeadersFrame) == []
    assert reasons == [CancelReason("peer-reset", ErrorCodes.ENHANCE_YOUR_CALM)]
    assert reasons[0] is not None
    assert reasons[0].error_code is ErrorCodes.ENHANCE_YOUR_CALM


async def test_peer_reset_with_no_error_after_its_request_cancels_the_handler() -> None:
    """A client that sent its whole request and then resets with NO_ERROR (it wants no
    response) cancels the handler like any reset: cancel_reason ("peer-reset",
    NO_ERROR); the handler used to run on with no reason recorded, and a write after
    its connection ended then looked like the handler's own failure."""
    reasons: list[CancelReason | None] = []
    started = trio.Event()

    async def handler(stream: H2Stream) -> None:
        assert await stream.read_all() == b""
        started.set()
        try:
            await trio.sleep_forever()
        finally:
            reasons.append(stream.cancel_reason)

    with trio.fail_after(5):
        async with open_peer_client(handler) as (peer, core):
            peer.h2.send_headers(1, REQUEST, end_stream=True)
            await peer.flush()
            await started.wait()
            peer.h2.reset_stream(1, ErrorCodes.NO_ERROR)
            await peer.flush()
            await trio.testing.wait_all_tasks_blocked()
            assert core.open_streams == 0
            assert core.handlers_running == 0
    assert reasons == [CancelReason("peer-reset", ErrorCodes.NO_ERROR)]


async def test_cancel_reason_for_a_malformed_request_is_a_stream_error() -> None:
    """A body shorter than its content-length (ended by trailers):
    ("stream-error", PROTOCOL_ERROR)."""
    reasons: list[CancelReason | None] = []

    async def handler(stream: H2Stream) -> None:
        try:
            await stream.read_all()
        finally:
            reasons.append(stream.cancel_reason)

    with trio.fail_after(5):
        async with open_peer_client(handler) as (peer, _):
            peer.h2.send_headers(1, [*REQUEST, (b"content-length", b"10")])
            peer.h2.send_data(1, b"abc")
            # Ended by trailers: h2 checks the length only on a DATA END_STREAM.
            peer.h2.send_headers(1, [(b"x-t", b"1")], end_stream=True)
            await peer.flush()
            await peer.read_until(lambda: bool(peer.frames_of(RstStreamFrame)))
            await trio.testing.wait_all_tasks_blocked()
    assert reasons == [CancelReason("stream-error", ErrorCodes.PROTOCOL_ERROR)]


async def test_cancel_reason_when_the_connection_is_lost() -> None:
    """The client vanishes: ("connection-lost", None)."""
    reasons: list[CancelReason | None] = []
    started = trio.Event()

    async def handler(stream: H2Stream) -> None:
        started.set()
        try:
            await trio.sleep_forever()
        finally:
            reasons.append(stream.cancel_reason)

    with trio.fail_after(5):
        async with open_peer_client(handler) as (peer, _):
            peer.h2.send_headers(1, REQUEST, end_stream=True)
            await peer.flush()
            await started.wait()
    assert reasons == [CancelReason("connection-lost")]


async def test_cancel_reason_when_a_graceful_close_runs_out_of_time(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A handler still running when the server's grace period ends: ("shutdown")."""
    reasons: list[CancelReason | None] = []
    started = trio.Event()

    async def handler(stream: H2Stream) -> None:
        started.set()
        try:
            await trio.sleep_forever()
        finally:
            reasons.append(stream.cancel_reason)

    with trio.fail_after(60):
        async with (
            connected_pair(handler) as (conn, core),
            conn.open_stream(REQUEST, end_stream=True) as s,
        ):
            await started.wait()
            await core.graceful_close(timeout=5)
            with pytest.raises(trio.BrokenResourceError):
                await s.receive_headers()
    assert reasons == [CancelReason("shutdown")]


async def test_cancel_reason_stays_none_for_a_handler_that_completes() -> None:
    """A handler nobody cancelled sees None throughout."""
    reasons: list[CancelReason | None] = []

    async def handler(stream: H2Stream) -> None:
        await stream.send_headers(RESPONSE_200, end_stream=True)
        reasons.append(stream.cancel_reason)

    with trio.fail_after(5):
        async with connected_pair(handler) as (conn, _):
            await conn.request("GET", "/")
    assert reasons == [None]


DEADLINE = CancelReason("deadline")
RESPONSE_504 = [(b":status", b"504")]


async def test_cancel_reason_is_deadline_once_the_move_on_at_scope_expires(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The handler's move_on_at scope expires: cancel_reason is ("deadline") inside
    the scope and after it, and the handler still answers."""
    reasons: list[CancelReason | None] = []

    async def handler(stream: H2Stream) -> None:
        with stream.move_on_at(trio.current_time() + 1) as scope:
            try:
                await trio.sleep_forever()
            except trio.Cancelled:
                reasons.append(stream.cancel_reason)
                raise
        assert scope.cancelled_caught
        reasons.append(stream.cancel_reason)
        await stream.send_headers(RESPONSE_504, end_stream=True)

    with trio.fail_after(60):
        async with connected_pair(handler) as (conn, _):
            response = await conn.request("GET", "/")
    assert response.status == 504
    assert reasons == [DEADLINE, DEADLINE]


async def test_a_reset_after_the_deadline_leaves_deadline_as_the_reason(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The deadline cancels the handler first, the peer resets the stream while it
    is still running: the reason stays ("deadline")."""
    reasons: list[CancelReason | None] = []
    hit = trio.Event()

    async def handler(stream: H2Stream) -> None:
        with stream.move_on_at(trio.current_time() + 1):
            try:
                await trio.sleep_forever()
            except trio.Cancelled:
                hit.set()
                with trio.CancelScope(shield=True):
                    await trio.sleep(5)  # the reset arrives meanwhile
                reasons.append(stream.cancel_reason)
                raise

    with trio.fail_after(60):
        async with connected_pair(handler) as (conn, _):
            async with conn.open_stream(REQUEST, end_stream=True) as s:
                await hit.wait()
                s.reset(ErrorCodes.CANCEL)
            await trio.sleep(10)
    assert reasons == [DEADLINE]


async def test_a_deadline_after_a_reset_leaves_the_reset_as_the_reason(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The peer resets the stream first; the handler's deadline passes while it is
    still running: the reason stays ("peer-reset", CANCEL)."""
    reasons: list[CancelReason | None] = []
    started = trio.Event()

    async def handler(stream: H2Stream) -> None:
        with stream.move_on_at(trio.current_time() + 1):
            started.set()
            try:
                await trio.sleep_forever()
            except trio.Cancelled:
                with trio.CancelScope(shield=True):
                    await trio.sleep(5)  # past the deadline
                reasons.append(stream.cancel_reason)
                raise

    with trio.fail_after(60):
        async with connected_pair(handler) as (conn, _):
            async with conn.open_stream(REQUEST, end_stream=True) as s:
                await started.wait()
                s.reset(ErrorCodes.CANCEL)
            await trio.sleep(10)
    assert reasons == [CancelReason("peer-reset", ErrorCodes.CANCEL)]


async def test_a_move_on_at_scope_left_in_time_is_no_reason(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A deadline scope the handler left before its deadline: a later reset is the
    reason, though the deadline has passed by then."""
    reasons: list[CancelReason | None] = []
    started = trio.Event()

    async def handler(stream: H2Stream) -> None:
        with stream.move_on_at(trio.current_time() + 1):
            await trio.sleep(0.5)
        started.set()
        try:
            await trio.sleep_forever()
        finally:
            reasons.append(stream.cancel_reason)

    with trio.fail_after(60):
        async with connected_pair(handler) as (conn, _):
            async with conn.open_stream(REQUEST, end_stream=True) as s:
                await started.wait()
                await trio.sleep(5)
                assert conn.open_streams == 1
                s.reset(ErrorCodes.CANCEL)
            await trio.sleep(1)
    assert reasons == [CancelReason("peer-reset", ErrorCodes.CANCEL)]


async def test_move_on_at_exists_only_on_a_server_stream() -> None:
    """A client stream has no handler to time: move_on_at raises RuntimeError."""
    with trio.fail_after(5):
        async with (
            connected_pair(_echo_streaming) as (conn, _),
            conn.open_stream(REQUEST) as s,
        ):
            with pytest.raises(RuntimeError, match="server stream"):
                s.move_on_at(trio.current_time() + 1)
            await s.end()


# ============================================================ the client's Response


async def _echo_streaming(stream: H2Stream) -> None:
    """Handler: 200, then each request chunk back as it arrives, then a trailer."""
    await stream.send_headers([(b":status", b"200"), (b"content-type", b"application/x")])
    total = 0
    async for chunk in stream:
        total += len(chunk)
        await stream.send_data(chunk)
    await stream.send_trailers([(b"x-len", str(total).encode())])


async def test_request_returns_a_response() -> None:
    """status is an int, headers and trailers are Headers, body is bytes."""
    with trio.fail_after(5):
        async with connected_pair(_echo_streaming) as (conn, _):
            response = await conn.request("POST", "/", body=b"hello")
    assert isinstance(response, Response)
    assert response.status == 200
    assert response.headers == Headers([(b"content-type", b"application/x")])
    assert response.body == b"hello"
    assert response.trailers["X-Len"] == "5"
    assert "body" not in repr(response)


async def test_request_streams_an_async_generator_body() -> None:
    """Chunks from an async generator go out as they come; an echoing server answers
    while it reads, and a body far larger than the windows does not stall."""
    chunks = [bytes([i]) * 16_384 for i in range(64)]  # 1 MiB
    sent: list[int] = []

    async def body() -> AsyncIterator[bytes]:
        for i, chunk in enumerate(chunks):
            sent.append(i)
            yield chunk
            await trio.lowlevel.checkpoint()

    with trio.fail_after(20):
        async with connected_pair(_echo_streaming, client_config=SMALL, server_config=SMALL) as (
            conn,
            core,
        ):
            response = await conn.request("PUT", "/", body=body())
            assert core.open_streams == 0
    assert response.status == 200
    assert response.body == b"".join(chunks)
    assert response.trailers["x-len"] == str(len(response.body))
    assert sent == list(range(64))


async def test_request_body_iterator_error_passes_through_and_resets() -> None:
    """An error raised while iterating the body reaches the caller as itself (not in
    an ExceptionGroup); the server's handler sees the stream reset."""
    reasons: list[CancelReason | None] = []
    got_chunk = trio.Event()

    async def handler(stream: H2Stream) -> None:
        try:
            await stream.receive_some()
            got_chunk.set()
            await stream.read_all()
        finally:
            reasons.append(stream.cancel_reason)

    async def body() -> AsyncIterator[bytes]:
        yield b"first"
        await got_chunk.wait()
        raise OSError("the file went away")

    with trio.fail_after(5):
        async with connected_pair(handler) as (conn, _):
            with pytest.raises(OSError, match="went away"):
                await conn.request("POST", "/", body=body())
            await trio.testing.wait_all_tasks_blocked()
    assert reasons == [CancelReason("peer-reset", ErrorCodes.CANCEL)]


async def test_request_stops_sending_the_body_once_the_response_is_complete() -> None:
    """A server that answers without reading: request() returns its response and the
    endless body is no longer pulled."""
    pulled = 0

    async def handler(stream: H2Stream) -> None:
        await stream.send_headers([(b":status", b"413")], end_stream=True)

    async def endless() -> AsyncIterator[bytes]:
        nonlocal pulled
        while True:
            pulled += 1
            yield b"x" * 1000

    with trio.fail_after(5):
        async with connected_pair(handler) as (conn, _):
            response = await conn.request("POST", "/", body=endless())
            after = pulled
            await trio.testing.wait_all_tasks_blocked()
            assert pulled == after
    assert (response.status, response.body) == (413, b"")


async def test_request_with_a_malformed_status_is_a_remote_protocol_error() -> None:
    """A :status that is not three digits raises RemoteProtocolError."""
    with trio.fail_after(5):
        async with open_peer_server() as (conn, peer), trio.open_nursery() as nursery:

            async def serve() -> None:
                ev = await peer.receive_until(lambda ev: isinstance(ev, h2.events.RequestReceived))
                peer.h2.send_headers(ev.stream_id, [(b":status", b"2x0")], end_stream=True)
                await peer.flush()

            nursery.start_soon(serve)
            with pytest.raises(RemoteProtocolError, match="three digits"):
                await conn.request("GET", "/")


# ============================================================ interop


async def test_httpx_sees_a_500_instead_of_a_reset() -> None:
    """httpx (HTTP/2, prior knowledge) gets a 500 with the text body from a handler
    that raised before responding, where it used to get a bare stream reset."""
    import httpx

    async def handler(stream: H2Stream) -> None:
        raise RuntimeError("boom")

    async with trio.open_nursery() as nursery:
        server: H2Server = await nursery.start(
            functools.partial(serve_tcp, handler, 0, host="127.0.0.1")
        )
        with trio.fail_after(10):
            async with httpx.AsyncClient(http1=False, http2=True) as client:
                response = await client.get(f"http://127.0.0.1:{server.port}/")
        await server.aclose()
    assert response.http_version == "HTTP/2"
    assert response.status_code == 500
    assert response.headers["content-type"].startswith("text/plain")
    assert response.content == BODY_500
