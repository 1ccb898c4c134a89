"""Vendored .proto files and their generated protobuf modules (``scripts/gen_health.py``)."""

__all__: list[str] = []
