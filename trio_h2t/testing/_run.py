"""Run a state machine for a time budget, with flat memory.

Hypothesis keeps data about every example of a run until the run ends (its search
tree and per-example span records: measured on ``tests/test_connection_stateful.py``,
about 0.2 MB per example of 100 steps, 63 MB after 50 examples and 140 MB after
150, most of it allocated at ``hypothesis/core.py`` in the engine's per-example
bookkeeping), so one long run grows without bound: 2000+ examples of 200 steps
reached 7.3 GB. :func:`run_machine` runs the machine in *rounds* of
``round_examples`` examples, each round a fresh Hypothesis run (its memory freed
when it ends), until ``seconds`` have passed. Every round uses the settings'
example database, so a failure found in one round is saved there, replayed first by
every later run, and a rerun of the same command replays it at once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import final

from hypothesis import settings as Settings
from hypothesis.stateful import RuleBasedStateMachine, run_state_machine_as_test

__all__ = ["RunReport", "run_machine"]


@final
@dataclass(frozen=True, slots=True)
class RunReport:
    """What :func:`run_machine` did: rounds run, examples asked for, seconds spent."""

    rounds: int
    examples: int
    seconds: float


def run_machine(
    machine: type[RuleBasedStateMachine],
    *,
    seconds: float | None = None,
    settings: Settings | None = None,
    round_examples: int = 100,
) -> RunReport:
    """Run ``machine`` as a test: once with ``settings`` (default: the current
    profile's), or, with ``seconds``, in rounds of ``round_examples`` examples until
    that many seconds have passed (at least one round; a round started before the
    budget ran out finishes). Raises what the machine raised (Hypothesis's shrunk
    failure) at once; returns a :class:`RunReport` otherwise. Synchronous: call it
    from a plain test function, not from inside a Trio run.
    """
    base = settings if settings is not None else Settings()
    start = time.monotonic()
    if seconds is None:
        run_state_machine_as_test(machine, settings=base)
        return RunReport(1, base.max_examples, time.monotonic() - start)
    if seconds <= 0:
        raise ValueError(f"seconds must be > 0, not {seconds!r}")
    per_round = Settings(base, max_examples=round_examples)
    rounds = 0
    while True:
        run_state_machine_as_test(machine, settings=per_round)
        rounds += 1
        elapsed = time.monotonic() - start
        if elapsed >= seconds:
            return RunReport(rounds, rounds * round_examples, elapsed)
