"""Connection-level behaviour of trio_h2t, over in-memory links.

Client and server run back to back over ``trio.testing.memory_stream_pair``; where the
wire itself matters, one side is a :class:`helpers.ScriptedPeer` (raw ``h2`` plus
hand-built hyperframe frames). Ordering comes from ``wait_all_tasks_blocked``, never
from sleeping; ``trio.fail_after`` turns a hang into a failure.
"""

from __future__ import annotations

import array
import functools
import itertools
import logging
from collections.abc import Callable

import h2.connection
import h2.events
import pytest
import trio
import trio.testing
from h2.errors import ErrorCodes
from h2.settings import SettingCodes
from helpers import (
    REQUEST,
    RESPONSE_200,
    UnlimitedH2Connection,
    clogged_pair,
    connected_pair,
    h2t_tasks,
    open_peer_client,
    open_peer_server,
    pattern,
)
from hyperframe.frame import (
    DataFrame,
    GoAwayFrame,
    HeadersFrame,
    PingFrame,
    RstStreamFrame,
    WindowUpdateFrame,
)

from trio_h2t import (
    ClientConnection,
    ConnectionClosingError,
    ConnectionLostError,
    GoAwayError,
    H2Server,
    H2Stream,
    RemoteProtocolError,
    ServerConnection,
    StreamRefusedError,
    StreamResetError,
    TransportConfig,
    open_client_connection,
    open_connection,
    serve_connection,
    serve_tcp,
)
from trio_h2t._outstream import OUT_WAITING

MiB = 1024 * 1024

#: DATA on stream 0, a connection error (RFC 9113 §6.1); hyperframe will not build it.
BAD_FRAME = b"\x00\x00\x01\x00\x00\x00\x00\x00\x00x"

#: Windows pinned at the RFC default (no BDP growth), so flow control is exercised.
SMALL = TransportConfig(dynamic_window=False, connection_window_size=65_535)


def fixed(**kwargs: object) -> TransportConfig:
    """A config with windows pinned (no BDP growth; stream windows at the RFC default
    unless given, so a body of a few hundred KiB spans several) plus ``kwargs``."""
    kwargs.setdefault("initial_window_size", 65_535)
    return TransportConfig(dynamic_window=False, **kwargs)  # type: ignore[arg-type]


async def echo(stream: H2Stream) -> None:
    """Handler: answer 200 with the request body and an ``x-len`` trailer."""
    body = await stream.read_all()
    await stream.send_headers(RESPONSE_200)
    await stream.send_data(body)
    await stream.send_trailers([(b"x-len", str(len(body)).encode())])


def path_of(stream: H2Stream) -> bytes:
    """The request's ``:path``."""
    return dict(stream.headers or [])[b":path"]


def request(path: str) -> list[tuple[bytes, bytes]]:
    """REQUEST with another ``:path``."""
    return [(k, path.encode() if k == b":path" else v) for k, v in REQUEST]


async def roundtrip(conn: ClientConnection, body: bytes = b"ping") -> bytes:
    """One request to ``/`` (handlers here echo it); returns the echoed body."""
    async with conn.open_stream(REQUEST) as s:
        await s.send_data(body, end_stream=True)
        assert (await s.receive_headers())[0] == (b":status", b"200")
        return await s.read_all()


# ============================================================ 1. round trips


async def test_round_trip_headers_body_trailers() -> None:
    """Request headers, body and trailers reach the handler; the response's reach the client."""
    seen: dict[str, object] = {}

    async def handler(stream: H2Stream) -> None:
        seen["headers"] = stream.headers
        seen["body"] = await stream.read_all()
        seen["trailers"] = stream.trailers
        await stream.send_headers([(b":status", b"201"), (b"x-reply", b"yes")])
        await stream.send_data(b"response body")
        await stream.send_trailers([(b"x-checksum", b"42")])

    with trio.fail_after(5):
        async with connected_pair(handler) as (conn, _):
            async with conn.open_stream([*REQUEST, (b"x-req", b"1")]) as s:
                await s.send_data(b"request ")
                await s.send_data(b"body")
                await s.send_trailers([(b"x-req-trailer", b"t")])
                assert await s.receive_headers() == [(b":status", b"201"), (b"x-reply", b"yes")]
                assert await s.read_all() == b"response body"
                assert await s.receive_trailers() == [(b"x-checksum", b"42")]
            assert conn.open_streams == 0
    assert seen["headers"] == [*REQUEST, (b"x-req", b"1")]
    assert seen["body"] == b"request body"
    assert seen["trailers"] == [(b"x-req-trailer", b"t")]


@pytest.mark.parametrize("config", [SMALL, TransportConfig()], ids=["fixed-64k", "dynamic"])
async def test_bodies_larger_than_the_windows_arrive_intact(config: TransportConfig) -> None:
    """1 MiB each way through 64 KiB windows: WINDOW_UPDATEs keep it flowing, bytes intact."""
    body = pattern(MiB)
    with trio.fail_after(10):
        async with connected_pair(echo, client_config=config, server_config=config) as (
            conn,
            core,
        ):
            assert await roundtrip(conn, body) == body
            # Both loopies wrote far more than one window, so credit came back.
            assert conn.statistics().loopy.bytes_written > MiB
            assert core.loopy.statistics().bytes_written > MiB


async def test_500_concurrent_streams_complete() -> None:
    """500 streams in flight at once on one connection all complete."""
    n = 500
    arrived = 0
    all_in = trio.Event()

    async def handler(stream: H2Stream) -> None:
        nonlocal arrived
        body = await stream.read_all()
        arrived += 1
        if arrived == n:
            all_in.set()
        await all_in.wait()  # every stream is open at the same time
        await stream.send_headers(RESPONSE_200)
        await stream.send_data(body, end_stream=True)

    results: dict[int, bytes] = {}

    async def one(i: int) -> None:
        results[i] = await roundtrip(conn, f"request {i}".encode())

    config = TransportConfig(max_concurrent_streams=n)
    with trio.fail_after(30):
        async with connected_pair(handler, server_config=config) as (conn, core):
            async with trio.open_nursery() as nursery:
                for i in range(n):
                    nursery.start_soon(one, i)
            assert conn.open_streams == 0
            assert core.open_streams == 0
    assert results == {i: f"request {i}".encode() for i in range(n)}


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
async def test_send_data_accepts_bytes_bytearray_memoryview(
    kind: Callable[[bytes], bytes | bytearray | memoryview],
) -> None:
    """send_data takes bytes, bytearray and memoryview, small and larger than a frame."""
    small, large = pattern(100), pattern(100_000, seed=3)
    with trio.fail_after(5):
        async with (
            connected_pair(echo, client_config=SMALL, server_config=SMALL) as (conn, _),
            conn.open_stream(REQUEST) as s,
        ):
            await s.send_data(kind(small))
            await s.send_data(kind(large))
            await s.send_data(kind(b""), end_stream=True)
            await s.receive_headers()
            assert await s.read_all() == small + large


async def test_send_data_counts_bytes_of_any_memoryview() -> None:
    """Memoryviews of wider items, several dimensions or strides are sent byte for byte."""
    ints = array.array("i", range(30_000))  # 120 000 bytes, 30 000 items
    grid = memoryview(bytearray(pattern(40_000))).cast("B", (200, 200))
    strided = memoryview(pattern(50_000))[::2]
    views = [memoryview(ints), grid, strided]
    expected = b"".join(v.tobytes() for v in views)
    with trio.fail_after(5):
        async with (
            connected_pair(echo, client_config=SMALL, server_config=SMALL) as (conn, _),
            conn.open_stream(REQUEST) as s,
        ):
            for view in views:
                await s.send_data(view)
            await s.end()
            await s.receive_headers()
            assert await s.read_all() == expected


# ============================================================ 2. stream API semantics


async def test_send_after_end_raises_closed_resource_error() -> None:
    """Once our side ended the stream, sending more raises trio.ClosedResourceError."""
    with trio.fail_after(5):
        async with connected_pair(echo) as (conn, _):
            async with conn.open_stream(REQUEST) as s:
                await s.send_data(b"x", end_stream=True)
                with pytest.raises(trio.ClosedResourceError):
                    await s.send_data(b"more")
                with pytest.raises(trio.ClosedResourceError):
                    await s.send_trailers([(b"x", b"y")])
                await s.read_all()
            async with conn.open_stream(REQUEST, end_stream=True) as s:
                with pytest.raises(trio.ClosedResourceError):
                    await s.send_data(b"x")
                await s.read_all()


async def test_malformed_header_blocks_raise_value_error_before_anything_is_sent() -> None:
    """A malformed request, response or trailer block raises ValueError in the caller;
    nothing is queued, and the stream (for a response or trailers) can still send a
    good block."""
    seen: list[str] = []

    async def handler(stream: H2Stream) -> None:
        await stream.read_all()
        with pytest.raises(ValueError, match="malformed response header block"):
            await stream.send_headers([(b"content-type", b"text/plain")])  # no :status
        with pytest.raises(ValueError, match="malformed response header block"):
            await stream.send_headers([(b":status", b"200"), (b"Content-Type", b"x")])
        await stream.send_headers(RESPONSE_200)
        with pytest.raises(ValueError, match="malformed trailer header block"):
            await stream.send_trailers([(b":status", b"200")])
        with pytest.raises(ValueError, match="malformed trailer header block"):
            await stream.send_trailers([(b"connection", b"close")])
        await stream.send_trailers([(b"x-ok", b"1")])
        seen.append("handler done")

    with trio.fail_after(5):
        async with connected_pair(handler) as (conn, _):
            for bad in (
                [(b":method", b"GET"), (b":path", b"/")],  # no :scheme, no :authority
                [*REQUEST, (b"X-Upper", b"1")],
                [*REQUEST, (b"keep-alive", b"5")],
                [*REQUEST, (b"x", b"a\r\nb")],
                [(b"x-first", b"1"), *REQUEST],
            ):
                with pytest.raises(ValueError, match="malformed request header block"):
                    conn.open_stream(bad)  # at once: before entering
            assert conn.open_streams == 0
            async with conn.open_stream(REQUEST, end_stream=True) as s:
                assert await s.receive_headers() == RESPONSE_200
                assert await s.read_all() == b""
                assert await s.receive_trailers() == [(b"x-ok", b"1")]
    assert seen == ["handler done"]


async def test_header_fields_may_be_str_or_bytes_like_and_nothing_else() -> None:
    """str is encoded (names ASCII, values UTF-8), bytearray and memoryview are copied
    to bytes; any other type raises TypeError at once."""
    seen: list[object] = []

    async def handler(stream: H2Stream) -> None:
        seen.append(stream.headers)
        await stream.send_headers([(":status", "200"), ("x-v", bytearray(b"\xc3\xa9"))])  # type: ignore[list-item]

    with trio.fail_after(5):
        async with connected_pair(handler) as (conn, _):
            with pytest.raises(TypeError, match="a header value must be bytes or str, not int"):
                conn.open_stream([*REQUEST, (b"content-length", 5)])  # type: ignore[list-item]
            extra = [("x-s", "é"), (b"x-m", memoryview(b"m")), [b"x-l", b"list"]]
            async with conn.open_stream([*REQUEST, *extra], end_stream=True) as s:  # type: ignore[list-item]
                assert await s.receive_headers() == [(b":status", b"200"), (b"x-v", b"\xc3\xa9")]
    assert seen == [[*REQUEST, (b"x-s", b"\xc3\xa9"), (b"x-m", b"m"), (b"x-l", b"list")]]


async def test_peer_reset_raises_stream_reset_error_with_its_code() -> None:
    """A handler's reset(ENHANCE_YOUR_CALM) reaches the client as StreamResetError(remote)."""

    async def handler(stream: H2Stream) -> None:
        if path_of(stream) == b"/":
            return await echo(stream)
        stream.reset(ErrorCodes.ENHANCE_YOUR_CALM)
        with pytest.raises(StreamResetError) as info:
            await stream.send_headers(RESPONSE_200)
        assert info.value.remote is False

    with trio.fail_after(5):
        async with connected_pair(handler) as (conn, _):
            async with conn.open_stream(request("/calm")) as s:
                with pytest.raises(StreamResetError) as info:
                    await s.receive_headers()
                assert info.value.error_code == ErrorCodes.ENHANCE_YOUR_CALM
                assert info.value.remote is True
                assert not isinstance(info.value, StreamRefusedError)
                # Sticky: every later call fails the same way.
                with pytest.raises(StreamResetError):
                    await s.send_data(b"x")
            assert conn.open_streams == 0
            assert await roundtrip(conn) == b"ping"


async def test_leaving_open_stream_early_resets_with_cancel() -> None:
    """Leaving open_stream mid-request sends RST_STREAM(CANCEL); the handler is cancelled."""
    handler_waiting = trio.Event()
    outcome: list[str] = []
    server_streams: list[H2Stream] = []

    async def handler(stream: H2Stream) -> None:
        if path_of(stream) == b"/":
            return await echo(stream)
        server_streams.append(stream)
        assert await stream.receive_exactly(7) == b"partial"
        handler_waiting.set()
        try:
            await stream.receive_some()
        except trio.Cancelled:
            outcome.append("cancelled")
            raise
        outcome.append("returned")

    with trio.fail_after(5):
        async with connected_pair(handler) as (conn, core):
            async with conn.open_stream(request("/wait")) as s:
                await s.send_data(b"partial")
                await handler_waiting.wait()
            assert s.closed
            assert conn.open_streams == 0
            await trio.testing.wait_all_tasks_blocked()
            assert outcome == ["cancelled"]
            err = server_streams[0].core_error
            assert isinstance(err, StreamResetError)
            assert (err.error_code, err.remote) == (ErrorCodes.CANCEL, True)
            assert core.open_streams == 0
            assert await roundtrip(conn) == b"ping"


async def test_cancelling_the_client_task_resets_and_frees_the_stream() -> None:
    """A cancelled client task resets its stream (CANCEL) and frees its state."""
    handler_waiting = trio.Event()
    reset_codes: list[object] = []

    async def handler(stream: H2Stream) -> None:
        if path_of(stream) == b"/":
            return await echo(stream)
        handler_waiting.set()
        try:
            await stream.receive_some()
        finally:
            if stream.core_error is not None:
                reset_codes.append(getattr(stream.core_error, "error_code", None))

    with trio.fail_after(5):
        async with connected_pair(handler) as (conn, core):
            with trio.CancelScope() as scope:
                async with conn.open_stream(request("/wait")) as s:
                    await handler_waiting.wait()
                    assert conn.open_streams == 1
                    scope.cancel()
                    await s.receive_headers()  # cancelled here
            assert scope.cancelled_caught
            assert conn.open_streams == 0
            await trio.testing.wait_all_tasks_blocked()
            assert reset_codes == [ErrorCodes.CANCEL]
            assert core.open_streams == 0
            assert await roundtrip(conn) == b"ping"


async def test_complete_exchange_closes_the_stream_without_a_reset() -> None:
    """A GET whose response ended is closed inside the block; leaving sends no RST_STREAM."""
    with trio.fail_after(5):
        async with open_peer_server() as (conn, peer):
            async with conn.open_stream(REQUEST, end_stream=True) as s:
                await peer.read_until(lambda: bool(peer.events_of(h2.events.RequestReceived)))
                peer.h2.send_headers(1, RESPONSE_200)
                peer.h2.send_data(1, b"body", end_stream=True)
                await peer.flush()
                await s.receive_headers()
                assert await s.read_all() == b"body"
                assert s.closed
                assert conn.open_streams == 0  # its stream quota is back already
            async with conn.open_stream(REQUEST, end_stream=True):
                pass  # left early: this one is reset
            await peer.read_until(lambda: bool(peer.frames_of(RstStreamFrame)))
            [rst] = peer.frames_of(RstStreamFrame)
            assert (rst.stream_id, rst.error_code) == (3, ErrorCodes.CANCEL)


# ============================================================ 12. no task outlives its connection


async def test_no_task_outlives_the_connection() -> None:
    """After the client context and serve_connection end, no trio_h2t task is left."""
    client_t, server_t = trio.testing.memory_stream_pair()
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve_connection, server_t, echo)
            async with open_client_connection(client_t) as conn:
                assert await roundtrip(conn, b"abc") == b"abc"
                await trio.testing.wait_all_tasks_blocked()
                names = sorted(t.name for t in h2t_tasks())
                # Each side's loopy and reader (the same tasks on both sides,
                # _runtime.py), the server's keepalive task (server_keepalive_time
                # is 2 h by default); the handshake timers and the handler have
                # returned.
                assert names == ["h2-keepalive", "h2-loopy", "h2-loopy", "h2-reader", "h2-reader"]
            # serve_connection returns on its own once the client has closed.
        assert h2t_tasks() == []


# ============================================================ 3. write quota


async def test_send_data_blocks_once_write_quota_is_queued() -> None:
    """With no window granted, send_data blocks after write_quota bytes; a window unblocks it."""
    chunk = pattern(16_384)
    quota = TransportConfig().write_quota
    writes = quota // len(chunk) + 4  # four writes more than the quota admits
    total = writes * len(chunk)
    settings = {SettingCodes.INITIAL_WINDOW_SIZE: 0}
    with trio.fail_after(5):
        async with open_peer_server(settings=settings) as (conn, peer):
            queued = 0
            async with conn.open_stream(REQUEST) as s, trio.open_nursery() as nursery:

                async def producer() -> None:
                    nonlocal queued
                    for _ in range(writes):
                        await s.send_data(chunk)
                        queued += len(chunk)
                    await s.end()

                nursery.start_soon(producer)
                await trio.testing.wait_all_tasks_blocked()
                assert queued == quota  # and not a byte more
                assert s._write_quota == 0
                await peer.receive_until(lambda ev: isinstance(ev, h2.events.RequestReceived))
                assert peer.frames_of(DataFrame) == []  # no window, nothing written
                # Open both windows for the whole body; the producer finishes.
                peer.h2.increment_flow_control_window(total)
                peer.h2.increment_flow_control_window(total, stream_id=1)
                await peer.flush()
                ended = await peer.receive_until(lambda ev: isinstance(ev, h2.events.StreamEnded))
                assert ended.stream_id == 1
            assert queued == total
            body = b"".join(ev.data for ev in peer.events if isinstance(ev, h2.events.DataReceived))
            assert body == chunk * writes


@pytest.mark.parametrize(
    ("ours", "peers", "expected"),
    [(100_000, 2**24 - 1, 100_000), (2**20, 200_000, 200_000), (2**20, 16_384, 16_384)],
)
async def test_data_frames_take_the_smaller_of_both_max_frame_sizes(
    ours: int, peers: int, expected: int
) -> None:
    """DATA is framed up to min(peer's SETTINGS_MAX_FRAME_SIZE, our max_frame_size), and we
    advertise ours and accept frames that large (RFC 9113 §4.2, §6.5.2)."""
    settings = {
        SettingCodes.MAX_FRAME_SIZE: peers,
        SettingCodes.INITIAL_WINDOW_SIZE: 2**20,
    }
    config = TransportConfig(max_frame_size=ours)
    body = pattern(500_000)
    with trio.fail_after(5):
        async with open_peer_server(client_config=config, settings=settings) as (conn, peer):
            assert peer.h2.remote_settings.max_frame_size == ours
            peer.h2.increment_flow_control_window(2**20)
            await peer.flush()
            async with conn.open_stream(REQUEST) as s:
                await s.send_data(body, end_stream=True)
                ended = await peer.receive_until(lambda ev: isinstance(ev, h2.events.StreamEnded))
                sizes = [len(f.data) for f in peer.frames_of(DataFrame)]
                assert max(sizes) == expected
                assert sum(sizes) == len(body)
                # The peer may answer with frames as large as ours, at once.
                peer.h2.send_headers(ended.stream_id, [(b":status", b"200")])
                reply = pattern(min(ours, 2**20 - 1), seed=3)
                peer.h2.send_data(ended.stream_id, reply, end_stream=True)
                await peer.flush()
                await s.receive_headers()
                assert await s.read_all() == reply


async def test_one_task_may_receive_while_another_sends_but_not_two_on_one_side() -> None:
    """A stream takes one waiting receiver and one waiting sender; a second of either
    gets trio.BusyResourceError, and the first ones still finish."""
    chunk = pattern(16_384)
    settings = {SettingCodes.INITIAL_WINDOW_SIZE: 0}
    with trio.fail_after(5):
        async with open_peer_server(settings=settings) as (conn, peer):
            quota = TransportConfig().write_quota
            async with conn.open_stream(REQUEST) as s, trio.open_nursery() as nursery:
                got: list[object] = []

                async def producer() -> None:
                    for _ in range(quota // len(chunk) + 1):
                        await s.send_data(chunk)  # the last one waits for quota
                    await s.end()

                async def receiver() -> None:
                    got.append(await s.receive_headers())
                    got.append(await s.read_all())

                nursery.start_soon(producer)
                nursery.start_soon(receiver)
                await trio.testing.wait_all_tasks_blocked()
                with pytest.raises(trio.BusyResourceError, match="receiving"):
                    await s.receive_some()
                with pytest.raises(trio.BusyResourceError, match="sending"):
                    await s.send_data(chunk)
                # The refused calls changed nothing: both waiters finish normally.
                await peer.receive_until(lambda ev: isinstance(ev, h2.events.RequestReceived))
                peer.h2.increment_flow_control_window(10 * quota)
                peer.h2.increment_flow_control_window(10 * quota, stream_id=1)
                peer.h2.send_headers(1, RESPONSE_200)
                peer.h2.send_data(1, b"pong", end_stream=True)
                await peer.flush()
                await peer.receive_until(lambda ev: isinstance(ev, h2.events.StreamEnded))
            assert got == [RESPONSE_200, b"pong"]
            body = b"".join(ev.data for ev in peer.events if isinstance(ev, h2.events.DataReceived))
            assert body == chunk * (quota // len(chunk) + 1)


# ============================================================ 4. inbound flow control


@pytest.mark.parametrize("dynamic", [False, True], ids=["fixed", "dynamic"])
async def test_application_that_stops_reading_stops_its_peer(dynamic: bool) -> None:
    """A handler that reads nothing stops the sender after one stream window."""
    release = trio.Event()
    server_streams: list[H2Stream] = []

    async def handler(stream: H2Stream) -> None:
        server_streams.append(stream)
        await release.wait()
        await echo(stream)

    body = pattern(MiB)
    sent = 0
    window = 65_535
    with trio.fail_after(10):
        config = TransportConfig(dynamic_window=dynamic, initial_window_size=window)
        async with (
            connected_pair(handler, server_config=config) as (conn, _),
            conn.open_stream(REQUEST) as s,
            trio.open_nursery() as nursery,
        ):

            async def producer() -> None:
                nonlocal sent
                for i in range(0, len(body), 16_384):
                    await s.send_data(body[i : i + 16_384])
                    sent += 16_384
                await s.end()

            nursery.start_soon(producer)
            await trio.testing.wait_all_tasks_blocked()
            stream = server_streams[0]
            f = stream._in_flow
            if not dynamic:
                assert f.limit == window
            buffered = sum(len(c) for c in stream._chunks or ())
            assert buffered == f.pending_data == f.limit  # one window, not a byte more
            # The sender is parked: one window on the wire, one write quota queued.
            assert sent <= f.limit + TransportConfig().write_quota + 16_384
            release.set()
            await s.receive_headers()
            assert await s.read_all() == body


async def test_connection_window_is_replenished_on_receipt() -> None:
    """A stream nobody reads does not starve the others of connection window."""
    # grpc-go TestServerConnDecoupledFromApplicationRead: connection window == stream
    # window, and the first stream fills both.
    config = fixed(connection_window_size=65_535)
    hold = trio.Event()

    async def handler(stream: H2Stream) -> None:
        if path_of(stream) == b"/hold":
            await hold.wait()
        await echo(stream)

    with trio.fail_after(10):
        async with (
            connected_pair(handler, server_config=config) as (conn, core),
            conn.open_stream(request("/hold")) as held,
        ):
            await held.send_data(pattern(65_535))
            await trio.testing.wait_all_tasks_blocked()
            [stream] = core.streams()
            assert stream._in_flow.pending_data == 65_535  # unread, window full
            big = pattern(300_000, seed=5)
            assert await roundtrip(conn, big) == big
            hold.set()
            await held.end()
            await held.receive_headers()
            assert await held.read_all() == pattern(65_535)


async def test_receive_exactly_beyond_the_window_grants_at_once() -> None:
    """receive_exactly(n) with n > window sends a WINDOW_UPDATE before any data arrives."""
    n = 200_000
    got: list[bytes] = []

    async def handler(stream: H2Stream) -> None:
        got.append(await stream.receive_exactly(n))
        await stream.send_headers(RESPONSE_200, end_stream=True)

    body = pattern(n)
    with trio.fail_after(5):
        async with open_peer_client(handler, server_config=fixed()) as (peer, _):
            peer.h2.send_headers(1, REQUEST)
            await peer.flush()
            update = await peer.receive_until(
                lambda ev: isinstance(ev, h2.events.WindowUpdated) and ev.stream_id == 1
            )
            assert update.delta >= n - 65_535
            assert peer.frames_of(DataFrame) == []
            # The peer may now send the whole message in one go.
            assert peer.h2.local_flow_control_window(1) >= n
            for i in range(0, n, 16_384):
                peer.h2.send_data(1, body[i : i + 16_384])
            peer.h2.end_stream(1)
            await peer.flush()
            await peer.receive_until(lambda ev: isinstance(ev, h2.events.StreamEnded))
    assert got == [body]


async def test_stream_credit_is_conserved() -> None:
    """Credit given back == read, and the sender's window == limit + delta - unacked
    (the two together: what the sender sent == read + buffered)."""
    reads: trio.MemorySendChannel[int]
    reads, to_handler = trio.open_memory_channel[int](0)
    server_streams: list[H2Stream] = []
    read_total = 0

    async def handler(stream: H2Stream) -> None:
        nonlocal read_total
        server_streams.append(stream)
        async for n in to_handler:
            if n < 0:
                read_total += len(await stream.receive_exactly(-n))
            else:
                read_total += len(await stream.receive_some(n))
        await echo(stream)

    def check(client_stream: H2Stream) -> None:
        f = server_streams[0]._in_flow
        assert f.acked + f.pending_update - f.delta == read_total
        sender_window = conn._core.h2.streams[client_stream.stream_id].outbound_flow_control_window
        assert sender_window == f.limit + f.delta - f.pending_data - f.pending_update
        assert f.pending_data <= f.limit + f.delta

    body = pattern(600_000)
    with trio.fail_after(10):
        async with (
            connected_pair(handler, server_config=fixed()) as (conn, _),
            conn.open_stream(REQUEST) as s,
            trio.open_nursery() as nursery,
        ):

            async def producer() -> None:
                await s.send_data(body, end_stream=True)

            nursery.start_soon(producer)
            for n in [1, 10_000, 5, 40_000, -100_000, 17_000, 65_535, -3, 1000, -150_000]:
                await trio.testing.wait_all_tasks_blocked()
                check(s)
                await reads.send(n)
            await trio.testing.wait_all_tasks_blocked()
            check(s)
            await reads.aclose()
            await s.receive_headers()
            assert await s.read_all() == body[read_total:]


async def test_unread_bytes_are_released_when_the_handler_returns() -> None:
    """Bytes a handler never read are released, and the connection window keeps flowing."""
    config = fixed(connection_window_size=65_535)
    first: list[H2Stream] = []

    async def handler(stream: H2Stream) -> None:
        if path_of(stream) == b"/ignore":
            first.append(stream)
            await stream.receive_exactly(1)  # the body has started arriving
            await trio.testing.wait_all_tasks_blocked()
            await stream.send_headers(RESPONSE_200, end_stream=True)
            return  # without reading the rest
        await echo(stream)

    with trio.fail_after(10):
        async with connected_pair(handler, server_config=config) as (conn, core):
            async with conn.open_stream(request("/ignore")) as s:
                await s.send_data(pattern(60_000))
                assert await s.receive_headers() == RESPONSE_200
                assert await s.read_all() == b""
                await trio.testing.wait_all_tasks_blocked()
            f = first[0]._in_flow
            assert (f.pending_data, f.pending_update, f.delta) == (0, 0, 0)
            assert first[0].closed
            assert core.open_streams == 0
            big = pattern(200_000)
            assert await roundtrip(conn, big) == big


async def test_unread_bytes_are_released_when_the_stream_is_reset() -> None:
    """A reset stream's buffered bytes are released; nothing more is owed to it."""
    parked = trio.Event()
    first: list[H2Stream] = []

    async def handler(stream: H2Stream) -> None:
        if path_of(stream) == b"/park":
            first.append(stream)
            parked.set()
            await trio.sleep_forever()
        await echo(stream)

    with trio.fail_after(10):
        async with connected_pair(handler, server_config=SMALL) as (conn, core):
            async with conn.open_stream(request("/park")) as s:
                await s.send_data(pattern(50_000))
                await parked.wait()
                await trio.testing.wait_all_tasks_blocked()
                assert first[0]._in_flow.pending_data == 50_000
                s.reset(ErrorCodes.CANCEL)
            await trio.testing.wait_all_tasks_blocked()
            f = first[0]._in_flow
            assert (f.pending_data, f.pending_update, f.delta) == (0, 0, 0)
            assert core.open_streams == 0
            big = pattern(200_000)
            assert await roundtrip(conn, big) == big


async def test_bdp_growth_credits_open_streams_once() -> None:
    """When the BDP estimate grows the windows, an open stream gains the difference once."""
    held: list[H2Stream] = []

    async def handler(stream: H2Stream) -> None:
        held.append(stream)
        await trio.sleep_forever()  # never reads

    def window_grew(ev: object) -> bool:
        if not isinstance(ev, h2.events.RemoteSettingsChanged):
            return False
        change = ev.changed_settings.get(SettingCodes.INITIAL_WINDOW_SIZE)
        return change is not None and change.new_value > 65_535

    with trio.fail_after(5):
        async with open_peer_client(handler) as (peer, _):
            peer.h2.send_headers(1, REQUEST)
            for _ in range(4):  # 62 000 bytes in one burst: > 2/3 of the window
                peer.h2.send_data(1, bytes(15_500))
            await peer.flush()
            await peer.read_until(lambda: any(window_grew(ev) for ev in peer.events))
            await trio.testing.wait_all_tasks_blocked()
            f = held[0]._in_flow
            assert f.limit > 65_535  # the estimator grew the window
            peer_window = peer.h2.local_flow_control_window(1)
            assert peer_window == f.limit + f.delta - f.pending_data - f.pending_update
            # The peer fills what it may send; the unread stream holds one window.
            for i in range(0, peer_window, 16_384):
                peer.h2.send_data(1, bytes(min(16_384, peer_window - i)))
            await peer.flush()
            await trio.testing.wait_all_tasks_blocked()
            assert f.pending_data == f.limit
            assert sum(len(c) for c in held[0]._chunks or ()) == f.limit


# ============================================================ 5. MAX_CONCURRENT_STREAMS


async def test_open_stream_context_is_entered_once() -> None:
    """The object ``open_stream`` returns starts one request; entering it again is an
    error, not a second request on the same stream object."""
    with trio.fail_after(5):
        async with connected_pair(echo) as (conn, _):
            opener = conn.open_stream(REQUEST, end_stream=True)
            async with opener as stream:
                await stream.receive_headers()
                assert await stream.read_all() == b""
            with pytest.raises(RuntimeError, match="entered only once"):
                async with opener:
                    pass  # pragma: no cover
            assert conn.open_streams == 0


async def test_client_waits_for_stream_quota() -> None:
    """Under max_concurrent_streams=2 a third open_stream waits until one stream finishes."""
    gate_send, gate_receive = trio.open_memory_channel[None](0)
    started: list[int] = []

    async def handler(stream: H2Stream) -> None:
        started.append(stream.stream_id)
        await gate_receive.receive()
        await echo(stream)

    entered: list[int] = []
    done: list[int] = []

    async def one(i: int) -> None:
        async with conn.open_stream(REQUEST) as s:
            entered.append(i)
            await s.send_data(b"x", end_stream=True)
            await s.receive_headers()
            await s.read_all()
        done.append(i)

    with trio.fail_after(5):
        async with connected_pair(
            handler, server_config=TransportConfig(max_concurrent_streams=2)
        ) as (
            conn,
            core,
        ):
            async with trio.open_nursery() as nursery:
                for i in range(3):
                    nursery.start_soon(one, i)
                    await trio.testing.wait_all_tasks_blocked()
                assert len(entered) == 2  # the third waits for quota
                assert core.open_streams == conn.open_streams == 2
                await gate_send.send(None)
                await trio.testing.wait_all_tasks_blocked()
                assert len(done) == 1
                assert len(entered) == 3
                await gate_send.send(None)
                await gate_send.send(None)
            assert sorted(done) == [0, 1, 2]
            assert started == [1, 3, 5]


async def test_server_refuses_streams_beyond_its_limit_and_lives_on() -> None:
    """A client ignoring MAX_CONCURRENT_STREAMS gets REFUSED_STREAM; the connection lives."""
    release = trio.Event()

    async def handler(stream: H2Stream) -> None:
        await release.wait()
        await echo(stream)

    h2c = UnlimitedH2Connection(h2.config.H2Configuration(client_side=True, header_encoding=None))
    config = TransportConfig(max_concurrent_streams=2)
    with trio.fail_after(5):
        async with open_peer_client(handler, server_config=config, h2_conn=h2c) as (peer, core):
            # Plain h2 would refuse to send these, and a plain h2 server would
            # answer the third with GOAWAY (TooManyStreamsError, hypercorn #335).
            for sid in (1, 3, 5, 7, 9):
                peer.h2.send_headers(sid, REQUEST, end_stream=True)
            await peer.flush()
            await peer.read_until(lambda: len(peer.events_of(h2.events.StreamReset)) == 3)
            resets = {ev.stream_id: ev.error_code for ev in peer.events_of(h2.events.StreamReset)}
            refused = ErrorCodes.REFUSED_STREAM
            assert resets == {5: refused, 7: refused, 9: refused}
            assert core.open_streams == 2
            release.set()
            await peer.read_until(lambda: len(peer.events_of(h2.events.StreamEnded)) == 2)
            assert {ev.stream_id for ev in peer.events_of(h2.events.StreamEnded)} == {1, 3}
            # Still alive: a new request succeeds.
            peer.h2.send_headers(11, REQUEST, end_stream=True)
            await peer.flush()
            ev = await peer.receive_until(lambda ev: isinstance(ev, h2.events.ResponseReceived))
            assert ev.stream_id == 11
            assert peer.frames_of(GoAwayFrame) == []


async def test_client_surfaces_refused_stream_as_retryable() -> None:
    """RST_STREAM(REFUSED_STREAM) from the server becomes StreamRefusedError(retryable)."""
    with trio.fail_after(5):
        async with open_peer_server() as (conn, peer):
            async with conn.open_stream(REQUEST, end_stream=True) as s:
                ev = await peer.receive_until(lambda ev: isinstance(ev, h2.events.RequestReceived))
                peer.h2.reset_stream(ev.stream_id, ErrorCodes.REFUSED_STREAM)
                await peer.flush()
                with pytest.raises(StreamRefusedError) as info:
                    await s.receive_headers()
            assert info.value.retryable is True
            assert info.value.error_code == ErrorCodes.REFUSED_STREAM
            assert isinstance(info.value, StreamResetError)
            assert conn.open_streams == 0


# ============================================================ 6. GOAWAY


async def test_graceful_close_finishes_in_flight_and_refuses_new() -> None:
    """graceful_close lets the in-flight stream finish and refuses new ones."""
    release = trio.Event()
    in_handler = trio.Event()

    async def handler(stream: H2Stream) -> None:
        in_handler.set()
        await release.wait()
        await echo(stream)

    closed = False
    with trio.fail_after(5):
        async with connected_pair(handler) as (conn, core):
            async with conn.open_stream(REQUEST) as s, trio.open_nursery() as nursery:
                await s.send_data(b"in flight")
                await in_handler.wait()

                async def close() -> None:
                    nonlocal closed
                    await core.graceful_close()
                    closed = True

                nursery.start_soon(close)
                await trio.testing.wait_all_tasks_blocked()
                assert conn._core.goaway_received is not None
                with pytest.raises(GoAwayError) as info:  # the server's GOAWAY
                    async with conn.open_stream(REQUEST, end_stream=True):
                        pass  # pragma: no cover
                assert info.value.retryable
                assert not closed  # still draining
                release.set()
                await s.end()
                await s.receive_headers()
                assert await s.read_all() == b"in flight"
            assert closed


async def test_handler_reset_after_the_clients_goaway_reaches_the_client() -> None:
    """Regression (found by the stateful suite): after the client's GOAWAY, a handler
    that returns without finishing its response gets its stream reset by the server, which leaves
    the server idle: it then queues its own GOAWAY and closes. The RST_STREAM must be
    queued first, or loopy stops at the close without writing it and the client waits
    on the stream until the connection drops."""
    release = trio.Event()
    in_handler = trio.Event()

    async def handler(stream: H2Stream) -> None:
        await stream.send_headers(RESPONSE_200)  # (without headers it would get a 500)
        in_handler.set()
        await release.wait()  # then return without finishing the response

    with trio.fail_after(5):
        async with (
            connected_pair(handler) as (conn, core),
            conn.open_stream(REQUEST, end_stream=True) as s,
        ):
            await in_handler.wait()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(conn.aclose)
                await trio.testing.wait_all_tasks_blocked()
                assert core.goaway_received is not None  # the server saw our GOAWAY
                release.set()
                await s.receive_headers()
                with pytest.raises(StreamResetError) as info:
                    await s.read_all()
            assert info.value.error_code == ErrorCodes.INTERNAL_ERROR
            assert info.value.remote


async def test_serve_connection_returns_after_graceful_close_while_client_stays() -> None:
    """Once a graceful close has drained, serve_connection returns though the client is idle."""
    client_t, server_t = trio.testing.memory_stream_pair()
    server_returned = trio.Event()

    async def run_server(task_status: trio.TaskStatus[ServerConnection]) -> None:
        await serve_connection(server_t, echo, task_status=task_status)
        server_returned.set()

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            server: ServerConnection = await nursery.start(run_server)
            async with open_client_connection(client_t) as conn:
                assert await roundtrip(conn, b"before") == b"before"
                await server.aclose()
                await server_returned.wait()  # the client did nothing to help
                await trio.testing.wait_all_tasks_blocked()
                assert isinstance(conn.error, ConnectionClosingError)  # a clean close
                assert isinstance(conn.error.__cause__, GoAwayError)  # the server's
                with pytest.raises(GoAwayError) as info:
                    await roundtrip(conn)
                assert info.value.retryable


async def test_server_refuses_a_stream_arriving_after_its_goaway() -> None:
    """A stream the peer opens after our GOAWAY is refused; the in-flight one finishes."""
    release = trio.Event()

    async def handler(stream: H2Stream) -> None:
        await release.wait()
        await echo(stream)

    h2c = UnlimitedH2Connection(h2.config.H2Configuration(client_side=True, header_encoding=None))
    with trio.fail_after(5):
        async with (
            open_peer_client(handler, h2_conn=h2c) as (peer, core),
            trio.open_nursery() as nursery,
        ):
            peer.h2.send_headers(1, REQUEST, end_stream=True)
            await peer.flush()
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(core.graceful_close)
            # The first GOAWAY (2^31-1) and its PING, which read_until answers; then
            # the second with the exact last stream id.
            await peer.read_until(lambda: len(peer.frames_of(GoAwayFrame)) == 2)
            heads_up, goaway = peer.frames_of(GoAwayFrame)
            assert (heads_up.last_stream_id, goaway.last_stream_id) == (2**31 - 1, 1)
            peer.h2.send_headers(3, REQUEST, end_stream=True)  # too late
            await peer.flush()
            ev = await peer.receive_until(lambda ev: isinstance(ev, h2.events.StreamReset))
            assert (ev.stream_id, ev.error_code) == (3, ErrorCodes.REFUSED_STREAM)
            release.set()
            ev = await peer.receive_until(lambda ev: isinstance(ev, h2.events.StreamEnded))
            assert ev.stream_id == 1


async def test_peer_goaway_refuses_streams_above_last_stream_id() -> None:
    """GOAWAY(last_stream_id=1): streams 3 and 5 fail retryably, stream 1 still completes."""
    results: dict[int, object] = {}

    async def one(i: int) -> None:
        async with conn.open_stream(REQUEST, end_stream=True) as s:
            try:
                await s.receive_headers()
                results[i] = await s.read_all()
            except StreamRefusedError as exc:
                results[i] = exc

    with trio.fail_after(5):
        async with open_peer_server() as (conn, peer), trio.open_nursery() as nursery:
            for i in range(3):
                nursery.start_soon(one, i)
                await trio.testing.wait_all_tasks_blocked()
            await peer.read_until(lambda: len(peer.events_of(h2.events.RequestReceived)) == 3)
            # GOAWAY framed by hand: the peer's own h2 knows nothing of it.
            frame = GoAwayFrame(0)
            frame.last_stream_id = 1
            frame.error_code = ErrorCodes.NO_ERROR
            await peer.send_raw(frame.serialize())
            await trio.testing.wait_all_tasks_blocked()
            assert isinstance(results.get(1), StreamRefusedError)
            assert isinstance(results.get(2), StreamRefusedError)
            # h2 did not close (h2 #1181): stream 1 is still answered and received.
            peer.h2.send_headers(1, RESPONSE_200)
            peer.h2.send_data(1, b"still here", end_stream=True)
            await peer.flush()
            await trio.testing.wait_all_tasks_blocked()
            assert results[0] == b"still here"
            with pytest.raises(GoAwayError) as info:
                async with conn.open_stream(REQUEST, end_stream=True):
                    pass  # pragma: no cover
            assert info.value.retryable
    for i in (1, 2):
        err = results[i]
        assert isinstance(err, StreamRefusedError)
        assert err.retryable
        assert err.stream_id in (3, 5)
        assert isinstance(err.__cause__, GoAwayError)


async def test_h2server_aclose_drains_in_flight_streams_over_tcp() -> None:
    """H2Server.aclose sends GOAWAY, lets the in-flight stream finish, then stops serve_tcp."""
    release = trio.Event()
    in_handler = trio.Event()

    async def handler(stream: H2Stream) -> None:
        in_handler.set()
        await release.wait()
        await echo(stream)

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            server: H2Server = await nursery.start(
                functools.partial(serve_tcp, handler, 0, host="127.0.0.1")
            )
            async with (
                open_connection("127.0.0.1", server.port) as conn,
                conn.open_stream(REQUEST) as s,
            ):
                await s.send_data(b"draining", end_stream=True)
                await in_handler.wait()
                nursery.start_soon(server.aclose)
                await trio.testing.wait_all_tasks_blocked()
                [core] = server._connections
                assert core.closing  # GOAWAY queued; the stream is still served
                release.set()
                await s.receive_headers()
                assert await s.read_all() == b"draining"
        # serve_tcp returned: aclose cancelled its nursery once the stream was done.


# ============================================================ 7. hard close


async def test_abrupt_close_fails_client_streams_fast_with_connection_lost() -> None:
    """Killing the server's transport mid-stream fails client calls fast; no task is left."""
    in_handler = trio.Event()

    async def handler(stream: H2Stream) -> None:
        in_handler.set()
        await trio.sleep_forever()

    client_t, server_t = trio.testing.memory_stream_pair()
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve_connection, server_t, handler)
            async with open_client_connection(client_t) as conn:
                async with conn.open_stream(REQUEST) as s:
                    await s.send_data(b"x")
                    await in_handler.wait()
                    await trio.aclose_forcefully(server_t)
                    with pytest.raises(ConnectionLostError) as info:
                        await s.receive_headers()
                    assert isinstance(info.value, trio.BrokenResourceError)
                    with pytest.raises(ConnectionLostError):
                        await s.send_data(b"y")
                    with pytest.raises(ConnectionLostError):
                        await s.receive_some()
                assert isinstance(conn.error, ConnectionLostError)
                with pytest.raises(ConnectionClosingError) as closing:
                    async with conn.open_stream(REQUEST):
                        pass  # pragma: no cover
                assert isinstance(closing.value.__cause__, ConnectionLostError)
            # serve_connection noticed too and returned by itself.
    assert h2t_tasks() == []


async def test_stream_starts_queued_when_the_connection_dies_fail_clearly() -> None:
    """Stream starts stuck behind a stalled writer fail with ConnectionClosingError."""
    ours, theirs = clogged_pair()
    outcomes: list[BaseException] = []

    async def one() -> None:
        try:
            async with conn.open_stream(REQUEST, end_stream=True) as s:
                await s.receive_headers()
        except (ConnectionClosingError, ConnectionLostError) as exc:
            outcomes.append(exc)

    with trio.fail_after(5):
        async with open_peer_server(transports=(ours, theirs)) as (conn, peer):
            # The peer reads nothing more: the client's writer is stuck in send_all.
            async with trio.open_nursery() as nursery:
                for _ in range(50):
                    nursery.start_soon(one)
                await trio.testing.wait_all_tasks_blocked()
                assert conn._core.cbuf.statistics().queued == 50
                await peer.transport.aclose()
            assert len(outcomes) == 50
            assert all(isinstance(e, ConnectionClosingError) and e.retryable for e in outcomes)
            assert conn.open_streams == 0
    assert h2t_tasks() == []


# ============================================================ 8. throttling the reader


async def test_ping_flood_without_reading_stops_our_reader() -> None:
    """A peer flooding PINGs and never reading stops our reader; reading again drains all."""
    ours, theirs = clogged_pair()
    floods, per_flood = 10, 1000
    # The ping policy would end this at the third PING (tests/test_keepalive.py), and
    # the flood budget after flood_burst PINGs answered late (tests/test_floods.py);
    # the throttle gate is what is under test here.
    config = TransportConfig(
        ping_min_interval=0, ping_permit_without_stream=True, flood_burst=1_000_000
    )
    with trio.fail_after(10):
        async with open_peer_client(echo, server_config=config, transports=(ours, theirs)) as (
            peer,
            core,
        ):
            flood = b"".join(
                PingFrame(0, opaque_data=i.to_bytes(8, "big")).serialize() for i in range(per_flood)
            )
            for _ in range(floods):
                await peer.send_raw(flood)  # buffered on the link; never blocks the peer
            await trio.testing.wait_all_tasks_blocked()
            stats = core.cbuf.statistics()
            assert stats.readers_waiting == 1
            assert stats.throttled >= stats.throttle_limit
            # Bounded: the reader took at most one read past the limit, not the flood.
            one_read = config.read_buffer_size // len(flood[:17]) + 1
            assert stats.throttled <= stats.throttle_limit + one_read
            assert core.h2.pending_bytes() <= 17 * (stats.throttle_limit + one_read)

            async with trio.open_nursery() as nursery:

                async def drain() -> None:
                    while not peer.eof:
                        await peer.receive()
                        await peer.flush()

                nursery.start_soon(drain)
                await trio.testing.wait_all_tasks_blocked()
                assert len(peer.events_of(h2.events.PingAckReceived)) == floods * per_flood
                assert core.cbuf.statistics().throttled == 0
                peer.h2.send_headers(1, REQUEST)
                peer.h2.send_data(1, b"healthy", end_stream=True)
                await peer.flush()
                await trio.testing.wait_all_tasks_blocked()
                data = b"".join(e.data for e in peer.events_of(h2.events.DataReceived))
                assert data == b"healthy"
                nursery.cancel_scope.cancel()


async def test_window_update_flood_is_read_on_and_queues_one_item_per_window() -> None:
    """WINDOW_UPDATE frames are not throttled, so a peer flooding them while never
    reading does not stop our reader; each window has at most one WindowOpened
    queued, so the control buffer stays bounded. (The flood budget, which would end
    this connection after flood_burst small updates, is raised out of the way: it
    has its own tests in test_floods.py.)"""
    ours, theirs = clogged_pair()
    flooded = 0
    config = TransportConfig(flood_burst=1_000_000)

    async def handler(stream: H2Stream) -> None:
        await trio.sleep_forever()

    with trio.fail_after(10):
        async with open_peer_client(handler, transports=(ours, theirs), server_config=config) as (
            peer,
            core,
        ):
            peer.h2.send_headers(1, REQUEST)
            await peer.flush()
            await peer.send_raw(PingFrame(0, opaque_data=b"blocking").serialize())
            await trio.testing.wait_all_tasks_blocked()  # loopy is blocked writing
            for _ in range(20):
                flood = b"".join(
                    WindowUpdateFrame(sid, window_increment=1).serialize()
                    for _ in range(500)
                    for sid in (0, 1)
                )
                await peer.send_raw(flood)
                flooded += 1000
            await trio.testing.wait_all_tasks_blocked()
            stats = core.cbuf.statistics()
            assert stats.readers_waiting == 0  # the reader read the whole flood
            assert core.h2.outbound_flow_control_window == 65_535 + flooded // 2
            # The PING ack and one WindowOpened per window, not one item per frame.
            assert stats.queued + stats.in_batch <= 3
            assert core.windows_opened <= {0, 1}
            await peer.transport.aclose()


# ============================================================ 9. a handler that raises


async def test_handler_that_raises_resets_its_stream_and_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A handler raising after its headers gets RST_STREAM(INTERNAL_ERROR), is logged,
    and others carry on (before its headers it gets a 500: tests/test_handler_errors.py)."""

    async def handler(stream: H2Stream) -> None:
        if path_of(stream) == b"/boom":
            await stream.send_headers(RESPONSE_200)
            raise ValueError("boom")
        await echo(stream)

    caplog.set_level(logging.ERROR, logger="trio_h2t")
    with trio.fail_after(5):
        async with connected_pair(handler) as (conn, core):
            async with conn.open_stream(request("/boom"), end_stream=True) as s:
                await s.receive_headers()
                with pytest.raises(StreamResetError) as info:
                    await s.read_all()
            assert info.value.error_code == ErrorCodes.INTERNAL_ERROR
            assert info.value.remote is True
            assert await roundtrip(conn) == b"ping"
            assert core.open_streams == 0
    [record] = [r for r in caplog.records if r.name == "trio_h2t"]
    assert record.levelno == logging.ERROR
    assert record.exc_info is not None
    assert record.exc_info[0] is ValueError


# ============================================================ 10. stream ids on the wire


async def test_stream_ids_increase_on_the_wire_under_concurrency() -> None:
    """Streams opened by many tasks at once reach the wire with increasing ids."""
    n = 100

    async def one(delay: int) -> None:
        for _ in range(delay):
            await trio.lowlevel.checkpoint()
        async with conn.open_stream(REQUEST, end_stream=True) as s:
            await s.receive_headers()
            await s.read_all()

    with trio.fail_after(5):
        async with open_peer_server() as (conn, peer), trio.open_nursery() as nursery:
            for i in range(n):
                nursery.start_soon(one, (i * 7) % 5)
            await peer.read_until(lambda: len(peer.events_of(h2.events.RequestReceived)) == n)
            ids = [f.stream_id for f in peer.frames_of(HeadersFrame)]
            assert ids == list(range(1, 2 * n, 2))
            for sid in ids:
                peer.h2.send_headers(sid, RESPONSE_200, end_stream=True)
            await peer.flush()


# ============================================================ 11. round robin, connection window


async def test_connection_window_update_resumes_active_streams_round_robin() -> None:
    """With the connection window as the bottleneck, two streams' DATA frames alternate."""
    settings = {SettingCodes.INITIAL_WINDOW_SIZE: MiB}  # stream windows never bind
    size = 300_000
    go = trio.Event()

    seeds: dict[int, int] = {}

    async def send(seed: int) -> None:
        async with conn.open_stream(REQUEST) as s:
            await go.wait()
            seeds[s.stream_id] = seed
            await s.send_data(pattern(size, seed), end_stream=True)
            await s.receive_headers()

    with trio.fail_after(5):
        async with (
            open_peer_server(settings=settings) as (conn, peer),
            trio.open_nursery() as nursery,
        ):
            nursery.start_soon(send, 1)
            nursery.start_soon(send, 2)
            await peer.read_until(lambda: len(peer.events_of(h2.events.RequestReceived)) == 2)
            go.set()  # both bodies are queued in the same scheduling batch
            received = 0
            while len(peer.events_of(h2.events.StreamEnded)) < 2:
                for ev in await peer.receive():
                    if isinstance(ev, h2.events.DataReceived) and ev.flow_controlled_length:
                        received += ev.flow_controlled_length
                        # Grant the connection only, one frame's worth at a time.
                        peer.h2.increment_flow_control_window(ev.flow_controlled_length)
                await peer.flush()
            for sid in (1, 3):
                peer.h2.send_headers(sid, RESPONSE_200, end_stream=True)
            await peer.flush()
    assert received == 2 * size
    ids = [f.stream_id for f in peer.frames_of(DataFrame) if f.data]
    last_of_first_done = min(max(i for i, s in enumerate(ids) if s == sid) for sid in (1, 3))
    # From the moment both streams have data (the first may get one frame in first).
    second = next(i for i, sid in enumerate(ids) if sid != ids[0])
    both_active = ids[second : last_of_first_done + 1]
    assert len(both_active) > 30
    assert all(a != b for a, b in itertools.pairwise(both_active)), both_active
    for sid, seed in seeds.items():
        body = b"".join(
            e.data for e in peer.events_of(h2.events.DataReceived) if e.stream_id == sid
        )
        assert body == pattern(size, seed)


async def test_output_needing_no_window_passes_a_stream_blocked_on_the_connection_window(
    autojump_clock: object,
) -> None:
    """With stream A out of connection window, B's end() and C's trailers still go out."""
    settings = {SettingCodes.INITIAL_WINDOW_SIZE: MiB}  # only the connection window binds
    with trio.fail_after(5):  # mock time: a missing frame fails at once, not in 5 s
        async with (
            open_peer_server(settings=settings) as (conn, peer),
            conn.open_stream(REQUEST) as a,
            conn.open_stream(REQUEST) as b,
            conn.open_stream(REQUEST) as c,
        ):
            await peer.read_until(lambda: len(peer.events_of(h2.events.RequestReceived)) == 3)
            await a.send_data(bytes(100_000), end_stream=True)

            def data_of(sid: int) -> int:
                return sum(
                    e.flow_controlled_length
                    for e in peer.events_of(h2.events.DataReceived)
                    if e.stream_id == sid
                )

            await peer.read_until(lambda: data_of(a.stream_id) == 65_535)
            await trio.testing.wait_all_tasks_blocked()  # loopy: A waits for window
            window = conn._core.h2.outbound_flow_control_window
            assert window == 0  # the connection window is spent
            await b.end()  # an empty DATA with END_STREAM, queued behind A
            await c.send_data(b"")  # queued behind A too, and C's trailers behind it
            await c.send_trailers([(b"x-done", b"1")])

            def ended() -> set[int]:
                return {e.stream_id for e in peer.events_of(h2.events.StreamEnded)}

            await peer.read_until(lambda: {b.stream_id, c.stream_id} <= ended())
            [trailers] = peer.events_of(h2.events.TrailersReceived)
            assert trailers.stream_id == c.stream_id
            assert a.stream_id not in ended()
            assert data_of(a.stream_id) == 65_535  # A still waits for the window
            # Still spent: the peer sent no WINDOW_UPDATE; B and C needed none.
            assert conn._core.h2.outbound_flow_control_window == 0
            # The window reopens: A finishes.
            peer.h2.increment_flow_control_window(MiB)
            await peer.flush()
            await peer.read_until(lambda: a.stream_id in ended())
            assert data_of(a.stream_id) == 100_000
            for s in (a, b, c):
                peer.h2.send_headers(s.stream_id, RESPONSE_200, end_stream=True)
            await peer.flush()
            for s in (a, b, c):
                await s.receive_headers()


async def test_empty_data_without_end_stream_sends_no_frame() -> None:
    """send_data(b"") queues nothing that reaches the wire; end() sends one empty DATA
    with END_STREAM (docs/flow-control.md: zero-length DATA)."""
    with trio.fail_after(5):
        async with open_peer_server() as (conn, peer), conn.open_stream(REQUEST) as stream:
            await stream.send_data(b"")
            await stream.send_data(b"x")
            await stream.send_data(b"")
            await stream.end()
            await peer.read_until(
                lambda: any(
                    isinstance(f, DataFrame) and "END_STREAM" in f.flags for f in peer.frames
                )
            )
            sent = [(bytes(f.data), "END_STREAM" in f.flags) for f in peer.frames_of(DataFrame)]
            assert sent == [(b"x", False), (b"", True)]
            peer.h2.send_headers(stream.stream_id, RESPONSE_200, end_stream=True)
            await peer.flush()
            await stream.receive_headers()


async def test_connection_window_update_does_not_wake_a_stream_parked_on_its_own_window() -> None:
    """A stream out of stream window stays parked on a connection WINDOW_UPDATE."""
    settings = {SettingCodes.INITIAL_WINDOW_SIZE: 0}
    with trio.fail_after(5):
        async with (
            open_peer_server(settings=settings) as (conn, peer),
            conn.open_stream(REQUEST) as s,
        ):
            await s.send_data(b"parked", end_stream=True)
            await peer.read_until(lambda: bool(peer.events_of(h2.events.RequestReceived)))
            await trio.testing.wait_all_tasks_blocked()
            out = conn._core.loopy.outstream_for_testing(s.stream_id)
            assert out is not None
            assert out.state == OUT_WAITING
            peer.h2.increment_flow_control_window(100_000)  # connection only
            await peer.flush()
            await trio.testing.wait_all_tasks_blocked()
            out = conn._core.loopy.outstream_for_testing(s.stream_id)
            assert out is not None
            assert out.state == OUT_WAITING
            assert conn.statistics().loopy.data_frames == 0
            peer.h2.increment_flow_control_window(6, stream_id=1)
            await peer.flush()
            await peer.read_until(lambda: bool(peer.events_of(h2.events.StreamEnded)))
            [data] = peer.events_of(h2.events.DataReceived)
            assert data.data == b"parked"
            peer.h2.send_headers(1, RESPONSE_200, end_stream=True)
            await peer.flush()
            await s.receive_headers()


# ============================================================ time-bound closes and errors


async def test_handshake_times_out_without_server_settings(autojump_clock: object) -> None:
    """A server that never sends SETTINGS fails open_client_connection after the timeout."""
    client_t, _server_t = trio.testing.memory_stream_pair()
    config = TransportConfig(handshake_timeout=3)
    start = trio.current_time()
    with pytest.raises(ConnectionLostError):
        async with open_client_connection(client_t, config=config):
            pass  # pragma: no cover
    assert trio.current_time() - start == pytest.approx(3)
    assert h2t_tasks() == []


async def test_graceful_close_is_bounded(autojump_clock: object) -> None:
    """A handler that never finishes is cut off graceful_close_timeout after GOAWAY."""
    in_handler = trio.Event()
    cancelled: list[bool] = []

    async def handler(stream: H2Stream) -> None:
        in_handler.set()
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            cancelled.append(True)
            raise

    config = TransportConfig(graceful_close_timeout=5)
    with trio.fail_after(60):
        async with (
            connected_pair(handler, server_config=config) as (conn, core),
            conn.open_stream(REQUEST) as s,
        ):
            await in_handler.wait()
            start = trio.current_time()
            await core.graceful_close()
            assert trio.current_time() - start == pytest.approx(5)
            await trio.testing.wait_all_tasks_blocked()
            assert cancelled == [True]
            with pytest.raises(trio.BrokenResourceError):
                await s.receive_headers()


async def test_peer_protocol_error_gets_goaway_and_ends_the_connection() -> None:
    """A protocol violation is answered with GOAWAY(PROTOCOL_ERROR); serve_connection returns."""
    with trio.fail_after(5):
        async with open_peer_client(echo) as (peer, core):
            await peer.send_raw(BAD_FRAME)  # DATA on stream 0: a connection error
            await peer.read_until(lambda: bool(peer.frames_of(GoAwayFrame)) or peer.eof)
            [goaway] = peer.frames_of(GoAwayFrame)
            assert goaway.error_code == ErrorCodes.PROTOCOL_ERROR
            await peer.read_until(lambda: peer.eof)  # the server closed the link
            assert isinstance(core.error, trio.BrokenResourceError)
            assert getattr(core.error, "error_code", None) == ErrorCodes.PROTOCOL_ERROR
    assert h2t_tasks() == []


async def test_client_protocol_error_during_an_upload_fails_streams_not_the_caller() -> None:
    """A peer's protocol error while loopy is mid-upload fails the streams, nothing crashes."""
    settings = {SettingCodes.INITIAL_WINDOW_SIZE: MiB}
    with trio.fail_after(5):
        async with (
            open_peer_server(settings=settings) as (conn, peer),
            conn.open_stream(REQUEST) as s,
        ):
            await s.send_data(bytes(500_000), end_stream=True)
            await peer.read_until(lambda: bool(peer.events_of(h2.events.RequestReceived)))
            await trio.testing.wait_all_tasks_blocked()  # parked on the connection window
            # A connection WINDOW_UPDATE (loopy resumes writing) and a violation at once.
            update = WindowUpdateFrame(0, window_increment=MiB).serialize()
            await peer.send_raw(update + BAD_FRAME)
            with pytest.raises(ConnectionLostError) as info:
                await s.receive_headers()
            assert isinstance(info.value.__cause__, RemoteProtocolError)
            await peer.read_until(lambda: bool(peer.frames_of(GoAwayFrame)))
            [goaway] = peer.frames_of(GoAwayFrame)
            assert goaway.error_code == ErrorCodes.PROTOCOL_ERROR


async def test_server_survives_a_protocol_error_during_a_download() -> None:
    """A client breaking the protocol mid-response gets GOAWAY; serve_connection returns."""

    async def handler(stream: H2Stream) -> None:
        await stream.send_headers(RESPONSE_200)
        await stream.send_data(bytes(500_000), end_stream=True)

    with trio.fail_after(5):
        async with open_peer_client(handler) as (peer, core):
            peer.h2.send_headers(1, REQUEST, end_stream=True)
            await peer.flush()
            await peer.read_until(lambda: bool(peer.events_of(h2.events.DataReceived)))
            await trio.testing.wait_all_tasks_blocked()  # the server is out of window
            update = WindowUpdateFrame(0, window_increment=MiB).serialize()
            update += WindowUpdateFrame(1, window_increment=MiB).serialize()
            await peer.send_raw(update + BAD_FRAME)
            await peer.read_until(lambda: peer.eof)
            [goaway] = peer.frames_of(GoAwayFrame)
            assert goaway.error_code == ErrorCodes.PROTOCOL_ERROR
            assert isinstance(core.error, RemoteProtocolError)
        # serve_connection returned normally (an escaping error would fail this test).


async def test_cancelling_serve_connection_cancels_handlers_at_once() -> None:
    """Cancelling serve_connection cancels its handlers and closes the link; the client sees it."""
    in_handler = trio.Event()
    cancelled: list[bool] = []

    async def handler(stream: H2Stream) -> None:
        in_handler.set()
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            cancelled.append(True)
            raise

    client_t, server_t = trio.testing.memory_stream_pair()
    with trio.fail_after(5):
        async with trio.open_nursery() as outer:
            server_scope = trio.CancelScope()

            async def run_server() -> None:
                with server_scope:
                    await serve_connection(server_t, handler)

            outer.start_soon(run_server)
            async with (
                open_client_connection(client_t) as conn,
                conn.open_stream(REQUEST) as s,
            ):
                await in_handler.wait()
                server_scope.cancel()
                with pytest.raises(ConnectionLostError):
                    await s.receive_headers()
            assert cancelled == [True]
    assert h2t_tasks() == []


async def test_streams_sent_before_our_settings_are_acked_are_tolerated() -> None:
    """Streams opened before the client saw our SETTINGS are served up to 100 (RFC 9113
    §6.5.3); once it has acknowledged them, the configured limit holds."""
    from helpers import ScriptedPeer

    server_t, client_t = trio.testing.memory_stream_pair()
    peer = ScriptedPeer(
        client_t,
        client_side=True,
        h2_conn=UnlimitedH2Connection(
            h2.config.H2Configuration(client_side=True, header_encoding=None)
        ),
    )
    config = TransportConfig(max_concurrent_streams=2)
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(functools.partial(serve_connection, server_t, echo, config=config))
            # Preface and five requests in one write, before reading the server's
            # SETTINGS: under the initial "unlimited" these were all legal.
            peer.h2.initiate_connection()
            for sid in (1, 3, 5, 7, 9):
                peer.h2.send_headers(sid, REQUEST, end_stream=True)
            await peer.flush()
            await peer.read_until(lambda: len(peer.events_of(h2.events.StreamEnded)) == 5)
            assert peer.events_of(h2.events.StreamReset) == []
            # Our h2 has now answered the server's SETTINGS; the ACK goes out ahead of
            # three streams left open (bodies unsent): the configured 2 now holds.
            for sid in (11, 13, 15):
                peer.h2.send_headers(sid, REQUEST)
            await peer.flush()
            await peer.read_until(lambda: peer.events_of(h2.events.StreamReset) != [])
            [reset] = peer.events_of(h2.events.StreamReset)
            assert (reset.stream_id, reset.error_code) == (15, ErrorCodes.REFUSED_STREAM)
            await peer.transport.aclose()


async def test_ipv6_authority_is_bracketed() -> None:
    """open_connection to an IPv6 literal puts it in brackets in :authority."""

    async def handler(stream: H2Stream) -> None:
        authority = dict(stream.headers or []).get(b":authority")
        await stream.send_headers(RESPONSE_200)
        await stream.send_data(authority or b"", end_stream=True)

    try:
        probe = trio.socket.socket(trio.socket.AF_INET6)
        await probe.bind(("::1", 0))
        probe.close()
    except OSError:
        pytest.fail("IPv6 loopback (::1) is not available on this machine")
    async with trio.open_nursery() as nursery:
        server: H2Server = await nursery.start(functools.partial(serve_tcp, handler, 0, host="::1"))
        with trio.fail_after(5):
            async with open_connection("::1", server.port) as conn:
                assert conn.authority == f"[::1]:{server.port}".encode()
                response = await conn.request("GET", "/")
                assert response.body == conn.authority
        nursery.cancel_scope.cancel()


async def test_reset_in_same_read_as_request_cancels_handler_quietly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A RST_STREAM arriving with its request cancels the handler; nothing is logged as an error."""
    ran: dict[int, str] = {}

    async def handler(stream: H2Stream) -> None:
        try:
            await stream.send_headers(RESPONSE_200)
            await stream.read_all()
            ran[stream.stream_id] = "finished"
        except BaseException as exc:
            ran[stream.stream_id] = type(exc).__name__
            raise

    with trio.fail_after(5):
        async with open_peer_client(handler) as (peer, _core):
            peer.h2.send_headers(1, REQUEST, end_stream=False)
            peer.h2.reset_stream(1, ErrorCodes.CANCEL)
            await peer.flush()  # both frames in one write, so in one read
            peer.h2.send_headers(3, REQUEST, end_stream=True)
            await peer.flush()
            await peer.read_until(lambda: bool(peer.events_of(h2.events.ResponseReceived)))
            await trio.testing.wait_all_tasks_blocked()
    assert ran == {1: "Cancelled", 3: "finished"}
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_content_length_checked_when_headers_end_the_request() -> None:
    """A request ending on HEADERS or trailers must match its content-length (§8.1.1)."""
    with trio.fail_after(5):
        async with open_peer_client(echo) as (peer, core):
            peer.h2.send_headers(1, [*REQUEST, (b"content-length", b"5")], end_stream=True)
            peer.h2.send_headers(3, [*REQUEST, (b"content-length", b"10")], end_stream=False)
            peer.h2.send_data(3, b"abcd")
            peer.h2.send_headers(3, [(b"x-trailer", b"1")], end_stream=True)
            await peer.flush()
            await peer.read_until(lambda: len(peer.events_of(h2.events.StreamReset)) == 2)
            resets = {ev.stream_id: ev.error_code for ev in peer.events_of(h2.events.StreamReset)}
            assert resets == {1: ErrorCodes.PROTOCOL_ERROR, 3: ErrorCodes.PROTOCOL_ERROR}
            assert core.open_streams == 0


async def test_malformed_request_is_a_stream_error_only() -> None:
    """Malformed headers reset only their stream (RFC 9113 §8.1.1); the connection serves on."""
    raw = h2.connection.H2Connection(
        h2.config.H2Configuration(
            client_side=True,
            header_encoding=None,
            validate_outbound_headers=False,
            normalize_outbound_headers=False,
        )
    )
    with trio.fail_after(5):
        async with open_peer_client(echo, h2_conn=raw) as (peer, core):
            # Uppercase field name and a connection-specific header: malformed.
            peer.h2.send_headers(1, [*REQUEST, (b"X-Upper", b"1")], end_stream=True)
            peer.h2.send_headers(3, [*REQUEST, (b"connection", b"close")], end_stream=True)
            peer.h2.send_headers(5, REQUEST, end_stream=True)
            await peer.flush()
            await peer.read_until(lambda: bool(peer.events_of(h2.events.StreamEnded)))
            await peer.read_until(lambda: len(peer.events_of(h2.events.StreamReset)) == 2)
            resets = {ev.stream_id: ev.error_code for ev in peer.events_of(h2.events.StreamReset)}
            assert resets == {1: ErrorCodes.PROTOCOL_ERROR, 3: ErrorCodes.PROTOCOL_ERROR}
            assert [ev.stream_id for ev in peer.events_of(h2.events.StreamEnded)] == [5]
            assert peer.frames_of(GoAwayFrame) == []
            assert core.error is None


async def test_handler_parked_in_send_is_cancelled_when_the_grace_runs_out() -> None:
    """A handler parked on write quota sees Cancelled, not the connection's error, at close."""
    outcome: list[str] = []
    parked = trio.Event()

    async def handler(stream: H2Stream) -> None:
        await stream.send_headers(RESPONSE_200)
        try:
            await stream.send_data(b"x" * 70_000)  # beyond the 65,535-byte window
            parked.set()
            await stream.send_data(b"y")  # parks: quota stays below zero
        except BaseException as exc:
            outcome.append(type(exc).__name__)
            raise

    config = TransportConfig(dynamic_window=False, write_quota=1, graceful_close_timeout=0)
    with trio.fail_after(5):
        async with open_peer_client(handler, server_config=config) as (peer, core):
            peer.h2.send_headers(1, REQUEST, end_stream=True)
            await peer.flush()
            await parked.wait()
            await trio.testing.wait_all_tasks_blocked()
            await core.graceful_close()
    assert outcome == ["Cancelled"]


async def test_h2_stream_table_stays_bounded_on_a_long_lived_connection() -> None:
    """Streams that complete normally are pruned from h2's table, not kept forever."""

    async def handler(stream: H2Stream) -> None:
        await stream.send_headers(RESPONSE_200, end_stream=True)

    with trio.fail_after(20):
        async with connected_pair(handler) as (conn, core):
            for _ in range(1000):
                await conn.request("GET", "/")
            assert len(core.h2.streams) < 150
            assert len(conn._core.h2.streams) < 150


class _GatedSend(trio.abc.SendStream):
    """A send stream whose ``send_all`` waits while ``shut`` (a writer held mid-write)."""

    def __init__(self, inner: trio.abc.SendStream) -> None:
        self.inner = inner
        self.shut = False
        self.opened = trio.Event()
        self.held = 0  # writes that waited at the gate

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        if self.shut:
            self.held += 1
            await self.opened.wait()
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_end_stream_queued_before_the_peer_reset_a_forgotten_stream_is_dropped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Regression: an empty END_STREAM DATA queued while loopy was mid-write, for a stream
    the peer then ended with trailers and RST_STREAM (forgotten by h2 meanwhile), is
    dropped quietly: the stream still reads the peer's response (no KeyError, ERROR log or
    INTERNAL_ERROR reset)."""
    caplog.set_level(logging.ERROR, logger="trio_h2t")
    client_send, peer_receive = trio.testing.memory_stream_one_way_pair()
    peer_send, client_receive = trio.testing.memory_stream_one_way_pair()
    gate = _GatedSend(client_send)
    ours = trio.StapledStream(gate, client_receive)
    theirs = trio.StapledStream(peer_send, peer_receive)
    trailers = [(b"grpc-status", b"3")]
    with trio.fail_after(5):
        async with open_peer_server(transports=(ours, theirs)) as (conn, peer):
            async with conn.open_stream(REQUEST) as stream:
                await peer.receive_until(lambda ev: isinstance(ev, h2.events.RequestReceived))
                # Loopy is held inside send_all (the DATA), the END_STREAM waits behind it.
                gate.shut = True
                await stream.send_data(b"x")
                await trio.testing.wait_all_tasks_blocked()
                assert gate.held == 1
                await stream.send_data(b"", end_stream=True)
                # The peer answers and resets (as grpc servers do when the request is
                # still open); our reader closes the stream, and h2 forgets it.
                peer.h2.send_headers(1, RESPONSE_200)
                peer.h2.send_headers(1, trailers, end_stream=True)
                peer.h2.reset_stream(1, ErrorCodes.NO_ERROR)
                await peer.flush()
                await trio.testing.wait_all_tasks_blocked()
                assert 1 not in conn._core.h2.streams  # forgotten, END_STREAM still queued
                gate.opened.set()
                await peer.read_until(lambda: bool(peer.frames_of(DataFrame)))
                await trio.testing.wait_all_tasks_blocked()
                # The response the peer sent is what the stream reads, not a reset.
                assert await stream.receive_headers() == RESPONSE_200
                assert await stream.read_all() == b""
                assert stream.trailers == trailers
            resets = [(f.stream_id, f.error_code) for f in peer.frames_of(RstStreamFrame)]
            assert resets == []
            assert conn.error is None
    assert [r.getMessage() for r in caplog.records if r.name == "trio_h2t"] == []
