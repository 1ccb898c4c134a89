"""Keepalive on real connections (``_keepalive.py``, the reader's ping policy), on
``trio.testing.MockClock(autojump_threshold=0)``: no test sleeps for real.

The peer is a :class:`ScriptedPeer` over a memory stream pair (or a trio_h2t peer, for
the client against our own server's policy), so every frame is seen as it arrives.
"""

from __future__ import annotations

import functools
import itertools
import math
import socket

import h2.config
import h2.events
import pytest
import trio
import trio.testing
from _helpers_common import read_to_eof
from helpers import (
    REQUEST,
    RESPONSE_200,
    ScriptedPeer,
    UnlimitedH2Connection,
    connected_pair,
    h2t_tasks,
    open_peer_client,
    open_peer_server,
)
from hyperframe.frame import GoAwayFrame, PingFrame

import trio_h2t
import trio_h2t._server
from trio_h2t import (
    ErrorCodes,
    GoAwayError,
    H2Stream,
    KeepaliveTimeoutError,
    RemoteProtocolError,
    TransportConfig,
)
from trio_h2t._connection import ConnectionCore
from trio_h2t._keepalive import run_server_keepalive
from trio_h2t._pings import KEEPALIVE_PING_DATA
from trio_h2t._server import LINGER

#: A client that pings after 10 s of silence, streams or not.
PERMITTED = TransportConfig(keepalive_time=10, keepalive_permit_without_stream=True)


def _keepalive_pings(peer: ScriptedPeer) -> list[PingFrame]:
    return [
        f
        for f in peer.frames_of(PingFrame)
        if "ACK" not in f.flags and f.opaque_data == KEEPALIVE_PING_DATA
    ]


async def _next_ping(peer: ScriptedPeer, *, answer: bool) -> float:
    """Read until trio_h2t's next keepalive PING; the time it arrived. With ``answer``
    the peer flushes what its h2 queued (the PING ACK) after each read."""
    seen = len(_keepalive_pings(peer))
    while len(_keepalive_pings(peer)) == seen:
        await peer.receive()
        if answer:
            await peer.flush()
        if peer.eof:
            raise EOFError("the link closed before a keepalive PING")
    return trio.current_time()


async def _read_to_eof(peer: ScriptedPeer, *, answer: bool = True) -> float:
    """Read (answering, unless told not to) until the link closes; the time it did."""
    await read_to_eof(peer, answer=answer)
    return trio.current_time()


async def _read_to_goaway(peer: ScriptedPeer) -> None:
    """Read, never answering, until a GOAWAY arrives."""
    while not peer.frames_of(GoAwayFrame):
        await peer.receive()
        assert not peer.eof


async def _respond(stream: H2Stream) -> None:
    await stream.send_headers(RESPONSE_200, end_stream=True)


async def _ping(peer: ScriptedPeer, n: int) -> None:
    peer.h2.ping(n.to_bytes(8, "big"))
    await peer.flush()


def _goaways(peer: ScriptedPeer) -> list[h2.events.ConnectionTerminated]:
    return peer.events_of(h2.events.ConnectionTerminated)


# ============================================================ client


async def test_client_pings_after_keepalive_time_of_silence(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """With nothing inbound, the client's keepalive PING goes out keepalive_time later."""
    async with open_peer_server(client_config=PERMITTED) as (_conn, peer):
        start = trio.current_time()
        assert await _next_ping(peer, answer=True) - start == pytest.approx(10)


async def test_client_closes_after_keepalive_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A server that sends nothing after our PING is dropped keepalive_timeout later:
    the stream and the connection fail with KeepaliveTimeoutError, GOAWAY goes out."""
    config = TransportConfig(keepalive_time=10, keepalive_timeout=20)
    async with open_peer_server(client_config=config) as (conn, peer):
        start = trio.current_time()
        async with trio.open_nursery() as nursery:
            # Reads, never answering, up to the client's GOAWAY (the client closes
            # its transport only when its context ends).
            nursery.start_soon(_read_to_goaway, peer)
            async with conn.open_stream(REQUEST, end_stream=True) as stream:
                with pytest.raises(KeepaliveTimeoutError, match="keepalive timeout"):
                    await stream.receive_headers()
            assert trio.current_time() - start == pytest.approx(30)
            assert isinstance(conn.error, KeepaliveTimeoutError)
            assert "keepalive_timeout=20 s" in str(conn.error)
        [ping] = _keepalive_pings(peer)
        [goaway] = peer.frames_of(GoAwayFrame)
        assert goaway.error_code == ErrorCodes.NO_ERROR
        assert peer.frames.index(ping) < peer.frames.index(goaway)


async def test_client_inbound_frames_postpone_the_ping(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Any inbound frame (a bare WINDOW_UPDATE here) counts: no PING while they come,
    then one keepalive_time after the last."""
    async with open_peer_server(client_config=PERMITTED) as (_conn, peer):
        for _ in range(12):
            await trio.sleep(5)
            peer.h2.increment_flow_control_window(1)
            await peer.flush()
        last = trio.current_time()
        assert await _next_ping(peer, answer=True) - last == pytest.approx(10)
        assert len(_keepalive_pings(peer)) == 1


async def test_client_pings_every_keepalive_time(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A server that acks at once sees a PING every keepalive_time, not every
    keepalive_time + keepalive_timeout (grpc-go's TestKeepaliveClientFrequency)."""
    async with open_peer_server(client_config=PERMITTED) as (_conn, peer):
        times = [await _next_ping(peer, answer=True) for _ in range(6)]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert gaps == pytest.approx([10] * 5)


async def test_client_keepalive_is_dormant_without_streams(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Without streams (and without permission) the client never pings and its task
    has no deadline; a stream starting wakes it, and it pings at once."""
    config = TransportConfig(keepalive_time=10)
    async with open_peer_server(client_config=config) as (conn, peer):
        await trio.sleep(3 * 3600)
        await trio.testing.wait_all_tasks_blocked()
        assert trio.lowlevel.current_statistics().seconds_to_next_deadline == math.inf
        assert conn._core.keepalive_wakeup is not None  # asleep on the wakeup event
        with trio.move_on_after(0):
            await peer.read_until(lambda: False)
        assert _keepalive_pings(peer) == []
        start = trio.current_time()
        async with conn.open_stream(REQUEST, end_stream=True):
            assert await _next_ping(peer, answer=True) == start


async def test_client_keepalive_ends_with_the_connection(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A dormant keepalive task returns when the connection ends (fail wakes it)."""
    config = TransportConfig(keepalive_time=10)
    async with open_peer_server(client_config=config) as (conn, peer):
        await trio.sleep(100)
        assert conn._core.keepalive_wakeup is not None
        await peer.transport.aclose()  # the server goes away
        await trio.testing.wait_all_tasks_blocked()
        assert conn.error is not None
        assert conn._core.keepalive_wakeup is None
        assert "h2-keepalive" not in {t.name for t in _tasks()}


def _tasks() -> list[trio.lowlevel.Task]:

    return h2t_tasks()


async def test_client_told_too_many_pings_sees_it_on_goaway_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Our client pinging an idle connection every 10 s gets our server's
    GOAWAY(ENHANCE_YOUR_CALM, too_many_pings) at its fourth PING; the error says so."""
    async with connected_pair(_respond, client_config=PERMITTED) as (conn, _server):
        start = trio.current_time()
        await conn._core.done.wait()
        # GOAWAY at 40 s; the server then lingers (at most 1 s) for us to hang up.
        assert 40 <= trio.current_time() - start <= 41
        error = conn.error
        assert isinstance(error, GoAwayError)
        assert error.error_code == ErrorCodes.ENHANCE_YOUR_CALM
        assert error.debug_data == b"too_many_pings"
        assert error.too_many_pings
        with pytest.raises(GoAwayError) as info:
            async with conn.open_stream(REQUEST, end_stream=True):
                pass  # pragma: no cover
        assert info.value.too_many_pings


async def test_dormant_client_never_strikes_against_our_server(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A client with keepalive but no streams (grpc-go's DormantKeepaliveOnClient) lives
    on for hours against the default policy, and its requests work."""
    async with connected_pair(_respond, client_config=TransportConfig(keepalive_time=10)) as (
        conn,
        _server,
    ):
        await trio.sleep(5 * 3600)
        assert conn.error is None
        response = await conn.request("GET", "/")
        assert response.status == 200


# ============================================================ server


async def test_server_idle_connection_gets_goaway_max_idle(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """max_connection_idle after its last stream closed, the server sends
    GOAWAY(NO_ERROR, max_idle) with the real last stream id, then closes."""
    config = TransportConfig(max_connection_idle=30)
    async with open_peer_client(_respond, server_config=config) as (peer, core):
        await trio.sleep(5)
        peer.h2.send_headers(1, REQUEST, end_stream=True)
        await peer.flush()
        await peer.receive_until(lambda ev: isinstance(ev, h2.events.StreamEnded))
        closed = trio.current_time()
        ev = await peer.receive_until(lambda ev: isinstance(ev, h2.events.ConnectionTerminated))
        assert trio.current_time() - closed == pytest.approx(30)
        # The drain's two phases: 2^31-1 and a PING (answered here), then the real id.
        assert (ev.error_code, ev.last_stream_id, ev.additional_data) == (
            ErrorCodes.NO_ERROR,
            2**31 - 1,
            b"max_idle",
        )
        ev = await peer.receive_until(lambda ev: isinstance(ev, h2.events.ConnectionTerminated))
        assert (ev.error_code, ev.last_stream_id, ev.additional_data) == (
            ErrorCodes.NO_ERROR,
            1,
            b"max_idle",
        )
        await _read_to_eof(peer, answer=False)
        assert core.closing


async def test_server_idle_limit_spares_a_busy_connection(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A connection with a stream open is not idle however long the stream lasts
    (grpc-go's TestMaxConnectionIdleBusyClient); idleness counts from its end."""
    config = TransportConfig(max_connection_idle=30)
    release = trio.Event()

    async def slow(stream: H2Stream) -> None:
        await release.wait()
        await _respond(stream)

    async with open_peer_client(slow, server_config=config) as (peer, _core):
        peer.h2.send_headers(1, REQUEST, end_stream=True)
        await peer.flush()
        with trio.move_on_after(500):
            await peer.read_until(lambda: False)
        assert _goaways(peer) == []
        release.set()
        await peer.receive_until(lambda ev: isinstance(ev, h2.events.StreamEnded))
        ended = trio.current_time()
        await peer.receive_until(lambda ev: isinstance(ev, h2.events.ConnectionTerminated))
        assert trio.current_time() - ended == pytest.approx(30)


async def test_server_age_goaway_with_jitter_then_grace(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """max_connection_age (±10 %) sends GOAWAY(NO_ERROR, max_age); a stream that ends
    within max_connection_age_grace completes, the connection closes when it runs out."""
    config = TransportConfig(max_connection_age=100, max_connection_age_grace=10)
    release = trio.Event()
    cancelled: list[int] = []

    async def handler(stream: H2Stream) -> None:
        if stream.stream_id == 1:
            await release.wait()
            await _respond(stream)
            return
        try:
            await trio.sleep_forever()
        finally:
            cancelled.append(stream.stream_id)

    # A raw h2 peer that still reads after GOAWAY (plain h2 closes for good on it).
    raw = UnlimitedH2Connection(h2.config.H2Configuration(client_side=True, header_encoding=None))
    async with open_peer_client(handler, server_config=config, h2_conn=raw) as (peer, core):
        start = trio.current_time()
        peer.h2.send_headers(1, REQUEST, end_stream=True)
        peer.h2.send_headers(3, REQUEST, end_stream=True)
        await peer.flush()
        ev = await peer.receive_until(lambda ev: isinstance(ev, h2.events.ConnectionTerminated))
        goaway_at = trio.current_time()
        assert 90 <= goaway_at - start <= 110
        assert (ev.error_code, ev.last_stream_id, ev.additional_data) == (
            ErrorCodes.NO_ERROR,
            2**31 - 1,
            b"max_age",
        )
        ev = await peer.receive_until(lambda ev: isinstance(ev, h2.events.ConnectionTerminated))
        assert (ev.error_code, ev.last_stream_id, ev.additional_data) == (
            ErrorCodes.NO_ERROR,
            3,
            b"max_age",
        )
        await trio.sleep(5)
        release.set()
        end = await _read_to_eof(peer)
        # The grace runs out 10 s after GOAWAY; the server then lingers (LINGER, 1 s)
        # for the client to hang up before it closes the socket.
        assert end - goaway_at == pytest.approx(10 + LINGER)
        ended = peer.events_of(h2.events.StreamEnded)
        assert [e.stream_id for e in ended] == [1]
        assert cancelled == [3]
        assert core.error is not None


async def test_server_keepalive_closes_an_unresponsive_client(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The server pings after server_keepalive_time of silence and fails the connection
    with KeepaliveTimeoutError keepalive_timeout later if nothing arrives."""
    config = TransportConfig(server_keepalive_time=60, keepalive_timeout=20)
    async with open_peer_client(_respond, server_config=config) as (peer, core):
        start = trio.current_time()
        assert await _next_ping(peer, answer=False) - start == pytest.approx(60)
        assert await _read_to_eof(peer, answer=False) - start == pytest.approx(80)
        assert isinstance(core.error, KeepaliveTimeoutError)


async def test_server_keepalive_leaves_a_responsive_client_alone(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A client that acks keeps its connection; the server pings every 60 s of silence."""
    config = TransportConfig(server_keepalive_time=60, keepalive_timeout=20)
    async with open_peer_client(_respond, server_config=config) as (peer, core):
        start = trio.current_time()
        times = [await _next_ping(peer, answer=True) - start for _ in range(10)]
        assert times == pytest.approx([60.0 * (i + 1) for i in range(10)])
        assert core.error is None


async def test_no_keepalive_task_when_every_feature_is_off() -> None:
    """A server with server_keepalive_time=None (and no idle or age limit) and a client
    without keepalive_time run no keepalive task."""
    config = TransportConfig(server_keepalive_time=None)
    async with connected_pair(_respond, server_config=config) as (conn, _server):
        await conn.request("GET", "/")
        await trio.testing.wait_all_tasks_blocked()
        assert "h2-keepalive" not in {t.name for t in _tasks()}


# ============================================================ server ping policy


async def _assert_no_goaway(peer: ScriptedPeer) -> None:
    await trio.testing.wait_all_tasks_blocked()
    with trio.move_on_after(0):
        await peer.read_until(lambda: False)
    assert _goaways(peer) == []


async def test_third_ping_violation_gets_goaway_too_many_pings(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The first PING is free, three too soon are strikes: the third gets every ACK,
    then GOAWAY(ENHANCE_YOUR_CALM, too_many_pings), then the connection closes."""
    async with open_peer_client(_respond) as (peer, core):
        for n in range(3):
            await _ping(peer, n)
        await _assert_no_goaway(peer)
        await _ping(peer, 3)
        ev = await peer.receive_until(lambda ev: isinstance(ev, h2.events.ConnectionTerminated))
        assert (ev.error_code, ev.additional_data) == (
            ErrorCodes.ENHANCE_YOUR_CALM,
            b"too_many_pings",
        )
        assert len(peer.events_of(h2.events.PingAckReceived)) == 4
        await _read_to_eof(peer, answer=False)
        assert isinstance(core.error, RemoteProtocolError)
        assert core.error.error_code == ErrorCodes.ENHANCE_YOUR_CALM


async def test_ping_violations_with_a_stream_open_strike_too(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """With a stream open but nothing written, PINGs sooner than ping_min_interval
    strike; the stream's handler is cancelled when the connection ends."""
    cancelled = trio.Event()

    async def wait(stream: H2Stream) -> None:
        try:
            await trio.sleep_forever()
        finally:
            cancelled.set()

    async with open_peer_client(wait) as (peer, _core):
        peer.h2.send_headers(1, REQUEST, end_stream=True)
        await peer.flush()
        for n in range(4):
            await trio.sleep(299)
            await _ping(peer, n)
        ev = await peer.receive_until(lambda ev: isinstance(ev, h2.events.ConnectionTerminated))
        assert ev.additional_data == b"too_many_pings"
        assert ev.last_stream_id == 1
        await cancelled.wait()


async def test_our_writes_reset_the_ping_strikes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A PING after we wrote DATA clears the strikes: a client pinging before each
    message of an echo stream is never told off."""

    async def echo(stream: H2Stream) -> None:
        await stream.send_headers(RESPONSE_200)
        async for chunk in stream:
            await stream.send_data(chunk)
        await stream.end()

    async with open_peer_client(echo) as (peer, _core):
        peer.h2.send_headers(1, REQUEST)
        await peer.flush()
        for n in range(10):
            await _ping(peer, n)
            peer.h2.send_data(1, b"x%d" % n)
            await peer.flush()
            await peer.receive_until(lambda ev: isinstance(ev, h2.events.DataReceived))
        await _assert_no_goaway(peer)


async def test_pings_within_policy_never_strike(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """PINGs ping_min_interval apart with a stream open, then 2 h apart without, are fine."""
    release = trio.Event()

    async def slow(stream: H2Stream) -> None:
        await release.wait()
        await _respond(stream)

    # The server's own keepalive would drop this peer, which answers nothing.
    config = TransportConfig(server_keepalive_time=None)
    async with open_peer_client(slow, server_config=config) as (peer, core):
        peer.h2.send_headers(1, REQUEST, end_stream=True)
        await peer.flush()
        for n in range(10):
            await _ping(peer, n)
            await trio.sleep(300)
        release.set()
        await peer.receive_until(lambda ev: isinstance(ev, h2.events.StreamEnded))
        for n in range(4):
            await trio.sleep(2 * 3600)
            await _ping(peer, 10 + n)
        await _assert_no_goaway(peer)
        assert core.error is None


async def test_permit_without_stream_allows_idle_pings(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """With ping_permit_without_stream, an idle client may ping every ping_min_interval;
    faster still strikes."""
    config = TransportConfig(ping_permit_without_stream=True, ping_min_interval=60)
    async with open_peer_client(_respond, server_config=config) as (peer, _core):
        for n in range(10):
            await _ping(peer, n)
            await trio.sleep(60)
        await _assert_no_goaway(peer)
        for n in range(4):
            await _ping(peer, 10 + n)
            await trio.sleep(30)
        ev = await peer.receive_until(lambda ev: isinstance(ev, h2.events.ConnectionTerminated))
        assert ev.additional_data == b"too_many_pings"


async def test_idle_pings_strike_without_permission(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Without streams and without permission, PINGs ping_min_interval apart still strike."""
    async with open_peer_client(_respond) as (peer, _core):
        for n in range(4):
            await _ping(peer, n)
            await trio.sleep(300)
        ev = await peer.receive_until(lambda ev: isinstance(ev, h2.events.ConnectionTerminated))
        assert ev.additional_data == b"too_many_pings"


async def test_reads_are_timed_only_for_a_keepalive_task() -> None:
    """A client without keepalive_time does not time its reads; a server pinging does."""
    async with connected_pair(_respond) as (conn, server):
        await conn.request("GET", "/")
        assert not conn._core.tracks_reads
        assert conn._core.last_read == -math.inf
        assert server.tracks_reads
        assert server.last_read > -math.inf


@pytest.mark.parametrize(("u", "age"), [(0.0, 90.0), (0.5, 100.0), (1.0, 110.0)])
async def test_server_age_jitter_ends(
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
    u: float,
    age: float,
) -> None:
    """With the jitter's draw pinned, GOAWAY max_age comes at exactly 0.9, 1 or 1.1 times
    max_connection_age."""
    pinned = functools.partial(run_server_keepalive, uniform=lambda: u)
    monkeypatch.setattr(trio_h2t._runtime, "run_server_keepalive", pinned)
    config = TransportConfig(max_connection_age=100)
    async with open_peer_client(_respond, server_config=config) as (peer, _core):
        start = trio.current_time()
        ev = await peer.receive_until(lambda ev: isinstance(ev, h2.events.ConnectionTerminated))
        assert trio.current_time() - start == pytest.approx(age)
        assert ev.additional_data == b"max_age"


def _user_timeout_ms(stream: trio.abc.Stream) -> int:
    assert isinstance(stream, trio.SocketStream)
    return int(stream.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT))


async def test_keepalive_sets_tcp_user_timeout_on_both_sides() -> None:
    """With keepalive on, each side's TCP socket gives up on unacknowledged data after
    keepalive_timeout (TCP_USER_TIMEOUT, as grpc-go); without it, the kernel's default
    (0) stays. The server's keepalive is on by default (server_keepalive_time 2 h)."""
    seen: list[int] = []

    async def handler(stream: H2Stream) -> None:
        core = stream._core
        assert isinstance(core, ConnectionCore)
        seen.append(_user_timeout_ms(core.transport))
        await stream.send_headers([(":status", "200")], end_stream=True)

    server_config = TransportConfig(keepalive_timeout=7.5)
    async with trio_h2t.open_server(handler, 0, host="127.0.0.1", config=server_config) as server:
        config = TransportConfig(keepalive_time=10, keepalive_timeout=3)
        async with trio_h2t.open_connection("127.0.0.1", server.port, config=config) as conn:
            assert _user_timeout_ms(conn._core.transport) == 3000
            await conn.request("GET", "/")
        async with trio_h2t.open_connection("127.0.0.1", server.port) as conn:
            assert _user_timeout_ms(conn._core.transport) == 0  # no client keepalive
            await conn.request("GET", "/")
    assert seen == [7500, 7500]
    off = TransportConfig(server_keepalive_time=None)
    async with (
        trio_h2t.open_server(handler, 0, host="127.0.0.1", config=off) as server,
        trio_h2t.open_connection("127.0.0.1", server.port) as conn,
    ):
        await conn.request("GET", "/")
    assert seen[-1] == 0


def test_tcp_user_timeout_skips_what_is_not_a_tcp_socket() -> None:
    from trio_h2t._sockopts import set_tcp_user_timeout

    client, _ = trio.testing.memory_stream_pair()
    assert set_tcp_user_timeout(client, 1.0) is False
