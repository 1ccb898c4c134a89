"""A rolling restart under load loses and duplicates nothing (benchmarks/rolling_restart.py).

Three backend processes on loopback, a round-robin channel with a retry policy and
8 tasks calling back to back, each backend drained (SIGTERM: GOAWAY, its calls
finish) and replaced by a new process on the same port in turn. The backends log
the id of every call they ran; the run stops every process it started.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # benchmarks/ is a package of the repository, not installed
    sys.path.insert(0, str(ROOT))

from benchmarks.rolling_restart import BACKENDS, parse_args, report, rolling_restart  # noqa: E402


async def test_rolling_restart_loses_no_call_and_runs_none_twice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each backend restarted in turn under load: no call fails, every id is run once;
    the benchmark's report prints the figures and writes its JSON and PNG."""
    result = await rolling_restart(tmp_path, duration=3.0, concurrency=8)
    assert result.failures == [], result.summary()
    assert result.sent > 300, result.summary()  # the load ran across the restarts
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

    png, figures = tmp_path / "latency.png", tmp_path / "figures.json"
    assert report(result, png=png, json_path=figures) == 0
    out = capsys.readouterr().out
    assert "failures 0, duplicates 0, missing 0" in out, out
    assert "latency overall" in out, out
    assert "latency during restarts" in out, out
    assert out.count("SIGTERM at") == BACKENDS, out
    data = json.loads(figures.read_text())
    assert data["failures"] == data["duplicates"] == data["missing"] == 0
    assert data["calls"] == result.calls
    assert data["p99_ms"] >= data["p50_ms"] > 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_rolling_restart_command_line_options() -> None:
    """The command line takes the run's duration, concurrency, delay and outputs."""
    args = parse_args(["--duration", "5", "--concurrency", "3", "--delay", "0", "--no-retries"])
    assert (args.duration, args.concurrency, args.delay, args.retries) == (5.0, 3, 0.0, False)
    assert (args.png, args.json, args.role) == (None, None, None)
    defaults = parse_args([])
    assert (defaults.duration, defaults.concurrency, defaults.retries) == (30.0, 32, True)
    backend = parse_args(["backend", "--port", "1", "--log", "x"])
    assert (backend.role, backend.port, backend.log) == ("backend", 1, "x")
