"""Run protoc with protoc-gen-trio_h2t (and grpcio's generator) into a directory.

protoc finds the plugin on PATH, as it finds any ``protoc-gen-NAME``: here a
launcher named ``protoc-gen-trio_h2t`` that runs this checkout's
``trio_h2t.grpc._protoc_plugin`` (what the installed console script does).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import trio_h2t

ROOT = Path(trio_h2t.__file__).resolve().parent.parent
PROTOS = Path(__file__).with_name("protos")


def write_launcher(directory: Path) -> Path:
    """An executable ``protoc-gen-trio_h2t`` in ``directory``."""
    launcher = directory / "protoc-gen-trio_h2t"
    launcher.write_text(
        f"#!{sys.executable}\n"
        "import sys\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from trio_h2t.grpc._protoc_plugin import main\n"
        "main()\n"
    )
    launcher.chmod(0o755)
    return launcher


def protoc(args: list[str], *, path_dir: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python -m grpc_tools.protoc ARGS`` with ``path_dir`` first on PATH."""
    env = {**os.environ, "PATH": f"{path_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def generate(out: Path, proto: str = "routes.proto", *, protos: Path = PROTOS) -> None:
    """Into ``out``: NAME_pb2.py and .pyi (protoc), NAME_trio_h2t.py (our plugin) and
    NAME_pb2_grpc.py (grpcio's generator)."""
    bin_dir = out / "bin"
    bin_dir.mkdir(exist_ok=True)
    write_launcher(bin_dir)
    flags = [f"--python_out={out}", f"--pyi_out={out}", f"--grpc_python_out={out}"]
    result = protoc(["-I.", *flags, f"--trio_h2t_out={out}", proto], path_dir=bin_dir, cwd=protos)
    assert result.returncode == 0, result.stderr
