"""A raw-socket HTTP/2 client for the conformance suite: h2spec's ``spec.Conn`` in Python.

Theory of operation
-------------------
The suite plays a *misbehaving* client against a real ``trio-h2t serve`` process, so
it cannot use an HTTP/2 library that refuses to misbehave. :class:`H2Client` is a plain
blocking TCP socket with timeouts, on 127.0.0.1:

- frames go out as bytes: hyperframe builds the valid ones, :func:`frame_bytes` the
  ones hyperframe refuses to build (a PING on stream 3, a 6-byte PING, ...). Each
  :meth:`H2Client.send` is one ``sendall``, so a test's frames reach the server in
  one write, as h2spec's usually do;
- header blocks are encoded with one ``hpack.Encoder`` per connection (the server's
  decoder follows that encoder's dynamic table, so every block encoded must be sent,
  in order);
- frames come back through :meth:`H2Client.next_event`, which parses them with
  hyperframe and joins HEADERS + CONTINUATION into one :class:`HeaderBlock` decoded
  with the connection's ``hpack.Decoder`` (every block is decoded, in order, so the
  decoder stays in sync even when a test ignores the block).

The ``expect_*`` methods are h2spec's verifiers (``spec/verifier.go``), each bounded by
``timeout`` seconds (h2spec's default is 2 s too):

- :meth:`H2Client.expect_connection_error`: a GOAWAY with one of the codes, or the
  connection closing. Two differences from h2spec, both stricter and both RFC 9113:
  a GOAWAY with any *other* code fails at once (h2spec keeps waiting and then
  accepts the close that follows), and after the GOAWAY the connection must close
  (§5.4.1: "the endpoint MUST close the TCP connection").
- :meth:`H2Client.expect_stream_error`: RST_STREAM with one of the codes *on that
  stream* (h2spec accepts any stream), or a connection error with one of the codes,
  or the connection closing.
- :meth:`H2Client.expect_close` (``VerifyConnectionClose``),
  :meth:`H2Client.expect_headers` (``VerifyHeadersFrame``),
  :meth:`H2Client.expect_frame` (``WaitEventByType``), :meth:`H2Client.expect_ping_ack`
  and :meth:`H2Client.expect_settings_ack`.

A failed expectation raises ``AssertionError`` listing every event received so far,
so a failure reads as "expected X; got: SETTINGS, WINDOW_UPDATE(0, +4128769), closed".
"""

from __future__ import annotations

import contextlib
import enum
import socket
import struct
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import NoReturn, TypeVar

import hpack
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

__all__ = [
    "ACK",
    "END_HEADERS",
    "END_STREAM",
    "PADDED",
    "PREFACE",
    "PRIORITY",
    "UNKNOWN_TYPE",
    "TIMEOUT",
    "Closed",
    "ErrorCode",
    "Event",
    "FrameType",
    "H2Client",
    "HeaderBlock",
    "Response",
    "Setting",
    "frame_bytes",
    "describe",
    "request_headers",
]

#: RFC 9113 §3.4: the client connection preface, before the client's SETTINGS.
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#: Seconds each expectation waits (h2spec's default ``--timeout`` is 2 s too).
TIMEOUT = 2.0
#: RFC 9113 §6.5.2: the initial SETTINGS_INITIAL_WINDOW_SIZE.
DEFAULT_WINDOW_SIZE = 65_535


class ErrorCode(enum.IntEnum):
    """RFC 9113 §7 error codes (our own copy: the suite does not trust h2's)."""

    NO_ERROR = 0x0
    PROTOCOL_ERROR = 0x1
    INTERNAL_ERROR = 0x2
    FLOW_CONTROL_ERROR = 0x3
    SETTINGS_TIMEOUT = 0x4
    STREAM_CLOSED = 0x5
    FRAME_SIZE_ERROR = 0x6
    REFUSED_STREAM = 0x7
    CANCEL = 0x8
    COMPRESSION_ERROR = 0x9
    CONNECT_ERROR = 0xA
    ENHANCE_YOUR_CALM = 0xB
    INADEQUATE_SECURITY = 0xC
    HTTP_1_1_REQUIRED = 0xD


class FrameType(enum.IntEnum):
    """RFC 9113 §6 frame types."""

    # Our own copy on purpose, not trio_h2t._h2.frames': the suite checks the codec
    # against the RFC.

    DATA = 0x0
    HEADERS = 0x1
    PRIORITY = 0x2
    RST_STREAM = 0x3
    SETTINGS = 0x4
    PUSH_PROMISE = 0x5
    PING = 0x6
    GOAWAY = 0x7
    WINDOW_UPDATE = 0x8
    CONTINUATION = 0x9


class Setting(enum.IntEnum):
    """RFC 9113 §6.5.2 setting identifiers."""

    HEADER_TABLE_SIZE = 0x1
    ENABLE_PUSH = 0x2
    MAX_CONCURRENT_STREAMS = 0x3
    INITIAL_WINDOW_SIZE = 0x4
    MAX_FRAME_SIZE = 0x5
    MAX_HEADER_LIST_SIZE = 0x6


# Frame flags (RFC 9113 §6), for hand-built frames.
END_STREAM = 0x1  # DATA, HEADERS
ACK = 0x1  # SETTINGS, PING
END_HEADERS = 0x4  # HEADERS, CONTINUATION
PADDED = 0x8  # DATA, HEADERS
PRIORITY = 0x20  # HEADERS
#: A frame type no extension defines (h2spec's choice).
UNKNOWN_TYPE = 0x16


def frame_bytes(frame_type: int, flags: int, stream_id: int, payload: bytes = b"") -> bytes:
    """One frame, built by hand: the 9-byte header (RFC 9113 §4.1) and ``payload``.

    For the frames hyperframe refuses to build. ``stream_id`` may have the reserved
    bit set (it is packed as a raw 32-bit value); the length is ``len(payload)``.
    """
    length = len(payload)
    header = struct.pack(">BHBBL", length >> 16, length & 0xFFFF, frame_type, flags, stream_id)
    return header + payload


def request_headers(
    method: str = "GET", path: str = "/", *, authority: str = "127.0.0.1"
) -> list[tuple[str, str]]:
    """A minimal valid request head (h2spec's ``CommonHeaders``)."""
    return [(":method", method), (":scheme", "http"), (":path", path), (":authority", authority)]


#: RFC 9113 §8.2.2: fields that are malformed in HTTP/2.
CONNECTION_SPECIFIC = frozenset(
    {b"connection", b"keep-alive", b"proxy-connection", b"transfer-encoding", b"upgrade"}
)


@dataclass(frozen=True)
class Closed:
    """The server closed the connection (EOF or reset)."""

    def __str__(self) -> str:
        return "closed"


@dataclass(frozen=True)
class HeaderBlock:
    """A HEADERS frame and its CONTINUATION frames, decoded."""

    stream_id: int
    headers: list[tuple[bytes, bytes]]
    end_stream: bool

    def get(self, name: bytes) -> bytes | None:
        for key, value in self.headers:
            if key == name:
                return value
        return None

    def __str__(self) -> str:
        status = self.get(b":status")
        end = ", END_STREAM" if self.end_stream else ""
        shown = f", :status={status.decode()}" if status is not None else ""
        return f"HEADERS(stream={self.stream_id}{shown}{end})"


#: What the server can send us: a frame (never HEADERS or CONTINUATION: those arrive
#: as a HeaderBlock), a header block, or the end of the connection.
Event = Frame | HeaderBlock | Closed

F = TypeVar("F", bound=Frame)


@dataclass
class Response:
    """A response read to its end (END_STREAM or RST_STREAM)."""

    stream_id: int
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    body: bytes = b""
    trailers: list[tuple[bytes, bytes]] | None = None
    reset_code: int | None = None  # set if the stream ended with RST_STREAM

    @property
    def status(self) -> int:
        for key, value in self.headers:
            if key == b":status":
                return int(value)
        raise AssertionError(f"response on stream {self.stream_id} has no :status")

    def problems(self, *, head: bool = False) -> list[str]:
        """What makes this response malformed (RFC 9113 §8.1.1, §8.2, §8.3), if
        anything. ``head``: it answers a HEAD request (no body expected)."""
        if self.reset_code is not None and not self.headers:
            return []  # reset before any response: nothing to check
        found: list[str] = []
        names = [name for name, _ in self.headers]
        if names.count(b":status") != 1 or names[:1] != [b":status"]:
            found.append("§8.3.2: exactly one :status, first")
        seen_regular = False
        for name, value in [*self.headers, *(self.trailers or [])]:
            if name.startswith(b":"):
                if seen_regular or name != b":status":
                    found.append(f"§8.3: misplaced or unknown pseudo-header {name!r}")
            else:
                seen_regular = True
            if name != name.lower():
                found.append(f"§8.2: uppercase field name {name!r}")
            if name in CONNECTION_SPECIFIC:
                found.append(f"§8.2.2: connection-specific field {name!r}")
            if any(c in value for c in b"\x00\r\n"):
                found.append(f"§8.2.1: NUL, CR or LF in the value of {name!r}")
        for name, _ in self.trailers or []:
            if name.startswith(b":"):
                found.append(f"§8.1: pseudo-header {name!r} in trailers")
        length = dict(self.headers).get(b"content-length")
        status = self.status if names.count(b":status") == 1 else 0
        bodiless = head or status in (204, 304) or 100 <= status < 200
        complete = length is not None and not bodiless and self.reset_code is None
        if complete and int(length or 0) != len(self.body):
            found.append(f"§8.1.1: content-length {length!r} but {len(self.body)} octets of DATA")
        return found


def describe(event: Event) -> str:
    """A one-line, human-readable summary of ``event`` for failure messages."""
    if isinstance(event, (Closed, HeaderBlock)):
        return str(event)
    if isinstance(event, GoAwayFrame):
        debug = f", debug={event.additional_data!r}" if event.additional_data else ""
        return (
            f"GOAWAY(last_stream_id={event.last_stream_id}, {_code_name(event.error_code)}{debug})"
        )
    if isinstance(event, RstStreamFrame):
        return f"RST_STREAM(stream={event.stream_id}, {_code_name(event.error_code)})"
    if isinstance(event, DataFrame):
        end = ", END_STREAM" if "END_STREAM" in event.flags else ""
        return f"DATA(stream={event.stream_id}, length={len(event.data)}{end})"
    if isinstance(event, SettingsFrame):
        if "ACK" in event.flags:
            return "SETTINGS(ACK)"
        return f"SETTINGS({dict(event.settings)})"
    if isinstance(event, PingFrame):
        ack = "ACK, " if "ACK" in event.flags else ""
        return f"PING({ack}{event.opaque_data!r})"
    if isinstance(event, WindowUpdateFrame):
        return f"WINDOW_UPDATE(stream={event.stream_id}, +{event.window_increment})"
    return repr(event)


def _code_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error code {code:#x}"


class H2Client:
    """One raw HTTP/2 connection to the server under test. Not thread-safe.

    ``timeout`` bounds every expectation (and every blocking socket call).
    """

    def __init__(self, port: int, *, timeout: float = TIMEOUT) -> None:
        self.port = port
        self.timeout = timeout  # immutable after init
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.encoder = hpack.Encoder()
        self.decoder = hpack.Decoder(max_header_list_size=1 << 20)
        #: The server's SETTINGS (the first frame, plus any later ones), by id.
        self.server_settings: dict[int, int] = {}
        #: Every event received, in order, for failure messages.
        self.received: list[Event] = []
        self.closed = False  # the server closed the connection
        self._buffer = bytearray()
        self._header_frames: list[HeadersFrame | ContinuationFrame] = []

    def close(self) -> None:
        self.sock.close()

    # ------------------------------------------------------------------ sending

    def send(self, *frames: Frame | bytes) -> None:
        """Send ``frames`` (hyperframe frames or raw bytes) in one ``sendall``.

        A server that already closed the connection is not an error here: the
        expectation that follows sees the close.
        """
        data = b"".join(f if isinstance(f, bytes) else f.serialize() for f in frames)
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.sock.sendall(data)

    def encode_headers(self, headers: Iterable[tuple[str | bytes, str | bytes]]) -> bytes:
        """HPACK-encode ``headers`` with this connection's encoder. Send the result!"""
        return self.encoder.encode(list(headers))

    def headers_frame(
        self,
        stream_id: int,
        headers: Iterable[tuple[str | bytes, str | bytes]] | bytes,
        *,
        end_stream: bool = True,
        end_headers: bool = True,
    ) -> HeadersFrame:
        """A HEADERS frame; ``headers`` is a list (encoded here) or an encoded block."""
        block = headers if isinstance(headers, bytes) else self.encode_headers(headers)
        flags = []
        if end_stream:
            flags.append("END_STREAM")
        if end_headers:
            flags.append("END_HEADERS")
        return HeadersFrame(stream_id, block, flags=flags)

    def send_headers(
        self,
        stream_id: int,
        headers: Iterable[tuple[str | bytes, str | bytes]] | bytes,
        *,
        end_stream: bool = True,
        end_headers: bool = True,
    ) -> None:
        self.send(
            self.headers_frame(stream_id, headers, end_stream=end_stream, end_headers=end_headers)
        )

    def open_post(self, stream_id: int = 1, extra: Sequence[tuple[str, str]] = ()) -> HeadersFrame:
        """The HEADERS of a POST whose body follows (no END_STREAM): the stream stays
        open until the client ends it."""
        return self.headers_frame(stream_id, [*request_headers("POST"), *extra], end_stream=False)

    def send_request(self, stream_id: int, method: str = "GET", path: str = "/") -> None:
        """A complete request without a body (END_STREAM on the HEADERS)."""
        self.send_headers(stream_id, request_headers(method, path))

    def handshake(self, settings: dict[int, int] | None = None) -> None:
        """h2spec's ``Handshake``: preface + SETTINGS, then wait until the server's
        SETTINGS has arrived (and been acknowledged) and ours has been acknowledged.

        ``settings`` defaults to h2spec's ``{INITIAL_WINDOW_SIZE: 65535}``.
        """
        if settings is None:
            settings = {Setting.INITIAL_WINDOW_SIZE: DEFAULT_WINDOW_SIZE}
        self.send(PREFACE, SettingsFrame(0, settings))
        got_settings = got_ack = False
        deadline = time.monotonic() + self.timeout
        while not (got_settings and got_ack):
            event = self.next_event(deadline)
            if isinstance(event, Closed):
                self.fail("the handshake to complete")
            if isinstance(event, SettingsFrame):
                if "ACK" in event.flags:
                    got_ack = True
                else:
                    got_settings = True
                    self.send(SettingsFrame(0, flags=["ACK"]))

    # ------------------------------------------------------------------ receiving

    def next_event(self, deadline: float) -> Event:
        """The next event, waiting until ``deadline`` (``time.monotonic()``).

        Raises ``TimeoutError`` if nothing arrives in time. After the connection
        closed, every call returns :class:`Closed`.
        """
        while True:
            if self.closed:
                return Closed()
            header = self._read_exact(9, deadline)
            if header is None:
                return self._on_closed()
            frame, length = Frame.parse_frame_header(memoryview(header))
            body = self._read_exact(length, deadline) if length else b""
            if body is None:
                return self._on_closed()
            frame.parse_body(memoryview(body))
            event = self._assemble(frame)
            if event is None:
                continue  # a header block is not complete yet
            if isinstance(event, SettingsFrame) and "ACK" not in event.flags:
                self.server_settings.update(event.settings)
            self.received.append(event)
            return event

    def _on_closed(self) -> Closed:
        self.closed = True
        event = Closed()
        self.received.append(event)
        return event

    def _read_exact(self, n: int, deadline: float) -> bytes | None:
        """``n`` bytes, or None at EOF/reset; TimeoutError past ``deadline``."""
        buf = self._buffer
        while len(buf) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except TimeoutError:
                raise
            except (ConnectionResetError, ConnectionAbortedError):
                return None
            if not chunk:
                return None
            buf += chunk
        data = bytes(buf[:n])
        del buf[:n]
        return data

    def _assemble(self, frame: Frame) -> Event | None:
        """Join HEADERS + CONTINUATION frames into a decoded HeaderBlock."""
        if isinstance(frame, (HeadersFrame, ContinuationFrame)):
            if isinstance(frame, ContinuationFrame) and not self._header_frames:
                raise AssertionError(f"server sent a CONTINUATION without HEADERS: {frame!r}")
            self._header_frames.append(frame)
            if "END_HEADERS" not in frame.flags:
                return None
            first = self._header_frames[0]
            block = b"".join(f.data for f in self._header_frames)
            self._header_frames = []
            headers = [(bytes(k), bytes(v)) for k, v in self.decoder.decode(block, raw=True)]
            return HeaderBlock(first.stream_id, headers, "END_STREAM" in first.flags)
        if self._header_frames:
            raise AssertionError(f"server interleaved {frame!r} inside a header block")
        return frame

    # ------------------------------------------------------------------ expectations

    def fail(self, expected: str) -> NoReturn:
        got = ", ".join(describe(e) for e in self.received) or "nothing"
        raise AssertionError(f"expected {expected}; got (all events so far): {got}")

    def _deadline(self) -> float:
        return time.monotonic() + self.timeout

    def _next_or_fail(self, deadline: float, expected: str) -> Event:
        try:
            return self.next_event(deadline)
        except TimeoutError:
            pass
        self.fail(f"{expected} within {self.timeout} s (timed out)")

    def expect_connection_error(self, *codes: int) -> GoAwayFrame | None:
        """A connection error: GOAWAY with one of ``codes`` and then the connection
        closes, or the connection closes at once (h2spec ``VerifyConnectionError``).

        Returns the GOAWAY, if one came.
        """
        names = " or ".join(_code_name(c) for c in codes)
        expected = f"connection error {names} (GOAWAY, then close)"
        deadline = self._deadline()
        goaway: GoAwayFrame | None = None
        while True:
            event = self._next_or_fail(deadline, expected)
            if isinstance(event, Closed):
                return goaway
            if isinstance(event, GoAwayFrame) and goaway is None:
                if event.error_code not in codes:
                    self.fail(expected)
                goaway = event
                expected = "the connection to close after GOAWAY (RFC 9113 §5.4.1)"

    def expect_stream_error(self, stream_id: int, *codes: int) -> None:
        """A stream error: RST_STREAM on ``stream_id`` with one of ``codes``, or a
        connection error with one of them, or the connection closing (h2spec
        ``VerifyStreamError``). A response may come first (RFC 9113 §8.1.1)."""
        names = " or ".join(_code_name(c) for c in codes)
        expected = f"stream error {names} on stream {stream_id} (RST_STREAM, or GOAWAY)"
        deadline = self._deadline()
        while True:
            event = self._next_or_fail(deadline, expected)
            if isinstance(event, Closed):
                return
            if isinstance(event, GoAwayFrame) or (
                isinstance(event, RstStreamFrame) and event.stream_id == stream_id
            ):
                if event.error_code not in codes:
                    self.fail(expected)
                return

    def expect_goaway_or_close(self) -> GoAwayFrame | None:
        """Any GOAWAY (returned) or the connection closing (None)."""
        deadline = self._deadline()
        while True:
            event = self._next_or_fail(deadline, "GOAWAY or connection close")
            if isinstance(event, Closed):
                return None
            if isinstance(event, GoAwayFrame):
                return event

    def expect_close(self) -> None:
        """The connection closes; frames before that are ignored (h2spec
        ``VerifyConnectionClose``)."""
        deadline = self._deadline()
        while not isinstance(self._next_or_fail(deadline, "connection close"), Closed):
            pass

    def expect_frame(self, kind: type[F], stream_id: int | None = None) -> F:
        """The next frame of type ``kind`` (on ``stream_id``, if given); other frames
        are skipped. Fails if the connection closes first (h2spec ``WaitEventByType``)."""
        where = f" on stream {stream_id}" if stream_id is not None else ""
        expected = f"a {kind.__name__}{where}"
        deadline = self._deadline()
        while True:
            event = self._next_or_fail(deadline, expected)
            if isinstance(event, Closed):
                self.fail(expected)
            if isinstance(event, kind) and (stream_id is None or event.stream_id == stream_id):
                return event

    def expect_headers(self, stream_id: int) -> HeaderBlock:
        """A header block on ``stream_id`` (h2spec ``VerifyHeadersFrame``). Fails on
        RST_STREAM for the stream, GOAWAY or close."""
        expected = f"a HEADERS frame on stream {stream_id}"
        deadline = self._deadline()
        while True:
            event = self._next_or_fail(deadline, expected)
            if isinstance(event, HeaderBlock) and event.stream_id == stream_id:
                return event
            if isinstance(event, (Closed, GoAwayFrame)) or (
                isinstance(event, RstStreamFrame) and event.stream_id == stream_id
            ):
                self.fail(expected)

    def expect_ping_ack(self, data: bytes) -> None:
        """A PING with ACK echoing ``data``; any other PING ACK fails (RFC 9113 §6.7)."""
        expected = f"PING(ACK, {data!r})"
        deadline = self._deadline()
        while True:
            event = self._next_or_fail(deadline, expected)
            if isinstance(event, (Closed, GoAwayFrame)):
                self.fail(expected)
            if isinstance(event, PingFrame) and "ACK" in event.flags:
                if event.opaque_data != data:
                    self.fail(expected)
                return

    def expect_settings_ack(self) -> None:
        expected = "SETTINGS(ACK)"
        deadline = self._deadline()
        while True:
            event = self._next_or_fail(deadline, expected)
            if isinstance(event, (Closed, GoAwayFrame)):
                self.fail(expected)
            if isinstance(event, SettingsFrame) and "ACK" in event.flags:
                return

    def ping(self, data: bytes = b"h2t-conf") -> None:
        """A PING round trip: the connection is alive and still processing frames."""
        self.send(PingFrame(0, data))
        self.expect_ping_ack(data)

    def read_response(self, stream_id: int, *, head: bool = False) -> Response:
        """Read the response on ``stream_id`` to END_STREAM or RST_STREAM.

        Fails on GOAWAY, close or timeout, and if the response is malformed
        (:meth:`Response.problems`; ``head`` for a HEAD request). Frames of other
        streams are skipped.
        """
        return self.read_responses([stream_id], head=head)[stream_id]

    def read_responses(
        self, stream_ids: Sequence[int], *, head: bool = False
    ) -> dict[int, Response]:
        """Read the responses on ``stream_ids``, interleaved in any order. Frames of
        those streams that arrived earlier (during another expectation) count too."""
        responses = {sid: Response(sid) for sid in stream_ids}
        pending = set(stream_ids)
        expected = f"complete responses on streams {sorted(stream_ids)}"
        deadline = self._deadline()
        earlier = [e for e in self.received if getattr(e, "stream_id", 0) in pending]
        while pending:
            event = earlier.pop(0) if earlier else self._next_or_fail(deadline, expected)
            if isinstance(event, (Closed, GoAwayFrame)):
                self.fail(expected)
            sid = getattr(event, "stream_id", 0)
            if sid not in pending:
                continue
            response = responses[sid]
            if isinstance(event, HeaderBlock):
                if not response.headers:
                    response.headers = event.headers
                else:
                    response.trailers = event.headers
                if event.end_stream:
                    pending.discard(sid)
            elif isinstance(event, DataFrame):
                response.body += event.data
                if "END_STREAM" in event.flags:
                    pending.discard(sid)
            elif isinstance(event, RstStreamFrame):
                response.reset_code = event.error_code
                pending.discard(sid)
        for response in responses.values():
            problems = response.problems(head=head)
            if problems:
                raise AssertionError(f"the server sent a malformed response: {problems}")
        return responses

    def drain(self, seconds: float) -> list[Event]:
        """Everything that arrives within ``seconds`` (for "nothing must happen")."""
        deadline = time.monotonic() + seconds
        events: list[Event] = []
        while True:
            try:
                event = self.next_event(deadline)
            except TimeoutError:
                return events
            events.append(event)
            if isinstance(event, Closed):
                return events
