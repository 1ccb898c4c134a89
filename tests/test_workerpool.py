"""The public worker halves (``trio_h2t.serve_worker``, ``trio_h2t.supervise_workers``;
docs/keepalive-and-shutdown.md, "More than one core") with real processes on
loopback: the drain on the first signal and on EOF of stdin, the stop at once on a
second signal, the supervisor's errors. Each process is bounded in time and stopped
by the test.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import trio

import trio_h2t
from trio_h2t import H2Stream, open_connection

ROOT = Path(__file__).resolve().parent.parent

#: A worker: answers GET / at once, and /slow after HOLD seconds (a request the drain
#: must let finish, or the second signal must cut off).
WORKER = r"""
import functools, sys, trio, trio_h2t
HOLD = float(sys.argv[2])
async def handler(stream):
    if stream.request.path == "/slow":
        print("slow request", flush=True)
        await trio.sleep(HOLD)
    await stream.send_headers([(":status", "200")])
    await stream.send_data(b"done", end_stream=True)
trio.run(functools.partial(trio_h2t.serve_worker, handler, int(sys.argv[1]), host="127.0.0.1"))
print("worker returned", flush=True)
"""

#: A supervisor of WORKER copies.
SUPERVISOR = r"""
import sys, trio, trio_h2t
worker = sys.argv[1]
def command(port):
    return [sys.executable, "-c", worker, str(port), "0.5"]
status = trio.run(
    lambda: trio_h2t.supervise_workers(command, int(sys.argv[2]), host="127.0.0.1", port=0)
)
print(f"supervisor returned {status}", flush=True)
sys.exit(status)
"""


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _line(proc: trio.Process, buffer: bytearray) -> str:
    """The process's next stdout line (``buffer`` keeps what came after it)."""
    assert proc.stdout is not None
    while b"\n" not in buffer:
        chunk = await proc.stdout.receive_some()
        if not chunk:
            raise AssertionError(f"stdout ended; so far {bytes(buffer)!r}")
        buffer += chunk
    line, _, rest = bytes(buffer).partition(b"\n")
    buffer[:] = rest
    return line.decode()


async def _worker(hold: float) -> tuple[trio.Process, int, bytearray]:
    port = _free_port()
    proc = await trio.lowlevel.open_process(
        [sys.executable, "-c", WORKER, str(port), str(hold)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=_env(),
    )
    buffer = bytearray()
    assert await _line(proc, buffer) == f"serving on http://127.0.0.1:{port}"
    return proc, port, buffer


async def _get(port: int, path: str) -> bytes:
    async with open_connection("127.0.0.1", port) as conn:
        return (await conn.request("GET", path)).body


async def test_the_first_signal_drains_and_the_request_in_flight_finishes() -> None:
    """SIGTERM while a request is in flight: the worker drains (the request is
    answered), then serve_worker returns and the process exits 0."""
    with trio.fail_after(30):
        proc, port, buffer = await _worker(hold=0.5)
        try:
            async with trio.open_nursery() as nursery:
                got: list[bytes] = []

                async def slow() -> None:
                    got.append(await _get(port, "/slow"))

                nursery.start_soon(slow)
                assert await _line(proc, buffer) == "slow request"
                proc.send_signal(signal.SIGTERM)
            assert got == [b"done"]
            assert await _line(proc, buffer) == "worker returned"
            assert await proc.wait() == 0
        finally:
            proc.kill()


async def test_eof_on_stdin_drains_as_a_signal_does() -> None:
    """Closing the worker's stdin (its supervisor is gone) drains it the same way."""
    with trio.fail_after(30):
        proc, port, buffer = await _worker(hold=0.3)
        try:
            assert await _get(port, "/") == b"done"
            assert proc.stdin is not None
            await proc.stdin.aclose()
            assert await _line(proc, buffer) == "worker returned"
            assert await proc.wait() == 0
        finally:
            proc.kill()


async def test_a_second_signal_stops_the_worker_at_once() -> None:
    """A second SIGTERM during the drain stops the worker without waiting for the
    request in flight (which would take 30 s): it is cut off, the process exits."""
    with trio.fail_after(20):
        proc, port, buffer = await _worker(hold=30)
        try:
            async with trio.open_nursery() as nursery:
                failed: list[BaseException] = []

                async def slow() -> None:
                    try:
                        await _get(port, "/slow")
                    except trio_h2t.ConnectionLostError as exc:
                        failed.append(exc)

                nursery.start_soon(slow)
                assert await _line(proc, buffer) == "slow request"
                proc.send_signal(signal.SIGTERM)
                await trio.sleep(0.3)  # the drain has begun (a GOAWAY was sent)
                proc.send_signal(signal.SIGTERM)
            assert len(failed) == 1
            assert await _line(proc, buffer) == "worker returned"
            assert await proc.wait() == 0
        finally:
            proc.kill()


async def test_serve_worker_on_a_port_taken_without_reuse_port_raises_oserror() -> None:
    """A port another socket holds without SO_REUSEPORT: serve_worker raises OSError
    (EADDRINUSE) instead of serving nothing."""

    async def handler(stream: H2Stream) -> None:
        await stream.send_headers([(":status", "200")], end_stream=True)

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with trio.fail_after(10), pytest.raises(OSError, match="in use"):
            await trio_h2t.serve_worker(handler, taken.getsockname()[1], host="127.0.0.1")


@pytest.mark.parametrize("workers", [0, -1, 1.5, True])
async def test_supervise_workers_needs_at_least_one_worker(workers: object) -> None:
    """``workers`` must be an int >= 1: anything else is a ValueError naming it."""
    with pytest.raises(ValueError, match="workers must be an int >= 1"):
        await trio_h2t.supervise_workers(
            lambda port: ["true"],
            workers,  # type: ignore[arg-type]
            host="127.0.0.1",
            port=0,
        )


async def test_a_worker_that_exits_before_it_listens_is_a_start_error() -> None:
    """A command that exits at once (it never prints ``serving on``) makes
    supervise_workers raise at start, an OSError (not a group) naming the worker."""
    with trio.fail_after(30), pytest.raises(OSError, match=r"worker 0 .* before it listened"):
        await trio_h2t.supervise_workers(
            lambda port: [sys.executable, "-c", "raise SystemExit(3)"],
            1,
            host="127.0.0.1",
            port=0,
        )


async def test_supervised_workers_serve_and_drain_on_sigterm() -> None:
    """Two supervised serve_worker processes answer on one port; SIGTERM to the
    supervisor drains both and it returns 0."""
    with trio.fail_after(60):
        proc = await trio.lowlevel.open_process(
            [sys.executable, "-c", SUPERVISOR, WORKER, "2"],
            stdout=subprocess.PIPE,
            env=_env(),
        )
        try:
            buffer = bytearray()
            line = await _line(proc, buffer)
            while not line.startswith("serving on http://127.0.0.1:"):
                line = await _line(proc, buffer)
            port = int(line.rsplit(":", 1)[1])
            for _ in range(4):
                assert await _get(port, "/") == b"done"
            proc.send_signal(signal.SIGTERM)
            line = await _line(proc, buffer)
            while not line.startswith("supervisor returned"):
                line = await _line(proc, buffer)
            assert line == "supervisor returned 0"
            assert await proc.wait() == 0
        finally:
            proc.kill()
