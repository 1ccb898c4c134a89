"""The interop cases and our client's four call kinds through nginx's grpc_pass,
in front of three interop backends (tests/proxies/conftest.py; docs/grpc.md)."""

from __future__ import annotations

import pytest

from trio_h2t import grpc

from ._checks import big_client_stream, four_kinds, run_all_cases, silent_stream_is_cut
from .conftest import Proxy, binary

#: Cases that cannot pass through nginx, with the reason (none found so far).
FAILS: dict[str, str] = {}


def test_interop_cases_through_nginx(nginx: Proxy) -> None:
    """Every interop case passes through nginx but those FAILS lists."""
    results = run_all_cases(nginx)
    failed = {name: line for name, line in results.items() if line != "PASS"}
    assert set(failed) == set(FAILS), failed


def test_nginx_spreads_calls_over_three_backends(nginx: Proxy) -> None:
    """After the interop run and more, each of the three backends served calls."""
    run_all_cases(nginx)
    calls = nginx.calls()
    assert min(calls) >= sum(calls) / 6, calls  # round-robin: about a third each


async def test_open_channel_four_kinds_through_nginx(nginx: Proxy) -> None:
    """open_channel's unary, server-, client- and bidi-streaming calls pass through nginx."""
    before = sum(nginx.calls())
    await four_kinds(nginx, rounds=3)
    assert sum(nginx.calls()) - before == 12


async def test_two_mib_client_stream_through_nginx(nginx: Proxy) -> None:
    """A 2 MiB client stream passes through nginx (no request body limit)."""
    await big_client_stream(nginx)


def test_a_missing_proxy_fails_the_test_naming_the_package() -> None:
    """A proxy binary that is not installed fails (never skips) with the apt-get line."""
    with pytest.raises(pytest.fail.Exception, match=r"apt-get install no-such-proxy"):
        binary("no-such-proxy")


async def test_1s_read_timeout_cuts_a_silent_stream(nginx_1s_read_timeout: Proxy) -> None:
    """nginx with `grpc_read_timeout 1s` ends a server stream silent for 2 s (docs/grpc.md)."""
    error = await silent_stream_is_cut(nginx_1s_read_timeout)
    assert (error.code, error.details) == (
        grpc.StatusCode.INTERNAL,
        "stream reset by the server with INTERNAL_ERROR",
    )
