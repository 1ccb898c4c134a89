"""Smoke tests of the benchmark scripts, so that they keep working between suite runs.

Every figure here is checked for shape and sanity only, never for speed: speed is
what the benchmarks themselves report (see benchmarks/README.md). Each script runs as
a subprocess for a fraction of a second, over the memory network only.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT / "benchmarks"
if str(ROOT) not in sys.path:  # benchmarks/ is a package of the repository, not installed
    sys.path.insert(0, str(ROOT))

from benchmarks import run  # noqa: E402

#: Upper bound for any subprocess in this file (seconds).
PROC_TIMEOUT = 60


def script(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCHMARKS / name), *args],
        capture_output=True,
        text=True,
        timeout=PROC_TIMEOUT,
        check=False,
    )


def test_bootstrap_ratio_brackets_the_ratio_of_medians() -> None:
    top = [90.0, 100.0, 110.0, 95.0, 105.0]
    bottom = [45.0, 50.0, 55.0, 48.0, 52.0]
    lo, hi = run.bootstrap_ratio(top, bottom)
    assert lo <= 100.0 / 50.0 <= hi
    assert lo >= 90.0 / 55.0
    assert hi <= 110.0 / 45.0
    assert run.bootstrap_ratio(top, bottom) == (lo, hi)  # fixed seed: repeatable
    assert run.bootstrap_ratio([3.0], [3.0]) == (1.0, 1.0)
    nan_lo, nan_hi = run.bootstrap_ratio([], bottom)
    assert nan_lo != nan_lo
    assert nan_hi != nan_hi


def test_step_key_tells_every_kind_of_result_apart() -> None:
    assert run.step_key({"state": "h2", "runs": []}) == ("ceiling", "h2")
    assert run.step_key({"bench": "bare_trio", "concurrency": 1000}) == ("bare", 1000)
    assert run.step_key({"network": "tcp", "concurrency": 100}) == ("tcp", 100)


def test_bare_trio_child_reports_cpu_per_request(tmp_path: Path) -> None:
    out = tmp_path / "bare.json"
    proc = script(
        "bare_trio.py", "--child", "50", "--warmup", "0.1", "--duration", "0.3", "--json", str(out)
    )
    assert proc.returncode == 0, proc.stderr
    (result,) = json.loads(out.read_text())
    assert result["bench"] == "bare_trio"
    assert result["concurrency"] == 50
    assert 0 < result["cpu_us_per_op"] < 10_000
    assert float(proc.stdout) == result["cpu_us_per_op"]


def test_benchmain_memory_unary_runs_and_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    proc = script(
        "benchmain.py",
        "--workload",
        "unary",
        "--network",
        "memory",
        "--concurrency",
        "20",
        "--warmup",
        "0.1",
        "--duration",
        "0.4",
        "--quiet",
        "--json",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    (result,) = json.loads(out.read_text())
    for key in ("workload", "concurrency", "qps", "p50_ms", "p99_ms", "bytes_per_op"):
        assert key in result
    assert result["ops"] > 0
    assert result["qps"] > 0
    assert result["p50_ms"] <= result["p99_ms"]
    assert result["frames_per_write"] >= 1


def _fake_suite_results() -> list[dict[str, Any]]:
    """One result per suite configuration, shaped as the scripts write them."""
    results: list[dict[str, Any]] = [
        {"state": state, "runs": [1000.0], "rpcs_per_s": 1000.0, "cpu_runs": [1000.0]}
        for state in ("h2", "trio_h2t")
    ]
    for network in ("tcp", "memory"):
        for concurrency in (100, 1000):
            results.append(
                {
                    "workload": "unary",
                    "network": network,
                    "concurrency": concurrency,
                    "qps": 2000.0 if network == "tcp" else 1000.0,
                    "p50_ms": 1.0,
                    "p90_ms": 2.0,
                    "p99_ms": 3.0,
                    "avg_ms": 1.5,
                    "frames_per_write": 30.0,
                    "server_frames_per_write": 60.0,
                    "client_cpu": 1.0,
                    "server_cpu": 1.0 if network == "tcp" else None,
                    "cpu_us_per_op": 250.0,
                    "allocs_per_op": 600.0 if concurrency == 100 else None,
                    "bytes_per_op": 56000.0 if concurrency == 100 else None,
                }
            )
    return results


@pytest.mark.parametrize("with_bare", [True, False])
def test_run_from_json_summarises_without_running(tmp_path: Path, with_bare: bool) -> None:
    results = _fake_suite_results()
    if with_bare:  # files written before bare_trio joined the suite have none
        results += [
            {"bench": "bare_trio", "concurrency": c, "cpu_us_per_op": 30.0} for c in (100, 1000)
        ]
    path = tmp_path / "suite.json"
    path.write_text(json.dumps(results))
    proc = script("run.py", "--from-json", str(path), str(path))
    assert proc.returncode == 0, proc.stdout + proc.stderr  # every target passes
    assert "2 file(s), 2 or more rounds" in proc.stdout
    assert "QPS c=1000 / c=100 (TCP)          2,000 / 2,000 = 1.000x [1.00, 1.00]" in proc.stdout
    assert "1,000 / 1,000 = 1.000x [1.00, 1.00]" in proc.stdout  # the one-process line
    assert ("bare trio, same task shape" in proc.stdout) == with_bare
    assert "FAIL" not in proc.stdout


def test_run_from_json_fails_a_missed_target(tmp_path: Path) -> None:
    results = _fake_suite_results()
    for r in results:
        if r.get("network") == "tcp" and r["concurrency"] == 1000:
            r["qps"] = 1000.0  # half of c=100
    path = tmp_path / "suite.json"
    path.write_text(json.dumps(results))
    proc = script("run.py", "--from-json", str(path))
    assert proc.returncode == 1
    assert "= 0.500x [0.50, 0.50]" in proc.stdout
    assert "FAIL" in proc.stdout


def test_run_from_json_names_missing_configurations(tmp_path: Path) -> None:
    path = tmp_path / "suite.json"
    path.write_text(json.dumps(_fake_suite_results()[:3]))
    proc = script("run.py", "--from-json", str(path))
    assert proc.returncode != 0
    assert "no results for" in proc.stderr
    assert "unary c=1000 memory" in proc.stderr
