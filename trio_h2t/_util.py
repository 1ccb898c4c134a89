"""Small helpers shared by several modules."""

from __future__ import annotations

import contextlib
import functools
import math
import os
import ssl
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, ParamSpec, TypeVar

import trio

from ._shared import (
    AsyncWithOnly as AsyncWithOnly,
    NoPublicConstructor as NoPublicConstructor,
    unwrap_single as unwrap_single,
)

__all__ = [
    "ALPN_H2",
    "NOT_TLS_REASONS",
    "TLS_ALERT_PROTOCOL_VERSION",
    "AsyncWithOnly",
    "NoPublicConstructor",
    "async_with_only",
    "check_ascii",
    "check_host",
    "check_path",
    "check_port",
    "check_ssl_context",
    "check_stream",
    "check_timeout",
    "fixup_module_metadata",
    "looks_like_tls",
    "require_trio",
    "unwrap_single",
]

T = TypeVar("T")
P = ParamSpec("P")

#: The one application protocol HTTP/2 over TLS selects, on both sides
#: (RFC 9113 §3.2; RFC 7301 ALPN).
ALPN_H2 = "h2"

#: What a TLS server that got no TLS at all (a plain h2c client's preface) answers
#: before closing: one fatal alert record (RFC 8446 §5.1, §6: ContentType alert 21,
#: legacy record version 3.1, length 2, level fatal 2, protocol_version 70), as
#: OpenSSL would; trio's SSLStream does not flush the alert OpenSSL prepares.
TLS_ALERT_PROTOCOL_VERSION = b"\x15\x03\x01\x00\x02\x02\x46"

#: ``ssl.SSLError.reason`` values meaning the peer's bytes were not TLS records at
#: all (a plain-text protocol, such as an h2c preface or an HTTP/1.x request).
NOT_TLS_REASONS = frozenset({"WRONG_VERSION_NUMBER", "HTTP_REQUEST", "UNKNOWN_PROTOCOL"})


def looks_like_tls(data: bytes | bytearray | memoryview) -> bool:
    """True if ``data`` starts like a TLS record: a ContentType 20-23
    (change_cipher_spec, alert, handshake, application_data) then major version 3
    (RFC 8446 §5.1; a ClientHello or a server's alert starts 0x16 0x03 / 0x15 0x03)."""
    return len(data) >= 2 and 20 <= data[0] <= 23 and data[1] == 3


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


# -- entry-point argument checks ------------------------------------------------------
# Each raises TypeError (wrong type) or ValueError (wrong value) naming the argument
# and what it must be; the entry points call them before any I/O (docs/errors.md).


def _name(value: object) -> str:
    return type(value).__name__


def check_stream(transport: object) -> None:
    """``transport`` must be a ``trio.abc.Stream``."""
    if not isinstance(transport, trio.abc.Stream):
        raise TypeError(
            "transport must be a trio.abc.Stream (a trio.SocketStream, trio.SSLStream,"
            f" a stream from trio.testing...), not {_name(transport)}"
        )


def check_ssl_context(ssl_context: object) -> None:
    """``ssl_context`` must be an ``ssl.SSLContext`` or None."""
    if ssl_context is not None and not isinstance(ssl_context, ssl.SSLContext):
        raise TypeError(f"ssl_context must be an ssl.SSLContext or None, not {_name(ssl_context)}")


def check_port(port: object, *, lowest: int) -> None:
    """``port`` must be an ``int`` (not a bool, not a str) in ``lowest..65535``."""
    if not isinstance(port, int) or isinstance(port, bool):
        raise TypeError(f"port must be an int, not {_name(port)} ({port!r})")
    if not lowest <= port <= 65535:
        raise ValueError(f"port must be in {lowest}..65535, not {port}")


def check_host(host: object, *, optional: bool) -> None:
    """``host`` must be a non-empty ``str`` (or None, if ``optional``)."""
    if host is None and optional:
        return
    if not isinstance(host, str):
        none = " or None" if optional else ""
        raise TypeError(f"host must be a str{none}, not {_name(host)} ({host!r})")
    if not host:
        raise ValueError("host must not be empty")


def check_path(path: object) -> None:
    """A Unix socket ``path`` must be a ``str`` or an ``os.PathLike``."""
    if not isinstance(path, str | os.PathLike):
        raise TypeError(f"path must be a str or an os.PathLike, not {_name(path)} ({path!r})")


def check_timeout(name: str, value: object) -> None:
    """``value`` must be None (no bound) or a number of seconds > 0 (not a bool)."""
    if value is None:
        return
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise TypeError(
            f"{name} must be a number of seconds (int or float) or None, not {_name(value)}"
            f" ({value!r})"
        )
    if math.isnan(value) or value <= 0:
        raise ValueError(f"{name} must be > 0 seconds (or None: no bound), not {value!r}")


def check_ascii(name: str, value: object) -> None:
    """``value`` must be an ASCII ``str`` (it goes on the wire as is)."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, not {_name(value)} ({value!r})")
    if not value.isascii():
        raise ValueError(f"{name} must be ASCII, not {value!r}")


def fixup_module_metadata(module_name: str, namespace: dict[str, Any]) -> None:
    """Make public names report ``module_name`` as their module (as trio does)."""
    for name in namespace.get("__all__", ()):
        obj = namespace[name]
        if getattr(obj, "__module__", "").startswith("trio_h2t."):
            with contextlib.suppress(AttributeError, TypeError):
                obj.__module__ = module_name


def async_with_only(
    name: str, usage: str
) -> Callable[
    [Callable[P, AbstractAsyncContextManager[T]]], Callable[P, AbstractAsyncContextManager[T]]
]:
    """Decorate an ``asynccontextmanager`` function so that what it returns is an
    :class:`AsyncWithOnly` (same signature and docstring)."""

    def wrap(
        fn: Callable[P, AbstractAsyncContextManager[T]],
    ) -> Callable[P, AbstractAsyncContextManager[T]]:
        @functools.wraps(fn)
        def opener(*args: P.args, **kwargs: P.kwargs) -> AbstractAsyncContextManager[T]:
            return AsyncWithOnly(fn(*args, **kwargs), name, usage)

        return opener

    return wrap
