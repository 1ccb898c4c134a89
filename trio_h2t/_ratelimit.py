"""A token bucket: how many times a peer may do something, in a burst and over time.

Sans-IO: the caller passes the time (``trio.current_time()`` in the reader), so a
``MockClock`` drives it and the tests need no sleeps.

Used for the RST_STREAM frames a client sends (the Rapid Reset attack,
CVE-2023-44487): each one ends a stream whose handler we may already have started,
so a client resetting streams as fast as it opens them costs the server a handler
start per pair while never counting against MAX_CONCURRENT_STREAMS. nghttp2 bounds
them the same way (its ``stream_reset_burst`` of 1000 and ``stream_reset_rate`` of
33 per second) and ends the connection with GOAWAY(ENHANCE_YOUR_CALM) once the
bucket is empty.
"""

from __future__ import annotations

__all__ = ["TokenBucket"]


class TokenBucket:
    """``burst`` tokens at first; ``rate`` more per second, up to ``burst``.

    Owner: the one task that calls :meth:`take` (the reader).
    """

    __slots__ = ("_burst", "_last", "_rate", "_tokens")

    def __init__(self, burst: int, rate: float, now: float) -> None:
        self._burst = float(burst)  # immutable after init
        self._rate = rate  # immutable after init
        self._tokens = float(burst)  # owner: the caller of take
        self._last = now  # owner: the caller of take

    def take(self, now: float) -> bool:
        """Take one token at time ``now``; False if there was none (the peer is over
        its budget). Synchronous."""
        tokens = self._tokens + (now - self._last) * self._rate
        self._last = now
        if tokens > self._burst:
            tokens = self._burst
        if tokens < 1.0:
            self._tokens = tokens
            return False
        self._tokens = tokens - 1.0
        return True

    @property
    def tokens(self) -> float:
        """Tokens left after the last :meth:`take` (not refilled since)."""
        return self._tokens
