"""RFC 9113 §4.2 at the RFC's SETTINGS_MAX_FRAME_SIZE, ``trio-h2t serve``'s default.

h2spec's http2/4.2/3 sends a HEADERS frame of about 17.5 KB whatever the server
advertises, so it only tests anything against a server that advertises 16 KiB (the
RFC's initial value), which is what ``trio-h2t serve`` advertises unless told
otherwise (``SERVE_FRAME_SIZE`` in trio_h2t/_cli.py). This module sends that frame, and
its siblings, to the plain command; test_http2_4_2_large_frame_size.py checks that a
server started with ``--max-frame-size 1048576`` answers it.
"""

from __future__ import annotations

import pytest
from hyperframe.frame import ContinuationFrame, DataFrame

from .harness import (
    END_HEADERS,
    UNKNOWN_TYPE,
    ErrorCode,
    FrameType,
    H2Client,
    Setting,
    frame_bytes,
    request_headers,
)
from .test_http2_3_4 import DUMMY, H2SPEC_4_2_3_HEADERS

#: RFC 9113 §6.5.2: the initial (and smallest) SETTINGS_MAX_FRAME_SIZE.
RFC_FRAME_SIZE = 16384


def test_4_2_advertises_rfc_frame_size(conn: H2Client) -> None:
    """``serve``'s default frame size is the initial value, so the server's SETTINGS
    leave it out (or say 16384)."""
    assert conn.server_settings.get(Setting.MAX_FRAME_SIZE, RFC_FRAME_SIZE) == RFC_FRAME_SIZE


def test_4_2_data_frame_of_rfc_frame_size(conn: H2Client) -> None:
    """RFC 9113 §4.2: a 16384-byte DATA frame is accepted (h2spec http2/4.2/1)."""
    conn.send(
        conn.headers_frame(1, request_headers("POST"), end_stream=False),
        DataFrame(1, b"x" * RFC_FRAME_SIZE, flags=["END_STREAM"]),
    )
    conn.expect_headers(1)


def test_4_2_data_frame_over_rfc_frame_size(conn: H2Client) -> None:
    """RFC 9113 §4.2: a 16385-byte DATA frame is a FRAME_SIZE_ERROR (h2spec http2/4.2/2)."""
    conn.send(
        conn.headers_frame(1, request_headers("POST"), end_stream=False),
        DataFrame(1, b"x" * (RFC_FRAME_SIZE + 1), flags=["END_STREAM"]),
    )
    conn.expect_stream_error(1, ErrorCode.FRAME_SIZE_ERROR)


def test_4_2_h2spec_headers_frame_over_rfc_frame_size(conn: H2Client) -> None:
    """RFC 9113 §4.2: h2spec http2/4.2/3's HEADERS frame (about 17.5 KB) over 16 KiB is
    a connection error FRAME_SIZE_ERROR, not answered."""
    frame = conn.headers_frame(1, H2SPEC_4_2_3_HEADERS)
    assert RFC_FRAME_SIZE < len(frame.data) < 2 * RFC_FRAME_SIZE
    conn.send(frame)
    conn.expect_connection_error(ErrorCode.FRAME_SIZE_ERROR)


def test_4_2_continuation_frame_over_rfc_frame_size(conn: H2Client) -> None:
    """RFC 9113 §4.2: a CONTINUATION frame over 16 KiB is a connection error
    FRAME_SIZE_ERROR (beyond h2spec)."""
    rest = conn.encode_headers([(f"x-dummy{i}", DUMMY) for i in range(5)])
    assert RFC_FRAME_SIZE < len(rest) < 2 * RFC_FRAME_SIZE
    conn.send(
        conn.headers_frame(1, request_headers(), end_headers=False),
        ContinuationFrame(1, rest, flags=["END_HEADERS"]),
    )
    conn.expect_connection_error(ErrorCode.FRAME_SIZE_ERROR)


@pytest.mark.parametrize(
    ("frame_type", "flags", "stream_id"),
    [(FrameType.PUSH_PROMISE, END_HEADERS, 1), (UNKNOWN_TYPE, 0, 0)],
    ids=["push-promise", "unknown-type-stream-0"],
)
def test_4_2_other_frames_over_rfc_frame_size(
    conn: H2Client, frame_type: int, flags: int, stream_id: int
) -> None:
    """RFC 9113 §4.2: a PUSH_PROMISE (field block) or a stream-0 frame of an unknown
    type over 16 KiB is a connection error FRAME_SIZE_ERROR, refused from its
    9-byte header (beyond h2spec)."""
    conn.send(frame_bytes(frame_type, flags, stream_id, b"\x00" * (RFC_FRAME_SIZE + 1)))
    conn.expect_connection_error(ErrorCode.FRAME_SIZE_ERROR)
