"""Small helpers many test files had each written for themselves (issue 28).

- :func:`free_port`: a TCP port on 127.0.0.1 that was free a moment ago.
- :func:`echo`: a handler answering 200 with the request body.
- :func:`running`: a subprocess (a server) started, waited for until it prints a
  line, and stopped (SIGTERM, then SIGKILL) when the block ends, bounded in time.
"""

from __future__ import annotations

import os
import selectors
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from trio_h2t import H2Stream

__all__ = ["echo", "free_port", "running"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def echo(stream: H2Stream) -> None:
    """Answer 200 with the whole request body."""
    body = await stream.read_all()
    await stream.send_headers([(b":status", b"200")])
    await stream.send_data(body, end_stream=True)


@contextmanager
def running(
    command: Sequence[str],
    *,
    ready: str,
    cwd: Path | str | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 30.0,
) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """Start ``command``; yield it and the first output line containing ``ready``
    (within ``timeout`` seconds, else AssertionError with what it printed); stop it
    when the block ends (SIGTERM, 10 s, then SIGKILL)."""
    proc = subprocess.Popen(
        list(command),
        cwd=cwd,
        env=dict(env) if env is not None else None,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        seen: list[str] = []
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as selector:
            selector.register(proc.stdout, selectors.EVENT_READ)
            while True:
                left = deadline - time.monotonic()
                assert left > 0, f"{command[0]} did not print {ready!r} in {timeout} s: {seen}"
                if not selector.select(left):
                    continue
                line = proc.stdout.readline()
                assert line, f"{command[0]} exited ({proc.poll()}) before {ready!r}: {seen}"
                seen.append(line)
                if ready in line:
                    break
        os.set_blocking(proc.stdout.fileno(), True)
        yield proc, line
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()
