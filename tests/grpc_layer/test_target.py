"""gRPC target strings (trio_h2t/grpc/_target.py, grpc's doc/naming.md)."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given, strategies as st

from trio_h2t.grpc import Target, parse_target

VALID = [
    (
        "dns:///svc.example:50051",
        Target("dns", "svc.example:50051", host="svc.example", port=50051),
    ),
    ("dns://8.8.8.8/svc", Target("dns", "svc", host="svc", port=443)),
    ("dns:svc:8080", Target("dns", "svc:8080", host="svc", port=8080)),
    ("localhost:50051", Target("dns", "localhost:50051", host="localhost", port=50051)),
    ("localhost", Target("dns", "localhost", host="localhost", port=443)),
    ("[::1]:80", Target("dns", "[::1]:80", host="::1", port=80)),
    (
        "ipv4:127.0.0.1:1,10.0.0.2",
        Target("ipv4", "127.0.0.1:1", addresses=(("127.0.0.1", 1), ("10.0.0.2", 443))),
    ),
    ("ipv6:[::1]:5,::2", Target("ipv6", "[::1]:5", addresses=(("::1", 5), ("::2", 443)))),
    ("unix:/tmp/sock", Target("unix", "localhost", path="/tmp/sock")),
    ("unix:relative/sock", Target("unix", "localhost", path="relative/sock")),
    ("unix:///abs/sock", Target("unix", "localhost", path="/abs/sock")),
]

INVALID = [
    ("", "empty"),
    (" localhost:1", "whitespace"),
    ("ipv4:", "no address"),
    ("ipv4:::1", "brackets"),
    ("ipv4:example.com:1", "not an IPv4 address"),
    ("ipv6:127.0.0.1", "not an IPv6 address"),
    ("unix:", "no socket path"),
    ("unix://relative", "absolute path"),
    ("dns://resolver", "needs '/'"),
    ("dns:///", "no host name"),
    ("host:http", "port must be 1..65535"),
    ("host:0", "port must be 1..65535"),
    ("host:65536", "port must be 1..65535"),
    ("host:\u00b2", "port must be 1..65535"),
    ("http://host:1", "unknown scheme"),
    ("::1:80", "brackets"),
    ("[::1", "without ']'"),
    ("[::1]x", "after ']'"),
    (":80", "no host name"),
]


@pytest.mark.parametrize(("text", "expected"), VALID)
def test_valid_targets_parse(text: str, expected: Target) -> None:
    """Each form of doc/naming.md parses to its scheme, addresses and :authority."""
    assert parse_target(text) == expected


@pytest.mark.parametrize(("text", "words"), INVALID)
def test_malformed_targets_raise_value_error_saying_why(text: str, words: str) -> None:
    """A malformed target raises ValueError naming the target and the fault."""
    with pytest.raises(ValueError, match="gRPC target") as info:
        parse_target(text)
    assert words in str(info.value)


def test_a_non_string_target_raises_type_error() -> None:
    """A target that is not a str is a TypeError showing the form to use."""
    with pytest.raises(TypeError, match="dns:///host"):
        parse_target(b"localhost:1")  # type: ignore[arg-type]


ports = st.integers(1, 65535)
v4 = st.ip_addresses(v=4).map(str)
v6 = st.ip_addresses(v=6).map(str)


@given(st.lists(st.tuples(v4, ports), min_size=1, max_size=5))
def test_ipv4_lists_round_trip(pairs: list[tuple[str, int]]) -> None:
    """Any list of IPv4 address:port parses back to the same pairs, in order."""
    target = parse_target("ipv4:" + ",".join(f"{a}:{p}" for a, p in pairs))
    assert target.addresses == tuple(pairs)
    assert target.authority == f"{pairs[0][0]}:{pairs[0][1]}"


@given(st.lists(st.tuples(v6, ports), min_size=1, max_size=5))
def test_ipv6_lists_round_trip(pairs: list[tuple[str, int]]) -> None:
    """Any list of [IPv6]:port parses back to the same (normalised) pairs."""
    target = parse_target("ipv6:" + ",".join(f"[{a}]:{p}" for a, p in pairs))
    assert target.addresses == tuple((str(ipaddress.ip_address(a)), p) for a, p in pairs)
    assert target.authority == f"[{pairs[0][0]}]:{pairs[0][1]}"


@given(
    st.from_regex(r"[a-z][a-z0-9-]{0,20}(\.[a-z][a-z0-9-]{0,20}){0,3}", fullmatch=True),
    ports,
)
def test_dns_names_keep_their_authority(host: str, port: int) -> None:
    """A name with a port, with or without dns:///, resolves that name and port and
    sends it as written for :authority."""
    for text in (f"{host}:{port}", f"dns:///{host}:{port}"):
        target = parse_target(text)
        assert (target.scheme, target.host, target.port) == ("dns", host, port)
        assert target.authority == f"{host}:{port}"


@given(st.text(max_size=30))
def test_any_string_parses_or_raises_value_error(text: str) -> None:
    """No string makes the parser raise anything but ValueError."""
    try:
        target = parse_target(text)
    except ValueError:
        return
    assert target.scheme in ("dns", "ipv4", "ipv6", "unix")
