"""``trio_h2t._hpack``: the block-remembering encoder and decoder behave as hpack's.

Hypothesis drives a plain ``hpack`` pair and a caching pair through the same
sequence of header blocks (drawn from a small pool, so blocks repeat and hit the
caches), table-size changes and settings changes: every encoded block must be byte
for byte hpack's, every decoded list equal to hpack's, and the dynamic tables equal
after every step.
"""

from __future__ import annotations

from typing import Any

import pytest
from hpack import Decoder, Encoder, HeaderTuple, NeverIndexedHeaderTuple
from hpack.exceptions import HPACKError
from hypothesis import given, strategies as st

from trio_h2t._hpack import CACHE_ENTRIES, CachingDecoder, CachingEncoder

FIELDS = st.sampled_from(
    [
        (b":method", b"POST"),
        (b":method", b"GET"),
        (b":path", b"/svc/Method"),
        (b":path", b"/other"),
        (b":authority", b"localhost:50051"),
        (b":status", b"200"),
        (b"content-type", b"application/grpc"),
        (b"te", b"trailers"),
        (b"grpc-status", b"0"),
        (b"grpc-message", b""),
        (b"x-long", b"v" * 300),
        (b"authorization", b"secret"),
    ]
)
FIELD = st.one_of(
    FIELDS,
    FIELDS.map(lambda f: NeverIndexedHeaderTuple(*f)),
    FIELDS.map(lambda f: HeaderTuple(*f)),
    st.tuples(st.sampled_from([b"x-a", b"x-b"]), st.binary(max_size=3)),
)
BLOCKS = st.lists(st.lists(FIELD, max_size=6), min_size=1, max_size=6)
STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("block"), st.integers(0, 5)),
        st.tuples(st.just("table"), st.sampled_from([0, 64, 350, 4096])),
        st.tuples(st.just("limit"), st.sampled_from([100, 65_536])),
    ),
    max_size=40,
)


def tables(*coders: Any) -> list[list[tuple[bytes, bytes]]]:
    return [list(c.header_table.dynamic_entries) for c in coders]


@given(blocks=BLOCKS, steps=STEPS)
def test_caching_pair_matches_hpack(blocks: list[list[Any]], steps: list[tuple[str, int]]) -> None:
    plain_enc, plain_dec = Encoder(), Decoder()
    ours_enc, ours_dec = CachingEncoder(), CachingDecoder()
    for kind, arg in steps:
        if kind == "table":
            # The encoder's table follows the peer's SETTINGS_HEADER_TABLE_SIZE; the
            # decoder's bound follows ours (an acked setting).
            plain_enc.header_table_size = ours_enc.header_table_size = arg
            plain_dec.max_allowed_table_size = ours_dec.max_allowed_table_size = max(arg, 64)
            continue
        if kind == "limit":
            plain_dec.max_header_list_size = ours_dec.max_header_list_size = arg
            continue
        headers = list(blocks[arg % len(blocks)])
        expected = plain_enc.encode(headers)
        assert ours_enc.encode(headers) == expected
        assert tables(ours_enc) == tables(plain_enc)
        try:
            want: Any = plain_dec.decode(expected, raw=True)
        except HPACKError as exc:
            want = type(exc)
        try:
            got: Any = ours_dec.decode(expected, raw=True)
        except HPACKError as exc:
            got = type(exc)
        assert got == want
        if isinstance(want, type):
            return  # a decoding error ends the connection: no further blocks
        assert tables(ours_dec) == tables(plain_dec)


def test_repeated_blocks_hit_the_caches() -> None:
    enc, dec = CachingEncoder(), CachingDecoder()
    request = [(b":method", b"POST"), (b":path", b"/svc/M"), (b"te", b"trailers")]
    first = enc.encode(request)  # adds to the table: not remembered
    second = enc.encode(request)  # only index references now
    assert second != first
    assert enc.encode(request) is second  # a hit: the very same bytes object
    assert dec.decode(first, raw=True) == request
    decoded = dec.decode(second, raw=True)
    again = dec.decode(second, raw=True)
    assert again == decoded == request
    assert again is not decoded  # each caller gets its own list


def test_table_change_invalidates() -> None:
    enc = CachingEncoder()
    request = [(b":method", b"POST"), (b"x-a", b"1")]
    enc.encode(request)
    block = enc.encode(request)
    enc.encode([(b"x-b", b"2")])  # a new entry shifts x-a's dynamic index
    assert enc.encode(request) != block


@pytest.mark.parametrize("count", [CACHE_ENTRIES + 5])
def test_cache_stays_bounded(count: int) -> None:
    enc, dec = CachingEncoder(), CachingDecoder()
    for i in range(count):
        block = enc.encode([(b":status", b"200"), (b"content-length", str(i).encode())])
        dec.decode(block, raw=True)
        dec.decode(enc.encode([(b":status", b"200")]), raw=True)
    assert len(enc._cache) <= CACHE_ENTRIES
    assert len(dec._cache) <= CACHE_ENTRIES
