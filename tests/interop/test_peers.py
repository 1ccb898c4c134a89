"""trio_h2t against real HTTP/2 peers over loopback (127.0.0.1 only).

- our server (``python -m trio_h2t serve``) against ``curl --http2-prior-knowledge``,
  ``nghttp`` and ``h2load``;
- our client (``trio_h2t.open_connection``) against ``nghttpd --no-tls``.

All speak h2c with prior knowledge. Every peer process is bounded by
``PROC_TIMEOUT`` and killed at the end; a missing tool fails the test (see
``conftest.py``). Run them alone with ``.venv/bin/python -m pytest tests/interop``.
"""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import trio

import trio_h2t

from .conftest import (
    PROC_TIMEOUT,
    Docroot,
    Server,
    check_clean_exit,
    die_with_parent,
    start_h2t_server,
    stop,
    tool,
)


def run(*argv: str) -> subprocess.CompletedProcess[bytes]:
    """Run a peer tool to completion (bounded); stdout and stderr are captured."""
    return subprocess.run(argv, capture_output=True, timeout=PROC_TIMEOUT, check=False)


def ok(result: subprocess.CompletedProcess[bytes]) -> subprocess.CompletedProcess[bytes]:
    assert result.returncode == 0, (
        f"{result.args[0]} exited {result.returncode}: {result.stderr.decode(errors='replace')}"
    )
    return result


################################################################
# our server vs curl
################################################################


def curl(*args: str) -> subprocess.CompletedProcess[bytes]:
    """curl with HTTP/2 prior knowledge; silent but for errors; bounded."""
    return run(
        tool("curl"), "--http2-prior-knowledge", "-sS", "--max-time", str(PROC_TIMEOUT), *args
    )


def test_curl_get(h2t_server: Server, docroot: Docroot) -> None:
    """curl GETs a file over HTTP/2: the bytes match and it reports HTTP version 2."""
    r = ok(curl("-w", "\n%{http_code} %{http_version}", f"{h2t_server.url}/small.txt"))
    body, _, meta = r.stdout.rpartition(b"\n")
    assert body == docroot.small
    assert meta == b"200 2"


def test_curl_get_large(h2t_server: Server, docroot: Docroot, tmp_path: Path) -> None:
    """A 2 MiB file (many flow-control windows) arrives intact."""
    out = tmp_path / "large.bin"
    r = ok(curl("-o", str(out), "-w", "%{http_code}", f"{h2t_server.url}/large.bin"))
    assert r.stdout == b"200"
    assert out.read_bytes() == docroot.large


def test_curl_head(h2t_server: Server, docroot: Docroot) -> None:
    """HEAD returns the headers (status, type, length) and no body."""
    r = ok(curl("-I", f"{h2t_server.url}/small.txt"))
    lines = r.stdout.decode().lower().splitlines()
    assert lines[0].strip() == "http/2 200"
    assert "content-type: text/plain" in lines
    assert f"content-length: {len(docroot.small)}" in lines
    assert lines[-1].strip() == ""  # the head ends; nothing follows


def test_curl_404(h2t_server: Server) -> None:
    """A missing file is a 404; with --fail curl exits 22."""
    r = ok(curl("-o", "/dev/null", "-w", "%{http_code}", f"{h2t_server.url}/nope.txt"))
    assert r.stdout == b"404"
    assert curl("--fail", "-o", "/dev/null", f"{h2t_server.url}/nope.txt").returncode == 22


def test_curl_path_traversal(h2t_server: Server) -> None:
    """``..`` sent verbatim (--path-as-is) cannot leave the root."""
    r = ok(
        curl(
            "--path-as-is",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            f"{h2t_server.url}/../../etc/passwd",
        )
    )
    assert r.stdout == b"404"


def test_curl_post_echo_1mib(h2t_server: Server, docroot: Docroot, tmp_path: Path) -> None:
    """A 1 MiB POST body (bigger than every window) is echoed back byte for byte, over h2."""
    out = tmp_path / "echo.bin"
    upload = docroot.path / "upload.bin"
    r = ok(
        curl(
            "--data-binary",
            f"@{upload}",
            "-o",
            str(out),
            "-w",
            "%{http_code} %{http_version}",
            f"{h2t_server.url}/echo",
        )
    )
    assert r.stdout == b"200 2"
    assert out.read_bytes() == docroot.upload


def test_curl_post_form_data(h2t_server: Server) -> None:
    """``curl -d @file`` (form data) works too; curl strips the newlines."""
    r = ok(curl("-d", "a=1&b=2", f"{h2t_server.url}/form"))
    assert r.stdout == b"a=1&b=2"


################################################################
# our server vs nghttp
################################################################


def nghttp(*args: str) -> subprocess.CompletedProcess[bytes]:
    """nghttp (prior knowledge is its default for http://), bounded."""
    return run(tool("nghttp"), "-t", str(PROC_TIMEOUT), *args)


def test_nghttp_get(h2t_server: Server, docroot: Docroot) -> None:
    """``nghttp -v`` GETs a file: 200, the right headers, the body."""
    r = ok(nghttp("-v", f"{h2t_server.url}/small.txt"))
    out = r.stdout.decode(errors="replace")
    assert re.search(r"recv \(stream_id=\d+\) :status: 200", out)
    assert f"content-length: {len(docroot.small)}" in out
    assert docroot.small.decode() in out
    assert "recv GOAWAY" not in out


def test_nghttp_get_large(h2t_server: Server, docroot: Docroot) -> None:
    """``nghttp`` receives the 2 MiB file intact (body only on stdout without -v)."""
    r = ok(nghttp(f"{h2t_server.url}/large.bin"))
    assert r.stdout == docroot.large


def test_nghttp_post(h2t_server: Server, docroot: Docroot) -> None:
    """``nghttp -v -d FILE`` POSTs; the body comes back."""
    r = ok(nghttp("-v", "-d", str(docroot.path / "small.txt"), f"{h2t_server.url}/echo"))
    out = r.stdout.decode(errors="replace")
    assert re.search(r"recv \(stream_id=\d+\) :status: 200", out)
    assert docroot.small.decode() in out


def test_nghttp_post_1mib(h2t_server: Server, docroot: Docroot) -> None:
    """``nghttp -d`` with a 1 MiB body: the echo matches byte for byte."""
    r = ok(nghttp("-d", str(docroot.path / "upload.bin"), f"{h2t_server.url}/echo"))
    assert r.stdout == docroot.upload


def test_nghttp_post_trailers(h2t_server: Server, docroot: Docroot) -> None:
    """Request trailers (``nghttp --trailer``) come back as response trailers, after the body."""
    r = ok(
        nghttp(
            "-v",
            "-d",
            str(docroot.path / "small.txt"),
            "--trailer",
            "x-checksum: abc123",
            "--trailer",
            "x-count: 7",
            f"{h2t_server.url}/echo",
        )
    )
    out = r.stdout.decode(errors="replace")
    body_at = out.index(docroot.small.decode())
    trailer = re.search(r"recv \(stream_id=\d+\) x-checksum: abc123", out)
    assert trailer is not None, out
    assert trailer.start() > body_at  # received after the body: a trailer, not a header
    assert re.search(r"recv \(stream_id=\d+\) x-count: 7", out)
    # The HEADERS frame carrying the trailers ends the stream (END_STREAM | END_HEADERS).
    assert re.search(r"recv HEADERS frame <length=\d+, flags=0x05", out[trailer.start() :])


def test_nghttp_multiplexed(h2t_server: Server, docroot: Docroot) -> None:
    """``nghttp -m 50``: 50 concurrent requests on one connection all succeed."""
    r = ok(nghttp("-v", "-m", "50", f"{h2t_server.url}/small.txt"))
    out = r.stdout.decode(errors="replace")
    streams = set(re.findall(r"recv \(stream_id=(\d+)\) :status: 200", out))
    assert len(streams) == 50
    assert out.count(docroot.small.decode()) == 50
    assert "recv RST_STREAM" not in out


def test_max_concurrent_streams_is_advertised(docroot: Docroot, tmp_path: Path) -> None:
    """``serve --max-concurrent-streams 7`` announces 7 in its SETTINGS (seen by nghttp)."""
    server = start_h2t_server(
        docroot.path, tmp_path / "server.log", "--max-concurrent-streams", "7"
    )
    try:
        r = ok(nghttp("-v", f"{server.url}/small.txt"))
    finally:
        stop(server.proc)
        assert server.proc.stdout is not None
        server.proc.stdout.close()
    out = r.stdout.decode(errors="replace")
    ours = out[out.index("recv SETTINGS frame") :]
    assert "[SETTINGS_MAX_CONCURRENT_STREAMS(0x03):7]" in ours.split("send")[0]
    check_clean_exit(server)


################################################################
# our server vs h2load
################################################################


def test_h2load(h2t_server: Server) -> None:
    """h2load: 2000 requests, 4 connections, 50 streams each at a time, none failed."""
    r = ok(run(tool("h2load"), "-n", "2000", "-c", "4", "-m", "50", f"{h2t_server.url}/small.txt"))
    out = r.stdout.decode()
    line = re.search(r"^requests: .*$", out, re.MULTILINE)
    assert line is not None, out
    print(line.group(0))  # shown with -s, and in the report
    counts = {
        key: int(n)
        for n, key in re.findall(r"(\d+) (total|started|done|succeeded|failed|errored)", line[0])
    }
    assert counts["succeeded"] == 2000, line[0]
    assert counts["failed"] == 0, line[0]
    assert counts["errored"] == 0, line[0]
    assert re.search(r"^status codes: 2000 2xx", out, re.MULTILINE), out


################################################################
# our client vs nghttpd
################################################################


async def test_client_get_small_and_large(nghttpd: Server, docroot: Docroot) -> None:
    """``open_connection`` GETs a small and a 2 MiB file from nghttpd; bytes match."""
    with trio.fail_after(PROC_TIMEOUT):
        async with trio_h2t.open_connection("127.0.0.1", nghttpd.port) as conn:
            response = await conn.request("GET", "/small.txt")
            assert response.status == 200
            assert response.body == docroot.small
            response = await conn.request("GET", "/large.bin")
            assert response.status == 200
            assert response.headers["content-length"] == str(len(docroot.large))
            assert response.body == docroot.large
            response = await conn.request("GET", "/missing")
            assert response.status == 404


async def test_client_post_1mib(nghttpd: Server, docroot: Docroot) -> None:
    """A 1 MiB request body goes out under nghttpd's flow control (``--echo-upload``)."""
    with trio.fail_after(PROC_TIMEOUT):
        async with trio_h2t.open_connection("127.0.0.1", nghttpd.port) as conn:
            response = await conn.request("POST", "/echo", body=docroot.upload)
            assert response.status == 200
            assert response.body == docroot.upload


async def test_client_100_concurrent(nghttpd: Server, docroot: Docroot) -> None:
    """100 concurrent GETs on one connection (small and large mixed) all succeed."""
    results: dict[int, bytes] = {}

    async def one(i: int) -> None:
        path = "/large.bin" if i % 10 == 0 else "/small.txt"
        response = await conn.request("GET", path)
        assert response.status == 200
        results[i] = response.body

    with trio.fail_after(PROC_TIMEOUT):
        async with (
            trio_h2t.open_connection("127.0.0.1", nghttpd.port) as conn,
            trio.open_nursery() as nursery,
        ):
            for i in range(100):
                nursery.start_soon(one, i)
    assert len(results) == 100
    for i, body in results.items():
        assert body == (docroot.large if i % 10 == 0 else docroot.small), i


################################################################
# graceful stop under load
################################################################


def test_sigterm_lets_inflight_download_finish(docroot: Docroot, tmp_path: Path) -> None:
    """On SIGTERM the server stops accepting, finishes a slow download, and exits 0."""
    server = start_h2t_server(docroot.path, tmp_path / "server.log")
    out = tmp_path / "large.bin"
    argv = [tool("curl"), "--http2-prior-knowledge", "-sS", "--max-time", str(PROC_TIMEOUT)]
    argv += ["--limit-rate", "2M", "-o", str(out), f"{server.url}/large.bin"]  # about 1 s
    download = subprocess.Popen(argv, stderr=subprocess.PIPE, preexec_fn=die_with_parent)
    try:
        deadline = time.monotonic() + 10
        while not (out.exists() and out.stat().st_size > 0):  # the response has started
            assert time.monotonic() < deadline, "the download did not start"
            time.sleep(0.02)
        server.proc.send_signal(signal.SIGTERM)
        refused = False
        while not refused and time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", server.port), timeout=1).close()
                time.sleep(0.02)
            except ConnectionRefusedError:
                refused = True
        assert refused, "the server still accepts connections after SIGTERM"
        _, curl_err = download.communicate(timeout=PROC_TIMEOUT)
        assert download.returncode == 0, curl_err
        assert out.read_bytes() == docroot.large
        server.proc.wait(timeout=PROC_TIMEOUT)
    finally:
        stop(download, signal.SIGKILL)
        stop(server.proc, signal.SIGKILL)
        assert server.proc.stdout is not None
        server.proc.stdout.close()
    check_clean_exit(server)
