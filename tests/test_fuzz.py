"""Fuzzing a trio_h2t server and client with Hypothesis-generated frame sequences.

The frames come from ``trio_h2t.testing``'s strategies (valid frames in wrong orders,
random fields, raw bytes, bytes mutated after serialization). The only outcomes
allowed: normal service, a stream error or a connection error sent to the peer.
Anything else fails: an exception out of the connection, a contained fault (the
``h2t_fault`` records that tests/conftest.py turns into failures), a hang (every run
is bounded), a task left running, or memory beyond the budgets: the fuzzed
connection's end of the link (:class:`BudgetWatch`) checks its connection's buffered
state (:func:`budget_violations`) each time the connection's reader asks for more
bytes (everything read so far has been dispatched) and once more after the
exchange. The ``ci`` profile keeps this short; ``HYPOTHESIS_PROFILE=deep`` runs 20
times more examples.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import trio
import trio.testing
from helpers import h2t_tasks
from hypothesis import given, strategies as st

from trio_h2t import H2Stream, TransportConfig, open_client_connection, serve_connection
from trio_h2t._connection import ConnectionCore
from trio_h2t._h2fixes import FixedFrameBuffer
from trio_h2t._server import PRE_ACK_STREAM_LIMIT
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
from trio_h2t.testing._check import Target

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


# ============================================================ memory within the budgets


def budget_violations(core: ConnectionCore, *, between_reads: bool) -> list[str]:
    """What ``core`` holds beyond its budgets now; [] when within them.

    Unread request bodies: the connection's accounting (``in_flow.buffered``) within
    ``max_unread_bytes`` and its invariant (buffered plus the window the peer still
    holds within the budget), the bytes really queued in each stream within that
    stream's accounting, and each stream's within the window we granted it (its
    limit plus any extra credit for a large read). Streams: ours within the stream
    limit; h2's table (closed streams are pruned, amortised) within twice that.
    h2's internal buffers: the frame buffer holds at most one incomplete frame
    between reads (``between_reads``), a header block still arriving at most its
    cap, the HPACK dynamic table at most the size we allow.
    """
    config = core.config
    found: list[str] = []
    flow = core.in_flow
    if flow.buffered > config.max_unread_bytes:
        found.append(f"{flow.buffered} unread bytes, budget {config.max_unread_bytes}")
    if flow.buffered + flow.limit - flow.unacked > flow.budget:
        found.append(f"{flow.buffered} unread + {flow.limit - flow.unacked} window > {flow.budget}")
    queued_total = 0
    for stream in core.streams_by_id.values():
        queued = sum(len(chunk) for chunk in stream._chunks or ())
        queued_total += queued
        sf = stream._in_flow
        if queued > sf.pending_data:
            found.append(
                f"stream {stream.stream_id}: {queued} bytes queued, {sf.pending_data} counted"
            )
        if sf.pending_data > sf.limit + sf.delta:
            found.append(
                f"stream {stream.stream_id}: {sf.pending_data} unread, window {sf.limit + sf.delta}"
            )
    if queued_total > config.max_unread_bytes:
        found.append(f"{queued_total} bytes queued on streams, budget {config.max_unread_bytes}")
    limit = config.max_concurrent_streams
    if not core.client_side:
        limit = max(limit, PRE_ACK_STREAM_LIMIT)  # until our SETTINGS are acked
    if len(core.streams_by_id) > limit:
        found.append(f"{len(core.streams_by_id)} streams, limit {limit}")
    h2_conn = core.h2
    if len(h2_conn.streams) > max(64, 2 * limit) + 1:
        found.append(f"h2 holds {len(h2_conn.streams)} streams, limit {limit}")
    buffer = h2_conn.incoming_buffer
    assert isinstance(buffer, FixedFrameBuffer)  # the reader's, with the block cap
    if between_reads and buffer.pending() > 9 + config.max_frame_size:
        found.append(f"{buffer.pending()} bytes in h2's frame buffer between reads")
    block = buffer.block_buffered()
    cap = buffer.max_header_block
    if block > cap:
        found.append(f"a header block of {block} bytes buffered, cap {cap}")
    table = h2_conn.decoder.header_table
    if table._current_size > h2_conn.decoder.max_allowed_table_size:
        found.append(
            f"HPACK table of {table._current_size} bytes,"
            f" allowed {h2_conn.decoder.max_allowed_table_size}"
        )
    return found


class BudgetWatch(trio.abc.Stream):
    """One end of an in-memory link that checks its connection's budgets
    (:func:`budget_violations`) whenever the connection's reader asks for more bytes:
    the reader reads only once it has dispatched everything it read before.
    ``core`` is set once the connection exists; violations are collected, not raised
    (raised in the reader they would be a contained fault, reported unshrunk)."""

    def __init__(self, inner: trio.abc.Stream) -> None:
        self.inner = inner
        self.core: ConnectionCore | None = None
        self.violations: list[str] = []
        self.checks = 0

    def check(self, *, between_reads: bool = True) -> None:
        if self.core is not None:
            self.checks += 1
            self.violations += budget_violations(self.core, between_reads=between_reads)

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        self.check()
        return await self.inner.receive_some(max_bytes)

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        await self.inner.aclose()


def watched_target(
    handler: Callable[[H2Stream], Awaitable[None]],
    watches: list[BudgetWatch],
    *,
    config: TransportConfig | None = None,
) -> Target:
    """``memory_target`` whose server end is a :class:`BudgetWatch` (appended to
    ``watches``), checked once more after the exchange, before the client closes."""

    @contextlib.asynccontextmanager
    async def connect() -> AsyncIterator[trio.abc.Stream]:
        client, server = trio.testing.memory_stream_pair()
        watch = BudgetWatch(server)
        watches.append(watch)
        done = trio.Event()

        async def serve(task_status: trio.TaskStatus[object]) -> None:
            await serve_connection(watch, handler, config=config, task_status=task_status)
            done.set()

        async with trio.open_nursery() as nursery:
            connection = await nursery.start(serve)
            watch.core = connection._core
            try:
                yield client
                # After the exchange: the connection may have ended mid-read (a
                # protocol error), leaving bytes in h2's buffer it will never parse.
                watch.check(between_reads=False)
            finally:
                await client.aclose()
                with trio.fail_after(RUN_LIMIT):
                    await done.wait()

    return connect


def assert_within_budgets(watches: list[BudgetWatch]) -> None:
    """Every check of every watched connection found it within its budgets."""
    assert watches, "no connection was watched"
    assert all(w.checks for w in watches), "a connection was never checked"
    assert [v for w in watches for v in w.violations] == []


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
    watches: list[BudgetWatch] = []
    with no_faults():
        verdict = play(watched_target(echo, watches), scenario, timeout=RUN_LIMIT)
    assert verdict.ok, (verdict.reason, describe(scenario.data), verdict.received)
    assert_within_budgets(watches)


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
    watches: list[BudgetWatch] = []
    with no_faults():
        verdict = play(watched_target(echo, watches, config=config), scenario, timeout=RUN_LIMIT)
    assert verdict.ok, (verdict.reason, describe(scenario.data), verdict.received)
    assert_within_budgets(watches)


_HOLD = encode_header_block(
    [(":method", "POST"), (":scheme", "http"), (":authority", "x"), (":path", "/hold")]
)


async def hold_or_echo(stream: H2Stream) -> None:
    """``/hold``: never read the body (until the connection ends); else :func:`echo`."""
    if stream.request.path == "/hold":
        await trio.sleep_forever()
    await echo(stream)


@st.composite
def unread_bodies(draw: st.DrawFn) -> list[Chunk]:
    """A peer that tries to make the server hold more than its budget: requests to
    ``/hold`` (whose handler never reads), then on each a body of about its window
    (65,535 bytes here), a little less or a little more, or any size, in DATA frames
    of up to 16 KiB interleaved in any order."""
    chunks: list[Chunk] = [PREFACE, WireFrame(FrameType.SETTINGS, 0, 0)]
    ids = [2 * i + 1 for i in range(draw(st.integers(1, 4)))]
    chunks += [WireFrame(FrameType.HEADERS, 0x4, sid, _HOLD) for sid in ids]
    sizes = st.one_of(st.sampled_from([65_535, 65_536, 49_152, 0]), st.integers(0, 80_000))
    frames: list[Chunk] = []
    for sid in ids:
        left = draw(sizes)
        while left:
            size = min(left, draw(st.sampled_from([16_384, 16_383, 1_000])))
            frames.append(WireFrame(FrameType.DATA, 0, sid, bytes(size)))
            left -= size
    return chunks + draw(st.permutations(frames))


@given(unread_bodies())
def test_unread_bodies_stay_within_the_budget(chunks: list[Chunk]) -> None:
    """Bodies no handler reads, sent up to the windows or past them: the server holds
    at most max_unread_bytes (here twice the smallest window: 128 KiB) and each
    stream at most its window, and a peer past them gets GOAWAY(FLOW_CONTROL_ERROR)."""
    config = TransportConfig(initial_window_size=65_535, max_unread_bytes=2 * 65_535)
    scenario = Scenario(tuple(chunks), Expect("alive"))
    watches: list[BudgetWatch] = []
    with no_faults():
        target = watched_target(hold_or_echo, watches, config=config)
        verdict = play(target, scenario, timeout=RUN_LIMIT)
    assert verdict.ok, (verdict.reason, describe(scenario.data), verdict.received)
    assert_within_budgets(watches)


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


async def _drive_client(data: bytes, watch_list: list[BudgetWatch] | None = None) -> list[str]:
    """Three GETs from a trio_h2t client while a fake server writes ``data``, then
    closes. Each GET ends with a response or a connection error; if the handshake
    itself fails (no SETTINGS in ``data``), that is the outcome of all three. The
    client's end of the link is a :class:`BudgetWatch` (appended to ``watch_list``)."""
    outcomes: list[str] = []
    client_end, server_t = trio.testing.memory_stream_pair()
    watch = BudgetWatch(client_end)
    if watch_list is not None:
        watch_list.append(watch)
    client_t: trio.abc.Stream = watch
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
                    watch.core = conn._core
                    watch.check()
                    for i in range(3):
                        requests.start_soon(one, conn, i)
                watch.check(between_reads=False)
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
    watches: list[BudgetWatch] = []
    with no_faults():
        outcomes = trio.run(_drive_client, serialize(chunks), watches)
    assert len(outcomes) == 3
    assert [v for w in watches for v in w.violations] == []


@given(st.binary(max_size=200))
def test_client_survives_raw_bytes(data: bytes) -> None:
    """The same with raw bytes instead of frames."""
    watches: list[BudgetWatch] = []
    with no_faults():
        assert len(trio.run(_drive_client, data, watches)) == 3
    assert [v for w in watches for v in w.violations] == []
