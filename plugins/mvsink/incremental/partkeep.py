"""A partitioned recompute's term derived at a view's first build, so that the first refresh after the build may
already run without Spark (:mod:`mvsink.write.driverpart`).

A Spark refresh keeps the term of the partitioned recompute DuckDB evaluated
(:class:`~mvsink.incremental.driverfacts.PartitionedTerm`, :mod:`mvsink.incremental.partduck`). A first build ran
none, but it has the plan: for each source the aggregate's input is not linear in, the same decisions the Spark
refresh makes when that source alone changes are made here without data — the partitioning on that source
(:func:`mvsink.plan.partitioning.partitioning`; none with a tied source), DuckDB's check of the plan
(:func:`mvsink.incremental.partduck.refused`; where it refuses a scalar subquery over the other sources only, that
subquery written in as the literal the build kept, :func:`mvsink.incremental.partitioned.keep_scalars`, the other
sources then pinned at the build's versions), the translation of the query over the restricted sources, and every
keyed source readable in the driver (a local, unpartitioned Delta table of plain Parquet files). The refresh that
uses the term checks the rest (the keys, their number and types, the row caps, the scan guard), as after a Spark
refresh.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mvsink.core.batch import SourceRead
    from mvsink.incremental.driverfacts import PartitionedTerm
    from mvsink.incremental.telescope import ChangeInputs
    from mvsink.plan.tree import PlanNode

log = logging.getLogger(__name__)


def built_terms(ci: ChangeInputs, query: str, tree: PlanNode) -> dict[str, PartitionedTerm]:
    """Per source the aggregate's input ``query`` (its plan ``tree``) is not linear in, the partitioned recompute's
    term of a change of that source alone (by its term key), where every check takes it (the module's docstring);
    each refusal logged."""
    from mvsink.incremental.driverfacts import term_key
    from mvsink.plan.linearity import nonlinear_reason

    out: dict[str, PartitionedTerm] = {}
    for s in ci.desc.sources:
        if s.kind != "path" or not nonlinear_reason(tree, s.name):
            continue
        got = _term(ci, s, query, tree)
        if isinstance(got, str):
            log.info("view %s: no partitioned recompute kept at the first build for %s: %s", ci.view.name, s.name, got)
        else:
            out[term_key([s.name])] = got
    return out


def _term(ci: ChangeInputs, changed: SourceRead, query: str, tree: PlanNode) -> PartitionedTerm | str:
    """:func:`built_terms`'s term for a change of ``changed`` alone, or why not."""
    from pyspark.sql.pandas.types import to_arrow_schema

    from mvsink.engines.duckdbsql import Untranslatable, text_aggregates
    from mvsink.engines.duckdbtext import duckdb_schema, duckdb_sql
    from mvsink.incremental import partduck, partitioned, partreads
    from mvsink.incremental.driverfacts import PartitionedTerm
    from mvsink.incremental.telescope import ChangeInputs
    from mvsink.plan.partitioning import partitioning
    from mvsink.spark.sources import snapshot

    one = ChangeInputs(ci.spark, ci.view, ci.desc, {}, [changed])
    part = partitioning(tree, [changed.name])
    if isinstance(part, str):
        return part
    pinned: dict[str, int] = {}
    why = partduck.refused(one, tree)
    if why and "ScalarSubquery" in why:
        alt = partitioned.with_constants(one, part, query)
        if alt is None:
            return why
        part, query, _, tree = alt
        pinned = {s.name: s.version for s in ci.desc.sources if s.name != changed.name}
        why = partduck.refused(one, tree)
    if why:
        return why
    if part.via:
        return "a source is tied to a keyed one, not keyed"
    aggregates = text_aggregates(tree)
    if isinstance(aggregates, str):
        return f"DuckDB might not evaluate {aggregates} as Spark does"
    sources = ci.desc.sources
    names = partitioned.restricted_names(sources, {changed.name})
    texts = partitioned.restricted_texts(query, sources, names)
    if texts is None:
        return "the query's sources could not be renamed in its text"
    try:
        sql = tuple(duckdb_sql(q, average=aggregates[0], total=aggregates[1]) for q in texts)
    except Untranslatable as exc:
        return f"the query does not translate to DuckDB exactly ({exc})"
    columns = partreads.named_columns(query)
    reads, widened = {}, {}
    for s in sources:
        if s.name in part.columns:
            dr = partreads.plan_driver_read(s, new_version=s.version, old_version=None, reads={}, columns=columns)
            if isinstance(dr, str):
                return dr
            reads[s.name] = to_arrow_schema(dr.schema, timezone="UTC")
            widened[s.name] = duckdb_schema(dr.schema, None, "UTC")
        elif s.kind != "path":
            return f"source {s.name!r} is not a Delta path"
        else:
            widened[s.name] = duckdb_schema(
                snapshot(s.path, s.version, role=f"source {s.name!r}").schema, columns, "UTC"
            )
    return PartitionedTerm(
        keys=dict(part.columns),
        tables=tuple((name, old, table) for (name, old), table in names.items()),
        sql=(sql[0], sql[1]),
        reads=reads,
        widened=widened,
        pinned=pinned,
    )
