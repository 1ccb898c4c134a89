"""h2spec's ``generic`` group: a well-behaved client's frames are all accepted.

Each case names its h2spec id (``generic/<group>/<n>``). These are the positive
counterparts of the ``http2`` cases: every frame type, flag and HPACK representation
a client may legitimately send must be accepted, and requests must be answered.
The last section adds HTTP exchanges h2spec does not check (bodies, concurrency).
"""

from __future__ import annotations

import pytest
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

from .conftest import INDEX_BODY
from .harness import (
    END_STREAM,
    PADDED,
    PREFACE,
    ErrorCode,
    FrameType,
    H2Client,
    Setting,
    frame_bytes,
    request_headers,
)

PING_DATA = b"\x00" * 8


################################################################
# generic/1: Starting HTTP/2
################################################################


def test_1_client_preface_answered_with_settings(raw_conn: H2Client) -> None:
    """RFC 9113 §3.4: the server's preface is a SETTINGS frame, the first frame it
    sends (generic/1/1)."""
    raw_conn.send(PREFACE, SettingsFrame(0, {Setting.INITIAL_WINDOW_SIZE: 65535}))
    first = raw_conn.expect_frame(SettingsFrame)
    assert raw_conn.received[0] is first
    assert "ACK" not in first.flags


################################################################
# generic/2: Streams and Multiplexing
################################################################


def test_2_1_priority_on_idle_stream(conn: H2Client) -> None:
    """RFC 9113 §5.1: PRIORITY is allowed on an idle stream (generic/2/1)."""
    conn.send(PriorityFrame(1, depends_on=0, stream_weight=255), PingFrame(0, PING_DATA))
    conn.expect_ping_ack(PING_DATA)


def test_2_2_window_update_on_half_closed_remote(conn: H2Client) -> None:
    """RFC 9113 §5.1: WINDOW_UPDATE is allowed on a half-closed (remote) stream, and
    opens it for DATA (generic/2/2)."""
    conn.send(
        SettingsFrame(0, {Setting.INITIAL_WINDOW_SIZE: 0}),
        conn.headers_frame(1, request_headers()),
        WindowUpdateFrame(1, window_increment=1),
    )
    conn.expect_frame(DataFrame, stream_id=1)


def test_2_3_priority_on_half_closed_remote(conn: H2Client) -> None:
    """RFC 9113 §5.1: PRIORITY is allowed on a half-closed (remote) stream
    (generic/2/3)."""
    conn.send(
        SettingsFrame(0, {Setting.INITIAL_WINDOW_SIZE: 0}),
        conn.headers_frame(1, request_headers()),
        PriorityFrame(1, depends_on=0, stream_weight=255),
        WindowUpdateFrame(1, window_increment=1),
    )
    conn.expect_frame(DataFrame, stream_id=1)


def test_2_4_rst_stream_on_half_closed_remote(conn: H2Client) -> None:
    """RFC 9113 §5.1: RST_STREAM is allowed on a half-closed (remote) stream, and the
    connection carries on (generic/2/4)."""
    conn.send(
        conn.headers_frame(1, request_headers()),
        RstStreamFrame(1, error_code=ErrorCode.CANCEL),
        PingFrame(0, PING_DATA),
    )
    conn.expect_ping_ack(PING_DATA)


def test_2_5_priority_on_closed_stream(conn: H2Client) -> None:
    """RFC 9113 §5.1: PRIORITY is allowed on a closed stream (generic/2/5)."""
    conn.send_request(1)
    conn.read_response(1)
    conn.send(PriorityFrame(1, depends_on=0, stream_weight=255), PingFrame(0, PING_DATA))
    conn.expect_ping_ack(PING_DATA)


################################################################
# generic/3: Frame Definitions
################################################################


def test_3_1_1_data_frame(conn: H2Client) -> None:
    """RFC 9113 §6.1: a DATA frame carrying a request body is accepted
    (generic/3.1/1)."""
    conn.send(conn.open_post(), DataFrame(1, b"test", flags=["END_STREAM"]))
    conn.expect_headers(1)


def test_3_1_2_multiple_data_frames(conn: H2Client) -> None:
    """RFC 9113 §6.1: a body in several DATA frames is accepted (generic/3.1/2)."""
    conn.send(conn.open_post(), DataFrame(1, b"test"), DataFrame(1, b"test", flags=["END_STREAM"]))
    conn.expect_headers(1)


def test_3_1_3_data_frame_with_padding(conn: H2Client) -> None:
    """RFC 9113 §6.1: a padded DATA frame is accepted and the padding is not part of
    the body (generic/3.1/3; the padding is h2spec's, non-zero)."""
    payload = bytes([len(b"padded")]) + b"test" + b"padded"
    conn.send(conn.open_post(), frame_bytes(FrameType.DATA, END_STREAM | PADDED, 1, payload))
    response = conn.read_response(1)
    assert response.status == 200
    assert response.body == b"test"


def test_3_2_1_headers_frame(conn: H2Client) -> None:
    """RFC 9113 §6.2: a HEADERS frame opens a stream (generic/3.2/1)."""
    conn.send_request(1)
    conn.expect_headers(1)


def test_3_2_2_headers_frame_with_padding(conn: H2Client) -> None:
    """RFC 9113 §6.2: a padded HEADERS frame is accepted (generic/3.2/2)."""
    block = conn.encode_headers(request_headers())
    conn.send(HeadersFrame(1, block, pad_length=8, flags=["END_STREAM", "END_HEADERS", "PADDED"]))
    conn.expect_headers(1)


def test_3_2_3_headers_frame_with_priority(conn: H2Client) -> None:
    """RFC 9113 §6.2: a HEADERS frame with the (deprecated) PRIORITY flag is accepted
    (generic/3.2/3)."""
    block = conn.encode_headers(request_headers())
    conn.send(
        HeadersFrame(
            1,
            block,
            depends_on=0,
            stream_weight=255,
            flags=["END_STREAM", "END_HEADERS", "PRIORITY"],
        )
    )
    conn.expect_headers(1)


def test_3_3_1_priority_weight_1(conn: H2Client) -> None:
    """RFC 9113 §6.3: PRIORITY with weight 1 (wire value 0) is accepted
    (generic/3.3/1)."""
    conn.send(
        PriorityFrame(1, depends_on=0, stream_weight=0), conn.headers_frame(1, request_headers())
    )
    conn.expect_headers(1)


def test_3_3_2_priority_weight_256(conn: H2Client) -> None:
    """RFC 9113 §6.3: PRIORITY with weight 256 (wire value 255) is accepted
    (generic/3.3/2)."""
    conn.send(
        PriorityFrame(1, depends_on=0, stream_weight=255), conn.headers_frame(1, request_headers())
    )
    conn.expect_headers(1)


def test_3_3_3_priority_with_dependency(conn: H2Client) -> None:
    """RFC 9113 §6.3: PRIORITY with a stream dependency is accepted (generic/3.3/3)."""
    conn.send(
        PriorityFrame(3, depends_on=1, stream_weight=0), conn.headers_frame(1, request_headers())
    )
    conn.expect_headers(1)


def test_3_3_4_priority_exclusive(conn: H2Client) -> None:
    """RFC 9113 §6.3: PRIORITY with the exclusive bit is accepted (generic/3.3/4)."""
    conn.send(
        PriorityFrame(1, depends_on=0, stream_weight=0, exclusive=True),
        conn.headers_frame(1, request_headers()),
    )
    conn.expect_headers(1)


def test_3_3_5_priority_on_idle_stream_then_lower_stream(conn: H2Client) -> None:
    """RFC 9113 §6.3: PRIORITY for idle stream 3 does not open it, so HEADERS on the
    lower stream 1 is still valid (generic/3.3/5)."""
    conn.send(
        PriorityFrame(3, depends_on=0, stream_weight=255), conn.headers_frame(1, request_headers())
    )
    conn.expect_headers(1)


def test_3_4_rst_stream(conn: H2Client) -> None:
    """RFC 9113 §6.4: RST_STREAM on an open stream is accepted (generic/3.4/1)."""
    conn.send(conn.open_post(), RstStreamFrame(1, error_code=ErrorCode.CANCEL))
    conn.ping()


def test_3_5_settings_with_every_parameter(conn: H2Client) -> None:
    """RFC 9113 §6.5: a SETTINGS frame with all six defined parameters is
    acknowledged (generic/3.5/1)."""
    conn.send(
        SettingsFrame(
            0,
            {
                Setting.HEADER_TABLE_SIZE: 4096,
                Setting.ENABLE_PUSH: 1,
                Setting.MAX_CONCURRENT_STREAMS: 100,
                Setting.INITIAL_WINDOW_SIZE: 65535,
                Setting.MAX_FRAME_SIZE: 16384,
                Setting.MAX_HEADER_LIST_SIZE: 100,
            },
        )
    )
    conn.expect_settings_ack()


def test_3_7_ping(conn: H2Client) -> None:
    """RFC 9113 §6.7: a PING is answered (generic/3.7/1)."""
    conn.send(PingFrame(0, PING_DATA))
    conn.expect_ping_ack(PING_DATA)


def test_3_8_goaway(conn: H2Client) -> None:
    """RFC 9113 §6.8: after the client's GOAWAY (last stream 0, NO_ERROR) with no
    stream open, the server closes the connection (generic/3.8/1)."""
    conn.send(
        GoAwayFrame(0, last_stream_id=0, error_code=ErrorCode.NO_ERROR, additional_data=b"h2spec")
    )
    conn.expect_close()


def test_3_9_1_window_update_connection(conn: H2Client) -> None:
    """RFC 9113 §6.9: WINDOW_UPDATE on stream 0 is accepted (generic/3.9/1)."""
    conn.send(WindowUpdateFrame(0, window_increment=1), PingFrame(0, PING_DATA))
    conn.expect_ping_ack(PING_DATA)


def test_3_9_2_window_update_stream(conn: H2Client) -> None:
    """RFC 9113 §6.9: WINDOW_UPDATE on an open stream is accepted (generic/3.9/2)."""
    conn.send(conn.headers_frame(1, request_headers()), WindowUpdateFrame(1, window_increment=1))
    conn.expect_headers(1)


def test_3_10_1_continuation(conn: H2Client) -> None:
    """RFC 9113 §6.10: a header block split over HEADERS + CONTINUATION is accepted
    (generic/3.10/1)."""
    block = conn.encode_headers(request_headers())
    conn.send(
        HeadersFrame(1, block[:3], flags=["END_STREAM"]),
        ContinuationFrame(1, block[3:], flags=["END_HEADERS"]),
    )
    conn.expect_headers(1)


def test_3_10_2_multiple_continuation(conn: H2Client) -> None:
    """RFC 9113 §6.10: a header block split over several CONTINUATION frames is
    accepted (generic/3.10/2)."""
    block = conn.encode_headers(request_headers())
    conn.send(
        HeadersFrame(1, block[:2], flags=["END_STREAM"]),
        ContinuationFrame(1, block[2:4]),
        ContinuationFrame(1, block[4:6]),
        ContinuationFrame(1, block[6:], flags=["END_HEADERS"]),
    )
    conn.expect_headers(1)


################################################################
# generic/4: HTTP Message Exchanges
################################################################


def test_4_1_get(conn: H2Client) -> None:
    """RFC 9113 §8.1: a GET is answered on its stream: 200 with the file
    (generic/4/1)."""
    conn.send_request(1)
    response = conn.read_response(1)
    assert response.status == 200
    assert response.body == INDEX_BODY
    assert response.reset_code is None


def test_4_2_head(conn: H2Client) -> None:
    """RFC 9113 §8.1: a HEAD is answered with headers and no body (generic/4/2)."""
    conn.send_request(1, "HEAD")
    response = conn.read_response(1, head=True)
    assert response.status == 200
    assert response.body == b""
    assert (b"content-length", str(len(INDEX_BODY)).encode()) in response.headers


def test_4_3_post(conn: H2Client) -> None:
    """RFC 9113 §8.1: a POST is answered, here with its body echoed (generic/4/3)."""
    conn.send(conn.open_post(), DataFrame(1, b"test", flags=["END_STREAM"]))
    response = conn.read_response(1)
    assert response.status == 200
    assert response.body == b"test"


def test_4_4_post_with_trailers(conn: H2Client) -> None:
    """RFC 9113 §8.1: a POST ending in a trailer section is answered, with the
    trailers echoed (generic/4/4)."""
    conn.send(
        conn.open_post(extra=[("trailer", "x-test")]),
        DataFrame(1, b"test"),
        conn.headers_frame(1, [("x-test", "ok")]),
    )
    response = conn.read_response(1)
    assert response.status == 200
    assert response.body == b"test"
    assert response.trailers == [(b"x-test", b"ok")]


################################################################
# generic/5: HPACK (each representation appended to a valid request block)
################################################################

#: h2spec generic/5/1-13: each representation is appended to a valid request block.
#: h2spec labels 5/2, 5/3, 5/6, 5/7, 5/10 and 5/11 "indexed name", but their bytes
#: carry "user-agent" as a literal name; the "really indexed" entries below (not in
#: h2spec) use the static table's name index 58 (user-agent).
HPACK_REPRESENTATIONS = {
    # RFC 7541 §6.1: indexed field (62 - 4 = static index 58, user-agent: "").
    "5-1-indexed": b"\xba",
    # §6.2.1: literal with incremental indexing (user-agent / x-test: h2spec).
    "5-2-incremental-literal-name-huffman": (
        b"\x40\x87\xb5\x05\xb1\x61\xcc\x5a\x93\x84\x9c\x48\xac\xa4"
    ),
    "5-3-incremental-literal-name": b"\x40\x0auser-agent\x06h2spec",
    "5-4-incremental-new-name": b"\x40\x06x-test\x06h2spec",
    "5-5-incremental-new-name-huffman": b"\x40\x85\xf2\xb2\x4a\x84\xff\x84\x9c\x48\xac\xa4",
    # §6.2.2: literal without indexing.
    "5-6-without-indexing-literal-name": b"\x00\x0auser-agent\x06h2spec",
    "5-7-without-indexing-literal-name-huffman": (
        b"\x00\x87\xb5\x05\xb1\x61\xcc\x5a\x93\x84\x9c\x48\xac\xa4"
    ),
    "5-8-without-indexing-new-name": b"\x00\x06x-test\x06h2spec",
    "5-9-without-indexing-new-name-huffman": b"\x00\x85\xf2\xb2\x4a\x84\xff\x84\x9c\x48\xac\xa4",
    # §6.2.3: literal never indexed.
    "5-10-never-indexed-literal-name": b"\x10\x0auser-agent\x06h2spec",
    "5-11-never-indexed-literal-name-huffman": (
        b"\x10\x87\xb5\x05\xb1\x61\xcc\x5a\x93\x84\x9c\x48\xac\xa4"
    ),
    "5-12-never-indexed-new-name": b"\x10\x06x-test\x06h2spec",
    "5-13-never-indexed-new-name-huffman": b"\x10\x85\xf2\xb2\x4a\x84\xff\x84\x9c\x48\xac\xa4",
    # Not in h2spec: the three literal forms with a real indexed name (index 58).
    "extra-incremental-indexed-name": b"\x7a\x06h2spec",
    "extra-without-indexing-indexed-name": b"\x0f\x2b\x06h2spec",
    "extra-never-indexed-indexed-name": b"\x1f\x2b\x06h2spec",
}


@pytest.mark.parametrize(
    "representation", HPACK_REPRESENTATIONS.values(), ids=HPACK_REPRESENTATIONS.keys()
)
def test_5_hpack_representation(conn: H2Client, representation: bytes) -> None:
    """RFC 7541 §6: every field representation is decoded and the request answered
    (generic/5/1-13)."""
    block = conn.encode_headers(request_headers()) + representation
    conn.send_headers(1, block)
    conn.expect_headers(1)


def test_5_14_dynamic_table_size_update(conn: H2Client) -> None:
    """RFC 7541 §6.3: a dynamic table size update (to 0) at the start of a block is
    accepted (generic/5/14)."""
    conn.send_headers(1, b"\x20" + conn.encode_headers(request_headers()))
    conn.expect_headers(1)


def test_5_15_multiple_dynamic_table_size_updates(conn: H2Client) -> None:
    """RFC 7541 §4.2: two size updates (0, then 4096) at the start of a block are
    accepted (generic/5/15)."""
    conn.send_headers(1, b"\x20\x3f\xe1\x1f" + conn.encode_headers(request_headers()))
    conn.expect_headers(1)


################################################################
# HTTP exchanges beyond h2spec
################################################################


def test_concurrent_streams(conn: H2Client) -> None:
    """RFC 9113 §5: ten requests in flight at once are all answered, each on its own
    stream."""
    sids = list(range(1, 21, 2))
    conn.send(*(conn.headers_frame(sid, request_headers()) for sid in sids))
    for sid, response in conn.read_responses(sids).items():
        assert response.status == 200, sid
        assert response.body == INDEX_BODY, sid


def test_post_echo_of_frame_sized_body(conn: H2Client) -> None:
    """RFC 9113 §8.1: a 40 KB body in 16 KiB DATA frames is echoed intact (within the
    default windows both ways)."""
    body = bytes(range(256)) * 160
    frames = [DataFrame(1, body[i : i + 16384]) for i in range(0, len(body), 16384)]
    frames[-1].flags.add("END_STREAM")
    conn.send(conn.open_post(extra=[("content-length", str(len(body)))]), *frames)
    response = conn.read_response(1)
    assert response.status == 200
    assert response.body == body


def test_missing_file_is_404(conn: H2Client) -> None:
    """RFC 9113 §8.1: an error status is still a complete response."""
    conn.send_request(1, "GET", "/no-such-file")
    response = conn.read_response(1)
    assert response.status == 404
    assert response.reset_code is None


def test_many_streams_in_sequence(conn: H2Client) -> None:
    """RFC 9113 §5.1.1: stream ids keep increasing over many requests on one
    connection (more than the server's pruning threshold of closed streams)."""
    for sid in range(1, 301, 2):
        conn.send_request(sid, "HEAD")
        assert conn.read_response(sid, head=True).status == 200
    conn.ping()
