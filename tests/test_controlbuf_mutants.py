"""Tests that prove the stateful tests can fail: three broken control buffers.

Each mutant is a subclass of the real ``ControlBuffer`` that overrides only the methods
it breaks, so the rest of its behaviour is the real one. ``ControlBuffer`` is ``@final``
to keep users from subclassing it; these deliberate mutants are the one exception, so
each ``class`` line carries ``type: ignore[misc]``.

Every test runs ``test_controlbuf_stateful.ControlBufferMachine`` and checks which
invariant the suite reports as broken. The settings are the ``ci`` profile's (examples,
steps, deadline) with two changes: no example database, so a mutant's failures are
never replayed against anything else, and no shrinking: a mutant only has to be
caught, and shrinking its counterexample would cost minutes.
"""

from __future__ import annotations

import dataclasses

import trio
import trio.lowlevel
from hypothesis import Phase, settings
from hypothesis.errors import Flaky
from hypothesis.stateful import run_state_machine_as_test
from test_controlbuf_stateful import ControlBufferMachine, InvariantViolation

from trio_h2t._controlbuf import ControlBuffer, ControlBufferStatistics
from trio_h2t._items import ControlItem

SETTINGS = settings(
    settings.get_profile("ci"),
    database=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
)


# ---------------------------------------------------------------- the mutants


class EdgeTriggeredGate(ControlBuffer):  # type: ignore[misc]
    """Mutant 1: the gate is a stored ``trio.Event`` that a put replaces.

    The edge-triggered design ``_controlbuf.py`` warns about, in the style of
    grpc-go's throttle channel: a put that leaves the count at or above the limit
    closes the gate by storing a *new* Event, and only the get that takes the count
    from ``limit`` to ``limit - 1`` sets it. A put at or above the limit while a
    reader waits therefore swaps the Event from under it: the reader waits on the old
    one, which nobody will ever set, not even ``finish`` (invariant c). And a woken
    reader does not re-check the count, so a put between its wake-up and its turn to
    run lets it through a closed gate (invariant b).
    """

    __slots__ = ("_gate", "_parked")

    def __init__(self, *, throttle_limit: int) -> None:
        super().__init__(throttle_limit=throttle_limit)
        self._gate = trio.Event()
        self._gate.set()  # open
        self._parked = 0  # readers waiting on any Event, old or current

    def put(self, item: ControlItem) -> None:
        super().put(item)
        if item.throttled and self._throttled >= self._limit:
            self._gate = trio.Event()  # MUTATION: replaces the Event readers wait on

    def get_nowait(self) -> ControlItem:
        item = super().get_nowait()
        if item.throttled and self._throttled == self._limit - 1:
            self._gate.set()  # edge-triggered: only on this one transition
        return item

    async def wait_unthrottled(self) -> None:
        await trio.lowlevel.checkpoint_if_cancelled()
        if self._finished:
            raise self._closing_error()
        if self._throttled < self._limit:
            await trio.lowlevel.cancel_shielded_checkpoint()
            return
        self._throttle_waits += 1
        self._parked += 1
        try:
            await self._gate.wait()
        finally:
            self._parked -= 1
        if self._finished:
            raise self._closing_error()

    def finish(self, error: BaseException) -> None:
        try:
            super().finish(error)
        finally:
            self._gate.set()

    def statistics(self) -> ControlBufferStatistics:
        return dataclasses.replace(super().statistics(), readers_waiting=self._parked)


class DecrementAtSwap(ControlBuffer):  # type: ignore[misc]
    """Mutant 2: throttled items stop counting when swapped into the batch, not when taken."""

    __slots__ = ()

    def get_nowait(self) -> ControlItem:
        if self._finished:
            self.discard_batch()
            raise self._closing_error()
        batch = self._batch
        if not batch:
            if not self._queue:
                raise trio.WouldBlock
            self._batch, self._queue = self._queue, batch
            batch = self._batch
            self._batches += 1
            # MUTATION: the whole batch leaves the count at once.
            self._throttled -= sum(item.throttled for item in batch)
            self._update_gate()
        item = batch.popleft()
        self._taken += 1
        return item


class FinishForgetsBatch(ControlBuffer):  # type: ignore[misc]
    """Mutant 3: finish treats loopy's batch as already handed out.

    After ``finish``, ``get_nowait`` (and so ``get``) keeps serving the batch, and
    ``discard_batch`` orphans nothing.
    """

    __slots__ = ()

    def get_nowait(self) -> ControlItem:
        if self._finished and self._batch:
            # MUTATION: the batch was taken before finish, so it is still served.
            item = self._batch.popleft()
            self._taken += 1
            self._throttled -= item.throttled
            return item
        return super().get_nowait()

    def discard_batch(self) -> None:
        return  # MUTATION: the batch is never orphaned


class EdgeTriggeredGateMachine(ControlBufferMachine):
    """The stateful suite, run against mutant 1."""

    buffer_class = EdgeTriggeredGate


class DecrementAtSwapMachine(ControlBufferMachine):
    """The stateful suite, run against mutant 2."""

    buffer_class = DecrementAtSwap


class FinishForgetsBatchMachine(ControlBufferMachine):
    """The stateful suite, run against mutant 3."""

    buffer_class = FinishForgetsBatch


# ---------------------------------------------------------------- running the suite


def broken_invariants(machine: type[ControlBufferMachine]) -> set[str]:
    """Run the stateful suite on ``machine``; return the invariants it reports broken.

    Anything other than an :class:`InvariantViolation` (a crash, a harness error) is
    re-raised, and so is a failure Hypothesis could not reproduce: a mutant must be
    caught by an invariant, every time, not by accident.
    """
    try:
        run_state_machine_as_test(machine, settings=SETTINGS)
    except InvariantViolation as exc:
        return {exc.invariant}
    except BaseExceptionGroup as group:  # Hypothesis found several distinct failures
        violations, rest = group.split(InvariantViolation)
        if rest is not None or isinstance(group, Flaky):
            raise
        assert violations is not None
        return {exc.invariant for exc in _leaves(violations) if isinstance(exc, InvariantViolation)}
    return set()


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    leaves: list[BaseException] = []
    for exc in group.exceptions:
        leaves.extend(_leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    return leaves


def test_real_buffer_passes() -> None:
    """The real ControlBuffer passes the same run that catches every mutant."""
    assert broken_invariants(ControlBufferMachine) == set()


def test_edge_triggered_gate_is_caught() -> None:
    """A gate replaced under a waiting reader strands it (c) or lets it past a closed gate (b)."""
    assert broken_invariants(EdgeTriggeredGateMachine) & {"b", "c"}


def test_decrement_at_swap_is_caught() -> None:
    """Uncounting throttled items at the swap makes the throttle count wrong."""
    assert "a" in broken_invariants(DecrementAtSwapMachine)


def test_finish_forgetting_the_batch_is_caught() -> None:
    """Serving or keeping the batch after finish breaks nothing-after-finish or exactly-once."""
    assert broken_invariants(FinishForgetsBatchMachine) & {"d", "e"}
