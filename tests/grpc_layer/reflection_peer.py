"""grpcio-reflection's client against a reflection server, for ``test_reflection.py``.

``python reflection_peer.py PORT METHOD...`` connects a grpcio channel to
127.0.0.1:PORT, builds a ``DescriptorPool`` over grpcio-reflection's
``ProtoReflectionDescriptorDatabase`` (``grpc.reflection.v1alpha``) and prints one
JSON object: ``services`` (list_services), ``inputs`` (each METHOD's input type,
``package.Service.Method``), ``files`` (the file declaring each METHOD's service),
``missing`` (whether an unknown symbol raised KeyError, the database's NOT_FOUND).
"""

from __future__ import annotations

import json
import sys

import grpc
from google.protobuf.descriptor_pool import DescriptorPool
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)


def main() -> None:
    port, methods = sys.argv[1], sys.argv[2:]
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        grpc.channel_ready_future(channel).result(timeout=20)
        db = ProtoReflectionDescriptorDatabase(channel)
        pool = DescriptorPool(db)
        out: dict[str, object] = {"services": sorted(db.get_services())}
        out["inputs"] = [pool.FindMethodByName(m).input_type.full_name for m in methods]
        out["files"] = [db.FindFileContainingSymbol(m.rsplit(".", 1)[0]).name for m in methods]
        try:
            db.FindFileContainingSymbol("no.such.Thing")
        except KeyError:
            out["missing"] = True
        else:
            out["missing"] = False
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
