"""``trio-h2t check`` against live servers: clean, deliberately broken, nghttpd, hypercorn.

Each run is bounded (a few examples, a time budget) and uses loopback only. The
known faults of the two peers must be found: nghttpd lets a DATA frame (or a HEADERS
frame) on a stream id below one already used pass instead of an error (RFC 9113
§5.1.1), hypercorn answers a PING sent before the client's SETTINGS (§3.4).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _helpers_common import free_port, write_certificate

from trio_h2t._cli import main
from trio_h2t.testing import PREFACE, PROPERTIES

ROOT = Path(__file__).resolve().parents[1]
#: Seconds a server subprocess may take to start listening.
START_LIMIT = 20.0


def wait_listening(port: int, proc: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + START_LIMIT
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listens on port {port}")


@contextlib.contextmanager
def running(args: list[str], port: int, cwd: Path) -> Iterator[None]:
    # This tree's trio_h2t, wherever the server runs from.
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        args, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_listening(port, proc)
        yield
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def check(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    status = main(["check", *args])
    out, err = capsys.readouterr()
    assert "servers you run" in err  # the loud notice
    return status, out


# -- a deliberately broken server -----------------------------------------------------


@pytest.fixture
def broken_server(tmp_path: Path) -> Iterator[int]:
    """A TCP port served by tests/broken_h2_server.py (in its own process)."""
    port = free_port()
    script = str(Path(__file__).with_name("broken_h2_server.py"))
    with running([sys.executable, script, str(port)], port, tmp_path):
        yield port


def test_check_catches_a_broken_server(
    broken_server: int, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A server that lets frames on stream 0 and on idle streams pass is caught, each
    finding naming its RFC section, with hex, frames and a replay that fails again."""
    url = f"http://127.0.0.1:{broken_server}/"
    db = str(tmp_path / "db")
    status, out = check(
        capsys, url, "--property", "stream-zero", "--property", "idle-stream",
        "--property", "ping", "--max-examples", "10", "--seconds", "60", "--db", db,
        "--timeout", "0.5",
    )  # fmt: skip
    assert status == 1
    assert "BROKEN stream-zero (RFC 9113 §6.1-§6.10)" in out
    assert "BROKEN idle-stream (RFC 9113 §5.1)" in out
    assert "ping: ok" in out
    assert "sent, as frames:" in out
    assert "    PREFACE" in out
    replay = tmp_path / "db" / "findings" / "idle-stream.json"
    assert f"--replay {replay}" in out
    saved = json.loads(replay.read_text())
    assert saved["section"] == "RFC 9113 §5.1"
    assert bytes.fromhex(saved["hex"]).startswith(PREFACE)
    status, out = check(capsys, url, "--replay", str(replay), "--timeout", "0.5")
    assert status == 1
    assert "BROKEN: expected a connection error" in out
    # Replayed from the example database, the finding comes back at once.
    status, out = check(
        capsys, url, "--property", "idle-stream", "--max-examples", "1", "--db", db,
        "--timeout", "0.5",
    )  # fmt: skip
    assert status == 1
    assert "BROKEN idle-stream" in out


def test_check_trio_h2t_serve_is_clean(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """``trio-h2t serve`` breaks no property (a few examples of each)."""
    (tmp_path / "index.html").write_text("hi\n")
    port = free_port()
    args = [sys.executable, "-m", "trio_h2t", "serve", "--port", str(port), "--root", "."]
    with running(args, port, tmp_path):
        status, out = check(
            capsys, f"http://127.0.0.1:{port}/", "--max-examples", "5", "--seconds", "120",
            "--db", str(tmp_path / "db"),
        )  # fmt: skip
    assert "no property broken" in out, out
    assert status == 0


def test_check_tls_against_trio_h2t_serve_is_clean(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """``trio-h2t check --tls`` against ``trio-h2t serve --certfile`` (h2 over TLS,
    ALPN, a test CA's certificate) breaks no property, every property run over TLS."""
    certfile, keyfile = write_certificate(tmp_path)
    (tmp_path / "index.html").write_text("hi\n")
    port = free_port()
    args = [
        sys.executable, "-m", "trio_h2t", "serve", "--port", str(port), "--root", ".",
        "--certfile", str(certfile), "--keyfile", str(keyfile),
    ]  # fmt: skip
    with running(args, port, tmp_path):
        status, out = check(
            capsys, f"http://127.0.0.1:{port}/", "--tls", "--max-examples", "5",
            "--seconds", "120", "--db", str(tmp_path / "db"),
        )  # fmt: skip
    assert "no property broken" in out, out
    assert status == 0
    # Every property ran over TLS: at least one connection each, none left unrun.
    for prop in PROPERTIES:
        ran = re.search(rf"^\s*{re.escape(prop.name)}: ok \((\d+) connections\)", out, re.M)
        assert ran is not None, out
        assert int(ran.group(1)) >= 1, out


def test_check_finds_nghttpd_lower_stream_ids(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """nghttpd lets DATA (and HEADERS) on a stream id below one already used pass."""
    (tmp_path / "index.html").write_text("hi\n")
    port = free_port()
    with running(["nghttpd", "--no-tls", "-d", str(tmp_path), str(port)], port, tmp_path):
        status, out = check(
            capsys, f"http://127.0.0.1:{port}/", "--property", "lower-stream-data",
            "--property", "stream-id-order", "--max-examples", "20", "--seconds", "60",
            "--db", str(tmp_path / "db"), "--timeout", "1",
        )  # fmt: skip
    assert status == 1
    assert "BROKEN lower-stream-data (RFC 9113 §5.1.1, §6.1)" in out
    assert "BROKEN stream-id-order (RFC 9113 §5.1.1)" in out


HYPERCORN_APP = """
async def app(scope, receive, send):
    if scope["type"] == "http":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})
"""


def test_check_finds_hypercorn_ping_before_settings(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """hypercorn answers a PING sent before the client's SETTINGS (RFC 9113 §3.4)."""
    (tmp_path / "app.py").write_text(HYPERCORN_APP)
    port = free_port()
    args = [sys.executable, "-m", "hypercorn", "--bind", f"127.0.0.1:{port}", "app:app"]
    with running(args, port, tmp_path):
        status, out = check(
            capsys, f"http://127.0.0.1:{port}/", "--property", "preface", "--max-examples",
            "20", "--seconds", "60", "--db", str(tmp_path / "db"), "--timeout", "1",
        )  # fmt: skip
    assert status == 1
    assert "BROKEN preface (RFC 9113 §3.4)" in out
    assert "PING stream=0 flags=ACK" in out
