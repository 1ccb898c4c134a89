"""Server connection faults: the handshake timeout, and every connection a fault boundary.

An unexpected exception in one connection's tasks (its reader, loopy, admission, the
handler runner, the handshake timer), or from its transport, ends that connection only
(docs/errors.md, "When a connection faults"). The boundary tests run over ``serve_tcp``
(or ``serve_listeners``) on 127.0.0.1 in one shape (:class:`Scene`): a second
connection streams a response in chunks throughout (ping-pong: each chunk asked for by
a byte of the request body, so both directions of that connection keep moving), the
fault is injected into one chosen connection only, its client sees GOAWAY(INTERNAL_ERROR)
or a connection error, exactly one ERROR record names the fault, the streaming
connection keeps making progress after it, a third request succeeds, and the streamed
body arrives complete and intact.
"""

from __future__ import annotations

import functools
import logging
import socket
import struct
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing
from _helpers_common import FaultyStream, read_to_eof
from h2.errors import ErrorCodes
from helpers import RESPONSE_200, ScriptedPeer, h2t_tasks, pattern
from hyperframe.frame import GoAwayFrame

from trio_h2t import (
    ClientConnection,
    ConnectionLostError,
    GoAwayError,
    H2Server,
    H2Stream,
    TransportConfig,
    _server,
    open_client_connection,
    open_connection,
    serve_connection,
    serve_listeners,
    serve_tcp,
)
from trio_h2t._connection import ConnectionCore

#: Upper bound for any test here (seconds).
LIMIT = 20


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


################################################################
# The scene: a server, a connection streaming throughout, one victim
################################################################

#: Bytes per chunk of the streamed response.
CHUNK = 4096


def chunk(i: int) -> bytes:
    """The ``i``-th chunk of the streamed response: its index, then a pattern seeded by it."""
    return i.to_bytes(4, "big") + pattern(CHUNK - 4, seed=i % 251)


def caused_by(exc: BaseException | None, kind: type[BaseException]) -> BaseException | None:
    """The first exception of ``kind`` in ``exc``'s ``__cause__`` chain (itself included)."""
    while exc is not None and not isinstance(exc, kind):
        exc = exc.__cause__
    return exc


def error_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """The ERROR (or worse) records on the ``trio_h2t`` logger."""
    return [r for r in caplog.records if r.name == "trio_h2t" and r.levelno >= logging.ERROR]


def peer_port(transport: trio.abc.Stream) -> int | None:
    """The remote TCP port of ``transport`` (unwrapping a :class:`FaultyStream`), or None."""
    while isinstance(transport, FaultyStream):
        transport = transport.inner
    if isinstance(transport, trio.SocketStream):
        try:
            return int(transport.socket.getpeername()[1])
        except OSError:
            return None
    return None


class Scene:
    """A server on 127.0.0.1 whose handler routes by path, and a client streaming
    ``/stream`` throughout the test.

    ``/stream`` sends one chunk per byte ``n`` of the request body, and ``end`` after a
    byte ``e``; ``/hold`` records its stream in ``held`` and reads the body to its end;
    ``/noanswer`` returns without a response; anything else answers ``ok``.
    """

    def __init__(self) -> None:
        self.server: H2Server | None = None
        self.held: list[H2Stream] = []
        self.held_event = trio.Event()
        self.sent = 0  # chunks the /stream handler sent
        self.received = 0  # chunks the streaming client received, each checked
        self._moved = trio.Event()  # replaced at every chunk received
        self.stop = trio.Event()  # the streaming client asks for the end
        self.streamed = trio.Event()  # the streamed response came back whole

    async def handler(self, stream: H2Stream) -> None:
        """Route by path (see the class docstring)."""
        path = stream.request.path
        if path == "/stream":
            await stream.send_headers(RESPONSE_200)
            while await stream.receive_exactly(1) == b"n":
                await stream.send_data(chunk(self.sent))
                self.sent += 1
            await stream.send_data(b"end", end_stream=True)
        elif path == "/hold":
            self.held.append(stream)
            self.held_event.set()
            await stream.read_all()
            await stream.send_headers(RESPONSE_200, end_stream=True)
        elif path == "/noanswer":
            return
        else:
            await stream.send_headers(RESPONSE_200)
            await stream.send_data(b"ok", end_stream=True)

    async def stream_throughout(
        self, port: int, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """The healthy connection: ask for chunks one at a time until ``stop``."""
        async with (
            open_connection("127.0.0.1", port) as conn,
            conn.open_stream(conn.request_headers("POST", "/stream")) as stream,
        ):
            assert (await stream.receive_headers())[0] == (b":status", b"200")
            task_status.started()
            while not self.stop.is_set():
                await stream.send_data(b"n")
                assert await stream.receive_exactly(CHUNK) == chunk(self.received)
                self.received += 1
                self._moved.set()
                self._moved = trio.Event()
            await stream.send_data(b"e", end_stream=True)
            assert await stream.read_all() == b"end"
        self.streamed.set()

    async def progressed(self, n: int) -> None:
        """Wait until the streaming client has received ``n`` chunks."""
        while self.received < n:
            await self._moved.wait()

    def core_of(self, port: int) -> ConnectionCore:
        """The server's connection whose client has local port ``port``."""
        assert self.server is not None
        [core] = [c for c in self.server._connections if peer_port(c.transport) == port]
        return core

    async def after_the_fault(self, port: int) -> None:
        """The streaming connection moves on, a new request succeeds, and the streamed
        body ends complete and intact."""
        await self.progressed(self.received + 5)
        async with open_connection("127.0.0.1", port) as conn:
            response = await conn.request("GET", "/")
            assert (response.status, response.body) == (200, b"ok")
        await self.progressed(self.received + 5)
        self.stop.set()
        await self.streamed.wait()
        assert self.sent == self.received


@asynccontextmanager
async def scene_over(
    serve: Callable[..., Any], *, port: int | None = None, before: int = 5
) -> AsyncIterator[tuple[Scene, int]]:
    """Run ``serve(handler, task_status=...)`` (serve_tcp or serve_listeners) and the
    streaming client; yield the scene and the server's port (``port``, else the
    server's own) once ``before`` chunks arrived. The server is cancelled on exit,
    after the test's checks."""
    scene = Scene()
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            scene.server = await nursery.start(functools.partial(serve, scene.handler))
            if port is None:
                port = scene.server.port
            await nursery.start(scene.stream_throughout, port)
            await scene.progressed(before)
            yield scene, port
            nursery.cancel_scope.cancel()


def serving_tcp() -> Callable[..., Any]:
    """serve_tcp on 127.0.0.1, a free port."""
    return functools.partial(serve_tcp, port=0, host="127.0.0.1")


async def open_victim(port: int, victims: list[int] | None = None) -> tuple[trio.SocketStream, int]:
    """A TCP connection to ``port`` and its local port, by which the server's side of
    it is told apart; the port is added to ``victims`` before connecting, so a fault
    armed for it is armed before the server accepts."""
    sock = trio.socket.socket()
    await sock.bind(("127.0.0.1", 0))
    local = int(sock.getsockname()[1])
    if victims is not None:
        victims.append(local)
    await sock.connect(("127.0.0.1", port))
    return trio.SocketStream(sock), local


def boom(exc: BaseException) -> Callable[..., Any]:
    """A function that raises ``exc`` whatever it is given."""

    def raise_it(*args: object, **kwargs: object) -> Any:
        raise exc

    return raise_it


def assert_internal_goaway(conn: ClientConnection, last_stream_id: int) -> None:
    """The client's connection ended with the server's GOAWAY(INTERNAL_ERROR)."""
    error = conn.error
    assert isinstance(error, GoAwayError), repr(error)
    assert error.error_code == ErrorCodes.INTERNAL_ERROR
    assert error.last_stream_id == last_stream_id


def assert_one_fault_logged(
    caplog: pytest.LogCaptureFixture, kind: type[BaseException], where: str
) -> None:
    """Exactly one ERROR record on ``trio_h2t``: the fault's traceback, and a message
    naming where it was caught."""
    [record] = error_records(caplog)
    assert record.exc_info is not None
    assert record.exc_info[0] is kind, record.getMessage()
    assert record.getMessage().startswith(where), record.getMessage()


async def hold_then_fault(
    scene: Scene,
    conn: ClientConnection,
    victim_port: int,
    inject: Callable[[ConnectionCore], None],
) -> None:
    """Open /hold on ``conn``, inject the fault into the server side of ``conn`` only,
    then send a byte of body to trigger it; the stream must fail."""
    async with conn.open_stream(conn.request_headers("POST", "/hold")) as stream:
        await scene.held_event.wait()
        inject(scene.core_of(victim_port))
        await stream.send_data(b"x")
        await stream.read_all()


async def assert_held_stream_lost(scene: Scene, kind: type[BaseException]) -> None:
    """The server stream open at the fault failed with ConnectionLostError caused by it."""
    [held] = scene.held
    with pytest.raises(ConnectionLostError) as info:
        await held.receive_some()
    assert isinstance(caused_by(info.value, kind), kind)


################################################################
# Bugs inside one connection's tasks
################################################################


@pytest.mark.injects_faults
async def test_reader_bug_ends_only_its_connection(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """h2's receive_data raising KeyError in one connection's reader ends that connection
    (GOAWAY(INTERNAL_ERROR, last 1)), logged once; the others carry on."""
    caplog.set_level(logging.DEBUG, logger="trio_h2t")

    def inject(core: ConnectionCore) -> None:
        monkeypatch.setattr(core.h2, "receive_data", boom(KeyError("reader bug")))

    async with scene_over(serving_tcp()) as (scene, port):
        tcp, victim_port = await open_victim(port)
        with pytest.raises(ConnectionLostError):
            async with open_client_connection(tcp) as conn:
                await hold_then_fault(scene, conn, victim_port, inject)
        assert_internal_goaway(conn, 1)
        await scene.after_the_fault(port)
    await assert_held_stream_lost(scene, KeyError)
    assert_one_fault_logged(caplog, KeyError, "the connection's reader raised KeyError")


@pytest.mark.injects_faults
async def test_loopy_bug_on_a_connection_item_ends_only_its_connection(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Loopy failing to frame a connection-level item (the BDP PING the first DATA
    triggers) ends that connection (GOAWAY(INTERNAL_ERROR, last 1)), logged once; the
    others carry on."""
    caplog.set_level(logging.DEBUG, logger="trio_h2t")

    def inject(core: ConnectionCore) -> None:
        monkeypatch.setattr(core.h2, "ping", boom(AssertionError("loopy bug")))

    async with scene_over(serving_tcp()) as (scene, port):
        tcp, victim_port = await open_victim(port)
        with pytest.raises(ConnectionLostError):
            async with open_client_connection(tcp) as conn:
                await hold_then_fault(scene, conn, victim_port, inject)
        assert_internal_goaway(conn, 1)
        await scene.after_the_fault(port)
    await assert_held_stream_lost(scene, AssertionError)
    assert_one_fault_logged(
        caplog, AssertionError, "the connection's writer (loopy) raised AssertionError"
    )


@pytest.mark.injects_faults
async def test_admission_bug_ends_only_its_connection(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Admission raising for one connection's request ends that connection
    (GOAWAY(INTERNAL_ERROR, last 1)), logged once; the others carry on."""
    caplog.set_level(logging.DEBUG, logger="trio_h2t")
    victim: list[int] = []
    admit = _server._Admission.admit

    def faulty_admit(self: _server._Admission, ev: Any) -> bool:
        if peer_port(self._core.transport) in victim:
            raise RuntimeError("admission bug")
        return admit(self, ev)

    monkeypatch.setattr(_server._Admission, "admit", faulty_admit)
    async with scene_over(serving_tcp()) as (scene, port):
        tcp, _ = await open_victim(port, victim)
        with pytest.raises(ConnectionLostError):
            async with open_client_connection(tcp) as conn:
                await conn.request("GET", "/")
        assert_internal_goaway(conn, 1)
        await scene.after_the_fault(port)
    assert_one_fault_logged(caplog, RuntimeError, "the connection's reader raised RuntimeError")


@pytest.mark.injects_faults
async def test_handler_runner_bug_ends_only_its_connection(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The handler runner failing after its handler returned (answering the 500) ends
    that connection (GOAWAY(INTERNAL_ERROR, last 1)), logged once; the others carry on."""
    caplog.set_level(logging.DEBUG, logger="trio_h2t")
    victim: list[int] = []
    answer_500 = _server._Admission._answer_500

    def faulty_answer_500(self: _server._Admission, stream: H2Stream) -> bool:
        if peer_port(self._core.transport) in victim:
            raise RuntimeError("handler runner bug")
        return answer_500(self, stream)

    monkeypatch.setattr(_server._Admission, "_answer_500", faulty_answer_500)
    async with scene_over(serving_tcp()) as (scene, port):
        tcp, _ = await open_victim(port, victim)
        with pytest.raises(ConnectionLostError):
            async with open_client_connection(tcp) as conn:
                await conn.request("GET", "/noanswer")
        assert_internal_goaway(conn, 1)
        await scene.after_the_fault(port)
    assert_one_fault_logged(
        caplog, RuntimeError, "the handler runner of stream 1 raised RuntimeError"
    )


@pytest.mark.injects_faults
async def test_handshake_timer_bug_ends_only_its_connection(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The handshake timer raising for one connection ends it: the client reads the
    server's SETTINGS, then GOAWAY(INTERNAL_ERROR, last 0), then EOF; logged once."""
    caplog.set_level(logging.DEBUG, logger="trio_h2t")
    victim: list[int] = []
    watch = ConnectionCore.watch_handshake

    async def faulty_watch(self: ConnectionCore, deadline: float) -> None:
        if peer_port(self.transport) in victim:
            raise RuntimeError("handshake timer bug")
        await watch(self, deadline)

    monkeypatch.setattr(ConnectionCore, "watch_handshake", faulty_watch)
    async with scene_over(serving_tcp()) as (scene, port):
        tcp, _ = await open_victim(port, victim)
        peer = ScriptedPeer(tcp, client_side=True)
        peer.h2.initiate_connection()
        await peer.flush()
        await read_to_eof(peer)
        goaways = [(f.error_code, f.last_stream_id) for f in peer.frames_of(GoAwayFrame)]
        assert goaways == [(ErrorCodes.INTERNAL_ERROR, 0)]
        await scene.after_the_fault(port)
    assert_one_fault_logged(
        caplog, RuntimeError, "the connection's handshake timer raised RuntimeError"
    )


@pytest.mark.injects_faults
async def test_bug_after_the_tasks_ended_is_confined(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug in the server's own code after a connection's tasks ended (its lingering
    close, after the client's GOAWAY) is caught at the connection's boundary and logged
    once; the client reads GOAWAY(NO_ERROR) then EOF, and the others carry on."""
    caplog.set_level(logging.DEBUG, logger="trio_h2t")
    victim: list[int] = []
    linger = _server._linger

    async def faulty_linger(transport: trio.abc.Stream) -> None:
        if peer_port(transport) in victim:
            raise RuntimeError("linger bug")
        await linger(transport)  # pragma: no cover - only the victim lingers here

    monkeypatch.setattr(_server, "_linger", faulty_linger)
    async with scene_over(serving_tcp()) as (scene, port):
        tcp, _ = await open_victim(port, victim)
        peer = ScriptedPeer(tcp, client_side=True)
        await peer.handshake()
        # The client's GOAWAY: the server answers with its own, closes, then lingers.
        await peer.send_raw(GoAwayFrame(0, last_stream_id=0).serialize())
        await read_to_eof(peer)
        goaways = [(f.error_code, f.last_stream_id) for f in peer.frames_of(GoAwayFrame)]
        assert goaways == [(ErrorCodes.NO_ERROR, 0)]
        await scene.after_the_fault(port)
    assert_one_fault_logged(caplog, RuntimeError, "the server connection raised RuntimeError")


async def test_client_reset_before_its_preface_ends_only_its_connection(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A client that connects and resets at once (the server's first read raises
    BrokenResourceError) ends its connection only; nothing is logged at ERROR."""
    caplog.set_level(logging.DEBUG, logger="trio_h2t")
    async with scene_over(serving_tcp()) as (scene, port):
        for _ in range(3):
            sock = trio.socket.socket()
            await sock.connect(("127.0.0.1", port))
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.close()  # RST
        await scene.after_the_fault(port)
    assert error_records(caplog) == []


@pytest.mark.injects_faults
async def test_bug_before_a_connection_boundary_is_confined(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug while taking on an accepted connection, before its own boundary (where
    the TLS handshake runs), closes that connection only and is logged once."""
    caplog.set_level(logging.DEBUG, logger="trio_h2t")
    victim: list[int] = []
    serve = _server._serve

    async def faulty_serve(transport: trio.abc.Stream, *args: Any) -> None:
        if peer_port(transport) in victim:
            raise RuntimeError("accept bug")
        await serve(transport, *args)

    monkeypatch.setattr(_server, "_serve", faulty_serve)
    async with scene_over(serving_tcp()) as (scene, port):
        tcp, _ = await open_victim(port, victim)
        await tcp.send_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        try:
            data = await tcp.receive_some()
        except trio.BrokenResourceError:  # closed with our preface unread: a reset
            data = b""
        assert data == b""
        await scene.after_the_fault(port)
    assert_one_fault_logged(
        caplog, RuntimeError, "taking on an accepted connection raised RuntimeError"
    )


@pytest.mark.injects_faults
async def test_serve_connection_returns_after_a_fault(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """serve_connection is a fault boundary too: a bug after the connection's tasks
    ended (its lingering close) is logged once, and serve_connection returns."""
    caplog.set_level(logging.DEBUG, logger="trio_h2t")
    monkeypatch.setattr(_server, "_linger", boom(RuntimeError("linger bug")))
    client_t, server_t = trio.testing.memory_stream_pair()
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            server = await nursery.start(serve_connection, server_t, noop_handler)
            peer = ScriptedPeer(client_t, client_side=True)
            await peer.handshake()
            await peer.send_raw(GoAwayFrame(0, last_stream_id=0).serialize())
            await read_to_eof(peer)
    assert server._core.fault_error is not None
    assert_one_fault_logged(caplog, RuntimeError, "the server connection raised RuntimeError")


################################################################
# Odd exceptions from one connection's transport
################################################################


def _odd(what: str) -> BaseException:
    """The odd exceptions the transport raises here: KeyError, RuntimeError."""
    return KeyError("send_all fault") if what == "send_all" else RuntimeError("receive_some fault")


class FaultyListener(trio.abc.Listener[trio.abc.Stream]):
    """A TCP listener that wraps every accepted stream in a :class:`FaultyStream`."""

    def __init__(self, inner: trio.SocketListener) -> None:
        self.inner = inner
        self.accepted: list[FaultyStream] = []

    async def accept(self) -> FaultyStream:
        stream = FaultyStream(await self.inner.accept(), _odd)
        self.accepted.append(stream)
        return stream

    async def aclose(self) -> None:
        await self.inner.aclose()

    @property
    def port(self) -> int:
        """The TCP port it listens on."""
        return int(self.inner.socket.getsockname()[1])

    def stream_of(self, port: int) -> FaultyStream:
        """The accepted stream whose client has local port ``port``."""
        [stream] = [s for s in self.accepted if peer_port(s) == port]
        return stream


async def faulty_tcp_listener() -> FaultyListener:
    """A :class:`FaultyListener` on 127.0.0.1, a free port."""
    [tcp] = await trio.open_tcp_listeners(0, host="127.0.0.1")
    return FaultyListener(tcp)


@pytest.mark.injects_faults
async def test_receive_some_exception_ends_only_its_connection(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A RuntimeError from one connection's receive_some ends that connection
    (GOAWAY(INTERNAL_ERROR, last 1)), logged once; the others carry on."""
    caplog.set_level(logging.DEBUG, logger="trio_h2t")
    listener = await faulty_tcp_listener()
    serve = functools.partial(serve_listeners, listeners=[listener])
    async with scene_over(serve, port=listener.port) as (scene, port):
        tcp, victim_port = await open_victim(port)
        with pytest.raises(ConnectionLostError):  # noqa: PT012
            async with open_client_connection(tcp) as conn:

                def inject(core: ConnectionCore) -> None:
                    listener.stream_of(victim_port).fail_receive = True

                await hold_then_fault(scene, conn, victim_port, inject)
        assert_internal_goaway(conn, 1)
        await scene.after_the_fault(port)
    await assert_held_stream_lost(scene, RuntimeError)
    assert_one_fault_logged(
        caplog, RuntimeError, "the transport's receive_some raised RuntimeError"
    )


@pytest.mark.injects_faults
async def test_send_all_exception_ends_only_its_connection(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A KeyError from one connection's send_all ends that connection (nothing more can
    be written: its client sees the connection lost), logged once; the others carry on."""
    caplog.set_level(logging.DEBUG, logger="trio_h2t")
    listener = await faulty_tcp_listener()
    serve = functools.partial(serve_listeners, listeners=[listener])
    async with scene_over(serve, port=listener.port) as (scene, port):
        tcp, victim_port = await open_victim(port)
        with pytest.raises(ConnectionLostError):  # noqa: PT012
            async with open_client_connection(tcp) as conn:

                def inject(core: ConnectionCore) -> None:
                    listener.stream_of(victim_port).fail_send = True

                await hold_then_fault(scene, conn, victim_port, inject)
        assert not isinstance(conn.error, GoAwayError)
        await scene.after_the_fault(port)
    await assert_held_stream_lost(scene, KeyError)
    assert_one_fault_logged(caplog, KeyError, "the transport's send_all raised KeyError")


class _RaisingStream(trio.abc.Stream):
    """A Stream wrapper with a bug: its first receive_some raises RuntimeError."""

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await trio.lowlevel.checkpoint()

    async def wait_send_all_might_not_block(self) -> None:
        await trio.lowlevel.checkpoint()

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        await trio.lowlevel.checkpoint()
        raise RuntimeError("wrapper bug")

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()


@pytest.mark.injects_faults
async def test_fault_in_the_first_bytes_sniff_is_named_as_such(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A transport that raises before the HTTP/2 preface arrives faults in the
    server's first-bytes sniff, and the log says so (it named receive_some alone,
    though the sniff also writes the HTTP/1.x answer); serve_connection returns."""
    caplog.set_level(logging.DEBUG, logger="trio_h2t")

    async def handler(stream: H2Stream) -> None:
        raise AssertionError("no request can arrive")  # pragma: no cover

    with trio.fail_after(5):
        await serve_connection(_RaisingStream(), handler)
    assert_one_fault_logged(caplog, RuntimeError, "the first-bytes sniff")


async def test_a_read_on_a_socket_closed_meanwhile_is_a_closed_resource() -> None:
    """The reader's read on a trio socket another task closed while the reader held no
    buffer (it waits for readability first) raises ClosedResourceError, not the
    ValueError trio's wait_readable gives for a file descriptor of -1 (a fault)."""
    from trio_h2t._h2state import make_h2_state
    from trio_h2t._reader import _buffer_reader

    a, b = socket.socketpair()
    with b:
        stream = trio.SocketStream(trio.socket.from_stdlib_socket(a))
        state = make_h2_state(
            client_side=True,
            max_concurrent_streams=100,
            initial_window_size=65_535,
            max_header_list_size=65_536,
        )
        read = _buffer_reader(stream, state)
        assert state.incoming_buffer.idle
        stream.socket.close()
        with pytest.raises(trio.ClosedResourceError):
            await read()
