"""The error family.

trio_h2t names errors by who caused them, the way trio does:

- :class:`trio.ClosedResourceError` subclasses mean *this side* closed the thing
  (you left the ``async with``, called ``aclose()``, or reset the stream).
- :class:`trio.BrokenResourceError` subclasses mean something *outside* broke it: the
  peer reset a stream, sent GOAWAY, violated the protocol, or the network failed. The
  underlying exception is in ``__cause__``.
- Protocol errors carry the HTTP/2 ``error_code`` that goes (or came) on the wire.

Errors are sticky: once a connection is broken, every later call fails fast with an
error whose ``__cause__`` is the same first cause.
"""

from __future__ import annotations

import trio
from h2.errors import ErrorCodes

__all__ = [
    "ConnectionClosingError",
    "ConnectionLostError",
    "H2ProtocolError",
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

    Raised by :meth:`ControlBuffer.put` and friends after ``finish()``, and by stream
    operations once their connection has shut down. ``__cause__`` is the reason the
    connection is closing, when there is one.

    Work that was refused this way was never sent, so it is safe to retry on another
    connection (``retryable`` is always true).
    """

    retryable = True


class ConnectionLostError(trio.BrokenResourceError):
    """The connection broke: the peer or the network ended it (see ``__cause__``)."""


class H2ProtocolError(trio.BrokenResourceError):
    """An HTTP/2 protocol violation; ``error_code`` is the code on the wire."""

    def __init__(self, message: str, *, error_code: int = ErrorCodes.PROTOCOL_ERROR) -> None:
        super().__init__(message)
        self.error_code = _code(error_code)


class LocalProtocolError(H2ProtocolError):
    """*We* tried to do something HTTP/2 forbids (a bug in the caller, usually)."""


class RemoteProtocolError(H2ProtocolError):
    """The *peer* violated HTTP/2; we sent (or tried to send) GOAWAY with ``error_code``."""


class StreamResetError(trio.BrokenResourceError):
    """The stream was reset with RST_STREAM.

    ``error_code`` is the code on the wire; ``remote`` tells whether the peer sent the
    reset (True) or this side did because of a stream error the peer caused (False).
    """

    retryable = False

    def __init__(self, stream_id: int, error_code: int, *, remote: bool = True) -> None:
        self.stream_id = stream_id
        self.error_code = _code(error_code)
        self.remote = remote
        who = "peer" if remote else "this side"
        super().__init__(f"stream {stream_id} was reset by {who} with {self.error_code!r}")


class StreamRefusedError(StreamResetError):
    """The peer never processed this stream, so it is safe to retry it elsewhere.

    Raised for RST_STREAM(REFUSED_STREAM), and for streams above the last stream id
    of a GOAWAY from the peer (``error_code`` is then REFUSED_STREAM too).
    """

    retryable = True
