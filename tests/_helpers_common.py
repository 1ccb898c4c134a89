"""Small helpers many test files had each written for themselves (issue 28).

- :func:`free_port`: a TCP port on 127.0.0.1 that was free a moment ago.
- :func:`echo`: a handler answering 200 with the request body.
- :func:`running`: a subprocess (a server) started, waited for until it prints a
  line, and stopped (SIGTERM, then SIGKILL) when the block ends, bounded in time.
- :func:`read_to_eof`: a ``helpers.ScriptedPeer`` reads (and records) every frame
  until the link closes.
- :func:`write_certificate`: a test CA's certificate for 127.0.0.1 and its key,
  written as PEM files (trustme).
- :func:`server_ssl_context` / :func:`client_ssl_context`: a TLS server context with a
  certificate from a test CA (trustme), and a client context trusting that CA
  (tests/conftest.py's ``ca``, ``server_ctx`` and ``client_ctx`` fixtures use them).
- :class:`FaultyStream`: a Stream whose ``send_all`` / ``receive_some`` raise the
  exception a test chooses, once armed.
"""

from __future__ import annotations

import os
import selectors
import socket
import ssl
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from trio_h2t import H2Stream

if TYPE_CHECKING:
    import trustme
    from helpers import ScriptedPeer

__all__ = [
    "FaultyStream",
    "client_ssl_context",
    "echo",
    "free_port",
    "read_to_eof",
    "running",
    "server_ssl_context",
    "write_certificate",
]


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


async def read_to_eof(peer: ScriptedPeer, *, answer: bool = False) -> None:
    """Read until the link closes (``peer.frames`` records each frame), flushing the
    peer's answers after each read if ``answer``; a broken or closed link ends it as
    EOF does (``peer.eof`` is then True)."""
    try:
        while not peer.eof:
            await peer.receive()
            if answer and not peer.eof:
                await peer.flush()
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        peer.eof = True


def _broken(what: str) -> BaseException:
    return trio.BrokenResourceError(f"{what} failed")


class FaultyStream(trio.abc.Stream):
    """A Stream over ``inner`` whose ``send_all`` / ``receive_some`` raise, once
    ``fail_send`` / ``fail_receive`` is set, what ``error(what)`` makes (default:
    BrokenResourceError; ``receive_some`` raises after its read)."""

    def __init__(
        self,
        inner: trio.abc.Stream,
        error: Callable[[str], BaseException] = _broken,
    ) -> None:
        self.inner = inner
        self.error = error
        self.fail_send = False
        self.fail_receive = False

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        if self.fail_send:
            raise self.error("send_all")
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        data = await self.inner.receive_some(max_bytes)
        if self.fail_receive:
            raise self.error("receive_some")
        return data

    async def aclose(self) -> None:
        await self.inner.aclose()


def write_certificate(folder: Path) -> tuple[Path, Path]:
    """``(certfile, keyfile)``: a test CA's certificate for 127.0.0.1 and its private
    key, PEM, written into ``folder``."""
    import trustme

    cert = trustme.CA().issue_cert("127.0.0.1")
    certfile, keyfile = folder / "cert.pem", folder / "key.pem"
    cert.private_key_pem.write_to_path(str(keyfile))
    cert.cert_chain_pems[0].write_to_path(str(certfile))
    return certfile, keyfile


def server_ssl_context(ca: trustme.CA, *hosts: str) -> ssl.SSLContext:
    """A server-side TLS context holding a certificate from ``ca`` for ``hosts``
    (default: 127.0.0.1 and localhost)."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(*(hosts or ("127.0.0.1", "localhost"))).configure_cert(ctx)
    return ctx


def client_ssl_context(ca: trustme.CA) -> ssl.SSLContext:
    """A client-side TLS context (hostname checked) that trusts ``ca``."""
    ctx = ssl.create_default_context()
    ca.configure_trust(ctx)
    return ctx
