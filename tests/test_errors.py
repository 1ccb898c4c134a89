"""The error family: GoAwayError from a scripted server's GOAWAY, and ``retryable``."""

from __future__ import annotations

import inspect

import h2.events
import pytest
import trio
import trio.testing
from h2.errors import ErrorCodes
from helpers import REQUEST, open_peer_server
from hyperframe.frame import GoAwayFrame

import trio_h2t
from trio_h2t import GoAwayError, StreamRefusedError, StreamResetError


def test_every_exported_exception_has_a_bool_retryable() -> None:
    """Each exception class trio_h2t exports has a bool ``retryable`` class attribute."""
    classes = [
        v for v in vars(trio_h2t).values() if inspect.isclass(v) and issubclass(v, BaseException)
    ]
    assert GoAwayError in classes
    for cls in classes:
        assert isinstance(getattr(cls, "retryable", None), bool), cls
    assert trio_h2t.LocalProtocolError.retryable is False
    assert issubclass(GoAwayError, trio_h2t.ConnectionLostError)
    assert not trio_h2t.ConnectionLostError.retryable
    assert not trio_h2t.H2ProtocolError.retryable
    assert StreamResetError(1, ErrorCodes.REFUSED_STREAM).retryable
    assert not StreamResetError(1, ErrorCodes.REFUSED_STREAM, remote=False).retryable
    assert not StreamResetError(1, ErrorCodes.CANCEL).retryable


async def test_goaway_error_fields_refused_streams_and_connection_error() -> None:
    """A server GOAWAY(ENHANCE_YOUR_CALM, last 1, debug): fields kept, stream 3 refused."""
    outcome: dict[int, BaseException] = {}

    async def one(i: int) -> None:
        async with conn.open_stream(REQUEST, end_stream=True) as s:
            try:
                await s.receive_headers()
            except (StreamRefusedError, trio_h2t.ConnectionLostError) as exc:
                outcome[i] = exc

    with trio.fail_after(5):
        async with open_peer_server() as (conn, peer), trio.open_nursery() as nursery:
            for i in range(2):
                nursery.start_soon(one, i)
                await trio.testing.wait_all_tasks_blocked()
            await peer.read_until(lambda: len(peer.events_of(h2.events.RequestReceived)) == 2)
            frame = GoAwayFrame(0)
            frame.last_stream_id = 1
            frame.error_code = ErrorCodes.ENHANCE_YOUR_CALM
            frame.additional_data = b"slow down"
            await peer.send_raw(frame.serialize())
            await trio.testing.wait_all_tasks_blocked()
            refused = outcome[1]
            assert isinstance(refused, StreamRefusedError)
            assert refused.retryable
            cause = refused.__cause__
            assert isinstance(cause, GoAwayError)
            assert (cause.error_code, cause.last_stream_id, cause.debug_data) == (
                ErrorCodes.ENHANCE_YOUR_CALM,
                1,
                b"slow down",
            )
            assert 0 not in outcome  # stream 1 keeps running
            with pytest.raises(GoAwayError) as info:
                async with conn.open_stream(REQUEST, end_stream=True):
                    pass  # pragma: no cover
            assert info.value.retryable
            assert info.value.error_code == ErrorCodes.ENHANCE_YOUR_CALM
            await peer.transport.aclose()  # the connection ends with stream 1 open
            await trio.testing.wait_all_tasks_blocked()
            assert isinstance(conn.error, GoAwayError)
            assert conn.error.debug_data == b"slow down"
            lost = outcome[0]
            assert isinstance(lost, trio_h2t.ConnectionLostError)
            assert not lost.retryable
            assert lost.__cause__ is conn.error
