"""The linear mode (``incremental``): the query over each changed source's inserted and deleted rows
(:func:`mvsink.incremental.linear.incremental_corrections`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from mvsink.incremental.linear import NOT_LINEAR, incremental_corrections
from mvsink.incremental.modes.base import Corrections, NotApplicable
from mvsink.plan.linearity import nonlinear_reason

if TYPE_CHECKING:
    from mvsink.core.batch import WriteMode
    from mvsink.incremental.modes.base import Change, Decision, PlanFacts, WriteInputs
    from mvsink.settings import Setting


class Linear:
    """A query linear in every changed source: its change is the query over the change terms."""

    name: Final[WriteMode] = "incremental"
    title: Final = "linear"
    label: Final = "incremental (linear)"
    phrase: Final[str | None] = None  # the first mode: its reason leads the full diff's
    setting: Final[Setting | None] = None
    guard: Final = "a change set over MVSINK_INCREMENTAL_MAX_FRACTION of its table's files takes the full diff"

    def applies(self, plan: PlanFacts, change: Change) -> Decision:
        return self.fits(plan, change)

    def fits(self, plan: PlanFacts, change: Change) -> Decision:
        first = change.sources[0] if change.sources else "?"
        if plan.state is not None:  # an aggregate on top (it has state) is linear in no source
            return NotApplicable(f"{NOT_LINEAR} {first!r}: the view's Aggregate is above it", "shape")
        tree = plan.tree
        if isinstance(tree, str):
            return NotApplicable(f"{NOT_LINEAR} {first!r}: {tree}", "shape")
        for s in change.sources:
            why = nonlinear_reason(tree, s)
            if why:
                return NotApplicable(f"{NOT_LINEAR} {s!r}: {why}", "shape")
        return None

    def run(self, plan: PlanFacts, inputs: WriteInputs, change: Change) -> Corrections | NotApplicable:
        corr, reason = incremental_corrections(
            inputs.changes(change),
            desired=inputs.result,
            with_error=inputs.with_error,
            observation=inputs.check_obs,
            table=inputs.table,
        )
        if corr is not None:  # (its check observation counted the change's rows)
            return Corrections(corr, reason, counts_change=True)
        # The plan passed (``applies``): what fails now is the change sets (unreadable, too large), which no
        # later mode could use either.
        return NotApplicable(reason, "change")
