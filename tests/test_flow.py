"""Unit tests for ``trio_h2t._flow``: inbound flow-control accounting, sans-IO.

The Hypothesis test drives a :class:`StreamInFlow` against a model of the *sender*:
the sender may only send what its window allows, and every increment the receiver
returns (WINDOW_UPDATE, or SETTINGS growth through ``new_limit``) adds to that window.
After every step the conservation identities must hold.
"""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from trio_h2t._flow import BdpEstimator, ConnectionInFlow, StreamInFlow

MAX_WINDOW = 2**31 - 1


# ============================================================ ConnectionInFlow


def test_connection_window_update_is_coalesced_until_the_ratio() -> None:
    """on_data returns 0 until a quarter of the window is unacked, then all of it at once."""
    f = ConnectionInFlow(limit=1000, ratio=0.25)
    assert f.on_data(100) == 0
    assert f.on_data(149) == 0
    assert f.unacked == 249
    assert f.on_data(1) == 250
    assert (f.unacked, f.received) == (0, 250)
    assert f.on_data(1000) == 1000  # one big frame is returned at once


def test_connection_reset_returns_everything_unacked() -> None:
    """reset hands back whatever is unacked (sent just before a BDP ping)."""
    f = ConnectionInFlow(limit=1000, ratio=0.5)
    f.on_data(300)
    assert f.reset() == 300
    assert f.reset() == 0
    assert f.received == 300


def test_connection_new_limit_only_grows() -> None:
    """new_limit advertises the growth, and ignores a smaller limit."""
    f = ConnectionInFlow(limit=1000, ratio=0.25)
    assert f.new_limit(500) == 0
    assert f.new_limit(1000) == 0
    assert f.new_limit(4000) == 3000
    assert f.limit == 4000


# ============================================================ StreamInFlow


def test_stream_read_returns_credit_at_the_ratio() -> None:
    """Credit goes back as the application reads, coalesced to a quarter window."""
    f = StreamInFlow(limit=1000, ratio=0.25)
    f.on_data(600)
    assert f.on_read(200) == 0
    assert (f.pending_data, f.pending_update) == (400, 200)
    assert f.on_read(50) == 250
    assert (f.pending_update, f.acked) == (0, 250)


def test_stream_receipt_alone_returns_no_credit() -> None:
    """Receiving is not reading: no stream credit goes back for unread bytes."""
    f = StreamInFlow(limit=1000, ratio=0.25)
    f.on_data(1000)
    assert (f.pending_data, f.acked, f.pending_update) == (1000, 0, 0)


def test_stream_reading_more_than_buffered_is_an_error() -> None:
    """on_read past what was received raises ValueError."""
    f = StreamInFlow(limit=1000, ratio=0.25)
    f.on_data(10)
    with pytest.raises(ValueError, match="only 10"):
        f.on_read(11)


def test_stream_request_grants_beyond_the_window_at_once() -> None:
    """request(n) with n > window grants the shortfall; reads then pay the grant off."""
    f = StreamInFlow(limit=1000, ratio=0.25)
    assert f.request(500) == 0  # within what the sender may still send
    grant = f.request(3000)
    assert grant == 2000
    assert (f.delta, f.acked) == (2000, 2000)
    assert f.request(3000) == 0  # already granted
    f.on_data(3000)
    assert f.on_read(1900) == 0  # pays the grant off first: nothing owed yet
    assert (f.delta, f.pending_update) == (100, 0)
    assert f.on_read(600) == 500  # 100 more pays the grant off, 500 is owed
    assert (f.delta, f.pending_update, f.acked) == (0, 0, 2500)


def test_stream_release_forgets_everything_owed() -> None:
    """release drops buffered data, pending updates and grants."""
    f = StreamInFlow(limit=1000, ratio=0.5)
    f.on_data(900)
    f.on_read(100)
    f.request(5000)
    f.release()
    assert (f.pending_data, f.pending_update, f.delta) == (0, 0, 0)


def test_stream_new_limit_counts_its_credit_as_acked() -> None:
    """new_limit grows the window; the growth (sent as SETTINGS) counts as acked."""
    f = StreamInFlow(limit=1000, ratio=0.25)
    assert f.new_limit(800) == 0
    assert f.new_limit(3000) == 2000
    assert (f.limit, f.acked) == (3000, 2000)


# ------------------------------------------------------------ Hypothesis: conservation

ops = st.lists(
    st.one_of(
        st.tuples(st.just("data"), st.integers(0, 70_000)),
        st.tuples(st.just("read"), st.integers(1, 70_000)),
        st.tuples(st.just("request"), st.integers(0, 300_000)),
        st.tuples(st.just("grow"), st.integers(0, 400_000)),
    ),
    max_size=60,
)


@given(
    limit=st.integers(65_535, 1_000_000),
    ratio=st.sampled_from([0.25, 0.5, 1.0, 0.1]),
    steps=ops,
)
def test_stream_in_flow_conserves_credit(
    limit: int, ratio: float, steps: list[tuple[str, int]]
) -> None:
    """sent == read + pending_data, and the sender's window matches the bookkeeping."""
    f = StreamInFlow(limit=limit, ratio=ratio)
    sender_window = limit  # what the peer may still send, from the peer's side
    sent = 0  # every byte the sender sent (the flow does not count them itself)
    read = 0
    credited = 0  # every increment returned to the peer, whatever the path
    for op, n in steps:
        if op == "data":
            n = min(n, sender_window)  # the sender obeys its window (h2 enforces it)
            f.on_data(n)
            sent += n
            sender_window -= n
        elif op == "read":
            n = min(n, f.pending_data)
            if n == 0:
                continue
            inc = f.on_read(n)
            read += n
            sender_window += inc
            credited += inc
        elif op == "request":
            inc = f.request(n)
            sender_window += inc
            credited += inc
            # After a request the sender may send everything asked for (within 2^31-1).
            if f.limit + f.delta < MAX_WINDOW:
                assert sender_window >= n - f.pending_data
        else:
            inc = f.new_limit(n)
            sender_window += inc  # carried by the SETTINGS change
            credited += inc
        # -- the identities, after every step
        assert sent == read + f.pending_data
        assert f.acked == credited
        assert sender_window == f.limit + f.delta - f.pending_data - f.pending_update
        assert 0 <= sender_window <= MAX_WINDOW
        assert f.pending_data <= f.limit + f.delta  # an unread stream holds one window
        assert 0 <= f.pending_update < f.limit * f.ratio  # coalesced, never hoarded
        assert f.delta >= 0


# ============================================================ BdpEstimator


def test_bdp_pings_once_per_round_trip() -> None:
    """add asks for a ping on the first frame only, until the ping is acked."""
    bdp = BdpEstimator(initial=65_535, limit=16 * 2**20)
    assert bdp.add(1000) is True
    assert bdp.add(1000) is False
    assert bdp.add(1000) is False
    assert bdp.sample == 3000


def test_bdp_ack_before_the_ping_was_written_is_ignored() -> None:
    """An ack without a timesnap (ping never written) yields no estimate and re-arms."""
    bdp = BdpEstimator(initial=65_535, limit=16 * 2**20)
    bdp.add(50_000)
    assert bdp.calculate(100.0) == 0
    assert bdp.add(10) is True


def test_bdp_grows_to_twice_a_full_sample() -> None:
    """A round trip that fills 2/3 of the window at peak bandwidth doubles the sample."""
    bdp = BdpEstimator(initial=65_535, limit=16 * 2**20)
    bdp.add(16_384)
    now = 100.0
    bdp.timesnap(now)
    for _ in range(3):
        bdp.add(16_384)
    now = 100.01
    assert bdp.calculate(now) == 2 * 4 * 16_384
    assert bdp.bdp == 2 * 4 * 16_384


def test_bdp_small_sample_does_not_grow() -> None:
    """A round trip carrying under 2/3 of the window leaves it alone."""
    bdp = BdpEstimator(initial=65_535, limit=16 * 2**20)
    bdp.add(1000)
    now = 100.0
    bdp.timesnap(now)
    now = 100.01
    assert bdp.calculate(now) == 0
    assert bdp.bdp == 65_535


def test_bdp_is_capped_and_stops_pinging_at_the_limit() -> None:
    """Growth stops at ``limit``; once there, no more pings are asked for."""
    bdp = BdpEstimator(initial=65_535, limit=100_000)
    bdp.add(90_000)
    now = 100.0
    bdp.timesnap(now)
    now = 100.01
    assert bdp.calculate(now) == 100_000
    assert bdp.add(90_000) is False


def test_bdp_does_not_grow_below_peak_bandwidth() -> None:
    """A full sample that is slower than the best seen so far does not grow the window."""
    bdp = BdpEstimator(initial=65_535, limit=16 * 2**20)
    bdp.add(60_000)
    now = 100.0
    bdp.timesnap(now)
    now = 100.001
    first = bdp.calculate(now)
    assert first == 120_000
    bdp.add(100_000)
    bdp.timesnap(now)
    now = 101.001  # much slower round trip: lower bandwidth than the peak
    assert bdp.calculate(now) == 0
    assert bdp.bdp == first


def test_bdp_ping_at_mock_clock_time_zero_is_timed() -> None:
    """A ping written at t=0 (a MockClock's start) still times its round trip."""
    bdp = BdpEstimator(initial=65_535, limit=16 * 2**20)
    bdp.add(60_000)
    bdp.timesnap(0.0)
    assert bdp.calculate(0.001) == 120_000


def _bytes_until_probe(bdp: BdpEstimator, frame: int = 16_384) -> int:
    """Feed ``frame``-byte DATA frames until ``add`` asks for a probe; return the bytes."""
    sent = frame
    while not bdp.add(frame):
        sent += frame
    return sent


def test_bdp_probes_less_often_while_round_trips_carry_little_of_the_window() -> None:
    """The first probe goes at once; after a round trip carrying little of the window
    the next waits for one estimate of data (half an estimate, doubled), and each
    such round trip doubles the wait up to eight estimates; a round trip that fills
    2/3 of the window (growing it) brings the spacing back to half an estimate."""
    window = 1 << 20
    bdp = BdpEstimator(initial=window, limit=16 * 2**20)
    assert bdp.add(16_384) is True
    now = 100.0
    waits = []
    for _ in range(6):
        bdp.timesnap(now)
        assert bdp.calculate(now + 0.001) == 0  # 16 KiB of a 1 MiB window: no growth
        now += 1.0
        waits.append(_bytes_until_probe(bdp))
    # (The frame that started a probe counts towards the next one's spacing.)
    assert [(w + 16_384) / window for w in waits] == [1, 2, 4, 8, 8, 8]
    bdp.timesnap(now)
    for _ in range(48):  # 768 KiB more in this round trip: over 2/3 of the window
        bdp.add(16_384)
    assert bdp.calculate(now + 0.001) > window
    assert bdp.add(16_384) is True  # the window was the limit: probe again at once
    bdp.timesnap(now + 1.0)
    bdp.calculate(now + 1.001)  # 16 KiB of the grown window
    assert _bytes_until_probe(bdp) + 16_384 == bdp.bdp  # half an estimate, doubled once
