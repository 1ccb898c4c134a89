"""Reconnect backoff (trio_h2t/grpc/_backoff.py, grpc's doc/connection-backoff.md)."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from trio_h2t.grpc import ConnectionBackoff
from trio_h2t.grpc._backoff import BackoffState


def test_defaults_are_grpcs() -> None:
    """The defaults are doc/connection-backoff.md's: 1 s, 1.6, 0.2, 120 s, 20 s."""
    policy = ConnectionBackoff()
    assert (
        policy.initial_backoff,
        policy.multiplier,
        policy.jitter,
        policy.max_backoff,
        policy.min_connect_timeout,
    ) == (1.0, 1.6, 0.2, 120.0, 20.0)


def test_without_jitter_the_sequence_grows_by_the_multiplier_to_the_cap() -> None:
    """With the random source at its midpoint: 1, 1.6, 2.56, ... capped at 120."""
    state = BackoffState(ConnectionBackoff(), random_source=lambda: 0.5)
    delays = [state.next_delay() for _ in range(14)]
    assert delays[:3] == pytest.approx([1.0, 1.6, 2.56])
    assert delays[-3:] == [120.0, 120.0, 120.0]
    assert state.connect_timeout(delays[0]) == 20.0
    assert state.connect_timeout(delays[-1]) == 120.0
    state.reset()
    assert state.next_delay() == 1.0


@given(
    st.floats(0.001, 10),
    st.floats(1.0, 3.0),
    st.floats(0.0, 0.99),
    st.floats(1.0, 50.0),
    st.lists(st.floats(0.0, 1.0, exclude_max=True), min_size=1, max_size=40),
)
def test_every_delay_stays_within_its_jitter_bounds(
    initial: float, multiplier: float, jitter: float, cap_factor: float, randoms: list[float]
) -> None:
    """Each delay is the un-jittered backoff (initial * multiplier^n, capped) times
    (1 +/- jitter), the first exactly initial_backoff."""
    policy = ConnectionBackoff(
        initial_backoff=initial,
        multiplier=multiplier,
        jitter=jitter,
        max_backoff=initial * cap_factor,
    )
    source = iter(randoms * 2)
    state = BackoffState(policy, random_source=lambda: next(source))
    base = initial
    assert state.next_delay() == initial
    for _ in randoms:
        base = min(base * multiplier, policy.max_backoff)
        delay = state.next_delay()
        assert base * (1 - jitter) - 1e-9 <= delay <= base * (1 + jitter) + 1e-9


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"initial_backoff": 0}, "initial_backoff"),
        ({"multiplier": 0.5}, "multiplier"),
        ({"jitter": 1.0}, "jitter"),
        ({"jitter": -0.1}, "jitter"),
        ({"max_backoff": 0.5}, "below initial_backoff"),
        ({"min_connect_timeout": float("inf")}, "min_connect_timeout"),
    ],
)
def test_bad_parameters_raise_value_error(kwargs: dict[str, float], words: str) -> None:
    """Out-of-range parameters raise ValueError naming the parameter."""
    with pytest.raises(ValueError, match=words):
        ConnectionBackoff(**kwargs)


def test_parameters_are_keyword_only_numbers() -> None:
    """Positional or non-numeric parameters raise TypeError."""
    with pytest.raises(TypeError):
        ConnectionBackoff(1.0)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="seconds as a number"):
        ConnectionBackoff(initial_backoff="1s")  # type: ignore[arg-type]
