"""RFC 9113 and RFC 7541 from the client's side: the MUSTs a client has to meet,
against a fake server (``fake_server.py``) that misbehaves before its SETTINGS,
during the client's handshake wait, and mid-stream.

Each case asserts the exact frames the client sends, up to EOF, and what it raises.
A connection error is GOAWAY with its code and last-stream-id 0 (a client never
accepts a pushed stream), then the close; a stream error is RST_STREAM on that
stream with its code, after which the request fails and the client closes with
GOAWAY(NO_ERROR).
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from pathlib import Path
from typing import NoReturn

import pytest
import trio
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

import trio_h2t

from .fake_server import OPENING, FakeServer, Outcome, get_root, run_case
from .harness import UNKNOWN_TYPE, ErrorCode, FrameType, Setting, frame_bytes

ACK = SettingsFrame(0, flags=["ACK"]).serialize()
SETTINGS = SettingsFrame(0).serialize()


def _goaway(code: ErrorCode) -> str:
    return f"GOAWAY({code.name},last=0)"


def _settings(*pairs: tuple[int, int]) -> bytes:
    return frame_bytes(
        FrameType.SETTINGS, 0, 0, b"".join(struct.pack(">HL", k, v) for k, v in pairs)
    )


def _window_update(stream_id: int, increment: int) -> bytes:
    return frame_bytes(FrameType.WINDOW_UPDATE, 0, stream_id, struct.pack(">L", increment))


#: Connection errors a server can commit in any phase: (id, frame bytes, code, RFC).
CONNECTION_ERRORS: list[tuple[str, bytes, ErrorCode]] = [
    ("window-overflow", _window_update(0, 2**31 - 1), ErrorCode.FLOW_CONTROL_ERROR),  # §6.9.1
    ("window-update-zero", _window_update(0, 0), ErrorCode.PROTOCOL_ERROR),  # §6.9
    (
        "window-update-length-3",
        frame_bytes(FrameType.WINDOW_UPDATE, 0, 0, b"\0\0\1"),
        ErrorCode.FRAME_SIZE_ERROR,
    ),  # §6.9
    (
        "ping-length-7",
        frame_bytes(FrameType.PING, 0, 0, b"x" * 7),
        ErrorCode.FRAME_SIZE_ERROR,
    ),  # §6.7
    (
        "ping-on-stream-1",
        frame_bytes(FrameType.PING, 0, 1, b"x" * 8),
        ErrorCode.PROTOCOL_ERROR,
    ),  # §6.7
    (
        "settings-length-5",
        frame_bytes(FrameType.SETTINGS, 0, 0, b"\0" * 5),
        ErrorCode.FRAME_SIZE_ERROR,
    ),  # §6.5
    (
        "settings-on-stream-1",
        frame_bytes(FrameType.SETTINGS, 0, 1),
        ErrorCode.PROTOCOL_ERROR,
    ),  # §6.5
    (
        "settings-ack-with-payload",
        frame_bytes(FrameType.SETTINGS, 0x1, 0, b"\0" * 6),
        ErrorCode.FRAME_SIZE_ERROR,
    ),  # §6.5
    (
        "initial-window-2**31",
        _settings((Setting.INITIAL_WINDOW_SIZE, 2**31)),
        ErrorCode.FLOW_CONTROL_ERROR,
    ),  # §6.5.2
    (
        "max-frame-size-16383",
        _settings((Setting.MAX_FRAME_SIZE, 16_383)),
        ErrorCode.PROTOCOL_ERROR,
    ),  # §6.5.2
    (
        "max-frame-size-2**24",
        _settings((Setting.MAX_FRAME_SIZE, 2**24)),
        ErrorCode.PROTOCOL_ERROR,
    ),  # §6.5.2
    ("enable-push-2", _settings((Setting.ENABLE_PUSH, 2)), ErrorCode.PROTOCOL_ERROR),  # §6.5.2
    (
        "goaway-on-stream-1",
        frame_bytes(FrameType.GOAWAY, 0, 1, b"\0" * 8),
        ErrorCode.PROTOCOL_ERROR,
    ),  # §6.8
    (
        "rst-stream-on-stream-0",
        frame_bytes(FrameType.RST_STREAM, 0, 0, b"\0\0\0\x08"),
        ErrorCode.PROTOCOL_ERROR,
    ),  # §6.4
    ("data-on-stream-0", frame_bytes(FrameType.DATA, 0, 0, b"x"), ErrorCode.PROTOCOL_ERROR),  # §6.1
    (
        "headers-on-stream-0",
        frame_bytes(FrameType.HEADERS, 0x4, 0, b"\x88"),
        ErrorCode.PROTOCOL_ERROR,
    ),  # §6.2
    (
        "push-promise-push-disabled",
        frame_bytes(FrameType.PUSH_PROMISE, 0x4, 1, b"\0\0\0\x02\x88"),
        ErrorCode.PROTOCOL_ERROR,
    ),  # §8.4
    (
        "frame-over-max-frame-size",
        # One byte over the SETTINGS_MAX_FRAME_SIZE the client advertises.
        frame_bytes(FrameType.DATA, 0, 1, bytes(trio_h2t.TransportConfig().max_frame_size + 1))[:9],
        ErrorCode.FRAME_SIZE_ERROR,
    ),  # §4.2
    (
        "continuation-without-headers",
        frame_bytes(FrameType.CONTINUATION, 0x4, 1, b"\x88"),
        ErrorCode.PROTOCOL_ERROR,
    ),  # §6.10
    (
        "headers-on-even-stream",
        frame_bytes(FrameType.HEADERS, 0x5, 2, b"\x88"),
        ErrorCode.PROTOCOL_ERROR,
    ),  # §5.1.1
    (
        "data-on-idle-stream-3",
        frame_bytes(FrameType.DATA, 0x1, 3, b"x"),
        ErrorCode.PROTOCOL_ERROR,
    ),  # §5.1
    (
        "rst-stream-length-3",
        frame_bytes(FrameType.RST_STREAM, 0, 1, b"\0\0\x08"),
        ErrorCode.FRAME_SIZE_ERROR,
    ),  # §6.4
]
_IDS = [case[0] for case in CONNECTION_ERRORS]


def _assert_handshake_error(outcome: Outcome, code: ErrorCode) -> None:
    """open_connection raised ConnectionLostError naming the protocol error (not "did
    not complete the handshake"), caused by a RemoteProtocolError with ``code``."""
    assert isinstance(outcome.error, trio_h2t.ConnectionLostError), outcome.error
    assert "did not complete" not in str(outcome.error)
    assert f"GOAWAY {code.name} sent" in str(outcome.error)
    assert outcome.protocol_error().error_code == code


################################################################
# Before the server's SETTINGS (RFC 9113 §3.4: its preface is a SETTINGS frame)
################################################################


@pytest.mark.parametrize(
    "first",
    [
        PingFrame(0, b"12345678").serialize(),
        WindowUpdateFrame(0, window_increment=1).serialize(),
        ACK,
        HeadersFrame(1, b"\x88", flags=["END_HEADERS"]).serialize(),
        frame_bytes(UNKNOWN_TYPE, 0, 0, b"\0" * 8),
        frame_bytes(FrameType.GOAWAY, 0, 0, b"\0" * 8),
        b"HTTP/1.1 400 Bad Request\r\n\r\n",
    ],
    ids=["ping", "window-update", "settings-ack", "headers", "unknown-type", "goaway", "http1"],
)
async def test_preface_not_starting_with_settings(first: bytes) -> None:
    """RFC 9113 §3.4: a server preface that does not begin with a SETTINGS frame is a
    connection error PROTOCOL_ERROR: GOAWAY(PROTOCOL_ERROR), then close."""

    async def script(peer: FakeServer) -> None:
        await peer.send(first, SETTINGS)

    outcome = await run_case(script)
    assert outcome.wire == [*OPENING, _goaway(ErrorCode.PROTOCOL_ERROR), "EOF"]
    _assert_handshake_error(outcome, ErrorCode.PROTOCOL_ERROR)


@pytest.mark.parametrize(
    ("first", "code"),
    [
        (frame_bytes(FrameType.SETTINGS, 0, 0, b"\0" * 5), ErrorCode.FRAME_SIZE_ERROR),
        (_settings((Setting.INITIAL_WINDOW_SIZE, 2**31)), ErrorCode.FLOW_CONTROL_ERROR),
        (_settings((Setting.MAX_FRAME_SIZE, 2**24)), ErrorCode.PROTOCOL_ERROR),
        (_settings((Setting.ENABLE_PUSH, 1)), ErrorCode.PROTOCOL_ERROR),
    ],
    ids=["length-5", "initial-window-2**31", "max-frame-size-2**24", "enable-push-1"],
)
async def test_invalid_first_settings(first: bytes, code: ErrorCode) -> None:
    """RFC 9113 §6.5, §6.5.2: a malformed or out-of-range first SETTINGS (including
    ENABLE_PUSH 1 from a server) is a connection error with its code, never acked."""

    async def script(peer: FakeServer) -> None:
        await peer.send(first)

    outcome = await run_case(script)
    assert outcome.wire == [*OPENING, _goaway(code), "EOF"]
    _assert_handshake_error(outcome, code)


async def test_silent_server_times_out_with_goaway(autojump_clock: trio.abc.Clock) -> None:
    """A server that never sends SETTINGS: after handshake_timeout the client says
    GOAWAY(NO_ERROR) and closes; the error says the handshake did not complete."""
    config = trio_h2t.TransportConfig(handshake_timeout=3)

    async def client(port: int) -> object:
        async with trio_h2t.open_connection("127.0.0.1", port, config=config):
            raise AssertionError("unreachable")  # pragma: no cover

    async def script(peer: FakeServer) -> None:
        pass

    outcome = await run_case(script, client)
    assert outcome.wire == [*OPENING, _goaway(ErrorCode.NO_ERROR), "EOF"]
    assert isinstance(outcome.error, trio_h2t.ConnectionLostError)
    assert "did not complete the HTTP/2 handshake within 3 s" in str(outcome.error)


################################################################
# During the client's handshake wait: SETTINGS and the violation in one write
################################################################


@pytest.mark.parametrize(("name", "bad", "code"), CONNECTION_ERRORS, ids=_IDS)
async def test_violation_with_settings(name: str, bad: bytes, code: ErrorCode) -> None:
    """The server's SETTINGS followed at once by a connection error: the client acks
    the SETTINGS, sends GOAWAY with the error's code, and closes; open_connection
    raises an error naming the protocol error."""

    async def script(peer: FakeServer) -> None:
        await peer.send(SETTINGS, ACK, bad)

    outcome = await run_case(script)
    assert outcome.wire == [*OPENING, "SETTINGS(ACK)", _goaway(code), "EOF"]
    _assert_handshake_error(outcome, code)


################################################################
# Mid-stream: after the client's HEADERS for stream 1
################################################################


async def _handshake(peer: FakeServer) -> None:
    await peer.send(SETTINGS, ACK)
    await peer.wait_for("SETTINGS(ACK)")
    await peer.wait_for("HEADERS(1,END_STREAM)")


def _assert_connection_error_midstream(
    outcome: Outcome, code: ErrorCode, before: tuple[str, ...] = ()
) -> None:
    assert outcome.wire == [
        *OPENING,
        "SETTINGS(ACK)",
        "HEADERS(1,END_STREAM)",
        *before,
        _goaway(code),
        "EOF",
    ]
    assert isinstance(outcome.error, trio.BrokenResourceError), outcome.error
    assert outcome.protocol_error().error_code == code


@pytest.mark.parametrize(("name", "bad", "code"), CONNECTION_ERRORS, ids=_IDS)
async def test_violation_mid_stream(name: str, bad: bytes, code: ErrorCode) -> None:
    """A connection error while stream 1 waits for its response: GOAWAY with the
    code, then close; the request fails with the protocol error in its causes."""

    async def script(peer: FakeServer) -> None:
        await _handshake(peer)
        await peer.send(bad)

    _assert_connection_error_midstream(await run_case(script), code)


MID_STREAM_CONNECTION_ERRORS: list[tuple[str, bytes, ErrorCode]] = [
    # §4.3: a header block that cannot be decoded ends the connection.
    (
        "hpack-invalid-index",
        frame_bytes(FrameType.HEADERS, 0x5, 1, b"\xff\xff\x7f"),
        ErrorCode.COMPRESSION_ERROR,
    ),
    # §6.10: a header block must be followed by its CONTINUATION frames only.
    (
        "headers-then-ping",
        frame_bytes(FrameType.HEADERS, 0x1, 1, b"\x88") + PingFrame(0, b"x" * 8).serialize(),
        ErrorCode.PROTOCOL_ERROR,
    ),
    (
        "continuation-other-stream",
        frame_bytes(FrameType.HEADERS, 0x1, 1, b"\x88")
        + frame_bytes(FrameType.CONTINUATION, 0x4, 3, b""),
        ErrorCode.PROTOCOL_ERROR,
    ),
    # §6.1: padding as long as the payload (or longer).
    (
        "data-padding-too-long",
        frame_bytes(FrameType.DATA, 0x8, 1, b"\x05abc"),
        ErrorCode.PROTOCOL_ERROR,
    ),
    (
        "headers-padding-too-long",
        frame_bytes(FrameType.HEADERS, 0xC, 1, b"\x05\x88"),
        ErrorCode.PROTOCOL_ERROR,
    ),
    # §6.9: the server may not send more than the client's stream window.
    (
        "data-over-stream-window",
        frame_bytes(FrameType.HEADERS, 0x4, 1, b"\x88")
        + b"".join(DataFrame(1, b"x" * 16_384).serialize() for _ in range(5)),
        ErrorCode.FLOW_CONTROL_ERROR,
    ),
    # §6.8 / §5.1: DATA after the response ended (stream half-closed remote).
    (
        "data-after-end-stream",
        frame_bytes(FrameType.HEADERS, 0x4, 1, b"\x88")
        + frame_bytes(FrameType.DATA, 0x1, 1, b"")
        + frame_bytes(FrameType.DATA, 0x1, 1, b"x"),
        ErrorCode.STREAM_CLOSED,
    ),
]


@pytest.mark.parametrize(
    ("name", "bad", "code"),
    MID_STREAM_CONNECTION_ERRORS,
    ids=[c[0] for c in MID_STREAM_CONNECTION_ERRORS],
)
async def test_stream_phase_connection_error(name: str, bad: bytes, code: ErrorCode) -> None:
    """Connection errors that need an open stream (HPACK, CONTINUATION, padding,
    flow control): GOAWAY with the code, then close."""

    async def script(peer: FakeServer) -> None:
        await _handshake(peer)
        await peer.send(bad)

    async def get_root_small_window(port: int) -> NoReturn:
        # The RFC's 64 KiB stream window, so 80 KiB of DATA overruns it (the default
        # window is larger than what one send fits in). The body is never read: a
        # stream's window is credited as its data is read, and a client that read
        # as the bytes came (``conn.request``) could credit enough before the last
        # frames that they fit, and then wait for the rest of a body never sent.
        config = trio_h2t.TransportConfig(initial_window_size=65_535)
        async with trio_h2t.open_connection("127.0.0.1", port, config=config) as conn:
            headers = conn.request_headers("GET", "/")
            async with conn.open_stream(headers, end_stream=True) as stream:
                await stream.receive_headers()
                await conn.wait_not_accepting()  # the connection error ends it
                assert conn.error is not None
                raise conn.error

    small = name == "data-over-stream-window"
    outcome = await run_case(script, get_root_small_window if small else get_root)
    if name == "data-after-end-stream":
        # The response completed in the same read, before the violation: the
        # request succeeds, and the late DATA still costs the connection.
        assert outcome.error is None
        assert outcome.wire[-2:] == [_goaway(code), "EOF"]
        assert outcome.wire[:-2] == [*OPENING, "SETTINGS(ACK)", "HEADERS(1,END_STREAM)"]
        return
    if name == "data-over-stream-window":
        # The overflow spans more than one read (over 64 KiB): the client credits
        # what it accepted (WINDOW_UPDATE, a BDP PING) before the overflowing frame;
        # how many depends on how the bytes were split, nothing else may appear.
        head = [*OPENING, "SETTINGS(ACK)", "HEADERS(1,END_STREAM)"]
        assert outcome.wire[: len(head)] == head
        assert outcome.wire[-2:] == [_goaway(code), "EOF"]
        middle = outcome.wire[len(head) : -2]
        assert set(middle) <= {"WINDOW_UPDATE(0)", "WINDOW_UPDATE(1)", "PING"}, middle
        assert outcome.protocol_error().error_code == code
        return
    _assert_connection_error_midstream(outcome, code)


################################################################
# Stream errors: malformed responses (RFC 9113 §8.1.1, §8.2, §8.3)
################################################################

MALFORMED_RESPONSES: list[tuple[str, list[tuple[str, str]]]] = [
    ("no-status", [("content-type", "text/plain")]),
    ("two-status", [(":status", "200"), (":status", "204")]),
    ("pseudo-after-regular", [("server", "x"), (":status", "200")]),
    ("request-pseudo-in-response", [(":status", "200"), (":path", "/")]),
    ("unknown-pseudo", [(":status", "200"), (":foo", "bar")]),
    ("uppercase-name", [(":status", "200"), ("Server", "x")]),
    ("connection-header", [(":status", "200"), ("connection", "close")]),
    ("transfer-encoding", [(":status", "200"), ("transfer-encoding", "chunked")]),
    ("te-not-trailers", [(":status", "200"), ("te", "gzip")]),
    ("newline-in-value", [(":status", "200"), ("x-a", "b\nc")]),
    ("content-length-not-digits", [(":status", "200"), ("content-length", "ten")]),
    ("content-length-over-body", [(":status", "200"), ("content-length", "5")]),
]


@pytest.mark.parametrize(
    ("name", "headers"), MALFORMED_RESPONSES, ids=[c[0] for c in MALFORMED_RESPONSES]
)
async def test_malformed_response_is_a_stream_error(
    name: str, headers: list[tuple[str, str]]
) -> None:
    """RFC 9113 §8.1.1: a malformed response is a stream error PROTOCOL_ERROR:
    RST_STREAM(1, PROTOCOL_ERROR) and no GOAWAY for it; the request raises
    StreamResetError and the client then closes with GOAWAY(NO_ERROR)."""

    async def script(peer: FakeServer) -> None:
        await _handshake(peer)
        await peer.send(peer.response(1, headers))

    outcome = await run_case(script)
    assert outcome.wire == [
        *OPENING,
        "SETTINGS(ACK)",
        "HEADERS(1,END_STREAM)",
        "RST_STREAM(1,PROTOCOL_ERROR)",
        "GOAWAY(NO_ERROR,last=0)",
        "EOF",
    ]
    assert isinstance(outcome.error, trio_h2t.StreamResetError), outcome.error
    assert outcome.error.error_code == ErrorCode.PROTOCOL_ERROR


async def test_pseudo_header_in_trailers_is_a_stream_error() -> None:
    """RFC 9113 §8.1: trailers must not carry pseudo-headers: RST_STREAM(1,
    PROTOCOL_ERROR)."""

    async def script(peer: FakeServer) -> None:
        await _handshake(peer)
        await peer.send(peer.response(1, end_stream=False), peer.response(1, [(":status", "200")]))

    outcome = await run_case(script)
    assert "RST_STREAM(1,PROTOCOL_ERROR)" in outcome.wire
    assert not any(t.startswith("GOAWAY(PROTOCOL") for t in outcome.wire)
    assert isinstance(outcome.error, trio_h2t.StreamResetError)


################################################################
# What a client must do for a well-behaved but demanding server
################################################################


async def test_ping_is_acked_with_its_data() -> None:
    """RFC 9113 §6.7: a PING is answered with PING(ACK) carrying the same 8 bytes;
    the request then completes and the client closes with GOAWAY(NO_ERROR)."""
    acks: list[bytes] = []

    async def script(peer: FakeServer) -> None:
        await _handshake(peer)
        await peer.send(PingFrame(0, b"h2t-ping"))
        ack = await peer.wait_for("PING(ACK)")
        assert isinstance(ack, PingFrame)
        acks.append(ack.opaque_data)
        await peer.send(peer.response(1))

    outcome = await run_case(script)
    assert acks == [b"h2t-ping"]
    assert outcome.error is None
    assert outcome.wire == [
        *OPENING,
        "SETTINGS(ACK)",
        "HEADERS(1,END_STREAM)",
        "PING(ACK)",
        "GOAWAY(NO_ERROR,last=0)",
        "EOF",
    ]


async def test_unknown_frames_and_settings_are_ignored() -> None:
    """RFC 9113 §5.5, §6.5.2: an unknown frame type, an unknown setting and a
    PRIORITY frame are ignored; the response is read and nothing extra is sent."""

    async def script(peer: FakeServer) -> None:
        await peer.send(_settings((0xFF, 7)), ACK)
        await peer.wait_for("SETTINGS(ACK)")
        await peer.wait_for("HEADERS(1,END_STREAM)")
        await peer.send(
            frame_bytes(UNKNOWN_TYPE, 0, 0, b"\0" * 8),
            frame_bytes(UNKNOWN_TYPE, 0xFF, 1, b"abc"),
            frame_bytes(FrameType.PRIORITY, 0, 1, b"\0\0\0\0\x10"),
            peer.response(1),
        )

    outcome = await run_case(script)
    assert outcome.error is None
    assert outcome.wire == [
        *OPENING,
        "SETTINGS(ACK)",
        "HEADERS(1,END_STREAM)",
        "GOAWAY(NO_ERROR,last=0)",
        "EOF",
    ]


async def test_settings_acked_each_time() -> None:
    """RFC 9113 §6.5.3: every SETTINGS (not only the first) is acknowledged, in order."""

    async def script(peer: FakeServer) -> None:
        await _handshake(peer)
        await peer.send(_settings((Setting.MAX_CONCURRENT_STREAMS, 10)))
        await peer.wait_for("SETTINGS(ACK)")
        await peer.send(peer.response(1))

    outcome = await run_case(script)
    assert outcome.error is None
    assert outcome.wire.count("SETTINGS(ACK)") == 2


async def test_continuation_frames_are_joined() -> None:
    """RFC 9113 §6.10: a response header block split over HEADERS and CONTINUATION
    frames is one block; the response is read normally."""

    async def script(peer: FakeServer) -> None:
        await _handshake(peer)
        block = peer.block([(":status", "200"), ("x-long", "v" * 50)])
        await peer.send(
            frame_bytes(FrameType.HEADERS, 0x1, 1, block[:10]),
            frame_bytes(FrameType.CONTINUATION, 0, 1, block[10:20]),
            frame_bytes(FrameType.CONTINUATION, 0x4, 1, block[20:]),
        )

    outcome = await run_case(script)
    assert outcome.error is None
    assert isinstance(outcome.result, trio_h2t.Response)
    assert outcome.result.headers.get("x-long") == "v" * 50


async def test_rst_stream_refused_is_retryable_and_not_answered() -> None:
    """RFC 9113 §5.4.2, §8.7: RST_STREAM(REFUSED_STREAM) fails the request with a
    retryable StreamRefusedError; the client sends no RST_STREAM in reply."""

    async def script(peer: FakeServer) -> None:
        await _handshake(peer)
        await peer.send(RstStreamFrame(1, error_code=ErrorCode.REFUSED_STREAM))

    outcome = await run_case(script)
    assert isinstance(outcome.error, trio_h2t.StreamRefusedError)
    assert outcome.error.retryable
    assert outcome.wire == [
        *OPENING,
        "SETTINGS(ACK)",
        "HEADERS(1,END_STREAM)",
        "GOAWAY(NO_ERROR,last=0)",
        "EOF",
    ]


async def test_rst_stream_internal_error_fails_the_request() -> None:
    """RFC 9113 §6.4: RST_STREAM(INTERNAL_ERROR) fails that request with its code."""

    async def script(peer: FakeServer) -> None:
        await _handshake(peer)
        await peer.send(peer.response(1, end_stream=False))
        await peer.send(RstStreamFrame(1, error_code=ErrorCode.INTERNAL_ERROR))

    outcome = await run_case(script)
    assert isinstance(outcome.error, trio_h2t.StreamResetError)
    assert outcome.error.error_code == ErrorCode.INTERNAL_ERROR
    assert outcome.error.remote
    assert "RST_STREAM(1,INTERNAL_ERROR)" not in outcome.wire


async def test_goaway_then_response_completes() -> None:
    """RFC 9113 §6.8: after GOAWAY(NO_ERROR, last=1) stream 1 still completes; the
    client opens nothing new and answers with its own GOAWAY(NO_ERROR) on close."""

    async def script(peer: FakeServer) -> None:
        await _handshake(peer)
        goaway = GoAwayFrame(0, last_stream_id=1, error_code=ErrorCode.NO_ERROR)
        await peer.send(goaway, peer.response(1))

    outcome = await run_case(script)
    assert outcome.error is None
    assert outcome.wire == [
        *OPENING,
        "SETTINGS(ACK)",
        "HEADERS(1,END_STREAM)",
        "GOAWAY(NO_ERROR,last=0)",
        "EOF",
    ]


async def test_goaway_below_stream_refuses_it() -> None:
    """RFC 9113 §6.8: streams above a GOAWAY's last-stream-id were not processed:
    the request fails with a retryable StreamRefusedError caused by a GoAwayError
    with the frame's code and debug data."""

    async def script(peer: FakeServer) -> None:
        await _handshake(peer)
        goaway = GoAwayFrame(
            0,
            last_stream_id=0,
            error_code=ErrorCode.ENHANCE_YOUR_CALM,
            additional_data=b"calm",
        )
        await peer.send(goaway)

    outcome = await run_case(script)
    assert isinstance(outcome.error, trio_h2t.StreamRefusedError)
    assert outcome.error.retryable
    cause = outcome.error.__cause__
    assert isinstance(cause, trio_h2t.GoAwayError)
    assert (cause.error_code, cause.debug_data) == (ErrorCode.ENHANCE_YOUR_CALM, b"calm")
    assert outcome.wire[:3] == [*OPENING, "SETTINGS(ACK)"]
    assert "HEADERS(1,END_STREAM)" in outcome.wire
    assert not [t for t in outcome.wire if t.startswith("RST_STREAM")]
    assert outcome.wire[-2:] == ["GOAWAY(NO_ERROR,last=0)", "EOF"]


async def test_no_new_stream_after_goaway() -> None:
    """RFC 9113 §6.8: once the server sent GOAWAY, the client opens no new stream:
    open_stream raises GoAwayError (retryable) and no HEADERS(3) is sent."""

    async def client(port: int) -> object:
        async with trio_h2t.open_connection("127.0.0.1", port) as conn:
            first = await conn.request("GET", "/")
            try:
                await conn.request("GET", "/again")
            except trio_h2t.GoAwayError as exc:
                return (first.status, exc.retryable)
            raise AssertionError("the second request was sent")  # pragma: no cover

    async def script(peer: FakeServer) -> None:
        await _handshake(peer)
        await peer.send(GoAwayFrame(0, last_stream_id=1), peer.response(1))

    outcome = await run_case(script, client)
    assert outcome.result == (200, True)
    assert "HEADERS(3,END_STREAM)" not in outcome.wire
    assert outcome.wire[-2:] == ["GOAWAY(NO_ERROR,last=0)", "EOF"]


async def test_response_body_is_flow_controlled_and_read() -> None:
    """RFC 9113 §6.9: a body as large as the stream window is read; the client
    grants window (WINDOW_UPDATE) and never sends FLOW_CONTROL_ERROR."""
    body = b"y" * 65_535

    async def script(peer: FakeServer) -> None:
        await _handshake(peer)
        frames: list[Frame] = [peer.response(1, end_stream=False)]
        for i in range(0, len(body), 16_384):
            chunk = body[i : i + 16_384]
            flags = ["END_STREAM"] if i + 16_384 >= len(body) else []
            frames.append(DataFrame(1, chunk, flags=flags))
        await peer.send(*frames)

    outcome = await run_case(script)
    assert outcome.error is None
    assert isinstance(outcome.result, trio_h2t.Response)
    assert outcome.result.body == body
    assert not [t for t in outcome.wire if "FLOW_CONTROL" in t or t.startswith("RST")]
    assert outcome.wire[-2:] == ["GOAWAY(NO_ERROR,last=0)", "EOF"]


async def test_peer_eof_mid_stream() -> None:
    """A server that closes the TCP connection mid-response: the request fails with
    ConnectionLostError, and the client writes nothing more (the peer is gone)."""

    async def script(peer: FakeServer) -> None:
        await _handshake(peer)
        await peer.send(peer.response(1, end_stream=False))
        await peer.stream.send_eof()

    outcome = await run_case(script)
    assert isinstance(outcome.error, trio_h2t.ConnectionLostError)
    assert outcome.wire == [*OPENING, "SETTINGS(ACK)", "HEADERS(1,END_STREAM)", "EOF"]


################################################################
# The same through ``trio-h2t get`` (the command line client)
################################################################

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("name", "bad", "code"),
    [c for c in CONNECTION_ERRORS if c[0] in ("window-overflow", "ping-length-7")],
    ids=["window-overflow", "ping-length-7"],
)
async def test_cli_get_sends_goaway_with_settings_violation(
    name: str, bad: bytes, code: ErrorCode
) -> None:
    """``trio-h2t get`` against a server whose SETTINGS is followed at once by a
    connection error: GOAWAY with the code, then close; it exits non-zero and its
    message names the protocol error, not a handshake that did not complete."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    async def client(port: int) -> object:
        command = [sys.executable, "-m", "trio_h2t", "get", f"http://127.0.0.1:{port}/"]
        return await trio.run_process(
            command, env=env, capture_stdout=True, capture_stderr=True, check=False
        )

    async def script(peer: FakeServer) -> None:
        await peer.send(SETTINGS, ACK, bad)

    outcome = await run_case(script, client)
    assert outcome.wire == [*OPENING, "SETTINGS(ACK)", _goaway(code), "EOF"]
    done = outcome.result
    assert isinstance(done, subprocess.CompletedProcess)
    assert done.returncode != 0
    stderr = done.stderr.decode()
    assert f"GOAWAY {code.name} sent" in stderr
    assert "did not complete" not in stderr
