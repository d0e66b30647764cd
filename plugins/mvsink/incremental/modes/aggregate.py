"""The aggregate-state mode (``incremental:aggregate``): COUNT/SUM/AVG views refreshed from the hidden state
their table keeps (:func:`mvsink.incremental.aggstate.aggregate_corrections`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from mvsink import settings
from mvsink.incremental.aggstate import MODE, aggregate_corrections
from mvsink.incremental.modes.base import NotApplicable, outcome, switched
from mvsink.plan.linearity import nonlinear_reason

if TYPE_CHECKING:
    from mvsink.core.batch import WriteMode
    from mvsink.incremental.modes.base import Change, Corrections, Decision, PlanFacts, WriteInputs


class AggregateState:
    """An aggregate whose table keeps accumulable state, over an input linear in every changed source."""

    name: Final[WriteMode] = MODE
    title: Final = "aggregate-state"
    label: Final = "aggregate state"
    phrase: Final = "from the aggregate state"
    setting: Final = settings.INCREMENTAL_AGGREGATE
    guard: Final = (
        "the scan guard (MVSINK_INCREMENTAL_MAX_SCAN_RATIO) and the state's invariants may take the full diff"
    )

    def applies(self, plan: PlanFacts, change: Change) -> Decision:
        return self._unrelated(plan) or switched(self, settings.incremental_aggregate(), plan, change)

    def fits(self, plan: PlanFacts, change: Change) -> Decision:
        unrelated = self._unrelated(plan)
        if unrelated is not None:
            return unrelated
        tree = plan.input_tree
        for s in change.sources:
            why = tree if isinstance(tree, str) else nonlinear_reason(tree, s)
            if why:
                return NotApplicable(f"the aggregate's input is not linear in {s!r}: {why}", "shape")
        return None

    @staticmethod
    def _unrelated(plan: PlanFacts) -> NotApplicable | None:
        if plan.state is None:
            why = f" ({plan.no_state})" if plan.no_state else ""
            return NotApplicable(f"the view keeps no aggregate state{why}", "unrelated")
        if plan.with_error:
            return NotApplicable("the view has checks: its table keeps no usable aggregate state", "unrelated")
        return None

    def run(self, inputs: WriteInputs, change: Change) -> Corrections | NotApplicable:
        assert inputs.state is not None
        corr, why = aggregate_corrections(
            inputs.changes(change),
            plan=inputs.state,
            table=inputs.table,
            table_df=inputs.table_df,
        )
        return outcome(corr, why)
