"""The affected-groups mode (``incremental:groups``): an aggregate, DISTINCT or window view recomputed for the
groups the change touches (:func:`mvsink.incremental.groups.group_corrections`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from mvsink import settings
from mvsink.incremental.groups import MODE, group_corrections
from mvsink.incremental.modes.base import NotApplicable, outcome, switched
from mvsink.plan.splits import group_keys

if TYPE_CHECKING:
    from mvsink.core.batch import WriteMode
    from mvsink.incremental.modes.base import Change, Corrections, Decision, PlanFacts, WriteInputs

CHECKS = (
    "the view has checks (or its table has error rows): their totals cannot be counted from the affected groups alone"
)


class AffectedGroups:
    """A plan ``[Project/Sort/Filter]* -> Aggregate|Distinct|Window -> C``, C linear in every changed source,
    every key a plain column of the view."""

    name: Final[WriteMode] = MODE
    title: Final = "affected-groups"
    label: Final = "affected groups"
    phrase: Final = "by affected groups"
    setting: Final = settings.INCREMENTAL_GROUPS
    guard: Final = "the scan guard, and more affected groups than half the view's rows, take the full diff"

    def applies(self, plan: PlanFacts, change: Change) -> Decision:
        return switched(self, settings.incremental_groups(), plan, change)

    def fits(self, plan: PlanFacts, change: Change) -> Decision:
        if plan.with_error:
            return NotApplicable(CHECKS, "checks")
        tree = plan.desired_tree
        got = tree if isinstance(tree, str) else group_keys(tree, list(change.sources), plan.desired.columns)
        if isinstance(got, str):
            return NotApplicable(got, "shape")
        return None

    def run(self, plan: PlanFacts, inputs: WriteInputs, change: Change) -> Corrections | NotApplicable:
        corr, why = group_corrections(
            inputs.changes(change),
            desired=inputs.state.desired if inputs.state else inputs.result,
            table=inputs.table,
            table_df=inputs.table_df,
            with_error=inputs.with_error,
        )
        return outcome(corr, why)
