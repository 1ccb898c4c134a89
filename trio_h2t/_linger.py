"""The lingering close: read what the peer still sends before closing the socket.

Theory of operation
-------------------
Closing a TCP socket with bytes still unread in its receive queue makes the kernel
send a RST instead of a FIN (and count ``TcpExt TCPAbortOnClose``). The peer may
then lose the tail of what it had already received but not yet read, and it sees
ECONNRESET where an orderly end was due. Both sides of a graceful HTTP/2 close
leave such bytes: a server's last frames cross the client's, and a client that
sent GOAWAY gets the server's GOAWAY in answer.

So after its last frame a side that closes gracefully keeps reading, discarding,
until the peer hangs up, for at most ``LINGER`` seconds, and only then closes:

- the server (``_server.py``) after its last GOAWAY and loopy's end: it waits for
  the client's EOF;
- the client (:func:`close_cleanly`, from ``_client.py``) after its GOAWAY and its
  last stream: it half-closes first (``send_eof``, a FIN: a TCP transport is a
  ``HalfCloseableStream``), so the server's reader sees EOF at once and the server
  closes without lingering; the client then reads the server's last frames and its
  EOF. A transport that cannot half-close (TLS, a custom stream) is closed at once,
  as before: the server lingers for that close, so reading for the server's EOF
  would make both sides wait out the bound (the kernel may then send a RST).

A peer that neither answers nor closes costs the closing side ``LINGER`` seconds,
no more. A cancelled close does not linger: the read is cancelled and the caller
closes the transport at once (``aclose``'s contract).
"""

from __future__ import annotations

import trio

from ._connection import ConnectionCore

__all__ = ["LINGER", "close_cleanly", "linger"]

#: Seconds a side that closed gracefully waits for the peer to hang up (Go's HTTP/2
#: server waits about 1 s too). The server and the client share it.
LINGER = 1.0


async def linger(transport: trio.abc.Stream) -> None:
    """Read and discard until the peer hangs up, for at most ``LINGER`` seconds.

    Checkpoint: always. On cancellation: stops reading; the caller closes.
    """
    with trio.move_on_after(LINGER):
        try:
            while await transport.receive_some(65536):
                pass
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass


async def close_cleanly(core: ConnectionCore) -> None:
    """A client's end after its graceful close (GOAWAY sent, last stream over, loopy
    stopped): half-close, then read until the server's EOF, bounded by ``LINGER``.
    The caller closes the transport afterwards.

    Does nothing if the close was not graceful (the connection failed, a write
    broke) or the server already hung up (``eof_seen``: nothing is left unread).

    Two tasks closing the same connection (``aclose`` in a task while the block
    exits) read once: the second waits for the first.

    Checkpoint: always. On cancellation: stops at once; the caller closes the
    transport (the kernel may then send a RST).
    """
    loopy = core.loopy
    if not core.closing or core.eof_seen or loopy.io_failed or loopy.write_cut:
        await trio.lowlevel.checkpoint()
        return
    if core.clean_close is not None:
        # Another task closes (aclose in a task, and the block's exit): one reads.
        await core.clean_close.wait()
        return
    over = core.clean_close = trio.Event()
    try:
        await _half_close_and_read(core)
    finally:
        over.set()


async def _half_close_and_read(core: ConnectionCore) -> None:
    """``close_cleanly``'s one reader: wait out the reader, send_eof, linger."""
    transport = core.transport
    with trio.move_on_after(LINGER):
        # The reader was cancelled when loopy stopped; wait until it is out of
        # receive_some (two readers would be a BusyResourceError).
        await core.reader_stopped.wait()
    if core.eof_seen:
        return
    if not isinstance(transport, trio.abc.HalfCloseableStream):
        # No FIN to send (TLS, a custom stream): a server lingers until our close,
        # so reading for its EOF would only make both sides wait out LINGER.
        return
    try:
        await transport.send_eof()
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        return
    await linger(transport)
