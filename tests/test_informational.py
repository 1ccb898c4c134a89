"""Informational (1xx) responses: a server sends them with ``send_informational``
(103 Early Hints, 100 Continue; an ``expect: 100-continue`` request gets its 100 on
the handler's first body read), and a client keeps them apart from the final
response (``receive_headers`` never returns one) in ``informational`` and
``receive_informational``."""

from __future__ import annotations

import h2.events
import pytest
import trio
import trio.testing
from h2.errors import ErrorCodes
from helpers import (
    REQUEST,
    RESPONSE_200,
    ScriptedPeer,
    connected_pair,
    open_peer_client,
    open_peer_server,
)
from hyperframe.frame import RstStreamFrame

from trio_h2t import H2Stream, StreamResetError
from trio_h2t._h2state import MAX_INFORMATIONAL

HINT = (b"link", b"</style.css>; rel=preload; as=style")
EARLY_HINTS = [(b":status", b"103"), HINT]
POST = [(b":method", b"POST"), *REQUEST[1:]]
EXPECT = [*POST, (b"expect", b"100-continue")]


async def test_server_sends_103_then_the_final_response() -> None:
    """send_informational(103) goes out as its own HEADERS before the 200, no END_STREAM."""

    async def handler(stream: H2Stream) -> None:
        await stream.send_informational(EARLY_HINTS)
        await stream.send_informational([(":status", "103"), ("link", "</a.js>; rel=preload")])
        await stream.send_headers(RESPONSE_200)
        await stream.send_data(b"ok", end_stream=True)

    with trio.fail_after(5):
        async with open_peer_client(handler) as (peer, _core):
            peer.h2.send_headers(1, REQUEST, end_stream=True)
            await peer.flush()
            await peer.receive_until(lambda ev: isinstance(ev, h2.events.StreamEnded))
    kinds = [
        type(ev).__name__
        for ev in peer.events
        if isinstance(ev, h2.events.InformationalResponseReceived | h2.events.ResponseReceived)
    ]
    assert kinds == ["InformationalResponseReceived"] * 2 + ["ResponseReceived"]
    first, second = peer.events_of(h2.events.InformationalResponseReceived)
    assert first.headers == EARLY_HINTS
    assert second.headers == [(b":status", b"103"), (b"link", b"</a.js>; rel=preload")]
    assert peer.events_of(h2.events.ResponseReceived)[0].headers == RESPONSE_200


@pytest.mark.parametrize(
    ("block", "error", "match"),
    [
        ([(b":status", b"101")], ValueError, "101 cannot be used"),
        ([(b":status", b"200")], ValueError, "is final"),
        ([(b":status", b"1x3")], ValueError, "three digits"),
        ([(b":status", b"103"), (b"Link", b"x")], ValueError, "malformed"),
    ],
    ids=["101", "final", "not-digits", "uppercase"],
)
async def test_bad_informational_is_refused_with_nothing_queued(
    block: list[tuple[bytes, bytes]], error: type[Exception], match: str
) -> None:
    """A 101, a final status or a malformed 1xx block raises; the response then works."""

    async def handler(stream: H2Stream) -> None:
        with pytest.raises(error, match=match):
            await stream.send_informational(block)
        await stream.send_headers(RESPONSE_200, end_stream=True)

    with trio.fail_after(5):
        async with open_peer_client(handler) as (peer, _core):
            peer.h2.send_headers(1, REQUEST, end_stream=True)
            await peer.flush()
            await peer.receive_until(lambda ev: isinstance(ev, h2.events.StreamEnded))
    assert not peer.events_of(h2.events.InformationalResponseReceived)
    assert peer.events_of(h2.events.ResponseReceived)[0].headers == RESPONSE_200


async def test_informational_after_final_headers_is_a_runtime_error() -> None:
    """send_informational after send_headers raises RuntimeError (a bug, not the peer)."""
    raised: list[BaseException] = []

    async def handler(stream: H2Stream) -> None:
        await stream.send_headers(RESPONSE_200)
        with pytest.raises(RuntimeError, match="before send_headers") as info:
            await stream.send_informational(EARLY_HINTS)
        raised.append(info.value)
        await stream.end()

    with trio.fail_after(5):
        async with open_peer_client(handler) as (peer, _core):
            peer.h2.send_headers(1, REQUEST, end_stream=True)
            await peer.flush()
            await peer.receive_until(lambda ev: isinstance(ev, h2.events.StreamEnded))
    assert len(raised) == 1


async def test_expect_100_continue_gets_100_on_first_body_read() -> None:
    """A client that waits for 100 before its body gets it when the handler first
    reads the body (no explicit call), then the handler's echo."""

    async def handler(stream: H2Stream) -> None:
        body = await stream.read_all()
        await stream.send_headers(RESPONSE_200)
        await stream.send_data(body, end_stream=True)

    with trio.fail_after(5):
        async with open_peer_client(handler) as (peer, _core):
            peer.h2.send_headers(1, EXPECT)
            await peer.flush()
            info = await peer.receive_until(
                lambda ev: isinstance(ev, h2.events.InformationalResponseReceived)
            )
            assert info.headers == [(b":status", b"100")]
            peer.h2.send_data(1, b"the body", end_stream=True)
            await peer.flush()
            await peer.receive_until(lambda ev: isinstance(ev, h2.events.StreamEnded))
    assert b"".join(ev.data for ev in peer.events_of(h2.events.DataReceived)) == b"the body"
    assert len(peer.events_of(h2.events.InformationalResponseReceived)) == 1


@pytest.mark.parametrize("explicit", [True, False], ids=["send_informational-100", "final-first"])
async def test_no_automatic_100_after_an_explicit_one_or_a_final_answer(explicit: bool) -> None:
    """A handler that sent its own 100 gets no second one; one that answers 417 at once
    sends no 100 at all (the client need not send its body)."""

    async def handler(stream: H2Stream) -> None:
        if explicit:
            await stream.send_informational([(b":status", b"100")])
            body = await stream.read_all()
            await stream.send_headers(RESPONSE_200)
            await stream.send_data(body, end_stream=True)
        else:
            await stream.send_headers([(b":status", b"417")], end_stream=True)
            await stream.read_all()  # reading after the final answer queues no 100

    with trio.fail_after(5):
        async with open_peer_client(handler) as (peer, _core):
            peer.h2.send_headers(1, EXPECT)
            await peer.flush()
            if explicit:
                await peer.receive_until(
                    lambda ev: isinstance(ev, h2.events.InformationalResponseReceived)
                )
                peer.h2.send_data(1, b"x", end_stream=True)
                await peer.flush()
            await peer.receive_until(lambda ev: isinstance(ev, h2.events.StreamEnded))
            if not explicit:
                peer.h2.send_data(1, b"x", end_stream=True)  # sent anyway: read, no 100
                await peer.flush()
                await trio.testing.wait_all_tasks_blocked()
    assert len(peer.events_of(h2.events.InformationalResponseReceived)) == int(explicit)


# ------------------------------------------------------------------ the client side


async def _answer_with_hints(peer: ScriptedPeer, count: int = 2) -> None:
    """The scripted server: ``count`` 103 responses, then a 200 with a body."""
    await peer.receive_until(lambda ev: isinstance(ev, h2.events.RequestReceived))
    for _ in range(count):
        peer.h2.send_headers(1, EARLY_HINTS)
    peer.h2.send_headers(1, RESPONSE_200)
    peer.h2.send_data(1, b"body", end_stream=True)
    await peer.flush()


async def test_client_skips_1xx_in_receive_headers_and_keeps_them() -> None:
    """receive_headers returns the final 200; informational holds both 103s, and
    receive_informational hands them out in order, then None."""
    with trio.fail_after(5):
        async with (
            open_peer_server() as (conn, peer),
            conn.open_stream(REQUEST, end_stream=True) as stream,
        ):
            await _answer_with_hints(peer)
            assert await stream.receive_headers() == RESPONSE_200
            assert stream.informational == [EARLY_HINTS, EARLY_HINTS]
            assert await stream.receive_informational() == EARLY_HINTS
            assert await stream.receive_informational() == EARLY_HINTS
            assert await stream.receive_informational() is None
            assert await stream.read_all() == b"body"


async def test_client_request_returns_the_1xx_in_the_response() -> None:
    """ClientConnection.request: Response.informational has each 103 (status, headers)."""
    with trio.fail_after(5):
        async with open_peer_server() as (conn, peer), trio.open_nursery() as nursery:
            nursery.start_soon(_answer_with_hints, peer)
            response = await conn.request("GET", "/")
    assert (response.status, response.body) == (200, b"body")
    assert [(r.status, r.headers.raw) for r in response.informational] == [(103, (HINT,))] * 2


async def test_too_many_1xx_reset_the_stream_only() -> None:
    """Past MAX_INFORMATIONAL 1xx on one stream: RST_STREAM(ENHANCE_YOUR_CALM) for it,
    the stream's calls raise StreamResetError, the connection carries on."""
    with trio.fail_after(5):
        async with open_peer_server() as (conn, peer):
            async with conn.open_stream(REQUEST, end_stream=True) as stream:
                await _answer_with_hints(peer, MAX_INFORMATIONAL + 1)
                with pytest.raises(StreamResetError) as info:
                    await stream.receive_headers()
                assert info.value.error_code == ErrorCodes.ENHANCE_YOUR_CALM
            await peer.read_until(lambda: bool(peer.frames_of(RstStreamFrame)))
            rsts = [(f.stream_id, f.error_code) for f in peer.frames_of(RstStreamFrame)]
            assert rsts == [(1, ErrorCodes.ENHANCE_YOUR_CALM)]
            assert conn.error is None


async def test_100_continue_both_sides() -> None:
    """The documented recipe: a trio_h2t client waits (bounded) for the 100 our server
    sends on the handler's first read, then sends its body; the echo comes back."""

    async def echo(stream: H2Stream) -> None:
        body = await stream.read_all()
        await stream.send_headers(RESPONSE_200)
        await stream.send_data(body, end_stream=True)

    with trio.fail_after(5):
        async with connected_pair(echo) as (conn, _core):
            headers = conn.request_headers("POST", "/", [("expect", "100-continue")])
            async with conn.open_stream(headers) as stream:
                info = None
                with trio.move_on_after(1):
                    while (info := await stream.receive_informational()) is not None:
                        if info[0] == (b":status", b"100"):
                            break
                assert info == [(b":status", b"100")]
                assert stream.headers is None  # no final response yet
                await stream.send_data(b"payload", end_stream=True)
                assert await stream.receive_headers() == RESPONSE_200
                assert await stream.read_all() == b"payload"


async def test_100_continue_refused_by_a_final_answer() -> None:
    """A server that answers 417 at once: receive_informational returns None (no 100
    will come), receive_headers gives the 417, and no body need be sent."""

    async def refuse(stream: H2Stream) -> None:
        await stream.send_headers([(b":status", b"417")], end_stream=True)

    with trio.fail_after(5):
        async with connected_pair(refuse) as (conn, _core):
            headers = conn.request_headers("POST", "/", [("expect", "100-continue")])
            async with conn.open_stream(headers) as stream:
                assert await stream.receive_informational() is None
                assert await stream.receive_headers() == [(b":status", b"417")]
                assert stream.informational == []


async def test_informational_calls_on_the_wrong_side_are_runtime_errors() -> None:
    """send_informational on a client stream, receive_informational on a server one."""
    raised: list[BaseException] = []

    async def handler(stream: H2Stream) -> None:
        with pytest.raises(RuntimeError, match="client streams") as info:
            await stream.receive_informational()
        raised.append(info.value)
        assert stream.informational == []
        await stream.send_headers(RESPONSE_200, end_stream=True)

    with trio.fail_after(5):
        async with (
            connected_pair(handler) as (conn, _core),
            conn.open_stream(REQUEST, end_stream=True) as stream,
        ):
            with pytest.raises(RuntimeError, match="server streams"):
                await stream.send_informational(EARLY_HINTS)
            assert await stream.receive_headers() == RESPONSE_200
    assert len(raised) == 1
