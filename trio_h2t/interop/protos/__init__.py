"""The ``grpc.testing`` protos and their generated modules (``scripts/gen_interop_protos.py``)."""

__all__: list[str] = []
