"""StreamTable: the streams of one connection, and the quotas that bound them.

The middle layer of ``ConnectionCore`` (``_lifecycle.py`` has the picture): the
registry of open streams by id, the client's stream quota (the peer's
MAX_CONCURRENT_STREAMS), the server's inbound count, the handlers still running and
when the connection went idle. Streams are added by one task per side (the reader
admits a server's, loopy registers a client's when it writes its HEADERS) and
removed by whichever task closes them (``ConnectionCore.stream_closed``); each
change is synchronous. Waiting for quota is the only wait here.
"""

from __future__ import annotations

import trio

from ._items import WindowOpened
from ._lifecycle import ConnectionLifecycle
from ._stream import H2Stream

__all__ = ["StreamTable"]

#: The peer's MAX_CONCURRENT_STREAMS until its first SETTINGS says otherwise
#: (grpc-go's default for the same gap).
DEFAULT_PEER_MAX_STREAMS = 100


class StreamTable(ConnectionLifecycle):
    """The open streams by id, stream quotas, handlers running, idleness."""

    def __init__(self, *, client_side: bool, track_idle: bool) -> None:
        super().__init__(client_side=client_side)
        # shared: the reader adds server streams (admission), loopy client streams
        # (when it writes their HEADERS); stream_closed removes, in any task.
        self.streams_by_id: dict[int, H2Stream] = {}
        # Streams added to streams_by_id, ever (statistics). Owner: whoever adds one:
        # the reader (server admission) or loopy (register_client_stream).
        self.streams_opened = 0
        # shared: the WindowOpened items queued and not yet handled (compared by
        # value: kind and stream id); the reader adds (and queues an item only if no
        # equal one is in it), loopy discards when it handles one. Bounds those
        # unthrottled items by the streams, whatever the number of WINDOW_UPDATE
        # frames the peer sends.
        self.windows_opened: set[WindowOpened] = set()
        # -- stream quota (client): how many more streams the peer allows us
        # owner: reader (set_peer_max_streams).
        self._peer_max_streams = DEFAULT_PEER_MAX_STREAMS
        self._open_outbound = 0  # shared: +1 in open_stream, -1 when a stream closes
        # immutable after init: openers (stream tasks) park in it; whoever frees
        # stream quota (stream_closed, SETTINGS, fail) unparks.
        self._quota_lot = trio.lowlevel.ParkingLot()
        # shared: (server) +1 by the reader (admission), -1 by stream_closed in any task.
        self.open_inbound = 0
        # shared: +1 by the reader when it starts a handler, -1 when the handler
        # task ends; a graceful close waits for it to reach 0.
        self.handlers_running = 0
        # immutable after init: a server with max_connection_idle notes when it
        # goes idle (no stream open).
        self._track_idle = track_idle
        # shared: set by stream_closed (any task) when the last stream closes, if
        # _track_idle; None: no stream has closed yet (idle since the start).
        self.idle_since: float | None = None

    @property
    def open_streams(self) -> int:
        return len(self.streams_by_id)

    def streams(self) -> list[H2Stream]:
        return list(self.streams_by_id.values())

    def find_stream(self, stream_id: int) -> H2Stream | None:
        return self.streams_by_id.get(stream_id)

    def register_client_stream(self, stream: H2Stream, stream_id: int) -> None:
        """Loopy wrote the HEADERS of a client stream: it now has an id."""
        stream.stream_id = stream_id
        self.streams_by_id[stream_id] = stream
        self.streams_opened += 1
        if self.keepalive_wakeup is not None:
            self.wake_keepalive()

    def window_opened_handled(self, item: WindowOpened) -> None:
        self.windows_opened.discard(item)

    def _stream_removed(self, stream_id: int) -> None:
        """``stream_id`` closed (``ConnectionCore.stream_closed``): forget it and give
        its quota back, or note that the server went idle."""
        if self.streams_by_id.pop(stream_id, None) is not None or stream_id == 0:
            if self.client_side:
                self._open_outbound -= 1
                if self._quota_lot:
                    self._quota_lot.unpark()
            else:
                self.open_inbound -= 1
                if self._track_idle and not self.streams_by_id:
                    self.idle_since = trio.current_time()

    # -- client stream quota --------------------------------------------------------

    def acquire_stream_quota_nowait(self) -> None:
        """:meth:`acquire_stream_quota` when it need not wait, without its
        checkpoint (trio's ``op_nowait`` convention). Synchronous.

        Raises:
            trio.WouldBlock: the peer's limit is reached, or other tasks wait for
                quota already (they go first); nothing is held.
            GoAwayError, ConnectionClosingError: as :meth:`acquire_stream_quota`.
        """
        error = self.refuse_new_stream_error()
        if error is not None:
            raise error
        if self._open_outbound >= self._peer_max_streams or self._quota_lot:
            raise trio.WouldBlock
        self._open_outbound += 1

    async def acquire_stream_quota(self) -> None:
        """Wait until the peer's MAX_CONCURRENT_STREAMS admits one more stream.

        Checkpoint: always. On cancellation: no quota is held.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        parked = False
        while True:
            error = self.refuse_new_stream_error()
            if error is not None:
                raise error
            if self._open_outbound < self._peer_max_streams:
                break
            parked = True
            await self._quota_lot.park()
        self._open_outbound += 1
        if self._open_outbound < self._peer_max_streams and self._quota_lot:
            self._quota_lot.unpark()  # chain: the limit may have grown by more than one
        if not parked:
            await trio.lowlevel.cancel_shielded_checkpoint()

    def set_peer_max_streams(self, limit: int) -> None:
        """The peer's MAX_CONCURRENT_STREAMS is now ``limit`` (the reader saw SETTINGS)."""
        self._peer_max_streams = limit
        self._quota_lot.unpark_all()

    def wake_quota_waiters(self) -> None:
        """Wake every task waiting for stream quota, to look again (e.g. after GOAWAY)."""
        self._quota_lot.unpark_all()

    def release_stream_quota(self) -> None:
        self._open_outbound -= 1
        if self._quota_lot:
            self._quota_lot.unpark()
