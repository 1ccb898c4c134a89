"""Every public async callable checkpoints as its docstring says (docs/cancellation.md).

The public API is enumerated, not listed by hand: :func:`public_async_api` walks the
``__all__`` of ``trio_h2t``, ``trio_h2t.grpc`` (and its public modules ``health`` and
``reflection``) and ``trio_h2t.testing``, and takes every coroutine function, async
generator function and function returning an async context manager, at module level
and among the methods of the public classes (``__call__``, ``__aenter__``,
``__aexit__`` and ``__anext__`` included, inherited ones too: ``H2StreamView``'s come
from ``trio.abc``).

:data:`PROBES` maps each of them to a probe (``@probe(name, claim=...)``) that
exercises it. A public async callable without a probe fails
``test_every_public_async_callable_has_a_probe``, naming it; a probe whose claim is
not what the docstring's ``Checkpoint:`` sentence says fails
``test_each_probe_checks_what_the_docstring_says``.

Claims (:func:`claim_of` reads the docstring; none there means ``always``, the rule
of docs/cancellation.md):

- ``always``: the probe runs the fast path (nothing to wait for: where a missing
  checkpoint would hide) under ``trio.testing.assert_checkpoints``; for an async
  context manager, both entering and leaving.
- ``entering and leaving``: the same, for a context manager that says so.
- ``entering``: entering checkpoints (leaving is what the docstring says it is).
- ``never``: ``trio.testing.assert_no_checkpoints``.
- ``while waiting``: the first item comes without a checkpoint, a wait checkpoints.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import os
import re
import socket
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from _helpers_common import echo
from trio.testing import assert_checkpoints, assert_no_checkpoints

from trio_h2t import (
    ClientConnection,
    H2Server,
    H2Stream,
    ServerConnection,
    grpc,
    open_client_connection,
    open_connection,
    open_server,
    open_unix_connection,
    serve_connection,
    serve_listeners,
    serve_tcp,
    testing,
)
from trio_h2t._stream import TASK_INTERFACE_PREFIXES
from trio_h2t.grpc import health, reflection

ROOT = Path(__file__).resolve().parent.parent

#: The public modules whose ``__all__`` is walked.
MODULES = (
    "trio_h2t",
    "trio_h2t.grpc",
    "trio_h2t.grpc.health",
    "trio_h2t.grpc.reflection",
    "trio_h2t.testing",
)

#: Methods of a public class that count although their names start with "_".
_DUNDERS = ("__call__", "__aenter__", "__aexit__", "__anext__")

REQUEST = [(":method", "POST"), (":scheme", "http"), (":authority", "x"), (":path", "/")]
OK = [(":status", "200")]


# ============================================================ the enumeration


def _returns_async_cm(fn: Any) -> bool:
    """Whether a sync callable gives an async context manager (or async iterator)."""
    if inspect.isasyncgenfunction(inspect.unwrap(fn)):
        return True  # an asynccontextmanager function
    try:
        annotation = str(inspect.signature(fn).return_annotation)
    except (TypeError, ValueError):
        return False
    return "AsyncContextManager" in annotation


def is_async(fn: Any) -> bool:
    """A coroutine function, an async generator function, or gives an async CM."""
    if not callable(fn) or inspect.isclass(fn):
        return False
    return (
        inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn) or _returns_async_cm(fn)
    )


def public_async_api(modules: Iterable[str] = MODULES) -> dict[str, Any]:
    """``{"module.Name[.method]": callable}`` for every public async callable."""
    found: dict[str, Any] = {}
    for module_name in modules:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isclass(obj):
                for attr in dir(obj):
                    if attr.startswith("_") and attr not in _DUNDERS:
                        continue
                    if obj is H2Stream and attr.startswith(TASK_INTERFACE_PREFIXES):
                        continue  # the tasks' interface, not the users' (_stream.py)
                    static = inspect.getattr_static(obj, attr)
                    if isinstance(static, property) or (
                        attr == "__call__" and static is type.__call__
                    ):
                        continue
                    member = getattr(obj, attr)
                    if is_async(member):
                        found[f"{module_name}.{name}.{attr}"] = member
            elif is_async(obj):
                found[f"{module_name}.{name}"] = obj
    return found


_CLAIM = re.compile(r"Checkpoint:\s*(.*?)(?:\.\s|\.$|$|On cancellation)", re.S)


#: Members inherited from trio, and what trio's code does (they have no docstring of
#: ours): ``trio.abc.AsyncResource.__aenter__`` returns ``self`` without a checkpoint.
INHERITED_CLAIMS: dict[Any, str] = {trio.abc.AsyncResource.__aenter__: "never"}


def claim_of(fn: Any) -> str:
    """The docstring's ``Checkpoint:`` claim, as one of the kinds in the module doc."""
    if fn in INHERITED_CLAIMS:
        return INHERITED_CLAIMS[fn]
    doc = inspect.getdoc(fn) or ""
    found = _CLAIM.search(doc)
    if found is None:
        return "always"  # docs/cancellation.md: every public async function
    text = re.sub(r"\s*\([^)]*\)", "", " ".join(found.group(1).split())).lower()
    if text.startswith("always"):
        return "always"
    if text.startswith("entering and leaving"):
        return "entering and leaving"
    if text.startswith("entering"):
        return "entering"
    if text.startswith(("never", "none of its own")):
        return "never"
    if text.startswith("while waiting"):
        return "while waiting"
    return text  # a new wording: a probe must claim exactly this


# ============================================================ the probes

Probe = Callable[[], Awaitable[None]]
#: ``name -> (claim the probe checks, probe)``.
PROBES: dict[str, tuple[str, Probe]] = {}


def probe(*names: str, claim: str) -> Callable[[Probe], Probe]:
    """Register ``fn`` as the probe of ``names``, checking ``claim``."""

    def register(fn: Probe) -> Probe:
        for name in names:
            assert name not in PROBES, f"two probes for {name}"
            PROBES[name] = (claim, fn)
        return fn

    return register


@asynccontextmanager
async def client_to(
    handler: Callable[[H2Stream], Awaitable[None]],
) -> AsyncIterator[ClientConnection]:
    """A client of ``handler`` in memory, bounded in time."""
    with trio.fail_after(10):
        async with testing.open_memory_server(handler) as conn:
            yield conn


async def entering_and_leaving(cm: AbstractAsyncContextManager[Any], *, leave: bool = True) -> Any:
    """Enter ``cm`` (asserting a checkpoint), then leave it (asserting one if ``leave``)."""
    with assert_checkpoints():
        value = await cm.__aenter__()
    if leave:
        with assert_checkpoints():
            await cm.__aexit__(None, None, None)
    else:
        await cm.__aexit__(None, None, None)
    return value


# ---------------------------------------------------------------- the client connection


@probe("trio_h2t.ClientConnection.aclose", claim="always")
async def _client_aclose() -> None:
    async with client_to(echo) as conn:
        with assert_checkpoints():
            await conn.aclose()
        with assert_checkpoints():
            await conn.aclose()  # already closed: the fast path


@probe("trio_h2t.ClientConnection.request", claim="always")
async def _client_request() -> None:
    async with client_to(echo) as conn:
        with assert_checkpoints():
            assert (await conn.request("POST", "/", body=b"x")).body == b"x"


@probe("trio_h2t.ClientConnection.wait_not_accepting", claim="always")
async def _wait_not_accepting() -> None:
    async with client_to(echo) as conn:
        await conn.aclose()
        with assert_checkpoints():
            await conn.wait_not_accepting()  # already not accepting


@probe("trio_h2t.ClientConnection.open_stream", claim="entering")
async def _open_stream() -> None:
    async with client_to(echo) as conn:
        cm = conn.open_stream(REQUEST, end_stream=True)
        with assert_checkpoints():
            stream = await cm.__aenter__()
        assert (await stream.receive_headers())[0] == (b":status", b"200")
        assert await stream.read_all() == b""
        # "Leaving ... does not block": never a checkpoint (docs/cancellation.md's table).
        with assert_no_checkpoints():
            await cm.__aexit__(None, None, None)


@probe("trio_h2t.ClientConnection.open_stream_nowait", claim="never")
async def _open_stream_nowait() -> None:
    async with client_to(echo) as conn:
        with assert_no_checkpoints():
            cm, stream = conn.open_stream_nowait(REQUEST, end_stream=True)
        assert (await stream.receive_headers())[0] == (b":status", b"200")
        assert await stream.read_all() == b""
        with assert_no_checkpoints():
            await cm.__aexit__(None, None, None)


# ---------------------------------------------------------------- H2Stream


def _stream_probe(name: str, run: Callable[[H2Stream], Awaitable[None]]) -> None:
    """Probe ``H2Stream.<name>`` in a handler, once the whole request is buffered."""

    async def check() -> None:
        done: list[str] = []

        async def handler(stream: H2Stream) -> None:
            await trio.testing.wait_all_tasks_blocked()  # the request is all here
            await run(stream)
            done.append(name)
            if not stream.closed:
                stream.reset()

        async with client_to(handler) as conn, conn.open_stream(REQUEST) as s:
            await s.send_data(b"0123456789")
            await s.send_trailers([("x-t", "1")])
            await trio.testing.wait_all_tasks_blocked()
        assert done == [name]

    probe(f"trio_h2t.H2Stream.{name}", claim="always")(check)


async def _receive_into(stream: H2Stream) -> None:
    buffer = bytearray(4)
    with assert_checkpoints():
        assert await stream.receive_into(buffer) == 4
    assert bytes(buffer) == b"0123"


async def _anext(stream: H2Stream) -> None:
    with assert_checkpoints():
        assert await stream.__anext__() == b"0123456789"


async def _read_all(stream: H2Stream) -> None:
    with assert_checkpoints():
        assert await stream.read_all() == b"0123456789"


async def _receive_exactly(stream: H2Stream) -> None:
    with assert_checkpoints():
        assert await stream.receive_exactly(3) == b"012"


async def _receive_some(stream: H2Stream) -> None:
    with assert_checkpoints():
        assert await stream.receive_some(2) == b"01"


async def _receive_trailers(stream: H2Stream) -> None:
    await stream.read_all()
    with assert_checkpoints():
        assert await stream.receive_trailers() == [(b"x-t", b"1")]


async def _sends(stream: H2Stream) -> None:
    with assert_checkpoints():
        await stream.send_informational([(":status", "103"), ("link", "</a>")])
    with assert_checkpoints():
        await stream.send_headers(OK)
    with assert_checkpoints():
        await stream.send_data(b"reply")
    with assert_checkpoints():
        await stream.send_trailers([("x-done", "1")])


async def _end(stream: H2Stream) -> None:
    await stream.send_headers(OK)
    with assert_checkpoints():
        await stream.end()


async def _aclose(stream: H2Stream) -> None:
    with assert_checkpoints():
        await stream.aclose()
    with assert_checkpoints():
        await stream.aclose()  # already closed


for _name, _run in {
    "receive_into": _receive_into,
    "__anext__": _anext,
    "read_all": _read_all,
    "receive_exactly": _receive_exactly,
    "receive_some": _receive_some,
    "receive_trailers": _receive_trailers,
    "end": _end,
    "aclose": _aclose,
}.items():
    _stream_probe(_name, _run)


@probe(
    "trio_h2t.H2Stream.send_informational",
    "trio_h2t.H2Stream.send_headers",
    "trio_h2t.H2Stream.send_data",
    "trio_h2t.H2Stream.send_trailers",
    claim="always",
)
async def _stream_sends() -> None:
    async with client_to(_sends) as conn, conn.open_stream(REQUEST, end_stream=True) as s:
        assert await s.receive_informational() is not None
        assert await s.read_all() == b"reply"


@probe(
    "trio_h2t.H2Stream.receive_headers", "trio_h2t.H2Stream.receive_informational", claim="always"
)
async def _stream_receive_headers() -> None:
    async with client_to(_sends) as conn, conn.open_stream(REQUEST, end_stream=True) as s:
        await trio.testing.wait_all_tasks_blocked()  # the whole response is here
        with assert_checkpoints():
            assert await s.receive_informational() is not None
        with assert_checkpoints():
            assert await s.receive_headers() == [(b":status", b"200")]
        with assert_checkpoints():
            assert await s.receive_informational() is None  # after the final one


# ---------------------------------------------------------------- H2StreamView


@probe(
    "trio_h2t.H2StreamView.__aexit__",
    "trio_h2t.H2StreamView.__anext__",
    "trio_h2t.H2StreamView.aclose",
    "trio_h2t.H2StreamView.receive_some",
    "trio_h2t.H2StreamView.send_all",
    "trio_h2t.H2StreamView.send_eof",
    "trio_h2t.H2StreamView.wait_send_all_might_not_block",
    claim="always",
)
@probe("trio_h2t.H2StreamView.__aenter__", claim="never")
async def _view() -> None:
    done: list[bool] = []

    async def handler(stream: H2Stream) -> None:
        await stream.send_headers(OK)
        await trio.testing.wait_all_tasks_blocked()
        view = stream.as_stream()
        with assert_no_checkpoints():  # trio.abc's: returns self
            assert await view.__aenter__() is view
        with assert_checkpoints():
            assert await view.receive_some(2) == b"01"
        with assert_checkpoints():
            assert await view.__anext__() == b"23"
        with assert_checkpoints():
            await view.wait_send_all_might_not_block()
        with assert_checkpoints():
            await view.send_all(b"r")
        with assert_checkpoints():
            await view.send_eof()
        with assert_checkpoints():
            await view.__aexit__(None, None, None)  # aclose
        with assert_checkpoints():
            await view.aclose()  # already closed
        done.append(True)

    async with client_to(handler) as conn, conn.open_stream(REQUEST) as s:
        await s.send_data(b"0123", end_stream=True)
        assert await s.read_all() == b"r"
    assert done == [True]


# ---------------------------------------------------------------- servers


@probe("trio_h2t.ServerConnection.aclose", claim="always")
async def _server_connection_aclose() -> None:
    client_t, server_t = trio.testing.memory_stream_pair()
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            sc: ServerConnection = await nursery.start(
                functools.partial(serve_connection, server_t, echo)
            )
            async with open_client_connection(client_t):
                with assert_checkpoints():
                    await sc.aclose()
                with assert_checkpoints():
                    await sc.aclose()  # already closed


@probe("trio_h2t.H2Server.aclose", claim="always")
async def _h2server_aclose() -> None:
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            server: H2Server = await nursery.start(
                functools.partial(serve_tcp, echo, 0, host="127.0.0.1")
            )
            with assert_checkpoints():
                await server.aclose()
            with assert_checkpoints():
                await server.aclose()  # already closed


async def _returns_with_checkpoints(
    serve: Callable[..., Awaitable[Any]], stop: Callable[[Any], Awaitable[None]]
) -> None:
    """``serve(task_status=...)`` checkpoints on its way to a normal return, and raises
    Cancelled (doing nothing) when called cancelled."""
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:

            async def run(task_status: trio.TaskStatus[Any]) -> None:
                with assert_checkpoints():
                    await serve(task_status=task_status)

            handle = await nursery.start(run)
            await stop(handle)
    with trio.CancelScope() as scope:
        scope.cancel()
        with pytest.raises(trio.Cancelled):
            await serve()


async def _stop_server(server: H2Server) -> None:
    await server.aclose()


@probe("trio_h2t.serve_tcp", claim="always")
async def _serve_tcp() -> None:
    await _returns_with_checkpoints(
        functools.partial(serve_tcp, echo, 0, host="127.0.0.1"), _stop_server
    )


@probe("trio_h2t.serve_listeners", claim="always")
async def _serve_listeners() -> None:
    async def serve(**kwargs: Any) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        await serve_listeners(echo, listeners, **kwargs)

    await _returns_with_checkpoints(serve, _stop_server)


@probe("trio_h2t.serve_connection", claim="always")
async def _serve_connection() -> None:
    async def serve(**kwargs: Any) -> None:
        client_t, server_t = trio.testing.memory_stream_pair()
        await client_t.aclose()  # the peer is gone before the preface: a fast end
        await serve_connection(server_t, echo, **kwargs)

    async def nothing(_: object) -> None:
        pass

    await _returns_with_checkpoints(serve, nothing)


_WORKER = """
import os, sys, signal, trio, trio.testing
from trio_h2t import serve_worker, supervise_workers
async def hello(stream):
    await stream.send_headers([(":status", "200")])
    await stream.send_data(b"hi", end_stream=True)
async def main(which):
    if which == "serve_worker":  # stdin is at EOF: it drains and returns
        with trio.testing.assert_checkpoints():
            await serve_worker(hello, 0, host="127.0.0.1")
    else:
        async with trio.open_nursery() as nursery:
            async def stop():
                await trio.sleep(1)
                os.kill(os.getpid(), signal.SIGTERM)
            async def supervise():
                with trio.testing.assert_checkpoints():
                    code = await supervise_workers(
                        lambda port: [sys.executable, "-c", WORKER, str(port)], 1,
                        host="127.0.0.1", port=0)
                assert code == 0, code
            nursery.start_soon(supervise)
            nursery.start_soon(stop)
    print("checked", which)
WORKER = '''
import sys, trio
from trio_h2t import serve_worker
async def hello(stream):
    await stream.send_headers([(":status", "200")])
    await stream.send_data(b"hi", end_stream=True)
trio.run(lambda: serve_worker(hello, int(sys.argv[1]), host="127.0.0.1"))
'''
trio.run(main, sys.argv[1])
"""


def _run_worker_check(which: str) -> None:
    result = subprocess.run(
        [sys.executable, "-c", _WORKER, which],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert f"checked {which}" in result.stdout


@probe("trio_h2t.serve_worker", claim="always")
async def _serve_worker() -> None:
    await trio.to_thread.run_sync(_run_worker_check, "serve_worker")


@probe("trio_h2t.supervise_workers", claim="always")
async def _supervise_workers() -> None:
    await trio.to_thread.run_sync(_run_worker_check, "supervise_workers")


@probe("trio_h2t.open_server", claim="entering and leaving")
async def _open_server() -> None:
    with trio.fail_after(10):
        await entering_and_leaving(open_server(echo, 0, host="127.0.0.1"))


@probe("trio_h2t.open_connection", claim="always")
async def _open_connection() -> None:
    with trio.fail_after(10):
        async with open_server(echo, 0, host="127.0.0.1") as server:
            conn = await entering_and_leaving(open_connection("127.0.0.1", server.port))
            assert isinstance(conn, ClientConnection)


@probe("trio_h2t.open_unix_connection", claim="always")
async def _open_unix_connection() -> None:
    with tempfile.TemporaryDirectory() as folder, trio.fail_after(10):
        path = os.path.join(folder, "s")
        sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        await sock.bind(path)
        sock.listen()
        async with trio.open_nursery() as nursery:
            server: H2Server = await nursery.start(
                functools.partial(serve_listeners, echo, [trio.SocketListener(sock)])
            )
            await entering_and_leaving(open_unix_connection(path))
            await server.aclose()


@probe("trio_h2t.open_client_connection", claim="entering and leaving")
async def _open_client_connection() -> None:
    client_t, server_t = trio.testing.memory_stream_pair()
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve_connection, server_t, echo)
            await entering_and_leaving(open_client_connection(client_t))


# ---------------------------------------------------------------- trio_h2t.testing


@probe("trio_h2t.testing.open_memory_pair", claim="entering and leaving")
async def _open_memory_pair() -> None:
    with trio.fail_after(10):
        pair = await entering_and_leaving(testing.open_memory_pair(echo))
        assert isinstance(pair.client, ClientConnection)


@probe("trio_h2t.testing.open_memory_server", claim="always")
async def _open_memory_server() -> None:
    with trio.fail_after(10):
        await entering_and_leaving(testing.open_memory_server(echo))


@probe(
    "trio_h2t.testing.ChunkedStream.__aexit__",
    "trio_h2t.testing.ChunkedStream.__anext__",
    "trio_h2t.testing.ChunkedStream.aclose",
    "trio_h2t.testing.ChunkedStream.receive_some",
    "trio_h2t.testing.ChunkedStream.send_all",
    "trio_h2t.testing.ChunkedStream.wait_send_all_might_not_block",
    claim="always",
)
@probe("trio_h2t.testing.ChunkedStream.__aenter__", claim="never")
async def _chunked_stream() -> None:
    a, b = testing.chunked_stream_pair()
    with assert_no_checkpoints():  # trio.abc's: returns self
        assert await a.__aenter__() is a
    with assert_checkpoints():
        await a.wait_send_all_might_not_block()
    with assert_checkpoints():
        await a.send_all(b"abcd")
    with assert_checkpoints():
        assert await b.receive_some(2) == b"ab"
    with assert_checkpoints():
        assert await b.__anext__() == b"cd"
    with assert_checkpoints():
        await a.__aexit__(None, None, None)
    with assert_checkpoints():
        await b.aclose()


@probe("trio_h2t.testing.exchange", claim="always")
async def _exchange() -> None:
    target = testing.memory_target(echo)
    settings = testing.WireFrame(testing.FrameType.SETTINGS, 0, 0)
    plan = testing.Scenario(chunks=(testing.PREFACE, settings), expect=testing.Expect("alive"))
    async with target() as transport:
        with assert_checkpoints():
            verdict = await testing.exchange(transport, plan, answer_within=2.0)
    assert verdict is not None


@probe("trio_h2t.testing.HandlerMachine.handler", claim="always")
async def _machine_handler() -> None:
    machine = testing.HandlerMachine.__new__(testing.HandlerMachine)

    async def handler(stream: H2Stream) -> None:
        with assert_checkpoints():
            await testing.HandlerMachine.handler(machine, stream)

    async with client_to(handler) as conn:
        assert (await conn.request("POST", "/", body=b"x")).body == b"x"


@probe("trio_h2t.testing.ClientMachine.call", claim="always")
async def _machine_call() -> None:
    machine = testing.ClientMachine.__new__(testing.ClientMachine)
    async with client_to(echo) as conn:
        with assert_checkpoints():
            assert await testing.ClientMachine.call(machine, conn, b"x") == b"x"


# ---------------------------------------------------------------- gRPC


class Svc:
    """A service for the probes: each method checks its context's calls."""

    SERVICE_NAME = "probe.Svc"

    @grpc.rpc()
    async def Unary(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        with assert_checkpoints():
            await context.send_initial_metadata([("x-m", "1")])
        return request

    @grpc.rpc(grpc.MethodKind.UNARY_STREAM)
    async def Many(self, request: bytes, context: grpc.ServicerContext) -> AsyncIterator[bytes]:
        with assert_checkpoints():
            await context.write(request)
        yield request

    @grpc.rpc(grpc.MethodKind.STREAM_UNARY)
    async def Gather(self, requests: AsyncIterator[bytes], context: grpc.ServicerContext) -> bytes:
        return b"".join([r async for r in requests])

    @grpc.rpc(grpc.MethodKind.STREAM_STREAM)
    async def Echo(
        self, requests: AsyncIterator[bytes], context: grpc.ServicerContext
    ) -> AsyncIterator[bytes]:
        async for r in requests:
            yield r


@asynccontextmanager
async def grpc_world() -> AsyncIterator[tuple[grpc.Channel, health.HealthServicer]]:
    """A gRPC server (Svc, health, reflection) on 127.0.0.1 and a channel to it."""
    checks = health.HealthServicer()
    checks.set_status("", "SERVING")
    inner = grpc.Server([Svc(), checks, reflection.service(["probe.Svc"])])

    async def handler(stream: H2Stream) -> None:
        with assert_checkpoints():
            await inner(stream)

    with trio.fail_after(20):
        async with open_server(handler, 0, host="127.0.0.1") as server:  # noqa: SIM117
            async with grpc.open_channel(f"127.0.0.1:{server.port}") as channel:
                yield channel, checks


@probe(
    "trio_h2t.grpc.UnaryUnaryMethod.__call__",
    "trio_h2t.grpc.UnaryUnaryMethod.with_call",
    "trio_h2t.grpc.ServicerContext.send_initial_metadata",
    "trio_h2t.grpc.Server.__call__",
    "trio_h2t.grpc.Call.initial_metadata",
    "trio_h2t.grpc.Call.receive_response",
    claim="always",
)
async def _grpc_unary() -> None:
    async with grpc_world() as (channel, _):
        method = channel.unary_unary("/probe.Svc/Unary")
        with assert_checkpoints():
            assert await method(b"a") == b"a"
        with assert_checkpoints():
            response, call = await method.with_call(b"b")
        assert response == b"b"
        with assert_checkpoints():
            assert await call.initial_metadata() == [("x-m", "1")]  # already here
        async with method.open() as call2:  # entering: _grpc_entering checks it
            await call2.send_message(b"c")
            await call2.done_writing()
            await trio.testing.wait_all_tasks_blocked()  # the response is here
            with assert_checkpoints():
                assert await call2.receive_response() == b"c"


@probe(
    "trio_h2t.grpc.UnaryStreamMethod.__call__",
    "trio_h2t.grpc.UnaryStreamMethod.open",
    "trio_h2t.grpc.StreamStreamMethod.__call__",
    "trio_h2t.grpc.StreamStreamMethod.open",
    "trio_h2t.grpc.StreamUnaryMethod.open",
    "trio_h2t.grpc.UnaryUnaryMethod.open",
    "trio_h2t.grpc.health.HealthStub.Watch",
    "trio_h2t.grpc.reflection.ReflectionStub.ServerReflectionInfo",
    claim="entering",
)
async def _grpc_entering() -> None:
    async with grpc_world() as (channel, _):
        many = channel.unary_stream("/probe.Svc/Many")
        echo_ = channel.stream_stream("/probe.Svc/Echo")
        gather = channel.stream_unary("/probe.Svc/Gather")
        unary = channel.unary_unary("/probe.Svc/Unary")
        openers: list[AbstractAsyncContextManager[Any]] = [
            many(b"x"),
            many.open(),
            echo_([b"x"]),
            echo_.open(),
            gather.open(),
            unary.open(),
            health.HealthStub(channel).Watch(health.HealthCheckRequest(service="")),
            reflection.ReflectionStub(channel).ServerReflectionInfo(),
        ]
        for cm in openers:
            await entering_and_leaving(cm, leave=False)


@probe(
    "trio_h2t.grpc.StreamUnaryMethod.__call__",
    "trio_h2t.grpc.StreamUnaryMethod.with_call",
    "trio_h2t.grpc.Call.send_message",
    "trio_h2t.grpc.Call.done_writing",
    "trio_h2t.grpc.Call.receive_message",
    "trio_h2t.grpc.Call.__anext__",
    "trio_h2t.grpc.ServicerContext.write",
    claim="always",
)
async def _grpc_streams() -> None:
    async with grpc_world() as (channel, _):
        gather = channel.stream_unary("/probe.Svc/Gather")
        with assert_checkpoints():
            assert await gather([b"a", b"b"]) == b"ab"
        with assert_checkpoints():
            assert (await gather.with_call([b"c"]))[0] == b"c"
        async with channel.stream_stream("/probe.Svc/Echo").open() as call:
            with assert_checkpoints():
                await call.send_message(b"1")
            with assert_checkpoints():
                await call.send_message(b"2")
            with assert_checkpoints():
                await call.done_writing()
            await trio.testing.wait_all_tasks_blocked()  # both answers are here
            with assert_checkpoints():
                assert await call.receive_message() == b"1"
            with assert_checkpoints():
                assert await call.__anext__() == b"2"
        async with channel.unary_stream("/probe.Svc/Many")(b"w") as many:
            assert [m async for m in many] == [b"w", b"w"]


@probe(
    "trio_h2t.grpc.Channel.aclose", "trio_h2t.grpc.Channel.wait_for_state_change", claim="always"
)
async def _channel() -> None:
    async with grpc_world() as (channel, _):
        state = channel.get_state()
        with assert_checkpoints():
            await channel.aclose()
        with assert_checkpoints():
            assert await channel.wait_for_state_change(state) != state  # changed already
        with assert_checkpoints():
            await channel.aclose()  # already closed


@probe("trio_h2t.grpc.Channel.wait_for_subchannel_change", claim="always")
async def _subchannel_change() -> None:
    with trio.fail_after(10):
        async with (
            open_server(grpc.Server([Svc()]), 0, host="127.0.0.1") as server,
            grpc.open_channel(f"127.0.0.1:{server.port}") as channel,
        ):
            assert await channel.unary_unary("/probe.Svc/Unary")(b"x") == b"x"
            changed = trio.Event()

            async def wait() -> None:
                with assert_checkpoints():
                    await channel.wait_for_subchannel_change()
                changed.set()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(wait)
                await trio.testing.wait_all_tasks_blocked()
                assert not changed.is_set()
                await server.aclose()  # its GOAWAY changes the subchannel
            assert changed.is_set()


@probe("trio_h2t.grpc.open_channel", claim="entering and leaving")
async def _open_channel() -> None:
    with trio.fail_after(10):
        async with open_server(grpc.Server([Svc()]), 0, host="127.0.0.1") as server:
            await entering_and_leaving(grpc.open_channel(f"127.0.0.1:{server.port}"))


@probe("trio_h2t.grpc.Server.__aexit__", claim="never")
async def _server_aexit() -> None:
    with assert_no_checkpoints():
        await grpc.Server([]).__aexit__(None, None, None)


@probe("trio_h2t.grpc.health.HealthStub.Check", claim="always")
async def _health_check() -> None:
    async with grpc_world() as (channel, _):
        with assert_checkpoints():
            response = await health.HealthStub(channel).Check(health.HealthCheckRequest(service=""))
        assert response.status == health.ServingStatus.SERVING


@probe("trio_h2t.grpc.health.HealthServicer.Check", claim="never")
async def _servicer_check() -> None:
    checks = health.HealthServicer()
    checks.set_status("", "SERVING")
    context: Any = None  # Check does not use it
    with assert_no_checkpoints():
        response = await checks.Check(health.HealthCheckRequest(service=""), context)
    assert response.status == health.ServingStatus.SERVING


@probe("trio_h2t.grpc.health.HealthServicer.Watch", claim="while waiting")
async def _servicer_watch() -> None:
    checks = health.HealthServicer()
    checks.set_status("", "SERVING")
    context: Any = None
    watch = checks.Watch(health.HealthCheckRequest(service=""), context)
    assert isinstance(watch, AsyncIterator)
    with assert_no_checkpoints():  # the current status, at once
        first = await watch.__anext__()
    assert first.status == health.ServingStatus.SERVING
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:

            async def change() -> None:
                await trio.testing.wait_all_tasks_blocked()
                checks.set_status("", "NOT_SERVING")

            nursery.start_soon(change)
            with assert_checkpoints():  # it waited for the change
                second = await watch.__anext__()
    assert second.status == health.ServingStatus.NOT_SERVING
    await watch.aclose()  # type: ignore[attr-defined]


# ============================================================ the tests


def unprobed(api: dict[str, Any]) -> list[str]:
    """The public async callables of ``api`` that no probe exercises."""
    return sorted(set(api) - set(PROBES))


API = public_async_api()


def test_the_enumeration_finds_the_known_corners() -> None:
    """The walk finds the kinds the issue named: receive_into, the view, aclose, __aexit__,
    open_* and serve_*, and the gRPC methods' open (an empty walk is no pass)."""
    for name in (
        "trio_h2t.H2Stream.receive_into",
        "trio_h2t.H2StreamView.__aexit__",
        "trio_h2t.ClientConnection.aclose",
        "trio_h2t.open_connection",
        "trio_h2t.open_server",
        "trio_h2t.serve_tcp",
        "trio_h2t.grpc.UnaryUnaryMethod.open",
        "trio_h2t.testing.exchange",
    ):
        assert name in API, name


def test_every_public_async_callable_has_a_probe() -> None:
    """Each public async callable is exercised by a probe here (a new one fails, named)."""
    missing = unprobed(API)
    assert not missing, f"public async callables with no probe in {__file__}: {missing}"
    stale = sorted(set(PROBES) - set(API))
    assert not stale, f"probes of names that are no longer public async callables: {stale}"


def test_each_probe_checks_what_the_docstring_says() -> None:
    """The claim each probe checks is the docstring's ``Checkpoint:`` claim."""
    wrong = {
        name: (claim_of(API[name]), PROBES[name][0])
        for name in sorted(set(API) & set(PROBES))
        if claim_of(API[name]) != PROBES[name][0]
    }
    assert not wrong, f"docstring claim vs the probe's claim: {wrong}"


@pytest.mark.parametrize("name", sorted(PROBES))
async def test_probe(name: str) -> None:
    """The probe of ``name`` finds the checkpoints its docstring promises."""
    await PROBES[name][1]()
