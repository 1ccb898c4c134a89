"""A header list over our ``max_header_list_size`` is a stream error, not a connection
error (RFC 9113 §10.5.1): the block is decoded to its end so HPACK stays in step, a
server answers a request with 431, a client resets the stream with
ENHANCE_YOUR_CALM, and the next stream on the same connection works."""

from __future__ import annotations

import h2.events
import pytest
import trio
from h2.errors import ErrorCodes
from helpers import REQUEST, open_peer_client, open_peer_server
from hyperframe.frame import GoAwayFrame, HeadersFrame, RstStreamFrame

from trio_h2t import CancelReason, H2Stream, StreamResetError, TransportConfig

LIMIT = 4096
#: Over LIMIT, well under READ_ON_FACTOR times it; the literal after the big one is
#: added to the dynamic table past the limit, and reused (indexed) by the next block.
BIG = [(b"x-big", b"v" * 6000), (b"x-after", b"tail")]
AFTER = (b"x-after", b"tail")


@pytest.mark.parametrize("end_stream", [True, False], ids=["no-body", "body-open"])
async def test_oversized_request_gets_431_and_the_connection_serves_on(end_stream: bool) -> None:
    """Stream 1's oversized request: 431 (END_STREAM), RST_STREAM(NO_ERROR) only if the
    request was still open, no handler, no GOAWAY; stream 3 reusing a table entry
    from stream 1's block is served with the right headers."""
    seen: list[tuple[int, list[tuple[bytes, bytes]]]] = []

    async def handler(stream: H2Stream) -> None:
        seen.append((stream.stream_id, list(stream.request.headers.raw)))
        await stream.send_headers([(":status", "200")], end_stream=True)

    config = TransportConfig(max_header_list_size=LIMIT)
    with trio.fail_after(5):
        async with open_peer_client(handler, server_config=config) as (peer, _core):
            peer.h2.send_headers(1, [*REQUEST, *BIG], end_stream=end_stream)
            await peer.flush()
            ended = await peer.receive_until(lambda ev: isinstance(ev, h2.events.StreamEnded))
            assert ended.stream_id == 1
            (response,) = peer.events_of(h2.events.ResponseReceived)
            assert response.stream_id == 1
            assert response.headers == [(b":status", b"431"), (b"content-length", b"0")]
            if not end_stream:
                await peer.read_until(lambda: bool(peer.frames_of(RstStreamFrame)))
            rsts = [(f.stream_id, f.error_code) for f in peer.frames_of(RstStreamFrame)]
            assert rsts == ([] if end_stream else [(1, ErrorCodes.NO_ERROR)])

            peer.h2.send_headers(3, [*REQUEST, AFTER], end_stream=True)
            block = peer.h2.data_to_send()
            assert len(block) < 9 + 20  # x-after indexed: our table must hold it
            await peer.send_raw(block)
            ok = await peer.receive_until(
                lambda ev: isinstance(ev, h2.events.ResponseReceived) and ev.stream_id == 3
            )
            assert ok.headers == [(b":status", b"200")]
            assert not peer.frames_of(GoAwayFrame)
    assert seen == [(3, [AFTER])]


async def test_request_far_over_the_limit_is_still_a_connection_error() -> None:
    """A header list over READ_ON_FACTOR (4) times the limit: GOAWAY(ENHANCE_YOUR_CALM)."""

    async def handler(stream: H2Stream) -> None:
        raise AssertionError("no handler may run")

    config = TransportConfig(max_header_list_size=LIMIT)
    with trio.fail_after(5):
        async with open_peer_client(handler, server_config=config) as (peer, _core):
            huge = [(f"x-{i}".encode(), b"v" * 1000) for i in range(20)]
            peer.h2.send_headers(1, [*REQUEST, *huge], end_stream=True)
            await peer.flush()
            await peer.read_until(lambda: bool(peer.frames_of(GoAwayFrame)))
    (goaway,) = peer.frames_of(GoAwayFrame)
    assert goaway.error_code == ErrorCodes.ENHANCE_YOUR_CALM


async def test_oversized_response_resets_only_that_stream() -> None:
    """A response over the client's limit: that stream's calls raise StreamResetError
    (ENHANCE_YOUR_CALM, ours), RST_STREAM goes out, and the next request, whose
    response indexes a table entry from the oversized block, completes."""
    config = TransportConfig(max_header_list_size=LIMIT)
    with trio.fail_after(5):
        async with open_peer_server(client_config=config) as (conn, peer):
            async with conn.open_stream(REQUEST, end_stream=True) as stream:
                await peer.receive_until(lambda ev: isinstance(ev, h2.events.RequestReceived))
                block = peer.h2.encoder.encode([(b":status", b"200"), *BIG])
                await peer.send_raw(
                    HeadersFrame(1, block, flags=["END_HEADERS", "END_STREAM"]).serialize()
                )
                with pytest.raises(StreamResetError) as info:
                    await stream.receive_headers()
                assert info.value.error_code == ErrorCodes.ENHANCE_YOUR_CALM
                assert not info.value.remote
            await peer.read_until(lambda: bool(peer.frames_of(RstStreamFrame)))
            assert [(f.stream_id, f.error_code) for f in peer.frames_of(RstStreamFrame)] == [
                (1, ErrorCodes.ENHANCE_YOUR_CALM)
            ]

            async def answer() -> None:
                await peer.receive_until(
                    lambda ev: isinstance(ev, h2.events.RequestReceived) and ev.stream_id == 3
                )
                block = peer.h2.encoder.encode([(b":status", b"200"), AFTER])
                assert len(block) <= 2  # both indexed: the client's table must be right
                await peer.send_raw(
                    HeadersFrame(3, block, flags=["END_HEADERS", "END_STREAM"]).serialize()
                )

            async with trio.open_nursery() as nursery:
                nursery.start_soon(answer)
                response = await conn.request("GET", "/")
            assert response.status == 200
            assert response.headers.raw == (AFTER,)
            assert conn.error is None
            assert not peer.frames_of(GoAwayFrame)


async def test_oversized_trailers_reset_the_stream_and_cancel_its_handler() -> None:
    """Oversized request trailers: RST_STREAM(ENHANCE_YOUR_CALM), the handler is
    cancelled with cancel_reason "stream-error", and stream 3 is served."""
    reasons: list[CancelReason | None] = []

    async def handler(stream: H2Stream) -> None:
        if stream.stream_id == 1:
            try:
                await stream.read_all()
            finally:
                reasons.append(stream.cancel_reason)
        await stream.send_headers([(":status", "200")], end_stream=True)

    config = TransportConfig(max_header_list_size=LIMIT)
    with trio.fail_after(5):
        async with open_peer_client(handler, server_config=config) as (peer, _core):
            peer.h2.send_headers(1, [(b":method", b"POST"), *REQUEST[1:]])
            peer.h2.send_data(1, b"body")
            peer.h2.send_headers(1, BIG, end_stream=True)
            await peer.flush()
            await peer.read_until(lambda: bool(peer.frames_of(RstStreamFrame)))
            assert [(f.stream_id, f.error_code) for f in peer.frames_of(RstStreamFrame)] == [
                (1, ErrorCodes.ENHANCE_YOUR_CALM)
            ]
            peer.h2.send_headers(3, [*REQUEST, AFTER], end_stream=True)
            await peer.flush()
            ok = await peer.receive_until(
                lambda ev: isinstance(ev, h2.events.ResponseReceived) and ev.stream_id == 3
            )
            assert ok.headers == [(b":status", b"200")]
            assert not peer.frames_of(GoAwayFrame)
    assert [(r.kind, r.error_code) for r in reasons if r is not None] == [
        ("stream-error", ErrorCodes.ENHANCE_YOUR_CALM)
    ]
