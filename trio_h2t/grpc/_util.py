"""Small helpers of the gRPC layer (its own: it imports no private transport module)."""

from __future__ import annotations

from collections.abc import Coroutine
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Any, NoReturn, TypeVar, final

__all__ = ["AsyncWithOnly", "NoPublicConstructor", "check_bool", "check_size"]

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


@final
class AsyncWithOnly(AbstractAsyncContextManager[T]):
    """An async context manager (``inner``) that names the fix when it is used as
    something else: awaited, iterated, entered with ``with``, or read as the object
    its block gives (``channel = grpc.open_channel(...)`` then ``channel.unary_unary``).

    Python's own errors there name ``_AsyncGeneratorContextManager`` and not what to
    write. ``name`` says what was called (``grpc.open_channel(...)``), ``usage`` the
    statement to write (``async with grpc.open_channel(host, port) as channel:``).
    Entering and leaving are ``inner``'s, unchanged (no coroutine of its own:
    ``__aenter__`` returns ``inner``'s). Owner: the task that enters it.
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
