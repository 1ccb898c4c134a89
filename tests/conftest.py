"""Shared test configuration: Hypothesis profiles.

``ci`` (the default) keeps the suite within CI's budget; ``deep`` runs about 20 times
more examples for long local runs: ``HYPOTHESIS_PROFILE=deep bash scripts/run-tests``.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

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
