"""What each side writes when the peer never completes the HTTP/2 handshake within
``handshake_timeout``, over real loopback TCP: its opening (SETTINGS, connection
WINDOW_UPDATE), then GOAWAY(NO_ERROR, last stream id 0), then EOF
(docs/cancellation.md, "How a connection ends", the handshake_timeout row).

``tests/conformance/test_client.py`` (``test_silent_server_times_out_with_goaway``) and
``tests/test_ending_frames.py`` (``test_server_handshake_timeout_*``) pin the same over a
scripted peer; this file pins it with a peer that is only a socket saying nothing.
"""

from __future__ import annotations

import functools

import pytest
import trio
from h2.errors import ErrorCodes
from hyperframe.frame import Frame, GoAwayFrame

from trio_h2t import ConnectionLostError, TransportConfig, open_connection, serve_tcp

#: The client connection preface (RFC 9113 §3.4).
MAGIC = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#: Short, so the tests take well under a second each.
TIMEOUT = 0.3
CONFIG = TransportConfig(handshake_timeout=TIMEOUT)


def describe(wire: bytes) -> list[str]:
    """The frames in ``wire`` as text (type; a GOAWAY's code and last stream id), then EOF."""
    out = []
    while wire:
        frame, length = Frame.parse_frame_header(memoryview(wire[:9]))
        frame.parse_body(memoryview(wire[9 : 9 + length]))
        wire = wire[9 + length :]
        if isinstance(frame, GoAwayFrame):
            out.append(f"GOAWAY({ErrorCodes(frame.error_code).name},last={frame.last_stream_id})")
        else:
            out.append(type(frame).__name__.removesuffix("Frame"))
    return [*out, "EOF"]


async def read_to_eof(stream: trio.abc.Stream) -> bytes:
    """Everything ``stream`` receives until the peer closes."""
    got = bytearray()
    while data := await stream.receive_some():
        got += data
    return bytes(got)


async def test_client_writes_goaway_when_server_says_nothing() -> None:
    """A TCP server that accepts and says nothing: after handshake_timeout the client
    writes its preface, SETTINGS, WINDOW_UPDATE, then GOAWAY(NO_ERROR, last 0) and
    closes; open_connection raises ConnectionLostError naming the timeout."""
    wire: list[bytes] = []
    closed = trio.Event()

    async def silent(stream: trio.SocketStream) -> None:
        wire.append(await read_to_eof(stream))
        closed.set()

    with trio.fail_after(TIMEOUT + 5):
        async with trio.open_nursery() as nursery:
            listeners = await nursery.start(
                functools.partial(trio.serve_tcp, silent, 0, host="127.0.0.1")
            )
            port = listeners[0].socket.getsockname()[1]
            with pytest.raises(ConnectionLostError, match=r"within 0\.3 s"):
                async with open_connection("127.0.0.1", port, config=CONFIG):
                    pytest.fail("the handshake cannot have completed")  # pragma: no cover
            await closed.wait()
            nursery.cancel_scope.cancel()
    assert wire[0].startswith(MAGIC)
    assert describe(wire[0][len(MAGIC) :]) == [
        "Settings",
        "WindowUpdate",
        "GOAWAY(NO_ERROR,last=0)",
        "EOF",
    ]


@pytest.mark.parametrize("sent", [b"", MAGIC], ids=["nothing", "preface-only"])
async def test_server_writes_goaway_when_client_stalls(sent: bytes) -> None:
    """A TCP client that sends nothing, or only the preface magic: after
    handshake_timeout the server writes SETTINGS, WINDOW_UPDATE, then
    GOAWAY(NO_ERROR, last 0), and closes."""

    async def handler(stream: object) -> None:  # pragma: no cover - never reached
        raise AssertionError("no request can arrive")

    with trio.fail_after(TIMEOUT + 5):
        async with trio.open_nursery() as nursery:
            server = await nursery.start(
                functools.partial(serve_tcp, handler, 0, host="127.0.0.1", config=CONFIG)
            )
            client = await trio.open_tcp_stream("127.0.0.1", server.port)
            async with client:
                if sent:
                    await client.send_all(sent)
                wire = await read_to_eof(client)
            nursery.cancel_scope.cancel()
    assert describe(wire) == ["Settings", "WindowUpdate", "GOAWAY(NO_ERROR,last=0)", "EOF"]
