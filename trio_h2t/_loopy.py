"""Loopy: the writer task, the only task that frames bytes and writes to the socket.

Theory of operation (grpc-go's ``loopyWriter.run``, re-thought for Trio)
-----------------------------------------------------------------------
``run`` repeats:

1. **Block** in ``cbuf.get()`` only when there is nothing at all to do; handle the
   item, then write one data quantum.
2. **Drain** without blocking: take items with ``poll()`` (the control buffer
   serves them from loopy's batch, swapping in the producers' queue when the batch is
   empty), handling each and following it with one data quantum. When no item is
   left, keep writing quanta while any stream can move.
3. When nothing can move: if fewer than ``min_batch_size`` bytes are framed, **yield
   once** (``trio.lowlevel.checkpoint``) so producers woken by this batch can add to
   it; then **flush**: everything framed goes out in one ``send_all`` (several only
   if more than ``write_buffer_size`` bytes were framed, flushed as they pile up).

Data is written **round robin**: the active list holds exactly the streams that have
queued output that may be able to move (invariant: ``out in active`` iff
``out.state == OUT_ACTIVE``). The per-stream output state (``_outstream.py``) lives in
loopy's own table, ``_outs``, keyed by stream id, as grpc-go's loopy keeps its
``outStream``: no other task reads or writes it. Each turn writes at most one quantum, one DATA
frame of at most ``min(peer MAX_FRAME_SIZE, stream window, connection window)``
bytes (and at most our own ``max_frame_size``), for the stream at the head, then
moves it to the tail. A stream whose own
window is exhausted parks (``OUT_WAITING``) until the peer reopens that window. A
stream whose next DATA needs the *connection* window while it is exhausted parks
too (``OUT_CONN_WAITING``), so the streams behind it whose next output needs no
window (trailers, an empty DATA carrying END_STREAM) still go out; a connection
WINDOW_UPDATE puts those parked streams back at the head of the active list, in
the order they parked (they were at its head), and wakes no stream parked on its
own window.

Payload copies (per DATA byte): none of our own. Loopy frames DATA itself
(``H2State.frame_data``: h2's checks, state transitions and window accounting, the
9-byte header appended to h2's outbound buffer, which is then taken without a copy),
and queues the payload as it came (a ``bytes`` whole, else a memoryview slice of the
caller's buffer), never padded. A flush writes the list of pieces (h2's buffers, each
ending in a DATA header, and the payloads between them) with one vectored write
(``sendmsg``) on a ``trio.SocketStream``: the kernel copies from the caller's
buffers. Any other stream (TLS included) gets the pieces joined: one copy. Before,
a byte was copied up to five times (``docs/architecture.md``, "Copies on the data path").
The caller's buffers are held until their flush, at most ``write_buffer_size`` bytes
later (``H2Stream.send_data``: the caller must not mutate them).

Faults stay with their stream: an unexpected exception while framing one stream's
item (DATA, HEADERS, trailers, a stream WINDOW_UPDATE) resets that stream with
RST_STREAM(INTERNAL_ERROR), fails it for its task with a ``StreamResetError`` whose
``__cause__`` is the exception, drops its queued output (returning its write quota),
logs it on the ``trio_h2t`` logger, and loopy serves on. A ``StartStream`` whose
HEADERS cannot be framed fails its opener instead (nothing went out). The
connection's own I/O errors, ``_Stop``, and faults in connection-level items (PING,
SETTINGS, GOAWAY, a connection WINDOW_UPDATE) still end loopy: those belong to the
connection. Such a fault (any unexpected exception but one from ``send_all``) is
reported to the connection (``LoopyCore.fault``) before loopy's last write, which
therefore carries GOAWAY(INTERNAL_ERROR); this connection ends, and no other.

On exit, for any reason but a failed or interrupted write (an I/O error, or a
cancellation that arrived inside ``send_all``: the wire may then end mid-frame, so
nothing more is written), loopy makes its last write: what is framed, then a GOAWAY
if none was written yet and the peer has not closed its side
(``LoopyCore.final_goaway_code``: the protocol error's code, else NO_ERROR; the last
stream id is the highest the peer opened). That write is shielded from cancellation
and bounded by ``FINAL_WRITE_TIMEOUT``, so a cancelled connection still says GOAWAY
and a peer that does not read cannot hold the close. Then loopy always finishes the
control buffer and orphans its batch (``docs/cancellation.md``, "How a connection
ends"). When the connection fails while loopy is inside ``send_all``
(``ConnectionCore.fail``), that write is cut off (``cut_write``: the same as a
cancellation inside ``send_all``), and after the buffer is finished loopy makes no
write but its last one, so the end never waits on a peer that stopped reading.
"""

from __future__ import annotations

import contextlib
import logging
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, cast, final

import trio
from h2.connection import ConnectionState
from h2.errors import ErrorCodes
from h2.exceptions import ProtocolError, StreamClosedError

from ._config import TransportConfig
from ._controlbuf import ControlBuffer
from ._exceptions import ConnectionClosingError, StreamResetError
from ._h2state import H2State, goaway_frame
from ._items import (
    CloseConnection,
    ControlItem,
    Data,
    GoAway,
    Headers,
    PeerResponse,
    Ping,
    ResetStream,
    Settings,
    StartStream,
    StreamDone,
    WindowKind,
    WindowOpened,
    WindowUpdate,
)
from ._outstream import OUT_ACTIVE, OUT_CONN_WAITING, OUT_EMPTY, OUT_WAITING, OutStream
from ._sockopts import stdlib_socket, stream_error, wait_writable
from ._statistics import LoopyStatistics
from ._stream import H2Stream

__all__ = ["Loopy", "LoopyCore"]

log = logging.getLogger("trio_h2t")

#: Most pieces one ``sendmsg`` takes (POSIX IOV_MAX is at least 16; Linux and the
#: BSDs allow 1024).
_IOV_MAX = 1024
#: h2's connection state once it has ended the connection (``Loopy._handle``).
_H2_CLOSED = ConnectionState.CLOSED


async def send_vectored(
    sock: trio.socket.SocketType, chunks: list[bytes | bytearray | memoryview], sent: int = 0
) -> None:
    """``trio.SocketStream.send_all`` of the pieces joined, as ``sendmsg`` calls.

    At most ``_IOV_MAX`` pieces a call; a partial write goes on from where it
    stopped (the piece it cut is replaced in ``chunks`` by a view of its rest).
    ``sent``: bytes of ``chunks`` the caller's own ``sendmsg`` wrote already.
    Errors as ``send_all``'s: ClosedResourceError after ``send_eof`` or on a closed
    socket, BrokenResourceError for other OS errors. The caller is the socket's only
    writer (loopy).

    The stdlib socket under trio's is written directly, waiting (``wait_writable``)
    only while it is full: trio's ``sendmsg`` adds a schedule point to every call,
    one more trip through trio's scheduler per flush, and loopy's loop already has
    one per item (``ControlBuffer.get``).

    Checkpoint: only while the socket is full; as trio's ``sendmsg``, a cancelled
    task raises Cancelled before it writes (loopy's flush may have written ``sent``
    bytes itself before the call). On cancellation: part of the pieces may have been
    written (none by this call if it was cancelled before it). Errors and a
    closed socket as trio's wrappers (``_sockopts.py``).
    """
    await trio.lowlevel.checkpoint_if_cancelled()  # as trio's send: none once cancelled
    if sock.did_shutdown_SHUT_WR:
        raise trio.ClosedResourceError("can't send data after sending EOF")
    raw = stdlib_socket(sock)
    count = len(chunks)
    first = 0
    try:
        while True:
            while first < count:
                n = len(chunks[first])
                if sent < n:
                    break
                sent -= n
                first += 1
            if first == count:
                return
            if sent:
                chunks[first] = memoryview(chunks[first])[sent:]
            pieces = (
                chunks if first == 0 and count <= _IOV_MAX else chunks[first : first + _IOV_MAX]
            )
            if raw is None:
                sent = await sock.sendmsg(pieces)
            else:
                try:
                    sent = raw.sendmsg(pieces)
                except BlockingIOError:
                    await wait_writable(sock)
                    sent = 0
    except OSError as exc:
        err = stream_error(exc)
        raise err from err.__cause__


class LoopyCore(Protocol):
    """Everything loopy reaches of the rest of its connection (``ConnectionCore``).

    The attributes are read once, when loopy is built. The methods are synchronous
    and called by loopy between its awaits: queries (``error``,
    ``closing_error``, ``refuse_new_stream_error``, ``find_stream``) and the news
    of what it wrote or handled, which the connection turns into stream and
    lifecycle state that loopy does not own.
    """

    @property
    def h2(self) -> H2State:
        """The connection's h2 state machine (loopy makes every outbound call)."""

    @property
    def cbuf(self) -> ControlBuffer:
        """The control buffer loopy consumes."""

    @property
    def config(self) -> TransportConfig: ...

    @property
    def error(self) -> BaseException | None:
        """Why the connection ended, or None."""

    def closing_error(self) -> ConnectionClosingError:
        """The error for work orphaned because the connection is over."""

    def refuse_new_stream_error(self) -> BaseException | None:
        """Why a new client stream may not start now, or None."""

    def window_opened_handled(self, item: WindowOpened) -> None:
        """Loopy handled ``item``: another like it may be queued."""

    def on_ping_written(self, data: bytes) -> None:
        """Loopy framed a PING with ``data``."""

    def on_goaway_written(self, last_stream_id: int) -> None:
        """Loopy framed our GOAWAY with ``last_stream_id``."""

    def final_goaway_code(self) -> int | None:
        """The code of the GOAWAY loopy owes on its way out, or None if none is owed
        (one was written already, or the peer closed its side)."""

    def local_end_written(self, stream: H2Stream) -> None:
        """Loopy framed ``stream``'s END_STREAM."""

    def stream_closed(self, stream: H2Stream) -> None:
        """Loopy ended ``stream`` (reset after a fault); idempotent."""

    def fault(self, exc: BaseException, where: str) -> None:
        """End the connection because ``where`` raised ``exc`` (a bug); logs it once."""


#: Seconds loopy's last write (what is framed, and the final GOAWAY) may take on its
#: way out, shielded from cancellation; a peer that does not read is cut off after it.
#: Go's HTTP/2 server gives its final GOAWAY a write deadline of the same order.
FINAL_WRITE_TIMEOUT = 1.0


class _Stop(Exception):
    """CloseConnection was handled: flush and stop."""


@final
class Loopy:
    """The writer task of one connection. Owner of everything below: loopy."""

    def __init__(self, core: LoopyCore, transport: trio.abc.SendStream) -> None:
        self._core = core
        self._h2 = core.h2
        self._cbuf = core.cbuf
        self._transport = transport
        self._min_batch = core.config.min_batch_size
        self._write_buffer_size = core.config.write_buffer_size
        # We send no frame larger than we accept ourselves, even if the peer allows it.
        self._max_frame = core.config.max_frame_size
        # The per-stream output state, by stream id (_outstream.py): an entry from
        # the first item loopy handles for a stream until its output is over.
        self._outs: dict[int, OutStream] = {}
        # Invariant: an entry is in _active iff its state is OUT_ACTIVE, and in
        # _waiting iff it is OUT_WAITING (data queued, stream window exhausted).
        self._active: deque[OutStream] = deque()
        # An insertion-ordered dict, not a set: parked streams resume in the order
        # they parked (round robin), the same on every run.
        self._waiting: dict[OutStream, None] = {}
        # Invariant: an entry is in _conn_waiting iff its state is OUT_CONN_WAITING
        # (its next DATA needs the exhausted connection window). A list: only
        # appended, removed and emptied whole; an idle connection keeps it
        # (benchmarks/idle_footprint.py).
        self._conn_waiting: list[OutStream] = []
        # What is framed and not yet written, in order: h2's buffers taken at each
        # DATA frame (ending in its header), payloads, GOAWAYs; h2's own buffer
        # follows them. _chunk_bytes is their total length.
        self._chunks: list[bytes | bytearray | memoryview] = []
        self._chunk_bytes = 0
        # The socket under a trio.SocketStream: flushes are vectored writes.
        sock = transport.socket if isinstance(transport, trio.SocketStream) else None
        self._sock: trio.socket.SocketType | None = (
            sock if sock is not None and hasattr(sock, "sendmsg") else None
        )
        # The stdlib socket under it (None without one): a flush's first sendmsg.
        self._raw = stdlib_socket(self._sock) if self._sock is not None else None
        self._frames = 0
        self._data_frames = 0
        # HEADERS blocks written (with _data_frames: the server's ping policy,
        # PingEnforcer, forgives a client's pings after our writes).
        self._headers_frames = 0
        self._send_alls = 0
        self._bytes = 0
        self._yields = 0
        self.io_failed = False  # True if send_all raised
        # True if send_all was interrupted (cancelled, or cut by cut_write): the wire
        # may end mid-frame.
        self._write_cut = False
        # cut_write (another task, through ConnectionCore.fail) cancels _write_scope
        # while _writing: loopy's whole run, or its final write. One scope per run,
        # not one per send_all: the flag is what a write costs.
        self._write_scope: trio.CancelScope | None = None
        self._writing = False  # inside send_all

    @property
    def parked_on_windows(self) -> bool:
        """Whether a stream waits for a send window (its own or the connection's) to
        reopen. Read by the reader, which queues a ``WindowOpened`` only then: an
        update that finds nobody parked changes nothing loopy would do (it reads
        h2's windows when it frames), and costs it a wake-up for nothing."""
        return bool(self._waiting or self._conn_waiting)

    def outstream_for_testing(self, stream_id: int) -> OutStream | None:
        """Loopy's output entry for ``stream_id``, or None (none, or its output is
        over). For tests, which read it between two of loopy's steps (as grpc-go's
        ``outStreamRequestForTesting``); nothing in the package calls it."""
        return self._outs.get(stream_id)

    @property
    def stream_frames_written(self) -> int:
        """HEADERS and DATA frames written so far (a count that only grows)."""
        return self._data_frames + self._headers_frames

    def statistics(self) -> LoopyStatistics:
        return LoopyStatistics(
            batches=self._cbuf.statistics().batches,
            frames=self._frames,
            data_frames=self._data_frames,
            send_alls=self._send_alls,
            bytes_written=self._bytes,
            yields=self._yields,
        )

    # ------------------------------------------------------------------ the loop

    async def run(self) -> None:
        """Run until the control buffer is finished, CloseConnection, or an error.

        Raises the connection's I/O errors and ``ConnectionClosingError`` (the buffer
        was finished); returns after a fault, which it reported (``LoopyCore.fault``)
        before its last write.

        Checkpoint: always. On cancellation: stops after its last write (what is
        framed, then the GOAWAY still owed; shielded, bounded by
        ``FINAL_WRITE_TIMEOUT``, skipped after a failed or cut write); queued output
        not yet framed is dropped, its write quota returned.
        """
        exit_error: BaseException | None = None
        with trio.CancelScope() as run_scope:
            self._write_scope = run_scope
            try:
                await self._serve()
            except _Stop:
                await self._final_write()
            except ConnectionClosingError as exc:  # the buffer was finished: the end
                exit_error = exc
                await self._final_write()
                raise
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                self.io_failed = True
                exit_error = exc
                raise
            except Exception as exc:
                exit_error = exc
                if self.io_failed:
                    raise  # the transport's send_all: run_loopy reports it; no last write
                # A bug in loopy, or in framing a connection-level item (PING,
                # SETTINGS, GOAWAY, a connection WINDOW_UPDATE; a stream's item fails
                # only its stream, _item_failed): the connection's fault. Reported
                # before the last write, so that write says GOAWAY(INTERNAL_ERROR).
                self._core.fault(exc, "the connection's writer (loopy)")
                await self._final_write()
            except BaseException as exc:
                exit_error = exc
                await self._final_write()
                raise
            finally:
                self._drop_all_output()
                # Finish (if nobody has) before discarding, or the batch is never orphaned.
                error = (
                    self._core.error or exit_error or ConnectionClosingError("connection closed")
                )
                self._cbuf.close_consumer(error)
        if run_scope.cancelled_caught:  # cut_write: the connection was failed meanwhile
            raise self._core.closing_error()

    async def _serve(self) -> None:
        """Loopy's loop (the module docstring's three steps), until an exception ends it."""
        cbuf = self._cbuf
        while True:
            # 1. Block only when there is nothing at all to do.
            self._handle(await cbuf.get())
            self._process_data()
            yielded = False
            # 2. Drain without blocking.
            while True:
                item = cbuf.poll()
                if item is None:
                    if self._process_data():
                        if self._pending() >= self._write_buffer_size:
                            await self._flush()
                        continue
                    pending = self._pending()
                    if pending == 0:
                        break
                    # 3. Yield once if the batch is small, then flush.
                    if not yielded and pending < self._min_batch:
                        yielded = True
                        self._yields += 1
                        await trio.lowlevel.checkpoint()
                        continue
                    await self._flush()
                    break
                self._handle(item)
                self._process_data()
                if self._pending() >= self._write_buffer_size:
                    await self._flush()

    async def _final_write(self) -> None:
        """Loopy's last write: what is framed, then the GOAWAY still owed, if any.

        Once the connection has failed (the buffer is finished: every stream has
        failed), the queued output is released first, so that its write quota is back
        before a write that may wait on a slow peer. (Before that, e.g. after
        CloseConnection, a producer woken by returned quota could still queue, so the
        output is released on the way out, as the buffer is finished.) Skipped after
        a failed or interrupted write. Shielded, bounded by ``FINAL_WRITE_TIMEOUT``,
        and cut short by :meth:`cut_write`; I/O errors are swallowed.
        """
        if self._cbuf.finished:
            self._drop_all_output()
            self._cbuf.discard_batch()
        if self.io_failed or self._write_cut:
            return
        h2 = self._h2
        # After a protocol error h2 is CLOSED and its own GOAWAY is already framed.
        if h2.state_machine.state is not ConnectionState.CLOSED:
            code = self._core.final_goaway_code()
            if code is not None:
                self._write_goaway(GoAway(code))
        with trio.move_on_after(FINAL_WRITE_TIMEOUT) as scope:
            scope.shield = True
            self._write_scope = scope
            with contextlib.suppress(
                trio.BrokenResourceError, trio.ClosedResourceError, ConnectionClosingError
            ):
                await self._flush(final=True)

    # ------------------------------------------------------------------ writing

    def _pending(self) -> int:
        return self._h2.pending_bytes() + self._chunk_bytes

    @property
    def write_cut(self) -> bool:
        """True if a write was interrupted (cancelled or cut): the wire may end mid-frame."""
        return self._write_cut

    def cut_write(self) -> None:
        """The connection was failed (``ConnectionCore.fail``): cancel the write in
        progress, if any, final write included. Synchronous; called by other tasks.

        The connection's end must not wait on a peer that does not read: its streams
        have failed already, and a write cut off leaves nothing more to write (the wire
        may end mid-frame). Loopy then exits, releasing what it holds.
        """
        scope = self._write_scope
        if self._writing and scope is not None:
            scope.cancel()

    async def _flush(self, *, final: bool = False) -> None:
        if not final and self._cbuf.finished:
            # The connection was failed: only the final write (bounded) is left.
            raise self._core.closing_error()
        # One list for every flush, emptied after its write: nothing but loopy
        # touches it, and loopy frames nothing while it waits in the write.
        chunks = self._chunks
        size = self._chunk_bytes
        h2 = self._h2
        if h2.pending_bytes():  # h2's buffer, if it holds anything
            tail = h2.take_outbound()
            chunks.append(tail)
            size += len(tail)
        if not size:
            chunks.clear()  # only empty pieces (none are queued today)
            return
        self._chunk_bytes = 0
        self._send_alls += 1
        self._bytes += size
        self._writing = True
        try:
            if len(chunks) == 1:
                await self._transport.send_all(chunks[0])
            elif self._sock is not None:
                # The usual flush: one sendmsg takes it all; send_vectored writes
                # what is left, waits while the socket is full, and raises
                # send_all's errors (an OSError here wrote nothing: its own
                # sendmsg meets it again).
                sent = 0
                raw = self._raw
                if raw is not None and len(chunks) <= _IOV_MAX:
                    try:
                        sent = raw.sendmsg(chunks)
                    except OSError:
                        sent = 0
                if sent != size:
                    await send_vectored(self._sock, chunks, sent)
            else:
                await self._transport.send_all(b"".join(chunks))
        except Exception:  # resource errors, or a broken Stream wrapper's own
            self.io_failed = True
            raise
        except BaseException:  # cancelled (or cut) inside send_all: part may have gone out
            self._write_cut = True
            raise
        finally:
            self._writing = False
            chunks.clear()  # the callers' buffers are theirs again

    # ------------------------------------------------------------------ items

    def _handle(self, item: ControlItem) -> None:
        """Handle one control item: its handler in ``_HANDLERS``, by the item's class.

        A fault in a stream's item fails only that stream (``_item_failed``); a fault
        in a connection-level item is the connection's (raised).
        """
        if self._h2.state_machine.state is _H2_CLOSED:
            # h2 ended the connection itself (the peer broke the protocol; the
            # reader queued CloseConnection): it now refuses every frame but the
            # GOAWAY it already framed. Drop this item and flush that GOAWAY.
            item.orphan(self._core.closing_error())
            raise _Stop
        handler = _HANDLERS.get(type(item))
        if handler is None:  # pragma: no cover - a new item type without a handler is a bug
            raise AssertionError(f"loopy has no handler for {item!r}")
        try:
            handler(self, item)
        except (_Stop, trio.BrokenResourceError, trio.ClosedResourceError):
            raise
        except Exception as exc:
            if not self._item_failed(item, exc):
                raise

    # One handler per item class (``_HANDLERS``, after the class). An item's
    # ``stream`` is typed as the ItemStream protocol (_items.py cannot import
    # _stream); every item is built for an H2Stream, which mypy is told with
    # ``cast`` or an assert under TYPE_CHECKING.

    def _handle_data(self, item: Data) -> None:
        """Queue a DATA payload on its stream (written by ``_process_data``)."""
        stream = item.stream
        if TYPE_CHECKING:
            assert isinstance(stream, H2Stream)
        sid = stream.stream_id
        out = self._outs.get(sid)
        if out is None:  # the stream's first item: make its entry
            if not sid or stream.core_output_over:
                item.release()  # its output is over: nothing more is written
                return
            out = self._outs[sid] = OutStream(stream)
        self._queue_output(out, item)

    def _handle_headers(self, item: Headers) -> None:
        """A response's HEADERS go out at once; trailers wait for the queued data."""
        stream = item.stream
        if TYPE_CHECKING:
            assert isinstance(stream, H2Stream)
        sid = stream.stream_id
        out = self._outs.get(sid)
        if out is None:  # the stream's first item: make its entry
            if not sid or stream.core_output_over:
                return  # its output is over
            out = self._outs[sid] = OutStream(stream)
        if out.state == OUT_EMPTY:
            self._write_headers(out, item)  # nothing queued: write at once
        else:
            self._queue_output(out, item)  # trailers go after queued data

    def _handle_window_update(self, item: WindowUpdate) -> None:
        """Our WINDOW_UPDATE: the connection's, or a stream's while it is open."""
        h2 = self._h2
        target = cast("H2Stream | None", item.stream)
        if target is None:
            h2.increment_flow_control_window(item.increment)
            self._frames += 1
        elif not target.core_closed and target.stream_id:
            try:
                h2.increment_flow_control_window(item.increment, target.stream_id)
                self._frames += 1
            except (StreamClosedError, KeyError, ProtocolError):
                pass  # the stream ended meanwhile: nothing is owed

    def _handle_peer_response(self, item: PeerResponse) -> None:
        """The reader's answer to a peer's frame (SETTINGS ACK, PING ACK, ...)."""
        self._frames += 1  # its bytes already sit in h2's buffer

    def _handle_window_opened(self, item: WindowOpened) -> None:
        """The peer reopened a send window: parked streams may move."""
        self._core.window_opened_handled(item)
        self._window_opened(item)

    def _handle_ping(self, item: Ping) -> None:
        self._h2.ping(item.data)
        self._frames += 1
        self._core.on_ping_written(item.data)

    def _handle_reset_stream(self, item: ResetStream) -> None:
        stream = cast(H2Stream, item.stream)
        if item.after_end:
            self._reset_after_end(stream, item.error_code)
        else:
            self._reset(stream, item.error_code)

    def _handle_stream_done(self, item: StreamDone) -> None:
        """Over for loopy: nothing more is written for the stream, no RST is owed."""
        stream = cast(H2Stream, item.stream)
        out = self._outs.get(stream.stream_id)
        if out is not None:
            self._drop_output(out)
        stream.loopy_output_reset()

    def _handle_settings(self, item: Settings) -> None:
        self._h2.update_settings(dict(item.changes))
        self._frames += 1

    def _handle_close_connection(self, item: CloseConnection) -> None:
        raise _Stop

    def _item_failed(self, item: ControlItem, exc: Exception) -> bool:
        """Confine a fault in handling ``item`` to its stream.

        Returns False for a connection-level item (the caller re-raises: the fault
        is the connection's). XX: a fault raised inside h2's HPACK encoder may leave
        the encoder's dynamic table ahead of the peer's; only validated byte headers
        reach it, so no such fault is known.
        """
        if isinstance(item, StartStream):
            log.error("loopy could not frame a new stream's HEADERS; failing it", exc_info=exc)
            if item.stream is not None:
                cast(
                    H2Stream, item.stream
                ).loopy_output_reset()  # nothing was sent, nothing more will be
            item.starter.failed(exc)
            return True
        stream = getattr(item, "stream", None)  # Data, Headers, WindowUpdate, ...
        if not isinstance(stream, H2Stream):
            return False
        unreleased = None
        if isinstance(item, Data):
            out = self._outs.get(stream.stream_id)
            queue = out.queue if out is not None else None
            if queue is None or not any(queued is item for queued in queue):
                unreleased = item  # never queued: _drop_output won't see it
        self._stream_failed(stream, exc)
        if unreleased is not None:
            unreleased.release()
        return True

    def _stream_failed(self, stream: H2Stream, exc: Exception) -> None:
        """Reset ``stream`` with INTERNAL_ERROR because framing its output raised ``exc``.

        Idempotent enough for a second fault on the same stream: the stream error,
        the RST_STREAM and the close each happen once.
        """
        log.error(
            "loopy failed framing output of stream %d; resetting it with INTERNAL_ERROR",
            stream.stream_id,
            exc_info=exc,
        )
        error = StreamResetError(stream.stream_id, ErrorCodes.INTERNAL_ERROR, remote=False)
        error.__cause__ = exc
        stream.core_fail(error)
        self._reset(stream, ErrorCodes.INTERNAL_ERROR)  # drops output: quota returns
        self._core.stream_closed(stream)

    def _start_stream(self, item: StartStream) -> None:
        core = self._core
        stream = item.stream
        if TYPE_CHECKING:
            assert stream is None or isinstance(stream, H2Stream)
        error = core.refuse_new_stream_error()
        if error is not None:
            if stream is not None:
                stream.loopy_output_reset()  # it will never send
            item.starter.orphaned(error)
            return
        stream_id = self._h2.get_next_available_stream_id()
        self._h2.send_headers(stream_id, item.headers, end_stream=item.end_stream)
        self._frames += 1
        self._headers_frames += 1
        item.starter.started(stream_id)
        if item.end_stream and stream is not None:
            # The HEADERS carried END_STREAM: our side is done, so the stream
            # closes when the response ends (not only when its block is left).
            stream.loopy_output_ended()
            core.local_end_written(stream)

    def _write_headers(self, out: OutStream, item: Headers) -> None:
        try:
            self._h2.send_headers(out.stream.stream_id, item.headers, end_stream=item.end_stream)
        except StreamClosedError:
            self._drop_output(out)
            return
        self._frames += 1
        self._headers_frames += 1
        if item.end_stream:
            self._local_end(out)

    def _write_goaway(self, item: GoAway) -> None:
        last = item.last_stream_id
        if last is None:
            last = self._h2.highest_inbound_stream_id
        # Keep order: what h2 framed so far goes before our GOAWAY.
        tail = self._h2.take_outbound()
        frame = goaway_frame(last, item.error_code, item.debug_data)
        self._chunks += (tail, frame)
        self._chunk_bytes += len(tail) + len(frame)
        self._frames += 1
        self._core.on_goaway_written(last)

    def _reset_after_end(self, stream: H2Stream, error_code: int) -> None:
        """Reset ``stream`` with ``error_code`` once its END_STREAM is written.

        RFC 9113 §8.1: a complete response may be followed by RST_STREAM(NO_ERROR)
        when the request body is still open. If the END_STREAM went out meanwhile,
        the reset is written now (unless the peer's side has ended since).
        """
        if not stream.core_output_over:
            out = self._outs.get(stream.stream_id)
            if out is not None:
                out.rst_on_end = True  # _local_end resets
            # (No entry, output not over: h2 closed the stream and its output was
            # dropped; no END_STREAM will be written.)
        elif not stream.core_peer_ended and not stream.core_closed:
            self._reset(stream, error_code)
            self._core.stream_closed(stream)

    def _reset(self, stream: H2Stream, error_code: int) -> None:
        out = self._outs.get(stream.stream_id)
        if out is not None:
            self._drop_output(out)
        if stream.stream_id and not stream.core_output_reset:
            stream.loopy_output_reset()
            try:
                self._h2.reset_stream(stream.stream_id, error_code)
                self._frames += 1
            except (StreamClosedError, KeyError, ProtocolError):
                pass  # already closed in h2: no RST is needed

    # ------------------------------------------------------------------ data

    def _queue_output(self, out: OutStream, item: Data | Headers) -> None:
        queue = out.queue
        if queue is None:
            queue = out.queue = deque()
        queue.append(item)
        if out.state == OUT_EMPTY:
            out.state = OUT_ACTIVE
            self._active.append(out)

    def _window_opened(self, item: WindowOpened) -> None:
        kind = item.kind
        if kind is WindowKind.CONNECTION:
            # The connection window reopened: the streams parked on it were at the
            # head of the round robin, so they go back there, in the order they parked.
            conn_waiting = self._conn_waiting
            if conn_waiting:
                for out in conn_waiting:
                    out.state = OUT_ACTIVE
                self._active.extendleft(reversed(conn_waiting))
                conn_waiting.clear()
            return
        if kind is WindowKind.ALL_STREAMS:
            waiting = list(self._waiting)
            self._waiting.clear()
            for out in waiting:
                out.state = OUT_ACTIVE
                self._active.append(out)
            return
        found = self._outs.get(item.stream_id)
        if found is not None and found.state == OUT_WAITING:
            self._waiting.pop(found, None)
            found.state = OUT_ACTIVE
            self._active.append(found)

    def _process_data(self) -> bool:
        """Write one quantum for the stream at the head of the active list.

        The round robin's step: the head stream leaves the list for its turn, and
        goes back to the tail only if it has more to write and may move
        (``_after_write``); it may park on a window instead, or its output may end.
        Returns False if there is no active stream, True otherwise (something was
        written, or the head stream was parked or dropped). A fault in framing fails
        only that stream (``_stream_failed``).
        """
        active = self._active
        if not active:
            return False
        out = active.popleft()
        out.state = OUT_EMPTY  # off the list for its turn
        try:
            queue = out.queue
            assert queue is not None  # an active stream has output queued
            item = queue[0]
            if isinstance(item, Headers):  # trailers reached the head of the queue
                queue.popleft()
                self._write_headers(out, item)
                self._after_write(out)
            elif len(item.payload) == out.offset:  # an empty DATA: END_STREAM only
                self._write_empty_data(out, item)
            else:
                self._write_quantum(out, item)
        except (_Stop, trio.BrokenResourceError, trio.ClosedResourceError):
            raise
        except Exception as exc:
            self._stream_failed(out.stream, exc)
        return True

    def _write_empty_data(self, out: OutStream, item: Data) -> None:
        """An empty DATA at the head of the queue: END_STREAM, if it carries it.

        It needs no window (h2 >= 4.4 allows it), so it goes out even while the
        windows are shut.
        """
        queue = out.queue
        assert queue is not None
        queue.popleft()
        if item.end_stream:
            try:
                self._h2.send_data(out.stream.stream_id, b"", end_stream=True)
                self._frames += 1
                self._data_frames += 1
                self._local_end(out)
            except StreamClosedError:
                # The peer reset the stream after this item was queued: the
                # reader closed it (h2 may have forgotten it), and the
                # StreamDone it queued is still behind this item.
                self._drop_output(out)
                item.release()  # taken off the queue: not dropped above
                return
        item.release()
        self._after_write(out)

    def _write_quantum(self, out: OutStream, item: Data) -> None:
        """One DATA frame of ``item``, the head of ``out``'s queue, as the windows allow.

        With the connection window shut, the stream parks on it (``OUT_CONN_WAITING``):
        the streams behind whose output needs no window (trailers, an empty
        END_STREAM) are not held up by it. With its own window shut, it parks
        (``OUT_WAITING``) until the peer reopens that window.
        """
        h2 = self._h2
        if h2.outbound_flow_control_window <= 0:
            out.state = OUT_CONN_WAITING
            self._conn_waiting.append(out)
            return
        window = self._send_window(out.stream.stream_id)
        if window is None:  # h2 closed the stream: its output is over
            self._drop_output(out)
            return
        if window <= 0:
            out.state = OUT_WAITING
            self._waiting[out] = None
            return
        remaining = len(item.payload) - out.offset
        size = min(remaining, window, h2.max_outbound_frame_size, self._max_frame)
        if not self._frame_quantum(out, item, size):
            self._drop_output(out)
            return
        self._quantum_written(out, item, size)

    def _send_window(self, stream_id: int) -> int | None:
        """The bytes stream ``stream_id`` may send now: the smaller of its window and
        the connection's (h2's ``local_flow_control_window``), read from the stream h2
        holds; None if h2 holds it no longer (closed, or forgotten).

        A hot path (each DATA frame): ``benchmarks/micro/loopy_data.py`` compares it
        with h2's call.
        """
        h2 = self._h2
        h2_stream = h2.streams.get(stream_id)
        if h2_stream is None:
            try:
                return h2.local_flow_control_window(stream_id)
            except (StreamClosedError, KeyError, ProtocolError):
                return None
        return min(h2_stream.outbound_flow_control_window, h2.outbound_flow_control_window)

    def _frame_quantum(self, out: OutStream, item: Data, size: int) -> bool:
        """Frame ``size`` bytes of ``item``'s payload from ``out.offset`` as one DATA
        frame: its header from h2 (``H2State.frame_data``), then the payload itself,
        not a copy of it, appended to what the next flush writes. Returns False if h2
        finds the stream closed (nothing was framed).

        A hot path (each DATA frame): ``benchmarks/micro/loopy_data.py`` compares it
        with h2's ``send_data`` of a slice.
        """
        payload = item.payload
        offset = out.offset
        done = offset + size == len(payload)
        # The payload as it came (a whole bytes object), else a view of it. Made
        # before frame_data: once h2 has handed over its buffer (this frame's header
        # and whatever it framed before) nothing may raise, or those bytes and the
        # window frame_data took would be lost.
        if offset == 0 and done:
            # Whole: bytes as they are; any other buffer as one view of it, held
            # until the flush (a bytearray cannot be resized meanwhile).
            chunk: bytes | memoryview = payload if type(payload) is bytes else memoryview(payload)
        else:
            chunk = memoryview(payload)[offset : offset + size]
        try:
            head = self._h2.frame_data(out.stream.stream_id, size, done and item.end_stream)
        except StreamClosedError:
            return False
        self._chunks += (head, chunk)
        self._chunk_bytes += len(head) + size
        self._frames += 1
        self._data_frames += 1
        return True

    def _quantum_written(self, out: OutStream, item: Data, size: int) -> None:
        """``size`` more bytes of ``item`` are framed: the item is done once all are
        (its write quota returns), and its END_STREAM ends the stream's output;
        otherwise the stream takes its next turn at the tail."""
        offset = out.offset + size
        if offset < len(item.payload):
            out.offset = offset
            self._after_write(out)
            return
        queue = out.queue
        assert queue is not None
        queue.popleft()
        out.offset = 0
        item.release()
        if item.end_stream:
            self._local_end(out)
        else:
            self._after_write(out)

    def _after_write(self, out: OutStream) -> None:
        # The stream was just taken off the head; decide where it goes next (its
        # output may be over: _local_end dropped its queue).
        if not out.queue:
            out.state = OUT_EMPTY
            return
        out.state = OUT_ACTIVE
        self._active.append(out)  # round robin: to the tail

    def _local_end(self, out: OutStream) -> None:
        stream = out.stream
        stream.loopy_output_ended()
        self._drop_output(out)
        if out.rst_on_end and not stream.core_peer_ended:
            # RFC 9113 §8.1: a complete response may be followed by
            # RST_STREAM(NO_ERROR) when the request body is still open.
            self._reset(stream, 0)
        self._core.local_end_written(stream)

    def _drop_output(self, out: OutStream) -> None:
        """Forget a stream's entry and queued output, releasing its data (write
        quota). An item for it that comes later makes a new entry, unless its output
        is over (``_handle``)."""
        self._outs.pop(out.stream.stream_id, None)
        if out.state == OUT_ACTIVE:
            with contextlib.suppress(ValueError):
                self._active.remove(out)
        elif out.state == OUT_WAITING:
            self._waiting.pop(out, None)
        elif out.state == OUT_CONN_WAITING:
            with contextlib.suppress(ValueError):
                self._conn_waiting.remove(out)
        out.state = OUT_EMPTY
        out.offset = 0
        queue = out.queue
        if queue is not None:
            # Let the deque go: a stream whose output is over (most often, a client's
            # request sent while it waits for the response) keeps no empty one
            # (objects per call in flight: benchmarks/grpc_icount.py --objects;
            # docs/grpc.md, "Latency and the cyclic collector").
            out.queue = None
            while queue:
                item = queue.popleft()
                if isinstance(item, Data):
                    item.release()

    def _drop_all_output(self) -> None:
        # Active *and* parked streams: a stream parked on an exhausted window still
        # holds data, and its producer's write quota, until it is dropped.
        # (Every entry on a list is in _outs: _drop_output takes it off both.)
        for out in list(self._outs.values()):
            self._drop_output(out)
        self._outs.clear()
        self._active.clear()
        self._waiting.clear()
        self._conn_waiting.clear()


#: Loopy's handler for each control item class (no item class subclasses another).
_HANDLERS: dict[type[ControlItem], Callable[[Loopy, Any], None]] = {
    Data: Loopy._handle_data,
    Headers: Loopy._handle_headers,
    StartStream: Loopy._start_stream,
    WindowUpdate: Loopy._handle_window_update,
    PeerResponse: Loopy._handle_peer_response,
    WindowOpened: Loopy._handle_window_opened,
    Ping: Loopy._handle_ping,
    ResetStream: Loopy._handle_reset_stream,
    StreamDone: Loopy._handle_stream_done,
    Settings: Loopy._handle_settings,
    GoAway: Loopy._write_goaway,
    CloseConnection: Loopy._handle_close_connection,
}
