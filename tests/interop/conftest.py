"""Fixtures for the interop tests: the peer tools, a document root, and two servers.

Every peer runs as a subprocess on 127.0.0.1, bounded by ``PROC_TIMEOUT`` and killed
at teardown. A missing tool *fails* the test that needs it, naming the Debian package:
``bash scripts/run-tests`` installs them, and a silently skipped interop test would
hide exactly the regressions these tests exist for.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from _helpers_common import free_port

#: Upper bound, in seconds, for any one peer process (and for a server to start).
PROC_TIMEOUT = 30

#: Tool -> the Debian package that ships it.
PACKAGES = {
    "curl": "curl",
    "nghttp": "nghttp2-client",
    "h2load": "nghttp2-client",
    "nghttpd": "nghttp2-server",
}
#: nghttpd lives in /usr/sbin, which is not on every user's PATH.
EXTRA_PATH = ("/usr/sbin", "/usr/local/sbin", "/sbin")


def tool(name: str) -> str:
    """The path of peer tool ``name``; fails the test (never skips) if it is missing."""
    found = shutil.which(name) or shutil.which(name, path=os.pathsep.join(EXTRA_PATH))
    if found is None:
        pytest.fail(
            f"interop peer {name!r} is not installed: install the Debian package "
            f"{PACKAGES[name]!r} (`bash scripts/run-tests` does, when run as root)",
            pytrace=False,
        )
    return found


def die_with_parent() -> None:
    """``preexec_fn`` for long-running peers: SIGKILL the child if the test process
    dies without tearing down (Linux ``PR_SET_PDEATHSIG``; a no-op elsewhere)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # 1 == PR_SET_PDEATHSIG


def stop(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
    """Ask ``proc`` to stop with ``sig``; kill it if it has not exited within 10 s."""
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@dataclass(frozen=True)
class Docroot:
    """The files both servers serve."""

    path: Path
    small: bytes  # small.txt
    large: bytes  # large.bin, 2 MiB: many times any flow-control window
    upload: bytes  # upload.bin, 1 MiB: a request body bigger than the windows


@pytest.fixture(scope="session")
def docroot(tmp_path_factory: pytest.TempPathFactory) -> Docroot:
    path = tmp_path_factory.mktemp("docroot")
    small = b"hello from trio_h2t interop\n"
    large = os.urandom(2 * 1024 * 1024)
    upload = os.urandom(1024 * 1024)
    (path / "small.txt").write_bytes(small)
    (path / "large.bin").write_bytes(large)
    (path / "upload.bin").write_bytes(upload)
    (path / "index.html").write_bytes(b"<h1>trio_h2t</h1>\n")
    return Docroot(path, small, large, upload)


@dataclass(frozen=True)
class Server:
    """A running server subprocess: its base URL and where its stderr goes."""

    url: str
    port: int
    proc: subprocess.Popen[bytes]
    log: Path


def _read_first_line(proc: subprocess.Popen[bytes], timeout: float) -> bytes:
    assert proc.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    line = b""
    deadline = time.monotonic() + timeout
    try:
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not sel.select(left):
                break
            byte = os.read(proc.stdout.fileno(), 1)
            if not byte:
                break
            line += byte
    finally:
        sel.close()
    return line


def start_h2t_server(root: Path, log: Path, *extra: str) -> Server:
    """Start ``python -m trio_h2t serve --port 0 --root ROOT [EXTRA...]`` (stderr to
    ``log``) and wait for its ``serving on`` line. The caller must ``stop`` it."""
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "trio_h2t", "serve", "--port", "0", "--root", str(root), *extra],
            stdout=subprocess.PIPE,
            stderr=err,
            preexec_fn=die_with_parent,
        )
    line = _read_first_line(proc, PROC_TIMEOUT)
    prefix = b"serving on http://127.0.0.1:"
    if not line.startswith(prefix):
        stop(proc)
        pytest.fail(f"server did not start: {line!r}; stderr: {log.read_text()}")
    port = int(line[len(prefix) :])
    return Server(f"http://127.0.0.1:{port}", port, proc, log)


def check_clean_exit(server: Server, signame: str = "SIGTERM") -> None:
    """The server exited 0 and logged nothing but its stop notice."""
    text = server.log.read_text()
    messages = [m for m in text.splitlines() if f"{signame}: stopping" not in m]
    assert server.proc.returncode == 0, text
    assert messages == [], "the server logged errors:\n" + text


@pytest.fixture(scope="module")
def h2t_server(docroot: Docroot, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """Our server on DOCROOT, shared by a module's tests.

    Teardown stops it with SIGTERM, then checks that it exited 0 and logged nothing
    but its stop notice (a handler exception would show up there).
    """
    log = tmp_path_factory.mktemp("h2t-server") / "stderr.log"
    server = start_h2t_server(docroot.path, log)
    try:
        yield server
    finally:
        stop(server.proc)
        assert server.proc.stdout is not None
        server.proc.stdout.close()
    check_clean_exit(server)


@pytest.fixture(scope="module")
def nghttpd(docroot: Docroot, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """``nghttpd --no-tls --echo-upload`` serving DOCROOT on a free 127.0.0.1 port."""
    exe = tool("nghttpd")
    log = tmp_path_factory.mktemp("nghttpd") / "output.log"
    port = free_port()
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                *(exe, "--no-tls", "--echo-upload", "-a", "127.0.0.1"),
                "-d",
                str(docroot.path),
                str(port),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=die_with_parent,
        )
    try:
        deadline = time.monotonic() + PROC_TIMEOUT
        while True:
            if proc.poll() is not None:
                pytest.fail(f"nghttpd exited with {proc.returncode}: {log.read_text()}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"nghttpd did not accept connections: {log.read_text()}")
                time.sleep(0.05)
        yield Server(f"http://127.0.0.1:{port}", port, proc, log)
    finally:
        stop(proc)
