"""H2Stream: the per-stream object a handler (server) or a user task (client) holds.

Theory of operation
-------------------
A stream object is touched by three tasks, each on its own fields (tags below):

- the **stream task** (the handler on a server, the user's task on a client) calls the
  public methods. Sending never writes to the socket: ``send_*`` put a control item
  on the connection's control buffer and return; ``send_data`` first waits for
  *write quota*, so a producer cannot queue unbounded data ahead of flow control.
- the **reader** appends what arrives (headers, data, trailers, resets) and wakes the
  stream task. It never waits on the stream: a slow stream only stops its own window.
  Each field it writes here is a hand-off the stream task reads (``reader_deliver_*``);
  what only the reader uses stays in the reader (tests/test_stream_privacy.py fails
  on a field only ``reader_*`` methods touch).
- **loopy** keeps the stream's output queue in its own table (``_outstream.py``) and
  writes it, a quantum at a time; the stream holds only whether its output is over.

The reader, loopy and the connection core reach a stream through methods named for
the calling task (``reader_*``, ``loopy_*``, ``core_*``, ``server_*``, ``client_*``,
``view_*``: the tasks' interface, at the end of the class) and read a few plain
fields (``core_closed``, ``core_peer_ended``, ``core_output_over``...), which only
this module writes; no other module touches an underscore member
(tests/test_stream_privacy.py).

Every mutation of shared fields happens between awaits, so no lock is needed; where
two tasks touch a field the tag says ``shared`` and what keeps it consistent.

Errors are sticky: once a stream is reset, or its connection fails, every later
call raises an error whose cause is the same first error.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Mapping, Sequence
from typing import final

import trio
from h2.errors import ErrorCodes

from ._exceptions import ConnectionClosingError, H2ProtocolError, StreamResetError
from ._flow import StreamInFlow
from ._headers import HEAD_RULE, BodyRule, validate_to_send
from ._items import Data, Headers
from ._messages import DEADLINE, CancelKind, CancelReason, Request
from ._protocols import StreamCore
from ._streamview import H2StreamView
from ._util import NoPublicConstructor

__all__ = ["CONTINUE_RESPONSE", "H2Stream", "HeaderList", "TASK_INTERFACE_PREFIXES"]

HeaderList = list[tuple[bytes, bytes]]

#: The prefixes of H2Stream's members that the transport's own tasks call (the
#: tasks' interface, at the end of the class): not for applications, so the API
#: reference (docs/conf.py) and tests/test_exports.py leave them out.
TASK_INTERFACE_PREFIXES = ("reader_", "loopy_", "core_", "server_", "client_", "view_")


def _as_header_list(headers: Sequence[tuple[bytes | str, bytes | str]]) -> HeaderList:
    # A list or tuple of tuples of bytes (what the gRPC layer and most callers pass)
    # is copied whole after a test of its field types: 8,100 instructions for a
    # 7-field gRPC request block instead of 11,900 (callgrind), most of the
    # difference the ABC isinstance test below, which a list or tuple (neither a
    # Mapping nor str/bytes) can skip.
    kind_of = type(headers)
    if kind_of is list or kind_of is tuple:
        for pair in headers:
            if (
                type(pair) is not tuple
                or len(pair) != 2
                or type(pair[0]) is not bytes
                or type(pair[1]) is not bytes
            ):
                break
        else:
            return list(headers)  # type: ignore[arg-type]  # checked: tuples of bytes
    if isinstance(headers, Mapping | str | bytes):
        kind = "a dict" if isinstance(headers, Mapping) else type(headers).__name__
        raise TypeError(
            f"headers must be a sequence of (name, value) pairs, not {kind}"
            + (": pass list(headers.items())" if isinstance(headers, Mapping) else "")
        )
    out: HeaderList = []
    append = out.append
    for pair in headers:
        try:
            name, value = pair
        except (TypeError, ValueError):
            raise TypeError(f"each header must be a (name, value) pair, not {pair!r}") from None
        if type(name) is bytes and type(value) is bytes and type(pair) is tuple:
            append(pair)  # type: ignore[arg-type]  # already a tuple of bytes: no copy
            continue
        append((_field(name, "ascii", "name"), _field(value, "utf-8", "value")))
    return out


def _block_to_send(
    headers: Sequence[tuple[bytes | str, bytes | str]], *, response: bool, trailer: bool
) -> tuple[HeaderList, BodyRule | None]:
    """``headers`` as a list of byte pairs, checked by ``validate_to_send``
    (ValueError), and what it lets the body after it be (``_headers.body_rule``)."""
    block = _as_header_list(headers)
    return block, validate_to_send(block, response=response, trailer=trailer)


def _is_head(request: HeaderList) -> bool:
    """True for a HEAD request (the loop stops at ``:method``, usually the first)."""
    for name, value in request:
        if name == b":method":
            return value == b"HEAD"
    return False


def _long_body(total: int, rule: BodyRule) -> str:
    limit, _, what = rule
    if not limit and not rule[1]:
        return f"{what} has no body; nothing was queued"
    return (
        f"this would make the body {total} bytes, over {what} (RFC 9113 §8.1.1); nothing was queued"
    )


def _short_body(total: int, rule: BodyRule) -> str:
    return (
        f"this would end the body at {total} bytes, short of {rule[2]} (RFC 9113 "
        "§8.1.1); nothing was queued"
    )


#: What ``expect: 100-continue`` gets on the handler's first body read.
CONTINUE_RESPONSE: HeaderList = [(b":status", b"100")]


def _check_bool(value: object, what: str) -> None:
    # ``is`` tests, not isinstance: no call on the hot path, and 0/1 are refused too.
    if value is not True and value is not False:
        raise TypeError(f"{what} must be a bool, not {type(value).__name__}")


def _check_int(value: object, what: str) -> int:
    """``value`` if it is an int (not a bool), else TypeError."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise TypeError(f"{what} must be an int, not {type(value).__name__}")


def _check_payload(data: object) -> None:
    if type(data) is not bytes and not isinstance(data, bytes | bytearray | memoryview):
        raise TypeError(f"data must be bytes, bytearray or memoryview, not {type(data).__name__}")


def _writable_bytes(buffer: object) -> memoryview:
    """``buffer`` as a flat, writable byte view (TypeError if it is not one)."""
    try:
        view = memoryview(buffer)  # type: ignore[arg-type]  # any buffer; checked here
    except TypeError:
        raise TypeError(
            f"buffer must be a writable bytes-like object, not {type(buffer).__name__}"
        ) from None
    if view.readonly:
        raise TypeError(f"buffer must be writable ({type(buffer).__name__} is read-only)")
    if not view.c_contiguous:
        raise TypeError("buffer must be contiguous")
    return view.cast("B") if view.format != "B" or view.ndim != 1 else view


def _field(field: object, encoding: str, what: str) -> bytes:
    if isinstance(field, str):
        return field.encode(encoding)
    if isinstance(field, bytes | bytearray | memoryview):
        return bytes(field)
    raise TypeError(f"a header {what} must be bytes or str, not {type(field).__name__}")


@final
class H2Stream(metaclass=NoPublicConstructor):
    """One HTTP/2 stream. Built by the library; see ``open_stream`` and ``serve_*``.

    Sending: :meth:`send_headers`, :meth:`send_data`, :meth:`send_trailers`,
    :meth:`end`. Receiving: :meth:`receive_headers`, :meth:`receive_some` (or
    ``async for chunk in stream``), :meth:`receive_into` (into a buffer of yours),
    :meth:`receive_trailers`. Aborting: :meth:`reset`. Without a checkpoint, for a
    caller that checkpoints once around several operations (trio's ``op_nowait``
    convention): :meth:`send_headers_nowait`, :meth:`send_data_nowait`,
    :meth:`send_trailers_nowait`, :meth:`receive_some_nowait`.

    One task may receive while another sends (a bidirectional stream); two tasks
    receiving at once, or sending at once, get ``trio.BusyResourceError``.
    """

    __slots__ = (
        "_body_rule",
        "_body_sent",
        "_cancel_reason",
        "_chunks",
        "_continue_pending",
        "_core",
        "_deadline_scope",
        "_headers",
        "_in_flow",
        "_info_read",
        "_informational",
        "_recv_waiter",
        "_request_view",
        "_send_waiter",
        "_trailers",
        "_write_quota",
        "core_closed",
        "core_end_queued",
        "core_error",
        "core_headers_sent",
        "core_output_over",
        "core_output_reset",
        "core_peer_ended",
        "server_handler_scope",
        "stream_id",
    )

    def __init__(
        self, core: StreamCore[H2Stream], *, stream_id: int, headers: HeaderList | None
    ) -> None:
        self._core = core  # immutable after init
        config = core.config
        #: The HTTP/2 stream id; 0 until loopy writes a client stream's HEADERS.
        self.stream_id = stream_id  # owner: loopy (client) / reader (server), set once

        # -- inbound: hand-offs the reader writes (reader_deliver_*) and the stream
        # task reads, no await between; nothing here is the reader's alone
        # owner: reader. Request (server) or response (client) headers.
        self._headers = headers
        # shared: the reader appends, the stream task pops. Built on the first DATA
        # (a deque is ~600 bytes; most unary streams carry no body one way or the other).
        # A chunk is bytes, or a memoryview: of the reader's frame buffer (copied by
        # ``reader_detach`` before the reader reuses those bytes), or of a chunk partly read.
        self._chunks: deque[bytes | memoryview] | None = None
        self.core_peer_ended = False  # owner: reader: END_STREAM received
        self._trailers: HeaderList | None = None  # owner: reader
        # shared: the reader (on_data, new_limit), the stream task (on_read, request),
        # stream_closed in any task (release); each call synchronous.
        self._in_flow = StreamInFlow(
            core.initial_window_size, config.window_update_ratio, core.in_flow
        )
        # shared: the task waiting to receive (set by it, cleared by whoever wakes
        # it or by its cancellation) and the one waiting for write quota. One slot
        # each, not a ParkingLot: fewer objects per waiting stream. A woken task
        # re-checks its condition; a second task waiting on the same side gets
        # trio.BusyResourceError (as on any trio stream).
        self._recv_waiter: trio.lowlevel.Task | None = None
        self._send_waiter: trio.lowlevel.Task | None = None  # shared: as _recv_waiter
        # owner: reader. Client only: the 1xx responses received, in order (at most
        # _h2state.MAX_INFORMATIONAL: h2 resets a stream past it; built on the first).
        self._informational: list[HeaderList] | None = None
        # owner: stream task. How many of them receive_informational returned.
        self._info_read = 0
        # shared: set by the reader (server) when the request asks for
        # ``expect: 100-continue``; cleared by the stream task once a 100 or the
        # final response is queued (the first body read queues the 100).
        self._continue_pending = False

        # shared: sticky, set once by whoever ends the stream abnormally (core_fail).
        self.core_error: BaseException | None = None

        # -- outbound: the stream task (its opener or its handler runner included)
        self.core_headers_sent = headers is None  # owner: stream task; client: by open_stream
        # owner: stream task. END_STREAM queued (by data, trailers or end()).
        self.core_end_queued = False
        # shared: -= by the stream task; += by the Data item's release, run by
        # loopy once written, or by the task that finishes the control buffer
        # (orphaning). May go negative: one big write is admitted.
        self._write_quota = config.write_quota
        # What our own header block allows the body to be: (at most / exactly this
        # many bytes, exact?, what says so) from its content-length, a response to
        # HEAD or a 204/304 (RFC 9110 §8.6, §9.3.2, §6.4.1); None: no rule. Set with
        # the headers; ``_body_sent`` counts the body bytes queued while it is set.
        # owner: stream task (both).
        self._body_rule: BodyRule | None = None
        self._body_sent = 0  # owner: stream task

        # owner: loopy (loopy_output_ended / loopy_output_reset); any task reads.
        # Whether loopy will write more for this stream, the one fact of its output
        # state (which lives in loopy's own table, _outstream.py) other tasks read:
        # our END_STREAM or RST_STREAM is written, or none is owed.
        self.core_output_over = False
        # owner: loopy, as core_output_over: our RST_STREAM is written, or none is
        # owed (the peer reset the stream, or it never started).
        self.core_output_reset = False

        # shared: set once, by core.stream_closed, which the reader, loopy and the
        # stream task all call: both directions over (or reset); deregistered.
        self.core_closed = False
        #: Server only: the handler's cancel scope (cancelled if the peer resets).
        #: Owner: reader (set once, at admission).
        self.server_handler_scope: trio.CancelScope | None = None
        #: Server only: why the core cancelled that scope; set once, with the cancel.
        #: Shared: core.cancel_handler, from the reader (a reset) or fail() (any task).
        self._cancel_reason: CancelReason | None = None
        #: Server only: the handler's deadline scope (move_on_at), or None.
        #: Owner: stream task (set by move_on_at); core.cancel_handler reads it.
        self._deadline_scope: trio.CancelScope | None = None
        # owner: stream task. The Request view, built on first use.
        self._request_view: Request | None = None

    def __repr__(self) -> str:
        state = "closed" if self.core_closed else "open"
        return f"<trio_h2t.H2Stream id={self.stream_id} {state}>"

    # ------------------------------------------------------------------ receiving

    @property
    def headers(self) -> HeaderList | None:
        """The request headers (server) or response headers (client), once received."""
        return self._headers

    @property
    def informational(self) -> list[HeaderList]:
        """The informational (1xx) responses received so far, in order (client side).

        Each is a header list starting with its ``:status`` (e.g. 103 Early Hints,
        100 Continue). They never appear in :attr:`headers`: :meth:`receive_headers`
        waits for the final response. A new list on each access; always empty on a
        server stream.
        """
        return list(self._informational or ())

    @property
    def trailers(self) -> HeaderList | None:
        """Trailers received from the peer, if any (after the end of the stream)."""
        return self._trailers

    @property
    def request(self) -> Request:
        """The request head, decoded (server side); method, path, headers, peer...

        Built on first use from :attr:`headers` (see ``trio_h2t.Request``).
        Raises RuntimeError on a client stream (it has no request to read).
        """
        view = self._request_view
        if view is None:
            if self._core.client_side or self._headers is None:
                raise RuntimeError("stream.request exists only on a server stream")
            view = Request._from_block(self._headers, self._core.connection_info())
            self._request_view = view
        return view

    @property
    def cancel_reason(self) -> CancelReason | None:
        """Why this stream's handler was cancelled, or None (server side).

        Set when the connection cancels the handler: the peer reset the stream
        (``"peer-reset"`` and its code), the peer's request was malformed
        (``"stream-error"``), the connection was lost (``"connection-lost"``) or
        closed by this side (``"shutdown"``). ``"deadline"`` once the handler's
        deadline scope (:meth:`move_on_at`) is cancelled. The first reason stays:
        a connection cancellation after the deadline leaves ``"deadline"``, a
        deadline passing after the connection cancelled the handler leaves the
        connection's reason. None if nothing of these cancelled the handler (a
        cancellation from outside, e.g. of ``serve_tcp``, or by the handler's own
        scopes).
        """
        reason = self._cancel_reason
        if reason is None:
            scope = self._deadline_scope
            if scope is not None and scope.cancel_called:
                return DEADLINE
        return reason

    def move_on_at(self, deadline: float) -> trio.CancelScope:
        """A cancel scope with ``deadline`` (Trio clock), as ``trio.move_on_at``, that
        is this handler's deadline (server side). Synchronous.

        Enter it around the work the deadline bounds. Once it is cancelled (its
        deadline passed while it was entered), :attr:`cancel_reason` is
        ``"deadline"``, unless the connection cancelled the handler before. The
        transport does nothing else with it: what the handler answers when the scope
        catches the cancellation is its own business (``trio_h2t.grpc``'s server
        answers DEADLINE_EXCEEDED). Cancelling the scope by hand counts as its
        deadline: use another scope for that. The stream keeps the last scope made.

        Raises RuntimeError on a client stream (its task is the caller's own: time it
        with ``trio.move_on_at``).
        """
        if self.server_handler_scope is None:
            raise RuntimeError("stream.move_on_at exists only on a server stream")
        scope = trio.CancelScope(deadline=deadline)
        self._deadline_scope = scope
        return scope

    async def receive_headers(self) -> HeaderList:
        """Wait for the peer's headers (the response, on a client) and return them.

        On a client this is the final response: informational (1xx) responses
        before it are skipped here, and kept in :attr:`informational` (see
        :meth:`receive_informational`).

        Checkpoint: always. On cancellation: nothing is consumed.

        Raises:
            StreamResetError: the stream was reset (StreamRefusedError if refused).
            trio.BrokenResourceError: the connection broke.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        parked = False
        while self._headers is None:
            self._raise_if_error()
            if self.core_peer_ended:
                raise StreamResetError(self.stream_id, ErrorCodes.PROTOCOL_ERROR, remote=False)
            parked = True
            self._enter_recv_wait()
            await trio.lowlevel.wait_task_rescheduled(self._abort_recv)
            # A stream failed by the end of its connection wakes us; if our task was
            # cancelled meanwhile (a handler's scope is cancelled first), Cancelled wins.
            await trio.lowlevel.checkpoint_if_cancelled()
        # The park was the schedule point; only a call that found the headers there
        # yields here (a ``while ... else`` yielded after a park too: a second step
        # each time a client waited for its response).
        if not parked:
            await trio.lowlevel.cancel_shielded_checkpoint()
        return self._headers

    async def receive_informational(self) -> HeaderList | None:
        """Wait for the next informational (1xx) response, or for the final response.

        Returns the next 1xx header list not yet returned by this method (its
        ``:status`` first), or None once the final response has arrived (or the
        peer ended the stream) and every 1xx before it was returned. For
        ``expect: 100-continue``, wait for a 100 before sending the body (bounded,
        as RFC 9110 §10.1.1 asks: a server may never send one)::

            with trio.move_on_after(1):
                while (info := await stream.receive_informational()) is not None:
                    if info[0] == (b":status", b"100"):
                        break
            # then send the body, unless the final response already said no

        Checkpoint: always. On cancellation: nothing is consumed.

        Raises:
            RuntimeError: on a server stream (a client sends no 1xx).
            StreamResetError, trio.BrokenResourceError: as :meth:`receive_headers`,
                once every 1xx received before the error was returned.
        """
        if not self._core.client_side:
            raise RuntimeError("receive_informational() is for client streams")
        await trio.lowlevel.checkpoint_if_cancelled()
        parked = False
        block: HeaderList | None
        while True:
            info = self._informational
            if info is not None and self._info_read < len(info):
                block = info[self._info_read]
                self._info_read += 1
                break
            if self._headers is not None or self.core_peer_ended:
                block = None
                break
            self._raise_if_error()
            parked = True
            self._enter_recv_wait()
            await trio.lowlevel.wait_task_rescheduled(self._abort_recv)
            await trio.lowlevel.checkpoint_if_cancelled()  # Cancelled wins, as above
        if not parked:
            await trio.lowlevel.cancel_shielded_checkpoint()
        return block

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        """Return the next bytes of the body (at most ``max_bytes``); ``b""`` at its end.

        Each read returns stream window to the peer (a WINDOW_UPDATE goes out once
        ``window_update_ratio``, half, of the window has been read).

        Checkpoint: always. On cancellation: no data is lost.

        Raises:
            StreamResetError: the stream was reset (StreamRefusedError if refused).
            trio.BrokenResourceError: the connection broke (see ``__cause__``).
            TypeError, ValueError: ``max_bytes`` is not None or an int >= 1 (checked
                first, whatever the stream's state; nothing is consumed).
        """
        # ``type(x) is int`` first: the check costs no call for the usual int.
        if max_bytes is not None and (
            (max_bytes if type(max_bytes) is int else _check_int(max_bytes, "max_bytes")) < 1
        ):
            raise ValueError(f"max_bytes must be >= 1, not {max_bytes}")
        await trio.lowlevel.checkpoint_if_cancelled()
        if self._continue_pending:
            self._send_continue()
        if self.core_error is not None and not self.core_peer_ended:
            # A failed stream whose peer had not finished: what is buffered is an
            # incomplete body, so it is not handed out (only a peer that completed
            # its side, e.g. before a RST_STREAM(NO_ERROR), leaves it readable).
            self._raise_if_error()
        parked = False
        while not self._chunks:
            if self.core_peer_ended:
                if not parked:
                    await trio.lowlevel.cancel_shielded_checkpoint()
                return b""
            self._raise_if_error()
            parked = True
            self._enter_recv_wait()
            await trio.lowlevel.wait_task_rescheduled(self._abort_recv)
            # A stream failed by the end of its connection wakes us; if our task was
            # cancelled meanwhile (a handler's scope is cancelled first), Cancelled wins.
            await trio.lowlevel.checkpoint_if_cancelled()
        out = self._take(max_bytes)
        if not parked:
            await trio.lowlevel.cancel_shielded_checkpoint()
        return out

    def receive_some_nowait(self, max_bytes: int | None = None) -> bytes:
        """What :meth:`receive_some` returns when it need not wait: the next bytes of
        the body already received (at most ``max_bytes``), ``b""`` at its end.

        For a caller that checkpoints once around several operations (trio's
        ``op_nowait`` convention): the gRPC server reads a unary request this way.

        Checkpoint: never (synchronous).

        Raises:
            trio.WouldBlock: no bytes are buffered and the body has not ended;
                nothing changed.
            StreamResetError, trio.BrokenResourceError, TypeError, ValueError: as
                :meth:`receive_some`.
        """
        if max_bytes is not None and _check_int(max_bytes, "max_bytes") < 1:
            raise ValueError(f"max_bytes must be >= 1, not {max_bytes}")
        if self._continue_pending:
            self._send_continue()
        if self.core_error is not None and not self.core_peer_ended:
            self._raise_if_error()  # an incomplete body is not handed out (receive_some)
        if not self._chunks:
            if self.core_peer_ended:
                return b""
            self._raise_if_error()
            raise trio.WouldBlock
        return self._take(max_bytes)

    def _take(self, max_bytes: int | None) -> bytes:
        """The next chunk (at most ``max_bytes`` of it), consumed; there is one."""
        chunks = self._chunks
        assert chunks is not None  # not empty
        chunk = chunks[0]
        # One copy per byte in all: a view of the frame buffer becomes bytes here
        # (a chunk already bytes is returned whole, or sliced once).
        if max_bytes is not None and len(chunk) > max_bytes:
            view = chunk if type(chunk) is memoryview else memoryview(chunk)
            chunks[0] = view[max_bytes:]
            out = bytes(view[:max_bytes])
        else:
            chunks.popleft()
            out = bytes(chunk)  # the same object when it is bytes already
        self._consumed(len(out))
        return out

    async def receive_into(self, buffer: bytearray | memoryview) -> int:
        """Read the next bytes of the body into ``buffer``; return how many (at most
        ``len(buffer)``), 0 at its end.

        For applications that reuse their buffers: the bytes are copied once, from
        the connection's read buffer (or from where they waited, if the
        application fell behind) straight into ``buffer``, and nothing is
        allocated per call. It may return fewer bytes than fit although more have
        arrived (at most one received chunk per call, as :meth:`receive_some`).
        Window is returned to the peer exactly as by :meth:`receive_some`.

        Checkpoint: always. On cancellation: no data is lost, and ``buffer`` is
        unchanged.

        Raises:
            StreamResetError: the stream was reset (StreamRefusedError if refused).
            trio.BrokenResourceError: the connection broke (see ``__cause__``).
            TypeError: ``buffer`` is not a writable, contiguous bytes-like object
                (checked first; nothing is consumed).
            ValueError: ``buffer`` is empty (checked first; nothing is consumed).
        """
        target = _writable_bytes(buffer)
        size = len(target)
        if not size:
            raise ValueError("buffer must not be empty")
        await trio.lowlevel.checkpoint_if_cancelled()
        if self._continue_pending:
            self._send_continue()
        if self.core_error is not None and not self.core_peer_ended:
            self._raise_if_error()  # an incomplete body is not handed out (receive_some)
        parked = False
        while not self._chunks:
            if self.core_peer_ended:
                if not parked:
                    await trio.lowlevel.cancel_shielded_checkpoint()
                return 0
            self._raise_if_error()
            parked = True
            self._enter_recv_wait()
            await trio.lowlevel.wait_task_rescheduled(self._abort_recv)
            await trio.lowlevel.checkpoint_if_cancelled()  # Cancelled wins, as above
        chunks = self._chunks
        assert chunks is not None  # not empty
        chunk = chunks[0]
        n = len(chunk)
        if n > size:
            view = chunk if type(chunk) is memoryview else memoryview(chunk)
            target[:] = view[:size]
            chunks[0] = view[size:]
            n = size
        else:
            target[:n] = chunk
            chunks.popleft()
        self._consumed(n)
        if not parked:
            await trio.lowlevel.cancel_shielded_checkpoint()
        return n

    async def receive_exactly(self, n: int) -> bytes:
        """Return exactly ``n`` body bytes, granting the peer window for them at once
        if it could not otherwise send them (so a message larger than the window
        cannot stall). Fewer bytes means the stream ended early.

        Checkpoint: always. On cancellation: bytes already gathered stay consumed
        (they are lost to the caller); use it for whole-message reads. Cancelled
        before it starts, it grants nothing.

        Raises:
            TypeError, ValueError: ``n`` is not an int >= 0 (nothing is granted).
        """
        if _check_int(n, "n") < 0:
            raise ValueError(f"n must be >= 0, not {n}")
        await trio.lowlevel.checkpoint_if_cancelled()
        self._request(n)
        parts: list[bytes] = []
        got = 0
        while got < n:
            chunk = await self.receive_some(n - got)
            if not chunk:
                break
            parts.append(chunk)
            got += len(chunk)
        if not parts:
            await trio.lowlevel.checkpoint()
        return b"".join(parts)

    async def receive_trailers(self) -> HeaderList:
        """Read (and discard) the rest of the body, then return the trailers ([] if none).

        Checkpoint: always.
        """
        while await self.receive_some():
            pass
        return self._trailers or []

    async def read_all(self) -> bytes:
        """Read the whole remaining body. Checkpoint: always."""
        parts = [chunk async for chunk in self]
        return b"".join(parts)

    def __aiter__(self) -> H2Stream:
        # Like trio.abc.ReceiveStream: the stream is its own iterator (no async
        # generator, so no asyncgen hooks per stream).
        return self

    async def __anext__(self) -> bytes:
        """The next chunk of the body (``receive_some``); the iteration ends with it."""
        chunk = await self.receive_some()
        if not chunk:
            raise StopAsyncIteration
        return chunk

    # ------------------------------------------------------------------ sending

    async def send_headers(
        self, headers: Sequence[tuple[bytes | str, bytes | str]], *, end_stream: bool = False
    ) -> None:
        """Queue the response headers (server side). Does not wait for the socket.

        Checkpoint: always. On cancellation: nothing was queued.

        Raises:
            ValueError: ``headers`` is not a valid response header block (RFC 9113
                §8.1-§8.3: ``:status`` first, lowercase names, no connection-specific
                fields...), its ``:status`` is not a final one (200-599: 1xx go
                through :meth:`send_informational`), its content-length is not a
                number, or ``end_stream`` would end the response short of its
                content-length (not for HEAD, 204, 304); nothing was queued.
            TypeError: a header field is not bytes or str, or ``end_stream`` is not
                a bool; nothing was queued.
        """
        _check_bool(end_stream, "end_stream")
        await trio.lowlevel.checkpoint_if_cancelled()
        self.send_headers_nowait(headers, end_stream=end_stream)
        await trio.lowlevel.cancel_shielded_checkpoint()

    def send_headers_nowait(
        self, headers: Sequence[tuple[bytes | str, bytes | str]], *, end_stream: bool = False
    ) -> None:
        """:meth:`send_headers` without its checkpoint, for a caller that checkpoints
        once around several operations (trio's ``op_nowait`` convention; queuing
        headers never waits, so it never raises ``trio.WouldBlock``).

        Checkpoint: never (synchronous). Raises as :meth:`send_headers`; nothing was
        queued then.
        """
        _check_bool(end_stream, "end_stream")
        if self.core_headers_sent:
            raise RuntimeError("headers were already sent on this stream")
        self._check_can_send()
        block, rule = _block_to_send(headers, response=True, trailer=False)
        if self._headers is not None and _is_head(self._headers):
            rule = HEAD_RULE
        if end_stream and rule is not None and rule[1] and rule[0]:
            raise ValueError(_short_body(0, rule))
        self._put_output(Headers(self, block, end_stream))
        self.core_headers_sent = True
        self._body_rule = rule
        self._continue_pending = False  # a final answer: no 100 is owed any more
        if end_stream:
            self.core_end_queued = True

    async def send_informational(self, headers: Sequence[tuple[bytes | str, bytes | str]]) -> None:
        """Queue an informational (1xx) response, before the final :meth:`send_headers`
        (server side): 103 Early Hints, 100 Continue, ... Any number may be sent.

        A request with ``expect: 100-continue`` gets a 100 without this call when the
        handler first reads its body, unless a 100 or the final response was queued
        first (a handler that answers at once, e.g. 417 or 413, sends no 100).

        Checkpoint: always. On cancellation: nothing was queued.

        Raises:
            ValueError: ``headers`` is not a valid response block, or its ``:status``
                is not 1xx, or is 101 (RFC 9113 §8.6); nothing was queued.
            TypeError: a header field is not bytes or str; nothing was queued.
            RuntimeError: on a client stream, or after the final headers.
            StreamResetError, trio.ClosedResourceError, trio.BrokenResourceError: as
                :meth:`send_headers`.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        if self._core.client_side:
            raise RuntimeError("send_informational() is for server streams")
        if self.core_headers_sent:
            raise RuntimeError("send_informational() must come before send_headers()")
        self._check_can_send()
        block = _as_header_list(headers)
        validate_to_send(block, response=True, trailer=False, informational=True)
        self._put_output(Headers(self, block, False))
        if block[0] == (b":status", b"100"):
            self._continue_pending = False
        await trio.lowlevel.cancel_shielded_checkpoint()

    async def send_data(
        self, data: bytes | bytearray | memoryview, *, end_stream: bool = False
    ) -> None:
        """Queue body bytes (and END_STREAM if ``end_stream``).

        Waits only for write quota (``TransportConfig.write_quota`` bytes may be
        queued ahead of flow control); returns before the bytes reach the socket.
        The caller must not mutate ``data`` afterwards: loopy writes the caller's
        buffer itself, without a copy, until it is flushed (a ``bytearray`` resized
        in that time raises BufferError), which may be after this stream's next
        writes (``write_quota`` bytes may wait in its queue): to reuse a buffer,
        pass ``bytes(buffer)``. A memoryview is sent as its raw bytes,
        whatever its format, shape or strides.

        Checkpoint: always. On cancellation: nothing was queued.

        Raises:
            StreamResetError: the peer reset the stream.
            trio.ClosedResourceError: this side already ended or reset the stream.
            trio.BrokenResourceError: the connection broke.
            TypeError: ``data`` is not bytes, bytearray or memoryview, or
                ``end_stream`` is not a bool (checked first; nothing was queued).
            ValueError: the body would go over our own headers' content-length, or
                end (``end_stream``) short of it, or be a body at all on a response
                to HEAD or a 204/304 response; nothing was queued, and the stream
                can still send what its headers allow.
        """
        # The checks of the usual case inline (bytes or a memoryview, a bool, a
        # stream that can send): no call each (bulk.py: one send_data per 64 KiB).
        kind = type(data)
        if kind is not bytes and kind is not memoryview:
            _check_payload(data)
        if end_stream is not False and end_stream is not True:
            _check_bool(end_stream, "end_stream")
        await trio.lowlevel.checkpoint_if_cancelled()
        parked = False
        while self._write_quota <= 0:
            self._check_can_send()
            parked = True
            self._enter_send_wait()
            await trio.lowlevel.wait_task_rescheduled(self._abort_send)
            await trio.lowlevel.checkpoint_if_cancelled()  # Cancelled wins, as above
        self._queue_data(data, end_stream)
        if not parked:
            await trio.lowlevel.cancel_shielded_checkpoint()

    def send_data_nowait(
        self, data: bytes | bytearray | memoryview, *, end_stream: bool = False
    ) -> None:
        """:meth:`send_data` when it need not wait for write quota, without its
        checkpoint: for a caller that checkpoints once around several operations
        (trio's ``op_nowait`` convention).

        Checkpoint: never (synchronous).

        Raises:
            trio.WouldBlock: the stream's write quota is used up (``send_data``
                would wait); nothing was queued.
            StreamResetError, trio.ClosedResourceError, trio.BrokenResourceError,
            TypeError, ValueError: as :meth:`send_data`; nothing was queued.
        """
        kind = type(data)
        if kind is not bytes and kind is not memoryview:
            _check_payload(data)
        if end_stream is not False and end_stream is not True:
            _check_bool(end_stream, "end_stream")
        self._check_can_send()
        if self._write_quota <= 0:
            raise trio.WouldBlock
        self._queue_data(data, end_stream)

    def _queue_data(self, data: bytes | bytearray | memoryview, end_stream: bool) -> None:
        """Queue ``data`` for loopy (``send_data`` once there is write quota)."""
        if self.core_error is not None or self.core_end_queued:  # inline: no call as a rule
            self._check_can_send()
        if not self.core_headers_sent:
            raise RuntimeError("send_headers() must come before send_data()")
        if isinstance(data, memoryview) and (
            data.ndim != 1 or data.itemsize != 1 or not data.c_contiguous
        ):
            # Flow control counts bytes, but len() of such a view counts items (or
            # rows), and h2 cannot frame a strided view: make it a flat byte view.
            data = data.cast("B") if data.c_contiguous else memoryview(data.tobytes())
        size = len(data)
        rule = self._body_rule
        if rule is not None:
            total = self._body_sent + size
            if total > rule[0]:
                raise ValueError(_long_body(total, rule))
            if end_stream and rule[1] and total < rule[0]:
                raise ValueError(_short_body(total, rule))
            self._body_sent = total
        self._write_quota -= size
        self._put_output(Data(self, data, end_stream, size))
        if end_stream:
            self.core_end_queued = True

    async def send_trailers(self, headers: Sequence[tuple[bytes | str, bytes | str]]) -> None:
        """Queue trailers; they end the stream and go out after all queued data.

        Checkpoint: always. On cancellation: nothing was queued.

        Raises:
            ValueError: ``headers`` is not a valid trailer block (no pseudo-headers,
                lowercase names, ...), or the body sent is short of our own
                content-length; nothing was queued.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        self.send_trailers_nowait(headers)
        await trio.lowlevel.cancel_shielded_checkpoint()

    def send_trailers_nowait(self, headers: Sequence[tuple[bytes | str, bytes | str]]) -> None:
        """:meth:`send_trailers` without its checkpoint, for a caller that checkpoints
        once around several operations (trio's ``op_nowait`` convention; queuing
        trailers never waits, so it never raises ``trio.WouldBlock``).

        Checkpoint: never (synchronous). Raises as :meth:`send_trailers`; nothing was
        queued then.
        """
        self._check_can_send()
        if not self.core_headers_sent:
            raise RuntimeError("send_headers() must come before send_trailers()")
        block, _ = _block_to_send(headers, response=False, trailer=True)
        rule = self._body_rule
        if rule is not None and rule[1] and self._body_sent < rule[0]:
            raise ValueError(_short_body(self._body_sent, rule))
        self._put_output(Headers(self, block, True))
        self.core_end_queued = True

    async def end(self) -> None:
        """End our side of the stream (an empty DATA frame with END_STREAM).

        Checkpoint: always.
        """
        await self.send_data(b"", end_stream=True)

    def reset(self, error_code: int = ErrorCodes.CANCEL) -> None:
        """Abort the stream: queue RST_STREAM(``error_code``) and fail pending calls.

        Synchronous and idempotent; does nothing once the stream is closed.

        Raises:
            TypeError: ``error_code`` is not an int (a bool is refused too).
            ValueError: ``error_code`` is outside 0..2**32-1 (RFC 9113 §6.4: a 32-bit
                field). Either way the stream is left as it was.
        """
        if not 0 <= _check_int(error_code, "error_code") <= 0xFFFFFFFF:
            raise ValueError(f"error_code must be in 0..2**32-1, not {error_code}")
        if self.core_closed:
            return
        # This side closed it: later calls raise ClosedResourceError (trio's "you
        # closed it"), not the BrokenResourceError family used for the peer's resets.
        exc = trio.ClosedResourceError("this side reset the stream")
        self._core.reset_stream(self, error_code, exc)

    async def aclose(self) -> None:
        """Release the stream: reset it with CANCEL unless both directions completed.

        Checkpoint: always. Cancellation cannot stop it from closing.
        """
        self.reset(ErrorCodes.CANCEL)
        await trio.lowlevel.checkpoint()

    def as_stream(self) -> H2StreamView:
        """A ``trio.abc.HalfCloseableStream`` over this stream's body (a new view per call).

        Exchange headers first (``send_headers`` on a server; the client's were sent by
        ``open_stream``); the view then sends and receives DATA only. See
        :class:`trio_h2t.H2StreamView`.
        """
        return H2StreamView._create(self)

    @property
    def closed(self) -> bool:
        """True once both directions are over, or the stream was reset."""
        return self.core_closed

    # ------------------------------------------------------------------ internals

    def _raise_if_error(self) -> None:
        if self.core_error is not None:
            raise self._error_copy()

    def _error_copy(self) -> BaseException:
        # A fresh exception per raise (re-raising one instance from many places
        # piles up tracebacks); same class, same fields, same cause.
        err = self.core_error
        assert err is not None
        new: BaseException
        if isinstance(err, StreamResetError):
            new = type(err)(err.stream_id, err.error_code, remote=err.remote)
            new.__cause__ = err.__cause__
            return new
        try:
            if isinstance(err, H2ProtocolError):  # keep its error_code (a keyword)
                new = type(err)(*err.args, error_code=err.error_code)
            else:
                new = type(err)(*err.args)
        except Exception:  # an exception class with an unusual constructor
            return err
        new.__cause__ = err.__cause__ if err.__cause__ is not None else err
        return new

    async def view_wait_write_quota(self) -> None:
        """Wait until ``send_data`` would not wait for write quota (its first loop).

        Checkpoint: always. On cancellation: nothing changed. Raises as ``send_data``.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        parked = False
        while self._write_quota <= 0:
            self._check_can_send()
            parked = True
            self._enter_send_wait()
            await trio.lowlevel.wait_task_rescheduled(self._abort_send)
            await trio.lowlevel.checkpoint_if_cancelled()  # Cancelled wins, as in send_data
        self._check_can_send()
        if not parked:
            await trio.lowlevel.cancel_shielded_checkpoint()

    def view_close_after_output(self) -> None:
        """End our side (if not yet ended) behind the queued output; once loopy has
        written our END_STREAM, reset with CANCEL if the peer's side is still open.

        Synchronous: a graceful close that never waits. Until the peer's window lets
        the queued output out, the stream stays open (the connection's close ends it).
        """
        if self.core_closed or self.core_error is not None:
            return
        rule = self._body_rule
        if (
            self.core_output_over
            or not self.core_headers_sent
            or (rule is not None and rule[1] and self._body_sent < rule[0])
        ):
            # Nothing more of ours can go out in order, or ending here would cut
            # the body short of our own content-length (a malformed message).
            self.reset(ErrorCodes.CANCEL)
            return

        try:
            self._put_output(Data(self, b"", not self.core_end_queued, cancel_after=True))
        except ConnectionClosingError:
            self.reset(ErrorCodes.CANCEL)
            return
        self.core_end_queued = True

    def _send_continue(self) -> None:
        """Queue the 100 (Continue) the request's ``expect: 100-continue`` asks for
        (RFC 9110 §10.1.1), on the handler's first body read. Synchronous."""
        self._continue_pending = False
        if (
            self.core_headers_sent
            or self.core_end_queued
            or self.core_error is not None
            or self.core_peer_ended
        ):
            return
        with contextlib.suppress(ConnectionClosingError):
            self._core.cbuf.put(Headers(self, CONTINUE_RESPONSE, False))

    def _check_can_send(self) -> None:
        self._raise_if_error()
        if self.core_end_queued:
            raise trio.ClosedResourceError("this side already ended the stream")

    def _put_output(self, item: Data | Headers) -> None:
        try:
            self._core.cbuf.put(item)
        except ConnectionClosingError as exc:
            if isinstance(item, Data):
                item.release()
            raise self._core.closing_error() from exc.__cause__

    def _consumed(self, n: int) -> None:
        if self.core_closed:
            return  # the window was released with the stream; nothing is owed
        flow = self._in_flow
        inc = flow.on_read(n)
        # Once the peer ended the stream it cannot send more: no update is owed.
        if inc and not self.core_peer_ended and self.core_error is None:
            self._core.send_window_update(self, inc)
        conn = flow.conn
        # The inbound budget held the connection window back (the cheap necessary
        # test of ConnectionInFlow.grant; false while the window is replenished on
        # receipt): the read may have freed some.
        if conn is not None and conn.unacked >= conn.limit * conn.ratio:
            self._core.connection_window_freed()

    def _request(self, n: int) -> None:
        if not self.core_peer_ended and self.core_error is None and self.stream_id:
            inc = self._in_flow.request(n)
            if inc:
                self._core.send_window_update(self, inc)

    # A wait is ``_enter_*_wait()`` then ``await wait_task_rescheduled(self._abort_*)``
    # inline, with no coroutine of our own in between (one object less per wait).

    def _enter_recv_wait(self) -> None:
        if self._recv_waiter is not None:
            raise trio.BusyResourceError("another task is already receiving on this stream")
        self._recv_waiter = trio.lowlevel.current_task()

    def _abort_recv(self, _: object) -> trio.lowlevel.Abort:
        self._recv_waiter = None
        return trio.lowlevel.Abort.SUCCEEDED

    def _enter_send_wait(self) -> None:
        if self._send_waiter is not None:
            raise trio.BusyResourceError("another task is already sending on this stream")
        self._send_waiter = trio.lowlevel.current_task()

    def _abort_send(self, _: object) -> trio.lowlevel.Abort:
        self._send_waiter = None
        return trio.lowlevel.Abort.SUCCEEDED

    def _wake_recv(self) -> None:
        task = self._recv_waiter
        if task is not None:
            self._recv_waiter = None
            trio.lowlevel.reschedule(task)

    def _wake_send(self) -> None:
        task = self._send_waiter
        if task is not None:
            self._send_waiter = None
            trio.lowlevel.reschedule(task)

    def _wake(self) -> None:
        """Wake whichever stream tasks wait (the stream failed or closed)."""
        self._wake_recv()
        self._wake_send()

    # ---------------------------------------------------------- the tasks' interface
    #
    # What the transport's own tasks call; never applications (docs/conf.py keeps
    # these out of the API reference: TASK_INTERFACE_PREFIXES). Each name says who
    # calls it: ``reader_*`` the reader, ``loopy_*`` loopy (or the task that orphans
    # its items), ``core_*`` any task through the connection core, ``server_*`` the
    # server's admission and handler runner, ``client_*`` the client's opener,
    # ``view_*`` H2StreamView.
    # No other module touches an underscore member of a stream
    # (tests/test_stream_privacy.py).

    # -- queries (any task, synchronously) --

    @property
    def core_in_flow(self) -> StreamInFlow:
        """The stream's inbound flow-control accounting (to read; its owners are in
        ``__init__``)."""
        return self._in_flow

    # -- the reader --

    def reader_holds_view(self, buf: bytearray) -> bool:
        """Whether a queued chunk is a view of ``buf`` (the reader's frame buffer)."""
        chunks = self._chunks
        if chunks:
            for chunk in chunks:
                if type(chunk) is memoryview and chunk.obj is buf:
                    return True
        return False

    def reader_detach(self, buf: bytearray) -> None:
        """The reader is about to reuse (or drop) ``buf``: the queued views of it
        become bytes. Synchronous."""
        chunks = self._chunks
        if chunks:
            for i, chunk in enumerate(chunks):
                if type(chunk) is memoryview and chunk.obj is buf:
                    chunks[i] = chunk.tobytes()

    def reader_deliver_data(self, data: bytes | memoryview, flow_controlled_length: int) -> bool:
        """A DATA frame's payload arrived. Returns True if a view of the reader's
        frame buffer was queued as it is (the reader then remembers this stream as
        holding one); a view arriving while older chunks wait unread is copied."""
        self._in_flow.on_data(flow_controlled_length)
        padding = flow_controlled_length - len(data)
        if padding:
            # Padding is never read by the application: count it as read at once.
            self._consumed(padding)
        holds = False
        if data:
            chunks = self._chunks
            if chunks is None:
                chunks = self._chunks = deque()
            if type(data) is memoryview:
                if chunks:
                    data = data.tobytes()  # its application is behind (see above)
                else:
                    holds = True
            chunks.append(data)
        self._wake_recv()
        return holds

    def reader_deliver_headers(self, headers: HeaderList) -> None:
        """The peer's header block (a client's response) arrived."""
        self._headers = headers
        self._wake_recv()

    def reader_deliver_informational(self, headers: HeaderList) -> None:
        """A 1xx response arrived (client; at most ``_h2state.MAX_INFORMATIONAL``)."""
        info = self._informational
        if info is None:
            info = self._informational = []
        info.append(headers)
        self._wake_recv()

    def reader_deliver_trailers(self, headers: HeaderList) -> None:
        """The peer's trailers arrived (its END_STREAM follows)."""
        self._trailers = headers

    def reader_deliver_end(self) -> None:
        """The peer's END_STREAM arrived."""
        self.core_peer_ended = True
        self._wake_recv()

    def reader_new_window_limit(self, window: int) -> None:
        """The BDP estimate grew the stream windows (SETTINGS credits the peer)."""
        self._in_flow.new_limit(window)

    # -- loopy --

    def loopy_output_ended(self) -> None:
        """Loopy wrote our END_STREAM: nothing more goes out (an RST_STREAM may)."""
        self.core_output_over = True

    def loopy_output_reset(self) -> None:
        """Loopy wrote our RST_STREAM, or none is owed: nothing more goes out."""
        self.core_output_over = self.core_output_reset = True

    def loopy_released(self, quota: int, cancel_after: bool) -> None:
        """A ``Data`` item was framed or dropped (``Data.release``, run by loopy or by
        the task that orphans it): ``quota`` bytes of write quota come back, and the
        graceful close's item (``cancel_after``) lets the stream reset itself if its
        END_STREAM was written while the peer's side is open. A method, not a
        closure per close: items carry no callables (``_items.py``)."""
        if quota:
            self._write_quota += quota
            if self._write_quota > 0:
                self._wake_send()
        if (
            cancel_after
            and self.core_output_over
            and not self.core_closed
            and self.core_error is None
        ):
            self.reset(ErrorCodes.CANCEL)

    # -- the connection core (any task) --

    def core_fail(self, error: BaseException) -> None:
        """Make ``error`` sticky and wake every waiter. Idempotent (first error wins)."""
        if self.core_error is None:
            self.core_error = error
        self._wake()

    def core_close(self) -> bool:
        """Both directions are over, or the stream was reset: mark it closed, give
        back the window its unread bytes hold, wake its waiters. Returns False if it
        was closed already (nothing done). Synchronous."""
        if self.core_closed:
            return False
        self.core_closed = True
        flow = self._in_flow
        if flow.pending_data:
            flow.release()
            self._core.connection_window_freed()
        else:
            flow.release()
        self._wake()
        return True

    def core_cancel_handler(self, kind: CancelKind, code: int | None) -> None:
        """Cancel a server stream's handler, recording why (the first reason wins:
        a deadline scope (``move_on_at``) already cancelled is the reason). Nothing
        on a client stream: its task is the user's, not ours to cancel."""
        scope = self.server_handler_scope
        if scope is None:
            return
        if self._cancel_reason is None:
            deadline = self._deadline_scope
            if deadline is not None and deadline.cancel_called:
                self._cancel_reason = DEADLINE
            else:
                self._cancel_reason = CancelReason._make(kind, code)
        scope.cancel()

    # -- the server (admission, in the reader; the handler runner) --

    def server_admit(self, *, expects_continue: bool) -> trio.CancelScope:
        """The server admitted this stream: make the handler's cancel scope (here,
        not in the handler task: a reset before the handler first runs must still
        cancel it) and note whether the request waits for a 100 (RFC 9110 §10.1.1:
        the handler's first read sends it, ``_send_continue``)."""
        self._continue_pending = expects_continue
        scope = self.server_handler_scope = trio.CancelScope()
        return scope

    def server_answer(self, headers: Sequence[tuple[bytes, bytes]], body: bytes) -> bool:
        """Queue a whole response (``headers``, then ``body`` with END_STREAM; no body
        to HEAD, RFC 9110 §9.3.2) if nothing was sent yet. Synchronous. Returns False
        (nothing queued) if headers were sent, or the stream or the connection is
        over."""
        if self.core_headers_sent or self.core_closed or self.core_error is not None:
            return False
        head = (b":method", b"HEAD") in (self._headers or ())
        try:
            self._put_output(Headers(self, headers, head))
        except ConnectionClosingError:
            return False
        self.core_headers_sent = True
        if not head:
            self._put_output(Data(self, body, True))
        self.core_end_queued = True
        return True

    # -- the client's opener (the user's task) --

    def client_opened(self, body_rule: BodyRule | None, *, end_stream: bool) -> None:
        """``open_stream`` queued the request's HEADERS (with END_STREAM, or not)."""
        self.core_headers_sent = True
        self._body_rule = body_rule
        if end_stream:
            self.core_end_queued = True

    # -- H2StreamView (the stream task) --

    def view_raise_if_failed(self) -> None:
        """Raise (a copy of) the stream's sticky error, if it has one."""
        self._raise_if_error()
