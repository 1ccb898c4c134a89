"""Fixtures for the conformance suite: a ``trio-h2t serve`` subprocess per module.

Each test module starts its own server (``python -m trio_h2t serve --port 0``) on
127.0.0.1 with a small document root, twice: once as shipped, and once with h2's speed
layer off (``trio_h2t._h2state.SPEED_LAYER = False``: the correctness layer,
``_h2fixes.py``, alone), so every case also shows the correctness patches hold without
the rewrites of ``_h2fast.py``. The fixture reads the port from the server's ``serving
on`` line, and stops it at teardown (SIGTERM, then SIGKILL after ``STOP_TIMEOUT``).
Every test gets a fresh TCP connection; after each test the server must still be running
(a peer must never be able to kill the whole server), and whatever the server wrote to
stderr during the test is attached to the test's report.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from .harness import H2Client

#: Seconds for the server to print its ``serving on`` line.
START_TIMEOUT = 20.0
#: Seconds the server gets to exit after SIGTERM before it is killed.
STOP_TIMEOUT = 5.0
#: Upper bound for any one test (each expectation is bounded by harness.TIMEOUT).
TEST_TIMEOUT = 20

#: The body of ``GET /`` (h2spec requests ``/``; several flow-control cases need
#: at least 5 bytes of it, and more than one DATA frame's worth never hurts).
INDEX_BODY = b"<!doctype html>\n<title>trio_h2t conformance</title>\n" + b"x" * 2000 + b"\n"
#: ``GET /large.bin``: 256 KiB, several times every default flow-control window.
LARGE_BODY = bytes(range(256)) * 1024


@dataclass(frozen=True)
class Server:
    """A running ``trio-h2t serve``: its port, process and stderr log."""

    port: int
    proc: subprocess.Popen[bytes]
    log: Path


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents:
            item.add_marker(pytest.mark.timeout(TEST_TIMEOUT))


def _die_with_parent() -> None:
    """``preexec_fn``: SIGKILL the server if the test process dies (Linux only)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # 1 == PR_SET_PDEATHSIG


def _read_line(proc: subprocess.Popen[bytes], timeout: float) -> bytes:
    assert proc.stdout is not None
    line = b""
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not sel.select(left):
                break
            byte = os.read(proc.stdout.fileno(), 1)
            if not byte:
                break
            line += byte
    return line


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


#: How the server process starts, by layer: as shipped, or with the speed layer off.
_LAUNCH = {
    "fast": ["-m", "trio_h2t"],
    "fixes": [
        "-c",
        "import runpy, trio_h2t._h2state as s, trio_h2t._h2fixes as f; "
        "s.SPEED_LAYER = False; "
        "assert type(s.make_h2_state(client_side=False, max_concurrent_streams=1, "
        "initial_window_size=1, max_header_list_size=1)) is f.FixedConnection; "
        "runpy.run_module('trio_h2t', run_name='__main__')",
    ],
}


@pytest.fixture(scope="module", params=sorted(_LAUNCH))
def h2_server(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Server]:
    """``trio-h2t serve --port 0`` on a fresh document root, for one test module
    and one h2 layer set (``fast``: both layers; ``fixes``: correctness only).
    A module's ``SERVE_ARGS`` (a tuple of strings) are appended to the command."""
    root = tmp_path_factory.mktemp("conformance-root")
    (root / "index.html").write_bytes(INDEX_BODY)
    (root / "large.bin").write_bytes(LARGE_BODY)
    log = root.parent / f"{root.name}-stderr.log"
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [
                *(sys.executable, *_LAUNCH[request.param], "serve", "--port", "0"),
                *("--root", str(root), *getattr(request.module, "SERVE_ARGS", ())),
            ],
            stdout=subprocess.PIPE,
            stderr=err,
            preexec_fn=_die_with_parent,
        )
    try:
        line = _read_line(proc, START_TIMEOUT)
        prefix = b"serving on http://127.0.0.1:"
        if not line.startswith(prefix):
            pytest.fail(f"server did not start: {line!r}; stderr: {log.read_text()}")
        yield Server(int(line[len(prefix) :]), proc, log)
    finally:
        _stop(proc)


@pytest.fixture
def server(h2_server: Server, request: pytest.FixtureRequest) -> Iterator[Server]:
    """The module's server; after the test it must still run. Its stderr output
    during the test is attached to the report."""
    if h2_server.proc.poll() is not None:
        pytest.fail(f"the server died earlier (exit status {h2_server.proc.returncode})")
    offset = h2_server.log.stat().st_size
    yield h2_server
    time.sleep(0.01)  # let a crash from this test's last frames surface
    with h2_server.log.open("rb") as f:
        f.seek(offset)
        output = f.read().decode(errors="replace")
    if output:
        request.node.add_report_section("teardown", f"server stderr, {request.node.name}", output)
    if h2_server.proc.poll() is not None:
        pytest.fail(f"the server process died during this test:\n{output}")


@pytest.fixture
def raw_conn(server: Server) -> Iterator[H2Client]:
    """A TCP connection to the server, before any byte of the preface."""
    client = H2Client(server.port)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def conn(raw_conn: H2Client) -> H2Client:
    """A connection after h2spec's handshake (SETTINGS exchanged both ways)."""
    raw_conn.handshake()
    return raw_conn
