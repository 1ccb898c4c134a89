"""Cancellation of every public async operation, at every schedule point (httpcore-style).

:func:`cancel_at` runs an operation in the current task and cancels it at its n-th
schedule point, using a trio instrument that watches this task's steps: n = 0 cancels
before the operation starts; n = k cancels just after the task's k-th step ended,
which is either while it is parked (the cancel is delivered through the park's
abort) or after a shielded yield (delivered at the next unshielded checkpoint). A
sweep runs n = 0, 1, 2, ... on fresh streams until the operation completes with the
cancellation never fired, so every await point of the operation is hit.

After each attempt the test checks what the operation's docstring promises ("On
cancellation: ..."), that the stream is reset or still usable as documented, and that
the connection still serves new streams. Nothing may hang (``trio.fail_after``).

The second half proves, with ``trio.testing.assert_checkpoints``, that each public
async call checkpoints, fast path included, and that the sync ones never do.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import pytest
import trio
import trio.testing
from _helpers_common import echo
from helpers import REQUEST, RESPONSE_200, connected_pair

from trio_h2t import (
    ClientConnection,
    H2Server,
    H2Stream,
    ServerConnection,
    TransportConfig,
    open_client_connection,
    open_connection,
    serve_connection,
    serve_tcp,
)

T = TypeVar("T")

#: Windows pinned at the RFC default, so write quota and flow control can bind.
FIXED = TransportConfig(dynamic_window=False, initial_window_size=65_535)


# ============================================================ the cancel-at-step machinery


class _CancelAtStep(trio.abc.Instrument):
    """Cancels ``scope`` when ``task`` finishes its ``n``-th step (its n-th schedule point)."""

    def __init__(self, task: trio.lowlevel.Task, scope: trio.CancelScope, n: int) -> None:
        self.task = task
        self.scope = scope
        self.n = n
        self.steps = 0
        self.fired = False

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        if task is self.task:
            self.steps += 1
            if self.steps == self.n:
                self.fired = True
                self.scope.cancel()


@dataclass
class Attempt(Generic[T]):
    """How one cancelled attempt went."""

    cancelled: bool  #: the operation raised Cancelled (caught here)
    fired: bool  #: the cancel was requested at all (False: the op finished first)
    value: T | None  #: what the operation returned, if it completed


async def cancel_at(n: int, fn: Callable[[], Awaitable[T]]) -> Attempt[T]:
    """Run ``fn()`` in this task, cancelling it at its ``n``-th schedule point."""
    task = trio.lowlevel.current_task()
    with trio.CancelScope() as scope:
        inst = _CancelAtStep(task, scope, n)
        if n == 0:
            inst.fired = True
            scope.cancel()
        trio.lowlevel.add_instrument(inst)
        try:
            value = await fn()
        finally:
            trio.lowlevel.remove_instrument(inst)
        return Attempt(cancelled=False, fired=inst.fired, value=value)
    return Attempt(cancelled=True, fired=True, value=None)


async def sweep(case: Callable[[int], Awaitable[bool]]) -> int:
    """Run ``case(n)`` for n = 0, 1, ... until it reports that no cancel fired.

    Returns how many schedule points the operation went through.
    """
    for n in range(64):
        if not await case(n):
            assert n >= 1, "every async operation must have at least one schedule point"
            return n
    raise AssertionError("the operation never completed")


def path_of(stream: H2Stream) -> bytes:
    return dict(stream.headers or [])[b":path"]


def request(path: str) -> list[tuple[bytes, bytes]]:
    return [(k, path.encode() if k == b":path" else v) for k, v in REQUEST]


async def still_serves(conn: ClientConnection) -> None:
    """The connection still runs a full exchange (the handlers echo ``/``)."""
    async with conn.open_stream(REQUEST) as s:
        await s.send_data(b"still alive", end_stream=True)
        assert await s.receive_headers() == RESPONSE_200
        assert await s.read_all() == b"still alive"


class Gates:
    """Server-side gates keyed by path, released by :meth:`release_when_blocked`."""

    def __init__(self) -> None:
        self.events: dict[bytes, list[trio.Event]] = {}

    def gate(self, key: bytes, count: int = 1) -> list[trio.Event]:
        self.events[key] = [trio.Event() for _ in range(count)]
        return self.events[key]

    async def release_when_blocked(self, key: bytes) -> None:
        """Open each gate of ``key`` in turn, once every task is blocked."""
        for event in self.events[key]:
            await trio.testing.wait_all_tasks_blocked()
            event.set()


def make_handler(gates: Gates) -> Callable[[H2Stream], Awaitable[None]]:
    """Handlers for the cases below, chosen by ``:path``."""

    async def handler(stream: H2Stream) -> None:
        path = path_of(stream)
        if path == b"/":
            await echo(stream)
        elif path.startswith(b"/gate-then-echo"):
            await gates.events[path][0].wait()
            await echo(stream)
        elif path.startswith(b"/late-headers"):
            await gates.events[path][0].wait()
            await stream.send_headers(RESPONSE_200, end_stream=True)
        elif path.startswith(b"/late-body"):
            await stream.send_headers(RESPONSE_200)
            await gates.events[path][0].wait()
            await stream.send_data(b"abc", end_stream=True)
        elif path.startswith(b"/three-chunks"):
            await stream.send_headers(RESPONSE_200)
            for i, gate in enumerate(gates.events[path]):
                await stream.send_data(bytes([65 + i]) * 100)
                await gate.wait()
            await stream.send_data(b"", end_stream=True)
        elif path.startswith(b"/trailers"):
            body = await stream.read_all()
            reply = repr((body, stream.trailers)).encode()
            await stream.send_headers(RESPONSE_200)
            await stream.send_data(reply, end_stream=True)
        elif path.startswith(b"/server-send-headers"):
            await server_send_headers_case(stream)
        elif path.startswith(b"/server-send-informational"):
            await server_send_informational_case(stream)
        elif path.startswith(b"/late-hints"):
            await gates.events[path][0].wait()
            await stream.send_informational(HINTS)
            await stream.send_headers(RESPONSE_200, end_stream=True)
        else:  # pragma: no cover
            raise AssertionError(path)

    return handler


async def server_send_headers_case(stream: H2Stream) -> None:
    """Handler side of the send_headers sweep: n comes in the request's ``x-n``."""
    n = int(dict(stream.headers or [])[b"x-n"])
    attempt = await cancel_at(n, lambda: stream.send_headers(RESPONSE_200))
    if attempt.cancelled:
        # On cancellation: nothing was queued, so the headers can be sent again.
        assert not stream.core_headers_sent
        await stream.send_headers(RESPONSE_200)
    outcome = b"cancelled" if attempt.cancelled else b"completed"
    await stream.send_data(outcome + (b" fired" if attempt.fired else b""), end_stream=True)


HINTS = [(b":status", b"103"), (b"link", b"</a.css>; rel=preload")]


async def server_send_informational_case(stream: H2Stream) -> None:
    """Handler side of the send_informational sweep (n in ``x-n``): a cancelled call
    queued nothing, so the client sees exactly one 103 either way."""
    n = int(dict(stream.headers or [])[b"x-n"])
    attempt = await cancel_at(n, lambda: stream.send_informational(HINTS))
    if attempt.cancelled:
        await stream.send_informational(HINTS)
    await stream.send_headers(RESPONSE_200)
    outcome = b"cancelled" if attempt.cancelled else b"completed"
    await stream.send_data(outcome + (b" fired" if attempt.fired else b""), end_stream=True)


# ============================================================ sweeps, one per operation


async def test_cancel_send_data_fast_path() -> None:
    """A cancelled send_data queued nothing; the stream stays usable."""
    gates = Gates()
    with trio.fail_after(20):
        async with connected_pair(make_handler(gates)) as (conn, _):

            async def case(n: int) -> bool:
                async with conn.open_stream(REQUEST) as s:
                    attempt = await cancel_at(n, lambda: s.send_data(b"payload "))
                    await s.send_data(b"rest", end_stream=True)
                    await s.receive_headers()
                    body = await s.read_all()
                expected = b"rest" if attempt.cancelled else b"payload rest"
                assert body == expected
                await still_serves(conn)
                return attempt.fired

            assert await sweep(case) >= 1
            assert conn.open_streams == 0


async def test_cancel_send_data_waiting_for_write_quota() -> None:
    """send_data cancelled while it waits for write quota queued nothing."""
    gates = Gates()
    big = bytes(FIXED.write_quota + 100_000)  # admitted at once; leaves the quota negative
    with trio.fail_after(20):
        async with (
            connected_pair(make_handler(gates), server_config=FIXED) as (conn, _),
            trio.open_nursery() as nursery,
        ):

            async def case(n: int) -> bool:
                path = f"/gate-then-echo-{n}"
                gates.gate(path.encode())
                async with conn.open_stream(request(path)) as s:
                    await s.send_data(big)
                    assert s._write_quota <= 0
                    nursery.start_soon(gates.release_when_blocked, path.encode())
                    attempt = await cancel_at(n, lambda: s.send_data(b"tail"))
                    await s.end()
                    await s.receive_headers()
                    body = await s.read_all()
                assert body == (big if attempt.cancelled else big + b"tail")
                assert s._write_quota == FIXED.write_quota  # every byte returned
                await still_serves(conn)
                return attempt.fired

            assert await sweep(case) >= 2  # at least: parked, then woken


async def test_cancel_send_headers_in_a_handler() -> None:
    """A handler's cancelled send_headers queued nothing; it may send them again."""
    gates = Gates()
    with trio.fail_after(20):
        async with connected_pair(make_handler(gates)) as (conn, _):

            async def case(n: int) -> bool:
                headers = [*request("/server-send-headers"), (b"x-n", str(n).encode())]
                async with conn.open_stream(headers, end_stream=True) as s:
                    assert await s.receive_headers() == RESPONSE_200
                    outcome = await s.read_all()
                assert outcome in (b"cancelled fired", b"completed fired", b"completed")
                if n == 0:
                    assert outcome == b"cancelled fired"
                await still_serves(conn)
                return outcome != b"completed"

            await sweep(case)


async def test_cancel_send_informational_in_a_handler() -> None:
    """A handler's cancelled send_informational queued nothing: one 103 reaches the client."""
    gates = Gates()
    with trio.fail_after(20):
        async with connected_pair(make_handler(gates)) as (conn, _):

            async def case(n: int) -> bool:
                headers = [*request("/server-send-informational"), (b"x-n", str(n).encode())]
                async with conn.open_stream(headers, end_stream=True) as s:
                    assert await s.receive_headers() == RESPONSE_200
                    outcome = await s.read_all()
                    assert s.informational == [HINTS]
                assert outcome in (b"cancelled fired", b"completed fired", b"completed")
                await still_serves(conn)
                return outcome != b"completed"

            await sweep(case)


async def test_cancel_receive_informational() -> None:
    """A cancelled receive_informational consumed nothing: the 103 is still to come."""
    gates = Gates()
    with trio.fail_after(20):
        async with (
            connected_pair(make_handler(gates)) as (conn, _),
            trio.open_nursery() as nursery,
        ):

            async def case(n: int) -> bool:
                path = f"/late-hints-{n}"
                gates.gate(path.encode())
                async with conn.open_stream(request(path), end_stream=True) as s:
                    nursery.start_soon(gates.release_when_blocked, path.encode())
                    attempt = await cancel_at(n, s.receive_informational)
                    if attempt.cancelled:
                        assert await s.receive_informational() == HINTS
                    else:
                        assert attempt.value == HINTS
                    assert await s.receive_informational() is None
                    assert await s.receive_headers() == RESPONSE_200
                await still_serves(conn)
                return attempt.fired

            assert await sweep(case) >= 2


async def test_cancel_send_trailers() -> None:
    """A cancelled send_trailers queued nothing; the trailers can be sent again."""
    gates = Gates()
    trailers = [(b"x-t", b"1")]
    with trio.fail_after(20):
        async with connected_pair(make_handler(gates)) as (conn, _):

            async def case(n: int) -> bool:
                async with conn.open_stream(request("/trailers")) as s:
                    await s.send_data(b"body")
                    attempt = await cancel_at(n, lambda: s.send_trailers(trailers))
                    if attempt.cancelled:
                        assert not s.core_end_queued
                        await s.send_trailers(trailers)
                    await s.receive_headers()
                    assert await s.read_all() == repr((b"body", trailers)).encode()
                await still_serves(conn)
                return attempt.fired

            await sweep(case)


async def test_cancel_receive_headers() -> None:
    """A cancelled receive_headers consumed nothing: the headers are still there."""
    gates = Gates()
    with trio.fail_after(20):
        async with (
            connected_pair(make_handler(gates)) as (conn, _),
            trio.open_nursery() as nursery,
        ):

            async def case(n: int) -> bool:
                path = f"/late-headers-{n}"
                gates.gate(path.encode())
                async with conn.open_stream(request(path), end_stream=True) as s:
                    nursery.start_soon(gates.release_when_blocked, path.encode())
                    attempt = await cancel_at(n, s.receive_headers)
                    assert await s.receive_headers() == RESPONSE_200
                    if not attempt.cancelled:
                        assert attempt.value == RESPONSE_200
                    assert await s.read_all() == b""
                await still_serves(conn)
                return attempt.fired

            assert await sweep(case) >= 2


async def test_cancel_receive_some() -> None:
    """A cancelled receive_some lost no data."""
    gates = Gates()
    with trio.fail_after(20):
        async with (
            connected_pair(make_handler(gates)) as (conn, _),
            trio.open_nursery() as nursery,
        ):

            async def case(n: int) -> bool:
                path = f"/late-body-{n}"
                gates.gate(path.encode())
                async with conn.open_stream(request(path), end_stream=True) as s:
                    await s.receive_headers()
                    nursery.start_soon(gates.release_when_blocked, path.encode())
                    attempt = await cancel_at(n, s.receive_some)
                    got = b"" if attempt.cancelled else attempt.value
                    assert got is not None
                    assert got + await s.read_all() == b"abc"
                    assert s.closed
                await still_serves(conn)
                return attempt.fired

            assert await sweep(case) >= 2


async def test_cancel_receive_exactly() -> None:
    """A cancelled receive_exactly loses only what it had gathered; the rest still arrives."""
    gates = Gates()
    body = b"A" * 100 + b"B" * 100 + b"C" * 100
    with trio.fail_after(20):
        async with (
            connected_pair(make_handler(gates)) as (conn, _),
            trio.open_nursery() as nursery,
        ):

            async def case(n: int) -> bool:
                path = f"/three-chunks-{n}"
                gates.gate(path.encode(), count=3)
                async with conn.open_stream(request(path), end_stream=True) as s:
                    await s.receive_headers()
                    nursery.start_soon(gates.release_when_blocked, path.encode())
                    attempt = await cancel_at(n, lambda: s.receive_exactly(300))
                    f = s._in_flow
                    if n == 0:
                        assert f.delta == 0  # cancelled before it started: nothing granted
                    # Credit returned or owed, less grants ahead of data: what was read.
                    credited = f.acked + f.pending_update - f.delta
                    rest = await s.read_all()
                    consumed = len(body) - len(rest)  # read before read_all
                    assert credited == consumed
                    if attempt.cancelled:
                        assert body.endswith(rest)
                    else:
                        assert attempt.value == body
                        assert rest == b""
                await still_serves(conn)
                return attempt.fired

            assert await sweep(case) >= 3


async def test_cancel_open_stream_waiting_for_stream_quota() -> None:
    """open_stream cancelled while waiting for stream quota sent nothing and holds no quota."""
    gates = Gates()
    config = TransportConfig(max_concurrent_streams=1)
    requests_seen: list[bytes] = []

    async def counting(stream: H2Stream) -> None:
        requests_seen.append(path_of(stream))
        await make_handler(gates)(stream)

    with trio.fail_after(20):
        async with (
            connected_pair(counting, server_config=config) as (conn, _),
            trio.open_nursery() as nursery,
        ):

            async def blocker(path: str) -> None:
                async with conn.open_stream(request(path), end_stream=True) as b:
                    await b.receive_headers()
                    await b.read_all()

            async def case(n: int) -> bool:
                path = f"/gate-then-echo-{n}"
                gates.gate(path.encode())
                nursery.start_soon(blocker, path)
                await trio.testing.wait_all_tasks_blocked()
                assert conn.open_streams == 1  # the blocker holds the only slot
                seen_before = len(requests_seen)
                nursery.start_soon(gates.release_when_blocked, path.encode())
                cm = conn.open_stream(REQUEST)
                attempt = await cancel_at(n, cm.__aenter__)
                if attempt.cancelled:
                    await trio.testing.wait_all_tasks_blocked()
                    assert len(requests_seen) == seen_before  # nothing reached the server
                    # Only live streams hold quota: the cancelled call holds none.
                    assert core_open_outbound(conn) == conn.open_streams
                else:
                    s = attempt.value
                    assert s is not None
                    await s.send_data(b"in", end_stream=True)
                    await s.receive_headers()
                    assert await s.read_all() == b"in"
                    await cm.__aexit__(None, None, None)
                await still_serves(conn)
                return attempt.fired

            assert await sweep(case) >= 2
            assert conn.open_streams == 0


def core_open_outbound(conn: ClientConnection) -> int:
    """The client's count of streams holding stream quota."""
    return conn._core._open_outbound


async def test_cancel_receive_trailers_and_read_all() -> None:
    """Cancelled receive_trailers/read_all leave the stream readable to its end."""
    gates = Gates()
    with trio.fail_after(20):
        async with (
            connected_pair(make_handler(gates)) as (conn, _),
            trio.open_nursery() as nursery,
        ):
            for op in ("receive_trailers", "read_all"):

                async def case(n: int, op: str = op) -> bool:
                    path = f"/late-body-{op}-{n}"
                    gates.gate(path.encode())
                    async with conn.open_stream(request(path), end_stream=True) as s:
                        await s.receive_headers()
                        nursery.start_soon(gates.release_when_blocked, path.encode())
                        fn: Callable[[], Awaitable[Any]] = getattr(s, op)
                        attempt = await cancel_at(n, fn)
                        rest = await s.read_all()
                        if attempt.cancelled:
                            assert rest in (b"abc", b"")  # b"" only if read_all had it all
                        elif op == "read_all":
                            assert attempt.value is not None
                            assert attempt.value + rest == b"abc"
                        assert s.closed
                    await still_serves(conn)
                    return attempt.fired

                assert await sweep(case) >= 2


async def test_cancel_aclose_still_closes() -> None:
    """H2Stream.aclose closes the stream even when cancelled."""
    gates = Gates()
    with trio.fail_after(20):
        async with connected_pair(make_handler(gates)) as (conn, _):

            async def case(n: int) -> bool:
                path = f"/gate-then-echo-aclose-{n}"
                gates.gate(path.encode())[0].set()
                async with conn.open_stream(request(path)) as s:
                    attempt = await cancel_at(n, s.aclose)
                    assert s.closed
                    # This side closed it: trio's ClosedResourceError, not a reset error.
                    with pytest.raises(trio.ClosedResourceError):
                        await s.send_data(b"x")
                await still_serves(conn)
                return attempt.fired

            await sweep(case)


# ============================================ closing a server or a connection, cancelled


def tasks_under(nursery: trio.Nursery) -> list[str]:
    """Names of every task still alive in ``nursery``, its children's nurseries included."""
    names: list[str] = []
    for task in nursery.child_tasks:
        names.append(task.name)
        for child in task.child_nurseries:
            names.extend(tasks_under(child))
    return names


async def test_cancel_h2server_aclose_still_stops_the_server() -> None:
    """H2Server.aclose cancelled at any schedule point still stops serve_tcp (it
    returns by itself), closes its listeners and the connections' sockets."""

    async def case(n: int) -> bool:
        async with trio.open_nursery() as nursery:
            server: H2Server = await nursery.start(
                functools.partial(serve_tcp, echo, 0, host="127.0.0.1")
            )
            port = server.port
            async with open_connection("127.0.0.1", port) as conn:
                await still_serves(conn)
                attempt = await cancel_at(n, functools.partial(server.aclose, grace=5))
                assert server.port == port  # still answers after aclose
                # The server's connection is closed: the client's next request fails.
                with pytest.raises((trio.BrokenResourceError, trio.ClosedResourceError)):
                    await conn.request("GET", "/")
            # Leaving the nursery waits for serve_tcp: it returned without our help.
        assert tasks_under(nursery) == []
        for listener in server.listeners:
            assert isinstance(listener, trio.SocketListener)
            assert listener.socket.fileno() == -1
        with pytest.raises(OSError, match="connect"):
            await trio.open_tcp_stream("127.0.0.1", port)
        return attempt.fired

    with trio.fail_after(60):
        assert await sweep(case) >= 1


async def test_cancel_server_graceful_close_still_ends_the_connection() -> None:
    """A server connection's graceful close cancelled at any schedule point still
    ends the connection: the client sees it end, serve_connection returns by itself
    once the client hung up (it lingers for that), and its transport is closed."""

    async def case(n: int) -> bool:
        client_t, server_t = trio.testing.memory_stream_pair()
        async with trio.open_nursery() as nursery:
            sc: ServerConnection = await nursery.start(
                functools.partial(serve_connection, server_t, echo)
            )
            core = sc._core  # what H2Server.aclose runs per connection
            async with open_client_connection(client_t) as conn:
                await still_serves(conn)
                attempt = await cancel_at(n, core.graceful_close)
                assert core.done.is_set()  # loopy and the reader are over
                with pytest.raises((trio.BrokenResourceError, trio.ClosedResourceError)):
                    await conn.request("GET", "/")
            # Leaving the nursery waits for serve_connection: it returned by itself.
        assert tasks_under(nursery) == []
        with pytest.raises(trio.ClosedResourceError):
            await server_t.send_all(b"x")
        return attempt.fired

    with trio.fail_after(30):
        assert await sweep(case) >= 1


async def test_cancel_client_aclose_still_closes_the_connection() -> None:
    """ClientConnection.aclose cancelled at any schedule point still closes the
    connection: its reader and loopy end, its transport is closed, calls fail."""

    async def case(n: int) -> bool:
        client_t, server_t = trio.testing.memory_stream_pair()
        async with trio.open_nursery() as nursery:
            await nursery.start(functools.partial(serve_connection, server_t, echo))
            async with open_client_connection(client_t) as conn:
                await still_serves(conn)
                mine = trio.lowlevel.current_task().child_nurseries[-1]  # the client's
                attempt = await cancel_at(n, conn.aclose)
                await trio.testing.wait_all_tasks_blocked()
                assert tasks_under(mine) == []
                with pytest.raises(trio.ClosedResourceError):
                    await client_t.send_all(b"x")
                with pytest.raises((trio.BrokenResourceError, trio.ClosedResourceError)):
                    await conn.request("GET", "/")
            assert tasks_under(nursery) == []  # the server saw the end too
        return attempt.fired

    with trio.fail_after(30):
        assert await sweep(case) >= 1


# ============================================================ every async call checkpoints


async def test_cancel_server_connection_aclose_at_every_point() -> None:
    """ServerConnection.aclose cancelled at each of its schedule points still ends the
    connection: the running handler is cancelled ("shutdown"), serve_connection
    returns, and the request in flight fails; uncancelled, the request completes."""

    async def case(n: int) -> bool:
        started = trio.Event()
        release = trio.Event()
        reasons: list[str | None] = []

        async def handler(stream: H2Stream) -> None:
            started.set()
            try:
                await release.wait()
                await echo(stream)
            finally:
                reasons.append(stream.cancel_reason.kind if stream.cancel_reason else None)

        client_t, server_t = trio.testing.memory_stream_pair()
        returned = trio.Event()

        async def run(task_status: trio.TaskStatus[ServerConnection]) -> None:
            await serve_connection(server_t, handler, task_status=task_status)
            returned.set()

        outcome: list[object] = []
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                server: ServerConnection = await nursery.start(run)
                async with open_client_connection(client_t) as conn:

                    async def ask() -> None:
                        try:
                            outcome.append((await conn.request("POST", "/", body=b"x")).body)
                        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                            outcome.append(exc)

                    nursery.start_soon(ask)
                    await started.wait()

                    async def release_once_draining() -> None:
                        await trio.testing.wait_all_tasks_blocked()  # aclose is waiting
                        release.set()

                    nursery.start_soon(release_once_draining)
                    attempt = await cancel_at(n, server.aclose)
                    await returned.wait()
                    assert server.error is not None
        if attempt.cancelled and reasons == ["shutdown"]:
            # Cut short: the handler was cancelled, the request failed.
            assert len(outcome) == 1
            assert isinstance(outcome[0], trio.BrokenResourceError | trio.ClosedResourceError)
        else:  # the drain ran its course (or was cancelled only after it)
            assert reasons == [None]
            assert outcome == [b"x"]
        return attempt.fired

    assert await sweep(case) >= 1


async def test_every_public_async_call_checkpoints_fast_path_included() -> None:
    """Each public async call checkpoints even when it need not wait; sync calls never do."""
    body = b"0123456789"
    server_checks: list[str] = []

    async def handler(stream: H2Stream) -> None:
        if path_of(stream) != b"/check":
            return await echo(stream)
        await trio.testing.wait_all_tasks_blocked()  # the whole request is buffered
        with trio.testing.assert_checkpoints():
            assert await stream.receive_exactly(2) == b"01"
        with trio.testing.assert_checkpoints():
            assert await stream.receive_some(3) == b"234"
        with trio.testing.assert_checkpoints():
            assert await stream.read_all() == b"56789"
        with trio.testing.assert_checkpoints():
            assert await stream.receive_some() == b""  # at the end
        with trio.testing.assert_checkpoints():
            assert await stream.receive_trailers() == [(b"x-t", b"1")]
        with trio.testing.assert_checkpoints():
            assert await stream.receive_exactly(5) == b""
        with trio.testing.assert_checkpoints():
            await stream.send_informational(HINTS)
        with trio.testing.assert_checkpoints():
            await stream.send_headers(RESPONSE_200)
        with trio.testing.assert_checkpoints():
            await stream.send_data(b"reply")
        with trio.testing.assert_checkpoints():
            await stream.send_trailers([(b"x-done", b"1")])
        with trio.testing.assert_no_checkpoints():
            stream.move_on_at(trio.current_time() + 60)
        server_checks.append("ok")

    with trio.fail_after(10):
        async with connected_pair(handler) as (conn, _):
            cm = conn.open_stream(request("/check"))
            with trio.testing.assert_checkpoints():
                s = await cm.__aenter__()
            try:
                with trio.testing.assert_checkpoints():
                    await s.send_data(body)
                with trio.testing.assert_checkpoints():
                    await s.send_trailers([(b"x-t", b"1")])
                await trio.testing.wait_all_tasks_blocked()
                with trio.testing.assert_checkpoints():
                    assert await s.receive_headers() == RESPONSE_200
                with trio.testing.assert_checkpoints():
                    assert await s.receive_informational() == HINTS
                with trio.testing.assert_checkpoints():
                    assert await s.receive_informational() is None
                with trio.testing.assert_checkpoints():
                    assert await s.receive_some() == b"reply"
                with trio.testing.assert_checkpoints():
                    assert await s.receive_trailers() == [(b"x-done", b"1")]
            finally:
                await cm.__aexit__(None, None, None)
            assert server_checks == ["ok"]

            async with conn.open_stream(REQUEST) as s2:
                with trio.testing.assert_checkpoints():
                    await s2.end()
                with trio.testing.assert_no_checkpoints():
                    s2.reset()
                    s2.reset()  # idempotent
                    assert s2.closed
                with trio.testing.assert_checkpoints():
                    await s2.aclose()
            with trio.testing.assert_checkpoints():
                response = await conn.request("POST", "/", body=b"ping")
            assert (response.status, response.body) == (200, b"ping")
