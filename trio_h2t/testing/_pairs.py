"""In-memory links and connected client/server pairs, without sockets.

Theory of operation
-------------------
``trio.testing.memory_stream_pair`` links two ``trio.abc.Stream`` ends in memory, but
it hands every ``send_all`` to the reader whole and never blocks a writer, so code
over it never sees a partial read, a frame split across reads, or a writer that waits
for its reader. :class:`ChunkedStream` wraps one end of such a pair and adds the three
things a real socket does:

- **chunked writes**: ``send_all`` is split into pieces of the next sizes of a cycle
  (each piece a separate write, so the reader can wake up between two pieces);
- **short reads**: ``receive_some`` returns at most the next size of another cycle;
- **back-pressure**: with a ``capacity``, ``send_all`` waits while that many bytes
  are unread, as a socket whose buffers are full does;

and, optionally, a ``delay`` (seconds of ``trio.sleep`` before each piece is
written: use ``trio.testing.MockClock`` so that it costs no real time).

The sizes cycle, so a link's behaviour is a deterministic function of its
:class:`Chunking`: a Hypothesis strategy can draw it (``strategies.chunkings``) and a
failing example replays.

:func:`open_memory_pair` runs :func:`trio_h2t.serve_connection` and
:func:`trio_h2t.open_client_connection` back to back over such a link (h11's
``ConnectionPair`` idea); :func:`open_memory_server` is the same for a test that
only needs the client.
"""

from __future__ import annotations

import functools
import math
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import final

import trio
import trio.testing

from trio_h2t._client import ClientConnection, open_client_connection
from trio_h2t._config import TransportConfig
from trio_h2t._server import Handler, ServerConnection, serve_connection

__all__ = [
    "ChunkedStream",
    "Chunking",
    "MemoryPair",
    "chunked_stream_pair",
    "open_memory_pair",
    "open_memory_server",
]

_MemoryStapledStream = trio.StapledStream[
    trio.testing.MemorySendStream, trio.testing.MemoryReceiveStream
]


@final
@dataclass(frozen=True, slots=True)
class Chunking:
    """How one end of a :func:`chunked_stream_pair` writes and reads.

    ``send_sizes``: each ``send_all`` is cut into pieces of these sizes, in turn
    (cycling, across calls); empty: written whole. ``receive_sizes``: each
    ``receive_some`` returns at most the next of these sizes (and at most its
    ``max_bytes``); empty: whatever is there. Every size must be at least 1.
    """

    send_sizes: Sequence[int] = ()
    receive_sizes: Sequence[int] = ()

    def __post_init__(self) -> None:
        for name in ("send_sizes", "receive_sizes"):
            sizes = getattr(self, name)
            if any(not isinstance(n, int) or isinstance(n, bool) or n < 1 for n in sizes):
                raise ValueError(f"Chunking.{name} must be ints >= 1, not {sizes!r}")
            object.__setattr__(self, name, tuple(sizes))


class _Pipe:
    """One direction of a link: bytes in flight, and the writers waiting for room.

    Shared by the two ends of that direction (their tasks run in one Trio run: no
    await between a read and the write of a field).
    """

    def __init__(self, capacity: int | None) -> None:
        self.capacity = capacity  # immutable after init; None: unbounded
        self.sent = 0  # shared: bytes handed to the inner send_all (the writer's end)
        self.received = 0  # shared: bytes returned by receive_some (the reader's end)
        self.room = trio.lowlevel.ParkingLot()  # writers waiting for the reader
        self.closed = False  # shared: either end closed: writers stop waiting (and fail)

    @property
    def in_flight(self) -> int:
        return self.sent - self.received

    def full(self) -> bool:
        return self.capacity is not None and self.in_flight >= self.capacity


def _cycle(sizes: Sequence[int]) -> Iterator[int | None]:
    if not sizes:
        while True:
            yield None
    while True:
        yield from sizes


@final
class ChunkedStream(trio.abc.Stream):
    """One end of a :func:`chunked_stream_pair`: a ``trio.abc.Stream`` whose writes
    are split, whose reads are short, and whose writer waits for a full link.

    Built only by :func:`chunked_stream_pair`. Besides the ``trio.abc.Stream``
    methods it offers :meth:`close_now` (an abrupt close), :meth:`inject` (bytes
    that seem to come from this end) and the counters :attr:`bytes_sent`,
    :attr:`bytes_received` and :attr:`unread` (bytes written by the peer that this
    end has not read yet).
    """

    _inner: _MemoryStapledStream
    _send_sizes: Iterator[int | None]
    _recv_sizes: Iterator[int | None]
    _outgoing: _Pipe
    _incoming: _Pipe
    _delay: float
    _peer_receive: trio.testing.MemoryReceiveStream | None
    closed: bool
    sending: bool

    def __init__(self) -> None:
        raise TypeError("ChunkedStreams are made by chunked_stream_pair()")

    @classmethod
    def _make(
        cls,
        inner: _MemoryStapledStream,
        chunking: Chunking,
        outgoing: _Pipe,
        incoming: _Pipe,
        delay: float,
    ) -> ChunkedStream:
        self = cls.__new__(cls)
        self._inner = inner  # immutable after init
        self._send_sizes = _cycle(chunking.send_sizes)  # owner: the writing task
        self._recv_sizes = _cycle(chunking.receive_sizes)  # owner: the reading task
        self._outgoing = outgoing  # shared with the peer's incoming (see _Pipe)
        self._incoming = incoming  # shared with the peer's outgoing
        self._delay = delay  # immutable after init
        self.closed = False  # owner: whoever closes; True once either close ran
        self.sending = False  # owner: the writing task; inside send_all
        # The peer's receive stream, for inject(); set by chunked_stream_pair.
        self._peer_receive = None  # set once, by chunked_stream_pair
        return self

    @property
    def bytes_sent(self) -> int:
        """Bytes this end has written (whole pieces handed to the link)."""
        return self._outgoing.sent

    @property
    def bytes_received(self) -> int:
        """Bytes this end has read."""
        return self._incoming.received

    @property
    def unread(self) -> int:
        """Bytes the peer wrote that this end has not read yet."""
        return self._incoming.in_flight

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        """Write ``data`` in pieces (see :class:`Chunking`), waiting for room first
        when the link has a capacity.

        Checkpoint: always. On cancellation: a prefix of ``data`` (whole pieces) may
        have been written, as with any ``trio.abc.SendStream``.

        Raises:
            trio.ClosedResourceError: this end was closed.
            trio.BrokenResourceError: the peer closed its end.
        """
        view = memoryview(data)
        if not view:
            await self._inner.send_all(b"")
            return
        self.sending = True
        try:
            while view:
                while self._outgoing.full() and not self._outgoing.closed:
                    await self._outgoing.room.park()  # woken by the reader, or a close
                if self._delay:
                    await trio.sleep(self._delay)
                n = next(self._send_sizes) or len(view)
                piece, view = view[:n], view[n:]
                await self._inner.send_all(piece)
                self._outgoing.sent += len(piece)
        finally:
            self.sending = False

    async def wait_send_all_might_not_block(self) -> None:
        """Checkpoint: always. Returns at once (as ``memory_stream_pair`` does)."""
        await self._inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        """Read at most the next receive size (and at most ``max_bytes``); ``b""``
        once the peer closed its end and everything was read.

        Checkpoint: always. On cancellation: nothing was read.
        """
        n = next(self._recv_sizes)
        if max_bytes is not None:
            n = max_bytes if n is None else min(n, max_bytes)
        data = await self._inner.receive_some(n)
        self._incoming.received += len(data)
        self._incoming.room.unpark_all()
        return bytes(data)

    def inject(self, data: bytes) -> None:
        """Deliver ``data`` to the peer as if this end had written it now, between two
        of its own writes (a frame boundary when this end writes whole frames).

        Raises:
            trio.BusyResourceError: a ``send_all`` of this end is in progress (the
                bytes would land inside its write).
        """
        if self.sending:
            raise trio.BusyResourceError("inject() while send_all() is writing")
        assert self._peer_receive is not None
        self._peer_receive.put_data(data)
        self._outgoing.sent += len(data)

    def _wake_writers(self) -> None:
        for pipe in (self._outgoing, self._incoming):  # the peer's writer: its send fails
            pipe.closed = True
            pipe.room.unpark_all()

    def close_now(self) -> None:
        """Close both directions at once, synchronously (an abrupt transport close:
        the peer reads end-of-file, its writes fail)."""
        self.closed = True
        self._inner.send_stream.close()
        self._inner.receive_stream.close()
        self._wake_writers()

    async def aclose(self) -> None:
        """Close this end (see :meth:`close_now`). Checkpoint: always."""
        self.closed = True
        self._wake_writers()
        await self._inner.aclose()


def chunked_stream_pair(
    *,
    client: Chunking | None = None,
    server: Chunking | None = None,
    capacity: int | None = None,
    delay: float = 0.0,
) -> tuple[ChunkedStream, ChunkedStream]:
    """A linked pair ``(client end, server end)`` of :class:`ChunkedStream`.

    ``client`` and ``server`` say how each end writes and reads (default: whole
    writes, whatever-is-there reads, like ``memory_stream_pair``). With ``capacity``
    a writer waits while that many bytes it wrote are unread in its direction; with
    ``delay`` each written piece first sleeps that many seconds.
    """
    if capacity is not None and (not isinstance(capacity, int) or capacity < 1):
        raise ValueError(f"capacity must be None or an int >= 1, not {capacity!r}")
    if not isinstance(delay, int | float) or not math.isfinite(delay) or delay < 0:
        raise ValueError(f"delay must be a finite number >= 0, not {delay!r}")
    client_inner, server_inner = trio.testing.memory_stream_pair()
    c2s, s2c = _Pipe(capacity), _Pipe(capacity)
    client_end = ChunkedStream._make(client_inner, client or Chunking(), c2s, s2c, delay)
    server_end = ChunkedStream._make(server_inner, server or Chunking(), s2c, c2s, delay)
    client_end._peer_receive = server_inner.receive_stream
    server_end._peer_receive = client_inner.receive_stream
    return client_end, server_end


@final
@dataclass(frozen=True, slots=True)
class MemoryPair:
    """What :func:`open_memory_pair` yields: both connections and both link ends."""

    client: ClientConnection
    server: ServerConnection
    client_transport: ChunkedStream
    server_transport: ChunkedStream


@asynccontextmanager
async def open_memory_pair(
    handler: Handler,
    *,
    client_config: TransportConfig | None = None,
    server_config: TransportConfig | None = None,
    client_chunking: Chunking | None = None,
    server_chunking: Chunking | None = None,
    capacity: int | None = None,
    delay: float = 0.0,
) -> AsyncIterator[MemoryPair]:
    """A client connected to ``serve_connection(handler)`` over an in-memory link.

    The link is :func:`chunked_stream_pair` with the given chunkings, ``capacity``
    and ``delay``. The server starts first (its preface is written), then the client
    (it waits for the server's SETTINGS); both then run in a nursery owned by this
    context manager.

    On leaving the block the client closes gracefully (``open_client_connection``'s
    rules), and the server must then end by itself: no task of either connection
    outlives the block. If the block raises, everything is cancelled and the error
    comes out unchanged.

    Checkpoint: entering and leaving. On cancellation: entering, nothing is left
    running; leaving, both connections are closed at once.
    """
    client_end, server_end = chunked_stream_pair(
        client=client_chunking, server=server_chunking, capacity=capacity, delay=delay
    )
    async with trio.open_nursery() as nursery:
        server: ServerConnection = await nursery.start(
            functools.partial(serve_connection, server_end, handler, config=server_config)
        )
        async with open_client_connection(client_end, config=client_config) as conn:
            yield MemoryPair(conn, server, client_end, server_end)


@asynccontextmanager
async def open_memory_server(
    handler: Handler,
    *,
    client_config: TransportConfig | None = None,
    server_config: TransportConfig | None = None,
    client_chunking: Chunking | None = None,
    server_chunking: Chunking | None = None,
    capacity: int | None = None,
    delay: float = 0.0,
) -> AsyncIterator[ClientConnection]:
    """A :class:`~trio_h2t.ClientConnection` to ``handler``, served in memory.

    The same as :func:`open_memory_pair` (the same arguments, checkpoints and
    cancellation) for a test that needs only the client::

        async with open_memory_server(handler) as conn:
            response = await conn.request("GET", "/")
    """
    async with open_memory_pair(
        handler,
        client_config=client_config,
        server_config=server_config,
        client_chunking=client_chunking,
        server_chunking=server_chunking,
        capacity=capacity,
        delay=delay,
    ) as pair:
        yield pair.client
