"""Small helpers shared by several modules."""

from __future__ import annotations

import contextlib
from typing import Any, NoReturn, TypeVar

__all__ = ["NoPublicConstructor", "fixup_module_metadata"]

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
