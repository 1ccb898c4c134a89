"""RFC 9113 §6 frame definitions, all but SETTINGS and WINDOW_UPDATE: h2spec
``http2/6.1``-``6.4``, ``6.7``, ``6.8`` and ``6.10``.

(SETTINGS and flow control are in ``test_http2_6_settings_flow.py``.) Sections follow
RFC 9113; the h2spec id is in each docstring. Cases marked "beyond h2spec" check
further MUSTs of the same sections.
"""

from __future__ import annotations

from hyperframe.frame import (
    ContinuationFrame,
    DataFrame,
    GoAwayFrame,
    PingFrame,
    PriorityFrame,
    PushPromiseFrame,
    RstStreamFrame,
)

from .harness import (
    ACK,
    END_HEADERS,
    END_STREAM,
    PADDED,
    PRIORITY,
    ErrorCode,
    FrameType,
    H2Client,
    frame_bytes,
    request_headers,
)

DUMMY_HEADERS = [("x-dummy0", "x" * 4000)]


################################################################
# §6.1 DATA (h2spec http2/6.1)
################################################################


def test_6_1_data_on_stream_0(conn: H2Client) -> None:
    """RFC 9113 §6.1: DATA on stream 0 is a connection error PROTOCOL_ERROR (h2spec
    http2/6.1/1)."""
    conn.send(frame_bytes(FrameType.DATA, END_STREAM, 0, b"test"))
    conn.expect_connection_error(ErrorCode.PROTOCOL_ERROR)


def test_6_1_data_on_half_closed_remote_stream(conn: H2Client) -> None:
    """RFC 9113 §6.1: DATA on a stream that is not open or half-closed (local) is a
    stream error STREAM_CLOSED (h2spec http2/6.1/2)."""
    conn.send(
        conn.headers_frame(1, request_headers("POST")),
        DataFrame(1, b"test", flags=["END_STREAM"]),
    )
    conn.expect_stream_error(1, ErrorCode.STREAM_CLOSED)


def test_6_1_data_with_invalid_pad_length(conn: H2Client) -> None:
    """RFC 9113 §6.1: padding as long as the payload or longer is a connection error
    PROTOCOL_ERROR: length 5, pad length 6 (h2spec http2/6.1/3)."""
    conn.send(
        conn.open_post(extra=[("content-length", "4")]),
        frame_bytes(FrameType.DATA, END_STREAM | PADDED, 1, b"\x06Test"),
    )
    conn.expect_connection_error(ErrorCode.PROTOCOL_ERROR)


def test_6_1_data_pad_length_equal_to_payload_length(conn: H2Client) -> None:
    """RFC 9113 §6.1: a pad length equal to the frame payload length (5) is a
    connection error PROTOCOL_ERROR: the boundary case (beyond h2spec)."""
    conn.send(
        conn.open_post(), frame_bytes(FrameType.DATA, END_STREAM | PADDED, 1, b"\x05" + b"\x00" * 4)
    )
    conn.expect_connection_error(ErrorCode.PROTOCOL_ERROR)


def test_6_1_data_padding_filling_the_frame(conn: H2Client) -> None:
    """RFC 9113 §6.1: padding one octet shorter than the payload is valid: pad length
    4 in a 5-octet payload carries empty data and is accepted (beyond h2spec)."""
    conn.send(
        conn.open_post(), frame_bytes(FrameType.DATA, END_STREAM | PADDED, 1, b"\x04" + b"\x00" * 4)
    )
    response = conn.read_response(1)
    assert response.status == 200
    assert response.body == b""


def test_6_1_padded_data_too_short_for_pad_length(conn: H2Client) -> None:
    """RFC 9113 §4.2/§6.1: a PADDED DATA frame with an empty payload is too small to
    hold its Pad Length: FRAME_SIZE_ERROR (stream or connection error; beyond
    h2spec)."""
    conn.send(conn.open_post(), frame_bytes(FrameType.DATA, PADDED, 1, b""))
    conn.expect_stream_error(1, ErrorCode.FRAME_SIZE_ERROR)


################################################################
# §6.2 HEADERS (h2spec http2/6.2)
################################################################


def test_6_2_headers_without_end_headers_then_priority(conn: H2Client) -> None:
    """RFC 9113 §6.2: HEADERS without END_HEADERS must be followed by CONTINUATION; a
    PRIORITY frame is a connection error PROTOCOL_ERROR (h2spec http2/6.2/1)."""
    conn.send(
        conn.headers_frame(1, request_headers(), end_stream=False, end_headers=False),
        PriorityFrame(1, depends_on=0, stream_weight=255),
        ContinuationFrame(1, conn.encode_headers(DUMMY_HEADERS), flags=["END_HEADERS"]),
    )
    conn.expect_connection_error(ErrorCode.PROTOCOL_ERROR)


def test_6_2_headers_to_other_stream_inside_header_block(conn: H2Client) -> None:
    """RFC 9113 §6.2: a frame for another stream inside a field block is a connection
    error PROTOCOL_ERROR (h2spec http2/6.2/2)."""
    conn.send(
        conn.headers_frame(1, request_headers(), end_stream=False, end_headers=False),
        conn.headers_frame(3, request_headers()),
        ContinuationFrame(1, conn.encode_headers(DUMMY_HEADERS), flags=["END_HEADERS"]),
    )
    conn.expect_connection_error(ErrorCode.PROTOCOL_ERROR)


def test_6_2_headers_on_stream_0(conn: H2Client) -> None:
    """RFC 9113 §6.2: HEADERS on stream 0 is a connection error PROTOCOL_ERROR
    (h2spec http2/6.2/3)."""
    block = conn.encode_headers(request_headers())
    conn.send(frame_bytes(FrameType.HEADERS, END_STREAM | END_HEADERS, 0, block))
    conn.expect_connection_error(ErrorCode.PROTOCOL_ERROR)


def test_6_2_headers_with_invalid_pad_length(conn: H2Client) -> None:
    """RFC 9113 §6.2: padding that exceeds the room left for the field block is a
    PROTOCOL_ERROR (h2spec http2/6.2/4)."""
    block = conn.encode_headers(request_headers())
    payload = bytes([len(block) + 2]) + block
    conn.send(frame_bytes(FrameType.HEADERS, END_STREAM | END_HEADERS | PADDED, 1, payload))
    conn.expect_stream_error(1, ErrorCode.PROTOCOL_ERROR)


def test_6_2_headers_too_short_for_priority_fields(conn: H2Client) -> None:
    """RFC 9113 §4.2: a HEADERS frame with the PRIORITY flag but under 5 octets is too
    small for its mandatory fields: connection error FRAME_SIZE_ERROR, as it carries a
    field block (beyond h2spec)."""
    conn.send(
        frame_bytes(FrameType.HEADERS, END_STREAM | END_HEADERS | PRIORITY, 1, b"\x00\x00\x00")
    )
    conn.expect_connection_error(ErrorCode.FRAME_SIZE_ERROR)


def test_6_2_padding_may_leave_the_fragment_empty(conn: H2Client) -> None:
    """RFC 9113 §6.2: padding that takes all the payload after Pad Length leaves an
    empty field block fragment, which is valid: the block continues in CONTINUATION
    and the request is served (beyond h2spec; a fuzz finding: hyperframe refuses it
    and we answered GOAWAY(PROTOCOL_ERROR))."""
    block = conn.encode_headers(request_headers())
    conn.send(
        frame_bytes(FrameType.HEADERS, END_STREAM | PADDED, 1, b"\x03" + b"\x00" * 3),
        frame_bytes(FrameType.CONTINUATION, END_HEADERS, 1, block),
    )
    assert conn.read_response(1).status == 200


def test_6_2_padding_with_priority_may_leave_the_fragment_empty(conn: H2Client) -> None:
    """RFC 9113 §6.2: the same with the priority fields: Pad Length 3, 5 priority
    octets, 3 octets of padding, an empty fragment (beyond h2spec)."""
    block = conn.encode_headers(request_headers())
    payload = b"\x03" + b"\x00\x00\x00\x00\x0f" + b"\x00" * 3
    conn.send(
        frame_bytes(FrameType.HEADERS, END_STREAM | PADDED | PRIORITY, 1, payload),
        frame_bytes(FrameType.CONTINUATION, END_HEADERS, 1, block),
    )
    assert conn.read_response(1).status == 200


def test_6_2_padding_running_into_the_priority_fields(conn: H2Client) -> None:
    """RFC 9113 §6.2: padding longer than what follows the priority fields is a
    connection error PROTOCOL_ERROR: Pad Length 6 with 5 priority octets and 3 more
    (hyperframe compares it with all 8 and accepts it; beyond h2spec)."""
    payload = b"\x06" + b"\x00\x00\x00\x00\x0f" + b"\x00" * 3
    conn.send(
        frame_bytes(FrameType.HEADERS, END_STREAM | END_HEADERS | PADDED | PRIORITY, 1, payload)
    )
    conn.expect_connection_error(ErrorCode.PROTOCOL_ERROR)


def test_6_2_padded_empty_header_block_is_a_malformed_request(conn: H2Client) -> None:
    """RFC 9113 §6.2, §8.1.1: a padded HEADERS with END_HEADERS and an empty fragment
    is an empty header block, a request without its pseudo-header fields: malformed,
    a stream error PROTOCOL_ERROR; the connection stays (beyond h2spec)."""
    conn.send(
        frame_bytes(FrameType.HEADERS, END_STREAM | END_HEADERS | PADDED, 1, b"\x03" + b"\x00" * 3)
    )
    rst = conn.expect_frame(RstStreamFrame, 1)
    assert rst.error_code == ErrorCode.PROTOCOL_ERROR
    conn.ping()
    conn.send_request(3)
    assert conn.read_response(3).status == 200


################################################################
# §6.3 PRIORITY (h2spec http2/6.3)
################################################################


def test_6_3_priority_on_stream_0(conn: H2Client) -> None:
    """RFC 9113 §6.3: PRIORITY on stream 0 is a connection error PROTOCOL_ERROR
    (h2spec http2/6.3/1)."""
    conn.send(frame_bytes(FrameType.PRIORITY, 0, 0, b"\x00\x00\x00\x00\xff"))
    conn.expect_connection_error(ErrorCode.PROTOCOL_ERROR)


def test_6_3_priority_with_wrong_length(conn: H2Client) -> None:
    """RFC 9113 §6.3: a PRIORITY frame of length other than 5 is a stream error
    FRAME_SIZE_ERROR (h2spec http2/6.3/2)."""
    conn.send(
        conn.headers_frame(1, request_headers()),
        frame_bytes(FrameType.PRIORITY, 0, 1, b"\x80\x00\x00\x01"),
    )
    conn.expect_stream_error(1, ErrorCode.FRAME_SIZE_ERROR)


def test_6_3_priority_on_idle_stream_then_lower_stream(conn: H2Client) -> None:
    """RFC 9113 §6.3: PRIORITY on idle stream 3 does not open it; HEADERS on stream
    1 is answered (h2spec http2/6.3/3, strict)."""
    conn.send(
        PriorityFrame(3, depends_on=0, stream_weight=255),
        conn.headers_frame(1, request_headers()),
    )
    conn.expect_headers(1)


################################################################
# §6.4 RST_STREAM (h2spec http2/6.4)
################################################################


def test_6_4_rst_stream_on_stream_0(conn: H2Client) -> None:
    """RFC 9113 §6.4: RST_STREAM on stream 0 is a connection error PROTOCOL_ERROR
    (h2spec http2/6.4/1)."""
    conn.send(frame_bytes(FrameType.RST_STREAM, 0, 0, b"\x00\x00\x00\x08"))
    conn.expect_connection_error(ErrorCode.PROTOCOL_ERROR)


def test_6_4_rst_stream_on_idle_stream(conn: H2Client) -> None:
    """RFC 9113 §6.4: RST_STREAM on an idle stream is a connection error
    PROTOCOL_ERROR (h2spec http2/6.4/2)."""
    conn.send(frame_bytes(FrameType.RST_STREAM, 0, 1, b"\x00\x00\x00\x08"))
    conn.expect_connection_error(ErrorCode.PROTOCOL_ERROR)


def test_6_4_rst_stream_with_wrong_length(conn: H2Client) -> None:
    """RFC 9113 §6.4: a RST_STREAM of length other than 4 is a connection error
    FRAME_SIZE_ERROR (h2spec http2/6.4/3 also accepts a stream error)."""
    conn.send(
        conn.headers_frame(1, request_headers()),
        frame_bytes(FrameType.RST_STREAM, 0, 1, b"\x00\x00\x00"),
    )
    conn.expect_connection_error(ErrorCode.FRAME_SIZE_ERROR)


################################################################
# §6.6 PUSH_PROMISE / §8.4 server push (h2spec http2/8.2)
################################################################


def test_6_6_push_promise_from_client(conn: H2Client) -> None:
    """RFC 9113 §8.4: a client cannot push; a PUSH_PROMISE is a connection error
    PROTOCOL_ERROR (h2spec http2/8.2/1)."""
    # Encode in wire order: HPACK state is shared, so the HEADERS block must be
    # encoded before the PUSH_PROMISE block that follows it.
    headers = conn.headers_frame(1, request_headers(), end_stream=False)
    block = conn.encode_headers(request_headers())
    conn.send(
        headers,
        PushPromiseFrame(1, promised_stream_id=2, data=block, flags=["END_HEADERS"]),
    )
    conn.expect_connection_error(ErrorCode.PROTOCOL_ERROR)


################################################################
# §6.7 PING (h2spec http2/6.7)
################################################################


def test_6_7_ping_acknowledged_with_same_payload(conn: H2Client) -> None:
    """RFC 9113 §6.7: a PING MUST be answered by a PING with ACK and an identical
    payload (h2spec http2/6.7/1)."""
    conn.send(PingFrame(0, b"h2spec\x00\x00"))
    conn.expect_ping_ack(b"h2spec\x00\x00")


def test_6_7_ping_ack_not_answered(conn: H2Client) -> None:
    """RFC 9113 §6.7: an endpoint MUST NOT respond to a PING with ACK (h2spec
    http2/6.7/2)."""
    conn.send(PingFrame(0, b"invalid\x00", flags=["ACK"]), PingFrame(0, b"h2spec\x00\x00"))
    conn.expect_ping_ack(b"h2spec\x00\x00")


def test_6_7_ping_on_nonzero_stream(conn: H2Client) -> None:
    """RFC 9113 §6.7: a PING on a stream other than 0 is a connection error
    PROTOCOL_ERROR (h2spec http2/6.7/3)."""
    conn.send(frame_bytes(FrameType.PING, 0, 1, b"\x00" * 8))
    conn.expect_connection_error(ErrorCode.PROTOCOL_ERROR)


def test_6_7_ping_with_wrong_length(conn: H2Client) -> None:
    """RFC 9113 §6.7: a PING of length other than 8 is a connection error
    FRAME_SIZE_ERROR (h2spec http2/6.7/4 sends it on stream 1 and expects
    PROTOCOL_ERROR; this is the RFC's case, on stream 0)."""
    conn.send(frame_bytes(FrameType.PING, 0, 0, b"\x00" * 6))
    conn.expect_connection_error(ErrorCode.FRAME_SIZE_ERROR)


def test_6_7_ping_ack_with_wrong_length(conn: H2Client) -> None:
    """RFC 9113 §6.7: the length rule holds for a PING ACK too: connection error
    FRAME_SIZE_ERROR (beyond h2spec)."""
    conn.send(frame_bytes(FrameType.PING, ACK, 0, b"\x00" * 9))
    conn.expect_connection_error(ErrorCode.FRAME_SIZE_ERROR)


################################################################
# §6.8 GOAWAY (h2spec http2/6.8)
################################################################


def test_6_8_goaway_on_nonzero_stream(conn: H2Client) -> None:
    """RFC 9113 §6.8: a GOAWAY on a stream other than 0 is a connection error
    PROTOCOL_ERROR (h2spec http2/6.8/1)."""
    conn.send(frame_bytes(FrameType.GOAWAY, 0, 1, b"\x00\x00\x00\x00\x00\x00\x00\x00"))
    conn.expect_connection_error(ErrorCode.PROTOCOL_ERROR)


def test_6_8_goaway_too_short(conn: H2Client) -> None:
    """RFC 9113 §4.2: a 4-byte GOAWAY is too small for its mandatory fields:
    connection error FRAME_SIZE_ERROR (beyond h2spec)."""
    conn.send(frame_bytes(FrameType.GOAWAY, 0, 0, b"\x00\x00\x00\x00"))
    conn.expect_connection_error(ErrorCode.FRAME_SIZE_ERROR)


def test_6_8_in_flight_stream_completes_after_client_goaway(conn: H2Client) -> None:
    """RFC 9113 §6.8: the client's GOAWAY stops new streams, not the ones already
    open: a POST started before it is still answered (beyond h2spec)."""
    conn.send(
        conn.open_post(),
        GoAwayFrame(0, last_stream_id=0, error_code=ErrorCode.NO_ERROR),
        DataFrame(1, b"test", flags=["END_STREAM"]),
    )
    response = conn.read_response(1)
    assert response.status == 200
    assert response.body == b"test"


################################################################
# §6.10 CONTINUATION (h2spec http2/6.10)
################################################################


def test_6_10_multiple_continuation(conn: H2Client) -> None:
    """RFC 9113 §6.10: any number of CONTINUATION frames may follow HEADERS (h2spec
    http2/6.10/1)."""
    conn.send(
        conn.headers_frame(1, request_headers(), end_headers=False),
        ContinuationFrame(1, conn.encode_headers(DUMMY_HEADERS)),
        ContinuationFrame(1, conn.encode_headers(DUMMY_HEADERS), flags=["END_HEADERS"]),
    )
    conn.expect_headers(1)


def test_6_10_continuation_followed_by_other_frame(conn: H2Client) -> None:
    """RFC 9113 §6.10: a CONTINUATION without END_HEADERS followed by DATA is a
    connection error PROTOCOL_ERROR (h2spec http2/6.10/2)."""
    conn.send(
        conn.headers_frame(1, request_headers("POST"), end_stream=False, end_headers=False),
        ContinuationFrame(1, conn.encode_headers(DUMMY_HEADERS)),
        DataFrame(1, b"test", flags=["END_STREAM"]),
    )
    conn.expect_connection_error(ErrorCode.PROTOCOL_ERROR)


def test_6_10_continuation_on_stream_0(conn: H2Client) -> None:
    """RFC 9113 §6.10: CONTINUATION on stream 0 is a connection error PROTOCOL_ERROR
    (h2spec http2/6.10/3)."""
    conn.send(
        conn.headers_frame(1, request_headers(), end_headers=False),
        frame_bytes(FrameType.CONTINUATION, END_HEADERS, 0, conn.encode_headers(DUMMY_HEADERS)),
    )
    conn.expect_connection_error(ErrorCode.PROTOCOL_ERROR)


def test_6_10_continuation_after_end_headers(conn: H2Client) -> None:
    """RFC 9113 §6.10: CONTINUATION after a HEADERS with END_HEADERS is a connection
    error PROTOCOL_ERROR (h2spec http2/6.10/4)."""
    conn.send(
        conn.headers_frame(1, request_headers()),
        ContinuationFrame(1, conn.encode_headers(DUMMY_HEADERS), flags=["END_HEADERS"]),
    )
    conn.expect_connection_error(ErrorCode.PROTOCOL_ERROR)


def test_6_10_continuation_after_continuation_with_end_headers(conn: H2Client) -> None:
    """RFC 9113 §6.10: CONTINUATION after a CONTINUATION with END_HEADERS is a
    connection error PROTOCOL_ERROR (h2spec http2/6.10/5)."""
    conn.send(
        conn.headers_frame(1, request_headers(), end_headers=False),
        ContinuationFrame(1, conn.encode_headers(DUMMY_HEADERS), flags=["END_HEADERS"]),
        ContinuationFrame(1, conn.encode_headers(DUMMY_HEADERS), flags=["END_HEADERS"]),
    )
    conn.expect_connection_error(ErrorCode.PROTOCOL_ERROR)


def test_6_10_continuation_after_data(conn: H2Client) -> None:
    """RFC 9113 §6.10: CONTINUATION must follow HEADERS or CONTINUATION; after DATA it
    is a connection error PROTOCOL_ERROR (h2spec http2/6.10/6)."""
    conn.send(
        conn.headers_frame(1, request_headers("POST"), end_stream=False),
        DataFrame(1, b"test"),
        ContinuationFrame(1, conn.encode_headers(DUMMY_HEADERS), flags=["END_HEADERS"]),
    )
    conn.expect_connection_error(ErrorCode.PROTOCOL_ERROR)
