"""Small helpers shared by several modules."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any, NoReturn, TypeVar

import trio

__all__ = [
    "ALPN_H2",
    "NoPublicConstructor",
    "fixup_module_metadata",
    "require_trio",
    "unwrap_single",
]

T = TypeVar("T")

#: The one application protocol HTTP/2 over TLS selects, on both sides
#: (RFC 9113 §3.2; RFC 7301 ALPN).
ALPN_H2 = "h2"


def require_trio(what: str) -> None:
    """Raise a RuntimeError naming the fix when no Trio run is active in this thread.

    Without it, an entry point awaited from ``asyncio.run`` fails deep inside trio
    ("must be called from async context", or an AttributeError on trio's run state).
    """
    try:
        trio.lowlevel.current_task()
    except RuntimeError:
        raise RuntimeError(
            f"{what} must run inside trio.run(): trio_h2t is Trio-only and no Trio run is "
            "active in this thread (asyncio.run() cannot drive it)"
        ) from None


@contextlib.asynccontextmanager
async def unwrap_single() -> AsyncIterator[None]:
    """Re-raise the only exception of an ExceptionGroup leaving the block, as itself.

    A connection's nursery wraps the user's exception in an ExceptionGroup (strict
    groups); when it is the only one, the user gets their own exception back.
    """
    try:
        yield
    except BaseExceptionGroup as group:
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from group.exceptions[0].__cause__
        raise


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
