"""The retry loop: drives a call's attempts under a retry policy (gRFC A6).

Theory of operation
-------------------
:func:`run_with_retries` knows nothing of streams: it calls an *attempt* callable
``attempt(metadata, timeout, state)`` once per attempt, with the extra metadata that
attempt carries (``grpc-previous-rpc-attempts`` from the second on), the seconds left
of the whole call's deadline (None without one), and the call's
:class:`~trio_h2t.grpc._retry.CallRetryState`. The attempt returns the call's
result, or raises :class:`RpcError`; it calls ``state.on_headers()`` when response
headers (not trailers-only) arrive, which commits the call. After a failure the
state (``_retry.py``) says whether and after what delay to try again; the loop sleeps
that long and repeats. The deadline bounds the whole sequence, backoff sleeps
included: when it passes, the call fails with DEADLINE_EXCEEDED. The final failure's
details end with how many attempts were made (``"... (3 attempts)"``).

:func:`unary_unary_attempt` is the attempt of a unary-unary call, built on the public
:class:`Call` API, so that the channel's call path needs only to choose it when a
method has a retry policy. (Where the channel picks a connection per attempt, it
builds its own attempt callable the same way.)
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Any, TypeVar

import trio

from ._metadata import Metadata, MetadataLike
from ._retry import PUSHBACK_HEADER, CallRetryState
from ._status import RpcError, StatusCode

__all__: list[str] = []  # private: the call path's helper

T = TypeVar("T")

#: ``attempt(extra_metadata, timeout_left, state) -> result``.
Attempt = Callable[[list[tuple[str, str]], float | None, CallRetryState], Awaitable[T]]


async def run_with_retries(
    state: CallRetryState,
    attempt: Attempt[T],
    *,
    timeout: float | None = None,  # noqa: ASYNC109 (bounds all attempts; sent as grpc-timeout)
) -> T:
    """Run ``attempt`` until it succeeds or ``state`` says no more; return its result.

    ``timeout`` (seconds) bounds all attempts and the waits between them.

    Checkpoint: always (each attempt does). On cancellation: the attempt in
    progress is cancelled as it handles cancellation (RST_STREAM(CANCEL)); no
    further attempt starts.

    Raises:
        RpcError: the last attempt's status, its details ending with the number of
            attempts; DEADLINE_EXCEEDED when ``timeout`` passes.
    """
    deadline = math.inf if timeout is None else trio.current_time() + timeout
    with trio.CancelScope(deadline=deadline) as scope:
        while True:
            extra = state.start_attempt()
            left = None if timeout is None else max(deadline - trio.current_time(), 0.0)
            try:
                result = await attempt(extra, left, state)
            except RpcError as exc:
                pushback = exc.trailing_metadata.get(PUSHBACK_HEADER)
                delay = state.on_failure(exc.code, pushback if isinstance(pushback, str) else None)
                if delay is None:
                    raise _counted(exc, state.attempts) from exc
                await trio.sleep(delay)
                continue
            state.on_success()
            return result
    assert scope.cancelled_caught
    state.commit()
    raise RpcError(StatusCode.DEADLINE_EXCEEDED, f"Deadline Exceeded ({state.attempts} attempts)")


def _counted(exc: RpcError, attempts: int) -> RpcError:
    noun = "attempt" if attempts == 1 else "attempts"
    details = f"{exc.details} ({attempts} {noun})" if exc.details else f"({attempts} {noun})"
    return RpcError(
        exc.code,
        details,
        trailing_metadata=exc.trailing_metadata,
        initial_metadata=exc.initial_metadata,
        status_details=exc.status_details,
    )


def unary_unary_attempt(
    method: Any,
    request: Any,
    *,
    metadata: MetadataLike = (),
    compression: str | bool | None = False,
) -> Attempt[Any]:
    """The attempt of a unary-unary call of ``method`` (a :class:`UnaryUnaryMethod`)."""
    base = list(_pairs(metadata))

    async def attempt(
        extra: list[tuple[str, str]],
        timeout: float | None,  # noqa: ASYNC109 (sent as grpc-timeout)
        state: CallRetryState,
    ) -> Any:
        async with method.open(
            timeout=timeout, metadata=base + extra, compression=compression
        ) as call:
            await call.send_message(request)
            await call.done_writing()
            await call.initial_metadata()
            if call.code is None:  # headers, not trailers-only: the server answered
                state.on_headers()
            return await call.receive_response()

    return attempt


def _pairs(metadata: MetadataLike) -> list[tuple[str, Any]]:
    return list(Metadata(metadata))


@asynccontextmanager
async def open_with_retries(
    state: CallRetryState,
    open_attempt: Callable[[list[tuple[str, str]], float | None], AbstractAsyncContextManager[Any]],
    *,
    timeout: float | None = None,  # noqa: ASYNC109 (bounds all attempts; sent as grpc-timeout)
) -> AsyncIterator[Any]:
    """The call of a unary-stream method under a retry policy, retried until it commits.

    ``open_attempt(extra_metadata, timeout_left)`` opens one attempt and sends its
    request, giving its :class:`Call`. An attempt that fails before response headers
    (trailers-only, or no response) is retried as :func:`run_with_retries` does; the
    first attempt that gets headers, succeeds, or may not be retried is the call
    given to the block (its status is read from it as without retries).

    Checkpoint: entering (it waits for the response headers). On cancellation: as
    the attempt in progress (RST_STREAM(CANCEL)); no further attempt starts.
    """
    deadline = math.inf if timeout is None else trio.current_time() + timeout
    while True:
        extra = state.start_attempt()
        left = None if timeout is None else max(deadline - trio.current_time(), 0.0)
        async with AsyncExitStack() as stack:
            failure: RpcError | None = None
            call = None
            try:
                call = await stack.enter_async_context(open_attempt(extra, left))
                await call.initial_metadata()
            except RpcError as exc:
                failure = exc
            if call is not None and failure is None and call.code is None:
                state.on_headers()  # the server answered: committed
                yield call
                return
            if failure is None and call is not None and call.code == StatusCode.OK:
                state.on_success()
                yield call
                return
            if failure is not None:
                code, trailing = failure.code, failure.trailing_metadata
            else:
                assert call is not None
                code, trailing = call.code, call.trailing_metadata
            pushback = trailing.get(PUSHBACK_HEADER) if trailing is not None else None
            delay = state.on_failure(code, pushback if isinstance(pushback, str) else None)
            if delay is None:
                if call is None:
                    assert failure is not None
                    raise _counted(failure, state.attempts) from failure
                yield call  # the block reads the failure from the call
                return
        with trio.move_on_at(deadline) as scope:
            await trio.sleep(delay)
        if scope.cancelled_caught:
            state.commit()
            raise RpcError(
                StatusCode.DEADLINE_EXCEEDED, f"Deadline Exceeded ({state.attempts} attempts)"
            )


def unary_stream_attempt(
    method: Any,
    request: Any,
    *,
    metadata: MetadataLike = (),
    compression: str | bool | None = False,
) -> Callable[[list[tuple[str, str]], float | None], AbstractAsyncContextManager[Any]]:
    """The attempt opener of a unary-stream call of ``method`` (:func:`open_with_retries`)."""
    base = _pairs(metadata)

    @asynccontextmanager
    async def attempt(
        extra: list[tuple[str, str]],
        timeout: float | None,  # noqa: ASYNC109 (sent as grpc-timeout)
    ) -> AsyncIterator[Any]:
        async with method.open(
            timeout=timeout, metadata=base + extra, compression=compression
        ) as call:
            await call.send_message(request)
            await call.done_writing()
            yield call

    return attempt


def stream_unary_attempt(
    method: Any,
    requests: Iterable[Any] | AsyncIterable[Any],
    *,
    metadata: MetadataLike = (),
    compression: str | bool | None = False,
) -> Attempt[Any]:
    """The attempt of a stream-unary call of ``method``, with its replay buffer.

    The requests are taken from ``requests`` once. Each one sent is also kept, its
    serialized size counted by ``state.buffer``, so that a retry sends the kept ones
    again and then goes on with the rest; once the buffer would pass its bounds the
    call commits (no more retries) and nothing more is kept.
    """
    base = _pairs(metadata)
    source = _as_async_iterator(requests)
    kept: list[Any] = []
    serialize = method._serializer

    async def attempt(
        extra: list[tuple[str, str]],
        timeout: float | None,  # noqa: ASYNC109 (sent as grpc-timeout)
        state: CallRetryState,
    ) -> Any:
        async with method.open(
            timeout=timeout, metadata=base + extra, compression=compression
        ) as call:

            async def send_all() -> None:
                # As the channel's own stream-unary path: a failed stream is
                # reported by the receiver, which cancels this once it has the answer.
                try:
                    for request in kept:
                        await call.send_message(request)
                    async for request in source:
                        if not state.committed:
                            if state.buffer(len(serialize(request))):
                                kept.append(request)
                            else:
                                kept.clear()
                        await call.send_message(request)
                    await call.done_writing()
                except (RpcError, trio.ClosedResourceError, trio.BrokenResourceError):
                    pass

            failure: RpcError | None = None
            async with trio.open_nursery() as nursery:
                nursery.start_soon(send_all)
                try:
                    await call.initial_metadata()
                    if call.code is None:
                        state.on_headers()
                    result = await call.receive_response()
                except RpcError as exc:
                    failure = exc
                nursery.cancel_scope.cancel()
            if failure is not None:
                raise failure
            return result

    return attempt


async def _as_async_iterator(requests: Iterable[Any] | AsyncIterable[Any]) -> AsyncIterator[Any]:
    if isinstance(requests, AsyncIterable):
        async for request in requests:
            yield request
    else:
        for request in requests:
            yield request
