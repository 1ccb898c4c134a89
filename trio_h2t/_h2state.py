"""Our h2 connection: the correctness layer, with the speed layer on top.

trio_h2t drives h2's ``H2Connection`` through two private layers:

- ``_h2fixes.py``, the **correctness layer**: what h2 gets wrong for a multiplexed,
  long-lived transport or against RFC 9113 (GOAWAY stays ours, stream limits are
  ours, events survive a protocol error, RFC details h2 misses, a malformed message
  is a stream error). Each override names the h2 function it replaces.
- ``_h2fast.py``, the **speed layer**: cheaper versions of h2's code paths with the
  same behaviour (one-pass header validation, headers framed without hyperframe,
  one object per stream, closed streams in an array, no per-frame logging).

:func:`make_h2_state` builds the connection with both (``speed_layer=False`` leaves
the speed layer out: ``tests/test_h2_layers.py`` and ``tests/conformance`` use it to
show every correctness patch holds on its own). Everything else is h2's (stream
states, flow-control windows and their overrun checks), hpack's (HPACK, wrapped by
``_h2/hpack.py``) or hyperframe's (frame parsing, fed from ``_h2fixes``'s own frame
buffer). Only loopy takes bytes out (``take_outbound``), after ``send_preface``
(``data_to_send``).
"""

from __future__ import annotations

from typing import TypeAlias

import h2.config
import h2.settings

from ._h2.hpack import READ_ON_FACTOR
from ._h2fast import FastConnection
from ._h2fixes import (
    HEADER_LIST_TOO_LARGE_RESPONSE,
    MAX_INFORMATIONAL,
    FixedConnection,
    FixedFrameBuffer,
    GoAwayReceived,
    IgnoredFrameReceived,
    PriorityFrameReceived,
    goaway_frame,
)

__all__ = [
    "HEADER_LIST_TOO_LARGE_RESPONSE",
    "MAX_INFORMATIONAL",
    "GoAwayReceived",
    "H2State",
    "IgnoredFrameReceived",
    "PriorityFrameReceived",
    "goaway_frame",
    "make_h2_state",
]

#: The type the transport holds: every method it calls is defined by the correctness
#: layer (or h2); the speed layer only makes some of them cheaper.
H2State: TypeAlias = FixedConnection

#: Default of ``make_h2_state(speed_layer=...)``. Only tests change it (the
#: conformance suite's speed-layer-off server sets it before serving).
SPEED_LAYER = True


def h2_configuration(client_side: bool) -> h2.config.H2Configuration:
    """h2's configuration for our connections (what :func:`make_h2_state` passes, and
    what the differential tests give stock h2, so the oracle is configured as ours)."""
    return h2.config.H2Configuration(
        client_side=client_side,
        header_encoding=None,
        validate_inbound_headers=True,
        normalize_inbound_headers=False,
        validate_outbound_headers=False,
        normalize_outbound_headers=False,
    )


def make_h2_state(
    *,
    client_side: bool,
    max_concurrent_streams: int,
    initial_window_size: int,
    max_header_list_size: int,
    max_frame_size: int = 16_384,
    speed_layer: bool | None = None,
) -> H2State:
    """An :class:`H2State` configured for the hot path, its first SETTINGS prepared.

    Inbound header validation stays on (malformed requests must be rejected);
    outbound validation and both normalisations are off: h2 calls that chain of
    generators "somewhat expensive" (h2's ``utilities.py``; grpclib's ``client.py`` and
    ``server.py`` switch all four off for the same reason). Outbound blocks are
    checked by the stream task instead, before they are queued
    (``_headers.validate_to_send``).

    ``speed_layer`` (default :data:`SPEED_LAYER`) chooses ``_h2fast.FastConnection``
    over the correctness layer alone, ``_h2fixes.FixedConnection``.
    """
    config = h2_configuration(client_side)
    if speed_layer is None:
        speed_layer = SPEED_LAYER
    state = FastConnection(config) if speed_layer else FixedConnection(config)
    codes = h2.settings.SettingCodes
    initial: dict[h2.settings.SettingCodes, int] = {
        codes.MAX_CONCURRENT_STREAMS: max_concurrent_streams,
        codes.INITIAL_WINDOW_SIZE: initial_window_size,
        codes.MAX_HEADER_LIST_SIZE: max_header_list_size,
    }
    if max_frame_size != 16_384:  # RFC 9113 §6.5.2's initial value: no need to say it
        initial[codes.MAX_FRAME_SIZE] = max_frame_size
    if client_side:
        initial[codes.ENABLE_PUSH] = 0
    # Assigning before initiate_connection() makes the first SETTINGS carry these
    # values, saving a second SETTINGS round trip (as purerpc, hypercorn, httpcore do).
    state.local_settings = h2.settings.Settings(client=client_side, initial_values=initial)
    # Initial values are current at once (no ACK changes them), so h2's copy, read
    # when it was built, is set here: frames up to our limit are accepted from the
    # start (a peer may use it only after its ACK of our SETTINGS, RFC 9113 §6.5.3).
    state.max_inbound_frame_size = max_frame_size
    state.decoder.max_header_list_size = max_header_list_size
    buffer = state.incoming_buffer
    assert isinstance(buffer, FixedFrameBuffer)  # FixedConnection's
    buffer.max_header_block = READ_ON_FACTOR * max_header_list_size
    return state
