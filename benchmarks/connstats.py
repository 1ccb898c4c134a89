"""Loopy's write counters of a connection, for frames per write and wire bytes per op.

############################################################################ SHIM
This module is the benchmarks' ONE shim around what trio_h2t does not export yet.
Issue 10 §2 gives ``ClientConnection`` and ``ServerConnection`` a ``statistics()``
method returning exported frozen types (streams, bytes and frames each way, loopy's
counters). Until it lands:

- the client's counters come from ``ClientConnection.loopy_statistics()`` (a public
  method whose return type is not exported);
- the server's come from the object ``serve_connection`` hands to ``task_status``
  (today the runtime ``ConnectionCore``), through its ``loopy.statistics()``.

Nothing here imports a private module; when ``statistics()`` lands, only the two
functions below change, and this banner goes.
############################################################################ SHIM
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


def client_writes(conn: trio_h2t.ClientConnection) -> WriteCounters:
    """The client connection's write counters (SHIM: see the module docstring)."""
    snap = conn.loopy_statistics()
    return WriteCounters(snap.frames, snap.send_alls, snap.bytes_written)


def server_writes(started: Any) -> WriteCounters:
    """The write counters of a server connection, from what ``serve_connection``
    reported to ``task_status`` (SHIM: see the module docstring)."""
    snap = started.loopy.statistics()
    return WriteCounters(snap.frames, snap.send_alls, snap.bytes_written)
