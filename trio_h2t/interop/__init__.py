"""The standard gRPC interop service and client on trio_h2t.grpc.

``grpc.testing.TestService`` (``protos/test.proto``, wire-compatible with grpc/grpc
``src/proto/grpc/testing/test.proto``) and the test cases of grpc/grpc
``doc/interop-test-descriptions.md``, with that document's flag names:

    python -m trio_h2t.interop.server --port 8080
    python -m trio_h2t.interop.client --server_host 127.0.0.1 --server_port 8080 --test_case all

- ``server.py``: :class:`~trio_h2t.interop.server.TestService` (EmptyCall, UnaryCall,
  StreamingOutputCall, StreamingInputCall, FullDuplexCall, HalfDuplexCall; the
  CompressedRequest, CompressedResponse, Echo Status and Echo Metadata features).
- ``client.py``: one coroutine per case in ``CASES``, run against a ``Channel``.
- ``protos/``: the ``.proto`` files and their generated ``_pb2`` modules (shipped;
  regenerate with ``scripts/gen_interop_protos.py``). Needs ``protobuf``.

Only trio_h2t's and trio_h2t.grpc's public names are used, and trio_h2t/_shared.py's
plain helpers (the missing-extra message; the commands' exits unwrap a nursery's
groups of one with its ``only_exception``).
"""

from trio_h2t._shared import require_extra

require_extra("google.protobuf", extra="interop", needed_by="trio_h2t.interop")

__all__: list[str] = []  # the modules are the API: server.py, client.py
