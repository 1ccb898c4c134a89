"""``trio_h2t._h2.hpack``: the block-remembering encoder and decoder behave as hpack's.

Hypothesis drives a plain ``hpack`` pair and a caching pair through the same
sequence of header blocks (drawn from a small pool, so blocks repeat and hit the
caches), table-size changes and settings changes: every encoded block must be byte
for byte hpack's, every decoded list equal to hpack's, and the dynamic tables equal
after every step.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hpack import Decoder, Encoder, HeaderTuple, NeverIndexedHeaderTuple
from hpack.exceptions import HPACKError, InvalidTableSizeError, OversizedHeaderListError
from hypothesis import example, given, strategies as st

from trio_h2t._h2.hpack import (
    CACHE_ENTRIES,
    READ_ON_FACTOR,
    CachingDecoder,
    CachingEncoder,
    HeaderListTooLarge,
)

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


def list_size(headers: list[Any]) -> int:
    return sum(32 + len(name) + len(value) for name, value in headers)


@given(blocks=BLOCKS, steps=STEPS)
@example(  # hpack's encoder then names an entry its decoder lacks, past our bound
    blocks=[
        [
            (b":method", b"POST"),
            (b":method", b"POST"),
            (b"x-long", b"v" * 300),
            (b":path", b"/svc/Method"),
        ]
    ],
    steps=[
        ("table", 64),
        ("block", 0),
        ("table", 4096),
        ("table", 4096),
        ("limit", 100),
        ("block", 0),
    ],
)
def test_caching_pair_matches_hpack(blocks: list[list[Any]], steps: list[tuple[str, int]]) -> None:
    """Encoded bytes, decoded lists and tables match hpack's; an oversized list is read on.

    ``plain_dec`` has the same limit as ours and is compared until hpack stops at
    an oversized list; ``unlimited`` (hpack with no practical limit) is the table
    ours must keep in step with, oversized lists included.
    """
    plain_enc, unlimited = Encoder(), Decoder(max_header_list_size=2**40)
    plain_dec: Decoder | None = Decoder()
    ours_enc, ours_dec = CachingEncoder(), CachingDecoder()
    for kind, arg in steps:
        if kind == "table":
            # The encoder's table follows the peer's SETTINGS_HEADER_TABLE_SIZE; the
            # decoder's bound follows ours (an acked setting).
            plain_enc.header_table_size = ours_enc.header_table_size = arg
            for dec in (plain_dec, ours_dec, unlimited):
                if dec is not None:
                    dec.max_allowed_table_size = max(arg, 64)
            continue
        if kind == "limit":
            ours_dec.max_header_list_size = arg
            if plain_dec is not None:
                plain_dec.max_header_list_size = arg
            continue
        headers = list(blocks[arg % len(blocks)])
        expected = plain_enc.encode(headers)
        assert ours_enc.encode(headers) == expected
        assert tables(ours_enc) == tables(plain_enc)
        # hpack as it stood before this block, for an error ours meets first.
        before = copy.deepcopy(unlimited)
        try:
            want: Any = unlimited.decode(expected, raw=True)
        except HPACKError as exc:
            want = type(exc)
        try:
            got: Any = ours_dec.decode(expected, raw=True)
        except HPACKError as exc:
            got = type(exc)
        limit = ours_dec.max_header_list_size
        if isinstance(want, type):
            if got is OversizedHeaderListError and want is not got:
                # A block that is bad further on (hpack's own encoder can reference an
                # entry its decoder never had) may cross our read-on bound first; hpack
                # with that bound stops at the same field, with the same error.
                before.max_header_list_size = limit * READ_ON_FACTOR
                with pytest.raises(OversizedHeaderListError):
                    before.decode(expected, raw=True)
                return
            assert got == want
            return  # a decoding error ends the connection: no further blocks
        size = list_size(want)
        if size > limit * READ_ON_FACTOR:
            assert got is OversizedHeaderListError
            return  # still a connection error
        if size > limit:
            assert got is HeaderListTooLarge
            plain_dec = None  # hpack stopped mid-block: its table is out of step now
        else:
            assert got == want
            assert [type(h) for h in got] == [type(h) for h in want]
            if plain_dec is not None:
                assert plain_dec.decode(expected, raw=True) == want
                assert tables(plain_dec) == tables(ours_dec)
        assert tables(ours_dec) == tables(unlimited)


SOME_TABLE = [(b"x-a", b"1"), (b"custom-key", b"custom-value"), (b":path", b"/p")]


@given(data=st.binary(max_size=40), prefix=st.sampled_from([b"", b"\x40\x03x-b\x01y"]))
def test_any_bytes_decode_as_hpack_does(data: bytes, prefix: bytes) -> None:
    """Arbitrary bytes (errors included) decode to hpack's result, error class and table."""
    plain, ours = Decoder(), CachingDecoder()
    for dec in (plain, ours):
        for name, value in SOME_TABLE:
            dec.header_table.add(name, value)
    block = prefix + data
    outcomes: list[tuple[Any, Any]] = []
    for dec in (plain, ours):
        try:
            got: Any = dec.decode(block, raw=True)
            outcomes.append((got, [type(h) for h in got]))
        except (HPACKError, IndexError) as exc:
            outcomes.append((type(exc), None))
    assert outcomes[0] == outcomes[1]
    if outcomes[0][1] is not None:
        assert tables(plain) == tables(ours)


def test_oversized_list_keeps_the_table_in_step() -> None:
    """A list over the limit raises HeaderListTooLarge after the whole block: its last
    literals still enter the table, so the next block (indexing them) decodes."""
    enc, dec = Encoder(), CachingDecoder()
    dec.max_header_list_size = 1024
    big = [(b":method", b"GET"), (b"x-big", b"v" * 2000), (b"x-after", b"tail")]
    with pytest.raises(HeaderListTooLarge) as info:
        dec.decode(enc.encode(big), raw=True)
    assert info.value.limit == 1024
    assert info.value.size == list_size(big)
    assert tables(dec) == tables(enc)
    follow = [(b":method", b"GET"), (b"x-after", b"tail")]
    block = enc.encode(follow)
    assert len(block) <= 3  # index references only: the table must be right
    assert dec.decode(block, raw=True) == follow


def test_list_far_over_the_limit_is_still_a_connection_error() -> None:
    """Beyond READ_ON_FACTOR times the limit the read stops: hpack's plain error."""
    enc, dec = Encoder(), CachingDecoder()
    dec.max_header_list_size = 1024
    block = enc.encode([(b"x-a", b"1")]) + enc.encode([(b"x-a", b"1")]) * 1000
    with pytest.raises(OversizedHeaderListError) as info:
        dec.decode(block, raw=True)
    assert not isinstance(info.value, HeaderListTooLarge)


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


def test_owed_table_size_update_is_named_before_an_oversized_list() -> None:
    """A block over the read-on bound whose encoder owed a table size update fails as
    hpack does (InvalidTableSizeError), not as an oversized list (found by Hypothesis)."""
    encoder = Encoder()
    encoder.header_table_size = 0
    encoder.header_table_size = 0
    block = encoder.encode([(b":method", b"POST"), (b":method", b"POST"), (b"x-long", b"v" * 300)])
    ours = CachingDecoder()
    ours.max_allowed_table_size = 64
    ours.max_header_list_size = 100
    with pytest.raises(InvalidTableSizeError):
        ours.decode(block, raw=True)
