"""h2load against ``trio-h2t serve`` and ``hypercorn -k trio``, serving one small file.

Both servers serve the same file (``--size`` bytes, default 100, in a temporary
directory) over h2c with prior knowledge on 127.0.0.1:

``trio-h2t serve``
    the project's CLI, ``python -m trio_h2t serve --port 0 --root DIR`` (it prints
    ``serving on http://HOST:PORT``). It resolves the path and opens and reads the
    file in worker threads on every request.
``hypercorn -k trio``
    hypercorn's Trio worker (1 worker process) running ``hypercorn_app.py``, an ASGI
    app that reads the file with blocking I/O on every request. A config file lifts
    ``keep_alive_max_requests`` (1000 by default: hypercorn would close the single
    h2load connection after 1000 requests).
``trio_h2t (like-for-like)`` (diagnostic; ``--no-like-for-like`` drops it)
    ``trio_h2t_static.py``: ``trio_h2t.serve_tcp`` with a handler that does exactly
    what the ASGI app does, to separate the transport from the CLI's file handling.

The load is ``h2load -c 1 -m 100 -n 20000 URL`` (one connection, 100 streams in
flight). Each server gets one warm-up run (``--warmup-requests``), then the servers
are measured in alternation for ``--rounds`` rounds; the table gives h2load's req/s
of each round, the medians and their ratios, and the server's CPU use during the run
(``/proc``: the server process and its children; 1.0 = one core busy). Every run
must answer every request with a 2xx, or the script fails.

hypercorn is installed into this interpreter's environment with pip if it is missing.

Run: ``.venv/bin/python benchmarks/peers/hypercorn_vs_trio_h2t.py`` (about 1-2 min).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
TARGET_RATIO = 3.0
FILE_NAME = "file.txt"


def ensure_hypercorn() -> Path:
    """The hypercorn executable next to this interpreter, installed if missing."""
    if importlib.util.find_spec("hypercorn") is None:
        print("installing hypercorn (pip install hypercorn) ...", flush=True)
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "hypercorn"], check=True)
    exe = Path(sys.executable).parent / "hypercorn"
    if not exe.exists():
        found = shutil.which("hypercorn")
        if found is None:
            raise SystemExit("hypercorn is installed but its executable was not found")
        exe = Path(found)
    return exe


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_listening(port: int, proc: subprocess.Popen[str], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited early (status {proc.returncode})")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"nothing listens on port {port} after {timeout} s")


def tree_cpu(pid: int) -> float:
    """CPU seconds (user + system) of ``pid`` and its live descendants, from /proc."""
    ticks = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        parents[int(entry.name)] = int(fields[1])
        times[int(entry.name)] = (int(fields[11]) + int(fields[12])) / ticks
    total, todo = 0.0, [pid]
    while todo:
        current = todo.pop()
        total += times.get(current, 0.0)
        todo.extend(child for child, parent in parents.items() if parent == current)
    return total


@dataclass
class Server:
    name: str
    command: list[str]
    env: dict[str, str]
    port_from_stdout: bool  # reads "serving on http://HOST:PORT"; else ``port`` is fixed
    port: int = 0
    proc: subprocess.Popen[str] | None = None
    rates: list[float] = field(default_factory=list)
    cpus: list[float] = field(default_factory=list)

    def start(self) -> None:
        self.proc = subprocess.Popen(
            self.command,
            env=self.env,
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE if self.port_from_stdout else subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        if self.port_from_stdout:
            assert self.proc.stdout is not None
            line = self.proc.stdout.readline()
            match = re.search(r"serving on http://[^\s]+:(\d+)", line)
            if match is None:
                self.stop()
                raise SystemExit(f"{self.name}: unexpected first line {line!r}")
            self.port = int(match.group(1))
        wait_listening(self.port, self.proc)

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None


def h2load(url: str, requests: int, clients: int, streams: int) -> tuple[float, str]:
    """Run h2load; return (req/s, its output). Fails unless every request got a 2xx."""
    cmd = ["h2load", "-c", str(clients), "-m", str(streams), "-n", str(requests), url]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    out = proc.stdout
    rate = re.search(r"finished in [\d.]+\w*, ([\d.]+) req/s", out)
    codes = re.search(r"status codes: (\d+) 2xx", out)
    if proc.returncode != 0 or rate is None or codes is None or int(codes.group(1)) != requests:
        raise SystemExit(f"h2load failed against {url}:\n{out}\n{proc.stderr}")
    return float(rate.group(1)), out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="hypercorn_vs_trio_h2t.py", description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--requests", type=int, default=20_000, help="h2load -n")
    p.add_argument("--clients", type=int, default=1, help="h2load -c")
    p.add_argument("--streams", type=int, default=100, help="h2load -m")
    p.add_argument("--warmup-requests", type=int, default=2_000)
    p.add_argument("--size", type=int, default=100, help="bytes in the served file")
    p.add_argument("--no-like-for-like", action="store_true", help="skip the diagnostic peer")
    args = p.parse_args(argv)
    if shutil.which("h2load") is None:
        raise SystemExit("h2load is not installed (Debian: nghttp2-client)")
    hypercorn = ensure_hypercorn()

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        static = root / FILE_NAME
        static.write_bytes(b"x" * (args.size - 1) + b"\n" if args.size else b"")
        config = root / "hypercorn.toml"
        config.write_text("keep_alive_max_requests = 1000000000\n")
        env = dict(os.environ, BENCH_STATIC_FILE=str(static))
        hyper_port = free_port()
        servers = [
            Server(
                "trio-h2t serve",
                [sys.executable, "-m", "trio_h2t", "serve", "--port", "0", "--root", tmp],
                env,
                True,
            ),
            Server(
                "hypercorn -k trio",
                [
                    str(hypercorn),
                    "-k",
                    "trio",
                    "-c",
                    str(config),
                    "--bind",
                    f"127.0.0.1:{hyper_port}",
                    f"{HERE / 'hypercorn_app.py'}:app",
                ],
                env,
                False,
                port=hyper_port,
            ),
        ]
        if not args.no_like_for_like:
            servers.append(
                Server(
                    "trio_h2t (like-for-like)",
                    [sys.executable, str(HERE / "trio_h2t_static.py"), str(static)],
                    env,
                    True,
                )
            )
        print(
            f"h2load -c {args.clients} -m {args.streams} -n {args.requests}, "
            f"{args.size}-byte file, {args.rounds} rounds (alternating), "
            f"load average {os.getloadavg()}",
            flush=True,
        )
        try:
            for server in servers:
                server.start()
                h2load(
                    f"http://127.0.0.1:{server.port}/{FILE_NAME}",
                    args.warmup_requests,
                    args.clients,
                    args.streams,
                )
            for rnd in range(args.rounds):
                order = servers[rnd % len(servers) :] + servers[: rnd % len(servers)]
                for server in order:
                    assert server.proc is not None
                    cpu0, t0 = tree_cpu(server.proc.pid), time.perf_counter()
                    rate, _ = h2load(
                        f"http://127.0.0.1:{server.port}/{FILE_NAME}",
                        args.requests,
                        args.clients,
                        args.streams,
                    )
                    cpu = (tree_cpu(server.proc.pid) - cpu0) / (time.perf_counter() - t0)
                    server.rates.append(rate)
                    server.cpus.append(cpu)
                    print(
                        f"[{rnd + 1}/{args.rounds}] {server.name:<26}{rate:>10,.0f} req/s"
                        f"   server CPU {cpu:.2f}",
                        flush=True,
                    )
        finally:
            for server in servers:
                server.stop()

    print()
    print(f"{'server':<26}{'median req/s':>14}{'server CPU':>12}   rounds")
    for server in servers:
        rounds = ", ".join(f"{r:,.0f}" for r in server.rates)
        print(
            f"{server.name:<26}{statistics.median(server.rates):>14,.0f}"
            f"{statistics.median(server.cpus):>12.2f}   {rounds}"
        )
    cli, hyper = (statistics.median(s.rates) for s in servers[:2])
    ok = cli / hyper >= TARGET_RATIO
    print()
    print(
        f"trio-h2t serve / hypercorn -k trio = {cli:,.0f} / {hyper:,.0f} = {cli / hyper:.2f}x "
        f"(target >= {TARGET_RATIO:g}x): {'PASS' if ok else 'FAIL'}"
    )
    if len(servers) > 2:
        like = statistics.median(servers[2].rates)
        print(
            f"trio_h2t like-for-like / hypercorn -k trio = {like:,.0f} / {hyper:,.0f} = "
            f"{like / hyper:.2f}x (diagnostic)"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
