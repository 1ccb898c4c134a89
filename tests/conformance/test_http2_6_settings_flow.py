"""RFC 9113 §6.5 (SETTINGS) and §6.9 (WINDOW_UPDATE, flow control): h2spec
``http2/6.5``, ``6.5.2``, ``6.5.3``, ``6.9``, ``6.9.1`` and ``6.9.2``.

The flow-control cases shrink the *server's* send window (our
SETTINGS_INITIAL_WINDOW_SIZE) and watch the DATA frames of ``GET /`` (about 2 KB).
Sections follow RFC 9113; the h2spec id is in each docstring. Cases marked "beyond
h2spec" check further MUSTs of the same sections.
"""

from __future__ import annotations

import struct

from hyperframe.frame import (
    DataFrame,
    GoAwayFrame,
    PingFrame,
    RstStreamFrame,
    SettingsFrame,
    WindowUpdateFrame,
)

from .harness import ACK, ErrorCode, FrameType, H2Client, Setting, frame_bytes, request_headers

MAX_WINDOW = 2**31 - 1


def settings_payload(*pairs: tuple[int, int]) -> bytes:
    """A SETTINGS payload with ``pairs`` in order (duplicates allowed)."""
    return b"".join(struct.pack(">HL", ident, value) for ident, value in pairs)


################################################################
# §6.5 SETTINGS (h2spec http2/6.5)
################################################################


def test_6_5_settings_ack_with_payload(conn: H2Client) -> None:
    """RFC 9113 §6.5: a SETTINGS frame with ACK and a payload is a connection error
    FRAME_SIZE_ERROR (h2spec http2/6.5/1)."""
    payload = settings_payload((Setting.ENABLE_PUSH, 0))
    conn.send(frame_bytes(FrameType.SETTINGS, ACK, 0, payload))
    conn.expect_connection_error(ErrorCode.FRAME_SIZE_ERROR)


def test_6_5_settings_on_nonzero_stream(conn: H2Client) -> None:
    """RFC 9113 §6.5: a SETTINGS frame on a stream other than 0 is a connection error
    PROTOCOL_ERROR (h2spec http2/6.5/2)."""
    payload = settings_payload((Setting.ENABLE_PUSH, 0))
    conn.send(frame_bytes(FrameType.SETTINGS, 0, 1, payload))
    conn.expect_connection_error(ErrorCode.PROTOCOL_ERROR)


def test_6_5_settings_length_not_multiple_of_6(conn: H2Client) -> None:
    """RFC 9113 §6.5: a SETTINGS length that is not a multiple of 6 is a connection
    error FRAME_SIZE_ERROR (h2spec http2/6.5/3)."""
    conn.send(frame_bytes(FrameType.SETTINGS, 0, 0, b"\x00\x02\x00\x00"))
    conn.expect_connection_error(ErrorCode.FRAME_SIZE_ERROR)


def test_6_5_empty_settings_acknowledged(conn: H2Client) -> None:
    """RFC 9113 §6.5: an empty SETTINGS frame is valid and acknowledged (beyond
    h2spec)."""
    conn.send(SettingsFrame(0, {}))
    conn.expect_settings_ack()


################################################################
# §6.5.2 Defined settings (h2spec http2/6.5.2)
################################################################


def test_6_5_2_enable_push_other_than_0_or_1(conn: H2Client) -> None:
    """RFC 9113 §6.5.2: SETTINGS_ENABLE_PUSH other than 0 or 1 is a connection error
    PROTOCOL_ERROR (h2spec http2/6.5.2/1)."""
    conn.send(SettingsFrame(0, {Setting.ENABLE_PUSH: 2}))
    conn.expect_connection_error(ErrorCode.PROTOCOL_ERROR)


def test_6_5_2_initial_window_size_too_large(conn: H2Client) -> None:
    """RFC 9113 §6.5.2: SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1 is a connection
    error FLOW_CONTROL_ERROR (h2spec http2/6.5.2/2)."""
    conn.send(SettingsFrame(0, {Setting.INITIAL_WINDOW_SIZE: 2**31}))
    conn.expect_connection_error(ErrorCode.FLOW_CONTROL_ERROR)


def test_6_5_2_max_frame_size_too_small(conn: H2Client) -> None:
    """RFC 9113 §6.5.2: SETTINGS_MAX_FRAME_SIZE below 16384 is a connection error
    PROTOCOL_ERROR (h2spec http2/6.5.2/3)."""
    conn.send(SettingsFrame(0, {Setting.MAX_FRAME_SIZE: 16383}))
    conn.expect_connection_error(ErrorCode.PROTOCOL_ERROR)


def test_6_5_2_max_frame_size_too_large(conn: H2Client) -> None:
    """RFC 9113 §6.5.2: SETTINGS_MAX_FRAME_SIZE above 2^24-1 is a connection error
    PROTOCOL_ERROR (h2spec http2/6.5.2/4)."""
    conn.send(SettingsFrame(0, {Setting.MAX_FRAME_SIZE: 2**24}))
    conn.expect_connection_error(ErrorCode.PROTOCOL_ERROR)


def test_6_5_2_unknown_setting_ignored(conn: H2Client) -> None:
    """RFC 9113 §6.5.2: a setting with an unknown identifier MUST be ignored (h2spec
    http2/6.5.2/5)."""
    conn.send(SettingsFrame(0, {0xFF: 1}), PingFrame(0, b"\x00" * 8))
    conn.expect_ping_ack(b"\x00" * 8)


def test_6_5_2_extreme_valid_values_accepted(conn: H2Client) -> None:
    """RFC 9113 §6.5.2: the bounds themselves are valid: MAX_FRAME_SIZE 2^24-1 and
    INITIAL_WINDOW_SIZE 2^31-1 are acknowledged (beyond h2spec)."""
    conn.send(
        SettingsFrame(
            0, {Setting.MAX_FRAME_SIZE: 2**24 - 1, Setting.INITIAL_WINDOW_SIZE: MAX_WINDOW}
        )
    )
    conn.expect_settings_ack()
    conn.send_request(1)
    assert conn.read_response(1).status == 200


def test_6_5_2_max_frame_size_respected(conn: H2Client) -> None:
    """RFC 9113 §4.2: the server never sends a frame larger than our
    SETTINGS_MAX_FRAME_SIZE (16384, the minimum) even for a 40 KB echo (beyond
    h2spec)."""
    body = b"y" * 40_000
    conn.send(conn.open_post(), DataFrame(1, body[:16384]), DataFrame(1, body[16384:32768]))
    conn.send(DataFrame(1, body[32768:], flags=["END_STREAM"]))
    response = conn.read_response(1)
    assert response.body == body
    sizes = [len(e.data) for e in conn.received if isinstance(e, DataFrame)]
    assert max(sizes) <= 16384, sizes


################################################################
# §6.5.3 Settings synchronization (h2spec http2/6.5.3)
################################################################


def test_6_5_3_values_processed_in_order(conn: H2Client) -> None:
    """RFC 9113 §6.5.3: values in a SETTINGS frame MUST be processed in order:
    INITIAL_WINDOW_SIZE 100 then 1 leaves 1, so the first DATA has 1 octet (h2spec
    http2/6.5.3/1)."""
    payload = settings_payload((Setting.INITIAL_WINDOW_SIZE, 100), (Setting.INITIAL_WINDOW_SIZE, 1))
    conn.send(frame_bytes(FrameType.SETTINGS, 0, 0, payload))
    conn.expect_settings_ack()
    conn.send_request(1)
    data = conn.expect_frame(DataFrame, stream_id=1)
    assert len(data.data) == 1


def test_6_5_3_settings_acknowledged(conn: H2Client) -> None:
    """RFC 9113 §6.5.3: once the values are processed the recipient MUST immediately
    send a SETTINGS with ACK (h2spec http2/6.5.3/2)."""
    conn.send(SettingsFrame(0, {Setting.ENABLE_PUSH: 0}))
    conn.expect_settings_ack()


################################################################
# §6.9 WINDOW_UPDATE (h2spec http2/6.9)
################################################################


def test_6_9_window_update_zero_on_connection(conn: H2Client) -> None:
    """RFC 9113 §6.9: a WINDOW_UPDATE of 0 on the connection is a connection error
    PROTOCOL_ERROR (h2spec http2/6.9/1)."""
    conn.send(frame_bytes(FrameType.WINDOW_UPDATE, 0, 0, b"\x00\x00\x00\x00"))
    conn.expect_connection_error(ErrorCode.PROTOCOL_ERROR)


def test_6_9_window_update_zero_on_stream(conn: H2Client) -> None:
    """RFC 9113 §6.9: a WINDOW_UPDATE of 0 on a stream is a stream error
    PROTOCOL_ERROR (h2spec http2/6.9/2)."""
    conn.send(conn.open_post(), frame_bytes(FrameType.WINDOW_UPDATE, 0, 1, b"\x00\x00\x00\x00"))
    conn.expect_stream_error(1, ErrorCode.PROTOCOL_ERROR)


def test_6_9_window_update_with_wrong_length(conn: H2Client) -> None:
    """RFC 9113 §6.9: a WINDOW_UPDATE of length other than 4 is a connection error
    FRAME_SIZE_ERROR (h2spec http2/6.9/3)."""
    conn.send(frame_bytes(FrameType.WINDOW_UPDATE, 0, 0, b"\x00\x00\x01"))
    conn.expect_connection_error(ErrorCode.FRAME_SIZE_ERROR)


def test_6_9_window_update_reserved_bit_ignored(conn: H2Client) -> None:
    """RFC 9113 §6.9: the reserved bit of the increment is ignored: 0x80000001 is an
    increment of 1 (beyond h2spec)."""
    conn.send(frame_bytes(FrameType.WINDOW_UPDATE, 0, 0, b"\x80\x00\x00\x01"))
    conn.ping()


################################################################
# §6.9.1 The flow-control window (h2spec http2/6.9.1)
################################################################


def test_6_9_1_initial_window_of_1(conn: H2Client) -> None:
    """RFC 9113 §6.9.1: the sender MUST NOT exceed the window: with
    INITIAL_WINDOW_SIZE 1 the first DATA has 1 octet (h2spec http2/6.9.1/1)."""
    conn.send(SettingsFrame(0, {Setting.INITIAL_WINDOW_SIZE: 1}))
    conn.expect_settings_ack()
    conn.send_request(1)
    data = conn.expect_frame(DataFrame, stream_id=1)
    assert len(data.data) == 1
    assert conn.drain(0.2) == []  # and nothing more until the window opens


def test_6_9_1_connection_window_overflow(conn: H2Client) -> None:
    """RFC 9113 §6.9.1: a WINDOW_UPDATE taking the connection window over 2^31-1 MUST
    end the connection with GOAWAY FLOW_CONTROL_ERROR (h2spec http2/6.9.1/2)."""
    conn.send(
        WindowUpdateFrame(0, window_increment=MAX_WINDOW),
        WindowUpdateFrame(0, window_increment=MAX_WINDOW),
    )
    goaway = conn.expect_frame(GoAwayFrame)
    assert goaway.error_code == ErrorCode.FLOW_CONTROL_ERROR
    conn.expect_close()


def test_6_9_1_stream_window_overflow(conn: H2Client) -> None:
    """RFC 9113 §6.9.1: a WINDOW_UPDATE taking a stream window over 2^31-1 MUST reset
    that stream with RST_STREAM FLOW_CONTROL_ERROR (h2spec http2/6.9.1/3)."""
    conn.send(
        conn.open_post(),
        WindowUpdateFrame(1, window_increment=MAX_WINDOW),
        WindowUpdateFrame(1, window_increment=MAX_WINDOW),
    )
    rst = conn.expect_frame(RstStreamFrame, stream_id=1)
    assert rst.error_code == ErrorCode.FLOW_CONTROL_ERROR


def test_6_9_1_data_beyond_stream_window(conn: H2Client) -> None:
    """RFC 9113 §6.9.1: a client that sends more DATA than the server's stream window
    breaks flow control: FLOW_CONTROL_ERROR, stream or connection error (beyond
    h2spec)."""
    # A GET with a body: the handler never reads it, so the server never reopens the
    # stream window; our window 0 keeps the response (and so the stream) unfinished.
    conn.send(SettingsFrame(0, {Setting.INITIAL_WINDOW_SIZE: 0}))
    conn.expect_settings_ack()
    conn.send(conn.headers_frame(1, request_headers(), end_stream=False))
    conn.expect_headers(1)
    window = conn.server_settings.get(Setting.INITIAL_WINDOW_SIZE, 65535)
    conn.send(*(DataFrame(1, b"z" * 16384) for _ in range(window // 16384 + 1)))
    conn.expect_stream_error(1, ErrorCode.FLOW_CONTROL_ERROR)


def data_until_quiet(conn: H2Client, stream_id: int, quiet: float = 0.3) -> int:
    """Octets of DATA on ``stream_id`` that arrive before ``quiet`` seconds pass
    without any."""
    total = 0
    while True:
        events = conn.drain(quiet)
        got = sum(
            len(e.data) for e in events if isinstance(e, DataFrame) and e.stream_id == stream_id
        )
        if not got:
            return total
        total += got


def test_6_9_1_server_respects_stream_window(conn: H2Client) -> None:
    """RFC 9113 §6.9.1: the server MUST NOT send more than the stream window: 65535
    octets of a 256 KiB file, then exactly the 1000 a WINDOW_UPDATE adds (beyond
    h2spec)."""
    conn.send(WindowUpdateFrame(0, window_increment=1_000_000))  # connection: plenty
    conn.send_request(1, "GET", "/large.bin")
    conn.expect_headers(1)
    assert data_until_quiet(conn, 1) == 65535
    conn.send(WindowUpdateFrame(1, window_increment=1000))
    assert data_until_quiet(conn, 1) == 1000


def test_6_9_1_server_respects_connection_window(conn: H2Client) -> None:
    """RFC 9113 §6.9.1: the server MUST NOT send more than the connection window (the
    initial 65535) even with a huge stream window; a connection WINDOW_UPDATE of 1000
    lets exactly 1000 more out (beyond h2spec)."""
    conn.send(SettingsFrame(0, {Setting.INITIAL_WINDOW_SIZE: MAX_WINDOW}))
    conn.expect_settings_ack()
    conn.send_request(1, "GET", "/large.bin")
    conn.expect_headers(1)
    assert data_until_quiet(conn, 1) == 65535
    conn.send(WindowUpdateFrame(0, window_increment=1000))
    assert data_until_quiet(conn, 1) == 1000


################################################################
# §6.9.2 Initial flow-control window size (h2spec http2/6.9.2)
################################################################


def test_6_9_2_initial_window_change_applies_to_open_streams(conn: H2Client) -> None:
    """RFC 9113 §6.9.2: a change of SETTINGS_INITIAL_WINDOW_SIZE MUST adjust the
    windows of open streams: 0 then 1 lets one octet out (h2spec http2/6.9.2/1)."""
    conn.send(SettingsFrame(0, {Setting.INITIAL_WINDOW_SIZE: 0}))
    conn.expect_settings_ack()
    conn.send(
        conn.headers_frame(1, request_headers()),
        SettingsFrame(0, {Setting.INITIAL_WINDOW_SIZE: 1}),
    )
    conn.expect_settings_ack()
    data = conn.expect_frame(DataFrame, stream_id=1)
    assert len(data.data) == 1


def test_6_9_2_negative_window(conn: H2Client) -> None:
    """RFC 9113 §6.9.2: a sender MUST track a negative window: window 3, 3 sent,
    INITIAL_WINDOW_SIZE 2 (window -1), WINDOW_UPDATE +2: exactly 1 octet more
    (h2spec http2/6.9.2/2)."""
    conn.send(SettingsFrame(0, {Setting.INITIAL_WINDOW_SIZE: 3}))
    conn.expect_settings_ack()
    conn.send_request(1)
    first = conn.expect_frame(DataFrame, stream_id=1)
    received = len(first.data)
    while received < 3:
        received += len(conn.expect_frame(DataFrame, stream_id=1).data)
    assert received == 3
    conn.send(SettingsFrame(0, {Setting.INITIAL_WINDOW_SIZE: 2}))
    conn.expect_settings_ack()
    conn.send(WindowUpdateFrame(1, window_increment=2))
    data = conn.expect_frame(DataFrame, stream_id=1)
    assert len(data.data) == 1
    assert conn.drain(0.2) == []


def test_6_9_2_initial_window_size_too_large(conn: H2Client) -> None:
    """RFC 9113 §6.9.2: SETTINGS_INITIAL_WINDOW_SIZE of 2^31 is a connection error
    FLOW_CONTROL_ERROR (h2spec http2/6.9.2/3)."""
    conn.send(frame_bytes(FrameType.SETTINGS, 0, 0, b"\x00\x04\x80\x00\x00\x00"))
    conn.expect_connection_error(ErrorCode.FLOW_CONTROL_ERROR)


def test_6_9_2_initial_window_change_overflowing_open_stream(conn: H2Client) -> None:
    """RFC 9113 §6.9.2: a SETTINGS_INITIAL_WINDOW_SIZE change that takes an open
    stream's window over 2^31-1 is a connection error FLOW_CONTROL_ERROR (beyond
    h2spec)."""
    conn.send(conn.open_post(), WindowUpdateFrame(1, window_increment=MAX_WINDOW - 65535))
    conn.ping()
    conn.send(SettingsFrame(0, {Setting.INITIAL_WINDOW_SIZE: 65536}))
    conn.expect_connection_error(ErrorCode.FLOW_CONTROL_ERROR)
