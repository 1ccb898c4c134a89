"""The server's two-phase drain (docs/keepalive-and-shutdown.md, "The drain").

A load test over loopback (many unary calls and long streams on several
connections while the server drains: every stream the server accepted completes
with its whole body, every other is reported retryable, none is lost or hangs, and
the second GOAWAY's last stream id, read off the wire, is exactly the highest
stream a handler saw), then the phases one by one against scripted peers on the
mock clock, the client's side, and the drain that cancelling ``serve_tcp`` performs.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import h2.config
import h2.events
import pytest
import trio
import trio.testing
from h2.errors import ErrorCodes
from helpers import REQUEST, UnlimitedH2Connection, open_peer_client, open_peer_server
from hyperframe.frame import GoAwayFrame, PingFrame

from trio_h2t import (
    GoAwayError,
    H2Server,
    H2Stream,
    StreamRefusedError,
    TransportConfig,
    open_client_connection,
    open_connection,
    open_server,
    serve_tcp,
)
from trio_h2t._pings import DRAIN_PING_DATA, DRAIN_PING_TIMEOUT, MAX_STREAM_ID
from trio_h2t._server import CANCEL_DRAIN_SLACK, LINGER

#: Client connections in the load test, and the calls each runs at once.
CONNECTIONS = 4
UNARY_WORKERS = 40
LONG_WORKERS = 5
#: A long stream's response: this many chunks, this far apart.
LONG_CHUNKS = 10
LONG_CHUNK = 8192
LONG_PAUSE = 0.05
#: Calls completed before the drain starts.
WARM_UP = 200


def _body(rid: int, n: int) -> bytes:
    """The deterministic bytes of request ``rid``'s body or response (``n`` long)."""
    seed = f"<{rid}>".encode()
    return (seed * (n // len(seed) + 1))[:n]


def _frames(data: bytes) -> list[tuple[int, int, bytes]]:
    """(type, stream id, payload) of each whole frame in ``data`` (server -> client:
    no preface)."""
    frames = []
    pos = 0
    while len(data) - pos >= 9:
        length = int.from_bytes(data[pos : pos + 3], "big")
        end = pos + 9 + length
        if end > len(data):
            break
        sid = int.from_bytes(data[pos + 5 : pos + 9], "big") & 0x7FFF_FFFF
        frames.append((data[pos + 3], sid, bytes(data[pos + 9 : end])))
        pos = end
    return frames


class RecordingStream(trio.abc.HalfCloseableStream):
    """A TCP stream that keeps a copy of every byte it receives."""

    def __init__(self, inner: trio.SocketStream) -> None:
        self.inner = inner
        self.received = bytearray()

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        data = await self.inner.receive_some(max_bytes)
        self.received += data
        return data

    async def send_eof(self) -> None:
        await self.inner.send_eof()

    async def aclose(self) -> None:
        await self.inner.aclose()


@dataclass
class LoadRecord:
    # request id -> (connection index, stream id) of each request a handler saw
    seen: dict[int, tuple[int, int]] = field(default_factory=dict)
    completed: set[int] = field(default_factory=set)
    retryable: dict[int, BaseException] = field(default_factory=dict)
    refused_ids: dict[int, list[int]] = field(default_factory=dict)  # conn -> stream ids
    unexpected: list[tuple[int, BaseException]] = field(default_factory=list)


async def _load_handler(record: LoadRecord, stream: H2Stream) -> None:
    headers = dict(stream.headers or ())
    rid = int(headers[b"x-id"])
    record.seen[rid] = (int(headers[b"x-conn"]), stream.stream_id)
    body = await stream.read_all()
    assert body == _body(rid, 1000)
    await stream.send_headers([(":status", "200")])
    if stream.request.path == "/long":
        whole = _body(rid, LONG_CHUNKS * LONG_CHUNK)
        for i in range(LONG_CHUNKS):
            await trio.sleep(LONG_PAUSE)
            chunk = whole[i * LONG_CHUNK : (i + 1) * LONG_CHUNK]
            await stream.send_data(chunk, end_stream=i == LONG_CHUNKS - 1)
    else:
        await stream.send_data(body, end_stream=True)


async def test_drain_under_load_loses_nothing() -> None:
    """Unary calls and long streams on four connections while the server drains:
    every stream a handler saw completes with its whole body, every other call fails
    with a retryable error, none hangs, and each connection's second GOAWAY names
    exactly the highest stream id a handler saw (its first: 2^31-1, then the PING)."""
    record = LoadRecord()
    next_id = iter(range(1, 10**9))
    transports: dict[int, RecordingStream] = {}
    drained = trio.Event()
    warmed_up = trio.Event()

    async def worker(conn: Any, cidx: int, path: str) -> None:
        while True:
            rid = next(next_id)
            try:
                response = await conn.request(
                    "POST",
                    path,
                    headers=[("x-id", str(rid)), ("x-conn", str(cidx))],
                    body=_body(rid, 1000),
                )
            except Exception as exc:
                if getattr(exc, "retryable", False):
                    record.retryable[rid] = exc
                    if isinstance(exc, StreamRefusedError):
                        record.refused_ids.setdefault(cidx, []).append(exc.stream_id)
                else:
                    record.unexpected.append((rid, exc))
                return
            expected = _body(rid, LONG_CHUNKS * LONG_CHUNK) if path == "/long" else _body(rid, 1000)
            if response.status != 200 or response.body != expected:
                record.unexpected.append((rid, AssertionError(f"bad response {response!r}")))
                return
            record.completed.add(rid)
            if len(record.completed) >= WARM_UP:
                warmed_up.set()
            if drained.is_set():
                return

    async def client(port: int, cidx: int) -> None:
        tcp = await trio.open_tcp_stream("127.0.0.1", port)
        transport = RecordingStream(tcp)
        transports[cidx] = transport
        async with (
            open_client_connection(transport) as conn,
            trio.open_nursery() as nursery,
        ):
            for _ in range(UNARY_WORKERS):
                nursery.start_soon(worker, conn, cidx, "/unary")
            for _ in range(LONG_WORKERS):
                nursery.start_soon(worker, conn, cidx, "/long")

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            server: H2Server = await nursery.start(
                functools.partial(
                    serve_tcp, functools.partial(_load_handler, record), 0, host="127.0.0.1"
                )
            )
            async with trio.open_nursery() as clients:
                for cidx in range(CONNECTIONS):
                    clients.start_soon(client, server.port, cidx)
                # Let the calls get going, long streams included, then drain.
                await warmed_up.wait()
                await server.aclose(grace=30)
                drained.set()

    assert not record.unexpected, record.unexpected[:5]
    assert record.completed == set(record.seen), "a stream a handler saw did not complete"
    assert record.retryable, "the drain refused nothing: the load test tested nothing"
    assert not set(record.retryable) & set(record.seen)
    for cidx, transport in transports.items():
        frames = _frames(bytes(transport.received))
        goaways = [(i, f) for i, f in enumerate(frames) if f[0] == GoAwayFrame.type]
        assert len(goaways) == 2, goaways
        (first_at, first), (_, second) = goaways
        assert int.from_bytes(first[2][:4], "big") == MAX_STREAM_ID
        pings = [f for f in frames[first_at:] if f[0] == PingFrame.type]
        assert pings
        assert pings[0][2] == DRAIN_PING_DATA
        last = int.from_bytes(second[2][:4], "big")
        seen = [sid for c, sid in record.seen.values() if c == cidx]
        assert last == max(seen)
        assert all(sid > last for sid in record.refused_ids.get(cidx, []))


# ------------------------------------------------------------------ the phases


async def _respond(stream: H2Stream) -> None:
    await stream.read_all()
    await stream.send_headers([(":status", "200")])
    await stream.send_data(b"done", end_stream=True)


async def test_a_stream_sent_between_the_goaways_is_accepted(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A client stream that left before the client read the first GOAWAY is served:
    the second GOAWAY, sent once the PING is answered, names it; a later one is
    refused."""
    raw = UnlimitedH2Connection(h2.config.H2Configuration(client_side=True, header_encoding=None))
    async with (
        open_peer_client(_respond, h2_conn=raw) as (peer, core),
        trio.open_nursery() as nursery,
    ):
        peer.h2.send_headers(1, REQUEST, end_stream=True)
        await peer.flush()
        await peer.receive_until(lambda ev: isinstance(ev, h2.events.StreamEnded))
        nursery.start_soon(core.graceful_close)
        # Read the first GOAWAY and its PING without answering yet.
        got: list[h2.events.Event] = []
        while not any(isinstance(ev, h2.events.PingReceived) for ev in got):
            got += await peer.receive()
        [first] = [ev for ev in got if isinstance(ev, h2.events.ConnectionTerminated)]
        assert first.last_stream_id == MAX_STREAM_ID
        ack = peer.h2.data_to_send()  # h2's PING ACK, held back
        # Stream 3 "was already on its way": it goes out before the PING's ACK.
        peer.h2.send_headers(3, REQUEST, end_stream=True)
        await peer.flush()
        await peer.send_raw(ack)
        second = await peer.receive_until(lambda ev: isinstance(ev, h2.events.ConnectionTerminated))
        assert (second.error_code, second.last_stream_id) == (ErrorCodes.NO_ERROR, 3)
        peer.h2.send_headers(5, REQUEST, end_stream=True)  # after the second: refused
        await peer.flush()
        while not peer.eof:
            await peer.receive()
            await peer.flush()
        ended = {ev.stream_id for ev in peer.events_of(h2.events.StreamEnded)}
        reset = {ev.stream_id: ev.error_code for ev in peer.events_of(h2.events.StreamReset)}
        # Stream 5 is refused (REFUSED_STREAM) unless the connection closed, stream 3
        # done, before the server read it: the second GOAWAY said it was not processed.
        assert ended == {1, 3}
        assert reset in ({}, {5: ErrorCodes.REFUSED_STREAM})


async def test_an_unanswered_ping_delays_the_second_goaway_by_its_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A client that never answers the drain's PING gets the second GOAWAY
    DRAIN_PING_TIMEOUT (grpc-go's 5 s) after the first."""
    async with (
        open_peer_client(_respond) as (peer, core),
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(core.graceful_close)
        goaways: list[tuple[float, int | None]] = []
        while len(goaways) < 2:
            for ev in await peer.receive():  # never flushed: no PING ACK
                if isinstance(ev, h2.events.ConnectionTerminated):
                    goaways.append((trio.current_time(), ev.last_stream_id))
        (t1, id1), (t2, id2) = goaways
        assert (id1, id2) == (MAX_STREAM_ID, 0)
        assert t2 - t1 == pytest.approx(DRAIN_PING_TIMEOUT)


async def test_a_second_graceful_close_joins_the_drain_under_way(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Two graceful closes at once (say max_connection_age and H2Server.aclose) make
    one drain: two GOAWAYs in all, one PING."""
    async with (
        open_peer_client(_respond) as (peer, core),
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(functools.partial(core.graceful_close, debug_data=b"one"))
        nursery.start_soon(functools.partial(core.graceful_close, debug_data=b"two"))
        while not peer.eof:
            await peer.receive()
            await peer.flush()
        goaways = peer.frames_of(GoAwayFrame)
        # Whichever started first sets the debug data of both GOAWAYs.
        data = goaways[0].additional_data
        assert data in (b"one", b"two")
        assert [(g.last_stream_id, g.additional_data) for g in goaways] == [
            (MAX_STREAM_ID, data),
            (0, data),
        ]
        assert [p.opaque_data for p in peer.frames_of(PingFrame)] == [DRAIN_PING_DATA]


# ------------------------------------------------------------------ the client


async def test_client_fails_only_the_streams_above_the_second_goaway() -> None:
    """The first GOAWAY (2^31-1) fails no stream but stops new ones (GoAwayError,
    retryable); the second fails exactly the streams above its id, with
    StreamRefusedError (retryable); the stream below it completes."""
    results: dict[int, object] = {}

    async with open_peer_server() as (conn, peer):

        async def one(i: int) -> None:
            try:
                async with conn.open_stream(REQUEST, end_stream=True) as s:
                    body = await s.read_all()
                    results[i] = (s.stream_id, body)
            except Exception as exc:
                results[i] = exc

        async with trio.open_nursery() as nursery:
            for i in range(3):
                nursery.start_soon(one, i)
            await peer.read_until(lambda: len(peer.events_of(h2.events.RequestReceived)) == 3)
            # Framed by hand: the peer's h2 would close itself on its own GOAWAY.
            await peer.send_raw(GoAwayFrame(0, last_stream_id=MAX_STREAM_ID).serialize())
            await trio.testing.wait_all_tasks_blocked()
            assert results == {}  # nothing failed
            with pytest.raises(GoAwayError) as info:
                async with conn.open_stream(REQUEST, end_stream=True):
                    pass  # pragma: no cover
            assert info.value.retryable
            assert info.value.last_stream_id == MAX_STREAM_ID
            await peer.send_raw(GoAwayFrame(0, last_stream_id=1).serialize())
            await trio.testing.wait_all_tasks_blocked()
            peer.h2.send_headers(1, [(b":status", b"200")])
            peer.h2.send_data(1, b"ok", end_stream=True)
            await peer.flush()
        refused = [r for r in results.values() if isinstance(r, StreamRefusedError)]
        assert sorted(r.stream_id for r in refused) == [3, 5]
        assert all(r.retryable and isinstance(r.__cause__, GoAwayError) for r in refused)
        assert [r for r in results.values() if isinstance(r, tuple)] == [(1, b"ok")]


# ------------------------------------------------------------------ serve_tcp


async def test_cancelling_serve_tcp_drains() -> None:
    """Cancelling the scope around serve_tcp drains (bounded): a long response in
    progress completes, and a new call after the drain began is refused retryably."""
    started = trio.Event()
    release = trio.Event()

    async def handler(stream: H2Stream) -> None:
        await stream.read_all()
        await stream.send_headers([(":status", "200")])
        started.set()
        await release.wait()
        await stream.send_data(b"the whole body", end_stream=True)

    with trio.fail_after(30):
        async with trio.open_nursery() as outer:
            serving = trio.CancelScope()

            async def run_server(task_status: trio.TaskStatus[H2Server]) -> None:
                with serving:
                    await serve_tcp(handler, 0, host="127.0.0.1", task_status=task_status)

            server: H2Server = await outer.start(run_server)
            got: list[bytes] = []
            async with (
                open_connection("127.0.0.1", server.port) as conn,
                trio.open_nursery() as calls,
            ):

                async def call() -> None:
                    got.append((await conn.request("GET", "/")).body)

                calls.start_soon(call)
                await started.wait()
                serving.cancel()  # the server drains: its first GOAWAY reaches us
                with trio.fail_after(10):
                    await trio.testing.wait_all_tasks_blocked(0.2)
                assert conn._core.goaway_received is not None
                with pytest.raises(GoAwayError) as info:
                    await conn.request("GET", "/")
                assert info.value.retryable
                release.set()
            assert got == [b"the whole body"]


async def test_cancelling_serve_tcp_cuts_the_drain_at_the_grace() -> None:
    """A handler that never ends holds a cancelled serve_tcp for about
    graceful_close_timeout (bounded: plus CANCEL_DRAIN_SLACK): then it is cancelled
    with the reason "shutdown", and serve_tcp returns."""
    config = TransportConfig(graceful_close_timeout=1)
    reasons: list[object] = []
    headers_sent = trio.Event()

    async def handler(stream: H2Stream) -> None:
        await stream.send_headers([(":status", "200")])
        headers_sent.set()
        try:
            await trio.sleep_forever()
        finally:
            reasons.append(stream.cancel_reason)

    serving = trio.CancelScope()

    async def run_server(task_status: trio.TaskStatus[H2Server]) -> None:
        with serving:
            await serve_tcp(handler, 0, host="127.0.0.1", config=config, task_status=task_status)

    with trio.fail_after(30):
        async with trio.open_nursery() as outer:
            server: H2Server = await outer.start(run_server)
            async with (
                open_connection("127.0.0.1", server.port) as conn,
                conn.open_stream(REQUEST, end_stream=True) as stream,
            ):
                await headers_sent.wait()
                start = trio.current_time()
                serving.cancel()
                with pytest.raises(trio.BrokenResourceError) as info:
                    await stream.read_all()
                assert not getattr(info.value, "retryable", False)
            elapsed = trio.current_time() - start
    assert 1 <= elapsed < 1 + CANCEL_DRAIN_SLACK + LINGER + 2
    assert [getattr(r, "kind", None) for r in reasons] == ["shutdown"]


async def test_open_server_left_with_an_exception_stops_at_once() -> None:
    """Leaving open_server with an exception still stops at once: no drain, the
    handler is cancelled without its grace period (10 s by default)."""
    cancelled = trio.Event()
    running = trio.Event()

    async def handler(stream: H2Stream) -> None:
        running.set()
        try:
            await trio.sleep_forever()
        finally:
            cancelled.set()

    async def leave_with_an_error() -> None:
        async with (
            open_server(handler, 0, host="127.0.0.1") as server,
            open_connection("127.0.0.1", server.port) as conn,
            conn.open_stream(REQUEST, end_stream=True),
        ):
            await running.wait()
            raise KeyError("leave")

    start = trio.current_time()
    with trio.fail_after(30), pytest.raises(KeyError):
        await leave_with_an_error()
    assert cancelled.is_set()
    assert trio.current_time() - start < 5
