"""The top-k mode (``incremental:topk``): ``... ORDER BY o LIMIT k`` with a declared key, refreshed from the
persisted top k (:func:`mvsink.incremental.topk.topk_corrections`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from mvsink import settings
from mvsink.incremental.groups import groupable
from mvsink.incremental.modes.base import NotApplicable, outcome, switched
from mvsink.incremental.topk import MODE, NOT_TOPK, key_positions, topk_corrections, topk_split

if TYPE_CHECKING:
    from mvsink.core.batch import WriteMode
    from mvsink.incremental.modes.base import Change, Corrections, Decision, PlanFacts, WriteInputs

CHECKS = "the view has checks (or its table has error rows): their totals need the whole view"


class TopK:
    """``[Project/Sort]* -> LIMIT k -> Sort(o) -> M``, M linear in every changed source, o total by the key."""

    name: Final[WriteMode] = MODE
    title: Final = "top-k"
    label: Final = "top-k"
    phrase: Final = "as a top-k"
    setting: Final = settings.INCREMENTAL_TOPK
    guard: Final = "a key that turns out not unique takes the full diff"

    def applies(self, plan: PlanFacts, change: Change) -> Decision:
        return switched(self, settings.incremental_topk(), plan, change)

    def fits(self, plan: PlanFacts, change: Change) -> Decision:
        tree = plan.tree
        if isinstance(tree, str):
            return NotApplicable(tree, "shape")
        split = topk_split(tree, list(change.sources))
        if isinstance(split, str):  # (topk_split words "no ORDER BY ... LIMIT at the top" with NOT_TOPK)
            return NotApplicable(split, "unrelated" if split.startswith(NOT_TOPK) else "shape")
        if plan.with_error:
            return NotApplicable(CHECKS, "checks")
        key = key_positions(plan.view, plan.result, split)
        if isinstance(key, str):
            return NotApplicable(key, "shape")
        bad = [f.name for f in plan.result.schema.fields if not groupable(f.dataType)]
        if bad:
            return NotApplicable(f"column {bad[0]!r} has a type Spark cannot group rows by", "shape")
        if not plan.plan_readable:
            return NotApplicable("over this Spark Connect server the query's plan cannot be taken apart", "shape")
        return None

    def run(self, plan: PlanFacts, inputs: WriteInputs, change: Change) -> Corrections | NotApplicable:
        corr, why = topk_corrections(
            inputs.changes(change),
            desired=inputs.result,
            table=inputs.table,
            table_df=inputs.table_df,
            with_error=inputs.with_error,
        )
        return outcome(corr, why)
