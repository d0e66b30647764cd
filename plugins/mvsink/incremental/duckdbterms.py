"""A small change's terms evaluated by DuckDB in the driver: the aggregate mode's Δ per group without a Spark job.

The change terms of a join (:mod:`mvsink.incremental.telescope`) are small when the change is: a few change files, and
for each other source the files its pruned read keeps (or a small snapshot). Spark spends most of such a refresh
scheduling the terms' jobs (a broadcast per small side, the probe, the per-group sums: 0.7-1.4 s on 2 cores for
TPC-H Q3/Q5), where DuckDB evaluates the same terms over the same files in ~0.2 s. So where

- the aggregate's input is made only of what DuckDB evaluates exactly as Spark does
  (:func:`mvsink.engines.duckdbsql.unsupported`: inner and cross joins, filters, projections; column references,
  literals, comparisons, AND/OR/NOT, IS [NOT] NULL, IN lists, year(), CASE WHEN, LIKE '%...', ``+ - *`` on int, long and decimals whose Spark result
  needs no rounding, casts proven exact), and Spark runs in ANSI mode (an overflow fails in both engines),
- every change set is plain Parquet the driver may read (:func:`mvsink.engines.duckdb.change_rows`), and every
  other source a plain snapshot (:func:`mvsink.spark.sources.plain_files`, its pruned read's files) of at most
  :data:`MAX_SCAN_BYTES` per term where DuckDB scans the files itself (local files; it reads only the columns
  the term needs, as it streams), :data:`MAX_TERM_BYTES` where pyarrow reads them into memory (object stores),

each term's signed input query (the view's dialect, transpiled by sqlglot) runs in DuckDB over Arrow tables of
exactly the rows Spark's term would read (decimals widened to DECIMAL(38, s):
:func:`mvsink.engines.duckdbtext.duckdb_schema`), and the per-group Δ is summed there as
:func:`mvsink.incremental.aggdelta._delta_sql` does; the result is cast to Spark's Δ types exactly. Anything else,
an error included (an overflow, a value that does not cast): None, and Spark computes the terms as before.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final

from mvsink.engines.duckdbsql import Untranslatable, unsupported
from mvsink.engines.duckdbtext import duckdb_schema, duckdb_sql
from mvsink.incremental.sharedreads import Scan, shared_reads
from mvsink.plan.tree import PlanFormatError
from mvsink.spark.connectplan import has_plan

__all__ = [
    "DRIVER_SCAN_FACTOR",
    "MAX_SCAN_BYTES",
    "MAX_TERM_BYTES",
    "MAX_TERM_CHANGE_BYTES",
    "TermInputs",
    "as_view_rows",
    "delta_in_driver",
    "group_delta",
    "run_terms",
    "signed_rows_in_driver",
    "terms_in_driver",
    "unsupported",
    "view_rows_in_driver",
]

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

    from mvsink.core.batch import BatchDescription, SourceRead
    from mvsink.core.deltalog import ChangeSet
    from mvsink.incremental.aggfacts import AggregateFacts
    from mvsink.incremental.pruning import PrunedRead
    from mvsink.incremental.telescope import ChangeInputs, ChangeTerms, Term
    from mvsink.location import Location
    from mvsink.plan.joinkeys import Edge
    from mvsink.plan.tree import PlanNode

log = logging.getLogger(__name__)

MAX_TERM_BYTES: Final = 256 * 1024 * 1024  # files one term reads into the driver's memory (pyarrow), at most
MAX_SCAN_BYTES: Final = 4 * 1024 * 1024 * 1024  # files one term's DuckDB scans read (only the columns used), at most
# A change set's files read into the driver's memory for the terms, at most (their rows are inputs only: the terms'
# output is Δ per group or the linear view's change, which the modes bound themselves)
MAX_TERM_CHANGE_BYTES: Final = 64 * 1024 * 1024
# Terms that read more than the full diff (the scan guard's ratio) are still taken where they run in DuckDB and
# read at most this multiple of it: DuckDB scans and joins Parquet several times faster than Spark's full
# diff on the same cores (TPC-H SF 1, scattered changes: docs/benchmarks.md).
DRIVER_SCAN_FACTOR: Final = 2.0

# ---------------------------------------------------------------- the terms


def terms_in_driver(
    ct: ChangeTerms, plan: Any, pruned: dict[str, list[PrunedRead]], *, tree: PlanNode, facts: AggregateFacts
) -> pa.Table | None:
    """Δ per group from :func:`delta_in_driver`, or None (Spark's terms; logged why): the aggregate mode's entry.
    ``tree``: the input query's plan, as the mode read it; ``facts``: the state's types."""
    from mvsink import settings

    view = ct.view
    if not settings.incremental_driver_terms() or plan.input is None:
        return None
    refused = _driver_refused(ct, plan.input)
    if refused is not None:
        log.info("view %s: change terms by Spark: %s", view.name, refused)
        return None
    try:
        got = delta_in_driver(ct, plan, pruned, tree=tree, facts=facts)
    except PlanFormatError:
        return None
    except Exception:  # noqa: BLE001 (whatever went wrong here, Spark's terms give the answer)
        log.warning("view %s: change terms by Spark: the driver's evaluation failed", view.name, exc_info=True)
        return None
    if isinstance(got, str):
        log.info("view %s: change terms by Spark: %s", view.name, got)
        return None
    return got


def delta_in_driver(
    ct: ChangeTerms,
    plan: Any,  # mvsink.incremental.aggplan.StatePlan
    pruned: dict[str, list[PrunedRead]],
    *,
    tree: PlanNode,
    facts: AggregateFacts,
) -> pa.Table | str:
    """Δ per affected group (the schema of :func:`mvsink.incremental.aggdelta._delta_sql`) from DuckDB, or why not."""
    q = plan.queries
    din = _term_rows(ct, q.signed_input, referenced_columns(q.input_query), pruned, tree=tree)
    if isinstance(din, str):
        return din
    return group_delta(facts, din)


def group_delta(facts: AggregateFacts, din: pa.Table) -> pa.Table | str:
    """Δ per affected group of the signed input rows ``din`` (:func:`_state`), at most
    :data:`~mvsink.engines.arrow.MAX_DRIVER_ROWS` groups; or why not."""
    from mvsink.engines.arrow import MAX_DRIVER_ROWS
    from mvsink.engines.duckdb import duckdb_cursor

    got = _state(duckdb_cursor(), facts, din)
    if not isinstance(got, str) and got.num_rows > MAX_DRIVER_ROWS:  # (as collect_small bounds Spark's Δ)
        return f"{got.num_rows} affected groups, more than the driver merges ({MAX_DRIVER_ROWS})"
    return got


def view_rows_in_driver(
    ct: ChangeTerms, desired: DataFrame, pruned: dict[str, list[PrunedRead]], *, tree: PlanNode
) -> pa.Table | None:
    """The linear mode's entry: the view's change terms (:func:`~mvsink.incremental.telescope.signed_query` of its
    query, one per changed source) evaluated by DuckDB, as signed rows of the view's columns (Spark's types of
    ``desired``, the query analysed) and ``_mv_diff``, not consolidated; or None (Spark's terms; logged why).
    ``tree``: the query's plan, as the mode read it."""
    rows = signed_rows_in_driver(ct, ct.view.query, pruned, tree=tree, analysed=desired)
    if rows is None:
        return None
    got = _as_view_rows(rows, desired)
    if isinstance(got, str):
        log.info("view %s: change terms by Spark: %s", ct.view.name, got)
        return None
    return got


def signed_rows_in_driver(
    ct: ChangeTerms, query: str, pruned: dict[str, list[PrunedRead]], *, tree: PlanNode, analysed: DataFrame
) -> pa.Table | None:
    """The change terms of ``query`` (one SELECT block over the view's sources, e.g. an aggregate's input: its
    :func:`~mvsink.incremental.telescope.signed_query`, one per changed source) evaluated by DuckDB: their signed
    rows (DuckDB's types, ``_mv_diff``), not consolidated; or None (Spark's terms; logged why). ``tree``: the plan
    of what ``query`` computes, as the caller read it; ``analysed``: the view's query, analysed."""
    from functools import partial

    from mvsink.columns import DIFF
    from mvsink.incremental.telescope import signed_query

    view = ct.view
    got: pa.Table | str | None = _driver_refused(ct, analysed)
    if got is None:
        try:
            got = _term_rows(
                ct, partial(signed_query, query, weight=DIFF), referenced_columns(query), pruned, tree=tree
            )
        except PlanFormatError as exc:
            got = f"the plan could not be read ({exc})"
        except Exception:  # noqa: BLE001 (whatever went wrong here, Spark's terms give the answer)
            log.warning("view %s: change terms by Spark: the driver's evaluation failed", view.name, exc_info=True)
            return None
    if isinstance(got, str):
        log.info("view %s: change terms by Spark: %s", view.name, got)
        return None
    return got


def _driver_refused(ct: ChangeInputs, analysed: DataFrame | None) -> str | None:
    """Why DuckDB may not evaluate ``ct``'s terms at all (the setting, no typed plan, Spark not in ANSI mode), or
    None."""
    from mvsink import settings

    if not settings.incremental_driver_terms():
        return "MVSINK_INCREMENTAL_DRIVER_TERMS is off"
    if analysed is None or not has_plan(analysed):  # (a Connect server without mvsink's plugin: no typed plan)
        return "this Spark Connect server gives no typed plan"
    if str(ct.spark.conf.get("spark.sql.ansi.enabled")).lower() != "true":  # (without it Spark wraps an overflow)
        return "Spark is not in ANSI mode"
    return None


def terms_refused(ct: ChangeInputs, analysed: DataFrame | None, tree: PlanNode) -> str | None:
    """Why DuckDB may evaluate no change term of this query, whatever the change, or None: what
    :func:`terms_in_driver` and :func:`view_rows_in_driver` check before any change is read (the setting, a typed
    plan, ANSI mode, every expression of ``tree`` one DuckDB evaluates as Spark does, no view source). ``analysed``:
    what the terms compute, analysed (an aggregate's input, or the view's query); ``tree``: its plan."""
    why = _driver_refused(ct, analysed)
    if why:
        return why
    unsafe = _terms_unsupported(tree)
    if unsafe:
        return f"DuckDB might not evaluate {unsafe} as Spark does"
    if any(s.kind == "view" for s in ct.desc.sources):
        return "a source is a view"
    return None


def _terms_unsupported(tree: PlanNode) -> str | None:
    """What :func:`~mvsink.engines.duckdbsql.unsupported` says of ``tree``, a correlated scalar subquery (which it
    takes) refused: the change terms' text is translated without the written-out SUM and AVG, and a query with one
    is not linear in its sources anyway."""
    from mvsink.engines.duckdbsql import is_correlated, query_operators

    correlated = any(
        x.name == "ScalarSubquery" and is_correlated(x) for n in query_operators(tree) for x in n.all_expressions()
    )
    return unsupported(tree) or ("a correlated scalar subquery" if correlated else None)


def _as_view_rows(din: pa.Table, desired: DataFrame) -> pa.Table | str:
    """DuckDB's signed term rows cast to Spark's types of the view's columns (``desired``): :func:`as_view_rows`."""
    from mvsink.spark.sources import arrow_table_schema

    return as_view_rows(din, list(desired.columns), arrow_table_schema(desired.schema))


def as_view_rows(din: pa.Table, columns: list[str], schema: pa.Schema) -> pa.Table | str:
    """DuckDB's signed term rows cast to the table's Arrow types (``schema``) of the view's ``columns``, or why not:
    other columns than the query's, more rows than the driver takes, a value that does not cast exactly."""
    import pyarrow as pa

    from mvsink.columns import DIFF
    from mvsink.engines.arrow import MAX_DRIVER_ROWS

    if din.column_names != [*columns, DIFF]:
        return f"the terms' columns {din.column_names} are not the query's"
    if din.num_rows > MAX_DRIVER_ROWS:
        return f"{din.num_rows} rows of change terms, more than the driver consolidates ({MAX_DRIVER_ROWS})"
    fields = [schema.field(c) for c in columns] + [pa.field(DIFF, pa.int64())]
    try:
        return din.cast(pa.schema(fields))  # safe: a value that does not fit Spark's type fails here
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
        return f"a term's value does not cast to Spark's type ({exc})"


def _term_rows(
    ct: ChangeTerms,
    signed_sql: Callable[[tuple[str, ...]], str | None],
    columns: set[str],
    pruned: dict[str, list[PrunedRead]],
    *,
    tree: PlanNode,
) -> pa.Table | str:
    """Every change term of ``ct`` run by DuckDB: ``signed_sql(changed names)`` (Spark SQL carrying the change sets'
    signs as ``_mv_diff``) over the change sets' rows and the other sources' snapshots (their pruned reads; only
    ``columns`` of each), the terms' coefficients multiplied in; their rows together, or why not
    (:func:`run_terms` with the term SQL translated and the sources' schemas from Spark)."""
    from mvsink.incremental.telescope import ChangeFrames

    spark, desc = ct.spark, ct.desc
    why = _terms_unsupported(tree)
    if why:
        return f"DuckDB might not evaluate {why} as Spark does"
    if any(s.kind == "view" for s in desc.sources):
        return "a source is a view"
    sets = (ct.frames.sets if isinstance(ct.frames, ChangeFrames) else None) or {}
    zone = str(spark.conf.get("spark.sql.session.timeZone"))
    schemas = {s.name: duckdb_schema(spark.table(s.name).schema, columns, zone) for s in desc.sources}

    def sql(names: tuple[str, ...]) -> str:
        spark_sql = signed_sql(names)
        if spark_sql is None:
            raise Untranslatable("a term's sign could not be carried")
        return _duckdb_sql(spark_sql)

    from mvsink.plan.joinkeys import join_edges

    return run_terms(TermInputs(desc, ct.base, ct.changed, sets, schemas, tuple(join_edges(tree))), sql, pruned)


@dataclasses.dataclass(frozen=True)
class TermInputs:
    """What DuckDB's change terms read: the batch's sources and versions (``desc``), the versions of the last
    refresh (``base``), the changed sources, their plain change sets (``sets``) and the Arrow schema each source is
    read as (:func:`~mvsink.engines.duckdbtext.duckdb_schema`: only the columns the query names), and the query's
    join edges, which let terms that scan the same large files scan them once
    (:func:`~mvsink.incremental.sharedreads.shared_reads`)."""

    desc: BatchDescription
    base: dict[str, int]
    changed: list[SourceRead]
    sets: dict[str, ChangeSet]
    schemas: dict[str, pa.Schema]
    edges: tuple[Edge, ...] = ()  # the query's join edges (:func:`~mvsink.plan.joinkeys.join_edges`): shared reads


def run_terms(
    ti: TermInputs, duckdb_sql: Callable[[tuple[str, ...]], str], pruned: dict[str, list[PrunedRead]]
) -> pa.Table | str:
    """Every change term run by DuckDB: ``duckdb_sql(changed names)`` (DuckDB SQL carrying the change sets' signs
    as ``_mv_diff``; :class:`~mvsink.engines.duckdbsql.Untranslatable` if there is none) over the change sets' rows
    and the other sources' snapshots (their pruned reads), the terms' coefficients multiplied in; their rows
    together, or why not. No Spark: the refreshes that open no Spark session run it too."""
    import pyarrow as pa

    from mvsink.columns import DIFF
    from mvsink.engines.arrow import change_rows
    from mvsink.engines.duckdb import duckdb_cursor
    from mvsink.incremental.telescope import SIGN, change_terms

    desc, base, changed, sets, schemas = ti.desc, ti.base, ti.changed, ti.sets, ti.schemas
    missing = [s.name for s in changed if s.name not in sets]
    if missing:
        return f"the change of {missing[0]!r} is not plain Parquet files"
    wanted = {n: list(sch.names) for n, sch in schemas.items()}
    changes: dict[str, pa.Table] = {}
    for s in changed:
        sch = pa.schema([schemas[s.name].field(c) for c in wanted[s.name]] + [pa.field(SIGN, pa.int64())])
        rows = change_rows(
            sets[s.name], [(c, c) for c in wanted[s.name]], sch, weight=SIGN, max_bytes=MAX_TERM_CHANGE_BYTES
        )
        if rows is None:
            return f"the change of {s.name!r} could not be read in the driver"
        changes[s.name] = rows
    planned: list[tuple[Term, str, dict[str, pa.Table | str]]] = []
    scans: dict[str, Scan] = {}  # each DuckDB scan of a source's files (by its subquery)
    for t in change_terms(changed, base):
        try:
            sql = duckdb_sql(tuple(s.name for s in t.changes))
        except Untranslatable as exc:
            return f"the term's SQL does not translate to DuckDB exactly ({exc})"
        reads = {r.source: r for r in pruned.get(t.key, [])}
        tables: dict[str, pa.Table | str] = {s.name: changes[s.name] for s in t.changes}
        budget = {"scan": MAX_SCAN_BYTES, "memory": MAX_TERM_BYTES}
        for o in desc.sources:
            if o.name in tables:
                continue
            version = t.version(o, base)
            got = snapshot_relation(o, version, reads.get(o.name), wanted[o.name], schemas[o.name], budget)
            if isinstance(got, str):
                return got
            tables[o.name] = got[0]
            if isinstance(got[0], str):
                scans[got[0]] = Scan(o.name, version, got[1])
        planned.append((t, sql, tables))
    if not planned:
        return "no change term"
    users = [(tables, {c.name for c in t.changes}) for t, _, tables in planned]
    from mvsink.incremental.decodedcopies import for_target

    copies = for_target(desc.target, dry_run=desc.dry_run)
    with shared_reads(users, scans, ti.edges, schemas, copies=copies) as shared:
        terms: list[pa.Table] = []
        for t, sql, tables in planned:
            out = _run(
                duckdb_cursor(), sql, {n: shared.get(v, v) if isinstance(v, str) else v for n, v in tables.items()}
            )
            if isinstance(out, str):
                return out
            if t.coefficient < 0:
                import pyarrow.compute as pc

                i = out.schema.get_field_index(DIFF)
                out = out.set_column(i, DIFF, pc.negate(out.column(DIFF)))
            terms.append(out)
    return pa.concat_tables(terms, promote_options="permissive")


def referenced_columns(query: str) -> set[str]:
    """Every column name the query mentions (casefolded): a superset of what each source must give."""
    import sqlglot
    from sqlglot import exp

    return {c.name.casefold() for c in sqlglot.parse_one(query, dialect="spark").find_all(exp.Column)}


def snapshot_relation(
    o: SourceRead,
    version: int,
    read: PrunedRead | None,
    columns: Sequence[str],
    schema: pa.Schema,
    budget: dict[str, int],
) -> tuple[pa.Table | str, tuple[tuple[Location, int], ...]] | str:
    """Source ``o`` at ``version`` as the term reads it (its pruned read's files), ``columns`` only: DuckDB's read
    of the files (a subquery, :func:`mvsink.engines.duckdb.parquet_relation`) where that is exact, else an Arrow
    table read with pyarrow, with the files DuckDB scans and their sizes (none for pyarrow's); or why neither (a
    string). The files' bytes are taken from ``budget``
    (``scan``: DuckDB's reads, ``memory``: pyarrow's), which they must fit."""
    import pyarrow as pa

    from mvsink.core.arrowvalues import empty_table
    from mvsink.engines.arrow import parquet_columns
    from mvsink.engines.duckdb import parquet_relation
    from mvsink.spark.sources import plain_files

    if o.kind != "path" or version < 0:
        return f"source {o.name!r} is not a Delta path"
    files = plain_files(o.path, version)
    if files is None:
        return f"source {o.name!r} needs Delta's reader"
    if read is not None and read.paths is not None:
        keep = set(read.paths)
        files = [f for f in files if f.path in keep]
        if len(files) != len(keep):  # the pruned read's files must be found among the snapshot's, every one
            return f"source {o.name!r}: its pruned read's files are not the snapshot's"
    size = sum(f.size for f in files)
    if size > max(budget.values()):
        return f"source {o.name!r}: {size} bytes of files, over the driver's budget"
    if any(name in columns for f in files for name, _ in f.partition_values):
        return f"source {o.name!r}: a partition column"
    from mvsink.core.readlog import record

    sch = pa.schema([schema.field(c) for c in columns])
    rel = parquet_relation([f.path for f in files], [(c, c) for c in columns], sch)
    kind = "scan" if rel is not None else "memory"
    if size > budget[kind]:
        return f"source {o.name!r}: {size} bytes of files, over the driver's budget"
    budget[kind] -= size
    if rel is not None:  # DuckDB scans the files itself (its threads; the term's filters pushed into the scan)
        record(o.name, bytes_read=size, files=len(files))
        return rel, tuple((f.path, f.size) for f in files)
    parts = []
    for f in files:
        rows = parquet_columns(f.path, list(columns))
        if rows is None:
            return f"source {o.name!r}: a file without one of its columns"
        try:
            parts.append(pa.table([rows.column(c) for c in columns], schema=None, names=list(columns)).cast(sch))
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            return f"source {o.name!r}: a value that does not cast exactly"
    record(o.name, bytes_read=size, files=len(files))  # (the refresh's report of what it read, as Spark's terms do)
    return (pa.concat_tables(parts) if parts else empty_table(sch)), ()


def view_relation(
    o: SourceRead, columns: Sequence[str], schema: pa.Schema, *, through: int, budget: dict[str, int]
) -> tuple[str, tuple[tuple[Location, int], ...]] | str:
    """View source ``o`` as a query reads it (:func:`mvsink.spark.sources.read_source`): its upstream table's
    updates through ``through`` consolidated over every visible column (hidden state left out, ``_mv_error``
    kept), its ok rows repeated by their multiplicity, ``columns`` of them cast to ``schema``; a DuckDB subquery
    over the table's files and those files with their sizes, or why not (a string): a file not local Parquet, a
    visible column DuckDB may group otherwise than Spark (:func:`mvsink.engines.duckdb.duckdb_type`), the
    upstream compacted past ``through``, more bytes than ``budget["scan"]`` (which they are taken from)."""
    from mvsink.columns import DIFF, ERROR, TIME, is_hidden
    from mvsink.core.readlog import record
    from mvsink.core.table import ViewTable
    from mvsink.engines.duckdb import duckdb_identifier as q
    from mvsink.engines.duckdb import duckdb_type, parquet_relation

    if o.kind != "view" or o.view is None or o.version < 0:
        return f"source {o.name!r} is not a view's table"
    table = ViewTable.open_path(o.path, o.view, version=o.version, check=False)
    if not table.exists:
        return f"source {o.name!r}: view {o.view} has no table"
    if through < table.frontier.since:
        return f"source {o.name!r}: view {o.view} is compacted past the time read"
    full = table.arrow_schema()
    visible = [f for f in full if f.name not in (TIME, DIFF) and not is_hidden(f.name)]
    for f in visible:
        if duckdb_type(f.type) is None:
            return f"source {o.name!r}: column {f.name!r} of type {f.type}, which DuckDB may group otherwise"
    if any(c not in {f.name for f in visible} for c in columns):
        return f"source {o.name!r}: a column the query reads is not one of view {o.view}'s"
    types = [duckdb_type(schema.field(c).type) for c in columns]
    if None in types:
        return f"source {o.name!r}: a column read as a type DuckDB does not read exactly"
    uris = table.file_uris()
    size = sum(table.add_actions().column("size_bytes").to_pylist()) if uris else 0
    if size > budget["scan"]:
        return f"source {o.name!r}: {size} bytes of files, over the driver's budget"
    read = [(f.name, f.name) for f in visible] + [(TIME, TIME), (DIFF, DIFF)]
    import pyarrow as pa

    rel = parquet_relation(uris, read, pa.schema([*visible, pa.field(TIME, pa.int64()), pa.field(DIFF, pa.int64())]))
    names = ", ".join(q(f.name) for f in visible)
    out = ", ".join(f"CAST(_v.{q(c)} AS {t}) AS {q(c)}" for c, t in zip(columns, types, strict=True)) or "1 AS _mv_one"
    ok = f" WHERE _v.{q(ERROR)} IS NULL" if ERROR in {f.name for f in visible} else ""
    if not uris:  # no files: no rows
        typed = ", ".join(f"CAST(NULL AS {t}) AS {q(c)}" for c, t in zip(columns, types, strict=True))
        return f"(SELECT {typed or '1 AS _mv_one'} WHERE false)", ()
    if rel is None:
        return f"source {o.name!r}: view {o.view}'s files are not local Parquet DuckDB reads exactly"
    budget["scan"] -= size
    record(o.name, bytes_read=size, files=len(uris))
    consolidated = (
        f"(SELECT {names}, sum({q(DIFF)})::BIGINT AS _mv_n FROM {rel} WHERE {q(TIME)} <= {int(through)} "
        f"GROUP BY ALL HAVING sum({q(DIFF)}) > 0)"
    )
    return f"(SELECT {out} FROM {consolidated} AS _v, range(_v._mv_n) AS _r(_mv_i){ok})", ()


def _duckdb_sql(spark_sql: str) -> str:
    """``spark_sql`` in DuckDB's dialect (:func:`mvsink.engines.duckdbtext.duckdb_sql`)."""
    return duckdb_sql(spark_sql)


def _run(con: Any, sql: str, tables: dict[str, pa.Table | str]) -> pa.Table | str:
    from mvsink.engines.duckdb import duckdb_identifier

    try:
        for name, table in tables.items():
            if isinstance(table, str):  # a subquery over Parquet files
                con.execute(f"CREATE TEMP VIEW {duckdb_identifier(name)} AS {table}")
            else:
                con.register(name, table)
        return con.sql(sql).to_arrow_table()
    except Exception as exc:  # noqa: BLE001 (any DuckDB failure: Spark computes the terms)
        return f"DuckDB could not evaluate a term ({str(exc).splitlines()[0]})"
    finally:
        con.close()


def _state(con: Any, facts: AggregateFacts, din: pa.Table) -> pa.Table | str:
    """:func:`mvsink.incremental.statequeries.delta_sql` over ``din`` in DuckDB, cast to Spark's types of it."""
    import pyarrow as pa

    from mvsink.engines.duckdb import duckdb_identifier
    from mvsink.incremental.aggfacts import sum_arrow_type
    from mvsink.incremental.statequeries import (
        COUNT,
        VALUES_COLUMN,
        delta_sql,
        extreme_column,
        multiplicity_column,
        nonnull_column,
        sum_column,
    )

    fields = [facts.key_schema.field(k) for k in facts.keys]
    fields.append(pa.field(COUNT, pa.int64()))
    for i, (with_sum, sum_type, _) in enumerate(facts.args):
        fields.append(pa.field(nonnull_column(i), pa.int64()))
        if with_sum:
            arrow_sum = sum_arrow_type(sum_type)
            if arrow_sum is None:
                return "a sum of unknown type"
            fields += [pa.field(sum_column(i), arrow_sum), pa.field(VALUES_COLUMN.format(i), pa.int64())]
    for i, kind in facts.extremes:
        x = extreme_column(kind, i)
        fields += [facts.schema.field(x), pa.field(multiplicity_column(kind, i), pa.int64())]
    sql = delta_sql(
        facts.keys,
        [with_sum for with_sum, _, _ in facts.args],
        facts.extremes,
        ident=duckdb_identifier,
        source="din",
    )
    got = _run(con, sql, {"din": din})
    if isinstance(got, str):
        return got
    try:
        return got.cast(pa.schema(fields))  # safe: a sum that does not fit Spark's type fails here
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
        return f"a per-group sum does not fit Spark's type ({exc})"
