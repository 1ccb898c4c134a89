"""The zero-copy DATA path: ``H2State.frame_data`` against h2's ``send_data``, and
loopy's vectored writes (``_loopy.send_vectored``).

``frame_data`` replaces h2's ``send_data`` on loopy's hot path: it must leave h2 in
exactly the state ``send_data`` leaves it in (windows, stream and connection states,
errors), and the bytes written (h2's buffer, then the payload) must be the frame
``send_data`` emits. The differential test drives a stock h2 client and ours through
the same random schedule of sends, peer WINDOW_UPDATEs, SETTINGS and resets.
"""

from __future__ import annotations

import socket
import ssl
from typing import Any

import h2.config
import h2.connection
import h2.exceptions
import pytest
import trio
from h2.settings import SettingCodes
from hyperframe.frame import Frame, RstStreamFrame, SettingsFrame, WindowUpdateFrame
from hypothesis import given, settings, strategies as st

import trio_h2t
import trio_h2t._loopy
from trio_h2t._h2state import H2State, make_h2_state
from trio_h2t._loopy import _IOV_MAX, send_vectored

REQUEST = [(b":method", b"POST"), (b":scheme", b"http"), (b":authority", b"x"), (b":path", b"/")]
STREAMS = (1, 3, 5)
#: The body bytes every send takes its payload from (a pattern, so a misplaced byte shows).
BODY = bytes(range(256)) * 1024


def _pair(speed_layer: bool, window: int, frame: int) -> tuple[h2.connection.H2Connection, H2State]:
    """A stock h2 client and ours, both past a peer's SETTINGS, with ``STREAMS`` open."""
    stock = h2.connection.H2Connection(
        h2.config.H2Configuration(client_side=True, header_encoding=None)
    )
    mine = make_h2_state(
        client_side=True,
        max_concurrent_streams=100,
        initial_window_size=65_535,
        max_header_list_size=65_536,
        speed_layer=speed_layer,
    )
    peer = SettingsFrame(0)
    peer.settings = {SettingCodes.INITIAL_WINDOW_SIZE: window, SettingCodes.MAX_FRAME_SIZE: frame}
    for conn in (stock, mine):
        conn.initiate_connection()
        conn.receive_data(peer.serialize())
        for sid in STREAMS:
            conn.send_headers(sid, REQUEST)
        conn.data_to_send()
    return stock, mine


def _state(conn: h2.connection.H2Connection) -> list[Any]:
    seen: list[Any] = [
        conn.state_machine.state,
        conn.outbound_flow_control_window,
        conn.max_outbound_frame_size,
    ]
    for sid in STREAMS:
        stream = conn.streams.get(sid)
        if stream is None:
            seen.append(None)
            continue
        seen += [stream.state_machine.state, stream.outbound_flow_control_window]
        try:
            seen.append(conn.local_flow_control_window(sid))
        except h2.exceptions.ProtocolError as exc:
            seen.append(type(exc))
    return seen


def _outcome(call: Any) -> type[BaseException] | None:
    try:
        call()
    except (h2.exceptions.ProtocolError, KeyError) as exc:
        return type(exc)
    return None


_OPS = st.lists(
    st.one_of(
        # send DATA: stream, size (past the windows and frame size at times), END_STREAM
        st.tuples(
            st.just("data"),
            st.sampled_from(STREAMS),
            st.integers(1, 40_000),
            st.booleans(),
        ),
        # the peer opens a window (0: the connection's)
        st.tuples(st.just("window"), st.sampled_from((0, *STREAMS)), st.integers(1, 100_000)),
        # the peer changes its initial window or its max frame size
        st.tuples(
            st.just("settings"),
            st.sampled_from((SettingCodes.INITIAL_WINDOW_SIZE, SettingCodes.MAX_FRAME_SIZE)),
            st.integers(16_384, 70_000),
        ),
        st.tuples(st.just("peer_reset"), st.sampled_from(STREAMS)),
        st.tuples(st.just("reset"), st.sampled_from(STREAMS)),
        st.tuples(st.just("end"), st.sampled_from(STREAMS)),
    ),
    max_size=40,
)


@pytest.mark.parametrize("speed_layer", [True, False])
@given(
    window=st.integers(0, 70_000),
    frame=st.sampled_from((16_384, 20_000, 65_535)),
    ops=_OPS,
)
@settings(max_examples=200, deadline=None)
def test_frame_data_keeps_h2_exactly_as_send_data_does(
    speed_layer: bool, window: int, frame: int, ops: list[tuple[Any, ...]]
) -> None:
    """Same errors, windows, stream and connection states, and bytes, op for op."""
    stock, mine = _pair(speed_layer, window, frame)
    offset = 0
    for op in ops:
        kind = op[0]
        if kind == "data":
            _, sid, size, end = op
            payload = memoryview(BODY)[offset : offset + size]
            offset = (offset + size) % (len(BODY) - 40_000)
            pieces: list[bytes | bytearray | memoryview] = []

            def zero_copy(sid: int = sid, size: int = size, end: bool = end) -> None:
                pieces.extend((mine.frame_data(sid, size, end), payload))  # noqa: B023

            theirs = _outcome(lambda: stock.send_data(sid, payload, end_stream=end))  # noqa: B023
            assert _outcome(zero_copy) is theirs
        elif kind in ("window", "settings", "peer_reset"):
            frame_: Frame
            if kind == "window":
                frame_ = WindowUpdateFrame(op[1])
                frame_.window_increment = op[2]
            elif kind == "settings":
                frame_ = SettingsFrame(0)
                frame_.settings = {op[1]: op[2]}
            else:
                frame_ = RstStreamFrame(op[1])
                frame_.error_code = 8
            raw = frame_.serialize()
            results: list[object] = []
            for conn in (stock, mine):
                try:
                    events = conn.receive_data(raw)
                    results.append([type(e).__name__ for e in events])
                except h2.exceptions.ProtocolError as exc:
                    results.append(type(exc))
            assert results[0] == results[1]
            pieces = []
        elif kind == "reset":
            assert _outcome(lambda: mine.reset_stream(op[1])) is _outcome(  # noqa: B023
                lambda: stock.reset_stream(op[1])  # noqa: B023
            )
            pieces = []
        else:  # an empty DATA with END_STREAM: h2's own path on both
            end_mine = _outcome(lambda: mine.send_data(op[1], b"", end_stream=True))  # noqa: B023
            assert end_mine is _outcome(lambda: stock.send_data(op[1], b"", end_stream=True))  # noqa: B023
            pieces = []
        pieces.append(mine.take_outbound())
        assert b"".join(pieces) == stock.data_to_send(), op
        assert _state(mine) == _state(stock), op


def test_take_outbound_hands_over_h2s_buffer_without_a_copy() -> None:
    """take_outbound returns h2's own buffer object and leaves h2 an empty one."""
    _, mine = _pair(True, 65_535, 16_384)
    mine.ping(b"12345678")
    buffer = mine._data_to_send
    assert mine.take_outbound() is buffer
    assert len(buffer) == 17
    assert mine.pending_bytes() == 0


def _socketpair() -> tuple[trio.socket.SocketType, socket.socket]:
    a, b = socket.socketpair()
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    b.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    b.setblocking(False)
    return trio.socket.from_stdlib_socket(a), b


async def _drain(b: socket.socket, into: bytearray, until: int) -> None:
    while len(into) < until:
        await trio.lowlevel.wait_readable(b)
        into += b.recv(65_536)


@pytest.mark.parametrize("count", [3, _IOV_MAX + 5, 2 * _IOV_MAX + 1])
async def test_send_vectored_writes_every_piece_in_order_across_partial_writes(
    count: int,
) -> None:
    """Pieces of mixed types and sizes (empty ones too) arrive joined, in order, even
    when the kernel takes them part by part and there are more than IOV_MAX."""
    sizes = [(i * 7919) % 9000 if i % 5 else 0 for i in range(count)]
    pieces: list[bytes | bytearray | memoryview] = []
    at = 0
    for i, n in enumerate(sizes):
        part = BODY[at % 100_000 : at % 100_000 + n]
        at += n
        pieces.append((bytes, bytearray, memoryview)[i % 3](part))
    expected = b"".join(bytes(p) for p in pieces)
    a, b = _socketpair()
    got = bytearray()
    with a, b:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_drain, b, got, len(expected))
            await send_vectored(a, pieces)
    assert bytes(got) == expected


@pytest.mark.parametrize("sent", [0, 1, 3, 4, 9])
async def test_send_vectored_goes_on_after_what_the_caller_wrote(sent: int) -> None:
    """``sent`` bytes already written by the caller's own sendmsg (loopy's flush
    tries one first): send_vectored writes the rest, from inside a piece too."""
    pieces: list[bytes | bytearray | memoryview] = [b"abc", bytearray(b""), b"defg", b"hi"]
    joined = b"abcdefghi"
    a, b = _socketpair()
    got = bytearray()
    with a, b:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_drain, b, got, len(joined) - sent)
            await send_vectored(a, pieces, sent)
    assert bytes(got) == joined[sent:]


async def test_send_vectored_errors_are_send_alls() -> None:
    """After send_eof: ClosedResourceError; a peer gone: BrokenResourceError."""
    a, b = _socketpair()
    with a:
        a.shutdown(socket.SHUT_WR)
        with pytest.raises(trio.ClosedResourceError):
            await send_vectored(a, [b"x", b"y"])
    b.close()
    a, b = _socketpair()
    b.close()
    with a, pytest.raises(trio.BrokenResourceError):  # noqa: PT012
        for _ in range(10):  # the first write may still be accepted
            await send_vectored(a, [b"x" * 1000, b"y"])
    a, b = _socketpair()
    b.close()
    a.close()
    with pytest.raises(trio.ClosedResourceError):
        await send_vectored(a, [b"x", b"y"])


async def _echo(stream: trio_h2t.H2Stream) -> None:
    await stream.send_headers([(":status", "200")])
    while chunk := await stream.receive_some():
        await stream.send_data(chunk)
    await stream.end()


@pytest.mark.parametrize("tls", [False, True])
async def test_bodies_cross_a_real_socket_whole_and_in_order(
    tls: bool, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    """Four concurrent 3 MiB bodies (bytes, bytearray, memoryviews) echoed over loopback
    TCP, vectored writes on the socket (joined pieces under TLS), arrive byte for byte."""
    server_ctx: ssl.SSLContext | None = None
    client_ctx: ssl.SSLContext | None = None
    if tls:  # conftest.py's TLS fixtures, made only for the TLS case
        server_ctx = request.getfixturevalue("server_ctx")
        client_ctx = request.getfixturevalue("client_ctx")
    big = BODY * 12  # 3 MiB
    bodies: list[bytes | bytearray | memoryview] = [
        big,
        bytearray(big[::-1]),
        memoryview(big)[1:-1],
        memoryview(bytearray(big)).cast("I"),  # a view of 4-byte items: sent as raw bytes
    ]
    expected = [bytes(memoryview(b).cast("B")) for b in bodies]
    got: list[bytes] = [b""] * len(bodies)
    vectored = 0

    async def counting(sock: Any, chunks: Any, sent: int = 0) -> None:
        nonlocal vectored
        vectored += 1
        await send_vectored(sock, chunks, sent)

    class CountingSocket:
        # Loopy's flush tries one sendmsg on the stdlib socket itself first.
        def __init__(self, raw: Any) -> None:
            self.raw = raw

        def sendmsg(self, chunks: Any) -> int:
            nonlocal vectored
            vectored += 1
            return int(self.raw.sendmsg(chunks))

    monkeypatch.setattr(trio_h2t._loopy, "send_vectored", counting)
    with trio.fail_after(60):
        async with (
            trio_h2t.open_server(_echo, 0, host="127.0.0.1", ssl_context=server_ctx) as server,
            trio_h2t.open_connection("127.0.0.1", server.port, ssl_context=client_ctx) as conn,
        ):
            loopy = conn._core.loopy
            assert (loopy._sock is None) is tls
            assert (loopy._raw is None) is tls
            if loopy._raw is not None:
                loopy._raw = CountingSocket(loopy._raw)  # type: ignore[assignment]

            async def one(i: int) -> None:
                response = await conn.request("POST", "/", body=bodies[i])
                got[i] = response.body

            async with trio.open_nursery() as nursery:
                for i in range(len(bodies)):
                    nursery.start_soon(one, i)
    assert got == expected
    assert (vectored == 0) is tls
