"""The error family: GoAwayError from a scripted server's GOAWAY, and ``retryable``; the
entry points' error when no Trio run is active (asyncio.run)."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from pathlib import Path

import h2.events
import pytest
import trio
import trio.testing
from h2.errors import ErrorCodes
from helpers import REQUEST, open_peer_server
from hyperframe.frame import GoAwayFrame

import trio_h2t
from trio_h2t import GoAwayError, StreamRefusedError, StreamResetError


def test_every_exported_exception_has_a_bool_retryable() -> None:
    """Each exception class trio_h2t exports has a bool ``retryable`` class attribute."""
    classes = [
        v for v in vars(trio_h2t).values() if inspect.isclass(v) and issubclass(v, BaseException)
    ]
    assert GoAwayError in classes
    for cls in classes:
        assert isinstance(getattr(cls, "retryable", None), bool), cls
    assert trio_h2t.LocalProtocolError.retryable is False
    assert issubclass(GoAwayError, trio_h2t.ConnectionLostError)
    assert not trio_h2t.ConnectionLostError.retryable
    assert not trio_h2t.H2ProtocolError.retryable
    assert StreamResetError(1, ErrorCodes.REFUSED_STREAM).retryable
    assert not StreamResetError(1, ErrorCodes.REFUSED_STREAM, remote=False).retryable
    assert not StreamResetError(1, ErrorCodes.CANCEL).retryable


async def test_goaway_error_fields_refused_streams_and_connection_error() -> None:
    """A server GOAWAY(ENHANCE_YOUR_CALM, last 1, debug): fields kept, stream 3 refused."""
    outcome: dict[int, BaseException] = {}

    async def one(i: int) -> None:
        async with conn.open_stream(REQUEST, end_stream=True) as s:
            try:
                await s.receive_headers()
            except (StreamRefusedError, trio_h2t.ConnectionLostError) as exc:
                outcome[i] = exc

    with trio.fail_after(5):
        async with open_peer_server() as (conn, peer), trio.open_nursery() as nursery:
            for i in range(2):
                nursery.start_soon(one, i)
                await trio.testing.wait_all_tasks_blocked()
            await peer.read_until(lambda: len(peer.events_of(h2.events.RequestReceived)) == 2)
            frame = GoAwayFrame(0)
            frame.last_stream_id = 1
            frame.error_code = ErrorCodes.ENHANCE_YOUR_CALM
            frame.additional_data = b"slow down"
            await peer.send_raw(frame.serialize())
            await trio.testing.wait_all_tasks_blocked()
            refused = outcome[1]
            assert isinstance(refused, StreamRefusedError)
            assert refused.retryable
            cause = refused.__cause__
            assert isinstance(cause, GoAwayError)
            assert (cause.error_code, cause.last_stream_id, cause.debug_data) == (
                ErrorCodes.ENHANCE_YOUR_CALM,
                1,
                b"slow down",
            )
            assert 0 not in outcome  # stream 1 keeps running
            with pytest.raises(GoAwayError) as info:
                async with conn.open_stream(REQUEST, end_stream=True):
                    pass  # pragma: no cover
            assert info.value.retryable
            assert info.value.error_code == ErrorCodes.ENHANCE_YOUR_CALM
            await peer.transport.aclose()  # the connection ends with stream 1 open
            await trio.testing.wait_all_tasks_blocked()
            assert isinstance(conn.error, GoAwayError)
            assert conn.error.debug_data == b"slow down"
            lost = outcome[0]
            assert isinstance(lost, trio_h2t.ConnectionLostError)
            assert not lost.retryable
            assert lost.__cause__ is conn.error


_ASYNCIO_PROGRAM = """
import asyncio
import trio.testing
import trio_h2t

async def handler(stream):
    pass

async def main():
    client, server = trio.testing.memory_stream_pair()
    for enter in (
        lambda: trio_h2t.open_connection("127.0.0.1", 1).__aenter__(),
        lambda: trio_h2t.open_unix_connection("/nonexistent").__aenter__(),
        lambda: trio_h2t.open_client_connection(client).__aenter__(),
        lambda: trio_h2t.open_server(handler, 0).__aenter__(),
        lambda: trio_h2t.serve_tcp(handler, 0),
        lambda: trio_h2t.serve_listeners(handler, []),
        lambda: trio_h2t.serve_connection(server, handler),
    ):
        try:
            await enter()
        except RuntimeError as exc:
            print(exc)

asyncio.run(main())
"""


def test_entry_points_under_asyncio_say_trio_only() -> None:
    """Each entry point awaited from asyncio.run raises a RuntimeError naming trio.run()."""
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    done = subprocess.run(
        [sys.executable, "-c", _ASYNCIO_PROGRAM],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    names = [
        "open_connection",
        "open_unix_connection",
        "open_client_connection",
        "open_server",
        "serve_tcp",
        "serve_listeners",
        "serve_connection",
    ]
    assert len(lines) == len(names), done.stdout
    for line, name in zip(lines, names, strict=True):
        assert line.startswith(f"trio_h2t.{name} must run inside trio.run()"), line
        assert "asyncio.run()" in line


async def test_open_functions_without_async_with_name_the_fix() -> None:
    """``server = trio_h2t.open_server(...)`` then ``server.port``, or ``await`` on an
    ``open_*`` context manager: the error names the ``async with`` statement to write
    (Python's names ``_AsyncGeneratorContextManager``); nothing is opened."""
    with trio.socket.socket() as s:
        await s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cases = [
        (
            trio_h2t.open_server(REQUEST_HANDLER, 0, host="127.0.0.1"),
            "trio_h2t.open_server(...)",
            "`async with trio_h2t.open_server(handler, port) as server:`",
        ),
        (
            trio_h2t.open_connection("127.0.0.1", port),
            "trio_h2t.open_connection(...)",
            "`async with trio_h2t.open_connection(host, port) as conn:`",
        ),
        (
            trio_h2t.open_unix_connection("/nonexistent/socket"),
            "trio_h2t.open_unix_connection(...)",
            "`async with trio_h2t.open_unix_connection(path) as conn:`",
        ),
        (
            trio_h2t.open_client_connection(trio.testing.memory_stream_pair()[0]),
            "trio_h2t.open_client_connection(...)",
            "`async with trio_h2t.open_client_connection(transport) as conn:`",
        ),
    ]
    for cm, name, usage in cases:
        with pytest.raises(AttributeError) as attr:
            cm.port  # type: ignore[attr-defined]  # noqa: B018
        assert str(attr.value).startswith(f"{name} has no attribute 'port'")
        assert usage in str(attr.value)

        async def await_it(cm: object = cm) -> None:
            await cm  # type: ignore[misc]

        with pytest.raises(TypeError) as info:
            await await_it()
        assert str(info.value).startswith(f"{name} cannot be awaited")
        assert usage in str(info.value)
    # The same calls entered work (open_server's, here).
    async with trio_h2t.open_server(REQUEST_HANDLER, 0, host="127.0.0.1") as server:
        assert server.port > 0


async def REQUEST_HANDLER(stream: trio_h2t.H2Stream) -> None:
    """A handler for servers that take no request here."""
    await stream.send_headers([(":status", "204")], end_stream=True)  # pragma: no cover


def test_protocol_errors_are_named_by_the_side_that_failed() -> None:
    """A peer's violation is a BrokenResourceError (the outside broke it); our own
    framing failure is not; both are H2ProtocolError with an error_code."""
    remote = trio_h2t.RemoteProtocolError("bad frame", error_code=ErrorCodes.FRAME_SIZE_ERROR)
    local = trio_h2t.LocalProtocolError("could not frame", error_code=ErrorCodes.INTERNAL_ERROR)
    assert isinstance(remote, trio.BrokenResourceError)
    assert not isinstance(local, trio.BrokenResourceError | trio.ClosedResourceError)
    assert not issubclass(trio_h2t.H2ProtocolError, trio.BrokenResourceError)
    for err, code in ((remote, ErrorCodes.FRAME_SIZE_ERROR), (local, ErrorCodes.INTERNAL_ERROR)):
        assert isinstance(err, trio_h2t.H2ProtocolError)
        assert err.error_code == code


def test_grpc_reports_our_own_framing_failure_as_internal() -> None:
    """trio_h2t.grpc's client maps a LocalProtocolError (no longer a
    BrokenResourceError) to INTERNAL, and still catches it as a transport error."""
    from trio_h2t.grpc import StatusCode
    from trio_h2t.grpc._client import _TRANSPORT_ERRORS, _error_from_transport

    local = trio_h2t.LocalProtocolError("could not frame", error_code=ErrorCodes.INTERNAL_ERROR)
    assert isinstance(local, _TRANSPORT_ERRORS)
    code, details = _error_from_transport(local)
    assert code is StatusCode.INTERNAL
    assert "could not frame" in details
