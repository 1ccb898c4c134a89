"""Serializers: how a message object becomes bytes and back (sans-IO).

A method has a request serializer and a response deserializer on the client (the
reverse on the server). The default passes ``bytes`` through; protobuf messages
work with ``Message.SerializeToString`` and ``Message.FromString``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeAlias

__all__ = ["Deserializer", "Serializer", "identity_deserializer", "identity_serializer"]

Serializer: TypeAlias = Callable[[Any], bytes]
Deserializer: TypeAlias = Callable[[bytes], Any]


def identity_serializer(message: Any) -> bytes:
    """The default serializer: the message must already be bytes-like."""
    if isinstance(message, bytes):
        return message
    if isinstance(message, bytearray | memoryview):
        return bytes(message)
    raise TypeError(
        f"without a serializer a message must be bytes, not {type(message).__name__}"
        " (pass request_serializer= / response_serializer=, e.g. Msg.SerializeToString)"
    )


def identity_deserializer(payload: bytes) -> bytes:
    """The default deserializer: the payload as bytes."""
    return payload
