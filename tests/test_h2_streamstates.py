"""``trio_h2t._h2.streamstates`` against stock h2's ``H2StreamStateMachine`` (the oracle).

Sequences of inputs, and single inputs in any state with any flags, go to our
machine and to h2's; both must give the same states, flags, events (by class and
fields) and errors (by class, message and the reset h2 hangs on them). The same runs
go through ``FastStream.process_input``, our table in h2's terms, which must give
h2's own objects.

The differences that are deliberate are :data:`DELIBERATE`, each with its reason;
nothing else may differ. The h2 stream bugs trio_h2t fixes (docs/h2-contract.md,
``_h2fixes.py``: late frames after our RST_STREAM ignored, RST_STREAM on an idle
stream a connection error, a 1xx on a closed stream a stream matter, trailers that
keep the request method and the content-length, ...) are decided above the state
machine, by ``FixedConnection`` and ``FixedStream``, so none of them is a row of the
table: the table is h2's, and this test says so.
"""

from __future__ import annotations

from typing import Any

import h2.config
import h2.events
import h2.exceptions
import h2.stream
import pytest
from h2.stream import H2StreamStateMachine, StreamClosedBy, StreamInputs
from hypothesis import given, settings, strategies as st

from trio_h2t._h2.streamstates import (
    CLOSES,
    EFFECTS,
    PROTOCOL_ERROR,
    REPORTS,
    STREAM_CLOSED,
    TRANSITIONS,
    Action,
    ClosedBy,
    StreamClosed,
    StreamEvent,
    StreamInput,
    StreamProtocolError,
    StreamState,
    StreamStateError,
    StreamStateMachine,
)
from trio_h2t._h2fast import FastStream

#: Inputs where ours deliberately differs from h2's machine, and why.
DELIBERATE: dict[StreamInput, str] = {
    # h2 has no PRIORITY input: its connection handles the frame and never tells the
    # stream. Ours has rows (every state keeps its state, nothing reported) so that
    # the table covers every frame type §5.1 names.
    StreamInput.SEND_PRIORITY: "no such input in h2",
    StreamInput.RECV_PRIORITY: "no such input in h2",
}

_FLAGS = ("client", "headers_sent", "trailers_sent", "headers_received", "trailers_received")
_TRI = st.sampled_from([None, False, True])
_INPUTS = st.sampled_from(list(StreamInput))


def _h2_input(input_: StreamInput) -> StreamInputs | None:
    return StreamInputs.__members__.get(input_.name)


def _h2_event_picture(event: h2.events.Event) -> tuple[str, dict[str, Any]]:
    return (type(event).__name__, dict(sorted(vars(event).items())))


#: Our events whose h2 class takes no stream id (the send-path ones, ALTSVC, a push).
_WITHOUT_STREAM_ID = {
    StreamEvent.REQUEST_SENT,
    StreamEvent.RESPONSE_SENT,
    StreamEvent.TRAILERS_SENT,
    StreamEvent.PUSHED_REQUEST_SENT,
    StreamEvent.PUSHED_STREAM_RECEIVED,
    StreamEvent.ALTERNATIVE_SERVICE_AVAILABLE,
}


def _our_event_picture(event: StreamEvent, stream_id: int) -> tuple[str, dict[str, Any]]:
    """Our event as h2 would report it: its h2 class (by name), with the stream id
    (the parent's, for a push) and the class's defaults."""
    cls = getattr(h2.events, event.value)
    h2_event = cls() if event in _WITHOUT_STREAM_ID else cls(stream_id=stream_id)
    if event is StreamEvent.PUSHED_STREAM_RECEIVED:
        h2_event.parent_stream_id = stream_id
    return _h2_event_picture(h2_event)


def _h2_step(machine: H2StreamStateMachine | FastStream, input_: StreamInputs) -> object:
    """One input to h2's machine: its events, or its error, pictured."""
    try:
        return [_h2_event_picture(e) for e in machine.process_input(input_)]
    except h2.exceptions.ProtocolError as exc:
        reset = [_h2_event_picture(e) for e in getattr(exc, "_events", [])]
        # "Invalid input StreamInputs.X in state 3": our enum is called StreamInput.
        message = str(exc).replace("StreamInputs.", "StreamInput.")
        return ("error", type(exc).__name__, message, reset)


def _our_step(machine: StreamStateMachine, input_: StreamInput) -> object:
    """One input to ours, pictured as ``_h2_step`` pictures h2's."""
    try:
        event = machine.process_input(input_)
        return [] if event is None else [_our_event_picture(event, machine.stream_id)]
    except StreamClosed as exc:
        code = exc.error_code
        reset = []
        if exc.reset:
            h2_reset = h2.events.StreamReset(
                stream_id=exc.stream_id,
                error_code=h2.errors.ErrorCodes.STREAM_CLOSED,
                remote_reset=False,
            )
            reset = [_h2_event_picture(h2_reset)]
        assert code == STREAM_CLOSED
        return ("error", "StreamClosedError", str(exc), reset)
    except StreamProtocolError as exc:
        code = exc.error_code
        message = str(exc)
    assert code == PROTOCOL_ERROR
    return ("error", "ProtocolError", message, [])


def _flags(machine: Any) -> tuple[object, ...]:
    closed_by = machine.stream_closed_by
    return (
        int(machine.state),
        *(getattr(machine, name) for name in _FLAGS),
        None if closed_by is None else closed_by.name,
    )


def _set_flags(machine: Any, state: int, flags: tuple[Any, ...], closed_by: str | None) -> None:
    machine.state = type(machine.state)(state)
    for name, value in zip(_FLAGS, flags, strict=True):
        setattr(machine, name, value)
    if closed_by is None:
        machine.stream_closed_by = None
    elif isinstance(machine, StreamStateMachine):
        machine.stream_closed_by = ClosedBy[closed_by]
    else:
        machine.stream_closed_by = StreamClosedBy[closed_by]


def _compare(ours: StreamStateMachine, theirs: H2StreamStateMachine, input_: StreamInput) -> None:
    h2_input = _h2_input(input_)
    if h2_input is None:  # DELIBERATE: ours only
        assert input_ in DELIBERATE
        before = _flags(ours)
        assert _our_step(ours, input_) == []
        assert _flags(ours) == before
        return
    assert _our_step(ours, input_) == _h2_step(theirs, h2_input), input_
    assert _flags(ours) == _flags(theirs), input_


def _fast_stream(stream_id: int) -> FastStream:
    config = h2.config.H2Configuration(client_side=stream_id % 2 == 1, header_encoding=None)
    return FastStream(stream_id, config, 65_535, 65_535)


@given(stream_id=st.integers(1, 2**31 - 1), inputs=st.lists(_INPUTS, max_size=12))
@settings(max_examples=500, deadline=None)
def test_input_sequences_match_h2s_machine(stream_id: int, inputs: list[StreamInput]) -> None:
    """From IDLE, any sequence of inputs gives h2's states, flags, events and errors."""
    ours, theirs = StreamStateMachine(stream_id), H2StreamStateMachine(stream_id)
    for input_ in inputs:
        _compare(ours, theirs, input_)


@given(
    stream_id=st.integers(1, 2**31 - 1),
    state=st.sampled_from(list(StreamState)),
    flags=st.tuples(*[_TRI] * len(_FLAGS)),
    closed_by=st.sampled_from([None, *(c.name for c in ClosedBy)]),
    input_=_INPUTS,
)
@settings(max_examples=1500, deadline=None)
def test_any_input_in_any_state_matches_h2s_machine(
    stream_id: int,
    state: StreamState,
    flags: tuple[bool | None, ...],
    closed_by: str | None,
    input_: StreamInput,
) -> None:
    """In any state with any flags (reachable or not), one input gives h2's outcome."""
    ours, theirs = StreamStateMachine(stream_id), H2StreamStateMachine(stream_id)
    _set_flags(ours, state, flags, closed_by)
    _set_flags(theirs, state, flags, closed_by)
    _compare(ours, theirs, input_)


@given(stream_id=st.integers(1, 2**31 - 1), inputs=st.lists(_INPUTS, max_size=12))
@settings(max_examples=500, deadline=None)
def test_fast_stream_runs_our_table_with_h2s_objects(
    stream_id: int, inputs: list[StreamInput]
) -> None:
    """``FastStream.process_input`` (our table in h2's terms) gives h2's machine's
    states (h2's enum members), closed-by values, events and errors, h2's own classes."""
    fast, theirs = _fast_stream(stream_id), H2StreamStateMachine(stream_id)
    for input_ in inputs:
        h2_input = _h2_input(input_)
        if h2_input is None:
            continue
        assert _h2_step(fast, h2_input) == _h2_step(theirs, h2_input)
        assert fast.state is theirs.state
        assert fast.stream_closed_by is theirs.stream_closed_by
        assert [getattr(fast, name) for name in _FLAGS] == [
            getattr(theirs, name) for name in _FLAGS
        ]


def test_deliberate_differences_are_only_inputs_h2_lacks() -> None:
    """The exception list names inputs h2 has no member for, and no more: every
    other input is compared in full."""
    assert {i for i in StreamInput if _h2_input(i) is None} == set(DELIBERATE)
    assert {i.name for i in StreamInput if i not in DELIBERATE} == set(StreamInputs.__members__)


@pytest.mark.parametrize("state", list(StreamState))
@pytest.mark.parametrize("input_", list(StreamInput))
def test_a_pair_missing_from_the_table_is_a_protocol_error(
    state: StreamState, input_: StreamInput
) -> None:
    """Rule 1: an input with no row closes the stream as a PROTOCOL_ERROR."""
    if (state, input_) in TRANSITIONS:
        return
    machine = StreamStateMachine(1)
    machine.state = state
    with pytest.raises(StreamProtocolError, match="Invalid input"):
        machine.process_input(input_)
    assert machine.state is StreamState.CLOSED


def test_every_action_has_a_meaning_and_every_closing_action_ends_closed() -> None:
    """The tables agree: each action reports an event (REPORTS), has an effect
    (EFFECTS) or records how the stream closed (CLOSES), never both of the first
    two; an action recording how the stream closed only ever ends in CLOSED."""
    assert set(EFFECTS) | set(REPORTS) | set(CLOSES) == set(Action)
    assert not set(EFFECTS) & set(REPORTS)
    for (_, _), (new_state, action) in TRANSITIONS.items():
        if action in CLOSES:
            assert new_state is StreamState.CLOSED


def test_a_refused_input_leaves_the_stream_closed() -> None:
    """An effect that refuses its input (a response sent by a client) closes the stream."""
    machine = StreamStateMachine(1)
    assert machine.process_input(StreamInput.SEND_HEADERS) is StreamEvent.REQUEST_SENT
    machine.headers_sent = False  # as if no request went out: a client's "response"
    with pytest.raises(StreamStateError, match="Client cannot send responses"):
        machine.process_input(StreamInput.SEND_HEADERS)
    assert machine.state is StreamState.CLOSED


def test_a_unary_call_on_both_sides() -> None:
    """The unary exchange walks both sides through OPEN and half-closed to CLOSED."""
    client, server = StreamStateMachine(1), StreamStateMachine(1)
    S, IN, E = StreamState, StreamInput, StreamEvent
    steps = [
        (client, IN.SEND_HEADERS, E.REQUEST_SENT, S.OPEN),
        (server, IN.RECV_HEADERS, E.REQUEST_RECEIVED, S.OPEN),
        (client, IN.SEND_END_STREAM, None, S.HALF_CLOSED_LOCAL),
        (server, IN.RECV_END_STREAM, E.STREAM_ENDED, S.HALF_CLOSED_REMOTE),
        (server, IN.SEND_HEADERS, E.RESPONSE_SENT, S.HALF_CLOSED_REMOTE),
        (client, IN.RECV_HEADERS, E.RESPONSE_RECEIVED, S.HALF_CLOSED_LOCAL),
        (server, IN.SEND_DATA, None, S.HALF_CLOSED_REMOTE),
        (client, IN.RECV_DATA, E.DATA_RECEIVED, S.HALF_CLOSED_LOCAL),
        (server, IN.SEND_HEADERS, E.TRAILERS_SENT, S.HALF_CLOSED_REMOTE),
        (server, IN.SEND_END_STREAM, None, S.CLOSED),
        (client, IN.RECV_HEADERS, E.TRAILERS_RECEIVED, S.HALF_CLOSED_LOCAL),
        (client, IN.RECV_END_STREAM, E.STREAM_ENDED, S.CLOSED),
    ]
    for machine, input_, event, state in steps:
        assert machine.process_input(input_) is event
        assert machine.state is state
    assert client.stream_closed_by is ClosedBy.RECV_END_STREAM
    assert server.stream_closed_by is ClosedBy.SEND_END_STREAM
