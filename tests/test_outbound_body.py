"""Our own content-length, HEAD and 204/304 bind the body we send (RFC 9113 §8.1.1,
RFC 9110 §6.4.1, §9.3.2): the call that would break it raises ValueError with
nothing queued, and the stream can still send what its headers allow."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
import trio
from _helpers_common import echo as _echo
from helpers import connected_pair

from trio_h2t import H2Stream

CL5 = [(b":status", b"200"), (b"content-length", b"5")]


async def _serve_one(
    steps: Callable[[H2Stream], Awaitable[None]], method: str = "GET"
) -> tuple[int, bytes, list[tuple[bytes, bytes]]]:
    """Run ``steps`` as the handler of one request; return status, body, trailers."""
    async with connected_pair(steps) as (conn, _core):
        response = await conn.request(method, "/")
    return response.status, response.body, list(response.trailers.raw)


async def test_data_over_content_length_raises_and_queues_nothing() -> None:
    """send_data past content-length: ValueError; the right 5 bytes then go out."""
    raised: list[str] = []

    async def handler(stream: H2Stream) -> None:
        await stream.send_headers(CL5)
        await stream.send_data(b"abc")
        with pytest.raises(ValueError, match="over its content-length of 5") as info:
            await stream.send_data(b"def")
        raised.append(str(info.value))
        await stream.send_data(b"de", end_stream=True)

    with trio.fail_after(5):
        assert await _serve_one(handler) == (200, b"abcde", [])
    assert "nothing was queued" in raised[0]


@pytest.mark.parametrize("how", ["end", "end_stream", "trailers", "headers"])
async def test_ending_short_of_content_length_raises(how: str) -> None:
    """end(), send_data(end_stream=True), send_trailers or send_headers(end_stream=True)
    short of content-length: ValueError, nothing queued; completing it then works."""

    async def handler(stream: H2Stream) -> None:
        if how == "headers":
            with pytest.raises(ValueError, match="short of its content-length of 5"):
                await stream.send_headers(CL5, end_stream=True)
        await stream.send_headers(CL5)
        await stream.send_data(b"abc")
        ending: Callable[[], Awaitable[None]] = {
            "end": stream.end,
            "trailers": lambda: stream.send_trailers([(b"x-t", b"1")]),
        }.get(how, lambda: stream.send_data(b"d", end_stream=True))
        with pytest.raises(ValueError, match=r"end the body at [34] bytes, short of"):
            await ending()
        await stream.send_data(b"de")
        await stream.send_trailers([(b"x-t", b"1")])

    with trio.fail_after(5):
        assert await _serve_one(handler) == (200, b"abcde", [(b"x-t", b"1")])


@pytest.mark.parametrize(
    ("method", "head", "match"),
    [
        ("HEAD", [(b":status", b"200"), (b"content-length", b"100")], "response to HEAD"),
        ("GET", [(b":status", b"204")], "a 204 response"),
        ("GET", [(b":status", b"304"), (b"content-length", b"7")], "a 304 response"),
    ],
    ids=["head", "204", "304"],
)
async def test_bodiless_response_refuses_any_body(
    method: str, head: list[tuple[bytes, bytes]], match: str
) -> None:
    """A response to HEAD, a 204 and a 304 take no body (their content-length, if any,
    is not a promise of one): send_data raises; end() completes the response."""

    async def handler(stream: H2Stream) -> None:
        await stream.send_headers(head)
        with pytest.raises(ValueError, match=match):
            await stream.send_data(b"x")
        await stream.end()

    with trio.fail_after(5):
        status, body, _ = await _serve_one(handler, method)
    assert (status, body) == (int(head[0][1]), b"")


@pytest.mark.parametrize("value", [b"abc", b"-1", b"", b"1 2"])
async def test_content_length_that_is_not_a_number_is_refused(value: bytes) -> None:
    """A content-length that is not a decimal number: send_headers raises ValueError."""

    async def handler(stream: H2Stream) -> None:
        with pytest.raises(ValueError, match="content-length"):
            await stream.send_headers([(b":status", b"200"), (b"content-length", value)])
        await stream.send_headers([(b":status", b"200")], end_stream=True)

    with trio.fail_after(5):
        assert await _serve_one(handler) == (200, b"", [])


async def test_stream_view_send_eof_short_of_content_length_raises() -> None:
    """H2StreamView.send_eof short of content-length raises the same ValueError."""

    async def handler(stream: H2Stream) -> None:
        await stream.send_headers(CL5)
        view = stream.as_stream()
        await view.send_all(b"ab")
        with pytest.raises(ValueError, match="short of its content-length"):
            await view.send_eof()
        await view.send_all(b"cde")
        await view.send_eof()

    with trio.fail_after(5):
        assert await _serve_one(handler) == (200, b"abcde", [])


async def test_client_request_body_is_held_to_its_content_length() -> None:
    """A client stream with content-length 5: over it and short of it raise ValueError
    with nothing queued; the exact body then goes through."""
    with trio.fail_after(5):
        async with connected_pair(_echo) as (conn, _core):
            headers = conn.request_headers("POST", "/", [("content-length", "5")])
            async with conn.open_stream(headers) as stream:
                with pytest.raises(ValueError, match="over its content-length of 5"):
                    await stream.send_data(b"toolong")
                await stream.send_data(b"abc")
                with pytest.raises(ValueError, match="short of its content-length"):
                    await stream.end()
                await stream.send_data(b"de", end_stream=True)
                assert await stream.receive_headers() == [(b":status", b"200")]
                assert await stream.read_all() == b"abcde"


async def test_open_stream_end_stream_with_a_content_length_is_refused() -> None:
    """open_stream(end_stream=True) with content-length 5 raises at once; nothing is
    opened, and the connection serves on."""
    with trio.fail_after(5):
        async with connected_pair(_echo) as (conn, _core):
            headers = conn.request_headers("POST", "/", [("content-length", "5")])
            with pytest.raises(ValueError, match="content-length of 5"):
                conn.open_stream(headers, end_stream=True)
            with pytest.raises(ValueError, match="decimal number"):
                conn.open_stream(conn.request_headers("POST", "/", [("content-length", "x")]))
            assert conn.open_streams == 0
            response = await conn.request("POST", "/", body=b"ok")
    assert response.body == b"ok"


async def test_request_with_a_wrong_content_length_raises_and_resets() -> None:
    """request(headers=content-length 3, body of 5 bytes): ValueError from the call that
    would send them; the stream is reset, the connection serves on."""
    with trio.fail_after(5):
        async with connected_pair(_echo) as (conn, _core):
            with pytest.raises(ValueError, match="over its content-length of 3"):
                await conn.request("POST", "/", headers=[("content-length", "3")], body=b"12345")
            response = await conn.request(
                "POST", "/", headers=[("content-length", "5")], body=b"12345"
            )
    assert response.body == b"12345"
