"""Public helpers for testing code that uses trio_h2t (like ``trio.testing``)."""

# HTTP/2 frame sequences for fuzzing, and the properties of ``trio-h2t check``
# (docs/testing.md, "trio-h2t check").
from trio_h2t._util import fixup_module_metadata as _fixup_module_metadata

from ._check import (
    PROPERTIES as PROPERTIES,
    Expect as Expect,
    Finding as Finding,
    Property as Property,
    Scenario as Scenario,
    Verdict as Verdict,
    exchange as exchange,
    memory_target as memory_target,
    play as play,
    run_check as run_check,
    tcp_target as tcp_target,
)
from ._frames import (
    PREFACE as PREFACE,
    Chunk as Chunk,
    FrameType as FrameType,
    WireFrame as WireFrame,
    any_frames as any_frames,
    describe as describe,
    encode_header_block as encode_header_block,
    frame_sequences as frame_sequences,
    parse_frames as parse_frames,
    request_frames as request_frames,
    serialize as serialize,
)

__all__: list[str] = [
    "PREFACE",
    "PROPERTIES",
    "Chunk",
    "Expect",
    "Finding",
    "FrameType",
    "Property",
    "Scenario",
    "Verdict",
    "WireFrame",
    "any_frames",
    "describe",
    "encode_header_block",
    "exchange",
    "frame_sequences",
    "memory_target",
    "parse_frames",
    "play",
    "request_frames",
    "run_check",
    "serialize",
    "tcp_target",
]

_fixup_module_metadata(__name__, globals())
del _fixup_module_metadata
