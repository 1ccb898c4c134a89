"""trio_h2t.testing: chunked links, memory pairs, strategies, HandlerMachine, run_machine."""

from __future__ import annotations

import pytest
import trio
from hypothesis import HealthCheck, Phase, given, settings, strategies as st
from hypothesis.stateful import run_state_machine_as_test

from trio_h2t import H2Stream
from trio_h2t._headers import validate_received
from trio_h2t.testing import (
    Chunking,
    Exchange,
    HandlerMachine,
    chunked_bodies,
    chunked_stream_pair,
    header_list_size,
    open_memory_pair,
    open_memory_server,
    request_headers,
    response_headers,
    run_machine,
    trailers,
)

QUICK = settings(
    max_examples=15,
    stateful_step_count=20,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)


async def test_chunked_link_splits_writes_and_shortens_reads() -> None:
    """Writes are cut by send_sizes, reads by receive_sizes; bytes arrive in order."""
    a, b = chunked_stream_pair(client=Chunking(send_sizes=[3]), server=Chunking(receive_sizes=[2]))
    await a.send_all(b"abcdefg")
    got = [await b.receive_some() for _ in range(3)]
    assert got == [b"ab", b"cd", b"ef"]
    assert (a.bytes_sent, b.bytes_received, b.unread) == (7, 6, 1)


async def test_link_capacity_blocks_the_writer_until_the_reader_reads() -> None:
    """With a capacity, send_all waits while that many bytes are unread."""
    a, b = chunked_stream_pair(client=Chunking(send_sizes=[4]), capacity=4)
    done = trio.Event()

    async def write() -> None:
        await a.send_all(b"x" * 12)
        done.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(write)
        await trio.testing.wait_all_tasks_blocked()
        assert (a.bytes_sent, done.is_set()) == (4, False)
        while not done.is_set():
            await b.receive_some()
            await trio.testing.wait_all_tasks_blocked()
    assert a.bytes_sent == 12


def test_chunking_rejects_sizes_below_one() -> None:
    """A zero size would never make progress: refused at once."""
    with pytest.raises(ValueError, match="send_sizes"):
        Chunking(send_sizes=[0])


async def test_memory_server_over_a_byte_at_a_time_link(autojump_clock: object) -> None:
    """open_memory_server serves a request when every read returns one byte."""

    async def handler(stream: H2Stream) -> None:
        body = await stream.read_all()
        await stream.send_headers([(":status", "200")])
        await stream.send_data(body[::-1], end_stream=True)

    one = Chunking(send_sizes=[1], receive_sizes=[1])
    async with open_memory_server(handler, client_chunking=one, server_chunking=one) as conn:
        response = await conn.request("POST", "/", body=b"abc" * 1000)
    assert (response.status, response.body) == (200, (b"abc" * 1000)[::-1])


async def test_memory_pair_yields_both_connections(autojump_clock: object) -> None:
    """The pair's server sees the client's request; both end with the block."""

    async def handler(stream: H2Stream) -> None:
        await stream.send_headers([(":status", "204")], end_stream=True)

    async with open_memory_pair(handler, delay=0.01) as pair:
        response = await pair.client.request("GET", "/")
        assert pair.server.statistics().streams_opened == 1
    assert response.status == 204


@given(request_headers(max_header_list_size=4096), st.data())
@settings(max_examples=200, deadline=None)
def test_request_headers_are_valid_and_within_size(
    headers: list[tuple[bytes, bytes]], data: st.DataObject
) -> None:
    """Every drawn request block passes trio_h2t's inbound checks and the size limit."""
    validate_received(headers, response=False, trailer=False)
    assert header_list_size(headers) <= 4096
    validate_received(data.draw(response_headers()), response=True, trailer=False)
    validate_received(data.draw(trailers()), response=False, trailer=True)


@given(chunked_bodies(max_size=70_000))
@settings(max_examples=50, deadline=None)
def test_chunked_bodies_join_to_a_body(pieces: list[bytes]) -> None:
    """The pieces are a cut of one body (no more than max_chunks of them)."""
    assert len(pieces) <= 8
    assert len(b"".join(pieces)) <= 70_000


class EchoMachine(HandlerMachine):
    """The default (echoing) handler: the response is the request body."""

    def expected_response(self, exchange: Exchange) -> bytes | None:
        return bytes(exchange.sent)


def test_echo_handler_keeps_every_invariant() -> None:
    """HandlerMachine finds nothing wrong with a correct echo handler."""
    run_state_machine_as_test(EchoMachine, settings=QUICK)


class FirstChunkEcho(EchoMachine):
    """A buggy echo: it answers with the first piece of the body it reads."""

    async def handler(self, stream: H2Stream) -> None:
        first = await stream.receive_some()
        await stream.send_headers([(b":status", b"200")])
        await stream.send_data(first, end_stream=True)


def test_the_machine_finds_a_handler_that_reads_only_the_first_chunk() -> None:
    """The bug shows only when a body arrives in more than one piece: found (without
    shrinking, which takes minutes on this machine)."""
    find = settings(QUICK, max_examples=300, phases=[Phase.generate])
    with pytest.raises(AssertionError, match="expected"):
        run_state_machine_as_test(FirstChunkEcho, settings=find)


def test_run_machine_stops_after_its_time_budget() -> None:
    """run_machine runs rounds until the budget is spent, then reports."""
    report = run_machine(EchoMachine, seconds=0.5, settings=QUICK, round_examples=3)
    assert report.rounds >= 1
    assert report.examples == 3 * report.rounds
    assert report.seconds >= 0.5
