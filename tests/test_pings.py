"""The sans-IO keepalive decisions (``_pings.py``) and the keepalive options' checks."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest
from hypothesis import given, strategies as st

from trio_h2t import ErrorCodes, GoAwayError, TransportConfig
from trio_h2t._pings import (
    MAX_PING_STRIKES,
    NO_STREAM_PING_INTERVAL,
    KeepaliveAction,
    KeepaliveTimer,
    PingEnforcer,
    jittered_age,
)

WAIT, PING, DORMANT, TIMEOUT = (
    KeepaliveAction.WAIT,
    KeepaliveAction.PING,
    KeepaliveAction.DORMANT,
    KeepaliveAction.TIMEOUT,
)

# ------------------------------------------------------------------ KeepaliveTimer


def test_timer_pings_after_an_interval_of_silence() -> None:
    """With nothing read since the start, the first poll (at start + interval) pings."""
    timer = KeepaliveTimer(interval=10, timeout=20, start=0)
    assert timer.first_deadline == 10
    assert timer.poll(10, last_read=-math.inf) == (PING, 20)
    assert timer.ping_outstanding


def test_timer_times_out_without_any_read_after_its_ping() -> None:
    """A ping with nothing read for ``timeout`` after it ends in TIMEOUT, not a second ping."""
    timer = KeepaliveTimer(interval=10, timeout=20, start=0)
    assert timer.poll(10, -math.inf) == (PING, 20)
    assert timer.poll(20, -math.inf) == (WAIT, 30)  # one ping outstanding at a time
    assert timer.poll(30, -math.inf) == (TIMEOUT, math.inf)


def test_timer_timeout_shorter_than_interval() -> None:
    """With timeout < interval the next look is the ping's deadline."""
    timer = KeepaliveTimer(interval=60, timeout=5, start=0)
    assert timer.poll(60, 0) == (PING, 65)
    assert timer.poll(65, 0) == (TIMEOUT, math.inf)


def test_timer_any_read_postpones_the_ping() -> None:
    """A read moves the next look to read time + interval, with no ping."""
    timer = KeepaliveTimer(interval=10, timeout=20, start=0)
    assert timer.poll(10, last_read=7) == (WAIT, 17)
    assert timer.poll(17, last_read=7) == (PING, 27)


def test_timer_a_read_answers_the_outstanding_ping() -> None:
    """A read after the ping clears it: no timeout, the next ping an interval after the read."""
    timer = KeepaliveTimer(interval=10, timeout=20, start=0)
    assert timer.poll(10, 0) == (PING, 20)
    assert timer.poll(20, last_read=11) == (WAIT, 21)
    assert not timer.ping_outstanding
    assert timer.poll(21, 11) == (PING, 31)


def test_timer_pings_every_interval_not_interval_plus_timeout() -> None:
    """An ACK read at once after each ping gives one ping per interval (grpc-go's
    TestKeepaliveClientFrequency)."""
    timer = KeepaliveTimer(interval=10, timeout=20, start=0)
    pings = []
    now, last_read = timer.first_deadline, -math.inf
    while now <= 100:
        action, deadline = timer.poll(now, last_read)
        if action is PING:
            pings.append(now)
            last_read = now  # the ACK arrives in the same instant
        now = deadline
    assert pings == [10, 20, 30, 40, 50, 60, 70, 80, 90, 100]


def test_timer_goes_dormant_and_forgets_its_ping() -> None:
    """``may_sleep`` makes the timer dormant; once woken without reads, it pings at once."""
    timer = KeepaliveTimer(interval=10, timeout=20, start=0)
    assert timer.poll(10, 0) == (PING, 20)
    assert timer.poll(15, 0, may_sleep=True) == (DORMANT, math.inf)
    assert not timer.ping_outstanding  # no timeout counts while dormant
    assert timer.poll(500, 0) == (PING, 510)


def test_timer_woken_after_reads_waits_an_interval_from_the_read() -> None:
    """Reads while dormant count: woken soon after one, the timer waits instead of pinging."""
    timer = KeepaliveTimer(interval=10, timeout=20, start=0)
    assert timer.poll(10, 0, may_sleep=True) == (DORMANT, math.inf)
    assert timer.poll(100, last_read=95) == (WAIT, 105)


@given(
    reads=st.lists(st.floats(min_value=0, max_value=1000), max_size=20),
    interval=st.floats(min_value=10, max_value=100),
    timeout=st.floats(min_value=1, max_value=100),
)
def test_timer_never_times_out_while_reads_keep_coming(
    reads: list[float], interval: float, timeout: float
) -> None:
    """TIMEOUT only after ``timeout`` without reads following a ping, and the ping only
    after ``interval`` without reads."""
    timer = KeepaliveTimer(interval=interval, timeout=timeout, start=0)
    reads = sorted(reads)
    now, last_read, ping_at = timer.first_deadline, -math.inf, None
    for _ in range(200):
        last_read = max([r for r in reads if r <= now], default=-math.inf)
        action, deadline = timer.poll(now, last_read)
        silence = now - max(last_read, 0)
        if action is PING:
            assert silence >= interval - 1e-9  # (read + interval) - read, in floats
            ping_at = now
        elif action is TIMEOUT:
            assert ping_at is not None
            assert last_read < ping_at
            assert now >= ping_at + timeout
            break
        assert deadline > now
        now = deadline


# ------------------------------------------------------------------ PingEnforcer


def _enforcer(min_interval: float = 300, permit: bool = False) -> PingEnforcer:
    return PingEnforcer(min_interval=min_interval, permit_without_stream=permit)


def test_enforcer_third_violation_ends_the_connection() -> None:
    """The first ping is free; strikes 1 and 2 pass; the third violation gives GOAWAY."""
    enforcer = _enforcer()
    assert MAX_PING_STRIKES == 2
    results = [enforcer.on_ping(t, streams_open=True, writes=0) for t in (0, 1, 2, 3)]
    assert results == [False, False, False, True]
    assert enforcer.strikes == 3


def test_enforcer_first_ping_never_strikes() -> None:
    """However early, and without streams, the first ping is no strike."""
    enforcer = _enforcer()
    assert not enforcer.on_ping(0, streams_open=False, writes=0)
    assert enforcer.strikes == 0


def test_enforcer_pings_within_policy_never_strike() -> None:
    """Pings ``min_interval`` apart with a stream open, or 2 h apart without, never strike."""
    enforcer = _enforcer()
    for i in range(20):
        assert not enforcer.on_ping(300.0 * i, streams_open=True, writes=0)
    assert enforcer.strikes == 0
    idle = _enforcer()
    for i in range(5):
        assert not idle.on_ping(NO_STREAM_PING_INTERVAL * i, streams_open=False, writes=0)
    assert idle.strikes == 0


def test_enforcer_without_streams_needs_two_hours() -> None:
    """Without streams (and without permission) min_interval is not enough."""
    enforcer = _enforcer()
    assert [enforcer.on_ping(600.0 * i, streams_open=False, writes=0) for i in range(4)] == [
        False,
        False,
        False,
        True,
    ]


def test_enforcer_permit_without_stream_uses_min_interval() -> None:
    """With ``permit_without_stream`` an idle connection is held to min_interval only."""
    enforcer = _enforcer(min_interval=60, permit=True)
    for i in range(10):
        assert not enforcer.on_ping(60.0 * i, streams_open=False, writes=0)
    # 600 is 60 s after the last; then three pings 30 s apart are three strikes.
    assert [enforcer.on_ping(600 + 30.0 * i, streams_open=False, writes=0) for i in range(4)] == [
        False,
        False,
        False,
        True,
    ]


def test_enforcer_our_writes_clear_the_strikes() -> None:
    """A HEADERS/DATA write since the last ping clears the strikes and skips the check."""
    enforcer = _enforcer()
    writes = 0
    for t in range(100):
        if t % 2:
            writes += 1  # we wrote between every other pair of pings
        assert not enforcer.on_ping(float(t), streams_open=True, writes=writes)
        assert enforcer.strikes <= 1


def test_enforcer_zero_interval_with_permission_never_strikes() -> None:
    """ping_min_interval=0 with permission turns the policy off."""
    enforcer = _enforcer(min_interval=0, permit=True)
    for t in range(50):
        assert not enforcer.on_ping(t / 10, streams_open=t % 2 == 0, writes=0)


# ------------------------------------------------------------------ age jitter


@given(st.floats(min_value=0, max_value=1))
def test_age_jitter_stays_within_ten_percent(u: float) -> None:
    """The jittered age is within [0.9, 1.1] of the configured age."""
    assert 90 - 1e-9 <= jittered_age(100, u) <= 110 + 1e-9


def test_age_jitter_ends() -> None:
    """u = 0, 0.5, 1 give 0.9, 1 and 1.1 times the age."""
    assert [jittered_age(100, u) for u in (0, 0.5, 1)] == pytest.approx([90, 100, 110])


# ------------------------------------------------------------------ the options


def test_keepalive_defaults_follow_grpc_go() -> None:
    """Defaults: client keepalive off, 20 s timeout, server pings every 2 h, 5 min policy."""
    config = TransportConfig()
    assert config.keepalive_time is None
    assert config.keepalive_timeout == 20
    assert not config.keepalive_permit_without_stream
    assert config.server_keepalive_time == 7200
    assert config.max_connection_idle is None
    assert config.max_connection_age is None
    assert config.max_connection_age_grace is None
    assert config.ping_min_interval == 300
    assert not config.ping_permit_without_stream


@pytest.mark.parametrize(
    ("field", "value", "error", "words"),
    [
        ("keepalive_time", 9.99, ValueError, ">= 10"),
        ("keepalive_time", 0, ValueError, ">= 10"),
        ("keepalive_time", "10", TypeError, "or None"),
        ("keepalive_time", True, TypeError, "bool"),
        ("keepalive_timeout", 0, ValueError, "> 0"),
        ("keepalive_timeout", None, TypeError, "a number"),
        ("keepalive_timeout", math.nan, ValueError, "nan"),
        ("keepalive_permit_without_stream", 1, TypeError, "a bool"),
        ("server_keepalive_time", 0.5, ValueError, ">= 1"),
        ("max_connection_idle", 0, ValueError, "> 0 or None"),
        ("max_connection_idle", -1, ValueError, "> 0 or None"),
        ("max_connection_age", 0, ValueError, "> 0 or None"),
        ("max_connection_age", [1], TypeError, "list"),
        ("max_connection_age_grace", -1, ValueError, ">= 0 or None"),
        ("ping_min_interval", -1, ValueError, ">= 0"),
        ("ping_min_interval", None, TypeError, "a number"),
        ("ping_permit_without_stream", "yes", TypeError, "a bool"),
        ("dynamic_window", None, TypeError, "a bool"),
    ],
)
def test_keepalive_options_are_checked(field: str, value: Any, error: type, words: str) -> None:
    """A wrong keepalive option raises a clear TypeError or ValueError naming the field."""
    with pytest.raises(error, match=field) as info:
        TransportConfig(**{field: value})
    assert words in str(info.value)


def test_keepalive_options_accept_their_edges() -> None:
    """The smallest allowed values, None and math.inf are accepted."""
    TransportConfig(
        keepalive_time=10,
        keepalive_timeout=0.001,
        server_keepalive_time=1,
        max_connection_idle=0.001,
        max_connection_age=math.inf,
        max_connection_age_grace=0,
        ping_min_interval=0,
    )
    TransportConfig(server_keepalive_time=None, keepalive_time=math.inf)


def test_too_many_pings_goaway_and_the_doubling_recipe() -> None:
    """GoAwayError.too_many_pings is true only for ENHANCE_YOUR_CALM + too_many_pings;
    the documented recipe doubles keepalive_time."""
    assert GoAwayError(ErrorCodes.ENHANCE_YOUR_CALM, 0, b"too_many_pings").too_many_pings
    assert not GoAwayError(ErrorCodes.ENHANCE_YOUR_CALM, 0, b"other").too_many_pings
    assert not GoAwayError(ErrorCodes.NO_ERROR, 0, b"too_many_pings").too_many_pings
    config = TransportConfig(keepalive_time=10)
    assert config.keepalive_time is not None
    doubled = dataclasses.replace(config, keepalive_time=2 * config.keepalive_time)
    assert doubled.keepalive_time == 20
