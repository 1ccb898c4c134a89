"""ConnectionLifecycle: how one connection ends, the part of its core every task reads.

Theory of operation
-------------------
``ConnectionCore`` (``_connection.py``) is split by owner into three layers, each a
class the next one extends, each field tagged with who writes it:

- this one: the **lifecycle**: the sticky error, the GOAWAYs each way, closing and
  the events tasks wait on to learn that the connection is ending. Almost every
  field is ``shared`` under the same rule: set once, never cleared, by whichever
  task gets there first, with no await between the test and the set; the few with
  a single writer say so (``goaway_received``: the reader; ``goaway_sent_last_id``:
  loopy). The methods here only read it (``refuse_new_stream_error``,
  ``final_goaway_code``...) or record one fact (``on_goaway_written``).
- ``_streamtable.StreamTable``: the streams (registry, quotas, handlers running,
  idleness);
- ``_connection.ConnectionCore``: h2, the control buffer, loopy, what only the
  reader writes (windows, read times) or only loopy (ping counts), and the
  operations that span all three layers (``fail``, ``graceful_close``, ...).

Every part runs on the connection's one thread; a shared field's rule is the one
written beside it.
"""

from __future__ import annotations

import trio
from h2.errors import ErrorCodes

from ._exceptions import ConnectionClosingError, GoAwayError, H2ProtocolError
from ._h2state import GoAwayReceived
from ._pings import MAX_STREAM_ID

__all__ = ["ConnectionLifecycle"]


class ConnectionLifecycle:
    """How the connection ends: the sticky error, GOAWAYs, closing, the end events."""

    def __init__(self, *, client_side: bool) -> None:
        self.client_side = client_side  # immutable after init
        # shared: sticky, set once by fail() (in any task): why the connection ended.
        self.error: BaseException | None = None
        self.goaway_received: GoAwayReceived | None = None  # owner: reader
        self.goaway_sent_last_id: int | None = None  # owner: loopy
        # shared: set once, by the first fault() (any task): the first unexpected
        # exception (a bug) that ended the connection; our last GOAWAY then says
        # INTERNAL_ERROR.
        self.fault_error: BaseException | None = None
        # shared: set once, never cleared, by whichever task starts closing (the
        # application's aclose, abort, or, after the client's GOAWAY, the task that
        # ends the last stream or handler): no new streams from us.
        self.closing = False
        # shared: set (never cleared) wherever this side stops opening streams: the
        # peer's GOAWAY (reader), closing starts (any task that sets ``closing``), or
        # fail(). ClientConnection.accepting_streams / wait_not_accepting read it.
        self.not_accepting = trio.Event()
        # shared: a server's drain (graceful_close) is in its first phase: created,
        # once, by the task that sends the first GOAWAY (2^31-1) and its PING; set by
        # the reader when that PING's ACK arrives, or by fail(). None: no drain yet.
        self.drain_ack: trio.Event | None = None
        # shared: set by the task that closes the last stream while closing, or fail().
        self._idle = trio.Event()
        # shared: set by the reader (the peer's first SETTINGS arrived), or by fail().
        self.settings_received = trio.Event()
        # owner: the handshake timer (watch_handshake); set once, when the peer's
        # first SETTINGS did not arrive in time.
        self.handshake_timed_out = False
        # shared: set once the connection is over: by fail() (any task), or (after a
        # protocol error, once the GOAWAY is flushed) when loopy exits.
        self.done = trio.Event()
        self.eof_seen = False  # owner: reader: the peer closed its side
        # shared: entered once by the reader around its loop; cancelled by
        # run_loopy on exit (nothing more can be written, so stop reading).
        self.reader_scope = trio.CancelScope()
        # shared: set by the reader when its run ends, however it ends (or by the
        # runtime when no reader will run); the client's clean close (_linger.py)
        # reads the transport only after that.
        self.reader_stopped = trio.Event()
        # shared: created once by the first task that runs the client's clean close
        # (_linger.close_cleanly), set when it is over; a second closer waits for it.
        self.clean_close: trio.Event | None = None
        # shared: created by the keepalive task when it goes dormant (a client with
        # no stream and no permission to ping without one); set and cleared by the
        # task that starts a stream (loopy, register_client_stream) or by fail().
        self.keepalive_wakeup: trio.Event | None = None

    def wake_keepalive(self) -> None:
        """Wake the dormant keepalive task (a stream started, or the connection ended)."""
        wakeup = self.keepalive_wakeup
        if wakeup is not None:
            self.keepalive_wakeup = None
            wakeup.set()

    def closing_error(self) -> ConnectionClosingError:
        exc = ConnectionClosingError("the connection is closed")
        exc.__cause__ = self.error
        return exc

    def goaway_error(self) -> GoAwayError:
        """A fresh GoAwayError with the fields of the peer's (latest) GOAWAY."""
        ev = self.goaway_received
        assert ev is not None
        return GoAwayError(ev.error_code, ev.last_stream_id, ev.debug_data)

    def refuse_new_stream_error(self) -> BaseException | None:
        """Why a new stream may not start now, or None.

        This side closing comes first (ConnectionClosingError: you closed it), then
        the peer's GOAWAY (GoAwayError, retryable), then any other end of the
        connection (ConnectionClosingError caused by ``error``).
        """
        if self.closing:
            if self.error is not None:
                return self.closing_error()
            return ConnectionClosingError("the connection is closing; retry elsewhere")
        if self.goaway_received is not None:
            exc = self.goaway_error()
            if self.error is not None and not isinstance(self.error, GoAwayError):
                exc.__cause__ = self.error
            return exc
        if self.error is not None:
            return self.closing_error()
        return None

    def on_goaway_written(self, last_stream_id: int) -> None:
        # A drain's first GOAWAY (2^31-1) is a heads-up, not the last word: loopy
        # still owes the real last stream id if the connection ends before the
        # second one goes out (final_goaway_code).
        if last_stream_id != MAX_STREAM_ID or self.client_side:
            self.goaway_sent_last_id = last_stream_id

    def on_drain_ping_ack(self) -> None:
        """The reader saw the ACK of the drain's PING: the client has read our first
        GOAWAY, so every stream it started before it has reached us."""
        if self.drain_ack is not None:
            self.drain_ack.set()

    def final_goaway_code(self) -> int | None:
        """The GOAWAY loopy owes on its way out: None if ours was written or the peer
        closed its side (EOF); else INTERNAL_ERROR after a fault, the protocol error's
        code, or NO_ERROR."""
        if self.goaway_sent_last_id is not None or self.eof_seen:
            return None
        if self.fault_error is not None:
            return ErrorCodes.INTERNAL_ERROR
        error = self.error
        if isinstance(error, H2ProtocolError):
            return int(error.error_code)
        return ErrorCodes.NO_ERROR
