"""The reader's dispatch table (``trio_h2t/_reader.py``, ``_HANDLERS``).

The reader's behaviour on each event kind is tested through the wire elsewhere
(tests/test_inbound.py, test_floods.py, test_pings.py, the conformance suite, h2spec);
these check the table itself: which handler an event class gets.
"""

from __future__ import annotations

import h2.events

from trio_h2t import _reader
from trio_h2t._h2state import GoAwayReceived, IgnoredFrameReceived, PriorityFrameReceived
from trio_h2t._reader import _HANDLERS, Reader, _handler_of

#: Every event class the reader acts on (the cases of the chain the table replaced).
HANDLED = (
    h2.events.DataReceived,
    h2.events.StreamEnded,
    h2.events.RequestReceived,
    h2.events.ResponseReceived,
    h2.events.TrailersReceived,
    h2.events.WindowUpdated,
    h2.events.PingReceived,
    h2.events.PingAckReceived,
    h2.events.StreamReset,
    h2.events.InformationalResponseReceived,
    h2.events.RemoteSettingsChanged,
    h2.events.SettingsAcknowledged,
    GoAwayReceived,
    PriorityFrameReceived,
    IgnoredFrameReceived,
)


def test_every_event_kind_the_reader_acts_on_has_its_own_handler() -> None:
    """Each event class the reader acts on maps to a handler of its own, a method of
    the reader's named for the event."""
    handlers = [_HANDLERS[cls] for cls in HANDLED]
    assert len(set(handlers)) == len(HANDLED)
    for handler in handlers:
        assert getattr(Reader, handler.__name__) is handler
        assert handler.__name__.startswith("_on_")


def test_an_event_without_a_handler_is_ignored_and_remembered() -> None:
    """An h2 event the reader needs nothing from (PriorityUpdated...) gets
    ``Reader._ignore``, looked up once and then found in the table."""
    cls = h2.events.AlternativeServiceAvailable
    _HANDLERS.pop(cls, None)
    assert _handler_of(cls) is Reader._ignore
    assert _reader._HANDLERS[cls] is Reader._ignore


def test_a_subclass_of_a_handled_event_gets_its_bases_handler() -> None:
    """As the class patterns of the chain it replaced would: a subclass of a handled
    event (none of h2's is, but a layer of ours could add one) gets its base's."""

    class LateStreamEnded(h2.events.StreamEnded):
        pass

    try:
        assert _handler_of(LateStreamEnded) is Reader._on_stream_ended
        assert _HANDLERS[LateStreamEnded] is Reader._on_stream_ended
    finally:
        _HANDLERS.pop(LateStreamEnded, None)
