"""Subchannels, connectivity states and load-balancing policies of a channel.

Theory of operation
-------------------
A :class:`Balancer` holds one :class:`Subchannel` per backend address. Each
subchannel is one task in the channel's nursery that loops: connect
(CONNECTING), serve while the connection takes new streams (READY), and when it
stops (the backend's GOAWAY, the connection lost) go on, leaving the old
connection to finish its streams in a task of its own (``_hold``). What "go on"
means is grpc's: under ``round_robin`` the subchannel connects again at once;
under ``pick_first`` it waits in IDLE until a pick finds no READY subchannel
(:meth:`Balancer.exit_idle`, also ``Channel.get_state(try_to_connect=True)``). A
failed connect is TRANSIENT_FAILURE for the backoff of grpc's
doc/connection-backoff.md (``_backoff.py``), then CONNECTING again. Leaving the
balancer's block is SHUTDOWN.

Health (``round_robin`` with ``healthCheckConfig.serviceName``, gRFC A17): while
its connection is up the subchannel runs ``_health_check.watch_health`` on it and
its state follows the answers: CONNECTING until the first, READY while SERVING
(or when the backend has no health service), TRANSIENT_FAILURE otherwise.
``pick_first`` ignores the health config, as grpc does.

Addresses: a ``dns:`` target's :class:`~._resolver.Resolver` runs in the same
nursery and hands each new list to :meth:`Balancer.update_addresses`: an address
that appeared gets a subchannel, one that disappeared is retired (no more picks;
its connection closes gracefully, so the calls on it finish). A subchannel whose
connection ends or fails to connect asks the resolver for a new resolution.

The policy picks among the READY subchannels, kept in ``_ready`` (address
order) by every state change, so a pick is O(1) and allocates nothing:
``pick_first`` takes the first of them, ``round_robin`` the next one in turn.
The channel's state is the best of its subchannels' (READY > CONNECTING >
IDLE > TRANSIENT_FAILURE), SHUTDOWN once closed; every change wakes
``wait_for_state_change``.

Only trio_h2t's public API is used: ``open_connection`` / ``open_unix_connection``
and ``ClientConnection.accepting_streams`` / ``wait_not_accepting``; the health
watch is a call through trio_h2t.grpc's client, opened by ``open_watch`` (given
by ``_client.py``).
"""

from __future__ import annotations

import enum
import ssl
from collections.abc import Callable, Sequence
from typing import Literal

import trio

import trio_h2t
from trio_h2t import ClientConnection

from ._backoff import BackoffState, ConnectionBackoff
from ._health_check import Health, OpenWatch, watch_health
from ._resolver import Address, Resolver

__all__ = ["Address", "Balancer", "ConnectivityState", "Subchannel", "UnhealthyError"]

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

#: The subchannel state each health report means (gRFC A17).
_HEALTH_STATE = {
    Health.CHECKING: ConnectivityState.CONNECTING,
    Health.SERVING: ConnectivityState.READY,
    Health.DISABLED: ConnectivityState.READY,
    Health.NOT_SERVING: ConnectivityState.TRANSIENT_FAILURE,
    Health.FAILED: ConnectivityState.TRANSIENT_FAILURE,
}

#: What a failed connect (or a connection's bad end) raises.
_CONNECT_ERRORS = (
    trio_h2t.ConnectionLostError,
    trio.BrokenResourceError,
    trio.ClosedResourceError,
    trio.TooSlowError,
    OSError,
)


class _Change:
    """One state change of a balancer: set once, with the state it changed to."""

    __slots__ = ("event", "state")

    def __init__(self) -> None:
        self.event = trio.Event()  # shared: set once by Balancer._set_state
        self.state: ConnectivityState | None = None  # shared: set by _set_state before event


class UnhealthyError(Exception):
    """A subchannel's last error when its backend's health check is not SERVING."""


class Subchannel:
    """One backend address and its current connection (``run`` keeps it up)."""

    def __init__(
        self,
        balancer: Balancer,
        address: Address,
        *,
        ssl_context: ssl.SSLContext | None,
        config: trio_h2t.TransportConfig | None,
        backoff: ConnectionBackoff,
        random_source: Callable[[], float] | None,
    ) -> None:
        self._balancer = balancer  # immutable after init
        self.address = address  # immutable after init
        self._ssl_context = ssl_context  # immutable after init
        self._config = config  # immutable after init
        self._backoff = (  # owner: run
            BackoffState(backoff)
            if random_source is None
            else BackoffState(backoff, random_source=random_source)
        )
        self._health_backoff = (  # owner: the health watch task (one at a time)
            BackoffState(backoff)
            if random_source is None
            else BackoffState(backoff, random_source=random_source)
        )
        self.state = ConnectivityState.IDLE  # owner: run and its health watch (via _set_state)
        # owner: run: the connection picks go to while READY, else None.
        self.connection: ClientConnection | None = None
        # owner: run and its health watch: the last connect error or health report
        self.last_error: BaseException | None = None
        self._scope = trio.CancelScope()  # owner: run (enters), retire (cancels)
        # owner: _hold (adds and discards its wait's scope), retire (cancels them)
        self._holds: set[trio.CancelScope] = set()
        # shared: set by request_connection (a picking task), replaced by run
        self._connect_requested = trio.Event()
        self.retired = False  # owner: retire (set once)

    def __repr__(self) -> str:
        return f"<Subchannel {self.address!r} {self.state.name}>"

    def _set_state(self, state: ConnectivityState) -> None:
        if state is not self.state:
            self.state = state
            self._balancer._subchannel_changed()

    def request_connection(self) -> None:
        """Leave IDLE: connect now (nothing if not IDLE). Never checkpoints."""
        if self.state is ConnectivityState.IDLE:
            self._connect_requested.set()

    def retire(self) -> None:
        """Its address is gone: stop reconnecting, and close the connection
        gracefully (the calls on it finish). Never checkpoints."""
        self.retired = True
        self._scope.cancel()
        for scope in self._holds:
            scope.cancel()

    async def run(self, nursery: trio.Nursery) -> None:
        """Connect, serve, reconnect, until cancelled or retired. Connections run
        in ``nursery``.

        Checkpoint: always. On cancellation: the current connection closes (its
        task, in ``nursery``, is cancelled with it); the state becomes SHUTDOWN.
        After :meth:`retire` the connection instead closes gracefully in its task.
        """
        try:
            with self._scope:
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
                        self._balancer.request_resolution()
                        await trio.sleep_until(start + delay)
                        continue
                    self._backoff.reset()
                    self.connection = conn
                    await self._serve(conn)
                    self.connection = None
                    self.last_error = conn.error
                    # The old connection finishes its streams in _hold.
                    self._balancer.request_resolution()
                    if self._balancer.policy == "pick_first":
                        # grpc's pick_first: IDLE until a pick (or the user) asks.
                        self._connect_requested = trio.Event()
                        self._set_state(ConnectivityState.IDLE)
                        await self._connect_requested.wait()
        finally:
            self.connection = None
            self._set_state(ConnectivityState.SHUTDOWN)

    async def _serve(self, conn: ClientConnection) -> None:
        """READY (or as its health says) until ``conn`` stops taking streams."""
        service = self._balancer.health_service
        open_watch = self._balancer.open_watch
        if service is None or open_watch is None:
            self._set_state(ConnectivityState.READY)
            await conn.wait_not_accepting()
            return
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                watch_health, open_watch(conn), service, self._health_backoff, self._health
            )
            await conn.wait_not_accepting()
            nursery.cancel_scope.cancel()  # A17: cancel the Watch, no final status needed

    def _health(self, health: Health, why: str) -> None:
        state = _HEALTH_STATE[health]
        if state is ConnectivityState.TRANSIENT_FAILURE:
            self.last_error = UnhealthyError(f"{self._balancer.format(self.address)}: {why}")
        self._set_state(state)

    async def _hold(
        self, connect_timeout: float, *, task_status: trio.TaskStatus[ClientConnection]
    ) -> None:
        """Open one connection, report it, and keep it until it stops taking streams
        (or the subchannel is retired) and its streams end (a graceful close on the
        way out)."""
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
                with trio.CancelScope() as scope:
                    self._holds.add(scope)
                    try:
                        if self.retired:
                            scope.cancel()
                        await conn.wait_not_accepting()
                    finally:
                        self._holds.discard(scope)
                # Leaving closes gracefully: the streams it still has finish first.
        except _CONNECT_ERRORS:
            if not started:
                raise
            # The connection ended badly on its way out: its streams have failed
            # on their own (the run loop replaced it already).


class Balancer:
    """The subchannels of a channel and its policy (``pick_first`` or
    ``round_robin``). ``run`` (in the channel's nursery) keeps them connected,
    and a ``resolver`` (a dns target's) keeps their addresses current."""

    def __init__(
        self,
        addresses: Sequence[Address],
        *,
        policy: LbPolicy = "pick_first",
        ssl_context: ssl.SSLContext | None = None,
        config: trio_h2t.TransportConfig | None = None,
        backoff: ConnectionBackoff | None = None,
        random_source: Callable[[], float] | None = None,
        resolver: Resolver | None = None,
        health_service: str | None = None,
        open_watch: Callable[[ClientConnection], OpenWatch] | None = None,
    ) -> None:
        if policy not in LB_POLICIES:
            raise ValueError(
                f"load-balancing policy {policy!r} is not supported: use one of {LB_POLICIES}"
            )
        if not addresses:
            raise ValueError("a channel needs at least one backend address")
        if health_service is not None and open_watch is None:
            raise ValueError("health checking needs open_watch (how to open a Watch call)")
        self.policy = policy  # immutable after init
        self.tls = ssl_context is not None  # immutable after init
        self._ssl_context = ssl_context  # immutable after init
        self._config = config  # immutable after init
        self._backoff = backoff or ConnectionBackoff()  # immutable after init
        self._random_source = random_source  # immutable after init
        self._resolver = resolver  # immutable after init
        # immutable after init: pick_first ignores health checking (gRFC A17)
        self.health_service = health_service if policy == "round_robin" else None
        self.open_watch = open_watch  # immutable after init
        self._nursery: trio.Nursery | None = None  # owner: run
        # shared: replaced (never mutated) by update_addresses in the resolver task,
        # read by picks and the channel; no await in between (one trio thread).
        self.subchannels: tuple[Subchannel, ...] = tuple(
            self._make(a) for a in dict.fromkeys(addresses)
        )
        # shared: rebuilt (address order) by _subchannel_changed in the subchannel
        # tasks, read by picks; no await in between (one trio thread).
        self._ready: list[Subchannel] = []
        self._next = 0  # owner: the picking tasks (round_robin's turn)
        self.state = ConnectivityState.IDLE  # shared: set by _subchannel_changed / run
        # shared: the next state change, set (with the state it changed to) and
        # replaced by _set_state; a waiter keeps the one it took
        self._changed = _Change()
        self._ready_event = trio.Event()  # shared: set while some subchannel is READY
        # shared: set and replaced on every subchannel state change
        self._any_changed = trio.Event()

    def _make(self, address: Address) -> Subchannel:
        return Subchannel(
            self,
            address,
            ssl_context=self._ssl_context,
            config=self._config,
            backoff=self._backoff,
            random_source=self._random_source,
        )

    @staticmethod
    def format(address: Address) -> str:
        """``host:port`` (``[v6]:port``) or the socket path."""
        if isinstance(address, str):
            return address
        host, port = address
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    def _subchannel_changed(self) -> None:
        self._any_changed.set()
        self._any_changed = trio.Event()
        self._ready = [s for s in self.subchannels if s.state is ConnectivityState.READY]
        if self._ready:
            self._ready_event.set()
        elif self._ready_event.is_set():
            self._ready_event = trio.Event()
        if self.state is not ConnectivityState.SHUTDOWN:
            best = min(
                (s.state for s in self.subchannels),
                key=_RANK.__getitem__,
                default=ConnectivityState.TRANSIENT_FAILURE,
            )
            if best is ConnectivityState.SHUTDOWN:
                best = ConnectivityState.TRANSIENT_FAILURE
            self._set_state(best)

    def _set_state(self, state: ConnectivityState) -> None:
        if state is not self.state:
            self.state = state
            change = self._changed
            self._changed = _Change()
            change.state = state
            change.event.set()

    def pick(self) -> ClientConnection | None:
        """A READY subchannel's connection by the policy, or None (then IDLE
        subchannels start connecting). Never checkpoints."""
        ready = self._ready
        if not ready:
            self.exit_idle()
            return None
        if self.policy == "pick_first" or len(ready) == 1:
            conn = ready[0].connection
        else:
            self._next += 1
            conn = ready[self._next % len(ready)].connection
        if conn is None or not conn.accepting_streams:
            return None
        return conn

    def exit_idle(self) -> None:
        """Every IDLE subchannel starts connecting. Never checkpoints."""
        for s in self.subchannels:
            if s.state is ConnectivityState.IDLE:
                s.request_connection()

    def request_resolution(self) -> None:
        """Ask the resolver (if any) to resolve again soon. Never checkpoints."""
        if self._resolver is not None:
            self._resolver.request()

    def update_addresses(self, addresses: Sequence[Address]) -> None:
        """The resolver's new list: subchannels for new addresses (started at once),
        retire those of addresses no longer listed. Never checkpoints."""
        nursery = self._nursery
        if nursery is None or self.state is ConnectivityState.SHUTDOWN or not addresses:
            return
        old = {s.address: s for s in self.subchannels}
        kept: list[Subchannel] = []
        for address in dict.fromkeys(addresses):
            sub = old.pop(address, None)
            if sub is None:
                sub = self._make(address)
                nursery.start_soon(sub.run, nursery)
            kept.append(sub)
        self.subchannels = tuple(kept)
        for sub in old.values():
            sub.retire()
        self._subchannel_changed()

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
        if self.state is not last:
            await trio.lowlevel.checkpoint()
            return self.state
        # The first change after now is away from ``last``; its state is returned
        # even if another change came before this task ran again, so a waiter
        # looping on it sees every state (a TRANSIENT_FAILURE lasting no
        # schedule point included).
        change = self._changed
        await change.event.wait()
        assert change.state is not None
        return change.state

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Keep every subchannel connected (and the addresses resolved) until
        cancelled; then SHUTDOWN.

        Checkpoint: always. On cancellation: every connection closes; SHUTDOWN.
        """
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                for s in self.subchannels:
                    nursery.start_soon(s.run, nursery)
                if self._resolver is not None:
                    nursery.start_soon(self._resolver.run, self.update_addresses)
                task_status.started()
                await trio.sleep_forever()
        finally:
            self._set_state(ConnectivityState.SHUTDOWN)
            self._ready = []
            self._ready_event.set()
            self._any_changed.set()
