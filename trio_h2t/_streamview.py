"""H2StreamView: an ``H2Stream``'s body as a ``trio.abc.HalfCloseableStream``.

Theory of operation
-------------------
The view maps trio's byte-stream calls onto the stream's own: ``send_all`` is
``send_data`` (on a copy, since trio lets the caller reuse its buffer),
``send_eof`` is ``end()``, ``receive_some`` is ``receive_some`` and
``wait_send_all_might_not_block`` waits for write quota as ``send_data`` does. It
adds what trio's contract asks and an ``H2Stream`` does not (trio's
``testing/_check_streams.py``): ``b""`` sends nothing (an empty DATA frame would
read as nothing too, but it costs a frame); ``max_bytes`` is checked before any wait;
two tasks sending (``send_all``, ``send_eof``, ``wait_send_all_might_not_block``) or
two receiving get ``trio.BusyResourceError`` (ConflictDetector-style flags); and
``aclose`` wakes a task blocked in the view (each blocking call runs in a cancel
scope that ``aclose`` cancels), which then raises ``trio.ClosedResourceError``.

``aclose`` is graceful unless cancelled: our END_STREAM is queued behind what we
sent, and once loopy has written it the stream is reset with CANCEL if the peer's
side is still open (RFC 9113 §8.7: the rest is "no longer needed"). Cancelled (as
``trio.aclose_forcefully`` does), it resets at once and queued data is dropped.
"""

from __future__ import annotations

import math
import operator
from abc import ABCMeta
from collections.abc import Awaitable, Callable
from typing import TypeVar, TypeVarTuple, final

import trio
from h2.errors import ErrorCodes

from ._exceptions import LocalProtocolError
from ._protocols import ViewedStream
from ._util import NoPublicConstructor

__all__ = ["H2StreamView"]

T = TypeVar("T")
Ts = TypeVarTuple("Ts")


class _NoPublicConstructorABC(NoPublicConstructor, ABCMeta):
    """NoPublicConstructor for a subclass of trio's abstract stream classes."""


@final
class H2StreamView(trio.abc.HalfCloseableStream, metaclass=_NoPublicConstructorABC):
    """A stream's body as a ``trio.abc.HalfCloseableStream``; see ``H2Stream.as_stream``.

    ``stream`` is the underlying :class:`~trio_h2t.H2Stream` (for headers, trailers,
    ``reset``; typed as the ``_protocols.ViewedStream`` it is to the view, since the
    stream module builds views and imports this one). Errors are the stream's
    (``StreamResetError`` is a ``trio.BrokenResourceError``), plus
    ``trio.ClosedResourceError`` after this view's ``send_eof`` (for sends) or
    ``aclose``.
    """

    __slots__ = ("_closed", "_eof_sent", "_receiving", "_scopes", "_sending", "stream")

    def __init__(self, stream: ViewedStream) -> None:
        self.stream = stream  # immutable after init
        self._closed = False  # owner: any task of the view; set once by aclose
        self._eof_sent = False  # owner: the sending task
        # shared: ConflictDetector-style flags, set and cleared without an await
        # between the check and the set.
        self._sending = False
        self._receiving = False  # shared: as _sending
        # shared: the cancel scopes of blocked calls; aclose cancels them.
        self._scopes: set[trio.CancelScope] = set()

    def __repr__(self) -> str:
        return f"<trio_h2t.H2StreamView of {self.stream!r}>"

    def _enter_send(self) -> None:
        if self._sending:
            raise trio.BusyResourceError("another task is already sending on this stream")
        self._sending = True

    def _check_open(self) -> None:
        if self._closed:
            raise trio.ClosedResourceError("this stream view was closed")

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        """Queue ``data`` as DATA (waits only for write quota, as ``send_data``).

        Checkpoint: always. On cancellation: nothing was queued.

        Raises:
            trio.ClosedResourceError: after ``send_eof`` or ``aclose`` (also for ``b""``).
            trio.BusyResourceError: another task is sending.
            trio.BrokenResourceError: the stream was reset or the connection broke.
            ValueError: ``data`` would go over the stream's own content-length, or
                is a body on a response to HEAD or a 204/304 (as ``send_data``).
        """
        self._enter_send()
        try:
            await trio.lowlevel.checkpoint_if_cancelled()
            self._check_open()
            if self._eof_sent:
                raise trio.ClosedResourceError("send_eof() was already called")
            if not data:
                self.stream.view_raise_if_failed()
                await trio.lowlevel.cancel_shielded_checkpoint()
                return
            payload = data if type(data) is bytes else bytes(data)
            await self._guarded(self.stream.send_data, payload)
        finally:
            self._sending = False

    async def wait_send_all_might_not_block(self) -> None:
        """Wait until the stream has write quota again (``send_all`` would not wait).

        Checkpoint: always. On cancellation: nothing changed.
        """
        self._enter_send()
        try:
            await trio.lowlevel.checkpoint_if_cancelled()
            self._check_open()
            await self._guarded(self.stream.view_wait_write_quota)
        finally:
            self._sending = False

    async def send_eof(self) -> None:
        """End our side of the stream (END_STREAM); idempotent.

        Checkpoint: always. On cancellation: END_STREAM was not queued.

        Raises:
            ValueError: the body sent is short of the stream's own content-length
                (as ``end``); END_STREAM was not queued.
        """
        self._enter_send()
        try:
            await trio.lowlevel.checkpoint_if_cancelled()
            self._check_open()
            if self._eof_sent:
                await trio.lowlevel.cancel_shielded_checkpoint()
                return
            await self._guarded(self.stream.end)
            self._eof_sent = True
        finally:
            self._sending = False

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        """Return the next body bytes (at most ``max_bytes``); ``b""`` once the peer ended.

        Checkpoint: always. On cancellation: no data is lost.

        Raises:
            ValueError: ``max_bytes`` is not positive.
            TypeError: ``max_bytes`` is not an integer.
            trio.ClosedResourceError: after ``aclose``.
            trio.BusyResourceError: another task is receiving.
            trio.BrokenResourceError: the stream was reset or the connection broke.
        """
        if max_bytes is not None:
            max_bytes = operator.index(max_bytes)
            if max_bytes < 1:
                raise ValueError("max_bytes must be >= 1")
        if self._receiving:
            raise trio.BusyResourceError("another task is already receiving on this stream")
        self._receiving = True
        try:
            await trio.lowlevel.checkpoint_if_cancelled()
            self._check_open()
            return await self._guarded(self.stream.receive_some, max_bytes)
        finally:
            self._receiving = False

    async def _guarded(self, operation: Callable[[*Ts], Awaitable[T]], *args: *Ts) -> T:
        """``await operation(*args)`` in a scope that ``aclose`` cancels; a call that
        ``aclose`` woke, or broke with its reset, raises ClosedResourceError."""
        finished = False
        with trio.CancelScope() as scope:
            self._scopes.add(scope)
            try:
                result = await operation(*args)
                finished = True
            except (trio.BrokenResourceError, LocalProtocolError) as exc:
                self._check_open_after(exc)
                raise
            finally:
                self._scopes.discard(scope)
        self._check_open_after(None)
        if not finished:  # only aclose cancels the scope, and it closes the view first
            raise trio.ClosedResourceError("this stream view was closed")
        return result

    def _check_open_after(self, exc: BaseException | None) -> None:
        # A call woken by our own aclose (its scope cancelled, or the reset that
        # aclose made) reports that this side closed it.
        if self._closed:
            raise trio.ClosedResourceError("this stream view was closed") from exc

    async def aclose(self) -> None:
        """Close both directions; idempotent. Blocked calls raise ClosedResourceError.

        Graceful: END_STREAM is queued behind our data, then (once written) the peer's
        side, if still open, is reset with CANCEL. Cancelled (``aclose_forcefully``):
        the stream is reset with CANCEL at once, dropping queued data.

        Checkpoint: always. On cancellation: the stream is still closed (forcefully).
        """
        if not self._closed:
            self._closed = True
            for scope in self._scopes:
                scope.cancel()
            if trio.current_effective_deadline() == -math.inf:
                self.stream.reset(ErrorCodes.CANCEL)
            else:
                self.stream.view_close_after_output()
        await trio.lowlevel.checkpoint()
