"""Unit tests for ``trio_h2t._h2state`` (both layers): h2 with GOAWAY and streams owned by us.

Sans-IO: an :class:`H2State` talks to a plain ``h2`` peer by handing bytes across, as
h2's own ``test_interacting_stacks`` does without the threads.
"""

from __future__ import annotations

import time
import tracemalloc
from typing import Any

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.settings
import h2.stream
import hpack
import pytest
from h2.connection import ConnectionState
from h2.errors import ErrorCodes
from h2.frame_buffer import FrameBuffer
from h2.settings import SettingCodes
from helpers import UnlimitedH2Connection
from hyperframe.frame import (
    DataFrame,
    Frame,
    GoAwayFrame,
    HeadersFrame,
    PingFrame,
    RstStreamFrame,
    SettingsFrame,
)
from hypothesis import given, settings, strategies as st

from trio_h2t._h2fast import FastStream, _ClosedStreams
from trio_h2t._h2state import GoAwayReceived, H2State, goaway_frame, make_h2_state

REQUEST = [(b":method", b"GET"), (b":scheme", b"http"), (b":authority", b"x"), (b":path", b"/")]


def plain(client_side: bool) -> h2.connection.H2Connection:
    return h2.connection.H2Connection(
        h2.config.H2Configuration(client_side=client_side, header_encoding=None)
    )


def ours(client_side: bool, max_concurrent_streams: int = 100) -> H2State:
    return make_h2_state(
        client_side=client_side,
        max_concurrent_streams=max_concurrent_streams,
        initial_window_size=65_535,
        max_header_list_size=65_536,
    )


def handshake(client: h2.connection.H2Connection, server: h2.connection.H2Connection) -> None:
    """Exchange prefaces and SETTINGS (and their ACKs) until both sides are quiet."""
    client.initiate_connection()
    server.initiate_connection()
    for _ in range(3):
        server.receive_data(client.data_to_send())
        client.receive_data(server.data_to_send())


def _serving_two_requests() -> tuple[h2.connection.H2Connection, H2State]:
    """A plain h2 client and our server, after the client opened streams 1 and 3."""
    client, server = plain(client_side=True), ours(client_side=False)
    handshake(client, server)
    client.send_headers(1, REQUEST)
    client.send_headers(3, REQUEST)
    server.receive_data(client.data_to_send())
    return client, server


def _open_and_reset(state: H2State, stream_ids: range) -> None:
    """Open each stream, reset it and let it be forgotten, as loopy and the core do."""
    for i, sid in enumerate(stream_ids):
        state.send_headers(sid, REQUEST, end_stream=True)
        state.reset_stream(sid, ErrorCodes.CANCEL)
        state.prune_closed_streams(sid)
        if i % 1000 == 0:
            state.data_to_send()  # as loopy would
    state.data_to_send()


def frames(data: bytes) -> list[Frame]:
    """Parse a run of frames (no preface)."""
    buf = FrameBuffer(server=False)
    buf.max_frame_size = 2**24 - 1
    buf.add_data(data)
    return list(buf)


def test_goaway_received_leaves_h2_open() -> None:
    """After a GOAWAY, h2 stays OPEN: stream 1 completes and new HEADERS can still go out."""
    client, server = ours(client_side=True), plain(client_side=False)
    handshake(client, server)
    client.send_headers(1, REQUEST, end_stream=True)
    server.receive_data(client.data_to_send())

    events = client.receive_data(goaway_frame(1, ErrorCodes.NO_ERROR, b"bye"))
    [ev] = events
    assert isinstance(ev, GoAwayReceived)
    assert (ev.last_stream_id, ev.error_code, ev.debug_data) == (1, ErrorCodes.NO_ERROR, b"bye")
    assert client.state_machine.state == ConnectionState.CLIENT_OPEN
    assert client.data_to_send() == b""  # h2 did not answer with GOAWAY of its own

    # The server keeps answering stream 1 (a plain h2 client would now fail: h2 #1181).
    server.send_headers(1, [(b":status", b"200")])
    server.send_data(1, b"still here", end_stream=True)
    events = client.receive_data(server.data_to_send())
    kinds = [type(e) for e in events]
    assert h2.events.ResponseReceived in kinds
    assert h2.events.StreamEnded in kinds
    data = [e for e in events if isinstance(e, h2.events.DataReceived)]
    assert data[0].data == b"still here"
    # And h2 still accepts outbound HEADERS (trio_h2t itself refuses new streams).
    client.send_headers(3, REQUEST, end_stream=True)
    assert client.data_to_send()


def test_plain_h2_closes_on_goaway() -> None:
    """The contrast: a plain h2 connection is CLOSED by a received GOAWAY (h2 #1181)."""
    client, server = plain(client_side=True), plain(client_side=False)
    handshake(client, server)
    client.receive_data(goaway_frame(0, ErrorCodes.NO_ERROR))
    assert client.state_machine.state == ConnectionState.CLOSED
    with pytest.raises(h2.exceptions.ProtocolError):
        client.send_headers(1, REQUEST)


@pytest.mark.parametrize(
    ("last", "code", "debug"),
    [
        (0, ErrorCodes.NO_ERROR, b""),
        (2**31 - 1, ErrorCodes.ENHANCE_YOUR_CALM, b"calm down"),
        (7, 0xABC, b"x"),
    ],
)
def test_goaway_frame_round_trips_through_hyperframe(last: int, code: int, debug: bytes) -> None:
    """goaway_frame serialises a GOAWAY that hyperframe parses back field for field."""
    data = goaway_frame(last, code, debug)
    frame, length = Frame.parse_frame_header(memoryview(data[:9]))
    assert isinstance(frame, GoAwayFrame)
    assert length == len(data) - 9
    frame.parse_body(memoryview(data[9:]))
    assert (frame.stream_id, frame.last_stream_id, frame.error_code) == (0, last, code)
    assert frame.additional_data == debug


def test_open_stream_counts_are_constant_zero() -> None:
    """open_*_streams are 0 and never scan the streams (h2 #1184)."""
    state = ours(client_side=True)
    scans = 0
    original = state._open_streams

    def counting(remainder: int) -> int:
        nonlocal scans
        scans += 1
        return original(remainder)

    state._open_streams = counting  # type: ignore[method-assign]
    state.initiate_connection()
    for sid in range(1, 200, 2):
        state.send_headers(sid, REQUEST)
    assert (state.open_outbound_streams, state.open_inbound_streams) == (0, 0)
    assert scans == 0
    assert len(state.streams) == 100


def _three_streams_to(server: h2.connection.H2Connection) -> bytes:
    """Handshake a limit-ignoring client with ``server``; return its HEADERS for 1, 3, 5."""
    client = UnlimitedH2Connection(
        h2.config.H2Configuration(client_side=True, header_encoding=None)
    )
    handshake(client, server)
    for sid in (1, 3, 5):
        client.send_headers(sid, REQUEST, end_stream=True)
    return client.data_to_send()


def test_server_admits_streams_beyond_its_limit_where_h2_would_fail() -> None:
    """H2State lets trio_h2t refuse excess streams itself; plain h2 kills the connection."""
    state = ours(client_side=False, max_concurrent_streams=2)
    events = state.receive_data(_three_streams_to(state))
    received = [e.stream_id for e in events if isinstance(e, h2.events.RequestReceived)]
    assert received == [1, 3, 5]

    server = plain(client_side=False)
    server.local_settings = h2.settings.Settings(
        client=False, initial_values={SettingCodes.MAX_CONCURRENT_STREAMS: 2}
    )
    with pytest.raises(h2.exceptions.TooManyStreamsError):
        server.receive_data(_three_streams_to(server))  # hypercorn #335


def test_prune_keeps_the_stream_table_bounded_over_10k_streams() -> None:
    """After 10 000 streams open and close, h2's stream table stays small, in O(1) each."""
    state = ours(client_side=True)
    state.initiate_connection()
    largest = 0
    start = time.perf_counter()
    for i in range(10_000):
        sid = 2 * i + 1
        state.send_headers(sid, REQUEST, end_stream=True)
        state.reset_stream(sid, ErrorCodes.CANCEL)
        state.prune_closed_streams()
        largest = max(largest, len(state.streams))
        if i % 1000 == 0:
            state.data_to_send()  # as loopy would
    elapsed = time.perf_counter() - start
    assert largest <= 64
    assert len(state.streams) < 64
    assert elapsed < 10  # generous; a quadratic scan over 10k streams takes far longer


def test_prune_forgets_a_stream_closed_on_both_sides_at_once() -> None:
    """The stream the transport just closed leaves h2's table now if h2 closed it
    too, and h2 still knows how it closed (late frames get h2's answer)."""
    state = ours(client_side=True)
    state.initiate_connection()
    state.send_headers(1, REQUEST, end_stream=True)
    state.send_headers(3, REQUEST, end_stream=True)
    state.prune_closed_streams(1)  # still open in h2 (half closed): kept
    assert 1 in state.streams
    state.reset_stream(1, ErrorCodes.CANCEL)
    state.prune_closed_streams(1)
    assert 1 not in state.streams
    assert 3 in state.streams
    assert state._stream_is_closed_by_reset(1)


@given(
    steps=st.lists(
        st.tuples(
            st.integers(1, 70_000),  # id gap to the next stream (odd ids stay odd)
            st.sampled_from([None, *h2.stream.StreamClosedBy]),
        ),
        max_size=40,
    )
)
def test_closed_stream_record_answers_as_a_dict_for_recent_streams(
    steps: list[tuple[int, Any]],
) -> None:
    """The compact record of closed streams answers like h2's dict for every stream
    among the last 65,536 of its parity, and never for an id it was not given."""
    record, plain = _ClosedStreams(), {}
    sid = 1
    for gap, closed_by in steps:
        sid += 2 * gap
        record[sid] = closed_by
        plain[sid] = closed_by
    for probe in [*plain, *(i + 2 for i in plain), 3]:
        if probe in plain and sid - probe < 2 * 65_536:
            known = plain[probe] is not None
            assert (probe in record) == known
            if known:
                assert record[probe] == plain[probe]
        elif probe not in plain:
            assert probe not in record


def test_closed_stream_record_is_bounded_and_small() -> None:
    """70,000 streams opened and reset: h2's dict would hold 65,536 entries (7.9 MB
    measured); ours stops growing at one 1 MiB array, and late frames still get
    h2's answer. A connection with few streams keeps a small array."""
    state = ours(client_side=True)
    state.initiate_connection()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        _open_and_reset(state, range(1, 2 * 70_000, 2))
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 3 << 19  # the 1 MiB array, nothing per stream
    assert state._stream_is_closed_by_reset(2 * 69_999 + 1)
    assert state._stream_is_closed_by_reset(2 * 10_000 + 1)  # within the last 65,536
    assert not state._stream_is_closed_by_reset(1)  # forgotten, as h2 would have
    small = ours(client_side=True)
    small.initiate_connection()
    _open_and_reset(small, range(1, 200, 2))
    assert len(small._closed_streams._slots) == 256  # type: ignore[attr-defined]
    assert all(small._stream_is_closed_by_reset(sid) for sid in range(1, 200, 2))


def test_frames_on_a_stream_we_reset_are_ignored_not_answered() -> None:
    """RFC 9113 §5.1: after sending RST_STREAM, frames the peer had in flight on the
    stream are ignored (h2 would answer each with another RST_STREAM); a frame that
    itself breaks the rules, or one after the *peer's* RST_STREAM, is still answered."""
    client, server = _serving_two_requests()
    server.reset_stream(1, ErrorCodes.CANCEL)
    ours_rst = frames(server.data_to_send())
    assert [(type(f).__name__, f.stream_id) for f in ours_rst] == [("RstStreamFrame", 1)]
    # The client has not seen our RST yet: DATA, trailers and a WINDOW_UPDATE follow.
    client.send_data(1, b"x" * 1000)
    client.increment_flow_control_window(100, stream_id=1)
    client.send_headers(1, [(b"x-trailer", b"t")], end_stream=True)
    events = server.receive_data(client.data_to_send())
    assert [e for e in events if getattr(e, "stream_id", None) == 1] == []
    answered = frames(server.data_to_send())
    assert [f for f in answered if isinstance(f, RstStreamFrame)] == []
    # A late frame still counts against the connection window (h2 credits it back).
    assert server._inbound_flow_control_window_manager.current_window_size > 0
    # The other stream is untouched, and a peer's reset still gets h2's answer.
    client.reset_stream(3, ErrorCodes.CANCEL)
    server.receive_data(client.data_to_send())
    late = DataFrame(3, b"late")
    server.receive_data(late.serialize())
    answer = [f for f in frames(server.data_to_send()) if isinstance(f, RstStreamFrame)]
    assert [(f.stream_id, f.error_code) for f in answer] == [(3, ErrorCodes.STREAM_CLOSED)]


@pytest.mark.parametrize("forgotten", [False, True], ids=["known", "forgotten"])
def test_headers_after_the_peers_reset_are_answered_with_stream_closed(forgotten: bool) -> None:
    """RFC 9113 §5.1 (closed): a HEADERS on a stream the peer reset is answered with
    RST_STREAM STREAM_CLOSED (h2's answer) whether the stream is still known
    (StreamClosedError) or already forgotten (StreamIDTooLowError); the frame is the
    codec's, byte for byte hyperframe's."""
    client, server = _serving_two_requests()
    client.reset_stream(3, ErrorCodes.CANCEL)
    server.receive_data(client.data_to_send())
    if forgotten:
        server.prune_closed_streams(3)
    assert (3 in server.streams) is not forgotten
    server.data_to_send()
    late = HeadersFrame(3, hpack.Encoder().encode([(b"x-trailer", b"t")]))
    late.flags.add("END_HEADERS")
    late.flags.add("END_STREAM")
    assert server.receive_data(late.serialize()) == []
    expected = RstStreamFrame(3)
    expected.error_code = ErrorCodes.STREAM_CLOSED
    assert server.data_to_send() == expected.serialize()


def test_headers_on_a_forgotten_stream_say_closed() -> None:
    """Regression (found by the whole-connection stateful suite): a response queued
    for a stream the peer reset, and that was already forgotten, raised
    StreamIDTooLowError from send_headers, which loopy does not expect, and the
    connection died. It is StreamClosedError, as for h2's other calls."""
    client, server = _serving_two_requests()
    client.reset_stream(1, ErrorCodes.CANCEL)
    server.receive_data(client.data_to_send())
    server.prune_closed_streams(1)
    assert 1 not in server.streams
    with pytest.raises(h2.exceptions.StreamClosedError):
        server.send_headers(1, [(b":status", b"200")])
    with pytest.raises(h2.exceptions.StreamClosedError):
        server.send_data(1, b"late")
    server.send_headers(3, [(b":status", b"200")], end_stream=True)  # the others go on


def test_empty_end_stream_data_on_a_forgotten_stream_says_closed() -> None:
    """Regression: an END_STREAM alone (empty DATA) for a stream the peer reset and that
    was forgotten raised KeyError from h2 (>= 4.4 skips its stream lookup for an empty
    frame); it is StreamClosedError, as for a non-empty one."""
    client, server = _serving_two_requests()
    client.reset_stream(1, ErrorCodes.CANCEL)
    server.receive_data(client.data_to_send())
    server.prune_closed_streams(1)
    assert 1 not in server.streams
    with pytest.raises(h2.exceptions.StreamClosedError):
        server.send_data(1, b"", end_stream=True)
    server.send_headers(3, [(b":status", b"200")])
    server.send_data(3, b"", end_stream=True)  # the others go on


def test_prune_keeps_open_streams() -> None:
    """Pruning forgets only closed streams."""
    state = ours(client_side=True)
    state.initiate_connection()
    for sid in range(1, 2 * 100, 2):
        state.send_headers(sid, REQUEST)  # left open
        state.prune_closed_streams()
    assert len(state.streams) == 100
    assert all(s.open for s in state.streams.values())


def test_events_before_a_protocol_error_are_kept() -> None:
    """Events of frames processed before a bad frame survive in events_before_error."""
    client, server = ours(client_side=True), plain(client_side=False)
    handshake(client, server)
    ping = PingFrame(0, opaque_data=b"12345678").serialize()
    # DATA on stream 0 is a connection error (hyperframe will not build it: raw bytes).
    bad = b"\x00\x00\x01" + b"\x00" + b"\x00" + b"\x00\x00\x00\x00" + b"x"
    with pytest.raises(h2.exceptions.ProtocolError):
        client.receive_data(ping + bad)
    assert [type(e) for e in client.events_before_error] == [h2.events.PingReceived]
    # h2 queued its GOAWAY; it is ours to flush.
    assert any(isinstance(f, GoAwayFrame) for f in frames(client.data_to_send()))


def test_first_settings_carry_our_values_and_pending_bytes_tracks_the_buffer() -> None:
    """make_h2_state's first SETTINGS carry the configured values; pending_bytes is exact."""
    state = make_h2_state(
        client_side=True,
        max_concurrent_streams=7,
        initial_window_size=100_000,
        max_header_list_size=4096,
    )
    state.initiate_connection()
    pending = state.pending_bytes()
    data = state.data_to_send()
    assert pending == len(data) > 0
    assert state.pending_bytes() == 0
    preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
    assert data.startswith(preface)
    [settings] = [f for f in frames(data[len(preface) :]) if isinstance(f, SettingsFrame)]
    assert settings.settings[SettingCodes.MAX_CONCURRENT_STREAMS] == 7
    assert settings.settings[SettingCodes.INITIAL_WINDOW_SIZE] == 100_000
    assert settings.settings[SettingCodes.MAX_HEADER_LIST_SIZE] == 4096
    assert settings.settings[SettingCodes.ENABLE_PUSH] == 0


# -- the framed-directly header path matches h2's ------------------------------------


def _sent_by(state: h2.connection.H2Connection, *calls: tuple[int, list[Any], bool]) -> bytes:
    for stream_id, headers, end_stream in calls:
        state.send_headers(stream_id, headers, end_stream=end_stream)
    return state.data_to_send()


@pytest.mark.parametrize("value_size", [0, 100, 16_384, 40_000])
@pytest.mark.parametrize("end_stream", [False, True])
def test_send_headers_writes_the_bytes_h2_writes(value_size: int, end_stream: bool) -> None:
    """HEADERS (+ CONTINUATION past the peer's max frame size) byte for byte as h2."""
    big = [*REQUEST, (b"x-big", b"v" * value_size)]
    ours_client, ours_server = ours(client_side=True), plain(client_side=False)
    handshake(ours_client, ours_server)
    stock_client, stock_server = plain(client_side=True), plain(client_side=False)
    handshake(stock_client, stock_server)
    calls = [(1, big, end_stream), (3, REQUEST, True)]
    if not end_stream:
        calls.append((1, [(b"x-trailer", b"t")], True))
    mine, theirs = _sent_by(ours_client, *calls), _sent_by(stock_client, *calls)
    assert [(type(f), f.stream_id, sorted(f.flags), f.body_len) for f in frames(mine)] == [
        (type(f), f.stream_id, sorted(f.flags), f.body_len) for f in frames(theirs)
    ]
    assert mine == theirs
    events = ours_server.receive_data(mine)
    received = [e for e in events if isinstance(e, h2.events.RequestReceived)]
    assert received[0].headers == big


def test_send_headers_keeps_h2s_stream_rules() -> None:
    """Trailers need END_STREAM; informational responses cannot end the stream;
    HEADERS after END_STREAM are refused; each as h2 does."""
    client, server = _serving_two_requests()
    with pytest.raises(h2.exceptions.ProtocolError):
        server.send_headers(1, [(b":status", b"100")], end_stream=True)
    server.send_headers(1, [(b":status", b"100")])
    server.send_headers(1, [(b":status", b"200")])
    with pytest.raises(h2.exceptions.ProtocolError):
        server.send_headers(1, [(b"x-trailer", b"t")])
    server.send_headers(3, [(b":status", b"200")], end_stream=True)
    with pytest.raises(h2.exceptions.ProtocolError):
        server.send_headers(3, [(b":status", b"200")])
    kinds = [type(e) for e in client.receive_data(server.data_to_send())]
    assert kinds.count(h2.events.InformationalResponseReceived) == 1
    assert kinds.count(h2.events.ResponseReceived) == 2


# ------------------------------------------------ the merged stream object (FastStream)

_STREAM_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("send_headers"), st.booleans(), st.booleans()),
        st.tuples(st.just("send_data"), st.integers(0, 70_000), st.booleans()),
        st.tuples(st.just("end_stream")),
        st.tuples(st.just("increase_flow_control_window"), st.integers(-1, 2**31)),
        st.tuples(st.just("receive_headers"), st.booleans(), st.booleans()),
        st.tuples(st.just("receive_data"), st.integers(0, 70_000), st.booleans()),
        st.tuples(st.just("receive_window_update"), st.integers(0, 2**31)),
        st.tuples(st.just("reset_stream"), st.sampled_from([0, 8])),
        st.tuples(st.just("stream_reset"), st.sampled_from([0, 8])),
        st.tuples(st.just("acknowledge_received_data"), st.integers(0, 70_000)),
    ),
    max_size=12,
)


def _apply(stream: Any, encoder: Any, op: tuple[Any, ...], client_side: bool) -> object:
    """One operation on an h2 stream object; a comparable picture of its outcome."""
    name, *args = op
    try:
        if name == "send_headers":
            request, end = args
            headers = REQUEST if request else [(b":status", b"200")]
            result: Any = stream.send_headers(headers, encoder, end_stream=end)
        elif name == "receive_headers":
            request, end = args
            headers = REQUEST if request else [(b":status", b"200")]
            result = stream.receive_headers(headers, end, None)
        elif name == "send_data":
            size, end = args
            result = stream.send_data(b"x" * size, end_stream=end)
        elif name == "receive_data":
            size, end = args
            result = stream.receive_data(b"x" * size, end, size)
        elif name == "stream_reset":
            result = stream.stream_reset(RstStreamFrame(stream.stream_id, error_code=args[0]))
        else:
            result = getattr(stream, name)(*args)
    except Exception as exc:  # the same exception, with the same message
        result = (type(exc), str(exc))

    def picture(x: Any) -> Any:
        if isinstance(x, Frame):
            return x.serialize()
        if isinstance(x, h2.events.Event):
            return (type(x), {k: picture(v) for k, v in sorted(vars(x).items())})
        if isinstance(x, list | tuple):
            return [picture(y) for y in x]
        return x

    return (
        picture(result),
        stream.state_machine.state,
        stream.open,
        stream.closed,
        stream.closed_by,
        stream.inbound_flow_control_window,
        stream.outbound_flow_control_window,
        stream._inbound_window_manager.max_window_size,
    )


class _ThreeObjects(FastStream):
    """``FastStream`` built as h2 builds its streams: a separate state machine and
    window manager (instance attributes again, shadowing the merge's properties)."""

    state_machine = None  # type: ignore[assignment]
    _inbound_window_manager = None  # type: ignore[assignment]

    def __init__(self, *args: Any) -> None:
        h2.stream.H2Stream.__init__(self, *args)


@given(client_side=st.booleans(), ops=_STREAM_OPS)
@settings(max_examples=300, deadline=None)
def test_merged_stream_object_behaves_as_h2s_three(
    client_side: bool, ops: list[tuple[Any, ...]]
) -> None:
    """Our ``FastStream`` is h2's stream, state machine and window manager in one
    object; on any sequence of stream operations it gives the frames, events,
    errors, states and windows of the same class built as h2 builds it (three
    objects)."""
    config = h2.config.H2Configuration(client_side=client_side, header_encoding=None)
    stream_id = 1 if client_side else 2
    stock = _ThreeObjects(stream_id, config, 65_535, 65_535)
    mine = FastStream(stream_id, config, 65_535, 65_535)
    assert mine.state_machine is mine
    assert mine._inbound_window_manager is mine
    assert stock.state_machine is not stock
    assert stock._inbound_window_manager is not stock
    stock_encoder, my_encoder = hpack.Encoder(), hpack.Encoder()
    for op in ops:
        assert _apply(mine, my_encoder, op, client_side) == _apply(
            stock, stock_encoder, op, client_side
        )


def test_max_frame_size_is_advertised_and_enforced_from_the_start() -> None:
    """make_h2_state's max_frame_size goes out in the first SETTINGS and is our inbound
    limit at once (h2 read its limit when built, before the initial values were set)."""
    size = 60_000  # over the RFC's 16 KiB, within the connection's 64 KiB window
    server = make_h2_state(
        client_side=False,
        max_concurrent_streams=100,
        initial_window_size=1 << 20,
        max_header_list_size=65_536,
        max_frame_size=size,
    )
    assert server.max_inbound_frame_size == size
    client = plain(client_side=True)
    handshake(client, server)
    assert client.max_outbound_frame_size == size
    client.send_headers(1, REQUEST)
    client.send_data(1, bytes(size), end_stream=True)
    events = server.receive_data(client.data_to_send())
    assert sum(len(ev.data) for ev in events if isinstance(ev, h2.events.DataReceived)) == size
    oversize = DataFrame(3, bytes(size + 1)).serialize()
    client.send_headers(3, REQUEST)
    with pytest.raises(h2.exceptions.FrameTooLargeError):
        server.receive_data(client.data_to_send() + oversize)
