"""trio_h2t.testing: chunked links, memory pairs, strategies, HandlerMachine,
ClientMachine, run_machine."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import HealthCheck, Phase, given, settings, strategies as st
from hypothesis.stateful import run_state_machine_as_test

from trio_h2t import ClientConnection, H2Stream, StreamResetError
from trio_h2t._headers import validate_received
from trio_h2t.testing import (
    Call,
    Chunking,
    ClientMachine,
    Exchange,
    FrameType,
    HandlerMachine,
    WireFrame,
    chunked_bodies,
    chunked_stream_pair,
    describe,
    header_list_size,
    open_memory_pair,
    open_memory_server,
    request_headers,
    response_headers,
    run_machine,
    trailers,
)
from trio_h2t.testing._strategies import _pattern

ROOT = Path(__file__).resolve().parent.parent
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
    shrinking)."""
    find = settings(QUICK, max_examples=300, phases=[Phase.generate])
    with pytest.raises(AssertionError, match="expected"):
        run_state_machine_as_test(FirstChunkEcho, settings=find)


class TextEcho(HandlerMachine):
    """docs/testing.md's handler with a bug (keep the two the same)."""

    async def handler(self, stream: H2Stream) -> None:
        await stream.send_headers([(b":status", b"200")])
        async for chunk in stream:
            text = chunk.decode()  # the bug: a body is bytes, not always UTF-8 text
            await stream.send_data(text.encode())
        await stream.end()

    def expected_response(self, exchange: Exchange) -> bytes | None:
        return bytes(exchange.sent)


def _steps(report: str) -> list[str]:
    """The rule calls of a reported state machine example (``state.x(...)``, each
    joined onto one line), without ``start_world``: its drawn settings are the
    world's, not the bug's."""
    steps: list[str] = []
    inside = False  # the last line belongs to a step
    for line in report.splitlines():
        if line.startswith("state."):
            steps.append(line.strip())
            inside = True
        elif inside and line.startswith((" ", ")")):
            steps[-1] += line.strip()
        else:
            inside = False
    return [step for step in steps if not step.startswith("state.start_world(")]


def _body(expression: str) -> bytes:
    """The body a reported ``data=`` argument stands for: a bytes literal, or the
    bodies() strategy's ``_pattern(n)``."""
    if expression.startswith("_pattern("):
        return _pattern(int(expression.removeprefix("_pattern(").removesuffix(")")))
    value = ast.literal_eval(expression)
    assert isinstance(value, bytes)
    return value


def _assert_text_bug_shape(steps: list[str]) -> None:
    """The shape docs/testing.md documents: one request with just the four
    pseudo-headers, its body (not UTF-8) sent with END_STREAM, at most one other step
    that reads or finishes that request (before or after the send), then the
    teardown."""
    assert steps[0] == (
        "state.open_request(headers=[(b':method', b'POST'),(b':scheme', b'http'),"
        "(b':authority', b'localhost'),(b':path', b'/')])"
    ), steps
    assert steps[-1] == "state.teardown()", steps
    middle = steps[1:-1]
    sends = [re.fullmatch(r"state\.send\(data=(.+), end=True, i=0\)", s) for s in middle]
    bodies = [match.group(1) for match in sends if match is not None]
    assert len(bodies) == 1, steps
    with pytest.raises(UnicodeDecodeError):
        _body(bodies[0]).decode()
    others = [s for s, match in zip(middle, sends, strict=True) if match is None]
    assert len(others) <= 1, steps
    assert all(re.fullmatch(r"state\.(finish|read)\(.*i=0.*\)", s) for s in others), steps


def test_the_machine_shrinks_a_text_only_handler_to_one_byte() -> None:
    """docs/testing.md, "A handler with a bug, found and shrunk": the bug is found
    (an unexplained reset), and Hypothesis shrinks it to the shape the page shows and
    explains; the page's output has that shape too. (Not the exact steps: Trio's
    order of waking tasks follows object addresses in places, so two runs may shrink
    along different paths.) Run in a fresh interpreter, as a reader runs the page:
    after the rest of the suite the heap's addresses differ, and the shrink was seen
    to stop one step short (two requests) there."""
    import subprocess
    import sys

    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); "
        "import test_testing_kit as t; t._shrink_text_bug_and_check()"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(Path(__file__).parent)],
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def _shrink_text_bug_and_check() -> None:
    """The body of the test above, run in its own interpreter."""
    shrink = settings(
        max_examples=300,
        stateful_step_count=5,
        deadline=None,
        database=None,
        derandomize=True,
        report_multiple_bugs=False,
    )
    with pytest.raises(AssertionError, match="failed without a reason") as info:
        run_state_machine_as_test(TextEcho, settings=shrink)
    _assert_text_bug_shape(_steps("\n".join(getattr(info.value, "__notes__", []))))
    page = (ROOT / "docs" / "testing.md").read_text(encoding="utf-8")
    shown = page.split("## A handler with a bug, found and shrunk", 1)[1]
    shown = shown.split("```text\n", 1)[1].split("```", 1)[0]
    _assert_text_bug_shape(_steps(shown))
    assert "state.send(data=b'\\x80', end=True, i=0)" in shown


def test_run_machine_stops_after_its_time_budget() -> None:
    """run_machine runs rounds until the budget is spent, then reports."""
    report = run_machine(EchoMachine, seconds=0.5, settings=QUICK, round_examples=3)
    assert report.rounds >= 1
    assert report.examples == 3 * report.rounds
    assert report.seconds >= 0.5


# ---------------------------------------------------------------------- ClientMachine


class EchoClientMachine(ClientMachine):
    """The default client (POST the argument, return the body) against the default
    (echoing) server: every call that returns returns its argument."""

    def expected_result(self, call: Call) -> Any:
        return call.argument


def test_correct_client_keeps_every_invariant() -> None:
    """ClientMachine finds nothing wrong with conn.request against an echo server."""
    run_state_machine_as_test(EchoClientMachine, settings=settings(QUICK, max_examples=30))


class FirstChunkClient(EchoClientMachine):
    """A buggy client: it returns the first piece of the response body it reads."""

    async def call(self, conn: ClientConnection, argument: Any) -> Any:
        async with conn.open_stream(conn.request_headers("POST", "/")) as stream:
            await stream.send_data(argument, end_stream=True)
            await stream.receive_headers()
            return await stream.receive_some()


class ResetHidingClient(EchoClientMachine):
    """A buggy client: it turns the server's reset into an empty answer."""

    async def call(self, conn: ClientConnection, argument: Any) -> Any:
        try:
            return (await conn.request("POST", "/", body=argument)).body
        except StreamResetError:
            return b""


class WrongErrorClient(EchoClientMachine):
    """A buggy client: a reset comes out as a KeyError (a bad lookup in its handling)."""

    async def call(self, conn: ClientConnection, argument: Any) -> Any:
        try:
            return (await conn.request("POST", "/", body=argument)).body
        except StreamResetError as exc:
            raise KeyError(exc.error_code) from exc


class HangingClient(EchoClientMachine):
    """A buggy client: after a reset it waits for an answer that never comes."""

    async def call(self, conn: ClientConnection, argument: Any) -> Any:
        try:
            return (await conn.request("POST", "/", body=argument)).body
        except StreamResetError:
            await trio.sleep_forever()


class LeakingClient(EchoClientMachine):
    """A buggy client: it returns as soon as the headers arrive, its stream never
    closed (the stream opener is entered by hand and never left)."""

    async def call(self, conn: ClientConnection, argument: Any) -> Any:
        stream = await conn.open_stream(conn.request_headers("POST", "/")).__aenter__()
        await stream.send_data(argument, end_stream=True)
        await stream.receive_headers()
        return argument


@pytest.mark.parametrize(
    ("machine", "message"),
    [
        (FirstChunkClient, "returned a wrong result"),
        (ResetHidingClient, "returned a wrong result"),
        (WrongErrorClient, "raised KeyError, not one of StreamResetError"),
        (HangingClient, "hang: the world did not end"),
        (LeakingClient, "a stream outlived its call"),
    ],
    ids=["first-chunk", "hides-reset", "wrong-error", "hangs", "leaks-stream"],
)
def test_client_machine_catches_a_buggy_client(machine: type[ClientMachine], message: str) -> None:
    """Each buggy client is caught, by the check its bug breaks (without shrinking)."""
    find = settings(QUICK, max_examples=300, phases=[Phase.generate])
    with pytest.raises(AssertionError, match=message):
        run_state_machine_as_test(machine, settings=find)


def test_frame_types_are_the_rfcs_and_describe_names_each() -> None:
    """The kit's FrameType (the codec's codes) matches the conformance harness's own
    copy of RFC 9113 §6, and describe names every type by its code."""
    from conformance.harness import FrameType as RfcFrameType

    kit = {name: getattr(FrameType, name) for name in RfcFrameType.__members__}
    assert kit == {t.name: t.value for t in RfcFrameType}
    for t in RfcFrameType:
        assert describe(WireFrame(t.value, 0, 1).to_bytes())[0].startswith(f"{t.name} stream=1")
