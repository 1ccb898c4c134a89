"""Interceptors, server and client, and per-call credentials.

Theory of operation
-------------------
An interceptor wraps a whole call, for the four kinds alike, and the first one
in the list is the outermost (it runs first before the call and last after it),
as grpc-go chains its interceptors and grpcio's ``grpc.aio`` applies its list.

Server side: an interceptor is ``async def interceptor(details, proceed)``.
``details`` (:class:`ServerCallDetails`) gives the method path, its kind, the
invocation metadata, the peer, and the call's :class:`ServicerContext` (to add
initial or trailing metadata). ``await proceed()`` runs the rest of the chain
and then the handler (reading the requests, writing the responses); its
exceptions (an RpcError, a failure) come out of ``proceed()``. Raising RpcError
(``details.context.abort(...)``) before ``proceed()`` ends the call with that
status and the handler never runs. The shape is grpc-go's stream interceptor
(``handler(srv, stream)``) for every kind, as a Trio function: code before and
after ``proceed()``, ``try``/``except`` around it.

Client side: an interceptor is a callable ``interceptor(details)`` returning an
async context manager (``@contextlib.asynccontextmanager``); the call runs inside
its block, so for a streaming call the block covers the whole ``async with`` the
user wrote. Before its ``yield`` it may change ``details.metadata`` (a list) and
``details.timeout``, or raise RpcError to end the call with no stream opened;
the call's exceptions (RpcError, cancellation) come out of the ``yield``.

Call credentials (grpcio's ``metadata_call_credentials``) are a built-in client
interceptor, the innermost: the user's interceptors see the call before they run;
a call's own ``credentials=`` come after the channel's.

The client chain wraps the whole call: a call that its method's retry policy, or
a balanced channel's transparent retry, sends again on new streams (``_retrying.py``)
goes through the interceptors once, as in grpcio and grpc-go, where retries happen
below the interceptors.

A channel or server without interceptors never enters this module on a call.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias, final

from ._metadata import Metadata, MetadataLike
from ._status import RpcError, StatusCode

if TYPE_CHECKING:
    from ._server import MethodKind, ServicerContext

__all__ = [
    "CallCredentials",
    "CallCredentialsContext",
    "ClientCallDetails",
    "ClientInterceptor",
    "ServerCallDetails",
    "ServerInterceptor",
]


@final
@dataclass(frozen=True, slots=True)
class ServerCallDetails:
    """What a server interceptor knows of a call, before its handler runs."""

    #: The method's path, ``/package.Service/Method``.
    method: str
    #: The method's kind (``MethodKind.UNARY_UNARY``...); STREAM_STREAM for an
    #: unknown method (its ``proceed()`` raises RpcError UNIMPLEMENTED).
    kind: MethodKind
    #: The call's context: ``set_trailing_metadata``, ``add_initial_metadata``, ``abort``.
    context: ServicerContext

    @property
    def invocation_metadata(self) -> Metadata:
        """The metadata the client sent with its request headers."""
        return self.context.invocation_metadata

    @property
    def peer(self) -> str:
        """The client's address as grpcio writes it (``ipv4:127.0.0.1:5000``)."""
        return self.context.peer


#: ``async def interceptor(details, proceed) -> None``; ``await proceed()`` runs the handler.
ServerInterceptor: TypeAlias = Callable[
    [ServerCallDetails, Callable[[], Awaitable[None]]], Awaitable[None]
]


_SERVER_SHAPE = "`async def interceptor(details, proceed)` (calling `await proceed()`)"
_CLIENT_SHAPE = (
    "a callable `interceptor(details)` returning an async context manager: write"
    " `@contextlib.asynccontextmanager` over `async def interceptor(details): ... yield ...`"
)


def _sequence_of(interceptors: object, side: str, shape: str) -> tuple[Any, ...]:
    """``interceptors`` as a tuple; TypeError naming the fix for a single one or a
    non-sequence (``interceptors=ic`` instead of ``interceptors=[ic]``)."""
    if not callable(interceptors) and not isinstance(interceptors, str | bytes):
        try:
            return tuple(interceptors)  # type: ignore[arg-type]
        except TypeError:
            pass  # not iterable
    raise TypeError(
        f"interceptors must be a sequence (a list) of {side} interceptors, each {shape};"
        f" not {interceptors!r} (one interceptor: write interceptors=[interceptor])"
    )


def _takes(fn: Callable[..., Any], count: int) -> bool:
    """Whether ``fn`` can be called with ``count`` positional arguments (True when
    its signature cannot be read)."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return True
    try:
        signature.bind(*range(count))
    except TypeError:
        return False
    return True


def _is_async_def(fn: object) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 (an instance with an async __call__)
    )


def check_server_interceptors(
    interceptors: Sequence[ServerInterceptor],
) -> tuple[ServerInterceptor, ...]:
    """The server's interceptors as a tuple; TypeError naming the shape for one that
    is not an ``async def`` of ``(details, proceed)`` (a plain function, an async
    generator, a wrong number of parameters), or for a single one not in a list."""
    found = _sequence_of(interceptors, "server", _SERVER_SHAPE)
    for interceptor in found:
        if not callable(interceptor):
            raise TypeError(f"a server interceptor is {_SERVER_SHAPE}, not {interceptor!r}")
        if inspect.isasyncgenfunction(interceptor):
            raise TypeError(
                f"server interceptor {interceptor!r} is an async generator: a server"
                f" interceptor is {_SERVER_SHAPE}, with no yield"
            )
        if inspect.isfunction(interceptor) and not _is_async_def(interceptor):
            raise TypeError(
                f"server interceptor {interceptor!r} is a plain function: a server"
                f" interceptor is {_SERVER_SHAPE}"
            )
        if not _takes(interceptor, 2):
            raise TypeError(
                f"server interceptor {interceptor!r} cannot take (details, proceed):"
                f" a server interceptor is {_SERVER_SHAPE}"
            )
    return found


async def run_server_chain(
    interceptors: tuple[ServerInterceptor, ...],
    details: ServerCallDetails,
    handler: Callable[[], Awaitable[None]],
) -> None:
    """Run ``handler`` through ``interceptors``, the first the outermost.

    Checkpoint: as the interceptors and the handler. On cancellation: it goes
    through the interceptors' ``proceed()`` like any exception.
    """

    async def step(index: int) -> None:
        if index == len(interceptors):
            await handler()
            return
        called = False

        async def proceed() -> None:
            nonlocal called
            if called:
                raise RuntimeError("a server interceptor called proceed() twice")
            called = True
            await step(index + 1)

        await interceptors[index](details, proceed)

    await step(0)


@final
@dataclass(slots=True)
class ClientCallDetails:
    """A client call as its interceptors see it; they may change ``metadata`` and
    ``timeout`` before the call starts."""

    #: The method's path, ``/package.Service/Method``.
    method: str
    #: The method's kind (``MethodKind.UNARY_UNARY``...).
    kind: MethodKind
    #: The call's own metadata (the channel's ``metadata=`` goes out before it);
    #: a list of ``(key, value)`` pairs to read, append to or replace.
    metadata: list[tuple[str, str | bytes]]
    #: The call's timeout in seconds, or None.
    timeout: float | None


#: ``interceptor(details) -> async context manager``; the call runs inside its block.
ClientInterceptor: TypeAlias = Callable[[ClientCallDetails], AbstractAsyncContextManager[None]]


def check_client_interceptors(
    interceptors: Sequence[ClientInterceptor],
) -> tuple[ClientInterceptor, ...]:
    """The channel's interceptors as a tuple; TypeError naming the shape for one
    that cannot be one (not callable, a plain ``async def`` or an undecorated async
    generator, a wrong number of parameters), or for a single one not in a list."""
    found = _sequence_of(interceptors, "client", _CLIENT_SHAPE)
    for interceptor in found:
        if not callable(interceptor):
            raise TypeError(f"a client interceptor is {_CLIENT_SHAPE}; not {interceptor!r}")
        if inspect.isasyncgenfunction(interceptor):
            raise TypeError(
                f"client interceptor {interceptor!r} is an undecorated async generator:"
                " decorate it with @contextlib.asynccontextmanager"
            )
        if _is_async_def(interceptor):
            raise TypeError(
                f"client interceptor {interceptor!r} is a plain `async def` (calling it"
                f" gives a coroutine, not an async context manager): it must be {_CLIENT_SHAPE}"
            )
        if not _takes(interceptor, 1):
            raise TypeError(
                f"client interceptor {interceptor!r} cannot take (details): it must be"
                f" {_CLIENT_SHAPE}"
            )
    return found


def _enter_target(interceptor: ClientInterceptor, details: ClientCallDetails) -> Any:
    """``interceptor(details)``, checked to be an async context manager (TypeError
    naming the interceptor if not; a coroutine it gave is closed, not left unawaited)."""
    manager = interceptor(details)
    kind = type(manager)
    if not (hasattr(kind, "__aenter__") and hasattr(kind, "__aexit__")):
        if inspect.iscoroutine(manager):
            manager.close()
        raise TypeError(
            f"client interceptor {interceptor!r} returned {kind.__name__}, not an async"
            f" context manager: it must be {_CLIENT_SHAPE}"
        )
    return manager


@asynccontextmanager
async def intercepted_call(
    interceptors: tuple[ClientInterceptor, ...],
    details: ClientCallDetails,
    open_call: Callable[[ClientCallDetails], AbstractAsyncContextManager[Any]],
) -> AsyncIterator[Any]:
    """Enter ``interceptors`` in order (the first outermost), then the call
    ``open_call(details)`` opens with the details they left."""
    async with AsyncExitStack() as stack:
        for interceptor in interceptors:
            await stack.enter_async_context(_enter_target(interceptor, details))
        yield await stack.enter_async_context(open_call(details))


@final
@dataclass(frozen=True, slots=True)
class CallCredentialsContext:
    """What call credentials get to build a call's metadata (grpcio's
    ``AuthMetadataContext``)."""

    #: ``scheme://authority/package.Service``: the service the call goes to.
    service_url: str
    #: The method's name alone (``Method``).
    method_name: str


#: ``(context) -> metadata``, sync or async, called before each call.
CallCredentials: TypeAlias = Callable[
    [CallCredentialsContext], MetadataLike | Awaitable[MetadataLike]
]


def credentials_interceptor(
    credentials: CallCredentials, base_url: str, name: str = "call_credentials"
) -> ClientInterceptor:
    """The built-in interceptor that adds ``credentials``' metadata to each call
    (the channel's ``call_credentials``, or one call's ``credentials``: ``name``).

    A credentials callable that raises ends the call with UNAVAILABLE carrying the
    error (as grpc does when a metadata plugin fails), no stream opened.
    """
    if not callable(credentials):
        raise TypeError(
            f"{name} is a callable (context) -> metadata, sync or async, not {credentials!r}"
        )

    @asynccontextmanager
    async def add_credentials(details: ClientCallDetails) -> AsyncIterator[None]:
        service, _, name = details.method.rpartition("/")
        context = CallCredentialsContext(base_url + service, name)
        try:
            result = credentials(context)
            if inspect.isawaitable(result):
                result = await result
            added = list(Metadata(result))
        except Exception as exc:
            raise RpcError(
                StatusCode.UNAVAILABLE,
                f"getting metadata from call credentials failed: {exc!r}",
            ) from exc
        details.metadata.extend(added)
        yield

    return add_credentials
