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
from helpers import REQUEST, RESPONSE_200, open_peer_client

from trio_h2t import H2Stream

EARLY_HINTS = [(b":status", b"103"), (b"link", b"</style.css>; rel=preload; as=style")]
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
