"""Floods and memory attacks against a real server over 127.0.0.1 (docs/security.md).

Each attack runs from a raw-frame client (hyperframe frames over a TCP socket, as in
``test_rapid_reset.py``) while a probe connection (a trio_h2t client on its own
connection) keeps sending requests. Each test asserts three things:

- the attacker gets the documented answer (a GOAWAY with its code and debug data,
  or RST_STREAMs);
- the server's memory stays within the stated bound: the peak that ``tracemalloc``
  sees during the attack, above what was allocated before it (the attacker's and
  the probe's allocations included, so the bound is loose on purpose);
- the probe keeps being served: its median latency during the attack within twice
  its median when idle, plus 50 ms of slack for a loaded 2-core machine (the
  figures are printed: ``pytest -s tests/test_floods.py``).
"""

from __future__ import annotations

import contextlib
import functools
import statistics
import struct
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import hpack
import pytest
import trio
import trio.lowlevel
import trio.testing
from h2.errors import ErrorCodes
from helpers import open_peer_server, take_frames
from hyperframe.frame import (
    AltSvcFrame,
    ContinuationFrame,
    DataFrame,
    GoAwayFrame,
    HeadersFrame,
    PingFrame,
    PriorityFrame,
    RstStreamFrame,
    SettingsFrame,
    WindowUpdateFrame,
)

import trio_h2t
from trio_h2t import H2Stream, TransportConfig
from trio_h2t._flow import ConnectionInFlow, StreamInFlow

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
MiB = 1024 * 1024
#: The probe's requests before the attack (its idle latency).
IDLE_SAMPLES = 30


def _block(path: str = "/") -> bytes:
    return hpack.Encoder().encode(
        [(":method", "POST"), (":scheme", "http"), (":path", path), (":authority", "a")]
    )


# ============================================================ the inbound budget, sans-IO


def test_budget_caps_the_window_given_back() -> None:
    """With unread bytes buffered, the connection window given back stops where
    buffered bytes plus the peer's window reach the budget, and comes back as the
    application reads."""
    conn = ConnectionInFlow(limit=1000, ratio=0.25, budget=1500)
    stream = StreamInFlow(1000, 0.25, conn)
    stream.on_data(1000)
    assert conn.on_data(1000) == 500  # 1000 buffered: the peer may send 500 more
    assert conn.buffered + conn.limit - conn.unacked == 1500
    stream.on_data(500)
    assert conn.on_data(500) == 0  # the budget is full: nothing given back
    assert conn.buffered + conn.limit - conn.unacked == 1500
    stream.on_read(300)  # the application reads
    assert conn.grant() == 300
    stream.release()  # the stream ends with 1200 unread
    assert conn.buffered == 0
    assert conn.grant() == 700  # the whole window is back
    assert conn.limit - conn.unacked == 1000


def test_budget_caps_window_growth_and_the_bdp_flush() -> None:
    """new_limit and reset give back no more than the budget allows."""
    conn = ConnectionInFlow(limit=1000, ratio=0.25, budget=1200)
    stream = StreamInFlow(1000, 0.25, conn)
    stream.on_data(600)
    assert conn.on_data(600) == 200  # 600 buffered: the peer's window back to 600
    assert conn.reset() == 0  # the BDP flush gives nothing past the budget
    assert conn.new_limit(4000) == 0  # nor does growth
    assert conn.buffered + conn.limit - conn.unacked == 1200
    stream.on_read(600)
    assert conn.grant() == 600
    assert conn.limit - conn.unacked == 1200  # all of the budget, none of the growth past it


def test_budget_below_the_window_is_refused() -> None:
    """A ConnectionInFlow whose budget is below its window could not keep its
    invariant from the start; max_unread_bytes below the RFC's window is refused."""
    with pytest.raises(ValueError, match="budget"):
        ConnectionInFlow(limit=1000, ratio=0.25, budget=999)
    with pytest.raises(ValueError, match="max_unread_bytes"):
        TransportConfig(max_unread_bytes=65_534)


def test_connection_window_above_the_budget_is_lowered_to_it() -> None:
    """The connection window we announce never exceeds max_unread_bytes."""
    from trio_h2t._connection import ConnectionCore

    config = TransportConfig(max_unread_bytes=4 * MiB)
    core = ConnectionCore(_Null(), client_side=False, config=config)  # type: ignore[arg-type]
    assert core.in_flow.limit == 4 * MiB
    assert core.in_flow.budget == 4 * MiB


class _Null:
    """Stands in for a transport the test never touches."""


# ============================================================ the attack harness


@dataclass
class Outcome:
    """What an attack left: the frames the attacker got, memory, the probe's figures."""

    goaways: list[GoAwayFrame] = field(default_factory=list)
    resets: list[RstStreamFrame] = field(default_factory=list)
    peak_bytes: int = 0
    idle_median: float = 0.0
    attack_median: float = 0.0
    attack_samples: int = 0
    attack_seconds: float = 0.0

    @property
    def goaway(self) -> tuple[int, bytes]:
        assert len(self.goaways) == 1, self.goaways
        g = self.goaways[0]
        return g.error_code, g.additional_data

    def report(self, name: str) -> None:
        print(
            f"\n[flood] {name}: goaway={[(g.error_code, g.additional_data) for g in self.goaways]}"
            f" resets={len(self.resets)} peak={self.peak_bytes / 1024:.0f} KiB"
            f" probe idle={self.idle_median * 1e3:.2f} ms"
            f" attack={self.attack_median * 1e3:.2f} ms (n={self.attack_samples})"
            f" attack time={self.attack_seconds:.2f} s"
        )

    def assert_probe_served(self) -> None:
        """The probe's median latency during the attack is within 2x of idle (plus
        slack for a loaded machine), and it was served during the attack."""
        assert self.attack_samples > 0
        assert self.attack_median <= 2 * self.idle_median + 0.05, (
            self.attack_median,
            self.idle_median,
        )


class Attacker:
    """A raw HTTP/2 client over TCP: frames as bytes, and the frames it gets back."""

    def __init__(self, sock: trio.SocketStream) -> None:
        self.sock = sock
        self.goaways: list[GoAwayFrame] = []
        self.resets: list[RstStreamFrame] = []
        self.closed = trio.Event()  # the server closed its side
        self._buf = bytearray()

    async def send(self, data: bytes) -> bool:
        """Send; False once the server has closed the connection."""
        try:
            await self.sock.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return False
        return True

    async def read_all(self) -> None:
        """Read and parse until EOF (or a reset link)."""
        while True:
            try:
                data = await self.sock.receive_some(65536)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                data = b""
            if not data:
                self.closed.set()
                return
            self._buf += data
            for frame in take_frames(self._buf):
                if isinstance(frame, GoAwayFrame):
                    self.goaways.append(frame)
                elif isinstance(frame, RstStreamFrame):
                    self.resets.append(frame)


Attack = Callable[[Attacker], Awaitable[None]]


async def _probe_loop(port: int, idle: list[float], busy: list[float], phase: list[str]) -> None:
    async with trio_h2t.open_connection("127.0.0.1", port) as conn:
        while phase[0] != "over":
            start = time.perf_counter()
            response = await conn.request("GET", "/probe")
            elapsed = time.perf_counter() - start
            assert response.status == 200
            if phase[0] == "idle":
                idle.append(elapsed)
            elif phase[0] == "attack":
                busy.append(elapsed)
            await trio.sleep(0.002)


async def run_attack(
    handler: Callable[[H2Stream], Awaitable[None]],
    attack: Attack,
    *,
    config: TransportConfig | None = None,
    reads_during_attack: bool = True,
    min_attack_seconds: float = 0.3,
    on_server: Callable[[trio_h2t.H2Server], None] | None = None,
) -> Outcome:
    """Serve ``handler``; measure the probe idle, then run ``attack`` on a raw
    connection while the probe goes on; return what happened.

    The attacker's connection is kept until the server closes it (or 20 s pass).
    With ``reads_during_attack`` False it reads nothing until its attack is sent (a
    peer that never reads our answers), then reads what is left.
    """

    async def serve(stream: H2Stream) -> None:
        if stream.request.path == "/probe":
            await stream.send_headers([(":status", "200")], end_stream=True)
            return
        await handler(stream)

    outcome = Outcome()
    idle: list[float] = []
    busy: list[float] = []
    phase = ["idle"]
    tracemalloc.start()
    try:
        with trio.fail_after(60):
            async with (
                trio_h2t.open_server(serve, 0, host="127.0.0.1", config=config) as server,
                trio.open_nursery() as nursery,
            ):
                if on_server is not None:
                    on_server(server)
                nursery.start_soon(_probe_loop, server.port, idle, busy, phase)
                while len(idle) < IDLE_SAMPLES:  # noqa: ASYNC110 (wall-clock samples)
                    await trio.sleep(0.01)
                sock = await trio.open_tcp_stream("127.0.0.1", server.port)
                attacker = Attacker(sock)
                await attacker.send(PREFACE + SettingsFrame(0).serialize())
                tracemalloc.reset_peak()
                base, _ = tracemalloc.get_traced_memory()
                phase[0] = "attack"
                start = time.perf_counter()
                async with trio.open_nursery() as inner:
                    if reads_during_attack:
                        inner.start_soon(attacker.read_all)
                    await attack(attacker)
                    if not reads_during_attack:
                        inner.start_soon(attacker.read_all)
                    with trio.move_on_after(20):
                        await attacker.closed.wait()
                    # Enough probe samples to take a median of, while the attack
                    # connection was open or had just been closed.
                    while time.perf_counter() - start < min_attack_seconds or len(busy) < 5:  # noqa: ASYNC110
                        await trio.sleep(0.01)
                    inner.cancel_scope.cancel()
                outcome.attack_seconds = time.perf_counter() - start
                _, peak = tracemalloc.get_traced_memory()
                outcome.peak_bytes = peak - base
                phase[0] = "over"
                await sock.aclose()
    finally:
        tracemalloc.stop()
    outcome.goaways = attacker.goaways
    outcome.resets = attacker.resets
    outcome.idle_median = statistics.median(idle)
    outcome.attack_median = statistics.median(busy)
    outcome.attack_samples = len(busy)
    return outcome


async def _sleeper(stream: H2Stream) -> None:
    await trio.sleep_forever()


async def _flood(attacker: Attacker, frame: bytes, count: int, *, batch: int = 100) -> None:
    """Send ``frame`` ``count`` times, ``batch`` frames per write, yielding between
    writes so the probe runs; stop once the server closes the connection."""
    chunk = frame * batch
    for _ in range(count // batch):
        if not await attacker.send(chunk) or attacker.closed.is_set():
            return
        await trio.lowlevel.checkpoint()


# ============================================================ the inbound budget


async def test_unread_bodies_stay_within_the_budget_and_flow_again_when_read() -> None:
    """64 uploads of 1 MiB each to handlers that do not read yet buffer at most
    max_unread_bytes on the server (the peer's sends stall), and all complete once
    the handlers read: the held-back window comes back as they read."""
    budget = 8 * MiB
    config = TransportConfig(max_unread_bytes=budget)
    release = trio.Event()
    received: list[int] = []
    cores: list[object] = []

    async def handler(stream: H2Stream) -> None:
        await release.wait()
        body = await stream.read_all()
        received.append(len(body))
        await stream.send_headers([(":status", "200")], end_stream=True)

    body = b"x" * MiB
    with trio.fail_after(60):
        async with trio_h2t.open_server(handler, 0, host="127.0.0.1", config=config) as server:
            async with (
                trio_h2t.open_connection("127.0.0.1", server.port) as conn,
                trio.open_nursery() as nursery,
            ):
                statuses: list[int] = []

                async def upload() -> None:
                    response = await conn.request("POST", "/", body=body)
                    statuses.append(response.status)

                for _ in range(64):
                    nursery.start_soon(upload)
                (core,) = server._connections
                cores.append(core)
                peak = 0
                for _ in range(200):  # until the uploads stall (a few seconds at most)
                    await trio.sleep(0.02)
                    peak = max(peak, core.in_flow.buffered)
                    if peak >= budget * 0.7 and core.in_flow.buffered == peak:
                        await trio.sleep(0.2)
                        break
                peak = max(peak, core.in_flow.buffered)
                assert budget * 0.5 <= peak <= budget
                assert core.in_flow.buffered + core.in_flow.limit - core.in_flow.unacked <= budget
                release.set()
            assert statuses == [200] * 64
            assert received == [MiB] * 64
    print(f"\n[flood] polite uploads: peak unread {peak / MiB:.1f} MiB of {budget / MiB:.0f} MiB")


async def test_a_peer_overrunning_the_budget_gets_flow_control_error() -> None:
    """A raw client sending 1 MiB on each of 100 streams (each within its stream
    window, 100 MiB in all) to handlers that never read overruns the connection
    window the budget allows: GOAWAY(FLOW_CONTROL_ERROR) after at most the budget,
    whose memory is all the server holds."""
    budget = 8 * MiB
    config = TransportConfig(max_unread_bytes=budget)
    payload = b"x" * MiB
    block = _block()

    async def attack(attacker: Attacker) -> None:
        for i in range(100):
            sid = 2 * i + 1
            head = HeadersFrame(sid, block, flags=["END_HEADERS"]).serialize()
            data = DataFrame(sid, b"").serialize()  # the 9-byte header, patched below
            header = len(payload).to_bytes(3, "big") + data[3:9]
            if not await attacker.send(head + header):
                return
            if not await attacker.send(payload):
                return
            await trio.lowlevel.checkpoint()

    outcome = await run_attack(_sleeper, attack, config=config)
    outcome.report("DATA past the budget")
    assert outcome.goaway[0] == ErrorCodes.FLOW_CONTROL_ERROR
    assert outcome.peak_bytes <= budget + 6 * MiB
    outcome.assert_probe_served()


# ============================================================ floods of frames


@pytest.mark.parametrize(
    ("name", "frame", "debug"),
    [
        ("SETTINGS", SettingsFrame(0, settings={4: 65_535}).serialize(), b"too_many_settings"),
        ("PRIORITY", PriorityFrame(1, depends_on=0, stream_weight=15).serialize(), None),
        ("WINDOW_UPDATE +1", WindowUpdateFrame(0, window_increment=1).serialize(), None),
    ],
)
async def test_control_frame_floods_end_with_enhance_your_calm(
    name: str, frame: bytes, debug: bytes | None
) -> None:
    """10,000 SETTINGS, PRIORITY or WINDOW_UPDATE(+1) frames from a peer that never
    reads get GOAWAY(ENHANCE_YOUR_CALM, too_many_<kind>) after flood_burst (1000)."""
    expected = (
        debug
        or {
            "PRIORITY": b"too_many_priority",
            "WINDOW_UPDATE +1": b"too_many_window_updates",
        }[name]
    )

    async def attack(attacker: Attacker) -> None:
        await _flood(attacker, frame, 10_000)

    outcome = await run_attack(_sleeper, attack, reads_during_attack=False)
    outcome.report(name)
    assert outcome.goaway == (ErrorCodes.ENHANCE_YOUR_CALM, expected)
    assert outcome.peak_bytes <= 4 * MiB
    outcome.assert_probe_served()


def _raw_frame(kind: int, stream_id: int, payload: bytes, flags: int = 0) -> bytes:
    """A frame of any type, built by hand (hyperframe knows no PRIORITY_UPDATE)."""
    n = len(payload)
    return struct.pack(">BHBBI", n >> 16, n & 0xFFFF, kind, flags, stream_id) + payload


#: RFC 9218 §7.1: PRIORITY_UPDATE (type 0x10) on stream 0, for stream 1: "u=1".
PRIORITY_UPDATE = _raw_frame(0x10, 0, struct.pack(">I", 1) + b"u=1")
#: A request's header block (the raw-h2 clients here).
REQUEST_HEADERS = [
    (b":method", b"GET"),
    (b":scheme", b"http"),
    (b":authority", b"x"),
    (b":path", b"/"),
]
#: An unknown frame type (0xFF; RFC 9113 §5.5: ignored).
UNKNOWN_FRAME = _raw_frame(0xFF, 0, bytes(8))


@pytest.mark.parametrize(
    ("name", "frame", "debug"),
    [
        (
            "ALTSVC",
            AltSvcFrame(0, origin=b"http://a", field=b'h3=":443"').serialize(),
            b"too_many_altsvc",
        ),
        ("unknown type 0xFF", UNKNOWN_FRAME, b"too_many_unknown_frames"),
        ("PRIORITY_UPDATE", PRIORITY_UPDATE, b"too_many_priority_updates"),
        ("SETTINGS ACK", SettingsFrame(0, flags=["ACK"]).serialize(), b"too_many_settings_acks"),
        (
            "PING ACK",
            PingFrame(0, flags=["ACK"], opaque_data=b"12345678").serialize(),
            b"too_many_ping_acks",
        ),
    ],
)
async def test_ignored_frame_floods_end_with_enhance_your_calm(
    name: str, frame: bytes, debug: bytes
) -> None:
    """10,000 frames that RFC 9113 has us ignore and that answer nothing of ours
    (ALTSVC, unknown types, PRIORITY_UPDATE beyond one per stream the client opened,
    a SETTINGS ACK or PING ACK we did not ask for) from a peer that never reads get
    GOAWAY(ENHANCE_YOUR_CALM, too_many_<kind>) after flood_burst (1000)."""

    async def attack(attacker: Attacker) -> None:
        await _flood(attacker, frame, 10_000)

    outcome = await run_attack(_sleeper, attack, reads_during_attack=False)
    outcome.report(name)
    assert outcome.goaway == (ErrorCodes.ENHANCE_YOUR_CALM, debug)
    assert outcome.peak_bytes <= 4 * MiB
    outcome.assert_probe_served()


async def test_empty_continuation_chains_end_with_enhance_your_calm() -> None:
    """Header blocks each stretched by 30 empty CONTINUATIONs (under the cap of 64 per
    block, so every block completes), on new streams: GOAWAY(ENHANCE_YOUR_CALM,
    too_many_empty_continuations) after flood_burst of them, before the streams
    reach MAX_CONCURRENT_STREAMS."""

    def request(sid: int) -> bytes:
        head = HeadersFrame(sid, _block(), flags=["END_STREAM"]).serialize()
        more = ContinuationFrame(sid, b"").serialize()
        last = ContinuationFrame(sid, b"", flags=["END_HEADERS"]).serialize()
        return head + more * 29 + last

    requests = [request(2 * i + 1) for i in range(99)]

    async def attack(attacker: Attacker) -> None:
        for block in requests:
            if not await attacker.send(block) or attacker.closed.is_set():
                return
            await trio.lowlevel.checkpoint()

    outcome = await run_attack(_sleeper, attack, reads_during_attack=False)
    outcome.report("CONTINUATION chains, empty")
    assert outcome.goaway == (ErrorCodes.ENHANCE_YOUR_CALM, b"too_many_empty_continuations")
    assert outcome.peak_bytes <= 4 * MiB
    outcome.assert_probe_served()


async def test_a_server_flooding_a_client_with_ping_acks_is_cut_off() -> None:
    """The client counts too: a server sending PING ACKs the client never asked for
    gets GOAWAY(ENHANCE_YOUR_CALM, too_many_ping_acks) and the connection ends."""
    ack = PingFrame(0, flags=["ACK"], opaque_data=b"12345678").serialize()
    with trio.fail_after(30):
        async with open_peer_server() as (conn, peer):
            await peer.send_raw(ack * 1001)
            while not any(isinstance(f, GoAwayFrame) for f in peer.frames):
                await peer.receive()
            [goaway] = [f for f in peer.frames if isinstance(f, GoAwayFrame)]
            assert (goaway.error_code, goaway.additional_data) == (
                ErrorCodes.ENHANCE_YOUR_CALM,
                b"too_many_ping_acks",
            )
            with pytest.raises(trio_h2t.ConnectionClosingError):
                await conn.request("GET", "/")
            assert isinstance(conn.error, trio_h2t.RemoteProtocolError)
            assert conn.error.error_code == ErrorCodes.ENHANCE_YOUR_CALM


async def test_ping_flood_gets_too_many_pings() -> None:
    """A PING flood from a peer that never reads gets GOAWAY(ENHANCE_YOUR_CALM,
    too_many_pings) from the ping policy (its third strike)."""

    async def attack(attacker: Attacker) -> None:
        await _flood(attacker, PingFrame(0, opaque_data=b"12345678").serialize(), 10_000)

    outcome = await run_attack(_sleeper, attack, reads_during_attack=False)
    outcome.report("PING")
    assert outcome.goaway == (ErrorCodes.ENHANCE_YOUR_CALM, b"too_many_pings")
    assert outcome.peak_bytes <= 4 * MiB
    outcome.assert_probe_served()


async def test_ping_flood_with_the_policy_off_hits_the_flood_budget() -> None:
    """With the ping policy off (ping_min_interval=0 while a stream is open), PINGs
    arriving faster than their ACKs are written count against the flood budget:
    GOAWAY(ENHANCE_YOUR_CALM, too_many_pings)."""
    config = TransportConfig(ping_min_interval=0)
    block = _block()

    async def attack(attacker: Attacker) -> None:
        await attacker.send(HeadersFrame(1, block, flags=["END_HEADERS"]).serialize())
        await _flood(attacker, PingFrame(0, opaque_data=b"12345678").serialize(), 100_000)

    outcome = await run_attack(_sleeper, attack, config=config, reads_during_attack=False)
    outcome.report("PING, policy off")
    assert outcome.goaway == (ErrorCodes.ENHANCE_YOUR_CALM, b"too_many_pings")
    assert outcome.peak_bytes <= 4 * MiB
    outcome.assert_probe_served()


async def test_empty_data_flood_ends_with_enhance_your_calm() -> None:
    """Empty DATA frames without END_STREAM on an open stream get GOAWAY
    (ENHANCE_YOUR_CALM, too_many_empty_data)."""
    block = _block()

    async def attack(attacker: Attacker) -> None:
        await attacker.send(HeadersFrame(1, block, flags=["END_HEADERS"]).serialize())
        await _flood(attacker, DataFrame(1, b"").serialize(), 10_000)

    outcome = await run_attack(_sleeper, attack, reads_during_attack=False)
    outcome.report("empty DATA")
    assert outcome.goaway == (ErrorCodes.ENHANCE_YOUR_CALM, b"too_many_empty_data")
    assert outcome.peak_bytes <= 4 * MiB
    outcome.assert_probe_served()


async def test_open_streams_past_the_limit_are_refused_then_cut_off() -> None:
    """10,000 HEADERS without END_STREAM, each on a new stream: at most
    MAX_CONCURRENT_STREAMS (100) handlers start, the rest are refused with
    RST_STREAM(REFUSED_STREAM), and after flood_burst refusals the peer gets GOAWAY
    (ENHANCE_YOUR_CALM, too_many_refused_streams)."""
    started = 0
    block = _block()

    async def handler(stream: H2Stream) -> None:
        nonlocal started
        started += 1
        await trio.sleep_forever()

    # Built before the attack: the attacker shares the server's process and CPU.
    batches = [
        b"".join(
            HeadersFrame(2 * i + 1, block, flags=["END_HEADERS"]).serialize()
            for i in range(start, start + 100)
        )
        for start in range(0, 10_000, 100)
    ]

    async def attack(attacker: Attacker) -> None:
        for frames in batches:
            if not await attacker.send(frames) or attacker.closed.is_set():
                return
            await trio.lowlevel.checkpoint()

    outcome = await run_attack(handler, attack)
    outcome.report("HEADERS without END_STREAM")
    assert outcome.goaway == (ErrorCodes.ENHANCE_YOUR_CALM, b"too_many_refused_streams")
    assert started <= 100
    assert {r.error_code for r in outcome.resets} == {ErrorCodes.REFUSED_STREAM}
    assert outcome.peak_bytes <= 8 * MiB
    outcome.assert_probe_served()


async def test_refused_streams_are_forgotten_at_once() -> None:
    """A peer that holds its one allowed stream open and opens 500 more (all refused)
    leaves h2's stream table at that one stream: a refused stream used to stay there
    until some stream of ours closed, so a peer refusing flood_rate streams a second
    while holding its streams grew it without bound."""
    import h2.config
    import h2.events
    from helpers import REQUEST, UnlimitedH2Connection, open_peer_client

    async def handler(stream: H2Stream) -> None:
        await trio.sleep_forever()

    config = TransportConfig(max_concurrent_streams=1, flood_burst=10_000)
    peer_h2 = UnlimitedH2Connection(h2.config.H2Configuration(client_side=True))
    async with open_peer_client(handler, server_config=config, h2_conn=peer_h2) as (peer, core):
        await peer.read_until(lambda: core.settings_acked)
        for i in range(501):
            peer.h2.send_headers(2 * i + 1, REQUEST, end_stream=True)
        await peer.flush()
        await peer.read_until(lambda: len(peer.events_of(h2.events.StreamReset)) == 500)
        assert core.error is None
        assert list(core.h2.streams) == [1]
        assert core.open_streams == 1


# ============================================================ header blocks


async def test_continuation_flood_is_cut_off_while_the_block_arrives() -> None:
    """HEADERS without END_HEADERS, then 16 KiB CONTINUATION frames without end: the
    server answers GOAWAY(ENHANCE_YOUR_CALM) once the block passes 4 times
    max_header_list_size (256 KiB), before END_HEADERS, holding no more than that."""
    fragment = b"\x00" * 16_384

    async def attack(attacker: Attacker) -> None:
        await attacker.send(HeadersFrame(1, _block()[:1]).serialize())
        await _flood(attacker, ContinuationFrame(1, fragment).serialize(), 1000, batch=10)

    outcome = await run_attack(_sleeper, attack, reads_during_attack=False)
    outcome.report("CONTINUATION, 16 KiB each")
    assert outcome.goaway[0] == ErrorCodes.ENHANCE_YOUR_CALM
    assert outcome.peak_bytes <= 4 * MiB
    outcome.assert_probe_served()


async def test_empty_continuation_flood_is_capped_by_count() -> None:
    """Empty CONTINUATION frames are capped by number (h2's 64): GOAWAY
    (PROTOCOL_ERROR) after them."""

    async def attack(attacker: Attacker) -> None:
        await attacker.send(HeadersFrame(1, _block()[:1]).serialize())
        await _flood(attacker, ContinuationFrame(1, b"").serialize(), 10_000)

    outcome = await run_attack(_sleeper, attack, reads_during_attack=False)
    outcome.report("CONTINUATION, empty")
    assert outcome.goaway[0] == ErrorCodes.PROTOCOL_ERROR
    assert outcome.peak_bytes <= 4 * MiB
    outcome.assert_probe_served()


async def test_hpack_bomb_is_cut_off_by_decoded_size() -> None:
    """A 4 KiB header put in the dynamic table, then a block referring to it
    100,000 times (1 byte each: 400 MiB decoded) ends with a GOAWAY once the
    decoded list passes 4 times max_header_list_size; the server decodes no more."""
    encoder = hpack.Encoder()
    first = encoder.encode([(":method", "GET"), (":scheme", "http"), (":path", "/")])
    first += encoder.encode([("x-bomb", "b" * 4000)])  # literal with incremental indexing
    index = bytes([0x80 | 62])  # the newest dynamic entry, indexed: one byte

    async def attack(attacker: Attacker) -> None:
        block = first + index * 100_000
        # 1 MiB frames at most (our SETTINGS_MAX_FRAME_SIZE): 100 KiB fits in one.
        await attacker.send(HeadersFrame(1, block, flags=["END_HEADERS"]).serialize())

    outcome = await run_attack(_sleeper, attack, reads_during_attack=False)
    outcome.report("HPACK bomb")
    assert outcome.goaway[0] in (ErrorCodes.ENHANCE_YOUR_CALM, ErrorCodes.COMPRESSION_ERROR)
    assert outcome.peak_bytes <= 4 * MiB
    outcome.assert_probe_served()


# ============================================================ protocol errors


@pytest.mark.parametrize(
    ("name", "frames", "code"),
    [
        (
            "window overflow",
            WindowUpdateFrame(0, window_increment=2**31 - 1).serialize() * 2,
            ErrorCodes.FLOW_CONTROL_ERROR,
        ),
        (
            "decreasing stream id",
            HeadersFrame(5, _block(), flags=["END_HEADERS"]).serialize()
            + HeadersFrame(3, _block(), flags=["END_HEADERS"]).serialize(),
            ErrorCodes.PROTOCOL_ERROR,
        ),
        (
            "even stream id",
            HeadersFrame(2, _block(), flags=["END_HEADERS"]).serialize(),
            ErrorCodes.PROTOCOL_ERROR,
        ),
    ],
)
async def test_protocol_violations_end_the_connection(name: str, frames: bytes, code: int) -> None:
    """Window overflow and invalid or decreasing stream ids get GOAWAY with the RFC's
    code at once."""

    async def attack(attacker: Attacker) -> None:
        await attacker.send(frames)

    outcome = await run_attack(_sleeper, attack)
    outcome.report(name)
    assert outcome.goaway[0] == code
    assert outcome.peak_bytes <= 4 * MiB
    outcome.assert_probe_served()


def test_flood_budget_is_validated() -> None:
    """flood_burst must be >= 1 and flood_rate >= 0."""
    with pytest.raises(ValueError, match="flood_burst"):
        TransportConfig(flood_burst=0)
    with pytest.raises(ValueError, match="flood_rate"):
        TransportConfig(flood_rate=-1)


# ============================================================ server-wide


async def test_connections_past_max_connections_are_closed_at_once() -> None:
    """With max_connections=3 and three connections open, a fourth is closed as soon
    as it is accepted (nothing written) and counted as refused; once one of the
    three ends, a new connection is served."""
    config = TransportConfig(max_connections=3)

    async def handler(stream: H2Stream) -> None:
        await stream.send_headers([(":status", "200")], end_stream=True)

    with trio.fail_after(20):
        async with (
            trio_h2t.open_server(handler, 0, host="127.0.0.1", config=config) as server,
            trio_h2t.open_connection("127.0.0.1", server.port) as a,
            trio_h2t.open_connection("127.0.0.1", server.port) as b,
        ):
            async with trio_h2t.open_connection("127.0.0.1", server.port) as c:
                for conn in (a, b, c):
                    assert (await conn.request("GET", "/")).status == 200
                sock = await trio.open_tcp_stream("127.0.0.1", server.port)
                try:
                    data = await sock.receive_some(100)
                except trio.BrokenResourceError:
                    data = b""
                assert data == b""  # closed, not even our SETTINGS
                await sock.aclose()
                stats = server.statistics()
                assert (stats.connections_open, stats.connections_refused) == (3, 1)
                assert stats.connections_accepted == 4
            while server.statistics().connections_open > 2:  # noqa: ASYNC110
                await trio.sleep(0.01)
            async with trio_h2t.open_connection("127.0.0.1", server.port) as d:
                assert (await d.request("GET", "/")).status == 200
            assert server.statistics().connections_refused == 1


def test_max_connections_is_validated() -> None:
    """max_connections must be None or >= 1."""
    with pytest.raises(ValueError, match="max_connections"):
        TransportConfig(max_connections=0)
    with pytest.raises(TypeError, match="max_connections"):
        TransportConfig(max_connections=True)


_IDLE_CLIENTS = r"""
import socket, sys
from hyperframe.frame import SettingsFrame
preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + SettingsFrame(0).serialize()
preface += SettingsFrame(0, flags=["ACK"]).serialize()
socks = []
for _ in range(int(sys.argv[2])):
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
    s.sendall(preface)
    socks.append(s)
print("ok", flush=True)
sys.stdin.read()
"""


async def test_an_idle_connection_costs_at_most_40_kib() -> None:
    """200 connections that finished their handshake and then say nothing (their
    clients in another process) cost the server at most 40 KiB each (tracemalloc):
    the 64 KiB read buffer is allocated only while reads fill a small one."""
    import subprocess
    import sys

    n = 200

    async def handler(stream: H2Stream) -> None:
        await stream.send_headers([(":status", "200")], end_stream=True)

    with trio.fail_after(60):
        async with trio_h2t.open_server(handler, 0, host="127.0.0.1") as server:
            tracemalloc.start()
            try:
                before, _ = tracemalloc.get_traced_memory()
                proc = await trio.lowlevel.open_process(
                    [sys.executable, "-c", _IDLE_CLIENTS, str(server.port), str(n)],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                )
                try:
                    assert proc.stdout is not None
                    assert await proc.stdout.receive_some(10)
                    cores = server._connections
                    while len(cores) < n or not all(c.settings_acked for c in cores):  # noqa: ASYNC110
                        await trio.sleep(0.05)
                    await trio.sleep(0.2)
                    after, _ = tracemalloc.get_traced_memory()
                finally:
                    assert proc.stdin is not None
                    await proc.stdin.aclose()
                    await proc.wait()
            finally:
                tracemalloc.stop()
    per_connection = (after - before) / n
    print(f"\n[flood] idle connection: {per_connection:.0f} B")
    assert per_connection <= 40 * 1024


async def test_small_window_updates_answering_our_frames_are_not_a_flood() -> None:
    """A peer that answers each small response with a stream and a connection
    WINDOW_UPDATE of a few bytes (grpcio's C core does, for small messages) is
    served past flood_burst: updates up to two per frame we wrote are free. 1,200
    requests here send 2,400 small updates; a flood_burst of 1000 once cut 1000
    concurrent grpcio calls off with too_many_window_updates."""
    import h2.config
    import h2.connection
    import h2.events
    import h2.exceptions

    async def small(stream: H2Stream) -> None:
        await stream.send_headers([(":status", "200")])
        await stream.send_data(b"hello")
        await trio.lowlevel.checkpoint()  # (most often) a DATA frame of its own
        await stream.send_data(b"world", end_stream=True)

    client_t, server_t = trio.testing.memory_stream_pair()
    peer = h2.connection.H2Connection(h2.config.H2Configuration(header_encoding=None))
    peer.initiate_connection()
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio_h2t.serve_connection, server_t, small)
            await client_t.send_all(peer.data_to_send())
            goaway: list[h2.events.ConnectionTerminated] = []
            for i in range(1200):
                sid = 2 * i + 1
                peer.send_headers(
                    sid,
                    [
                        (b":method", b"GET"),
                        (b":scheme", b"http"),
                        (b":authority", b"x"),
                        (b":path", b"/"),
                    ],
                    end_stream=True,
                )
                await client_t.send_all(peer.data_to_send())
                done = False
                while not done and not goaway:
                    for ev in peer.receive_data(await client_t.receive_some(65536)):
                        if isinstance(ev, h2.events.DataReceived):
                            # As grpcio: each message read opens both windows by its size.
                            # (h2 may have closed the stream already: later events
                            # of the same read.)
                            with contextlib.suppress(h2.exceptions.StreamClosedError):
                                peer.increment_flow_control_window(len(ev.data), stream_id=sid)
                            peer.increment_flow_control_window(len(ev.data))
                        elif isinstance(ev, h2.events.StreamEnded):
                            done = True
                        elif isinstance(ev, h2.events.ConnectionTerminated):
                            goaway.append(ev)
                    await client_t.send_all(peer.data_to_send())
                assert not goaway, goaway
            nursery.cancel_scope.cancel()


async def test_an_honest_mix_of_ignored_frames_is_not_a_flood(autojump_clock: object) -> None:
    """What honest clients send is served past flood_burst: a browser's PRIORITY_UPDATE
    for each of 1,200 requests (free: one per stream it opened), a reserved
    ("GREASE") frame type now and then (12 here; browsers send such frames to keep
    servers tolerant of unknown types), and the ACKs of our SETTINGS and PINGs."""
    import h2.config
    import h2.connection
    import h2.events

    async def ok(stream: H2Stream) -> None:
        await stream.send_headers([(":status", "200")], end_stream=True)

    client_t, server_t = trio.testing.memory_stream_pair()
    peer = h2.connection.H2Connection(h2.config.H2Configuration(header_encoding=None))
    peer.initiate_connection()
    config = TransportConfig(server_keepalive_time=1, keepalive_timeout=5)
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                functools.partial(trio_h2t.serve_connection, server_t, ok, config=config)
            )
            await client_t.send_all(peer.data_to_send())
            ended: list[h2.events.Event] = []
            pings = 0
            for i in range(1200):
                sid = 2 * i + 1
                peer.send_headers(sid, REQUEST_HEADERS, end_stream=True)
                out = peer.data_to_send()
                out += _raw_frame(0x10, 0, struct.pack(">I", sid) + b"u=2")
                if i % 100 == 0:
                    out += _raw_frame(0x0B + 0x1F * (i // 100 % 8), 0, b"grease")
                await client_t.send_all(out)
                done = False
                while not done and not ended:
                    for ev in peer.receive_data(await client_t.receive_some(65536)):
                        if isinstance(ev, h2.events.StreamEnded) and ev.stream_id == sid:
                            done = True
                        elif isinstance(ev, h2.events.PingReceived):
                            pings += 1  # h2 queued the ACK
                        elif isinstance(ev, h2.events.ConnectionTerminated):
                            ended.append(ev)
                    await client_t.send_all(peer.data_to_send())
                assert not ended, ended
                if i == 0:
                    # A keepalive PING from the server to ACK. (Virtual time: 1.1 s
                    # refills only 110 tokens, so the 1,212 frames above would still
                    # empty the bucket if they counted.)
                    await trio.sleep(1.1)
            nursery.cancel_scope.cancel()
    assert pings >= 1
