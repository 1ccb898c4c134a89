"""Shutdown orphaning: every place a control item can be when the connection ends.

A control item is either (a) in the producers' queue of the control buffer, (b) in
loopy's drained batch, or (c) in loopy's hands, being written while loopy is blocked
in ``send_all``. A :class:`GatedStream` transport holds loopy's ``send_all`` until the
test releases it, so the test places items exactly; the scripted peer then ends the
connection (GOAWAY(PROTOCOL_ERROR) plus EOF; or a malformed frame, which makes the
client's h2 close its state machine, so loopy's ``_handle`` meets CLOSED) and the
gate opens. Every opener must then fail with a retryable
``ConnectionClosingError`` (no hang), and every write-quota byte must come back
(``trio_h2t/_stream.py``'s ``loopy_released``; ``trio_h2t/_items.py``'s
``Data.orphan``; ``trio_h2t/_loopy.py``'s ``_drop_all_output``).
"""

from __future__ import annotations

from typing import Any

import h2.errors
import h2.events
import h2.settings
import pytest
import trio
import trio.testing
from helpers import REQUEST, ScriptedPeer, open_peer_server

from trio_h2t import ClientConnection, ConnectionClosingError, H2Stream, TransportConfig

# A body at least write_buffer_size long makes loopy flush (and block) mid-drain.
CONFIG = TransportConfig(write_buffer_size=16 * 1024)
BODY = b"x" * (20 * 1024)
PARKED = b"p" * 500  # s1's DATA, parked on its 1-byte window


class GatedStream(trio.abc.Stream):
    """A stream whose ``send_all`` blocks, once ``close_gate`` was called, until ``release``."""

    def __init__(self, inner: trio.abc.Stream) -> None:
        self._inner = inner
        self._gate: trio.Event | None = None  # owner: test
        self.blocked = trio.Event()  # owner: test; set when a send_all is held

    def close_gate(self) -> None:
        self._gate = trio.Event()
        self.blocked = trio.Event()

    def release(self) -> None:
        assert self._gate is not None
        self._gate.set()

    def pass_one(self) -> None:
        """Let the held ``send_all`` through; hold the next one again."""
        self.release()
        self.close_gate()

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        """Hold at the gate, then write. Checkpoint: always. On cancellation: nothing sent."""
        gate = self._gate
        if gate is not None and not gate.is_set():
            self.blocked.set()
            await gate.wait()
        await self._inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        """Pass through. Checkpoint: always. On cancellation: nothing happens."""
        await self._inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        """Pass through. Checkpoint: always. On cancellation: nothing read."""
        return bytes(await self._inner.receive_some(max_bytes))

    async def aclose(self) -> None:
        """Pass through. Checkpoint: always. On cancellation: closed anyway."""
        await self._inner.aclose()


def _pair() -> tuple[GatedStream, trio.abc.Stream]:
    ours, peers = trio.testing.memory_stream_pair()
    return GatedStream(ours), peers


#: WINDOW_UPDATE on stream 0 with a zero increment: a connection error (RFC 9113
#: §6.9), so the client's h2 closes its state machine and frames GOAWAY itself.
ZERO_WINDOW_UPDATE = b"\x00\x00\x04\x08\x00\x00\x00\x00\x00" + b"\x00\x00\x00\x00"


async def _kill(peer: ScriptedPeer, *, eof: bool) -> None:
    """The peer commits the connection error.

    With ``eof``: GOAWAY(PROTOCOL_ERROR), then EOF. Without: a malformed frame only,
    so the link stays open and loopy meets h2's CLOSED state in ``_handle``.
    """
    if eof:
        peer.h2.close_connection(error_code=h2.errors.ErrorCodes.PROTOCOL_ERROR)
        await peer.flush()
        await peer.transport.aclose()
    else:
        await peer.send_raw(ZERO_WINDOW_UPDATE)


async def _expect_closing(stream: H2Stream) -> ConnectionClosingError:
    """The stream's wait for response HEADERS ends in a retryable ConnectionClosingError."""
    with pytest.raises(ConnectionClosingError) as info:
        await stream.receive_headers()
    assert info.value.retryable is True
    return info.value


async def _run_scenario(*, batch_openers: int, queue_openers: int, eof: bool) -> dict[str, Any]:
    """Block loopy in send_all on a big DATA write, place openers, kill, release."""
    ours, peers = _pair()
    released: list[int] = []
    orig = H2Stream.loopy_released

    def counting(self: H2Stream, quota: int, cancel_after: bool) -> None:
        if quota:
            released.append(quota)
        orig(self, quota, cancel_after)

    H2Stream.loopy_released = counting  # type: ignore[method-assign]
    try:
        return await _scenario(ours, peers, released, batch_openers, queue_openers, eof)
    finally:
        H2Stream.loopy_released = orig  # type: ignore[method-assign]


async def _scenario(
    ours: GatedStream,
    peers: trio.abc.Stream,
    released: list[int],
    batch_openers: int,
    queue_openers: int,
    eof: bool,
) -> dict[str, Any]:
    result: dict[str, Any] = {}
    # Every stream starts with a 1-byte send window; the peer opens s0's wide, so
    # s1's DATA stays parked in loopy (only _drop_all_output can release it).
    tiny = {h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 1}
    async with open_peer_server(client_config=CONFIG, transports=(ours, peers), settings=tiny) as (
        conn,
        peer,
    ):
        conn_: ClientConnection = conn
        async with trio.open_nursery() as nursery:
            async with conn_.open_stream(REQUEST) as s0, conn_.open_stream(REQUEST) as s1:
                # Let both HEADERS reach the peer before the gate closes.
                await peer.read_until(lambda: len(peer.events_of(h2.events.RequestReceived)) == 2)
                peer.h2.increment_flow_control_window(1 << 20, stream_id=s0.stream_id)
                await peer.flush()
                await s1.send_data(PARKED)
                await trio.testing.wait_all_tasks_blocked()
                ours.close_gate()
                await s0.send_data(BODY)  # loopy takes it alone and blocks writing it
                with trio.fail_after(5):
                    await ours.blocked.wait()
                await s0.send_data(BODY)  # (c): loopy will be blocked writing this
                openers = [conn_.open_stream(REQUEST) for _ in range(batch_openers)]
                batch = [await o.__aenter__() for o in openers]  # (b): same batch
                await s0.send_data(b"y" * 100)  # a DATA item behind them
                assert conn_._core.cbuf.statistics().queued == batch_openers + 2
                # Loopy finishes the first write, takes all of the above as one batch,
                # handles the second body, and blocks writing it.
                ours.pass_one()
                with trio.fail_after(5):
                    await ours.blocked.wait()
                # (b) placed: the openers and the 100-byte DATA wait in loopy's batch.
                assert conn_._core.cbuf.statistics().in_batch == batch_openers + 1
                qopeners = [conn_.open_stream(REQUEST) for _ in range(queue_openers)]
                queued = [await o.__aenter__() for o in qopeners]  # (a): producers' queue
                await s0.send_data(b"z" * 200)  # a DATA item in the queue too
                # (a) placed: the queued openers and the 200-byte DATA are queued.
                assert conn_._core.cbuf.statistics().queued == queue_openers + 1
                await _kill(peer, eof=eof)
                await trio.testing.wait_all_tasks_blocked()
                ours.release()
                with trio.fail_after(5):
                    errors = [await _expect_closing(s) for s in [*batch, *queued]]
                    if not eof:
                        # The openers failed with the link still open; now end it,
                        # so the started streams (under GOAWAY's last id) end too.
                        await peer.transport.aclose()
                    for started in (s0, s1):
                        with pytest.raises(Exception):  # noqa: B017, PT011 - any error, no hang
                            await started.receive_headers()
                result["errors"] = errors
                for o, s in zip([*openers, *qopeners], [*batch, *queued], strict=True):
                    await o.__aexit__(None, None, None)
                    assert s is not None
                streams = (s0, s1)
            nursery.cancel_scope.cancel()
    result["quota"] = [s._write_quota for s in streams]
    result["released"] = sorted(released)
    return result


async def test_opener_in_producers_queue_is_orphaned() -> None:
    """(a) An opener queued while loopy is blocked in send_all fails retryably; quota returns."""
    with trio.fail_after(10):
        r = await _run_scenario(batch_openers=0, queue_openers=2, eof=True)
    assert len(r["errors"]) == 2
    assert r["quota"] == [CONFIG.write_quota, CONFIG.write_quota]
    assert r["released"] == sorted([len(BODY), len(BODY), 100, 200, len(PARKED)])


async def test_opener_in_drained_batch_is_orphaned() -> None:
    """(b) Openers in loopy's drained batch when h2 closes fail retryably; quota returns."""
    with trio.fail_after(10):
        r = await _run_scenario(batch_openers=2, queue_openers=0, eof=False)
    assert len(r["errors"]) == 2
    assert r["quota"] == [CONFIG.write_quota, CONFIG.write_quota]
    assert r["released"] == sorted([len(BODY), len(BODY), 100, 200, len(PARKED)])


async def test_data_in_loopys_hands_returns_quota() -> None:
    """(c) The DATA loopy is writing when h2 closes gives back its quota exactly once."""
    with trio.fail_after(10):
        r = await _run_scenario(batch_openers=1, queue_openers=1, eof=False)
    assert len(r["errors"]) == 2
    assert r["quota"] == [CONFIG.write_quota, CONFIG.write_quota]
    assert r["released"] == sorted([len(BODY), len(BODY), 100, 200, len(PARKED)])
