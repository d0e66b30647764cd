"""The aggregate-state mode (``incremental:aggregate``): COUNT/SUM/AVG/MIN/MAX views refreshed from hidden state
their table keeps (DESIGN.md section 8).

A view ``SELECT keys, f(COUNT/SUM/AVG(...)) ... FROM ... [WHERE ...] GROUP BY keys`` (or a global
aggregate) keeps, beside each group's row in its own table, hidden columns with the group's
accumulable state: its row count (``_mv_agg_count``) and, per aggregate argument, its non-null count
(``_mv_agg_n<i>``) and, for SUM and AVG, its sum (``_mv_agg_s<i>``, in Spark's own SUM result type); for MIN
(MAX) the extreme (``_mv_agg_min<i>``) and how many rows hold it (``_mv_agg_minc<i>``, up to
:data:`~mvsink.incremental.statequeries.MULTIPLICITY_CAP`). A change that deletes every row of a group's kept
extreme refuses the mode (the next extreme is not in the state): affected groups or the full diff recompute.
They are written by the same appends as the visible columns: the full diff computes them with the
view's query (the *state query*: the user's query with the state aggregates appended), so any refresh
that takes the full diff rebuilds them.

A refresh from the sources' changes then costs what the change costs:

0. The scan guard (:func:`~mvsink.incremental.scanguard.scan_guard`): the full diff when the change terms would read more than it.
1. Δin, the change of the aggregate's input C (the *input query*: the keys and the aggregates'
   arguments over the query's FROM/WHERE), by the telescoping over change sets of
   :mod:`mvsink.incremental.linear` (one term per changed source, signed by ``_mv_sign``, where the
   source is read once directly in FROM/JOIN).
2. Δ per group: the signed row count, non-null counts and sums of Δin; a group whose Δ is zero in
   every part (a copy-on-write rewrite's ± pairs) is not affected. Collected: the one Spark job.
3. Up to :data:`~mvsink.engines.duckdb.MAX_DRIVER_ROWS` groups, in the driver (:func:`~mvsink.incremental.aggmerge.merge_in_driver`): the persisted rows
   of only those groups (pyarrow over the table's files, a null-safe key match in DuckDB), old ⊕ Δ in
   exact Python arithmetic, finalised in Python (:mod:`mvsink.incremental.aggfacts`, where every column is a key or
   a bare COUNT/SUM/AVG) or by Spark over local rows, with Spark's result types and NULL rules
   (SUM of no non-null value is NULL, AVG of integers is DOUBLE, AVG of DECIMAL(p,s) exactly Spark's AVG:
   :func:`~mvsink.incremental.statequeries.average_sql`); a group whose count reaches 0 disappears; a global aggregate keeps its one row. More groups:
   the same by Spark (:func:`~mvsink.incremental.aggmerge.merge_by_spark`).
4. Corrections = the old rows retracted, the new ones added (an Arrow table from the driver path,
   staged with pyarrow; a DataFrame from Spark's).

Classification is on sqlglot's tree of the query (which select items are keys and which are COUNT/SUM/AVG
expressions); what decides safety is Spark: the input query must be linear in every changed source
(:func:`mvsink.plan.linearity.linearity` on Spark's analysed plan, failing closed), the state query's visible
columns must be exactly the user's (names and types), and SUM/AVG arguments must be integers or
decimals (sums of FLOAT/DOUBLE are not exact under ``old + Δ``). Invariant checks on the affected
groups (one live row per key, 0 <= non-null <= count, a decimal sum that fits its type) fall back to the
full diff on violation. Anything else falls back too, with the reason.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Final

from mvsink import settings
from mvsink.core.costrecord import note
from mvsink.incremental.aggdelta import group_deltas
from mvsink.incremental.aggfacts import aggregate_facts
from mvsink.incremental.aggmerge import merge_by_spark, merge_in_driver
from mvsink.incremental.driverfacts import remember, remember_partitioned, term_key
from mvsink.incremental.modes.base import NotApplicable, outcome, switched
from mvsink.plan.linearity import nonlinear_reason
from mvsink.plan.partitioning import partitioning

if TYPE_CHECKING:
    from collections.abc import Callable

    import pyarrow as pa
    from pyspark.sql import DataFrame

    from mvsink.core.batch import WriteMode
    from mvsink.core.table import ViewTable
    from mvsink.incremental.aggplan import StatePlan
    from mvsink.incremental.modes.base import Change, Corrections, Decision, PlanFacts, WriteInputs
    from mvsink.incremental.telescope import ChangeInputs
    from mvsink.plan.partitioning import Partitioning
    from mvsink.plan.tree import PlanNode

log = logging.getLogger(__name__)

MODE: Final = "incremental:aggregate"


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
                part = None
                if not isinstance(tree, str) and settings.incremental_partitioned():
                    part = partitioning(tree, change.sources)
                if part is None or isinstance(part, str):
                    also = f"; and not partitioned by a key: {part}" if part else ""
                    return NotApplicable(f"the aggregate's input is not linear in {s!r}: {why}{also}", "shape")
        return None

    @staticmethod
    def _unrelated(plan: PlanFacts) -> NotApplicable | None:
        if plan.state is None:
            why = f" ({plan.no_state})" if plan.no_state else ""
            return NotApplicable(f"the view keeps no aggregate state{why}", "unrelated")
        if plan.with_error:
            return NotApplicable("the view has checks: its table keeps no usable aggregate state", "unrelated")
        return None

    def run(self, plan: PlanFacts, inputs: WriteInputs, change: Change) -> Corrections | NotApplicable:
        tree = plan.input_tree  # (read and found linear in, or partitioned on, every changed source by ``fits``)
        assert inputs.state is not None and not isinstance(tree, str)
        part = None
        if any(nonlinear_reason(tree, s) for s in change.sources):
            got = partitioning(tree, change.sources)
            assert not isinstance(got, str)
            part = got
        corr, why = aggregate_corrections(
            inputs.changes(change),
            plan=inputs.state,
            tree=tree,
            table=inputs.table,
            table_df=inputs.table_df,
            part=part,
        )
        return outcome(corr, why)


def aggregate_corrections(
    ci: ChangeInputs,
    *,
    plan: StatePlan,
    tree: PlanNode,
    table: ViewTable,
    table_df: Callable[[], DataFrame],
    part: Partitioning | None = None,
) -> tuple[DataFrame | pa.Table | None, str]:
    """Corrections of ``ci.desc`` from the accumulable state and the sources' changes, or (None, why not).

    ``tree``: the aggregate input's analysed plan, linear in every changed source (the mode's ``fits`` read it), or
    partitioned by ``part`` (Δin by a partitioned recompute: :mod:`mvsink.incremental.partitioned`).
    ``table``/``table_df()``: the view's table (every column, the state included) at the version write
    read (delta-rs's handle; Spark's read of it, made only when needed). Leaves every source registered at the
    version ``ci.desc`` reads.

    Up to :data:`~mvsink.engines.arrow.MAX_DRIVER_ROWS` affected groups (the usual case) cost one Spark job: Δ per group is
    collected, the table's rows of those groups are read with delta-rs, and old ⊕ Δ is merged and checked
    in the driver; the corrections are then an Arrow table (staged without Spark).
    """
    facts = aggregate_facts(ci.spark, plan)
    deltas = group_deltas(ci, plan, tree, table, facts, part=part)  # (the one place the changes are read)
    if isinstance(deltas, str):
        return None, deltas
    lower, at = ci.desc.lower, ci.desc.time
    t2 = time.monotonic()
    merged: tuple[DataFrame | pa.Table, int] | str
    if deltas.rows is not None:
        merged = merge_in_driver(facts, deltas.rows, table, lower=lower, at=at, spark=ci.spark, plan=plan)
        where = "in the driver"
    else:
        assert deltas.frame is not None
        merged = merge_by_spark(ci.spark, plan, deltas.frame, table_df, lower=lower, at=at)
        where = "by Spark"
    if isinstance(merged, str):
        return None, merged
    corr, n_keys = merged
    note(groups=n_keys)
    if deltas.in_driver and deltas.rows is not None and part is None:  # no Spark job: the next may need no Spark
        remember(ci, plan, tree, facts, table)
    elif deltas.kept is not None and deltas.rows is not None:  # (a partitioned recompute DuckDB evaluated)
        remember_partitioned(ci, plan, tree, facts, table, {term_key([s.name for s in ci.changed]): deltas.kept})
    log.info(
        "view %s: aggregate state of %d affected group(s): planned in %.2fs, change in %.2fs, merged %s in %.2fs",
        ci.view.name,
        n_keys,
        deltas.planned,
        deltas.collected,
        where,
        time.monotonic() - t2,
    )
    return corr, (
        f"{n_keys} affected group(s) updated from their state and the changes of {', '.join(deltas.sources)}"
        + (" (change terms evaluated in the driver)" if deltas.in_driver and part is None else "")
        + (f" (a partitioned recompute on {part.describe()})" if part is not None else "")
        + (" (its queries evaluated by DuckDB in the driver)" if deltas.in_driver and part is not None else "")
    )
