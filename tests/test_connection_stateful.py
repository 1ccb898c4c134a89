"""Whole-connection stateful test: a client and a server over an in-memory link.

Theory of operation
-------------------
One Hypothesis example is one Trio run, started with ``trio.lowlevel.start_guest_run``
on a tiny *host loop* owned by the state machine: a deque of callbacks that the
machine pumps synchronously (``_Host.pump``). Between two rules the host is not
pumped, so the Trio world stands still. Each rule injects its action into the world
with ``TrioToken.run_sync_soon`` and pumps until the world is *quiescent*: a
sentinel task, always parked in ``trio.testing.wait_all_tasks_blocked()``, reports
that every other task is blocked (``_inject`` ignores a stale report from before the
action). The clock is ``MockClock(autojump_threshold=0)``; a task waiting for
idleness suppresses the autojump, so virtual time passes only in the
``advance_time`` rule and in the final drain, where the sentinel steps aside. A rule
that does nothing does not touch the world at all, so shrinking can delete it.
Hypothesis also draws ``st.random_module()``, which seeds Trio's scheduler (Trio
registers its ``Random`` with Hypothesis), so the order in which runnable tasks run
is part of each example, and an example replays exactly (the BDP estimator is
given ``trio.current_time()``, the mock clock's, for the same reason).

Why a command-driven world rather than scripted handlers: each side of each stream
has a *sender* and a *receiver* task executing commands from the rules (send n bytes,
end or send trailers, read, read exactly, read to the end), recording exactly what
was sent, received and raised. Either side can then be made to stop reading, send
while the other does not read, or stop half-way, which is what exercises the windows
and the write quota; the checks compare what one side recorded with the other's.

The world:

- the transport is the kit's ``trio_h2t.testing.chunked_stream_pair``: every
  ``send_all`` is split and every ``receive_some`` limited by cycling through
  Hypothesis-drawn sizes, and with a drawn capacity a writer waits while that many
  bytes are unread (as a socket with full buffers does);
- the server is ``serve_connection``, whose handler finds its stream's model by the
  ``x-idx`` request header; the client is ``open_client_connection``; each side has
  its own ``TransportConfig``, drawn by the kit's ``transport_configs`` (stream and
  connection windows 65 535..1 MiB, write quota, stream limit, throttle limit,
  read/write buffer sizes, batching, grace period, BDP on or off);
- rules open streams, send, end (with or without trailers), read, exchange bulk data
  both ways, reset a stream, cancel a client stream's scope or leave its
  ``open_stream`` block, make a handler return or raise, let virtual time pass, and
  close a connection gracefully (client ``aclose``, server ``graceful_close``) or
  abruptly (close one side's transport, cancel one side), or make one side commit a
  connection error (``peer_connection_error``: a 6-byte PING, a connection
  WINDOW_UPDATE overflowing the window, DATA on stream 0, written between two of
  its writes, at any step).

Checked at every quiescent point (``_check``):

- bytes: what each side received is a prefix of what the other side sent (no loss,
  duplication or reordering); a side that saw the end of the stream got all of it,
  and the trailers that were sent;
- errors: every error is ``StreamResetError``, ``ConnectionClosingError``,
  ``ConnectionLostError`` or ``trio.ClosedResourceError``, and only where an action
  explains it (a reset, cancellation, early return, close, or a send after the end);
  stream errors are sticky; a handler sees ``Cancelled``, never a peer's reset or
  the connection's end (docs/cancellation.md); after its own reset a side gets
  ``trio.ClosedResourceError`` (docs/errors.md);
- memory: for every open stream, unread bytes never exceed the stream's window
  (``_in_flow.pending_data <= limit + delta``) and equal what is buffered; the
  unread bytes of a connection never exceed ``streams * max window``; write quota is
  never over-returned and never overrun by more than one send;
- credit conservation: while both connections are healthy, each sender's h2 window
  equals what the receiver believes it granted (``limit + delta - pending_data -
  pending_update`` per stream, ``limit - unacked`` per connection);
- liveness: on a healthy link nothing is left unread in the transport (else both
  readers are stuck: a deadlock), in a control buffer or in h2's buffer; loopy holds
  no data its windows would let it write; no task waits on a closed stream or on a
  connection that has ended; no client waits for stream quota that is free;
- endings (``_check_ended``): once a connection is over (its loopy has exited),
  every stream task of that side has its outcome (none blocked, no opener waiting),
  every stream is closed and all its write quota is back, orphaned items included.

At the end (``teardown``) every stream is put on autopilot (finish sending, read to
the end); each stream that no action disturbed must then be complete on both sides
(but after the client's graceful close, a handler still running when the client
hangs up, its own streams complete, is cancelled by the connection's end, as
docs/cancellation.md says, even if it had not yet read the end of its request, or
the server had not even received it: ``_cut_by_client_hangup``).
The client leaves its ``open_client_connection`` block and the whole world must
finish under ``trio.fail_after`` on the mock clock, without spending any virtual time
if nothing was left open: no task hangs or leaks, every stream is closed and
deregistered, all write quota is returned.

Bugs the machine found are listed in ``KNOWN_BUGS``: it tolerates exactly where each
shows, so that it can go on looking for others, and each has a deterministic
strict-xfail test at the end of this file. A fix turns its test into an XPASS (a
failure under ``strict``); then remove the name from ``KNOWN_BUGS`` and the marker.

Cost: five times the profile's ``max_examples`` and twice its ``stateful_step_count``
(500 examples of up to 100 steps in ``ci``: about 35 s on two cores; a failure adds
Hypothesis's shrinking, up to a few minutes); see ``_settings``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import math
import os
import random
import traceback
import warnings
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import outcome
import pytest
import trio
import trio.testing
from h2.errors import ErrorCodes
from hypothesis import Phase, settings, strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    precondition,
    rule,
    run_state_machine_as_test,
)

from trio_h2t import (
    ClientConnection,
    ConnectionClosingError,
    ConnectionLostError,
    H2Stream,
    ServerConnection,
    StreamRefusedError,
    StreamResetError,
    TransportConfig,
    open_client_connection,
    serve_connection,
)
from trio_h2t._connection import ConnectionCore
from trio_h2t._controlbuf import DEFAULT_THROTTLE_LIMIT
from trio_h2t._items import Data
from trio_h2t._outstream import OUT_ACTIVE, OUT_CONN_WAITING, OUT_EMPTY, OUT_WAITING
from trio_h2t._server import INTERNAL_ERROR_BODY
from trio_h2t.testing import (
    ChunkedStream,
    Chunking,
    chunked_stream_pair,
    open_memory_pair,
    run_machine,
    transport_configs,
)

#: At most this many streams per example (each has four tasks).
MAX_STREAMS = 6
#: Largest single send_data in an example.
MAX_SEND = 140_000
#: Host-loop callbacks one pump may run before we call it a livelock.
MAX_TICKS = 2_000_000
#: Virtual seconds the final drain may take (grace periods are at most 30 s).
FINAL_TIMEOUT = 600.0
#: Errors a stream operation may raise (docs: _exceptions.py).
ALLOWED_ERRORS = (
    StreamResetError,
    ConnectionClosingError,
    ConnectionLostError,
    trio.ClosedResourceError,
)
CLIENT, SERVER = "client", "server"
#: Frames a misbehaving peer writes between two of its own writes, each a connection
#: error for the side that reads it (RFC 9113 §6.7, §6.9.1, §6.1).
CONNECTION_ERRORS = {
    # PING of 6 bytes: FRAME_SIZE_ERROR.
    "ping-size": b"\x00\x00\x06\x06\x00\x00\x00\x00\x00" + b"123456",
    # Connection WINDOW_UPDATE of 2**31 - 1 over a positive window: FLOW_CONTROL_ERROR.
    "window-overflow": b"\x00\x00\x04\x08\x00\x00\x00\x00\x00\x7f\xff\xff\xff",
    # DATA on stream 0: PROTOCOL_ERROR.
    "data-on-0": b"\x00\x00\x01\x00\x00\x00\x00\x00\x00x",
}
#: Bugs that are tolerated where they show, so that the machine can look for others
#: (each one has its own deterministic test below).
KNOWN_BUGS: frozenset[str] = frozenset()

_BLOCK = random.Random(0x5EED).randbytes(2 << 20)


def _payload(idx: int, salt: int, offset: int, n: int) -> bytes:
    """``n`` pseudo-random bytes that depend on the stream, side and offset."""
    start = (offset * 131 + idx * 7919 + salt * 104_729) % (1 << 20)
    return _BLOCK[start : start + n]


class _Boom(Exception):
    """Raised by a handler on purpose (the ``server_raise`` rule)."""


class _ExpectedHandlerLogs(logging.Filter):
    """Drops the records of the handler failures a machine causes on purpose.

    trio_h2t logs a handler that raised at ERROR with its traceback, and one that
    returned without a full response at WARNING: right for an application's handler,
    but here the rules cause them in many examples, and pytest's log capture keeps
    every record of a test until it ends, each traceback holding its example's whole
    world (the machine, its streams and their buffers) alive. Every other record
    passes. ``booms`` counts the records of a ``_Boom``: the machine checks that each
    one it raised was logged exactly once.
    """

    def __init__(self, machine: ConnectionMachine) -> None:
        super().__init__()
        self.machine = machine
        self.booms = 0

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, _Boom):
            self.booms += 1
            return False
        if (
            record.levelno == logging.WARNING
            and isinstance(record.msg, str)
            and record.msg.startswith("handler for stream %d returned without")
            and isinstance(record.args, tuple)
            and record.args
        ):
            # The ``disrupt`` rule's "cancel" makes a handler return at once.
            returned = {
                model.s.stream.stream_id
                for model in self.machine.streams
                if model.s.disturbed and not model.s.raise_requested and model.s.stream
            }
            return record.args[0] not in returned
        return True


# ---------------------------------------------------------------------- the model


Command = tuple[Any, ...]


@dataclass(eq=False)
class Side:
    """One side (client or server) of one stream, as its tasks saw it."""

    who: str
    idx: int
    salt: int
    stream: H2Stream | None = None
    started: bool = False  # the stream object exists (client: open_stream entered)
    done: bool = False  # the side's task(s) ended
    sent: bytearray = field(default_factory=bytearray)  # send_data returned normally
    end_sent: bool = False  # END_STREAM queued (data, trailers, end() or headers)
    headers_sent: bool = False  # server: response headers queued
    trailers_sent: list[tuple[bytes, bytes]] | None = None
    received: bytearray = field(default_factory=bytearray)
    recv_end: bool = False  # receive_some returned b"" (the peer's END_STREAM)
    headers_received: bool = False
    lost: bool = False  # a failed receive_exactly dropped bytes: prefix checks are off
    errors: list[tuple[str, BaseException]] = field(default_factory=list)
    sticky: BaseException | None = None  # first stream error seen by a send
    busy: dict[str, str] = field(default_factory=dict)  # task role -> op in progress
    disturbed: bool = False  # reset / cancel / exit / return / raise on this side
    raise_requested: bool = False
    max_window: int = 0  # largest limit + delta seen
    recv_failed: bool = False  # a receive raised
    self_reset: bool = False  # this side's reset() was the stream's first error
    refused: bool = False  # client: a retryable error during the server's drain
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    done_event: trio.Event = field(default_factory=trio.Event)
    inner: trio.Nursery | None = None
    send_tx: trio.MemorySendChannel[Command] = field(init=False)
    send_rx: trio.MemoryReceiveChannel[Command] = field(init=False)
    recv_tx: trio.MemorySendChannel[Command] = field(init=False)
    recv_rx: trio.MemoryReceiveChannel[Command] = field(init=False)

    def __post_init__(self) -> None:
        self.send_tx, self.send_rx = trio.open_memory_channel[Command](math.inf)
        self.recv_tx, self.recv_rx = trio.open_memory_channel[Command](math.inf)

    def finished(self) -> None:
        self.done = True
        self.done_event.set()

    @property
    def complete(self) -> bool:
        return self.end_sent and self.recv_end

    def __repr__(self) -> str:
        return (
            f"<{self.who} #{self.idx} sent={len(self.sent)}{'+END' if self.end_sent else ''} "
            f"recv={len(self.received)}{'+END' if self.recv_end else ''} "
            f"errors={[(op, repr(e)) for op, e in self.errors]} busy={self.busy} "
            f"disturbed={self.disturbed} done={self.done} stream={self.stream!r}>"
        )


@dataclass(eq=False)
class StreamModel:
    idx: int
    c: Side
    s: Side
    headers_only: bool
    abort: int | None = None  # the client resets the stream as soon as it is open

    def sides(self) -> tuple[tuple[Side, Side], tuple[Side, Side]]:
        """(receiver, sender) pairs for both directions."""
        return ((self.c, self.s), (self.s, self.c))


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


# ---------------------------------------------------------------------- strategies

chunk_sizes = st.lists(
    st.one_of(st.integers(1, 64), st.integers(1024, 70_000)), min_size=1, max_size=5
).map(lambda sizes: [*sizes, 65_536] if max(sizes) < 1024 else sizes)
send_sizes = st.one_of(
    st.integers(0, 100), st.integers(1000, 20_000), st.integers(40_000, MAX_SEND)
)
sides = st.sampled_from([CLIENT, SERVER])
picks = st.integers(0, 1000)
#: Connection-ending rules act only this often, so that most examples get far.
rarely = st.sampled_from([False] * 7 + [True])
#: Stream-ending rules act this often, so that streams carry data for a while.
sometimes = st.sampled_from([False, False, True])
reset_codes = st.sampled_from(  # plain ints, so a failing example prints as valid code
    [
        int(ErrorCodes.CANCEL),
        int(ErrorCodes.INTERNAL_ERROR),
        int(ErrorCodes.NO_ERROR),
        int(ErrorCodes.ENHANCE_YOUR_CALM),
    ]
)


# ---------------------------------------------------------------------- the machine


class ConnectionMachine(RuleBasedStateMachine):
    """Client and server trio_h2t connections driven stream by stream (see module doc)."""

    ccfg: TransportConfig
    scfg: TransportConfig
    client_transport: ChunkedStream
    server_transport: ChunkedStream

    def __init__(self) -> None:
        super().__init__()
        self.host = _Host()
        self.streams: list[StreamModel] = []
        self.bugs: list[str] = []
        self.failed = False
        self.started = False
        self.idle = False
        self.delivered = False
        self.time_gate: trio.Event | None = None  # set: the sentinel lets time pass
        self.sentinel_scope = trio.CancelScope()
        # Connection-level disturbances (explain errors; relax completeness).
        self.conn_disturbed = False  # any close, graceful or not
        self.hard_disturbed = False  # abrupt close, or a grace period that may have run out
        self.graceful_started = False
        self.client_closed = False  # the client's graceful close (aclose) started
        # The server's drain (the ``drain`` rule: no grace limit) started: it
        # explains a retryable error on a stream no handler saw, nothing else.
        self.drain_started = False
        # Filled in by the world.
        self.token: trio.lowlevel.TrioToken | None = None
        self.guest: Any = None  # Trio's GuestState of this example's run
        self.top: trio.Nursery | None = None
        self.conn: ClientConnection | None = None
        self.cn: trio.Nursery | None = None  # the client's stream-task nursery
        self.cn_open = False
        self.score: ConnectionCore | None = None
        self.client_scope = trio.CancelScope()
        self.server_scope = trio.CancelScope()
        self.client_exiting = False
        self.client_done = False
        self.server_done = False
        self.client_done_event = trio.Event()
        self.server_done_event = trio.Event()
        self.ready = False
        self.booms_raised = 0  # _Boom raised by handlers (the "raise" disruption)
        self.log_filter = _ExpectedHandlerLogs(self)

    # ------------------------------------------------------------------ plumbing

    @property
    def ccore(self) -> ConnectionCore:
        assert self.conn is not None
        return self.conn._core

    def _bug(self, message: str, exc: BaseException | None = None) -> None:
        if exc is not None:
            message += "\n" + "".join(traceback.format_exception(exc))
        self.bugs.append(message)

    def _inject(self, fn: Callable[[], object], *, until: Callable[[], bool] | None = None) -> None:
        """Run ``fn`` inside the Trio world, then pump until the world is quiescent.

        ``fn`` runs from Trio's entry-queue task (``TrioToken.run_sync_soon``). The
        first guest tick after a pause still carries the "no I/O events" result it
        computed before the pause, so an idle wake-up may be stale: only an idle
        reported *after* ``fn`` ran counts (``delivered``).
        """
        self.idle = False
        self.delivered = False

        def wrapped() -> None:
            self.idle = False
            self.delivered = True
            try:
                fn()
            except BaseException as exc:  # a harness bug: keep the world alive to report it
                self._bug("harness callback raised", exc)

        assert self.token is not None
        self.token.run_sync_soon(wrapped)
        done = until or (lambda: True)

        def settled() -> bool:
            if not (self.delivered and self.idle):
                return False
            assert done(), f"the world is stuck (all tasks blocked):\n{self._describe()}"
            return True

        self.host.pump(settled)

    async def _sentinel(self) -> None:
        """Always waiting for idleness, so the mock clock never autojumps by itself.

        With a task in ``wait_all_tasks_blocked`` Trio wakes that task instead of
        jumping the clock; time passes only while ``time_gate`` is set (the
        ``advance_time`` rule and the final drain), when the sentinel steps aside.
        """
        with self.sentinel_scope:
            while True:
                await trio.testing.wait_all_tasks_blocked()
                gate = self.time_gate
                if gate is not None:
                    await gate.wait()
                    continue
                self.idle = True

    def _act(self, fn: Callable[[], object] | None = None) -> None:
        """One step: inject ``fn``, settle, check. Marks the machine failed on error."""
        try:
            if fn is not None and self.host.result is None:
                self._inject(fn)
            # Without an action the world is still quiescent: a no-op step leaves it
            # (and Trio's scheduler seed) untouched, so shrinking can delete it freely.
            self._check()
        except BaseException:
            self.failed = True
            raise

    # ------------------------------------------------------------------ the world

    async def _main(self) -> None:
        self.token = trio.lowlevel.current_trio_token()
        with trio.fail_after(10 * FINAL_TIMEOUT):
            async with trio.open_nursery() as top:
                self.top = top
                top.start_soon(self._sentinel)
                # Concurrently: on a tight link the server's preface waits for the
                # client to read it.
                top.start_soon(self._run_server)
                top.start_soon(self._run_client)

    async def _run_server(self) -> None:
        try:
            with self.server_scope:
                async with trio.open_nursery() as nursery:
                    server: ServerConnection = await nursery.start(
                        functools.partial(
                            serve_connection,
                            self.server_transport,
                            self._handler,
                            config=self.scfg,
                        )
                    )
                    self.score = server._core  # the runtime object, to check invariants
        except Exception as exc:
            self._bug("serve_connection raised", exc)
        finally:
            self.server_done = True
            self.server_done_event.set()

    async def _run_client(self) -> None:
        try:
            with self.client_scope:
                async with open_client_connection(self.client_transport, config=self.ccfg) as conn:
                    self.conn = conn
                    async with trio.open_nursery() as cn:
                        self.cn = cn
                        self.cn_open = True
                        self.ready = True
                        await trio.sleep_forever()
        except Exception as exc:
            self._bug("open_client_connection raised", exc)
        finally:
            self.cn_open = False
            self.client_done = True
            self.client_done_event.set()

    async def _client_owner(self, model: StreamModel) -> None:
        side = model.c
        headers = [
            (b":method", b"POST"),
            (b":scheme", b"http"),
            (b":authority", b"localhost"),
            (b":path", b"/stateful"),
            (b"x-idx", str(model.idx).encode()),
        ]
        try:
            with side.scope:
                side.busy["owner"] = "open"
                try:
                    assert self.conn is not None
                    async with self.conn.open_stream(
                        headers, end_stream=model.headers_only
                    ) as stream:
                        del side.busy["owner"]
                        side.stream = stream
                        side.started = True
                        side.end_sent = model.headers_only
                        if model.abort is not None:
                            self._local_reset(side, model.abort)
                        await self._run_side(side)
                except ALLOWED_ERRORS as exc:
                    side.errors.append(("open", exc))
                    self._classify(side, "open", exc)
                except Exception as exc:
                    self._bug(f"client stream {model.idx}: open_stream raised", exc)
        finally:
            side.busy.pop("owner", None)
            side.finished()

    async def _handler(self, stream: H2Stream) -> None:
        headers = dict(stream.headers or ())
        model = self.streams[int(headers[b"x-idx"])]
        side = model.s
        side.stream = stream
        side.started = True
        try:
            with side.scope:
                await self._run_side(side)
        finally:
            scope = stream.server_handler_scope
            if (
                not stream.core_headers_sent
                and not stream.core_closed
                and stream.core_error is None
                and scope is not None
                and not scope.cancel_called
            ):
                # trio_h2t answers a handler that ends without headers with a 500
                # (docs/errors.md): the model counts that response as this side's.
                side.sent[:] = INTERNAL_ERROR_BODY
                side.headers_sent = side.end_sent = True
            side.finished()
        if side.raise_requested:
            self.booms_raised += 1
            raise _Boom(f"handler {model.idx} raises on purpose")

    async def _run_side(self, side: Side) -> None:
        async with trio.open_nursery() as nursery:
            side.inner = nursery
            nursery.start_soon(self._sender, side)
            nursery.start_soon(self._receiver, side)

    # -- the per-side tasks ---------------------------------------------------------

    async def _sender(self, side: Side) -> None:
        async for cmd in side.send_rx:
            side.busy["send"] = cmd[0]
            try:
                await self._do_send(side, cmd)
            finally:
                del side.busy["send"]
            if cmd[0] == "finish":
                return

    async def _receiver(self, side: Side) -> None:
        async for cmd in side.recv_rx:
            side.busy["recv"] = cmd[0]
            try:
                await self._do_receive(side, cmd)
            finally:
                del side.busy["recv"]
            if cmd[0] == "finish":
                return

    async def _do_send(self, side: Side, cmd: tuple[Any, ...]) -> None:
        stream = side.stream
        assert stream is not None
        op = cmd[0]
        if op == "finish" and (side.end_sent or side.sticky is not None):
            return
        after_end = side.end_sent
        try:
            if side.who == SERVER and not side.headers_sent:
                end_now = op in ("end", "finish")
                await stream.send_headers([(b":status", b"200")], end_stream=end_now)
                side.headers_sent = True
                if end_now:
                    side.end_sent = True
                    return
            if op == "send":
                n, end = cmd[1], cmd[2]
                data = _payload(side.idx, side.salt, len(side.sent), n)
                await stream.send_data(data, end_stream=end)
                side.sent += data
                if end:
                    side.end_sent = True
            elif op == "end" and cmd[1]:
                trailers = [(b"x-trailer", f"{side.who}-{side.idx}".encode())]
                await stream.send_trailers(trailers)
                side.trailers_sent = trailers
                side.end_sent = True
            else:  # "end" without trailers, or "finish"
                await stream.end()
                side.end_sent = True
        except ALLOWED_ERRORS as exc:
            if after_end and type(exc) is trio.ClosedResourceError:
                return  # sending after our own END_STREAM: the documented error
            side.errors.append((op, exc))
            self._classify(side, op, exc)
            self._check_self_reset_error(side, op, exc)
            if side.sticky is None:
                side.sticky = exc
            return
        except Exception as exc:
            self._bug(f"{side.who} stream {side.idx}: {op} raised", exc)
            return
        if after_end:
            self._bug(f"{side.who} stream {side.idx}: {op} after END_STREAM did not raise")
        elif side.sticky is not None and op != "finish":
            self._bug(
                f"{side.who} stream {side.idx}: {op} succeeded after {side.sticky!r} "
                "(stream errors must be sticky)"
            )

    async def _do_receive(self, side: Side, cmd: tuple[Any, ...]) -> None:
        stream = side.stream
        assert stream is not None
        op = cmd[0]
        if op == "finish" and (side.recv_end or side.recv_failed):
            return
        failed_before, error_before = side.recv_failed, stream.core_error
        peer_done_before = stream.core_peer_ended
        before = len(side.received)
        try:
            if side.who == CLIENT and not side.headers_received:
                await stream.receive_headers()
                side.headers_received = True
            if op == "read":
                chunk = await stream.receive_some(cmd[1])
                self._got(side, chunk, cmd[1])
            elif op == "exactly":
                try:
                    data = await stream.receive_exactly(cmd[1])
                except BaseException:
                    side.lost = True  # documented: gathered bytes are dropped
                    raise
                side.received += data
                if len(data) < cmd[1]:
                    side.recv_end = True
            else:  # "drain" or "finish"
                while not side.recv_end:
                    self._got(side, await stream.receive_some(), None)
        except ALLOWED_ERRORS as exc:
            side.recv_failed = True
            side.errors.append(("recv-" + op, exc))
            self._classify(side, "recv-" + op, exc)
            self._check_self_reset_error(side, "recv-" + op, exc)
        except Exception as exc:
            self._bug(f"{side.who} stream {side.idx}: recv-{op} raised", exc)
        if len(side.received) > before:
            if failed_before:
                self._bug(f"{side.who} stream {side.idx}: recv-{op} returned data after failing")
            # errors.md: what a peer sent up to its END_STREAM stays readable after
            # an error (e.g. a RST_STREAM(NO_ERROR), or a connection lost later);
            # an incomplete body is not handed out once the stream failed.
            readable = peer_done_before or (
                isinstance(error_before, StreamResetError)
                and error_before.remote
                and error_before.error_code == ErrorCodes.NO_ERROR
            )
            if error_before is not None and not readable:
                self._bug(
                    f"{side.who} stream {side.idx}: recv-{op} returned data after "
                    f"{error_before!r} (errors.md: no incomplete body after an error)"
                )

    def _got(self, side: Side, chunk: bytes, limit: int | None) -> None:
        if limit is not None and len(chunk) > limit:
            self._bug(f"{side.who} stream {side.idx}: receive_some({limit}) gave {len(chunk)}")
        if chunk:
            side.received += chunk
        else:
            side.recv_end = True

    def _check_self_reset_error(self, side: Side, op: str, exc: BaseException) -> None:
        """errors.md: using a stream after *you* reset it raises trio.ClosedResourceError."""
        if side.self_reset and not isinstance(exc, trio.ClosedResourceError):
            self._bug(
                f"{side.who} stream {side.idx}: {op} after this side's reset raised {exc!r}, "
                "not trio.ClosedResourceError"
            )

    def _classify(self, side: Side, op: str, exc: BaseException) -> None:
        """Record a bug if nothing in the example explains ``exc``."""
        model = self.streams[side.idx]
        peer_made = isinstance(exc, ConnectionLostError | ConnectionClosingError) or (
            isinstance(exc, StreamResetError) and exc.remote
        )
        if side.who == SERVER and peer_made:
            # cancellation.md: a handler's scope is cancelled when the peer resets its
            # stream or the connection ends, so it sees Cancelled, never these.
            self._bug(f"server stream {side.idx}: the handler saw {op} raise {exc!r}", exc)
        if self.conn_disturbed or model.c.disturbed or model.s.disturbed:
            return
        if (
            self.drain_started
            and side.who == CLIENT
            and getattr(exc, "retryable", False)
            and not model.s.started
        ):
            # The drain refused it (its GOAWAYs, or a stream above the second one's
            # last stream id): retryable, and no handler saw it (_check_drain holds
            # the server to that from now on).
            side.refused = True
            return
        if isinstance(exc, StreamRefusedError):
            self._bug(f"{side.who} stream {side.idx}: {op} refused on a healthy connection", exc)
        else:
            self._bug(f"{side.who} stream {side.idx}: unexplained {op} error", exc)

    # ------------------------------------------------------------------ rules

    @initialize(
        ccfg=transport_configs(),
        scfg=transport_configs(),
        c2s_send=chunk_sizes,
        c2s_recv=chunk_sizes,
        s2c_send=chunk_sizes,
        s2c_recv=chunk_sizes,
        capacity=st.sampled_from([None, None, 1000, 16_384, 65_536, 300_000]),
        rnd=st.random_module(),
    )
    def start_world(
        self,
        ccfg: TransportConfig,
        scfg: TransportConfig,
        c2s_send: list[int],
        c2s_recv: list[int],
        s2c_send: list[int],
        s2c_recv: list[int],
        capacity: int | None,
        rnd: Any,
    ) -> None:
        del rnd  # drawing it seeded Trio's scheduler for this example
        if capacity is not None:
            # Small throttle limits on both ends can stop both readers on a link with
            # finite buffers when response frames (PING and SETTINGS acks, h2's
            # RST_STREAM answers) queue up on both sides at once; docs/controlbuf.md
            # documents the limitation. Keep the default limit on such links.
            ccfg = dataclasses.replace(ccfg, throttle_limit=DEFAULT_THROTTLE_LIMIT)
            scfg = dataclasses.replace(scfg, throttle_limit=DEFAULT_THROTTLE_LIMIT)
        self.ccfg, self.scfg = ccfg, scfg
        # The kit's link (trio_h2t.testing.chunked_stream_pair), not its pair: the
        # rules cancel each side's scope on its own and run server and client side
        # by side, which open_memory_pair's one nursery does not allow.
        self.client_transport, self.server_transport = chunked_stream_pair(
            client=Chunking(send_sizes=c2s_send, receive_sizes=s2c_recv),
            server=Chunking(send_sizes=s2c_send, receive_sizes=c2s_recv),
            capacity=capacity,
        )
        logging.getLogger("trio_h2t").addFilter(self.log_filter)  # teardown removes it
        trio.lowlevel.start_guest_run(
            self._main,
            run_sync_soon_threadsafe=self.host.run_sync_soon,
            done_callback=self.host.done,
            clock=trio.testing.MockClock(autojump_threshold=0),
        )
        self.started = True
        # start_guest_run queues its first tick, a GuestState's bound method: kept
        # so that _shutdown can end a run that does not finish.
        self.guest = getattr(self.host.queue[0], "__self__", None)
        try:
            self.host.pump(lambda: self.token is not None)
            self._inject(lambda: None, until=lambda: self.ready and self.score is not None)
            self._check()
        except BaseException:
            self.failed = True
            raise

    def _client_alive(self) -> bool:
        return self.cn_open and not self.client_exiting

    @precondition(lambda self: len(self.streams) < MAX_STREAMS and self._client_alive())
    @rule(
        headers_only=st.integers(0, 4).map(lambda x: x == 0),
        abort=st.sampled_from([None] * 9 + [int(ErrorCodes.CANCEL)]),
    )
    def open_stream(self, headers_only: bool, abort: int | None) -> None:
        """Open a client stream; with ``abort``, reset it at once (its HEADERS and its
        RST_STREAM then usually reach the server together)."""
        idx = len(self.streams)
        model = StreamModel(
            idx, Side(CLIENT, idx, salt=1), Side(SERVER, idx, salt=2), headers_only, abort
        )
        if abort is not None:
            model.c.disturbed = True
        self.streams.append(model)

        def start() -> None:
            assert self.cn is not None
            self.cn.start_soon(self._client_owner, model)

        self._act(start)

    def _pick(self, who: str, i: int) -> Side | None:
        live = [
            side
            for model in self.streams
            for side in (model.c, model.s)
            if side.who == who and side.started and not side.done
        ]
        return live[i % len(live)] if live else None

    def _command(self, who: str, i: int, role: str, cmd: tuple[Any, ...]) -> None:
        side = self._pick(who, i)
        if side is None:
            return self._act()
        tx = side.send_tx if role == "send" else side.recv_tx
        self._act(functools.partial(tx.send_nowait, cmd))

    @precondition(lambda self: self.streams)
    @rule(who=sides, i=picks, n=send_sizes, end=st.integers(0, 5).map(lambda x: x == 0))
    def send(self, who: str, i: int, n: int, end: bool) -> None:
        self._command(who, i, "send", ("send", n, end))

    @precondition(lambda self: self.streams)
    @rule(who=sides, i=picks, trailers=st.booleans(), go=sometimes)
    def end(self, who: str, i: int, trailers: bool, go: bool) -> None:
        if not go:
            return self._act()
        self._command(who, i, "send", ("end", trailers))

    @precondition(lambda self: self.streams)
    @rule(who=sides, i=picks, m=st.one_of(st.integers(1, 100), st.integers(1, 70_000)))
    def read(self, who: str, i: int, m: int) -> None:
        self._command(who, i, "recv", ("read", m))

    @precondition(lambda self: self.streams)
    @rule(who=sides, i=picks, n=st.integers(1, 200_000))
    def read_exactly(self, who: str, i: int, n: int) -> None:
        self._command(who, i, "recv", ("exactly", n))

    @precondition(lambda self: self.streams)
    @rule(who=sides, i=picks)
    def drain(self, who: str, i: int) -> None:
        self._command(who, i, "recv", ("drain",))

    @precondition(lambda self: self.streams)
    @rule(i=picks, n=st.integers(1, 4 * MAX_SEND))
    def exchange(self, i: int, n: int) -> None:
        """Both sides of one stream send ``n`` bytes and read ``n`` bytes, at once
        (bulk traffic both ways is what fills both directions of a tight link)."""
        live = [m for m in self.streams if m.c.started and m.s.started]
        live = [m for m in live if not (m.c.done or m.s.done)]
        if not live:
            return self._act()
        model = live[i % len(live)]

        def start() -> None:
            for side in (model.c, model.s):
                for _ in range(4):
                    side.send_tx.send_nowait(("send", -(-n // 4), False))
                side.recv_tx.send_nowait(("exactly", n))

        self._act(start)

    @precondition(lambda self: self.streams)
    @rule(i=picks, go=sometimes)
    def autopilot(self, i: int, go: bool) -> None:
        """Both sides of one stream finish sending and read to the end."""
        if not go:
            return self._act()
        model = self.streams[i % len(self.streams)]
        self._act(functools.partial(self._autopilot, model))

    def _autopilot(self, model: StreamModel) -> None:
        for side in (model.c, model.s):
            side.send_tx.send_nowait(("finish",))
            side.recv_tx.send_nowait(("finish",))

    @precondition(lambda self: self.streams)
    @rule(
        how=st.sampled_from(["reset", "cancel", "exit", "raise"]),
        who=sides,
        i=picks,
        code=reset_codes,
        go=sometimes,
    )
    def disrupt(self, how: str, who: str, i: int, code: int, go: bool) -> None:
        """Abort one side of a stream mid-transfer.

        ``reset``: ``stream.reset(code)``. ``cancel``: cancel the client's stream
        task (around ``open_stream``), or make the handler return now. ``exit``: the
        client leaves the ``open_stream`` block (its tasks are cancelled first).
        ``raise``: the handler raises.
        """
        side = self._pick(who, i)
        if not go or side is None or side.stream is None or side.inner is None:
            return self._act()
        side.disturbed = True
        action: Callable[[], object]
        if how == "reset":
            action = functools.partial(self._local_reset, side, code)
        elif how == "exit" and who == CLIENT:
            action = side.inner.cancel_scope.cancel
        else:
            side.raise_requested = how == "raise" and who == SERVER
            action = side.scope.cancel
        self._act(action)

    def _local_reset(self, side: Side, code: int) -> None:
        stream = side.stream
        assert stream is not None
        first = stream.core_error is None and not stream.core_closed
        stream.reset(code)
        side.self_reset = first

    @precondition(lambda self: self.streams)
    @rule(dt=st.sampled_from([0.001, 0.6, 6.0, 60.0]), go=rarely)
    def advance_time(self, dt: float, go: bool) -> None:
        """Let ``dt`` virtual seconds pass (timeouts fire), then settle."""
        if not go:
            return self._act()
        if self.graceful_started:
            self.hard_disturbed = True  # a grace period may run out
        if self.host.result is not None:
            return self._act()
        gate = trio.Event()

        async def sleeper() -> None:
            await trio.sleep(dt)
            self.time_gate = None
            gate.set()

        def start() -> None:
            self.time_gate = gate
            self._spawn_now(sleeper)

        try:
            self._inject(start, until=lambda: self.time_gate is None)
        except BaseException:
            self.failed = True
            raise
        self._act()

    @precondition(lambda self: self.streams)
    @rule(who=sides, go=rarely)
    def graceful_close(self, who: str, go: bool) -> None:
        if not go or self.host.result is not None:
            return self._act()
        if who == CLIENT and self._client_alive():
            self.conn_disturbed = self.graceful_started = self.client_closed = True
            if self.ccfg.graceful_close_timeout == 0:
                self.hard_disturbed = True  # no grace at all
            assert self.conn is not None
            conn = self.conn

            def start() -> None:
                assert self.cn is not None
                self.cn.start_soon(conn.aclose)

            self._act(start)
        elif who == SERVER and not self.server_done:
            self.conn_disturbed = self.graceful_started = True
            if self.scfg.graceful_close_timeout == 0:
                self.hard_disturbed = True
            assert self.score is not None
            self._act(functools.partial(self._spawn_now, self.score.graceful_close))
        else:
            self._act()

    @precondition(lambda self: self.streams)
    @rule(go=rarely)
    def server_drain(self, go: bool) -> None:
        """The server drains at an arbitrary step, with no grace limit: its two
        GOAWAYs and the PING. Unlike ``graceful_close`` nothing is relaxed: every
        stream a handler saw must still complete (unless another action disturbed
        it), and the only error the drain explains is a retryable one on a stream no
        handler ever sees (``_check_drain``)."""
        if not go or self.host.result is not None or self.server_done or self.drain_started:
            return self._act()
        self.drain_started = True
        assert self.score is not None
        drain = functools.partial(self.score.graceful_close, timeout=math.inf)
        self._act(functools.partial(self._spawn_now, drain))

    def _spawn_now(self, fn: Callable[[], Any]) -> None:
        assert self.top is not None
        self.top.start_soon(fn)

    @precondition(lambda self: self.streams)
    @rule(
        kind=st.sampled_from(["client-transport", "server-transport", "client", "server"]),
        go=rarely,
    )
    def abrupt_close(self, kind: str, go: bool) -> None:
        if not go or self.host.result is not None:
            return self._act()
        self.conn_disturbed = self.hard_disturbed = True
        actions: dict[str, Callable[[], object]] = {
            "client-transport": self.client_transport.close_now,
            "server-transport": self.server_transport.close_now,
            "client": self.client_scope.cancel,
            "server": self.server_scope.cancel,
        }
        self._act(actions[kind])

    @precondition(lambda self: self.streams)
    @rule(who=sides, kind=st.sampled_from(sorted(CONNECTION_ERRORS)), go=rarely)
    def peer_connection_error(self, who: str, kind: str, go: bool) -> None:
        """The ``who`` side's peer role misbehaves: a frame that is a connection error
        reaches the other side between two of ``who``'s writes, at any step."""
        tx, rx = (
            (self.client_transport, self.server_transport)
            if who == CLIENT
            else (self.server_transport, self.client_transport)
        )
        if not go or self.host.result is not None or tx.sending or tx.closed or rx.closed:
            return self._act()
        self.conn_disturbed = self.hard_disturbed = True
        self._act(functools.partial(tx.inject, CONNECTION_ERRORS[kind]))

    # ------------------------------------------------------------------ checks

    def _check(self) -> None:
        assert not self.bugs, "\n\n".join(self.bugs)
        if self.host.result is not None:
            self.host.result.unwrap()  # the world ended (only teardown ends it)
        for model in self.streams:
            self._check_bytes(model)
        for who in (CLIENT, SERVER):
            self._check_memory(who)
        self._check_liveness()
        for who in (CLIENT, SERVER):
            self._check_ended(who)
        self._check_conservation()
        self._check_drain()
        for who in (CLIENT, SERVER):
            self._check_loopy_lists(who)

    def _check_loopy_lists(self, who: str) -> None:
        """docs/architecture.md, "Who owns what": a stream is on loopy's active list,
        parked on its own window, or parked on the connection window exactly when its
        output state says so, and on at most one of them."""
        core = self._core(who)
        if core is None:
            return
        loopy = core.loopy
        lists = {
            OUT_ACTIVE: list(loopy._active),
            OUT_WAITING: list(loopy._waiting),
            OUT_CONN_WAITING: list(loopy._conn_waiting),
        }
        for state, streams in lists.items():
            assert len(set(map(id, streams))) == len(streams), f"{who}: a stream twice in {state}"
            for listed in streams:
                sid = listed.stream.stream_id
                assert listed.state == state, f"{who}: stream {sid} misplaced"
                assert loopy.outstream_for_testing(sid) is listed, (
                    f"{who}: stream {sid} listed but not in loopy's table"
                )
        for side in self._side_objects(who):
            mine = side.stream
            assert mine is not None
            out = loopy.outstream_for_testing(mine.stream_id)
            if out is None:
                continue  # no output entry: on no list
            assert out.stream is mine, f"{side!r}: loopy's entry is another stream's"
            state = out.state
            if state in lists:
                assert any(s is out for s in lists[state]), (
                    f"{side!r}: output state {state} but not on loopy's list for it"
                )

    def _check_drain(self) -> None:
        """The drain loses nothing: a stream the drain refused never reaches a handler,
        and once the second GOAWAY is out, every stream a handler saw is at or below
        its last stream id (so the client may retry exactly the streams above it)."""
        core = self.score
        if not self.drain_started or core is None:
            return
        last = core.goaway_sent_last_id
        for model in self.streams:
            c, s = model.c, model.s
            if c.refused and s.started:
                self._bug(f"stream {model.idx}: refused by the drain, yet a handler saw it")
            if last is None:
                continue
            if s.started and s.stream is not None and s.stream.stream_id > last:
                self._bug(
                    f"stream {model.idx}: a handler saw stream {s.stream.stream_id}, above"
                    f" the second GOAWAY's last stream id {last}"
                )
        assert not self.bugs, "\n\n".join(self.bugs)

    def _check_ended(self, who: str) -> None:
        """Once a connection has ended (loopy is gone), every stream task of it has its
        outcome and every byte of write quota is back (orphaned items included)."""
        core = self._core(who)
        if core is None or not core.done.is_set():
            return
        cfg = self.ccfg if who == CLIENT else self.scfg
        for model in self.streams:
            side = model.c if who == CLIENT else model.s
            busy = {role: op for role, op in side.busy.items() if role != "owner"}
            assert not busy, f"{side!r}: still blocked in {busy} after the connection ended"
            if who == CLIENT:
                assert side.busy.get("owner") != "open", (
                    f"{side!r}: still waiting to open after the connection ended"
                )
            stream = side.stream
            if stream is None:
                continue
            assert stream.core_closed, f"{side!r}: stream open after the connection ended"
            assert stream._write_quota == cfg.write_quota, (
                f"{side!r}: {cfg.write_quota - stream._write_quota} bytes of write quota "
                "not released after the connection ended"
            )

    def _check_bytes(self, model: StreamModel) -> None:
        for rx, tx in model.sides():
            where = f"stream {model.idx}, {tx.who} -> {rx.who}"
            if not rx.lost:
                got = len(rx.received)
                assert got <= len(tx.sent), f"{where}: received {got} > sent {len(tx.sent)}"
                assert rx.received == tx.sent[:got], f"{where}: bytes differ from what was sent"
            if rx.recv_end:
                assert tx.end_sent, f"{where}: END_STREAM seen but never sent"
                if not rx.lost:
                    assert len(rx.received) == len(tx.sent), f"{where}: ended early"
                assert rx.stream is not None
                assert rx.stream.trailers == tx.trailers_sent, f"{where}: trailers differ"

    def _core(self, who: str) -> ConnectionCore | None:
        if who == SERVER:
            return self.score
        return self.conn._core if self.conn is not None else None

    def _side_objects(self, who: str) -> list[Side]:
        return [
            side
            for model in self.streams
            for side in (model.c, model.s)
            if side.who == who and side.stream is not None
        ]

    def _check_memory(self, who: str) -> None:
        cfg = self.ccfg if who == CLIENT else self.scfg
        total = 0
        window = 0
        sides_ = self._side_objects(who)
        core = self._core(who)
        stats = core.cbuf.statistics() if core is not None else None
        # No data item is on its way to loopy (items in the control buffer hold quota).
        settled = stats is not None and (stats.finished or stats.queued + stats.in_batch == 0)
        for side in sides_:
            stream = side.stream
            assert stream is not None
            flow = stream._in_flow
            buffered = sum(len(c) for c in stream._chunks or ())
            total += buffered
            if not stream.core_closed:
                side.max_window = max(side.max_window, flow.limit + flow.delta)
                assert flow.pending_data <= flow.limit + flow.delta, (
                    f"{side!r}: {flow.pending_data} unread bytes exceed the window "
                    f"{flow.limit} + {flow.delta}"
                )
                assert flow.pending_data == buffered, (
                    f"{side!r}: pending_data {flow.pending_data} != buffered {buffered}"
                )
            window = max(window, side.max_window, flow.limit)
            assert stream._write_quota <= cfg.write_quota, (
                f"{side!r}: write quota over-returned ({stream._write_quota} > {cfg.write_quota})"
            )
            assert stream._write_quota > -MAX_SEND, f"{side!r}: write quota overrun"
            if settled:
                # Quota is out exactly for the data loopy still holds for the stream.
                assert core is not None
                out = core.loopy.outstream_for_testing(stream.stream_id)
                held = sum(
                    len(item.payload)
                    for item in (out.queue if out is not None else None) or ()
                    if isinstance(item, Data) and item.quota
                )
                assert cfg.write_quota - stream._write_quota == held, (
                    f"{side!r}: {cfg.write_quota - stream._write_quota} bytes of write "
                    f"quota out, but loopy holds {held}"
                )
        assert total <= len(sides_) * window, (
            f"{who}: {total} unread bytes over {len(sides_)} streams of window {window}"
        )

    def _check_liveness(self) -> None:
        for who in (CLIENT, SERVER):
            core = self._core(who)
            if core is None:
                continue
            ended = core.error is not None or core.cbuf.finished
            for side in self._side_objects(who):
                stream = side.stream
                assert stream is not None
                for role, op in side.busy.items():
                    if role == "owner":
                        continue
                    assert not ended, (
                        f"{side!r}: {role} still blocked in {op} after the connection "
                        f"ended ({core.error!r})"
                    )
                    assert not stream.core_closed, f"{side!r}: {role} blocked on a closed stream"
        core = self._core(CLIENT)
        if core is not None and core.error is None and not self.client_done:
            live = [
                m.c for m in self.streams if m.c.stream is not None and not m.c.stream.core_closed
            ]
            assert core._open_outbound == len(live), (
                f"client stream quota: {core._open_outbound} counted, {len(live)} open"
            )
            waiting = [m.c for m in self.streams if m.c.busy.get("owner") == "open"]
            if waiting and not core.closing and core.goaway_received is None:
                assert core._open_outbound >= core._peer_max_streams, (
                    f"{waiting}: waiting for stream quota, but only {core._open_outbound} of "
                    f"{core._peer_max_streams} streams are open"
                )
        score = self.score
        if score is not None and score.error is None:
            assert score.open_inbound == len(score.streams_by_id)

    def _healthy(self) -> bool:
        if self.conn_disturbed or self.client_done or self.server_done:
            return False
        cores = (self.ccore, self.score)
        return all(
            c is not None and c.error is None and not c.closing and not c.cbuf.finished
            for c in cores
        )

    def _check_conservation(self) -> None:
        if not self._healthy():
            return
        client, server = self.ccore, self.score
        assert server is not None
        # Both readers are idle only if nothing is left to read: bytes in flight on a
        # healthy, quiescent link mean both readers are stuck (a deadlock).
        c2s, s2c = self.server_transport.unread, self.client_transport.unread
        deadlock = f"deadlock: {c2s} bytes client->server and {s2c} server->client"
        assert not c2s, f"{deadlock} left unread on a healthy link\n{self._describe()}"
        assert not s2c, f"{deadlock} left unread on a healthy link\n{self._describe()}"
        for core in (client, server):
            stats = core.cbuf.statistics()
            assert stats.queued == 0, f"control items left: {stats}"
            assert stats.in_batch == 0, f"control items left: {stats}"
            assert core.h2.pending_bytes() == 0, "framed bytes left in h2"
        for receiver, sender in ((client, server), (server, client)):
            window = sender.h2.outbound_flow_control_window
            flow = receiver.in_flow
            assert window == flow.limit - flow.unacked, (
                f"connection credit: sender window {window}, "
                f"receiver limit {flow.limit} - unacked {flow.unacked}"
            )
        for model in self.streams:
            for rx, tx in model.sides():
                self._check_stream_credit(model, rx, tx)

    def _check_stream_credit(self, model: StreamModel, rx: Side, tx: Side) -> None:
        rs, ts = rx.stream, tx.stream
        if rs is None or ts is None or not rs.stream_id:
            return
        tx_core, rx_core = self._core(tx.who), self._core(rx.who)
        assert tx_core is not None
        assert rx_core is not None
        sid = rs.stream_id
        # Loopy must not sit on data that both windows would let it write.
        window = None
        h2_stream = tx_core.h2.streams.get(sid)
        if h2_stream is not None:
            window = h2_stream.outbound_flow_control_window
        out = tx_core.loopy.outstream_for_testing(ts.stream_id)
        if out is not None and out.queue and not ts.core_output_over:
            head = out.queue[0]
            needs_window = isinstance(head, Data) and len(head.payload) > out.offset
            movable = not needs_window or (
                window is not None and window > 0 and tx_core.h2.outbound_flow_control_window > 0
            )
            assert not movable, (
                f"stream {model.idx}: {tx.who} loopy holds {len(out.queue)} items "
                f"with stream window {window} and connection window "
                f"{tx_core.h2.outbound_flow_control_window}"
            )
        if rs.core_closed or rs.core_peer_ended or rs.core_error is not None or window is None:
            return
        if ts.core_closed or ts.core_output_over or ts.core_error is not None:
            return
        flow = rs._in_flow
        believed = flow.limit + flow.delta - flow.pending_data - flow.pending_update
        assert window == believed, (
            f"stream {model.idx} ({tx.who} -> {rx.who}): sender window {window}, receiver "
            f"grants limit {flow.limit} + delta {flow.delta} - unread {flow.pending_data} "
            f"- unacked {flow.pending_update} = {believed}"
        )

    # ------------------------------------------------------------------ the end

    def teardown(self) -> None:
        if not self.started:
            return
        try:
            if not self.failed and self.host.result is None:
                self._final_phase()
        finally:
            try:
                self._shutdown()
            finally:
                logging.getLogger("trio_h2t").removeFilter(self.log_filter)

    def _final_phase(self) -> None:
        # 1. Every stream on autopilot; what nothing disturbed must complete.
        def autopilot_all() -> None:
            for model in self.streams:
                self._autopilot(model)

        self._act(autopilot_all)
        if not self.hard_disturbed:
            for model in self.streams:
                if model.c.disturbed or model.s.disturbed or model.c.refused:
                    continue
                if self.conn_disturbed and not model.s.started:
                    continue  # a graceful close may refuse streams not yet accepted
                for side in (model.c, model.s):
                    if self._cut_by_client_hangup(side):
                        continue
                    assert side.complete, f"{side!r} did not complete"
                    assert not side.errors, f"{side!r} failed"
        # 2. Leave the client block; everything must end on the mock clock.
        self.client_exiting = True

        async def finish() -> None:
            start = trio.current_time()
            try:
                with trio.fail_after(FINAL_TIMEOUT):
                    for model in self.streams:
                        if self.cn_open:
                            await model.c.done_event.wait()
                    if self.cn_open:
                        assert self.cn is not None
                        self.cn.cancel_scope.cancel()  # only the sleep_forever is left
                    await self.client_done_event.wait()
                    await self.server_done_event.wait()
                    self.sentinel_scope.cancel()
                waited = trio.current_time() - start
                if waited and not self.hard_disturbed:
                    # Every stream is over: a graceful close has nothing to wait for.
                    self._bug(f"closing took {waited} s of grace with no stream left open")
            except trio.TooSlowError:
                self._bug(
                    f"hang: the connection did not close within {FINAL_TIMEOUT} s\n"
                    + self._describe()
                )
                assert self.top is not None
                self.top.cancel_scope.cancel()

        def start() -> None:
            self.time_gate = trio.Event()  # never set: time flows until the end
            self._spawn_now(finish)

        self._inject(start, until=lambda: False)
        try:
            assert self.host.result is not None
            self.host.result.unwrap()
            assert not self.bugs, "\n\n".join(self.bugs)
            self._check_end()
        except BaseException:
            self.failed = True
            raise

    def _cut_by_client_hangup(self, side: Side) -> bool:
        """Documented, not a bug: a client's graceful close hangs up once its own
        streams are complete (docs/endings.md), and the connection's end cancels the
        handlers still running (docs/cancellation.md). True if ``side`` is such a
        handler: it answered in full, the client's side completed without error (its
        END_STREAM was written: what the server lacks was on the wire), the handler
        saw no error, and the server's connection has ended.

        The handler may not have read the end of its request, and the server may not
        have received it at all: the client closes its transport right after its last
        write, and the server's next write (a WINDOW_UPDATE for the body it is still
        reading) then fails, which ends the connection and stops its reader with the
        request's tail unread in the transport. A response sent in full before the
        request ended says it does not depend on the rest (RFC 9113 §8.1), so nothing
        the client relies on is lost. (The deep profile found this: issue 15's
        ``server #5 ... did not complete``; ``test_client_hangup_may_leave_the_request_tail_unread``
        replays it.) What the server did receive is still checked to be a prefix of
        what was sent (``_check_bytes``)."""
        model = self.streams[side.idx]
        stream, core = side.stream, self.score
        client_stream = model.c.stream
        return (
            self.client_closed
            and side.who == SERVER
            and model.c.complete
            and not model.c.errors
            and client_stream is not None
            and client_stream.core_closed
            and client_stream.core_error is None
            and stream is not None
            and core is not None
            and side.done
            and not side.errors
            and side.end_sent
            and stream.core_closed
            and core.error is not None
        )

    def _describe(self) -> str:
        """The state of the world, for failure messages."""
        lines = [
            f"client: done={self.client_done} cn_open={self.cn_open} "
            f"server: done={self.server_done}"
        ]
        for who in (CLIENT, SERVER):
            core = self._core(who)
            if core is not None:
                lines.append(
                    f"{who} core: error={core.error!r} closing={core.closing} "
                    f"goaway_received={core.goaway_received!r} streams={core.streams()} "
                    f"done={core.done.is_set()} cbuf={core.cbuf.statistics()}"
                )
        for model in self.streams:
            lines += [f"  {model.c!r}", f"  {model.s!r}"]
        return "\n".join(lines)

    def _check_end(self) -> None:
        # errors.md, Handler errors: a handler that raised is logged at ERROR with its
        # traceback, once (the filter saw each _Boom's record).
        assert self.log_filter.booms == self.booms_raised, (
            f"{self.booms_raised} handlers raised, {self.log_filter.booms} logged"
        )
        for model in self.streams:
            self._check_bytes(model)
            for side in (model.c, model.s):
                if side.started or side.who == CLIENT:
                    assert side.done, f"{side!r}: task still running after the world ended"
                stream = side.stream
                if stream is None:
                    continue
                cfg = self.ccfg if side.who == CLIENT else self.scfg
                assert stream._write_quota == cfg.write_quota, (
                    f"{side!r}: write quota leaked ({stream._write_quota} of {cfg.write_quota})"
                )
                assert stream.core_closed, f"{side!r}: stream still open after the world ended"
        for who in (CLIENT, SERVER):
            core = self._core(who)
            assert core is not None
            assert core.done.is_set(), f"{who}: connection not over"
            assert core.cbuf.finished, f"{who}: control buffer not finished"
            assert not core.streams_by_id, f"{who}: streams left registered: {core.streams_by_id}"
            assert not core.loopy._active, f"{who}: loopy still has active streams"

    def _shutdown(self) -> None:
        """Make sure the guest run is over, whatever happened: an open guest run would
        make every later ``trio.run`` in the process fail ("from inside a run()").

        Cancel everything and pump to the end; if that fails (no token yet, a world
        stuck or livelocked), abandon the guest run (close Trio's run generator, which
        ends the run's global state) and report the failure.
        """
        if not self.started or self.host.result is not None:
            return
        try:
            top = self.top
            if top is not None:
                self._inject(top.cancel_scope.cancel, until=lambda: False)
            self.host.pump(lambda: False)  # returns once the run is over
        finally:
            if self.host.result is None:
                self._abandon()

    def _abandon(self) -> None:
        """End a guest run that did not finish: close its run generator (Trio's
        ``GuestState.unrolled_run_gen``; its ``finally`` clears the run context)."""
        guest = self.guest
        if guest is not None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # "abandoned" warning
                guest.unrolled_run_gen.close()
        self.host.result = outcome.Error(AssertionError("guest run abandoned"))
        self.host.queue.clear()
        if trio.lowlevel.in_trio_run():  # pragma: no cover - Trio changed its internals
            raise AssertionError("the guest run could not be ended")


def _settings() -> settings:
    base = settings()
    return settings(
        base,
        max_examples=5 * base.max_examples,
        stateful_step_count=2 * base.stateful_step_count,
        deadline=None,
    )


_BUDGET = os.environ.get("H2T_HYPOTHESIS_SECONDS")
#: Hypothesis shrinks a failure for up to this many seconds (its engine's
#: ``MAX_SHRINKING_SECONDS``), after the time budget if the failure came late.
SHRINK_SECONDS = 300


def _with_budget_timeout(test: Callable[[], None]) -> Callable[[], None]:
    """With a time budget, the per-test timeout becomes budget + shrinking + a minute.

    The usual 300 s (pyproject.toml) would stop the shrinking of a failure found near
    the budget's end, and Hypothesis would then report FlakyStrategyDefinition instead
    of the failure (the deep profile did, with its 240 s budget)."""
    if not _BUDGET:
        return test
    limit: Callable[[Callable[[], None]], Callable[[], None]] = pytest.mark.timeout(
        float(_BUDGET) + SHRINK_SECONDS + 60
    )
    return limit(test)


@_with_budget_timeout
def test_connection_stateful() -> None:
    """Random streams, data, resets, cancellations and closes keep every invariant.

    With ``H2T_HYPOTHESIS_SECONDS=N`` it runs rounds of the profile's examples for N
    seconds instead (``trio_h2t.testing.run_machine``: flat memory, failures saved
    in and replayed from Hypothesis's example database)."""
    budget = _BUDGET
    run_machine(
        ConnectionMachine,
        settings=_settings(),
        seconds=float(budget) if budget else None,
        round_examples=100,
    )


class _RaisingRule(ConnectionMachine):
    """The machine with a rule that raises once the world is running."""

    @rule()
    def boom(self) -> None:
        raise ValueError("boom in a rule")


class _RaisingTeardown(ConnectionMachine):
    """The machine whose final phase raises."""

    def _final_phase(self) -> None:
        raise ValueError("boom in teardown")


@pytest.mark.parametrize("machine", [_RaisingRule, _RaisingTeardown])
def test_a_failing_machine_leaves_no_trio_run_open(machine: type[ConnectionMachine]) -> None:
    """A machine that raises in a rule or in teardown still ends its Trio run, so a
    later ``trio.run`` in the same process works (no "run() from inside a run()")."""
    quick = settings(
        max_examples=2,
        stateful_step_count=3,
        deadline=None,
        database=None,
        phases=[Phase.generate],
    )
    with pytest.raises(ValueError, match="boom"):
        run_state_machine_as_test(machine, settings=quick)
    assert not trio.lowlevel.in_trio_run()
    assert trio.run(trio.sleep, 0) is None


# ---------------------------------------------------------------------- known bugs
#
# Each bug the machine found is tolerated there (KNOWN_BUGS, so that it keeps looking
# for others) and reproduced here, deterministically, as a strict xfail: once the bug
# is fixed its test passes, strict xfail fails the suite, and the fix must also take
# the name out of KNOWN_BUGS (test_every_tolerated_bug_has_a_repro checks the pairing).

_REPROS: dict[str, str] = {}


def on_mock_clock(fn: Callable[[], Awaitable[None]]) -> Callable[[], None]:
    """Make ``async def fn()`` a test run by its own ``trio.run`` on the autojump clock
    (not by pytest-trio: a failing assertion then reaches pytest bare, not grouped)."""

    def test() -> None:
        trio.run(fn, clock=trio.testing.MockClock(autojump_threshold=0))

    test.__name__ = test.__qualname__ = fn.__name__
    test.__doc__ = fn.__doc__
    return test


def known_bug(
    name: str, reason: str
) -> Callable[[Callable[[], Awaitable[None]]], Callable[[], None]]:
    """A strict-xfail repro of the known bug ``name`` (``raises=AssertionError``, so
    that no other failure passes for the bug)."""

    def mark(fn: Callable[[], Awaitable[None]]) -> Callable[[], None]:
        _REPROS[name] = fn.__name__
        xfail = pytest.mark.xfail(
            strict=True, raises=AssertionError, reason=f"bug ({name}): {reason}"
        )
        return xfail(on_mock_clock(fn))

    return mark


def test_every_tolerated_bug_has_a_repro() -> None:
    """The machine tolerates exactly the bugs that have a strict-xfail repro below."""
    assert set(KNOWN_BUGS) == set(_REPROS)


REQUEST_HEADERS = [
    (b":method", b"POST"),
    (b":scheme", b"http"),
    (b":authority", b"localhost"),
    (b":path", b"/"),
]
Handler = Callable[[H2Stream], Any]


@asynccontextmanager
async def _pair(
    handler: Handler,
    *,
    client: TransportConfig | None = None,
    server: TransportConfig | None = None,
) -> AsyncIterator[tuple[ClientConnection, ConnectionCore, trio.Nursery]]:
    """A client connection, the server's core and a nursery for side tasks (a
    graceful close), over the kit's ``open_memory_pair``: after the block the server
    must end by itself, and the side tasks are cancelled."""
    async with trio.open_nursery() as nursery:
        async with open_memory_pair(handler, client_config=client, server_config=server) as pair:
            yield pair.client, pair.server._core, nursery
        nursery.cancel_scope.cancel()


def _out_state(core: ConnectionCore | None, stream: H2Stream) -> int:
    """Loopy's output state for ``stream`` (OUT_EMPTY when it holds no entry)."""
    out = core.loopy.outstream_for_testing(stream.stream_id) if core is not None else None
    return out.state if out is not None else OUT_EMPTY


@on_mock_clock  # regression test: bug "parked-output-kept" is fixed
async def test_parked_output_is_released_when_the_connection_ends() -> None:
    """Data waiting for stream window is released (quota returned) when the link dies."""
    ccfg = TransportConfig(write_quota=1000)
    scfg = TransportConfig(dynamic_window=False, initial_window_size=65_535)
    parked: list[int] = []

    async def handler(stream: H2Stream) -> None:
        await trio.sleep_forever()  # never reads: the window stays shut

    pair = _pair(handler, client=ccfg, server=scfg)
    async with pair as (conn, _, _), conn.open_stream(REQUEST_HEADERS) as stream:
        await stream.send_data(b"x" * 65_536)  # one byte more than the window
        await trio.testing.wait_all_tasks_blocked()
        parked.append(_out_state(conn._core, stream))
        await conn._core.transport.aclose()  # the link goes away
        await trio.testing.wait_all_tasks_blocked()
        assert conn.error is not None
    assert parked == [OUT_WAITING]
    assert stream._write_quota == ccfg.write_quota
    assert conn._core.loopy.outstream_for_testing(stream.stream_id) is None  # all dropped


@on_mock_clock  # regression test: bug "graceful-close-cancels-handlers" is fixed
async def test_graceful_close_lets_a_running_handler_finish() -> None:
    """A handler that answered but still reads its (fully arrived) body may finish."""
    go = trio.Event()
    got: list[bytes] = []

    async def handler(stream: H2Stream) -> None:
        await stream.send_headers([(b":status", b"200")], end_stream=True)
        await go.wait()  # some work before reading the upload
        got.append(await stream.read_all())

    async with _pair(handler) as (conn, core, nursery):
        async with conn.open_stream(REQUEST_HEADERS) as stream:
            await stream.send_data(b"x" * 100, end_stream=True)
            await stream.receive_headers()
            await stream.read_all()
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(core.graceful_close)  # grace: 10 s
        await trio.testing.wait_all_tasks_blocked()
        go.set()
        await trio.testing.wait_all_tasks_blocked()
    assert got == [b"x" * 100]


@on_mock_clock  # regression test: bug "client-exit-cancels-queued-body" is fixed
async def test_leaving_open_stream_keeps_a_queued_body() -> None:
    """A body queued with END_STREAM still arrives whole after the block is left."""
    body = b"x" * 200_000
    got: list[int] = []

    async def handler(stream: H2Stream) -> None:
        await stream.send_headers([(b":status", b"200")], end_stream=True)  # early answer
        got.append(len(await stream.read_all()))

    async with _pair(handler, client=TransportConfig(write_quota=1 << 20)) as (conn, _, _):
        async with conn.open_stream(REQUEST_HEADERS) as stream:
            await stream.send_data(body, end_stream=True)
            await stream.receive_headers()
            await stream.read_all()
        await trio.testing.wait_all_tasks_blocked()
    assert got == [len(body)]


@on_mock_clock  # regression test: bug "local-reset-raises-broken" is fixed
async def test_stream_used_after_own_reset_raises_closed_resource_error() -> None:
    """After our own reset(), send_data and receive_some raise trio.ClosedResourceError."""
    raised: list[BaseException] = []

    async def handler(stream: H2Stream) -> None:
        await trio.sleep_forever()

    async with _pair(handler) as (conn, _, _), conn.open_stream(REQUEST_HEADERS) as stream:
        stream.reset()
        for call in (functools.partial(stream.send_data, b"x"), stream.receive_some):
            try:
                await call()
            except trio.BrokenResourceError as exc:
                raised.append(exc)
            except trio.ClosedResourceError:
                pass
    assert raised == []


@on_mock_clock  # regression test: bug "buffered-data-readable-after-error" is fixed
async def test_buffered_data_is_not_returned_after_a_cancel_reset() -> None:
    """After the peer resets with CANCEL, receive_some raises instead of returning data."""
    sent = trio.Event()
    returned: list[bytes] = []

    async def handler(stream: H2Stream) -> None:
        await stream.send_headers([(b":status", b"200")])
        await stream.send_data(b"hello")
        await sent.wait()
        stream.reset(ErrorCodes.CANCEL)

    async with _pair(handler) as (conn, _, _), conn.open_stream(REQUEST_HEADERS) as stream:
        await stream.receive_headers()
        await trio.testing.wait_all_tasks_blocked()
        sent.set()
        await trio.testing.wait_all_tasks_blocked()
        assert isinstance(stream.core_error, StreamResetError)
        with contextlib.suppress(StreamResetError):
            returned.append(await stream.receive_some())
    assert returned == []


@on_mock_clock  # found by the machine; fixed in aefd4d8 (the scope is made with the stream)
async def test_reset_arriving_with_the_request_cancels_the_handler() -> None:
    """HEADERS and RST_STREAM in one read: the handler sees Cancelled, nothing is logged."""
    seen: list[str] = []

    async def handler(stream: H2Stream) -> None:
        try:
            await stream.send_headers([(b":status", b"200")])
        except BaseException as exc:
            seen.append(type(exc).__name__)
            raise
        seen.append("no error")

    async with _pair(handler) as (conn, _, _):
        async with conn.open_stream(REQUEST_HEADERS) as stream:
            stream.reset()  # HEADERS and RST_STREAM leave in one write
        await trio.testing.wait_all_tasks_blocked()
    assert seen == ["Cancelled"]


@on_mock_clock  # regression test: bug "graceful-close-loses-response-tail" is fixed
async def test_graceful_close_delivers_a_response_already_sent() -> None:
    """A response sent whole during a server's graceful close reaches the client whole."""
    ccfg = TransportConfig(read_buffer_size=1024, connection_window_size=65_535)
    go = trio.Event()
    got = 0

    async def handler(stream: H2Stream) -> None:
        await go.wait()
        await stream.send_headers([(b":status", b"200")])
        await stream.send_data(b"x" * 40_000, end_stream=True)

    pair = _pair(handler, client=ccfg)
    async with (
        pair as (conn, core, nursery),
        conn.open_stream(REQUEST_HEADERS, end_stream=True) as st,
    ):
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(core.graceful_close)  # GOAWAY; grace 10 s
        await trio.testing.wait_all_tasks_blocked()
        go.set()  # the handler answers
        with contextlib.suppress(ConnectionLostError):
            await st.receive_headers()
            while chunk := await st.receive_some():
                got += len(chunk)
    assert got == 40_000


@pytest.mark.parametrize(
    ("limit", "dynamic"),
    [(1, False), (5, True)],
    ids=["limit-1-window-items-only", "limit-5-with-bdp-pings"],
)
async def test_bulk_traffic_both_ways_on_a_tight_link_completes(
    limit: int, dynamic: bool, autojump_clock: object
) -> None:
    """1 MB each way on one stream, a small throttle_limit on both ends, 64 KiB link
    buffers. Regression test (bug "throttle-deadlock", fixed): window items counted
    toward the throttle, so each reader, reading the other's DATA, queued a
    WINDOW_UPDATE that only its writer (blocked in send_all) could drain, and both
    readers stopped (the first case: windows larger than the link and an update
    every 1 % of the window, which failed every run before the fix). With BDP
    probing on, the limit must leave room for the PINGs, SETTINGS and their acks
    that probing keeps queued (docs/controlbuf.md)."""
    windows = {} if dynamic else {"initial_window_size": 4 << 20, "window_update_ratio": 0.01}
    config = TransportConfig(
        throttle_limit=limit,
        write_quota=1 << 20,
        dynamic_window=dynamic,
        **windows,  # type: ignore[arg-type]
    )
    size = 1_000_000
    got: list[int] = []

    async def exchange(stream: H2Stream) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(functools.partial(stream.send_data, b"x" * size, end_stream=True))
            got.append(len(await stream.read_all()))

    server_done = trio.Event()

    async def handler(stream: H2Stream) -> None:
        await stream.send_headers([(b":status", b"200")])
        await exchange(stream)
        server_done.set()

    link = Chunking(send_sizes=[65_536], receive_sizes=[65_536])
    pair = open_memory_pair(
        handler,
        client_config=config,
        server_config=config,
        client_chunking=link,
        server_chunking=link,
        capacity=65_536,
    )
    with trio.fail_after(60):
        async with pair as p, p.client.open_stream(REQUEST_HEADERS) as stream:
            await stream.receive_headers()
            await exchange(stream)
    # The client's graceful close let the handler finish reading the request.
    assert server_done.is_set()
    assert got == [size, size]


def test_client_hangup_may_leave_the_request_tail_unread() -> None:
    """Issue 15's deep-run failure, shrunk by hand to these steps and replayed.

    The handler of stream 5 answers in full while the request body still comes; the
    client ends its body, its graceful close sees its last stream complete and closes
    the link right after writing that END_STREAM. The server reads on, its next write
    (a connection WINDOW_UPDATE) fails, and it stops reading with the request's tail
    unread in the link. The machine had required a completed request there; the
    client's hang-up explains it (``ConnectionMachine._cut_by_client_hangup``,
    docs/endings.md).
    """
    tight = TransportConfig(
        initial_window_size=65_535,
        connection_window_size=65_535,
        dynamic_window=False,
        max_window_size=65_535,
        window_update_ratio=0.25,
        write_quota=65_536,
        max_concurrent_streams=8,
        read_buffer_size=65_536,
        write_buffer_size=65_536,
        min_batch_size=0,
        throttle_limit=100,
        graceful_close_timeout=5.0,
    )
    # The example drew RandomSeeder(423): Hypothesis seeds Trio's scheduler with it.
    scheduler = trio._core._run._r
    saved = scheduler.getstate()
    scheduler.seed(423)
    state = ConnectionMachine()
    try:
        state.start_world(
            ccfg=tight,
            scfg=tight,
            c2s_send=[7, 64, 65_536],
            c2s_recv=[10_347],
            s2c_send=[1, 43, 20, 16, 65_536],
            s2c_recv=[12, 49, 20, 32, 1, 65_536],
            capacity=None,
            rnd=None,
        )
        state.open_stream(abort=None, headers_only=True)
        state.open_stream(abort=None, headers_only=True)
        state.open_stream(abort=None, headers_only=False)
        state.exchange(i=179, n=837)
        state.exchange(i=239, n=529_459)
        state.send(end=False, i=659, n=1706, who=CLIENT)
        state.send(end=False, i=635, n=1671, who=CLIENT)
        state.exchange(i=437, n=9960)
        state.exchange(i=50, n=952)
        state.send(end=False, i=185, n=121_077, who=CLIENT)
        state.graceful_close(go=True, who=CLIENT)
        state.exchange(i=59, n=3600)
    finally:
        state.teardown()
        scheduler.setstate(saved)
    client, server = state.streams[2].c, state.streams[2].s
    # The example still shows the case (if not, Trio's or trio_h2t's scheduling has
    # moved on, and a new example is needed: a deep run's, shrunk step by step).
    assert client.complete
    assert not client.errors
    assert not server.recv_end, server
    assert len(server.received) < len(client.sent), server
