"""A connection's direct use of its TCP socket: the options it sets, and the stdlib socket.

``set_tcp_user_timeout``: as grpc-go's transport does when keepalive is on (its
``http2_client.go`` and ``http2_server.go`` call ``syscall.SetTCPUserTimeout`` with the
keepalive timeout), TCP_USER_TIMEOUT makes the kernel end the connection when data
it sent stays unacknowledged for that long. Without it, a write to a peer that
vanished is retransmitted for about 15 minutes (Linux's ``tcp_retries2``) before
the socket fails, however short ``keepalive_timeout`` is: the keepalive PING itself
sits in the send queue behind the unacknowledged bytes. Linux only; elsewhere the
keepalive task's own timer is the bound.

``stdlib_socket``: the non-blocking stdlib socket under trio's, which the reader
(``recv_into``) and loopy (``sendmsg``) call directly: trio's wrappers add a
schedule point to every successful call, and both tasks' loops already have one
per read or item. It is trio's private ``_sock``, pinned in
``tests/test_h2_guard.py``.

What the wrappers do besides must then be done by hand, and these helpers do it,
so that the direct path raises what ``trio.SocketStream`` raises:

- ``wait_readable`` / ``wait_writable``: trio's, but ``trio.ClosedResourceError`` for
  a socket already closed. Trio's own wait takes the socket's file descriptor, -1
  once closed, and its epoll registration of -1 raises ``ValueError`` ("file
  descriptor cannot be a negative integer") and, worse, leaves the waiting task
  registered under -1 in trio's I/O manager, so that every later wait on a closed
  socket in that run raises ``BusyResourceError``. Trio's wrappers never wait before
  their first attempt (which fails with EBADF on a closed socket), so they never
  meet it; the reader does wait first, when it holds no buffer (``_reader.py``). A
  socket closed *while* a task waits wakes it with ``ClosedResourceError`` (trio's
  ``notify_closing``, which ``trio.socket`` calls in ``close``).
- ``stream_error``: the ``OSError`` of a call on the stdlib socket as the stream
  error ``trio.SocketStream`` makes of it (its ``_translate_socket_errors_to_stream_errors``):
  ``ClosedResourceError`` for EBADF / ENOTSOCK (the socket was closed: ours to
  close), ``BrokenResourceError`` caused by it for the rest (ECONNRESET, EPIPE, ...:
  the peer or the network).

Cancellation: trio's calls check it before their first attempt
(``checkpoint_if_cancelled``); the reader and loopy do the same before they touch
the socket, so a cancelled task never reads or writes.
"""

from __future__ import annotations

import errno
import socket

import trio

__all__ = [
    "set_tcp_user_timeout",
    "stdlib_socket",
    "stream_error",
    "wait_readable",
    "wait_writable",
]

#: What ``trio.SocketStream`` reports as ClosedResourceError (its ``_closed_stream_errnos``).
CLOSED_ERRNOS = frozenset({errno.EBADF, errno.ENOTSOCK})


def set_tcp_user_timeout(transport: trio.abc.Stream, seconds: float) -> bool:
    """Set TCP_USER_TIMEOUT to ``seconds`` on the TCP socket under ``transport``
    (a ``trio.SocketStream``, also under a ``trio.SSLStream``). Returns whether it
    was set: False where the platform lacks the option, the transport is not a TCP
    socket (memory streams, Unix sockets), or the socket refuses it (closed).
    """
    option = getattr(socket, "TCP_USER_TIMEOUT", None)
    if option is None:
        return False
    inner = transport.transport_stream if isinstance(transport, trio.SSLStream) else transport
    if not isinstance(inner, trio.SocketStream):
        return False
    if inner.socket.family not in (socket.AF_INET, socket.AF_INET6):
        return False
    try:
        inner.setsockopt(socket.IPPROTO_TCP, option, max(1, round(seconds * 1000)))
    except OSError:
        return False
    return True


def stdlib_socket(sock: trio.socket.SocketType) -> socket.socket | None:
    """The stdlib socket under trio's ``sock``, or None if trio has none there (then
    callers use trio's own methods). Never blocks: it is non-blocking."""
    raw = getattr(sock, "_sock", None)
    return raw if isinstance(raw, socket.socket) else None


def _closed() -> trio.ClosedResourceError:
    return trio.ClosedResourceError("this socket was already closed")


async def wait_readable(sock: trio.socket.SocketType) -> None:
    """``trio.lowlevel.wait_readable(sock)``, but ``trio.ClosedResourceError`` at once
    if ``sock`` is already closed (see above). Checkpoint: always, but if closed.
    On cancellation: nothing happened."""
    if sock.fileno() == -1:
        raise _closed()
    await trio.lowlevel.wait_readable(sock)


async def wait_writable(sock: trio.socket.SocketType) -> None:
    """``trio.lowlevel.wait_writable(sock)``, as :func:`wait_readable`."""
    if sock.fileno() == -1:
        raise _closed()
    await trio.lowlevel.wait_writable(sock)


def stream_error(exc: OSError) -> trio.ClosedResourceError | trio.BrokenResourceError:
    """The stream error ``trio.SocketStream`` raises for ``exc``, from a call on the
    socket: ClosedResourceError (no cause, as trio's) if the socket was closed,
    else BrokenResourceError caused by ``exc``."""
    if exc.errno in CLOSED_ERRNOS:
        return _closed()
    err = trio.BrokenResourceError(f"socket connection broken: {exc}")
    err.__cause__ = exc
    return err
