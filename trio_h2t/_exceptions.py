"""The error family.

trio_h2t names errors by who caused them, the way trio does:

- :class:`trio.ClosedResourceError` subclasses mean *this side* closed the thing
  (you left the ``async with``, called ``aclose()``, or reset the stream).
- :class:`trio.BrokenResourceError` subclasses mean something *outside* broke it: the
  peer reset a stream, sent GOAWAY, violated the protocol, or the network failed. The
  underlying exception is in ``__cause__``.
- Protocol errors (:class:`H2ProtocolError`) carry the HTTP/2 ``error_code`` that
  goes (or came) on the wire, and have two sides, as h11's: the peer's
  (:class:`RemoteProtocolError`, also a ``trio.BrokenResourceError``: the outside
  broke it) and our own (:class:`LocalProtocolError`: this side failed to frame
  what it was asked to send; no outside cause, so not a ``BrokenResourceError``).

Errors are sticky: once a connection is broken, every later call fails fast with an
error whose ``__cause__`` is the same first cause.

Every class has a bool ``retryable``: True when the work it refused was certainly not
processed by the peer, so it is safe to send again (on another connection). It is a
class attribute, set per instance where it depends on the case (a StreamResetError
with REFUSED_STREAM). False means "perhaps processed", not "must not retry".
"""

from __future__ import annotations

import trio
from h2.errors import ErrorCodes  # public as trio_h2t.ErrorCodes: h2's own enum, as is

__all__ = [
    "ConnectionClosingError",
    "ConnectionLostError",
    "ErrorCodes",
    "GoAwayError",
    "H2ProtocolError",
    "KeepaliveTimeoutError",
    "LocalProtocolError",
    "RemoteProtocolError",
    "StreamRefusedError",
    "StreamResetError",
]


def _code(error_code: int) -> ErrorCodes | int:
    try:
        return ErrorCodes(error_code)
    except ValueError:  # unknown codes stay plain ints, as in h2
        return error_code


class ConnectionClosingError(trio.ClosedResourceError):
    """The connection is closing (or closed), so nothing more can be queued on it.

    Raised by ``ControlBuffer.put`` and friends after ``finish()``, and by stream
    operations once their connection has shut down. ``__cause__`` is the reason the
    connection is closing, when there is one.

    Work that was refused this way was never sent, so it is safe to retry on another
    connection (``retryable`` is always true).
    """

    retryable: bool = True


class ConnectionLostError(trio.BrokenResourceError):
    """The connection broke: the peer or the network ended it (see ``__cause__``).

    ``retryable`` is False: a request in flight may have been processed by the peer
    before the connection broke (RFC 9113 §8.7), so only the caller knows whether
    sending it again is safe (an idempotent request, say).
    """

    retryable: bool = False


class KeepaliveTimeoutError(ConnectionLostError):
    """Nothing arrived from the peer within ``keepalive_timeout`` seconds after our
    keepalive PING (``TransportConfig.keepalive_time``): the peer or the path to it is
    presumed dead, and the connection was closed.

    The connection's ``error``; each stream still open fails with one too (a
    :class:`ConnectionLostError`, so ``except ConnectionLostError`` catches it).
    ``retryable`` is False, as for any lost connection: a request in flight may have
    been processed.
    """


class GoAwayError(ConnectionLostError):
    """The peer sent GOAWAY: it accepts no new streams on this connection.

    A :class:`ConnectionLostError` (so a :class:`trio.BrokenResourceError`): the peer
    ended the connection, or is ending it. Fields come from the frame (RFC 9113 §6.8):
    ``error_code`` (an ``ErrorCodes`` member, or a plain int for a code h2 does not
    know), ``last_stream_id`` (streams up to it may be processed; those above were
    not) and ``debug_data`` (opaque bytes, for diagnostics only).

    Raised by ``ClientConnection.open_stream`` after the peer's GOAWAY: nothing was
    sent, so ``retryable`` is True. Streams above ``last_stream_id`` fail with a
    :class:`StreamRefusedError` whose ``__cause__`` is a GoAwayError. When the code is
    not NO_ERROR and the connection then ends, the connection's ``error`` is the
    GoAwayError, and the streams still open fail with a ConnectionLostError
    (``retryable`` False) caused by it.
    """

    retryable: bool = True
    error_code: ErrorCodes | int
    last_stream_id: int
    debug_data: bytes

    def __init__(self, error_code: int, last_stream_id: int, debug_data: bytes = b"") -> None:
        self.error_code = _code(error_code)
        self.last_stream_id = last_stream_id
        self.debug_data = bytes(debug_data)
        super().__init__(
            f"the peer sent GOAWAY with {self.error_code!r} "
            f"(last stream id {last_stream_id}, debug data {self.debug_data!r})"
        )

    @property
    def too_many_pings(self) -> bool:
        """True if the peer (a server) said we ping too often (GOAWAY with
        ENHANCE_YOUR_CALM and debug data ``too_many_pings`` by grpc-go's policy).

        grpc-go's client then doubles its keepalive time for its later connections;
        trio_h2t does not reconnect by itself, so an application that does does the
        same: ``dataclasses.replace(config, keepalive_time=2 * config.keepalive_time)``
        (docs/keepalive-and-shutdown.md).
        """
        return self.error_code == ErrorCodes.ENHANCE_YOUR_CALM and self.debug_data == (
            b"too_many_pings"
        )


class H2ProtocolError(Exception):
    """An HTTP/2 protocol failure, of one side or the other (the base of
    :class:`RemoteProtocolError` and :class:`LocalProtocolError`; never raised
    itself); ``error_code`` is the code on the wire.

    ``retryable`` is False: the connection was in an unknown state.
    """

    retryable: bool = False
    error_code: ErrorCodes | int

    def __init__(self, message: str, *, error_code: int = ErrorCodes.PROTOCOL_ERROR) -> None:
        super().__init__(message)
        self.error_code = _code(error_code)


class LocalProtocolError(H2ProtocolError):
    """*We* could not do what HTTP/2 asks: raised to a stream's opener when loopy failed
    to frame its HEADERS (``error_code`` INTERNAL_ERROR; nothing reached the wire).

    This side's own failure (``__cause__`` is the exception framing raised), not
    something outside: unlike :class:`RemoteProtocolError` it is not a
    ``trio.BrokenResourceError`` (catch it as ``H2ProtocolError`` or by name).
    """


class RemoteProtocolError(H2ProtocolError, trio.BrokenResourceError):
    """The *peer* violated HTTP/2; we sent (or tried to send) GOAWAY with ``error_code``.

    A ``trio.BrokenResourceError`` too: the outside broke the connection.
    """


class StreamResetError(trio.BrokenResourceError):
    """The stream was reset with RST_STREAM.

    ``error_code`` is the code on the wire; ``remote`` tells whether the peer sent the
    reset (True) or this side did because of a stream error the peer caused (False).
    ``retryable`` is False (the peer may have processed the request), except for a
    reset by the peer with REFUSED_STREAM (RFC 9113 §8.7: not processed).
    """

    retryable: bool = False
    stream_id: int
    error_code: ErrorCodes | int
    remote: bool

    def __init__(self, stream_id: int, error_code: int, *, remote: bool = True) -> None:
        self.stream_id = stream_id
        self.error_code = _code(error_code)
        self.remote = remote
        if remote and self.error_code == ErrorCodes.REFUSED_STREAM:
            self.retryable = True
        who = "peer" if remote else "this side"
        super().__init__(f"stream {stream_id} was reset by {who} with {self.error_code!r}")


class StreamRefusedError(StreamResetError):
    """The peer never processed this stream, so it is safe to retry it elsewhere.

    Raised for RST_STREAM(REFUSED_STREAM), and for streams above the last stream id
    of a GOAWAY from the peer (``error_code`` is then REFUSED_STREAM too, and
    ``__cause__`` is the :class:`GoAwayError`).
    """

    retryable: bool = True
