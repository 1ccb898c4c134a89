"""Hypothesis strategies for HTTP/2 messages: header blocks, bodies, chunkings, configs.

Every block these strategies draw is valid by RFC 9113 §8.2-§8.3 (lowercase names of
legal bytes, values without NUL/CR/LF or surrounding whitespace, pseudo-headers once
each and first, no connection-specific field, ``te`` only as ``trailers``), so that
a test's failures are the code's, not the input's; ``tests/test_testing_kit.py``
checks each against the validation trio_h2t applies to what it receives
(``_headers.validate_received``). Within validity they reach for the edges: the
order of pseudo-headers, mixed-case values, repeated names, empty values, and blocks
whose encoded size (RFC 9113 §6.5.2: name + value + 32 per field) comes close to a
``max_header_list_size``.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from hypothesis import strategies as st

from trio_h2t._config import TransportConfig
from trio_h2t._controlbuf import DEFAULT_THROTTLE_LIMIT

from ._pairs import Chunking

__all__ = [
    "bodies",
    "chunked_bodies",
    "chunkings",
    "header_list_size",
    "request_headers",
    "response_headers",
    "trailers",
    "transport_configs",
]

HeaderBlock = list[tuple[bytes, bytes]]

#: RFC 9113 §6.5.2: each field counts its name, its value and 32 octets.
FIELD_OVERHEAD = 32
#: §8.2.2: fields that are malformed in HTTP/2 (and ``host``/``te``, which have rules).
_AVOID = frozenset(
    [
        b"connection",
        b"proxy-connection",
        b"keep-alive",
        b"transfer-encoding",
        b"upgrade",
        b"host",
        b"te",
        b"content-length",
    ]
)
# §8.2.1 name bytes: 0x21-0x40 less ':' , 0x5b-0x7e (no uppercase). Token-ish
# letters first so that shrinking goes to readable names.
_NAME_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789-_.!#$%&'*+^`|~"
# Value bytes: visible ASCII, space and tab inside (not at the ends), obs-text.
_VALUE_INNER = st.sampled_from(
    [bytes([b]) for b in range(0x21, 0x7F)] + [b" ", b"\t", b"\x80", b"\xff"]
)
_VALUE_EDGE = st.sampled_from([bytes([b]) for b in range(0x21, 0x7F)])


def header_list_size(headers: Sequence[tuple[bytes, bytes]]) -> int:
    """The size RFC 9113 §6.5.2 gives a block (what SETTINGS_MAX_HEADER_LIST_SIZE bounds)."""
    return sum(len(name) + len(value) + FIELD_OVERHEAD for name, value in headers)


@st.composite
def _value(draw: st.DrawFn, max_size: int) -> bytes:
    size = draw(st.integers(0, max_size))
    if size == 0:
        return b""
    if size <= 2:
        return b"".join(draw(st.lists(_VALUE_EDGE, min_size=size, max_size=size)))
    style = draw(st.sampled_from(["text", "bytes", "repeat"]))
    if style == "repeat":  # long values cheaply: one byte, many times, with edges
        return draw(_VALUE_EDGE) + draw(_VALUE_EDGE) * (size - 2) + draw(_VALUE_EDGE)
    inner = draw(st.lists(_VALUE_INNER, min_size=min(size - 2, 64), max_size=min(size - 2, 64)))
    body = b"".join(inner)
    body = (body * (-(-(size - 2) // max(len(body), 1))))[: size - 2] if body else b""
    if style == "text":  # mixed case: values are case-sensitive, names are not
        body = body.swapcase() if draw(st.booleans()) else body
    return draw(_VALUE_EDGE) + body + draw(_VALUE_EDGE)


_names = (
    st.text(_NAME_CHARS, min_size=1, max_size=24)
    .map(str.encode)
    .filter(lambda name: name not in _AVOID)
)


@st.composite
def _regular_fields(
    draw: st.DrawFn, max_fields: int, budget: int, max_value_size: int = 4096
) -> HeaderBlock:
    """Regular fields (duplicates included) whose §6.5.2 size is at most ``budget``,
    each value at most ``max_value_size`` bytes."""
    fields: HeaderBlock = []
    names: list[bytes] = []
    for _ in range(draw(st.integers(0, max_fields))):
        if names and draw(st.integers(0, 3)) == 0:
            name = draw(st.sampled_from(names))  # a repeated name: allowed, and kept apart
        else:
            name = draw(_names)
            names.append(name)
        room = budget - header_list_size(fields) - FIELD_OVERHEAD - len(name)
        if room < 0:
            break
        fields.append((name, draw(_value(min(room, max_value_size)))))
    if budget and draw(st.integers(0, 4)) == 4:
        # One field that brings the block to exactly the budget (or just below it);
        # drawn as 4, not 0, so that a shrunk example goes without it.
        name = b"x-fill"
        room = budget - header_list_size(fields) - FIELD_OVERHEAD - len(name)
        if room >= 2:
            room -= draw(st.integers(0, min(room - 2, 8)))
            fields.append((name, b"f" * room))
    return fields


@st.composite
def request_headers(
    draw: st.DrawFn,
    *,
    methods: Sequence[str] = ("GET", "POST", "PUT", "DELETE", "PATCH"),
    authority: str = "localhost",
    max_fields: int = 8,
    max_header_list_size: int = 16_384,
    max_value_size: int = 4096,
    extra: Sequence[tuple[bytes, bytes]] = (),
) -> HeaderBlock:
    """A valid request header block: ``:method``, ``:scheme``, ``:authority`` and
    ``:path`` in a drawn order, then ``extra``, then up to ``max_fields`` regular
    fields (names repeat; values are empty, mixed-case, up to ``max_value_size``
    bytes), the whole at most ``max_header_list_size`` by §6.5.2 (draw it near a
    peer's limit to test it).
    """
    path = b"/" + draw(st.text("abcdefghijklmnopqrstuvwxyz0123456789/-._~%", max_size=40)).encode()
    if draw(st.booleans()):
        path += b"?" + draw(st.text("abcdefghijklmnopqrstuvwxyz0123456789=&", max_size=20)).encode()
    pseudo = [
        (b":method", draw(st.sampled_from(list(methods))).encode()),
        (b":scheme", b"http"),
        (b":authority", authority.encode()),
        (b":path", path),
    ]
    pseudo = draw(st.permutations(pseudo))
    fixed = [*pseudo, *extra]
    budget = max_header_list_size - header_list_size(fixed)
    if budget < 0:
        raise ValueError(f"max_header_list_size {max_header_list_size} leaves no room")
    return [*fixed, *draw(_regular_fields(max_fields, budget, max_value_size))]


@st.composite
def response_headers(
    draw: st.DrawFn,
    *,
    statuses: Sequence[int] = (200, 201, 204, 301, 400, 404, 500, 503),
    max_fields: int = 8,
    max_header_list_size: int = 16_384,
    max_value_size: int = 4096,
) -> HeaderBlock:
    """A valid response header block: ``:status`` (one of ``statuses``) then up to
    ``max_fields`` regular fields (values up to ``max_value_size`` bytes), the whole
    at most ``max_header_list_size``."""
    fixed = [(b":status", str(draw(st.sampled_from(list(statuses)))).encode())]
    budget = max_header_list_size - header_list_size(fixed)
    return [*fixed, *draw(_regular_fields(max_fields, budget, max_value_size))]


def trailers(
    *, max_fields: int = 4, max_header_list_size: int = 4096
) -> st.SearchStrategy[HeaderBlock]:
    """A valid trailer block: one or more regular fields (no pseudo-header)."""
    return _regular_fields(max_fields, max_header_list_size - 64).map(
        lambda fields: fields or [(b"x-trailer", b"1")]
    )


def bodies(*, max_size: int = 200_000) -> st.SearchStrategy[bytes]:
    """Bodies from empty to ``max_size`` bytes: small ones of any bytes, and large
    ones that reach past the default windows (65 535 and 1 MiB are common edges)."""
    small = st.binary(max_size=min(max_size, 256))
    sizes = st.sampled_from([n for n in (16_383, 16_384, 16_385, 65_535, 65_536) if n <= max_size])
    large = st.one_of(st.integers(0, max_size), sizes) if max_size > 256 else st.integers(0, 0)
    return st.one_of(small, large.map(_pattern))


def _pattern(n: int) -> bytes:
    """``n`` bytes that do not repeat within 251 bytes (misordered pieces show)."""
    block = bytes((i * 7) % 251 for i in range(251))
    return (block * (n // 251 + 1))[:n]


@st.composite
def chunked_bodies(draw: st.DrawFn, *, max_size: int = 200_000, max_chunks: int = 8) -> list[bytes]:
    """A body cut into at most ``max_chunks`` pieces (empty pieces included), to
    send one ``send_data`` each: ``b"".join(pieces)`` is the body."""
    body = draw(bodies(max_size=max_size))
    cuts = sorted(draw(st.lists(st.integers(0, len(body)), max_size=max_chunks - 1)))
    edges = [0, *cuts, len(body)]
    return [body[a:b] for a, b in itertools.pairwise(edges)]


def _shrinking_up(low: int, high: int) -> st.SearchStrategy[int]:
    """Integers in [low, high] that shrink towards ``high``."""
    return st.integers(low, high).map(lambda n: low + high - n)


# Sizes shrink towards large pieces and whole writes: an example with one-byte
# pieces runs thousands of reads, so shrinking towards them is slow, and a shrunk
# example keeps a small size only where the bug needs one.
_sizes = st.lists(
    st.one_of(_shrinking_up(1024, 70_000), _shrinking_up(1, 64)), min_size=1, max_size=5
)


def chunkings() -> st.SearchStrategy[Chunking]:
    """How one end of a link writes and reads (:class:`Chunking`): tiny pieces (a
    frame header split across reads), large ones, or whole writes (the simplest,
    where a failing example shrinks to)."""
    sizes = st.one_of(st.just(()), _sizes)
    return st.builds(Chunking, send_sizes=sizes, receive_sizes=sizes)


window_sizes = st.sampled_from([65_535, 65_536, 100_000, 262_144, 1 << 20])


def transport_configs(*, max_concurrent_streams: int = 8) -> st.SearchStrategy[TransportConfig]:
    """A :class:`~trio_h2t.TransportConfig` with drawn flow-control settings: stream
    and connection windows from the RFC minimum (65 535) to 4 MiB, dynamic (BDP)
    windows on or off, WINDOW_UPDATE ratios, write quota down to 1 byte, the stream
    limit, buffer sizes, batching and the control buffer's throttle limit.

    Built with ``st.builds``, so that a failing example prints only the drawn fields
    (``TransportConfig(initial_window_size=65535, ...)``), not all of them. Each
    choice shrinks towards the cheap end (the default write quota and buffers, the
    default throttle limit), so that shrinking runs fast examples and a shrunk
    example keeps a costly value only where the bug needs it.
    """
    return window_sizes.flatmap(
        lambda initial: st.builds(
            TransportConfig,
            initial_window_size=st.just(initial),
            connection_window_size=st.sampled_from([65_535, 131_072, 1 << 20, 4 << 20]),
            dynamic_window=st.booleans(),
            # At least the initial window (TransportConfig checks it).
            max_window_size=st.sampled_from(
                sorted({max(initial, n) for n in (65_535, 1 << 20, 16 << 20)})
            ),
            window_update_ratio=st.sampled_from([0.25, 0.5, 1.0, 0.01]),
            write_quota=st.sampled_from([65_536, 1, 1000, 16_384, 131_072]),
            max_concurrent_streams=st.integers(1, max_concurrent_streams),
            read_buffer_size=st.sampled_from([65_536, 1024, 16_384]),
            write_buffer_size=st.sampled_from([65_536, 1024]),
            min_batch_size=st.sampled_from([0, 1000, 100_000]),
            throttle_limit=st.sampled_from([DEFAULT_THROTTLE_LIMIT, 1, 2, 5, 100]),
            graceful_close_timeout=st.sampled_from([5.0, 0.0, 0.5, 30.0]),
        )
    )
