"""Properties an HTTP/2 server must keep, checked with Hypothesis against a live server.

Theory of operation
-------------------
Each :class:`Property` is a Hypothesis strategy of :class:`Scenario` values: the bytes
a client writes (a :mod:`._frames` sequence) and what RFC 9113 or RFC 7541 says the
server MUST do about them (:class:`Expect`): end the connection (a connection error,
§5.4.1), reset one stream (a stream error, §5.4.2; a connection error is always
allowed instead), acknowledge a PING, answer well-formed requests, or simply stay
alive. Fields the rule does not care about (payloads, ids, padding, frames before the
offending one) are random, so Hypothesis can shrink a finding to its core.

:func:`exchange` plays one scenario over one transport. After the scenario's bytes it
writes probes, when the bytes end on a frame boundary: a PING (opaque data
``h2tcheck``) and, for liveness, a GET on a fresh stream. A server processes frames in
order, so a PING acknowledged before any GOAWAY means the offending frame was read
and let pass; a server that answers neither the probes nor with a GOAWAY within the
timeout has stopped serving. The verdict says which, with every frame the server sent.

:func:`run_check` runs each property under Hypothesis's ``@given`` with a directory
example database, so what one run found is replayed first by the next, one connection
(one example) at a time, within an example count and a time budget. A verdict is
cached by the scenario's bytes, so a server whose timing varies cannot make
Hypothesis's final replay of the shrunk example disagree with what it saw.
"""

from __future__ import annotations

import contextlib
import json
import struct
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TextIO
from urllib.parse import urlsplit

import trio
import trio.testing
from hypothesis import HealthCheck, Phase, Verbosity, given, settings, strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase

from trio_h2t._config import TransportConfig
from trio_h2t._server import serve_connection
from trio_h2t._stream import H2Stream

from ._frames import (
    MAX_31_BIT,
    PREFACE,
    Chunk,
    FrameType,
    WireFrame,
    describe,
    encode_header_block,
    error_name,
    frame_sequences,
    header_blocks,
    parse_frames,
    request_frames,
    serialize,
)

__all__ = [
    "PROPERTIES",
    "Expect",
    "Finding",
    "Property",
    "Scenario",
    "Verdict",
    "exchange",
    "run_check",
    "tcp_target",
]

#: The opaque data of the probe PING written after a scenario.
PROBE_PING = b"h2tcheck"
#: A request that every server can answer (a status of its choice).
PROBE_HEADERS = [
    (":method", "GET"),
    (":scheme", "http"),
    (":authority", "localhost"),
    (":path", "/"),
]
#: After the probes are answered, how long to wait for a late RST_STREAM or GOAWAY.
GRACE = 0.2

ExpectKind = Literal["connection-error", "stream-error", "ping-ack", "answered", "alive"]


@dataclass(frozen=True, slots=True)
class Expect:
    """What the server must do after a scenario's bytes.

    ``connection-error``: GOAWAY or close (RFC 9113 §5.4.1). ``stream-error``: a
    RST_STREAM on ``stream_id``, or a connection error (§5.4.2, §5.4.1: "an endpoint
    MAY choose to treat a stream error as a connection error"). ``ping-ack``: a PING
    ACK carrying ``opaque``. ``answered``: every stream in ``streams`` gets a response
    (or a REFUSED_STREAM/NO_ERROR reset), and no GOAWAY with an error. ``alive``: the
    probes are answered, or the connection ended (with or without a GOAWAY).
    """

    kind: ExpectKind
    stream_id: int = 0
    opaque: bytes = b""
    streams: tuple[int, ...] = ()

    def to_json(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "stream_id": self.stream_id,
            "opaque": self.opaque.hex(),
            "streams": list(self.streams),
        }

    @classmethod
    def from_json(cls, obj: dict[str, object]) -> Expect:
        kind = str(obj.get("kind", "alive"))
        if kind not in ("connection-error", "stream-error", "ping-ack", "answered", "alive"):
            raise ValueError(f"unknown expectation {kind!r}")
        streams = obj.get("streams", [])
        return cls(
            kind=kind,  # type: ignore[arg-type]  # checked just above
            stream_id=int(str(obj.get("stream_id", 0))),
            opaque=bytes.fromhex(str(obj.get("opaque", ""))),
            streams=tuple(int(s) for s in streams) if isinstance(streams, list) else (),
        )


@dataclass(frozen=True, slots=True)
class Scenario:
    """The chunks a client writes, and what the server must then do. Immutable."""

    chunks: tuple[Chunk, ...]
    expect: Expect

    @property
    def data(self) -> bytes:
        return serialize(self.chunks)

    def __repr__(self) -> str:
        data = self.data
        shown = data[:48].hex() + ("..." if len(data) > 48 else "")
        return f"Scenario({len(data)} bytes: {shown}, expect={self.expect.kind})"


@dataclass(frozen=True, slots=True)
class Verdict:
    """The outcome of one :func:`exchange`: ``ok``, why not, and what the server sent."""

    ok: bool
    reason: str
    received: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Property:
    """A rule a server must keep: its name, the RFC section, and its scenarios."""

    name: str
    section: str
    rule: str
    scenarios: st.SearchStrategy[Scenario]


@dataclass(frozen=True, slots=True)
class Finding:
    """A property a server broke, with the shrunk scenario that shows it."""

    property: Property
    scenario: Scenario
    verdict: Verdict

    def to_json(self) -> dict[str, object]:
        """The replay file's content (``trio-h2t check --replay FILE``)."""
        return {
            "property": self.property.name,
            "section": self.property.section,
            "hex": self.scenario.data.hex(),
            "expect": self.scenario.expect.to_json(),
        }


#### Playing one scenario


@dataclass
class _Seen:
    """What the server has sent so far (owner: the task running :func:`exchange`)."""

    frames: list[WireFrame] = field(default_factory=list)
    goaway: int | None = None
    eof: bool = False
    resets: dict[int, int] = field(default_factory=dict)
    answered: set[int] = field(default_factory=set)
    pings: list[bytes] = field(default_factory=list)
    #: Bytes received after the last whole frame.
    rest: bytes = b""

    def add(self, frame: WireFrame) -> None:
        self.frames.append(frame)
        sid = frame.stream_id & MAX_31_BIT
        if frame.type == FrameType.GOAWAY and len(frame.payload) >= 8:
            self.goaway = struct.unpack(">L", frame.payload[4:8])[0]
        elif frame.type == FrameType.RST_STREAM and len(frame.payload) == 4:
            self.resets[sid] = struct.unpack(">L", frame.payload)[0]
        elif frame.type == FrameType.HEADERS:
            self.answered.add(sid)
        elif frame.type == FrameType.PING and frame.flags & 0x1:
            self.pings.append(frame.payload)

    def feed(self, chunk: bytes | bytearray) -> None:
        """Bytes from the server: each whole frame is added; an empty chunk is the end."""
        if not chunk:
            self.eof = True
            return
        frames, self.rest = parse_frames(self.rest + chunk)
        for frame in frames:
            self.add(frame)

    @property
    def ended(self) -> bool:
        return self.eof or self.goaway is not None

    def settled(self, sid: int) -> bool:
        """Whether stream ``sid`` got a response or a reset."""
        return sid in self.answered or sid in self.resets


def _ends_on_frame_boundary(data: bytes) -> bool:
    if not data.startswith(PREFACE):
        return False
    _, rest = parse_frames(data, preface=True)
    return not rest


def _probe_stream(data: bytes) -> int | None:
    frames, _ = parse_frames(data, preface=True)
    top = max((f.stream_id & MAX_31_BIT for f in frames), default=0)
    nxt = top + 1 if top % 2 == 0 else top + 2
    return nxt if nxt <= MAX_31_BIT else None


@dataclass(frozen=True, slots=True)
class _Plan:
    """What :func:`exchange` writes: the scenario's bytes, then its probes (if any)."""

    expect: Expect
    out: bytes
    #: Whether probes follow the scenario's bytes (they end on a frame boundary).
    probing: bool
    #: The probe GET's stream, when there is one.
    probe_sid: int | None

    @classmethod
    def of(cls, scenario: Scenario) -> _Plan:
        data = scenario.data
        expect = scenario.expect
        if not _ends_on_frame_boundary(data):
            return cls(expect, data, probing=False, probe_sid=None)
        out = data + WireFrame(FrameType.PING, 0, 0, PROBE_PING).to_bytes()
        probe_sid = _probe_stream(data) if expect.kind in ("alive", "answered") else None
        if probe_sid is not None:
            block = encode_header_block(PROBE_HEADERS)
            out += WireFrame(FrameType.HEADERS, 0x5, probe_sid, block).to_bytes()
        return cls(expect, out, probing=True, probe_sid=probe_sid)

    def probe_answered(self, seen: _Seen) -> bool:
        """Whether the probe GET (if any) got a response or a reset."""
        return self.probe_sid is None or seen.settled(self.probe_sid)

    def settled(self, seen: _Seen) -> bool:
        """Whether what the server sent settles the expectation (no need to read on)."""
        expect = self.expect
        if seen.ended or (expect.kind == "ping-ack" and expect.opaque in seen.pings):
            return True
        if not self.probing or PROBE_PING not in seen.pings:
            return False
        if expect.kind == "answered" and not all(seen.settled(s) for s in expect.streams):
            return False
        return self.probe_answered(seen)


async def _read_some(transport: trio.abc.Stream, seen: _Seen) -> None:
    """One ``receive_some`` into ``seen``; a broken or closed transport is the end."""
    try:
        chunk = await transport.receive_some(65_536)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        chunk = b""
    seen.feed(chunk)


async def exchange(
    transport: trio.abc.Stream, scenario: Scenario, *, answer_within: float = 2.0
) -> Verdict:
    """Write ``scenario`` (and the probes) on ``transport``; judge what comes back.

    ``answer_within``: seconds the server has to settle the expectation before it
    counts as not answering. Does not close ``transport``.

    Checkpoint: always. On cancellation: whatever was written stays written; no
    verdict.
    """
    plan = _Plan.of(scenario)
    seen = _Seen()

    async def writer() -> None:
        # A server that closed first: the reader sees the end.
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await transport.send_all(plan.out)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(writer)
        # Without probes there is nothing to wait for but an ending: a short look.
        with trio.move_on_after(answer_within if plan.probing else GRACE) as scope:
            while not plan.settled(seen):
                await _read_some(transport, seen)
        timed_out = scope.cancelled_caught and plan.probing
        if not timed_out and plan.expect.kind in ("connection-error", "stream-error"):
            with trio.move_on_after(GRACE):
                while not seen.ended:
                    await _read_some(transport, seen)
        nursery.cancel_scope.cancel()
    received = tuple(str(f) for f in seen.frames) + (("<connection closed>",) if seen.eof else ())
    ok, reason = _judge(_Outcome(plan, seen, timed_out=timed_out, timeout=answer_within))
    return Verdict(ok, reason, received)


@dataclass(frozen=True, slots=True)
class _Outcome:
    """What :func:`exchange` wrote and saw, for :func:`_judge`."""

    plan: _Plan
    seen: _Seen
    #: The server settled nothing within ``timeout`` seconds while probes were out.
    timed_out: bool
    timeout: float

    @property
    def after(self) -> str:
        """What the server did after a frame it should have ended on."""
        if PROBE_PING in self.seen.pings:
            return "answered the probe PING after it without a GOAWAY"
        return f"sent no GOAWAY and did not close within {self.timeout} s"


# One judge per expectation kind (Expect's docstring): ``(ok, reason)``.


def _judge_connection_error(o: _Outcome) -> tuple[bool, str]:
    if o.seen.ended:
        return True, "connection error"
    return False, f"expected a connection error (GOAWAY); the server {o.after}"


def _judge_stream_error(o: _Outcome) -> tuple[bool, str]:
    sid = o.plan.expect.stream_id
    if o.seen.ended or sid in o.seen.resets:
        return True, "stream or connection error"
    return False, f"expected RST_STREAM on stream {sid} or GOAWAY; the server {o.after}"


def _judge_ping_ack(o: _Outcome) -> tuple[bool, str]:
    opaque = o.plan.expect.opaque
    if opaque in o.seen.pings or o.seen.ended:
        return True, "PING acknowledged"
    return (
        False,
        f"expected a PING ACK with opaque data {opaque.hex()}; none came within {o.timeout} s",
    )


def _judge_answered_stream(o: _Outcome, sid: int) -> str | None:
    """Why stream ``sid``'s well-formed request was not answered, or None if it was."""
    code = o.seen.resets.get(sid)
    if code is not None and code not in (0x0, 0x7):
        return f"well-formed request on stream {sid} was reset with {error_name(code)}"
    if sid not in o.seen.answered and code is None and not o.seen.ended:
        return f"no response to the well-formed request on stream {sid} within {o.timeout} s"
    return None


def _judge_answered(o: _Outcome) -> tuple[bool, str]:
    seen = o.seen
    if seen.goaway not in (None, 0):
        return False, f"a well-formed exchange got GOAWAY({error_name(seen.goaway)})"
    for sid in o.plan.expect.streams:
        why = _judge_answered_stream(o, sid)
        if why is not None:
            return False, why
    if o.timed_out and not seen.ended:
        return False, f"the server stopped answering (no probe answer within {o.timeout} s)"
    return True, "answered"


def _judge_alive(o: _Outcome) -> tuple[bool, str]:
    if o.seen.ended or not o.plan.probing:
        return True, "alive or ended"
    if PROBE_PING not in o.seen.pings:
        return (
            False,
            f"the server stopped answering: no PING ACK and no GOAWAY within {o.timeout} s",
        )
    if not o.plan.probe_answered(o.seen):
        return False, (
            "the server stopped serving new streams: no response to a GET on stream"
            f" {o.plan.probe_sid} within {o.timeout} s"
        )
    return True, "alive"


_JUDGES: dict[ExpectKind, Callable[[_Outcome], tuple[bool, str]]] = {
    "connection-error": _judge_connection_error,
    "stream-error": _judge_stream_error,
    "ping-ack": _judge_ping_ack,
    "answered": _judge_answered,
    "alive": _judge_alive,
}


def _judge(outcome: _Outcome) -> tuple[bool, str]:
    """Whether the server did what the scenario's expectation says, and why (not)."""
    return _JUDGES[outcome.plan.expect.kind](outcome)


#### The properties

_SETTINGS = WireFrame(FrameType.SETTINGS, 0, 0)


@st.composite
def _opening(draw: st.DrawFn) -> list[Chunk]:
    """The preface and a valid SETTINGS (maybe with settings), maybe its ack."""
    payload = b""
    if draw(st.booleans()):
        payload = struct.pack(">HL", 0x4, draw(st.sampled_from([65_535, 1 << 20])))
    chunks: list[Chunk] = [PREFACE, WireFrame(FrameType.SETTINGS, 0, 0, payload)]
    if draw(st.booleans()):
        chunks.append(WireFrame(FrameType.SETTINGS, 0x1, 0))
    return chunks


@st.composite
def _with_requests(draw: st.DrawFn, *, max_requests: int = 2) -> tuple[list[Chunk], int]:
    """The opening, then 0..n whole requests (odd ids from 1); returns them and the next id."""
    chunks = draw(_opening())
    next_id = 1
    for _ in range(draw(st.integers(0, max_requests))):
        chunks.extend(draw(request_frames(next_id)))
        next_id += 2
    return chunks, next_id


def _open_request(stream_id: int) -> WireFrame:
    """A POST whose body has not come yet: the stream stays open (RFC 9113 §5.1)."""
    block = encode_header_block(
        [(":method", "POST"), (":scheme", "http"), (":authority", "localhost"), (":path", "/")]
    )
    return WireFrame(FrameType.HEADERS, 0x4, stream_id, block)


@st.composite
def _preface(draw: st.DrawFn) -> Scenario:
    first = draw(
        st.one_of(
            st.builds(
                lambda p: WireFrame(FrameType.PING, 0, 0, p), st.binary(min_size=8, max_size=8)
            ),
            st.builds(
                lambda i: WireFrame(FrameType.WINDOW_UPDATE, 0, 0, struct.pack(">L", i)),
                st.integers(1, 65_535),
            ),
            request_frames(1).map(lambda fs: fs[0]),
        )
    )
    chunks: list[Chunk] = [PREFACE, first]
    if draw(st.booleans()):
        chunks.append(_SETTINGS)
    return Scenario(tuple(chunks), Expect("connection-error"))


@st.composite
def _idle_stream(draw: st.DrawFn) -> Scenario:
    chunks, next_id = draw(_with_requests())
    sid = next_id + 2 * draw(st.integers(0, 3))
    frame_type = draw(
        st.sampled_from(
            [FrameType.DATA, FrameType.RST_STREAM, FrameType.WINDOW_UPDATE, FrameType.CONTINUATION]
        )
    )
    payload = {
        FrameType.DATA: draw(st.binary(max_size=16)),
        FrameType.RST_STREAM: struct.pack(">L", 8),
        FrameType.WINDOW_UPDATE: struct.pack(">L", 1024),
        FrameType.CONTINUATION: encode_header_block([(":path", "/")]),
    }[frame_type]
    flags = 0x4 if frame_type == FrameType.CONTINUATION else draw(st.sampled_from([0, 1]))
    chunks.append(WireFrame(frame_type, flags, sid, payload))
    return Scenario(tuple(chunks), Expect("connection-error"))


@st.composite
def _lower_stream_data(draw: st.DrawFn) -> Scenario:
    chunks = draw(_opening())
    high = draw(st.sampled_from([3, 5, 7, 9]))
    chunks.extend(draw(request_frames(high)))
    low = draw(st.sampled_from([s for s in (1, 3, 5, 7) if s < high]))
    chunks.append(
        WireFrame(FrameType.DATA, draw(st.sampled_from([0, 1])), low, draw(st.binary(max_size=16)))
    )
    return Scenario(tuple(chunks), Expect("stream-error", stream_id=low))


@st.composite
def _stream_id_order(draw: st.DrawFn) -> Scenario:
    chunks = draw(_opening())
    if draw(st.booleans()):
        high = draw(st.sampled_from([3, 5, 7]))
        chunks.extend(draw(request_frames(high)))
        sid = draw(st.sampled_from([s for s in (1, 3, 5) if s < high]))
    else:
        sid = draw(st.sampled_from([2, 4, 6]))
    chunks.extend(draw(request_frames(sid)))
    return Scenario(tuple(chunks), Expect("connection-error"))


@st.composite
def _wrong_stream_zero(draw: st.DrawFn) -> Scenario:
    chunks, _ = draw(_with_requests(max_requests=1))
    kind = draw(
        st.sampled_from(
            [
                "DATA",
                "HEADERS",
                "RST_STREAM",
                "PRIORITY",
                "CONTINUATION",
                "SETTINGS",
                "PING",
                "GOAWAY",
            ]
        )
    )
    sid = draw(st.sampled_from([1, 3, 5]))
    frame = {
        "DATA": WireFrame(FrameType.DATA, 0x1, 0, b"x"),
        "HEADERS": WireFrame(FrameType.HEADERS, 0x5, 0, encode_header_block(PROBE_HEADERS)),
        "RST_STREAM": WireFrame(FrameType.RST_STREAM, 0, 0, struct.pack(">L", 8)),
        "PRIORITY": WireFrame(FrameType.PRIORITY, 0, 0, struct.pack(">LB", 1, 16)),
        "CONTINUATION": WireFrame(
            FrameType.CONTINUATION, 0x4, 0, encode_header_block(PROBE_HEADERS)
        ),
        "SETTINGS": WireFrame(FrameType.SETTINGS, 0, sid, b""),
        "PING": WireFrame(FrameType.PING, 0, sid, b"12345678"),
        "GOAWAY": WireFrame(FrameType.GOAWAY, 0, sid, struct.pack(">LL", 0, 0)),
    }[kind]
    chunks.append(frame)
    return Scenario(tuple(chunks), Expect("connection-error"))


@st.composite
def _frame_size(draw: st.DrawFn) -> Scenario:
    chunks, _ = draw(_with_requests(max_requests=1))
    kind = draw(
        st.sampled_from(["PING", "SETTINGS", "SETTINGS_ACK", "WINDOW_UPDATE", "RST_STREAM"])
    )
    if kind == "PING":
        frame = WireFrame(
            FrameType.PING, 0, 0, draw(st.binary(max_size=16).filter(lambda b: len(b) != 8))
        )
    elif kind == "SETTINGS":
        frame = WireFrame(
            FrameType.SETTINGS,
            0,
            0,
            draw(st.binary(min_size=1, max_size=13).filter(lambda b: len(b) % 6)),
        )
    elif kind == "SETTINGS_ACK":
        frame = WireFrame(FrameType.SETTINGS, 0x1, 0, draw(st.binary(min_size=1, max_size=12)))
    elif kind == "WINDOW_UPDATE":
        size = draw(st.sampled_from([0, 3, 5, 8]))
        frame = WireFrame(
            FrameType.WINDOW_UPDATE, 0, 0, b"\0\0\0\1\0\0\0\0"[:size].ljust(size, b"\1")
        )
    else:
        chunks.append(_open_request(101))
        frame = WireFrame(
            FrameType.RST_STREAM, 0, 101, b"\0\0\0\x08\0"[: draw(st.sampled_from([0, 3, 5]))]
        )
    chunks.append(frame)
    return Scenario(tuple(chunks), Expect("connection-error"))


@st.composite
def _settings_values(draw: st.DrawFn) -> Scenario:
    chunks: list[Chunk] = [PREFACE, _SETTINGS]
    setting, value = draw(
        st.one_of(
            st.tuples(st.just(0x2), st.integers(2, 0xFFFFFFFF)),
            st.tuples(st.just(0x4), st.integers(2**31, 0xFFFFFFFF)),
            st.tuples(
                st.just(0x5), st.one_of(st.integers(0, 16_383), st.integers(2**24, 0xFFFFFFFF))
            ),
        )
    )
    chunks.append(WireFrame(FrameType.SETTINGS, 0, 0, struct.pack(">HL", setting, value)))
    return Scenario(tuple(chunks), Expect("connection-error"))


@st.composite
def _window_update(draw: st.DrawFn) -> Scenario:
    chunks, _ = draw(_with_requests(max_requests=1))
    kind = draw(
        st.sampled_from(
            ["zero-connection", "zero-stream", "overflow-connection", "overflow-stream"]
        )
    )
    if kind == "zero-connection":
        chunks.append(WireFrame(FrameType.WINDOW_UPDATE, 0, 0, struct.pack(">L", 0)))
        return Scenario(tuple(chunks), Expect("connection-error"))
    if kind == "overflow-connection":
        chunks.append(WireFrame(FrameType.WINDOW_UPDATE, 0, 0, struct.pack(">L", MAX_31_BIT)))
        return Scenario(tuple(chunks), Expect("connection-error"))
    chunks.append(_open_request(101))
    increment = 0 if kind == "zero-stream" else MAX_31_BIT
    chunks.append(WireFrame(FrameType.WINDOW_UPDATE, 0, 101, struct.pack(">L", increment)))
    return Scenario(tuple(chunks), Expect("stream-error", stream_id=101))


@st.composite
def _continuation(draw: st.DrawFn) -> Scenario:
    chunks, _ = draw(_with_requests(max_requests=1))
    block = encode_header_block(draw(header_blocks(methods=("GET",))))
    kind = draw(st.sampled_from(["interleaved", "other-stream", "orphan"]))
    if kind == "orphan":
        chunks.append(WireFrame(FrameType.CONTINUATION, 0x4, 101, block))
        return Scenario(tuple(chunks), Expect("connection-error"))
    cut = draw(st.integers(0, len(block)))
    chunks.append(WireFrame(FrameType.HEADERS, 0x1, 101, block[:cut]))
    if kind == "interleaved":
        chunks.append(
            draw(
                st.sampled_from(
                    [
                        WireFrame(FrameType.PING, 0, 0, b"abcdefgh"),
                        WireFrame(FrameType.DATA, 0, 101, b"x"),
                        WireFrame(FrameType.PRIORITY, 0, 103, struct.pack(">LB", 0, 16)),
                        WireFrame(FrameType.HEADERS, 0x5, 103, encode_header_block(PROBE_HEADERS)),
                    ]
                )
            )
        )
    chunks.append(
        WireFrame(FrameType.CONTINUATION, 0x4, 103 if kind == "other-stream" else 101, block[cut:])
    )
    return Scenario(tuple(chunks), Expect("connection-error"))


def _hpack_block(bad: bytes, before: bool) -> bytes:
    ok = encode_header_block(PROBE_HEADERS)
    return bad + ok if before else ok + bad


@st.composite
def _hpack(draw: st.DrawFn) -> Scenario:
    chunks, _ = draw(_with_requests(max_requests=1))
    kind = draw(
        st.sampled_from(
            ["index-zero", "index-beyond", "size-update-too-big", "size-update-late", "huffman-eos"]
        )
    )
    if kind == "index-zero":  # RFC 7541 §6.1: index 0 is a decoding error
        block = _hpack_block(b"\x80", draw(st.booleans()))
    elif kind == "index-beyond":  # §2.3.3: an index beyond both tables is a decoding error
        block = _hpack_block(bytes([0x80 | draw(st.integers(62, 127))]), draw(st.booleans()))
    elif kind == "size-update-too-big":  # §6.3: above SETTINGS_HEADER_TABLE_SIZE (4096)
        block = _hpack_block(b"\x3f\xe2\x1f", True)  # 4097 + ... = 4099
    elif kind == "size-update-late":  # §4.2: a size update after the first field
        block = _hpack_block(b"\x20", False)
    else:  # §5.2: a Huffman string containing EOS is a decoding error
        block = encode_header_block(PROBE_HEADERS) + b"\x00\x85\xff\xff\xff\xff\xff\x01a"
    chunks.append(WireFrame(FrameType.HEADERS, 0x5, 101, block))
    return Scenario(tuple(chunks), Expect("connection-error"))


@st.composite
def _ping(draw: st.DrawFn) -> Scenario:
    chunks, _ = draw(_with_requests())
    opaque = draw(st.binary(min_size=8, max_size=8).filter(lambda b: b != PROBE_PING))
    chunks.append(WireFrame(FrameType.PING, 0, 0, opaque))
    return Scenario(tuple(chunks), Expect("ping-ack", opaque=opaque))


@st.composite
def _half_closed(draw: st.DrawFn) -> Scenario:
    chunks = draw(_opening())
    sid = draw(st.sampled_from([1, 3, 5]))
    chunks.extend(draw(request_frames(sid)))
    chunks.append(
        WireFrame(
            FrameType.DATA,
            draw(st.sampled_from([0, 1])),
            sid,
            draw(st.binary(min_size=1, max_size=16)),
        )
    )
    return Scenario(tuple(chunks), Expect("stream-error", stream_id=sid))


@st.composite
def _malformed(draw: st.DrawFn) -> Scenario:
    chunks, _ = draw(_with_requests(max_requests=1))
    headers = draw(header_blocks(methods=("GET",)))
    kind = draw(
        st.sampled_from(
            ["uppercase", "connection", "no-path", "pseudo-after", "te", "unknown-pseudo"]
        )
    )
    if kind == "uppercase":  # RFC 9113 §8.2.1
        headers.append((b"X-Upper", b"1"))
    elif kind == "connection":  # §8.2.2
        headers.append(
            draw(
                st.sampled_from(
                    [
                        (b"connection", b"keep-alive"),
                        (b"keep-alive", b"5"),
                        (b"transfer-encoding", b"chunked"),
                        (b"upgrade", b"h2c"),
                    ]
                )
            )
        )
    elif kind == "no-path":  # §8.3.1
        headers = [h for h in headers if h[0] != b":path"]
    elif kind == "pseudo-after":  # §8.3
        headers.insert(len(headers), (b":path", b"/again"))
        headers.insert(4, (b"x-a", b"b"))
    elif kind == "te":  # §8.2.2
        headers.append((b"te", b"gzip"))
    else:  # §8.3
        headers.insert(0, (b":bogus", b"1"))
    chunks.append(WireFrame(FrameType.HEADERS, 0x5, 101, encode_header_block(headers)))
    return Scenario(tuple(chunks), Expect("stream-error", stream_id=101))


@st.composite
def _exchanges(draw: st.DrawFn) -> Scenario:
    chunks = draw(_opening())
    messages = [draw(request_frames(1 + 2 * i)) for i in range(draw(st.integers(1, 4)))]
    # Interleave whole header blocks and DATA frames of different streams (a header
    # block's HEADERS and CONTINUATIONs stay together, RFC 9113 §4.3).
    units: list[list[list[WireFrame]]] = []
    for frames in messages:
        i = next(
            (
                k
                for k, f in enumerate(frames)
                if f.flags & 0x4 and f.type in (FrameType.HEADERS, FrameType.CONTINUATION)
            ),
            0,
        )
        units.append([frames[: i + 1]] + [[f] for f in frames[i + 1 :]])
    opened = 0  # header blocks go out in stream id order (RFC 9113 §5.1.1)
    while any(units):
        ready = [n for n, u in enumerate(units) if u and (n < opened or n == opened)]
        k = draw(st.sampled_from(ready))
        if k == opened:
            opened += 1
        chunks.extend(units[k].pop(0))
    streams = tuple(1 + 2 * i for i in range(len(messages)))
    return Scenario(tuple(chunks), Expect("answered", streams=streams))


_FUZZ = frame_sequences(side="client").map(lambda cs: Scenario(tuple(cs), Expect("alive")))

#: Every property ``trio-h2t check`` tries, in order.
PROPERTIES: tuple[Property, ...] = (
    Property(
        "exchanges",
        "RFC 9113 §8.1, §5.4.2 (liveness)",
        "well-formed requests, interleaved, each get a response",
        _exchanges(),
    ),
    Property(
        "ping",
        "RFC 9113 §6.7",
        "a PING MUST be answered by a PING ACK with the same opaque data",
        _ping(),
    ),
    Property(
        "preface",
        "RFC 9113 §3.4",
        "the client preface MUST be followed by SETTINGS; anything else is a connection error "
        "(PROTOCOL_ERROR)",
        _preface(),
    ),
    Property(
        "idle-stream",
        "RFC 9113 §5.1",
        "a frame other than HEADERS or PRIORITY on an idle stream is a connection error "
        "(PROTOCOL_ERROR)",
        _idle_stream(),
    ),
    Property(
        "lower-stream-data",
        "RFC 9113 §5.1.1, §6.1",
        "DATA on a stream id below one already used (implicitly closed) is a stream error "
        "(STREAM_CLOSED) or connection error",
        _lower_stream_data(),
    ),
    Property(
        "stream-id-order",
        "RFC 9113 §5.1.1",
        "a new stream id MUST be odd and above every id the client used; else a connection error "
        "(PROTOCOL_ERROR)",
        _stream_id_order(),
    ),
    Property(
        "stream-zero",
        "RFC 9113 §6.1-§6.10",
        "stream frames on stream 0, and connection frames on a stream, are connection errors "
        "(PROTOCOL_ERROR)",
        _wrong_stream_zero(),
    ),
    Property(
        "frame-size",
        "RFC 9113 §4.2, §6.4, §6.5, §6.7, §6.9",
        "a frame of the wrong length is a connection error (FRAME_SIZE_ERROR)",
        _frame_size(),
    ),
    Property(
        "settings-values",
        "RFC 9113 §6.5.2",
        "ENABLE_PUSH other than 0/1, INITIAL_WINDOW_SIZE above 2^31-1 or MAX_FRAME_SIZE out of "
        "range is a connection error",
        _settings_values(),
    ),
    Property(
        "window-update",
        "RFC 9113 §6.9, §6.9.1",
        "a zero increment is an error (of the stream or connection it names); a window above "
        "2^31-1 is a FLOW_CONTROL_ERROR",
        _window_update(),
    ),
    Property(
        "continuation",
        "RFC 9113 §6.10, §4.3",
        "a header block MUST be contiguous: any other frame before END_HEADERS is a connection "
        "error (PROTOCOL_ERROR)",
        _continuation(),
    ),
    Property(
        "hpack",
        "RFC 7541 §2.3.3, §4.2, §5.2, §6.1, §6.3; RFC 9113 §4.3",
        "a header block that fails to decode is a connection error (COMPRESSION_ERROR)",
        _hpack(),
    ),
    Property(
        "half-closed",
        "RFC 9113 §5.1",
        "DATA after END_STREAM is a stream error (STREAM_CLOSED) or connection error",
        _half_closed(),
    ),
    Property(
        "malformed-request",
        "RFC 9113 §8.1.1, §8.2, §8.3",
        "a malformed request is a stream error (PROTOCOL_ERROR)",
        _malformed(),
    ),
    Property(
        "fuzz",
        "RFC 9113 §5.4 (liveness)",
        "after any frame sequence the server answers a PING and a new request, or ends the "
        "connection",
        _FUZZ,
    ),
)


#### The runner

Handler = Callable[[H2Stream], Awaitable[None]]
Target = Callable[[], AbstractAsyncContextManager[trio.abc.Stream]]


def tcp_target(host: str, port: int, *, tls: bool = False, connect_timeout: float = 5.0) -> Target:
    """A target opening a new TCP connection (TLS with ALPN ``h2`` if ``tls``).

    A target is a callable that returns an async context manager yielding a
    ``trio.abc.Stream``: ``play`` opens one connection per scenario it plays.

    With ``tls`` the server's certificate is not verified: this is a test of a server
    the user runs, often with a self-signed certificate.
    """

    @asynccontextmanager
    async def connect() -> AsyncIterator[trio.abc.Stream]:
        with trio.fail_after(connect_timeout):
            stream: trio.abc.Stream = await trio.open_tcp_stream(host, port)
            if tls:
                import ssl

                context = ssl.create_default_context()
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
                context.set_alpn_protocols(["h2"])
                ssl_stream = trio.SSLStream(stream, context, server_hostname=host)
                await ssl_stream.do_handshake()
                stream = ssl_stream
        try:
            yield stream
        finally:
            with trio.move_on_after(1) as scope:
                scope.shield = True
                await trio.aclose_forcefully(stream)

    return connect


def memory_target(
    handler: Handler, *, config: TransportConfig | None = None, timeout: float = 10.0
) -> Target:
    """A target serving each connection with ``trio_h2t.serve_connection``.

    In memory (``trio.testing.memory_stream_pair``). Leaving the context closes the
    client's end; ``serve_connection`` must then return within ``timeout`` seconds,
    or ``trio.TooSlowError`` is raised (a connection that does not end is a hang).
    """

    @asynccontextmanager
    async def connect() -> AsyncIterator[trio.abc.Stream]:
        client, server = trio.testing.memory_stream_pair()
        done = trio.Event()

        async def serve() -> None:
            await serve_connection(server, handler, config=config)
            done.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve)
            try:
                yield client
            finally:
                await client.aclose()
                with trio.fail_after(timeout):
                    await done.wait()

    return connect


def play(target: Target, scenario: Scenario, *, timeout: float) -> Verdict:
    """One scenario over a new connection from ``target``, in its own ``trio.run``."""

    async def main() -> Verdict:
        async with target() as stream:
            return await exchange(stream, scenario, answer_within=timeout)

    return trio.run(main)


class _Broken(Exception):
    """Raised inside Hypothesis's test function when a verdict is not ok."""


def run_check(
    target: Target,
    *,
    properties: Sequence[Property] = PROPERTIES,
    max_examples: int = 50,
    seconds: float = 60.0,
    database: str | Path | None = None,
    timeout: float = 2.0,
    progress: Callable[[str], None] = lambda line: None,
) -> list[Finding]:
    """Run each property against ``target``; return what the server broke (shrunk).

    Synchronous: each example is one connection in its own ``trio.run``, one at a
    time. Each property runs up to ``max_examples`` examples; ``seconds`` bounds the
    whole run (shared among the properties not yet run; shrinking a finding may run
    over it by a little). ``database`` is a directory for Hypothesis's example
    database: failures found there are tried first. ``progress`` gets one line per
    property.
    """
    findings: list[Finding] = []
    start = time.monotonic()
    db = DirectoryBasedExampleDatabase(str(database)) if database is not None else None
    for index, prop in enumerate(properties):
        remaining = seconds - (time.monotonic() - start)
        if remaining <= 0:
            progress(f"{prop.name}: not run (time budget spent)")
            continue
        stop_at = time.monotonic() + remaining / (len(properties) - index)
        finding, runs = _run_property(
            target, prop, max_examples=max_examples, stop_at=stop_at, db=db, timeout=timeout
        )
        if finding is None:
            progress(f"{prop.name}: ok ({runs} connections)")
        else:
            findings.append(finding)
            progress(f"{prop.name}: BROKEN ({prop.section}) after {runs} connections")
    return findings


def _run_property(
    target: Target,
    prop: Property,
    *,
    max_examples: int,
    stop_at: float,
    db: DirectoryBasedExampleDatabase | None,
    timeout: float,
) -> tuple[Finding | None, int]:
    """One property under ``@given``: its shrunk finding (or None) and connections made."""
    verdicts: dict[bytes, Verdict] = {}
    failing: list[tuple[Scenario, Verdict]] = []
    runs = 0

    def test(scenario: Scenario) -> None:
        nonlocal runs
        key = repr(scenario.expect).encode() + scenario.data
        verdict = verdicts.get(key)
        if verdict is None:
            if not failing and time.monotonic() > stop_at:
                return  # out of time: the remaining examples pass at once
            runs += 1
            verdict = play(target, scenario, timeout=timeout)
            verdicts[key] = verdict
        if not verdict.ok:
            failing.append((scenario, verdict))
            raise _Broken(verdict.reason)

    wrapped = settings(
        max_examples=max_examples,
        database=db,
        deadline=None,
        derandomize=False,
        verbosity=Verbosity.quiet,
        suppress_health_check=list(HealthCheck),
        phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink),
        print_blob=False,
    )(given(prop.scenarios)(test))
    # One database key per property (the test function is the same for all).
    wrapped.hypothesis.inner_test._hypothesis_internal_add_digest = prop.name.encode()  # type: ignore[attr-defined]
    try:
        wrapped()
    except _Broken:
        # Hypothesis replays the shrunk example last: the last failure is the smallest.
        scenario, verdict = failing[-1]
        return Finding(prop, scenario, verdict), runs
    return None, runs


def report(finding: Finding, *, replay: str) -> list[str]:
    """A finding as lines of text: the rule, what happened, the bytes, the frames."""
    prop = finding.property
    lines = [
        f"BROKEN {prop.name} ({prop.section}): {prop.rule}",
        f"  what happened: {finding.verdict.reason}",
        f"  sent ({len(finding.scenario.data)} bytes, hex): {finding.scenario.data.hex()}",
        "  sent, as frames:",
    ]
    lines += [f"    {line}" for line in describe(finding.scenario.data)]
    lines.append("  received:")
    lines += [f"    {line}" for line in finding.verdict.received] or ["    (nothing)"]
    lines.append(f"  replay: {replay}")
    return lines


def load_replay(text: str) -> tuple[str | None, Scenario]:
    """A replay argument (a JSON file written by ``check``, or hex) as a scenario.

    Hex alone replays with the ``alive`` expectation.
    """
    path = Path(text)
    if path.is_file():
        obj = json.loads(path.read_text())
        data = bytes.fromhex(obj["hex"])
        return str(obj.get("property")), Scenario((data,), Expect.from_json(obj.get("expect", {})))
    return None, Scenario((bytes.fromhex(text),), Expect("alive"))


#### The command line (``trio-h2t check``)

NOTICE = (
    "trio-h2t check: NOTE: this sends malformed and abusive HTTP/2 traffic on purpose."
    " Point it only at servers you run or are allowed to test."
)


def main_check(
    url: str,
    *,
    tls: bool,
    max_examples: int,
    seconds: float,
    database: str,
    timeout: float,
    only: Sequence[str],
    replay: str | None,
    out: TextIO,
    err: TextIO,
) -> int:
    """``trio-h2t check``: returns the exit status (0 clean, 1 findings; raises ValueError
    for a bad argument)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http:// or https:// URL: {url!r}")
    tls = tls or parts.scheme == "https"
    port = parts.port or (443 if tls else 80)
    target = tcp_target(parts.hostname, port, tls=tls)
    print(NOTICE, file=err)
    command = f"trio-h2t check {url}" + (" --tls" if tls and parts.scheme != "https" else "")
    if replay is not None:
        name, scenario = load_replay(replay)
        print(
            f"replaying {len(scenario.data)} bytes ({name or 'liveness'}) against {url}", file=out
        )
        print("sent:", file=out)
        for line in describe(scenario.data):
            print(f"  {line}", file=out)
        verdict = play(target, scenario, timeout=timeout)
        print("received:", file=out)
        for line in verdict.received or ("(nothing)",):
            print(f"  {line}", file=out)
        print(("ok: " if verdict.ok else "BROKEN: ") + verdict.reason, file=out)
        return 0 if verdict.ok else 1
    by_name = {p.name: p for p in PROPERTIES}
    unknown = [n for n in only if n not in by_name]
    if unknown:
        raise ValueError(f"unknown --property {unknown[0]!r}; one of: {', '.join(by_name)}")
    chosen = [by_name[n] for n in only] if only else list(PROPERTIES)
    print(
        f"checking {url} ({'h2 over TLS' if tls else 'h2c'}): {len(chosen)} properties,"
        f" up to {max_examples} examples each, {seconds:g} s, one connection at a time",
        file=out,
    )
    findings = run_check(
        target,
        properties=chosen,
        max_examples=max_examples,
        seconds=seconds,
        database=Path(database) / "examples",
        timeout=timeout,
        progress=lambda line: print(f"  {line}", file=out, flush=True),
    )
    saved = Path(database) / "findings"
    for finding in findings:
        saved.mkdir(parents=True, exist_ok=True)
        path = saved / f"{finding.property.name}.json"
        path.write_text(json.dumps(finding.to_json(), indent=1) + "\n")
        print(file=out)
        for line in report(finding, replay=f"{command} --replay {path}"):
            print(line, file=out)
    print(file=out)
    print(
        f"{len(findings)} propert{'y' if len(findings) == 1 else 'ies'} broken"
        if findings
        else "no property broken",
        file=out,
    )
    return 1 if findings else 0
