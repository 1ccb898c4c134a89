"""The Rapid Reset defence (CVE-2023-44487): handlers capped, client resets rate-limited.

A client that opens a stream and resets it at once never holds more than one open
stream, so MAX_CONCURRENT_STREAMS alone does not bound the handlers it makes the
server start. Two bounds do (docs/security.md): a new stream is refused while
MAX_CONCURRENT_STREAMS handlers are still running (``_server._Admission.admit``), and
the client's RST_STREAM frames draw on a token bucket (``TransportConfig.reset_burst``,
``reset_rate``; ``_ratelimit.TokenBucket``) whose exhaustion ends the connection with
GOAWAY(ENHANCE_YOUR_CALM, "too_many_resets").
"""

from __future__ import annotations

import logging

import h2.config
import h2.events
import hpack
import pytest
import trio
import trio.lowlevel
import trio.testing
from h2.errors import ErrorCodes
from helpers import REQUEST, UnlimitedH2Connection, open_peer_client
from hyperframe.frame import HeadersFrame, RstStreamFrame
from test_floods import Attacker, MiB, run_attack

import trio_h2t
from trio_h2t import H2Stream, TransportConfig
from trio_h2t._ratelimit import TokenBucket


def test_token_bucket_allows_its_burst_then_its_rate() -> None:
    """A full bucket gives ``burst`` tokens at once, then ``rate`` per second."""
    bucket = TokenBucket(3, 2.0, now=0.0)
    assert [bucket.take(0.0) for _ in range(4)] == [True, True, True, False]
    assert not bucket.take(0.25)  # half a token
    assert bucket.take(0.5)  # one token after 0.5 s at 2/s
    assert not bucket.take(0.5)


def test_token_bucket_never_holds_more_than_its_burst() -> None:
    """An idle hour refills the bucket to ``burst``, not beyond."""
    bucket = TokenBucket(2, 10.0, now=0.0)
    assert bucket.take(3600.0)
    assert bucket.take(3600.0)
    assert not bucket.take(3600.0)


class _Counting:
    """A handler that works through a reset (shielded), counting starts and overlap."""

    def __init__(self, work: float) -> None:
        self.work = work
        self.started = 0
        self.running = 0
        self.peak = 0

    async def __call__(self, stream: H2Stream) -> None:
        if stream.request.path == "/probe":  # another connection's: not counted
            await stream.send_headers([(":status", "200")], end_stream=True)
            return
        self.started += 1
        self.running += 1
        self.peak = max(self.peak, self.running)
        try:
            with trio.CancelScope(shield=True):
                await trio.sleep(self.work)
            await stream.send_headers([(":status", "200")], end_stream=True)
        finally:
            self.running -= 1


def _pairs(count: int) -> list[bytes]:
    """``count`` HEADERS + RST_STREAM(CANCEL) pairs on new streams, 100 pairs a
    batch. Built before the attack: the attacker shares the server's process and CPU."""
    block = hpack.Encoder().encode(
        [(":method", "GET"), (":scheme", "http"), (":path", "/"), (":authority", "a")]
    )
    frames = [
        HeadersFrame(2 * i + 1, block, flags=["END_HEADERS", "END_STREAM"]).serialize()
        + RstStreamFrame(2 * i + 1, error_code=ErrorCodes.CANCEL).serialize()
        for i in range(count)
    ]
    return [b"".join(frames[i : i + 100]) for i in range(0, count, 100)]


async def test_rapid_reset_is_bounded_and_ends_with_enhance_your_calm(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """10,000 HEADERS+RST_STREAM pairs over TCP start at most MAX_CONCURRENT_STREAMS +
    reset_burst handlers, never more than MAX_CONCURRENT_STREAMS at once, and end
    with GOAWAY(ENHANCE_YOUR_CALM, "too_many_resets"), the server holding at most
    4 MiB more at its peak (tracemalloc; attacker and probe included) while another
    connection's median latency stays within twice its idle median (plus 50 ms on a
    loaded machine): ``tests/test_floods.py``'s harness and rules; ``pytest -s``
    prints the figures (docs/security.md's table)."""
    handler = _Counting(work=0.05)
    config = TransportConfig()
    batches = _pairs(10_000)

    async def attack(attacker: Attacker) -> None:
        for batch in batches:
            if not await attacker.send(batch) or attacker.closed.is_set():
                return
            await trio.lowlevel.checkpoint()

    with caplog.at_level(logging.WARNING, logger="trio_h2t"):
        outcome = await run_attack(handler, attack, config=config)
    outcome.report(
        f"Rapid Reset: {handler.started} handlers started, at most {handler.peak} at once"
    )
    assert outcome.goaway == (ErrorCodes.ENHANCE_YOUR_CALM, b"too_many_resets")
    assert handler.started <= config.max_concurrent_streams + config.reset_burst
    assert handler.peak <= config.max_concurrent_streams
    assert outcome.peak_bytes <= 4 * MiB
    outcome.assert_probe_served()
    assert sum("reset_burst" in r.getMessage() for r in caplog.records) == 1


async def test_handlers_still_running_count_against_the_stream_limit() -> None:
    """With MAX_CONCURRENT_STREAMS handlers still running for streams the client has
    reset, a new stream's handler does not start; the ones reset while they waited
    never start, and once the running ones finish, new streams start again."""
    release = trio.Event()
    started: list[int] = []

    async def handler(stream: H2Stream) -> None:
        started.append(stream.stream_id)
        with trio.CancelScope(shield=True):
            await release.wait()
        if stream.stream_id > 9:
            await stream.send_headers([(":status", "200")], end_stream=True)

    config = TransportConfig(max_concurrent_streams=2)
    h2_conn = UnlimitedH2Connection(h2.config.H2Configuration(client_side=True))
    async with open_peer_client(handler, server_config=config, h2_conn=h2_conn) as (peer, core):
        await peer.read_until(lambda: core.settings_acked)
        for sid in (1, 3, 5, 7, 9):  # open and reset each, in one write
            peer.h2.send_headers(sid, REQUEST, end_stream=True)
            peer.h2.reset_stream(sid, ErrorCodes.CANCEL)
        await peer.flush()
        await trio.testing.wait_all_tasks_blocked()
        try:
            assert sorted(started) == [1, 3]  # trio may start them in either order
            assert core.handlers_running == 2
        finally:
            release.set()  # else a failure would hang on the shielded handlers
        await trio.testing.wait_all_tasks_blocked()
        assert core.handlers_running == 0
        peer.h2.send_headers(11, REQUEST, end_stream=True)
        await peer.flush()
        ended = await peer.receive_until(lambda ev: isinstance(ev, h2.events.StreamEnded))
        assert ended.stream_id == 11
        assert sorted(started) == [1, 3, 11]
        assert core.error is None


async def test_a_stream_waits_for_a_handler_slot_instead_of_being_refused() -> None:
    """A client within MAX_CONCURRENT_STREAMS whose earlier streams are closed but whose
    handlers still run (work after the response) gets its new stream served once a
    handler ends, not refused (a refusal failed benchmain's clients at c=100)."""
    hold = trio.Event()
    started: list[int] = []

    async def handler(stream: H2Stream) -> None:
        started.append(stream.stream_id)
        await stream.send_headers([(":status", "200")], end_stream=True)
        if stream.stream_id < 5:
            await hold.wait()  # work after the response: the stream is closed

    config = TransportConfig(max_concurrent_streams=2)
    async with open_peer_client(handler, server_config=config) as (peer, core):
        await peer.read_until(lambda: core.settings_acked)
        for sid in (1, 3):
            peer.h2.send_headers(sid, REQUEST, end_stream=True)
        await peer.flush()
        await peer.read_until(lambda: len(peer.events_of(h2.events.StreamEnded)) == 2)
        await trio.testing.wait_all_tasks_blocked()
        assert core.open_streams == 0
        assert core.handlers_running == 2
        peer.h2.send_headers(5, REQUEST, end_stream=True)  # within the limit: 0 open
        await peer.flush()
        await trio.testing.wait_all_tasks_blocked()
        assert sorted(started) == [1, 3]  # it waits for a handler slot
        hold.set()
        with trio.fail_after(5):  # a refused stream would never end
            ended = await peer.receive_until(lambda ev: isinstance(ev, h2.events.StreamEnded))
        assert ended.stream_id == 5
        assert not peer.events_of(h2.events.StreamReset)
        assert core.error is None


async def test_refusing_a_stream_the_client_already_reset_keeps_the_connection() -> None:
    """At the stream limit, HEADERS and RST_STREAM for a new stream in one read: the
    refusal finds the stream closed by the client and sends nothing (it used to
    raise StreamClosedError out of the reader and end every connection)."""
    release = trio.Event()

    async def handler(stream: H2Stream) -> None:
        await release.wait()
        await stream.send_headers([(":status", "200")], end_stream=True)

    config = TransportConfig(max_concurrent_streams=1)
    h2_conn = UnlimitedH2Connection(h2.config.H2Configuration(client_side=True))
    async with open_peer_client(handler, server_config=config, h2_conn=h2_conn) as (peer, core):
        await peer.read_until(lambda: core.settings_acked)
        peer.h2.send_headers(1, REQUEST, end_stream=True)
        peer.h2.send_headers(3, REQUEST, end_stream=True)
        peer.h2.reset_stream(3, ErrorCodes.CANCEL)
        await peer.flush()
        await trio.testing.wait_all_tasks_blocked()
        release.set()
        ended = await peer.receive_until(lambda ev: isinstance(ev, h2.events.StreamEnded))
        assert ended.stream_id == 1
        assert core.error is None
        assert not peer.events_of(h2.events.StreamReset)


@pytest.mark.parametrize("burst", [1, 10])
async def test_resets_over_the_burst_end_the_connection(burst: int) -> None:
    """The client's reset number ``reset_burst + 1`` (none refilled: reset_rate=0)
    gets GOAWAY(ENHANCE_YOUR_CALM, "too_many_resets"), and the connection closes."""

    async def handler(stream: H2Stream) -> None:
        await trio.sleep_forever()

    config = TransportConfig(reset_burst=burst, reset_rate=0)
    async with open_peer_client(handler, server_config=config) as (peer, core):
        for i in range(burst):
            sid = 2 * i + 1
            peer.h2.send_headers(sid, REQUEST)
            peer.h2.reset_stream(sid, ErrorCodes.CANCEL)
        await peer.flush()
        await trio.testing.wait_all_tasks_blocked()
        assert core.error is None
        sid = 2 * burst + 1
        peer.h2.send_headers(sid, REQUEST)
        peer.h2.reset_stream(sid, ErrorCodes.CANCEL)
        await peer.flush()
        with trio.fail_after(5):  # a server without the budget never answers
            goaway = await peer.receive_until(
                lambda ev: isinstance(ev, h2.events.ConnectionTerminated)
            )
        assert goaway.error_code == ErrorCodes.ENHANCE_YOUR_CALM
        assert goaway.additional_data == b"too_many_resets"
        assert isinstance(core.error, trio_h2t.RemoteProtocolError)
        assert core.error.error_code == ErrorCodes.ENHANCE_YOUR_CALM
        await peer.read_until(lambda: peer.eof)


async def test_resets_within_the_rate_are_never_cut_off(autojump_clock: object) -> None:
    """A client that cancels 30 streams a second, for longer than a burst lasts, is
    under reset_rate=33/s and keeps its connection (virtual time: autojump clock)."""

    async def handler(stream: H2Stream) -> None:
        await trio.sleep_forever()

    config = TransportConfig(reset_burst=20, reset_rate=33.0)
    async with open_peer_client(handler, server_config=config) as (peer, core):
        for i in range(300):  # 10 s at 30/s: 15 times the burst
            sid = 2 * i + 1
            peer.h2.send_headers(sid, REQUEST)
            peer.h2.reset_stream(sid, ErrorCodes.CANCEL)
            await peer.flush()
            await trio.sleep(1 / 30)
        await trio.testing.wait_all_tasks_blocked()
        assert core.error is None
        assert not peer.events_of(h2.events.ConnectionTerminated)


def test_reset_budget_is_validated() -> None:
    """reset_burst must be >= 1 and reset_rate >= 0."""
    with pytest.raises(ValueError, match="reset_burst"):
        TransportConfig(reset_burst=0)
    with pytest.raises(ValueError, match="reset_rate"):
        TransportConfig(reset_rate=-1)
