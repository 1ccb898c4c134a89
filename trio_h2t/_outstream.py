"""OutStream: loopy's per-stream output state (grpc-go's ``outStream``), sans-IO.

Loopy keeps one ``OutStream`` per stream that has output to write, in its own table
keyed by stream id (``Loopy._outs``, as grpc-go's loopy keeps ``estdStreams``).
**Only loopy builds, reads and writes them**; no other task holds one. An entry
is made when loopy first handles an item of the stream (a client stream: once its
HEADERS are written and it has an id), and dropped when the stream's output is
over for loopy: its END_STREAM or RST_STREAM is written, the stream is done for it
(``StreamDone``), or its connection ends. Loopy then tells the stream
(``H2Stream.loopy_output_ended`` / ``loopy_output_reset``), the one fact about its
output other tasks read; an item for a stream whose output is over finds no entry
and is dropped (its write quota returned).

Other tasks ask loopy for a change with a control item (``_items.py``):

- ``StreamDone`` (the reader: the peer reset the stream, a malformed request, a
  stream refused by GOAWAY): loopy drops the queued output: nothing more is
  written for it, no RST_STREAM is owed;
- ``ResetStream(after_end=True)`` (the server's handler runner, when the handler
  returned with its response complete but the request still open): loopy resets the
  stream with NO_ERROR once its END_STREAM is written (``rst_on_end``);
- ``StartStream`` carries the client stream it opens: its output is over at once
  when its HEADERS carry END_STREAM, or when it could not start.

The ``state`` values follow grpc-go's outStream states; loopy keeps the invariant
that an entry is on its active list iff ``state == OUT_ACTIVE``, in its window-parked
dict iff ``OUT_WAITING``, and in its connection-parked list iff ``OUT_CONN_WAITING``.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, final

if TYPE_CHECKING:
    from ._items import Data, Headers
    from ._stream import H2Stream

__all__ = ["OUT_ACTIVE", "OUT_CONN_WAITING", "OUT_EMPTY", "OUT_WAITING", "OutStream"]

OUT_EMPTY = 0  # nothing queued; not on the active list
OUT_ACTIVE = 1  # output queued that may move; on the active list
OUT_WAITING = 2  # data queued, stream window exhausted; parked until it reopens
OUT_CONN_WAITING = 3  # data queued, connection window exhausted; parked until it reopens


@final
class OutStream:
    """One stream's output as loopy sees it. Owner of every field: loopy."""

    __slots__ = ("offset", "queue", "rst_on_end", "state", "stream")

    def __init__(self, stream: H2Stream) -> None:
        self.stream = stream  # the stream this output belongs to
        self.queue: deque[Data | Headers] | None = None  # built on first use
        self.offset = 0  # bytes of queue[0] already written
        self.state = OUT_EMPTY
        # Reset with NO_ERROR once END_STREAM is written, if the peer's side is open.
        self.rst_on_end = False

    def __repr__(self) -> str:
        return f"<OutStream of stream {self.stream.stream_id} state={self.state}>"
