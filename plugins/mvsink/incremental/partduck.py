"""The partitioned recompute's two restricted queries evaluated by DuckDB in the refreshing process
(:mod:`mvsink.incremental.partitioned`), with no Spark job.

The keyed sources' restricted rows are read by DuckDB already (:func:`mvsink.incremental.partreads.restricted_rows`:
one scan of both versions' files); Spark then evaluated both restricted queries over them, one Spark job costing
about 1 s through Spark Connect for a handful of rows (TPC-H Q4, Q13, Q22 at SF 1). Here, where

- the query is made only of what DuckDB evaluates exactly as Spark does
  (:func:`mvsink.engines.duckdbforms.unsupported_extended` on its analysed plan: inner, cross, left outer, left
  semi and left anti joins, [NOT] EXISTS, an inner GROUP BY with COUNTs, substring, the expressions it lists) and Spark runs in ANSI mode,
- every keyed source is read in the driver, and every other source is a plain snapshot DuckDB may scan
  (:func:`mvsink.incremental.duckdbterms.snapshot_relation`, at most its scan budget),

the query's text (translated by sqlglot, :func:`mvsink.engines.duckdbtext.duckdb_sql`) runs in DuckDB over the new
rows and over the old ones, decimals widened to DECIMAL(38, s) as the change terms read them
(:func:`mvsink.engines.duckdbtext.duckdb_schema`), and the signed rows (``_mv_diff`` +1 and -1) are what the
aggregate mode sums per group (:func:`mvsink.incremental.duckdbterms.group_delta`). Anything else, an error
included: why not (a string), and Spark evaluates the restricted queries as before.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from mvsink.engines.duckdbforms import unsupported_extended
from mvsink.engines.duckdbsql import Untranslatable, text_aggregates
from mvsink.engines.duckdbtext import duckdb_schema, duckdb_sql

if TYPE_CHECKING:
    import pyarrow as pa

    from mvsink.incremental.driverfacts import PartitionedTerm
    from mvsink.incremental.partreads import DriverRead
    from mvsink.incremental.telescope import ChangeInputs, ChangeTerms
    from mvsink.plan.partitioning import Partitioning
    from mvsink.plan.tree import PlanNode

log = logging.getLogger(__name__)


def refused(ct: ChangeInputs, tree: PlanNode) -> str | None:
    """Why DuckDB may not evaluate the restricted queries of the plan ``tree`` whatever the change (the setting,
    ANSI mode, an expression or operator not proven equal, a source that is a view), or None."""
    from mvsink import settings

    if not settings.incremental_driver_terms():
        return "MVSINK_INCREMENTAL_DRIVER_TERMS is off"
    if str(ct.spark.conf.get("spark.sql.ansi.enabled")).lower() != "true":  # (without it Spark wraps an overflow)
        return "Spark is not in ANSI mode"
    why = unsupported_extended(tree)
    if why:
        return f"DuckDB might not evaluate {why} as Spark does"
    if any(s.kind == "view" for s in ct.desc.sources):
        return "a source is a view"
    return None


def in_driver(
    ct: ChangeTerms,
    tree: PlanNode,
    *,
    part: Partitioning,
    driver: dict[str, DriverRead],
    names: dict[tuple[str, bool], str],
    queries: tuple[str, str],
    keys: tuple[list[Any], bool],
    columns: set[str] | None,
    weight: str,
    kept: list[PartitionedTerm] | None = None,
    pinned: dict[str, int] | None = None,
) -> pa.Table | str:
    """:func:`restricted_in_driver` where :func:`refused` does not refuse the plan ``tree``: the signed rows, or why
    not. ``kept``: receives how they were evaluated, for refreshes without Spark, where ``part`` ties no source;
    ``pinned``: the versions of the unchanged sources a scalar subquery written into ``queries`` read."""
    why = refused(ct, tree)
    if why:
        return why
    aggregates = text_aggregates(tree)
    if isinstance(aggregates, str):
        return f"DuckDB might not evaluate {aggregates} as Spark does"
    got = restricted_in_driver(
        ct,
        part=part,
        driver=driver,
        names=names,
        queries=queries,
        keys=keys,
        columns=columns,
        weight=weight,
        aggregates=aggregates,
        kept=kept if not part.via else None,
        pinned=pinned or {},
    )
    if not isinstance(got, str):
        values, nulls = keys
        log.info(
            "view %s: partitioned recompute on %s evaluated by DuckDB in the driver: %d key(s)%s, %d signed row(s)",
            ct.view.name,
            part.describe(),
            len(values),
            " and NULL" if nulls else "",
            got.num_rows,
        )
    return got


def restricted_in_driver(
    ct: ChangeTerms,
    *,
    part: Partitioning,
    driver: dict[str, DriverRead],
    names: dict[tuple[str, bool], str],
    queries: tuple[str, str],
    keys: tuple[list[Any], bool],
    columns: set[str] | None,
    weight: str,
    aggregates: tuple[tuple[int, int] | None, tuple[int, int] | None] = (None, None),
    kept: list[PartitionedTerm] | None = None,
    pinned: dict[str, int] | None = None,
) -> pa.Table | str:
    """The signed rows (``weight`` +1 for ``queries[0]``, the query over the new restricted sources, -1 for
    ``queries[1]``, over the old ones; Spark SQL reading the sources under ``names[(source, old)]``) evaluated by
    DuckDB, not consolidated; or why not. ``driver``: the keyed sources' reads in the driver (every keyed source
    must have one), restricted to ``keys`` (values, and whether NULL is one); ``columns``: the columns the query
    names (casefolded; None: every one); ``aggregates``: the DECIMAL(p, s) the queries' AVGs average and their SUMs
    sum (:func:`mvsink.engines.duckdbsql.text_aggregates`)."""
    import pyarrow as pa

    from mvsink.core.arrowvalues import empty_table
    from mvsink.incremental import partreads
    from mvsink.incremental.duckdbterms import MAX_SCAN_BYTES, MAX_TERM_BYTES, snapshot_relation
    from mvsink.spark.sources import snapshot

    missing = [name for name in part.columns if name not in driver]
    if missing:
        return f"the keyed source {missing[0]!r} is read by Spark"
    try:
        sql = tuple(duckdb_sql(q, average=aggregates[0], total=aggregates[1]) for q in queries)
    except Untranslatable as exc:
        return f"the query does not translate to DuckDB exactly ({exc})"
    values, nulls = keys
    tables: dict[str, pa.Table | str] = {}
    reads: dict[str, pa.Schema] = {}
    widened: dict[str, pa.Schema] = {}
    budget = {"scan": MAX_SCAN_BYTES, "memory": MAX_TERM_BYTES}
    for s in ct.desc.sources:
        if s.name in part.columns:
            dr = driver[s.name]
            schema = duckdb_schema(dr.schema, None, "UTC")
            widened[s.name] = schema
            rows = partreads.restricted_rows(dr, column=part.columns[s.name], values=values, nulls=nulls)
            if isinstance(rows, str):
                return rows
            reads[s.name] = _spark_arrow(dr)
            for old in (False, True) if (s.name, True) in names else (False,):
                got = rows["old" if old else "new"] if rows is not None else empty_table(schema)
                try:
                    tables[names[(s.name, old)]] = got.cast(schema)  # (decimals widened to DECIMAL(38, s))
                except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
                    return f"source {s.name!r}: its rows do not widen to DuckDB's types ({exc})"
            continue
        if (s.name, True) in names and s.name not in part.via:  # (a changed source is keyed, or tied to one)
            return f"the changed source {s.name!r} is not keyed"
        for old in (False, True) if (s.name, True) in names else (False,):  # (a tied one: whole, before and after)
            version = ct.base[s.name] if old else s.version
            snap = snapshot(s.path, version, role=f"source {s.name!r}") if s.kind == "path" else None
            if snap is None:
                return f"source {s.name!r} is not a Delta path"
            schema = duckdb_schema(snap.schema, columns, "UTC")
            widened[s.name] = schema
            rel = snapshot_relation(s, version, None, schema.names, schema, budget)
            if isinstance(rel, str):
                return rel
            tables[names[(s.name, old)]] = rel[0]
    got = evaluate(sql, tables, weight=weight)
    if kept is not None and not isinstance(got, str):
        from mvsink.incremental.driverfacts import PartitionedTerm

        kept.append(
            PartitionedTerm(
                keys=dict(part.columns),
                tables=tuple((name, old, table) for (name, old), table in names.items()),
                sql=(sql[0], sql[1]),
                reads=reads,
                widened=widened,
                pinned=dict(pinned or {}),
            )
        )
    return got


def _spark_arrow(dr: DriverRead) -> pa.Schema:
    """``dr``'s columns as Arrow types them (Spark's types)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(dr.schema, timezone="UTC")


def evaluate(sql: tuple[str, ...], tables: dict[str, pa.Table | str], *, weight: str) -> pa.Table | str:
    """Each DuckDB query of ``sql`` over ``tables`` (Arrow tables, or subqueries over Parquet files), its rows
    signed +1 for the first, -1 for the second."""
    import pyarrow as pa

    from mvsink.core.arrowvalues import repeat_int64
    from mvsink.engines.arrow import without_view_types
    from mvsink.engines.duckdb import duckdb_cursor, duckdb_identifier

    con = duckdb_cursor()
    try:
        for name, table in tables.items():
            if isinstance(table, str):
                con.execute(f"CREATE TEMP VIEW {duckdb_identifier(name)} AS {table}")
            else:
                con.register(name, table)
        out = []
        for text, sign in zip(sql, (1, -1), strict=True):
            got = without_view_types(con.sql(text).to_arrow_table())
            out.append(got.append_column(pa.field(weight, pa.int64()), repeat_int64(sign, got.num_rows)))
    except Exception as exc:  # noqa: BLE001 (any DuckDB failure: Spark evaluates the restricted queries)
        return f"DuckDB could not evaluate the restricted queries ({str(exc).splitlines()[0]})"
    finally:
        con.close()
    if out[0].schema != out[1].schema:
        return "DuckDB typed the new and old rows differently"
    return pa.concat_tables(out)
