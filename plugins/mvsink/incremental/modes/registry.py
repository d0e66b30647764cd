"""The refresh modes in the order write tries them, and the choice among them.

The first mode that applies (:meth:`~mvsink.incremental.modes.base.RefreshMode.applies`) and succeeds computes the
corrections; a refusal of kind ``change`` (also the change's own, :attr:`~mvsink.incremental.modes.base.Change.refusal`)
ends the search. The full diff (:class:`~mvsink.incremental.modes.full.FullDiff`) is the last mode: it always
applies, and its reason is :func:`~mvsink.incremental.modes.base.combined_reason` of the refusals before it.
``mvsink explain`` asks the same :func:`choose` without running a mode (``run=False``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from mvsink.incremental.modes.base import Change, NotApplicable, PlanFacts, RefreshMode, combined_reason
from mvsink.incremental.modes.full import FullDiff
from mvsink.incremental.modes.ordered import INCREMENTAL_MODES

if TYPE_CHECKING:
    from mvsink.core.batch import WriteMode

FULL_DIFF = FullDiff()
REFRESH_MODES: tuple[RefreshMode, ...] = (*INCREMENTAL_MODES, FULL_DIFF)

Refusals = tuple[tuple[RefreshMode, NotApplicable], ...]


@dataclasses.dataclass(frozen=True)
class Choice:
    """The corrections (None when judged without running, or when none of the modes given ran), the name of the
    mode that computed them (``full`` when none ran), and why.

    ``chosen``: that mode (None when none of the modes given ran); ``refusals``: the modes tried before it, each
    with why not; ``counts_change``: see :class:`~mvsink.incremental.modes.base.Corrections`.
    """

    corrections: Any
    mode: WriteMode
    reason: str
    chosen: RefreshMode | None = None
    refusals: Refusals = ()
    counts_change: bool = False

    @property
    def full(self) -> bool:
        """Is it the full diff (no incremental mode applied)?"""
        return self.chosen is None or isinstance(self.chosen, FullDiff)


def choose(modes: Sequence[RefreshMode], plan: PlanFacts, change: Change, inputs: Any, *, run: bool = True) -> Choice:
    """Run the first of ``modes`` that applies and succeeds (see the module docstring); with ``run=False``,
    the first that applies, judged on the plan alone (no data read). When none of ``modes`` runs (they hold no
    full diff), the choice is ``full`` with no corrections."""
    refusals: list[tuple[RefreshMode, NotApplicable]] = []
    ended = False  # a refusal of the change: only the full diff is left
    for mode in modes:
        full = isinstance(mode, FullDiff)
        if ended and not full:
            continue
        decision = mode.applies(plan, change) if full else change.refusal or mode.applies(plan, change)
        if decision is None:
            if not run:
                why = combined_reason(refusals) if full else ""
                return Choice(None, mode.name, why, mode, tuple(refusals))
            got = mode.run(plan, inputs, change)
            if not isinstance(got, NotApplicable):
                why = _full_reason(refusals, got.reason) if full else got.reason
                return Choice(got.data, mode.name, why, mode, tuple(refusals), got.counts_change)
            decision = got
        refusals.append((mode, decision))
        ended = ended or decision.kind == "change"
    return Choice(None, "full", combined_reason(refusals), None, tuple(refusals))


def _full_reason(refusals: list[tuple[RefreshMode, NotApplicable]], how: str) -> str:
    """The full diff's reason: why no mode ran, then how it ran (its engine), in parentheses."""
    why = combined_reason(refusals)
    return f"{why} ({how})" if how else why


def decide(modes: Sequence[RefreshMode], plan: PlanFacts, change: Change) -> tuple[RefreshMode | None, str]:
    """The incremental mode a change would take, judged on the plan alone (no data read), or (None, why none
    would): :func:`choose` without running."""
    got = choose(modes, plan, change, None, run=False)
    return (None, got.reason) if got.full else (got.chosen, "")
