"""A rolling restart under load loses and duplicates nothing (benchmarks/rolling_restart.py).

Three backend processes on loopback, a round-robin channel with a retry policy and
8 tasks calling back to back, each backend drained (SIGTERM: GOAWAY, its calls
finish) and replaced by a new process on the same port in turn. The backends log
the id of every call they ran; the run stops every process it started.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # benchmarks/ is a package of the repository, not installed
    sys.path.insert(0, str(ROOT))

from benchmarks.rolling_restart import BACKENDS, plot, rolling_restart  # noqa: E402

#: Bound on the command-line run (seconds).
PROC_TIMEOUT = 60


async def test_rolling_restart_loses_no_call_and_runs_none_twice(tmp_path: Path) -> None:
    """Each backend restarted in turn under load: no call fails, every id is run once."""
    result = await rolling_restart(tmp_path, duration=3.0, concurrency=8)
    assert result.failures == [], result.summary()
    assert result.sent > 500, result.summary()  # the load ran across the restarts
    assert result.calls == result.sent  # every call sent came back
    assert result.missing == [], result.summary()
    assert result.unknown == [], result.summary()
    assert result.duplicates == [], result.summary()
    assert sum(result.logged.values()) == result.sent
    assert result.wrong_answers == 0
    # Every backend was drained (exit 0 after SIGTERM) and replaced, and both the old
    # and the new process of each answered calls.
    assert [r.backend for r in result.restarts] == list(range(1, BACKENDS + 1))
    assert all(r.exit_code == 0 for r in result.restarts), result.summary()
    assert sorted(result.per_process) == [(b, g) for b in range(1, BACKENDS + 1) for g in (1, 2)]
    assert all(n > 0 for n in result.per_process.values()), result.per_process
    # Calls started while a backend was down or coming back, and they succeeded too.
    assert any(result.in_restart(start) for start, _ in result.latencies)
    for backend in range(1, BACKENDS + 1):  # a drain logs nothing on stderr
        for generation in (1, 2):
            stderr = tmp_path / f"backend{backend}.{generation}.stderr"
            assert stderr.read_text() == "", stderr.read_text()
    png = tmp_path / "latency.png"
    plot(result, png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_rolling_restart_command_prints_the_figures(tmp_path: Path) -> None:
    """The benchmark's command line prints calls, failures, duplicates and p50/p99
    overall and during restarts, and writes its JSON and PNG."""
    figures, png = tmp_path / "figures.json", tmp_path / "plot.png"
    result = subprocess.run(
        [
            *(sys.executable, str(ROOT / "benchmarks" / "rolling_restart.py")),
            *("--duration", "1.5", "--concurrency", "4"),
            *("--json", str(figures), "--png", str(png)),
        ],
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=PROC_TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "failures 0, duplicates 0, missing 0" in out, out
    assert "latency overall" in out, out
    assert "latency during restarts" in out, out
    assert out.count("SIGTERM at") == BACKENDS, out
    data = json.loads(figures.read_text())
    assert data["failures"] == data["duplicates"] == data["missing"] == 0
    assert data["calls"] > 0
    assert data["p99_ms"] >= data["p50_ms"] > 0
    assert png.read_bytes()[:4] == b"\x89PNG"
