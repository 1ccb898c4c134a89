"""Small helpers of the gRPC layer (its own: it imports no private transport module)."""

from __future__ import annotations

from typing import Any, NoReturn, TypeVar

__all__ = ["NoPublicConstructor", "check_bool", "check_size"]

T = TypeVar("T")


class NoPublicConstructor(type):
    """Metaclass: ``Cls(...)`` raises; the library builds instances with ``Cls._create``
    (as trio's, and ``trio_h2t``'s own, for objects only a factory may make)."""

    def __call__(cls, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError(f"{cls.__module__}.{cls.__qualname__} has no public constructor")

    def _create(cls: type[T], *args: Any, **kwargs: Any) -> T:
        return super().__call__(*args, **kwargs)  # type: ignore[misc, no-any-return]


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
