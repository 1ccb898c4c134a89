"""Worker processes sharing a port (``trio_h2t._workers``; docs/keepalive-and-shutdown.md,
"More than one core"): ``serve_tcp(reuse_port=True)``, its error where the platform
lacks SO_REUSEPORT, and ``trio-h2t serve --workers N`` (a drain across the workers
loses nothing; a crashed worker is restarted). Loopback only, each bounded.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

from trio_h2t import (
    ClientConnection,
    GoAwayError,
    H2Server,
    H2Stream,
    open_connection,
    serve_tcp,
)
from trio_h2t._cli import main

#: Client connections in the drain test, and the uploads each keeps open across it.
CONNECTIONS = 8
UPLOADS = 3
CHUNK = 4096


async def _hello(stream: H2Stream) -> None:
    await stream.send_headers([(":status", "200")])
    await stream.send_data(b"hello", end_stream=True)


async def test_two_servers_share_a_port_with_reuse_port() -> None:
    """Two serve_tcp(reuse_port=True) listen on one port at once, both serving."""
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            first: H2Server = await nursery.start(
                functools.partial(serve_tcp, _hello, 0, host="127.0.0.1", reuse_port=True)
            )
            second: H2Server = await nursery.start(
                functools.partial(serve_tcp, _hello, first.port, host="127.0.0.1", reuse_port=True)
            )
            assert second.port == first.port
            for _ in range(4):
                async with open_connection("127.0.0.1", first.port) as conn:
                    assert (await conn.request("GET", "/")).body == b"hello"
            await first.aclose()
            await second.aclose()


async def test_without_reuse_port_the_port_is_not_shared() -> None:
    """Without reuse_port, a second server on the same port fails to bind."""
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            first: H2Server = await nursery.start(
                functools.partial(serve_tcp, _hello, 0, host="127.0.0.1", reuse_port=True)
            )
            with pytest.raises(OSError) as info:  # noqa: PT011 - the errno says which
                await serve_tcp(_hello, first.port, host="127.0.0.1")
            assert info.value.errno == errno.EADDRINUSE
            await first.aclose()


async def test_reuse_port_where_the_platform_lacks_it_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No SO_REUSEPORT (Windows): serve_tcp(reuse_port=True) raises OSError
    (ENOPROTOOPT) naming it, before anything is bound."""
    monkeypatch.delattr(socket, "SO_REUSEPORT")
    with pytest.raises(OSError, match="SO_REUSEPORT is not available") as info:
        await serve_tcp(_hello, 0, host="127.0.0.1", reuse_port=True)
    assert info.value.errno == errno.ENOPROTOOPT


def test_workers_where_the_platform_lacks_reuse_port_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``serve --workers 2`` without SO_REUSEPORT: one line on stderr, status 2."""
    monkeypatch.delattr(socket, "SO_REUSEPORT")
    with pytest.raises(SystemExit) as info:
        main(["serve", "--workers", "2", "--port", "0", "--root", str(tmp_path)])
    assert info.value.code == 2
    assert "SO_REUSEPORT is not available" in capsys.readouterr().err


def test_reuse_port_must_be_a_bool() -> None:
    """reuse_port=1 is refused (a bool only), before anything is bound."""
    with pytest.raises(TypeError, match="reuse_port must be a bool, not int"):
        trio.run(functools.partial(serve_tcp, _hello, 0, reuse_port=1))  # type: ignore[arg-type]


# ------------------------------------------------------------------ the supervisor


class Supervised:
    """A running ``trio-h2t serve --workers N``: its process, port, and stderr."""

    def __init__(self, proc: trio.Process, port: int, stderr: Path) -> None:
        self.proc = proc
        self.port = port
        self.stderr = stderr

    def log(self) -> str:
        return self.stderr.read_text()

    def worker_pids(self) -> list[int]:
        """The pids of the workers listening now (from the supervisor's log)."""
        by_slot: dict[str, int] = {}
        for line in self.log().splitlines():
            if line.startswith("trio-h2t: worker ") and line.endswith(" listening"):
                words = line.split()
                by_slot[words[2]] = int(words[4].rstrip(")"))
        return list(by_slot.values())

    async def wait_log(self, text: str, count: int = 1) -> None:
        """Wait (bounded by the caller) until ``text`` is in the log ``count`` times."""
        await _poll_until(lambda: self.log().count(text) >= count)


async def _poll_until(predicate: Callable[[], bool]) -> None:
    """Look every 50 ms until ``predicate()`` holds (bounded by the caller). For what
    no trio.Event announces: another process's log, a frame a connection read."""
    while not predicate():  # noqa: ASYNC110 - nothing in this process to wait on
        await trio.sleep(0.05)


@asynccontextmanager
async def supervised(tmp_path: Path, workers: int) -> AsyncIterator[Supervised]:
    """Run ``trio-h2t serve --workers N`` on a free loopback port; kill it on exit
    if the test did not stop it."""
    (tmp_path / "index.html").write_bytes(b"hello")
    stderr = tmp_path / "supervisor.err"
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).parent.parent))
    with stderr.open("wb") as err:
        proc = await trio.lowlevel.open_process(
            [
                *(sys.executable, "-m", "trio_h2t", "serve", "--workers", str(workers)),
                *("--host", "127.0.0.1", "--port", "0", "--root", str(tmp_path)),
            ],
            stdout=subprocess.PIPE,
            stderr=err,
            env=env,
        )
    try:
        assert proc.stdout is not None
        line = b""
        with trio.fail_after(60):
            while not line.endswith(b"\n"):
                chunk = await proc.stdout.receive_some(1)
                assert chunk, f"the supervisor exited: {stderr.read_text()}"
                line += chunk
        assert line.startswith(b"serving on http://127.0.0.1:"), line
        yield Supervised(proc, int(line.rsplit(b":", 1)[1]), stderr)
    finally:
        if proc.returncode is None:
            proc.kill()
            with trio.CancelScope(shield=True):
                await proc.wait()
        for pid in Supervised(proc, 0, stderr).worker_pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


async def test_a_drain_across_workers_loses_nothing(tmp_path: Path) -> None:
    """SIGTERM to ``serve --workers 2`` while uploads are open on 8 connections: every
    worker drains; each upload goes on after the signal and gets its whole echo; a
    new request is refused retryably; the supervisor exits 0."""
    async with supervised(tmp_path, 2) as sup:
        assert len(sup.worker_pids()) == 2
        goaways = trio.Semaphore(0)
        echoed: list[bytes] = []
        refused: list[BaseException] = []
        signalled = trio.Event()
        under_way = trio.Event()  # every upload sent its first chunk
        first_sent: list[int] = []

        async def upload(conn: ClientConnection, n: int) -> None:
            body = bytes([n]) * (4 * CHUNK)
            headers = [
                (":method", "POST"),
                (":scheme", "http"),
                (":authority", "localhost"),
                (":path", "/echo"),
            ]
            async with conn.open_stream(headers) as stream:
                await stream.send_data(body[:CHUNK])
                first_sent.append(n)
                if len(first_sent) == CONNECTIONS * UPLOADS:
                    under_way.set()
                await signalled.wait()
                # The drain is under way: the rest of the body still gets through.
                for i in range(1, 4):
                    await stream.send_data(body[i * CHUNK : (i + 1) * CHUNK])
                await stream.end()
                await stream.receive_headers()
                got = await stream.read_all()
            assert got == body
            echoed.append(got)

        async def client(c: int) -> None:
            async with open_connection("127.0.0.1", sup.port) as conn:
                assert (await conn.request("GET", "/index.html")).body == b"hello"
                async with trio.open_nursery() as nursery:
                    for u in range(UPLOADS):
                        nursery.start_soon(upload, conn, c * UPLOADS + u)
                    core = conn._core
                    await _poll_until(lambda: core.goaway_received is not None)
                    goaways.release()
                    with pytest.raises(GoAwayError) as info:
                        await conn.request("GET", "/index.html")
                    assert info.value.retryable
                    refused.append(info.value)

        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                for c in range(CONNECTIONS):
                    nursery.start_soon(client, c)
                await under_way.wait()
                sup.proc.send_signal(signal.SIGTERM)
                for _ in range(CONNECTIONS):
                    await goaways.acquire()  # every connection got its first GOAWAY
                signalled.set()
            assert await sup.proc.wait() == 0
        assert len(echoed) == CONNECTIONS * UPLOADS
        assert len(refused) == CONNECTIONS
        log = sup.log()
        assert log.count("trio-h2t: SIGTERM: stopping") == 2, log  # both workers drained
        assert "restarting" not in log


async def test_a_crashed_worker_is_restarted(tmp_path: Path) -> None:
    """A worker killed with SIGKILL is restarted (a new pid listens); requests keep
    being served; SIGTERM then stops everything with status 0."""
    async with supervised(tmp_path, 2) as sup:
        with trio.fail_after(60):
            before = sup.worker_pids()
            assert len(before) == 2
            os.kill(before[0], signal.SIGKILL)
            await sup.wait_log("restarting")
            await sup.wait_log(" listening", count=3)
            after = sup.worker_pids()
            assert len(after) == 2
            assert before[0] not in after
            assert before[1] in after
            for _ in range(6):
                async with open_connection("127.0.0.1", sup.port) as conn:
                    assert (await conn.request("GET", "/index.html")).body == b"hello"
            sup.proc.send_signal(signal.SIGTERM)
            assert await sup.proc.wait() == 0
