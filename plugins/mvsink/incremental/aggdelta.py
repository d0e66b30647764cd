"""Δ per affected group of an aggregate view's refresh (steps 0 to 2 of
:mod:`mvsink.incremental.modes.aggregate`).

:func:`group_deltas` is where the aggregate mode reads the refresh's changes (:class:`ChangeInputs`), and the
one place: it hands on a plain value, :class:`GroupDeltas`, that the merge with the persisted state
(:mod:`mvsink.incremental.aggmerge`) takes with the view's :class:`~mvsink.incremental.aggplan.StatePlan`.

0. The aggregate's input is linear in every changed source (on its plan, read once by the mode's ``fits`` and
   handed here for the change terms' join edges and DuckDB's check); the change frames, the change terms' pruned
   reads and the scan guard (:func:`~mvsink.incremental.scanguard.scan_guard`) decide whether the changes are
   worth using.
1. Δin, the change of the aggregate's input, by the change terms of :mod:`mvsink.incremental.telescope`
   (signed by ``_mv_sign`` where the input query can carry it).
2. Δ per group (:func:`_delta_sql`): the signed row count, non-null counts and sums of Δin, in DuckDB in the
   driver where it evaluates the terms exactly as Spark does (:mod:`mvsink.incremental.duckdbterms`), else by
   Spark and collected (the one Spark job) when there are at most
   :data:`~mvsink.engines.arrow.MAX_DRIVER_ROWS` groups.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from typing import TYPE_CHECKING

from mvsink.columns import DIFF
from mvsink.core.costrecord import note
from mvsink.engines.arrow import collect_small
from mvsink.incremental.aggplan import formattable
from mvsink.incremental.statequeries import delta_sql
from mvsink.spark.transforms import quote_name as _quote

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

    from mvsink.core.table import ViewTable
    from mvsink.incremental.aggfacts import AggregateFacts
    from mvsink.incremental.aggplan import StatePlan
    from mvsink.incremental.driverfacts import PartitionedTerm
    from mvsink.incremental.telescope import ChangeInputs, ChangeTerms
    from mvsink.plan.partitioning import Partitioning
    from mvsink.plan.tree import PlanNode

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class GroupDeltas:
    """Δ per affected group of one refresh (keys named as the view's; ``_mv_agg_count``, and per argument its
    non-null count, and for SUM and AVG its sum and count of values), as :func:`group_deltas` made it.

    ``rows``: Δ collected into the driver (at most :data:`~mvsink.engines.arrow.MAX_DRIVER_ROWS` groups), else
    None and ``frame`` is Spark's Δ (more groups: the merge is Spark's too); ``in_driver``: DuckDB evaluated the
    change terms; ``sources``: the changed sources' names; ``planned`` and ``collected``: the seconds spent making
    the change terms and collecting Δ.
    """

    rows: pa.Table | None
    frame: DataFrame | None
    in_driver: bool
    sources: tuple[str, ...]
    planned: float
    collected: float
    kept: PartitionedTerm | None = None


def group_deltas(
    ci: ChangeInputs,
    plan: StatePlan,
    tree: PlanNode,
    table: ViewTable,
    facts: AggregateFacts,
    *,
    part: Partitioning | None = None,
) -> GroupDeltas | str:
    """Δ per affected group of ``ci``'s changes, or why the changes are not used (a change set refused, the scan
    guard); ``tree``: the aggregate input's plan, linear in every changed source; ``facts``: the state's types.
    Leaves every source registered at the version ``ci.desc`` reads.

    DuckDB's Δ where it evaluated the change terms; else Spark's: one signed term per source where the input
    query can carry the sign (the other sources scanned once), else the telescoping's terms of inserted and
    deleted rows, summed per group by one SQL statement (:func:`_delta_sql`) and collected."""
    from pyspark.sql import functions as F

    from mvsink.incremental.telescope import telescope, telescope_signed

    t0 = time.monotonic()
    q = plan.queries
    per_group = _delta_sql(plan)
    if part is not None:
        return _partitioned(ci, plan, tree, table, part, per_group, t0, facts=facts)
    ready = _changes(ci, plan, tree, table, facts)
    if isinstance(ready, str):
        return ready
    ct, in_driver = ready
    delta: DataFrame | None = None
    if in_driver is None:
        terms = telescope_signed(ct, q.signed_input)
        if terms is None:
            terms = telescope(ct, lambda sign: ct.spark.sql(q.input_query).withColumn(DIFF, F.lit(sign)))
        delta = ct.spark.sql(per_group, din=functools.reduce(lambda a, b: a.unionByName(b), terms))
    t1 = time.monotonic()
    collected = in_driver if delta is None else collect_small(delta)  # None: too many groups for the driver
    t2 = time.monotonic()
    names = tuple(s.name for s in ct.changed)
    return GroupDeltas(collected, delta, in_driver is not None, names, planned=t1 - t0, collected=t2 - t1)


def _partitioned(
    ci: ChangeInputs,
    plan: StatePlan,
    tree: PlanNode,
    table: ViewTable,
    part: Partitioning,
    per_group: str,
    t0: float,
    *,
    facts: AggregateFacts,
) -> GroupDeltas | str:
    """:func:`group_deltas` by a partitioned recompute of the input (:mod:`mvsink.incremental.partitioned`): Δ per
    group summed by DuckDB where it evaluated the restricted queries in the driver
    (:mod:`mvsink.incremental.partduck`), else by Spark."""
    from mvsink.incremental.duckdbterms import group_delta
    from mvsink.incremental.linear import prepare_changes
    from mvsink.incremental.partitioned import drop_views, partitioned_input, partitioned_rows

    frames = prepare_changes(ci, tree=lambda: tree)
    if isinstance(frames, str):
        return frames
    ct = ci.terms(frames)
    names = tuple(s.name for s in ct.changed)
    kept: list[PartitionedTerm] = []
    got = partitioned_rows(
        ct, part, plan.queries.input_query, table, tree=tree, mode="incremental:aggregate", kept=kept
    )
    if isinstance(got, str):
        return got
    import pyarrow as pa

    if isinstance(got, pa.Table):  # DuckDB's signed rows
        rows = group_delta(facts, got)
        if not isinstance(rows, str):
            note(engine="duckdb")
            t1 = time.monotonic()
            return GroupDeltas(rows, None, True, names, planned=t1 - t0, collected=0.0, kept=kept[-1] if kept else None)
        log.info("view %s: the partitioned recompute's groups summed by Spark: %s", ci.view.name, rows)
        got = partitioned_input(ct, part, plan.queries.input_query, table, mode="incremental:aggregate")
        if isinstance(got, str):
            return got
    din: DataFrame = got
    delta = ct.spark.sql(per_group, din=din)
    t1 = time.monotonic()
    collected = collect_small(delta)
    if collected is not None:  # (else the merge reads ``delta``, over the views)
        drop_views(ct)
    return GroupDeltas(collected, delta, False, names, planned=t1 - t0, collected=time.monotonic() - t1)


def _changes(
    ci: ChangeInputs, plan: StatePlan, tree: PlanNode, table: ViewTable, facts: AggregateFacts
) -> tuple[ChangeTerms, pa.Table | None] | str:
    """The change terms' inputs (the changed sources, their change frames), and Δ per group when DuckDB computed
    it in the driver (:func:`~mvsink.incremental.duckdbterms.terms_in_driver`; else None: Spark's change terms
    follow); or why not: a change set refused, the scan guard.

    ``tree`` (the input's plan, read once by the mode) gives the change terms' join edges and DuckDB's check."""
    from mvsink.incremental import duckdbterms
    from mvsink.incremental.linear import prepare_changes
    from mvsink.incremental.scanguard import scan_guards
    from mvsink.incremental.telescope import term_reads

    frames = prepare_changes(ci, tree=lambda: tree)
    if isinstance(frames, str):
        return frames
    ct = ci.terms(frames)
    pruned = term_reads(ct)
    # (the guard's ratio, and its multiple within which DuckDB's scans of the terms still beat the full diff)
    too_big, over_driver = scan_guards(
        ct,
        table,
        pruned=pruned,
        factors=(1.0, duckdbterms.DRIVER_SCAN_FACTOR),
        mode="incremental:aggregate",
        engines=("spark", "duckdb"),
    )
    if too_big and over_driver:
        return too_big
    in_driver = duckdbterms.terms_in_driver(ct, plan, pruned, tree=tree, facts=facts)
    if in_driver is None and too_big:  # (only DuckDB's scans of them beat the full diff)
        return too_big
    if in_driver is not None:
        note(engine="duckdb")
    return ct, in_driver


def _delta_sql(plan: StatePlan) -> str:
    """Spark SQL of Δ per affected group over Δin (``{din}``, rows of weight ±1): its signed row count, non-null
    counts and sums, and per MIN/MAX its extreme value of non-zero net count and that count (:func:`~mvsink.incremental.statequeries.delta_sql`).

    Keys are named as the view's. A group whose Δ is zero in every part is not affected (the ± pairs
    of a copy-on-write rewrite cancel here, as consolidating Δin first would make them). An overflowing
    sum is NULL (``try_sum``), never a wrapped value. One SQL statement over ``din`` (one analysis of the
    plan, where column expressions would cost one py4j round trip each).
    """
    q = plan.queries
    return delta_sql(
        q.keys,
        [with_sum for _, with_sum in q.args],
        q.extremes,
        ident=lambda name: formattable(_quote(name)),
        source="{din}",
        sum_types=plan.sum_types,
    )
