"""Regenerate trio_h2t/grpc/protos/health_pb2.py and .pyi from the vendored proto.

Run from the repository root: ``python scripts/gen_health.py`` (needs grpcio-tools).
The generated files are committed; tests/grpc_layer/test_health.py checks that they
match a fresh generation. The descriptor goes into a private ``DescriptorPool``
(the one edit made to protoc's output), not the default pool: grpcio-health-checking
registers the same ``grpc.health.v1`` names in the default pool, and a process may
import both. The wire format is the same either way. The gencode is protobuf 7.x
(the runtime pinned in pyproject.toml).
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


def generate(into: Path) -> None:
    """Write health_pb2.py and health_pb2.pyi into ``into``."""
    with tempfile.TemporaryDirectory() as tmp:
        args = ["protoc", f"-I{PROTOS}", f"--python_out={tmp}", f"--pyi_out={tmp}"]
        if protoc.main([*args, "grpc/health/v1/health.proto"]) != 0:
            raise SystemExit("protoc failed")
        shutil.copy(Path(tmp, "grpc/health/v1", "health_pb2.pyi"), into)
        text = Path(tmp, "grpc/health/v1", "health_pb2.py").read_text()
        private = text.replace(DEFAULT_POOL, PRIVATE_POOL)
        if private.count(PRIVATE_POOL) != 1:
            raise SystemExit("protoc's output no longer has one default-pool registration")
        Path(into, "health_pb2.py").write_text(private)


if __name__ == "__main__":
    generate(Path(sys.argv[1]) if len(sys.argv) > 1 else PROTOS)
