"""Server RSS per idle HTTP/2 connection: ``trio-h2t serve`` beside nginx.

Issue 29's target is an idle connection that finished its handshake costing the
server at most 40 KB of resident memory. tests/test_floods.py bounds what Python
allocates for one (tracemalloc); this measures what the kernel sees: the server's
``VmRSS`` (``/proc/PID/status``) before and after ``--connections`` clients, in a
process of their own, each sent the preface and SETTINGS, read the server's
SETTINGS and its ACK of theirs, and then said nothing. The per-connection figure is
(after - before) / connections, for each server in ``--servers``:

``serve``
    ``python -m trio_h2t serve`` as shipped (SETTINGS_MAX_FRAME_SIZE 16 KiB).
``serve-1mib``
    the same with ``--max-frame-size 1048576`` (the library's default).
``nginx``
    Debian's nginx, one worker, ``http2`` on a loopback port; its worker's RSS. Its
    config is written to a temporary folder; it is stopped at the end.

The rounds alternate between the servers and the median of ``--rounds`` is quoted,
with the smallest and largest. RSS counts pages touched, so a figure moves with the
allocator's arenas: read it as a size class, not to the byte.

With ``--request`` each connection first makes one ``GET /`` (1 KiB file) and reads
the response: an idle connection that has been used.

Run: ``.venv/bin/python benchmarks/idle_footprint.py`` (defaults embedded: 500
connections, 3 rounds, all three servers; ``--help``).
"""

from __future__ import annotations

import argparse
import importlib
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

if not __package__:  # run as a script: benchmarks/_bootstrap.py registers the package
    importlib.import_module("_bootstrap")

from benchmarks._backends import child_env

#: The client process: opens N connections, finishes each handshake, reports, waits.
_CLIENTS = r"""
import socket, struct, sys
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
ACK = b"\x00\x00\x00\x04\x01\x00\x00\x00\x00"
# GET / on stream 1: HPACK static entries 2, 4, 6 and a literal :authority.
GET = b"\x82\x84\x86\x41\x09127.0.0.1"
GET = len(GET).to_bytes(3, "big") + b"\x01\x05\x00\x00\x00\x01" + GET
def handshake(port, request):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(PREFACE + SETTINGS + (GET if request else b""))
    buf, settings, acked, answered = b"", False, False, not request
    while not (settings and acked and answered):
        chunk = s.recv(65536)
        if not chunk:
            raise SystemExit("the server closed a connection during its handshake")
        buf += chunk
        while len(buf) >= 9:
            length = int.from_bytes(buf[:3], "big")
            if len(buf) < 9 + length:
                break
            kind, flags = buf[3], buf[4]
            if kind == 4 and flags & 1:
                acked = True
            elif kind == 4:
                settings = True
                s.sendall(ACK)
            elif kind in (0, 1) and flags & 1 and buf[5:9] == b"\x00\x00\x00\x01":
                answered = True
            buf = buf[9 + length:]
    return s
socks = [handshake(int(sys.argv[1]), sys.argv[3] == "1") for _ in range(int(sys.argv[2]))]
print("ok", flush=True)
sys.stdin.read()
"""

NGINX_CONF = """
worker_processes 1;
daemon off;
master_process on;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    server {{
        listen 127.0.0.1:{port} http2;
        root {tmp}/root;
    }}
}}
"""


def rss(pid: int) -> int:
    """The process's resident set size, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def free_port() -> int:
    """A loopback port nobody listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_listening(port: int, proc: subprocess.Popen[bytes], timeout: float = 20) -> None:
    """Return once ``port`` accepts connections; fail if ``proc`` exits first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with status {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port} after {timeout} s")


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL after 10 s."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextmanager
def server(kind: str, tmp: Path) -> Iterator[tuple[int, int]]:
    """Start one server; yield (its port, the pid whose RSS counts)."""
    port = free_port()
    root = tmp / "root"
    root.mkdir(exist_ok=True)
    (root / "index.html").write_bytes(b"x" * 1024)
    if kind == "nginx":
        conf = tmp / "nginx.conf"
        conf.write_text(NGINX_CONF.format(tmp=tmp, port=port))
        nginx = shutil.which("nginx", path=os.environ.get("PATH", "") + ":/usr/sbin")
        if nginx is None:
            raise SystemExit("nginx is not installed (Debian's nginx package)")
        cmd = [nginx, "-c", str(conf), "-p", str(tmp)]
    else:
        extra = ["--max-frame-size", "1048576"] if kind == "serve-1mib" else []
        cmd = [sys.executable, "-m", "trio_h2t", "serve", "--port", str(port)]
        cmd += ["--root", str(root), "--max-connection-idle", "0", *extra]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, env=child_env())
    try:
        wait_listening(port, proc)
        pid = proc.pid
        if kind == "nginx":  # the worker holds the connections, not the master
            time.sleep(0.2)
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
            pid = int(children[0])
        yield port, pid
    finally:
        stop(proc)


def one_round(kind: str, connections: int, request: bool) -> float:
    """Bytes of server RSS per idle connection, for one fresh server; with
    ``request``, each connection first made one GET / and read its response."""
    with tempfile.TemporaryDirectory() as tmp, server(kind, Path(tmp)) as (port, pid):
        time.sleep(0.3)  # the server's start-up allocations settle
        before = rss(pid)
        clients = subprocess.Popen(
            [sys.executable, "-c", _CLIENTS, str(port), str(connections), str(int(request))],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        try:
            assert clients.stdout is not None
            if clients.stdout.readline().strip() != b"ok":
                raise RuntimeError("the clients did not finish their handshakes")
            time.sleep(0.5)
            after = rss(pid)
        finally:
            assert clients.stdin is not None
            clients.stdin.close()
            clients.wait(30)
    return (after - before) / connections


def main(argv: list[str] | None = None) -> None:
    """Parse the options, run the rounds, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--connections", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--servers",
        nargs="+",
        default=["serve", "serve-1mib", "nginx"],
        choices=["serve", "serve-1mib", "nginx"],
    )
    parser.add_argument(
        "--request", action="store_true", help="each connection makes one GET / first"
    )
    args = parser.parse_args(argv)
    results: dict[str, list[float]] = {kind: [] for kind in args.servers}
    for _ in range(args.rounds):
        for kind in args.servers:
            results[kind].append(one_round(kind, args.connections, args.request))
    after = ", after one GET each" if args.request else ""
    what = f"{args.connections} connections{after}, {args.rounds} rounds"
    print(f"server RSS per idle connection ({what})")
    print(f"{'server':<12} {'median':>10} {'min':>10} {'max':>10}")
    for kind, values in results.items():
        print(
            f"{kind:<12} {statistics.median(values) / 1000:>8.1f}KB"
            f" {min(values) / 1000:>8.1f}KB {max(values) / 1000:>8.1f}KB"
        )


if __name__ == "__main__":
    main()
