"""Small helpers shared by several modules."""

from __future__ import annotations

import contextlib
from typing import Any, NoReturn, TypeVar

import trio

__all__ = ["LazyParkingLot", "NoPublicConstructor", "fixup_module_metadata"]

T = TypeVar("T")


class NoPublicConstructor(type):
    """Metaclass: ``Cls(...)`` raises; the library builds instances with ``Cls._create``."""

    def __call__(cls, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError(f"{cls.__module__}.{cls.__qualname__} has no public constructor")

    def _create(cls: type[T], *args: Any, **kwargs: Any) -> T:
        return super().__call__(*args, **kwargs)  # type: ignore[misc, no-any-return]


def fixup_module_metadata(module_name: str, namespace: dict[str, Any]) -> None:
    """Make public names report ``module_name`` as their module (as trio does)."""
    for name in namespace.get("__all__", ()):
        obj = namespace[name]
        if getattr(obj, "__module__", "").startswith("trio_h2t."):
            with contextlib.suppress(AttributeError, TypeError):
                obj.__module__ = module_name


class LazyParkingLot:
    """A ``trio.lowlevel.ParkingLot`` built on the first ``park``.

    Every stream has two lots (its task waiting to receive, and waiting for write
    quota) and most streams never park in either: this saves building both per
    stream. Same semantics as the lot for the methods it has.
    """

    __slots__ = ("_lot",)

    def __init__(self) -> None:
        self._lot: trio.lowlevel.ParkingLot | None = None

    def __bool__(self) -> bool:
        """True if a task is parked."""
        return bool(self._lot)

    async def park(self) -> None:
        """Park the current task until unparked. Checkpoint: always (it blocks)."""
        lot = self._lot
        if lot is None:
            lot = self._lot = trio.lowlevel.ParkingLot()
        await lot.park()

    def unpark_all(self) -> None:
        """Wake every parked task."""
        if self._lot:
            self._lot.unpark_all()
