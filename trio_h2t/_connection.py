"""ConnectionCore: the state one HTTP/2 connection shares between its tasks.

Theory of operation
-------------------
A connection runs in one nursery holding (``docs/architecture.md`` has the picture):

- the **reader** (``_reader.py``): reads from the transport, feeds ``h2``, and
  dispatches the events to streams; it never waits on a stream, and never writes;
- **loopy** (``_loopy.py``): the only task that writes; it frames all but the
  answers framed inside the reader's ``receive_data`` (docs/h2-contract.md); it
  reaches this class only through the narrow ``LoopyCore`` protocol it declares;
- the **stream tasks**: handlers on a server (started by ``_server.py``'s
  admission), the user's tasks on a client.

What those tasks share is split by owner into three layers, each class extending
the one below (``_lifecycle.py`` has the picture): ``ConnectionLifecycle`` (the
sticky error, GOAWAYs, closing, the end events: set once, by whichever task gets
there first), ``StreamTable`` (``_streamtable.py``: the stream registry and the
quotas), and this module's ``ConnectionCore``: the h2 state machine, the control
buffer and loopy, what only the reader writes (receive windows, read times), what
only loopy writes (ping counts), and the operations that span the layers (``fail``,
``fault``, ``graceful_close``, ``abort``, ``stream_closed``). It imports neither the
reader nor the server, nor ``_runtime.py``, which starts the tasks: they build on it.

Ownership: fields are tagged with the task that owns them. Everything runs on one
thread and every shared mutation happens between two awaits.

A connection is a fault boundary: an unexpected exception in any of its tasks (a
bug in trio_h2t or h2, an odd exception from a transport wrapper) goes to ``fault``,
which ends this connection only, as any other ending does, and logs it once. Each
task reports its own faults (the reader, loopy, the handler runner, the handshake
timer, through ``run_task``); the server's ``_serve`` catches whatever else leaves the
connection's nursery.

Errors are sticky: the first error that ends the connection is kept in ``error``;
every stream still open fails with it, the control buffer is finished with it (so
queued stream starts are orphaned with a clear error), and every later call fails
fast with a ``ConnectionClosingError`` whose ``__cause__`` is that error. If the
peer's GOAWAY carried a code other than NO_ERROR, ``error`` becomes that
``GoAwayError`` when the connection ends (``fail``), so the code and debug data reach
the user. ``docs/errors.md`` has the tables.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Awaitable, Callable

import trio
from h2.connection import ConnectionState
from h2.errors import ErrorCodes
from h2.exceptions import StreamClosedError

from ._config import RFC_DEFAULT_WINDOW, TransportConfig
from ._controlbuf import ControlBuffer
from ._exceptions import (
    ConnectionClosingError,
    ConnectionLostError,
    GoAwayError,
    H2ProtocolError,
    KeepaliveTimeoutError,
    RemoteProtocolError,
)
from ._flow import BDP_PING_DATA, BdpEstimator, ConnectionInFlow
from ._h2state import H2State, make_h2_state
from ._items import (
    CloseConnection,
    ControlItem,
    GoAway,
    PeerResponse,
    Ping,
    ResetStream,
    WindowUpdate,
)
from ._loopy import FINAL_WRITE_TIMEOUT, Loopy
from ._messages import CancelKind, ConnectionInfo, connection_info
from ._pings import DRAIN_PING_DATA, DRAIN_PING_TIMEOUT, MAX_STREAM_ID
from ._sockopts import set_tcp_user_timeout
from ._statistics import ConnectionStatistics
from ._stream import H2Stream
from ._streamtable import StreamTable

__all__ = ["ConnectionCore"]

log = logging.getLogger("trio_h2t")
# hpack logs at DEBUG per header; with its logger at NOTSET each call walks up to
# the root logger once per level change (the result is cached). Importing us leaves
# logging alone (no process-wide side effect); docs/architecture.md tells
# applications how to pin the "hpack" logger themselves.

#: Seconds a cancelled (or overrunning) graceful close waits, shielded, for loopy to
#: close the connection before failing it outright (trio's ``aclose`` rule: graceful
#: under a bounded, shielded deadline, then forceful).
FORCE_CLOSE_WAIT = 1.0


class ConnectionCore(StreamTable):
    """Shared state of one connection (client or server). Built by client/server code."""

    def __init__(
        self,
        transport: trio.abc.Stream,
        *,
        client_side: bool,
        config: TransportConfig,
    ) -> None:
        super().__init__(
            client_side=client_side,
            track_idle=not client_side and config.max_connection_idle is not None,
        )
        self.config = config  # immutable after init
        self.transport = transport  # immutable after init; reads: reader; writes: loopy
        # immutable after init (the object). Its state: the reader (receive_data, and
        # resets of streams it refuses), loopy (every other outbound call), any task's
        # stream_closed (prunes closed streams); each call synchronous. Only loopy
        # takes its bytes (data_to_send), after send_preface.
        self.h2: H2State = make_h2_state(
            client_side=client_side,
            max_concurrent_streams=config.max_concurrent_streams,
            initial_window_size=config.initial_window_size,
            max_header_list_size=config.max_header_list_size,
            max_frame_size=config.max_frame_size,
        )
        self.cbuf = ControlBuffer(throttle_limit=config.throttle_limit)  # immutable after init
        self.loopy = Loopy(self, transport)  # immutable after init

        # -- what the reader writes
        #: Stream window for new streams (grows with the BDP estimate). Owner: reader.
        self.initial_window_size = config.initial_window_size
        # owner: reader: connection-level receive window (what we owe the peer),
        # within the inbound budget (its ``buffered`` is shared: _flow.py says how).
        self.in_flow = ConnectionInFlow(
            min(config.connection_window_size, config.max_unread_bytes),
            config.window_update_ratio,
            config.max_unread_bytes,
        )
        self.settings_acked = False  # owner: reader: the peer acked our SETTINGS
        #: trio.current_time() of the reader's latest read (any inbound bytes count
        #: as a sign of life, for the keepalive task); -inf before the first. Owner:
        #: reader (one store per read, only if tracks_reads).
        self.last_read = -math.inf
        # immutable after init: a keepalive task will run, so the reader keeps
        # last_read (the same tests as _keepalive's *_keepalive_enabled).
        self.tracks_reads = (
            config.keepalive_time is not None
            if client_side
            else config.server_keepalive_time is not None
        )
        if self.tracks_reads:
            # As grpc-go: the kernel gives up on unacknowledged data as soon as the
            # keepalive would (_sockopts.py says why).
            set_tcp_user_timeout(transport, config.keepalive_timeout)

        # -- what loopy writes (and the preface, before loopy runs)
        # PINGs (not ACKs) framed so far, a count that only grows (owner: loopy,
        # on_ping_written; the reader counts PING ACKs beyond it as a flood).
        self.pings_sent = 0
        # What send_preface wrote before loopy started (statistics). Owner: the
        # task running send_preface; set once.
        self._preface_bytes = 0
        self._preface_frames = 0  # owner: as _preface_bytes

        # -- shared, each under the rule beside it
        # shared: the reader adds samples and calculates; loopy timestamps the PING
        # it writes (on_ping_written). Each call is synchronous.
        self.bdp = (
            BdpEstimator(config.initial_window_size, config.max_window_size)
            if config.dynamic_window
            else None
        )
        # shared: set once, by the first task that asks (connection_info()).
        self._info: ConnectionInfo | None = None

    # ------------------------------------------------------------------ start-up

    async def send_preface(self) -> None:
        """Write the preface, our SETTINGS and the connection WINDOW_UPDATE.

        Written directly, before loopy starts (as grpc-go does). Checkpoint: always.
        """
        self.h2.initiate_connection()
        extra = self.in_flow.limit - RFC_DEFAULT_WINDOW
        if extra > 0:
            self.h2.increment_flow_control_window(extra)
        data = self.h2.data_to_send()
        self._preface_bytes = len(data)
        self._preface_frames = 2 if extra > 0 else 1  # SETTINGS (+ WINDOW_UPDATE)
        await self.transport.send_all(data)

    # ------------------------------------------------------------------ streams

    def put(self, item: ControlItem) -> None:
        """Queue ``item`` for loopy; nothing if the connection is already over."""
        # After finish the connection is going away: nothing more is owed.
        with contextlib.suppress(ConnectionClosingError):
            self.cbuf.put(item)

    def cancel_handler(self, stream: H2Stream, kind: CancelKind, code: int | None) -> None:
        """Cancel a server stream's handler, recording why (the first reason wins:
        a deadline scope (``H2Stream.move_on_at``) already cancelled is the reason)."""
        stream.core_cancel_handler(kind, code)

    def refuse_stream(self, stream_id: int) -> bool:
        """RST_STREAM(REFUSED_STREAM) for a new peer stream no handler will see.

        Called by the reader; h2 already decoded the header block, so HPACK stays in
        step. Returns True if the reset was queued (as a throttled ``PeerResponse``).
        A stream the peer has already reset (its RST_STREAM came in the same read as
        its HEADERS, so h2 closed it before we saw the request) needs nothing: False.
        Nor does one whose read ended in a protocol error (the reader dispatches the
        events before the bad frame): h2 has closed the connection and queued its
        GOAWAY, which ends every stream, and would raise on a reset: False.
        """
        if self.h2.state_machine.state is ConnectionState.CLOSED:
            return False
        try:
            self.h2.reset_stream(stream_id, ErrorCodes.REFUSED_STREAM)
        except StreamClosedError:
            return False
        finally:
            # No stream_closed will ever prune it: a peer holding its streams open
            # while it is refused (up to flood_rate a second) grew h2's table
            # forever.
            self.h2.prune_closed_streams(stream_id)
        self.put(PeerResponse("rst"))
        return True

    def connection_info(self) -> ConnectionInfo:
        """The transport's addresses and TLS state, computed on the first call."""
        info = self._info
        if info is None:
            info = self._info = connection_info(self.transport)
        return info

    def stream_closed(self, stream: H2Stream) -> None:
        """Both directions are over, or the stream was reset. Idempotent."""
        if not stream.core_close():
            return
        self._stream_removed(stream.stream_id)
        # Every close path comes here, so h2's stream table is pruned here (amortised
        # O(1)); h2 itself would only prune while counting streams, which we don't.
        self.h2.prune_closed_streams(stream.stream_id)
        self.check_idle()

    def check_idle(self) -> None:
        # Idle = no stream open at the protocol level *and* no handler still running
        # (a handler may finish its work after its stream closed). Only meaningful
        # once closing, or after the peer's GOAWAY.
        if self.streams_by_id or self.handlers_running:
            return
        if self.closing or self.goaway_received is not None:
            self._idle.set()
            self._close_if_done_after_goaway()

    def _close_if_done_after_goaway(self) -> None:
        # Server side: after the client's GOAWAY, the connection ends with its last
        # stream and handler: answer with our own GOAWAY, flush, stop.
        if self.client_side or self.closing or self.goaway_received is None:
            return
        self.closing = True
        self.not_accepting.set()
        self.put(GoAway(ErrorCodes.NO_ERROR))
        self.put(CloseConnection())

    def local_end_written(self, stream: H2Stream) -> None:
        """Loopy wrote our END_STREAM for ``stream``."""
        if stream.core_peer_ended or stream.core_output_reset:
            self.stream_closed(stream)

    def reset_stream(self, stream: H2Stream, code: int, error: BaseException | None) -> None:
        """Reset ``stream`` from a stream task: fail it now, RST_STREAM via loopy."""
        if stream.core_closed:
            return
        if error is not None:
            stream.core_fail(error)
        # RST_STREAM first: closing the stream may make the connection idle, and a
        # server that answered a client's GOAWAY then queues GOAWAY + CloseConnection,
        # behind which loopy would never write this RST (the client would wait on the
        # stream until the connection dropped).
        self.put(ResetStream(stream, code))
        self.stream_closed(stream)

    def send_window_update(self, stream: H2Stream, increment: int) -> None:
        self.put(WindowUpdate(stream, increment))

    def connection_window_freed(self) -> None:
        """Unread bytes left the inbound budget (read, or dropped with their stream):
        send the connection WINDOW_UPDATE the budget held back, if one is now due.
        Synchronous; any task."""
        inc = self.in_flow.grant()
        if inc:
            self.put(WindowUpdate(None, inc))

    # -- loopy callbacks ---------------------------------------------------------------

    def on_ping_written(self, data: bytes) -> None:
        self.pings_sent += 1
        if data == BDP_PING_DATA and self.bdp is not None:
            self.bdp.timesnap(trio.current_time())

    # ------------------------------------------------------------------ shutdown

    def fail(self, error: BaseException, *, finish: bool = True) -> None:
        """End the connection because of ``error``. Synchronous and idempotent.

        Every open stream fails with a ConnectionLostError / ConnectionClosingError
        caused by ``error``; with ``finish`` the control buffer is finished too, so
        queued stream starts are orphaned, a write loopy has in progress is cut off
        (``Loopy.cut_write``), and nothing more is written but loopy's last write
        (bounded; skipped after a cut). (The reader
        passes ``finish=False`` after a protocol error so loopy can still flush h2's
        GOAWAY; loopy finishes the buffer, and sets ``done``, on its way out.)
        """
        if self.error is None:
            goaway = self.goaway_received
            if (
                goaway is not None
                and goaway.error_code != ErrorCodes.NO_ERROR
                and not isinstance(error, GoAwayError | H2ProtocolError)
            ):
                # The peer's GOAWAY said why the connection ends: keep its code
                # visible (the ending itself, a lost link or our close, is the cause).
                goaway_error = self.goaway_error()
                goaway_error.__cause__ = error
                error = goaway_error
            self.error = error
        kind: CancelKind = "shutdown"
        code = None
        if isinstance(error, trio.BrokenResourceError):
            kind = "connection-lost"
            if isinstance(error, H2ProtocolError):
                code = error.error_code
        for stream in list(self.streams_by_id.values()):
            if isinstance(error, KeepaliveTimeoutError):
                stream_error: BaseException = KeepaliveTimeoutError(str(error))
            elif isinstance(error, trio.BrokenResourceError):
                stream_error = ConnectionLostError("the connection was lost")
            else:
                stream_error = ConnectionClosingError("the connection was closed")
            stream_error.__cause__ = error
            self.cancel_handler(stream, kind, code)  # first, as in _on_stream_reset
            stream.core_fail(stream_error)
            self.stream_closed(stream)
        self.wake_quota_waiters()
        self.not_accepting.set()
        self._idle.set()
        self.settings_received.set()
        if self.drain_ack is not None:
            self.drain_ack.set()
        self.wake_keepalive()
        if finish:
            self.cbuf.finish(error)
            # A write in progress would hold the end on a peer that does not read:
            # cut it (loopy then exits, releasing its output; docs/cancellation.md).
            self.loopy.cut_write()
            # Without finish, loopy is still to flush the GOAWAY: ``done`` waits for
            # it (run_loopy sets it), or whoever waits on ``done`` would tear the
            # connection down before the GOAWAY is written.
            self.done.set()

    def enhance_your_calm(self, debug_data: bytes, message: str) -> None:
        """End the connection because the peer went over one of our budgets.

        Called by the reader, which then stops reading. Queues GOAWAY(ENHANCE_YOUR_CALM,
        ``debug_data``, the real last stream id) and CloseConnection, and fails the
        connection with a ``RemoteProtocolError`` carrying that code (``finish=False``,
        so loopy still writes the GOAWAY; its final write is bounded). New streams
        are refused from now on. Logged once at WARNING: it is the peer's doing.
        """
        if self.error is not None:
            return
        log.warning("closing the connection: %s (GOAWAY ENHANCE_YOUR_CALM)", message)
        self.closing = True
        self.not_accepting.set()
        self.put(GoAway(ErrorCodes.ENHANCE_YOUR_CALM, debug_data=debug_data))
        self.put(CloseConnection())
        self.fail(
            RemoteProtocolError(message, error_code=ErrorCodes.ENHANCE_YOUR_CALM), finish=False
        )

    def fault(self, exc: BaseException, where: str) -> None:
        """End the connection because ``where`` raised ``exc``: an exception that is no
        part of any way a connection ends (a bug in trio_h2t or h2, or a transport
        wrapper raising something other than trio's resource errors). Synchronous.

        Only this connection ends: its streams fail with ConnectionLostError caused
        (through the connection's error, a ConnectionLostError naming ``where``) by
        ``exc``, and loopy's last write says GOAWAY(INTERNAL_ERROR) with the real last
        stream id, if no GOAWAY went out yet and loopy can still write
        (``final_goaway_code``). The first fault is logged at ERROR with its traceback
        on the ``trio_h2t`` logger; a later one (another task tripping over the same
        broken state) only at DEBUG. Nothing is raised: the caller's task ends as it
        would after any other ending.
        """
        if self.fault_error is None:
            self.fault_error = exc
            log.error(
                "%s raised %s; closing the connection",
                where,
                type(exc).__name__,
                exc_info=exc,
                extra={"h2t_fault": True},
            )
        else:
            log.debug("%s raised too: %r", where, exc)
        err = ConnectionLostError(f"{where} raised {type(exc).__name__}")
        err.__cause__ = exc
        self.fail(err)

    async def run_task(self, fn: Callable[[], Awaitable[object]], where: str) -> None:
        """Run ``fn()`` as one of this connection's tasks, named ``where`` in a fault:
        an unexpected exception leaving it is the connection's (:meth:`fault`), never
        its nursery's. For tasks with no ending of their own to map (the reader, loopy
        and the handler runner report their faults themselves). Checkpoint: as ``fn``.
        """
        try:
            await fn()
        except Exception as exc:
            self.fault(exc, where)

    async def watch_handshake(self, deadline: float) -> None:
        """Fail the connection if the peer's first SETTINGS has not arrived by
        ``deadline`` (``config.handshake_timeout`` after the connection started);
        return as soon as it has (or the connection ended: ``fail`` sets
        ``settings_received`` too).

        Run on both sides in the connection nursery (``_runtime.py``), so an idle
        socket whose peer never completes the handshake is not held forever; a
        client's ``open_client_connection`` then reports the timeout
        (``handshake_timed_out``). Checkpoint: always.
        On cancellation: returns at once, failing nothing.
        """
        timeout = self.config.handshake_timeout
        with trio.move_on_at(deadline):
            await self.settings_received.wait()
        if not self.settings_received.is_set():
            self.handshake_timed_out = True
            peer = "server" if self.client_side else "client"
            self.fail(
                ConnectionLostError(
                    f"the {peer} did not complete the HTTP/2 handshake within {timeout:g} s"
                )
            )

    async def run_loopy(self) -> None:
        """Run loopy; turn how it ends into the connection's fate. Never raises but
        for cancellation (a fault goes to :meth:`fault`). Checkpoint: always."""
        try:
            await self.loopy.run()
        except ConnectionClosingError:
            pass
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            err = ConnectionLostError("writing to the connection failed")
            err.__cause__ = exc
            self.fail(err)
        except Exception as exc:
            # From the transport's send_all, or a bug on loopy's way out (a bug inside
            # its loop was reported by loopy itself, before its last write).
            where = (
                "the transport's send_all"
                if self.loopy.io_failed
                else "the connection's writer (loopy)"
            )
            self.fault(exc, where)
        finally:
            try:
                if self.error is None:
                    self.fail(ConnectionClosingError("the connection was closed"))
                else:
                    self.cbuf.finish(self.error)
                # Loopy's batch after a CloseConnection was never handed out: orphan
                # it (this task is the consumer), so every item is taken or orphaned.
                self.cbuf.discard_batch()
            finally:
                self.reader_scope.cancel()  # the connection is over: stop reading
                self.done.set()

    async def abort(self, error: BaseException) -> None:
        """End the connection at once, but tell the peer first (a hard close).

        Queues GOAWAY(NO_ERROR, the real last stream id) and CloseConnection behind
        whatever the stream tasks queued (a client's RST_STREAM(CANCEL) goes out
        first), waits for loopy to write them and stop, then fails the connection
        with ``error`` (kept only if it is the first). If the connection already
        ended (a protocol error: h2's GOAWAY carries its code), it only waits for
        loopy's last write. The wait is shielded and bounded by
        ``FINAL_WRITE_TIMEOUT``; the caller then cancels the connection's tasks.

        Checkpoint: always. On cancellation: shielded: it still waits, bounded.
        """
        if self.error is None and not self.cbuf.finished:
            if not self.closing:
                self.closing = True
                self.not_accepting.set()
                self.put(GoAway(ErrorCodes.NO_ERROR))
            self.put(CloseConnection())
        with trio.move_on_after(FINAL_WRITE_TIMEOUT) as scope:
            scope.shield = True
            await self.done.wait()
        self.fail(error)

    async def graceful_close(
        self,
        *,
        timeout: float | None = None,  # noqa: ASYNC109
        debug_data: bytes = b"",
    ) -> None:
        """Drain: send GOAWAY, let open streams finish (up to ``timeout``), then stop
        loopy.

        A server drains in two phases, as grpc-go does (docs/keepalive-and-shutdown.md,
        "The drain"): GOAWAY(NO_ERROR, last stream id 2^31-1) and a PING
        (``DRAIN_PING_DATA``); new streams are still admitted, since the client may
        have sent them before it read that GOAWAY; on the PING's ACK (or after
        ``DRAIN_PING_TIMEOUT``) the second GOAWAY carries the exact last stream id,
        the highest admitted so far, and every later stream is refused
        (REFUSED_STREAM). A client sends one GOAWAY (last stream id 0). ``timeout``
        counts from the first GOAWAY; when it runs out the streams still open are
        ended with the connection (their handlers cancelled, ``"shutdown"``).

        ``debug_data`` goes in the GOAWAYs (the keepalive task's ``max_idle`` and
        ``max_age``); a drain already under way keeps its own, and a second caller
        waits for the same drain (with its own ``timeout``).

        Checkpoint: always. On cancellation (or if loopy has not stopped in time): the
        drain is cut short, not the close: the second GOAWAY is queued if it was not,
        loopy is told to close now (open streams fail, the GOAWAY goes out), waited
        for under a shield for at most ``FORCE_CLOSE_WAIT`` seconds, and the
        connection is failed if it is still not over (``tests/test_cancellation.py``).
        """
        if timeout is None:
            timeout = self.config.graceful_close_timeout
        try:
            with trio.move_on_after(timeout):
                if self.client_side:
                    if not self.closing and self.error is None:
                        self.closing = True
                        self.not_accepting.set()
                        self.put(
                            GoAway(ErrorCodes.NO_ERROR, last_stream_id=0, debug_data=debug_data)
                        )
                        self.check_idle()
                elif self.drain_ack is None and not self.closing and self.error is None:
                    await self._drain_first_phase(debug_data)
                await self._idle.wait()
            if self.error is None:
                self.put(CloseConnection())
            with trio.move_on_after(max(timeout, 1.0)):
                await self.done.wait()
        finally:
            if not self.done.is_set():
                if self.error is None:
                    self.put(CloseConnection())
                with trio.CancelScope(shield=True), trio.move_on_after(FORCE_CLOSE_WAIT):
                    await self.done.wait()
                if not self.done.is_set():
                    self.fail(ConnectionClosingError("the connection was closed"))

    async def _drain_first_phase(self, debug_data: bytes) -> None:
        """A server drain's first phase; ends by queueing the second GOAWAY, however
        it ends (the ACK, ``DRAIN_PING_TIMEOUT``, or cancellation).

        Checkpoint: always. On cancellation: the second GOAWAY is queued all the same.
        """
        ack = self.drain_ack = trio.Event()
        try:
            self.put(
                GoAway(ErrorCodes.NO_ERROR, last_stream_id=MAX_STREAM_ID, debug_data=debug_data)
            )
            self.put(Ping(DRAIN_PING_DATA))
            with trio.move_on_after(DRAIN_PING_TIMEOUT):
                await ack.wait()
        finally:
            self._drain_second_phase(debug_data)

    def _drain_second_phase(self, debug_data: bytes) -> None:
        """Stop admitting streams and queue the GOAWAY with the exact last stream id.

        Synchronous, so no request can be admitted between the id's reading and
        ``closing``: the reader admits (or refuses) each stream h2 knows in the same
        step as h2 learns of it, so ``highest_inbound_stream_id`` is the highest stream
        a handler may see, and every stream above it is refused (REFUSED_STREAM).
        """
        if self.closing or self.error is not None:
            return  # the client's GOAWAY, or an ending, got there first
        self.closing = True
        self.not_accepting.set()
        last = self.h2.highest_inbound_stream_id
        self.put(GoAway(ErrorCodes.NO_ERROR, last_stream_id=last, debug_data=debug_data))
        self.check_idle()

    def statistics(self) -> ConnectionStatistics:
        """A snapshot of the counters and windows (``ConnectionStatistics``)."""
        loopy = self.loopy.statistics()
        h2 = self.h2
        return ConnectionStatistics(
            streams_open=len(self.streams_by_id),
            streams_opened=self.streams_opened,
            bytes_sent=self._preface_bytes + loopy.bytes_written,
            bytes_received=h2.bytes_received,
            frames_sent=self._preface_frames + loopy.frames,
            frames_received=h2.frames_received,
            send_window=h2.outbound_flow_control_window,
            # What the peer may still send: the window we granted, less what it sent
            # that we have not yet returned with a WINDOW_UPDATE.
            receive_window=self.in_flow.limit - self.in_flow.unacked,
            stream_send_window=h2.remote_settings.initial_window_size,
            stream_receive_window=self.initial_window_size,
            loopy=loopy,
        )
