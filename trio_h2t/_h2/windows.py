"""Flow-control windows: the arithmetic of RFC 9113 §6.9, for a stream and for the connection.

Sans-IO and on its own: no trio, no h2, no I/O. Numbers in, numbers (or an error
carrying its HTTP/2 code) out. Stock h2 is the oracle: ``tests/test_h2_windows.py``
runs random sequences of operations on these types and on h2's
``h2.windows.WindowManager`` and a stock ``H2Connection`` pair, and compares the
windows, the increments and the errors.

Theory of operation
-------------------
Each side of a connection has two kinds of window per stream and one of each for
the connection (§6.9.1):

- :class:`SendWindow`, the **outbound** window: how many DATA bytes the peer lets
  us send. Sending DATA consumes it (:meth:`SendWindow.consume`, never past what
  the caller checked); the peer's WINDOW_UPDATE raises it (:meth:`SendWindow.update`);
  a change of the peer's SETTINGS_INITIAL_WINDOW_SIZE moves every open stream's
  window (not the connection's) by the difference (:func:`apply_initial_window_size`,
  §6.9.2), which may leave it negative.
- :class:`ReceiveWindow`, the **inbound** window: how many DATA bytes we let the
  peer send. Received DATA consumes it (:meth:`ReceiveWindow.window_consumed`; an
  overrun is the peer's FLOW_CONTROL_ERROR, §6.9.1); the bytes the application has
  processed are handed back in WINDOW_UPDATE increments (:meth:`ReceiveWindow.process_bytes`
  returns the increment to send, or 0 / None for none yet), by h2's algorithm (half
  the window processed, or a nearly-empty window); a WINDOW_UPDATE we send of our
  own accord opens it (:meth:`ReceiveWindow.window_opened`); a change of our own
  SETTINGS_INITIAL_WINDOW_SIZE, once acknowledged, moves a stream's window and its
  target size (:meth:`ReceiveWindow.initial_size_changed`). Its names and results are
  h2's ``WindowManager``'s, so h2's stream and connection code calls it unchanged
  (``_h2fast.FastStream`` is one, and so is ``FastConnection``'s connection window).

*When* to send a WINDOW_UPDATE beyond h2's algorithm (grpc-go's inFlow, BDP growth)
is ``_flow``'s decision, not this module's.

Where h2 and the RFC differ
---------------------------
These types follow h2, so that trio_h2t's behaviour on the wire does not change:

- An increment of 0 is PROTOCOL_ERROR (:class:`WindowProtocolError`) on a stream as
  on the connection; hyperframe refuses it while parsing, and ``_h2/frames.py``
  too. XX: RFC 9113 §6.9 makes it a *stream* error on a stream.
- An increment that takes a window past 2**31 - 1 (§6.9.1) is FLOW_CONTROL_ERROR:
  on the connection a connection error, on a stream a stream error (the caller
  resets the stream; h2's ``H2Stream.receive_window_update``). The window is left
  as it was.
- An inbound window that overruns or overflows is left as h2 leaves it, the change
  applied, before the error is raised: the connection (or stream) is torn down.
- The connection's inbound window is moved by :meth:`ReceiveWindow.window_opened`
  only; SETTINGS_INITIAL_WINDOW_SIZE never touches a connection window (§6.9.2).

Errors: :class:`WindowError`'s kinds carry their HTTP/2 code (``error_code``), as
``_h2/frames.py``'s errors do; whether it is a stream or a connection error is the
caller's to say (it knows which window it asked). Their messages are h2's.

Owner: as the connection object that holds the windows (``_h2fixes.FixedConnection``:
its tasks use it only between awaits, never at once). The reader owns inbound
consumption: it consumes the inbound windows on DATA (and credits DATA on a closed
stream back, ``process_bytes``, inside h2's ``receive_data``); loopy opens them when
it frames our WINDOW_UPDATE (h2's ``increment_flow_control_window``,
``window_opened``). Loopy owns the outbound windows: it consumes them as it frames
DATA; the reader raises them on the peer's WINDOW_UPDATE and SETTINGS, between
loopy's turns.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

__all__ = [
    "DEFAULT_WINDOW",
    "FLOW_CONTROL_ERROR",
    "MAX_WINDOW",
    "PROTOCOL_ERROR",
    "FlowControlError",
    "ReceiveWindow",
    "SendWindow",
    "WindowError",
    "WindowProtocolError",
    "apply_initial_window_size",
    "sendable",
]

PROTOCOL_ERROR = 0x1  # §7
FLOW_CONTROL_ERROR = 0x3  # §7

#: §6.9.1: "A sender MUST NOT allow a flow-control window to exceed 2**31-1 octets."
MAX_WINDOW = 2**31 - 1
#: §6.9.2: every window starts at 65,535 octets until SETTINGS say otherwise.
DEFAULT_WINDOW = 65_535


class WindowError(Exception):
    """A window rule of RFC 9113 §6.9 is broken: an error of type ``error_code``.
    Not raised itself: one of its kinds is."""

    error_code = FLOW_CONTROL_ERROR


class FlowControlError(WindowError):
    """A window overrun (DATA past the inbound window, §6.9.1), a window past
    2**31 - 1 (§6.9.1, §6.9.2), or an attempt to send past the outbound window:
    FLOW_CONTROL_ERROR."""

    error_code = FLOW_CONTROL_ERROR


class WindowProtocolError(WindowError):
    """A WINDOW_UPDATE increment of 0 (§6.9): PROTOCOL_ERROR (h2's connection error
    on a stream too; module docstring)."""

    error_code = PROTOCOL_ERROR


def _too_large() -> FlowControlError:
    # h2's utilities.guard_increment_window message.
    return FlowControlError(f"May not increment flow control window past {MAX_WINDOW}")


class SendWindow:
    """An outbound window (a stream's or the connection's): ``size`` octets of DATA
    we may still send; negative after the peer lowered SETTINGS_INITIAL_WINDOW_SIZE
    (§6.9.2). Owner: loopy, which consumes it (module docstring)."""

    __slots__ = ("size",)

    def __init__(self, size: int = DEFAULT_WINDOW) -> None:
        self.size = size

    def __repr__(self) -> str:
        return f"SendWindow({self.size})"

    def consume(self, n: int) -> None:
        """``n`` flow-controlled octets are sent (DATA's payload with its padding).
        More than the window is our own mistake, FlowControlError, and changes
        nothing: the window never drops below what the sender checked. An empty
        frame (``n == 0``) is always allowed, even on a window at or below zero."""
        if n > 0 and n > self.size:
            raise FlowControlError(f"Cannot send {n} bytes, flow control window is {self.size}")
        self.size -= n

    def update(self, increment: int) -> None:
        """The peer's WINDOW_UPDATE for this window. 0 is WindowProtocolError; past
        2**31 - 1 is FlowControlError, leaving the window as it was."""
        if increment <= 0:
            raise WindowProtocolError("WINDOW_UPDATE increment must be between 1 to 2^31-1")
        size = self.size + increment
        if size > MAX_WINDOW:
            raise _too_large()
        self.size = size

    def adjust(self, delta: int) -> None:
        """SETTINGS_INITIAL_WINDOW_SIZE moved by ``delta`` (§6.9.2): the window may go
        negative; past 2**31 - 1 is FlowControlError, leaving it as it was."""
        size = self.size + delta
        if size > MAX_WINDOW:
            raise _too_large()
        self.size = size


def sendable(stream: SendWindow, connection: SendWindow) -> int:
    """How many octets a stream may send now: the smaller of its window and the
    connection's (h2's ``local_flow_control_window``); may be negative."""
    return min(stream.size, connection.size)


def apply_initial_window_size(
    windows: Iterable[SendWindow], old_value: int | None, new_value: int
) -> None:
    """The peer's SETTINGS_INITIAL_WINDOW_SIZE went from ``old_value`` to
    ``new_value``: every stream window in ``windows`` moves by the difference
    (§6.9.2; never the connection's). A window past 2**31 - 1 is FlowControlError
    (a connection error), raised at the first such window, the ones before it moved
    (h2's ``_flow_control_change_from_settings``; the connection is torn down).
    ``old_value`` None counts as 0, as h2 does."""
    delta = new_value - (old_value or 0)
    for window in windows:
        window.adjust(delta)


class ReceiveWindow:
    """An inbound window (a stream's or the connection's), with h2's
    ``WindowManager`` algorithm for handing processed bytes back.

    ``current_window_size`` is what the peer may still send; ``max_window_size`` the
    size the window is kept at (the initial size, raised by our WINDOW_UPDATEs);
    ``pending_credit`` the octets the application processed that no WINDOW_UPDATE
    handed back yet. Owner: the reader (module docstring).

    ``flow_control_error`` is the class its FLOW_CONTROL_ERRORs are raised as (built
    from the message alone): :class:`FlowControlError` here; a subclass may name the
    one its caller catches instead (``_h2fast.H2ReceiveWindow``: h2's, whose
    ``error_code`` is the same), with no wrapper call on the way.
    """

    __slots__ = ("current_window_size", "max_window_size", "pending_credit")

    flow_control_error: ClassVar[type[Exception]] = FlowControlError

    def __init__(self, max_window_size: int = DEFAULT_WINDOW) -> None:
        if not 0 <= max_window_size <= MAX_WINDOW:
            raise ValueError(f"a window is 0 to {MAX_WINDOW} octets, not {max_window_size}")
        self.max_window_size = max_window_size
        self.current_window_size = max_window_size
        self.pending_credit = 0

    def __repr__(self) -> str:
        return (
            f"ReceiveWindow(current={self.current_window_size}, max={self.max_window_size},"
            f" pending={self.pending_credit})"
        )

    def window_consumed(self, size: int) -> None:
        """The peer sent ``size`` flow-controlled octets (DATA with its padding).
        Past the window is the peer's FlowControlError (§6.9.1), the window left
        consumed (h2's)."""
        self.current_window_size -= size
        if self.current_window_size < 0:
            raise self.flow_control_error("Flow control window shrunk below 0")

    def window_opened(self, size: int) -> None:
        """We open the window by ``size`` (our own WINDOW_UPDATE, or, negative too, a
        settings change): the target size grows with it. Past 2**31 - 1 is
        FlowControlError, the window left opened (h2's)."""
        self.current_window_size += size
        if self.current_window_size > MAX_WINDOW:
            raise self.flow_control_error(f"Flow control window mustn't exceed {MAX_WINDOW}")
        if self.current_window_size > self.max_window_size:
            self.max_window_size = self.current_window_size

    def initial_size_changed(self, delta: int) -> None:
        """Our SETTINGS_INITIAL_WINDOW_SIZE, acknowledged, moved by ``delta``: the
        window and its target size both move by it (a stream's only, §6.9.2; h2's
        ``H2Stream._inbound_flow_control_change_from_settings``)."""
        new_max = self.max_window_size + delta
        self.window_opened(delta)
        self.max_window_size = new_max

    def process_bytes(self, size: int) -> int | None:
        """The application processed ``size`` octets: the WINDOW_UPDATE increment to
        send now (0 for none yet), or None if nothing was ever processed since the
        last increment. h2's rule: an increment once half the target size is
        processed, or, with the window empty, once more than min(1024, a quarter of
        it) is; at most what brings the window back to its target size."""
        self.pending_credit += size
        pending = self.pending_credit
        if not pending:
            return None
        window = self.current_window_size
        target = self.max_window_size
        if pending >= target // 2 or (window == 0 and pending > min(1024, target // 4)):
            increment = min(pending, target - window)
            self.pending_credit = 0
            self.current_window_size = window + increment
            return increment
        return 0
