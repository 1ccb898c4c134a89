"""Smoke tests of the benchmark scripts, so that they keep working between suite runs.

Every figure here is checked for shape and sanity only, never for speed: speed is
what the benchmarks themselves report (see benchmarks/README.md). Each script runs as
a subprocess for a fraction of a second (with ``PYTHONPATH`` at this tree, so it
measures this tree's trio_h2t); the workloads' wire shapes are checked in process.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import trio_h2t

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT / "benchmarks"
if str(ROOT) not in sys.path:  # benchmarks/ is a package of the repository, not installed
    sys.path.insert(0, str(ROOT))

from benchmarks import benchmain, run, stats, targets, workloads  # noqa: E402

#: Upper bound for any subprocess in this file (seconds).
PROC_TIMEOUT = 60


def script(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCHMARKS / name), *args],
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=PROC_TIMEOUT,
        check=False,
    )


def test_bootstrap_ratio_brackets_the_ratio_of_medians() -> None:
    """The bootstrap interval holds the ratio of medians, within the extremes, repeatably."""
    top = [90.0, 100.0, 110.0, 95.0, 105.0]
    bottom = [45.0, 50.0, 55.0, 48.0, 52.0]
    lo, hi = stats.bootstrap_ratio(top, bottom)
    assert lo <= 100.0 / 50.0 <= hi
    assert lo >= 90.0 / 55.0
    assert hi <= 110.0 / 45.0
    assert stats.bootstrap_ratio(top, bottom) == (lo, hi)  # fixed seed: repeatable
    assert stats.bootstrap_ratio([3.0], [3.0]) == (1.0, 1.0)
    nan_lo, nan_hi = stats.bootstrap_ratio([], bottom)
    assert nan_lo != nan_lo
    assert nan_hi != nan_hi


def test_micro_report_compares_as_the_scripts_did(tmp_path: Path) -> None:
    """micro/_report.py's compare gives the medians, ratio and interval the micro
    scripts computed by hand (unpaired: stats.bootstrap_ratio; paired: the median of
    per-round ratios), and write_samples writes the --json file only when asked."""
    from benchmarks.micro import _report

    top, bottom = [90.0, 100.0, 110.0, 95.0, 105.0], [45.0, 50.0, 55.0, 48.0, 52.0]
    c = _report.compare(top, bottom)
    assert (c.top, c.bottom, c.ratio) == (100.0, 50.0, 2.0)
    assert (c.low, c.high) == stats.bootstrap_ratio(top, bottom)
    p = _report.compare(top, bottom, paired=True)
    assert p.ratio == sorted(a / b for a, b in zip(top, bottom, strict=True))[2]
    assert p.low <= p.ratio <= p.high
    _report.write_samples(None, samples={})
    out = tmp_path / "samples.json"
    _report.write_samples(str(out), ops=3, reps=1, samples={"a": [1.0]})
    assert json.loads(out.read_text()) == {"ops": 3, "reps": 1, "samples": {"a": [1.0]}}


def test_child_env_extends_pythonpath_and_the_servers_use_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """_backends.child_env puts this tree first and keeps the parent's PYTHONPATH
    (none added when unset); idle_footprint.py and workers.py start their servers
    with it instead of replacing PYTHONPATH themselves."""
    from benchmarks import _backends

    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    assert _backends.child_env()["PYTHONPATH"] == os.pathsep.join([str(ROOT), "/elsewhere"])
    monkeypatch.delenv("PYTHONPATH")
    assert _backends.child_env()["PYTHONPATH"] == str(ROOT)
    for name in ("idle_footprint.py", "workers.py"):
        source = (BENCHMARKS / name).read_text()
        assert "env=child_env()" in source
        assert "PYTHONPATH=" not in source


def test_step_key_tells_every_kind_of_result_apart() -> None:
    """targets.py files every kind of result under its own configuration."""
    assert targets.step_key({"state": "h2", "runs": []}) == ("ceiling", "h2")
    assert targets.step_key({"bench": "bare_trio", "concurrency": 1000}) == ("bare", 1000)
    assert targets.step_key({"network": "tcp", "concurrency": 100}) == ("tcp", 100)


def test_bare_trio_child_reports_cpu_per_request(tmp_path: Path) -> None:
    """bare_trio.py's child reports a plausible CPU time per request."""
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
    """benchmain.py runs unary over memory and appends a sane result to --json."""
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
    for field in ("50_Latency:", "90_Latency:", "99_Latency:", "QPS:", "loopy frames per send_all"):
        assert field in proc.stdout


def test_benchmain_embedded_defaults_are_the_main_job() -> None:
    """With no arguments benchmain runs unary, 100 streams, memory network, 0-byte bodies."""
    args = benchmain.parser().parse_args([])
    assert (args.workload, args.concurrency, args.network) == ("unary", 100, "memory")
    assert (args.req_size, args.resp_size, args.duration, args.warmup) == (0, None, 5.0, 1.0)
    assert workloads.make_workload(args.workload, args.req_size, args.resp_size).resp_size == 0


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
def test_targets_from_json_summarises_without_running(tmp_path: Path, with_bare: bool) -> None:
    """targets.py --from-json pools files and passes targets that are met."""
    results = _fake_suite_results()
    if with_bare:  # files written before bare_trio joined the suite have none
        results += [
            {"bench": "bare_trio", "concurrency": c, "cpu_us_per_op": 30.0} for c in (100, 1000)
        ]
    path = tmp_path / "suite.json"
    path.write_text(json.dumps(results))
    proc = script("targets.py", "--from-json", str(path), str(path))
    assert proc.returncode == 0, proc.stdout + proc.stderr  # every target passes
    assert "2 file(s), 2 or more rounds" in proc.stdout
    assert "QPS c=1000 / c=100 (TCP)          2,000 / 2,000 = 1.000x [1.00, 1.00]" in proc.stdout
    assert "1,000 / 1,000 = 1.000x [1.00, 1.00]" in proc.stdout  # the one-process line
    assert ("bare trio, same task shape" in proc.stdout) == with_bare
    assert "FAIL" not in proc.stdout


def test_targets_from_json_fails_a_missed_target(tmp_path: Path) -> None:
    """targets.py --from-json fails (exit 1) when a target is missed."""
    results = _fake_suite_results()
    for r in results:
        if r.get("network") == "tcp" and r["concurrency"] == 1000:
            r["qps"] = 1000.0  # half of c=100
    path = tmp_path / "suite.json"
    path.write_text(json.dumps(results))
    proc = script("targets.py", "--from-json", str(path))
    assert proc.returncode == 1
    assert "= 0.500x [0.50, 0.50]" in proc.stdout
    assert "FAIL" in proc.stdout


def test_targets_from_json_names_missing_configurations(tmp_path: Path) -> None:
    """targets.py --from-json names the configurations it has no results for."""
    path = tmp_path / "suite.json"
    path.write_text(json.dumps(_fake_suite_results()[:3]))
    proc = script("targets.py", "--from-json", str(path))
    assert proc.returncode != 0
    assert "no results for" in proc.stderr
    assert "unary c=1000 memory" in proc.stderr


# ---------------------------------------------------------------- public API only


def _trio_h2t_imports(path: Path) -> list[str]:
    """Every module name under trio_h2t that ``path`` imports (anywhere in the file)."""
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names if a.name.split(".")[0] == "trio_h2t"]
        elif (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and (node.module or "").split(".")[0] == "trio_h2t"
        ):
            module = node.module or ""
            names.append(module)
            names += [f"{module}.{a.name}" for a in node.names]
    return names


def test_benchmarks_import_only_public_trio_h2t() -> None:
    """benchmarks/*.py and peers/ import trio_h2t itself, never a private trio_h2t._x."""
    files = sorted(BENCHMARKS.glob("*.py")) + sorted((BENCHMARKS / "peers").glob("*.py"))
    assert BENCHMARKS / "benchmain.py" in files
    private = {
        f"{f.relative_to(BENCHMARKS)}: {name}"
        for f in files
        for name in _trio_h2t_imports(f)
        if any(part.startswith("_") for part in name.split(".")[1:])
    }
    assert not private, sorted(private)
    assert "trio_h2t" in _trio_h2t_imports(BENCHMARKS / "harness.py")


def test_private_import_scan_sees_private_imports() -> None:
    """The scan above would catch a private import (micro/ measures internals on purpose)."""
    names = _trio_h2t_imports(BENCHMARKS / "micro" / "controlbuf.py")
    assert "trio_h2t._controlbuf" in names


# ---------------------------------------------------------------- statistics


def test_percentile_follows_grpc_go() -> None:
    """percentile reads ordered[count * p / 100 - 1], clamped; NaN when empty."""
    ordered = [float(i) for i in range(1, 101)]
    assert stats.percentile(ordered, 50) == 50.0
    assert stats.percentile(ordered, 99) == 99.0
    assert stats.percentile([7.0], 99) == 7.0
    assert stats.percentile([], 50) != stats.percentile([], 50)  # NaN


def test_histogram_counts_every_value_in_its_bucket() -> None:
    """Each value lands in the bucket whose range holds it; the lines add up."""
    h = stats.Histogram(min_value=1e-3, growth=1.0, buckets=6)
    h.extend([0.0005, 0.0015, 0.0015, 0.003, 10.0])
    assert h.counts == [1, 2, 1, 0, 0, 1]  # [0,1ms) [1,2) [2,4) [4,8) [8,16) [16ms,inf)
    for i in range(1, len(h.counts)):
        assert h.bucket_of(h.lower_bound(i) * 1.0001) == i
    lines = h.lines()
    assert lines[0].startswith("Count: 5")
    assert "100.0%" in lines[-1]


# ---------------------------------------------------------------- workloads on the wire


async def _serve_one(handler: trio_h2t.Handler, client: Any) -> None:
    """Run ``client(conn)`` against ``handler`` over a memory stream pair."""
    client_side, server_side = trio.testing.memory_stream_pair()
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio_h2t.serve_connection, server_side, handler)
            async with trio_h2t.open_client_connection(client_side) as conn:
                await client(conn)
            nursery.cancel_scope.cancel()


async def test_grpc_unary_server_answers_a_grpc_shaped_call() -> None:
    """grpc-unary's server: gRPC content-type, a 5-byte message for 0 bytes, grpc-status 0."""
    w = workloads.make_workload("grpc-unary", 0, 0)

    async def client(conn: trio_h2t.ClientConnection) -> None:
        headers = conn.request_headers("POST", w.path) + workloads.GRPC_REQUEST_HEADERS
        async with conn.open_stream(headers) as stream:
            await stream.send_data(b"\x00\x00\x00\x00\x00", end_stream=True)
            response = await stream.receive_headers()
            body = await stream.read_all()
            trailers = stream.trailers
        assert (b"content-type", b"application/grpc") in response
        assert body == b"\x00\x00\x00\x00\x00"
        assert trailers == [(b"grpc-status", b"0")]

    await _serve_one(w.serve, client)


async def test_grpc_unary_client_sends_a_prefixed_message_and_checks_status() -> None:
    """grpc-unary's client sends gRPC headers and a 5-byte DATA frame; a bad status fails it."""
    seen: list[tuple[list[tuple[bytes, bytes]], bytes]] = []
    status = [b"0"]

    async def handler(stream: trio_h2t.H2Stream) -> None:
        seen.append((list(stream.headers or ()), await stream.read_all()))
        await stream.send_headers(workloads.GRPC_RESPONSE_HEADERS)
        await stream.send_data(workloads.grpc_message(3))
        await stream.send_trailers([(b"grpc-status", status[0])])

    w = workloads.make_workload("grpc-unary", 0, 3)

    async def client(conn: trio_h2t.ClientConnection) -> None:
        rec = workloads.Recorder()
        rec.budget = 2
        await w.client(conn, rec)
        assert rec.total_ops == 2
        status[0] = b"13"
        rec = workloads.Recorder()
        rec.budget = 1
        with pytest.raises(workloads.WorkloadError, match="grpc-status"):
            await w.client(conn, rec)

    await _serve_one(handler, client)
    headers, body = seen[0]
    assert (b"content-type", b"application/grpc") in headers
    assert (b"te", b"trailers") in headers
    assert body == b"\x00\x00\x00\x00\x00"


async def test_streaming_is_grpc_shaped_both_ways() -> None:
    """streaming: prefixed messages each way, gRPC headers and grpc-status at the end."""
    w = workloads.make_workload("streaming", 2, 4)

    async def client(conn: trio_h2t.ClientConnection) -> None:
        rec = workloads.Recorder()
        rec.budget = 3
        await w.client(conn, rec)  # checks content-type and grpc-status itself
        assert rec.total_ops == 3

    await _serve_one(w.serve, client)


async def test_bulk_moves_and_checks_every_byte() -> None:
    """bulk moves its sizes both ways, CRC-checked; a changed byte fails the operation."""
    w = workloads.make_workload("bulk", 70_000, 200_000)
    assert isinstance(w, workloads.Bulk)
    assert sum(len(c) for c in w.response_chunks) == 200_000
    assert len(set(w.request)) > 200  # pseudo-random, not one repeated byte

    async def client(conn: trio_h2t.ClientConnection) -> None:
        rec = workloads.Recorder()
        rec.budget = 2
        rec.measuring = True
        await w.client(conn, rec)
        assert rec.total_ops == 2
        assert rec.bytes_moved == 2 * (70_000 + 200_000)

    await _serve_one(w.serve, client)

    async def corrupting(stream: trio_h2t.H2Stream) -> None:
        await stream.read_all()
        await stream.send_headers([(b":status", b"200")])
        body = b"".join(w.response_chunks)
        await stream.send_data(body[:-1] + bytes([body[-1] ^ 1]))
        await stream.send_trailers([(b"x-bench-crc32", str(w.response_crc).encode())])

    async def failing_client(conn: trio_h2t.ClientConnection) -> None:
        rec = workloads.Recorder()
        rec.budget = 1
        with pytest.raises(workloads.WorkloadError, match="bulk response"):
            await w.client(conn, rec)

    await _serve_one(corrupting, failing_client)


@pytest.mark.parametrize("workload", sorted(workloads.WORKLOADS))
def test_benchmain_runs_every_workload(tmp_path: Path, workload: str) -> None:
    """Each workload runs end to end in benchmain.py (memory, tiny) and counts operations."""
    out = tmp_path / "bench.json"
    sizes = ["--resp-size", "20000"] if workload == "bulk" else []
    proc = script(
        "benchmain.py",
        *("--workload", workload, "--network", "memory", "--concurrency", "3"),
        *("--warmup", "0.05", "--duration", "0.3", "--quiet", "--histogram"),
        *sizes,
        *("--json", str(out)),
    )
    assert proc.returncode == 0, proc.stderr
    (result,) = json.loads(out.read_text())
    assert result["workload"] == workload
    assert result["ops"] > 0
    assert "QPS:" in proc.stdout
    assert "loopy frames per send_all" in proc.stdout
    assert "Histogram (unit: ms)" in proc.stdout
    assert Path(result["trio_h2t_file"]).is_relative_to(ROOT / "trio_h2t")
    if workload == "bulk":
        assert result["mb_per_s"] > 0


def test_benchmain_tcp_runs_its_server_process(tmp_path: Path) -> None:
    """Over TCP the server is a second process whose counters reach the result."""
    out = tmp_path / "bench.json"
    proc = script(
        "benchmain.py",
        *("--workload", "grpc-unary", "--network", "tcp", "--concurrency", "4"),
        *("--warmup", "0.1", "--duration", "0.3", "--quiet", "--json", str(out)),
    )
    assert proc.returncode == 0, proc.stderr
    (result,) = json.loads(out.read_text())
    assert result["ops"] > 0
    assert result["server_frames"] > 0
    assert result["server_cpu"] is not None


# ---------------------------------------------------------------- run.py side by side


def test_run_parse_spec_reads_every_field() -> None:
    """A workload spec gives name, network, concurrency and sizes; junk is refused."""
    assert run.parse_spec("bulk:memory:c=2:req=5:resp=9") == run.Spec("bulk", "memory", 2, 5, 9)
    assert run.parse_spec("unary") == run.Spec("unary")
    with pytest.raises(Exception, match="bad workload"):
        run.parse_spec("unary:c2")


def test_run_verdict_needs_an_interval_clear_of_one_and_enough_rounds() -> None:
    """faster / slower only when the interval excludes 1.0 over enough rounds."""
    assert run.verdict(1.02, 1.10, 5) == "faster"
    assert run.verdict(0.90, 0.98, 5) == "slower"
    assert run.verdict(0.97, 1.03, 5) == "same"
    assert run.verdict(1.02, 1.10, 2) == "-"


def test_run_compares_head_with_itself_side_by_side(tmp_path: Path) -> None:
    """run.py --base HEAD, one tiny round: both sides run from their own trees and
    report (with --allocs, allocations per operation too)."""
    out = tmp_path / "ab.json"
    proc = script(
        "run.py",
        *("--base", "HEAD", "--rounds", "1", "--duration", "0.2", "--warmup", "0.05"),
        *("--workload", "unary:memory:c=3", "--json", str(out), "--allocs"),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "B/A [95% interval]" in proc.stdout
    assert "unary c=3 memory" in proc.stdout
    assert re.search(r"allocations/op A/B [\d,]+/[\d,]+ \(", proc.stdout)  # --allocs
    results = json.loads(out.read_text())
    assert sorted(r["side"] for r in results) == ["A", "B"]
    files = {r["side"]: Path(r["trio_h2t_file"]) for r in results}
    assert files["B"].is_relative_to(ROOT / "trio_h2t")  # the working tree
    assert not files["A"].is_relative_to(ROOT)  # a git archive of HEAD
    again = script("run.py", "--from-json", str(out))
    assert again.returncode == 0, again.stderr
    summary = proc.stdout[proc.stdout.rindex("A = HEAD") :]
    assert again.stdout == summary


def test_micro_ceiling_runs_both_states() -> None:
    """micro/ceiling.py still runs the unary exchange with stock h2 and with H2State."""
    for state in ("h2", "trio_h2t"):
        proc = script("micro/ceiling.py", "--state", state, "--runs", "1", "--rpcs", "200")
        assert proc.returncode == 0, proc.stderr
        assert "RPCs/s median" in proc.stdout


def test_micro_grpc_server_call_runs_and_both_sides_agree() -> None:
    """micro/grpc_server_call.py --quick runs the split server pieces beside the code
    they replaced, and both give the same results on every case (no timing judged)."""
    proc = script("micro/grpc_server_call.py", "--quick")
    assert proc.returncode == 0, proc.stderr
    for case in ("0 B", "100 B", "100 B + timeout, metadata"):
        assert f"{case:<28} agree" in proc.stdout
    assert "split/before" in proc.stdout


def test_micro_loopy_data_runs_both_writers_and_they_agree() -> None:
    """micro/loopy_data.py runs loopy's DATA path and the plain version on both
    workloads and finds that they put out the same bytes."""
    proc = script("micro/loopy_data.py", "--quick")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = {
        line.split()[0]: line.split("|")
        for line in proc.stdout.splitlines()
        if line.startswith(("quantum ", "grpc "))
    }
    assert sorted(rows) == ["grpc", "quantum"], proc.stdout
    for cells in rows.values():
        assert cells[-1].strip() == "yes", proc.stdout  # the same bytes
        assert float(cells[1]) > 0, proc.stdout  # loopy's µs per op
        assert float(cells[2]) > 0, proc.stdout  # the plain writer's


def test_micro_reader_dispatch_runs_both_designs_and_they_agree() -> None:
    """micro/reader_dispatch.py dispatches a unary call's events and 100 streams' DATA
    through the reader's handler table and through the plain chain, and both leave the
    same stream states (it exits non-zero if they differ)."""
    proc = script("micro/reader_dispatch.py", "--quick")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert [line.split()[0] for line in lines] == ["unary", "data"], proc.stdout
    assert all(line.endswith("results agree") and "table/plain" in line for line in lines)


def test_micro_frames_runs_and_both_codecs_agree() -> None:
    """micro/frames.py parses and serializes both workloads with our codec and with
    hyperframe's, and append_headers against the plain serialize_headers on both
    header workloads; each pair agreed (same frames, same bytes); no timing asserted."""
    proc = script("micro/frames.py", "--rounds", "1", "--reps", "2")
    assert proc.returncode == 0, proc.stderr
    rows = [line for line in proc.stdout.splitlines() if "agree:" in line]
    assert len(rows) == 6, proc.stdout
    assert all(row.endswith("agree: yes") for row in rows), proc.stdout


def test_micro_headers_runs_both_designs_with_the_same_verdicts() -> None:
    """micro/headers.py checks ours and h2's validate_headers chain agree, then times both."""
    proc = script("micro/headers.py", "--ops", "20", "--reps", "1")
    assert proc.returncode == 0, proc.stderr
    assert "same verdicts: yes" in proc.stdout
    assert "h2 / ours" in proc.stdout


def test_micro_streamstates_runs_every_design_with_the_same_outcomes() -> None:
    """micro/streamstates.py checks FastStream, our table and h2's machine agree, then
    times all three."""
    proc = script("micro/streamstates.py", "--ops", "20", "--reps", "1")
    assert proc.returncode == 0, proc.stderr
    assert "same outcomes: yes" in proc.stdout
    assert "h2 / design" in proc.stdout


def test_benchmain_compare_prints_before_after_percentage(tmp_path: Path) -> None:
    """benchmain.py compare matches configurations and prints grpc-go's benchresult rows."""
    base = {"workload": "unary", "network": "memory", "concurrency": 10}
    base |= {"req_size": 0, "resp_size": 0, "python": "3", "h2": "4"}
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    old.write_text(json.dumps([base | {"qps": 100.0}, base | {"qps": 300.0}]))
    new.write_text(json.dumps([base | {"qps": 250.0}]))
    proc = script("benchmain.py", "compare", str(old), str(new))
    assert proc.returncode == 0, proc.stderr
    assert "Unary-network_memory-maxConcurrentCalls_10" in proc.stdout
    assert "(medians of 2 / 1 runs)" in proc.stdout
    qps_row = next(line for line in proc.stdout.splitlines() if line.startswith("QPS"))
    assert qps_row.split() == ["QPS", "200.0", "250.0", "+25.00%"]


def test_grpc_codec_compares_reuse_on_and_off(tmp_path: Path) -> None:
    """benchmarks/grpc_codec.py runs both settings in one run and records every figure."""
    from benchmarks import grpc_codec

    out = tmp_path / "codec.json"
    args = ["--rounds", "1", "--warmup", "0.05", "--duration", "0.3", "--json", str(out)]
    assert grpc_codec.main(args) == 0
    results = json.loads(out.read_text())["results"]
    assert sorted(r["reuse"] for r in results) == [False, True]
    for r in results:
        assert r["ops"] > 0
        assert r["ops_per_s"] > 0
        assert set(r) >= {"allocs_per_op", "bytes_per_op", "tracemalloc_peak"}


def test_grpc_go_without_the_go_commands_names_the_build_script(tmp_path: Path) -> None:
    """benchmarks/grpc_go.py fails, naming the build script, when grpc-go is not on PATH."""
    proc = subprocess.run(
        [sys.executable, str(BENCHMARKS / "grpc_go.py"), "--quick"],
        env=dict(os.environ, PYTHONPATH=str(ROOT), PATH=str(tmp_path)),
        capture_output=True,
        text=True,
        timeout=PROC_TIMEOUT,
        check=False,
    )
    assert proc.returncode == 2
    assert "grpc-go-bench-client, grpc-go-bench-server not on PATH" in proc.stderr
    assert "build-conformance-tools.sh" in proc.stderr


@pytest.mark.parametrize("workload", ["unary", "streaming", "unary_1mib"])
def test_grpc_go_trio_pair_runs_the_benchmark_service(tmp_path: Path, workload: str) -> None:
    """grpc_go.py's trio_h2t client and server speak grpc.testing.BenchmarkService (no grpc-go)."""
    out = tmp_path / "go.json"
    options = ["--workload", workload, "--rounds", "1", "--duration", "1", "--json", str(out)]
    proc = subprocess.run(
        [sys.executable, str(BENCHMARKS / "grpc_go.py"), "--pair", "trio/trio", *options],
        env=dict(os.environ, PYTHONPATH=str(ROOT), PATH=str(tmp_path)),
        capture_output=True,
        text=True,
        timeout=PROC_TIMEOUT,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    (run_,) = json.loads(out.read_text())["runs"]
    assert (run_["pair"], run_["workload"]) == ("trio/trio", workload)
    assert run_["qps"] > 0
    assert 0 < run_["p50_ms"] <= run_["p99_ms"]
    assert 0 < run_["server_cpu_us"] < 100_000
    assert 0 < run_["client_cpu_us"] < 100_000
    assert "load average at start" in proc.stdout


def test_send_allocs_counts_the_send_path_without_a_payload_copy() -> None:
    """benchmarks/send_allocs.py reports each payload kind; a 16 KiB write asks the
    allocators for far fewer bytes than its payload: the send path copies none of it
    (before zero-copy sends, about five copies: 84-117 KB asked per write)."""
    proc = script("send_allocs.py", "--writes", "400", "--warmup", "100", "--size", "16384")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = re.findall(
        r"^(\w+) +16384 B x 400: +([\d.]+) allocations, +([\d.]+) bytes", proc.stdout, re.M
    )
    assert sorted(kind for kind, _, _ in rows) == ["bytearray", "bytes", "memoryview"]
    for kind, allocs, asked in rows:
        assert 0 < float(allocs) < 200, kind
        assert float(asked) < 16384 / 2, f"{kind}: {asked} bytes asked per 16 KiB write"


def test_decoder_with_reuse_asks_for_fewer_bytes() -> None:
    """What grpc_codec.py measures, on the decoder alone: an 8 KiB message fed whole is
    copied once by either decoder; a 64 KiB one in 16 KiB pieces reuses its buffer."""
    from benchmarks.allochook import alloc_counter
    from trio_h2t import grpc

    counter = alloc_counter()
    assert counter.available, counter.why_unavailable  # the dev setup has a C compiler

    def bytes_asked(size: int, piece: int, reuse: bool) -> float:
        wire = grpc.encode_message(b"x" * size)
        pieces = [wire[i : i + piece] for i in range(0, len(wire), piece)]
        decoder = grpc.MessageDecoder(buffer_reuse=reuse)
        for p in pieces:  # the kept buffer is sized here
            decoder.feed(p)
        counter.start()
        for _ in range(50):
            for p in pieces:
                decoder.feed(p)
        counted = counter.stop()
        assert counted is not None
        return counted[1] / 50

    # A chunk that is exactly one message is sliced out once by both decoders.
    assert bytes_asked(8192, 1 << 20, True) < 1.2 * 8192
    assert bytes_asked(8192, 1 << 20, False) < 1.2 * 8192
    assert bytes_asked(65536, 16384, True) < 1.2 * 65536 < bytes_asked(65536, 16384, False)


def test_grpc_icount_objects_measures_layer_and_floor() -> None:
    """grpc_icount.py --objects prints objects per call in flight for the layer and by hand."""
    proc = script("grpc_icount.py", "--objects")
    assert proc.returncode == 0, proc.stderr
    found = re.findall(r"^  (hand-framed|trio_h2t\.grpc) .* ([\d.]+) GC-tracked", proc.stdout, re.M)
    assert [kind for kind, _ in found] == ["hand-framed", "trio_h2t.grpc"]
    assert all(float(per_call) > 0 for _, per_call in found)


# ---------------------------------------------------------------- bulk.py


def test_bulk_moves_checked_bytes_both_ways(tmp_path: Path) -> None:
    """bulk.py moves every byte (CRC-32 checked) over raw sockets and trio_h2t, one
    stream and several, and reports MB/s, CPU per GB and ratios against raw."""
    out = tmp_path / "bulk.json"
    proc = script(
        "bulk.py",
        "--size",
        "2",
        "--rounds",
        "2",
        "--check",
        "crc32",
        "--scenario",
        "1",
        "--scenario",
        "3",
        "--json",
        str(out),
        "--quiet",
    )
    assert proc.returncode == 0, proc.stderr
    results = json.loads(out.read_text())
    assert sorted({(r["impl"], r["streams"]) for r in results}) == [
        ("h2t", 1),
        ("h2t", 3),
        ("raw", 1),
    ]
    assert len(results) == 6  # 2 rounds of 3
    for r in results:
        assert r["size"] == 2 * 1024 * 1024
        assert r["moved"] == 2 * r["size"]
        assert r["mb_s"] > 0
        assert r["client_cpu"] > 0
        assert r["server_cpu"] > 0
    assert "vs raw" in proc.stdout
    assert "CPU s/GB" in proc.stdout
    assert "x [" in proc.stdout  # a ratio with its interval


def test_bulk_checker_catches_wrong_and_missing_bytes() -> None:
    """bulk.py's receiver check fails a body cut short, a misplaced chunk, a bad CRC."""
    from benchmarks import bulk

    pattern = bulk.Pattern(1000)
    body = b"".join(bytes(part) for part in pattern.chunks(5000))
    for mode in ("sample", "crc32"):
        good = bulk.Checker(pattern, 5000, mode)
        for i in range(0, 5000, 700):
            good.feed(body[i : i + 700])
        assert good.verdict() == ""
        short = bulk.Checker(pattern, 5000, mode)
        short.feed(body[:4000])
        assert "received 4000 bytes" in short.verdict()
        shifted = bulk.Checker(pattern, 5000, mode)
        shifted.feed(body[1:2001])
        shifted.feed(body[2000:5000])
        assert shifted.verdict()
    assert bulk.split(10, 3) == [4, 3, 3]


def test_soak_runs_every_operation_without_errors(tmp_path: Path) -> None:
    """soak.py runs its mixed load with connection churn (every operation kind, raw
    and gRPC), samples both processes' memory each second and reports no errors."""
    out = tmp_path / "soak.json"
    proc = script(
        "soak.py",
        "--seconds",
        "4",
        "--concurrency",
        "4",
        "--ops-per-connection",
        "5",
        "--json",
        str(out),
        "--quiet",
        "--max-growth-mb",
        "1000",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(out.read_text())
    summary = result["summary"]
    assert summary["ok"] is True
    assert summary["client_error_count"] == 0
    assert summary["server_error_count"] == 0
    assert set(summary["operations"]) == {
        "unary",
        "stream",
        "large",
        "cancel",
        "reset",
        "grpc-unary",
        "grpc-stream",
    }
    assert all(n > 0 for n in summary["operations"].values())
    assert summary["connections"] > 4  # connections were churned, not one per worker
    assert len(result["samples"]) >= 3
    assert all(s["server_rss"] > 0 and s["client_rss"] > 0 for s in result["samples"])


def test_soak_fails_on_memory_growth_beyond_the_limit() -> None:
    """The verdict compares the fifth after warm-up with the last fifth."""
    from benchmarks import soak

    flat = [soak.Sample(float(t), 100.0, 50 * 2**20, 60 * 2**20) for t in range(20)]
    assert soak.growth(flat, "server", warmup=2) == 0.0
    rising = [soak.Sample(float(t), 100.0, 50 * 2**20, (60 + t) * 2**20) for t in range(20)]
    assert soak.growth(rising, "server", warmup=2) > 10


# ------------------------------------------------------------------ plot_results.py


def test_plot_results_draws_the_documentation_plots(tmp_path: Path) -> None:
    """benchmarks/plot_results.py draws one PNG per plot from the checked-in results
    file, and docs/benchmarks.md embeds each (the checked-in copy exists too)."""
    from benchmarks import plot_results

    proc = script("plot_results.py", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    names = [name for files in plot_results.FILES.values() for name in files]
    page = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    for name in names:
        drawn = tmp_path / name
        assert drawn.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
        assert drawn.stat().st_size > 5_000, name  # bars, axes and text, not a blank
        assert f"(images/benchmarks/{name})" in page, name
        assert (plot_results.OUT / name).is_file(), name
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names)


def test_results_file_says_where_each_block_comes_from() -> None:
    """Each block of benchmarks/results.json is either recorded (``--record``: commit,
    start and end time, command, load) or copied from a dated log in
    benchmarks/results/ that holds its rows figure for figure; docs/benchmarks.md names
    the run each plot shows."""
    results = json.loads((BENCHMARKS / "results.json").read_text(encoding="utf-8"))
    page = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")

    def recorded(run: dict[str, Any]) -> bool:
        return (
            {"commit", "date", "command", "load"} <= set(run)
            and {"start", "end"} <= set(run["date"])
            and str(run["command"]).startswith("python benchmarks/")
        )

    def log_of(source: str) -> str:
        file, _, section = source.partition(", ")
        text = (ROOT / file).read_text(encoding="utf-8")
        assert f"## {section.strip(chr(34))}" in text, source
        return text

    peers = results["grpc_peers"]
    assert recorded(peers), peers.keys()
    assert f"`{peers['commit'].removesuffix('-dirty')}`" in page
    assert peers["date"]["start"][11:19] in page  # the page names the run's time
    assert {r["impl"] for r in peers["rows"]} >= {"trio_h2t", "grpcio"}

    icount = results["grpc_icount"]
    if "source" in icount:
        log = log_of(icount["source"])
        for r in icount["rows"]:
            row = f"| {r['workload']} | {r['floor']:,} | {r['before']:,} | {r['after']:,} |"
            assert row in log, row
    else:
        assert recorded(icount), icount.keys()
        assert f"`{icount['commit'].removesuffix('-dirty')}`" in page
        assert {r["layer_workload"] for r in icount["rows"]} <= {
            "grpc-layer-unary",
            "grpc-layer-streaming",
        }

    bulk = results["bulk"]
    for tree, provenance in bulk["runs"].items():
        if "source" in provenance:
            log = log_of(provenance["source"])
            for r in (r for r in bulk["rows"] if r["tree"] == tree):
                row = (
                    f"| `{r['tree']}` | {r['streams']} | {r['client_cpu_s_per_gb']:.2f} | "
                    f"{r['server_cpu_s_per_gb']:.2f} | {r['frames_per_mib']:.1f} | "
                    f"{r['vs_raw']:.3f}x"
                )
                assert row in log, row
        else:
            assert recorded(provenance), tree


def test_record_writes_a_block_with_its_provenance(tmp_path: Path) -> None:
    """benchmarks/record.py: a block replaced whole, or merged by a row key, with
    commit, times, command and load; NaN becomes null; other blocks are kept."""
    from benchmarks import record

    path = tmp_path / "results.json"
    path.write_text(json.dumps({"other": {"rows": [1]}}), encoding="utf-8")
    started = record.begin([str(BENCHMARKS / "bulk.py"), "--size", "1"])
    assert started["command"] == "python benchmarks/bulk.py --size 1"
    record.record(path, "b", [{"tree": "a", "x": float("nan")}], started, merge_on="tree")
    record.record(path, "b", [{"tree": "c", "x": 1.0}], started, merge_on="tree")
    record.record(path, "b", [{"tree": "a", "x": 2.0}], started, merge_on="tree")
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["other"] == {"rows": [1]}
    assert data["b"]["rows"] == [{"tree": "c", "x": 1.0}, {"tree": "a", "x": 2.0}]
    provenance = data["b"]["runs"]["a"]
    assert provenance["commit"]
    assert provenance["date"]["end"] >= provenance["date"]["start"]
    assert set(provenance["load"]) == {"start", "end"}
    record.record(path, "b", [{"x": float("nan")}], started, rounds=2)
    block = json.loads(path.read_text(encoding="utf-8"))["b"]
    assert block["rows"] == [{"x": None}]
    assert block["rounds"] == 2


@pytest.mark.parametrize("request_first", [False, True], ids=["handshake", "one-get"])
def test_idle_footprint_measures_serve_and_nginx(request_first: bool) -> None:
    """idle_footprint.py opens real idle connections to ``trio-h2t serve`` and nginx
    and reports each server's RSS per connection (serve's 40 connections always touch
    new pages; nginx's 40 may fit in pages it has)."""
    args = ["--connections", "40", "--rounds", "1", "--servers", "serve", "nginx"]
    proc = script("idle_footprint.py", *args, *(["--request"] if request_first else []))
    assert proc.returncode == 0, proc.stderr
    rows = {
        line.split()[0]: float(line.split()[1].removesuffix("KB"))
        for line in proc.stdout.splitlines()
        if line.startswith(("serve ", "nginx "))
    }
    assert set(rows) == {"serve", "nginx"}
    assert rows["serve"] > 0, proc.stdout
    assert rows["nginx"] >= 0, proc.stdout


def test_micro_ceiling_runs_the_correctness_layer_alone() -> None:
    """micro/ceiling.py's ``--state fixes`` runs the exchange on the correctness layer."""
    proc = script("micro/ceiling.py", "--state", "fixes", "--runs", "1", "--rpcs", "200")
    assert proc.returncode == 0, proc.stderr
    assert "ceiling (fixes" in proc.stdout


def test_micro_h2_budget_reports_each_piece_and_the_floors() -> None:
    """micro/h2_budget.py times every public-API piece and sums each side's floor."""
    proc = script("micro/h2_budget.py", "--ops", "200", "--runs", "1")
    assert proc.returncode == 0, proc.stderr
    figures = {
        line.rsplit(None, 2)[0].split("  ")[0]: float(line.split()[-2])
        for line in proc.stdout.splitlines()
        if line.endswith("µs")
    }
    assert len(figures) == 9
    assert all(value > 0 for value in figures.values()), proc.stdout
    assert "floor, client side" in proc.stdout
    assert "floor, server side" in proc.stdout


def test_grpc_balancing_runs_both_channels_and_prints_the_ratio(tmp_path: Path) -> None:
    """grpc_balancing.py runs the one-connection and the round-robin client against its
    three backends, counts their calls and writes, and prints the CPU-per-call ratio."""
    out = tmp_path / "balancing.json"
    options = ["--rounds", "1", "--duration", "0.5", "--warmup", "0.3", "--json", str(out)]
    proc = subprocess.run(
        [sys.executable, str(BENCHMARKS / "grpc_balancing.py"), *options, "--steps"],
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=PROC_TIMEOUT,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    runs = {r["mode"]: r for r in json.loads(out.read_text())["runs"]}
    assert sorted(runs) == ["round_robin", "single"]
    assert runs["single"]["connections"] == 1
    assert runs["round_robin"]["connections"] == 3
    for r in runs.values():
        assert r["errors"] == 0
        assert r["calls"] > 0
        assert 0 < r["cpu_us"] < 100_000
        assert r["writes_per_call"] > 0
        assert r["steps_per_call"] > 1
    assert "client CPU per call" in proc.stdout
    assert "; user " in proc.stdout
    assert "; system " in proc.stdout


def test_grpc_icount_record_rows_pair_each_layer_with_its_floor() -> None:
    """grpc_icount.py --record's rows: one per layer workload measured with its floor,
    with both counts and their ratio; a layer without its floor gives no row."""
    from benchmarks import grpc_icount

    per_op = {
        ("grpc-layer-unary", 100): 1_500_000.4,
        ("grpc-unary", 100): 1_200_000.0,
        ("grpc-layer-streaming", 100): 500_000.0,
    }
    assert grpc_icount.record_rows(per_op, 200) == [
        {
            "workload": "unary, c=100 (200 vs 1000)",
            "layer_workload": "grpc-layer-unary",
            "floor_workload": "grpc-unary",
            "concurrency": 100,
            "floor": 1_200_000,
            "layer": 1_500_000,
            "ratio": 1.25,
        }
    ]


#: A citation of a dated log's section: ``benchmarks/results/DAY.md``, then "section"
#: (a heading or a bold paragraph's title of that file; the quotes may wrap a line).
_LOG_CITATION = re.compile(
    r"benchmarks/results/(\d{4}-\d{2}-\d{2}\.md)`*[,;]?\s*(?:#\s*)?\(?\"([^\"]+)\"", re.S
)


def _log_titles(text: str) -> list[str]:
    """The section headings and bold paragraph titles of a log, backticks dropped."""
    titles = re.findall(r"(?m)^#{2,4} (.+)$", text) + re.findall(r"(?m)^\*\*(.+?)\*\*", text)
    return [t.replace("`", "") for t in titles]


def test_citations_of_dated_logs_name_their_sections() -> None:
    """Every ``benchmarks/results/DAY.md, "section"`` in the code, tests, docs and
    benchmarks names a heading (or bold paragraph) that file has: a moved or renamed
    section fails here instead of leaving its citations pointing at nothing."""
    found = 0
    wrong = []
    for top in ("trio_h2t", "tests", "docs", "benchmarks", "scripts", "README.md"):
        for path in [ROOT / top] if top.endswith(".md") else sorted((ROOT / top).rglob("*")):
            if path.suffix not in {".py", ".md", ".sh"} or ".venv" in path.parts:
                continue
            text = path.read_text(encoding="utf-8")
            for match in _LOG_CITATION.finditer(text):
                log = BENCHMARKS / "results" / match.group(1)
                # A quote wrapped across comment lines: drop the comment marks.
                quoted = re.sub(r"\n\s*#", " ", match.group(2)).replace("`", "")
                section = " ".join(quoted.split())
                section = section.removesuffix("...").strip()
                found += 1
                titles = _log_titles(log.read_text(encoding="utf-8")) if log.is_file() else []
                if not any(" ".join(t.split()).startswith(section) for t in titles):
                    wrong.append(f"{path.relative_to(ROOT)}: {match.group(1)}, {section!r}")
    assert found >= 10, found  # the citations exist: an empty scan is no pass
    assert not wrong, wrong
