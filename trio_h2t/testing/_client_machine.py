"""A Hypothesis ``RuleBasedStateMachine`` that drives a user's *client* code over HTTP/2.

Theory of operation
-------------------
The world is :class:`~trio_h2t.testing.HandlerMachine`'s (one Trio guest run per
example, pumped by the machine; a mock clock that moves only when a rule says so;
Trio's scheduling order drawn; see ``_machine.py``), but the roles are swapped: the
code under test is :meth:`ClientMachine.call`, an async function that uses a
:class:`~trio_h2t.ClientConnection`, and the server is the machine's, driven by the
rules. Each request that reaches it becomes a :class:`ServerExchange` that waits
for rules to say what to do: send the next ``n`` bytes of the response (headers
first; pieces, so the client sees partial reads, and the steps between two pieces
are delays), send the rest, or reset the stream. Other rules start calls, cancel a
call, let virtual time pass (the client's timeouts fire), and close the connection:
the server's graceful close (GOAWAY), the client's, or the link cut at once.

Checked after every step (:meth:`ClientMachine.check_calls`, which a subclass may
extend): a call has at most one outcome; a call that failed was disturbed (in
flight when a stream was reset, time passed or the connection was closed, or
cancelled) and failed with one of ``ClientMachine.expected_errors``; a call that
returned returned :meth:`ClientMachine.expected_result` (a client must never hand
back a wrong answer, disturbed or not: it may fail instead); while no call runs, no
stream is left open on the connection (a stream that outlives its call is a leak);
windows, deadlock and logged faults as in ``HandlerMachine``. At the end the server
answers everything still waiting and the world must end within ``FINAL_TIMEOUT``
virtual seconds: then every call has exactly one outcome and no task is left.

Which call a request belongs to is not known (a client may retry, or send several
requests per call), so a disturbance explains the errors of every call in flight at
the time: the check is conservative there, and exact for the result.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import trio
import trio.testing
from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from trio_h2t._client import ClientConnection
from trio_h2t._exceptions import (
    ConnectionClosingError,
    ConnectionLostError,
    ErrorCodes,
    StreamResetError,
)
from trio_h2t._stream import H2Stream

from ._machine import _picks, _rarely, _WorldMachine
from ._strategies import bodies

__all__ = ["Call", "ClientMachine", "ServerExchange"]

HeaderBlock = list[tuple[bytes, bytes]]
#: Reset codes the server's ``reset`` rule uses (RFC 9113 §7): REFUSED_STREAM says
#: the request was not processed (a client may retry it), the others that it may
#: have been.
RESET_CODES = (ErrorCodes.REFUSED_STREAM, ErrorCodes.CANCEL, ErrorCodes.INTERNAL_ERROR)
#: A reset is the server's everyday way to fail a request: more often than a close.
_sometimes = st.sampled_from([False, False, True])


@dataclass(eq=False)
class Call:
    """One call of :meth:`ClientMachine.call`, as the machine saw it.

    ``outcome`` is ``"result"`` (it returned ``result``), ``"error"`` (it raised
    ``error``) or ``"cancelled"`` (a rule cancelled it and it raised Cancelled), set
    exactly once when the call ends. ``disturbed``: something that may make a call
    fail happened while it ran (a reset, a close, time passing, its cancellation).
    """

    idx: int
    argument: Any
    outcome: str | None = None
    result: Any = None
    error: BaseException | None = None
    disturbed: bool = False
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    done: trio.Event = field(default_factory=trio.Event)

    def __repr__(self) -> str:
        shown = repr(self.result)
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        argument = repr(self.argument)
        argument = argument if len(argument) <= 80 else argument[:77] + "..."
        return (
            f"<Call #{self.idx} argument={argument} outcome={self.outcome} "
            f"result={shown if self.outcome == 'result' else '-'} error={self.error!r}"
            f"{' disturbed' if self.disturbed else ''}>"
        )


@dataclass(eq=False)
class ServerExchange:
    """One request the machine's server received, and how far its answer went.

    Fields are written by its handler task only.
    """

    idx: int
    headers: HeaderBlock
    body: bytes | None = None  # the whole request body, once read
    response: tuple[HeaderBlock, bytes] | None = None  # what :meth:`respond` said
    sent: int = 0  # response body bytes sent
    headers_sent: bool = False
    ended: bool = False  # END_STREAM sent, or the stream was reset
    commands: trio.MemorySendChannel[tuple[Any, ...]] = field(init=False)
    _inbox: trio.MemoryReceiveChannel[tuple[Any, ...]] = field(init=False)
    done: trio.Event = field(default_factory=trio.Event)

    def __post_init__(self) -> None:
        self.commands, self._inbox = trio.open_memory_channel[tuple[Any, ...]](math.inf)

    def __repr__(self) -> str:
        body = "?" if self.body is None else len(self.body)
        return (
            f"<ServerExchange #{self.idx} request={body} sent={self.sent}"
            f"{'+END' if self.ended else ''}>"
        )


class ClientMachine(_WorldMachine):
    """Drives :meth:`call` (your client code) against a server the rules control;
    subclass it (see the module doc and docs/testing.md).

    Override :meth:`call` (an async function of the connection and one argument),
    :meth:`arguments` (the strategy its arguments come from), :meth:`expected_result`
    (what a call that returns must return), ``expected_errors`` (what a disturbed
    call may raise) and, for another server, :meth:`respond`. Add checks as
    ordinary Hypothesis ``@invariant()`` methods. Run it like any state machine
    (``ClientMachine.TestCase``, ``run_state_machine_as_test``, or
    :func:`~trio_h2t.testing.run_machine` for a time budget).
    """

    #: At most this many calls per example.
    max_calls = 6
    #: What a disturbed call may raise (anything else, or any error of an
    #: undisturbed call, is reported). ``trio.TooSlowError``: a client's own timeout,
    #: once virtual time passed.
    expected_errors: ClassVar[tuple[type[BaseException], ...]] = (
        StreamResetError,
        ConnectionClosingError,
        ConnectionLostError,
        trio.TooSlowError,
    )

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[Call] = []
        self.requests: list[ServerExchange] = []
        self._autopilot = False  # the final phase: the server answers every request

    # ------------------------------------------------------------------ to override

    async def call(self, conn: ClientConnection, argument: Any) -> Any:
        """The client code under test: one call with ``argument`` over ``conn``.
        The default POSTs ``argument`` (bytes) and returns the response body."""
        response = await conn.request("POST", "/", body=argument)
        return response.body

    def arguments(self) -> st.SearchStrategy[Any]:
        """The strategy each call's argument is drawn from (default: bodies of up to
        70 000 bytes)."""
        return bodies(max_size=70_000)

    def expected_result(self, call: Call) -> Any:
        """What ``call`` must return if it returns, or None not to check. The default
        server (:meth:`respond`) echoes, so for the default :meth:`call` this is
        ``call.argument``; the default returns None (a subclass says)."""
        return None

    def respond(self, headers: HeaderBlock, body: bytes) -> tuple[HeaderBlock, bytes]:
        """The server's answer to a request (its header block and whole body): the
        response header block (``:status`` first) and body. The default echoes."""
        return [(b":status", b"200")], body

    # ------------------------------------------------------------------ the world

    def _items(self) -> list[Any]:
        return [*self.calls, *self.requests]

    def _in_flight(self) -> list[Call]:
        return [call for call in self.calls if call.outcome is None]

    def _disturb(self) -> None:
        for call in self._in_flight():
            call.disturbed = True

    def _disturb_by_time(self) -> None:
        self._disturb()

    def _check_step(self) -> None:
        self.check_calls()

    async def _serve(self, stream: H2Stream) -> None:
        ex = ServerExchange(len(self.requests), list(stream.headers or ()))
        self.requests.append(ex)
        if self._autopilot:
            ex.commands.send_nowait(("finish",))
        try:
            async for cmd in ex._inbox:
                await self._server_command(ex, stream, cmd)
                if ex.ended:
                    return
        finally:
            ex.done.set()

    async def _server_command(
        self, ex: ServerExchange, stream: H2Stream, cmd: tuple[Any, ...]
    ) -> None:
        op = cmd[0]
        if op == "reset":
            stream.reset(cmd[1])
            ex.ended = True
            return
        if ex.response is None:
            ex.body = await stream.read_all()
            ex.response = self.respond(ex.headers, ex.body)
        headers, body = ex.response
        if not ex.headers_sent:
            ex.headers_sent = True
            await stream.send_headers(headers, end_stream=not body)
            if not body:
                ex.ended = True
                return
        n = len(body) - ex.sent if op == "finish" else min(cmd[1], len(body) - ex.sent)
        end = ex.sent + n == len(body)
        await stream.send_data(body[ex.sent : ex.sent + n], end_stream=end)
        ex.sent += n
        ex.ended = end

    async def _run_call(self, call: Call) -> None:
        assert self.pair is not None
        result: tuple[str, Any, BaseException | None] = ("cancelled", None, None)
        try:
            with call.scope:
                value = await self.call(self.pair.client, call.argument)
                result = ("result", value, None)
        except Exception as exc:
            result = ("error", None, exc)
        finally:
            if call.outcome is not None:
                self.bugs.append(f"{call!r} got a second outcome: {result}")
            call.outcome, call.result, call.error = result
            call.done.set()

    # ------------------------------------------------------------------ rules

    @precondition(lambda self: len(self.calls) < self.max_calls and self._client_nursery)
    @rule(data=st.data())
    def start_call(self, data: st.DataObject) -> None:
        """Start a call, its argument drawn from :meth:`arguments`. After a close it
        is disturbed from the start (the connection may refuse it)."""
        call = Call(len(self.calls), data.draw(self.arguments(), label="argument"))
        call.disturbed = self._closing
        self.calls.append(call)

        def start() -> None:
            assert self._client_nursery is not None
            self._client_nursery.start_soon(self._run_call, call)

        self._act(start)

    def _waiting(self, i: int) -> ServerExchange | None:
        # Not those whose handler ended otherwise (the client reset the stream).
        live = [ex for ex in self.requests if not ex.ended and not ex.done.is_set()]
        return live[i % len(live)] if live else None

    @precondition(lambda self: self.requests)
    @rule(i=_picks, n=st.one_of(st.integers(1, 100), st.integers(1, 70_000)))
    def serve(self, i: int, n: int) -> None:
        """The server sends the next ``n`` bytes of a response (its headers first,
        after reading the whole request)."""
        ex = self._waiting(i)
        if ex is None:
            return self._act()
        self._act(functools.partial(ex.commands.send_nowait, ("send", n)))

    @precondition(lambda self: self.requests)
    @rule(i=_picks)
    def finish_response(self, i: int) -> None:
        """The server sends the rest of a response."""
        ex = self._waiting(i)
        if ex is None:
            return self._act()
        self._act(functools.partial(ex.commands.send_nowait, ("finish",)))

    @precondition(lambda self: self.requests)
    # Plain ints, so that a failing example prints as code that runs.
    @rule(i=_picks, code=st.sampled_from([int(c) for c in RESET_CODES]), go=_sometimes)
    def reset(self, i: int, code: int, go: bool) -> None:
        """The server resets a request's stream with ``code``."""
        ex = self._waiting(i)
        if not go or ex is None:
            return self._act()
        self._disturb()
        self._act(functools.partial(ex.commands.send_nowait, ("reset", code)))

    @precondition(lambda self: self.calls)
    @rule(i=_picks, go=_rarely)
    def cancel_call(self, i: int, go: bool) -> None:
        """Cancel a call in flight (as its caller's timeout or nursery would)."""
        live = self._in_flight()
        if not go or not live:
            return self._act()
        call = live[i % len(live)]
        call.disturbed = True
        self._act(call.scope.cancel)

    # ------------------------------------------------------------------ checks

    def check_calls(self) -> None:
        """The checks run after every step (see the module doc); extend with super()."""
        self._check_world()
        for call in self.calls:
            self._check_call(call)
        pair = self.pair
        if pair is not None and not self._in_flight() and self._healthy():
            assert pair.client.open_streams == 0, (
                f"{pair.client.open_streams} streams left open on the client's connection "
                f"with no call running (a stream outlived its call): {self.calls}"
            )

    def _check_call(self, call: Call) -> None:
        if call.outcome == "cancelled":
            assert call.disturbed, f"{call!r}: cancelled, though no rule cancelled it"
        elif call.outcome == "error":
            if not call.disturbed:
                raise AssertionError(f"{call!r}: failed without a reason") from call.error
            if not isinstance(call.error, self.expected_errors):
                raise AssertionError(
                    f"{call!r}: raised {type(call.error).__name__}, not one of "
                    f"{_names(self.expected_errors)}"
                ) from call.error
        elif call.outcome == "result":
            expected = self.expected_result(call)
            if expected is not None:
                assert call.result == expected, f"{call!r}: returned a wrong result"

    # ------------------------------------------------------------------ the end

    def _finish_all(self) -> list[trio.Event]:
        # The server answers everything; a request that arrives from now on (a
        # retry) is answered as it comes (_serve).
        self._autopilot = True
        for ex in self.requests:
            ex.commands.send_nowait(("finish",))
        return [call.done for call in self.calls]

    async def _settled(self) -> None:
        await trio.testing.wait_all_tasks_blocked()
        pair = self.pair
        if pair is not None and self._healthy() and pair.client.open_streams:
            self.bugs.append(
                f"{pair.client.open_streams} streams left open on the client's connection "
                f"after every call ended (a stream outlived its call): {self.calls}"
            )

    def _check_end(self) -> None:
        missing = [call for call in self.calls if call.outcome is None]
        assert not missing, f"calls without an outcome: {missing}"
        for call in self.calls:
            self._check_call(call)

    def _release_items(self) -> None:
        for call in self.calls:
            call.error = None
        self.requests.clear()


def _names(types: Sequence[type[BaseException]]) -> str:
    return ", ".join(t.__name__ for t in types)
