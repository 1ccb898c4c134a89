"""Outbound pseudo-header values: :status, :method and :path are checked before queueing."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from helpers import REQUEST, RESPONSE_200, connected_pair

from trio_h2t import H2Stream
from trio_h2t._stream import _as_header_list


@pytest.mark.parametrize("status", [b"abc", b"99", b"600", b"20", b"2000", b"103", b"101", b"100"])
async def test_bad_status_raises_and_stream_stays_usable(status: bytes) -> None:
    """send_headers refuses a :status that is not a final 200-599 code; nothing is queued."""
    errors: list[ValueError] = []

    async def handler(stream: H2Stream) -> None:
        with pytest.raises(ValueError, match=":status") as info:
            await stream.send_headers([(b":status", status)])
        errors.append(info.value)
        await stream.send_headers(RESPONSE_200)  # nothing was queued by the bad call
        await stream.send_data(b"ok", end_stream=True)

    with trio.fail_after(10):
        async with connected_pair(handler) as (conn, _core):
            response = await conn.request("GET", "/")
    assert response.status == 200
    assert response.body == b"ok"
    assert len(errors) == 1


@pytest.mark.parametrize(
    ("method", "path", "match"),
    [
        (b"GE T", b"/", ":method must be a token"),
        (b"GET\x7f", b"/", ":method must be a token"),
        (b"GET", b"/a b", "percent-encode"),
        (b"GET", b"relative", "origin-form"),
        (b"GET", b"/caf\xc3\xa9", "percent-encode"),
        (b"GET", b"*", "only for OPTIONS"),
    ],
)
async def test_bad_method_or_path_raises_in_open_stream(
    method: bytes, path: bytes, match: str
) -> None:
    """open_stream refuses a non-token :method or a :path that is not origin-form."""

    async def handler(stream: H2Stream) -> None:
        await stream.send_headers(RESPONSE_200, end_stream=True)

    block = [(b":method", method), (b":scheme", b"http"), (b":authority", b"x"), (b":path", path)]
    with trio.fail_after(10):
        async with connected_pair(handler) as (conn, _core):
            with pytest.raises(ValueError, match=match):
                conn.open_stream(block, end_stream=True)
            assert conn.open_streams == 0
            response = await conn.request("GET", "/still/works")  # the connection goes on
    assert response.status == 200


async def test_options_star_and_query_paths_are_accepted() -> None:
    """OPTIONS * and an origin-form path with a query and percent-escapes are sent."""
    paths: list[bytes] = []

    async def handler(stream: H2Stream) -> None:
        headers = dict(stream.headers or [])
        paths.append(headers[b":path"])
        await stream.send_headers(RESPONSE_200, end_stream=True)

    with trio.fail_after(10):
        async with connected_pair(handler) as (conn, _core):
            await conn.request("OPTIONS", "*")
            await conn.request("GET", "/caf%C3%A9?q=a%20b&x=1")
    assert paths == [b"*", b"/caf%C3%A9?q=a%20b&x=1"]


@pytest.mark.parametrize(("method", "path"), [("GET", "/café"), ("GÉT", "/")])
async def test_request_headers_non_ascii_is_a_clear_value_error(method: str, path: str) -> None:
    """request_headers raises a ValueError that names the problem, not a bare encode error."""

    async def handler(stream: H2Stream) -> None:
        await stream.send_headers(RESPONSE_200, end_stream=True)

    with trio.fail_after(10):
        async with connected_pair(handler) as (conn, _core):
            with pytest.raises(ValueError, match="not ASCII") as info:
                conn.request_headers(method, path)
    assert not isinstance(info.value, UnicodeEncodeError)
    assert REQUEST[0] == (b":method", b"GET")


@pytest.mark.parametrize(
    ("headers", "match"),
    [
        ({"x-a": "1"}, "not a dict: pass list"),
        ("x-a: 1", "not str"),
        ([("x-a", "1", "2")], "must be a \\(name, value\\) pair"),
        (["x-a"], "must be a \\(name, value\\) pair"),
        ([None], "must be a \\(name, value\\) pair"),
    ],
)
async def test_headers_not_pairs_is_a_clear_type_error(headers: object, match: str) -> None:
    """request(headers=) that is a dict, a str or holds a non-pair raises TypeError saying so."""

    async def handler(stream: H2Stream) -> None:
        await stream.send_headers(RESPONSE_200, end_stream=True)

    with trio.fail_after(10):
        async with connected_pair(handler) as (conn, _core):
            with pytest.raises(TypeError, match=match):
                await conn.request("GET", "/", headers=headers)  # type: ignore[arg-type]
            response = await conn.request("GET", "/still/works")
    assert response.status == 200


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ([b"a", b"b"], "not list: join it first"),
        ("text", "async iterable of bytes, not str"),
        (5, "not int"),
    ],
)
async def test_request_body_of_a_wrong_type_names_what_a_body_may_be(
    body: object, match: str
) -> None:
    """request(body=) that is a list, a str or an int raises TypeError listing the body forms."""

    async def handler(stream: H2Stream) -> None:
        await stream.send_headers(RESPONSE_200, end_stream=True)

    with trio.fail_after(10):
        async with connected_pair(handler) as (conn, _core):
            with pytest.raises(TypeError, match=match):
                await conn.request("POST", "/", body=body)  # type: ignore[arg-type]
            assert conn.open_streams == 0
            response = await conn.request("GET", "/still/works")
    assert response.status == 200


class _Pair(tuple[bytes, bytes]):
    """A tuple subclass (as hpack's HeaderTuple): not taken by the all-bytes fast path."""


@pytest.mark.parametrize(
    "headers",
    [
        [(b"x-a", b"1"), (b"x-b", b"2")],  # the fast path: a list of tuples of bytes
        ((b"x-a", b"1"), (b"x-b", b"2")),  # the fast path: a tuple of them
        [(b"x-a", b"1"), ("x-b", "2")],  # str fields: converted by the general path
        [(b"x-a", b"1"), [b"x-b", b"2"]],  # a list as a pair
        [(b"x-a", b"1"), _Pair((b"x-b", b"2"))],  # a tuple subclass: made a plain tuple
        [(b"x-a", b"1"), (b"x-b", bytearray(b"2"))],
        [],
    ],
)
def test_header_list_fast_path_gives_the_general_paths_list(headers: Any) -> None:
    """``_as_header_list`` returns a fresh list of plain (bytes, bytes) tuples, equal to
    the pairs given, whether or not the input takes the all-bytes fast path."""
    out = _as_header_list(headers)
    assert out is not headers
    assert type(out) is list
    assert all(type(p) is tuple and all(type(f) is bytes for f in p) for p in out)
    assert out == [
        (
            bytes(n, "ascii") if isinstance(n, str) else bytes(n),
            bytes(v, "utf-8") if isinstance(v, str) else bytes(v),
        )
        for n, v in headers
    ]


@pytest.mark.parametrize(
    ("headers", "match"),
    [
        ([(b"x-a", b"1", b"2")], "must be a \\(name, value\\) pair"),
        (((b"x-a",),), "must be a \\(name, value\\) pair"),
        ([(b"x-a", 1)], "a header value must be bytes or str, not int"),
    ],
)
def test_header_list_fast_path_leaves_bad_pairs_to_the_general_checks(
    headers: object, match: str
) -> None:
    """A list or tuple the fast path cannot take gets the general path's TypeError."""
    with pytest.raises(TypeError, match=match):
        _as_header_list(headers)  # type: ignore[arg-type]
