"""Small helpers of the gRPC layer. ``AsyncWithOnly`` and ``NoPublicConstructor`` are
``trio_h2t/_shared.py``'s (the one private transport module the layer may import:
dependency-free, no transport state)."""

from __future__ import annotations

from trio_h2t._shared import (
    AsyncWithOnly as AsyncWithOnly,
    NoPublicConstructor as NoPublicConstructor,
)

__all__ = ["AsyncWithOnly", "NoPublicConstructor", "check_bool", "check_size"]


def check_size(value: object, name: str) -> int | None:
    """``value`` as a message size limit: None (no limit) or an int >= 0.

    Raises, at once, so a wrong option fails where it is written rather than on the
    first call: TypeError for a bool or a non-int, ValueError for a negative int.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int (bytes) or None, not {type(value).__name__}")
    if value < 0:
        raise ValueError(f"{name} must be >= 0 (bytes) or None for no limit, not {value}")
    return value


def check_bool(value: object, name: str) -> bool:
    """``value`` if it is a bool; TypeError otherwise (``"yes"`` is not True)."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, not {type(value).__name__}")
    return value
