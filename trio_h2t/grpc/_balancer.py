"""Subchannels, connectivity states and load-balancing policies of a channel.

Theory of operation
-------------------
A :class:`Balancer` holds one :class:`Subchannel` per backend address. Each
subchannel is one task in the channel's nursery that loops: connect
(CONNECTING), serve while the connection takes new streams (READY), and when it
stops (the backend's GOAWAY, the connection lost) open a replacement at once,
leaving the old connection to finish its streams in a task of its own. A failed
connect is TRANSIENT_FAILURE for the backoff of grpc's doc/connection-backoff.md
(``_backoff.py``), then CONNECTING again. Leaving the balancer's block is
SHUTDOWN.

The policy picks among the READY subchannels, kept in ``_ready`` (address
order) by every state change, so a pick is O(1) and allocates nothing:
``pick_first`` takes the first of them, ``round_robin`` the next one in turn.
The channel's state is the best of its subchannels' (READY > CONNECTING >
IDLE > TRANSIENT_FAILURE), SHUTDOWN once closed; every change wakes
``wait_for_state_change``.

Only trio_h2t's public API is used: ``open_connection`` / ``open_unix_connection``
and ``ClientConnection.accepting_streams`` / ``wait_not_accepting``.
"""

from __future__ import annotations

import enum
import ssl
from collections.abc import Callable
from typing import Literal

import trio

import trio_h2t
from trio_h2t import ClientConnection

from ._backoff import BackoffState, ConnectionBackoff

__all__ = ["Balancer", "ConnectivityState", "Subchannel"]

LbPolicy = Literal["pick_first", "round_robin"]
LB_POLICIES = ("pick_first", "round_robin")


class ConnectivityState(enum.Enum):
    """gRPC's connectivity states (grpc's doc/connectivity-semantics-and-api.md)."""

    IDLE = "IDLE"
    CONNECTING = "CONNECTING"
    READY = "READY"
    TRANSIENT_FAILURE = "TRANSIENT_FAILURE"
    SHUTDOWN = "SHUTDOWN"


_RANK = {
    ConnectivityState.READY: 0,
    ConnectivityState.CONNECTING: 1,
    ConnectivityState.IDLE: 2,
    ConnectivityState.TRANSIENT_FAILURE: 3,
    ConnectivityState.SHUTDOWN: 4,
}

#: What a failed connect (or a connection's bad end) raises.
_CONNECT_ERRORS = (
    trio_h2t.ConnectionLostError,
    trio.BrokenResourceError,
    trio.ClosedResourceError,
    trio.TooSlowError,
    OSError,
)

#: A backend address: (host, port) for TCP, or a Unix socket path.
Address = tuple[str, int] | str


class Subchannel:
    """One backend address and its current connection (``run`` keeps it up)."""

    def __init__(
        self,
        balancer: Balancer,
        index: int,
        address: Address,
        *,
        ssl_context: ssl.SSLContext | None,
        config: trio_h2t.TransportConfig | None,
        backoff: ConnectionBackoff,
        random_source: Callable[[], float] | None,
    ) -> None:
        self._balancer = balancer  # immutable after init
        self.index = index  # immutable after init: place in address order
        self.address = address  # immutable after init
        self._ssl_context = ssl_context  # immutable after init
        self._config = config  # immutable after init
        self._backoff = (  # owner: run
            BackoffState(backoff)
            if random_source is None
            else BackoffState(backoff, random_source=random_source)
        )
        self.state = ConnectivityState.IDLE  # owner: run (via _set_state)
        # owner: run: the connection picks go to while READY, else None.
        self.connection: ClientConnection | None = None
        self.last_error: BaseException | None = None  # owner: run: the last connect error

    def __repr__(self) -> str:
        return f"<Subchannel {self.address!r} {self.state.name}>"

    def _set_state(self, state: ConnectivityState) -> None:
        if state is not self.state:
            self.state = state
            self._balancer._subchannel_changed(self)

    async def run(self, nursery: trio.Nursery) -> None:
        """Connect, serve, reconnect, until cancelled. Connections run in ``nursery``.

        Checkpoint: always. On cancellation: the current connection closes (its
        task, in ``nursery``, is cancelled with it); the state becomes SHUTDOWN.
        """
        try:
            while True:
                self._set_state(ConnectivityState.CONNECTING)
                delay = self._backoff.next_delay()
                start = trio.current_time()
                try:
                    conn: ClientConnection = await nursery.start(
                        self._hold, self._backoff.connect_timeout(delay)
                    )
                except _CONNECT_ERRORS as exc:
                    self.last_error = exc
                    self._set_state(ConnectivityState.TRANSIENT_FAILURE)
                    await trio.sleep_until(start + delay)
                    continue
                self._backoff.reset()
                self.connection = conn
                self._set_state(ConnectivityState.READY)
                await conn.wait_not_accepting()
                self.connection = None
                self.last_error = conn.error
                # The old connection finishes its streams in _hold; replace it now.
        finally:
            self.connection = None
            self._set_state(ConnectivityState.SHUTDOWN)

    async def _hold(
        self, connect_timeout: float, *, task_status: trio.TaskStatus[ClientConnection]
    ) -> None:
        """Open one connection, report it, and keep it until it stops taking streams
        and its streams end (a graceful close on the way out)."""
        address = self.address
        if isinstance(address, str):
            # A local socket connects at once or fails: no connect timeout.
            opener = trio_h2t.open_unix_connection(address, config=self._config)
        else:
            opener = trio_h2t.open_connection(
                address[0],
                address[1],
                ssl_context=self._ssl_context,
                connect_timeout=connect_timeout,
                config=self._config,
            )
        started = False
        try:
            async with opener as conn:
                started = True
                task_status.started(conn)
                await conn.wait_not_accepting()
                # Leaving closes gracefully: the streams it still has finish first.
        except _CONNECT_ERRORS:
            if not started:
                raise
            # The connection ended badly on its way out: its streams have failed
            # on their own (the run loop replaced it already).


class Balancer:
    """The subchannels of a channel and its policy (``pick_first`` or
    ``round_robin``). ``run`` (in the channel's nursery) keeps them connected."""

    def __init__(
        self,
        addresses: list[Address],
        *,
        policy: LbPolicy = "pick_first",
        ssl_context: ssl.SSLContext | None = None,
        config: trio_h2t.TransportConfig | None = None,
        backoff: ConnectionBackoff | None = None,
        random_source: Callable[[], float] | None = None,
    ) -> None:
        if policy not in LB_POLICIES:
            raise ValueError(
                f"load-balancing policy {policy!r} is not supported: use one of {LB_POLICIES}"
            )
        if not addresses:
            raise ValueError("a channel needs at least one backend address")
        self.policy = policy  # immutable after init
        self.tls = ssl_context is not None  # immutable after init
        backoff = backoff or ConnectionBackoff()
        # immutable after init
        self.subchannels = tuple(
            Subchannel(
                self,
                i,
                address,
                ssl_context=ssl_context,
                config=config,
                backoff=backoff,
                random_source=random_source,
            )
            for i, address in enumerate(addresses)
        )
        # shared: rebuilt (address order) by _subchannel_changed in the subchannel
        # tasks, read by picks; no await in between (one trio thread).
        self._ready: list[Subchannel] = []
        self._next = 0  # owner: the picking tasks (round_robin's turn)
        self.state = ConnectivityState.IDLE  # shared: set by _subchannel_changed / run
        self._changed = trio.Event()  # shared: set and replaced on every state change
        self._ready_event = trio.Event()  # shared: set while some subchannel is READY
        # shared: set and replaced on every subchannel state change
        self._any_changed = trio.Event()

    def _subchannel_changed(self, subchannel: Subchannel) -> None:
        self._any_changed.set()
        self._any_changed = trio.Event()
        self._ready = [s for s in self.subchannels if s.state is ConnectivityState.READY]
        if self._ready:
            self._ready_event.set()
        elif self._ready_event.is_set():
            self._ready_event = trio.Event()
        if self.state is not ConnectivityState.SHUTDOWN:
            best = min((s.state for s in self.subchannels), key=_RANK.__getitem__)
            if best is ConnectivityState.SHUTDOWN:
                best = ConnectivityState.TRANSIENT_FAILURE
            self._set_state(best)

    def _set_state(self, state: ConnectivityState) -> None:
        if state is not self.state:
            self.state = state
            self._changed.set()
            self._changed = trio.Event()

    def pick(self) -> ClientConnection | None:
        """A READY subchannel's connection by the policy, or None. Never checkpoints."""
        ready = self._ready
        if not ready:
            return None
        if self.policy == "pick_first" or len(ready) == 1:
            conn = ready[0].connection
        else:
            self._next += 1
            conn = ready[self._next % len(ready)].connection
        if conn is None or not conn.accepting_streams:
            return None
        return conn

    async def wait_for_any_change(self) -> None:
        """Return at the next state change of any subchannel (or at shutdown).

        Checkpoint: always. On cancellation: nothing changes.
        """
        if self.state is ConnectivityState.SHUTDOWN:
            await trio.lowlevel.checkpoint()
            return
        await self._any_changed.wait()

    async def wait_for_ready(self) -> None:
        """Return once some subchannel is READY (or the balancer is shut down).

        Checkpoint: always. On cancellation: nothing changes.
        """
        await self._ready_event.wait()
        await trio.lowlevel.checkpoint()

    def last_error(self) -> BaseException | None:
        """The most recent connect error of any subchannel, for a call's details."""
        for s in self.subchannels:
            if s.last_error is not None:
                return s.last_error
        return None

    async def wait_for_state_change(self, last: ConnectivityState) -> ConnectivityState:
        """Return the state once it is not ``last``.

        Checkpoint: always. On cancellation: nothing changes.
        """
        while self.state is last:
            await self._changed.wait()
        await trio.lowlevel.checkpoint()
        return self.state

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Keep every subchannel connected until cancelled; then SHUTDOWN.

        Checkpoint: always. On cancellation: every connection closes; SHUTDOWN.
        """
        try:
            async with trio.open_nursery() as nursery:
                for s in self.subchannels:
                    nursery.start_soon(s.run, nursery)
                task_status.started()
                await trio.sleep_forever()
        finally:
            self._set_state(ConnectivityState.SHUTDOWN)
            self._ready = []
            self._ready_event.set()
            self._any_changed.set()
