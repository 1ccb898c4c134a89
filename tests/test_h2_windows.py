"""``trio_h2t._h2.windows`` against stock h2 (the oracle): the same windows, increments, errors.

Two differential runs and the edge values:

1. ``ReceiveWindow`` against h2's ``h2.windows.WindowManager`` (inside a stock
   ``H2Stream``, so that a settings change runs h2's own
   ``_inbound_flow_control_change_from_settings``): random sequences of consumed,
   opened and processed bytes and settings deltas; after each, the same result (the
   increment to send), the same windows, and the same error (its code and message).
2. A stock ``H2Connection`` pair (a client and a server, two streams) against a
   model built of our types: the server's outbound windows (``SendWindow``, one per
   stream and the connection's) and the client's inbound ones (``ReceiveWindow``).
   Random DATA, acknowledgements, WINDOW_UPDATEs (the client's, and raw ones past
   what the client allows, up to 2**31 - 1), SETTINGS_INITIAL_WINDOW_SIZE changes;
   after each, the same windows on both sides, the same WINDOW_UPDATE increments on
   the wire, and the same errors (codes): an overrun, an overflow of the connection
   window (a connection error), of a stream window (h2's stream reset), an
   increment of 0 (PROTOCOL_ERROR, h2's on a stream too: XX in the module).
"""

from __future__ import annotations

from typing import Any

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.settings
import h2.stream
import pytest
from h2.errors import ErrorCodes
from hyperframe.frame import Frame, WindowUpdateFrame
from hypothesis import event, given, settings, strategies as st

from trio_h2t._h2 import frames
from trio_h2t._h2.windows import (
    DEFAULT_WINDOW,
    FLOW_CONTROL_ERROR,
    MAX_WINDOW,
    PROTOCOL_ERROR,
    FlowControlError,
    ReceiveWindow,
    SendWindow,
    WindowError,
    WindowProtocolError,
    apply_initial_window_size,
    sendable,
)

_SIZES = st.one_of(
    st.integers(0, 70_000), st.integers(MAX_WINDOW - 70_000, MAX_WINDOW + 1), st.just(1024)
)


#: Where h2's algorithm changes its mind for the default window (a half, a quarter, 1024).
_THRESHOLDS = st.sampled_from([0, 1, 1023, 1024, 1025, 16_383, 16_384, 32_766, 32_767, 32_768])


def _outcome(call: Any, *args: Any) -> Any:
    """What a call returned, or the error it raised as (code, message)."""
    try:
        return ("ok", call(*args))
    except (WindowError, h2.exceptions.FlowControlError) as exc:
        return ("error", int(exc.error_code), str(exc))


# ---------------------------------------------------------------- 1. ReceiveWindow vs WindowManager

_RECEIVE_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("consumed"), st.integers(0, 70_000)),
        st.tuples(st.just("opened"), st.one_of(st.integers(-70_000, 70_000), _SIZES)),
        st.tuples(st.just("processed"), st.one_of(st.integers(0, 70_000), _THRESHOLDS)),
        st.tuples(st.just("settings"), st.integers(-70_000, 70_000)),
    ),
    max_size=40,
)


def _h2_receive(stream: h2.stream.H2Stream, op: str, n: int) -> Any:
    manager = stream._inbound_window_manager
    if op == "consumed":
        return _outcome(manager.window_consumed, n)
    if op == "opened":
        return _outcome(manager.window_opened, n)
    if op == "processed":
        return _outcome(manager.process_bytes, n)
    return _outcome(stream._inbound_flow_control_change_from_settings, n)


def _our_receive(window: ReceiveWindow, op: str, n: int) -> Any:
    call = {
        "consumed": window.window_consumed,
        "opened": window.window_opened,
        "processed": window.process_bytes,
        "settings": window.initial_size_changed,
    }[op]
    return _outcome(call, n)


@given(initial=st.one_of(st.integers(0, 70_000), st.just(MAX_WINDOW)), ops=_RECEIVE_OPS)
@settings(max_examples=400, deadline=None)
def test_receive_window_is_h2s_window_manager(initial: int, ops: list[tuple[str, int]]) -> None:
    """Same increments, windows and errors as h2's ``WindowManager`` on any sequence."""
    stream = h2.stream.H2Stream(1, h2.config.H2Configuration(), initial, initial)
    manager = stream._inbound_window_manager
    ours = ReceiveWindow(initial)
    for op, n in ops:
        theirs = _h2_receive(stream, op, n)
        mine = _our_receive(ours, op, n)
        assert mine == theirs, (op, n)
        assert (ours.current_window_size, ours.max_window_size) == (
            manager.current_window_size,
            manager.max_window_size,
        )
        if mine[0] == "error":
            break  # the connection is torn down: what follows is no one's concern


# ---------------------------------------------------------------- 2. a stock H2Connection pair

_STREAMS = (1, 3)
_INCREMENTS = st.one_of(
    st.integers(1, 70_000), st.integers(MAX_WINDOW - 140_000, MAX_WINDOW), st.just(0)
)
_PAIR_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("data"), st.sampled_from(_STREAMS), st.integers(0, 16_384)),
        st.tuples(
            st.just("ack"),
            st.sampled_from(_STREAMS),
            st.one_of(st.integers(0, 70_000), _THRESHOLDS),
        ),
        st.tuples(st.just("increment"), st.sampled_from((0, *_STREAMS)), st.integers(1, 2**20)),
        st.tuples(st.just("raw_update"), st.sampled_from((0, *_STREAMS)), _INCREMENTS),
        st.tuples(
            st.just("settings"),
            st.just(0),
            st.one_of(st.integers(0, 200_000), st.integers(MAX_WINDOW - 100_000, MAX_WINDOW)),
        ),
    ),
    max_size=30,
)


def _window_updates(data: bytes) -> list[tuple[int, int]]:
    """The (stream id, increment) of each WINDOW_UPDATE in ``data``, in order."""
    found = []
    view = memoryview(data)
    while view:
        frame, length = Frame.parse_frame_header(view[:9])
        frame.parse_body(view[9 : 9 + length])
        view = view[9 + length :]
        if isinstance(frame, WindowUpdateFrame):
            found.append((frame.stream_id, frame.window_increment))
    return found


class _Pair:
    """A stock h2 client and server with streams 1 and 3 open both ways, and the model
    of their windows: the server's send windows, the client's receive windows."""

    def __init__(self) -> None:
        self.client = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        self.server = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
        self.client.initiate_connection()
        self.server.initiate_connection()
        self._to_server()
        self._to_client()
        self._to_server()
        for sid in _STREAMS:
            self.client.send_headers(
                sid, [(":method", "POST"), (":path", "/"), (":scheme", "http"), (":authority", "a")]
            )
            self._to_server()
            self.server.send_headers(sid, [(":status", "200")])
            self._to_client()
        self.conn_send = SendWindow()
        self.stream_send = {sid: SendWindow() for sid in _STREAMS}
        self.conn_receive = ReceiveWindow()
        self.stream_receive = {sid: ReceiveWindow() for sid in _STREAMS}
        self.initial = DEFAULT_WINDOW

    def _to_server(self, data: bytes | None = None) -> list[Any]:
        return self.server.receive_data(self.client.data_to_send() if data is None else data)

    def _to_client(self) -> list[Any]:
        return self.client.receive_data(self.server.data_to_send())

    def figures(self) -> tuple[Any, ...]:
        """The windows h2 keeps, in the model's order."""
        server, client = self.server, self.client
        conn = client._inbound_flow_control_window_manager
        return (
            server.outbound_flow_control_window,
            [server.streams[s].outbound_flow_control_window for s in _STREAMS],
            [server.local_flow_control_window(s) for s in _STREAMS],
            (conn.current_window_size, conn.max_window_size),
            [
                (
                    client.streams[s]._inbound_window_manager.current_window_size,
                    client.streams[s]._inbound_window_manager.max_window_size,
                )
                for s in _STREAMS
            ],
        )

    def model(self) -> tuple[Any, ...]:
        """The same figures, from our types."""
        return (
            self.conn_send.size,
            [self.stream_send[s].size for s in _STREAMS],
            [sendable(self.stream_send[s], self.conn_send) for s in _STREAMS],
            (self.conn_receive.current_window_size, self.conn_receive.max_window_size),
            [
                (self.stream_receive[s].current_window_size, self.stream_receive[s].max_window_size)
                for s in _STREAMS
            ],
        )

    # Each step returns (h2's outcome, the model's outcome): None, or an error code,
    # or what went on the wire.

    def data(self, sid: int, n: int) -> tuple[Any, Any]:
        try:
            self.server.send_data(sid, b"x" * n)
        except h2.exceptions.FlowControlError as exc:
            theirs: Any = ("send", int(exc.error_code))
        else:
            try:
                self._to_client()
                theirs = None
            except h2.exceptions.ProtocolError as exc:
                theirs = ("receive", int(exc.error_code))
        if n and n > sendable(self.stream_send[sid], self.conn_send):
            with pytest.raises(FlowControlError) as info:
                self.stream_send[sid].consume(n)
            return theirs, ("send", info.value.error_code)
        self.stream_send[sid].consume(n)
        self.conn_send.consume(n)
        try:
            self.conn_receive.window_consumed(n)
            self.stream_receive[sid].window_consumed(n)
        except WindowError as exc:
            return theirs, ("receive", exc.error_code)
        return theirs, None

    def ack(self, sid: int, n: int) -> tuple[Any, Any]:
        self.client.acknowledge_received_data(n, sid)
        wire = self.client.data_to_send()
        theirs = (_window_updates(wire), self._server_takes(wire))
        sent = []
        for stream_id, window in ((0, self.conn_receive), (sid, self.stream_receive[sid])):
            increment = window.process_bytes(n)
            if increment:
                sent.append((stream_id, increment))
        taken = None
        for stream_id, increment in sent:
            taken = taken or self._model_takes(stream_id, increment)
        return theirs, (sent, taken)

    def increment(self, sid: int, n: int) -> tuple[Any, Any]:
        window = self.conn_receive if sid == 0 else self.stream_receive[sid]
        try:
            self.client.increment_flow_control_window(n, sid or None)
            theirs: Any = ("sent", self._server_takes(self.client.data_to_send()))
        except h2.exceptions.FlowControlError as exc:
            theirs = ("local", int(exc.error_code))
        try:
            window.window_opened(n)
        except WindowError as exc:
            return theirs, ("local", exc.error_code)
        return theirs, ("sent", self._model_takes(sid, n))

    def raw_update(self, sid: int, n: int) -> tuple[Any, Any]:
        # A WINDOW_UPDATE the client's h2 would not send (past its own window, or 0),
        # framed by hand, as a peer may.
        wire = frames.frame_header(4, frames.WINDOW_UPDATE, 0, sid) + n.to_bytes(4, "big")
        return self._server_takes(wire), self._model_takes(sid, n)

    def _server_takes(self, wire: bytes) -> Any:
        try:
            events = self._to_server(wire)
        except h2.exceptions.ProtocolError as exc:
            return ("connection", int(exc.error_code))
        for received in events:
            if isinstance(received, h2.events.StreamReset):
                return ("stream", int(received.error_code))
        return None

    def _model_takes(self, sid: int, n: int) -> Any:
        window = self.conn_send if sid == 0 else self.stream_send[sid]
        try:
            window.update(n)
        except WindowError as exc:
            # h2 makes a zero increment a connection error on a stream too (XX).
            scope = "connection" if sid == 0 or exc.error_code == PROTOCOL_ERROR else "stream"
            return (scope, exc.error_code)
        return None

    def settings(self, _: int, value: int) -> tuple[Any, Any]:
        setting = h2.settings.SettingCodes.INITIAL_WINDOW_SIZE
        self.client.update_settings({setting: value})
        theirs: Any = None
        try:
            self._to_server()
        except h2.exceptions.ProtocolError as exc:
            theirs = ("server", int(exc.error_code))
        if theirs is None:
            try:
                self._to_client()  # the ACK: the client applies its new setting
            except h2.exceptions.ProtocolError as exc:
                theirs = ("client", int(exc.error_code))
        old, self.initial = self.initial, value
        try:
            apply_initial_window_size(self.stream_send.values(), old, value)
        except WindowError as exc:
            return theirs, ("server", exc.error_code)
        try:
            for window in self.stream_receive.values():
                window.initial_size_changed(value - old)
        except WindowError as exc:
            return theirs, ("client", exc.error_code)
        return theirs, None


@given(ops=_PAIR_OPS)
@settings(max_examples=300, deadline=None)
def test_a_stock_h2_pair_keeps_the_windows_our_types_keep(ops: list[tuple[str, int, int]]) -> None:
    """Same windows, same WINDOW_UPDATE increments on the wire, same errors (codes)."""
    pair = _Pair()
    assert pair.figures() == pair.model()
    for op, sid, n in ops:
        theirs, mine = getattr(pair, op)(sid, n)
        assert theirs == mine, (op, sid, n)
        if mine is not None and mine[-1] is not None:
            event(f"stopped by {op}: {mine}")
            break  # an error: the stream or the connection is done with
        assert pair.figures() == pair.model(), (op, sid, n)


# ---------------------------------------------------------------- the edge values


def test_send_window_edges() -> None:
    window = SendWindow(0)
    window.consume(0)  # an empty DATA (END_STREAM alone) needs no window
    with pytest.raises(FlowControlError) as info:
        window.consume(1)
    assert info.value.error_code == FLOW_CONTROL_ERROR
    assert window.size == 0  # never below what was checked
    window.update(MAX_WINDOW)
    assert window.size == MAX_WINDOW
    with pytest.raises(FlowControlError):
        window.update(1)
    assert window.size == MAX_WINDOW  # left as it was
    with pytest.raises(WindowProtocolError) as zero:
        window.update(0)
    assert zero.value.error_code == PROTOCOL_ERROR
    window.consume(MAX_WINDOW)
    assert window.size == 0


def test_settings_change_may_leave_a_send_window_negative() -> None:
    streams = [SendWindow(), SendWindow(100)]
    apply_initial_window_size(streams, DEFAULT_WINDOW, 0)
    assert [w.size for w in streams] == [0, 100 - DEFAULT_WINDOW]
    streams[1].consume(0)
    with pytest.raises(FlowControlError):
        streams[1].consume(1)
    assert sendable(streams[1], SendWindow()) == 100 - DEFAULT_WINDOW
    apply_initial_window_size(streams, 0, MAX_WINDOW)  # the first stream: exactly the maximum
    assert streams[0].size == MAX_WINDOW
    apply_initial_window_size(streams, MAX_WINDOW, 0)
    streams[0].update(1)
    with pytest.raises(FlowControlError) as info:  # §6.9.2: a connection error
        apply_initial_window_size(streams, 0, MAX_WINDOW)
    assert info.value.error_code == FLOW_CONTROL_ERROR
    apply_initial_window_size([], None, 0)  # no stream open: nothing to move


def test_receive_window_edges() -> None:
    window = ReceiveWindow(MAX_WINDOW)
    window.window_consumed(MAX_WINDOW)
    assert window.current_window_size == 0
    with pytest.raises(FlowControlError) as info:
        window.window_consumed(1)
    assert info.value.error_code == FLOW_CONTROL_ERROR
    with pytest.raises(ValueError, match="a window is 0 to"):
        ReceiveWindow(MAX_WINDOW + 1)
    window = ReceiveWindow()
    assert window.process_bytes(0) is None  # nothing processed: nothing to say
    window.window_consumed(DEFAULT_WINDOW)
    assert window.process_bytes(1024) == 0  # an empty window: more than 1024 needed
    assert window.process_bytes(1) == 1025
    window = ReceiveWindow()
    window.window_consumed(40_000)
    assert window.process_bytes(32_766) == 0  # short of half the window
    assert window.process_bytes(1) == 32_767  # exactly half: hand it back
    window.window_opened(MAX_WINDOW - window.current_window_size)
    assert window.max_window_size == MAX_WINDOW
    with pytest.raises(FlowControlError):
        window.window_opened(1)


def test_receive_window_follows_a_lowered_initial_size_below_zero() -> None:
    window = ReceiveWindow()
    window.window_consumed(60_000)
    window.initial_size_changed(-DEFAULT_WINDOW)  # our SETTINGS_INITIAL_WINDOW_SIZE 0, acked
    assert (window.current_window_size, window.max_window_size) == (-60_000, 0)
    assert window.process_bytes(60_000) == 60_000
    assert window.current_window_size == 0
    with pytest.raises(FlowControlError):
        window.window_consumed(1)


def test_the_wire_codes_are_h2s() -> None:
    assert FLOW_CONTROL_ERROR == ErrorCodes.FLOW_CONTROL_ERROR
    assert PROTOCOL_ERROR == ErrorCodes.PROTOCOL_ERROR
    assert MAX_WINDOW == h2.connection.H2Connection.MAX_WINDOW_INCREMENT


def test_the_speed_layers_window_raises_what_h2_catches() -> None:
    """``_h2fast.H2ReceiveWindow`` raises h2's own ``FlowControlError`` (its class, not a
    subclass: h2's ``receive_data`` catches it and answers GOAWAY(FLOW_CONTROL_ERROR));
    the module's own type raises ours, with the same code and message."""
    from trio_h2t._h2fast import H2ReceiveWindow

    for cls, error in (
        (H2ReceiveWindow, h2.exceptions.FlowControlError),
        (ReceiveWindow, FlowControlError),
    ):
        window = cls(10)
        with pytest.raises(error) as info:
            window.window_consumed(11)
        assert type(info.value) is error
        assert info.value.error_code == FLOW_CONTROL_ERROR
        assert str(info.value) == "Flow control window shrunk below 0"
        with pytest.raises(error):
            cls(MAX_WINDOW).window_opened(1)
