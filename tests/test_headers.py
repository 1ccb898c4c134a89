"""``trio_h2t._headers``: ``validate_received`` accepts exactly the blocks h2 accepts.

h2's inbound pipeline (``h2.utilities.validate_headers``, inbound validation on,
normalisation off) is the reference: on every generated block and every kind
(request, response, trailers), our one-pass check must raise ``ProtocolError`` if and
only if h2's does. ``validate_to_send`` gives the same verdicts as ``ValueError``.
"""

from __future__ import annotations

import pytest
from h2.exceptions import ProtocolError
from h2.utilities import HeaderValidationFlags, validate_headers
from hypothesis import example, given, strategies as st

from trio_h2t import _headers
from trio_h2t._headers import validate_received, validate_to_send

KINDS = ["request", "response", "trailer"]

# Names and values chosen to reach every rule, plus arbitrary bytes.
NAMES = st.one_of(
    st.sampled_from(
        [
            b":method",
            b":scheme",
            b":authority",
            b":path",
            b":status",
            b":protocol",
            b":custom",
            b":",
            b"::path",
            b"host",
            b"te",
            b"connection",
            b"keep-alive",
            b"transfer-encoding",
            b"content-length",
            b"content-type",
            b"grpc-status",
            b"x-ok",
            b"X-Upper",
            b"x:colon",
            b"x y",
            b"",
            b"\x7f",
            b"caf\xc3\xa9",
        ]
    ),
    st.binary(max_size=6),
)
VALUES = st.one_of(
    st.sampled_from(
        [
            b"",
            b"GET",
            b"CONNECT",
            b"http",
            b"/",
            b"200",
            b"100",
            b"x",
            b"y",
            b"trailers",
            b"Trailers",
            b"gzip",
            b" x",
            b"x\t",
            b"a\x00b",
            b"a\nb",
            b"a\rb",
            b"\xff",
        ]
    ),
    st.binary(max_size=6),
)
HEADERS = st.lists(st.tuples(NAMES, VALUES), max_size=8)

REQUEST = [(b":method", b"GET"), (b":scheme", b"http"), (b":authority", b"x"), (b":path", b"/")]


def h2_accepts(headers: list[tuple[bytes, bytes]], kind: str) -> bool:
    flags = HeaderValidationFlags(
        is_client=kind != "request",
        is_trailer=kind == "trailer",
        is_response_header=kind == "response",
        is_push_promise=False,
    )
    try:
        list(validate_headers(headers, flags))
    except ProtocolError:
        return False
    return True


def we_accept(headers: list[tuple[bytes, bytes]], kind: str) -> bool:
    try:
        validate_received(headers, response=kind == "response", trailer=kind == "trailer")
    except ProtocolError:
        return False
    return True


def with_valid_prefix(kind: str, rest: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    if kind == "request":
        return REQUEST + rest
    if kind == "response":
        return [(b":status", b"200"), *rest]
    return rest


@pytest.mark.parametrize("kind", KINDS)
@given(headers=HEADERS)
def test_same_verdict_as_h2_on_any_block(kind: str, headers: list[tuple[bytes, bytes]]) -> None:
    assert we_accept(headers, kind) == h2_accepts(headers, kind)


@pytest.mark.parametrize("kind", KINDS)
@given(rest=HEADERS)
@example(rest=[(b"host", b"x")])
@example(rest=[(b"host", b"y")])
@example(rest=[(b"host", b"x"), (b"host", b"x")])
@example(rest=[(b"te", b"trailers")])
@example(rest=[(b"te", b"gzip")])
def test_same_verdict_as_h2_after_a_valid_prefix(
    kind: str, rest: list[tuple[bytes, bytes]]
) -> None:
    headers = with_valid_prefix(kind, rest)
    assert we_accept(headers, kind) == h2_accepts(headers, kind)


@pytest.mark.parametrize(
    ("kind", "headers", "ok"),
    [
        ("request", REQUEST, True),
        ("request", [*REQUEST, (b"te", b"trailers"), (b"grpc-timeout", b"1S")], True),
        ("request", [(b":method", b"CONNECT"), (b":authority", b"x:1")], True),
        ("request", [(b":method", b"CONNECT"), (b":authority", b"x"), (b":path", b"/")], False),
        (
            "request",
            [
                (b":method", b"CONNECT"),
                (b":protocol", b"websocket"),
                (b":scheme", b"http"),
                (b":path", b"/"),
                (b":authority", b"x"),
            ],
            True,
        ),
        ("request", [(b":method", b"GET"), (b":scheme", b"http"), (b":path", b"/")], False),
        ("request", [*REQUEST[:3], (b":path", b"")], False),
        ("request", [*REQUEST, (b"host", b"y")], False),
        ("request", [*REQUEST, (b"Host", b"x")], False),
        ("request", [*REQUEST, (b"connection", b"close")], False),
        ("request", [*REQUEST, (b"x", b" padded")], False),
        ("request", [(b"x", b"1"), *REQUEST], False),
        ("response", [(b":status", b"200"), (b"content-type", b"text/plain")], True),
        ("response", [(b":status", b"200"), (b":path", b"/")], False),
        ("response", [(b"content-type", b"text/plain")], False),
        ("trailer", [(b"grpc-status", b"0"), (b"grpc-message", b"")], True),
        ("trailer", [(b":status", b"200")], False),
    ],
)
def test_known_blocks(kind: str, headers: list[tuple[bytes, bytes]], ok: bool) -> None:
    assert we_accept(headers, kind) is ok
    assert h2_accepts(headers, kind) is ok


@pytest.mark.parametrize("kind", KINDS)
@given(rest=HEADERS)
def test_validate_to_send_gives_the_same_verdicts_as_value_error(
    kind: str, rest: list[tuple[bytes, bytes]]
) -> None:
    headers = with_valid_prefix(kind, rest)
    response, trailer = kind == "response", kind == "trailer"
    lengths = [value for name, value in headers if name == b"content-length"]
    # A block we send must also carry a usable content-length (its body is held to
    # it, _headers.body_rule): one decimal number, however often it is repeated.
    bad_length = not trailer and (
        not all(v.isdigit() for v in lengths) or len({int(v) for v in lengths}) > 1
    )
    if we_accept(headers, kind) and bad_length:
        with pytest.raises(ValueError, match="content-length"):
            validate_to_send(headers, response=response, trailer=trailer)
    elif we_accept(headers, kind):
        validate_to_send(headers, response=response, trailer=trailer)
    else:
        with pytest.raises(ValueError, match=f"^malformed {kind} header block, not sent: "):
            validate_to_send(headers, response=response, trailer=trailer)


def test_accepted_blocks_are_remembered_within_their_bounds() -> None:
    """Accepted blocks of at most MAX_REMEMBERED_BLOCK bytes are remembered per kind;
    rejected and larger blocks are not; the map is cleared once it holds
    ACCEPTED_ENTRIES blocks."""
    accepted = _headers._accepted
    accepted.clear()
    block = [(b":status", b"200"), (b"x-id", b"1")]
    validate_received(block, response=True, trailer=False)
    assert accepted == {(True, False, *block): None}
    validate_received(block, response=True, trailer=False)  # a hit: still one entry
    assert len(accepted) == 1
    with pytest.raises(ProtocolError):
        validate_received(block, response=False, trailer=True)  # :status in a trailer
    with pytest.raises(ValueError, match="malformed request header block"):
        validate_to_send([(b"X-Upper", b"1")], response=False, trailer=False)
    assert len(accepted) == 1
    big = [(b":status", b"200"), (b"x-big", b"v" * _headers.MAX_REMEMBERED_BLOCK)]
    validate_received(big, response=True, trailer=False)
    assert len(accepted) == 1
    for i in range(_headers.ACCEPTED_ENTRIES - 1):
        validate_to_send([(b"x-n", str(i).encode())], response=False, trailer=True)
    assert len(accepted) == _headers.ACCEPTED_ENTRIES
    validate_to_send([(b"x-n", b"last")], response=False, trailer=True)
    assert accepted == {(_headers._TO_SEND, False, True, (b"x-n", b"last")): None}


def test_uppercase_name_says_names_are_lowercase() -> None:
    """A name refused only for its capitals says HTTP/2 names are lowercase; other
    illegal names keep the plain message."""
    with pytest.raises(ValueError, match=r"b'Content-Type': HTTP/2 field names are lowercase"):
        validate_to_send(
            [(b":status", b"200"), (b"Content-Type", b"x")], response=True, trailer=False
        )
    with pytest.raises(ValueError, match=r"Illegal header name b'x y'$"):
        validate_to_send([(b":status", b"200"), (b"x y", b"x")], response=True, trailer=False)
