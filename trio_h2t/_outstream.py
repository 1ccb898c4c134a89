"""OutStream: loopy's per-stream output state (grpc-go's ``outStream``), sans-IO.

Every ``H2Stream`` holds one ``OutStream`` (``stream._out``), built with the stream.
**Only loopy writes its fields.** Everyone else may read them between two awaits
(the reader, the server's handler runner and the stream task look at ``done``), and
asks loopy for a change with a control item (``_items.py``):

- ``StreamDone`` (the reader: the peer reset the stream, a malformed request, a
  stream refused by GOAWAY): loopy drops the queued output and marks the stream
  ``done`` and ``reset_sent``: nothing more is written for it, no RST_STREAM is owed;
- ``ResetStream(after_end=True)`` (the server's handler runner, when the handler
  returned with its response complete but the request still open): loopy resets the
  stream with NO_ERROR once its END_STREAM is written (``rst_on_end``);
- ``StartStream`` carries the client stream it opens: loopy marks it ``done`` when
  its HEADERS carry END_STREAM, or when it could not start.

The ``state`` values follow grpc-go's outStream states; loopy keeps the invariant
that a stream is on its active list iff ``state == OUT_ACTIVE``, in its window-parked
dict iff ``OUT_WAITING``, and in its connection-parked queue iff ``OUT_CONN_WAITING``.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, final

if TYPE_CHECKING:
    from ._items import Data, Headers

__all__ = ["OUT_ACTIVE", "OUT_CONN_WAITING", "OUT_EMPTY", "OUT_WAITING", "OutStream"]

OUT_EMPTY = 0  # nothing queued; not on the active list
OUT_ACTIVE = 1  # output queued that may move; on the active list
OUT_WAITING = 2  # data queued, stream window exhausted; parked until it reopens
OUT_CONN_WAITING = 3  # data queued, connection window exhausted; parked until it reopens


@final
class OutStream:
    """One stream's output as loopy sees it. Owner of every field: loopy."""

    __slots__ = ("done", "offset", "queue", "reset_sent", "rst_on_end", "state")

    def __init__(self) -> None:
        self.queue: deque[Data | Headers] | None = None  # built on first use
        self.offset = 0  # bytes of queue[0] already written
        self.state = OUT_EMPTY
        self.done = False  # END_STREAM or RST_STREAM written: nothing more goes out
        self.reset_sent = False  # RST_STREAM framed (or none is owed)
        # Reset with NO_ERROR once END_STREAM is written, if the peer's side is open.
        self.rst_on_end = False
