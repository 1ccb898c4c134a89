"""Keepalive decisions, sans-IO: when to ping, when a silent peer is dead, when a
client pings too often, and when a connection is too old.

Theory of operation
-------------------
Nothing here reads a clock, sleeps or touches a connection: each call takes the
current time (and what happened) as arguments and returns a decision. The keepalive
task (``_keepalive.py``) and the reader (``_reader.py``) do the I/O; the unit tests
(``tests/test_pings.py``) drive these classes directly.

:class:`KeepaliveTimer` is grpc-go's keepalive algorithm (reference §4.1) with
deadlines instead of a timer and a countdown. Liveness is *any* inbound frame: the
reader stores the time of its last read (``ConnectionCore.last_read``), and each
:meth:`KeepaliveTimer.poll` compares it with the last read it acted on:

1. **activity**: a read since then clears the outstanding ping and moves the next
   look to ``last_read + interval``;
2. **timeout**: a ping outstanding for ``timeout`` with nothing read since: dead;
3. **dormancy** (client without streams, unless permitted): forget the ping and
   sleep until woken;
4. otherwise ping if none is outstanding, and look again at the earlier of
   ``now + interval`` and the ping's deadline.

So with a responsive peer a ping goes out every ``interval`` of silence, not every
``interval + timeout`` (grpc-go's ``TestKeepaliveClientFrequency`` guards the same).

:class:`PingEnforcer` is grpc-go's server ``handlePing`` (reference §4.3): strikes for
pings sooner than the policy allows, cleared by our own HEADERS/DATA writes; more than
``MAX_PING_STRIKES`` strikes and the client gets GOAWAY(ENHANCE_YOUR_CALM,
``too_many_pings``).
"""

from __future__ import annotations

import enum
import math
from typing import Final, final

__all__ = [
    "DRAIN_PING_DATA",
    "DRAIN_PING_TIMEOUT",
    "KEEPALIVE_PING_DATA",
    "MAX_PING_STRIKES",
    "NO_STREAM_PING_INTERVAL",
    "MAX_STREAM_ID",
    "TOO_MANY_PINGS",
    "KeepaliveAction",
    "KeepaliveTimer",
    "PingEnforcer",
    "jittered_age",
]

#: The payload of our keepalive PINGs (grpc-go sends 8 zero bytes too); the BDP probe
#: (``_flow.BDP_PING_DATA``) has its own.
KEEPALIVE_PING_DATA: Final = bytes(8)
#: The payload of the PING that follows a drain's first GOAWAY (grpc-go's
#: ``goAwayPing``): its ACK says the client has read that GOAWAY, so every stream it
#: started before is already known to us (reference §5.1).
DRAIN_PING_DATA: Final = bytes((1, 6, 1, 8, 0, 3, 3, 9))
#: Seconds a drain waits for that ACK before it sends the second GOAWAY anyway
#: (grpc-go's 5 s timer in ``outgoingGoAwayHandler``).
DRAIN_PING_TIMEOUT: Final = 5.0
#: The last stream id of a drain's first GOAWAY: the highest a stream id can be
#: (RFC 9113 §5.1.1), so it refuses nothing (grpc-go writes MaxUint32, masked to it).
MAX_STREAM_ID: Final = 2**31 - 1
#: grpc-go's ``maxPingStrikes``: the third violation (strikes > 2) ends the connection.
MAX_PING_STRIKES: Final = 2
#: grpc-go's ``defaultPingTimeout``: without streams (and without permission), a client
#: may ping once per 2 h.
NO_STREAM_PING_INTERVAL: Final = 7200.0
#: The debug data of the GOAWAY for a client that pings too often (grpc-go's).
TOO_MANY_PINGS: Final = b"too_many_pings"
#: grpc-go's ``MaxConnectionAge`` jitter: plus or minus 10 %.
AGE_JITTER: Final = 0.1


class KeepaliveAction(enum.Enum):
    """What :meth:`KeepaliveTimer.poll` asks of the keepalive task."""

    WAIT = "wait"  # look again at the returned deadline
    PING = "ping"  # send a keepalive PING, then look again at the deadline
    DORMANT = "dormant"  # sleep, without a deadline, until a stream starts
    TIMEOUT = "timeout"  # nothing arrived in time after our PING: close


@final
class KeepaliveTimer:
    """grpc-go's keepalive algorithm for one connection. Owner of every field: the
    keepalive task (the only caller)."""

    __slots__ = ("_ping_sent_at", "_seen", "interval", "timeout")

    def __init__(self, *, interval: float, timeout: float, start: float) -> None:
        self.interval = interval  # immutable after init
        self.timeout = timeout  # immutable after init
        # The last read time acted on (reads at or before it are old news).
        self._seen = start
        # When our outstanding PING went out; None if none is outstanding.
        self._ping_sent_at: float | None = None

    @property
    def first_deadline(self) -> float:
        """When to poll first: ``interval`` after ``start``."""
        return self._seen + self.interval

    @property
    def ping_outstanding(self) -> bool:
        return self._ping_sent_at is not None

    def poll(
        self, now: float, last_read: float, *, may_sleep: bool = False
    ) -> tuple[KeepaliveAction, float]:
        """Decide at ``now``, the last read having been at ``last_read``.

        ``may_sleep`` says the connection may go dormant (a client with no stream
        open and no permission to ping without one). Returns the action and the
        time to poll next (``math.inf`` for DORMANT and TIMEOUT; after DORMANT, poll
        again once woken).
        """
        if last_read > self._seen:
            # 1. Something arrived: the peer is alive; a ping outstanding is answered.
            self._seen = last_read
            self._ping_sent_at = None
            deadline = last_read + self.interval
            if deadline > now:
                return KeepaliveAction.WAIT, deadline
            # Silent for a whole interval since that read: go on as if none came.
        sent = self._ping_sent_at
        if sent is not None and now >= sent + self.timeout:
            return KeepaliveAction.TIMEOUT, math.inf  # 2.
        if may_sleep:
            self._ping_sent_at = None  # 3. no deadline while dormant
            return KeepaliveAction.DORMANT, math.inf
        action = KeepaliveAction.WAIT
        if sent is None:
            sent = self._ping_sent_at = now  # 4.
            action = KeepaliveAction.PING
        return action, min(now + self.interval, sent + self.timeout)


@final
class PingEnforcer:
    """The server's policy on client PINGs (grpc-go's ``EnforcementPolicy``).

    Owner of every field: the reader (the only caller).
    """

    __slots__ = (
        "_last_ping_at",
        "_writes_seen",
        "min_interval",
        "permit_without_stream",
        "strikes",
    )

    def __init__(self, *, min_interval: float, permit_without_stream: bool) -> None:
        self.min_interval = min_interval  # immutable after init
        self.permit_without_stream = permit_without_stream  # immutable after init
        self.strikes = 0
        # None until the first PING: the first one never strikes (grpc-go's
        # ``lastPingAt`` starts at the zero time).
        self._last_ping_at: float | None = None
        # Our HEADERS/DATA writes counted when the last PING arrived (loopy's
        # counter): a change means we wrote since, which clears the strikes.
        self._writes_seen = 0

    def on_ping(self, now: float, *, streams_open: bool, writes: int) -> bool:
        """A client PING (not an ACK) arrived at ``now``. Returns True if the client
        has now struck out: answer with GOAWAY(ENHANCE_YOUR_CALM, ``too_many_pings``).

        ``streams_open``: a stream is open on the connection. ``writes``: loopy's
        running count of HEADERS and DATA frames written (any monotonic count).
        """
        last = self._last_ping_at
        self._last_ping_at = now
        if writes != self._writes_seen:
            # We wrote HEADERS or DATA since the last PING: the client has a reason
            # to check on us (grpc-go's resetPingStrikes). No policy check this time.
            self._writes_seen = writes
            self.strikes = 0
            return False
        if last is None:
            return False
        if not streams_open and not self.permit_without_stream:
            allowed = NO_STREAM_PING_INTERVAL
        else:
            allowed = self.min_interval
        if last + allowed > now:
            self.strikes += 1
            return self.strikes > MAX_PING_STRIKES
        return False


def jittered_age(age: float, u: float) -> float:
    """``age`` with grpc-go's jitter: scaled by a factor in [0.9, 1.1], ``u`` being a
    uniform random number in [0, 1]."""
    return age * (1 + AGE_JITTER * (2 * u - 1))
