"""The inbound DATA path: frames parsed where they were read, payloads handed on as
views or single copies (``FixedFrameBuffer``, ``FastConnection._data_event``,
the reader's buffer reuse), and ``H2Stream.receive_into``.

The differential tests feed one random byte stream of frames (DATA padded or not,
with and without END_STREAM, on open, reset, idle and zero streams, RST_STREAM,
WINDOW_UPDATE, PING, window grants) to stock h2 and to ours, both layers, ours both
as ``receive_data`` chunks and as reads straight into the buffer of random sizes:
the events, errors, windows, stream states and bytes to send must be the same, and
every payload view still held must read as sent.
"""

from __future__ import annotations

import gc
import itertools
import random
from typing import Any

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import pytest
import trio
from hpack import Encoder
from hyperframe.frame import (
    DataFrame,
    HeadersFrame,
    PingFrame,
    RstStreamFrame,
    SettingsFrame,
    WindowUpdateFrame,
)
from hypothesis import given, settings, strategies as st

import trio_h2t
from trio_h2t import _reader, _runtime
from trio_h2t._h2state import H2State, make_h2_state
from trio_h2t._reader import _buffer_reader

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
STREAMS = (1, 3, 5)
REQUEST = [(b":method", b"POST"), (b":scheme", b"http"), (b":authority", b"x"), (b":path", b"/")]

_op = st.one_of(
    st.tuples(
        st.just("data"),
        st.sampled_from((*STREAMS, 7, 0)),
        st.integers(0, 3000),
        st.none() | st.integers(0, 255),
        st.booleans(),
    ),
    st.tuples(st.just("rst"), st.sampled_from(STREAMS)),
    st.tuples(st.just("badpad"), st.sampled_from(STREAMS)),
    st.tuples(st.just("update"), st.sampled_from((0, *STREAMS)), st.integers(1, 5000)),
    st.tuples(st.just("ping")),
    st.tuples(st.just("grant"), st.sampled_from((None, *STREAMS)), st.integers(1, 70_000)),
)


def _wire(ops: list[Any]) -> tuple[bytes, list[Any]]:
    """The client's bytes for ``ops`` (no DATA after a stream's END_STREAM: our
    connection error there is a deliberate difference from h2), and the receiver
    calls (window grants) in order, each after the bytes before it."""
    encoder = Encoder()
    out = bytearray(PREFACE + SettingsFrame(0).serialize())
    for sid in STREAMS:
        out += HeadersFrame(sid, encoder.encode(REQUEST), flags=["END_HEADERS"]).serialize()
    steps: list[Any] = [("bytes", bytes(out))]
    ended: set[int] = set()
    payload = random.Random(0).randbytes(3000)
    for op in ops:
        frame: Any
        if op[0] == "data":
            _, sid, size, pad, end = op
            if sid in ended:
                continue
            if sid == 0:  # hyperframe will not build one: the raw header
                steps.append(("bytes", b"\x00\x00\x01\x00\x00\x00\x00\x00\x00x"))
                continue
            frame = DataFrame(sid, payload[:size])
            if pad is not None:
                frame.flags.add("PADDED")
                frame.pad_length = pad
            if end:
                frame.flags.add("END_STREAM")
                ended.add(sid)
        elif op[0] == "badpad":  # Pad Length 5 in a 1-byte payload: PROTOCOL_ERROR
            steps.append(("bytes", b"\x00\x00\x01\x00\x08\x00\x00\x00" + bytes([op[1], 5])))
            continue
        elif op[0] == "rst":
            frame = RstStreamFrame(op[1])
            ended.add(op[1])
        elif op[0] == "update":
            frame = WindowUpdateFrame(op[1])
            frame.window_increment = op[2]
        elif op[0] == "ping":
            frame = PingFrame(0)
            frame.opaque_data = b"12345678"
        else:
            steps.append(op)
            continue
        steps.append(("bytes", bytes(frame.serialize())))
    return b"".join(s[1] for s in steps if s[0] == "bytes"), steps


def _stock() -> h2.connection.H2Connection:
    conn = h2.connection.H2Connection(
        h2.config.H2Configuration(client_side=False, header_encoding=None)
    )
    conn.initiate_connection()
    return conn


def _ours(speed_layer: bool) -> H2State:
    state = make_h2_state(
        client_side=False,
        max_concurrent_streams=100,
        initial_window_size=65_535,
        max_header_list_size=65_536,
        speed_layer=speed_layer,
    )
    state.initiate_connection()
    return state


def _event(ev: Any) -> Any:
    if isinstance(ev, h2.events.DataReceived):
        return (
            "data",
            ev.stream_id,
            bytes(ev.data),
            ev.flow_controlled_length,
            ev.stream_ended is not None,
        )
    if isinstance(ev, h2.events.RequestReceived | h2.events.StreamEnded):
        return (type(ev).__name__, ev.stream_id)
    if isinstance(ev, h2.events.StreamReset):
        return ("reset", ev.stream_id, ev.error_code, ev.remote_reset)
    if isinstance(ev, h2.events.WindowUpdated):
        return ("window", ev.stream_id, ev.delta)
    return type(ev).__name__  # settings and pings: their kind is enough here


def _state(conn: Any) -> Any:
    streams = []
    for sid in STREAMS:
        stream = conn.streams.get(sid)
        if stream is not None:
            streams.append(
                (
                    sid,
                    stream.state_machine.state,
                    stream._inbound_window_manager.current_window_size,
                    stream._actual_content_length,
                )
            )
    window = conn._inbound_flow_control_window_manager.current_window_size
    return conn.state_machine.state, window, streams, bytes(conn.data_to_send())


class _Feeder:
    """Feeds one of the connections, recording what it says after each step."""

    def __init__(self, conn: Any, *, in_place: bool = False, seed: int = 0) -> None:
        self.conn = conn
        self.in_place = in_place
        self.rng = random.Random(seed)
        self.log: list[Any] = []
        self.failed = False
        # Views of the frame buffer handed out and not yet "read": (view, its bytes).
        self.held: list[list[Any]] = []
        if in_place:
            buffer = conn.incoming_buffer
            buffer.views = True
            buffer.on_reuse = self._reuse
            buffer.on_release = self._reuse

    def _reuse(self, buf: bytearray) -> None:
        # What the reader's streams do: views of ``buf`` still held become copies,
        # after checking they still read as they did.
        for entry in self.held:
            view, expected = entry
            if isinstance(view, memoryview) and view.obj is buf:
                assert bytes(view) == expected, "a held view was overwritten"
                entry[0] = view.tobytes()

    def _take(self, events: list[Any], into: list[Any]) -> None:
        for ev in events:
            if isinstance(ev, h2.events.DataReceived) and isinstance(ev.data, memoryview):
                self.held.append([ev.data, bytes(ev.data)])
        into += [_event(ev) for ev in events]

    def feed(self, data: bytes) -> None:
        if self.failed:
            return
        events: list[Any] = []
        self.log.append(events)  # what this piece gave, over every read it took
        try:
            if not self.in_place:
                self._take(self.conn.receive_data(data), events)
            else:
                buffer = self.conn.incoming_buffer
                pos = 0
                while pos < len(data):
                    target = buffer.read_target()
                    n = min(len(target), len(data) - pos, self.rng.randint(1, 40_000))
                    target[:n] = data[pos : pos + n]
                    self.conn.commit_read(n)
                    pos += n
                    self._take(self.conn.receive_data(b""), events)
                    if self.rng.random() < 0.3:  # the application read what it got
                        self.held.clear()
                    if self.rng.random() < 0.05:
                        buffer.release()
        except h2.exceptions.ProtocolError as exc:
            self.failed = True
            self.log.append(("error", type(exc).__name__))
            return
        self.log.append(_state(self.conn))

    def call(self, step: Any) -> None:
        if self.failed:
            return
        _, sid, n = step
        try:
            self.conn.increment_flow_control_window(n, stream_id=sid)
        except Exception as exc:
            self.log.append(("call", type(exc).__name__))
        self.log.append(_state(self.conn))

    def check_held(self) -> None:
        for view, expected in self.held:
            assert bytes(view) == expected


def _chunks(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points)]


def _run(feeders: list[_Feeder], steps: list[Any], cuts: list[int]) -> None:
    for step in steps:
        if step[0] == "bytes":
            for piece in _chunks(step[1], cuts):
                for f in feeders:
                    f.feed(piece)
        else:
            for f in feeders:
                f.call(step)


@given(ops=st.lists(_op, max_size=40), cuts=st.lists(st.integers(0, 10**6), max_size=6))
@settings(max_examples=150)
def test_in_place_parsing_keeps_h2_exactly(ops: list[Any], cuts: list[int]) -> None:
    """Stock h2 and ours (both layers; receive_data and reads into the buffer) give
    the same events, errors, windows, stream states and bytes on random frames."""
    _, steps = _wire(ops)
    feeders = [
        _Feeder(_stock()),
        _Feeder(_ours(False)),
        _Feeder(_ours(True)),
        _Feeder(_ours(False), in_place=True, seed=len(ops)),
        _Feeder(_ours(True), in_place=True, seed=len(cuts)),
    ]
    for f in feeders:
        f.conn.data_to_send()
    _run(feeders, steps, cuts)
    reference = feeders[0].log
    for f in feeders[1:]:
        assert f.log == reference
        f.check_held()


@given(
    sizes=st.lists(st.integers(1, 70_000), min_size=1, max_size=30),
    seed=st.integers(0, 2**16),
)
@settings(max_examples=40)
def test_reads_into_the_buffer_keep_every_view_until_reuse(sizes: list[int], seed: int) -> None:
    """DATA frames of random sizes (up to 70 KB: the buffer grows for them), read in
    random pieces: each payload reaches the stream as a view that reads as sent
    until the buffer calls on_reuse for it, which a wrap does first."""
    _, steps = _wire([])
    state = _ours(True)
    state.max_inbound_frame_size = 2**20
    state.incoming_buffer.max_frame_size = 2**20
    state.data_to_send()
    feeder = _Feeder(state, in_place=True, seed=seed)
    _run([feeder], steps, [])
    state.increment_flow_control_window(2**30)
    for sid in STREAMS:
        state.increment_flow_control_window(2**30, stream_id=sid)
    body = random.Random(seed).randbytes(70_000)
    wire = b"".join(
        DataFrame(STREAMS[i % 3], body[:size]).serialize() for i, size in enumerate(sizes)
    )
    feeder.feed(wire)
    assert not feeder.failed
    got = [e for step in feeder.log if isinstance(step, list) for e in step if e[0] == "data"]
    assert [len(e[2]) for e in got] == sizes
    assert all(e[2] == body[: len(e[2])] for e in got)
    feeder.check_held()


def _open_in_place() -> H2State:
    """Ours, reading in place, past the preface with streams 1, 3, 5 open and
    windows no test here exhausts."""
    state = _ours(True)
    state.data_to_send()
    _, steps = _wire([])
    _run([_Feeder(state, in_place=True)], steps, [])
    state.increment_flow_control_window(2**30)
    state.increment_flow_control_window(2**30, stream_id=1)
    return state


def _read_in_place(state: H2State, wire: bytes) -> int:
    """Read ``wire`` into the frame buffer as a socket with all of it waiting would
    (each read fills its ``read_target``), parsing after each; returns the reads."""
    buffer = state.incoming_buffer
    pos = reads = 0
    while pos < len(wire):
        target = buffer.read_target()
        n = min(len(target), len(wire) - pos)
        target[:n] = wire[pos : pos + n]
        state.commit_read(n)
        pos += n
        reads += 1
        state.receive_data(b"")
    return reads


def test_a_wrap_moves_only_a_frame_header_once_frames_are_known() -> None:
    """Frames of one size read whole buffers at a time: after the first frame, no
    read ends inside a payload at the buffer's end, so no payload byte is moved."""
    state = _open_in_place()
    buffer = state.incoming_buffer
    moved: list[int] = []

    def reuse(buf: bytearray) -> None:
        moved.append(buffer.pending())

    buffer.on_reuse = reuse
    frame = DataFrame(1, b"x" * 16_000).serialize()
    _read_in_place(state, frame * 40)
    assert moved
    assert max(moved) <= 9


def test_small_frames_are_read_a_buffer_at_a_time() -> None:
    """Small frames with plenty waiting on the socket are read in reads as large as
    the buffer allows: near the buffer's end a read used to stop at each next
    frame's header until a frame no longer fit (one read per frame for the last
    16 KiB of every buffer; with 1000 unary calls in flight, most reads on both
    sides were of one 40-byte frame)."""
    state = _open_in_place()
    buffer = state.incoming_buffer
    frame = DataFrame(1, b"x" * 31).serialize()  # 40 bytes
    wire = frame * 20_000  # 800,000 bytes: twelve 64 KiB buffers
    reads = _read_in_place(state, wire)
    # At most two reads per buffer's worth (a 64 KiB buffer less room for a 16 KiB
    # frame: one read to that mark, one to the frame it cuts); 4,933 before.
    assert reads <= 2 * (len(wire) // (buffer.read_size - 16_393) + 1)


# ------------------------------------------------------------ receive_into


async def _serve_chunks(stream: trio_h2t.H2Stream) -> None:
    headers = dict(stream.headers or ())
    sizes = [int(s) for s in headers[b"x-sizes"].split(b",")]
    body = random.Random(len(sizes)).randbytes(sum(sizes))
    await stream.send_headers([(b":status", b"200")])
    pos = 0
    for size in sizes:
        await stream.send_data(memoryview(body)[pos : pos + size])
        pos += size
    await stream.end()


async def _read(stream: trio_h2t.H2Stream, how: str, reads: list[int], lag: int) -> bytes:
    parts: list[bytes] = []
    i = 0
    while True:
        size = reads[i % len(reads)]
        i += 1
        for _ in range(lag if i % 3 == 0 else 0):  # fall behind the reader now and then
            await trio.lowlevel.checkpoint()
        if how == "some":
            chunk = await stream.receive_some(size)
        else:
            buf = bytearray(size)
            n = await stream.receive_into(memoryview(buf) if i % 2 else buf)
            chunk = bytes(buf[:n])
        if not chunk:
            return b"".join(parts)
        parts.append(chunk)


@given(
    sizes=st.lists(st.integers(1, 200_000), min_size=1, max_size=8),
    reads=st.lists(st.integers(1, 100_000), min_size=1, max_size=5),
    lag=st.integers(0, 20),
)
@settings(max_examples=15)
def test_receive_into_and_receive_some_deliver_what_was_sent(
    sizes: list[int], reads: list[int], lag: int
) -> None:
    """Bodies sent in random chunks over loopback TCP (64 KiB windows) arrive whole
    and in order through receive_into (buffers of random sizes) and receive_some
    (random max_bytes), the application falling behind now and then."""
    expected = random.Random(len(sizes)).randbytes(sum(sizes))
    config = trio_h2t.TransportConfig(initial_window_size=65_535, max_window_size=65_535)

    async def main() -> None:
        with trio.fail_after(60):
            async with (
                trio_h2t.open_server(_serve_chunks, 0, host="127.0.0.1", config=config) as server,
                trio_h2t.open_connection("127.0.0.1", server.port, config=config) as conn,
            ):
                for how in ("into", "some"):
                    headers = [
                        *conn.request_headers("GET", "/"),
                        (b"x-sizes", ",".join(map(str, sizes)).encode()),
                    ]
                    async with conn.open_stream(headers, end_stream=True) as stream:
                        await stream.receive_headers()
                        assert await _read(stream, how, reads, lag) == expected
                        assert stream._in_flow.pending_data == 0

    trio.run(main)


async def test_receive_into_returns_window_as_receive_some_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same reads (max_bytes / buffer sizes) of the same buffered chunks send the
    same WINDOW_UPDATE increments, whichever method reads."""
    sizes = [30_000, 12_345, 17_000, 1, 5_000]
    reads = [7_000, 20_000, 100, 40_000, 3]
    sent: dict[str, list[int]] = {"some": [], "into": []}
    release = trio.Event()

    async def handler(stream: trio_h2t.H2Stream) -> None:
        body = bytes(sum(sizes))
        await stream.send_headers([(b":status", b"200")])
        pos = 0
        for size in sizes:
            await stream.send_data(body[pos : pos + size])
            pos += size
        await release.wait()
        await stream.end()

    # 64 KiB windows (no growth): an update is due every 16 KiB read.
    config = trio_h2t.TransportConfig(initial_window_size=65_535, max_window_size=65_535)
    with trio.fail_after(30):
        async with (
            trio_h2t.open_server(handler, 0, host="127.0.0.1", config=config) as server,
            trio_h2t.open_connection("127.0.0.1", server.port, config=config) as conn,
        ):
            core = conn._core
            for how in ("some", "into"):
                release = trio.Event()
                original = core.send_window_update

                def record(stream: Any, inc: int, how: str = how, original: Any = original) -> None:
                    sent[how].append(inc)
                    original(stream, inc)

                monkeypatch.setattr(core, "send_window_update", record)
                async with conn.open_stream(
                    conn.request_headers("GET", "/"), end_stream=True
                ) as stream:
                    await stream.receive_headers()
                    while stream._in_flow.pending_data < sum(sizes):  # noqa: ASYNC110
                        await trio.sleep(0.01)  # (no event says "all buffered")
                    got = 0
                    for size in reads * 10:
                        if got == sum(sizes):
                            break
                        if how == "some":
                            got += len(await stream.receive_some(size))
                        else:
                            got += await stream.receive_into(bytearray(size))
                    release.set()
                    assert await stream.receive_some() == b""
                monkeypatch.setattr(core, "send_window_update", original)
    assert sent["into"] == sent["some"]
    assert sent["some"]  # the reads crossed the update threshold


async def test_receive_into_refuses_what_it_cannot_fill() -> None:
    """A read-only, empty or non-buffer argument raises before anything is consumed."""

    async def handler(stream: trio_h2t.H2Stream) -> None:
        await stream.send_headers([(b":status", b"200")])
        await stream.send_data(b"abc", end_stream=True)

    async with (
        trio_h2t.open_server(handler, 0, host="127.0.0.1") as server,
        trio_h2t.open_connection("127.0.0.1", server.port) as conn,
        conn.open_stream(conn.request_headers("GET", "/"), end_stream=True) as stream,
    ):
        await stream.receive_headers()
        with pytest.raises(TypeError):
            await stream.receive_into(b"xyz")  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            await stream.receive_into("xyz")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="empty"):
            await stream.receive_into(bytearray())
        buf = bytearray(8)
        assert await stream.receive_into(memoryview(buf)[2:]) == 3
        assert buf == b"\0\0abc\0\0\0"
        assert await stream.receive_into(buf) == 0


@pytest.mark.parametrize("speed_layer", [False, True])
async def test_read_on_a_socket_closed_before_it_is_closed_resource(speed_layer: bool) -> None:
    """The reader's read on a socket this side already closed (fd -1) raises
    trio.ClosedResourceError, as trio's receive_some would: trio's wait_readable
    raised ValueError there, which the reader logged as a connection fault (seen
    at the end of a gRPC channel's block, tests/grpc_layer/test_mistakes.py)."""
    left, right = trio.socket.socketpair()
    with right:
        stream = trio.SocketStream(left)
        read = _buffer_reader(stream, _ours(speed_layer))
        left.close()
        with pytest.raises(trio.ClosedResourceError):
            await read()


async def test_finished_streams_are_not_kept_for_their_views(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The reader's record of streams handed views of the frame buffer forgets the
    ones that have read them: hundreds of small responses fit in one buffer, and a
    finished stream held until the buffer is reused lived long enough to be
    promoted by the garbage collector (``Reader._prune_holders``)."""
    readers: list[_reader.Reader] = []

    class Recorded(_reader.Reader):
        def __init__(self, core: Any, *args: Any, **kwargs: Any) -> None:
            super().__init__(core, *args, **kwargs)
            if core.client_side:  # the client's reader (the server's runs the same code)
                readers.append(self)

    monkeypatch.setattr(_runtime, "Reader", Recorded)

    async def handler(stream: trio_h2t.H2Stream) -> None:
        await stream.receive_headers()
        await stream.send_headers([(b":status", b"200")])
        await stream.send_data(b"x" * 100, end_stream=True)

    calls, callers = 2000, 10
    most = 0
    gc.disable()
    try:
        with trio.fail_after(30):
            async with (
                trio_h2t.open_server(handler, 0, host="127.0.0.1") as server,
                trio_h2t.open_connection("127.0.0.1", server.port) as conn,
            ):
                (reader,) = readers

                async def caller() -> None:
                    nonlocal most
                    for _ in range(calls // callers):
                        async with conn.open_stream(
                            conn.request_headers("GET", "/"), end_stream=True
                        ) as stream:
                            await stream.receive_headers()
                            assert await stream.receive_some() == b"x" * 100
                            assert await stream.receive_some() == b""
                        most = max(most, len(reader._holders))

                async with trio.open_nursery() as nursery:
                    for _ in range(callers):
                        nursery.start_soon(caller)
                kept = sum(type(o) is trio_h2t.H2Stream for o in gc.get_objects())
    finally:
        gc.enable()
    # With 10 callers at most 10 holders still queue views, so the record is
    # pruned before it passes _MIN_PRUNE. Without pruning it held hundreds of
    # finished streams here (up to a buffer's worth of responses, in each buffer).
    assert most <= _reader._MIN_PRUNE
    assert kept <= _reader._MIN_PRUNE + callers
