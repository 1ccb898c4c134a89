"""RFC 9113 §8.1.1, §4.2: a peer's stream-level fault resets only its stream; an
oversized frame is refused from its header (beyond h2spec)."""

from __future__ import annotations

from hyperframe.frame import ContinuationFrame, DataFrame, GoAwayFrame, HeadersFrame, RstStreamFrame

from .harness import ErrorCode, FrameType, H2Client, Setting, frame_bytes, request_headers


def test_body_over_content_length_resets_only_that_stream(conn: H2Client) -> None:
    """A DATA frame beyond the content-length: RST_STREAM(PROTOCOL_ERROR) on stream 1
    only (no GOAWAY), and a request on stream 3 of the same connection completes."""
    conn.send(conn.open_post(extra=[("content-length", "2")]), DataFrame(1, b"toolong"))
    rst = conn.expect_frame(RstStreamFrame, 1)
    assert rst.error_code == ErrorCode.PROTOCOL_ERROR
    conn.send_request(3)
    assert conn.read_response(3).status == 200
    assert not [e for e in conn.received if isinstance(e, GoAwayFrame)]


def test_frame_over_max_frame_size_refused_from_its_header(conn: H2Client) -> None:
    """Only the 9-byte header of a DATA frame one byte over the server's
    SETTINGS_MAX_FRAME_SIZE: GOAWAY(FRAME_SIZE_ERROR) arrives without the payload ever
    being sent (RFC 9113 §4.2)."""
    size = conn.server_settings.get(Setting.MAX_FRAME_SIZE, 16_384) + 1
    header = frame_bytes(FrameType.DATA, 0, 1, b"\x00" * size)[:9]
    conn.send(conn.open_post(), header)
    goaway = conn.expect_connection_error(ErrorCode.FRAME_SIZE_ERROR)
    assert goaway is not None


def _send_split(conn: H2Client, stream_id: int, block: bytes) -> None:
    """``block`` as HEADERS(END_STREAM) and as many CONTINUATION frames as 16 KiB needs."""
    frames = [block[i : i + 16_384] for i in range(0, len(block), 16_384)]
    first = HeadersFrame(
        stream_id, frames[0], flags=["END_STREAM"] + ([] if len(frames) > 1 else ["END_HEADERS"])
    )
    rest = [
        ContinuationFrame(stream_id, chunk, flags=["END_HEADERS"] if i == len(frames) - 2 else [])
        for i, chunk in enumerate(frames[1:])
    ]
    conn.send(first, *rest)


def test_oversized_header_list_gets_431_and_the_connection_serves_on(conn: H2Client) -> None:
    """A header list over our SETTINGS_MAX_HEADER_LIST_SIZE (64 KiB), spread over
    CONTINUATION frames: a 431 response on stream 1 only (RFC 9113 §10.5.1), no
    GOAWAY; stream 3, whose block indexes an entry added after the limit was
    crossed, completes (HPACK stayed in step: docs/errors.md, "On the wire")."""
    extra = [(f"x-big-{i}", "v" * 4000) for i in range(20)] + [("x-after", "tail")]
    _send_split(conn, 1, conn.encode_headers([*request_headers(), *extra]))
    assert conn.read_response(1).status == 431
    block = conn.encode_headers([*request_headers(), ("x-after", "tail")])
    assert len(block) < 20  # index references only
    conn.send_headers(3, block)
    assert conn.read_response(3).status == 200
    assert not [e for e in conn.received if isinstance(e, GoAwayFrame)]


def test_header_list_far_over_the_limit_is_a_connection_error(conn: H2Client) -> None:
    """Over four times the limit (``_h2.hpack.READ_ON_FACTOR``) the decoder stops reading:
    GOAWAY(ENHANCE_YOUR_CALM), as hpack's own limit did."""
    extra = [(f"x-big-{i}", "v" * 4000) for i in range(70)]
    _send_split(conn, 1, conn.encode_headers([*request_headers(), *extra]))
    goaway = conn.expect_connection_error(ErrorCode.ENHANCE_YOUR_CALM)
    assert goaway is not None
