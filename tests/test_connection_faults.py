"""Server connection faults: the handshake timeout, and unexpected transport exceptions
confined to their own connection."""

from __future__ import annotations

import functools
import logging

import pytest
import trio
import trio.testing
from helpers import ScriptedPeer, h2t_tasks

from trio_h2t import (
    ConnectionLostError,
    H2Stream,
    TransportConfig,
    open_client_connection,
    serve_connection,
)


async def noop_handler(stream: object) -> None:
    """A handler that is never expected to run."""


async def test_server_closes_a_client_that_never_handshakes(autojump_clock: object) -> None:
    """serve_connection returns (the client sees EOF) after handshake_timeout of silence."""
    client_t, server_t = trio.testing.memory_stream_pair()
    config = TransportConfig(handshake_timeout=3)
    start = trio.current_time()
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                functools.partial(serve_connection, server_t, noop_handler, config=config)
            )
            peer = ScriptedPeer(client_t, client_side=True)
            while not peer.eof:
                await peer.receive()  # the server's SETTINGS, then EOF
    assert trio.current_time() - start == pytest.approx(3)
    assert h2t_tasks() == []


async def test_server_keeps_an_idle_client_that_handshook(autojump_clock: object) -> None:
    """A client that completed the handshake may stay idle longer than handshake_timeout."""
    client_t, server_t = trio.testing.memory_stream_pair()
    config = TransportConfig(handshake_timeout=3)
    async with trio.open_nursery() as nursery:
        core = await nursery.start(
            functools.partial(serve_connection, server_t, noop_handler, config=config)
        )
        peer = ScriptedPeer(client_t, client_side=True)
        await peer.handshake()
        await trio.sleep(30)
        assert core.error is None
        assert "h2-handshake-timeout" not in [t.name for t in h2t_tasks()]
        await client_t.aclose()
    assert core.error is not None
    assert "handshake" not in str(core.error)


class FaultyStream(trio.abc.Stream):
    """A Stream wrapper whose ``receive_some``/``send_all`` raise odd exceptions once armed."""

    def __init__(self, inner: trio.abc.Stream) -> None:
        self.inner = inner
        self.fail_receive = False
        self.fail_send = False

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        if self.fail_send:
            raise KeyError("send_all fault")
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        data = await self.inner.receive_some(max_bytes)
        if self.fail_receive:
            raise RuntimeError("receive_some fault")
        return data

    async def aclose(self) -> None:
        await self.inner.aclose()


def post(path: str) -> list[tuple[bytes, bytes]]:
    """A POST request's headers for ``path``."""
    return [
        (b":method", b"POST"),
        (b":scheme", b"http"),
        (b":authority", b"example"),
        (b":path", path.encode()),
    ]


async def echo(stream: H2Stream) -> None:
    """Handler: answer 200 with the request body."""
    body = await stream.read_all()
    await stream.send_headers([(b":status", b"200")])
    await stream.send_data(body, end_stream=True)


def caused_by(exc: BaseException | None, kind: type[BaseException]) -> BaseException | None:
    """The first exception of ``kind`` in ``exc``'s ``__cause__`` chain (itself included)."""
    while exc is not None and not isinstance(exc, kind):
        exc = exc.__cause__
    return exc


async def healthy_roundtrip(nursery: trio.Nursery) -> bytes:
    """Serve a second, healthy connection in ``nursery``; one request's echoed body."""
    client_t, server_t = trio.testing.memory_stream_pair()
    nursery.start_soon(serve_connection, server_t, echo)
    async with open_client_connection(client_t) as conn, conn.open_stream(post("/")) as s:
        await s.send_data(b"ping", end_stream=True)
        assert (await s.receive_headers())[0] == (b":status", b"200")
        return await s.read_all()


def error_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """The ERROR (or worse) records on the ``trio_h2t`` logger."""
    return [r for r in caplog.records if r.name == "trio_h2t" and r.levelno >= logging.ERROR]


async def test_receive_some_exception_ends_only_its_connection(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A RuntimeError from receive_some ends that connection, logged once; others carry on."""
    caplog.set_level(logging.DEBUG, logger="trio_h2t")
    streams: list[H2Stream] = []
    waiting = trio.Event()

    async def handler(stream: H2Stream) -> None:
        streams.append(stream)
        waiting.set()
        await stream.read_all()  # cancelled when the connection fails

    client_t, server_t = trio.testing.memory_stream_pair()
    faulty = FaultyStream(server_t)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            core = await nursery.start(serve_connection, faulty, handler)
            with pytest.raises((trio.BrokenResourceError, trio.ClosedResourceError)):  # noqa: PT012
                async with (
                    open_client_connection(client_t) as conn,
                    conn.open_stream(post("/wait")) as s,
                ):
                    await waiting.wait()
                    faulty.fail_receive = True
                    await s.send_data(b"x")
                    await s.read_all()
            assert await healthy_roundtrip(nursery) == b"ping"
    # The server stream open at the fault fails with ConnectionLostError caused by it.
    with pytest.raises(ConnectionLostError) as info:
        await streams[0].read_all()
    assert isinstance(caused_by(info.value, RuntimeError), RuntimeError)
    assert isinstance(core.error, ConnectionLostError)
    assert isinstance(core.error.__cause__, RuntimeError)
    [record] = error_records(caplog)
    assert record.exc_info is not None
    assert record.exc_info[0] is RuntimeError
    assert h2t_tasks() == []


async def test_send_all_exception_ends_only_its_connection(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A KeyError from send_all ends that connection, logged once; others carry on."""
    caplog.set_level(logging.DEBUG, logger="trio_h2t")
    client_t, server_t = trio.testing.memory_stream_pair()
    faulty = FaultyStream(server_t)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            core = await nursery.start(serve_connection, faulty, echo)
            with pytest.raises((trio.BrokenResourceError, trio.ClosedResourceError)):  # noqa: PT012
                async with open_client_connection(client_t) as conn:
                    faulty.fail_send = True
                    async with conn.open_stream(post("/")) as s:
                        await s.send_data(b"ping", end_stream=True)
                        await s.read_all()
            assert await healthy_roundtrip(nursery) == b"ping"
    assert isinstance(core.error, ConnectionLostError)
    assert isinstance(core.error.__cause__, KeyError)
    [record] = error_records(caplog)
    assert record.exc_info is not None
    assert record.exc_info[0] is KeyError
    assert h2t_tasks() == []
