"""Public helpers for testing code that uses trio_h2t (like ``trio.testing``).

Needs Hypothesis (the ``testing`` extra: ``pip install trio_h2t[testing]``).
See docs/testing.md.
"""

from trio_h2t._shared import require_extra as _require_extra
from trio_h2t._util import fixup_module_metadata as _fixup_module_metadata

_require_extra("hypothesis", extra="testing", needed_by="trio_h2t.testing")

# HTTP/2 frame sequences for fuzzing, and the properties of ``trio-h2t check``
# (docs/testing.md, "trio-h2t check").
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

# The kit: in-memory pairs, Hypothesis strategies, the handler and client machines
# (docs/testing.md).
from ._client_machine import (
    Call as Call,
    ClientMachine as ClientMachine,
    ServerExchange as ServerExchange,
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
from ._machine import Exchange as Exchange, HandlerMachine as HandlerMachine
from ._pairs import (
    ChunkedStream as ChunkedStream,
    Chunking as Chunking,
    MemoryPair as MemoryPair,
    chunked_stream_pair as chunked_stream_pair,
    open_memory_pair as open_memory_pair,
    open_memory_server as open_memory_server,
)
from ._run import RunReport as RunReport, run_machine as run_machine
from ._strategies import (
    bodies as bodies,
    chunked_bodies as chunked_bodies,
    chunkings as chunkings,
    header_list_size as header_list_size,
    request_headers as request_headers,
    response_headers as response_headers,
    trailers as trailers,
    transport_configs as transport_configs,
)

_KIT_NAMES = [
    "Call",
    "ChunkedStream",
    "Chunking",
    "ClientMachine",
    "Exchange",
    "HandlerMachine",
    "MemoryPair",
    "RunReport",
    "ServerExchange",
    "bodies",
    "chunked_bodies",
    "chunked_stream_pair",
    "chunkings",
    "header_list_size",
    "open_memory_pair",
    "open_memory_server",
    "request_headers",
    "response_headers",
    "run_machine",
    "trailers",
    "transport_configs",
]

_CHECK_NAMES = [
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

__all__: list[str] = [*_KIT_NAMES, *_CHECK_NAMES]

_fixup_module_metadata(__name__, globals())
del _fixup_module_metadata
