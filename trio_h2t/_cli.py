"""The ``trio-h2t`` command: a small h2c file-and-echo server, and a one-shot client.

Usage::

    trio-h2t serve [--host 127.0.0.1] [--port 8080] [--root DIR] [--max-concurrent-streams N]
                   [--max-frame-size N] [--workers N] [--reuse-port]
    trio-h2t get URL [-o FILE] [-X METHOD] [-d DATA] [-H 'name: value']... [-v]
    trio-h2t check URL [--tls] [--max-examples N] [--seconds S] [--db DIR] [--replay FILE|HEX]

(``python -m trio_h2t ...`` is the same command.) Both speak h2c with prior knowledge:
HTTP/2 over cleartext TCP, no TLS and no HTTP/1.1 upgrade, which is what
``curl --http2-prior-knowledge``, ``nghttp`` and ``h2load`` speak to ``http://`` URLs.
With ``serve --certfile FILE --keyfile FILE`` the server speaks HTTP/2 over TLS (ALPN
"h2" only; ``curl --http2`` to ``https://`` URLs), and ``get https://...`` connects
with TLS, trusting ``--cacert FILE`` or, without it, the system's CAs.

``serve``
    Serves the files under ``--root`` (default: the current directory) and prints one
    line, ``serving on http://HOST:PORT`` (``https://`` with TLS), once it listens
    (``--port 0`` picks a free port; the line has the real one). With ``--workers N``,
    N worker processes share the port (SO_REUSEPORT) under a supervisor that restarts
    a crashed one and passes SIGINT/SIGTERM on to all (``trio_h2t._workers``);
    ``--reuse-port`` binds one server's port with SO_REUSEPORT. SIGINT or SIGTERM
    stops it gracefully: it stops accepting, sends GOAWAY, and lets open streams finish for up to
    ``TransportConfig.graceful_close_timeout`` (10 s); a second signal stops it at
    once. Requests:

    - ``GET`` / ``HEAD``: the file at the path, with ``content-type`` (by extension)
      and ``content-length``; a directory serves its ``index.html``. 404 for anything
      missing, or outside the root once ``..`` and symlinks are resolved. File-system
      work runs in a worker thread, one round trip per request; files up to 64 KiB
      are then kept in memory and served from there for up to a second (so a change
      shows within a second), bounded to 1024 files and 32 MiB.
    - ``POST`` to any path: echoes the request body back (status 200); request
      trailers, if any, come back as response trailers. The echo is streamed, chunk
      by chunk, under flow control both ways: the client must read the response
      while it uploads (curl, nghttp, h2load and trio_h2t's client all do).
    - any other method: 405, with ``allow: GET, HEAD, POST``.

``get``
    Sends one request and writes the response body to stdout (or ``-o FILE``).
    ``-d DATA`` sends a body (``-d @FILE`` reads it from FILE) and makes the default
    method POST; ``-H`` adds a header; ``-v`` prints the request and response heads
    (and trailers) to stderr. ``http://`` (h2c) and ``https://`` (TLS) URLs.

``check``
    Runs Hypothesis-generated exchanges and frame sequences against a live HTTP/2
    server and reports each RFC 9113 / RFC 7541 rule it broke, with the shrunk bytes
    and a replay command (``trio_h2t/testing/_check.py``; docs/testing.md, "trio-h2t
    check"). Exit status 1 when anything was found. Needs Hypothesis installed.

Exit status: 0 on success (for ``get``: a status below 400); 22 when ``get`` received
a status of 400 or more (the body is still written, like ``curl --fail-with-body``);
2 for a usage error, a peer that cannot be reached, or a transfer that failed (one
line on stderr, no traceback); 130 when interrupted by Ctrl-C (except while ``serve``
listens: there SIGINT is the graceful stop, and the status is 0).
"""

from __future__ import annotations

import argparse
import functools
import io
import logging
import mimetypes
import os
import signal
import ssl
import stat
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Protocol, TextIO, TypeVar
from urllib.parse import unquote_to_bytes, urlsplit

import trio

from ._client import open_connection
from ._config import RFC_MAX_FRAME_SIZE, RFC_MIN_FRAME_SIZE, TransportConfig
from ._headers import CONNECTION_HEADERS, validate_to_send
from ._server import serve_tcp
from ._shared import only_exception
from ._stopping import drain_on_signal
from ._stream import H2Stream, HeaderList
from ._workers import reserve_port, supervise

__all__ = ["fetch", "main", "make_handler", "resolve_path", "serve"]

PROG = "trio-h2t"
#: Bytes read from a file (and handed to ``send_data``) at a time: one write quota's worth.
CHUNK_SIZE = 64 * 1024
#: Exit status for an HTTP status >= 400, as ``curl --fail`` / ``--fail-with-body``.
EXIT_HTTP_ERROR = 22
#: Exit status for usage errors and failed transfers (argparse uses 2 as well).
EXIT_FAILURE = 2
ALLOW = "GET, HEAD, POST"

Handler = Callable[[H2Stream], Awaitable[None]]
T = TypeVar("T")


class UsageError(Exception):
    """A bad command line that argparse could not catch (a URL, a header, a root)."""


################################################################
# serve: the request handler
################################################################


def resolve_path(root: Path, raw_path: bytes) -> Path | None:
    """Map a request ``:path`` to a regular file under ``root``, or None (-> 404).

    ``root`` must already be resolved. The query is dropped and percent-escapes are
    decoded; then ``..`` and symlinks are resolved *before* the containment check, so
    neither can lead outside ``root``. A directory maps to its ``index.html``.

    Blocking (it touches the file system): call it from a worker thread.
    """
    path = raw_path.split(b"?", 1)[0].split(b"#", 1)[0]
    decoded = unquote_to_bytes(path)
    if b"\x00" in decoded:
        return None
    try:
        candidate = (root / os.fsdecode(decoded).lstrip("/")).resolve()
        if candidate.is_dir():
            candidate = (candidate / "index.html").resolve()
        if not candidate.is_relative_to(root) or not candidate.is_file():
            return None
    except (OSError, RuntimeError):  # a name too long; a symlink loop (RuntimeError < 3.13)
        return None
    return candidate


#: Files up to this size are read whole in the worker thread that opens them (one
#: thread round trip per request, not three) and kept in ``_SmallFiles``.
SMALL_FILE = 64 * 1024
#: How long a cached small file is served without looking at the disk again.
SMALL_FILE_TTL = 1.0


class _SmallFiles:
    """A bounded cache of small files, so hot files cost no thread round trip.

    Owner: the serving trio thread (no await between lookup and use). An entry is
    served for at most ``SMALL_FILE_TTL`` seconds, so a changed file shows within a
    second; at most ``max_entries`` files and ``max_bytes`` bytes are kept (oldest
    first out).
    """

    def __init__(self, max_entries: int = 1024, max_bytes: int = 32 * 1024 * 1024) -> None:
        self._entries: dict[bytes, tuple[float, bytes, str]] = {}
        self._bytes = 0
        self._max_entries = max_entries
        self._max_bytes = max_bytes

    def get(self, raw_path: bytes, now: float) -> tuple[bytes, str] | None:
        entry = self._entries.get(raw_path)
        if entry is None:
            return None
        expires, body, content_type = entry
        if now >= expires:
            self._drop(raw_path)
            return None
        return body, content_type

    def put(self, raw_path: bytes, body: bytes, content_type: str, now: float) -> None:
        self._drop(raw_path)
        while self._entries and (
            len(self._entries) >= self._max_entries or self._bytes + len(body) > self._max_bytes
        ):
            self._drop(next(iter(self._entries)))
        if len(body) <= self._max_bytes:
            self._entries[raw_path] = (now + SMALL_FILE_TTL, body, content_type)
            self._bytes += len(body)

    def _drop(self, raw_path: bytes) -> None:
        entry = self._entries.pop(raw_path, None)
        if entry is not None:
            self._bytes -= len(entry[1])


def _open_file(root: Path, raw_path: bytes) -> tuple[io.FileIO | bytes, int, str] | None:
    """Resolve and open the file for ``raw_path``: (file, size, content type) or None.

    A file of at most ``SMALL_FILE`` bytes comes back already read (``bytes``) and
    closed. Blocking: run it in a worker thread. O_NOFOLLOW and the fstat check
    narrow the window between resolving and opening (a swapped-in symlink or FIFO
    fails).
    """
    target = resolve_path(root, raw_path)
    if target is None:
        return None
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(target, flags)
    except OSError:
        return None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        return None
    content_type = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
    file = io.FileIO(fd, "rb")
    if info.st_size <= SMALL_FILE:
        with file:
            body = file.read(SMALL_FILE + 1)
        if len(body) == info.st_size:  # else it changed under us: stream it instead
            return body, info.st_size, content_type
        file = io.FileIO(os.open(target, flags), "rb")
    return file, info.st_size, content_type


def _header(headers: HeaderList | None, name: bytes) -> bytes | None:
    for key, value in headers or ():
        if key == name:
            return value
    return None


async def _respond(
    stream: H2Stream,
    status: int,
    body: bytes,
    *,
    head: bool = False,
    extra: Sequence[tuple[str, str]] = (),
) -> None:
    """Send a small, complete text response (headers only for HEAD)."""
    headers = [
        (":status", str(status)),
        ("content-type", "text/plain; charset=utf-8"),
        ("content-length", str(len(body))),
        *extra,
    ]
    if head:
        await stream.send_headers(headers, end_stream=True)
    else:
        await stream.send_headers(headers)
        await stream.send_data(body, end_stream=True)


async def _send_file(
    stream: H2Stream, root: Path, raw_path: bytes, cache: _SmallFiles, *, head: bool
) -> None:
    now = trio.current_time()
    hit = cache.get(raw_path, now)
    if hit is not None:
        body, content_type = hit
        size = len(body)
        raw_file: io.FileIO | bytes = body
    else:
        found = await trio.to_thread.run_sync(_open_file, root, raw_path)
        if found is None:
            await _respond(stream, 404, b"not found\n", head=head)
            return
        raw_file, size, content_type = found
        if isinstance(raw_file, bytes):
            cache.put(raw_path, raw_file, content_type, trio.current_time())
    if isinstance(raw_file, bytes):
        headers = [
            (":status", "200"),
            ("content-type", content_type),
            ("content-length", str(size)),
        ]
        if head or size == 0:
            await stream.send_headers(headers, end_stream=True)
        else:
            await stream.send_headers(headers)
            await stream.send_data(raw_file, end_stream=True)
        return
    async with trio.wrap_file(raw_file) as file:
        headers = [
            (":status", "200"),
            ("content-type", content_type),
            ("content-length", str(size)),
        ]
        await stream.send_headers(headers, end_stream=head or size == 0)
        remaining = 0 if head else size
        while remaining > 0:
            chunk = await file.read(min(CHUNK_SIZE, remaining))
            if not chunk:
                # We promised content-length bytes; raising resets the stream
                # (INTERNAL_ERROR) so the client does not take a short body as whole.
                raise OSError(f"{raw_path!r} shrank while it was being sent")
            remaining -= len(chunk)
            await stream.send_data(chunk, end_stream=remaining == 0)


async def _echo(stream: H2Stream) -> None:
    """Stream the request body back as it arrives, then its trailers (if any)."""
    request = stream.headers
    headers = [
        (b":status", b"200"),
        (b"content-type", _header(request, b"content-type") or b"application/octet-stream"),
    ]
    length = _header(request, b"content-length")
    if length is not None:  # h2 checked it against the body; the echo is the same size
        headers.append((b"content-length", length))
    await stream.send_headers(headers)
    async for chunk in stream:
        await stream.send_data(chunk)
    if stream.trailers:
        await stream.send_trailers(stream.trailers)
    else:
        await stream.end()


def make_handler(root: str | os.PathLike[str]) -> Handler:
    """The ``serve`` request handler for files under ``root`` (see the module docstring).

    ``root`` is resolved once, here; it must be an existing directory.
    """
    resolved = Path(root).resolve(strict=True)
    if not resolved.is_dir():
        raise NotADirectoryError(f"not a directory: {root}")
    cache = _SmallFiles()

    async def handler(stream: H2Stream) -> None:
        method = _header(stream.headers, b":method")
        raw_path = _header(stream.headers, b":path") or b""
        if method == b"POST":
            await _echo(stream)
        elif method not in (b"GET", b"HEAD"):
            await _respond(stream, 405, b"method not allowed\n", extra=[("allow", ALLOW)])
        elif not raw_path.startswith(b"/"):
            await _respond(stream, 400, b"bad request\n", head=method == b"HEAD")
        else:
            await _send_file(stream, resolved, raw_path, cache, head=method == b"HEAD")

    return handler


################################################################
# serve: the command
################################################################


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


#: ``trio-h2t serve``'s default ``max_connection_idle``, in seconds. The library's
#: default is None (as grpc-go: an application behind a balancer may want its
#: connections kept), but this command faces the network with nothing in front: a
#: client that opens connections and leaves them idle would hold each one (about
#: 37 KiB, docs/security.md) until it closes it. Five minutes keeps a connection
#: across the pauses of an interactive client, and a client that finds it closed
#: just reconnects (the GOAWAY says no stream was lost); abandoned connections then
#: last minutes, not forever. ``--max-connection-idle`` changes it.
SERVE_IDLE_TIMEOUT = 300.0


#: ``trio-h2t serve``'s default ``--max-frame-size``: RFC 9113's initial value, 16 KiB,
#: not the library's 1 MiB. This command faces the network with nothing in front, and
#: most requests carry no body: a smaller frame bounds what one peer makes
#: a connection buffer, and a peer that assumes the initial value without reading our
#: SETTINGS (h2spec's http2/4.2/3 does) meets the limit it expects. A POST body to echo
#: still streams, in 16 KiB frames. ``--max-frame-size`` changes it.
SERVE_FRAME_SIZE = RFC_MIN_FRAME_SIZE


async def serve(
    *,
    host: str,
    port: int,
    root: str | os.PathLike[str],
    max_concurrent_streams: int = 100,
    max_frame_size: int = SERVE_FRAME_SIZE,
    max_connection_idle: float | None = SERVE_IDLE_TIMEOUT,
    ssl_context: ssl.SSLContext | None = None,
    reuse_port: bool = False,
    supervised: bool = False,
    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run ``trio-h2t serve`` until SIGINT or SIGTERM; report the port to ``task_status``.

    The first signal closes the server gracefully (``H2Server.aclose``: the drain);
    a second one cancels the drain. With ``ssl_context``, HTTP/2 over TLS (ALPN
    "h2"); with ``reuse_port``, the port is bound with ``SO_REUSEPORT`` (a worker of
    ``--workers``); with ``supervised``, EOF on stdin (the supervisor is gone) stops
    the server as the first signal does. A connection with no open stream for
    ``max_connection_idle`` seconds is closed gracefully (GOAWAY NO_ERROR,
    ``max_idle``; None: never). ``max_frame_size`` is the SETTINGS_MAX_FRAME_SIZE
    advertised and enforced. Checkpoint: always.
    """
    handler = make_handler(root)
    config = TransportConfig(
        max_concurrent_streams=max_concurrent_streams,
        max_frame_size=max_frame_size,
        max_connection_idle=max_connection_idle,
    )
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            server = await nursery.start(
                functools.partial(
                    serve_tcp,
                    handler,
                    port,
                    host=host,
                    ssl_context=ssl_context,
                    config=config,
                    reuse_port=reuse_port,
                )
            )
            scheme = "https" if ssl_context is not None else "http"
            print(f"serving on {scheme}://{_url_host(host)}:{server.port}", flush=True)
            task_status.started(server.port)
            await drain_on_signal(
                server,
                signals,
                nursery.cancel_scope,
                watch_stdin=supervised,
                say=lambda why: print(f"{PROG}: {why}: stopping", file=sys.stderr),
            )


################################################################
# get
################################################################


class AsyncWriter(Protocol):
    """Where ``fetch`` writes the body: ``trio.wrap_file(...)`` of a binary file."""

    async def write(self, data: bytes, /) -> int: ...

    async def flush(self) -> None: ...


def _parse_url(url: str) -> tuple[str, str, int, str, str]:
    """``http[s]://host[:port]/path?query`` -> (scheme, host, port, authority, path)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise UsageError(f"bad URL {url!r}: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise UsageError(f"only http:// (h2c) and https:// URLs are supported, not {url!r}")
    if not parts.hostname:
        raise UsageError(f"no host in URL {url!r}")
    authority = parts.netloc.rpartition("@")[2]
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return scheme, parts.hostname, port or (443 if scheme == "https" else 80), authority, path


def _parse_header(text: str) -> tuple[str, str]:
    name, sep, value = text.partition(":")
    name = name.strip().lower()
    if not sep or not name or name.startswith(":") or any(c.isspace() for c in name):
        raise UsageError(f"bad header {text!r}: expected 'name: value'")
    if name.encode() in CONNECTION_HEADERS:
        raise UsageError(f"header {name!r} is not allowed in HTTP/2 (RFC 9113 §8.2.2)")
    value = value.strip()
    try:
        # A regular field, checked by the rules of a block with no pseudo-headers.
        validate_to_send([(name.encode("ascii"), value.encode())], response=False, trailer=True)
    except UnicodeEncodeError:
        raise UsageError(f"bad header {text!r}: the name must be ASCII") from None
    except ValueError as exc:  # "malformed ... block, not sent: <the rule>"
        raise UsageError(f"bad header {text!r}: {str(exc).partition(': ')[2]}") from None
    return name, value


async def fetch(
    url: str,
    *,
    out: AsyncWriter | None = None,
    output: str | None = None,
    method: str | None = None,
    data: bytes | None = None,
    headers: Sequence[tuple[str, str]] = (),
    verbose: bool = False,
    err: TextIO | None = None,
    cacert: str | None = None,
) -> int:
    """Run ``trio-h2t get``: one request; the body goes to ``out`` (or the file
    ``output``, created once the connection is up; default stdout). Returns the exit
    status (0, 22 for a status >= 400). ``https://`` URLs use TLS with ALPN "h2",
    trusting ``cacert`` (a PEM file) or, without it, the system's CAs.

    Raises:
        UsageError: a bad URL.
        trio.BrokenResourceError: the peer cannot be reached, or the transfer failed
            (``ConnectionLostError``, ``StreamResetError``, ...).
        OSError: the output could not be written.

    Checkpoint: always.
    """
    err = err if err is not None else sys.stderr
    scheme, host, port, authority, path = _parse_url(url)
    ssl_context = None
    if scheme == "https":
        ssl_context = ssl.create_default_context(cafile=cacert)
    method = method or ("POST" if data is not None else "GET")
    request = [
        (":method", method),
        (":scheme", scheme),
        (":authority", authority),
        (":path", path),
        *headers,
    ]
    if data is not None and not any(name == "content-length" for name, _ in headers):
        request.append(("content-length", str(len(data))))
    async with open_connection(host, port, ssl_context=ssl_context) as conn:
        if verbose:
            for name, value in request:
                print(f"> {name}: {value}", file=err)
        async with conn.open_stream(request, end_stream=data is None) as stream:
            if data is not None:
                await stream.send_data(data, end_stream=True)
            response = await stream.receive_headers()
            status = int(_header(response, b":status") or b"0")
            if verbose:
                _print_head(response, err)
            if output is not None:
                async with await trio.open_file(output, "wb") as file:
                    await _copy_body(stream, file)
            else:
                sink = out if out is not None else trio.wrap_file(sys.stdout.buffer)
                await _copy_body(stream, sink)
            if verbose:
                _print_head(stream.trailers or [], err)
    return EXIT_HTTP_ERROR if status >= 400 else 0


def _print_head(headers: HeaderList, err: TextIO) -> None:
    for name, value in headers:
        print(f"< {name.decode('latin-1')}: {value.decode('latin-1')}", file=err)


async def _copy_body(stream: H2Stream, sink: AsyncWriter) -> None:
    async for chunk in stream:
        await sink.write(chunk)
    await sink.flush()


################################################################
# main
################################################################


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, not {value}")
    return value


def _frame_size(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not RFC_MIN_FRAME_SIZE <= value <= RFC_MAX_FRAME_SIZE:
        raise argparse.ArgumentTypeError(
            f"must be in [{RFC_MIN_FRAME_SIZE}, {RFC_MAX_FRAME_SIZE}]"
            f" (RFC 9113 §6.5.2), not {value}"
        )
    return value


def _idle_seconds(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be >= 0 (0: never), not {text}")
    return value or None


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be in [0, 65535], not {value}")
    return value


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="HTTP/2 server and client on trio_h2t: h2c, or TLS with ALPN h2.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="{serve,get,check}")

    p = sub.add_parser("serve", help="serve files (GET/HEAD) and echo POST bodies")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: %(default)s)")
    p.add_argument("--port", type=_port, default=8080, help="0 picks a free port (default: 8080)")
    p.add_argument("--root", default=".", help="directory to serve (default: current directory)")
    p.add_argument(
        "--max-concurrent-streams",
        type=_positive_int,
        default=100,
        metavar="N",
        help="SETTINGS_MAX_CONCURRENT_STREAMS to advertise (default: %(default)s)",
    )
    p.add_argument(
        "--max-frame-size",
        type=_frame_size,
        default=SERVE_FRAME_SIZE,
        metavar="N",
        help="SETTINGS_MAX_FRAME_SIZE to advertise, the largest frame accepted; 16384 is"
        " the RFC's initial value, which h2spec's http2/4.2/3 assumes (default: %(default)s)",
    )
    p.add_argument(
        "--max-connection-idle",
        type=_idle_seconds,
        default=SERVE_IDLE_TIMEOUT,
        metavar="SECONDS",
        help="close a connection that has had no open stream this long (GOAWAY NO_ERROR,"
        " max_idle); 0: never (default: %(default).0f)",
    )
    p.add_argument("--certfile", metavar="FILE", help="PEM certificate chain: serve over TLS")
    p.add_argument("--keyfile", metavar="FILE", help="PEM private key (with --certfile)")
    p.add_argument(
        "--workers",
        type=_positive_int,
        metavar="N",
        help="run N worker processes sharing the port (SO_REUSEPORT) under a supervisor"
        " that restarts a crashed one and drains all on SIGTERM/SIGINT",
    )
    p.add_argument(
        "--reuse-port",
        action="store_true",
        help="bind the port with SO_REUSEPORT, so other processes may serve it too",
    )
    p.add_argument("--supervised", action="store_true", help=argparse.SUPPRESS)

    g = sub.add_parser("get", help="send one request; print the response body")
    g.add_argument("url", help="http[s]://host[:port]/path")
    g.add_argument("--cacert", metavar="FILE", help="PEM CA certificates to trust (https)")
    g.add_argument("-o", "--output", metavar="FILE", help="write the body to FILE")
    g.add_argument("-X", "--request", dest="method", metavar="METHOD", help="request method")
    g.add_argument("-d", "--data", metavar="DATA", help="request body; @FILE reads FILE")
    g.add_argument(
        "-H", "--header", action="append", default=[], metavar="'name: value'", help="add a header"
    )
    g.add_argument("-v", "--verbose", action="store_true", help="print heads to stderr")

    c = sub.add_parser("check", help="property-test a live HTTP/2 server (servers you run only)")
    c.add_argument("url", help="http://host:port/ (h2c) or https://host:port/ (h2 over TLS)")
    c.add_argument("--tls", action="store_true", help="h2 over TLS with ALPN (as https://)")
    c.add_argument(
        "--max-examples",
        type=_positive_int,
        default=50,
        metavar="N",
        help="per property (default: 50)",
    )
    c.add_argument(
        "--seconds", type=float, default=60.0, metavar="S", help="time budget (default: 60)"
    )
    c.add_argument(
        "--db",
        default=".trio-h2t-check",
        metavar="DIR",
        help="examples and findings (default: %(default)s)",
    )
    c.add_argument(
        "--timeout", type=float, default=2.0, metavar="S", help="wait for an answer (default: 2)"
    )
    c.add_argument(
        "--property", action="append", default=[], metavar="NAME", help="run only this property"
    )
    c.add_argument("--replay", metavar="FILE|HEX", help="replay one finding file or hex bytes")
    return parser


def _read_data(arg: str | None) -> bytes | None:
    if arg is None:
        return None
    if arg.startswith("@"):
        try:
            return Path(arg[1:]).read_bytes()
        except OSError as exc:
            raise UsageError(f"cannot read {arg[1:]!r}: {exc.strerror or exc}") from None
    return arg.encode()


#: What ``main`` reports as one line and exit status 2 (anything else is a bug: traceback).
_EXPECTED = (UsageError, trio.BrokenResourceError, trio.ClosedResourceError, OSError)


def _describe(exc: BaseException) -> str:
    """``exc``'s message, with the reason from its cause when that adds something."""
    text = str(exc) or type(exc).__name__
    cause = exc.__cause__
    if isinstance(cause, (trio.BrokenResourceError, trio.ClosedResourceError)):
        if str(cause) not in text:
            text += f" ({cause})"
    elif isinstance(cause, OSError) and cause.strerror is None:
        # trio.open_tcp_stream's "all attempts to connect ... failed": the reasons
        # are in the group it chains.
        group = cause.__cause__
        if isinstance(group, BaseExceptionGroup):
            reasons = [e.strerror for e in group.exceptions if isinstance(e, OSError)]
            new = [r for r in dict.fromkeys(reasons) if r and r not in text]
            if new:
                text += f" ({'; '.join(new)})"
    # The library's hint names its argument; a CLI user picks the URL's scheme.
    text = text.replace("pass ssl_context=", "use an https:// URL")
    return text.replace(
        "connect with open_connection(host, port, ssl_context=ssl.create_default_context())",
        "use an https:// URL",
    )


def _run(fn: Callable[[], Awaitable[T]]) -> T:
    """``trio.run(fn)``, with an expected error out of a nursery's group unwrapped."""
    try:
        return trio.run(fn)
    except BaseExceptionGroup as group:
        leaf = only_exception(group)
        if isinstance(leaf, (*_EXPECTED, KeyboardInterrupt)):
            raise leaf from leaf.__cause__
        raise


def _supervise(args: argparse.Namespace) -> int:
    """``serve --workers N``: reserve the port, run N ``serve --reuse-port`` workers
    under ``_workers.supervise``; its exit status."""
    try:
        reserved = reserve_port(args.host, args.port)
    except OSError as exc:
        raise UsageError(
            f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}"
        ) from None
    with reserved:
        port = reserved.getsockname()[1]
        command = [sys.executable, "-m", "trio_h2t", "serve", "--reuse-port", "--supervised"]
        command += ["--host", args.host, "--port", str(port), "--root", args.root]
        command += ["--max-concurrent-streams", str(args.max_concurrent_streams)]
        command += ["--max-frame-size", str(args.max_frame_size)]
        command += ["--max-connection-idle", repr(args.max_connection_idle or 0)]
        scheme = "http"
        if args.certfile is not None:
            command += ["--certfile", args.certfile]
            scheme = "https"
        if args.keyfile is not None:
            command += ["--keyfile", args.keyfile]
        url = f"{scheme}://{_url_host(args.host)}:{port}"
        return _run(functools.partial(supervise, command, args.workers, url=url))


def _server_ssl_context(args: argparse.Namespace) -> ssl.SSLContext | None:
    """``serve``'s TLS context from ``--certfile``/``--keyfile``, or None for h2c."""
    if args.keyfile is not None and args.certfile is None:
        raise UsageError("--keyfile needs --certfile")
    if args.certfile is None:
        return None
    ssl_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        ssl_context.load_cert_chain(args.certfile, args.keyfile)
    except (OSError, ssl.SSLError) as exc:
        hint = ""
        if args.keyfile is None and isinstance(exc, ssl.SSLError):
            hint = " (no private key in --certfile? pass it with --keyfile)"
        raise UsageError(f"--certfile/--keyfile: {exc}{hint}") from None
    return ssl_context


def _main_serve(args: argparse.Namespace) -> int:
    """``trio-h2t serve``: one server, or ``--workers N`` under a supervisor."""
    if not Path(args.root).is_dir():
        raise UsageError(f"--root: not a directory: {args.root!r}")
    ssl_context = _server_ssl_context(args)
    logging.basicConfig(level=logging.WARNING, format=f"{PROG}: %(name)s: %(message)s")
    if args.workers is not None:
        return _supervise(args)
    try:
        _run(
            functools.partial(
                serve,
                host=args.host,
                port=args.port,
                root=args.root,
                max_concurrent_streams=args.max_concurrent_streams,
                max_frame_size=args.max_frame_size,
                max_connection_idle=args.max_connection_idle,
                ssl_context=ssl_context,
                reuse_port=args.reuse_port,
                supervised=args.supervised,
            )
        )
    except OSError as exc:
        raise UsageError(
            f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}"
        ) from None
    return 0


def _main_check(args: argparse.Namespace) -> int:
    """``trio-h2t check``: ``testing._check.main_check``, imported only here."""
    try:
        from .testing._check import main_check
    except ImportError as exc:  # Hypothesis is not installed
        raise UsageError(f"check needs Hypothesis ({exc})") from None
    try:
        return main_check(
            args.url,
            tls=args.tls,
            max_examples=args.max_examples,
            seconds=args.seconds,
            database=args.db,
            timeout=args.timeout,
            only=args.property,
            replay=args.replay,
            out=sys.stdout,
            err=sys.stderr,
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _main_get(args: argparse.Namespace) -> int:
    """``trio-h2t get``: one request; its exit status."""
    headers = [_parse_header(h) for h in args.header]
    return _run(
        functools.partial(
            fetch,
            args.url,
            output=args.output,
            method=args.method,
            data=_read_data(args.data),
            headers=headers,
            verbose=args.verbose,
            cacert=args.cacert,
        )
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``trio-h2t`` and ``python -m trio_h2t``; returns the exit status."""
    logging.getLogger("hpack").setLevel(
        logging.WARNING
    )  # docs/architecture.md: hpack logs per header
    parser = _build_parser()
    args = parser.parse_args(argv)
    commands = {"serve": _main_serve, "get": _main_get, "check": _main_check}
    try:
        return commands[args.command](args)
    except _EXPECTED as exc:
        parser.exit(EXIT_FAILURE, f"{PROG}: {_describe(exc)}\n")
    except KeyboardInterrupt:
        return 130
