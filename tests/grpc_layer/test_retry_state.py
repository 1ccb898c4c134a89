"""The sans-IO retry decision (trio_h2t/grpc/_retry.py, gRFC A6)."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from trio_h2t.grpc import RetryPolicy, RetryThrottling, StatusCode
from trio_h2t.grpc._retry import (
    DEFAULT_PER_RPC_BUFFER_BYTES,
    CallRetryState,
    RetryBufferPool,
    RetryThrottle,
    backoff_delay,
    parse_pushback,
)

POLICY = RetryPolicy(
    max_attempts=4,
    initial_backoff=0.1,
    max_backoff=1.0,
    backoff_multiplier=2.0,
    retryable_status_codes=frozenset({StatusCode.UNAVAILABLE}),
)


def _top() -> float:
    return 1.0


policies = st.builds(
    RetryPolicy,
    max_attempts=st.integers(2, 5),
    initial_backoff=st.floats(1e-3, 10),
    max_backoff=st.floats(1e-3, 100),
    backoff_multiplier=st.floats(0.01, 10),
    retryable_status_codes=st.just(frozenset({StatusCode.UNAVAILABLE})),
)


@given(policy=policies, retry=st.integers(1, 50), fraction=st.floats(0, 1))
def test_backoff_bounds(policy: RetryPolicy, retry: int, fraction: float) -> None:
    """The delay is in [0, min(initial * multiplier**(n-1), max_backoff)]."""
    delay = backoff_delay(policy, retry, random=lambda: fraction)
    ceiling = min(
        policy.initial_backoff * policy.backoff_multiplier ** (retry - 1), policy.max_backoff
    )
    assert 0 <= delay <= ceiling * (1 + 1e-12)
    assert delay == pytest.approx(fraction * ceiling)


def test_backoff_counts_from_one() -> None:
    """Retry 0 is a wrong call."""
    with pytest.raises(ValueError, match="counts from 1"):
        backoff_delay(POLICY, 0)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        ("0", 0.0),
        ("250", 0.25),
        (" 7 ", 0.007),
        ("-1", False),
        ("1.5", False),
        ("x", False),
        ("", False),
        ("\u0661", False),  # a non-ASCII digit
    ],
)
def test_parse_pushback(value: str | None, expected: float | bool | None) -> None:
    """Non-negative integers are delays in ms; anything else means do not retry."""
    assert parse_pushback(value) == expected


def test_retry_sequence_and_headers() -> None:
    """Three UNAVAILABLE failures retry with growing backoff; the fourth attempt is the last."""
    state = CallRetryState(POLICY, random=_top)
    assert state.start_attempt() == []
    delays = []
    for expected_previous in (1, 2, 3):
        delay = state.on_failure(StatusCode.UNAVAILABLE)
        assert delay is not None
        delays.append(delay)
        assert state.start_attempt() == [("grpc-previous-rpc-attempts", str(expected_previous))]
    assert delays == pytest.approx([0.1, 0.2, 0.4])
    assert state.on_failure(StatusCode.UNAVAILABLE) is None
    assert state.committed
    assert state.attempts == 4


def test_non_retryable_code_is_not_retried() -> None:
    """A code outside retryableStatusCodes ends the call."""
    state = CallRetryState(POLICY)
    state.start_attempt()
    assert state.on_failure(StatusCode.INTERNAL) is None
    assert state.committed


def test_pushback_overrides_and_resets_backoff() -> None:
    """Pushback replaces the delay and restarts the backoff sequence; negative stops."""
    state = CallRetryState(POLICY, random=_top)
    state.start_attempt()
    assert state.on_failure(StatusCode.UNAVAILABLE) == pytest.approx(0.1)
    state.start_attempt()
    assert state.on_failure(StatusCode.UNAVAILABLE, "30") == pytest.approx(0.03)
    state.start_attempt()
    assert state.on_failure(StatusCode.UNAVAILABLE) == pytest.approx(0.1)
    again = CallRetryState(POLICY)
    again.start_attempt()
    assert again.on_failure(StatusCode.UNAVAILABLE, "-5") is None


def test_headers_commit() -> None:
    """Once response headers arrived, a retryable failure is final."""
    state = CallRetryState(POLICY)
    state.start_attempt()
    state.on_headers()
    assert state.on_failure(StatusCode.UNAVAILABLE) is None


def test_buffer_bounds_commit() -> None:
    """Past the per-call or channel bound the call commits and frees its bytes."""
    pool = RetryBufferPool(1000)
    state = CallRetryState(POLICY, pool=pool, per_call_limit=600)
    assert state.buffer(500)
    assert pool.in_use == 500
    assert not state.buffer(200)
    assert state.committed
    assert pool.in_use == 0
    other = CallRetryState(POLICY, pool=pool)
    assert other.per_call_limit == DEFAULT_PER_RPC_BUFFER_BYTES
    third = CallRetryState(POLICY, pool=pool)
    assert other.buffer(900)
    assert not third.buffer(200)  # the channel's pool is full
    other.on_success()
    assert pool.in_use == 0


def test_throttle_stops_retries() -> None:
    """With maxTokens 4, the second retryable failure leaves 2 = max/2 tokens: no retry."""
    throttle = RetryThrottle(RetryThrottling(max_tokens=4, token_ratio=0.5))
    results = []
    for _ in range(3):
        state = CallRetryState(POLICY, throttle=throttle)
        state.start_attempt()
        results.append(state.on_failure(StatusCode.UNAVAILABLE) is not None)
    assert results == [True, False, False]
    state = CallRetryState(POLICY, throttle=throttle)
    state.on_success()
    assert throttle.tokens == 1.5
    assert not throttle.retries_allowed


class ThrottleMachine(RuleBasedStateMachine):
    """The token bucket against a direct model of gRFC A6's rules."""

    def __init__(self) -> None:
        super().__init__()
        self.max_tokens = 10.0
        self.ratio = 0.3
        self.throttle = RetryThrottle(RetryThrottling(max_tokens=10, token_ratio=0.3))
        self.model = 10.0

    @rule()
    def failure(self) -> None:
        """A retryable failure takes one token, not below zero."""
        allowed = self.throttle.on_failure()
        self.model = max(0.0, self.model - 1)
        assert allowed == (self.model > self.max_tokens / 2)

    @rule()
    def success(self) -> None:
        """A success gives back tokenRatio, capped at maxTokens."""
        self.throttle.on_success()
        self.model = min(self.max_tokens, self.model + self.ratio)

    @precondition(lambda self: self.model < 1)
    @rule()
    def nearly_empty(self) -> None:
        """A nearly empty bucket allows no retries."""
        assert not self.throttle.retries_allowed

    @invariant()
    def matches_model(self) -> None:
        """The bucket holds what the model says, within [0, maxTokens]."""
        assert self.throttle.tokens == pytest.approx(self.model)
        assert 0 <= self.throttle.tokens <= self.max_tokens


TestThrottleMachine = ThrottleMachine.TestCase


class RetryStateMachine(RuleBasedStateMachine):
    """A call's state never retries once committed, nor beyond maxAttempts."""

    def __init__(self) -> None:
        super().__init__()
        self.pool = RetryBufferPool(5000)
        self.state = CallRetryState(POLICY, pool=self.pool, per_call_limit=3000)
        self.state.start_attempt()

    @rule(nbytes=st.integers(0, 2000))
    def buffer(self, nbytes: int) -> None:
        """Buffering either fits both bounds or commits."""
        kept = self.state.buffer(nbytes)
        assert kept != self.state.committed or not kept

    @rule(code=st.sampled_from([StatusCode.UNAVAILABLE, StatusCode.INTERNAL]))
    def fail(self, code: StatusCode) -> None:
        """A failure retries only when uncommitted, retryable and attempts remain."""
        was_committed = self.state.committed
        delay = self.state.on_failure(code)
        if delay is not None:
            assert not was_committed
            assert code is StatusCode.UNAVAILABLE
            assert 0 <= delay <= POLICY.max_backoff
            self.state.start_attempt()
        else:
            assert self.state.committed

    @rule()
    def headers(self) -> None:
        """Headers commit."""
        self.state.on_headers()
        assert self.state.committed

    @invariant()
    def bounded(self) -> None:
        """Attempts never exceed maxAttempts; a committed call holds no pool bytes."""
        assert self.state.attempts <= POLICY.max_attempts
        if self.state.committed:
            assert self.pool.in_use == 0
        assert self.pool.in_use <= 3000


TestRetryStateMachine = RetryStateMachine.TestCase
