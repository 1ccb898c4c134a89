"""RFC 9113 §4.2 at a SETTINGS_MAX_FRAME_SIZE above the initial value:
``serve --max-frame-size 1048576`` (the library's default, ``TransportConfig``).

h2spec's http2/4.2/3 HEADERS frame (five 4000-byte fields, about 17.5 KB) is within
that limit, so a server that advertised it answers the request: the case only
tests anything at 16 KiB (test_http2_4_2_rfc_frame_size.py), and a frame over the
larger limit is still refused.
"""

from __future__ import annotations

from .harness import UNKNOWN_TYPE, ErrorCode, H2Client, Setting, frame_bytes
from .test_http2_3_4 import H2SPEC_4_2_3_HEADERS

#: Appended to this module's ``trio-h2t serve`` command (conftest.py).
SERVE_ARGS = ("--max-frame-size", "1048576")
LARGE_FRAME_SIZE = 1024 * 1024


def test_4_2_server_settings_carry_the_large_frame_size(conn: H2Client) -> None:
    """The server's SETTINGS say 1 MiB."""
    assert conn.server_settings[Setting.MAX_FRAME_SIZE] == LARGE_FRAME_SIZE


def test_4_2_h2spec_headers_frame_within_advertised_max_frame_size(conn: H2Client) -> None:
    """RFC 9113 §4.2: h2spec http2/4.2/3's HEADERS frame (about 17.5 KB) is within the
    advertised 1 MiB, so it is answered."""
    frame = conn.headers_frame(1, H2SPEC_4_2_3_HEADERS)
    assert 16384 < len(frame.data) < LARGE_FRAME_SIZE
    conn.send(frame)
    conn.expect_headers(1)


def test_4_2_frame_over_the_large_frame_size_refused(conn: H2Client) -> None:
    """A stream-0 frame of an unknown type over 1 MiB is a connection error
    FRAME_SIZE_ERROR, refused from its 9-byte header."""
    conn.send(frame_bytes(UNKNOWN_TYPE, 0, 0, b"\x00" * (LARGE_FRAME_SIZE + 1)))
    conn.expect_connection_error(ErrorCode.FRAME_SIZE_ERROR)
