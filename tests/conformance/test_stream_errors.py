"""RFC 9113 §8.1.1, §4.2: a peer's stream-level fault resets only its stream; an
oversized frame is refused from its header (beyond h2spec)."""

from __future__ import annotations

from hyperframe.frame import DataFrame, GoAwayFrame, RstStreamFrame

from .harness import ErrorCode, FrameType, H2Client, frame_bytes


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
    """Only the 9-byte header of a 16,385-byte DATA frame: GOAWAY(FRAME_SIZE_ERROR)
    arrives without the payload ever being sent (RFC 9113 §4.2)."""
    header = frame_bytes(FrameType.DATA, 0, 1, b"\x00" * 16_385)[:9]
    conn.send(conn.open_post(), header)
    goaway = conn.expect_connection_error(ErrorCode.FRAME_SIZE_ERROR)
    assert goaway is not None
