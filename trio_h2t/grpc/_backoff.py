"""Reconnect backoff of grpc's doc/connection-backoff.md, without I/O.

Theory of operation
-------------------
A subchannel that fails to connect waits before the next try; the waits grow::

    backoff = initial_backoff                 # the first wait has no jitter
    deadline = start + backoff
    loop:
        connect, bounded by max(deadline - start, min_connect_timeout)
        sleep until deadline
        backoff = min(backoff * multiplier, max_backoff)
        deadline = now + backoff +/- jitter * backoff   (uniformly random)

:class:`ConnectionBackoff` holds the parameters (grpc's defaults: 1 s, 1.6, 0.2,
120 s, 20 s), :class:`BackoffState` one subchannel's place in the sequence. The
random source is a callable giving floats in [0, 1) (``random.random`` by
default), so tests can inject their own. A successful connection ``reset``\\ s the
state. Nothing here reads a clock: the caller turns delays into deadlines.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["BackoffState", "ConnectionBackoff"]


def _positive(value: float, name: str, *, minimum: float = 0.0, strict: bool = True) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"ConnectionBackoff({name}=...) takes seconds as a number, not {value!r}")
    if not math.isfinite(value) or value < minimum or (strict and value == minimum):
        bound = f"> {minimum}" if strict else f">= {minimum}"
        raise ValueError(f"ConnectionBackoff({name}=...) must be finite and {bound}, not {value!r}")
    return float(value)


@dataclass(frozen=True, slots=True)
class ConnectionBackoff:
    """Parameters of the reconnect backoff (grpc's doc/connection-backoff.md).

    ``initial_backoff`` (s, > 0), ``multiplier`` (>= 1), ``jitter`` (0 <= j < 1),
    ``max_backoff`` (s, >= initial_backoff), ``min_connect_timeout`` (s, > 0: a
    connect attempt gets at least this long). Keyword-only; the defaults are grpc's.
    """

    initial_backoff: float = 1.0
    multiplier: float = 1.6
    jitter: float = 0.2
    max_backoff: float = 120.0
    min_connect_timeout: float = 20.0

    def __init__(
        self,
        *,
        initial_backoff: float = 1.0,
        multiplier: float = 1.6,
        jitter: float = 0.2,
        max_backoff: float = 120.0,
        min_connect_timeout: float = 20.0,
    ) -> None:
        initial = _positive(initial_backoff, "initial_backoff")
        mult = _positive(multiplier, "multiplier", minimum=1.0, strict=False)
        jit = _positive(jitter, "jitter", strict=False)
        if jit >= 1:
            raise ValueError(f"ConnectionBackoff(jitter=...) must be below 1, not {jitter!r}")
        maximum = _positive(max_backoff, "max_backoff")
        if maximum < initial:
            raise ValueError(
                f"ConnectionBackoff(max_backoff={max_backoff!r}) is below"
                f" initial_backoff={initial_backoff!r}"
            )
        minimum = _positive(min_connect_timeout, "min_connect_timeout")
        object.__setattr__(self, "initial_backoff", initial)
        object.__setattr__(self, "multiplier", mult)
        object.__setattr__(self, "jitter", jit)
        object.__setattr__(self, "max_backoff", maximum)
        object.__setattr__(self, "min_connect_timeout", minimum)


class BackoffState:
    """One subchannel's place in the backoff sequence. Owner: its connecting task."""

    __slots__ = ("_current", "_policy", "_random", "_started")

    def __init__(
        self, policy: ConnectionBackoff, *, random_source: Callable[[], float] = random.random
    ) -> None:
        self._policy = policy  # immutable after init
        self._random = random_source  # immutable after init
        self._current = policy.initial_backoff  # owner: the connecting task
        self._started = False  # owner: the connecting task: a delay was handed out

    def reset(self) -> None:
        """A connection succeeded: the next failure waits ``initial_backoff`` again."""
        self._current = self._policy.initial_backoff
        self._started = False

    def next_delay(self) -> float:
        """The wait, from the start of the attempt that failed, before the next one:
        ``initial_backoff`` first (no jitter), then each the last times
        ``multiplier``, at most ``max_backoff``, spread by +/- ``jitter``."""
        policy = self._policy
        if not self._started:
            self._started = True
            return self._current
        self._current = min(self._current * policy.multiplier, policy.max_backoff)
        spread = policy.jitter * self._current
        return self._current + spread * (2.0 * self._random() - 1.0)

    def connect_timeout(self, delay: float) -> float:
        """How long an attempt whose backoff is ``delay`` may take to connect."""
        return max(delay, self._policy.min_connect_timeout)
