"""The full diff (``full``): ``desired - persisted`` over the whole view, the mode that always applies and is
tried last (:data:`mvsink.incremental.modes.registry.REFRESH_MODES`).

Its reason is why no incremental mode ran: the other modes' refusals, or — its own decision, before any mode is
tried — why the refresh's change cannot be used at all (:func:`refresh_change`: no earlier refresh, the table
moved, no check counts to start from, ``incremental: false``, a source's change unknown). Three engines compute it,
tried in this order: DuckDB in the refreshing process (:func:`mvsink.incremental.modes.duckdbdiff.duckdb_full_diff`) for a
select-project-join view, an aggregate of bare COUNT/SUM/AVG/MIN/MAX over one or a top-k over one, without checks
over plain local sources, of any size within its bounds; the refreshing
process (:func:`mvsink.engines.arrow.full_diff`, the query collected from Spark) for a small view without checks;
else Spark (:func:`spark_full_diff`).

A first build — no table yet, or none of its updates below the batch's ``lower`` (:func:`nothing_persisted`) — has
``desired - persisted = desired``: :func:`first_build` writes the query's rows (after the view's checks) as they
are, each with ``_mv_diff = 1``, without a comparison, a shuffle or a read of the table.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final

from mvsink.columns import DIFF, ERROR, TIME
from mvsink.core.checks import add_counts
from mvsink.core.readlog import record_full_diff_reads
from mvsink.definitions.intermediate import not_incremental
from mvsink.engines.arrow import full_diff
from mvsink.incremental.driverfacts import remember, remember_linear
from mvsink.incremental.linear import changed_sources, source_check
from mvsink.incremental.modes.base import Change, Corrections, Decision, NotApplicable, PlanFacts, WriteInputs
from mvsink.incremental.modes.duckdbdiff import duckdb_full_diff
from mvsink.incremental.partitioned import keep_scalars
from mvsink.spark.declaredchecks import apply_checks
from mvsink.spark.sources import arrow_table_schema
from mvsink.spark.transforms import corrections, quote_name

if TYPE_CHECKING:
    from collections.abc import Sequence

    import pyarrow as pa
    from pyspark.sql import DataFrame

    from mvsink.core.batch import WriteMode
    from mvsink.core.table import ViewTable
    from mvsink.incremental.aggplan import StatePlan
    from mvsink.incremental.telescope import ChangeInputs
    from mvsink.plan.tree import PlanNode
    from mvsink.settings import Setting

log = logging.getLogger(__name__)

NO_EARLIER = "no earlier refresh of this definition to start from"
NO_CHECK_COUNTS = "the last refresh recorded no check counts to start from"
FIRST_BUILD = "a first build: the table holds nothing yet, the query's rows written as they are"


class FullDiff:
    """The full diff: always applies; its reason is the refusals before it (see the module docstring)."""

    name: Final[WriteMode] = "full"
    title: Final = "full diff"
    label: Final = "full diff"
    phrase: Final[str | None] = None
    setting: Final[Setting | None] = None
    guard: Final[str | None] = None

    def applies(self, plan: PlanFacts, change: Change) -> Decision:
        return None

    def fits(self, plan: PlanFacts, change: Change) -> Decision:
        return None

    def run(self, plan: PlanFacts, inputs: WriteInputs, change: Change) -> Corrections:
        """The corrections, computed in the refreshing process by DuckDB where it evaluates the view exactly, or
        (the query collected) when the view is small and has no checks (its ``reason`` then says so), else by Spark
        (lazily: the stage runs it)."""
        record_full_diff_reads(
            inputs.desc.sources, inputs.desc.target, inputs.table.frontier.version if inputs.table.exists else -1
        )
        desired = inputs.state.desired if inputs.state else inputs.result
        if nothing_persisted(inputs.table, lower=inputs.desc.upper):  # (a foreign writer may stamp rows past lower)
            if inputs.view.incremental:
                keep_scalars(inputs.spark, inputs.desc, inputs.view.query)
            built = duckdb_full_diff(plan, inputs, first_build=True)
            if not isinstance(built, str):
                remember_built(plan, inputs, columns=built.column_names)
                return Corrections(built, f"{FIRST_BUILD}, by DuckDB")
            log.info("view %s: the first build not in DuckDB: %s", inputs.view.name, built)
            rows = first_build(inputs, desired)
            if not inputs.with_error:  # (its columns: the query's, then the time and the diff)
                remember_built(plan, inputs, columns=[*desired.columns, TIME, DIFF])
            return Corrections(rows, FIRST_BUILD)
        in_duckdb = duckdb_full_diff(plan, inputs)  # (it refuses views with checks: Spark observations count them)
        if not isinstance(in_duckdb, str):
            return Corrections(in_duckdb, f"a full diff in DuckDB: {in_duckdb.num_rows} correction(s)")
        log.info("view %s: the full diff not in DuckDB: %s", inputs.view.name, in_duckdb)
        if inputs.table.exists and not inputs.with_error:  # (checks are counted by Spark observations)
            desc = inputs.desc
            local = full_diff(desired, inputs.table, arrow_table_schema(desired.schema), lower=desc.upper, at=desc.time)
            if local is not None:
                return Corrections(local, f"a full diff in the driver: {local.num_rows} correction(s)")
        return Corrections(spark_full_diff(inputs, desired), "")


def unusable(reason: str) -> Change:
    """A change no incremental mode may try, and why (the full diff follows with that reason)."""
    return Change((), NotApplicable(reason, "change"))


def refresh_change(inputs: WriteInputs) -> Change:
    """The change this refresh applies (its changed sources), or — the full diff's own decision — why no
    incremental mode may try it (``refusal``, of kind ``change``).

    Reads no data (a view source's check reads its table's log)."""
    desc, view, table = inputs.desc, inputs.view, inputs.table
    base = desc.base_versions
    if not table.exists:
        return unusable(desc.full_reason or NO_EARLIER)
    if base is None:
        return unusable(not_incremental(view) if not view.incremental else desc.full_reason or NO_EARLIER)
    if table.frontier.version != desc.table_version:
        return unusable(f"the table moved from version {desc.table_version} to {table.frontier.version} after mint")
    zero = {c.name: {"action": c.action, "rows": 0} for c in view.checks}
    if view.checks and add_counts(view, desc.base_checks or {}, zero) is None:
        return unusable(NO_CHECK_COUNTS)
    why = source_check(desc, base)
    if why:
        return unusable(why)
    return Change(tuple(s.name for s in changed_sources(desc, base)))


def spark_full_diff(inputs: WriteInputs, desired: DataFrame) -> DataFrame:
    """The full diff by Spark: ``desired`` (with the view's checks applied) against the table's updates before the
    batch (an empty table when there is none yet), summed per row in one group-by."""
    from pyspark.sql import functions as F

    view, desc, with_error = inputs.view, inputs.desc, inputs.with_error
    persisted: DataFrame | None = None
    if inputs.table.exists:
        table_rows = inputs.table_df()
        user_t = [c for c in table_rows.columns if c not in (TIME, DIFF, ERROR)]
        err = [F.col(ERROR) if ERROR in table_rows.columns else F.lit(None).cast("string").alias(ERROR)]
        # the table's columns under the query's names and types (the table's strings carry no collation)
        stored = dict(zip(user_t, desired.schema.fields))
        renamed = table_rows.select(
            *[
                (F.col(a) if table_rows.schema[a].dataType == f.dataType else F.col(a).cast(f.dataType)).alias(f.name)
                for a, f in stored.items()
            ],
            *(err if with_error else []),
            TIME,
            DIFF,
        )
        # the table's updates before the batch, not consolidated first: the comparison's one group-by sums them
        # with the desired rows (a sum's order does not matter), one shuffle of the table's rows instead of two
        persisted = renamed.where(F.col(TIME) < F.lit(desc.upper)).drop(TIME)  # (every row up to the refresh time)
    checked = apply_checks(desired, view, with_error=with_error, observation=inputs.check_obs)
    if persisted is None:
        persisted = inputs.spark.createDataFrame([], checked.schema).withColumn(DIFF, F.lit(0).cast("bigint"))
    return corrections(checked, persisted, time=desc.time)


def nothing_persisted(table: ViewTable, *, lower: int) -> bool:
    """Does ``table`` hold no update below ``lower`` (no table; no active file; every file's ``_mv_time`` at or
    past ``lower`` by its statistics)? Read from the log alone: files without those statistics count as holding
    updates."""
    return not table.exists or no_updates_before(table.add_actions(), lower=lower)


def no_updates_before(actions: pa.Table, *, lower: int) -> bool:
    """Do the add actions ``actions`` (flattened: ``num_records``, ``min._mv_time``) hold no update below
    ``lower``? A file with no row count or no ``_mv_time`` minimum may hold some."""
    if actions.num_rows == 0:
        return True
    names = actions.column_names
    counts = actions.column("num_records").to_pylist() if "num_records" in names else [None] * actions.num_rows
    lows = actions.column(f"min.{TIME}").to_pylist() if f"min.{TIME}" in names else [None] * actions.num_rows
    return all(n == 0 or (n is not None and lo is not None and lo >= lower) for n, lo in zip(counts, lows))


def first_build(inputs: WriteInputs, desired: DataFrame) -> DataFrame:
    """The corrections of a table that holds nothing before the batch: each row of ``desired`` (the view's checks
    applied, the hidden aggregate state included) once, at the batch's time with ``_mv_diff = 1``; duplicates stay
    separate rows (DESIGN.md section 2 counts them the same). A projection: no shuffle, no read of the table."""
    from pyspark.sql import functions as F

    checked = apply_checks(desired, inputs.view, with_error=inputs.with_error, observation=inputs.check_obs)
    return checked.select(
        *[F.col(quote_name(c)) for c in checked.columns],
        F.lit(inputs.desc.time).cast("bigint").alias(TIME),
        F.lit(1).cast("bigint").alias(DIFF),
    )


def _remember_partitioned_built(
    ci: ChangeInputs, state: StatePlan, tree: PlanNode, inputs: WriteInputs, *, columns: Sequence[str]
) -> None:
    """:func:`remember_built`'s partitioned recomputes: per source the aggregate's input is not linear in, the term
    of a change of it alone (:mod:`mvsink.incremental.partkeep`)."""
    from mvsink.incremental.aggfacts import aggregate_facts
    from mvsink.incremental.driverfacts import remember_partitioned
    from mvsink.incremental.partkeep import built_terms

    facts = aggregate_facts(inputs.spark, state)
    if facts.finalise is None:
        return
    terms = built_terms(ci, state.queries.input_query, tree)
    if terms:
        remember_partitioned(ci, state, tree, facts, inputs.table, terms, columns=columns)


def remember_built(plan: PlanFacts, inputs: WriteInputs, *, columns: Sequence[str]) -> None:
    """At a first build (the table made with ``columns``), keep the plan facts a refresh without Spark needs, as an
    incremental refresh on Spark keeps them once DuckDB evaluated its change terms
    (:mod:`mvsink.incremental.driverfacts`), so that the first refresh after the build may already run without
    Spark: for an aggregate with state over an input linear in a source, or a view linear in a source, without
    checks. The refresh that uses them checks the rest (a term DuckDB cannot evaluate, the guards:
    :mod:`mvsink.write.driver`). Never an error (logged)."""
    from mvsink import settings
    from mvsink.engines.arrow import same_equality
    from mvsink.incremental.aggfacts import aggregate_facts
    from mvsink.incremental.duckdbterms import terms_refused
    from mvsink.incremental.telescope import ChangeInputs
    from mvsink.plan.linearity import nonlinear_reason

    view = inputs.view
    if inputs.desc.dry_run:  # (a dry run writes nothing)
        return
    if not settings.spark_free() or plan.with_error or view.checks or not view.incremental or not plan.plan_readable:
        return
    ci = ChangeInputs(inputs.spark, view, inputs.desc, {}, [])
    names = [s.name for s in inputs.desc.sources]
    try:
        tree = plan.input_tree if plan.state is not None else plan.tree
        if isinstance(tree, str):
            return
        why = (
            "the query is linear in none of its sources"
            if all(nonlinear_reason(tree, n) for n in names)
            else terms_refused(ci, plan.state.input if plan.state is not None else plan.result, tree)
        )
        if why:
            log.info("view %s: plan facts of change terms not kept at the first build: %s", view.name, why)
        elif plan.state is not None:
            facts = aggregate_facts(inputs.spark, plan.state)
            remember(ci, plan.state, tree, facts, inputs.table, columns=columns)
        elif all(same_equality(f.dataType) for f in plan.result.schema.fields):
            remember_linear(ci, plan.result, tree, inputs.table, columns=columns)
        if plan.state is not None and settings.incremental_partitioned() and settings.incremental_driver_terms():
            _remember_partitioned_built(ci, plan.state, tree, inputs, columns=columns)  # (the facts above gain them)
    except Exception:  # noqa: BLE001 (the build does not depend on them)
        log.warning("view %s: plan facts not kept at the first build", view.name, exc_info=True)
