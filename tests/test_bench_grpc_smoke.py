"""Smoke test of benchmarks/peers/grpc_peers.py: every preset over trio_h2t.grpc, briefly.

Each preset runs once as the benchmark runs it (a server process and a client process
over 127.0.0.1), for a fraction of a second; the test checks what the calls did (all
OK, every response the preset's size, the server's CPU read), never how fast.
"""

from __future__ import annotations

import gc
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.peers import gcstats, grpc_peers

PURERPC_VENV = Path(__file__).resolve().parents[1] / "scripts" / "purerpc-venv.sh"


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """bench.proto compiled (the protobuf messages only: trio_h2t needs no stubs)."""
    out = tmp_path_factory.mktemp("grpc_peers_gen")
    grpc_peers.compile_proto(out, peers=False)
    assert (out / "bench_pb2.py").exists()
    return out


@pytest.mark.parametrize("preset", sorted(grpc_peers.PRESETS))
def test_trio_h2t_preset_completes_ok_calls(preset: str, generated: Path) -> None:
    """A short run of the preset completes calls, none failed, every response had the size."""
    result = grpc_peers.run_one(
        "trio_h2t",
        preset,
        python=sys.executable,
        gen=generated,
        duration=0.2,
        warmup=0.1,
        timeout=120.0,
        min_calls=1,  # however slow the machine is today
    )
    assert result["errors"] == 0, result["first_error"]
    assert result["bad_size"] == 0
    assert result["total_calls"] > 0
    assert result["calls"] <= result["total_calls"]
    assert result["preset"] == preset
    assert result["impl"] == "trio_h2t"
    assert not math.isnan(result["server_cpu_s"])


@pytest.mark.parametrize("gc_freeze", [False, True])
def test_gc_freeze_freezes_both_processes_or_neither(gc_freeze: bool, generated: Path) -> None:
    """``--gc-freeze`` reaches the server and the client process alike; without it
    neither freezes anything (the collector as Python sets it)."""
    result = grpc_peers.run_one(
        "trio_h2t",
        "w1",
        python=sys.executable,
        gen=generated,
        duration=0.2,
        warmup=0.1,
        timeout=120.0,
        min_calls=1,
        gc_freeze=gc_freeze,
    )
    assert result["errors"] == 0, result["first_error"]
    if gc_freeze:
        # start-up's objects: the modules, trio's, the connection (tens of thousands)
        assert result["server_gc_frozen"] > 10_000
        assert result["gc_frozen"] > 10_000
    else:
        assert result["server_gc_frozen"] == 0
        assert result["gc_frozen"] == 0


def test_gc_stats_reports_both_sides_and_no_cyclic_garbage(generated: Path) -> None:
    """``--gc-stats`` brings back the collector's figures of the server and of the
    client process, each per 1000 of its own calls, and a census of the cyclic
    garbage: none per call from trio_h2t.grpc over TCP on either side."""
    result = grpc_peers.run_one(
        "trio_h2t",
        "w1",
        python=sys.executable,
        gen=generated,
        duration=0.3,
        warmup=0.1,
        timeout=120.0,
        min_calls=1,
        gc_stats=0.3,
    )
    assert result["errors"] == 0, result["first_error"]
    for side in (result["gc"], result["server_gc"]):
        assert side is not None
        assert side["calls"] > 0
        assert len(side["collections_per_1000"]) == 3
        assert side["census_calls"] > 0
        assert side["garbage_per_call"] < 0.5, side["garbage_by_type"]
    lines = gcstats.format_report("server", "trio_h2t", [result["server_gc"]])
    assert lines[0].startswith("trio_h2t server: per 1000 calls")


def test_gc_stats_classifies_garbage_by_type_and_site() -> None:
    """The census names a reference cycle made in its window by type and by the
    line that allocated it."""
    stats = gcstats.GcStats()
    try:
        stats.start()
        stats.stop(1)
        stats.census_start(0)

        class Node:  # slots: 3.11's tracemalloc finds no site for a __dict__'s owner
            __slots__ = ("link",)
            link: object

        for _ in range(3):
            node = Node()
            node.link = node
        del node
        report = stats.census_report(3)
    finally:
        gc.callbacks.remove(stats._callback)
    kinds = dict(report["garbage_by_type"])
    assert kinds.get("Node", 0) == 3
    assert report["garbage_per_call"] >= 1
    assert any("test_bench_grpc_smoke.py" in site for site, _ in report["garbage_by_site"]), report[
        "garbage_by_site"
    ]


def test_presets_are_the_issue_workloads() -> None:
    """The named presets carry the configurations the benchmark is asked to measure."""
    p = grpc_peers.PRESETS
    assert (p["w1"].kind, p["w1"].concurrency, p["w1"].size) == ("unary", 100, 0)
    assert (p["w2"].kind, p["w2"].concurrency, p["w2"].size) == ("pingpong", 200, 100)
    assert (p["alloc"].concurrency, p["alloc"].size) == (200, 100)
    assert (p["codec"].concurrency, p["codec"].size) == (6, 8192)
    assert (p["zerocopy"].concurrency, p["zerocopy"].size) == (100, 1 << 20)
    assert (p["peers100"].concurrency, p["peers100"].size) == (100, 100)
    assert (p["w4"].kind, p["w4"].concurrency, p["w4"].size) == ("unary", 8, 1 << 20)
    assert (p["c1000"].kind, p["c1000"].concurrency) == ("unary", 1000)


def _purerpc_venv(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHON": sys.executable}
    return subprocess.run(
        ["bash", str(PURERPC_VENV), *args],
        capture_output=True,
        text=True,
        timeout=30,
        env=env,
        check=False,
    )


def test_purerpc_venv_script_help_names_the_pinned_versions() -> None:
    """scripts/purerpc-venv.sh --help says what it installs and what it prints."""
    result = _purerpc_venv("--help")
    assert result.returncode == 0, result.stderr
    assert "purerpc==0.8.0 protobuf>=7.35.1,<8 trio" in result.stdout
    assert "--purerpc-python" in result.stdout
    assert _purerpc_venv("--no-such-option").returncode == 2


def test_purerpc_venv_script_dry_run_prints_the_path_and_creates_nothing(tmp_path: Path) -> None:
    """--dry-run prints the venv and pinned pip commands (stderr) and the interpreter
    path alone (stdout), and creates nothing."""
    target = tmp_path / "venv"
    result = _purerpc_venv("--dry-run", str(target))
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{target}/bin/python\n"
    commands = [line for line in result.stderr.splitlines() if line.startswith("+ ")]
    assert commands == [
        f"+ {sys.executable} -m venv {target}",
        f"+ {target}/bin/python -m pip install -q purerpc==0.8.0 protobuf\\>=7.35.1\\,\\<8 trio",
    ]
    assert f"--purerpc-python {target}/bin/python" in result.stderr
    assert not target.exists()
