"""Endings on a real TCP socket (127.0.0.1): the reader's and loopy's direct socket path.

The reader ``recv_into``s and loopy ``sendmsg``s the stdlib socket under trio's
(``_sockopts.stdlib_socket``), skipping ``trio.SocketStream``'s wrappers. These
tests hold that path to what the wrappers promise (``ClosedResourceError`` for a
socket closed under a task, ``BrokenResourceError`` for a peer that broke the
connection, cancellation as trio's) and to what docs/errors.md says is logged: a
peer that hangs up or resets, or a connection closed under its tasks, logs nothing
at WARNING or above (the autouse fixture in conftest.py also fails any test that
logs a connection fault).

Each test answers one of the endings seen at the end of a benchmark run
(``benchmarks/peers/grpc_peers.py --preset c1000``): the server's reader admitted
requests after its connection had failed (their handlers then failed on the
finished control buffer: an ERROR with a traceback through ``sendmsg`` and a
WARNING per call), and the client's reader, runnable while ``ClientConnection.aclose``
closed its socket, waited on file descriptor -1 (``ValueError``, logged as a fault).
"""

from __future__ import annotations

import errno
import logging
import select
import socket
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import h2.config
import h2.connection
import h2.settings
import pytest
import trio
import trio.testing
from helpers import REQUEST, RESPONSE_200

import trio_h2t
from trio_h2t import (
    ConnectionLostError,
    H2Stream,
    grpc,
    open_client_connection,
    serve_connection,
)
from trio_h2t._connection import ConnectionCore
from trio_h2t._sockopts import stream_error, wait_readable, wait_writable

#: Upper bound for any test here (seconds).
LIMIT = 20

#: A body large enough to fill both kernels' socket buffers on loopback, so loopy
#: is inside a write (waiting for the socket to drain) when the peer goes away.
LARGE = 64 << 20

#: Rounds of a test whose outcome on the old code depended on trio's order of two
#: runnable tasks.
ROUNDS = 20


def loud_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """trio_h2t's records at WARNING or above."""
    return [
        r for r in caplog.records if r.name.startswith("trio_h2t") and r.levelno >= logging.WARNING
    ]


@asynccontextmanager
async def tcp_pair() -> AsyncIterator[tuple[trio.SocketStream, socket.socket]]:
    """A ``trio.SocketStream`` and the other end as a non-blocking stdlib socket
    (driven by hand: sends are synchronous), connected on 127.0.0.1."""
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    async with listeners[0] as listener:
        port = listener.socket.getsockname()[1]
        raw = socket.create_connection(("127.0.0.1", port))
        stream = await listener.accept()
    raw.setblocking(False)
    try:
        yield stream, raw
    finally:
        raw.close()
        await trio.aclose_forcefully(stream)


def reset_on_close(sock: socket.socket) -> None:
    """Make ``sock.close()`` send a TCP RST (SO_LINGER 0): a peer that resets."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def wait_queued(stream: trio.SocketStream) -> None:
    """Block (synchronously: no checkpoint) until ``stream``'s socket has bytes to read."""
    ready, _, _ = select.select([stream.socket.fileno()], [], [], 5)
    assert ready, "the bytes sent on loopback did not arrive"


def raw_client() -> h2.connection.H2Connection:
    conn = h2.connection.H2Connection(
        h2.config.H2Configuration(client_side=True, header_encoding=None)
    )
    conn.initiate_connection()
    return conn


def raw_server() -> h2.connection.H2Connection:
    conn = h2.connection.H2Connection(
        h2.config.H2Configuration(client_side=False, header_encoding=None)
    )
    conn.initiate_connection()
    return conn


async def drain(raw: socket.socket) -> bytes:
    """Read what ``raw`` has until EOF or a reset (the bytes read)."""
    got = bytearray()
    while True:
        try:
            data = raw.recv(1 << 16)
        except BlockingIOError:
            await trio.lowlevel.wait_readable(raw)
            continue
        except ConnectionResetError:
            return bytes(got)
        if not data:
            return bytes(got)
        got += data


async def read_some(raw: socket.socket) -> bytes:
    """The next bytes ``raw`` receives (b"" at EOF)."""
    while True:
        try:
            return raw.recv(1 << 16)
        except BlockingIOError:
            await trio.lowlevel.wait_readable(raw)


# ------------------------------------------------------------ _sockopts itself


async def test_waiting_on_a_closed_socket_is_closed_resource_error() -> None:
    """``_sockopts.wait_readable`` / ``wait_writable`` on a closed socket raise trio's
    ClosedResourceError (trio's own wait raises ValueError for its file descriptor
    -1, and keeps the task registered under -1), again and again."""
    for _ in range(2):
        a, b = trio.socket.socketpair()
        a.close()
        b.close()
        with pytest.raises(trio.ClosedResourceError):
            await wait_readable(a)
        with pytest.raises(trio.ClosedResourceError):
            await wait_writable(b)


async def test_a_socket_closed_during_the_wait_wakes_it() -> None:
    """A socket closed by another task while one waits on it wakes the waiter with
    ClosedResourceError (trio's ``notify_closing``, called by ``trio.socket``'s close)."""
    a, b = trio.socket.socketpair()
    raised: list[BaseException] = []

    async def waiter() -> None:
        try:
            await wait_readable(a)
        except trio.ClosedResourceError as exc:
            raised.append(exc)

    with b:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(waiter)
            await trio.testing.wait_all_tasks_blocked()
            a.close()
    assert len(raised) == 1


@pytest.mark.parametrize(
    ("code", "closed"),
    [
        (errno.EBADF, True),
        (errno.ENOTSOCK, True),
        (errno.ECONNRESET, False),
        (errno.EPIPE, False),
        (errno.ETIMEDOUT, False),
    ],
)
def test_stream_error_maps_as_trio_socket_stream(code: int, closed: bool) -> None:
    """``stream_error`` turns an OSError into the stream error trio.SocketStream
    raises: ClosedResourceError without a cause for a closed socket, else
    BrokenResourceError caused by the OSError."""
    exc = OSError(code, "x")
    err = stream_error(exc)
    if closed:
        assert type(err) is trio.ClosedResourceError
        assert err.__cause__ is None
    else:
        assert type(err) is trio.BrokenResourceError
        assert err.__cause__ is exc


# ------------------------------------------------------- reading after the ending


async def test_server_admits_no_request_read_after_its_connection_failed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A request whose bytes arrive as the connection fails starts no handler.

    The connection fails (as when loopy's ``sendmsg`` meets a reset) while the
    reader waits on the socket and the next request is already in the kernel's
    buffer: the reader wakes with it, but the connection is over, so it reads on
    no more (it used to admit the request, whose handler then failed on the
    finished control buffer and was logged).
    """
    caplog.set_level(logging.DEBUG, logger="trio_h2t")
    started: list[int] = []

    async def handler(stream: H2Stream) -> None:
        started.append(stream.stream_id)
        await stream.receive_headers()
        await trio.sleep_forever()

    peer = raw_client()
    peer.send_headers(1, REQUEST, end_stream=True)
    with trio.fail_after(LIMIT):
        async with tcp_pair() as (server_t, raw), trio.open_nursery() as nursery:
            raw.send(peer.data_to_send())
            conn = await nursery.start(serve_connection, server_t, handler)
            core = conn._core
            await trio.testing.wait_all_tasks_blocked()  # handler 1 started; reader waits
            assert started == [1]
            peer.send_headers(3, REQUEST, end_stream=True)
            raw.send(peer.data_to_send())
            wait_queued(server_t)
            # In the same step (no checkpoint): the connection fails with the
            # request in the socket's buffer and the reader parked on the socket.
            lost = ConnectionLostError("writing to the connection failed")
            lost.__cause__ = trio.BrokenResourceError("socket connection broken")
            core.fail(lost)
    assert started == [1]
    assert core.error is lost
    assert loud_records(caplog) == []


async def test_grpc_server_logs_nothing_for_a_request_read_after_its_connection_failed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The same ending under the gRPC layer: no handler runs for the late request and
    nothing is logged at WARNING or above (it used to log the handler's
    ``ConnectionClosingError`` at ERROR and "returned without ending its response"
    at WARNING)."""
    caplog.set_level(logging.DEBUG, logger="trio_h2t")
    calls: list[bytes] = []

    async def unary(request: bytes, context: grpc.ServicerContext) -> bytes:
        calls.append(request)
        if request == b"first":
            await trio.sleep_forever()
        return request

    server = grpc.Server([{"/t.T/U": grpc.unary_unary_handler(unary)}])
    grpc_headers = [
        (b":method", b"POST"),
        (b":scheme", b"http"),
        (b":authority", b"localhost"),
        (b":path", b"/t.T/U"),
        (b"content-type", b"application/grpc"),
        (b"te", b"trailers"),
    ]

    def call(stream_id: int, message: bytes) -> bytes:
        peer.send_headers(stream_id, grpc_headers)
        peer.send_data(stream_id, b"\x00" + struct.pack(">I", len(message)) + message, True)
        return peer.data_to_send()

    with trio.fail_after(LIMIT):
        for _ in range(ROUNDS):
            calls.clear()
            peer = raw_client()
            async with tcp_pair() as (server_t, raw), trio.open_nursery() as nursery:
                raw.send(call(1, b"first"))
                conn = await nursery.start(serve_connection, server_t, server)
                await trio.testing.wait_all_tasks_blocked()
                assert calls == [b"first"]
                raw.send(call(3, b"second"))
                wait_queued(server_t)
                conn._core.fail(ConnectionLostError("writing to the connection failed"))
            assert calls == [b"first"]
    assert loud_records(caplog) == []


class CloseAfterReaderStep(trio.abc.Instrument):
    """Closes ``transport`` right after the step in which the reader task dispatched
    the response headers of ``stream``, before any other task runs.

    Where that step ended at the reader's schedule point (it keeps a frame buffer
    after a large read, so it checkpoints before its next read), the reader is
    runnable but not waiting on the socket: in a real run trio decides whether the
    task that closes runs before or after the reader; this instrument takes the order
    that used to fail, every time. Where the step ended in the wait for the socket
    (the buffer was dropped after a short read), the close comes from the next task's
    step, as ``aclose`` from another task would: trio wakes the waiting reader with
    ClosedResourceError (``notify_closing``), which it refuses from the closing task
    itself.
    """

    def __init__(self, transport: trio.SocketStream) -> None:
        self.transport = transport
        self.stream: H2Stream | None = None  # armed once set
        self.closed = False
        self.reader_waited: int | None = None  # tasks waiting to read after its step
        self.baseline = _tasks_waiting_read()

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        stream = self.stream
        if self.closed or stream is None or task.name != "h2-reader" or stream._headers is None:
            return
        # Besides trio's own, only the reader of this test's run waits on a socket
        # (the peer's is a stdlib socket driven by hand).
        self.reader_waited = _tasks_waiting_read() - self.baseline
        if not self.reader_waited:
            self._close()  # else it waits on the socket: closed from the next task's step

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if self.reader_waited and not self.closed and task.name != "h2-reader":
            self._close()

    def _close(self) -> None:
        self.closed = True
        self.transport.socket.close()  # what aclose does first (notify_closing, close)


def _tasks_waiting_read() -> int:
    return trio.lowlevel.current_statistics().io_statistics.tasks_waiting_read


@pytest.mark.parametrize(
    "pad",
    [0, 4 * 1024],
    ids=["reader-waits-on-the-socket", "reader-between-reads"],
)
async def test_client_reader_sees_its_socket_closed_under_it(
    caplog: pytest.LogCaptureFixture, pad: int
) -> None:
    """The client's transport closed while its reader is between reads (runnable, not
    waiting on the socket: the response headers came in a large read, so the reader
    kept its frame buffer and checkpoints before its next read) or while it waits on
    the socket (a short read, the usual case): the reader sees trio's
    ClosedResourceError, as ``trio.SocketStream.receive_some`` would give it, and the
    connection ends as lost; nothing is logged at WARNING or above.

    ``ClientConnection.aclose`` closes the transport so, once loopy has ended: the
    reader, woken by the server's last bytes, may not have run yet. It used to wait
    on file descriptor -1 (``ValueError`` from trio's epoll registration, logged as
    a fault; trio's I/O manager then kept that registration, so every later wait on
    a closed socket in the run raised ``BusyResourceError``).
    """
    caplog.set_level(logging.DEBUG, logger="trio_h2t")
    response = RESPONSE_200 + ([(b"x-pad", b"p" * pad)] if pad else [])
    with trio.fail_after(LIMIT):
        async with tcp_pair() as (client_t, raw):
            closer = CloseAfterReaderStep(client_t)
            trio.lowlevel.add_instrument(closer)
            try:
                server = raw_server()
                raw.send(server.data_to_send())  # its SETTINGS
                async with open_client_connection(client_t) as conn:
                    async with conn.open_stream(REQUEST, end_stream=True) as stream:
                        while stream.stream_id not in server.streams:
                            server.receive_data(await read_some(raw))
                        closer.stream = stream
                        server.send_headers(stream.stream_id, response)
                        raw.send(server.data_to_send())
                        await stream.receive_headers()
                        with pytest.raises(ConnectionLostError) as info:
                            await stream.receive_some()
                    assert closer.closed
                    assert closer.reader_waited == (0 if pad else 1)  # the case it names
                    assert isinstance(conn.error, ConnectionLostError)
                    assert isinstance(conn.error.__cause__, trio.ClosedResourceError)
                    assert info.value.__cause__ is conn.error
            finally:
                trio.lowlevel.remove_instrument(closer)
    assert loud_records(caplog) == []


# --------------------------------------------------- the peer goes away mid-write


async def test_server_handler_writing_a_large_body_to_a_client_that_resets(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Loopy is inside a write (the client reads nothing) when the client resets the
    connection: loopy's ``sendmsg`` fails with ECONNRESET or EPIPE, which is the
    connection lost (``BrokenResourceError`` under it), and the handler's write
    ends with ConnectionLostError, or the handler is cancelled ("connection-lost");
    logged at DEBUG only."""
    caplog.set_level(logging.DEBUG, logger="trio_h2t")
    outcome: list[BaseException] = []
    writing = trio.Event()

    async def handler(stream: H2Stream) -> None:
        await stream.receive_headers()
        await stream.send_headers(RESPONSE_200)
        writing.set()
        try:
            await stream.send_data(bytes(LARGE), end_stream=True)
        except BaseException as exc:
            outcome.append(exc)
            raise

    # The client opens its windows wide: the server's write then waits on the socket,
    # not on flow control.
    peer = raw_client()
    peer.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 2**31 - 1})
    peer.increment_flow_control_window(2**31 - 1 - 65535)
    peer.send_headers(1, REQUEST, end_stream=True)
    with trio.fail_after(LIMIT):
        async with tcp_pair() as (server_t, raw), trio.open_nursery() as nursery:
            raw.send(peer.data_to_send())
            conn = await nursery.start(serve_connection, server_t, handler)
            await writing.wait()
            await trio.testing.wait_all_tasks_blocked()  # loopy waits on the full socket
            assert conn._core.loopy._writing
            reset_on_close(raw)
            raw.close()
    # The whole body may have been queued before the reset (send_data returned).
    assert all(isinstance(exc, trio.Cancelled | ConnectionLostError) for exc in outcome)
    assert conn.error is not None
    assert isinstance(conn.error, ConnectionLostError)
    chain = conn.error.__cause__
    assert isinstance(chain, trio.BrokenResourceError), chain
    assert loud_records(caplog) == []


async def test_server_cancelled_while_reading_and_writing_a_large_body(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A server stopped at once (its task cancelled) while its reader waits on the
    socket and loopy waits inside a write to a client that reads nothing: the
    handler sees Cancelled, the connection ends, and nothing is logged at WARNING
    or above."""
    caplog.set_level(logging.DEBUG, logger="trio_h2t")
    outcome: list[BaseException] = []
    writing = trio.Event()

    streams: list[H2Stream] = []

    async def handler(stream: H2Stream) -> None:
        streams.append(stream)
        await stream.receive_headers()
        await stream.send_headers(RESPONSE_200)
        writing.set()
        try:
            await stream.send_data(bytes(LARGE), end_stream=True)
            await trio.sleep_forever()
        except BaseException as exc:
            outcome.append(exc)
            raise

    peer = raw_client()
    peer.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 2**31 - 1})
    peer.increment_flow_control_window(2**31 - 1 - 65535)
    peer.send_headers(1, REQUEST, end_stream=True)
    with trio.fail_after(LIMIT), trio.CancelScope() as scope:
        async with trio_h2t.open_server(handler, 0, host="127.0.0.1") as server:
            raw = socket.create_connection(("127.0.0.1", server.port))
            try:
                raw.setblocking(False)
                raw.send(peer.data_to_send())
                await writing.wait()
                await trio.testing.wait_all_tasks_blocked()
                core = streams[0]._core
                assert isinstance(core, ConnectionCore)
                assert core.loopy._writing
                scope.cancel()
                await trio.sleep_forever()
            finally:
                raw.close()
    assert scope.cancelled_caught
    [exc] = outcome
    assert isinstance(exc, trio.Cancelled)
    assert loud_records(caplog) == []


async def test_client_writing_a_large_body_to_a_server_that_resets(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The client's loopy is inside a write (the server reads nothing) when the server
    resets the connection: ``send_data`` and the response wait end with
    ConnectionLostError (``BrokenResourceError`` under the connection's error, as
    trio's ``send_all`` would raise), and nothing is logged at WARNING or above."""
    caplog.set_level(logging.DEBUG, logger="trio_h2t")
    outcome: list[BaseException] = []

    async def send_large(stream: H2Stream) -> None:
        try:
            await stream.send_data(bytes(LARGE))
        except ConnectionLostError as exc:  # unless the whole body was queued
            outcome.append(exc)

    server = h2.connection.H2Connection(
        h2.config.H2Configuration(client_side=False, header_encoding=None)
    )
    server.initiate_connection()
    server.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 2**31 - 1})
    server.increment_flow_control_window(2**31 - 1 - 65535)
    with trio.fail_after(LIMIT):
        async with tcp_pair() as (client_t, raw):
            raw.send(server.data_to_send())
            async with (
                open_client_connection(client_t) as conn,
                conn.open_stream(REQUEST) as stream,
            ):
                while stream.stream_id not in server.streams:
                    server.receive_data(await read_some(raw))
                raw.send(server.data_to_send())  # the SETTINGS ACK
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(send_large, stream)
                    await trio.testing.wait_all_tasks_blocked()
                    assert conn._core.loopy._writing  # the socket is full
                    reset_on_close(raw)
                    raw.close()
                    with pytest.raises(ConnectionLostError):
                        await stream.receive_headers()
            assert all(isinstance(exc, ConnectionLostError) for exc in outcome)
            assert isinstance(conn.error, ConnectionLostError)
            assert isinstance(conn.error.__cause__, trio.BrokenResourceError)
    assert loud_records(caplog) == []


# ------------------------------------------------------- the gRPC layer, end to end


def echo_server() -> grpc.Server:
    async def unary(request: bytes, context: grpc.ServicerContext) -> bytes:
        return request

    async def stream(requests: AsyncIterator[bytes], context: grpc.ServicerContext) -> None:
        async for request in requests:
            await context.write(request)

    return grpc.Server(
        [
            {
                "/t.T/U": grpc.unary_unary_handler(unary),
                "/t.T/S": grpc.stream_stream_handler(stream),
            }
        ]
    )


async def busy_calls(channel: grpc.Channel, n: int, size: int) -> None:
    """``n`` tasks making unary calls (and one ping-pong each) until cancelled."""
    unary = channel.unary_unary("/t.T/U")
    pingpong = channel.stream_stream("/t.T/S")
    body = bytes(size)

    async def worker() -> None:
        async with pingpong.open() as call:
            while True:
                await unary(body)
                await call.send_message(body)
                await call.receive_message()

    async with trio.open_nursery() as nursery:
        for _ in range(n):
            nursery.start_soon(worker)


@pytest.mark.parametrize("size", [0, 256 << 10])
async def test_grpc_client_leaving_with_calls_in_flight_logs_nothing(
    caplog: pytest.LogCaptureFixture, size: int
) -> None:
    """The benchmark's ending: a client cancels its calls in flight and leaves its
    channel (RST_STREAM(CANCEL) for each, GOAWAY, close) while the server is still
    writing responses; neither side logs anything at WARNING or above."""
    caplog.set_level(logging.DEBUG, logger="trio_h2t")
    with trio.fail_after(LIMIT):
        async with trio_h2t.open_server(echo_server(), 0, host="127.0.0.1") as server:
            for _ in range(3):
                async with grpc.open_channel("127.0.0.1", server.port) as channel:
                    with trio.move_on_after(0.3):
                        await busy_calls(channel, 100, size)
    assert loud_records(caplog) == []


async def test_grpc_server_stopped_with_calls_in_flight(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A server stopped at once (its task cancelled) with calls in flight: the
    client's calls end with UNAVAILABLE (or CANCELLED once it cancels them itself),
    and neither side logs anything at WARNING or above."""
    caplog.set_level(logging.DEBUG, logger="trio_h2t")
    codes: set[grpc.StatusCode] = set()
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            server_scope = trio.CancelScope()

            async def serve(task_status: trio.TaskStatus[int]) -> None:
                with server_scope:
                    async with trio_h2t.open_server(echo_server(), 0, host="127.0.0.1") as s:
                        task_status.started(s.port)
                        await trio.sleep_forever()

            port = await nursery.start(serve)
            async with grpc.open_channel("127.0.0.1", port) as channel:
                try:
                    with trio.move_on_after(0.3):
                        await busy_calls(channel, 50, 64 << 10)
                    server_scope.cancel()
                    await busy_calls(channel, 50, 64 << 10)
                except* grpc.RpcError as group:
                    codes.update(_codes(group))
    assert codes
    assert codes <= {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED}
    assert loud_records(caplog) == []


def _codes(group: BaseExceptionGroup[grpc.RpcError]) -> set[grpc.StatusCode]:
    found: set[grpc.StatusCode] = set()
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            found |= _codes(exc)
        else:
            found.add(exc.code)
    return found
