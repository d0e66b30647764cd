"""The partitioned mode (``incremental:partitioned``): a view whose query is not linear in a changed source but is
partitioned by a key (:mod:`mvsink.plan.partitioning`: TPC-H Q20's ``IN`` over a correlated aggregate, a join with an
``EXISTS``), refreshed by recomputing the changed keys' partitions, new minus old
(:func:`mvsink.incremental.partitioned.partitioned_corrections`). An aggregate with state takes the same
recompute for its input inside :mod:`~mvsink.incremental.modes.aggregate`; this mode serves the other views."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from mvsink import settings
from mvsink.incremental.groups import groupable
from mvsink.incremental.modes.base import Corrections, NotApplicable, switched
from mvsink.plan.partitioning import partitioning

if TYPE_CHECKING:
    from mvsink.core.batch import WriteMode
    from mvsink.incremental.modes.base import Change, Decision, PlanFacts, WriteInputs

MODE: Final = "incremental:partitioned"


class Partitioned:
    """A query partitioned by a key class tying every read of each changed source."""

    name: Final[WriteMode] = MODE
    title: Final = "partitioned"
    label: Final = "partitioned recompute"
    phrase: Final = "by a partitioned recompute"
    setting: Final = settings.INCREMENTAL_PARTITIONED
    guard: Final = (
        "the scan guard (MVSINK_INCREMENTAL_MAX_SCAN_RATIO) takes the full diff where the keys skip few files"
    )

    def applies(self, plan: PlanFacts, change: Change) -> Decision:
        return switched(self, settings.incremental_partitioned(), plan, change)

    def fits(self, plan: PlanFacts, change: Change) -> Decision:
        if plan.state is not None:
            return NotApplicable("the view keeps aggregate state (its input is recomputed there)", "unrelated")
        tree = plan.tree
        if isinstance(tree, str):
            return NotApplicable(tree, "shape")
        got = partitioning(tree, change.sources)
        if isinstance(got, str):
            return NotApplicable(f"not partitioned by a key: {got}", "shape")
        bad = [f.name for f in plan.result.schema.fields if not groupable(f.dataType)]
        if bad:
            return NotApplicable(f"column {bad[0]!r} has a type Spark cannot group rows by", "shape")
        return None

    def run(self, plan: PlanFacts, inputs: WriteInputs, change: Change) -> Corrections | NotApplicable:
        from mvsink.incremental.partitioned import partitioned_corrections

        tree = plan.tree
        assert not isinstance(tree, str)
        part = partitioning(tree, change.sources)
        assert not isinstance(part, str)
        corr, why = partitioned_corrections(
            inputs.changes(change),
            part,
            with_error=inputs.with_error,
            observation=inputs.check_obs,
            table=inputs.table,
        )
        if corr is None:
            return NotApplicable(why, "refused")
        return Corrections(corr, why, counts_change=True)  # (its check observation counted the change's rows)
