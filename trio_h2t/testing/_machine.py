"""A Hypothesis ``RuleBasedStateMachine`` that drives a user's handler over HTTP/2.

Theory of operation
-------------------
One Hypothesis example is one Trio run, started with ``trio.lowlevel.start_guest_run``
on a tiny *host loop* the machine owns: a deque of callbacks it pumps synchronously
(:class:`_Host`). Between two rules the host is not pumped, so the Trio world stands
still. A rule injects its action with ``TrioToken.run_sync_soon`` and pumps until the
world is *quiescent*: a sentinel task, parked in ``trio.testing.wait_all_tasks_blocked``,
reports that every other task is blocked. The clock is
``MockClock(autojump_threshold=0)``, and the sentinel keeps it from jumping by
itself: virtual time passes only in the ``advance_time`` rule and at the end. The
initial rule draws ``st.random_module()``, which seeds Trio's scheduler, so the
order in which runnable tasks run is part of the example and replays exactly. This
is the machinery of ``tests/test_connection_stateful.py``, where trio_h2t checks
itself.

The world is :func:`~trio_h2t.testing.open_memory_pair`'s: a server running
:meth:`HandlerMachine.handler` and a client, with drawn configs, chunkings and link
capacity. Each request is an *exchange*: a client task executing the rules'
commands on its stream (send a piece of body, end with or without trailers, read
some, read to the end), and the rules also reset a stream, cancel its task, let
time pass and close the connection gracefully or abruptly.

Checked after every step (:meth:`HandlerMachine.check_exchanges`, which a subclass
may extend): an exchange has at most one outcome; every stream's unread bytes are
within its receive window on both sides; on a healthy, quiescent link no bytes are
left unread (else both readers are stuck: a deadlock); no connection fault was
logged. At the end every exchange is finished (request ended, response read), the
client leaves, and the whole world must end within ``FINAL_TIMEOUT`` virtual seconds:
then every exchange has exactly one outcome, no task is left, and
:meth:`HandlerMachine.expected_response` is compared with what each undisturbed
exchange received (no bytes lost, duplicated or reordered).
"""

from __future__ import annotations

import functools
import logging
import math
import traceback
import warnings
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import outcome
import trio
import trio.testing
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

from trio_h2t._client import ClientConnection
from trio_h2t._exceptions import ConnectionClosingError, ConnectionLostError, StreamResetError
from trio_h2t._stream import H2Stream

from ._pairs import ChunkedStream, Chunking, MemoryPair, open_memory_pair
from ._strategies import bodies, chunkings, request_headers, trailers, transport_configs

__all__ = ["Exchange", "HandlerMachine"]

#: Host-loop callbacks one pump may run before the machine calls it a livelock.
MAX_TICKS = 2_000_000
#: Virtual seconds the final drain may take (the drawn grace periods are at most 30 s).
FINAL_TIMEOUT = 600.0
#: What a stream operation may raise on a disturbed exchange (docs/errors.md).
EXPECTED_ERRORS = (
    StreamResetError,
    ConnectionClosingError,
    ConnectionLostError,
    trio.ClosedResourceError,
)


@dataclass(eq=False)
class Exchange:
    """One request, as the client saw it. Fields are written by its client task only.

    ``outcome`` is ``"response"`` (the whole response arrived), ``"reset"`` (a
    StreamResetError), ``"error"`` (another error, in ``error``) or ``"cancelled"``
    (a rule cancelled the task), set exactly once when the task ends.
    """

    idx: int
    headers: list[tuple[bytes, bytes]]
    sent: bytearray = field(default_factory=bytearray)  # request body queued so far
    ended: bool = False  # END_STREAM queued
    trailers_sent: list[tuple[bytes, bytes]] | None = None
    status: bytes | None = None  # the response's :status
    received: bytearray = field(default_factory=bytearray)  # response body read so far
    complete: bool = False  # the response's END_STREAM was read
    outcome: str | None = None
    error: BaseException | None = None
    disturbed: bool = False  # reset, cancelled, or the connection was closed
    stream: H2Stream | None = None
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    # Commands for the sending and the receiving task (each runs them in order).
    send_commands: trio.MemorySendChannel[tuple[Any, ...]] = field(init=False)
    recv_commands: trio.MemorySendChannel[tuple[Any, ...]] = field(init=False)
    _send_inbox: trio.MemoryReceiveChannel[tuple[Any, ...]] = field(init=False)
    _recv_inbox: trio.MemoryReceiveChannel[tuple[Any, ...]] = field(init=False)
    done: trio.Event = field(default_factory=trio.Event)

    def __post_init__(self) -> None:
        self.send_commands, self._send_inbox = trio.open_memory_channel[tuple[Any, ...]](math.inf)
        self.recv_commands, self._recv_inbox = trio.open_memory_channel[tuple[Any, ...]](math.inf)

    def __repr__(self) -> str:
        return (
            f"<Exchange #{self.idx} sent={len(self.sent)}{'+END' if self.ended else ''} "
            f"status={self.status!r} received={len(self.received)}"
            f"{'+END' if self.complete else ''} outcome={self.outcome} error={self.error!r}>"
        )


class _Host:
    """The host loop of the guest run: a deque of callbacks, pumped on demand."""

    def __init__(self) -> None:
        self.queue: deque[Callable[[], object]] = deque()
        self.result: outcome.Outcome[None] | None = None

    def run_sync_soon(self, fn: Callable[[], object]) -> None:
        self.queue.append(fn)

    def done(self, result: outcome.Outcome[None]) -> None:
        self.result = result

    def pump(self, until: Callable[[], bool]) -> None:
        for _ in range(MAX_TICKS):
            if until() or self.result is not None:
                return
            assert self.queue, "the guest run stopped scheduling itself"
            self.queue.popleft()()
        raise AssertionError(f"livelock: the world did not settle in {MAX_TICKS} ticks")


class _Faults(logging.Handler):
    """Counts the contained connection faults logged (``extra={"h2t_fault": True}``).

    Keeps no record: a record's traceback holds the frames, and so the whole world,
    of the example that logged it.
    """

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.first: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "h2t_fault", False) and self.first is None:
            self.first = f"{record.getMessage()}: {record.exc_info and record.exc_info[1]!r}"


def _leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside ``exc``, groups flattened."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


_picks = st.integers(0, 1000)
_rarely = st.sampled_from([False] * 7 + [True])


class _WorldMachine(RuleBasedStateMachine):
    """What :class:`HandlerMachine` and :class:`ClientMachine` share: the guest run
    on a host loop the machine pumps, the world of :func:`open_memory_pair`, the
    rules that let time pass and close the connection, and the final drain.

    A subclass says what the server runs (:meth:`_serve`), how the world is checked
    after each step (:meth:`_check_step`), which of its items a disturbance explains
    (:meth:`_disturb`), how to finish every item (:meth:`_finish_all`) and what is
    checked once the world has ended (:meth:`_check_end`).
    """

    def __init__(self) -> None:
        super().__init__()
        self.pair: MemoryPair | None = None
        self.bugs: list[str] = []
        self._host = _Host()
        self._token: trio.lowlevel.TrioToken | None = None
        self._guest: Any = None
        self._top: trio.Nursery | None = None
        self._client_nursery: trio.Nursery | None = None
        self._idle = False
        self._delivered = False
        self._time_gate: trio.Event | None = None
        self._sentinel_scope = trio.CancelScope()
        self._world_done = trio.Event()  # set: the pair's block is over
        self._started = False
        self._failed = False
        self._closing = False  # a close rule ran: errors are explained
        self._faults = _Faults()
        self._handlers_running = 0

    # ------------------------------------------------------------------ hooks

    async def _serve(self, stream: H2Stream) -> None:
        raise NotImplementedError

    def _check_step(self) -> None:
        raise NotImplementedError

    def _items(self) -> list[Any]:
        """What the rules act on (exchanges, calls); for the stuck-world message."""
        raise NotImplementedError

    def _disturb(self) -> None:
        """A close or the passing of time explains errors of the items in flight."""
        raise NotImplementedError

    def _finish_all(self) -> list[trio.Event]:
        """Put every item on its way to an end; the events it will set when done."""
        raise NotImplementedError

    async def _settled(self) -> None:
        """Once every item is done, before the world ends: a check of a subclass."""

    def _check_end(self) -> None:
        raise NotImplementedError

    # ------------------------------------------------------------------ plumbing

    def _inject(self, fn: Callable[[], object], *, until: Callable[[], bool] | None = None) -> None:
        """Run ``fn`` inside the world, then pump until the world is quiescent."""
        self._idle = self._delivered = False

        def wrapped() -> None:
            self._idle = False
            self._delivered = True
            try:
                fn()
            except BaseException as exc:
                self.bugs.append("".join(traceback.format_exception(exc)))

        assert self._token is not None
        self._token.run_sync_soon(wrapped)
        done = until or (lambda: True)

        def settled() -> bool:
            if not (self._delivered and self._idle):
                return False
            assert done(), f"the world is stuck (all tasks blocked): {self._items()}"
            return True

        self._host.pump(settled)

    async def _sentinel(self) -> None:
        with self._sentinel_scope:
            while True:
                await trio.testing.wait_all_tasks_blocked()
                gate = self._time_gate
                if gate is not None:
                    await gate.wait()
                    continue
                self._idle = True

    def _act(self, fn: Callable[[], object] | None = None) -> None:
        try:
            if fn is not None and self._host.result is None:
                self._inject(fn)
            self._check_step()
        except BaseException:
            self._failed = True
            raise

    async def _main(self, config: dict[str, Any]) -> None:
        self._token = trio.lowlevel.current_trio_token()
        async with trio.open_nursery() as top:
            self._top = top
            top.start_soon(self._sentinel)
            try:
                async with open_memory_pair(self._run_server, **config) as pair:
                    self.pair = pair
                    async with trio.open_nursery() as nursery:
                        self._client_nursery = nursery
                        await trio.sleep_forever()
            finally:
                self._world_done.set()
                self._sentinel_scope.cancel()

    async def _run_server(self, stream: H2Stream) -> None:
        self._handlers_running += 1
        try:
            await self._serve(stream)
        finally:
            self._handlers_running -= 1

    @initialize(
        client_config=transport_configs(),
        server_config=transport_configs(),
        client_chunking=chunkings(),
        server_chunking=chunkings(),
        capacity=st.sampled_from([None, None, 1000, 65_536]),
        rnd=st.random_module(),
    )
    def start_world(
        self,
        client_config: Any,
        server_config: Any,
        client_chunking: Chunking,
        server_chunking: Chunking,
        capacity: int | None,
        rnd: Any,
    ) -> None:
        """Start the world: server, client and link, all drawn; Trio's scheduler
        seeded by ``rnd``."""
        del rnd  # drawing it seeded Trio's scheduler for this example
        self._start(
            {
                "client_config": client_config,
                "server_config": server_config,
                "client_chunking": client_chunking,
                "server_chunking": server_chunking,
                "capacity": capacity,
            }
        )

    def _start(self, config: dict[str, Any]) -> None:
        """Start the guest run of ``_main(config)`` and settle it."""
        logging.getLogger("trio_h2t").addHandler(self._faults)
        trio.lowlevel.start_guest_run(
            self._main,
            config,
            run_sync_soon_threadsafe=self._host.run_sync_soon,
            done_callback=self._host.done,
            clock=trio.testing.MockClock(autojump_threshold=0),
        )
        self._started = True
        self._guest = getattr(self._host.queue[0], "__self__", None)
        try:
            self._host.pump(lambda: self._token is not None)
            self._inject(lambda: None, until=lambda: self._client_nursery is not None)
            self._check_step()
        except BaseException:
            self._failed = True
            raise

    def _alive(self) -> bool:
        return self._client_nursery is not None and not self._closing

    def _check_world(self) -> None:
        """The checks of every step that do not depend on the items."""
        assert not self.bugs, "\n\n".join(self.bugs)
        assert self._faults.first is None, f"a connection fault was logged: {self._faults.first}"
        if self._host.result is not None:
            self._host.result.unwrap()
        pair = self.pair
        if pair is None:
            return
        for conn in (pair.client, pair.server):
            for stream in conn._core.streams_by_id.values():
                flow = stream.core_in_flow
                if not stream.closed:
                    assert flow.pending_data <= flow.limit + flow.delta, (
                        f"{stream!r}: {flow.pending_data} unread bytes over its window "
                        f"{flow.limit} + {flow.delta}"
                    )
        if self._healthy():
            link: ChunkedStream = pair.client_transport
            stuck = link.unread or pair.server_transport.unread
            assert not stuck, (
                f"deadlock: {pair.server_transport.unread} bytes client->server and "
                f"{link.unread} server->client unread on a healthy, quiescent link"
            )

    def _healthy(self) -> bool:
        pair = self.pair
        return (
            pair is not None
            and not self._closing
            and all(
                c._core.error is None and not c._core.closing for c in (pair.client, pair.server)
            )
        )

    # ------------------------------------------------------------------ shared rules

    @precondition(lambda self: self._items())
    @rule(dt=st.sampled_from([0.001, 0.6, 6.0, 60.0]), go=_rarely)
    def advance_time(self, dt: float, go: bool) -> None:
        """Let ``dt`` virtual seconds pass (timeouts fire), then settle."""
        if not go or self._host.result is not None:
            return self._act()
        gate = trio.Event()

        async def sleeper() -> None:
            await trio.sleep(dt)
            self._time_gate = None
            gate.set()

        def start() -> None:
            self._time_gate = gate
            assert self._top is not None
            self._top.start_soon(sleeper)

        self._disturb_by_time()
        try:
            self._inject(start, until=lambda: self._time_gate is None)
        except BaseException:
            self._failed = True
            raise
        self._act()

    def _disturb_by_time(self) -> None:
        """Time passing explains nothing for a handler's exchanges (the client side
        has no timeouts); a client's calls may time out."""

    @precondition(lambda self: self._items() and self._alive())
    @rule(how=st.sampled_from(["client", "server", "abrupt"]), go=_rarely)
    def close(self, how: str, go: bool) -> None:
        """Close the connection: the client's or the server's graceful close, or the
        link cut at once."""
        if not go:
            return self._act()
        self._closing = True
        self._disturb()
        pair, top = self.pair, self._top
        assert pair is not None
        assert top is not None
        actions: dict[str, Callable[[], object]] = {
            "client": functools.partial(top.start_soon, pair.client.aclose),
            "server": functools.partial(top.start_soon, pair.server.aclose),
            "abrupt": pair.client_transport.close_now,
        }
        self._act(actions[how])

    # ------------------------------------------------------------------ the end

    def teardown(self) -> None:
        if not self._started:
            return
        try:
            if not self._failed and self._host.result is None:
                self._final_phase()
        finally:
            logging.getLogger("trio_h2t").removeHandler(self._faults)
            self._shutdown()

    def _final_phase(self) -> None:
        async def finish() -> None:
            try:
                with trio.fail_after(FINAL_TIMEOUT):
                    for event in self._finish_all():
                        await event.wait()
                    await self._settled()
                    assert self._client_nursery is not None
                    self._client_nursery.cancel_scope.cancel()  # only the sleep is left
                    # The pair's block ends: the client closes, the server ends itself.
                    await self._world_done.wait()
            except trio.TooSlowError:
                self.bugs.append(
                    f"hang: the world did not end within {FINAL_TIMEOUT} s: {self._items()}"
                )
                assert self._top is not None
                self._top.cancel_scope.cancel()

        def start() -> None:
            self._time_gate = trio.Event()  # never set: time flows until the end
            assert self._top is not None
            self._top.start_soon(finish)

        try:
            self._inject(start, until=lambda: False)  # returns once the run is over
            assert self._host.result is not None
            self._host.result.unwrap()
            assert not self.bugs, "\n\n".join(self.bugs)
            self._check_end()
            assert self._handlers_running == 0, f"{self._handlers_running} handlers left"
        except BaseException:
            self._failed = True
            raise

    def _shutdown(self) -> None:
        """End the guest run whatever happened: an open guest run makes every later
        ``trio.run`` in the process fail."""
        if self._host.result is not None:
            self._release()
            return
        try:
            top = self._top
            if top is not None and self._token is not None:
                self._inject(top.cancel_scope.cancel, until=lambda: False)
            self._host.pump(lambda: False)
        except BaseException:
            pass
        finally:
            if self._host.result is None and self._guest is not None:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)
                    self._guest.unrolled_run_gen.close()
                self._host.result = outcome.Error(AssertionError("guest run abandoned"))
            self._release()

    def _release(self) -> None:
        """Drop the world, so that nothing of this example outlives it (Hypothesis
        may keep the machine object; the world holds buffers and tasks)."""
        self._host.queue.clear()
        self._guest = self._top = self._client_nursery = self._token = None
        self.pair = None
        self._release_items()

    def _release_items(self) -> None:
        raise NotImplementedError


class HandlerMachine(_WorldMachine):
    """Drives :meth:`handler` with concurrent requests; subclass it (see module doc).

    Override :meth:`handler` (the server's handler, as given to ``serve_connection``),
    and, to check bodies, :meth:`expected_response`. Add checks as ordinary Hypothesis
    ``@invariant()`` methods (they run after every step, on a quiescent world) or
    rules of your own; run it with ``HandlerMachine.TestCase`` or
    :func:`~hypothesis.stateful.run_state_machine_as_test` (or
    :func:`~trio_h2t.testing.run_machine` for a time budget).
    """

    #: At most this many requests per example.
    max_exchanges = 6
    #: The largest piece of request body one ``send`` rule sends.
    max_send = 70_000

    def __init__(self) -> None:
        super().__init__()
        self.exchanges: list[Exchange] = []

    # ------------------------------------------------------------------ to override

    async def handler(self, stream: H2Stream) -> None:
        """The handler under test. The default answers 200 and echoes the body."""
        await stream.send_headers([(b":status", b"200")])
        async for chunk in stream:
            await stream.send_data(chunk)
        await stream.end()

    def expected_response(self, exchange: Exchange) -> bytes | None:
        """The body ``exchange`` must receive, given what it sent (``exchange.sent``,
        ``exchange.headers``, ``exchange.trailers_sent``), or None not to check.
        Called only for undisturbed exchanges whose response completed."""
        return None

    # ------------------------------------------------------------------ the world

    async def _serve(self, stream: H2Stream) -> None:
        await self.handler(stream)

    def _items(self) -> list[Any]:
        return list(self.exchanges)

    def _disturb(self) -> None:
        for ex in self.exchanges:
            ex.disturbed = True

    def _check_step(self) -> None:
        self.check_exchanges()

    async def _exchange(self, ex: Exchange) -> None:
        assert self.pair is not None
        conn: ClientConnection = self.pair.client
        result: tuple[str, BaseException | None] = ("cancelled", None)
        try:
            with ex.scope:
                async with conn.open_stream(ex.headers) as stream:
                    ex.stream = stream
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(self._sender, ex, stream)
                        nursery.start_soon(self._receiver, ex, stream)
                result = ("response", None)
        except Exception as exc:
            # The sender's and the receiver's errors come out of their nursery as
            # a group: a reset is a reset, however many tasks saw it.
            leaves = _leaves(exc)
            if all(isinstance(leaf, StreamResetError) for leaf in leaves):
                result = ("reset", leaves[0])
            else:
                result = ("error", leaves[0] if len(leaves) == 1 else exc)
        finally:
            if ex.outcome is not None:
                self.bugs.append(f"{ex!r} got a second outcome: {result}")
            ex.outcome, ex.error = result
            ex.done.set()

    async def _sender(self, ex: Exchange, stream: H2Stream) -> None:
        async for cmd in ex._send_inbox:
            op = cmd[0]
            if not ex.ended:
                if op == "send":
                    await stream.send_data(cmd[1], end_stream=cmd[2])
                    ex.sent += cmd[1]
                    ex.ended = cmd[2]
                elif op == "end" and cmd[1] is not None:
                    await stream.send_trailers(cmd[1])
                    ex.trailers_sent = cmd[1]
                    ex.ended = True
                elif op in ("end", "finish"):
                    await stream.end()
                    ex.ended = True
            if op == "finish":
                return

    async def _receiver(self, ex: Exchange, stream: H2Stream) -> None:
        async for cmd in ex._recv_inbox:
            op = cmd[0]
            if not ex.complete:
                if ex.status is None:
                    headers = await stream.receive_headers()
                    ex.status = dict(headers).get(b":status")
                if op == "finish":
                    while chunk := await stream.receive_some():
                        ex.received += chunk
                    ex.complete = True
                else:
                    chunk = await stream.receive_some(cmd[1])
                    ex.received += chunk
                    ex.complete = not chunk
            if op == "finish":
                return

    # ------------------------------------------------------------------ rules

    @precondition(lambda self: len(self.exchanges) < self.max_exchanges and self._alive())
    @rule(headers=request_headers(methods=("POST", "PUT"), max_header_list_size=2048))
    def open_request(self, headers: list[tuple[bytes, bytes]]) -> None:
        """Open a request (its headers drawn); its body and reads come from other rules."""
        ex = Exchange(len(self.exchanges), headers)
        self.exchanges.append(ex)

        def start() -> None:
            assert self._client_nursery is not None
            self._client_nursery.start_soon(self._exchange, ex)

        self._act(start)

    def _live(self, i: int) -> Exchange | None:
        live = [ex for ex in self.exchanges if ex.outcome is None]
        return live[i % len(live)] if live else None

    def _send(self, i: int, cmd: tuple[Any, ...]) -> None:
        ex = self._live(i)
        if ex is None:
            return self._act()
        channel = ex.recv_commands if cmd[0] == "read" else ex.send_commands
        self._act(functools.partial(channel.send_nowait, cmd))

    @precondition(lambda self: self.exchanges)
    @rule(i=_picks, data=bodies(max_size=70_000), end=st.integers(0, 4).map(lambda x: x == 0))
    def send(self, i: int, data: bytes, end: bool) -> None:
        """Send a piece of a request body (ending the request with ``end``)."""
        self._send(i, ("send", data, end))

    @precondition(lambda self: self.exchanges)
    @rule(i=_picks, trailer_block=st.none() | trailers())
    def end_request(self, i: int, trailer_block: list[tuple[bytes, bytes]] | None) -> None:
        """End a request, with trailers or without."""
        self._send(i, ("end", trailer_block))

    @precondition(lambda self: self.exchanges)
    @rule(i=_picks, n=st.one_of(st.integers(1, 100), st.integers(1, 70_000)))
    def read(self, i: int, n: int) -> None:
        """Read at most ``n`` bytes of a response (a partial read)."""
        self._send(i, ("read", n))

    @precondition(lambda self: self.exchanges)
    @rule(i=_picks)
    def finish(self, i: int) -> None:
        """End a request if needed and read its whole response."""
        ex = self._live(i)
        if ex is None:
            return self._act()
        self._act(functools.partial(self._finish, ex))

    @staticmethod
    def _finish(ex: Exchange) -> None:
        ex.send_commands.send_nowait(("finish",))
        ex.recv_commands.send_nowait(("finish",))

    @precondition(lambda self: self.exchanges)
    @rule(i=_picks, how=st.sampled_from(["reset", "cancel"]), go=_rarely)
    def disrupt(self, i: int, how: str, go: bool) -> None:
        """Reset a request's stream (RST_STREAM CANCEL), or cancel its client task."""
        ex = self._live(i)
        if not go or ex is None or ex.stream is None:
            return self._act()
        ex.disturbed = True
        stream = ex.stream
        self._act(stream.reset if how == "reset" else ex.scope.cancel)

    # ------------------------------------------------------------------ checks

    def check_exchanges(self) -> None:
        """The checks run after every step (see the module doc); extend with super()."""
        self._check_world()
        for ex in self.exchanges:
            self._check_exchange(ex)

    @staticmethod
    def _check_exchange(ex: Exchange) -> None:
        if ex.outcome in ("error", "reset") and not ex.disturbed:
            raise AssertionError(f"{ex!r}: failed without a reason") from ex.error
        if ex.complete:
            assert ex.outcome != "error", f"{ex!r}"

    # ------------------------------------------------------------------ the end

    def _finish_all(self) -> list[trio.Event]:
        for ex in self.exchanges:
            self._finish(ex)
        return [ex.done for ex in self.exchanges]

    def _check_end(self) -> None:
        missing = [ex for ex in self.exchanges if ex.outcome is None]
        assert not missing, f"exchanges without an outcome: {missing}"
        for ex in self.exchanges:
            self._check_exchange(ex)
        self._check_bodies()

    def _check_bodies(self) -> None:
        for ex in self.exchanges:
            if ex.disturbed or ex.outcome != "response":
                continue
            assert ex.complete, f"{ex!r}: no whole response"
            expected = self.expected_response(ex)
            if expected is not None:
                assert bytes(ex.received) == expected, (
                    f"{ex!r}: received {bytes(ex.received[:64])!r}... "
                    f"({len(ex.received)} bytes), expected {expected[:64]!r}... "
                    f"({len(expected)} bytes)"
                )

    def _release_items(self) -> None:
        for ex in self.exchanges:
            ex.stream = None
            ex.error = None
