"""The ``trio-h2t`` command (``trio_h2t/_cli.py``).

The request handler runs in-process over ``trio.testing.memory_stream_pair``; ``get``
runs in-process and as a subprocess against an in-process server on 127.0.0.1; bad
arguments, unreachable peers and signals are checked on real subprocesses.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import h2.events
import pytest
import trio
import trio.testing
from helpers import open_peer_client, take_frames

import trio_h2t
from trio_h2t._cli import (
    CHUNK_SIZE,
    EXIT_FAILURE,
    EXIT_HTTP_ERROR,
    SERVE_IDLE_TIMEOUT,
    UsageError,
    _build_parser,
    fetch,
    main,
    make_handler,
    resolve_path,
    serve,
)

#: Upper bound for any subprocess in this file (seconds).
PROC_TIMEOUT = 30
CLI = [sys.executable, "-m", "trio_h2t"]

Headers = Sequence[tuple[bytes | str, bytes | str]]


################################################################
# fixtures and helpers
################################################################


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A document root, with a secret file beside it (outside the root)."""
    (tmp_path / "secret.txt").write_bytes(b"secret\n")
    docs = tmp_path / "root"
    docs.mkdir()
    (docs / "hello.txt").write_bytes(b"hello, world\n")
    (docs / "page.html").write_bytes(b"<p>hi</p>\n")
    (docs / "blob.bin").write_bytes(os.urandom(3 * CHUNK_SIZE + 123))
    (docs / "empty.txt").write_bytes(b"")
    (docs / "with space.txt").write_bytes(b"spaced\n")
    (docs / "site").mkdir()
    (docs / "site" / "index.html").write_bytes(b"<h1>index</h1>\n")
    (docs / "bare").mkdir()
    (docs / "escape").symlink_to(tmp_path / "secret.txt")
    (docs / "escape-dir").symlink_to(tmp_path)
    (docs / "alias.txt").symlink_to(docs / "hello.txt")
    (docs / "loop1").symlink_to(docs / "loop2")
    (docs / "loop2").symlink_to(docs / "loop1")
    return docs


@pytest.fixture
async def conn(root: Path) -> AsyncIterator[trio_h2t.ClientConnection]:
    """A client connected in memory to a server running ``make_handler(root)``."""
    client_side, server_side = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio_h2t.serve_connection, server_side, make_handler(root))
        async with trio_h2t.open_client_connection(client_side) as client:
            yield client


class Response:
    def __init__(
        self, headers: list[tuple[bytes, bytes]], body: bytes, trailers: list[tuple[bytes, bytes]]
    ) -> None:
        self.headers = headers
        self.body = body
        self.trailers = trailers

    @property
    def status(self) -> int:
        return int(self[":status"])

    def __getitem__(self, name: str) -> str:
        for key, value in self.headers:
            if key == name.encode():
                return value.decode()
        raise KeyError(name)

    def get(self, name: str) -> str | None:
        try:
            return self[name]
        except KeyError:
            return None


async def request(
    conn: trio_h2t.ClientConnection,
    method: str,
    path: str,
    *,
    body: bytes | None = None,
    headers: Headers = (),
    trailers: Headers | None = None,
) -> Response:
    """One exchange; the body is sent in several DATA writes, then trailers if any."""
    end_now = body is None and trailers is None
    async with conn.open_stream(
        conn.request_headers(method, path, headers), end_stream=end_now
    ) as stream:
        if not end_now:
            data = body or b""
            for i in range(0, len(data), 50_000):
                await stream.send_data(data[i : i + 50_000])
            if trailers is not None:
                await stream.send_trailers(trailers)
            else:
                await stream.end()
        response = await stream.receive_headers()
        received = await stream.read_all()
        return Response(response, received, stream.trailers or [])


class MemoryWriter:
    """An ``AsyncWriter`` into memory, for ``fetch(out=...)``."""

    def __init__(self) -> None:
        self.buffer = io.BytesIO()
        self.flushed = False

    async def write(self, data: bytes, /) -> int:
        await trio.lowlevel.checkpoint()
        return self.buffer.write(data)

    async def flush(self) -> None:
        await trio.lowlevel.checkpoint()
        self.flushed = True


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A 127.0.0.1 port that is bound but not listening: connecting is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


def die_with_parent() -> None:
    """``preexec_fn``: SIGKILL the child if pytest dies without tearing down (Linux)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # 1 == PR_SET_PDEATHSIG


def run_cli(*args: str, timeout: float = PROC_TIMEOUT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, timeout=timeout, check=False
    )


################################################################
# resolve_path (no server)
################################################################


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b"/hello.txt", "hello.txt"),
        (b"/hello.txt?x=1#frag", "hello.txt"),
        (b"/with%20space.txt", "with space.txt"),
        (b"/site", "site/index.html"),
        (b"/site/", "site/index.html"),
        (b"/", None),  # the root has no index.html
        (b"/bare/", None),
        (b"/missing.txt", None),
        (b"/../secret.txt", None),
        (b"/%2e%2e/secret.txt", None),
        (b"/site/../../secret.txt", None),
        (b"//etc/passwd", None),
        (b"/%2Fetc%2Fpasswd", None),
        (b"/escape", None),
        (b"/escape-dir/secret.txt", None),
        (b"/alias.txt", "hello.txt"),
        (b"/hello.txt%00.png", None),
        (b"/site/../hello.txt", "hello.txt"),
        (b"/loop1", None),  # a symlink loop
        (b"/" + b"a" * 5000, None),  # a name too long
        (b"/%ff%fe.txt", None),  # not UTF-8
    ],
)
def test_resolve_path(root: Path, raw: bytes, expected: str | None) -> None:
    """Paths map to files under the root only; ``..``, escapes and symlinks cannot leave
    it; odd paths are a plain miss, never an error."""
    got = resolve_path(root.resolve(), raw)
    assert got == (None if expected is None else (root / expected).resolve())


def test_make_handler_needs_a_directory(root: Path) -> None:
    """The root must exist and be a directory."""
    with pytest.raises(FileNotFoundError):
        make_handler(root / "missing")
    with pytest.raises(NotADirectoryError):
        make_handler(root / "hello.txt")


################################################################
# the handler, in memory
################################################################


async def test_get_file(conn: trio_h2t.ClientConnection) -> None:
    """GET serves the file with content-type by extension and content-length."""
    r = await request(conn, "GET", "/hello.txt")
    assert r.status == 200
    assert r.body == b"hello, world\n"
    assert r["content-type"] == "text/plain"
    assert r["content-length"] == str(len(r.body))
    html = await request(conn, "GET", "/page.html")
    assert html["content-type"] == "text/html"


async def test_get_large_binary_file(conn: trio_h2t.ClientConnection, root: Path) -> None:
    """A file of several chunks (larger than the stream window) arrives whole."""
    r = await request(conn, "GET", "/blob.bin")
    assert r.status == 200
    assert r["content-type"] == "application/octet-stream"
    assert r.body == (root / "blob.bin").read_bytes()
    assert r["content-length"] == str(len(r.body))


async def test_get_empty_file_and_escaped_name(conn: trio_h2t.ClientConnection) -> None:
    """An empty file is a 200 with content-length 0; percent-escapes are decoded."""
    r = await request(conn, "GET", "/empty.txt")
    assert (r.status, r.body, r["content-length"]) == (200, b"", "0")
    r = await request(conn, "GET", "/with%20space.txt?q=1")
    assert (r.status, r.body) == (200, b"spaced\n")


async def test_directory_serves_index_or_404(conn: trio_h2t.ClientConnection) -> None:
    """A directory serves its index.html; without one it is a 404."""
    r = await request(conn, "GET", "/site/")
    assert (r.status, r.body, r["content-type"]) == (200, b"<h1>index</h1>\n", "text/html")
    assert (await request(conn, "GET", "/bare/")).status == 404


async def test_head(conn: trio_h2t.ClientConnection) -> None:
    """HEAD gives GET's headers and no body, for files and for 404s."""
    get = await request(conn, "GET", "/blob.bin")
    head = await request(conn, "HEAD", "/blob.bin")
    assert head.status == 200
    assert head.body == b""
    assert head["content-length"] == get["content-length"]
    assert head["content-type"] == get["content-type"]
    missing = await request(conn, "HEAD", "/missing")
    assert (missing.status, missing.body) == (404, b"")


async def test_missing_is_404(conn: trio_h2t.ClientConnection) -> None:
    """A missing file is a small text 404."""
    r = await request(conn, "GET", "/missing.txt")
    assert r.status == 404
    assert r.body == b"not found\n"
    assert r["content-length"] == str(len(r.body))


@pytest.mark.parametrize(
    "path",
    ["/../secret.txt", "/%2e%2e/secret.txt", "/site/../../secret.txt", "/escape", "/escape-dir/"],
)
async def test_path_traversal_is_rejected(conn: trio_h2t.ClientConnection, path: str) -> None:
    """Nothing outside the root is served, whether by ``..`` or by a symlink."""
    r = await request(conn, "GET", path)
    assert r.status == 404
    assert b"secret" not in r.body


async def test_symlink_inside_root_is_served(conn: trio_h2t.ClientConnection) -> None:
    """A symlink that stays inside the root is followed."""
    r = await request(conn, "GET", "/alias.txt")
    assert (r.status, r.body) == (200, b"hello, world\n")


async def test_path_without_slash_is_400(root: Path) -> None:
    """A ``:path`` that is not absolute (``GET *``, from a raw h2 client: ours refuses
    to send it) is a 400."""
    block = [(b":method", b"GET"), (b":scheme", b"http"), (b":authority", b"x"), (b":path", b"*")]
    with trio.fail_after(10):
        async with open_peer_client(make_handler(root)) as (peer, _core):
            peer.h2.send_headers(1, block, end_stream=True)
            await peer.flush()
            event = await peer.receive_until(lambda ev: isinstance(ev, h2.events.ResponseReceived))
    assert dict(event.headers)[b":status"] == b"400"


@pytest.mark.parametrize("method", ["PUT", "DELETE", "OPTIONS", "PATCH"])
async def test_other_methods_are_405(conn: trio_h2t.ClientConnection, method: str) -> None:
    """Methods other than GET, HEAD and POST get a 405 with ``allow``."""
    r = await request(conn, method, "/hello.txt")
    assert r.status == 405
    assert r["allow"] == "GET, HEAD, POST"


async def test_post_echoes_body(conn: trio_h2t.ClientConnection) -> None:
    """POST echoes a body larger than the flow-control windows, with its length and type."""
    body = os.urandom(300_000)
    r = await request(
        conn,
        "POST",
        "/anything",
        body=body,
        headers=[("content-type", "application/x-test"), ("content-length", str(len(body)))],
    )
    assert r.status == 200
    assert r.body == body
    assert r["content-type"] == "application/x-test"
    assert r["content-length"] == str(len(body))
    assert r.trailers == []


async def test_post_echoes_trailers(conn: trio_h2t.ClientConnection) -> None:
    """Request trailers come back as response trailers, after the echoed body."""
    body = b"x" * 100_000
    trailers = [("x-checksum", "abc123"), ("x-count", "1")]
    r = await request(conn, "POST", "/echo", body=body, trailers=trailers)
    assert r.status == 200
    assert r.body == body
    assert r.get("content-length") is None
    assert r.trailers == [(b"x-checksum", b"abc123"), (b"x-count", b"1")]


async def test_post_empty_body(conn: trio_h2t.ClientConnection) -> None:
    """A POST without a body echoes an empty body; trailers alone come back too."""
    r = await request(conn, "POST", "/echo", body=b"")
    assert (r.status, r.body) == (200, b"")
    r = await request(conn, "POST", "/echo", trailers=[("x-only", "trailers")])
    assert (r.status, r.body, r.trailers) == (200, b"", [(b"x-only", b"trailers")])


async def test_concurrent_requests(conn: trio_h2t.ClientConnection, root: Path) -> None:
    """Many GETs and POSTs at once on one connection all complete correctly."""
    blob = (root / "blob.bin").read_bytes()
    results: dict[int, Response] = {}

    async def one(i: int) -> None:
        if i % 2:
            results[i] = await request(conn, "GET", "/blob.bin")
        else:
            results[i] = await request(conn, "POST", "/e", body=str(i).encode() * 1000)

    async with trio.open_nursery() as nursery:
        for i in range(40):
            nursery.start_soon(one, i)
    for i, r in results.items():
        assert r.status == 200
        assert r.body == (blob if i % 2 else str(i).encode() * 1000)
    assert len(results) == 40


################################################################
# get, in-process, against a server on 127.0.0.1
################################################################


@pytest.fixture
async def base_url(root: Path) -> AsyncIterator[str]:
    """``http://127.0.0.1:PORT`` of a ``serve_tcp`` server running the CLI handler."""
    async with trio.open_nursery() as nursery:
        server = await nursery.start(
            lambda task_status: trio_h2t.serve_tcp(
                make_handler(root), 0, host="127.0.0.1", task_status=task_status
            )
        )
        yield f"http://127.0.0.1:{server.port}"
        await server.aclose(grace=1)


async def test_fetch_get(base_url: str) -> None:
    """``fetch`` writes the body, flushes, and returns 0 for a 200."""
    out = MemoryWriter()
    assert await fetch(f"{base_url}/hello.txt", out=out) == 0
    assert out.buffer.getvalue() == b"hello, world\n"
    assert out.flushed


async def test_fetch_error_status_is_22(base_url: str) -> None:
    """A status >= 400 returns 22 (curl's --fail code); the body is still written."""
    out = MemoryWriter()
    assert await fetch(f"{base_url}/missing", out=out) == EXIT_HTTP_ERROR
    assert out.buffer.getvalue() == b"not found\n"


async def test_fetch_post_verbose(base_url: str) -> None:
    """``-d`` makes a POST (echoed); ``-v`` prints both heads to stderr."""
    out, err = MemoryWriter(), io.StringIO()
    status = await fetch(
        f"{base_url}/echo",
        out=out,
        data=b"ping",
        headers=[("x-test", "1")],
        verbose=True,
        err=err,
    )
    assert status == 0
    assert out.buffer.getvalue() == b"ping"
    log = err.getvalue().splitlines()
    assert "> :method: POST" in log
    assert "> x-test: 1" in log
    assert "> content-length: 4" in log
    assert "< :status: 200" in log


async def test_fetch_method_and_output_file(base_url: str, root: Path, tmp_path: Path) -> None:
    """``-X`` sets the method; ``-o`` writes the body to a file."""
    target = tmp_path / "out.bin"
    assert await fetch(f"{base_url}/blob.bin", output=str(target)) == 0
    assert target.read_bytes() == (root / "blob.bin").read_bytes()
    out = MemoryWriter()
    assert await fetch(f"{base_url}/hello.txt", out=out, method="DELETE") == EXIT_HTTP_ERROR


async def test_fetch_unreachable(closed_port: int, tmp_path: Path) -> None:
    """An unreachable peer raises ConnectionLostError naming host and port; no file is made."""
    target = tmp_path / "never"
    with pytest.raises(
        trio_h2t.ConnectionLostError, match=f"cannot connect to 127.0.0.1:{closed_port}"
    ):
        await fetch(f"http://127.0.0.1:{closed_port}/", output=str(target))
    assert not target.exists()


@pytest.mark.parametrize("url", ["ftp://host/x", "127.0.0.1:80/x", "http:///x", "http://h:99999/"])
async def test_fetch_bad_url(url: str) -> None:
    """Only http:// and https:// URLs with a host and a valid port are accepted."""
    with pytest.raises(UsageError):
        await fetch(url, out=MemoryWriter())


async def test_get_subprocess(base_url: str, root: Path, tmp_path: Path) -> None:
    """``python -m trio_h2t get`` prints the body to stdout, or to ``-o FILE``."""
    result = await trio.run_process(
        [*CLI, "get", f"{base_url}/hello.txt"], capture_stdout=True, capture_stderr=True
    )
    assert result.stdout == b"hello, world\n"
    target = tmp_path / "blob"
    await trio.run_process([*CLI, "get", "-o", str(target), f"{base_url}/blob.bin"])
    assert target.read_bytes() == (root / "blob.bin").read_bytes()
    result = await trio.run_process(
        [*CLI, "get", "-v", "-X", "PUT", f"{base_url}/hello.txt"],
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    assert result.returncode == EXIT_HTTP_ERROR
    assert b"< :status: 405" in result.stderr


async def test_get_subprocess_data_file(base_url: str, root: Path) -> None:
    """``-d @FILE`` posts the file's bytes, which the server echoes."""
    result = await trio.run_process(
        [*CLI, "get", "-d", f"@{root / 'blob.bin'}", "-H", "Content-Type: x/y", f"{base_url}/"],
        capture_stdout=True,
    )
    assert result.stdout == (root / "blob.bin").read_bytes()


################################################################
# the command line: errors and exit codes (subprocesses)
################################################################


def assert_clean_failure(result: subprocess.CompletedProcess[str], message: str) -> None:
    assert result.returncode == EXIT_FAILURE, result
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


def test_unreachable_exits_2(closed_port: int) -> None:
    """An unreachable peer: exit 2, one line naming host:port, no traceback."""
    result = run_cli("get", f"http://127.0.0.1:{closed_port}/")
    assert_clean_failure(result, f"trio-h2t: cannot connect to 127.0.0.1:{closed_port}: ")
    assert len(result.stderr.splitlines()) == 1
    assert result.stderr.count("refused") == 1, result.stderr  # the reason once, not twice


def test_non_http_url_exits_2() -> None:
    """A URL that is neither http:// nor https:// is refused with exit 2."""
    assert_clean_failure(run_cli("get", "ftp://example.com/"), "only http:// (h2c) and https://")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "usage:"),
        (("frobnicate",), "invalid choice"),
        (("get",), "the following arguments are required: url"),
        (("serve", "--port", "99999"), "must be in [0, 65535]"),
        (("serve", "--port", "http"), "argument --port: not a port number: 'http'"),
        (("serve", "--max-concurrent-streams", "0"), "must be >= 1"),
        (("serve", "--max-frame-size", "16383"), "must be in [16384, 16777215]"),
        (("serve", "--max-frame-size", "big"), "argument --max-frame-size: not a number: 'big'"),
        (("serve", "--max-connection-idle", "-1"), "must be >= 0 (0: never)"),
        (("serve", "--max-connection-idle", "soon"), "not a number of seconds: 'soon'"),
        (("serve", "--root", "/nonexistent/trio-h2t"), "not a directory"),
        (("get", "-H", "no-colon", "http://127.0.0.1:1/"), "bad header"),
        (("get", "-H", "Connection: close", "http://127.0.0.1:1/"), "not allowed in HTTP/2"),
        (("get", "-H", "te: gzip", "http://127.0.0.1:1/"), "Invalid value for TE header"),
        (("get", "-H", "x\x7fy: 1", "http://127.0.0.1:1/"), "Illegal header name"),
        (("get", "-H", "caf\u00e9: 1", "http://127.0.0.1:1/"), "the name must be ASCII"),
        (("get", "-d", "@/nonexistent/trio-h2t", "http://127.0.0.1:1/"), "cannot read"),
        (("get", "http://127.0.0.1:99999/"), "bad URL"),
    ],
)
def test_bad_arguments_exit_2(args: tuple[str, ...], message: str) -> None:
    """Bad arguments exit 2 with a message on stderr and no traceback."""
    assert_clean_failure(run_cli(*args), message)


def test_main_in_process_bad_url(capsys: pytest.CaptureFixture[str]) -> None:
    """``main`` reports usage errors through SystemExit(2), not an exception."""
    with pytest.raises(SystemExit) as info:
        main(["get", "gopher://x/"])
    assert info.value.code == EXIT_FAILURE
    assert "only http:// (h2c) and https:// URLs" in capsys.readouterr().err


def test_serve_port_in_use_exits_2() -> None:
    """A port that cannot be bound: exit 2 and a message, no traceback."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        result = run_cli("serve", "--port", str(port))
    assert_clean_failure(result, f"cannot listen on 127.0.0.1:{port}")


################################################################
# serve as a subprocess: the ready line and signals
################################################################


async def _read_until_eof(stream: trio.abc.ReceiveStream) -> bytes:
    parts = []
    while chunk := await stream.receive_some():
        parts.append(chunk)
    return b"".join(parts)


async def first_line(proc: trio.Process) -> bytes:
    """The server's first line on stdout (``serving on URL``), read a byte at a time."""
    assert proc.stdout is not None
    line = b""
    while not line.endswith(b"\n"):
        chunk = await proc.stdout.receive_some(1)
        assert chunk, f"the server exited before listening: {line!r}"
        line += chunk
    return line


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
async def test_serve_stops_gracefully_on_signal(root: Path, signum: signal.Signals) -> None:
    """The server prints its real port, serves, and exits 0 on SIGINT / SIGTERM."""
    argv = [*CLI, "serve", "--port", "0", "--root", str(root)]
    proc = await trio.lowlevel.open_process(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=die_with_parent
    )
    assert proc.stdout is not None
    assert proc.stderr is not None
    try:
        with trio.fail_after(PROC_TIMEOUT):
            line = await first_line(proc)
            assert line.startswith(b"serving on http://127.0.0.1:"), line
            url = line.decode().strip().removeprefix("serving on ")
            got = await trio.run_process([*CLI, "get", f"{url}/hello.txt"], capture_stdout=True)
            assert got.stdout == b"hello, world\n"
            proc.send_signal(signum)
            out = await _read_until_eof(proc.stdout)
            err = (await _read_until_eof(proc.stderr)).decode()
            await proc.wait()
    finally:
        with trio.CancelScope(shield=True):
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
            await proc.stdout.aclose()
            await proc.stderr.aclose()
    assert proc.returncode == 0, err
    assert out == b""
    assert err.splitlines() == [f"trio-h2t: {signum.name}: stopping"]


async def test_serve_in_process_reports_port(root: Path) -> None:
    """``serve`` reports the bound port through ``task_status`` and serves requests."""
    with trio.fail_after(PROC_TIMEOUT):
        async with trio.open_nursery() as nursery:
            port = await nursery.start(
                lambda task_status: serve(
                    host="127.0.0.1", port=0, root=root, task_status=task_status
                )
            )
            out = MemoryWriter()
            assert await fetch(f"http://127.0.0.1:{port}/hello.txt", out=out) == 0
            assert out.buffer.getvalue() == b"hello, world\n"
            nursery.cancel_scope.cancel()


@pytest.mark.parametrize(
    ("args", "idle"),
    [
        ((), SERVE_IDLE_TIMEOUT),
        (("--max-connection-idle", "0"), None),
        (("--max-connection-idle", "2.5"), 2.5),
    ],
)
def test_serve_idle_timeout_flag(args: tuple[str, ...], idle: float | None) -> None:
    """``serve`` closes idle connections after 5 minutes unless told otherwise; 0 is never."""
    assert SERVE_IDLE_TIMEOUT == 300.0
    assert _build_parser().parse_args(["serve", *args]).max_connection_idle == idle


@pytest.mark.parametrize(
    ("args", "size"), [((), 16384), (("--max-frame-size", "1048576"), 1024 * 1024)]
)
def test_serve_max_frame_size_flag(args: tuple[str, ...], size: int) -> None:
    """``serve`` advertises RFC 9113's initial 16 KiB SETTINGS_MAX_FRAME_SIZE unless
    told otherwise (the library's default is 1 MiB)."""
    assert trio_h2t.TransportConfig().max_frame_size == 1024 * 1024
    assert _build_parser().parse_args(["serve", *args]).max_frame_size == size


async def _goaways_until_eof(port: int) -> list[tuple[float, int, bytes]]:
    """A raw client that sends its preface and SETTINGS, then only reads: the time
    (trio's clock), code and debug data of each GOAWAY until the server closes."""
    from hyperframe.frame import GoAwayFrame, SettingsFrame

    sock = await trio.open_tcp_stream("127.0.0.1", port)
    await sock.send_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + SettingsFrame(0).serialize())
    goaways = []
    buf = bytearray()
    while data := await sock.receive_some(65536):
        buf += data
        for frame in take_frames(buf):
            if isinstance(frame, GoAwayFrame):
                goaways.append((trio.current_time(), frame.error_code, frame.additional_data))
    await sock.aclose()
    return goaways


@pytest.mark.parametrize("idle", [SERVE_IDLE_TIMEOUT, None], ids=["default", "never"])
async def test_serve_closes_idle_connections(
    root: Path, mock_clock: trio.testing.MockClock, idle: float | None
) -> None:
    """By default ``serve`` ends a connection that had no stream for 5 minutes with
    GOAWAY(NO_ERROR, "max_idle"); with the timeout off it keeps it (virtual time:
    the clock jumps once everything has waited 0.1 s for real)."""
    mock_clock.autojump_threshold = 0.1
    kwargs: dict[str, Any] = {} if idle is not None else {"max_connection_idle": None}
    async with trio.open_nursery() as nursery:
        port = await nursery.start(
            lambda task_status: serve(
                host="127.0.0.1", port=0, root=root, task_status=task_status, **kwargs
            )
        )
        start = trio.current_time()
        with trio.move_on_after(3600) as hour:
            goaways = await _goaways_until_eof(port)
        nursery.cancel_scope.cancel()
    if idle is None:
        assert hour.cancelled_caught  # an hour later, still open
        return
    assert goaways, "closed without a GOAWAY"
    at, code, debug = goaways[0]
    assert (code, debug) == (0, b"max_idle")
    assert SERVE_IDLE_TIMEOUT <= at - start < SERVE_IDLE_TIMEOUT + 10


async def test_small_files_are_cached_for_at_most_a_second(
    conn: trio_h2t.ClientConnection, root: Path, mock_clock: trio.testing.MockClock
) -> None:
    """A small file is served from memory, and a change shows once the entry expires."""
    first = await request(conn, "GET", "/hello.txt")
    assert first.body == b"hello, world\n"
    (root / "hello.txt").write_bytes(b"changed\n")
    cached = await request(conn, "GET", "/hello.txt")
    assert cached.body == b"hello, world\n"  # within the TTL: no disk access
    assert cached["content-length"] == str(len(cached.body))
    mock_clock.jump(1.1)
    fresh = await request(conn, "GET", "/hello.txt")
    assert fresh.body == b"changed\n"
    assert fresh["content-length"] == "8"
    (root / "hello.txt").unlink()
    mock_clock.jump(1.1)
    assert (await request(conn, "GET", "/hello.txt")).status == 404


async def test_serve_tls_and_get_with_cacert(root: Path, tmp_path: Path) -> None:
    """``serve --certfile --keyfile`` serves h2 over TLS; ``get https://... --cacert`` fetches."""
    trustme = pytest.importorskip("trustme")
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    certfile, keyfile, cafile = tmp_path / "cert.pem", tmp_path / "key.pem", tmp_path / "ca.pem"
    cert.cert_chain_pems[0].write_to_path(str(certfile))
    cert.private_key_pem.write_to_path(str(keyfile))
    ca.cert_pem.write_to_path(str(cafile))
    argv = [*CLI, "serve", "--port", "0", "--root", str(root)]
    argv += ["--certfile", str(certfile), "--keyfile", str(keyfile)]
    proc = await trio.lowlevel.open_process(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=die_with_parent
    )
    assert proc.stdout is not None
    assert proc.stderr is not None
    try:
        with trio.fail_after(PROC_TIMEOUT):
            line = await first_line(proc)
            assert line.startswith(b"serving on https://127.0.0.1:"), line
            url = line.decode().strip().removeprefix("serving on ")
            get = [*CLI, "get", "--cacert", str(cafile), f"{url}/hello.txt"]
            got = await trio.run_process(get, capture_stdout=True)
            assert got.stdout == b"hello, world\n"
            untrusted = await trio.run_process(
                [*CLI, "get", f"{url}/hello.txt"], capture_stderr=True, check=False
            )
            assert untrusted.returncode == 2
            assert b"TLS handshake" in untrusted.stderr
            plain = url.replace("https://", "http://")
            wrong_scheme = await trio.run_process(
                [*CLI, "get", f"{plain}/hello.txt"], capture_stderr=True, check=False
            )
            assert wrong_scheme.returncode == 2
            assert b"use an https:// URL" in wrong_scheme.stderr, wrong_scheme.stderr
            assert b"Traceback" not in wrong_scheme.stderr
            proc.send_signal(signal.SIGTERM)
            await proc.wait()
    finally:
        with trio.CancelScope(shield=True):
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
            await proc.stdout.aclose()
            await proc.stderr.aclose()
    assert proc.returncode == 0


def test_serve_certfile_without_its_key_names_keyfile(tmp_path: Path) -> None:
    """``serve --certfile`` with a file holding no private key says to pass --keyfile."""
    trustme = pytest.importorskip("trustme")
    certfile = tmp_path / "cert.pem"
    trustme.CA().issue_cert("127.0.0.1").cert_chain_pems[0].write_to_path(str(certfile))
    result = run_cli("serve", "--port", "0", "--certfile", str(certfile))
    assert_clean_failure(result, "--certfile/--keyfile: ")
    assert "pass it with --keyfile" in result.stderr
