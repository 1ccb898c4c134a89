"""hpack's encoder and decoder, remembering whole header blocks that leave the table as it was.

HPACK costs about a fifth of a unary exchange, and most of it is spent on blocks
seen before: a client sends the same request headers again and again, a server the
same response headers and trailers. Once every field of such a block is in the
static or dynamic table, encoding it emits only index references and changes no
state; decoding those bytes gives the same headers and changes no state either. So
each side keeps a small map from a block to its result, valid while the dynamic
table is exactly as it was (``_VersionedTable.version`` counts every insertion and
resize). A block that changed the table, or arrives while a size update is pending,
is never remembered; a hit returns exactly what hpack would have, with the same
(absence of) effect on the table. ``tests/test_hpack.py`` checks this against
plain hpack on generated sequences of blocks and table-size changes.

Memory: at most ``CACHE_ENTRIES`` blocks of at most ``MAX_CACHED_BLOCK`` bytes per
direction per connection; the map is cleared when full.

Owner: the connection's ``H2State`` (loopy encodes, the reader decodes).
"""

from __future__ import annotations

from typing import Any

from hpack import Decoder, Encoder, HeaderTuple
from hpack.table import HeaderTable

__all__ = ["CACHE_ENTRIES", "MAX_CACHED_BLOCK", "CachingDecoder", "CachingEncoder"]

#: Blocks remembered per direction per connection.
CACHE_ENTRIES = 32
#: Longest encoded block remembered (a block of index references is a few bytes a field).
MAX_CACHED_BLOCK = 256


class _VersionedTable(HeaderTable):
    """hpack's dynamic table, with a counter of its changes (insertions, resizes)."""

    def __init__(self) -> None:
        super().__init__()
        self.version = 0

    def add(self, name: bytes, value: bytes) -> None:
        self.version += 1
        super().add(name, value)

    @property
    def maxsize(self) -> int:
        return self._maxsize

    @maxsize.setter
    def maxsize(self, newmax: int) -> None:
        self.version += 1
        HeaderTable.maxsize.fset(self, newmax)  # type: ignore[attr-defined]


class CachingEncoder(Encoder):
    """``hpack.Encoder`` whose ``encode`` returns a remembered block when it can."""

    def __init__(self) -> None:
        super().__init__()
        self.header_table: _VersionedTable = _VersionedTable()
        self._cache: dict[tuple[Any, ...], tuple[int, bytes]] = {}

    def encode(self, headers: Any, huffman: bool = True) -> bytes:
        table = self.header_table
        # Only lists of plain tuples: a HeaderTuple subclass (never-indexed) compares
        # equal to a plain tuple but must be encoded differently.
        if table.resized or type(headers) is not list or set(map(type, headers)) != {tuple}:
            return super().encode(headers, huffman)
        key = (huffman, *headers)
        hit = self._cache.get(key)
        if hit is not None and hit[0] == table.version:
            return hit[1]
        version = table.version
        block = super().encode(headers, huffman)
        if table.version == version and len(block) <= MAX_CACHED_BLOCK:
            cache = self._cache
            if len(cache) >= CACHE_ENTRIES:
                cache.clear()
            cache[key] = (version, block)
        return block


class CachingDecoder(Decoder):
    """``hpack.Decoder`` whose ``decode`` returns remembered headers when it can."""

    def __init__(self) -> None:
        super().__init__()
        self.header_table: _VersionedTable = _VersionedTable()
        self.max_allowed_table_size = self.header_table.maxsize
        self._cache: dict[bytes, tuple[int, int, int, tuple[HeaderTuple, ...]]] = {}

    def decode(self, data: bytes, raw: bool = False) -> Any:
        if not raw or type(data) is not bytes or len(data) > MAX_CACHED_BLOCK:
            return super().decode(data, raw)
        table = self.header_table
        hit = self._cache.get(data)
        if (
            hit is not None
            and hit[0] == table.version
            and hit[1] == self.max_header_list_size
            and hit[2] == self.max_allowed_table_size
        ):
            return list(hit[3])
        version = table.version
        headers = super().decode(data, raw)
        if table.version == version:
            cache = self._cache
            if len(cache) >= CACHE_ENTRIES:
                cache.clear()
            cache[data] = (
                version,
                self.max_header_list_size,
                self.max_allowed_table_size,
                tuple(headers),
            )
        return headers
