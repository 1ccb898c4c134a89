"""RFC 9113 §3 (starting HTTP/2) and §4 (frames): h2spec ``http2/3.5``, ``4.1``-``4.3``.

Sections follow RFC 9113; the h2spec id (RFC 7540 numbering) is in each docstring.
Cases marked "beyond h2spec" check further MUSTs of the same sections.
"""

from __future__ import annotations

import time

from hyperframe.frame import (
    ContinuationFrame,
    DataFrame,
    HeadersFrame,
    PingFrame,
    PriorityFrame,
    RstStreamFrame,
    SettingsFrame,
)

from .harness import (
    END_HEADERS,
    END_STREAM,
    PREFACE,
    UNKNOWN_TYPE,
    ErrorCode,
    FrameType,
    H2Client,
    Setting,
    frame_bytes,
    request_headers,
)

#: An unknown frame type (h2spec's: 0x16), 8 zero bytes of payload, on stream 0.
UNKNOWN_FRAME = frame_bytes(UNKNOWN_TYPE, 0, 0, b"\x00" * 8)
#: h2spec's DummyHeaders value: --max-header-length defaults to 4000.
DUMMY = "x" * 4000
#: h2spec http2/4.2/3's request: CommonHeaders plus DummyHeaders(c, 5).
H2SPEC_4_2_3_HEADERS = request_headers() + [(f"x-dummy{i}", DUMMY) for i in range(5)]


################################################################
# §3.4 HTTP/2 connection preface (h2spec http2/3.5)
################################################################


def test_3_4_server_preface_is_settings(raw_conn: H2Client) -> None:
    """RFC 9113 §3.4: the server connection preface is a SETTINGS frame, and it MUST
    be the first frame the server sends (h2spec http2/3.5/1)."""
    raw_conn.send(PREFACE, SettingsFrame(0, {Setting.INITIAL_WINDOW_SIZE: 65535}))
    first = raw_conn.expect_frame(SettingsFrame)
    assert raw_conn.received[0] is first
    assert "ACK" not in first.flags


def test_3_4_server_settings_never_enable_push(conn: H2Client) -> None:
    """RFC 9113 §6.5.2: a server that sends SETTINGS_ENABLE_PUSH MUST send 0
    (beyond h2spec)."""
    assert conn.server_settings.get(Setting.ENABLE_PUSH, 0) == 0


def test_3_4_invalid_preface(raw_conn: H2Client) -> None:
    """RFC 9113 §3.4: an invalid connection preface is a connection error
    PROTOCOL_ERROR; the GOAWAY may be omitted (h2spec http2/3.5/2)."""
    raw_conn.send(b"INVALID CONNECTION PREFACE\r\n\r\n")
    raw_conn.expect_connection_error(ErrorCode.PROTOCOL_ERROR)


def test_3_4_http1_request_instead_of_preface(raw_conn: H2Client) -> None:
    """RFC 9113 §3.4: an HTTP/1.1 request where the preface belongs is an invalid
    preface: connection error PROTOCOL_ERROR (beyond h2spec)."""
    raw_conn.send(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    raw_conn.expect_connection_error(ErrorCode.PROTOCOL_ERROR)


def test_3_4_preface_not_followed_by_settings(raw_conn: H2Client) -> None:
    """RFC 9113 §3.4: the client preface MUST be followed by a SETTINGS frame; a PING
    there makes the preface invalid: connection error PROTOCOL_ERROR (beyond h2spec)."""
    raw_conn.send(PREFACE, PingFrame(0, b"h2t-conf"))
    raw_conn.expect_connection_error(ErrorCode.PROTOCOL_ERROR)


def test_3_4_preface_in_pieces(raw_conn: H2Client) -> None:
    """RFC 9113 §3.4: a preface that arrives a few bytes at a time is still valid
    (beyond h2spec)."""
    data = PREFACE + SettingsFrame(0, {}).serialize()
    for i in range(0, len(data), 5):
        raw_conn.send(data[i : i + 5])
        time.sleep(0.002)
    raw_conn.expect_settings_ack()
    raw_conn.ping()


################################################################
# §4.1 Frame format (h2spec http2/4.1)
################################################################


def test_4_1_unknown_frame_type_ignored(conn: H2Client) -> None:
    """RFC 9113 §4.1: a frame of unknown type MUST be ignored and discarded
    (h2spec http2/4.1/1)."""
    conn.send(UNKNOWN_FRAME, PingFrame(0, b"\x00" * 8))
    conn.expect_ping_ack(b"\x00" * 8)


def test_4_1_undefined_flags_ignored(conn: H2Client) -> None:
    """RFC 9113 §4.1: flags with no defined semantics for a frame type MUST be
    ignored: a PING with flags 0x16 is answered (h2spec http2/4.1/2)."""
    conn.send(frame_bytes(FrameType.PING, 0x16, 0, b"\x00" * 8))
    conn.expect_ping_ack(b"\x00" * 8)


def test_4_1_reserved_bit_ignored(conn: H2Client) -> None:
    """RFC 9113 §4.1: the reserved bit of the stream identifier MUST be ignored: a
    PING on stream 0 with R set is answered (h2spec http2/4.1/3)."""
    conn.send(frame_bytes(FrameType.PING, 0x16, 0x8000_0000, b"\x00" * 8))
    conn.expect_ping_ack(b"\x00" * 8)


def test_4_1_reserved_bit_ignored_on_headers(conn: H2Client) -> None:
    """RFC 9113 §4.1: a HEADERS frame for stream 1 with R set opens stream 1, and
    the response comes on stream 1 (beyond h2spec)."""
    block = conn.encode_headers(request_headers())
    conn.send(frame_bytes(FrameType.HEADERS, END_STREAM | END_HEADERS, 0x8000_0001, block))
    assert conn.read_response(1).status == 200


################################################################
# §4.2 Frame size (h2spec http2/4.2)
################################################################


def test_4_2_data_frame_of_max_frame_size(conn: H2Client) -> None:
    """RFC 9113 §4.2: an endpoint MUST be able to receive frames of 2^14 octets: a
    16384-byte DATA frame is accepted (h2spec http2/4.2/1)."""
    size = conn.server_settings.get(Setting.MAX_FRAME_SIZE, 16384)
    conn.send(
        conn.headers_frame(1, request_headers("POST"), end_stream=False),
        DataFrame(1, b"x" * size, flags=["END_STREAM"]),
    )
    conn.expect_headers(1)


def test_4_2_data_frame_over_max_frame_size(conn: H2Client) -> None:
    """RFC 9113 §4.2: a DATA frame over SETTINGS_MAX_FRAME_SIZE is a FRAME_SIZE_ERROR
    (stream or connection error; h2spec http2/4.2/2)."""
    size = conn.server_settings.get(Setting.MAX_FRAME_SIZE, 16384)
    conn.send(
        conn.headers_frame(1, request_headers("POST"), end_stream=False),
        DataFrame(1, b"x" * (size + 1), flags=["END_STREAM"]),
    )
    conn.expect_stream_error(1, ErrorCode.FRAME_SIZE_ERROR)


def test_4_2_headers_frame_over_max_frame_size(conn: H2Client) -> None:
    """RFC 9113 §4.2: a HEADERS frame over SETTINGS_MAX_FRAME_SIZE is a connection
    error FRAME_SIZE_ERROR, since it carries a field block (h2spec http2/4.2/3, sized
    from the advertised limit)."""
    size = conn.server_settings.get(Setting.MAX_FRAME_SIZE, 16384)
    headers = request_headers() + [(f"x-dummy{i}", DUMMY) for i in range(size // 3000 + 2)]
    frame = conn.headers_frame(1, headers)
    assert len(frame.data) > size
    conn.send(frame)
    conn.expect_connection_error(ErrorCode.FRAME_SIZE_ERROR)


def test_4_2_continuation_frame_over_max_frame_size(conn: H2Client) -> None:
    """RFC 9113 §4.2: a CONTINUATION frame over SETTINGS_MAX_FRAME_SIZE is a connection
    error FRAME_SIZE_ERROR, since it carries a field block (beyond h2spec)."""
    size = conn.server_settings.get(Setting.MAX_FRAME_SIZE, 16384)
    block = conn.encode_headers(request_headers())
    headers = [(f"x-dummy{i}", DUMMY) for i in range(size // 3000 + 2)]
    rest = conn.encode_headers(headers)
    assert len(rest) > size
    conn.send(
        conn.headers_frame(1, block, end_headers=False),
        ContinuationFrame(1, rest, flags=["END_HEADERS"]),
    )
    conn.expect_connection_error(ErrorCode.FRAME_SIZE_ERROR)


def test_4_2_settings_frame_over_max_frame_size(conn: H2Client) -> None:
    """RFC 9113 §4.2: an oversized SETTINGS frame (unknown settings, over the server's
    SETTINGS_MAX_FRAME_SIZE) is a connection error FRAME_SIZE_ERROR (beyond h2spec)."""
    size = conn.server_settings.get(Setting.MAX_FRAME_SIZE, 16384)
    payload = b"\x00\xff\x00\x00\x00\x01" * (size // 6 + 1)
    conn.send(frame_bytes(FrameType.SETTINGS, 0, 0, payload))
    conn.expect_connection_error(ErrorCode.FRAME_SIZE_ERROR)


################################################################
# §4.3 Field section compression and decompression (h2spec http2/4.3)
################################################################


def test_4_3_invalid_header_block(conn: H2Client) -> None:
    """RFC 9113 §4.3: a decoding error in a field block is a connection error
    COMPRESSION_ERROR: a literal with no length and no string (h2spec http2/4.3/1)."""
    conn.send(frame_bytes(FrameType.HEADERS, END_STREAM | END_HEADERS, 1, b"\x40"))
    conn.expect_connection_error(ErrorCode.COMPRESSION_ERROR)


def test_4_3_priority_inside_header_block(conn: H2Client) -> None:
    """RFC 9113 §4.3: a field block MUST be contiguous: a PRIORITY frame between
    HEADERS and CONTINUATION is a connection error PROTOCOL_ERROR (h2spec
    http2/4.3/2)."""
    conn.send(
        conn.headers_frame(1, request_headers(), end_stream=False, end_headers=False),
        PriorityFrame(1, depends_on=0, stream_weight=255),
        ContinuationFrame(1, conn.encode_headers([("x-dummy0", DUMMY)]), flags=["END_HEADERS"]),
    )
    conn.expect_connection_error(ErrorCode.PROTOCOL_ERROR)


def test_4_3_headers_on_other_stream_inside_header_block(conn: H2Client) -> None:
    """RFC 9113 §4.3: a HEADERS frame for another stream inside a field block is a
    connection error PROTOCOL_ERROR (h2spec http2/4.3/3)."""
    conn.send(
        conn.headers_frame(1, request_headers(), end_stream=False, end_headers=False),
        conn.headers_frame(3, request_headers()),
        ContinuationFrame(1, conn.encode_headers([("x-dummy0", DUMMY)]), flags=["END_HEADERS"]),
    )
    conn.expect_connection_error(ErrorCode.PROTOCOL_ERROR)


def test_4_3_block_on_reset_stream_still_decoded(conn: H2Client) -> None:
    """RFC 9113 §4.3: a field block on a stream the client reset is still decoded (it
    is a stream error at most), so the next request's indexed fields resolve (beyond
    h2spec)."""
    conn.send(
        conn.headers_frame(1, request_headers("POST"), end_stream=False),
        RstStreamFrame(1, error_code=ErrorCode.CANCEL),
        # Trailers on the reset stream: a stream error, but their block adds an entry.
        conn.headers_frame(1, [("x-state", "kept")]),
    )
    conn.expect_stream_error(1, ErrorCode.STREAM_CLOSED)
    conn.send_headers(3, [*request_headers(), ("x-state", "kept")])
    assert conn.read_response(3).status == 200


def test_4_3_field_block_over_many_continuations(conn: H2Client) -> None:
    """RFC 9113 §4.3: a field block may span any number of CONTINUATION frames: 20
    one-byte-ish fragments are reassembled (beyond h2spec)."""
    block = conn.encode_headers([*request_headers(), ("x-long", "v" * 40)])
    pieces = [block[i : i + 3] for i in range(0, len(block), 3)]
    frames: list[HeadersFrame | ContinuationFrame] = [
        HeadersFrame(1, pieces[0], flags=["END_STREAM"])
    ]
    frames += [ContinuationFrame(1, p) for p in pieces[1:]]
    frames[-1].flags.add("END_HEADERS")
    conn.send(*frames)
    assert conn.read_response(1).status == 200
