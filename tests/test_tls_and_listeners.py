"""serve_listeners / serve_tcp / open_server over TCP, TLS (ALPN h2) and Unix sockets;
open_connection with TLS and connect_timeout; open_unix_connection; the listeners'
end (cancelled or crashed); every entry point's argument checks."""

from __future__ import annotations

import functools
import shutil
import ssl
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
import trustme

import trio_h2t

#: Upper bound for any test here (seconds).
LIMIT = 20


async def handler(stream: trio_h2t.H2Stream) -> None:
    """Answer every request with 200 and the scheme it was made with."""
    scheme = dict(stream.headers or []).get(b":scheme", b"?")
    await stream.send_headers([(":status", "200")])
    await stream.send_data(b"hello " + scheme, end_stream=True)


async def test_tls_round_trip(server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext) -> None:
    """A TLS client and server agree on h2 by ALPN and exchange a request with scheme https."""
    with trio.fail_after(LIMIT):
        async with (
            trio_h2t.open_server(handler, 0, host="127.0.0.1", ssl_context=server_ctx) as server,
            trio_h2t.open_connection("127.0.0.1", server.port, ssl_context=client_ctx) as conn,
        ):
            assert conn.scheme == b"https"
            response = await conn.request("GET", "/")
            assert response.status == 200
            assert response.body == b"hello https"


async def test_tls_client_offering_only_http11_is_closed(
    server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext
) -> None:
    """A TLS client that offers only http/1.1 is disconnected right after the handshake."""
    with trio.fail_after(LIMIT):
        async with trio_h2t.open_server(
            handler, 0, host="127.0.0.1", ssl_context=server_ctx
        ) as server:
            client_ctx.set_alpn_protocols(["http/1.1"])
            tcp = await trio.open_tcp_stream("127.0.0.1", server.port)
            tls = trio.SSLStream(tcp, client_ctx, server_hostname="127.0.0.1")
            await tls.do_handshake()
            assert tls.selected_alpn_protocol() is None
            try:  # the server closes: EOF, or a broken stream (no close_notify)
                data = await tls.receive_some()
            except trio.BrokenResourceError:
                data = b""
            assert data == b""
            await trio.aclose_forcefully(tls)


async def test_client_refuses_server_without_h2(
    server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext
) -> None:
    """open_connection raises ConnectionLostError naming ALPN when the server does not pick h2."""
    server_ctx.set_alpn_protocols(["http/1.1"])
    with trio.fail_after(LIMIT):
        listeners = await trio.open_ssl_over_tcp_listeners(0, server_ctx, host="127.0.0.1")
        tcp_listener = listeners[0].transport_listener
        assert isinstance(tcp_listener, trio.SocketListener)
        port = tcp_listener.socket.getsockname()[1]

        async def accept_and_handshake(task_status: trio.TaskStatus[None]) -> None:
            task_status.started()
            stream = await listeners[0].accept()
            try:
                await stream.do_handshake()
                await stream.receive_some()
            except trio.BrokenResourceError:
                pass
            await trio.aclose_forcefully(stream)

        async with trio.open_nursery() as nursery:
            await nursery.start(accept_and_handshake)
            with pytest.raises(trio_h2t.ConnectionLostError, match="ALPN"):
                async with trio_h2t.open_connection("127.0.0.1", port, ssl_context=client_ctx):
                    pass  # pragma: no cover
        await listeners[0].aclose()


async def test_curl_over_tls(server_ctx: ssl.SSLContext, ca: trustme.CA, tmp_path: Path) -> None:
    """Real curl --http2 over TLS with our CA fetches from serve_tcp(ssl_context=...)."""
    curl = shutil.which("curl")
    version = b""
    if curl is not None:
        version = (await trio.run_process([curl, "-V"], capture_stdout=True)).stdout
    if curl is None or b"HTTP2" not in version:
        pytest.skip("curl without HTTP/2 support")
    cafile = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(cafile))
    with trio.fail_after(LIMIT):
        async with trio_h2t.open_server(
            handler, 0, host="127.0.0.1", ssl_context=server_ctx
        ) as server:
            url = f"https://127.0.0.1:{server.port}/"
            args = [curl, "-sS", "--http2", "--cacert", str(cafile), "-w", " %{http_version}", url]
            done = await trio.run_process(args, capture_stdout=True, capture_stderr=True)
            assert done.stdout == b"hello https 2"


@pytest.fixture
def unix_path(tmp_path: Path) -> Path:
    return tmp_path / "h2.sock"


async def test_unix_socket_both_ways(unix_path: Path) -> None:
    """serve_listeners over an AF_UNIX SocketListener talks to open_unix_connection."""
    with trio.fail_after(LIMIT):
        sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
        await sock.bind(str(unix_path))
        sock.listen()
        async with trio.open_nursery() as nursery:
            server = await nursery.start(
                trio_h2t.serve_listeners, handler, [trio.SocketListener(sock)]
            )
            with pytest.raises(RuntimeError, match="no TCP listener"):
                _ = server.port
            async with trio_h2t.open_unix_connection(unix_path) as conn:
                assert conn.authority == b"localhost"
                response = await conn.request("GET", "/")
                assert response.body == b"hello http"
            await server.aclose()
        assert sock.fileno() == -1


async def test_cancelled_serve_tcp_closes_its_listener() -> None:
    """A cancelled serve_tcp closes its listening socket: a new connect is refused."""
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            server = await nursery.start(
                functools.partial(trio_h2t.serve_tcp, handler, 0, host="127.0.0.1")
            )
            port = server.port
            nursery.cancel_scope.cancel()
        with pytest.raises(OSError, match="connect") as info:
            await trio.open_tcp_stream("127.0.0.1", port)
        refused = info.value.__cause__
        while isinstance(refused, BaseExceptionGroup):
            refused = refused.exceptions[0]
        assert isinstance(refused, ConnectionRefusedError)


async def test_serve_tcp_closes_its_listener_when_it_crashes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """serve_tcp ended by a crash (its listener's accept raises an unexpected error,
    which comes out) closes its listening socket: fileno -1, a new connect is refused;
    the connection it was serving is cancelled."""
    doomed: list[trio.SocketListener] = []
    armed = False
    accept = trio.SocketListener.accept

    async def faulty_accept(self: trio.SocketListener) -> trio.SocketStream:
        stream = await accept(self)
        if armed and self in doomed:
            await stream.aclose()
            raise RuntimeError("listener bug")
        return stream

    open_listeners = trio.open_tcp_listeners

    async def recording_open(port: int, **kwargs: Any) -> list[trio.SocketListener]:
        made = await open_listeners(port, **kwargs)
        doomed.extend(made)
        return made

    monkeypatch.setattr(trio.SocketListener, "accept", faulty_accept)
    monkeypatch.setattr(trio, "open_tcp_listeners", recording_open)
    with trio.fail_after(LIMIT):
        with pytest.RaisesGroup(pytest.RaisesGroup(RuntimeError)):
            async with trio.open_nursery() as nursery:
                server = await nursery.start(
                    functools.partial(trio_h2t.serve_tcp, handler, 0, host="127.0.0.1")
                )
                port = server.port
                async with trio_h2t.open_connection("127.0.0.1", port) as conn:
                    assert (await conn.request("GET", "/")).body == b"hello http"
                    armed = True
                    await trio.open_tcp_stream("127.0.0.1", port)  # accept raises
                    await trio.sleep_forever()
        [listener] = doomed
        assert listener.socket.fileno() == -1
        with pytest.raises(OSError, match="connect") as info:
            await trio.open_tcp_stream("127.0.0.1", port)
        refused = info.value.__cause__
        while isinstance(refused, BaseExceptionGroup):
            refused = refused.exceptions[0]
        assert isinstance(refused, ConnectionRefusedError)


async def test_port_answers_after_aclose_started() -> None:
    """H2Server.port still answers once aclose has started (and after it returns)."""
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            server = await nursery.start(
                functools.partial(trio_h2t.serve_tcp, handler, 0, host="127.0.0.1")
            )
            port = server.port
            nursery.start_soon(server.aclose)
            await trio.testing.wait_all_tasks_blocked()
            assert server.port == port
        assert server.port == port


async def test_cancelling_aclose_still_stops_the_server() -> None:
    """aclose cancelled mid-drain still stops the server (its nursery is cancelled)."""
    release = trio.Event()

    async def slow(stream: trio_h2t.H2Stream) -> None:
        await release.wait()  # never set: the drain could only end by its grace

    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            server = await nursery.start(
                functools.partial(trio_h2t.serve_tcp, slow, 0, host="127.0.0.1")
            )
            async with trio_h2t.open_connection("127.0.0.1", server.port) as conn:  # noqa: SIM117
                async with conn.open_stream(conn.request_headers("GET", "/"), end_stream=True):
                    await trio.testing.wait_all_tasks_blocked()
                    with trio.move_on_after(0.2) as scope:
                        await server.aclose(grace=60)
                    assert scope.cancelled_caught
        # The serve_tcp nursery exited long before grace=60: the server stopped.


async def test_open_server_typed_use() -> None:
    """open_server yields a running H2Server with an int port; leaving stops it."""
    with trio.fail_after(LIMIT):
        async with trio_h2t.open_server(handler, 0, host="127.0.0.1") as server:
            port: int = server.port
            async with trio_h2t.open_connection("127.0.0.1", port) as conn:
                response = await conn.request("GET", "/")
                assert response.body == b"hello http"
        with pytest.raises(OSError, match="connect"):
            await trio.open_tcp_stream("127.0.0.1", port)


async def test_connect_timeout_names_the_timeout() -> None:
    """A TLS handshake that never completes fails with ConnectionLostError after connect_timeout."""
    listener = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
    port = listener.socket.getsockname()[1]
    ctx = ssl.create_default_context()
    with trio.fail_after(LIMIT):
        with pytest.raises(trio_h2t.ConnectionLostError, match="connect_timeout"):
            async with trio_h2t.open_connection(
                "127.0.0.1", port, ssl_context=ctx, connect_timeout=0.2
            ):
                pass  # pragma: no cover
    await listener.aclose()


async def test_contexts_of_the_wrong_side_are_refused_at_once(
    server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext
) -> None:
    """A client-side context given to a server, or a server-side one to a client, is a
    ValueError naming the right call, before anything is bound or connected."""
    with pytest.raises(ValueError, match=r"Purpose\.CLIENT_AUTH"):
        async with trio_h2t.open_server(handler, 0, host="127.0.0.1", ssl_context=client_ctx):
            pass  # pragma: no cover
    with pytest.raises(ValueError, match="server-side context"):
        async with trio_h2t.open_connection("127.0.0.1", 1, ssl_context=server_ctx):
            pass  # pragma: no cover


async def test_a_url_as_host_is_refused_with_the_fix() -> None:
    """open_connection("http://...") says to pass the host and port, not a URL."""
    with pytest.raises(ValueError, match="host must be a host name or IP address"):
        async with trio_h2t.open_connection("http://127.0.0.1", 1):
            pass  # pragma: no cover


async def test_a_handler_that_is_not_callable_is_refused_before_serving() -> None:
    """serve_tcp, serve_listeners and serve_connection refuse a non-callable handler."""
    left, _right = trio.testing.memory_stream_pair()
    with pytest.raises(TypeError, match="handler must be an async function"):
        await trio_h2t.serve_connection(left, "not a handler")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="handler must be an async function"):
        await trio_h2t.serve_listeners(None, [])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="handler must be an async function"):
        async with trio_h2t.open_server(None, 0, host="127.0.0.1"):  # type: ignore[arg-type]
            pass  # pragma: no cover


async def test_a_plain_def_handler_gets_a_500_and_a_clear_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A handler written with ``def`` (it returns None) answers 500, and the log says
    a handler must be an async function."""

    def not_async(stream: trio_h2t.H2Stream) -> None:
        """Forgot ``async``."""

    with trio.fail_after(LIMIT):
        async with (
            trio_h2t.open_server(not_async, 0, host="127.0.0.1") as server,  # type: ignore[arg-type]
            trio_h2t.open_connection("127.0.0.1", server.port) as conn,
        ):
            response = await conn.request("GET", "/")
    assert response.status == 500
    assert "a handler must be an async function" in caplog.text


async def test_plain_client_to_tls_server_is_told_to_use_tls(server_ctx: ssl.SSLContext) -> None:
    """An h2c client reaching our TLS server fails at once, saying the server answered with TLS."""
    with trio.fail_after(LIMIT):
        async with trio_h2t.open_server(
            handler, 0, host="127.0.0.1", ssl_context=server_ctx
        ) as server:
            with pytest.raises(trio_h2t.ConnectionLostError) as info:
                async with trio_h2t.open_connection("127.0.0.1", server.port):
                    pass  # pragma: no cover
    message = str(info.value)
    assert "the server answered with TLS" in message
    assert "ssl_context=" in message


async def test_tls_client_to_h2c_server_is_told_it_is_plain(client_ctx: ssl.SSLContext) -> None:
    """A TLS client reaching our h2c server fails at once, asking if it is a plain h2c server."""
    with trio.fail_after(LIMIT):
        async with trio_h2t.open_server(handler, 0, host="127.0.0.1") as server:
            with pytest.raises(trio_h2t.ConnectionLostError) as info:
                async with trio_h2t.open_connection(
                    "127.0.0.1", server.port, ssl_context=client_ctx
                ):
                    pass  # pragma: no cover
    message = str(info.value)
    assert "the server did not answer the TLS handshake" in message
    assert "is it a plain h2c server?" in message
    assert isinstance(info.value.__cause__, trio.BrokenResourceError)


async def test_tls_server_answers_a_plain_preface_with_an_alert_and_closes(
    server_ctx: ssl.SSLContext, caplog: pytest.LogCaptureFixture
) -> None:
    """Our TLS server given an h2c preface sends one TLS alert record, closes, and logs why."""
    caplog.set_level("DEBUG", logger="trio_h2t")
    with trio.fail_after(LIMIT):
        async with trio_h2t.open_server(
            handler, 0, host="127.0.0.1", ssl_context=server_ctx
        ) as server:
            sock = await trio.open_tcp_stream("127.0.0.1", server.port)
            await sock.send_all(
                b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00"
            )
            received = b""
            while chunk := await sock.receive_some(100):
                received += chunk
            await sock.aclose()
    assert received == b"\x15\x03\x01\x00\x02\x02\x46"  # fatal alert: protocol_version
    assert any("does not speak TLS" in r.getMessage() for r in caplog.records)


async def test_foreign_tls_handshake_record_is_named_as_tls() -> None:
    """A server whose first bytes are a TLS handshake record (0x16 0x03) is reported as TLS."""
    client_side, server_side = trio.testing.memory_stream_pair()

    async def tls_server() -> None:
        await server_side.send_all(b"\x16\x03\x03\x00\x31\x02\x00\x00\x2d\x03\x03" + bytes(8))
        await server_side.aclose()

    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(tls_server)
            with pytest.raises(trio_h2t.ConnectionLostError, match="answered with TLS"):
                async with trio_h2t.open_client_connection(client_side, authority="x"):
                    pass  # pragma: no cover


class _NoListener(trio.abc.Listener[trio.abc.Stream]):
    """A listener that must never be used (an argument check comes first)."""

    async def accept(self) -> trio.abc.Stream:
        raise AssertionError("accept must not be called")  # pragma: no cover

    async def aclose(self) -> None:
        pass  # pragma: no cover


def _entered(
    make: Callable[[], AbstractAsyncContextManager[object]],
) -> Callable[[], Awaitable[None]]:
    """A call that enters the context manager ``make()`` (and leaves at once)."""

    async def enter() -> None:
        async with make():
            pass  # pragma: no cover

    return enter


def _built(**fields: Any) -> Callable[[], Awaitable[None]]:
    """A call that builds ``TransportConfig(**fields)``."""

    async def build() -> None:
        h2t.TransportConfig(**fields)

    return build


_STREAM = trio.testing.memory_stream_pair()[0]  # never read or written by these calls
#: trio_h2t, untyped: the calls below pass wrong arguments on purpose.
h2t: Any = trio_h2t
_TCP = functools.partial(h2t.serve_tcp, handler)
_SERVER = functools.partial(h2t.open_server, handler)
_CONNECT = h2t.open_connection

#: (entry point and argument, the call, the error, what its message must say)
ARGUMENT_CASES: list[tuple[str, Callable[[], Awaitable[object]], type[Exception], str]] = [
    (
        "serve_tcp config dict",
        lambda: _TCP(0, config={"x": 1}),
        TypeError,
        r"config must be a trio_h2t\.TransportConfig or None, not dict \(build one",
    ),
    ("serve_tcp config empty dict", lambda: _TCP(0, config={}), TypeError, "config must be"),
    (
        "serve_tcp ssl_context str",
        lambda: _TCP(0, ssl_context="tls"),
        TypeError,
        r"ssl_context must be an ssl\.SSLContext or None, not str",
    ),
    ("serve_tcp port str", lambda: _TCP("8080"), TypeError, "port must be an int, not str"),
    ("serve_tcp port bool", lambda: _TCP(True), TypeError, "port must be an int, not bool"),
    ("serve_tcp port negative", lambda: _TCP(-1), ValueError, r"port must be in 0\.\.65535"),
    ("serve_tcp port too big", lambda: _TCP(65536), ValueError, r"port must be in 0\.\.65535"),
    (
        "serve_tcp host int",
        lambda: _TCP(0, host=127),
        TypeError,
        "host must be a str or None, not int",
    ),
    (
        "serve_tcp host bytes",
        lambda: _TCP(0, host=b"127.0.0.1"),
        TypeError,
        "host must be a str or None, not bytes",
    ),
    ("serve_tcp host empty", lambda: _TCP(0, host=""), ValueError, "host must not be empty"),
    (
        "open_server config dict",
        _entered(lambda: _SERVER(0, config={"x": 1})),
        TypeError,
        "config must be",
    ),
    (
        "open_server ssl_context str",
        _entered(lambda: _SERVER(0, ssl_context="tls")),
        TypeError,
        "ssl_context must be",
    ),
    ("open_server port str", _entered(lambda: _SERVER("0")), TypeError, "port must be an int"),
    ("open_server host int", _entered(lambda: _SERVER(0, host=1)), TypeError, "host must be a str"),
    (
        "serve_listeners config dict",
        lambda: h2t.serve_listeners(handler, [], config={"x": 1}),
        TypeError,
        "config must be",
    ),
    (
        "serve_listeners one listener",
        lambda: h2t.serve_listeners(handler, _NoListener()),
        TypeError,
        r"not one _NoListener: pass \[listener\]",
    ),
    (
        "serve_listeners not listeners",
        lambda: h2t.serve_listeners(handler, [_STREAM]),
        TypeError,
        r"listeners\[0\] must be a trio\.abc\.Listener, not StapledStream",
    ),
    (
        "serve_listeners not a sequence",
        lambda: h2t.serve_listeners(handler, 8080),
        TypeError,
        "listeners must be a sequence",
    ),
    (
        "serve_connection transport",
        lambda: h2t.serve_connection(object(), handler),
        TypeError,
        r"transport must be a trio\.abc\.Stream .*not object",
    ),
    (
        "serve_connection config dict",
        lambda: h2t.serve_connection(_STREAM, handler, config={}),
        TypeError,
        "config must be",
    ),
    (
        "open_connection host int",
        _entered(lambda: _CONNECT(127, 80)),
        TypeError,
        "host must be a str, not int",
    ),
    (
        "open_connection host empty",
        _entered(lambda: _CONNECT("", 80)),
        ValueError,
        "host must not be empty",
    ),
    (
        "open_connection port str",
        _entered(lambda: _CONNECT("127.0.0.1", "80")),
        TypeError,
        "port must be an int, not str",
    ),
    (
        "open_connection port 0",
        _entered(lambda: _CONNECT("127.0.0.1", 0)),
        ValueError,
        r"port must be in 1\.\.65535",
    ),
    (
        "open_connection ssl_context str",
        _entered(lambda: _CONNECT("127.0.0.1", 443, ssl_context="tls")),
        TypeError,
        r"ssl_context must be an ssl\.SSLContext",
    ),
    (
        "open_connection connect_timeout str",
        _entered(lambda: _CONNECT("127.0.0.1", 80, connect_timeout="5")),
        TypeError,
        r"connect_timeout must be a number of seconds \(int or float\) or None, not str",
    ),
    (
        "open_connection connect_timeout bool",
        _entered(lambda: _CONNECT("127.0.0.1", 80, connect_timeout=True)),
        TypeError,
        "connect_timeout must be a number",
    ),
    (
        "open_connection connect_timeout negative",
        _entered(lambda: _CONNECT("127.0.0.1", 80, connect_timeout=-1)),
        ValueError,
        "connect_timeout must be > 0 seconds",
    ),
    (
        "open_connection connect_timeout nan",
        _entered(lambda: _CONNECT("127.0.0.1", 80, connect_timeout=float("nan"))),
        ValueError,
        "connect_timeout must be > 0 seconds",
    ),
    (
        "open_connection config dict",
        _entered(lambda: _CONNECT("127.0.0.1", 80, config={"x": 1})),
        TypeError,
        "config must be",
    ),
    (
        "open_unix_connection path int",
        _entered(lambda: h2t.open_unix_connection(5)),
        TypeError,
        r"path must be a str or an os\.PathLike, not int",
    ),
    (
        "open_unix_connection config dict",
        _entered(lambda: h2t.open_unix_connection("/x", config={})),
        TypeError,
        "config must be",
    ),
    (
        "open_client_connection transport",
        _entered(lambda: h2t.open_client_connection(object())),
        TypeError,
        r"transport must be a trio\.abc\.Stream",
    ),
    (
        "open_client_connection authority int",
        _entered(lambda: h2t.open_client_connection(_STREAM, authority=5)),
        TypeError,
        "authority must be a str, not int",
    ),
    (
        "open_client_connection authority non-ASCII",
        _entered(lambda: h2t.open_client_connection(_STREAM, authority="exämple")),
        ValueError,
        "authority must be ASCII",
    ),
    (
        "open_client_connection scheme bytes",
        _entered(lambda: h2t.open_client_connection(_STREAM, scheme=b"http")),
        TypeError,
        "scheme must be a str, not bytes",
    ),
    (
        "open_client_connection config dict",
        _entered(lambda: h2t.open_client_connection(_STREAM, config={})),
        TypeError,
        "config must be",
    ),
    (
        "TransportConfig int field str",
        _built(max_concurrent_streams="x"),
        TypeError,
        r"max_concurrent_streams must be an int, not str \('x'\)",
    ),
    (
        "TransportConfig int field bool",
        _built(max_concurrent_streams=True),
        TypeError,
        "max_concurrent_streams must be an int, not bool",
    ),
    (
        "TransportConfig int field float",
        _built(write_quota=1.5),
        TypeError,
        "write_quota must be an int, not float",
    ),
    (
        "TransportConfig float field str",
        _built(graceful_close_timeout="5"),
        TypeError,
        r"graceful_close_timeout must be a number \(int or float\), not str",
    ),
    (
        "TransportConfig float field bool",
        _built(window_update_ratio=True),
        TypeError,
        "window_update_ratio must be a number",
    ),
    (
        "TransportConfig bool field int",
        _built(dynamic_window=1),
        TypeError,
        "dynamic_window must be a bool, not int",
    ),
    (
        "TransportConfig out of range",
        _built(max_concurrent_streams=0),
        ValueError,
        "max_concurrent_streams must be >= 1",
    ),
]


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [pytest.param(call, error, message, id=name) for name, call, error, message in ARGUMENT_CASES],
)
async def test_entry_points_refuse_wrong_arguments_at_once(
    call: Callable[[], Awaitable[object]], error: type[Exception], message: str
) -> None:
    """Every entry point (and TransportConfig) refuses a wrong argument with a TypeError
    or ValueError naming it and what it must be, before any I/O (not even a checkpoint)."""
    with trio.testing.assert_no_checkpoints(), pytest.raises(error, match=message):
        await call()
