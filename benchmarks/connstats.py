"""Loopy's write counters of a connection, for frames per write and wire bytes per op.

Both come from the public ``statistics()`` of a connection (``ClientConnection``,
or the ``ServerConnection`` that ``serve_connection`` reports through
``task_status``); ``WriteCounters`` is their sum over a server's connections.

``run.py`` also runs this harness against older trio_h2t commits, from before
``statistics()`` (the base side of a comparison): there the client's counters come
from ``ClientConnection.loopy_statistics()`` and the server's from the connection
core ``serve_connection`` reported, ``loopy.statistics()``. Only this module knows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, final

import trio_h2t

__all__ = ["WriteCounters", "client_writes", "server_writes"]


@final
@dataclass(frozen=True, slots=True)
class WriteCounters:
    """What one connection's writer (loopy) has written so far."""

    frames: int
    send_alls: int
    bytes_written: int


def _counters(loopy: Any) -> WriteCounters:
    return WriteCounters(loopy.frames, loopy.send_alls, loopy.bytes_written)


def client_writes(conn: trio_h2t.ClientConnection) -> WriteCounters:
    """The client connection's write counters."""
    if not hasattr(conn, "statistics"):  # an older trio_h2t (module docstring)
        return _counters(getattr(conn, "loopy_statistics")())  # noqa: B009
    return _counters(conn.statistics().loopy)


def server_writes(started: trio_h2t.ServerConnection) -> WriteCounters:
    """The write counters of a server connection (what ``serve_connection``
    reported to ``task_status``)."""
    if not hasattr(started, "statistics"):  # an older trio_h2t (module docstring)
        return _counters(getattr(started, "loopy").statistics())  # noqa: B009
    return _counters(started.statistics().loopy)
