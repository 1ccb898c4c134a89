"""RFC 9113 §5 (streams and multiplexing): h2spec ``http2/5.1`` to ``5.5``.

Sections follow RFC 9113; the h2spec id (RFC 7540 numbering) is in each docstring.
Cases marked "beyond h2spec" check further MUSTs of the same sections.
"""

from __future__ import annotations

from hyperframe.frame import (
    ContinuationFrame,
    DataFrame,
    GoAwayFrame,
    HeadersFrame,
    PingFrame,
    PriorityFrame,
    RstStreamFrame,
    SettingsFrame,
    WindowUpdateFrame,
)

from .harness import (
    UNKNOWN_TYPE,
    ErrorCode,
    FrameType,
    H2Client,
    Setting,
    frame_bytes,
    request_headers,
)

UNKNOWN_FRAME = frame_bytes(UNKNOWN_TYPE, 0, 0, b"\x00" * 8)
DUMMY_HEADERS = [("x-dummy0", "x" * 4000)]


################################################################
# §5.1 Stream states (h2spec http2/5.1)
################################################################


def test_5_1_idle_data(conn: H2Client) -> None:
    """RFC 9113 §5.1: DATA on an idle stream is a connection error PROTOCOL_ERROR
    (h2spec http2/5.1/1)."""
    conn.send(DataFrame(1, b"test", flags=["END_STREAM"]))
    conn.expect_connection_error(ErrorCode.PROTOCOL_ERROR)


def test_5_1_idle_rst_stream(conn: H2Client) -> None:
    """RFC 9113 §5.1: RST_STREAM on an idle stream is a connection error
    PROTOCOL_ERROR (h2spec http2/5.1/2)."""
    conn.send(RstStreamFrame(1, error_code=ErrorCode.CANCEL))
    conn.expect_connection_error(ErrorCode.PROTOCOL_ERROR)


def test_5_1_idle_window_update(conn: H2Client) -> None:
    """RFC 9113 §5.1: WINDOW_UPDATE on an idle stream is a connection error
    PROTOCOL_ERROR (h2spec http2/5.1/3)."""
    conn.send(WindowUpdateFrame(1, window_increment=100))
    conn.expect_connection_error(ErrorCode.PROTOCOL_ERROR)


def test_5_1_idle_continuation(conn: H2Client) -> None:
    """RFC 9113 §5.1: CONTINUATION on an idle stream is a connection error
    PROTOCOL_ERROR (h2spec http2/5.1/4)."""
    block = conn.encode_headers(request_headers())
    conn.send(ContinuationFrame(1, block, flags=["END_HEADERS"]))
    conn.expect_connection_error(ErrorCode.PROTOCOL_ERROR)


def test_5_1_half_closed_remote_data(conn: H2Client) -> None:
    """RFC 9113 §5.1: DATA on a half-closed (remote) stream is a stream error
    STREAM_CLOSED (h2spec http2/5.1/5)."""
    conn.send(conn.headers_frame(1, request_headers()), DataFrame(1, b"test", flags=["END_STREAM"]))
    conn.expect_stream_error(1, ErrorCode.STREAM_CLOSED)


def test_5_1_half_closed_remote_headers(conn: H2Client) -> None:
    """RFC 9113 §5.1: HEADERS on a half-closed (remote) stream is a stream error
    STREAM_CLOSED (h2spec http2/5.1/6)."""
    conn.send(
        conn.headers_frame(1, request_headers()),
        conn.headers_frame(1, request_headers()),
    )
    conn.expect_stream_error(1, ErrorCode.STREAM_CLOSED)


def test_5_1_half_closed_remote_continuation(conn: H2Client) -> None:
    """RFC 9113 §5.1: CONTINUATION on a half-closed (remote) stream is a stream error
    STREAM_CLOSED (or, there being no open field block, a connection error
    PROTOCOL_ERROR; h2spec http2/5.1/7)."""
    block = conn.encode_headers(request_headers())
    conn.send(
        conn.headers_frame(1, block),
        ContinuationFrame(1, block, flags=["END_HEADERS"]),
    )
    conn.expect_stream_error(1, ErrorCode.STREAM_CLOSED, ErrorCode.PROTOCOL_ERROR)


def test_5_1_closed_data_after_rst_stream(conn: H2Client) -> None:
    """RFC 9113 §5.1: DATA after the client's RST_STREAM is a stream error
    STREAM_CLOSED (h2spec http2/5.1/8)."""
    conn.send(
        conn.headers_frame(1, request_headers(), end_stream=False),
        RstStreamFrame(1, error_code=ErrorCode.CANCEL),
        DataFrame(1, b"test", flags=["END_STREAM"]),
    )
    conn.expect_stream_error(1, ErrorCode.STREAM_CLOSED)


def test_5_1_closed_headers_after_rst_stream(conn: H2Client) -> None:
    """RFC 9113 §5.1: HEADERS after the client's RST_STREAM is a stream error
    STREAM_CLOSED (h2spec http2/5.1/9)."""
    conn.send(
        conn.headers_frame(1, request_headers(), end_stream=False),
        RstStreamFrame(1, error_code=ErrorCode.CANCEL),
        conn.headers_frame(1, request_headers()),
    )
    conn.expect_stream_error(1, ErrorCode.STREAM_CLOSED)


def test_5_1_closed_continuation_after_rst_stream(conn: H2Client) -> None:
    """RFC 9113 §5.1: CONTINUATION after the client's RST_STREAM is a stream error
    STREAM_CLOSED (or connection error PROTOCOL_ERROR; h2spec http2/5.1/10)."""
    conn.send(
        conn.headers_frame(1, request_headers(), end_stream=False),
        RstStreamFrame(1, error_code=ErrorCode.CANCEL),
        ContinuationFrame(1, conn.encode_headers(DUMMY_HEADERS), flags=["END_HEADERS"]),
    )
    conn.expect_stream_error(1, ErrorCode.STREAM_CLOSED, ErrorCode.PROTOCOL_ERROR)


def test_5_1_closed_data(conn: H2Client) -> None:
    """RFC 9113 §5.1: DATA on a stream closed by END_STREAM both ways is a connection
    error STREAM_CLOSED (h2spec http2/5.1/11)."""
    conn.send_request(1)
    conn.read_response(1)
    conn.send(DataFrame(1, b"test", flags=["END_STREAM"]))
    conn.expect_connection_error(ErrorCode.STREAM_CLOSED)


def test_5_1_closed_headers(conn: H2Client) -> None:
    """RFC 9113 §5.1: HEADERS on a stream closed by END_STREAM both ways is a
    connection error STREAM_CLOSED (h2spec http2/5.1/12)."""
    conn.send_request(1)
    conn.read_response(1)
    conn.send_request(1)
    conn.expect_connection_error(ErrorCode.STREAM_CLOSED)


def test_5_1_closed_continuation(conn: H2Client) -> None:
    """RFC 9113 §5.1: CONTINUATION on a stream closed by END_STREAM both ways is a
    connection error STREAM_CLOSED or PROTOCOL_ERROR (h2spec http2/5.1/13)."""
    conn.send_request(1)
    conn.read_response(1)
    conn.send(ContinuationFrame(1, conn.encode_headers(DUMMY_HEADERS), flags=["END_HEADERS"]))
    conn.expect_connection_error(ErrorCode.STREAM_CLOSED, ErrorCode.PROTOCOL_ERROR)


def test_5_1_closed_window_update_and_rst_tolerated(conn: H2Client) -> None:
    """RFC 9113 §5.1: WINDOW_UPDATE and RST_STREAM that cross the server's END_STREAM
    MUST NOT be treated as errors (beyond h2spec)."""
    conn.send_request(1)
    conn.read_response(1)
    conn.send(WindowUpdateFrame(1, window_increment=1), RstStreamFrame(1, error_code=0))
    conn.ping()


################################################################
# §5.1.1 Stream identifiers (h2spec http2/5.1.1)
################################################################


def test_5_1_1_even_stream_id(conn: H2Client) -> None:
    """RFC 9113 §5.1.1: a client stream with an even identifier is a connection
    error PROTOCOL_ERROR (h2spec http2/5.1.1/1)."""
    conn.send_request(2)
    conn.expect_connection_error(ErrorCode.PROTOCOL_ERROR)


def test_5_1_1_decreasing_stream_id(conn: H2Client) -> None:
    """RFC 9113 §5.1.1: a new stream id lower than one already used is a connection
    error PROTOCOL_ERROR (h2spec http2/5.1.1/2)."""
    conn.send_request(5)
    conn.send_request(3)
    conn.expect_connection_error(ErrorCode.PROTOCOL_ERROR)


def test_5_1_1_skipped_ids_are_closed(conn: H2Client) -> None:
    """RFC 9113 §5.1.1: opening stream 5 implicitly closes idle stream 3; HEADERS on
    3 afterwards is a connection error PROTOCOL_ERROR (or STREAM_CLOSED) (beyond
    h2spec)."""
    conn.send_request(5)
    conn.read_response(5)
    conn.send_request(3)
    conn.expect_connection_error(ErrorCode.PROTOCOL_ERROR, ErrorCode.STREAM_CLOSED)


################################################################
# §5.1.2 Stream concurrency (h2spec http2/5.1.2)
################################################################


def exceed_concurrency(conn: H2Client) -> int:
    """Open one stream more than the server's MAX_CONCURRENT_STREAMS, keeping them
    all open (window 0: no response can finish). Returns the last stream's id."""
    limit = conn.server_settings.get(Setting.MAX_CONCURRENT_STREAMS)
    assert limit is not None, "the server advertises no MAX_CONCURRENT_STREAMS"
    conn.send(SettingsFrame(0, {Setting.INITIAL_WINDOW_SIZE: 0}))
    conn.expect_settings_ack()
    sids = [1 + 2 * i for i in range(limit + 1)]
    conn.send(*(conn.headers_frame(sid, request_headers()) for sid in sids))
    return sids[-1]


def test_5_1_2_exceeding_max_concurrent_streams(conn: H2Client) -> None:
    """RFC 9113 §5.1.2: a HEADERS frame over the advertised MAX_CONCURRENT_STREAMS is
    a stream error PROTOCOL_ERROR or REFUSED_STREAM (h2spec http2/5.1.2/1)."""
    last = exceed_concurrency(conn)
    conn.expect_stream_error(last, ErrorCode.PROTOCOL_ERROR, ErrorCode.REFUSED_STREAM)


def test_5_1_2_refused_stream_keeps_connection_and_hpack(conn: H2Client) -> None:
    """RFC 9113 §4.3, §5.1.2: the refused stream's field block is still decoded, so
    after REFUSED_STREAM (if the connection lives) a request indexing the entry it
    added is answered once a stream is free (beyond h2spec)."""
    last = exceed_concurrency(conn)
    conn.expect_stream_error(last, ErrorCode.PROTOCOL_ERROR, ErrorCode.REFUSED_STREAM)
    assert not conn.closed
    assert not any(isinstance(e, GoAwayFrame) for e in conn.received)
    conn.send(RstStreamFrame(1, error_code=ErrorCode.CANCEL))  # frees one stream
    conn.send(SettingsFrame(0, {Setting.INITIAL_WINDOW_SIZE: 65535}))
    nxt = last + 2
    conn.send_headers(nxt, request_headers("HEAD"))
    response = conn.read_response(nxt, head=True)
    assert response.status == 200, response


################################################################
# §5.3 Prioritization (h2spec http2/5.3.1; RFC 7540 §5.3.1)
################################################################


def test_5_3_1_headers_depends_on_itself(conn: H2Client) -> None:
    """RFC 7540 §5.3.1 (priority signals, deprecated by RFC 9113 §5.3.2 but still
    validated): a HEADERS frame depending on its own stream is a stream error
    PROTOCOL_ERROR (h2spec http2/5.3.1/1)."""
    block = conn.encode_headers(request_headers())
    conn.send(
        HeadersFrame(
            1,
            block,
            depends_on=1,
            stream_weight=255,
            flags=["END_STREAM", "END_HEADERS", "PRIORITY"],
        )
    )
    conn.expect_stream_error(1, ErrorCode.PROTOCOL_ERROR)


def test_5_3_1_priority_depends_on_itself(conn: H2Client) -> None:
    """RFC 7540 §5.3.1: a PRIORITY frame making a stream depend on itself is a stream
    error PROTOCOL_ERROR (h2spec http2/5.3.1/2)."""
    conn.send(PriorityFrame(2, depends_on=2, stream_weight=255))
    conn.expect_stream_error(2, ErrorCode.PROTOCOL_ERROR)


################################################################
# §5.4 Error handling (h2spec http2/5.4.1)
################################################################

#: A PING on stream 3: a connection error PROTOCOL_ERROR (h2spec's trigger).
INVALID_PING = frame_bytes(FrameType.PING, 0, 3, b"\x00" * 8)


def test_5_4_1_connection_error_closes_connection(conn: H2Client) -> None:
    """RFC 9113 §5.4.1: after a connection error the endpoint MUST close the TCP
    connection (h2spec http2/5.4.1/1)."""
    conn.send(INVALID_PING)
    conn.expect_close()


def test_5_4_1_connection_error_sends_goaway(conn: H2Client) -> None:
    """RFC 9113 §5.4.1: an endpoint that encounters a connection error SHOULD first
    send GOAWAY, with the error code (h2spec http2/5.4.1/2, strict)."""
    conn.send(INVALID_PING)
    goaway = conn.expect_goaway_or_close()
    assert goaway is not None, "connection closed without GOAWAY"
    assert goaway.error_code == ErrorCode.PROTOCOL_ERROR
    assert goaway.last_stream_id == 0


def test_5_4_1_goaway_names_last_processed_stream(conn: H2Client) -> None:
    """RFC 9113 §5.4.1/§6.8: the GOAWAY of a connection error carries the last stream
    the server processed (beyond h2spec)."""
    conn.send_request(1)
    conn.read_response(1)
    conn.send(INVALID_PING)
    goaway = conn.expect_connection_error(ErrorCode.PROTOCOL_ERROR)
    assert goaway is not None
    assert goaway.last_stream_id == 1


def test_5_4_2_stream_error_leaves_connection_usable(conn: H2Client) -> None:
    """RFC 9113 §5.4.2: a stream error (HEADERS on a half-closed stream) resets only
    that stream; the connection serves the next request (beyond h2spec)."""
    conn.send(conn.headers_frame(1, request_headers()), DataFrame(1, b"x", flags=["END_STREAM"]))
    conn.expect_stream_error(1, ErrorCode.STREAM_CLOSED)
    conn.send_request(3)
    assert conn.read_response(3).status == 200


################################################################
# §5.5 Extending HTTP/2 (h2spec http2/5.5)
################################################################


def test_5_5_unknown_extension_frame(conn: H2Client) -> None:
    """RFC 9113 §5.5: frames of unknown type MUST be discarded (h2spec
    http2/5.5/1)."""
    conn.send(UNKNOWN_FRAME, PingFrame(0, b"\x00" * 8))
    conn.expect_ping_ack(b"\x00" * 8)


def test_5_5_unknown_extension_frame_inside_header_block(conn: H2Client) -> None:
    """RFC 9113 §5.5: an extension frame inside a field block is a connection error
    PROTOCOL_ERROR (h2spec http2/5.5/2)."""
    conn.send(
        conn.headers_frame(1, request_headers(), end_headers=False),
        UNKNOWN_FRAME,
    )
    conn.expect_connection_error(ErrorCode.PROTOCOL_ERROR)


def test_5_5_unknown_extension_frame_on_idle_stream(conn: H2Client) -> None:
    """RFC 9113 §5.5: an unknown frame type on a (still idle) stream is discarded, not
    a stream-state error (beyond h2spec)."""
    conn.send(frame_bytes(UNKNOWN_TYPE, 0xFF, 7, b"ext"), PingFrame(0, b"\x00" * 8))
    conn.expect_ping_ack(b"\x00" * 8)
    conn.send_request(1)
    assert conn.read_response(1).status == 200
