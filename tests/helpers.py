"""Test helpers: a connected client/server pair, and a scripted raw-``h2`` peer.

- :func:`connected_pair` is ``trio_h2t.testing.open_memory_pair`` yielding the
  client and the server's ``ConnectionCore`` (h11's ``ConnectionPair`` idea).
- :class:`ScriptedPeer` is the other end of a link driven by hand, like h2's
  ``FrameFactory`` tests and httpcore's scripted peers: a plain
  ``h2.connection.H2Connection`` (or hand-built hyperframe frames) whose every
  received frame is recorded in ``frames``, so a test can assert on the wire.
- :func:`open_peer_server` / :func:`open_peer_client` put a trio_h2t client or server
  opposite a ScriptedPeer; :func:`clogged_pair` is a link whose trio_h2t side blocks
  in ``send_all`` until the peer reads (lockstep), while the peer's writes buffer.
- :class:`UnlimitedH2Connection` is a raw h2 client that ignores MAX_CONCURRENT_STREAMS
  and survives a GOAWAY, to play a misbehaving or racing peer.
- :func:`h2t_tasks` lists the trio_h2t tasks still running (for leak checks).
- :func:`take_frames` parses the complete frames a raw socket client has buffered
  (hyperframe objects, for tests that read a server's frames off TCP).
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import h2.config
import h2.connection
import h2.events
import h2.frame_buffer
import h2.settings
import trio
import trio.testing
from h2.errors import ErrorCodes
from h2.events import Event
from hyperframe.frame import Frame, GoAwayFrame

from trio_h2t import (
    ClientConnection,
    H2Stream,
    ServerConnection,
    TransportConfig,
    open_client_connection,
    serve_connection,
)
from trio_h2t._connection import ConnectionCore
from trio_h2t.testing import open_memory_pair

#: The GOAWAY frame type (RFC 9113 §6.8).
GOAWAY_TYPE = 0x7

__all__ = [
    "REQUEST",
    "RESPONSE_200",
    "ScriptedPeer",
    "UnlimitedH2Connection",
    "clogged_pair",
    "connected_pair",
    "h2t_tasks",
    "open_peer_client",
    "open_peer_server",
    "pattern",
    "take_frames",
]

Handler = Callable[[H2Stream], Awaitable[None]]

#: A minimal GET request's header block (prior-knowledge h2c).
REQUEST: list[tuple[bytes, bytes]] = [
    (b":method", b"GET"),
    (b":scheme", b"http"),
    (b":authority", b"localhost"),
    (b":path", b"/"),
]
RESPONSE_200: list[tuple[bytes, bytes]] = [(b":status", b"200")]


def pattern(n: int, seed: int = 0) -> bytes:
    """``n`` bytes of a non-repeating-looking pattern (so misordered chunks show)."""
    block = bytes((i * 7 + seed) % 251 for i in range(251))
    reps = n // len(block) + 1
    return (block * reps)[:n]


def take_frames(buf: bytearray) -> list[Frame]:
    """Remove the complete frames at the start of ``buf`` and return them, parsed by
    hyperframe; an incomplete frame stays in ``buf`` for the next read to complete."""
    frames: list[Frame] = []
    while len(buf) >= 9:
        frame, length = Frame.parse_frame_header(memoryview(buf[:9]))
        if len(buf) < 9 + length:
            break
        frame.parse_body(memoryview(buf[9 : 9 + length]))
        del buf[: 9 + length]
        frames.append(frame)
    return frames


def h2t_tasks() -> list[trio.lowlevel.Task]:
    """Every task in this run whose name marks it as a trio_h2t task."""
    found: list[trio.lowlevel.Task] = []
    todo = [trio.lowlevel.current_root_task()]
    while todo:
        task = todo.pop()
        if task is None:
            continue
        if task.name.startswith("h2-"):
            found.append(task)
        for nursery in task.child_nurseries:
            todo.extend(nursery.child_tasks)
    return found


@asynccontextmanager
async def connected_pair(
    handler: Handler,
    *,
    client_config: TransportConfig | None = None,
    server_config: TransportConfig | None = None,
) -> AsyncIterator[tuple[ClientConnection, ConnectionCore]]:
    """A client connected to ``serve_connection(handler)`` over a memory stream pair.

    Yields the client and the server's ``ConnectionCore``. On exit the client closes
    gracefully and the server must then return by itself (the nursery waits for it).
    """
    # trio_h2t.testing's pair (whole writes, so the same link as memory_stream_pair).
    pair = open_memory_pair(handler, client_config=client_config, server_config=server_config)
    async with pair as p:
        yield p.client, p.server._core  # the runtime object, for tests that look inside


class ScriptedPeer:
    """One end of a link driven by the test with a raw ``h2`` connection.

    ``frames`` records every frame received from trio_h2t, in wire order; ``events``
    every h2 event. Nothing is sent unless the test says so (``flush``/``send_raw``).
    """

    def __init__(
        self,
        transport: trio.abc.Stream,
        *,
        client_side: bool,
        h2_conn: h2.connection.H2Connection | None = None,
        settings: dict[h2.settings.SettingCodes, int] | None = None,
    ) -> None:
        self.transport = transport
        self.client_side = client_side
        self.h2 = h2_conn or h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=client_side, header_encoding=None)
        )
        if settings:
            # Assigned before initiate_connection(), so the first SETTINGS carries them.
            self.h2.local_settings = h2.settings.Settings(
                client=client_side,
                initial_values=dict(settings),
            )
            # h2 read this when it was built; initial values take effect at once.
            self.h2.max_inbound_frame_size = self.h2.local_settings.max_frame_size
        self._frame_buffer = h2.frame_buffer.FrameBuffer(server=not client_side)
        self._frame_buffer.max_frame_size = 2**24 - 1
        self.frames: list[Frame] = []
        self._raw = b""  # bytes of a frame not yet whole (client side: _receive_h2)
        self.events: list[h2.events.Event] = []
        self.eof = False

    async def flush(self) -> None:
        """Write whatever the peer's h2 has framed."""
        data = self.h2.data_to_send()
        if data:
            await self.transport.send_all(data)

    async def send_raw(self, data: bytes) -> None:
        """Write bytes built by hand (hyperframe frames), bypassing the peer's h2."""
        await self.transport.send_all(data)

    async def receive(self, max_bytes: int = 1 << 20) -> list[h2.events.Event]:
        """Read once from the link, record frames and events, return the events."""
        data = await self.transport.receive_some(max_bytes)
        if not data:
            self.eof = True
            return []
        self._frame_buffer.add_data(data)
        self.frames.extend(self._frame_buffer)
        events = self._receive_h2(data) if self.client_side else self.h2.receive_data(data)
        self.events.extend(events)
        return events

    def _receive_h2(self, data: bytes | bytearray) -> list[h2.events.Event]:
        """Feed ``data`` to the peer's h2, but keep GOAWAY frames from it.

        h2 closes its connection on a GOAWAY (h2 #1181) and then refuses every frame
        but another GOAWAY, while RFC 9113 §6.8 has the connection go on for the
        streams below its last stream id, and a server's drain sends a PING after its
        first GOAWAY (docs/keepalive-and-shutdown.md). A client peer therefore gives
        h2 everything but GOAWAY frames, and reports each GOAWAY, in its place, as
        the ``ConnectionTerminated`` h2 would have made of it.
        """
        raw = self._raw + data
        events: list[h2.events.Event] = []
        start = pos = 0
        while len(raw) - pos >= 9:
            length = int.from_bytes(raw[pos : pos + 3], "big")
            end = pos + 9 + length
            if end > len(raw):
                break
            if raw[pos + 3] == GOAWAY_TYPE:
                events.extend(self.h2.receive_data(bytes(raw[start:pos])))
                payload = raw[pos + 9 : end]
                ev = h2.events.ConnectionTerminated()
                ev.last_stream_id = int.from_bytes(payload[:4], "big") & 0x7FFF_FFFF
                code = int.from_bytes(payload[4:8], "big")
                try:
                    ev.error_code = ErrorCodes(code)
                except ValueError:
                    ev.error_code = code
                ev.additional_data = bytes(payload[8:])
                events.append(ev)
                start = end
            pos = end
        events.extend(self.h2.receive_data(bytes(raw[start:pos])))
        self._raw = raw[pos:]
        return events

    async def receive_until(self, predicate: Callable[[Any], bool]) -> Any:
        """Read (flushing h2's automatic answers) until an event matches; return it."""
        while True:
            events = await self.receive()
            await self.flush()
            for ev in events:
                if predicate(ev):
                    return ev
            if self.eof:
                raise EOFError("the link closed before the awaited event")

    async def read_until(self, check: Callable[[], bool]) -> None:
        """Read (flushing h2's automatic answers) until ``check()`` is true."""
        while not check():
            await self.receive()
            await self.flush()
            if self.eof and not check():
                raise EOFError("the link closed before the awaited state")

    def events_of(self, kind: type[Any]) -> list[Any]:
        """Received h2 events of one class."""
        return [ev for ev in self.events if isinstance(ev, kind)]

    async def handshake(self) -> None:
        """Send our preface/SETTINGS and read until theirs arrived (acking it)."""
        self.h2.initiate_connection()
        await self.flush()
        await self.receive_until(lambda ev: isinstance(ev, h2.events.RemoteSettingsChanged))

    def frames_of(self, kind: type[Frame]) -> list[Any]:
        """Received frames of one hyperframe class."""
        return [f for f in self.frames if isinstance(f, kind)]


def clogged_pair() -> tuple[trio.StapledStream[Any, Any], trio.StapledStream[Any, Any]]:
    """A link ``(ours, peer's)`` where only the peer's direction is buffered.

    Our ``send_all`` blocks until the peer reads (``lockstep``), so a peer that stops
    reading stops our writer; what the peer sends is buffered without limit, so the
    peer can flood us without blocking.
    """
    ours_send, peer_receive = trio.testing.lockstep_stream_one_way_pair()
    peer_send, ours_receive = trio.testing.memory_stream_one_way_pair()
    return trio.StapledStream(ours_send, ours_receive), trio.StapledStream(peer_send, peer_receive)


@asynccontextmanager
async def open_peer_server(
    *,
    client_config: TransportConfig | None = None,
    settings: dict[h2.settings.SettingCodes, int] | None = None,
    transports: tuple[trio.abc.Stream, trio.abc.Stream] | None = None,
) -> AsyncIterator[tuple[ClientConnection, ScriptedPeer]]:
    """A trio_h2t client talking to a :class:`ScriptedPeer` server.

    The peer's preface is sent and the client's SETTINGS read (and acked) before the
    client is yielded. The test drives the peer; nothing runs in the background.
    ``transports`` is ``(client's end, peer's end)``.
    """
    client_t, server_t = transports or trio.testing.memory_stream_pair()
    peer = ScriptedPeer(server_t, client_side=False, settings=settings)
    ready = trio.Event()

    async def peer_handshake() -> None:
        peer.h2.initiate_connection()
        await peer.flush()
        await peer.receive_until(lambda ev: isinstance(ev, h2.events.RemoteSettingsChanged))
        ready.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(peer_handshake)
        async with open_client_connection(client_t, config=client_config) as conn:
            await ready.wait()
            yield conn, peer
            # Graceful close waits for the peer to close; let the client go at once.
            await peer.transport.aclose()


@asynccontextmanager
async def open_peer_client(
    handler: Handler,
    *,
    server_config: TransportConfig | None = None,
    h2_conn: h2.connection.H2Connection | None = None,
    transports: tuple[trio.abc.Stream, trio.abc.Stream] | None = None,
) -> AsyncIterator[tuple[ScriptedPeer, ConnectionCore]]:
    """A :class:`ScriptedPeer` client talking to ``serve_connection(handler)``.

    The handshake is done before yielding (concurrently with the server's start, so
    a clogged link works too). ``transports`` is ``(server's end, peer's end)``. On
    exit the peer closes its transport and ``serve_connection`` must return by itself.
    """
    server_t, client_t = transports or trio.testing.memory_stream_pair()
    peer = ScriptedPeer(client_t, client_side=True, h2_conn=h2_conn)
    shaken = trio.Event()

    async def handshake() -> None:
        await peer.handshake()
        shaken.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(handshake)
        server: ServerConnection = await nursery.start(
            functools.partial(serve_connection, server_t, handler, config=server_config)
        )
        core = server._core  # the runtime object, for tests that look inside
        await shaken.wait()
        yield peer, core
        await peer.transport.aclose()


class UnlimitedH2Connection(h2.connection.H2Connection):
    """A raw h2 connection that ignores the peer's MAX_CONCURRENT_STREAMS and its GOAWAY.

    Plain h2 refuses to open a stream beyond the peer's limit, and closes for good
    on receiving GOAWAY (h2 #1181); this one does neither, to play a misbehaving or
    racing client (hypercorn #335). A GOAWAY still shows up as ConnectionTerminated.
    """

    @property
    def open_outbound_streams(self) -> int:
        return 0

    def _receive_goaway_frame(self, frame: GoAwayFrame) -> tuple[list[Frame], list[Event]]:
        ev = h2.events.ConnectionTerminated()
        ev.error_code = frame.error_code
        ev.last_stream_id = frame.last_stream_id
        ev.additional_data = frame.additional_data or None
        return [], [ev]


class QuotaRecorder:
    """Stands in for a ``Data`` item's stream in control-buffer tests: the quota the
    item returns on release (``H2Stream.loopy_released``) calls ``on_return``."""

    def __init__(self, on_return: Callable[[int], Any]) -> None:
        self._on_return = on_return

    def loopy_released(self, quota: int, cancel_after: bool) -> None:
        self._on_return(quota)


class RecordingStarter:
    """A ``StreamStarter`` for control-buffer tests: records what loopy would tell it."""

    def __init__(self, on_orphaned: Callable[[BaseException], Any] | None = None) -> None:
        self.stream_ids: list[int] = []
        self.orphaned_with: list[BaseException] = []
        self.failed_with: list[BaseException] = []
        self._on_orphaned = on_orphaned

    def started(self, stream_id: int) -> None:
        self.stream_ids.append(stream_id)

    def failed(self, error: Exception) -> None:
        self.failed_with.append(error)

    def orphaned(self, error: BaseException) -> None:
        self.orphaned_with.append(error)
        if self._on_orphaned is not None:
            self._on_orphaned(error)
