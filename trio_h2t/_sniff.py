"""A server's first look at a connection: HTTP/2 with prior knowledge, or HTTP/1.x?

An h2c port speaks HTTP/2 from the first byte (RFC 9113 §3.3, prior knowledge), so
an HTTP/1.1 client that connects to it (``curl --http1.1``, a browser, a health
check) would get our SETTINGS frame as its "status line" and a GOAWAY, which it
reports as garbage. Instead, :func:`sniff_preface` reads the client's first bytes
*before* the server sends its own preface. As soon as they can no longer be the
start of the HTTP/2 connection preface and they form an HTTP/1.x request line
(``method SP target SP HTTP/1.x``), the client gets ``HTTP1_RESPONSE``: a short
HTTP/1.1 505 (HTTP Version Not Supported, RFC 9110 §15.6.6: "SHOULD generate a
representation ... that describes why that version is not supported and what other
protocols are supported") saying this is an HTTP/2 prior-knowledge server, then the
connection closes. Anything else (the whole preface, or bytes that are neither a
prefix of it nor of a request line, such as h2spec's invalid preface) is handed
back, to be fed to h2 as the first input, which answers as HTTP/2 does.

No client waits on this: an HTTP/2 client sends its preface without waiting for the
server's (RFC 9113 §3.4), and the server's preface follows at once. A client that
sends nothing, or a partial request line, is bounded by the connection's handshake
deadline, as is reading what the HTTP/1.1 client sends after the response (drained
so that closing does not reset the connection under the response).
"""

from __future__ import annotations

import logging
import re

import trio

__all__ = ["HTTP1_RESPONSE", "PREFACE", "sniff_preface"]

log = logging.getLogger("trio_h2t")

#: The client connection preface (RFC 9113 §3.4).
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#: Seconds a client whose request line the deadline cut short still gets to take
#: the answer.
ANSWER_GRACE = 1.0
#: Longest request line we wait for before deciding it is not HTTP/1.x (RFC 9112
#: §3: at least 8000 octets SHOULD be supported).
MAX_REQUEST_LINE = 8192

_BODY = (
    b"This is an HTTP/2 server with prior knowledge (h2c, RFC 9113 section 3.3); "
    b"it does not speak HTTP/1.x.\n"
    b"Connect with an HTTP/2 client, e.g. curl --http2-prior-knowledge.\n"
)
#: What an HTTP/1.x request line gets before the connection closes.
HTTP1_RESPONSE = (
    b"HTTP/1.1 505 HTTP Version Not Supported\r\n"
    b"content-type: text/plain; charset=utf-8\r\n"
    b"content-length: " + str(len(_BODY)).encode() + b"\r\n"
    b"connection: close\r\n"
    b"\r\n" + _BODY
)

# RFC 9112 §3: request-line = method SP request-target SP HTTP-version, method a
# token (RFC 9110 §5.6.2), the target visible ASCII.
_TOKEN = rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_REQUEST_LINE = re.compile(_TOKEN + rb" [\x21-\x7e]+ HTTP/1\.[0-9]\r?")
# What can still become one, byte by byte.
_PARTIAL_LINE = re.compile(
    _TOKEN + rb"(?: [\x21-\x7e]*(?: (?:H(?:T(?:T(?:P(?:/(?:1(?:\.(?:[0-9]\r?)?)?)?)?)?)?)?)?)?)?"
)


def _request_line(data: bytes | bytearray) -> bool | None:
    """True: ``data`` starts with an HTTP/1.x request line; False: it cannot;
    None: not yet known (a prefix of one, shorter than MAX_REQUEST_LINE)."""
    end = data.find(b"\n")
    if end == -1:
        if len(data) > MAX_REQUEST_LINE or _PARTIAL_LINE.fullmatch(data) is None:
            return False
        return None
    return _REQUEST_LINE.fullmatch(data, 0, end) is not None


async def sniff_preface(transport: trio.abc.Stream, deadline: float) -> bytes | None:
    """Read the client's first bytes (until ``deadline``, a ``trio.current_time()``).

    Returns them (possibly ``b""``: EOF, or nothing before the deadline) for h2 to
    read first, or None if they were an HTTP/1.x request line: it was answered with
    ``HTTP1_RESPONSE`` and the transport is to be closed.

    Checkpoint: always. On cancellation: whatever was read is lost (the connection
    is being torn down). Raises what the transport raises.
    """
    data = bytearray()
    with trio.move_on_at(deadline):
        while True:
            if data.startswith(PREFACE):
                return bytes(data)  # HTTP/2
            if not PREFACE.startswith(data):  # (a prefix of the preface: read on)
                verdict = _request_line(data)
                if verdict is False:
                    return bytes(data)
                if verdict:
                    break
            chunk = await transport.receive_some(65536)
            if not chunk:
                return bytes(data)
            data += chunk
    if PREFACE.startswith(data):
        await trio.lowlevel.checkpoint()
        return bytes(data)  # silent, or a slow HTTP/2 client: the deadline ends it
    log.debug("an HTTP/1.x request on an HTTP/2 prior-knowledge connection: answered 505")
    # A request line cut short by the deadline still gets its answer, briefly.
    await _answer_and_drain(transport, max(deadline, trio.current_time() + ANSWER_GRACE))
    return None


async def _answer_and_drain(transport: trio.abc.Stream, deadline: float) -> None:
    """Send HTTP1_RESPONSE, end our side, and read (discarding) until the client
    closes or ``deadline``: closing with its bytes unread would make the kernel reset
    the connection, and the client could lose the response."""
    with trio.move_on_at(deadline):
        try:
            await transport.send_all(HTTP1_RESPONSE)
            if isinstance(transport, trio.abc.HalfCloseableStream):
                await transport.send_eof()
            while await transport.receive_some(65536):
                pass
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            log.debug("HTTP/1.x client gone: %r", exc)
