"""A call's replay buffer: what a call that may be sent again keeps (gRFC A6).

Theory of operation
-------------------
A call is sent again, on a new stream, in two cases:

- a *policy retry*: its method's ``methodConfig.retryPolicy`` allows another
  attempt after a failure (``_retry.py`` decides whether and after what delay);
- a *transparent retry*: on a balanced channel, its stream never reached a handler
  (REFUSED_STREAM, a stream above a GOAWAY's last stream id, a closing
  connection), at most ``MAX_TRANSPARENT_RETRIES`` times, not counted as attempts
  (grpc-go does the same; the attempt keeps its ``grpc-previous-rpc-attempts``).

Either is possible only until the call *commits*: response headers arrived (any
response that is not trailers-only; the first response message always comes after
them), the call ended, or what it kept for replay passed the per-call or
channel-wide bound (``CallRetryState.buffer``). A call that may be sent again
carries a :class:`Replay` (a call that never may, on a single-connection channel
without a retry policy, has none and pays nothing). The :class:`~trio_h2t.grpc.Call`
keeps every request frame it sends in ``Replay.frames`` (and ``ended`` once it
half-closed) until it commits; its receiving side, waiting for the response
headers, is where the outcome of an attempt is known, so it is the receiver that
decides, sleeps the backoff, opens the next attempt and replays the frames kept
(``Call._attempt_headers``). While it does, ``switching`` is set: a sender waits on
it before keeping and sending another frame, so frames go out in order. A send that
fails on an attempt that may still be replaced is not an error: its frame is kept,
and the receiver reports the call's status (or replays it). So client interceptors,
which wrap the whole call, see one call whatever number of attempts it made.

``tests/grpc_layer/test_retry.py`` and ``test_retry_streams.py`` show each case
against real servers.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import final

import trio

import trio_h2t

from ._metadata import Metadata
from ._retry import PUSHBACK_HEADER, CallRetryState
from ._status import RpcError, StatusCode

__all__: list[str] = []  # private: the call path's helper

#: Transparent retries of one call (a stream that never reached a handler) on a
#: balanced channel, at most; then the call fails UNAVAILABLE.
MAX_TRANSPARENT_RETRIES = 10
_NEVER_PROCESSED = (
    trio_h2t.StreamRefusedError,
    trio_h2t.GoAwayError,
    trio_h2t.ConnectionClosingError,
)


def never_processed(exc: BaseException) -> bool:
    """Whether ``exc`` (or the transport error an RpcError came from) says the
    server never processed the stream: a transparent retry may resend it."""
    if isinstance(exc, RpcError):
        cause = exc.__cause__
        if cause is None:
            return False
        exc = cause
    return isinstance(exc, _NEVER_PROCESSED) and exc.retryable


#: A failed attempt: its status, details and the exception (a transport error) if any.
Failure = tuple[StatusCode, str, BaseException | None]

#: ``open_next(extra_metadata) -> stream``: leave the attempt's stream, open the next
#: (``extra_metadata`` None: the same as the attempt it replaces, a transparent retry).
OpenNext = Callable[[list[tuple[str, str]] | None], Awaitable[trio_h2t.H2Stream]]


@final
class Replay:
    """What one call keeps to send itself again (module docstring).

    Owner: the call's tasks (a sender and a receiver, one trio thread): ``frames``
    and ``ended`` are appended to by the sender, read by the receiver while
    ``switching`` is set (the sender waits meanwhile).
    """

    __slots__ = (
        "_backoff",
        "backing_off",
        "ended",
        "frames",
        "open_next",
        "state",
        "switching",
        "transparent_left",
    )

    def __init__(self, state: CallRetryState, open_next: OpenNext, *, transparent: bool) -> None:
        self.state = state  # immutable after init; its fields: the receiver's
        self.open_next = open_next  # immutable after init
        # owner: the receiver (counts down)
        self.transparent_left = MAX_TRANSPARENT_RETRIES if transparent else 0
        # shared: the sender appends (not while switching), the receiver replays
        self.frames: list[bytes] = []
        self.ended = False  # shared: set by the sender's half-close, read on replay
        # owner: the receiver; set while it opens the next attempt and replays
        self.switching: trio.Event | None = None
        # owner: the receiver; the scope of its backoff sleep (commit() ends it)
        self._backoff: trio.CancelScope | None = None
        # owner: the receiver; the failed attempt whose backoff is being slept (kept
        # if the call's deadline ends the sleep: the DEADLINE_EXCEEDED says it)
        self.backing_off: Failure | None = None

    @property
    def committed(self) -> bool:
        """True once no other attempt can be made (nothing more is kept)."""
        return self.state.committed

    def keep(self, frame: bytes) -> None:
        """Keep a request frame for replay; past the buffer's bounds the call commits."""
        if self.state.committed:
            return
        if self.state.buffer(len(frame)):
            self.frames.append(frame)
        else:
            self.frames.clear()

    def commit(self) -> None:
        """No more attempts: drop the frames, give the buffer's bytes back, and end
        a backoff in progress (``Call.cancel``)."""
        self.state.commit()
        self.frames.clear()
        if self._backoff is not None:
            self._backoff.cancel()

    async def sleep(self, delay: float) -> None:
        """Wait ``delay`` seconds before the next attempt, or until :meth:`commit`.

        Checkpoint: always. On cancellation: nothing changes.
        """
        with trio.CancelScope(deadline=trio.current_time() + delay) as scope:
            self._backoff = scope
            try:
                await trio.sleep_forever()
            finally:
                self._backoff = None

    def succeeded(self) -> None:
        """The call ended OK before any headers (trailers-only OK)."""
        self.state.on_success()
        self.frames.clear()

    def transparent(self, exc: BaseException) -> bool:
        """Whether to resend after ``exc`` without counting an attempt (and count it)."""
        if self.state.committed or self.transparent_left <= 0 or not never_processed(exc):
            return False
        self.transparent_left -= 1
        return True

    def retry_delay(self, code: StatusCode, trailing: Metadata | None) -> float | None:
        """After a failed attempt: seconds to wait before the next, or None (committed)."""
        pushback = None if trailing is None else trailing.get(PUSHBACK_HEADER)
        delay = self.state.on_failure(code, pushback if isinstance(pushback, str) else None)
        if delay is None:
            self.frames.clear()
        return delay

    def final_details(self, details: str) -> str:
        """A failed call's details, ending with its number of attempts under a policy."""
        if self.state.policy is None:
            return details
        count = attempts_text(self.state.attempts)
        return f"{details} ({count})" if details else f"({count})"

    def deadline_details(self) -> tuple[str, BaseException | None]:
        """A DEADLINE_EXCEEDED's details (and the cause to chain): during a backoff,
        the attempts made and the last one's status."""
        failure = self.backing_off
        if failure is None:
            return "Deadline Exceeded", None
        code, details, exc = failure
        return (
            f"Deadline Exceeded during the backoff after {attempts_text(self.state.attempts)}"
            f" (last: {code.name} {details!r})"
        ), exc


def attempts_text(count: int) -> str:
    """``1 attempt``, ``2 attempts``: every message that counts a call's attempts."""
    return f"{count} attempt" if count == 1 else f"{count} attempts"
