"""The stream states of RFC 9113 §5.1, as data: one stream's state machine.

Rules
-----
1. Every transition of a stream lives in :data:`TRANSITIONS`, one dict keyed by
   ``(state, input)``. A pair that is not there is illegal: the stream goes CLOSED
   and the input is a connection error of type PROTOCOL_ERROR (§5.1: "receiving any
   frame other than ... in this state MUST be treated as a connection error").
2. The table does not know which side it is on. Both peers follow the same rules; a
   stream learns its side from its first HEADERS (a request sent: the client side).
3. Sans-IO and on its own: no trio, no h2, no I/O. Stock h2's
   ``h2.stream.H2StreamStateMachine`` is the oracle: ``tests/test_h2_streamstates.py``
   feeds random input sequences to both and compares states, events and errors.

Theory of operation
-------------------
An input is a frame one side sends or receives on the stream, with END_STREAM as an
input of its own right after the frame that carries it (so ``SEND_HEADERS`` then
``SEND_END_STREAM`` for a HEADERS frame with the flag). HEADERS and its
CONTINUATIONs are one input: the frame layer assembles a header block before the
stream sees it, so a CONTINUATION that reaches the stream (``RECV_CONTINUATION``)
has no row anywhere and is a PROTOCOL_ERROR. A row is ``(new state, action)``: the
action names what the transition means (a request sent, a response received, a
reset, ...) and is one of :class:`Action`. :data:`REPORTS` gives the event of an
action that only reports one; :data:`EFFECTS` the effect of an action that depends
on the stream's flags, a small function that updates them and returns the
:class:`StreamEvent` it reports (or None), or raises. :data:`CLOSES` records, for the
actions that close the stream, how it closed (:class:`ClosedBy`): the connection
needs it to answer late frames. :class:`StreamStateMachine` runs it all.

What the table cannot express, and who handles it
-------------------------------------------------
- **Response or trailers**: both are a second HEADERS. The effects tell them apart
  by the flags (``_response_sent``, ``_response_received``: the first block after
  the request is the response, the next one trailers; a third is an error).
- **Informational (1xx) or final**: the caller picks the input from the block's
  ``:status`` (``SEND_/RECV_INFORMATIONAL_HEADERS``): ``FastConnection.send_headers``
  and ``FixedStream.receive_headers``; that a 1xx carries no END_STREAM is checked
  there too.
- **Stream error or connection error for a frame on a closed stream**: the effects
  raise :class:`StreamClosed`; whether it resets the stream (after our RST_STREAM,
  §5.1) or closes the connection (after END_STREAM) is the connection's choice from
  ``stream_closed_by`` (``FixedConnection._receive_frame``, h2's
  ``H2Connection._receive_frame``).
- **PRIORITY**: allowed in every state and changes none (§5.1, §6.3); it has rows
  for completeness, but the connection handles the frame and never feeds it here.
- **Stream ids and IDLE streams** (§5.1.1: a new id must be higher than every one
  before it), **flow control** (windows), **content-length** and **header
  validation** (§8.1.1): the connection, ``_flow``, ``FixedStream`` and
  ``_headers``.
- **Server push** (the RESERVED states): trio_h2t never pushes and a client refuses
  PUSH_PROMISE (ENABLE_PUSH 0), but the rows stay as h2 has them, so the table is
  h2's whole.

Owner: whoever owns the stream object that holds the flags (the reader for received
inputs, loopy for sent ones, as ``_h2fixes.FixedConnection``); the tables are
immutable.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum, IntEnum, StrEnum
from typing import Final, Protocol

__all__ = [
    "CLOSES",
    "EFFECTS",
    "PROTOCOL_ERROR",
    "REPORTS",
    "STREAM_CLOSED",
    "TRANSITIONS",
    "Action",
    "ClosedBy",
    "StreamClosed",
    "StreamEvent",
    "StreamInput",
    "StreamProtocolError",
    "StreamState",
    "StreamStateError",
    "StreamStateMachine",
]

#: Error codes (RFC 9113 §7).
PROTOCOL_ERROR: Final = 0x1
STREAM_CLOSED: Final = 0x5


class StreamState(IntEnum):
    """The seven states of §5.1 (the numbers are h2's ``StreamState``'s)."""

    IDLE = 0
    RESERVED_REMOTE = 1
    RESERVED_LOCAL = 2
    OPEN = 3
    HALF_CLOSED_REMOTE = 4
    HALF_CLOSED_LOCAL = 5
    CLOSED = 6


class StreamInput(IntEnum):
    """What can happen to a stream: a frame sent or received, or END_STREAM.

    Names and numbers are h2's ``StreamInputs``' (0-18), so that the binding to h2
    (``_h2fast``) maps them by name; PRIORITY (19, 20) is ours.
    """

    SEND_HEADERS = 0
    SEND_PUSH_PROMISE = 1
    SEND_RST_STREAM = 2
    SEND_DATA = 3
    SEND_WINDOW_UPDATE = 4
    SEND_END_STREAM = 5
    RECV_HEADERS = 6
    RECV_PUSH_PROMISE = 7
    RECV_RST_STREAM = 8
    RECV_DATA = 9
    RECV_WINDOW_UPDATE = 10
    RECV_END_STREAM = 11
    RECV_CONTINUATION = 12  # never legal: the frame layer assembles header blocks
    SEND_INFORMATIONAL_HEADERS = 13  # a 1xx block
    RECV_INFORMATIONAL_HEADERS = 14
    SEND_ALTERNATIVE_SERVICE = 15  # ALTSVC (RFC 7838)
    RECV_ALTERNATIVE_SERVICE = 16
    UPGRADE_CLIENT = 17  # the HTTP/1.1 upgrade to h2c (RFC 7540 §3.2; trio_h2t never does it)
    UPGRADE_SERVER = 18
    SEND_PRIORITY = 19
    RECV_PRIORITY = 20


class ClosedBy(IntEnum):
    """How a stream closed (h2's ``StreamClosedBy``, with its numbers)."""

    SEND_END_STREAM = 0
    RECV_END_STREAM = 1
    SEND_RST_STREAM = 2
    RECV_RST_STREAM = 3


class StreamEvent(StrEnum):
    """What a transition reports. The names are h2's event classes' (the ``*_SENT``
    ones are h2's private ``_RequestSent``-style events of its send path)."""

    REQUEST_SENT = "_RequestSent"
    RESPONSE_SENT = "_ResponseSent"  # also for a 1xx block sent
    TRAILERS_SENT = "_TrailersSent"
    PUSHED_REQUEST_SENT = "_PushedRequestSent"
    REQUEST_RECEIVED = "RequestReceived"
    RESPONSE_RECEIVED = "ResponseReceived"
    TRAILERS_RECEIVED = "TrailersReceived"
    INFORMATIONAL_RESPONSE_RECEIVED = "InformationalResponseReceived"
    DATA_RECEIVED = "DataReceived"
    WINDOW_UPDATED = "WindowUpdated"
    STREAM_ENDED = "StreamEnded"
    STREAM_RESET = "StreamReset"  # the peer's RST_STREAM
    PUSHED_STREAM_RECEIVED = "PushedStreamReceived"
    ALTERNATIVE_SERVICE_AVAILABLE = "AlternativeServiceAvailable"


class StreamStateError(Exception):
    """An input the stream's state does not allow; the stream is now CLOSED.

    ``error_code`` is the RFC 9113 §7 code the frame answering it carries.
    """

    error_code: int = PROTOCOL_ERROR


class StreamProtocolError(StreamStateError):
    """A connection error of type PROTOCOL_ERROR (h2: ``ProtocolError``)."""


class StreamClosed(StreamStateError):
    """A frame on a closed stream, type STREAM_CLOSED (h2: ``StreamClosedError``).

    A stream error or a connection error: the connection decides from how the stream
    closed (module docstring). ``reset`` is true when this input is the one that
    closed the stream (a frame in a state that cannot take it): the connection then
    reports our RST_STREAM(STREAM_CLOSED) as a reset of ours (h2 hangs a
    ``StreamReset(remote_reset=False)`` on the error).
    """

    error_code = STREAM_CLOSED

    def __init__(self, stream_id: int, *, reset: bool = False) -> None:
        super().__init__(stream_id)  # h2's message: the stream id
        self.stream_id = stream_id
        self.reset = reset


class Action(StrEnum):
    """What a transition means; :data:`EFFECTS` holds what each one does."""

    REQUEST_SENT = "request_sent"
    RESPONSE_SENT = "response_sent"  # a response, or trailers (either side)
    REQUEST_RECEIVED = "request_received"
    RESPONSE_RECEIVED = "response_received"  # a response, or trailers
    DATA_RECEIVED = "data_received"
    WINDOW_UPDATED = "window_updated"
    HALF_CLOSED = "half_closed"  # the peer's END_STREAM, we still send
    ENDED = "ended"  # the peer's END_STREAM, we were done: closed
    END_STREAM_SENT = "end_stream_sent"  # our END_STREAM, the peer was done: closed
    RESET_SENT = "reset_sent"
    RESET_RECEIVED = "reset_received"
    RESET_ON_ERROR = "reset_on_error"  # a frame the state cannot take: we reset
    RECV_ON_CLOSED = "recv_on_closed"
    SEND_ON_CLOSED = "send_on_closed"
    PUSH_ON_CLOSED_RECEIVED = "push_on_closed_received"
    PUSH_ON_CLOSED_SENT = "push_on_closed_sent"
    PUSHED_STREAM_SENT = "pushed_stream_sent"  # on the promised stream
    PUSHED_STREAM_RECEIVED = "pushed_stream_received"
    PUSH_PROMISE_SENT = "push_promise_sent"  # on the parent stream
    PUSH_PROMISE_RECEIVED = "push_promise_received"
    INFORMATIONAL_SENT = "informational_sent"
    INFORMATIONAL_RECEIVED = "informational_received"
    ALT_SVC_SENT = "alt_svc_sent"
    ALT_SVC_RECEIVED = "alt_svc_received"


class StreamFlags(Protocol):
    """What the effects read and write: the flags h2's stream state machine keeps."""

    stream_id: int
    client: bool | None  # None until the first HEADERS (or PUSH_PROMISE) says
    headers_sent: bool | None
    trailers_sent: bool | None
    headers_received: bool | None
    trailers_received: bool | None
    stream_closed_by: Enum | None  # ClosedBy, or h2's StreamClosedBy (the binding)


# ---------------------------------------------------------------- the transitions

_S = StreamState
_I = StreamInput
_A = Action

#: ``(state, input) -> (new state, action)``; every pair not here is illegal (rule 1).
TRANSITIONS: Final[dict[tuple[StreamState, StreamInput], tuple[StreamState, Action | None]]] = {
    # idle
    (_S.IDLE, _I.SEND_HEADERS): (_S.OPEN, _A.REQUEST_SENT),
    (_S.IDLE, _I.RECV_HEADERS): (_S.OPEN, _A.REQUEST_RECEIVED),
    (_S.IDLE, _I.RECV_DATA): (_S.CLOSED, _A.RESET_ON_ERROR),
    (_S.IDLE, _I.SEND_PUSH_PROMISE): (_S.RESERVED_LOCAL, _A.PUSHED_STREAM_SENT),
    (_S.IDLE, _I.RECV_PUSH_PROMISE): (_S.RESERVED_REMOTE, _A.PUSHED_STREAM_RECEIVED),
    (_S.IDLE, _I.RECV_ALTERNATIVE_SERVICE): (_S.IDLE, None),
    (_S.IDLE, _I.UPGRADE_CLIENT): (_S.HALF_CLOSED_LOCAL, _A.REQUEST_SENT),
    (_S.IDLE, _I.UPGRADE_SERVER): (_S.HALF_CLOSED_REMOTE, _A.REQUEST_RECEIVED),
    # reserved (local): we promised this stream
    (_S.RESERVED_LOCAL, _I.SEND_HEADERS): (_S.HALF_CLOSED_REMOTE, _A.RESPONSE_SENT),
    (_S.RESERVED_LOCAL, _I.RECV_DATA): (_S.CLOSED, _A.RESET_ON_ERROR),
    (_S.RESERVED_LOCAL, _I.SEND_WINDOW_UPDATE): (_S.RESERVED_LOCAL, None),
    (_S.RESERVED_LOCAL, _I.RECV_WINDOW_UPDATE): (_S.RESERVED_LOCAL, _A.WINDOW_UPDATED),
    (_S.RESERVED_LOCAL, _I.SEND_RST_STREAM): (_S.CLOSED, _A.RESET_SENT),
    (_S.RESERVED_LOCAL, _I.RECV_RST_STREAM): (_S.CLOSED, _A.RESET_RECEIVED),
    (_S.RESERVED_LOCAL, _I.SEND_ALTERNATIVE_SERVICE): (_S.RESERVED_LOCAL, _A.ALT_SVC_SENT),
    (_S.RESERVED_LOCAL, _I.RECV_ALTERNATIVE_SERVICE): (_S.RESERVED_LOCAL, None),
    # reserved (remote): the peer promised this stream
    (_S.RESERVED_REMOTE, _I.RECV_HEADERS): (_S.HALF_CLOSED_LOCAL, _A.RESPONSE_RECEIVED),
    (_S.RESERVED_REMOTE, _I.RECV_DATA): (_S.CLOSED, _A.RESET_ON_ERROR),
    (_S.RESERVED_REMOTE, _I.SEND_WINDOW_UPDATE): (_S.RESERVED_REMOTE, None),
    (_S.RESERVED_REMOTE, _I.RECV_WINDOW_UPDATE): (_S.RESERVED_REMOTE, _A.WINDOW_UPDATED),
    (_S.RESERVED_REMOTE, _I.SEND_RST_STREAM): (_S.CLOSED, _A.RESET_SENT),
    (_S.RESERVED_REMOTE, _I.RECV_RST_STREAM): (_S.CLOSED, _A.RESET_RECEIVED),
    (_S.RESERVED_REMOTE, _I.RECV_ALTERNATIVE_SERVICE): (_S.RESERVED_REMOTE, _A.ALT_SVC_RECEIVED),
    # open
    (_S.OPEN, _I.SEND_HEADERS): (_S.OPEN, _A.RESPONSE_SENT),
    (_S.OPEN, _I.RECV_HEADERS): (_S.OPEN, _A.RESPONSE_RECEIVED),
    (_S.OPEN, _I.SEND_DATA): (_S.OPEN, None),
    (_S.OPEN, _I.RECV_DATA): (_S.OPEN, _A.DATA_RECEIVED),
    (_S.OPEN, _I.SEND_END_STREAM): (_S.HALF_CLOSED_LOCAL, None),
    (_S.OPEN, _I.RECV_END_STREAM): (_S.HALF_CLOSED_REMOTE, _A.HALF_CLOSED),
    (_S.OPEN, _I.SEND_WINDOW_UPDATE): (_S.OPEN, None),
    (_S.OPEN, _I.RECV_WINDOW_UPDATE): (_S.OPEN, _A.WINDOW_UPDATED),
    (_S.OPEN, _I.SEND_RST_STREAM): (_S.CLOSED, _A.RESET_SENT),
    (_S.OPEN, _I.RECV_RST_STREAM): (_S.CLOSED, _A.RESET_RECEIVED),
    (_S.OPEN, _I.SEND_PUSH_PROMISE): (_S.OPEN, _A.PUSH_PROMISE_SENT),
    (_S.OPEN, _I.RECV_PUSH_PROMISE): (_S.OPEN, _A.PUSH_PROMISE_RECEIVED),
    (_S.OPEN, _I.SEND_INFORMATIONAL_HEADERS): (_S.OPEN, _A.INFORMATIONAL_SENT),
    (_S.OPEN, _I.RECV_INFORMATIONAL_HEADERS): (_S.OPEN, _A.INFORMATIONAL_RECEIVED),
    (_S.OPEN, _I.SEND_ALTERNATIVE_SERVICE): (_S.OPEN, _A.ALT_SVC_SENT),
    (_S.OPEN, _I.RECV_ALTERNATIVE_SERVICE): (_S.OPEN, _A.ALT_SVC_RECEIVED),
    # half-closed (remote): the peer is done, we still send
    (_S.HALF_CLOSED_REMOTE, _I.SEND_HEADERS): (_S.HALF_CLOSED_REMOTE, _A.RESPONSE_SENT),
    (_S.HALF_CLOSED_REMOTE, _I.RECV_HEADERS): (_S.CLOSED, _A.RESET_ON_ERROR),
    (_S.HALF_CLOSED_REMOTE, _I.SEND_DATA): (_S.HALF_CLOSED_REMOTE, None),
    (_S.HALF_CLOSED_REMOTE, _I.RECV_DATA): (_S.CLOSED, _A.RESET_ON_ERROR),
    (_S.HALF_CLOSED_REMOTE, _I.SEND_END_STREAM): (_S.CLOSED, _A.END_STREAM_SENT),
    (_S.HALF_CLOSED_REMOTE, _I.SEND_WINDOW_UPDATE): (_S.HALF_CLOSED_REMOTE, None),
    (_S.HALF_CLOSED_REMOTE, _I.RECV_WINDOW_UPDATE): (_S.HALF_CLOSED_REMOTE, _A.WINDOW_UPDATED),
    (_S.HALF_CLOSED_REMOTE, _I.SEND_RST_STREAM): (_S.CLOSED, _A.RESET_SENT),
    (_S.HALF_CLOSED_REMOTE, _I.RECV_RST_STREAM): (_S.CLOSED, _A.RESET_RECEIVED),
    (_S.HALF_CLOSED_REMOTE, _I.SEND_PUSH_PROMISE): (_S.HALF_CLOSED_REMOTE, _A.PUSH_PROMISE_SENT),
    (_S.HALF_CLOSED_REMOTE, _I.RECV_PUSH_PROMISE): (_S.CLOSED, _A.RESET_ON_ERROR),
    (_S.HALF_CLOSED_REMOTE, _I.SEND_INFORMATIONAL_HEADERS): (
        _S.HALF_CLOSED_REMOTE,
        _A.INFORMATIONAL_SENT,
    ),
    (_S.HALF_CLOSED_REMOTE, _I.SEND_ALTERNATIVE_SERVICE): (_S.HALF_CLOSED_REMOTE, _A.ALT_SVC_SENT),
    (_S.HALF_CLOSED_REMOTE, _I.RECV_ALTERNATIVE_SERVICE): (
        _S.HALF_CLOSED_REMOTE,
        _A.ALT_SVC_RECEIVED,
    ),
    # half-closed (local): we are done, the peer still sends
    (_S.HALF_CLOSED_LOCAL, _I.RECV_HEADERS): (_S.HALF_CLOSED_LOCAL, _A.RESPONSE_RECEIVED),
    (_S.HALF_CLOSED_LOCAL, _I.RECV_DATA): (_S.HALF_CLOSED_LOCAL, _A.DATA_RECEIVED),
    (_S.HALF_CLOSED_LOCAL, _I.RECV_END_STREAM): (_S.CLOSED, _A.ENDED),
    (_S.HALF_CLOSED_LOCAL, _I.SEND_WINDOW_UPDATE): (_S.HALF_CLOSED_LOCAL, None),
    (_S.HALF_CLOSED_LOCAL, _I.RECV_WINDOW_UPDATE): (_S.HALF_CLOSED_LOCAL, _A.WINDOW_UPDATED),
    (_S.HALF_CLOSED_LOCAL, _I.SEND_RST_STREAM): (_S.CLOSED, _A.RESET_SENT),
    (_S.HALF_CLOSED_LOCAL, _I.RECV_RST_STREAM): (_S.CLOSED, _A.RESET_RECEIVED),
    (_S.HALF_CLOSED_LOCAL, _I.RECV_PUSH_PROMISE): (_S.HALF_CLOSED_LOCAL, _A.PUSH_PROMISE_RECEIVED),
    (_S.HALF_CLOSED_LOCAL, _I.RECV_INFORMATIONAL_HEADERS): (
        _S.HALF_CLOSED_LOCAL,
        _A.INFORMATIONAL_RECEIVED,
    ),
    (_S.HALF_CLOSED_LOCAL, _I.SEND_ALTERNATIVE_SERVICE): (_S.HALF_CLOSED_LOCAL, _A.ALT_SVC_SENT),
    (_S.HALF_CLOSED_LOCAL, _I.RECV_ALTERNATIVE_SERVICE): (
        _S.HALF_CLOSED_LOCAL,
        _A.ALT_SVC_RECEIVED,
    ),
    # closed. §5.1: "An endpoint that receives any frame other than PRIORITY after
    # receiving a RST_STREAM MUST treat that as a stream error of type STREAM_CLOSED.
    # [...] any frames after receiving a frame with the END_STREAM flag set MUST
    # [be treated] as a connection error of type STREAM_CLOSED" (RECV_ON_CLOSED; the
    # connection picks which). WINDOW_UPDATE and RST_STREAM "can be received in this
    # state for a short period after a DATA or HEADERS frame containing an END_STREAM
    # flag is sent": always allowed (no clock here). A PUSH_PROMISE on a stream
    # neither open nor half-closed (local) is a PROTOCOL_ERROR, unless we reset the
    # parent (PUSH_ON_CLOSED_RECEIVED). Sending on a closed stream is refused.
    (_S.CLOSED, _I.RECV_END_STREAM): (_S.CLOSED, None),
    (_S.CLOSED, _I.RECV_ALTERNATIVE_SERVICE): (_S.CLOSED, None),
    (_S.CLOSED, _I.RECV_HEADERS): (_S.CLOSED, _A.RECV_ON_CLOSED),
    (_S.CLOSED, _I.RECV_DATA): (_S.CLOSED, _A.RECV_ON_CLOSED),
    (_S.CLOSED, _I.RECV_WINDOW_UPDATE): (_S.CLOSED, None),
    (_S.CLOSED, _I.RECV_RST_STREAM): (_S.CLOSED, None),
    (_S.CLOSED, _I.RECV_PUSH_PROMISE): (_S.CLOSED, _A.PUSH_ON_CLOSED_RECEIVED),
    (_S.CLOSED, _I.SEND_HEADERS): (_S.CLOSED, _A.SEND_ON_CLOSED),
    (_S.CLOSED, _I.SEND_PUSH_PROMISE): (_S.CLOSED, _A.PUSH_ON_CLOSED_SENT),
    (_S.CLOSED, _I.SEND_RST_STREAM): (_S.CLOSED, _A.SEND_ON_CLOSED),
    (_S.CLOSED, _I.SEND_DATA): (_S.CLOSED, _A.SEND_ON_CLOSED),
    (_S.CLOSED, _I.SEND_WINDOW_UPDATE): (_S.CLOSED, _A.SEND_ON_CLOSED),
    (_S.CLOSED, _I.SEND_END_STREAM): (_S.CLOSED, _A.SEND_ON_CLOSED),
}
# PRIORITY, in every state, changes nothing (§5.1: it "can be sent or received in
# any state"; §5.3.2 deprecates what it carries).
for _state in StreamState:
    for _input in (_I.SEND_PRIORITY, _I.RECV_PRIORITY):
        TRANSITIONS[(_state, _input)] = (_state, None)
del _state, _input

#: How the actions that close a stream closed it (rows ending CLOSED by any other
#: action raise, and leave ``stream_closed_by`` as it was).
CLOSES: Final[dict[Action, ClosedBy]] = {
    _A.END_STREAM_SENT: ClosedBy.SEND_END_STREAM,
    _A.ENDED: ClosedBy.RECV_END_STREAM,
    _A.RESET_SENT: ClosedBy.SEND_RST_STREAM,
    _A.RESET_ON_ERROR: ClosedBy.SEND_RST_STREAM,
    _A.RESET_RECEIVED: ClosedBy.RECV_RST_STREAM,
}


# ---------------------------------------------------------------- the effects
# One function per action that has more to do than report one event. The messages
# are h2's. Where h2 asserts (a third header block, a response to a stream that sent
# none) and turns the AssertionError into a ProtocolError, whose message is then
# empty, ours raises a StreamProtocolError with an empty message too (``_INVARIANT``),
# so that the binding to h2 keeps h2's errors exactly.

_INVARIANT = ""


def _request_sent(s: StreamFlags) -> StreamEvent:
    s.client = True
    s.headers_sent = True
    return StreamEvent.REQUEST_SENT


def _response_sent(s: StreamFlags) -> StreamEvent:
    if not s.headers_sent:
        if s.client is True or s.client is None:
            raise StreamProtocolError("Client cannot send responses.")
        s.headers_sent = True
        return StreamEvent.RESPONSE_SENT
    if s.trailers_sent:
        raise StreamProtocolError(_INVARIANT)  # h2: assert not trailers_sent
    s.trailers_sent = True
    return StreamEvent.TRAILERS_SENT


def _request_received(s: StreamFlags) -> StreamEvent:
    if s.headers_received or s.trailers_received:
        raise StreamProtocolError(_INVARIANT)  # h2: assert not headers/trailers_received
    s.client = False
    s.headers_received = True
    return StreamEvent.REQUEST_RECEIVED


def _response_received(s: StreamFlags) -> StreamEvent:
    if not s.headers_received:
        if s.client is not True:
            raise StreamProtocolError(_INVARIANT)  # h2: assert client is True
        s.headers_received = True
        return StreamEvent.RESPONSE_RECEIVED
    if s.trailers_received:
        raise StreamProtocolError(_INVARIANT)  # h2: assert not trailers_received
    s.trailers_received = True
    return StreamEvent.TRAILERS_RECEIVED


def _data_received(s: StreamFlags) -> StreamEvent:
    if not s.headers_received:
        raise StreamProtocolError("cannot receive data before headers")
    return StreamEvent.DATA_RECEIVED


def _reset_on_error(s: StreamFlags) -> StreamEvent:
    raise StreamClosed(s.stream_id, reset=True)


def _on_closed(s: StreamFlags) -> StreamEvent:
    raise StreamClosed(s.stream_id)


def _push_on_closed_received(s: StreamFlags) -> StreamEvent:
    # A PUSH_PROMISE in flight when we reset the parent is answered by resetting
    # the promised stream; on a stream that ended, it is a connection error.
    closed_by = s.stream_closed_by
    if closed_by is None:
        raise StreamProtocolError(_INVARIANT)  # h2: assert stream_closed_by is not None
    if closed_by.name == ClosedBy.SEND_RST_STREAM.name:  # ClosedBy or h2's StreamClosedBy
        raise StreamClosed(s.stream_id)
    raise StreamProtocolError("Attempted to push on closed stream.")


def _push_on_closed_sent(s: StreamFlags) -> StreamEvent:
    raise StreamProtocolError("Attempted to push on closed stream.")


def _pushed_stream_sent(s: StreamFlags) -> None:
    if s.client is not None:
        raise StreamProtocolError(_INVARIANT)  # h2: assert client is None
    s.client = False
    s.headers_received = True


def _pushed_stream_received(s: StreamFlags) -> None:
    if s.client is not None:
        raise StreamProtocolError(_INVARIANT)  # h2: assert client is None
    s.client = True
    s.headers_sent = True


def _push_promise_sent(s: StreamFlags) -> StreamEvent:
    if s.client is True:
        raise StreamProtocolError("Cannot push streams from client peers.")
    return StreamEvent.PUSHED_REQUEST_SENT


def _push_promise_received(s: StreamFlags) -> StreamEvent:
    if s.client is None:
        raise StreamProtocolError("Idle streams cannot receive pushes")
    if not s.client:
        raise StreamProtocolError("Cannot receive pushed streams as a server")
    return StreamEvent.PUSHED_STREAM_RECEIVED


def _informational_sent(s: StreamFlags) -> StreamEvent:
    if s.headers_sent:
        raise StreamProtocolError("Information response after final response")
    return StreamEvent.RESPONSE_SENT


def _informational_received(s: StreamFlags) -> StreamEvent:
    if s.headers_received:
        raise StreamProtocolError("Informational response after final response")
    return StreamEvent.INFORMATIONAL_RESPONSE_RECEIVED


def _alt_svc_sent(s: StreamFlags) -> None:
    if s.headers_sent:
        raise StreamProtocolError("Cannot send ALTSVC after sending response headers.")


def _alt_svc_received(s: StreamFlags) -> StreamEvent | None:
    # RFC 7838 lets ALTSVC arrive in any state; it only makes sense to a client
    # between its request and the response (h2's reading, and nghttp2's): else ignored.
    if s.client is False or s.headers_received:
        return None
    return StreamEvent.ALTERNATIVE_SERVICE_AVAILABLE


Effect = Callable[[StreamFlags], "StreamEvent | None"]

#: The actions that only report an event, whatever the flags.
REPORTS: Final[dict[Action, StreamEvent]] = {
    _A.WINDOW_UPDATED: StreamEvent.WINDOW_UPDATED,
    _A.HALF_CLOSED: StreamEvent.STREAM_ENDED,
    _A.ENDED: StreamEvent.STREAM_ENDED,
    _A.RESET_RECEIVED: StreamEvent.STREAM_RESET,
}

#: What the other actions do to the flags, and the event each reports (or raises).
#: An action in neither map (our END_STREAM or RST_STREAM sent) reports nothing and
#: only records how the stream closed (:data:`CLOSES`).
EFFECTS: Final[dict[Action, Effect]] = {
    _A.REQUEST_SENT: _request_sent,
    _A.RESPONSE_SENT: _response_sent,
    _A.REQUEST_RECEIVED: _request_received,
    _A.RESPONSE_RECEIVED: _response_received,
    _A.DATA_RECEIVED: _data_received,
    _A.RESET_ON_ERROR: _reset_on_error,
    _A.RECV_ON_CLOSED: _on_closed,
    _A.SEND_ON_CLOSED: _on_closed,
    _A.PUSH_ON_CLOSED_RECEIVED: _push_on_closed_received,
    _A.PUSH_ON_CLOSED_SENT: _push_on_closed_sent,
    _A.PUSHED_STREAM_SENT: _pushed_stream_sent,
    _A.PUSHED_STREAM_RECEIVED: _pushed_stream_received,
    _A.PUSH_PROMISE_SENT: _push_promise_sent,
    _A.PUSH_PROMISE_RECEIVED: _push_promise_received,
    _A.INFORMATIONAL_SENT: _informational_sent,
    _A.INFORMATIONAL_RECEIVED: _informational_received,
    _A.ALT_SVC_SENT: _alt_svc_sent,
    _A.ALT_SVC_RECEIVED: _alt_svc_received,
}


# ---------------------------------------------------------------- the machine


class StreamStateMachine:
    """One stream's state, driven by :meth:`process_input` through the tables.

    The flags say what the stream has seen (``client`` once its side is known,
    ``headers_*`` once the request or response went each way, ``trailers_*`` after
    the second block); ``stream_closed_by`` says how it closed. Owner: as the
    module's.
    """

    __slots__ = (
        "client",
        "headers_received",
        "headers_sent",
        "state",
        "stream_closed_by",
        "stream_id",
        "trailers_received",
        "trailers_sent",
    )

    def __init__(self, stream_id: int) -> None:
        self.stream_id = stream_id
        self.state = StreamState.IDLE
        self.client: bool | None = None
        self.headers_sent: bool | None = None
        self.trailers_sent: bool | None = None
        self.headers_received: bool | None = None
        self.trailers_received: bool | None = None
        self.stream_closed_by: Enum | None = None

    def process_input(self, input_: StreamInput) -> StreamEvent | None:
        """Take one input: the new state and the event it reports (or None).

        Raises :class:`StreamStateError` for an input the state does not allow
        (the stream is then CLOSED): :class:`StreamProtocolError` for a pair with no
        row or an effect that refuses it, :class:`StreamClosed` for a frame on a
        closed stream.
        """
        old = self.state
        row = TRANSITIONS.get((old, input_))
        if row is None:
            self.state = StreamState.CLOSED
            raise StreamProtocolError(f"Invalid input StreamInput.{input_.name} in state {old}")
        self.state, action = row
        if action is None:
            return None
        closed_by = CLOSES.get(action)
        if closed_by is not None:
            self.stream_closed_by = closed_by
        effect = EFFECTS.get(action)
        if effect is None:
            return REPORTS.get(action)
        try:
            return effect(self)
        except StreamStateError:
            self.state = StreamState.CLOSED
            raise
