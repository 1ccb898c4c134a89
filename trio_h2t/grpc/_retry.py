"""The retry decision of gRFC A6: backoff, pushback, throttling, commit (sans-IO).

Theory of operation
-------------------
A call under a :class:`~trio_h2t.grpc.RetryPolicy` runs as up to ``max_attempts``
attempts. :class:`CallRetryState` is one call's bookkeeping; the code that drives
attempts asks it, after each failed attempt, whether to start another and after
what delay (:meth:`CallRetryState.on_failure`). It answers no once the call is
*committed*; a call commits (gRFC A6, "Retry Policy Capabilities") when

- response headers arrive, i.e. any response that is not trailers-only
  (:meth:`CallRetryState.on_headers`): the server has begun to answer, and replaying
  could run the method twice with visible output;
- the request bytes kept for replay exceed the per-call bound
  (``grpc.per_rpc_retry_buffer_size`` in grpcio, 256 KiB) or the channel-wide pool
  (``grpc.retry_buffer_size``, 16 MiB; :class:`RetryBufferPool`): the buffer is
  dropped and the call can no longer replay;
- it succeeds, or its attempts are used up.

After a failed, uncommitted attempt the checks run in grpc-go's order:

1. Server pushback: a ``grpc-retry-pushback-ms`` trailer that is a non-negative
   decimal integer replaces the backoff with that many milliseconds and resets the
   backoff sequence; any other value (negative, malformed) means "do not retry".
2. The status code must be in ``retryable_status_codes``.
3. The channel's :class:`RetryThrottle` loses a token; if it is then at or below half
   its ``max_tokens``, no retry.
4. ``max_attempts`` bounds the total number of attempts, the first included.
5. Without pushback the delay before retry n (n = 1, 2, ... counted since the last
   pushback) is uniform in ``[0, min(initial_backoff * backoff_multiplier**(n-1),
   max_backoff)]``; the random source is injectable for tests.

Every attempt after the first carries ``grpc-previous-rpc-attempts: N`` (N attempts
made before it; :func:`previous_attempts_header`).

Nothing here does I/O or imports trio.
"""

from __future__ import annotations

import random as _random
from collections.abc import Callable
from typing import Final, final

from ._service_config import RetryPolicy, RetryThrottling
from ._status import StatusCode

__all__: list[str] = []  # private: used by the call path only

#: grpcio's ``grpc.per_rpc_retry_buffer_size`` default: request bytes one call keeps.
DEFAULT_PER_RPC_BUFFER_BYTES: Final = 256 * 1024
#: grpcio's ``grpc.retry_buffer_size`` default: request bytes all calls of a channel keep.
DEFAULT_CHANNEL_BUFFER_BYTES: Final = 16 * 1024 * 1024

PUSHBACK_HEADER: Final = "grpc-retry-pushback-ms"
PREVIOUS_ATTEMPTS_HEADER: Final = "grpc-previous-rpc-attempts"


def previous_attempts_header(previous: int) -> tuple[str, str]:
    """The metadata pair an attempt carries after ``previous`` earlier attempts."""
    return (PREVIOUS_ATTEMPTS_HEADER, str(previous))


def backoff_delay(
    policy: RetryPolicy, retry: int, *, random: Callable[[], float] = _random.random
) -> float:
    """Seconds to wait before retry number ``retry`` (1 for the first retry).

    Uniform in ``[0, min(initial_backoff * backoff_multiplier**(retry-1), max_backoff)]``.
    """
    if retry < 1:
        raise ValueError(f"retry counts from 1, not {retry}")
    try:
        ceiling = policy.initial_backoff * policy.backoff_multiplier ** (retry - 1)
    except OverflowError:
        ceiling = policy.max_backoff
    return random() * min(ceiling, policy.max_backoff)


def parse_pushback(value: str | None) -> float | bool | None:
    """``grpc-retry-pushback-ms`` as seconds; None when absent; False for "do not retry".

    A non-negative decimal integer is a delay; anything else (negative, malformed)
    tells the client not to retry (gRFC A6, "Pushback").
    """
    if value is None:
        return None
    text = value.strip()
    if not text.isascii() or not text.isdigit():
        return False
    return int(text) / 1000


@final
class RetryThrottle:
    """The channel's token bucket (gRFC A6, "Throttling Retry Attempts").

    Starts full at ``max_tokens``; a failed attempt with a retryable code takes one
    token (not below 0), a successful call gives back ``token_ratio`` (not above
    ``max_tokens``). Retries are allowed only while more than half the tokens remain.
    One per channel, used by all its calls from the channel's single Trio thread
    (no await between a read and a write of the count).
    """

    __slots__ = ("_max_tokens", "_ratio", "_tokens")

    def __init__(self, throttling: RetryThrottling) -> None:
        self._max_tokens = throttling.max_tokens  # immutable after init
        self._ratio = throttling.token_ratio  # immutable after init
        # shared: changed only by on_failure/on_success, each one step without await
        self._tokens = throttling.max_tokens

    @property
    def tokens(self) -> float:
        """Tokens now in the bucket."""
        return self._tokens

    @property
    def retries_allowed(self) -> bool:
        """True while more than half the bucket is full."""
        return self._tokens > self._max_tokens / 2

    def on_failure(self) -> bool:
        """Take a token for a retryable failure; True if a retry is still allowed."""
        self._tokens = max(0.0, self._tokens - 1)
        return self.retries_allowed

    def on_success(self) -> None:
        """Give back ``token_ratio`` for a successful call."""
        self._tokens = min(self._max_tokens, self._tokens + self._ratio)


@final
class RetryBufferPool:
    """The channel-wide bound on request bytes kept for replay (all calls together)."""

    __slots__ = ("_in_use", "limit")

    def __init__(self, limit: int = DEFAULT_CHANNEL_BUFFER_BYTES) -> None:
        if limit < 0:
            raise ValueError(f"retry buffer limit must be >= 0, not {limit}")
        self.limit = limit  # immutable after init
        # shared: changed only by reserve/release, each one step without await
        self._in_use = 0

    @property
    def in_use(self) -> int:
        """Bytes now reserved by calls that may still replay."""
        return self._in_use

    def reserve(self, nbytes: int) -> bool:
        """Reserve ``nbytes`` more; False (nothing reserved) if that exceeds the limit."""
        if self._in_use + nbytes > self.limit:
            return False
        self._in_use += nbytes
        return True

    def release(self, nbytes: int) -> None:
        """Give back bytes an earlier :meth:`reserve` took."""
        self._in_use = max(0, self._in_use - nbytes)


@final
class CallRetryState:
    """One call's retry bookkeeping (module docstring). Owner of every field: the call's task.

    ``policy`` None: a call with no retry policy that may still be resent
    transparently (its stream never reached a handler); it keeps its replay buffer
    under the same bounds, and :meth:`on_failure` always says no.
    """

    __slots__ = (
        "_buffered",
        "_pool",
        "_random",
        "_retries_since_pushback",
        "_throttle",
        "attempts",
        "committed",
        "per_call_limit",
        "policy",
    )

    def __init__(
        self,
        policy: RetryPolicy | None,
        *,
        throttle: RetryThrottle | None = None,
        pool: RetryBufferPool | None = None,
        per_call_limit: int = DEFAULT_PER_RPC_BUFFER_BYTES,
        random: Callable[[], float] = _random.random,
    ) -> None:
        self.policy = policy  # immutable after init
        self.per_call_limit = per_call_limit  # immutable after init
        self._throttle = throttle  # immutable after init
        self._pool = pool  # immutable after init
        self._random = random  # immutable after init
        self.attempts = 0  # owner: the call's task
        self.committed = False  # owner: the call's task
        self._buffered = 0  # owner: the call's task
        self._retries_since_pushback = 0  # owner: the call's task

    def start_attempt(self) -> list[tuple[str, str]]:
        """Count a new attempt; the extra metadata it carries (none for the first)."""
        previous = self.attempts
        self.attempts += 1
        return [previous_attempts_header(previous)] if previous else []

    def buffer(self, nbytes: int) -> bool:
        """Account ``nbytes`` of request kept for replay; False once committed by it.

        Past either bound the call commits and its buffer is released: the caller
        drops what it kept.
        """
        if self.committed:
            return False
        total = self._buffered + nbytes
        if total > self.per_call_limit or (
            self._pool is not None and not self._pool.reserve(nbytes)
        ):
            self.commit()
            return False
        self._buffered = total
        return True

    def on_headers(self) -> None:
        """Response headers (not trailers-only) arrived: the call commits."""
        self.commit()

    def on_success(self) -> None:
        """The call ended OK: refill the throttle a little and commit."""
        if self._throttle is not None and self.policy is not None:
            self._throttle.on_success()
        self.commit()

    def on_failure(self, code: StatusCode, pushback: str | None = None) -> float | None:
        """After a failed attempt: seconds to wait before the next, or None (no retry).

        ``pushback`` is the ``grpc-retry-pushback-ms`` trailer's value, if any. None
        commits the call.
        """
        delay = self._decide(code, pushback)
        if delay is None:
            self.commit()
        return delay

    def _decide(self, code: StatusCode, pushback: str | None) -> float | None:
        if self.committed or self.policy is None:
            return None
        pushed = parse_pushback(pushback)
        if pushed is False:
            return None
        if code not in self.policy.retryable_status_codes:
            return None
        if self._throttle is not None and not self._throttle.on_failure():
            return None
        if self.attempts >= self.policy.max_attempts:
            return None
        if isinstance(pushed, float):
            self._retries_since_pushback = 0
            return pushed
        self._retries_since_pushback += 1
        return backoff_delay(self.policy, self._retries_since_pushback, random=self._random)

    def commit(self) -> None:
        """No more attempts; release the replay buffer's bytes."""
        self.committed = True
        if self._pool is not None:
            self._pool.release(self._buffered)
        self._buffered = 0
