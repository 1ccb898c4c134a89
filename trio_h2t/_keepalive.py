"""The keepalive task: keepalive PINGs, and a server's idle and age limits.

Theory of operation
-------------------
One task per connection, in the connection's nursery, started only when a feature
needs it (``client_keepalive_enabled`` / ``server_keepalive_enabled``): a connection
without keepalive has no task, no timer and no per-stream cost. grpc-go runs the same
goroutine (reference §4); the decisions are the sans-IO ``_pings.KeepaliveTimer``,
this module only sleeps and acts.

- **Client** (``run_client_keepalive``): after ``keepalive_time`` without any
  inbound frame (the reader stores the time of each read in ``core.last_read``), put
  a ``Ping`` for loopy; if nothing at all arrives within ``keepalive_timeout`` of
  it, fail the connection with ``KeepaliveTimeoutError`` (loopy's last write still
  says GOAWAY, bounded). With no stream open and ``keepalive_permit_without_stream``
  off, the task goes *dormant*: it waits on ``core.keepalive_wakeup``, with no
  deadline, until loopy starts a stream (``register_client_stream``) or the
  connection ends (``fail``), then looks at once.
- **Server** (``run_server_keepalive``): the same pings every
  ``server_keepalive_time`` (never dormant; a timeout fails the connection without a
  drain, the client being presumed gone), plus two deadlines, each ending with the
  graceful close (``ConnectionCore.graceful_close``: GOAWAY, the open streams
  finish within the grace, then close), after which the task ends:
  ``max_connection_idle`` (no stream open for that long: GOAWAY ``max_idle``) and
  ``max_connection_age`` with ±10 % jitter (GOAWAY ``max_age``, grace
  ``max_connection_age_grace``).

The task sleeps with ``trio.move_on_at`` on ``core.done``, so it also returns as
soon as the connection is over.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable

import trio

from ._config import TransportConfig
from ._connection import ConnectionCore
from ._exceptions import KeepaliveTimeoutError
from ._items import Ping
from ._pings import KEEPALIVE_PING_DATA, KeepaliveAction, KeepaliveTimer, jittered_age

__all__ = [
    "client_keepalive_enabled",
    "run_client_keepalive",
    "run_server_keepalive",
    "server_keepalive_enabled",
]

#: GOAWAY debug data of the server's graceful closes (grpc-go's strings).
MAX_IDLE = b"max_idle"
MAX_AGE = b"max_age"


def client_keepalive_enabled(config: TransportConfig) -> bool:
    """True if a client connection with ``config`` runs a keepalive task."""
    return config.keepalive_time is not None


def server_keepalive_enabled(config: TransportConfig) -> bool:
    """True if a server connection with ``config`` runs a keepalive task."""
    return (
        config.server_keepalive_time is not None
        or config.max_connection_idle is not None
        or config.max_connection_age is not None
    )


async def _sleep_until(core: ConnectionCore, deadline: float) -> bool:
    """Sleep until ``deadline`` or the connection's end; True if it is still up."""
    with trio.move_on_at(deadline):
        await core.done.wait()
    return core.error is None


def _timeout_error(config: TransportConfig, interval: float) -> KeepaliveTimeoutError:
    return KeepaliveTimeoutError(
        f"keepalive timeout: nothing arrived within keepalive_timeout="
        f"{config.keepalive_timeout:g} s of our keepalive PING (sent after {interval:g} s"
        " without an inbound frame)"
    )


async def run_client_keepalive(core: ConnectionCore) -> None:
    """The client's keepalive task; returns when the connection is over.

    Checkpoint: always. On cancellation: returns; a PING already put stays queued.
    """
    config = core.config
    interval = config.keepalive_time
    assert interval is not None
    permit = config.keepalive_permit_without_stream
    timer = KeepaliveTimer(
        interval=interval, timeout=config.keepalive_timeout, start=trio.current_time()
    )
    deadline = timer.first_deadline
    while await _sleep_until(core, deadline):
        action, deadline = timer.poll(
            trio.current_time(), core.last_read, may_sleep=not permit and not core.open_streams
        )
        if action is KeepaliveAction.PING:
            core.put(Ping(KEEPALIVE_PING_DATA))
        elif action is KeepaliveAction.DORMANT:
            wakeup = core.keepalive_wakeup = trio.Event()
            await wakeup.wait()
            deadline = -math.inf  # look at once (the stream may want a ping)
        elif action is KeepaliveAction.TIMEOUT:
            core.fail(_timeout_error(config, interval))
            return


async def run_server_keepalive(
    core: ConnectionCore, *, uniform: Callable[[], float] = random.random
) -> None:
    """The server's keepalive task; returns when the connection is over, or once an
    idle or age limit has closed it. ``uniform`` draws the age jitter (tests pin it).

    Checkpoint: always. On cancellation: returns; a graceful close in progress is
    cut short as ``ConnectionCore.graceful_close`` says (the connection still ends).
    """
    config = core.config
    start = trio.current_time()
    interval = config.server_keepalive_time
    timer = None
    ping_at = math.inf
    if interval is not None:
        timer = KeepaliveTimer(interval=interval, timeout=config.keepalive_timeout, start=start)
        ping_at = timer.first_deadline
    max_idle = config.max_connection_idle
    idle_at = math.inf if max_idle is None else start + max_idle
    age = config.max_connection_age
    age_at = math.inf if age is None else start + jittered_age(age, uniform())
    while await _sleep_until(core, min(ping_at, idle_at, age_at)):
        now = trio.current_time()
        if max_idle is not None and now >= idle_at:
            if core.open_streams:
                idle_at = now + max_idle  # busy: look again a whole period later
            else:
                since = core.idle_since
                idle_at = (start if since is None else since) + max_idle
                if idle_at <= now:
                    await core.graceful_close(debug_data=MAX_IDLE)
                    return
        if now >= age_at:
            grace = config.max_connection_age_grace
            await core.graceful_close(
                timeout=math.inf if grace is None else grace, debug_data=MAX_AGE
            )
            return
        if timer is not None and now >= ping_at:
            action, ping_at = timer.poll(now, core.last_read)
            if action is KeepaliveAction.PING:
                core.put(Ping(KEEPALIVE_PING_DATA))
            elif action is KeepaliveAction.TIMEOUT:
                assert interval is not None
                core.fail(_timeout_error(config, interval))
                return
