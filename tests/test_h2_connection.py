"""The whole connection, differentially: stock h2 is the oracle of our two layers.

Hypothesis writes whole-connection scripts for either role: the peer's preface and
SETTINGS (random values, some invalid; INITIAL_WINDOW_SIZE, MAX_FRAME_SIZE and
HEADER_TABLE_SIZE changed mid-connection), HEADERS (CONTINUATION, padding, the
priority flag, END_STREAM or not; HPACK-encoded by a real encoder; valid request,
response, informational and trailer lists and malformed ones), DATA (padded,
END_STREAM, on open, half-closed, closed, idle and reset streams), RST_STREAM,
WINDOW_UPDATE (0, overflowing, the reserved bit), PING (and its ACK), PRIORITY,
GOAWAY, PUSH_PROMISE, CONTINUATION out of place, unknown types and frames too
large, interleaved with our side's calls (send_headers, send_data within the
windows, reset_stream, increment_flow_control_window, acknowledge_received_data,
update_settings, ping). The peer's bytes are cut at random points.

The same script runs on three machines: stock ``h2.connection.H2Connection``
(configured as ``make_h2_state`` configures ours), the correctness layer alone
(``speed_layer=False``) and both layers. After every piece of bytes and every call
each says what it did: its events, its error (type and code), the connection's and
every stream's state and windows (both directions), settings, and the bytes it
would send.

- The speed layer must say exactly what the correctness layer says (every field of
  every event, byte for byte).
- Stock h2 must say the same, except for the differences ``_h2fixes.py``'s
  docstring documents, one entry per patch number in ``PATCHES`` below: either a
  normalisation applied to every step (what the patch makes invisible), or a rule
  that recognises the step where the patch makes the two part, and cuts the
  script there for stock h2 (the layers go on together). A difference no entry
  explains fails the test.

A second family of scripts keeps the connection alive (three open streams, DATA and
window updates both ways, settings that move the windows), where the first family's
mistakes end most connections early; and ``EXAMPLES`` holds one hand-written script
per cut rule, which that rule must be the one to cut. The both-layers machine reads
the bytes into its frame buffer (``read_target``, as the reader does), the others
take them through ``receive_data``.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import h2.connection
import h2.events
import h2.exceptions
import h2.settings
import hpack
import pytest
from h2.errors import ErrorCodes
from h2.settings import SettingCodes
from hypothesis import given, settings, strategies as st

from trio_h2t import _h2fixes
from trio_h2t._h2fast import FastConnection
from trio_h2t._h2fixes import FixedConnection
from trio_h2t._h2state import h2_configuration, make_h2_state

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
# Frame types (RFC 9113 §6).
DATA, HEADERS, PRIORITY, RST, SETTINGS, PUSH, PING, GOAWAY, WINDOW_UPDATE, CONT = range(10)
#: The stream ids scripts use (0 and even ones too, as mistakes).
STREAM_IDS = (1, 3, 5, 7)
ANY_IDS = (0, 1, 2, 3, 4, 5, 7, 9)
SETTING_CODES = [int(c) for c in SettingCodes]


def raw(kind: int, flags: int, sid: int, payload: bytes) -> bytes:
    """One frame as bytes, whatever it says (hyperframe refuses some we need)."""
    n = len(payload)
    return struct.pack(">HBBBL", n >> 8, n & 0xFF, kind, flags, sid) + payload


def settings_payload(values: list[tuple[int, int]]) -> bytes:
    return b"".join(struct.pack(">HL", code, value) for code, value in values)


# ------------------------------------------------------------------ the scripts

_setting_value = st.one_of(
    st.integers(0, 70_000),
    st.sampled_from((16_384, 16_385, 2**24 - 1, 2**24, 2**31 - 1, 2**31, 2**32 - 1)),
)
_setting = st.tuples(
    st.sampled_from((*SETTING_CODES, 0x99)),  # 0x99: unknown, ignored
    _setting_value,
)
#: The peer's settings: mostly valid ones, sometimes anything.
_peer_settings = st.lists(
    st.one_of(
        st.tuples(st.just(int(SettingCodes.INITIAL_WINDOW_SIZE)), st.integers(0, 100_000)),
        st.tuples(st.just(int(SettingCodes.MAX_FRAME_SIZE)), st.integers(16_384, 40_000)),
        st.tuples(st.just(int(SettingCodes.HEADER_TABLE_SIZE)), st.integers(0, 8_192)),
        st.tuples(st.just(int(SettingCodes.MAX_CONCURRENT_STREAMS)), st.integers(0, 10)),
        _setting,
    ),
    max_size=4,
)
#: Mostly the streams the prologue opens (1, 3, 5) or the next one (7).
_sid = st.one_of(*[st.sampled_from(STREAM_IDS)] * 4, st.sampled_from(ANY_IDS))
_code = st.sampled_from((0, 1, 2, 7, 8, 11, 0x77))

_COMMON = [
    st.tuples(st.just("settings"), _peer_settings),
    st.tuples(st.just("settings_ack"), st.booleans()),  # with a payload
    st.tuples(
        st.just("headers"),
        _sid,
        st.sampled_from(("head", "head", "head", "trailers", "info", "bad", "empty", "junk")),
        st.booleans(),  # END_STREAM
        st.none() | st.integers(0, 20),  # padding
        st.booleans(),  # the priority flag
        st.integers(0, 2),  # CONTINUATION frames
        st.none() | st.integers(0, 40),  # a content-length
        st.integers(0, 3),  # padding shortfall (0: honest)
    ),
    st.tuples(
        st.just("data"),
        _sid,
        st.integers(0, 3_000),
        st.none() | st.integers(0, 255),
        st.booleans(),
    ),
    st.tuples(st.just("rst"), _sid, _code),
    st.tuples(
        st.just("window_update"),
        st.sampled_from((0, 0, *STREAM_IDS, 9)),
        st.sampled_from((0, 1, 100, 65_535, 2**31 - 1)) | st.integers(1, 100_000),
        st.booleans(),  # the reserved bit
    ),
    st.tuples(st.just("ping"), st.booleans(), st.integers(0, 1)),  # ACK; 1: wrong length
]
#: Frames that end most connections (or do nothing): rarer.
_RARE = [
    st.tuples(st.just("priority"), _sid, st.sampled_from((0, 1, 3, 5)), st.booleans()),
    st.tuples(st.just("goaway"), st.sampled_from((0, 1, 3, 2**31 - 1)), _code),
    st.tuples(st.just("push_promise"), _sid, st.sampled_from((2, 4))),
    st.tuples(st.just("continuation"), _sid),
    st.tuples(st.just("unknown"), st.sampled_from((0x10, 0x20, 0xFF)), _sid),
    st.tuples(st.just("too_big"), st.sampled_from((DATA, HEADERS, PING, 0x20)), _sid),
]

_LOCAL = [
    st.tuples(st.just("send_headers"), st.sampled_from(STREAM_IDS), st.booleans()),
    st.tuples(
        st.just("send_data"), st.sampled_from(STREAM_IDS), st.integers(0, 20_000), st.booleans()
    ),
    st.tuples(st.just("reset_stream"), st.sampled_from(STREAM_IDS), _code),
    st.tuples(
        st.just("increment"),
        st.sampled_from((None, *STREAM_IDS)),
        st.sampled_from((0, 1, 2**31 - 1)) | st.integers(1, 100_000),
    ),
    st.tuples(st.just("acknowledge"), st.sampled_from(STREAM_IDS), st.integers(0, 10_000)),
    st.tuples(
        st.just("update_settings"),
        st.lists(
            st.tuples(
                st.just(int(SettingCodes.INITIAL_WINDOW_SIZE)), st.integers(0, 70_000)
            ).filter(lambda s: s[1] >= 1)
            | st.tuples(st.just(int(SettingCodes.MAX_FRAME_SIZE)), st.integers(16_384, 40_000))
            | st.tuples(st.just(int(SettingCodes.HEADER_TABLE_SIZE)), st.integers(0, 8_192)),
            min_size=1,
            max_size=2,
        ),
    ),
    st.tuples(st.just("ping_out")),
]
#: How often each kind comes (``_COMMON``, ``_RARE``, ``_LOCAL`` by index): DATA,
#: HEADERS and the calls that move windows most.
_WEIGHTS = [2, 2, 4, 5, 2, 3, 1] + [1] * 6 + [2, 3, 1, 2, 2, 2, 1]
_op = st.sampled_from(
    [s for s, w in zip(_COMMON + _RARE + _LOCAL, _WEIGHTS, strict=True) for _ in range(w)]
).flatmap(lambda s: s)

_script = st.fixed_dictionaries(
    {
        "first": st.sampled_from(("settings",) * 30 + ("ping", "headers")),
        "settings": _peer_settings,
        "ops": st.lists(_op, min_size=3, max_size=25),
        "cuts": st.lists(st.integers(0, 10**6), max_size=10),
        "prologue": st.integers(0, 10),
        "window": st.sampled_from((65_535, 65_535, 4_000, 1)),
        "header_list": st.sampled_from((65_536, 200)),
    }
)


_open = st.sampled_from((1, 3, 5))
_valid_settings = st.lists(
    st.tuples(st.just(int(SettingCodes.INITIAL_WINDOW_SIZE)), st.integers(0, 100_000))
    | st.tuples(st.just(int(SettingCodes.MAX_FRAME_SIZE)), st.integers(16_384, 40_000))
    | st.tuples(st.just(int(SettingCodes.HEADER_TABLE_SIZE)), st.integers(0, 8_192)),
    max_size=3,
)
#: The flow-control work of a connection that lives long: DATA (mostly without
#: END_STREAM) and window updates both ways, settings that move the windows.
_FLOW = [
    st.tuples(
        st.just("data"),
        _open,
        st.integers(0, 3_000),
        st.none() | st.integers(0, 20),
        st.sampled_from((False,) * 6 + (True,)),
    ),
    st.tuples(
        st.just("window_update"),
        st.sampled_from((0, 1, 3, 5)),
        st.integers(1, 70_000),
        st.just(False),
    ),
    st.tuples(st.just("settings"), _valid_settings),
    st.tuples(st.just("settings_ack"), st.just(False)),
    st.tuples(st.just("ping"), st.booleans(), st.just(0)),
    st.tuples(
        st.just("headers"),
        _open,
        st.just("trailers"),
        st.just(True),
        st.none(),
        st.just(False),
        st.integers(0, 1),
        st.none(),
        st.just(0),
    ),
    st.tuples(
        st.just("send_data"), _open, st.integers(0, 20_000), st.sampled_from((False,) * 6 + (True,))
    ),
    st.tuples(st.just("increment"), st.sampled_from((None, 1, 3, 5)), st.integers(1, 100_000)),
    st.tuples(st.just("acknowledge"), _open, st.integers(0, 10_000)),
    st.tuples(st.just("update_settings"), _valid_settings.filter(bool)),
]
_FLOW_WEIGHTS = [6, 3, 2, 2, 1, 1, 4, 3, 2, 1]
_flow_script = st.fixed_dictionaries(
    {
        "first": st.just("settings"),
        "settings": _valid_settings,
        "ops": st.lists(
            st.sampled_from(
                [s for s, w in zip(_FLOW, _FLOW_WEIGHTS, strict=True) for _ in range(w)]
            ).flatmap(lambda s: s),
            min_size=5,
            max_size=40,
        ),
        "cuts": st.lists(st.integers(0, 10**6), max_size=10),
        "prologue": st.just(1),
        "answered": st.just(True),
        "window": st.sampled_from((65_535, 16_384, 4_000)),
        "header_list": st.just(65_536),
    }
)


# ---------------------------------------------------------- the peer's frames


@dataclass
class Unit:
    """One peer operation's frames (a header block is one unit with its
    CONTINUATIONs): ``op`` as generated, ``start:end`` its bytes in the run."""

    op: tuple[Any, ...]
    wire: bytes
    start: int = 0
    end: int = 0

    @property
    def kind(self) -> str:
        return str(self.op[0])


class Peer:
    """The other side: its HPACK encoder and the frames each op stands for."""

    def __init__(self, server: bool) -> None:
        self.server = server  # the peer is the server (our side is a client)
        self.encoder = hpack.Encoder()

    def header_list(self, kind: str, length: int | None) -> list[tuple[bytes, bytes]]:
        if kind == "trailers":
            return [(b"grpc-status", b"0")]
        if kind == "info":
            return [(b":status", b"100")] if self.server else [(b":method", b"GET")]
        if self.server:
            fields = [(b":status", b"200"), (b"server", b"peer")]
        else:
            fields = [
                (b":method", b"POST"),
                (b":scheme", b"https"),
                (b":authority", b"example.com"),
                (b":path", b"/x"),
            ]
        if length is not None:
            fields.append((b"content-length", str(length).encode()))
        if kind == "bad":  # upper case, a connection header, a pseudo-header last
            fields = [*fields, (b"Connection", b"close"), (b":path", b"/late")]
        return fields

    def frames(self, op: tuple[Any, ...]) -> bytes:
        kind = op[0]
        if kind == "headers":
            return self._headers(*op[1:])
        if kind == "data":
            _, sid, size, pad, end = op
            body = bytes(size)
            flags = 0x1 if end else 0
            if pad is not None:
                return raw(DATA, flags | 0x8, sid, bytes([pad]) + body + bytes(pad))
            return raw(DATA, flags, sid, body)
        if kind == "rst":
            return raw(RST, 0, op[1], struct.pack(">L", op[2]))
        if kind == "window_update":
            _, sid, inc, reserved = op
            return raw(WINDOW_UPDATE, 0, sid, struct.pack(">L", inc | (reserved << 31)))
        if kind == "ping":
            _, ack, wrong = op
            return raw(PING, 0x1 if ack else 0, 0, b"8 bytes!" + b"x" * wrong)
        if kind == "settings":
            return raw(SETTINGS, 0, 0, settings_payload(op[1]))
        if kind == "settings_ack":
            return raw(SETTINGS, 0x1, 0, settings_payload([(1, 0)]) if op[1] else b"")
        if kind == "priority":
            _, sid, dep, excl = op
            return raw(PRIORITY, 0, sid, struct.pack(">LB", dep | (excl << 31), 15))
        if kind == "goaway":
            return raw(GOAWAY, 0, 0, struct.pack(">LL", op[1], op[2]) + b"bye")
        if kind == "push_promise":
            block = self.encoder.encode(self.header_list("head", None))
            return raw(PUSH, 0x4, op[1], struct.pack(">L", op[2]) + block)
        if kind == "continuation":
            return raw(CONT, 0x4, op[1], b"")
        if kind == "unknown":
            return raw(op[1], 0xFF, op[2], b"whatever")
        assert kind == "too_big"
        return raw(op[1], 0, op[2], bytes(16_385))

    def _headers(
        self,
        sid: int,
        kind: str,
        end: bool,
        pad: int | None,
        priority: bool,
        continuations: int,
        length: int | None,
        short: int,
    ) -> bytes:
        if kind in ("empty", "junk"):  # junk: an index past both tables
            block = b"" if kind == "empty" else b"\xff\xff\xff\x7f"
        else:
            block = self.encoder.encode(self.header_list(kind, length))
        step = len(block) // (continuations + 1) + 1
        pieces = [block[i * step : (i + 1) * step] for i in range(continuations + 1)]
        flags = (0x1 if end else 0) | (0x4 if not continuations else 0)
        head = b""
        if pad is not None:
            flags |= 0x8
            head = bytes([pad])
        if priority:
            flags |= 0x20
            head += struct.pack(">LB", 0, 15)
        padding = bytes(max(0, (pad or 0) - short))
        out = raw(HEADERS, flags, sid, head + pieces[0] + padding)
        for i, piece in enumerate(pieces[1:], 1):
            out += raw(CONT, 0x4 if i == continuations else 0, sid, piece)
        return out


# ------------------------------------------------------------------ the machines


def _stock(client_side: bool, values: dict[SettingCodes, int], header_list: int) -> Any:
    """Stock h2, configured as ``make_h2_state`` configures ours."""
    conn = h2.connection.H2Connection(h2_configuration(client_side))
    conn.local_settings = h2.settings.Settings(client=client_side, initial_values=values)
    conn.decoder.max_header_list_size = header_list
    return conn


def _machines(client_side: bool, window: int, header_list: int) -> dict[str, Any]:
    values = {
        SettingCodes.MAX_CONCURRENT_STREAMS: 100,
        SettingCodes.INITIAL_WINDOW_SIZE: window,
        SettingCodes.MAX_HEADER_LIST_SIZE: header_list,
    }
    if client_side:
        values[SettingCodes.ENABLE_PUSH] = 0
    machines = {"h2": _stock(client_side, values, header_list)}
    for name, speed in (("fixes", False), ("fast", True)):
        machines[name] = make_h2_state(
            client_side=client_side,
            max_concurrent_streams=100,
            initial_window_size=window,
            max_header_list_size=header_list,
            speed_layer=speed,
        )
    assert type(machines["fixes"]) is FixedConnection
    assert type(machines["fast"]) is FastConnection
    return machines


# ------------------------------------------------------------------ what a machine says


def norm(value: Any) -> Any:
    """A value of an event's field, comparable across machines."""
    if isinstance(value, h2.events.Event):
        return event_fields(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    if isinstance(value, dict):
        return sorted((int(k), norm(v)) for k, v in value.items())
    if isinstance(value, list | tuple):
        return tuple(norm(v) for v in value)
    if isinstance(value, h2.settings.ChangedSetting):
        return (int(value.setting), value.original_value, value.new_value)
    if isinstance(value, bool | None | str):
        return value
    if isinstance(value, int):
        return int(value)
    return type(value).__name__  # a frame (h2's UnknownFrameReceived holds one)


def event_fields(ev: Any) -> Any:
    return (type(ev).__name__, tuple(sorted((k, norm(v)) for k, v in vars(ev).items())))


def _error(exc: BaseException) -> tuple[str, Any]:
    return (type(exc).__name__, getattr(exc, "error_code", None))


def _stream(conn: Any, sid: int) -> Any:
    stream = conn.streams.get(sid)
    if stream is None:
        return "closed" if sid in conn._closed_streams else None
    state = stream.state_machine.state
    if state == h2.stream.StreamState.CLOSED:
        return "closed"  # patch 2: stock h2 forgets closed streams when it counts
    return (
        state.name,
        stream._inbound_window_manager.current_window_size,
        stream.outbound_flow_control_window,
    )


def snapshot(conn: Any) -> Any:
    """The connection's state, windows, settings and streams."""
    return (
        conn.state_machine.state.name,
        conn.outbound_flow_control_window,
        conn._inbound_flow_control_window_manager.current_window_size,
        conn.max_outbound_frame_size,
        conn.max_inbound_frame_size,
        conn.encoder.header_table_size,
        sorted((int(k), v) for k, v in conn.remote_settings.items()),
        sorted((int(k), v) for k, v in conn.local_settings.items()),
        conn.highest_inbound_stream_id,
        conn.highest_outbound_stream_id,
        tuple(_stream(conn, sid) for sid in ANY_IDS if sid),
    )


@dataclass
class Said:
    """What one machine said at one step."""

    events: list[Any]
    error: tuple[str, Any] | None
    state: Any
    sent: bytes
    kept: list[Any] = field(default_factory=list)  # events_before_error (patch 3)


def frames_of(data: bytes) -> list[tuple[int, int, int, bytes]]:
    """The frames in ``data``: (type, flags, stream id, payload)."""
    out = []
    pos = 0
    while pos + 9 <= len(data):
        length = int.from_bytes(data[pos : pos + 3], "big")
        kind, flags = data[pos + 3], data[pos + 4]
        sid = int.from_bytes(data[pos + 5 : pos + 9], "big") & 0x7FFF_FFFF
        out.append((kind, flags, sid, data[pos + 9 : pos + 9 + length]))
        pos += 9 + length
    return out


# ------------------------------------------------------------------ the differences


def _names(events: list[Any]) -> list[str]:
    return [e[0] for e in events]


def stock_view(events: list[Any]) -> list[Any]:
    """Events in the terms both sides share (the normalisations of ``PATCHES``)."""
    out: list[tuple[Any, ...]] = []
    for name, fields in events:
        d = dict(fields)
        if name in ("UnknownFrameReceived",):
            out.append(("unknown frame",))
        elif name == "IgnoredFrameReceived":
            if d["kind"] in ("unknown_frames", "priority_updates"):
                out.append(("unknown frame",))
            # empty CONTINUATIONs and ALTSVC: counted by us, nothing in h2
        elif name in ("PriorityUpdated", "PriorityFrameReceived"):
            out.append(("priority", d["stream_id"]))
        else:
            out.append((name, fields))
    return out


@dataclass
class Step:
    """One step as the rules see it: the peer's units the bytes touched (empty for a
    call), the call (or None), our role, and what stock h2 and ours said."""

    units: list[Unit]
    call: tuple[Any, ...] | None
    client_side: bool
    stock: Said
    ours: Said

    def touched(self, *kinds: str) -> list[Unit]:
        return [u for u in self.units if u.kind in kinds]

    def ours_code(self) -> Any:
        return None if self.ours.error is None else self.ours.error[1]

    def stock_code(self) -> Any:
        return None if self.stock.error is None else self.stock.error[1]


def _reset_by_us(said: Said) -> set[int]:
    """The streams ``said`` reset itself (events kept before an error included)."""
    return {
        dict(f)["stream_id"]
        for name, f in said.events + said.kept
        if name == "StreamReset" and not dict(f)["remote_reset"]
    }


def _rsts(said: Said) -> list[tuple[int, bytes]]:
    return [(sid, p) for kind, _, sid, p in frames_of(said.sent) if kind == RST]


def _not_rst(said: Said) -> list[Any]:
    return [f for f in frames_of(said.sent) if f[0] != RST]


@dataclass(frozen=True)
class Patch:
    """One documented difference: the patch number and what it is (as in
    ``_h2fixes.py``'s docstring), and the rule that recognises the step where it
    shows (``None``: a normalisation every step gets, in ``stock_view`` and
    ``_comparable``)."""

    number: int
    what: str
    cut: Callable[[Step], bool] | None


PATCHES = [
    Patch(
        0,
        "not a numbered patch (the flood counts, _h2fixes.py's IgnoredFrameReceived and"
        " PriorityFrameReceived): a PRIORITY frame's PriorityUpdated, an unknown frame's"
        " UnknownFrameReceived are ours under other names, and ours adds one for an"
        " empty CONTINUATION or an ALTSVC (stock_view)",
        None,
    ),
    Patch(
        1,
        "GOAWAY stays ours: GoAwayReceived and OPEN where h2 says ConnectionTerminated,"
        " CLOSED and drops its outbound bytes",
        lambda s: (
            bool(s.touched("goaway")) and "GoAwayReceived" in _names(s.ours.events + s.ours.kept)
        ),
    ),
    Patch(
        2,
        "stream limits are ours: stock h2 refuses a stream past the peer's"
        " MAX_CONCURRENT_STREAMS (TooManyStreamsError)",
        lambda s: s.stock.error is not None and s.stock.error[0] == "TooManyStreamsError",
    ),
    Patch(
        2,
        "closed streams: stock h2 forgets them while counting, we when pruning; a closed"
        " stream is compared as 'closed' whether kept or forgotten (_stream)",
        None,
    ),
    Patch(
        2,
        "a call on a closed stream stock h2 forgot (it prunes while counting) is"
        " StreamClosedError with us, as on any closed stream, where stock h2 says"
        " StreamIDTooLowError (send_headers) or KeyError (an empty send_data)",
        lambda s: (
            s.call is not None
            and s.ours.error is not None
            and s.ours.error[0] == "StreamClosedError"
            and s.stock.error is not None
            and s.stock.error[0] in ("StreamIDTooLowError", "KeyError")
        ),
    ),
    Patch(
        2,
        "a stray CONTINUATION on a closed stream ours still holds (stock h2 forgot it"
        " while counting): h2's stream state machine refuses it, a connection error,"
        " where stock h2's lookup finds the stream closed: RST_STREAM after a reset,"
        " StreamClosedError (STREAM_CLOSED) after END_STREAM",
        lambda s: (
            bool(s.touched("continuation"))
            and s.ours_code() == ErrorCodes.PROTOCOL_ERROR
            and (
                (s.stock.error is not None and s.stock.error[0] == "StreamClosedError")
                or (
                    s.stock.error is None
                    and any(
                        sid == u.op[1]
                        for sid, _ in _rsts(s.stock)
                        for u in s.touched("continuation")
                    )
                )
            )
        ),
    ),
    Patch(
        3,
        "events survive a protocol error: ours keeps them in events_before_error, stock h2"
        " drops them; on an error only the error, state and bytes are compared",
        None,
    ),
    Patch(
        4,
        "§3.4: the preface must start with SETTINGS (a client refuses a server's first"
        " frame header that is not one)",
        lambda s: (
            any(u.start == 0 and u.kind != "settings" for u in s.units)
            and s.ours_code() == ErrorCodes.PROTOCOL_ERROR
        ),
    ),
    Patch(
        4,
        "§4.3: an HPACK failure is COMPRESSION_ERROR, not PROTOCOL_ERROR",
        lambda s: (
            bool(s.touched("headers", "push_promise"))
            and s.ours_code() == ErrorCodes.COMPRESSION_ERROR
            and s.stock_code() == ErrorCodes.PROTOCOL_ERROR
        ),
    ),
    Patch(
        4,
        "§5.1: a frame after the peer's END_STREAM is a connection error STREAM_CLOSED"
        " (stock h2 answers RST_STREAM, and may end the connection on a later frame)",
        lambda s: (
            bool(s.touched("data", "headers"))
            and s.ours_code() == ErrorCodes.STREAM_CLOSED
            and (s.stock.error is None or len(_rsts(s.stock)) > len(_rsts(s.ours)))
        ),
    ),
    Patch(
        4,
        "§5.1: frames on a stream we reset are ignored, not answered by RST_STREAM each",
        lambda s: (
            s.ours.error == s.stock.error  # none, or the same one a later frame caused
            and _not_rst(s.ours) == _not_rst(s.stock)
            and len(_rsts(s.ours)) < len(_rsts(s.stock))
        ),
    ),
    Patch(
        4,
        "§6.5: SETTINGS ACK with a payload is FRAME_SIZE_ERROR",
        lambda s: (
            any(u.op[1] for u in s.touched("settings_ack"))
            and s.ours_code() == ErrorCodes.FRAME_SIZE_ERROR
        ),
    ),
    Patch(
        4,
        "§6.9: the WINDOW_UPDATE reserved bit is ignored (hyperframe reads it as part of"
        " the increment, which is then out of range)",
        lambda s: any(u.op[3] for u in s.touched("window_update")) and s.stock.error is not None,
    ),
    Patch(
        4,
        "§4.2: a frame over our SETTINGS_MAX_FRAME_SIZE is refused from its header",
        lambda s: bool(s.touched("too_big")) and s.ours_code() == ErrorCodes.FRAME_SIZE_ERROR,
    ),
    Patch(
        4,
        "§6.4: RST_STREAM on an idle stream is PROTOCOL_ERROR, not ignored",
        lambda s: bool(s.touched("rst")) and s.ours_code() == ErrorCodes.PROTOCOL_ERROR,
    ),
    Patch(
        4,
        "§5.1.1: on a client, HEADERS on an even stream nobody opened is PROTOCOL_ERROR",
        lambda s: (
            s.client_side
            and any(u.op[1] and not u.op[1] & 1 for u in s.touched("headers"))
            and s.ours_code() == ErrorCodes.PROTOCOL_ERROR
        ),
    ),
    Patch(
        4,
        "§6.2: padding may take all of a HEADERS payload; padding into the priority"
        " fields is PROTOCOL_ERROR (hyperframe is off by one both ways)",
        lambda s: (
            any(u.op[4] is not None for u in s.touched("headers"))
            and ErrorCodes.PROTOCOL_ERROR in (s.ours_code(), s.stock_code())
        ),
    ),
    Patch(
        5,
        "a malformed message (headers, content-length, a body where none may be, a header"
        " list over our limit, too many 1xx) is a stream error: we reset the stream"
        " where stock h2 ends the connection or goes on",
        lambda s: (
            bool(s.touched("headers", "data"))
            and bool(_reset_by_us(s.ours) - _reset_by_us(s.stock))
        ),
    ),
    Patch(
        5,
        "a 1xx on a closed stream is StreamClosedError as any HEADERS there (FixedStream:"
        " a reset, or ignored after ours), where h2's table has no (CLOSED,"
        " RECV_INFORMATIONAL_HEADERS) and ends the connection",
        lambda s: (
            any(u.op[2] == "info" for u in s.touched("headers"))
            and s.stock_code() == ErrorCodes.PROTOCOL_ERROR
            and s.ours.error is None
        ),
    ),
    Patch(
        5,
        "a header list over our SETTINGS_MAX_HEADER_LIST_SIZE: a 431 answer (or a reset)"
        " where stock h2 ends the connection (DenialOfServiceError)",
        lambda s: (
            bool(s.touched("headers"))
            and s.ours.error is None
            and s.stock.error is not None
            and s.stock.error[0] == "DenialOfServiceError"
        ),
    ),
    Patch(
        5,
        "a header list over our limit is read to its end (ReadOnDecoder): where stock"
        " h2 stops at the limit (DenialOfServiceError), ours finds what comes after it"
        " (a broken block: COMPRESSION_ERROR; a stream id the peer may not use)",
        lambda s: (
            bool(s.touched("headers"))
            and s.ours.error is not None
            and s.stock.error is not None
            and s.stock.error[0] == "DenialOfServiceError"
        ),
    ),
]


def _comparable(said: Said) -> Any:
    """``said`` in the terms stock h2 shares with us (patch 3: no events on error)."""
    events = [] if said.error is not None else stock_view(said.events)
    return events, said.error, said.state, said.sent


def _difference(how: str, arg: Any, step: Step) -> str:
    """What differs, for the failure message."""
    lines = [f"{how} {arg!r}: stock h2 and ours differ, and no entry of PATCHES says why"]
    names = ("events", "error", "state", "sent")
    for name, a, b in zip(names, _comparable(step.stock), _comparable(step.ours), strict=True):
        if a != b:
            lines += [f"  {name}: stock {a!r}", f"  {name}: ours  {b!r}"]
    return "\n".join(lines)


def _explain(step: Step) -> Patch | None:
    for patch in PATCHES:
        if patch.cut is not None and patch.cut(step):
            return patch
    return None


# ------------------------------------------------------------------ running a script


class Runner:
    """Feeds one machine, saying what it did at each step. ``in_place`` reads the
    bytes into the frame buffer (``read_target``) as the reader does."""

    def __init__(self, conn: Any, in_place: bool) -> None:
        self.conn = conn
        self.in_place = in_place
        self.dead = False

    def _said(self, events: list[Any], exc: BaseException | None) -> Said:
        kept = [event_fields(e) for e in getattr(self.conn, "events_before_error", [])]
        return Said(
            [event_fields(e) for e in events],
            None if exc is None else _error(exc),
            snapshot(self.conn),
            bytes(self.conn.data_to_send()),
            kept if exc is not None else [],
        )

    def feed(self, data: bytes) -> Said:
        events: list[Any] = []
        try:
            if not self.in_place:
                events += self.conn.receive_data(data)
            else:
                buffer = self.conn.incoming_buffer
                pos = 0
                while pos < len(data):
                    target = buffer.read_target()
                    n = min(len(target), len(data) - pos)
                    target[:n] = data[pos : pos + n]
                    self.conn.commit_read(n)
                    pos += n
                    events += self.conn.receive_data(b"")
        except h2.exceptions.ProtocolError as exc:
            self.dead = True
            return self._said(events, exc)
        return self._said(events, None)

    def call(self, op: tuple[Any, ...], client_side: bool) -> Said:
        try:
            local_call(self.conn, op, client_side)
        except (h2.exceptions.H2Error, ValueError, KeyError) as exc:
            return self._said([], exc)
        return self._said([], None)


REQUEST = [(b":method", b"POST"), (b":scheme", b"https"), (b":authority", b"x"), (b":path", b"/")]


def local_call(conn: Any, op: tuple[Any, ...], client_side: bool) -> None:
    kind = op[0]
    if kind == "send_headers":
        headers = REQUEST if client_side else [(b":status", b"200")]
        conn.send_headers(op[1], headers, end_stream=op[2])
    elif kind == "send_data":
        _, sid, size, end = op
        try:
            room = min(conn.local_flow_control_window(sid), conn.max_outbound_frame_size)
        except h2.exceptions.H2Error:
            room = size
        conn.send_data(sid, bytes(min(size, max(room, 0))), end_stream=end)
    elif kind == "reset_stream":
        conn.reset_stream(op[1], op[2])
    elif kind == "increment":
        conn.increment_flow_control_window(op[2], stream_id=op[1])
    elif kind == "acknowledge":
        conn.acknowledge_received_data(op[2], op[1])
    elif kind == "update_settings":
        conn.update_settings(dict(op[1]))
    else:
        assert kind == "ping_out"
        conn.ping(b"ourping!")


def _pieces(start: int, wire: bytes, cuts: list[int]) -> list[tuple[int, bytes]]:
    points = sorted({c % (len(wire) + 1) for c in cuts} | {0, len(wire)})
    return [(start + a, wire[a:b]) for a, b in itertools.pairwise(points)]


def steps_of(script: dict[str, Any], client_side: bool) -> list[Any]:
    """The script as steps: ("bytes", units) runs of peer frames, ("call", op)."""
    peer = Peer(server=client_side)
    first: tuple[Any, ...]
    if script["first"] == "settings":
        first = ("settings", script["settings"])
    elif script["first"] == "ping":
        first = ("ping", False, 0)
    else:
        first = ("headers", 1, "head", True, None, False, 0, None, 0)
    # The prologue (mostly): streams 1, 3 and 5 opened (by the peer's requests, or
    # ours), and our SETTINGS acknowledged.
    prologue: list[tuple[Any, ...]] = []
    if script["prologue"]:
        prologue.append(("settings_ack", False))
        for sid in (1, 3, 5):
            if client_side:
                prologue.append(("send_headers", sid, False))
                if script.get("answered"):  # and the server's response
                    prologue.append(("headers", sid, "head", False, None, False, 0, None, 0))
            else:
                prologue.append(("headers", sid, "head", False, None, False, 0, None, 0))
    steps: list[Any] = []
    run: list[Unit] = []
    pos = 0
    for op in [first, *prologue, *script["ops"]]:
        if op[0] in LOCAL_OPS:
            if run:
                steps.append(("bytes", run))
                run = []
            steps.append(("call", op))
            continue
        wire = peer.frames(op)
        if not run and not steps:
            wire = (b"" if client_side else PREFACE) + wire
        run.append(Unit(op, wire, pos, pos + len(wire)))
        pos += len(wire)
    if run:
        steps.append(("bytes", run))
    return steps


LOCAL_OPS = {
    "send_headers",
    "send_data",
    "reset_stream",
    "increment",
    "acknowledge",
    "update_settings",
    "ping_out",
}


def run_script(script: dict[str, Any], client_side: bool) -> list[Patch]:
    """Runs ``script`` on the three machines, comparing at each step; returns the
    patches that cut it for stock h2."""
    conns = _machines(client_side, script["window"], script["header_list"])
    runners = {
        "h2": Runner(conns["h2"], False),
        "fixes": Runner(conns["fixes"], False),
        "fast": Runner(conns["fast"], True),
    }
    for conn in conns.values():
        conn.initiate_connection()
    preface = {name: bytes(conn.data_to_send()) for name, conn in conns.items()}
    assert preface["h2"] == preface["fixes"] == preface["fast"]
    stock_on = True
    cut: list[Patch] = []
    for kind, what in steps_of(script, client_side):
        if kind == "call":
            todo: list[tuple[str, Any, list[Unit]]] = [("call", what, [])]
        else:
            units: list[Unit] = what
            wire = b"".join(u.wire for u in units)
            todo = [
                ("bytes", piece, [u for u in units if u.start < at + len(piece) and at < u.end])
                for at, piece in _pieces(units[0].start, wire, script["cuts"])
            ]
        for how, arg, touched in todo:
            said: dict[str, Said] = {}
            for name, runner in runners.items():
                if runner.dead or (name == "h2" and not stock_on):
                    continue
                said[name] = runner.feed(arg) if how == "bytes" else runner.call(arg, client_side)
            if "fast" not in said:
                return cut  # both layers ended the connection (they agree: checked)
            assert said["fast"] == said["fixes"], (how, arg)
            if "h2" in said:
                call = arg if how == "call" else None
                step = Step(touched, call, client_side, said["h2"], said["fixes"])
                if _comparable(step.stock) != _comparable(step.ours):
                    patch = _explain(step)
                    assert patch is not None, _difference(how, arg, step)
                    cut.append(patch)
                    stock_on = False
            if runners["fixes"].dead:
                assert runners["fast"].dead
                return cut
    return cut


# ------------------------------------------------------------------ the tests


@pytest.mark.parametrize("client_side", [False, True], ids=["server", "client"])
@given(script=_script)
@settings(max_examples=400)
def test_whole_connection_matches_stock_h2_but_for_the_patches(
    client_side: bool, script: dict[str, Any]
) -> None:
    """Random whole-connection scripts, the peer's bytes cut anywhere: the speed layer
    says exactly what the correctness layer says, and stock h2 the same but for a
    documented patch (``PATCHES``), where its comparison stops."""
    run_script(script, client_side)


@pytest.mark.parametrize("client_side", [False, True], ids=["server", "client"])
@given(script=_flow_script)
@settings(max_examples=200)
def test_long_flow_controlled_connections_match_stock_h2(
    client_side: bool, script: dict[str, Any]
) -> None:
    """The same comparison on connections that live long: three open streams, DATA
    and window updates both ways, settings that move the windows (most such scripts
    end in no patch at all, so the three machines are compared to the end)."""
    run_script(script, client_side)


def test_every_patch_has_an_entry() -> None:
    """The table has an entry for every patch number of ``_h2fixes.py``'s docstring."""
    numbers = {
        int(line.split(".")[0])
        for line in (_h2fixes.__doc__ or "").splitlines()
        if line[:1].isdigit() and ". **" in line
    }
    assert numbers  # the docstring still numbers its patches so
    assert {p.number for p in PATCHES} - {0} == numbers


def _headers(sid: int, kind: str = "head", end: bool = False, pad: int | None = None) -> Any:
    return ("headers", sid, kind, end, pad, False, 0, None, 0)


#: One script per cut rule of ``PATCHES`` (the start of its ``what``), which must cut
#: it there: each rule recognises the difference it stands for, and only that one.
EXAMPLES: list[tuple[str, bool, dict[str, Any]]] = [
    ("GOAWAY stays ours", False, {"ops": [("goaway", 0, 0)]}),
    ("stream limits are ours", True, {"settings": [(3, 1)]}),
    (
        "a call on a closed stream",
        True,
        {
            "ops": [
                ("send_data", 1, 0, True),
                _headers(1, end=True),
                ("send_headers", 7, False),
                ("send_headers", 1, False),
            ]
        },
    ),
    (
        "a stray CONTINUATION on a closed stream",
        True,
        {
            "ops": [
                ("send_data", 3, 0, True),
                _headers(3, end=True),
                ("send_headers", 7, False),
                ("continuation", 3),
            ]
        },
    ),
    ("§3.4", False, {"first": "ping"}),
    ("§3.4", True, {"first": "ping"}),
    ("§4.3", False, {"ops": [_headers(7, "junk")]}),
    (
        "§5.1: a frame after",
        False,
        {"ops": [_headers(7, end=True), ("send_headers", 7, True), ("data", 7, 10, None, False)]},
    ),
    (
        "§5.1: frames on a stream we reset",
        False,
        {"ops": [("reset_stream", 1, 8), ("data", 1, 10, None, False)]},
    ),
    ("§6.5", False, {"ops": [("settings_ack", True)]}),
    ("§6.9", False, {"ops": [("window_update", 0, 100, True)]}),
    ("§4.2", False, {"ops": [("ping_out",), ("too_big", DATA, 1)], "cuts": [20]}),
    ("§6.4", False, {"ops": [("rst", 9, 0)]}),
    ("§5.1.1", True, {"ops": [_headers(2)]}),
    ("§6.2", False, {"ops": [_headers(7, "empty", end=True, pad=5)]}),
    ("a 1xx on a closed stream", True, {"ops": [("rst", 1, 0), _headers(1, "info")]}),
    ("a malformed message", False, {"ops": [_headers(7, "bad", end=True)]}),
    ("a header list over our SETTINGS", False, {"header_list": 200, "ops": [_headers(7, "bad")]}),
    (
        "a header list over our limit is read",
        False,
        {"header_list": 200, "ops": [_headers(2, "bad")]},
    ),
]


@pytest.mark.parametrize(("rule", "client_side", "script"), EXAMPLES, ids=[e[0] for e in EXAMPLES])
def test_each_rule_cuts_the_script_it_stands_for(
    rule: str, client_side: bool, script: dict[str, Any]
) -> None:
    """A hand-written script per cut rule is cut by that rule, at its first difference."""
    full = {"first": "settings", "settings": [], "prologue": 1, "ops": [], "cuts": []}
    full |= {"window": 65_535, "header_list": 65_536} | script
    (patch,) = run_script(full, client_side)
    assert patch.what.startswith(rule), patch.what


def test_every_cut_rule_has_an_example() -> None:
    """No rule of ``PATCHES`` goes without a script that shows it needed."""
    rules = [p.what for p in PATCHES if p.cut is not None]
    assert all(any(w.startswith(rule) for rule, _, _ in EXAMPLES) for w in rules)


@pytest.mark.parametrize("speed_layer", [False, True])
def test_no_stream_opens_where_the_peer_allows_none(speed_layer: bool) -> None:
    """With the peer's SETTINGS_MAX_CONCURRENT_STREAMS at 0, send_headers on a new
    stream is h2's TooManyStreamsError on both layers (the speed layer used to open
    it: the first bug this file found)."""
    conn = _machines(True, 65_535, 65_536)["fast" if speed_layer else "fixes"]
    conn.initiate_connection()
    conn.receive_data(raw(SETTINGS, 0, 0, settings_payload([(3, 0)])))
    with pytest.raises(h2.exceptions.TooManyStreamsError):
        conn.send_headers(1, REQUEST)
    assert 1 not in conn.streams
