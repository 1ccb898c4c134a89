"""Plain helpers that the transport, the gRPC layer, the kit and the commands share.

One module on purpose, so that each is written once (issue 28 found them copied):
:class:`NoPublicConstructor`, :class:`AsyncWithOnly`, the one-exception-group
unwrapping (:func:`only_exception`, :func:`unwrap_single`) and the missing-extra
message (:func:`require_extra`).

It depends on the standard library alone and holds no transport state, which is why
``trio_h2t/grpc`` may import it although it imports no other private transport
module (the one exception ``tests/grpc_layer/test_wire.py`` allows, and checks).
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator, Coroutine
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from types import TracebackType
from typing import Any, NoReturn, TypeVar, final

__all__ = [
    "AsyncWithOnly",
    "NoPublicConstructor",
    "only_exception",
    "require_extra",
    "unwrap_single",
]

T = TypeVar("T")


class NoPublicConstructor(type):
    """Metaclass: ``Cls(...)`` raises; the library builds instances with ``Cls._create``
    (as trio's, for objects only a factory may make)."""

    def __call__(cls, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError(f"{cls.__module__}.{cls.__qualname__} has no public constructor")

    def _create(cls: type[T], *args: Any, **kwargs: Any) -> T:
        return super().__call__(*args, **kwargs)  # type: ignore[misc, no-any-return]


def only_exception(exc: BaseException) -> BaseException:
    """``exc`` out of the groups of one that wrap it (however deeply nested), or the
    first group that holds several (trio's strict groups wrap a task's error once
    per nursery)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


@asynccontextmanager
async def unwrap_single() -> AsyncIterator[None]:
    """Re-raise the only exception of an ExceptionGroup leaving the block, as itself.

    A nursery wraps the user's exception in an ExceptionGroup (strict groups); when it
    is the only one, the user gets their own exception back.
    """
    try:
        yield
    except BaseExceptionGroup as group:
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from group.exceptions[0].__cause__
        raise


def require_extra(module: str, *, extra: str, needed_by: str) -> None:
    """Import ``module``; if it is missing, raise ModuleNotFoundError naming the extra
    that installs it (``pip install 'trio_h2t[extra]'``) and what needs it."""
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as exc:
        raise ModuleNotFoundError(
            f"{needed_by} needs {module} ({exc}): install trio_h2t's {extra!r} extra,"
            f" pip install 'trio_h2t[{extra}]'",
            name=exc.name,
        ) from exc


@final
class AsyncWithOnly(AbstractAsyncContextManager[T]):
    """An async context manager (``inner``) that names the fix when it is used as
    something else: awaited, iterated, entered with ``with``, or read as the object
    its block gives (``server = open_server(...)`` then ``server.port``).

    Python's own errors there name ``_AsyncGeneratorContextManager`` and not what to
    write. ``name`` says what was called, ``usage`` the statement to write. Entering
    and leaving are ``inner``'s, unchanged (``__aenter__`` returns ``inner``'s
    coroutine). Owner: the task that enters it.
    """

    __slots__ = ("_entered", "_inner", "_name", "_usage")

    def __init__(self, inner: AbstractAsyncContextManager[T], name: str, usage: str) -> None:
        self._inner = inner  # immutable after init
        self._name = name  # immutable after init
        self._usage = usage  # immutable after init
        self._entered = False  # owner: the task that enters it (set once)

    def __aenter__(self) -> Coroutine[Any, Any, T]:
        if self._entered:
            raise RuntimeError(
                f"this {self._name} was entered already: each `async with` needs a new"
                f" call (`{self._usage}`)"
            )
        self._entered = True
        return self._inner.__aenter__()

    def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> Coroutine[Any, Any, bool | None]:
        return self._inner.__aexit__(exc_type, exc, tb)

    def _misuse(self, what: str) -> TypeError:
        return TypeError(
            f"{self._name} {what}: it is an async context manager; write `{self._usage}`"
        )

    def __await__(self) -> NoReturn:
        raise self._misuse("cannot be awaited")

    def __aiter__(self) -> NoReturn:
        raise self._misuse("cannot be iterated")

    def __enter__(self) -> NoReturn:
        raise self._misuse("needs `async with`, not `with`")

    def __exit__(self, *args: object) -> None:
        pass  # pragma: no cover - __enter__ never succeeds

    def __getattr__(self, name: str) -> NoReturn:
        raise AttributeError(
            f"{self._name} has no attribute {name!r}: it is an async context manager;"
            f" write `{self._usage}` and use the object it names"
        )
