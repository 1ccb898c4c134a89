"""The interop cases and our client's four call kinds through haproxy (proto h2),
in front of three interop backends (tests/proxies/conftest.py; docs/grpc.md)."""

from __future__ import annotations

from trio_h2t import grpc

from ._checks import big_client_stream, four_kinds, run_all_cases, silent_stream_is_cut
from .conftest import Proxy

#: Cases that cannot pass through haproxy, with the reason (none found so far).
FAILS: dict[str, str] = {}


def test_interop_cases_through_haproxy(haproxy: Proxy) -> None:
    """Every interop case passes through haproxy but those FAILS lists."""
    results = run_all_cases(haproxy)
    failed = {name: line for name, line in results.items() if line != "PASS"}
    assert set(failed) == set(FAILS), failed


def test_haproxy_spreads_calls_over_three_backends(haproxy: Proxy) -> None:
    """After the interop run and more, each of the three backends served calls."""
    run_all_cases(haproxy)
    calls = haproxy.calls()
    assert min(calls) >= sum(calls) / 6, calls  # round-robin: about a third each


async def test_open_channel_four_kinds_through_haproxy(haproxy: Proxy) -> None:
    """open_channel's unary, server-, client- and bidi-streaming calls pass through haproxy."""
    before = sum(haproxy.calls())
    await four_kinds(haproxy, rounds=3)
    assert sum(haproxy.calls()) - before == 12


async def test_two_mib_client_stream_through_haproxy(haproxy: Proxy) -> None:
    """A 2 MiB client stream passes through haproxy (no request body limit)."""
    await big_client_stream(haproxy)


async def test_1s_server_timeout_cuts_a_silent_stream(haproxy_1s_server_timeout: Proxy) -> None:
    """haproxy with `timeout server 1s` ends a server stream silent for 2 s (docs/grpc.md)."""
    error = await silent_stream_is_cut(haproxy_1s_server_timeout)
    assert (error.code, error.details) == (
        grpc.StatusCode.INTERNAL,
        "the server ended the call without a grpc-status",
    )
