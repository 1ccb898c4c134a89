"""Inbound flow-control accounting: when to send WINDOW_UPDATE. Sans-IO, no trio.

Theory of operation
-------------------
h2 enforces the windows (a peer that overruns one gets FLOW_CONTROL_ERROR) and frames
the WINDOW_UPDATEs; this module only decides *when* credit goes back, following
grpc-go's ``inFlow`` / ``trInFlow`` (reference §3):

- The **connection** window is replenished on *receipt* (``ConnectionInFlow``), so a
  slow stream can never starve the others of connection window (within the
  inbound budget, below).
- A **stream** window is replenished as the *application consumes* data
  (``StreamInFlow.on_read``), so an application that stops reading stops its peer
  after one window: memory per stream stays bounded by that window.
- Either sends its update once ``ratio`` (default 1/2) of its window is pending, so
  updates are coalesced, not one per frame.
- A read larger than what the peer may still send gets an immediate grant
  (``StreamInFlow.request``, grpc-go's ``maybeAdjust``), so a message bigger than
  the window cannot deadlock.
- When a stream ends, is reset or is cancelled, its unread bytes are released
  (``StreamInFlow.release``): nothing is owed to a finished stream, and the
  connection window already has them back.
- **The inbound budget** (``TransportConfig.max_unread_bytes``): replenishing the
  connection window on receipt alone would let a peer fill every stream window of
  every stream the application does not read (100 streams of up to 16 MiB each).
  So the connection window given back is capped: at any time the bytes buffered
  (received on open streams, not yet read by the application) plus what the peer
  may still send on the connection stay within the budget
  (``ConnectionInFlow.grant``). h2 refuses a peer that overruns the window we
  granted (FLOW_CONTROL_ERROR), so buffered body bytes never exceed the budget.
  While the budget is not the bound (the usual case) the connection window is
  replenished on receipt exactly as grpc-go's; when it is, the credit comes back
  as the application reads or streams end (``grant`` is tried again there).

Conservation (checked by the tests): for each stream, until ``release``, the bytes
the peer sent equal ``read + pending_data`` (``pending_data``: what the application
has not read yet), and the peer's window is
``limit + delta - pending_data - pending_update``. The sent bytes are counted by the
tests, not here (``tests/test_flow.py``'s model of the sender;
``tests/test_connection.py`` reads the sender's window off the peer's h2): nothing in
the transport needs the total.
"""

from __future__ import annotations

from typing import final

__all__ = ["BdpEstimator", "ConnectionInFlow", "StreamInFlow"]


@final
class ConnectionInFlow:
    """Connection-level receive window, replenished on receipt within the inbound
    budget.

    Owner: the reader, but for ``buffered`` (shared: the streams' ``StreamInFlow``
    change it, in whichever task reads or closes a stream) and the ``grant`` /
    ``reset`` calls made after a read or a close frees some of it; every call is
    synchronous, so no await separates a read of these fields from its write.

    Invariant (``budget`` >= ``limit`` at construction, and every increment
    returned here is sent): ``buffered + (limit - unacked) <= budget``, where
    ``limit - unacked`` is what the peer may still send on the connection.
    """

    __slots__ = ("budget", "buffered", "limit", "ratio", "received", "unacked")

    def __init__(self, limit: int, ratio: float, budget: int | None = None) -> None:
        if budget is not None and budget < limit:
            raise ValueError(f"budget {budget} is below the window {limit}")
        self.limit = limit  # the window we have granted the peer
        self.ratio = ratio
        self.unacked = 0  # received, not yet returned with a WINDOW_UPDATE
        self.received = 0  # total, for statistics and conservation checks
        #: Bytes received on open streams and not yet read (``StreamInFlow``).
        self.buffered = 0
        #: The most ``buffered`` plus the peer's window may reach (immutable after init).
        self.budget = budget if budget is not None else 2**62

    def on_data(self, n: int) -> int:
        """Account ``n`` received bytes; return the increment to send now, or 0.

        The stream's ``StreamInFlow.on_data`` must come first, so ``buffered``
        already holds them."""
        self.received += n
        unacked = self.unacked + n
        self.unacked = unacked
        # Necessary for ``grant`` to return anything (its threshold is never lower):
        # one comparison per DATA frame while the window is not due.
        if unacked >= self.limit * self.ratio:
            return self.grant()
        return 0

    def grant(self) -> int:
        """The increment to send now (0 if none is due): what brings the peer's window
        back to ``limit``, or as near as the budget allows, once it is at least
        ``ratio`` of that target (so updates stay coalesced)."""
        limit = self.limit
        target = self.budget - self.buffered
        if target > limit:
            target = limit
        inc = target - limit + self.unacked
        if inc > 0 and inc >= target * self.ratio:
            self.unacked -= inc
            return inc
        return 0

    def reset(self) -> int:
        """Return everything unacked the budget allows, whatever the threshold: sent
        just before a BDP ping."""
        limit = self.limit
        target = self.budget - self.buffered
        if target > limit:
            target = limit
        inc = target - limit + self.unacked
        if inc > 0:
            self.unacked -= inc
            return inc
        return 0

    def new_limit(self, n: int) -> int:
        """Grow the window to ``n``; return the increment to advertise (or 0). The
        growth is capped by the budget like any grant (the rest comes later)."""
        if n <= self.limit:
            return 0
        window = self.limit - self.unacked
        self.limit = n
        self.unacked = n - window
        return self.reset()


@final
class StreamInFlow:
    """Stream-level receive window, replenished as the application reads.

    Owner: the stream's consumer for ``on_read``/``request``; the reader for
    ``on_data`` and ``new_limit``; whichever task closes the stream for ``release``
    (``H2Stream.core_close``). All calls are synchronous, so no await separates read
    and write.
    """

    __slots__ = (
        "acked",
        "conn",
        "delta",
        "limit",
        "pending_data",
        "pending_update",
        "ratio",
    )

    def __init__(self, limit: int, ratio: float, conn: ConnectionInFlow | None = None) -> None:
        #: The connection's window, whose ``buffered`` holds this stream's
        #: ``pending_data`` too (immutable after init; None: counted nowhere else).
        self.conn = conn
        self.limit = limit  # window granted by SETTINGS (or BDP growth)
        self.ratio = ratio
        self.pending_data = 0  # received, not yet read by the application
        self.pending_update = 0  # read, not yet returned with a WINDOW_UPDATE
        self.delta = 0  # extra credit granted for a large read
        self.acked = 0  # returned with WINDOW_UPDATEs (including delta grants)

    def on_data(self, n: int) -> None:
        """Account ``n`` flow-controlled bytes received (h2 already checked the window)."""
        self.pending_data += n
        conn = self.conn
        if conn is not None:
            conn.buffered += n

    def on_read(self, n: int) -> int:
        """The application consumed ``n`` bytes; return the increment to send, or 0."""
        if n > self.pending_data:
            raise ValueError(f"read {n} bytes but only {self.pending_data} are buffered")
        self.pending_data -= n
        conn = self.conn
        if conn is not None:
            conn.buffered -= n
        if self.delta:
            paid = min(self.delta, n)
            self.delta -= paid
            n -= paid
        self.pending_update += n
        if self.pending_update >= self.limit * self.ratio:
            inc, self.pending_update = self.pending_update, 0
            self.acked += inc
            return inc
        return 0

    def request(self, n: int) -> int:
        """The application waits for ``n`` more bytes; grant them at once if the peer
        could not otherwise send them. Returns the increment to send, or 0."""
        sender_quota = self.limit - (self.pending_data + self.pending_update) + self.delta
        untransmitted = n - self.pending_data
        if untransmitted > sender_quota:
            grant = min(untransmitted - sender_quota, 2**31 - 1 - self.limit - self.delta)
            if grant > 0:
                self.delta += grant
                self.acked += grant
                return grant
        return 0

    def release(self) -> None:
        """The stream is over: forget what is buffered and owed (it is never acked)."""
        conn = self.conn
        if conn is not None:
            conn.buffered -= self.pending_data
        self.pending_data = 0
        self.pending_update = 0
        self.delta = 0

    def new_limit(self, n: int) -> int:
        """Grow the window to ``n``; return the extra credit this gives the peer (or 0).

        The credit reaches the peer through the SETTINGS_INITIAL_WINDOW_SIZE change
        that accompanies it (RFC 9113 §6.9.2), not through a WINDOW_UPDATE; it is
        counted in ``acked`` so the conservation identity still holds.
        """
        if n <= self.limit:
            return 0
        inc, self.limit = n - self.limit, n
        self.acked += inc
        return inc


# grpc-go bdp_estimator.go constants (reference §3.5).
BDP_PING_DATA = bytes([2, 4, 16, 16, 9, 14, 7, 7])
_ALPHA = 0.9  # weight of a new RTT sample once 10 samples are in
_BETA = 0.66  # grow when a sample fills this fraction of the current estimate
_GAMMA = 2  # ...to this multiple of the sample
#: Not grpc-go: a probe starts only once this fraction of the current estimate has
#: arrived since the previous one started. While the window is what limits the
#: peer, a round trip carries more than that (growth needs 2/3), so probes stay one
#: per round trip; while something else limits it (CPU, on loopback), a round trip
#: carries a small part of the window and probing every round trip cost a PING, its
#: ACK and a connection WINDOW_UPDATE per few frames (docs/flow-control.md).
_PROBE_SPACING = 0.5
#: Not grpc-go either: each probe whose round trip carried less than ``_BETA`` of
#: the estimate (the window did not limit the peer) doubles the spacing, up to this
#: many estimates; a probe that grows the window, or whose round trip filled
#: ``_BETA`` of it, brings it back to ``_PROBE_SPACING``. On loopback between two
#: CPU-bound peers no round trip ever comes near the window, and a probe per half
#: window was still a PING, its ACK and a connection WINDOW_UPDATE every 4 MiB
#: received at the default window (docs/flow-control.md).
_MAX_PROBE_SPACING = 8.0


@final
class BdpEstimator:
    """grpc-go's bandwidth-delay-product estimator. Owner: reader (loopy stamps ``sent``).

    One PING per round trip while data flows (but no more often than once per half
    estimate of data, ``_PROBE_SPACING``, and less often while round trips carry
    little of the window, ``_MAX_PROBE_SPACING``); when a round trip's worth of data
    fills at least 2/3 of the current window and bandwidth is at its peak, the window
    grows to twice the sample, up to ``limit``.
    """

    __slots__ = (
        "bdp",
        "bw_max",
        "gap",
        "is_sent",
        "limit",
        "rtt",
        "sample",
        "sample_count",
        "sent_at",
        "spacing",
    )

    def __init__(self, initial: int, limit: int) -> None:
        self.bdp = initial
        self.limit = limit
        self.sample = 0
        self.bw_max = 0.0
        self.is_sent = False
        self.sent_at: float | None = None  # when loopy wrote the ping (caller's clock)
        self.rtt = 0.0
        self.sample_count = 0
        self.gap = 0  # bytes received since the last probe started
        #: Estimates of data between the starts of two probes (``_PROBE_SPACING``,
        #: doubled by each probe that found the window far from the limit).
        self.spacing = _PROBE_SPACING

    def add(self, n: int) -> bool:
        """Account a received DATA frame; True means "send a BDP ping now"."""
        if self.bdp >= self.limit:
            return False
        self.gap += n
        if not self.is_sent:
            if self.sample_count and self.gap < self.bdp * self.spacing:
                return False
            self.is_sent = True
            self.sample = n
            self.gap = n
            self.sent_at = None
            self.sample_count += 1
            return True
        self.sample += n
        return False

    def timesnap(self, now: float) -> None:
        """Loopy wrote the BDP ping at ``now`` (the caller's clock): start the round trip."""
        self.sent_at = now

    def calculate(self, now: float) -> int:
        """The BDP ping was acked at ``now``; return the new window size, or 0 to keep it.

        ``now`` comes from the caller (``trio.current_time()``), so the estimator reads
        no clock of its own and a ``MockClock`` drives it.
        """
        if not self.is_sent or self.sent_at is None:
            self.is_sent = False
            return 0
        rtt_sample = max(now - self.sent_at, 1e-6)
        if self.sample_count < 10:
            self.rtt += (rtt_sample - self.rtt) / self.sample_count
        else:
            self.rtt += (rtt_sample - self.rtt) * _ALPHA
        self.is_sent = False
        bw_current = self.sample / (self.rtt * 1.5)
        if bw_current > self.bw_max:
            self.bw_max = bw_current
        if self.sample < _BETA * self.bdp:
            # The window was far from limiting the peer: probe less often.
            self.spacing = min(2 * self.spacing, _MAX_PROBE_SPACING)
            return 0
        self.spacing = _PROBE_SPACING
        if bw_current == self.bw_max and self.bdp < self.limit:
            self.bdp = min(_GAMMA * self.sample, self.limit)
            return self.bdp
        return 0
