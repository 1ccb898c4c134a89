"""Control items: what stream tasks and the reader ask loopy to do.

A control item is *not* an HTTP/2 frame. Some become frames when loopy handles them
(HEADERS, DATA, RST_STREAM, WINDOW_UPDATE, PING, GOAWAY, SETTINGS); others only tell
loopy to change its own state (a stream's window reopened, a stream is finished).
There is one small immutable class per intent, as in grpc-go's ``controlbuf.go``.

Throttling
----------
Each class says whether it is *throttled* (``throttled`` class attribute). Every item
that is not HEADERS, DATA or a window item is throttled: above all the ones queued
*in response to* the peer (SETTINGS ack, PING ack, RST_STREAM), which a peer can make
us queue without bound by sending frames and never reading. While the control buffer
holds ``throttle_limit`` or more throttled items, the reader stops reading (see
``_controlbuf.py``). HEADERS and DATA are bounded elsewhere (stream quota and write
quota), so they are not counted.

Window items are not counted either (grpc-go does not count them: they are not
transport response frames). Counting them made two peers that both write more than
the link holds stop both readers while both writers waited in ``send_all``: each
reader, reading the other's DATA, queued a WINDOW_UPDATE that only its blocked writer
could drain. They are bounded without the gate: a ``WindowUpdate`` returns window
for bytes the peer sent within the window we granted, and the peer gets no more
until loopy handles it, so at most ``1 / window_update_ratio`` per window are
queued; a ``WindowOpened`` is queued at most once per stream (and once for the
connection) until loopy handles it, however many WINDOW_UPDATE frames the peer
sends.

Orphaning
---------
When the control buffer is finished, every item it still holds is *orphaned* exactly
once: ``item.orphan(error)`` runs. Most items have nothing to release. A stream start
fails its stream (``starter.orphaned``), and a data item releases its payload
(``Data.release``: its write quota, and the graceful close's reset if it asks for
one), so nobody waits forever on work that will never be written.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Protocol

__all__ = [
    "CloseConnection",
    "ControlItem",
    "Data",
    "GoAway",
    "Headers",
    "ItemStream",
    "PeerResponse",
    "Ping",
    "ResetStream",
    "Settings",
    "StartStream",
    "StreamDone",
    "StreamStarter",
    "WindowKind",
    "WindowOpened",
    "WindowUpdate",
]

HeaderList = Sequence[tuple[bytes, bytes]]


class ItemStream(Protocol):
    """What an item reaches of the stream it is for (an ``H2Stream``, which builds
    items and so is above this module: tests/test_import.py). Loopy, above both,
    treats the stream as the ``H2Stream`` it is."""

    @property
    def stream_id(self) -> int: ...

    def loopy_released(self, quota: int, cancel_after: bool) -> None: ...


class StreamStarter(Protocol):
    """Who waits for a :class:`StartStream`: told its stream id, or why it never got one."""

    def started(self, stream_id: int) -> None:
        """Loopy framed the HEADERS with ``stream_id``."""

    def orphaned(self, error: BaseException) -> None:
        """The stream will never start (the connection is closing). Must not raise."""

    def failed(self, error: Exception) -> None:
        """Loopy could not frame the HEADERS (``error``); nothing was sent. Must not raise."""


class ControlItem:
    """Base class of every control item."""

    __slots__ = ()

    #: True if this item counts toward the control buffer's throttle.
    throttled: ClassVar[bool] = True

    def orphan(self, error: BaseException) -> None:
        """Release what this item holds; it will never be handled.

        Called at most once, by the control buffer, after ``finish(error)``.
        Must not raise and must not block.
        """


# ---------------------------------------------------------------- HEADERS and DATA


@dataclass(frozen=True, slots=True, eq=False)
class StartStream(ControlItem):
    """Client only: open a new stream. Loopy assigns its id and writes HEADERS.

    Stream ids are assigned when the HEADERS are framed, so they always go out in
    increasing order (h2 requires it); loopy then calls ``starter.started(stream_id)``.
    ``starter.orphaned(error)`` fails the waiting stream instead when the connection
    closes first (grpclib #216 hung here).
    """

    throttled: ClassVar[bool] = False
    headers: HeaderList
    end_stream: bool
    starter: StreamStarter
    #: The stream it opens: loopy marks its output done (``_outstream.py``) when the
    #: HEADERS carry END_STREAM or cannot go out. None in control-buffer tests.
    stream: ItemStream | None = None

    def orphan(self, error: BaseException) -> None:
        self.starter.orphaned(error)


@dataclass(frozen=True, slots=True, eq=False)
class Headers(ControlItem):
    """HEADERS on an existing stream: response headers, or trailers if ``end_stream``.

    Queued behind the stream's pending data, so trailers follow the body.
    """

    throttled: ClassVar[bool] = False
    stream: ItemStream
    headers: HeaderList
    end_stream: bool


class Data(ControlItem):
    """DATA for one stream. Loopy writes it in quanta, round robin, within flow control.

    :meth:`release` runs once, when loopy has framed the whole payload (or dropped
    it) or when the item is orphaned: it returns ``quota`` bytes to the stream's write
    quota and, with ``cancel_after``, lets the stream reset itself if its END_STREAM
    went out while the peer's side is open. An item holds data and flags only, no
    callable: nothing (closure, cell or bound method) is built per write or per
    close (grpc-go #8668); what release does is the stream's own methods.

    Immutable after init, as the other items, but a plain class with ``__slots__``
    rather than a frozen dataclass: one is built per write, and a frozen
    dataclass's ``__init__`` sets each field through ``object.__setattr__`` (0.63
    against 0.15 µs here).
    """

    __slots__ = ("cancel_after", "end_stream", "payload", "quota", "stream")

    throttled: ClassVar[bool] = False

    def __init__(
        self,
        stream: ItemStream,
        payload: bytes | bytearray | memoryview,
        end_stream: bool,
        quota: int = 0,
        cancel_after: bool = False,
    ) -> None:
        self.stream = stream
        self.payload = payload
        self.end_stream = end_stream
        self.quota = quota
        #: ``H2Stream``'s graceful close (``view_close_after_output``) asks for the reset.
        self.cancel_after = cancel_after

    def __repr__(self) -> str:
        return (
            f"Data(stream={self.stream!r}, payload=<{len(self.payload)} bytes>,"
            f" end_stream={self.end_stream}, quota={self.quota},"
            f" cancel_after={self.cancel_after})"
        )

    def release(self) -> None:
        """Return the item's write quota to its stream, then (``cancel_after``) let
        it reset itself (once: the caller, loopy or the task that orphans the item,
        makes sure of that)."""
        if self.quota or self.cancel_after:
            self.stream.loopy_released(self.quota, self.cancel_after)

    def orphan(self, error: BaseException) -> None:
        self.release()


# ---------------------------------------------------------------- the other items


@dataclass(frozen=True, slots=True, eq=False)
class ResetStream(ControlItem):
    """Send RST_STREAM(``error_code``) and forget the stream's queued output.

    With ``after_end``, the reset waits until the stream's END_STREAM is written (the
    server's handler runner asks for RST_STREAM(NO_ERROR) after a complete response
    while the request is still open, RFC 9113 §8.1), and is skipped if the peer's
    side has ended by then.
    """

    stream: ItemStream
    error_code: int
    after_end: bool = False


@dataclass(frozen=True, slots=True, eq=False)
class StreamDone(ControlItem):
    """The stream is over for loopy (the peer reset it, it was refused or malformed):
    loopy drops its queued output, writes nothing more for it, and owes no RST_STREAM.

    No frame is written.
    """

    stream: ItemStream


@dataclass(frozen=True, slots=True, eq=False)
class WindowUpdate(ControlItem):
    """Grant the peer ``increment`` more bytes on ``stream`` (None = connection)."""

    throttled: ClassVar[bool] = False

    stream: ItemStream | None
    increment: int


class WindowKind(enum.Enum):
    """Which send window a :class:`WindowOpened` says the peer opened."""

    #: The connection's (a WINDOW_UPDATE on stream 0): the streams parked on it move.
    CONNECTION = "connection"
    #: Every stream's (SETTINGS_INITIAL_WINDOW_SIZE grew, RFC 9113 §6.9.2).
    ALL_STREAMS = "all-streams"
    #: One stream's (a WINDOW_UPDATE on ``stream_id``).
    STREAM = "stream"


@dataclass(frozen=True, slots=True)
class WindowOpened(ControlItem):
    """The peer opened our send window, the ``kind`` of window it was (for
    ``WindowKind.STREAM``, that of ``stream_id``; 0 otherwise). Loopy wakes the
    streams parked on it. No frame is written.

    Compared and hashed by value (unlike the other items): the reader queues at most
    one equal item until loopy handles it (``ConnectionCore.windows_opened``).
    """

    throttled: ClassVar[bool] = False

    kind: WindowKind
    stream_id: int = 0

    def __post_init__(self) -> None:
        if (self.kind is WindowKind.STREAM) != (self.stream_id > 0):
            raise ValueError(f"a {self.kind} window needs stream_id > 0 iff it is a stream's")


@dataclass(frozen=True, slots=True, eq=False)
class PeerResponse(ControlItem):
    """A frame h2 queued by itself in response to the peer (``kind``: "ping-ack",
    "settings-ack", "rst", or "auto" for any other bytes h2 queued while the reader
    handed it a read). Its bytes already sit in h2's outbound buffer; the item makes
    loopy flush them and makes them count toward the throttle.
    """

    kind: str


@dataclass(frozen=True, slots=True, eq=False)
class Ping(ControlItem):
    """Send PING with 8 bytes of ``data`` (keepalive, BDP probe, GOAWAY probe)."""

    data: bytes


@dataclass(frozen=True, slots=True, eq=False)
class Settings(ControlItem):
    """Send SETTINGS with ``changes`` (setting code -> value)."""

    changes: tuple[tuple[int, int], ...]


@dataclass(frozen=True, slots=True, eq=False)
class GoAway(ControlItem):
    """Send GOAWAY. trio_h2t frames it itself, outside h2's state machine (h2 #1181).

    ``last_stream_id=None`` means the highest peer stream id we processed.
    """

    error_code: int
    last_stream_id: int | None = None
    debug_data: bytes = b""


@dataclass(frozen=True, slots=True, eq=False)
class CloseConnection(ControlItem):
    """Flush everything queued before this item, then stop loopy."""
