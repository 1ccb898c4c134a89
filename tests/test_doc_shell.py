"""Every shell block of README.md and docs/ runs in the suite (issue 28).

A shell block is a fence marked ``sh``, ``bash``, ``shell`` or ``console``. Each is
named by its page and its first line (so a block moved on its page keeps its name)
and has an entry in :data:`RUNS` saying how it runs; a block without one fails
``test_every_shell_block_has_a_run``, named, and so does an entry whose block is gone.

How they run (the convention):

- ``fresh-venv``: README's set-up commands, the docs build and the plot command,
  verbatim with ``bash`` in a copy of the tree, in the order a reader follows them
  (the first creates ``.venv`` there: a fresh virtual environment); the copy's
  ``.venv/bin`` leads ``PATH`` for the bare ``pip`` / ``python`` of a page.
- ``ci``: ``bash scripts/run-tests`` *is* the suite: checked to be what ``.ci/run``
  runs (running the suite inside itself would recurse).
- ``here``: run by a test below, verbatim but for the port (a free one for 8080 /
  8443) against a server the test starts on 127.0.0.1 and stops; output a comment
  or the page promises is compared.
- ``by <test>``: a test elsewhere takes the block from the page and runs it; checked
  to exist and to read the block.

The long ones are ``@pytest.mark.slow``: ``scripts/run-tests`` (which ``.ci/run``
runs) selects every test, slow included.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from _helpers_common import free_port, running, write_certificate

ROOT = Path(__file__).resolve().parent.parent
_SHELL = re.compile(r"^```(?:sh|bash|shell|console)\n(.*?)^```", re.S | re.M)
BIN = str(Path(sys.executable).parent)  # this venv's bin: trio-h2t, python, pip


def shell_blocks(root: Path = ROOT) -> dict[str, str]:
    """``{"page: the first 60 characters of its first line": block}``, every shell
    block of README.md and docs/."""
    found: dict[str, str] = {}
    for page in [root / "README.md", *sorted((root / "docs").glob("**/*.md"))]:
        for match in _SHELL.finditer(page.read_text(encoding="utf-8")):
            block = match.group(1)
            first = " ".join(block.splitlines()[0].partition("  #")[0].split())[:60]
            found[f"{page.relative_to(root)}: {first}"] = block
    return found


README_VENV = "README.md: python3 -m venv .venv && .venv/bin/pip install -q -e . && .v"
README_DOCS = 'README.md: .venv/bin/pip install -q -e ".[docs]" && .venv/bin/python -m'
PLOT = "docs/benchmarks.md: python benchmarks/plot_results.py"
RECORD = "docs/benchmarks.md: pip install -e '.[bench]'"
RUN_TESTS = "README.md: bash scripts/run-tests"
PROTOC = "docs/grpc.md: python -m grpc_tools.protoc -I. --python_out=. --pyi_out=. -"
INTEROP = "docs/grpc.md: python -m trio_h2t.interop.server --port 8080"
BULK = "docs/security.md: .venv/bin/python benchmarks/bulk.py --size 64 --direction do"
CHECK = "docs/testing.md: trio-h2t check http://127.0.0.1:8080/"
PROTOC_NO_PATH = "docs/api-grpc.md: .venv/bin/python -m grpc_tools.protoc -I. --python_out=. --p"

#: How each block runs (see the module doc).
RUNS: dict[str, str] = {
    README_VENV: "fresh-venv",
    README_DOCS: "fresh-venv",
    PLOT: "fresh-venv",
    RECORD: "here: test_record_block_runs",
    RUN_TESTS: "ci",
    PROTOC: "by tests/grpc_layer/test_doc_tutorial.py::test_tutorial_generates_and_runs",
    INTEROP: "here: test_interop_block_runs",
    BULK: "here: test_bulk_block_runs",
    CHECK: "here: test_check_block_runs",
    PROTOC_NO_PATH: "here: test_protoc_block_finds_the_plugin_without_the_venv_on_path",
}

BLOCKS = shell_blocks()


def test_every_shell_block_has_a_run() -> None:
    """Each shell block of the pages has an entry in RUNS (a new one fails, named)."""
    missing = sorted(set(BLOCKS) - set(RUNS))
    assert not missing, f"shell blocks with no entry in {__file__}'s RUNS: {missing}"
    stale = sorted(set(RUNS) - set(BLOCKS))
    assert not stale, f"RUNS entries whose block is no longer on its page: {stale}"


def test_here_entries_name_tests_of_this_file() -> None:
    """A ``here`` entry names a test of this file; a ``by`` entry a test that reads the
    block from its page."""
    for how in RUNS.values():
        if how.startswith("here: "):
            assert callable(globals().get(how.removeprefix("here: "))), how
        elif how.startswith("by "):
            path, _, name = how.removeprefix("by ").partition("::")
            source = (ROOT / path).read_text()
            assert f"def {name}(" in source, how
            assert '_block("sh", "--trio_h2t_out")' in source, how


def test_run_tests_is_what_ci_runs() -> None:
    """README's test command is the one .ci/run runs, and it runs pytest."""
    assert BLOCKS[RUN_TESTS].strip() == "bash scripts/run-tests"
    assert "bash scripts/run-tests\n" in (ROOT / ".ci/run").read_text()
    assert '.venv/bin/python -m pytest "$@"' in (ROOT / "scripts/run-tests").read_text()


def _copy_tree(to: Path) -> Path:
    """The tree as committed (git's files, or the working files without venvs)."""
    tree = to / "tree"
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=False, timeout=30
    )
    if listed.returncode == 0 and listed.stdout:
        for name in listed.stdout.decode().split("\0"):
            if name and (ROOT / name).is_file():
                (tree / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(ROOT / name, tree / name)
    else:
        shutil.copytree(
            ROOT, tree, ignore=shutil.ignore_patterns(".venv*", ".git", "_build", "__pycache__")
        )
    return tree


def _bash(block: str, cwd: Path, timeout: float) -> str:
    env = {**os.environ, "PATH": f"{cwd / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    env.pop("PYTHONPATH", None)  # the fresh venv's own install, not this tree
    env.pop("VIRTUAL_ENV", None)
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert result.returncode == 0, f"{block}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result.stdout


@pytest.mark.slow
def test_readme_set_up_in_a_fresh_venv(tmp_path: Path) -> None:
    """README's set-up command (a fresh .venv, the install, the benchmark: it prints
    QPS, latency percentiles and loopy's frames per write), then its docs build, then
    docs/benchmarks.md's plot command, each as written, in a copy of the tree."""
    tree = _copy_tree(tmp_path)
    assert not (tree / ".venv").exists()
    out = _bash(BLOCKS[README_VENV], tree, timeout=600)
    for promised in ("QPS:", "50_Latency:", "99_Latency:", "loopy frames per send_all:"):
        assert promised in out, out
    _bash(BLOCKS[README_DOCS], tree, timeout=900)
    assert (tree / "docs/_build/html/index.html").is_file()
    images = tree / "docs/images/benchmarks"
    before = {p.name: p.stat().st_mtime_ns for p in images.glob("*.png")}
    _bash(BLOCKS[PLOT], tree, timeout=600)
    after = {p.name: p.stat().st_mtime_ns for p in images.glob("*.png")}
    assert after, "the plot command wrote no PNG"
    assert any(after[name] != before.get(name) for name in after), "no PNG was rewritten"


@pytest.mark.slow
def test_record_block_runs(tmp_path: Path) -> None:
    """docs/benchmarks.md's record command, short, with the peers this venv has
    (trio_h2t and grpcio; the ``bench`` extra adds grpclib), into a copy of the
    results file: the block the plots are drawn from gets this run's provenance."""
    lines = BLOCKS[RECORD].splitlines()
    assert lines[0].split("#")[0].split() == ["pip", "install", "-e", "'.[bench]'"]
    command = lines[1].split("#")[0].split()
    assert command == ["python", "benchmarks/peers/grpc_peers.py", "--record"]
    results = tmp_path / "results.json"
    shutil.copy2(ROOT / "benchmarks" / "results.json", results)
    short = ["--preset", "w1", "--impl", "trio_h2t", "--impl", "grpcio", "--rounds", "1"]
    short += ["--duration", "0.5", "--warmup", "0.2", "--plot", ""]
    _run([sys.executable, command[1], "--record", str(results), *short], timeout=300)
    block = json.loads(results.read_text(encoding="utf-8"))["grpc_peers"]
    assert block["command"].startswith("python benchmarks/peers/grpc_peers.py --record")
    assert {row["impl"] for row in block["rows"]} == {"trio_h2t", "grpcio"}


def _run(command: list[str], *, cwd: Path = ROOT, timeout: float = 120) -> str:
    """Run ``command`` (this venv first on PATH, this tree importable); it must exit 0;
    its output."""
    result = subprocess.run(
        command, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout, check=False
    )
    assert result.returncode == 0, f"{command}\n{result.stdout}\n{result.stderr}"
    return result.stdout


def _env() -> dict[str, str]:
    return {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(ROOT),
    }


def _lines(block: str) -> list[str]:
    """The block's commands, continuation lines joined."""
    return [line for line in block.replace("\\\n", " ").splitlines() if line.strip()]


def test_interop_block_runs() -> None:
    """docs/grpc.md's interop pair: the server prints "listening on port N", the
    client prints ``PASS name`` per case and ``N passed, 0 failed``, and exits 0."""
    server_line, client_line = _lines(BLOCKS[INTEROP])
    port = str(free_port())
    command, _, comment = server_line.partition("#")
    promised = re.search(r'prints "(.*)"', comment)
    assert promised is not None
    server = shlex.split(command.replace("8080", port))
    with running(server, ready="listening", cwd=ROOT, env=_env()) as (_, line):
        assert line.strip() == promised.group(1).replace("8080", port)
        out = _run(shlex.split(client_line.replace("8080", port)))
    assert re.search(r"^\d+ passed, 0 failed$", out, re.M), out
    assert re.search(r"^PASS \w+", out, re.M), out


@pytest.mark.slow
def test_bulk_block_runs() -> None:
    """docs/security.md's bulk.py command runs as written and prints a row per impl."""
    block = BLOCKS[BULK].replace(".venv/bin/python", sys.executable)
    out = _run(["bash", "-c", block], timeout=300)
    for size in ("4194304", "1048576", "262144", "65535"):
        assert f"h2t:max_unread_bytes={size}" in out, out


#: The check lines run verbatim but for the port, and the third's budget: it is the
#: first with ``--max-examples 200 --seconds 600`` (three minutes here), run with
#: ``--seconds 20`` so the flags are parsed and honoured within the suite's time. The
#: fifth (``--replay`` of a finding file) needs a finding: a broken server's, which
#: tests/test_check_cli.py::test_check_catches_a_broken_server makes and replays.
CHECK_SUBSTITUTIONS = {"--seconds 600": "--seconds 20"}


@pytest.mark.slow
def test_check_block_runs(tmp_path: Path) -> None:
    """docs/testing.md's ``trio-h2t check`` lines against ``trio-h2t serve`` (h2c, and
    TLS with a test CA's certificate): each finds no property broken and exits 0."""
    lines = _lines(BLOCKS[CHECK])
    assert len(lines) == 5
    assert "--replay" in lines[4]
    source = (ROOT / "tests/test_check_cli.py").read_text()
    assert "def test_check_catches_a_broken_server(" in source
    assert '"--replay"' in source
    certfile, keyfile = write_certificate(tmp_path)
    (tmp_path / "index.html").write_text("hi\n")
    plain, tls = str(free_port()), str(free_port())
    serve = [sys.executable, "-m", "trio_h2t", "serve", "--root", str(tmp_path)]
    tls_args = ["--certfile", str(certfile), "--keyfile", str(keyfile)]
    with (
        running([*serve, "--port", plain], ready="serving on", env=_env()),
        running([*serve, "--port", tls, *tls_args], ready="serving on", env=_env()),
    ):
        for line in lines[:4]:
            command = line.partition("  #")[0].replace("8080", plain).replace("8443", tls)
            for old, new in CHECK_SUBSTITUTIONS.items():
                command = command.replace(old, new)
            out = _run(shlex.split(command), cwd=tmp_path, timeout=300)
            assert "no property broken" in out, out


def test_protoc_block_finds_the_plugin_without_the_venv_on_path(tmp_path: Path) -> None:
    """docs/api-grpc.md's protoc command, with ``PATH`` holding no venv (only the
    system's ``/usr/bin:/bin``), generates the stubs of docs/grpc.md's hello.proto:
    ``--plugin=`` names ``protoc-gen-trio_h2t`` in this venv's bin."""
    proto = re.findall(r"^```proto\n(.*?)^```", (ROOT / "docs/grpc.md").read_text(), re.S | re.M)
    (tmp_path / "hello.proto").write_text(next(p for p in proto if "service Greeter" in p))
    command = BLOCKS[PROTOC_NO_PATH].replace("\\\n", " ").replace(".venv/bin/", BIN + "/")
    plugin = Path(BIN) / "protoc-gen-trio_h2t"
    assert plugin.exists(), f"{plugin}: the project is not installed in this venv"
    result = subprocess.run(
        shlex.split(command),
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    generated = (tmp_path / "hello_trio_h2t.py").read_text()
    assert "class GreeterStub" in generated
