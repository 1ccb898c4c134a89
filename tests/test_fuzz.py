"""Fuzzing a trio_h2t server and client with Hypothesis-generated frame sequences.

The frames come from ``trio_h2t.testing``'s strategies (valid frames in wrong orders,
random fields, raw bytes, bytes mutated after serialization). The only outcomes
allowed: normal service, a stream error or a connection error sent to the peer.
Anything else fails: an exception out of the connection, a contained fault (the
``h2t_fault`` records that tests/conftest.py turns into failures), a hang (every run
is bounded), or a task left running. The ``ci`` profile keeps this short;
``HYPOTHESIS_PROFILE=deep`` runs 20 times more examples.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

import trio
import trio.testing
from helpers import h2t_tasks
from hypothesis import given, strategies as st

from trio_h2t import H2Stream, TransportConfig, open_client_connection
from trio_h2t.testing import (
    PREFACE,
    PROPERTIES,
    Chunk,
    Expect,
    FrameType,
    Scenario,
    WireFrame,
    describe,
    encode_header_block,
    frame_sequences,
    memory_target,
    play,
    run_check,
    serialize,
)

#: Seconds any one fuzzed connection may take (a hang fails the example).
RUN_LIMIT = 10.0


class _Faults(logging.Handler):
    """Collects the connection-fault records (``h2t_fault``) of one example."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "h2t_fault", False):
            self.messages.append(
                f"{record.getMessage()}: {record.exc_info and record.exc_info[1]!r}"
            )


@contextlib.contextmanager
def no_faults() -> Iterator[None]:
    """Fail the current example (so that Hypothesis shrinks it) if a fault is logged.

    tests/conftest.py would fail the test anyway, but only at its end, unshrunk.
    """
    handler = _Faults()
    logger = logging.getLogger("trio_h2t")
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
    assert handler.messages == []


async def echo(stream: H2Stream) -> None:
    """Read the whole request body, answer 200 with it (without it to HEAD)."""
    body = await stream.read_all()
    await stream.send_headers([(":status", "200")])
    await stream.send_data(b"" if stream.request.method == "HEAD" else body, end_stream=True)


@given(frame_sequences(side="client"))
def test_server_survives_any_frame_sequence(chunks: list[Chunk]) -> None:
    """After any sequence the server answers a PING and a new request, or ended the
    connection with GOAWAY; it returns by itself once the client closes."""
    scenario = Scenario(tuple(chunks), Expect("alive"))
    with no_faults():
        verdict = play(memory_target(echo, timeout=RUN_LIMIT), scenario, timeout=RUN_LIMIT)
    assert verdict.ok, (verdict.reason, describe(scenario.data), verdict.received)


@given(frame_sequences(side="client"))
def test_server_with_small_budgets_survives_any_frame_sequence(chunks: list[Chunk]) -> None:
    """The same with tiny windows, frames and limits, so the limits trip often."""
    config = TransportConfig(
        initial_window_size=65_535,
        max_frame_size=16_384,
        max_concurrent_streams=2,
        max_header_list_size=1024,
    )
    scenario = Scenario(tuple(chunks), Expect("alive"))
    target = memory_target(echo, config=config, timeout=RUN_LIMIT)
    with no_faults():
        verdict = play(target, scenario, timeout=RUN_LIMIT)
    assert verdict.ok, (verdict.reason, describe(scenario.data), verdict.received)


def test_refusing_a_stream_in_a_read_that_ends_in_a_protocol_error() -> None:
    """Found by the fuzzer: a request over MAX_CONCURRENT_STREAMS, then a malformed
    frame in the same read. h2 closed the connection at the bad frame; refusing the
    earlier request (RST_STREAM on a CLOSED h2 connection) raised ProtocolError, a
    contained fault. The connection must just end with its GOAWAY."""
    post = encode_header_block(
        [(":method", "POST"), (":scheme", "http"), (":authority", "x"), (":path", "/")]
    )
    chunks = (
        PREFACE,
        WireFrame(FrameType.SETTINGS, 0, 0),
        WireFrame(FrameType.SETTINGS, 0x1, 0),  # ack: our limit holds from now
        WireFrame(FrameType.HEADERS, 0x4, 1, post),  # open: the one stream allowed
        WireFrame(FrameType.HEADERS, 0x4, 3, post),  # over the limit: refused
        WireFrame(FrameType.PRIORITY, 0, 5, b"\0" * 8),  # FRAME_SIZE_ERROR (§6.3)
    )
    target = memory_target(echo, config=TransportConfig(max_concurrent_streams=1))
    with no_faults():
        verdict = play(target, Scenario(chunks, Expect("connection-error")), timeout=RUN_LIMIT)
    assert verdict.ok, verdict
    assert any(line.startswith("GOAWAY") for line in verdict.received)


def test_server_keeps_every_check_property() -> None:
    """trio_h2t's own server breaks none of ``trio-h2t check``'s properties."""
    findings = run_check(memory_target(echo), max_examples=15, seconds=120)
    found = [
        (f.property.name, f.verdict.reason, describe(f.scenario.data), f.verdict.received)
        for f in findings
    ]
    assert found == []
    assert len(PROPERTIES) >= 10


#: The client's handshake bound in these runs: a fake server whose bytes hold no
#: SETTINGS (or none at all) must fail the handshake well within RUN_LIMIT.
HANDSHAKE_LIMIT = 2.0


async def _drive_client(data: bytes) -> list[str]:
    """Three GETs from a trio_h2t client while a fake server writes ``data``, then
    closes. Each GET ends with a response or a connection error; if the handshake
    itself fails (no SETTINGS in ``data``), that is the outcome of all three."""
    outcomes: list[str] = []
    client_t, server_t = trio.testing.memory_stream_pair()
    config = TransportConfig(handshake_timeout=HANDSHAKE_LIMIT)

    async def fake_server() -> None:
        # Written while the client waits for SETTINGS, so a handshake in ``data``
        # completes and the requests meet the rest of it.
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await server_t.send_all(data)
        await trio.testing.wait_all_tasks_blocked()
        await server_t.aclose()

    async def drain() -> None:
        with contextlib.suppress(trio.ClosedResourceError):
            while await server_t.receive_some(65_536):
                pass

    async def one(conn: object, i: int) -> None:
        assert hasattr(conn, "request")
        try:
            response = await conn.request("GET", f"/{i}")
            outcomes.append(f"response {response.status}")
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            outcomes.append(type(exc).__name__)

    with trio.fail_after(RUN_LIMIT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(drain)
            nursery.start_soon(fake_server)
            try:
                async with (
                    open_client_connection(client_t, config=config) as conn,
                    trio.open_nursery() as requests,
                ):
                    for i in range(3):
                        requests.start_soon(one, conn, i)
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                if outcomes:  # pragma: no cover - the requests catch their own
                    raise
                outcomes = [f"handshake {type(exc).__name__}"] * 3
        assert h2t_tasks() == []
    return outcomes


@given(frame_sequences(side="server"))
def test_client_survives_any_frame_sequence(chunks: list[Chunk]) -> None:
    """A client under any server bytes: each request ends with a response or a
    connection error (trio's resource errors), nothing else, no hang, no task left."""
    with no_faults():
        outcomes = trio.run(_drive_client, serialize(chunks))
    assert len(outcomes) == 3


@given(st.binary(max_size=200))
def test_client_survives_raw_bytes(data: bytes) -> None:
    """The same with raw bytes instead of frames."""
    with no_faults():
        assert len(trio.run(_drive_client, data)) == 3
