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

An oversized header list does not desynchronise the decoder. hpack's decoder stops
at the field that takes the list over ``max_header_list_size``, so the rest of the
block never reaches the dynamic table and the connection has to end (RFC 9113
§4.3). :meth:`ReadOnDecoder.decode` (and the caching decoder built on it) reads
every block to its end instead (RFC 9113 §10.5.1: "The header section MUST be
processed to ensure a consistent connection state"): fields past the limit still
update the dynamic table but are not kept, and the block then raises
:class:`HeaderListTooLarge`, which ``_h2fixes.py`` turns into a stream error.
Reading on is bounded: a list over ``READ_ON_FACTOR`` times the limit raises
hpack's plain ``OversizedHeaderListError`` at once (a connection error, as
before). Its literal decoder works on a view of the block, where hpack's copies the
rest of the block for each literal (quadratic in a large block); for every block
within the limit it gives exactly hpack's headers, table and errors
(``tests/test_hpack.py`` checks that on generated blocks).

Owner: the connection's ``H2State`` (loopy encodes, the reader decodes).
"""

from __future__ import annotations

from typing import Any

from hpack import Decoder, Encoder, HeaderTuple, NeverIndexedHeaderTuple
from hpack.exceptions import HPACKDecodingError, OversizedHeaderListError
from hpack.hpack import decode_integer
from hpack.huffman_table import decode_huffman
from hpack.table import HeaderTable

__all__ = [
    "CACHE_ENTRIES",
    "MAX_CACHED_BLOCK",
    "READ_ON_FACTOR",
    "CachingDecoder",
    "CachingEncoder",
    "HeaderListTooLarge",
    "ReadOnDecoder",
]

#: Blocks remembered per direction per connection.
CACHE_ENTRIES = 32
#: Longest encoded block remembered (a block of index references is a few bytes a field).
MAX_CACHED_BLOCK = 256
#: A header list over the limit is read on to the end of its block (a stream error)
#: only up to this many times ``max_header_list_size``; beyond, the read stops and
#: the connection ends. A client that overshoots by mistake (a large cookie) stays
#: far below it; a block of one-byte index references (an HPACK bomb, 32 bytes or
#: more of list per byte) reaches it early, bounding the work spent on it.
READ_ON_FACTOR = 4


class HeaderListTooLarge(OversizedHeaderListError):
    """The block's header list is over ``max_header_list_size``, and the whole block
    was decoded: the dynamic table is in step with the peer's (a stream error)."""

    def __init__(self, limit: int, size: int) -> None:
        super().__init__(
            f"a header list of {size} bytes (RFC 9113 §6.5.2 counting) is over our "
            f"SETTINGS_MAX_HEADER_LIST_SIZE of {limit}"
        )
        self.limit = limit
        self.size = size


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
        # equal to a plain tuple but must be encoded differently. (A loop of ``is``
        # tests: ~1,000 instructions fewer per 7-field block than building a set of
        # the field types, callgrind.)
        if table.resized or type(headers) is not list:
            return super().encode(headers, huffman)
        for field in headers:
            if type(field) is not tuple:
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


class ReadOnDecoder(Decoder):
    """``hpack.Decoder`` that reads an oversized block to its end (module docstring):
    the correctness layer's decoder (``_h2fixes``)."""

    def decode(self, data: bytes, raw: bool = False) -> Any:
        """hpack's ``decode``, reading an oversized block to its end.

        Raises HeaderListTooLarge (the table is in step) or hpack's errors. Only
        ``raw`` decoding (h2's) takes this path; ``raw=False`` is hpack's own.
        """
        if not raw:
            return super().decode(data, raw)
        return self._read_block(data if type(data) is bytes else bytes(data))

    def _read_block(self, data: bytes) -> list[HeaderTuple]:
        """Decode the whole block: hpack's ``Decoder.decode`` loop, reading on past
        ``max_header_list_size`` without keeping the fields (module docstring)."""
        view = memoryview(data)
        get = self.header_table.get_by_index
        limit = self.max_header_list_size
        hard_limit = limit * READ_ON_FACTOR
        headers: list[HeaderTuple] = []
        append = headers.append
        size = 0  # RFC 7541 §4.1 sizes (name + value + 32), as hpack counts
        fields = 0  # fields decoded, kept or not
        at = 0
        end = len(data)
        header: HeaderTuple
        while at < end:
            byte = data[at]
            if byte & 0x80:  # indexed field (RFC 7541 §6.1)
                if byte != 0xFF:
                    index, consumed = byte & 0x7F, 1  # one byte, the common case
                else:
                    index, consumed = decode_integer(view[at:], 7)
                header = HeaderTuple(*get(index))
            elif byte & 0x40:  # literal with incremental indexing (§6.2.1)
                header, consumed = self._read_literal(view, at, True)
            elif byte & 0x20:  # dynamic table size update (§6.3)
                if fields:
                    raise HPACKDecodingError("Table size update not at the start of the block")
                at += self._update_encoding_context(view[at:])
                continue
            else:  # literal without indexing, or never indexed (§6.2.2, §6.2.3)
                header, consumed = self._read_literal(view, at, False)
            at += consumed
            fields += 1
            size += 32 + len(header[0]) + len(header[1])
            if size <= limit:
                append(header)
            elif size > hard_limit:
                # A table size update the encoder owed is the error hpack names first
                # (its check runs at the block's end; updates come only at the start).
                self._assert_valid_table_size()
                raise OversizedHeaderListError(
                    f"A header list larger than {hard_limit} ({READ_ON_FACTOR} times"
                    f" max_header_list_size {limit}) has been received"
                )
        self._assert_valid_table_size()
        if size > limit:
            raise HeaderListTooLarge(limit, size)
        return headers

    def _read_literal(
        self, view: memoryview, start: int, should_index: bool
    ) -> tuple[HeaderTuple, int]:
        """hpack's ``_decode_literal`` on a view of the block: only the name and the
        value are copied (hpack copies the rest of the block). Returns the field and
        the bytes it took."""
        first = view[start]
        if should_index:
            name_index = first & 0x3F
            prefix = 6
            never = False
        else:
            name_index = first & 0x0F
            prefix = 4
            never = bool(first & 0x10)
        if name_index:
            index, consumed = decode_integer(view[start:], prefix)
            name = self.header_table.get_by_index(index)[0]
            at = start + consumed
        else:
            at = start + 1
            name, at = _read_string(view, at)
        value, at = _read_string(view, at)
        header = NeverIndexedHeaderTuple(name, value) if never else HeaderTuple(name, value)
        if should_index:
            self.header_table.add(name, value)
        return header, at - start


class CachingDecoder(ReadOnDecoder):
    """:class:`ReadOnDecoder` whose ``decode`` returns remembered headers when it can
    (the speed layer's decoder, ``_h2fast``)."""

    def __init__(self) -> None:
        super().__init__()
        self.header_table: _VersionedTable = _VersionedTable()
        self.max_allowed_table_size = self.header_table.maxsize
        self._cache: dict[bytes, tuple[int, int, int, tuple[HeaderTuple, ...]]] = {}

    def decode(self, data: bytes, raw: bool = False) -> Any:
        """:meth:`ReadOnDecoder.decode`, answered from the map when it can."""
        if not raw or type(data) is not bytes or len(data) > MAX_CACHED_BLOCK:
            # Off the hot path (one test for the usual case: raw bytes, small).
            if not raw:
                return Decoder.decode(self, data, raw)
            data = bytes(data)
            if len(data) > MAX_CACHED_BLOCK:
                return self._read_block(data)
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
        headers = self._read_block(data)
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


def _read_string(view: memoryview, at: int) -> tuple[bytes, int]:
    """A string literal (RFC 7541 §5.2) at ``at``: its bytes and the offset after it."""
    length, consumed = decode_integer(view[at:], 7)
    start = at + consumed
    stop = start + length
    if stop > len(view):
        raise HPACKDecodingError("Truncated header block")
    raw = view[start:stop]
    return (decode_huffman(raw) if view[at] & 0x80 else bytes(raw)), stop
