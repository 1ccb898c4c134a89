"""Regenerate trio_h2t/grpc/protos/*_pb2.py and .pyi from the vendored protos.

Run from the repository root: ``python scripts/gen_health.py`` (needs grpcio-tools).
It writes ``health_pb2`` (``grpc/health/v1/health.proto``), ``reflection_v1_pb2`` and
``reflection_v1alpha_pb2`` (``grpc/reflection/{v1,v1alpha}/reflection.proto``).
The generated files are committed; tests/grpc_layer/test_health.py and
test_reflection.py check that they match a fresh generation. Each descriptor goes
into a private ``DescriptorPool`` (the one edit made to protoc's output), not the
default pool: grpcio-health-checking and grpcio-reflection register the same
``grpc.health.v1`` and ``grpc.reflection.v1alpha`` names in the default pool, and a
process may import both. The wire format is the same either way. The gencode is
protobuf 7.x (the runtime pinned in pyproject.toml).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
PROTOS = ROOT / "trio_h2t" / "grpc" / "protos"
DEFAULT_POOL = "_descriptor_pool.Default().AddSerializedFile("
PRIVATE_POOL = "_descriptor_pool.DescriptorPool().AddSerializedFile("
#: The vendored .proto (under PROTOS) -> the module name its output is committed as.
MODULES = {
    "grpc/health/v1/health.proto": "health_pb2",
    "grpc/reflection/v1/reflection.proto": "reflection_v1_pb2",
    "grpc/reflection/v1alpha/reflection.proto": "reflection_v1alpha_pb2",
}


def generate(into: Path) -> None:
    """Write each of MODULES' .py and .pyi into ``into``."""
    for proto, module in MODULES.items():
        with tempfile.TemporaryDirectory() as tmp:
            args = ["protoc", f"-I{PROTOS}", f"--python_out={tmp}", f"--pyi_out={tmp}"]
            if protoc.main([*args, proto]) != 0:
                raise SystemExit(f"protoc failed on {proto}")
            out = Path(tmp, proto).with_suffix("")
            out = out.with_name(out.name + "_pb2")
            shutil.copy(out.with_suffix(".pyi"), Path(into, module + ".pyi"))
            text = out.with_suffix(".py").read_text()
            private = text.replace(DEFAULT_POOL, PRIVATE_POOL)
            if private.count(PRIVATE_POOL) != 1:
                raise SystemExit("protoc's output no longer has one default-pool registration")
            Path(into, module + ".py").write_text(private)


if __name__ == "__main__":
    generate(Path(sys.argv[1]) if len(sys.argv) > 1 else PROTOS)
