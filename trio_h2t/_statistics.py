"""Snapshots of a connection's counters: :class:`ConnectionStatistics` (from
``ClientConnection.statistics()`` and ``ServerConnection.statistics()``) and the
writer task's :class:`LoopyStatistics` inside it.

Each is a frozen dataclass built on request from counters the owning tasks keep
(bytes and frames received: the reader, in ``H2State``; bytes and frames sent: loopy;
streams: the connection), so asking costs a few attribute reads and counting costs
an addition per read or write. Nothing here touches the transport.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import final

__all__ = ["ConnectionStatistics", "LoopyStatistics", "ServerStatistics"]


@final
@dataclass(frozen=True, slots=True)
class LoopyStatistics:
    """Counters of a connection's writer task, "loopy" (a snapshot).

    Loopy is the one task that frames and writes (docs/architecture.md): it takes
    the control items other tasks queued in batches, frames them, and writes the
    bytes with as few ``send_all`` calls as it can. ``frames_per_write`` is the
    measure of that batching.
    """

    #: Batches of control items loopy took from the control buffer.
    batches: int
    #: Frames framed (a header block with its CONTINUATION frames counts once, as
    #: does a batch of frames h2 queued in answer to the peer).
    frames: int
    #: DATA frames among them.
    data_frames: int
    #: ``send_all`` calls on the transport (writes).
    send_alls: int
    #: Bytes written by those calls.
    bytes_written: int
    #: Times loopy yielded once before writing, to let producers fill the batch.
    yields: int

    @property
    def frames_per_write(self) -> float:
        """``frames / send_alls`` (0.0 before the first write)."""
        return self.frames / self.send_alls if self.send_alls else 0.0


@final
@dataclass(frozen=True, slots=True)
class ConnectionStatistics:
    """Counters and flow-control windows of one HTTP/2 connection (a snapshot).

    Windows are in bytes (RFC 9113 §6.9); a send window may be negative after the
    peer shrank SETTINGS_INITIAL_WINDOW_SIZE (§6.9.2).
    """

    #: Streams open now.
    streams_open: int
    #: Streams opened since the connection started: by this client, or (on a server)
    #: by the peer and handed to a handler (refused streams are not counted).
    streams_opened: int
    #: Bytes written to the transport, the connection preface included.
    bytes_sent: int
    #: Bytes read from the transport.
    bytes_received: int
    #: Frames written, the preface's included. A header block counts once, and so
    #: does each batch of frames h2 queued by itself in answer to the peer (SETTINGS
    #: and PING acks, resets), so this is a lower bound.
    frames_sent: int
    #: Frames received and processed (a header block counts once).
    frames_received: int
    #: The connection's send window: DATA bytes the peer lets us send now.
    send_window: int
    #: The connection's receive window: DATA bytes we let the peer send now.
    receive_window: int
    #: The send window a new stream of ours starts with: the peer's
    #: SETTINGS_INITIAL_WINDOW_SIZE.
    stream_send_window: int
    #: The receive window a new stream starts with: ours (it grows with the BDP
    #: estimate when ``TransportConfig.dynamic_window`` is on).
    stream_receive_window: int
    #: The writer task's counters.
    loopy: LoopyStatistics


@final
@dataclass(frozen=True, slots=True)
class ServerStatistics:
    """Counters of one running server (a snapshot; ``H2Server.statistics()``)."""

    #: Connections accepted and not yet ended (TLS handshakes included).
    connections_open: int
    #: Connections accepted since the server started, refused ones included.
    connections_accepted: int
    #: Connections closed at once because ``TransportConfig.max_connections`` were
    #: already open.
    connections_refused: int
