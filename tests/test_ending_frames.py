"""Every way a connection ends, on both sides: the exact frames the peer receives last,
then EOF, within a bound (docs/cancellation.md, "How a connection ends").

``tests/conformance/test_client.py`` and ``tests/test_endings.py`` already pin most
client cases (protocol errors in every phase, the handshake timeout, the peer's GOAWAY,
peer EOF, a raising or cancelled block with a stream open); this file adds the server's
side of each ending, and the client cases those leave out (``aclose`` with a stream in
flight, a raising block with no stream, I/O errors, a cut write).
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import h2.config
import h2.events
import pytest
import trio
import trio.testing
from _helpers_common import FaultyStream, read_to_eof as _read_all
from h2.errors import ErrorCodes
from helpers import REQUEST, RESPONSE_200, ScriptedPeer, UnlimitedH2Connection, clogged_pair
from hyperframe.frame import (
    DataFrame,
    Frame,
    GoAwayFrame,
    HeadersFrame,
    PingFrame,
    RstStreamFrame,
    SettingsFrame,
    WindowUpdateFrame,
)

from trio_h2t import (
    ConnectionLostError,
    H2Server,
    H2Stream,
    KeepaliveTimeoutError,
    ServerConnection,
    TransportConfig,
    open_client_connection,
    serve_connection,
    serve_tcp,
)
from trio_h2t._items import Ping

#: DATA on stream 0: a connection error PROTOCOL_ERROR (RFC 9113 §6.1).
BAD_FRAME = b"\x00\x00\x01\x00\x00\x00\x00\x00\x00x"
#: A SETTINGS frame of length 5: a connection error FRAME_SIZE_ERROR (RFC 9113 §6.5).
BAD_SETTINGS = b"\x00\x00\x05\x04\x00\x00\x00\x00\x00" + b"\x00" * 5
#: The client connection preface (RFC 9113 §3.4).
MAGIC = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#: What a trio_h2t endpoint writes first, with the default config: SETTINGS, and a
#: connection WINDOW_UPDATE (its connection window is larger than the RFC's).
OPENING = ["SETTINGS", "WINDOW_UPDATE(0)"]
#: A server drain's first GOAWAY (docs/keepalive-and-shutdown.md, "The drain").
DRAIN_GOAWAY = "GOAWAY(NO_ERROR,last=2147483647)"


def make_peer(transport: trio.abc.Stream, *, client_side: bool) -> ScriptedPeer:
    """A ScriptedPeer whose h2 survives our GOAWAY, so it reads what follows it."""
    config = h2.config.H2Configuration(client_side=client_side, header_encoding=None)
    return ScriptedPeer(transport, client_side=client_side, h2_conn=UnlimitedH2Connection(config))


def describe(frame: Frame) -> str:
    """One frame as text: type, stream id, and what an ending is judged by."""
    sid = frame.stream_id
    if isinstance(frame, GoAwayFrame):
        return f"GOAWAY({ErrorCodes(frame.error_code).name},last={frame.last_stream_id})"
    if isinstance(frame, RstStreamFrame):
        return f"RST_STREAM({sid},{ErrorCodes(frame.error_code).name})"
    if isinstance(frame, HeadersFrame | DataFrame):
        end = ",END_STREAM" if "END_STREAM" in frame.flags else ""
        return f"{type(frame).__name__[:-5].upper()}({sid}{end})"
    if isinstance(frame, SettingsFrame | PingFrame):
        ack = "(ACK)" if "ACK" in frame.flags else ""
        return f"{type(frame).__name__[:-5].upper()}{ack}"
    if isinstance(frame, WindowUpdateFrame):
        return f"WINDOW_UPDATE({sid})"
    return f"{type(frame).__name__}({sid})"  # pragma: no cover - not sent in these cases


async def read_to_eof(peer: ScriptedPeer) -> list[str]:
    """Read (answering nothing) until the link closes; every frame received, then EOF."""
    await _read_all(peer)
    return [*map(describe, peer.frames), "EOF"]


def after(wire: list[str], mark: str) -> list[str]:
    """The part of ``wire`` from the first frame equal to ``mark`` on."""
    return wire[wire.index(mark) :]


@asynccontextmanager
async def served(
    handler: Any,
    *,
    config: TransportConfig | None = None,
    transports: tuple[trio.abc.Stream, trio.abc.Stream] | None = None,
) -> AsyncIterator[tuple[ScriptedPeer, ServerConnection, trio.Nursery]]:
    """``serve_connection(handler)`` opposite a ScriptedPeer client, after the handshake.

    Yields the peer, the ServerConnection and the nursery ``serve_connection`` runs in
    (cancel it to cancel the server). ``transports`` is ``(server's end, peer's end)``.
    """
    server_t, client_t = transports or trio.testing.memory_stream_pair()
    peer = make_peer(client_t, client_side=True)
    async with trio.open_nursery() as nursery:
        server: ServerConnection = await nursery.start(
            functools.partial(serve_connection, server_t, handler, config=config)
        )
        await peer.handshake()
        await peer.read_until(lambda: "SETTINGS(ACK)" in map(describe, peer.frames))
        yield peer, server, nursery


def stalling(started: trio.Event, release: trio.Event | None = None) -> Any:
    """A handler that sends its headers, then waits for ``release`` (forever if None)
    before ending the response with ``b"done"``."""

    async def handler(stream: H2Stream) -> None:
        await stream.send_headers(RESPONSE_200)
        started.set()
        if release is None:
            await trio.sleep_forever()
        await release.wait()
        await stream.send_data(b"done", end_stream=True)

    return handler


async def open_request(peer: ScriptedPeer, stream_id: int = 1) -> None:
    """The peer sends a GET on ``stream_id`` and reads until its response HEADERS."""
    peer.h2.send_headers(stream_id, REQUEST, end_stream=True)
    await peer.flush()
    await peer.read_until(lambda: f"HEADERS({stream_id})" in map(describe, peer.frames))


# ------------------------------------------------------------------ server side


async def test_server_graceful_close_goaway_then_the_stream_finishes(
    autojump_clock: trio.abc.Clock,
) -> None:
    """ServerConnection.aclose: GOAWAY(NO_ERROR, 2^31-1) and PING, then (the PING
    answered) GOAWAY(NO_ERROR, last 1), then stream 1's DATA, then EOF."""
    started, release = trio.Event(), trio.Event()
    with trio.fail_after(30):
        async with served(stalling(started, release)) as (peer, server, nursery):
            await open_request(peer)
            nursery.start_soon(server.aclose)
            # read_until answers the drain's PING.
            await peer.read_until(lambda: len(peer.frames_of(GoAwayFrame)) == 2)
            release.set()
            wire = await read_to_eof(peer)
    assert after(wire, "HEADERS(1)") == [
        "HEADERS(1)",
        DRAIN_GOAWAY,
        "PING",
        "GOAWAY(NO_ERROR,last=1)",
        "DATA(1,END_STREAM)",
        "EOF",
    ]


async def test_server_graceful_close_is_cut_at_its_grace(autojump_clock: trio.abc.Clock) -> None:
    """A handler that never ends is cut off after ``grace``: the two GOAWAYs (the PING
    unanswered), then EOF, nothing else."""
    started = trio.Event()
    with trio.fail_after(30):
        async with served(stalling(started)) as (peer, server, _nursery):
            await open_request(peer)
            with trio.fail_after(5 + 2):  # grace, then loopy's bounded final write
                await server.aclose(grace=5)
            wire = await read_to_eof(peer)
    assert after(wire, "HEADERS(1)") == [
        "HEADERS(1)",
        DRAIN_GOAWAY,
        "PING",
        "GOAWAY(NO_ERROR,last=1)",
        "EOF",
    ]


async def test_h2server_aclose_over_tcp_goaway_then_the_stream_finishes() -> None:
    """H2Server.aclose over TCP: the two GOAWAYs (2^31-1 and its PING, answered; then
    last 1), stream 1 finishes, then EOF."""
    started, release = trio.Event(), trio.Event()
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            h2server: H2Server = await nursery.start(
                functools.partial(serve_tcp, stalling(started, release), 0, host="127.0.0.1")
            )
            tcp = await trio.open_tcp_stream("127.0.0.1", h2server.port)
            peer = make_peer(tcp, client_side=True)
            await peer.handshake()
            await open_request(peer)
            nursery.start_soon(h2server.aclose)
            await peer.read_until(lambda: len(peer.frames_of(GoAwayFrame)) == 2)
            release.set()
            wire = await read_to_eof(peer)
            await tcp.aclose()
    assert after(wire, "HEADERS(1)") == [
        "HEADERS(1)",
        DRAIN_GOAWAY,
        "PING",
        "GOAWAY(NO_ERROR,last=1)",
        "DATA(1,END_STREAM)",
        "EOF",
    ]


async def test_server_answers_the_peers_goaway_after_the_last_stream(
    autojump_clock: trio.abc.Clock,
) -> None:
    """The client's GOAWAY: stream 1 still finishes, then GOAWAY(NO_ERROR, last 1), EOF."""
    started, release = trio.Event(), trio.Event()
    with trio.fail_after(30):
        async with served(stalling(started, release)) as (peer, _server, _nursery):
            await open_request(peer)
            # Framed by hand: the peer's own h2 would refuse the response after it.
            await peer.send_raw(GoAwayFrame(0, last_stream_id=0).serialize())
            await trio.testing.wait_all_tasks_blocked()
            release.set()
            wire = await read_to_eof(peer)
    assert after(wire, "HEADERS(1)") == [
        "HEADERS(1)",
        "DATA(1,END_STREAM)",
        "GOAWAY(NO_ERROR,last=1)",
        "EOF",
    ]


async def test_server_protocol_error_mid_stream_goaway_with_its_code() -> None:
    """A client's protocol error with stream 1 open: GOAWAY(PROTOCOL_ERROR, last 1), EOF;
    the cancelled handler's RST_STREAM is not written after it."""
    started = trio.Event()
    with trio.fail_after(10):
        async with served(stalling(started)) as (peer, server, _nursery):
            await open_request(peer)
            await peer.send_raw(BAD_FRAME)
            wire = await read_to_eof(peer)
    assert after(wire, "HEADERS(1)") == ["HEADERS(1)", "GOAWAY(PROTOCOL_ERROR,last=1)", "EOF"]
    assert getattr(server.error, "error_code", None) == ErrorCodes.PROTOCOL_ERROR


async def test_server_protocol_error_in_the_handshake_goaway_with_its_code() -> None:
    """A malformed first SETTINGS from the client: the server's opening, then
    GOAWAY(FRAME_SIZE_ERROR, last 0), then EOF; serve_connection returns."""
    server_t, client_t = trio.testing.memory_stream_pair()
    peer = make_peer(client_t, client_side=True)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve_connection, server_t, stalling(trio.Event()))
            await peer.send_raw(MAGIC + BAD_SETTINGS)
            wire = await read_to_eof(peer)
    assert wire == [*OPENING, "GOAWAY(FRAME_SIZE_ERROR,last=0)", "EOF"]


def _ended(stream_id: int, ev: object) -> bool:
    """``ev`` ends ``stream_id`` (its END_STREAM, or a reset)."""
    return isinstance(ev, h2.events.StreamEnded | h2.events.StreamReset) and (
        ev.stream_id == stream_id
    )


async def test_server_handler_errors_end_only_their_stream() -> None:
    """A handler raising before its headers gets a 500 (HEADERS, DATA END_STREAM), one
    raising after them RST_STREAM(INTERNAL_ERROR); no GOAWAY, stream 5 is answered."""

    async def handler(stream: H2Stream) -> None:
        if stream.stream_id == 1:
            raise ValueError("before headers")
        await stream.send_headers(RESPONSE_200)
        if stream.stream_id == 3:
            raise ValueError("after headers")
        await stream.send_data(b"fine", end_stream=True)

    with trio.fail_after(10):
        async with served(handler) as (peer, server, _nursery):
            for sid in (1, 3, 5):
                peer.h2.send_headers(sid, REQUEST, end_stream=True)
                await peer.flush()
                await peer.receive_until(functools.partial(_ended, sid))
            assert server.error is None  # the connection carries on
            await peer.transport.aclose()
    wire = list(map(describe, peer.frames))
    assert after(wire, "HEADERS(1)") == [
        "HEADERS(1)",
        "DATA(1,END_STREAM)",
        "HEADERS(3)",
        "RST_STREAM(3,INTERNAL_ERROR)",
        "HEADERS(5)",
        "DATA(5,END_STREAM)",
    ]


async def test_serve_tcp_cancelled_sends_goaway_with_last_stream() -> None:
    """serve_tcp cancelled with a handler mid-response drains: the two GOAWAYs (the PING
    unanswered; graceful_close_timeout cuts the wait for it), then EOF."""
    started = trio.Event()
    config = TransportConfig(graceful_close_timeout=1)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            h2server: H2Server = await nursery.start(
                functools.partial(serve_tcp, stalling(started), 0, host="127.0.0.1", config=config)
            )
            tcp = await trio.open_tcp_stream("127.0.0.1", h2server.port)
            peer = make_peer(tcp, client_side=True)
            await peer.handshake()
            await open_request(peer)
            nursery.cancel_scope.cancel()
        wire = await read_to_eof(peer)
        await tcp.aclose()
    assert after(wire, "HEADERS(1)") == [
        "HEADERS(1)",
        DRAIN_GOAWAY,
        "PING",
        "GOAWAY(NO_ERROR,last=1)",
        "EOF",
    ]


async def test_server_cancelled_inside_send_all_writes_nothing_more(
    autojump_clock: trio.abc.Clock,
) -> None:
    """serve_connection cancelled while loopy is blocked in send_all (the client stopped
    reading): no GOAWAY follows the cut write, and it returns at once."""
    ours, theirs = clogged_pair()
    started = trio.Event()

    async def handler(stream: H2Stream) -> None:
        await stream.send_headers(RESPONSE_200)
        started.set()
        await stream.send_data(b"x" * 60_000, end_stream=True)

    with trio.fail_after(30):
        async with served(handler, transports=(ours, theirs)) as (peer, _server, nursery):
            peer.h2.send_headers(1, REQUEST, end_stream=True)
            await peer.flush()
            await started.wait()
            await trio.testing.wait_all_tasks_blocked()  # loopy is stuck in send_all
            nursery.cancel_scope.cancel()
        wire = await read_to_eof(peer)
    assert not [t for t in wire if t.startswith(("GOAWAY", "RST_STREAM"))]
    assert wire[-1] == "EOF"


async def test_server_peer_eof_mid_response_writes_nothing_more() -> None:
    """The client half-closes while a handler is mid-response: the server writes nothing
    more (no RST_STREAM, no GOAWAY) and closes."""
    started = trio.Event()
    with trio.fail_after(10):
        async with served(stalling(started)) as (peer, server, _nursery):
            await open_request(peer)
            transport = peer.transport
            assert isinstance(transport, trio.StapledStream)
            await transport.send_eof()
            wire = await read_to_eof(peer)
    assert after(wire, "HEADERS(1)") == ["HEADERS(1)", "EOF"]
    assert isinstance(server.error, ConnectionLostError)


async def test_server_send_all_error_writes_nothing_more() -> None:
    """The server's send_all raises: nothing more reaches the client, which sees EOF."""
    server_t, client_t = trio.testing.memory_stream_pair()
    faulty = FaultyStream(server_t)
    started = trio.Event()
    with trio.fail_after(10):
        async with served(stalling(started), transports=(faulty, client_t)) as (peer, server, _n):
            faulty.fail_send = True
            peer.h2.send_headers(1, REQUEST, end_stream=True)
            await peer.flush()
            seen = len(peer.frames)
            wire = await read_to_eof(peer)
    assert wire[seen:] == ["EOF"]
    assert isinstance(server.error, ConnectionLostError)


async def test_server_receive_error_sends_goaway() -> None:
    """The server's receive_some raises with stream 1 open: the write side still works,
    so the client gets GOAWAY(NO_ERROR, last 1), then EOF."""
    server_t, client_t = trio.testing.memory_stream_pair()
    faulty = FaultyStream(server_t)
    started = trio.Event()
    with trio.fail_after(10):
        async with served(stalling(started), transports=(faulty, client_t)) as (peer, server, _n):
            await open_request(peer)
            faulty.fail_receive = True
            await peer.send_raw(PingFrame(0, b"12345678").serialize())
            wire = await read_to_eof(peer)
    assert after(wire, "HEADERS(1)") == ["HEADERS(1)", "GOAWAY(NO_ERROR,last=1)", "EOF"]
    assert isinstance(server.error, ConnectionLostError)


def fault_in(obj: object, name: str, exc: Exception) -> None:
    """Make ``obj.name`` (on that object only) raise ``exc``: an injected bug."""

    def raise_it(*args: object) -> None:
        raise exc

    setattr(obj, name, raise_it)


@pytest.mark.injects_faults
async def test_server_reader_fault_sends_internal_error_goaway() -> None:
    """A bug in the server's reader (h2's receive_data raises) with stream 1 open: the
    client gets GOAWAY(INTERNAL_ERROR, last 1), then EOF."""
    started = trio.Event()
    with trio.fail_after(10):
        async with served(stalling(started)) as (peer, server, _nursery):
            await open_request(peer)
            fault_in(server._core.h2, "receive_data", KeyError("reader bug"))
            await peer.send_raw(PingFrame(0, b"12345678").serialize())
            wire = await read_to_eof(peer)
    assert after(wire, "HEADERS(1)") == ["HEADERS(1)", "GOAWAY(INTERNAL_ERROR,last=1)", "EOF"]
    assert isinstance(server.error, ConnectionLostError)
    assert isinstance(server.error.__cause__, KeyError)


@pytest.mark.injects_faults
async def test_server_loopy_fault_sends_internal_error_goaway() -> None:
    """A bug in the server's loopy on a connection-level item (framing a PING raises)
    with stream 1 open: the client gets GOAWAY(INTERNAL_ERROR, last 1), then EOF."""
    started = trio.Event()
    with trio.fail_after(10):
        async with served(stalling(started)) as (peer, server, _nursery):
            await open_request(peer)
            fault_in(server._core.h2, "ping", AssertionError("loopy bug"))
            server._core.put(Ping(b"12345678"))
            wire = await read_to_eof(peer)
    assert after(wire, "HEADERS(1)") == ["HEADERS(1)", "GOAWAY(INTERNAL_ERROR,last=1)", "EOF"]
    assert isinstance(server.error, ConnectionLostError)
    assert isinstance(server.error.__cause__, AssertionError)


async def test_server_keepalive_timeout_ping_then_goaway(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A client that sends nothing after the handshake: the server's keepalive PING
    after server_keepalive_time, then, nothing arriving within keepalive_timeout,
    GOAWAY(NO_ERROR, last 1), then EOF; the connection's error is KeepaliveTimeoutError."""
    config = TransportConfig(server_keepalive_time=60, keepalive_timeout=20)
    started = trio.Event()
    with trio.fail_after(60 + 20 + 5):
        async with served(stalling(started), config=config) as (peer, server, _nursery):
            await open_request(peer)
            wire = await read_to_eof(peer)
    assert after(wire, "HEADERS(1)") == ["HEADERS(1)", "PING", "GOAWAY(NO_ERROR,last=1)", "EOF"]
    assert isinstance(server.error, KeepaliveTimeoutError)


async def test_server_handshake_timeout_silent_client(autojump_clock: trio.abc.Clock) -> None:
    """A client that sends nothing: after handshake_timeout the server writes its opening
    and GOAWAY(NO_ERROR, last 0), then closes."""
    server_t, client_t = trio.testing.memory_stream_pair()
    peer = make_peer(client_t, client_side=True)
    config = TransportConfig(handshake_timeout=3)
    with trio.fail_after(3 + 2):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                functools.partial(serve_connection, server_t, stalling(trio.Event()), config=config)
            )
            wire = await read_to_eof(peer)
    assert wire == [*OPENING, "GOAWAY(NO_ERROR,last=0)", "EOF"]


async def test_server_handshake_timeout_preface_without_settings(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A client that sends the preface magic but no SETTINGS: after handshake_timeout,
    the server's opening, then GOAWAY(NO_ERROR, last 0), then EOF."""
    server_t, client_t = trio.testing.memory_stream_pair()
    peer = make_peer(client_t, client_side=True)
    config = TransportConfig(handshake_timeout=3)
    with trio.fail_after(3 + 2):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                functools.partial(serve_connection, server_t, stalling(trio.Event()), config=config)
            )
            await peer.send_raw(MAGIC)
            wire = await read_to_eof(peer)
    assert wire == [*OPENING, "GOAWAY(NO_ERROR,last=0)", "EOF"]


# ------------------------------------------------------------------ client side


@asynccontextmanager
async def scripted_server(
    transports: tuple[trio.abc.Stream, trio.abc.Stream],
) -> AsyncIterator[ScriptedPeer]:
    """A ScriptedPeer server on the peer's end of ``transports``; its preface is sent and
    the client's SETTINGS acked in the background (the client needs them to enter)."""
    peer = make_peer(transports[1], client_side=False)

    async def shake() -> None:
        peer.h2.initiate_connection()
        await peer.flush()
        await peer.receive_until(lambda ev: isinstance(ev, h2.events.RemoteSettingsChanged))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(shake)
        yield peer


async def test_client_aclose_goaway_then_the_stream_finishes() -> None:
    """ClientConnection.aclose with stream 1 open: GOAWAY(NO_ERROR, last 0) first, then
    the request body's DATA(1, END_STREAM), then EOF once the response is in."""
    client_t, server_t = trio.testing.memory_stream_pair()
    with trio.fail_after(10):
        async with (
            scripted_server((client_t, server_t)) as peer,
            open_client_connection(client_t) as conn,
            trio.open_nursery() as nursery,
        ):
            async with conn.open_stream(REQUEST) as stream:
                await peer.read_until(lambda: bool(peer.events_of(h2.events.RequestReceived)))
                nursery.start_soon(conn.aclose)
                await peer.read_until(lambda: bool(peer.frames_of(GoAwayFrame)))
                await stream.send_data(b"body", end_stream=True)
                await peer.read_until(lambda: bool(peer.events_of(h2.events.StreamEnded)))
                peer.h2.send_headers(1, RESPONSE_200, end_stream=True)
                await peer.flush()
                await stream.receive_headers()
            wire = await read_to_eof(peer)
    assert after(wire, "HEADERS(1)") == [
        "HEADERS(1)",
        "GOAWAY(NO_ERROR,last=0)",
        "DATA(1,END_STREAM)",
        "EOF",
    ]


async def test_client_body_raises_with_no_stream_open_sends_goaway_only() -> None:
    """The block raises with no stream open: GOAWAY(NO_ERROR, last 0), then EOF; no
    RST_STREAM."""
    client_t, server_t = trio.testing.memory_stream_pair()
    raised: list[BaseException] = []
    with trio.fail_after(10):
        try:
            async with (
                scripted_server((client_t, server_t)) as peer,
                open_client_connection(client_t),
            ):
                await peer.read_until(lambda: "SETTINGS(ACK)" in map(describe, peer.frames))
                raise KeyError("leave")
        except* KeyError as group:
            raised.extend(group.exceptions)
        wire = await read_to_eof(peer)
    assert [str(e) for e in raised] == ["'leave'"]
    assert after(wire, "SETTINGS(ACK)") == ["SETTINGS(ACK)", "GOAWAY(NO_ERROR,last=0)", "EOF"]


async def test_client_cancelled_inside_send_all_writes_nothing_more(
    autojump_clock: trio.abc.Clock,
) -> None:
    """The client's block is cancelled while loopy is blocked in send_all (the server
    stopped reading): no RST_STREAM or GOAWAY follows the cut write; it returns at once."""
    ours, theirs = clogged_pair()
    with trio.fail_after(30):
        async with scripted_server((ours, theirs)) as peer:
            with trio.CancelScope() as scope:
                async with open_client_connection(ours) as conn:
                    await peer.read_until(lambda: "SETTINGS(ACK)" in map(describe, peer.frames))
                    stream = await conn.open_stream(REQUEST).__aenter__()
                    await stream.send_data(b"x" * 60_000)
                    await trio.testing.wait_all_tasks_blocked()  # loopy is stuck in send_all
                    scope.cancel()
                    await trio.sleep_forever()
            assert scope.cancelled_caught
            wire = await read_to_eof(peer)
    assert not [t for t in wire if t.startswith(("GOAWAY", "RST_STREAM"))]
    assert wire[-1] == "EOF"


async def test_client_send_all_error_writes_nothing_more() -> None:
    """The client's send_all raises: the request fails with ConnectionLostError and
    nothing more reaches the server, which sees EOF."""
    client_t, server_t = trio.testing.memory_stream_pair()
    faulty = FaultyStream(client_t)
    with trio.fail_after(10):
        async with scripted_server((faulty, server_t)) as peer:
            async with open_client_connection(faulty) as conn:
                await peer.read_until(lambda: "SETTINGS(ACK)" in map(describe, peer.frames))
                seen = len(peer.frames)
                faulty.fail_send = True
                with pytest.raises(ConnectionLostError):
                    await conn.request("GET", "/")
            wire = await read_to_eof(peer)
    assert wire[seen:] == ["EOF"]


async def test_client_receive_error_sends_goaway() -> None:
    """The client's receive_some raises: the write side still works, so the server gets
    GOAWAY(NO_ERROR, last 0), then EOF; the request fails with ConnectionLostError."""
    client_t, server_t = trio.testing.memory_stream_pair()
    faulty = FaultyStream(client_t)
    with trio.fail_after(10):
        async with scripted_server((faulty, server_t)) as peer:
            async with open_client_connection(faulty) as conn:
                await peer.read_until(lambda: "SETTINGS(ACK)" in map(describe, peer.frames))
                async with conn.open_stream(REQUEST, end_stream=True) as stream:
                    await peer.read_until(lambda: bool(peer.events_of(h2.events.RequestReceived)))
                    faulty.fail_receive = True
                    await peer.send_raw(PingFrame(0, b"12345678").serialize())
                    with pytest.raises(ConnectionLostError):
                        await stream.receive_headers()
            wire = await read_to_eof(peer)
    assert after(wire, "HEADERS(1,END_STREAM)") == [
        "HEADERS(1,END_STREAM)",
        "GOAWAY(NO_ERROR,last=0)",
        "EOF",
    ]


@pytest.mark.injects_faults
async def test_client_reader_fault_sends_internal_error_goaway() -> None:
    """A bug in the client's reader (h2's receive_data raises) with stream 1 open: the
    server gets GOAWAY(INTERNAL_ERROR, last 0), then EOF; the request fails with
    ConnectionLostError caused by the bug, and the block is left cleanly."""
    client_t, server_t = trio.testing.memory_stream_pair()
    with trio.fail_after(10):
        async with scripted_server((client_t, server_t)) as peer:
            async with open_client_connection(client_t) as conn:
                await peer.read_until(lambda: "SETTINGS(ACK)" in map(describe, peer.frames))
                async with conn.open_stream(REQUEST, end_stream=True) as stream:
                    await peer.read_until(lambda: bool(peer.events_of(h2.events.RequestReceived)))
                    fault_in(conn._core.h2, "receive_data", KeyError("reader bug"))
                    await peer.send_raw(PingFrame(0, b"12345678").serialize())
                    with pytest.raises(ConnectionLostError) as info:
                        await stream.receive_headers()
            wire = await read_to_eof(peer)
    assert after(wire, "HEADERS(1,END_STREAM)") == [
        "HEADERS(1,END_STREAM)",
        "GOAWAY(INTERNAL_ERROR,last=0)",
        "EOF",
    ]
    assert isinstance(info.value.__cause__, ConnectionLostError)
    assert isinstance(info.value.__cause__.__cause__, KeyError)
    assert isinstance(conn.error, ConnectionLostError)
