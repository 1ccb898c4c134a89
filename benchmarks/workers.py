"""h2load throughput of ``trio-h2t serve --workers N``: 1 worker against 2 (or more).

A Trio server runs on one core; ``--workers N`` runs N worker processes on one port
(SO_REUSEPORT; docs/keepalive-and-shutdown.md, "More than one core"). This starts
``python -m trio_h2t serve --workers N`` on a free loopback port for each N in
``--workers`` (default ``1 2``), serving one small file, and runs
``h2load -c C -m M -n REQUESTS URL`` against it (several connections: SO_REUSEPORT
spreads connections, not streams, so one connection would reach one worker only);
the rounds alternate between the configurations, and the table gives the median
req/s of each and its ratio to the first. h2load shares the machine with the
workers: on a 2-core machine, 2 workers and h2load compete for the cores, so the
ratio is a lower bound of what a dedicated machine gives.

Run it on a quiet machine: other load makes every figure meaningless.

    .venv/bin/python benchmarks/workers.py [--workers 1 2] [--rounds 3]
        [--requests 100000] [--clients 8] [--streams 10]

``h2load`` is Debian's ``nghttp2-client`` (``scripts/run-tests`` installs it). Every
request must succeed (2xx), or the run fails.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

if not __package__:  # run as a script: benchmarks/_bootstrap.py registers the package
    importlib.import_module("_bootstrap")

from benchmarks._backends import child_env

#: The file served: small, so the figures measure the transport, not the disk.
BODY = b"x" * 1024


def start(workers: int, root: Path) -> tuple[subprocess.Popen[bytes], str]:
    """Start ``serve --workers N`` on a free port; (its process, the file's URL)."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "trio_h2t",
            "serve",
            "--workers",
            str(workers),
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--root",
            str(root),
        ],
        stdout=subprocess.PIPE,
        env=child_env(),
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().decode()
    if not line.startswith("serving on "):
        proc.kill()
        raise SystemExit(f"serve --workers {workers} did not start: {line!r}")
    return proc, line.split()[-1] + "/index.html"


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM (the drain), then wait; kill after 30 s."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def h2load(url: str, requests: int, clients: int, streams: int) -> float:
    """Run h2load; its req/s. Fails unless every request got a 2xx."""
    cmd = ["h2load", "-c", str(clients), "-m", str(streams), "-n", str(requests), url]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    out = proc.stdout
    rate = re.search(r"finished in [\d.]+\w*, ([\d.]+) req/s", out)
    ok = re.search(r"status codes: (\d+) 2xx", out)
    if proc.returncode != 0 or rate is None or ok is None or int(ok.group(1)) != requests:
        raise SystemExit(f"h2load failed against {url}:\n{out}\n{proc.stderr}")
    return float(rate.group(1))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="N to compare")
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds")
    p.add_argument("--requests", type=int, default=100_000, help="h2load -n")
    p.add_argument("--clients", type=int, default=8, help="h2load -c (connections)")
    p.add_argument("--streams", type=int, default=10, help="h2load -m (streams per connection)")
    args = p.parse_args(argv)
    if shutil.which("h2load") is None:
        raise SystemExit("h2load is not installed (Debian: nghttp2-client)")
    rates: dict[int, list[float]] = {n: [] for n in args.workers}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "index.html").write_bytes(BODY)
        servers = {n: start(n, root) for n in args.workers}
        try:
            print(
                f"h2load -c {args.clients} -m {args.streams} -n {args.requests},"
                f" {len(BODY)}-byte file, {os.cpu_count()} CPUs",
                flush=True,
            )
            for rnd in range(args.rounds):
                for n, (_, url) in servers.items():
                    rate = h2load(url, args.requests, args.clients, args.streams)
                    rates[n].append(rate)
                    print(
                        f"[{rnd + 1}/{args.rounds}] workers={n:<3}{rate:>12,.0f} req/s", flush=True
                    )
        finally:
            for proc, _ in servers.values():
                stop(proc)
    base = statistics.median(rates[args.workers[0]])
    print(f"\n{'workers':<10}{'median req/s':>14}{'ratio':>8}")
    for n in args.workers:
        median = statistics.median(rates[n])
        print(f"{n:<10}{median:>14,.0f}{median / base:>8.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
