"""Loopy's write counters of a connection, for frames per write and wire bytes per op.

Both come from the public ``statistics()`` of a connection (``ClientConnection``,
or the ``ServerConnection`` that ``serve_connection`` reports through
``task_status``); ``WriteCounters`` is their sum over a server's connections.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import final

import trio_h2t

__all__ = ["WriteCounters", "client_writes", "server_writes"]


@final
@dataclass(frozen=True, slots=True)
class WriteCounters:
    """What one connection's writer (loopy) has written so far."""

    frames: int
    send_alls: int
    bytes_written: int


def _counters(stats: trio_h2t.ConnectionStatistics) -> WriteCounters:
    loopy = stats.loopy
    return WriteCounters(loopy.frames, loopy.send_alls, loopy.bytes_written)


def client_writes(conn: trio_h2t.ClientConnection) -> WriteCounters:
    """The client connection's write counters."""
    return _counters(conn.statistics())


def server_writes(started: trio_h2t.ServerConnection) -> WriteCounters:
    """The write counters of a server connection (what ``serve_connection``
    reported to ``task_status``)."""
    return _counters(started.statistics())
