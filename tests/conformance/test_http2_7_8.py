"""RFC 9113 §7 (error codes) and §8 (HTTP semantics): h2spec ``http2/7`` and
``http2/8.1`` to ``8.1.2.6``.

A malformed request (§8.1.1) MUST be a stream error PROTOCOL_ERROR; §5.4.1 lets an
endpoint escalate any stream error to a connection error, so GOAWAY(PROTOCOL_ERROR)
is accepted too (as h2spec does). A response sent before the reset is allowed
(§8.1.1). Sections follow RFC 9113 (7540's 8.1.2.x became 8.1.1, 8.2, 8.3); the
h2spec id is in each docstring. Cases marked "beyond h2spec" check further MUSTs of
the same sections.
"""

from __future__ import annotations

import pytest
from hyperframe.frame import DataFrame, GoAwayFrame, PingFrame, RstStreamFrame

from .harness import ErrorCode, H2Client, request_headers

Headers = list[tuple[str, str]]


def expect_malformed(conn: H2Client, headers: Headers, stream_id: int = 1) -> None:
    """Send a request with ``headers`` (END_STREAM) and expect it rejected as
    malformed: a stream error PROTOCOL_ERROR (RFC 9113 §8.1.1)."""
    conn.send_headers(stream_id, headers)
    conn.expect_stream_error(stream_id, ErrorCode.PROTOCOL_ERROR)


################################################################
# §7 Error codes (h2spec http2/7)
################################################################


def test_7_goaway_with_unknown_error_code(conn: H2Client) -> None:
    """RFC 9113 §7: an unknown error code MUST NOT trigger special behaviour; h2spec
    expects the server to close the connection after the client's GOAWAY (h2spec
    http2/7/1)."""
    conn.send(GoAwayFrame(0, last_stream_id=0, error_code=0xFF))
    conn.expect_close()


def test_7_rst_stream_with_unknown_error_code(conn: H2Client) -> None:
    """RFC 9113 §7: RST_STREAM with an unknown error code is accepted like any other
    reset; the connection carries on (h2spec http2/7/2)."""
    conn.send(conn.open_post(), RstStreamFrame(1, error_code=0xFF), PingFrame(0, b"\x00" * 8))
    conn.expect_ping_ack(b"\x00" * 8)


################################################################
# §8.1 HTTP message framing (h2spec http2/8.1)
################################################################


def test_8_1_second_headers_without_end_stream(conn: H2Client) -> None:
    """RFC 9113 §8.1: a HEADERS frame after the request head without END_STREAM (a
    trailer section that does not end the stream) makes the request malformed
    (h2spec http2/8.1/1)."""
    conn.send(
        conn.open_post(),
        DataFrame(1, b"test"),
        conn.headers_frame(1, [("x-test", "ok")], end_stream=False),
    )
    conn.expect_stream_error(1, ErrorCode.PROTOCOL_ERROR)


def test_8_1_headers_after_trailers(conn: H2Client) -> None:
    """RFC 9113 §8.1/§5.1: after the trailers (END_STREAM) the stream is half-closed
    (remote); another HEADERS is a stream error STREAM_CLOSED (beyond h2spec)."""
    conn.send(
        conn.open_post(),
        DataFrame(1, b"test"),
        conn.headers_frame(1, [("x-test", "ok")]),
        conn.headers_frame(1, [("x-test", "again")]),
    )
    conn.expect_stream_error(1, ErrorCode.STREAM_CLOSED)


################################################################
# §8.1.1 Malformed messages (h2spec http2/8.1.2.6)
################################################################


def test_8_1_1_content_length_differs_from_data(conn: H2Client) -> None:
    """RFC 9113 §8.1.1: content-length 1 with 4 octets of DATA is malformed: stream
    error PROTOCOL_ERROR (h2spec http2/8.1.2.6/1)."""
    conn.send(
        conn.open_post(extra=[("content-length", "1")]),
        DataFrame(1, b"test", flags=["END_STREAM"]),
    )
    conn.expect_stream_error(1, ErrorCode.PROTOCOL_ERROR)


def test_8_1_1_content_length_differs_from_sum_of_data(conn: H2Client) -> None:
    """RFC 9113 §8.1.1: content-length 1 with two 4-octet DATA frames is malformed
    (h2spec http2/8.1.2.6/2)."""
    conn.send(
        conn.open_post(extra=[("content-length", "1")]),
        DataFrame(1, b"test"),
        DataFrame(1, b"test", flags=["END_STREAM"]),
    )
    conn.expect_stream_error(1, ErrorCode.PROTOCOL_ERROR)


def test_8_1_1_content_length_larger_than_body(conn: H2Client) -> None:
    """RFC 9113 §8.1.1: a body that ends short of its content-length (10 announced,
    4 sent) is malformed (beyond h2spec)."""
    conn.send(
        conn.open_post(extra=[("content-length", "10")]),
        DataFrame(1, b"test", flags=["END_STREAM"]),
    )
    conn.expect_stream_error(1, ErrorCode.PROTOCOL_ERROR)


def test_8_1_1_content_length_without_body(conn: H2Client) -> None:
    """RFC 9113 §8.1.1: a request ending on its HEADERS with content-length 5 has a
    0-octet body that differs from it: malformed (beyond h2spec)."""
    expect_malformed(conn, [*request_headers("POST"), ("content-length", "5")])


def test_8_1_1_content_length_differs_when_trailers_end_stream(conn: H2Client) -> None:
    """RFC 9113 §8.1.1: content-length 10 with 4 octets of DATA is malformed also when
    the trailer section ends the stream (beyond h2spec)."""
    conn.send(
        conn.open_post(extra=[("content-length", "10")]),
        DataFrame(1, b"test"),
        conn.headers_frame(1, [("x-test", "ok")]),
    )
    conn.expect_stream_error(1, ErrorCode.PROTOCOL_ERROR)


def test_8_1_1_trailers_with_pseudo_header(conn: H2Client) -> None:
    """RFC 9113 §8.1: trailers MUST NOT include pseudo-header fields; a trailer
    section (with END_STREAM) carrying :method is malformed (beyond h2spec, which
    sends it without END_STREAM)."""
    conn.send(
        conn.open_post(),
        DataFrame(1, b"test"),
        conn.headers_frame(1, [(":method", "POST")]),
    )
    conn.expect_stream_error(1, ErrorCode.PROTOCOL_ERROR)


def test_8_1_1_matching_content_length_accepted(conn: H2Client) -> None:
    """RFC 9113 §8.1.1: a content-length equal to the DATA total is valid and the
    body is echoed (beyond h2spec)."""
    conn.send(
        conn.open_post(extra=[("content-length", "8")]),
        DataFrame(1, b"test"),
        DataFrame(1, b"test", flags=["END_STREAM"]),
    )
    response = conn.read_response(1)
    assert response.status == 200
    assert response.body == b"testtest"


################################################################
# §8.2 HTTP fields (h2spec http2/8.1.2, 8.1.2.2)
################################################################


def test_8_2_uppercase_field_name(conn: H2Client) -> None:
    """RFC 9113 §8.2: field names MUST be lowercase; an uppercase name is malformed
    (h2spec http2/8.1.2/1)."""
    expect_malformed(conn, [*request_headers(), ("X-TEST", "ok")])


INVALID_FIELDS = {
    "name-with-space": ("x test", "ok"),
    "name-with-colon": ("x:test", "ok"),
    "name-with-nul": ("x\x00test", "ok"),
    "name-with-del": ("x\x7ftest", "ok"),
    "name-with-non-ascii": ("x\xe9test", "ok"),
    "empty-name": ("", "ok"),
    "value-with-nul": ("x-test", "o\x00k"),
    "value-with-cr": ("x-test", "o\rk"),
    "value-with-lf": ("x-test", "o\nk"),
    "value-with-leading-space": ("x-test", " ok"),
    "value-with-trailing-tab": ("x-test", "ok\t"),
}


@pytest.mark.parametrize("field", INVALID_FIELDS.values(), ids=INVALID_FIELDS.keys())
def test_8_2_1_invalid_field(conn: H2Client, field: tuple[str, str]) -> None:
    """RFC 9113 §8.2.1: a field name with a character outside the allowed ranges, or a
    value with NUL, CR, LF or surrounding whitespace, makes the request malformed
    (beyond h2spec)."""
    expect_malformed(conn, [*request_headers(), field])


CONNECTION_SPECIFIC = {
    "connection": "keep-alive",
    "keep-alive": "timeout=5",
    "proxy-connection": "keep-alive",
    "transfer-encoding": "chunked",
    "upgrade": "h2c",
}


@pytest.mark.parametrize(
    ("name", "value"), CONNECTION_SPECIFIC.items(), ids=CONNECTION_SPECIFIC.keys()
)
def test_8_2_2_connection_specific_field(conn: H2Client, name: str, value: str) -> None:
    """RFC 9113 §8.2.2: a connection-specific field (Connection, Keep-Alive,
    Proxy-Connection, Transfer-Encoding, Upgrade) makes the request malformed
    (h2spec http2/8.1.2.2/1 checks ``connection``)."""
    expect_malformed(conn, [*request_headers(), (name, value)])


def test_8_2_2_te_other_than_trailers(conn: H2Client) -> None:
    """RFC 9113 §8.2.2: TE with any value other than "trailers" makes the request
    malformed (h2spec http2/8.1.2.2/2)."""
    expect_malformed(conn, [*request_headers(), ("te", "trailers, deflate")])


def test_8_2_2_te_trailers_accepted(conn: H2Client) -> None:
    """RFC 9113 §8.2.2: TE: trailers is allowed (beyond h2spec)."""
    conn.send_headers(1, [*request_headers(), ("te", "trailers")])
    assert conn.read_response(1).status == 200


################################################################
# §8.3 Pseudo-header fields (h2spec http2/8.1.2.1)
################################################################


def test_8_3_unknown_pseudo_header(conn: H2Client) -> None:
    """RFC 9113 §8.3: an undefined pseudo-header field makes the request malformed
    (h2spec http2/8.1.2.1/1)."""
    expect_malformed(conn, [*request_headers(), (":test", "ok")])


def test_8_3_response_pseudo_header_in_request(conn: H2Client) -> None:
    """RFC 9113 §8.3: a response pseudo-header (:status) in a request makes it
    malformed (h2spec http2/8.1.2.1/2)."""
    expect_malformed(conn, [*request_headers(), (":status", "200")])


def test_8_3_pseudo_header_in_trailers(conn: H2Client) -> None:
    """RFC 9113 §8.3: pseudo-header fields MUST NOT appear in trailers (h2spec
    http2/8.1.2.1/3, trailers without END_STREAM as h2spec sends them)."""
    conn.send(
        conn.open_post(),
        DataFrame(1, b"test"),
        conn.headers_frame(1, [(":method", "POST")], end_stream=False),
    )
    conn.expect_stream_error(1, ErrorCode.PROTOCOL_ERROR)


def test_8_3_pseudo_header_after_regular_field(conn: H2Client) -> None:
    """RFC 9113 §8.3: a pseudo-header after a regular field makes the request
    malformed (h2spec http2/8.1.2.1/4)."""
    expect_malformed(conn, [("x-test", "ok"), *request_headers()])


################################################################
# §8.3.1 Request pseudo-header fields (h2spec http2/8.1.2.3)
################################################################


def without(name: str) -> Headers:
    return [(k, v) for k, v in request_headers() if k != name]


def test_8_3_1_empty_path(conn: H2Client) -> None:
    """RFC 9113 §8.3.1: :path MUST NOT be empty for "http" URIs (h2spec
    http2/8.1.2.3/1)."""
    expect_malformed(conn, [(k, "" if k == ":path" else v) for k, v in request_headers()])


@pytest.mark.parametrize("name", [":method", ":scheme", ":path"])
def test_8_3_1_missing_pseudo_header(conn: H2Client, name: str) -> None:
    """RFC 9113 §8.3.1: a request without :method, :scheme or :path is malformed
    (h2spec http2/8.1.2.3/2-4)."""
    expect_malformed(conn, without(name))


@pytest.mark.parametrize(
    ("name", "value"),
    [(":method", "GET"), (":scheme", "http"), (":path", "/"), (":authority", "127.0.0.1")],
)
def test_8_3_1_duplicated_pseudo_header(conn: H2Client, name: str, value: str) -> None:
    """RFC 9113 §8.3: a repeated pseudo-header field makes the request malformed
    (h2spec http2/8.1.2.3/5-7; :authority beyond h2spec)."""
    headers = request_headers()
    index = max(i for i, (k, _) in enumerate(headers) if k.startswith(":"))
    headers.insert(index + 1, (name, value))
    expect_malformed(conn, headers)


def test_8_3_1_options_asterisk_is_valid(conn: H2Client) -> None:
    """RFC 9113 §8.3.1: OPTIONS with :path "*" is a valid request: answered, not reset
    (beyond h2spec)."""
    conn.send_headers(1, request_headers("OPTIONS", "*"))
    response = conn.read_response(1)
    assert response.reset_code in (None, ErrorCode.NO_ERROR)
    assert response.headers


################################################################
# §8.5 CONNECT (beyond h2spec)
################################################################


def test_8_5_connect_with_scheme_and_path(conn: H2Client) -> None:
    """RFC 9113 §8.5: a CONNECT request MUST omit :scheme and :path; with them it is
    malformed (beyond h2spec)."""
    expect_malformed(conn, [(":method", "CONNECT"), *request_headers()[1:]])


def test_8_5_connect_without_authority(conn: H2Client) -> None:
    """RFC 9113 §8.5: a CONNECT request MUST carry :authority; without it it is
    malformed (beyond h2spec)."""
    expect_malformed(conn, [(":method", "CONNECT")])
