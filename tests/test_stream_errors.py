"""A server's stream-level faults reset only their stream on a trio_h2t client
(RFC 9113 §8.1.1), and a server that does not speak HTTP/2 fails the handshake fast."""

from __future__ import annotations

import h2.events
import pytest
import trio
import trio.testing
from h2.errors import ErrorCodes
from helpers import REQUEST, ScriptedPeer, open_peer_server
from hyperframe.frame import DataFrame, GoAwayFrame, HeadersFrame, RstStreamFrame

from trio_h2t import (
    ClientConnection,
    ConnectionLostError,
    RemoteProtocolError,
    StreamResetError,
    TransportConfig,
    open_client_connection,
)


async def _bad_then_good(
    conn: ClientConnection, peer: ScriptedPeer, method: bytes, head: list[tuple[bytes, bytes]]
) -> None:
    """Stream 1 gets ``head`` and a 5-byte body; stream 3 then completes normally."""
    request = [(b":method", method), *REQUEST[1:]]
    async with conn.open_stream(request, end_stream=True) as stream:
        await peer.receive_until(lambda ev: isinstance(ev, h2.events.RequestReceived))
        block = peer.h2.encoder.encode(head)
        await peer.send_raw(HeadersFrame(1, block, flags=["END_HEADERS"]).serialize())
        await peer.send_raw(DataFrame(1, b"hello", flags=["END_STREAM"]).serialize())
        with pytest.raises(StreamResetError) as info:
            await stream.read_all()
        assert info.value.error_code == ErrorCodes.PROTOCOL_ERROR
        assert not info.value.remote
    await peer.read_until(lambda: bool(peer.frames_of(RstStreamFrame)))
    assert [(f.stream_id, f.error_code) for f in peer.frames_of(RstStreamFrame)] == [
        (1, ErrorCodes.PROTOCOL_ERROR)
    ]

    async def answer() -> None:
        await peer.receive_until(lambda ev: isinstance(ev, h2.events.RequestReceived))
        block = peer.h2.encoder.encode([(b":status", b"200")])
        await peer.send_raw(HeadersFrame(3, block, flags=["END_HEADERS", "END_STREAM"]).serialize())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(answer)
        response = await conn.request("GET", "/")
    assert (response.status, response.headers.raw) == (200, ())
    assert not peer.frames_of(GoAwayFrame)
    assert conn.error is None


@pytest.mark.parametrize(
    ("method", "head"),
    [
        (b"GET", [(b":status", b"200"), (b"content-length", b"2")]),
        (b"GET", [(b":status", b"200"), (b"content-length", b"9")]),
        (b"HEAD", [(b":status", b"200")]),
        (b"GET", [(b":status", b"204")]),
        (b"GET", [(b":status", b"304"), (b"content-length", b"5")]),
    ],
    ids=["over-content-length", "short-of-content-length", "head", "204", "304"],
)
async def test_bad_response_body_resets_only_its_stream(
    method: bytes, head: list[tuple[bytes, bytes]]
) -> None:
    """A body over or short of content-length, or on a HEAD/204/304 response:
    RST_STREAM(PROTOCOL_ERROR) on that stream only; the next stream completes."""
    with trio.fail_after(5):
        async with open_peer_server() as (conn, peer):
            await _bad_then_good(conn, peer, method, head)


@pytest.mark.parametrize(
    "answer", [b"HTTP/1.1 400 Bad Request\r\n\r\n", b"SSH-2.0-OpenSSH\r\n"], ids=["http1", "ssh"]
)
async def test_non_http2_server_fails_fast_quoting_its_bytes(answer: bytes) -> None:
    """A server answering with HTTP/1.1 or an SSH banner fails the handshake at once
    (not after handshake_timeout), with its first bytes quoted."""
    client_t, server_t = trio.testing.memory_stream_pair()
    await server_t.send_all(answer)
    config = TransportConfig(handshake_timeout=60)
    with trio.fail_after(2), pytest.raises(ConnectionLostError) as info:
        async with open_client_connection(client_t, config=config):
            pass  # pragma: no cover
    cause = info.value.__cause__
    assert isinstance(cause, RemoteProtocolError)
    assert repr(answer[:9])[:-1] in str(cause)
    assert repr(answer[:9])[:-1] in str(info.value)


async def test_bodiless_304_with_content_length_is_accepted() -> None:
    """A 304 ending on its HEADERS may carry the representation's content-length
    (RFC 9110 §8.6): it is not malformed."""
    with trio.fail_after(5):
        async with open_peer_server() as (conn, peer):

            async def answer() -> None:
                await peer.receive_until(lambda ev: isinstance(ev, h2.events.RequestReceived))
                head = [(b":status", b"304"), (b"content-length", b"5")]
                block = peer.h2.encoder.encode(head)
                flags = ["END_HEADERS", "END_STREAM"]
                await peer.send_raw(HeadersFrame(1, block, flags=flags).serialize())

            async with trio.open_nursery() as nursery:
                nursery.start_soon(answer)
                response = await conn.request("GET", "/")
            assert response.status == 304
            assert response.body == b""
            assert conn.error is None
