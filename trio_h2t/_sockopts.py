"""Socket options a connection sets on its TCP socket (when it has one).

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
"""

from __future__ import annotations

import socket

import trio

__all__ = ["set_tcp_user_timeout", "stdlib_socket"]


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
