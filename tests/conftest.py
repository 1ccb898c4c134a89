"""Shared test configuration: Hypothesis profiles, and no hidden connection faults.

``ci`` (the default) keeps the suite within CI's budget; ``deep`` runs about 20 times
more examples for long local runs: ``HYPOTHESIS_PROFILE=deep bash scripts/run-tests``
(the whole-connection machine then runs for ``H2T_HYPOTHESIS_SECONDS``, 240 by
default, in rounds with flat memory; ``timeout=0`` and a larger value run overnight).

TLS: ``ca`` is a new test CA (trustme) for each test, ``server_ctx`` a server context
with its certificate for 127.0.0.1 and localhost, ``client_ctx`` a client context
trusting it (``_helpers_common.server_ssl_context`` / ``client_ssl_context``).

A connection is a fault boundary: a bug inside it ends that connection, is logged at
ERROR, and raises nowhere (docs/errors.md). So that no test passes over a bug that a
boundary contained, every test fails if such a fault is logged (the records marked
``h2t_fault``), unless it is marked ``@pytest.mark.injects_faults``: it causes them
on purpose and checks them itself.
"""

from __future__ import annotations

import logging
import os
import ssl
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
from _helpers_common import client_ssl_context, server_ssl_context
from hypothesis import HealthCheck, settings

if TYPE_CHECKING:
    import trustme

settings.register_profile(
    "ci",
    max_examples=100,
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "deep",
    max_examples=2000,
    stateful_step_count=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
if os.environ.get("HYPOTHESIS_PROFILE") == "deep":
    # One deep run of the whole-connection machine is 10 000 examples: it would not
    # end under the 300 s per-test timeout, and in one Hypothesis run its memory grows
    # with every example (trio_h2t/testing/_run.py). Deep runs it in rounds of 100
    # examples for 240 s instead; set H2T_HYPOTHESIS_SECONDS for longer runs.
    os.environ.setdefault("H2T_HYPOTHESIS_SECONDS", "240")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "injects_faults: the test causes connection faults on purpose (see conftest.py)",
    )
    config.addinivalue_line(
        "markers",
        "slow: a long test (a fresh venv, a benchmark, a long CLI run); scripts/run-tests"
        " and so .ci/run run it too: deselect with -m 'not slow' for a quick local run",
    )


class _FaultRecords(logging.Handler):
    """Keeps the connection-fault records (``extra={"h2t_fault": True}``)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "h2t_fault", False):
            self.records.append(record)


@pytest.fixture
def ca() -> trustme.CA:
    """A new test certificate authority."""
    import trustme

    return trustme.CA()


@pytest.fixture
def server_ctx(ca: trustme.CA) -> ssl.SSLContext:
    """A TLS server context with ``ca``'s certificate for 127.0.0.1 and localhost."""
    return server_ssl_context(ca)


@pytest.fixture
def client_ctx(ca: trustme.CA) -> ssl.SSLContext:
    """A TLS client context that trusts ``ca``."""
    return client_ssl_context(ca)


@pytest.fixture(autouse=True)
def _no_hidden_faults(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail a test that logged a connection fault it did not inject on purpose."""
    handler = _FaultRecords()
    logger = logging.getLogger("trio_h2t")
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
    if handler.records and request.node.get_closest_marker("injects_faults") is None:
        first = handler.records[0]
        pytest.fail(
            f"{len(handler.records)} connection fault(s) logged (contained, but a bug):"
            f" {first.getMessage()}: {first.exc_info[1] if first.exc_info else ''!r}",
            pytrace=False,
        )
