"""The client side of the conformance suite: a raw-socket fake server on 127.0.0.1.

Theory of operation
-------------------
:func:`run_case` listens on 127.0.0.1, runs a trio_h2t client against it in the same
trio run (``open_connection`` and one ``request``, as ``trio-h2t get`` does; or any
``client`` coroutine), and plays the server with :class:`FakeServer`: a
``trio.SocketStream`` that sends hand-built frames (hyperframe's, or
``harness.frame_bytes`` for the ones hyperframe refuses) and parses every byte the
client sends, from its preface to EOF. Nothing in it is an HTTP/2 library, so it can
misbehave at will:

- before its SETTINGS (the server preface begins with the violation),
- during the client's handshake wait (SETTINGS and the violation in one write),
- mid-stream (after the client's HEADERS for stream 1 arrived).

Each case compares :attr:`Outcome.wire`, a one-token-per-frame summary of what the
client sent (:func:`token`), with the exact list expected, EOF included, and the
exception the client raised. Every step is bounded by ``TIMEOUT`` (trio.fail_after).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import hpack
import trio
from hyperframe.frame import (
    ContinuationFrame,
    DataFrame,
    Frame,
    GoAwayFrame,
    HeadersFrame,
    PingFrame,
    RstStreamFrame,
    SettingsFrame,
    WindowUpdateFrame,
)

import trio_h2t

from .harness import PREFACE, ErrorCode

__all__ = ["OPENING", "TIMEOUT", "FakeServer", "Outcome", "get_root", "run_case", "token"]

#: Seconds any one case may take, end to end.
TIMEOUT = 10.0
#: What every trio_h2t client sends first, in one write: its SETTINGS and the
#: connection WINDOW_UPDATE that opens its 4 MiB receive window.
OPENING = ["SETTINGS", "WINDOW_UPDATE(0)"]


def token(frame: Frame | None) -> str:
    """One frame as a short token; ``None`` (end of stream) is ``EOF``."""
    if frame is None:
        return "EOF"
    sid = frame.stream_id
    flags = set(frame.flags)
    if isinstance(frame, SettingsFrame):
        return "SETTINGS(ACK)" if "ACK" in flags else "SETTINGS"
    if isinstance(frame, WindowUpdateFrame):
        return f"WINDOW_UPDATE({sid})"
    if isinstance(frame, HeadersFrame):
        return f"HEADERS({sid}{',END_STREAM' if 'END_STREAM' in flags else ''})"
    if isinstance(frame, DataFrame):
        return f"DATA({sid}{',END_STREAM' if 'END_STREAM' in flags else ''})"
    if isinstance(frame, RstStreamFrame):
        return f"RST_STREAM({sid},{ErrorCode(frame.error_code).name})"
    if isinstance(frame, GoAwayFrame):
        return f"GOAWAY({ErrorCode(frame.error_code).name},last={frame.last_stream_id})"
    if isinstance(frame, PingFrame):
        return "PING(ACK)" if "ACK" in flags else "PING"
    return type(frame).__name__


class FakeServer:
    """The server end of one connection, driven by a case script."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.encoder = hpack.Encoder()
        self.decoder = hpack.Decoder()
        self.frames: list[Frame | None] = []  # what the client sent; None = EOF
        self.preface = b""  # the client's first 24 bytes
        self.headers: dict[int, list[tuple[bytes, bytes]]] = {}  # decoded request blocks
        self._buffer = bytearray()

    # -- sending

    async def send(self, *frames: Frame | bytes) -> None:
        """Send ``frames`` in one write; a client that already closed is not an error."""
        data = b"".join(f if isinstance(f, bytes) else f.serialize() for f in frames)
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await self.stream.send_all(data)

    def block(self, headers: list[tuple[str, str]]) -> bytes:
        """HPACK-encode ``headers`` with this connection's encoder (send the result)."""
        return bytes(self.encoder.encode(headers))

    def response(
        self, stream_id: int = 1, headers: list[tuple[str, str]] | None = None, **kw: bool
    ) -> HeadersFrame:
        """A HEADERS frame (END_HEADERS; END_STREAM unless ``end_stream=False``)."""
        flags = ["END_HEADERS"]
        if kw.get("end_stream", True):
            flags.append("END_STREAM")
        return HeadersFrame(stream_id, self.block(headers or [(":status", "200")]), flags=flags)

    # -- receiving

    async def _read(self) -> bool:
        try:
            data = await self.stream.receive_some(65536)
        except trio.BrokenResourceError:
            data = b""
        if not data:
            return False
        self._buffer += data
        return True

    async def next_frame(self) -> Frame | None:
        """The client's next frame (None at EOF, recorded once)."""
        if self.frames and self.frames[-1] is None:
            return None
        while len(self._buffer) < 9 or len(self._buffer) < 9 + _length(self._buffer):
            if not await self._read():
                self.frames.append(None)
                return None
        frame, length = Frame.parse_frame_header(memoryview(bytes(self._buffer[:9])))
        frame.parse_body(memoryview(bytes(self._buffer[9 : 9 + length])))
        del self._buffer[: 9 + length]
        if isinstance(frame, HeadersFrame | ContinuationFrame):
            # Requests are single HEADERS frames (the client's blocks are small).
            self.headers[frame.stream_id] = list(self.decoder.decode(frame.data, raw=True))
        self.frames.append(frame)
        return frame

    async def read_preface(self) -> None:
        """The client's 24-byte preface and its opening frames (SETTINGS, WINDOW_UPDATE)."""
        while len(self._buffer) < len(PREFACE):
            if not await self._read():
                raise AssertionError(f"the client closed before its preface: {self._buffer!r}")
        self.preface = bytes(self._buffer[: len(PREFACE)])
        del self._buffer[: len(PREFACE)]
        for _ in OPENING:
            await self.next_frame()

    async def wait_for(self, tok: str) -> Frame:
        """Read until a frame whose token is ``tok``; fail at EOF."""
        while True:
            frame = await self.next_frame()
            if frame is None:
                raise AssertionError(f"expected {tok}; got {self.wire}")
            if token(frame) == tok:
                return frame

    async def read_to_eof(self) -> None:
        while await self.next_frame() is not None:
            pass

    @property
    def wire(self) -> list[str]:
        return [token(f) for f in self.frames]


def _length(buffer: bytearray) -> int:
    return int.from_bytes(buffer[:3], "big")


@dataclass
class Outcome:
    """What a case produced: the client's frames and what it raised or returned."""

    wire: list[str]
    error: BaseException | None = None
    result: object = None
    peer: FakeServer | None = field(default=None, repr=False)

    def cause_chain(self) -> list[BaseException]:
        """The error and its ``__cause__`` chain."""
        chain = []
        exc = self.error
        while exc is not None:
            chain.append(exc)
            exc = exc.__cause__
        return chain

    def protocol_error(self) -> trio_h2t.RemoteProtocolError:
        """The RemoteProtocolError in the error's cause chain (fails if none)."""
        for exc in self.cause_chain():
            if isinstance(exc, trio_h2t.RemoteProtocolError):
                return exc
        raise AssertionError(f"no RemoteProtocolError in {self.cause_chain()!r}")


Client = Callable[[int], Awaitable[object]]
Script = Callable[[FakeServer], Awaitable[None]]


async def get_root(port: int) -> trio_h2t.Response:
    """The client of most cases: ``trio-h2t get http://127.0.0.1:PORT/`` in-process."""
    async with trio_h2t.open_connection("127.0.0.1", port) as conn:
        return await conn.request("GET", "/")


async def run_case(script: Script, client: Client = get_root) -> Outcome:
    """Run ``client`` against a fake server playing ``script``, to the client's EOF.

    The fake server reads the client's preface and opening frames, runs ``script``,
    then reads until the client closes. Bounded by ``TIMEOUT``.
    """
    outcome = Outcome([])
    with trio.fail_after(TIMEOUT):
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        listener = listeners[0]
        port = listener.socket.getsockname()[1]

        async def run_client() -> None:
            try:
                outcome.result = await client(port)
            except Exception as exc:
                outcome.error = exc

        async with listener, trio.open_nursery() as nursery:
            nursery.start_soon(functools.partial(run_client), name="conformance-client")
            stream = await listener.accept()
            async with stream:
                peer = FakeServer(stream)
                await peer.read_preface()
                await script(peer)
                await peer.read_to_eof()
    assert peer.preface == PREFACE
    outcome.wire = peer.wire
    outcome.peer = peer
    return outcome
