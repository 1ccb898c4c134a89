"""docs/grpc.md's tutorial, as written there: its ``.proto``, its protoc command and
its program (a ``py`` block, which tests/test_doc_samples.py does not run because it
needs generated code) are taken from the page, generated into tmp_path and run."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from .stubgen import ROOT, protoc, write_launcher

PAGE = ROOT / "docs" / "grpc.md"


def _block(lang: str, containing: str) -> str:
    blocks = re.findall(rf"^```{lang}\n(.*?)^```", PAGE.read_text(), re.S | re.M)
    found = [b for b in blocks if containing in b]
    assert len(found) == 1, (lang, containing, len(found))
    return str(found[0])


def test_tutorial_generates_and_runs(tmp_path: Path) -> None:
    """The tutorial's proto, command and program work together and print what it says."""
    (tmp_path / "hello.proto").write_text(_block("proto", "service Greeter"))
    command = shlex.split(_block("sh", "--trio_h2t_out").strip())
    assert command[:3] == ["python", "-m", "grpc_tools.protoc"]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    write_launcher(bin_dir)
    result = protoc(command[3:], path_dir=bin_dir, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "hello_trio_h2t.py").exists()
    (tmp_path / "tutorial.py").write_text(_block("py", "GreeterStub"))
    result = subprocess.run(
        [sys.executable, "tutorial.py"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines() == [
        "hello trio",
        "['hello you #0', 'hello you #1', 'hello you #2']",
    ]
