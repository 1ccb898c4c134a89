"""Public helpers for testing code that uses trio_h2t (like ``trio.testing``).

Needs Hypothesis (the ``testing`` extra: ``pip install trio_h2t[testing]``).
See docs/testing.md.
"""

# ---- kit: pairs, strategies, the handler machine (docs/testing.md) -- begin
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
    "ChunkedStream",
    "Chunking",
    "Exchange",
    "HandlerMachine",
    "MemoryPair",
    "RunReport",
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
# ---- kit -- end

__all__: list[str] = [*_KIT_NAMES]

from trio_h2t._util import fixup_module_metadata as _fixup_module_metadata  # noqa: E402

_fixup_module_metadata(__name__, globals())
del _fixup_module_metadata
