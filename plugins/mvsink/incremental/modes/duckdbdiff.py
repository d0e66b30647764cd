"""The full diff of a select-project-join view, or of an aggregate over one, computed by DuckDB in the refreshing
process (issue 38).

Spark's full diff (:func:`mvsink.incremental.modes.full.spark_full_diff`) shuffles the query's rows and the table's
in one group-by: ~3.3x an overwrite for a large projection. Where DuckDB evaluates the query exactly as Spark does
over local Parquet files, it computes the same ``desired - persisted`` in the refreshing process, without a shuffle::

    SELECT cols, sum(d) FROM (SELECT cols, 1 AS d FROM <query>
                              UNION ALL SELECT cols, -_mv_diff FROM <table's files> WHERE _mv_time < lower)
    GROUP BY cols HAVING sum(d) <> 0

A top-k view's ``<query>`` is its first k rows by DuckDB's top-N over the query without its ORDER BY and LIMIT, where
the rows ranked k and k + 1 do not tie (:func:`_top_rows`; else Spark picks among them, so Spark's diff). An
aggregate's ``<query>`` is :func:`mvsink.incremental.duckdbagg.state_sql`: its input grouped into the state
Spark's state query gives, its visible columns finalised from it as Spark does, and the hidden state columns where
the table keeps them (its rows compared over visible and hidden columns alike).

The corrections come back as Arrow in the table's schema (as :func:`mvsink.engines.arrow.full_diff` returns them), so
staging and the append are unchanged. :func:`duckdb_full_diff` fails closed: it refuses (a reason; Spark's diff
follows) a view with checks, a column DuckDB groups otherwise than Spark (floating point, collated strings, nested
types, timestamps), an aggregate :func:`mvsink.incremental.duckdbagg.aggregate_refused` refuses, a plan
:func:`mvsink.engines.duckdbsql.unsupported` refuses or a query text that does not translate, a top-k whose rows
ranked k and k + 1 tie, Spark not in ANSI mode, a source not on the local disk or not a plain Delta path
(:func:`mvsink.incremental.duckdbterms.snapshot_relation`: no deletion vectors, no partition column read), a view
source whose rows DuckDB may group otherwise (:func:`mvsink.incremental.duckdbterms.view_relation`: its table's
updates consolidated at the batch's time, as Spark reads it), more than
:data:`MAX_SCAN_BYTES` of source files, a table file not local or not of the query's types, more than
:data:`MAX_CORRECTION_ROWS` corrections or :data:`MAX_CORRECTION_BYTES` of them (counted in DuckDB before they are
fetched), and any DuckDB error (an overflow included: Spark raises its own). DuckDB runs in a database of its own,
limited to :data:`MEMORY_LIMIT`, spilling to a temporary folder beyond it.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING, Any, Final

from mvsink.columns import DIFF, ERROR, TIME

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import DataType

    from mvsink.core.batch import BatchDescription
    from mvsink.core.table import ViewTable
    from mvsink.engines.duckdbsql import CastPair, Comparison
    from mvsink.incremental.aggplan import StatePlan
    from mvsink.incremental.driverfacts import FullDiffQuery
    from mvsink.incremental.modes.base import PlanFacts, WriteInputs
    from mvsink.plan.tree import PlanNode

__all__ = [
    "MAX_CORRECTION_BYTES",
    "MAX_CORRECTION_ROWS",
    "MAX_SCAN_BYTES",
    "MEMORY_LIMIT",
    "duckdb_full_diff",
    "full_diff_refused",
    "run_full_diff",
]

log = logging.getLogger(__name__)

MAX_SCAN_BYTES: Final = 4 * 1024 * 1024 * 1024  # the sources' files one full diff scans in DuckDB, at most
MAX_CORRECTION_ROWS: Final = 2_000_000  # corrections fetched into the process's memory, at most ...
MAX_CORRECTION_BYTES: Final = 256 * 1024 * 1024  # ... and their bytes (fixed widths and string lengths), at most
MEMORY_LIMIT: Final = "2GB"  # DuckDB's memory for the comparison; beyond it the group-by spills to disk

_CORR: Final = "_mv_corrections"
_D: Final = "_mv_d"


def duckdb_full_diff(plan: PlanFacts, inputs: WriteInputs, *, first_build: bool = False) -> pa.Table | str:
    """The full diff's corrections computed by DuckDB (the table's Arrow schema, ``_mv_time`` the batch's time), or
    why not (see the module docstring); an error is a reason too, never raised. ``first_build``: the table holds
    nothing before the batch, so the corrections are the query's rows as they are (``_mv_diff = 1``), the table
    not read."""
    got = _aggregate_or_refusal(plan, inputs)
    if isinstance(got, str):
        return got
    try:
        return _compute(
            plan,
            inputs,
            got[0],
            with_state=got[1],
            top=got[2],
            casts=got[3],
            aggregates=got[4],
            first_build=first_build,
        )
    except Exception as exc:  # noqa: BLE001 (any failure here: Spark's full diff gives the answer, or its error)
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return f"DuckDB failed ({type(exc).__name__}: {first})"


def full_diff_refused(plan: PlanFacts, inputs: WriteInputs) -> str | None:
    """Why DuckDB may not compute this view's full diff, from the view, its plan and the session alone (no data
    read), or None."""
    got = _aggregate_or_refusal(plan, inputs)
    return got if isinstance(got, str) else None


@dataclasses.dataclass(frozen=True)
class _TopK:
    """A top-k view's ``ORDER BY ... LIMIT limit``: per ORDER BY item (position of the view's column, descending,
    NULLs first), as Spark's plan says; ``inner``: the query without its ORDER BY and LIMIT (Spark SQL)."""

    limit: int
    order: tuple[tuple[int, bool, bool], ...]
    inner: str


_Aggregates = tuple[tuple[int, int] | None, tuple[int, int] | None]


def _aggregate_or_refusal(
    plan: PlanFacts, inputs: WriteInputs
) -> str | tuple[StatePlan | None, bool, _TopK | None, dict[Comparison, CastPair], _Aggregates]:
    """:func:`full_diff_refused`'s reason, or what DuckDB computes: the view's aggregate (its state plan; None for a
    select-project-join view), whether the table keeps its state (hidden columns) or its visible columns only
    (a table created without state: ``incremental: false``), a top-k view's order and limit, and the comparisons
    whose decimal casts the DuckDB text carries (:func:`mvsink.engines.duckdbtext.carried_casts`), and the decimal
    types the text's AVGs and SUMs (a correlated scalar subquery's) are written out for
    (:func:`mvsink.engines.duckdbsql.text_aggregates`)."""
    from mvsink.engines.duckdbsql import text_aggregates, unsupported
    from mvsink.engines.duckdbtext import carried_casts

    why = _view_refusal(plan, inputs)
    if why:
        return why
    st, no_state = _aggregate(plan, inputs)
    if st is not None:
        from mvsink.incremental.duckdbagg import aggregate_refused

        types = {f.name: f.dataType.simpleString() for f in st.desired.schema.fields}
        why = aggregate_refused(st.queries, sum_types=st.sum_types, avg_types=st.avg_types, types=types)
        if why:
            return why
    tree = plan.tree if st is None else _input_tree(plan, st)  # (an aggregate's: its keys and arguments)
    if isinstance(tree, str):
        return tree
    top = _top_k(plan, inputs, tree) if st is None else None
    if isinstance(top, str):
        return top
    if top is not None:  # (its plan without the ORDER BY and the LIMIT: what DuckDB evaluates before its top-N)
        tree = _inner_tree(plan, top)
        if isinstance(tree, str):
            return tree
    carried = carried_casts(tree, _text(inputs, st, top))
    got = unsupported(tree, carried=carried)
    if got == "the operator Aggregate" and no_state:
        return f"the view's aggregate keeps no state DuckDB computes ({no_state})"
    if got:
        return f"DuckDB might not evaluate {got} as Spark does"
    aggregates = text_aggregates(tree)
    if isinstance(aggregates, str):
        return f"DuckDB might not evaluate {aggregates} as Spark does"
    return st, plan.state is not None, top, carried, aggregates


def _text(inputs: WriteInputs, st: StatePlan | None, top: _TopK | None) -> str:
    """The Spark SQL DuckDB evaluates: an aggregate's input query, a top-k's query without its ORDER BY and LIMIT,
    or the view's query."""
    return st.queries.input_query if st is not None else top.inner if top is not None else inputs.view.query


def _view_refusal(plan: PlanFacts, inputs: WriteInputs) -> str | None:
    """Why not, from the setting, the view's checks and column types, its sources and the session, or None."""
    from mvsink import settings

    if not settings.duckdb_full_diff():
        return "MVSINK_DUCKDB_FULL_DIFF is off"
    if inputs.view.checks or inputs.with_error:
        return "the view has checks (their counts are Spark observations)"
    for f in plan.desired.schema.fields:  # (an aggregate's: its visible columns and its state)
        if not _groupable(f.dataType):
            return f"column {f.name!r} is of type {f.dataType.simpleString()}, which DuckDB may group otherwise"
    if str(inputs.spark.conf.get("spark.sql.ansi.enabled")).lower() != "true":
        return "Spark is not in ANSI mode (it wraps an overflow, DuckDB fails)"
    if not plan.plan_readable:
        return "this Spark Connect server gives no typed plan"
    return None


def _top_k(plan: PlanFacts, inputs: WriteInputs, tree: PlanNode) -> _TopK | str | None:
    """A top-k view's order and limit (:func:`mvsink.incremental.topk.topk_split` reads them from Spark's plan), or
    why DuckDB may not compute it, or None for a view without a LIMIT at its top. Its rows are the query's only
    where the rows ranked k and k + 1 do not tie in the ORDER BY (else Spark picks among them): :func:`_run`
    checks that on the data."""
    import sqlglot
    from sqlglot import exp

    from mvsink.incremental.topk import NOT_TOPK, topk_split

    # (the order and the limit only, no changed source: DuckDB computes the whole query, linear in them or not: TPC-H
    # Q2's ORDER BY input holds a correlated MIN)
    split = topk_split(tree, [])
    if isinstance(split, str):
        return None if split.startswith(NOT_TOPK) else f"a top-k view: {split}"
    try:
        q = sqlglot.parse_one(inputs.view.query, dialect="spark")
    except sqlglot.errors.ParseError:
        return "the top-k query could not be read"
    if not isinstance(q, exp.Select) or not q.args.get("order") or not q.args.get("limit") or q.args.get("offset"):
        return "a top-k view whose query is not one SELECT ... ORDER BY ... LIMIT"
    inner = q.copy()
    inner.set("order", None)
    inner.set("limit", None)
    return _TopK(split.limit, split.order, inner.sql(dialect="spark"))


def _inner_tree(plan: PlanFacts, top: _TopK) -> PlanNode | str:
    """The plan of a top-k view's query without its ORDER BY and LIMIT, or why not."""
    from pyspark.errors import PySparkException

    from mvsink.plan.read import plan_tree
    from mvsink.plan.tree import PlanFormatError

    try:
        return plan_tree(plan.spark, top.inner)
    except (PlanFormatError, PySparkException) as exc:
        return f"the plan of the top-k query without its ORDER BY could not be read: {str(exc).splitlines()[0]}"


def _aggregate(plan: PlanFacts, inputs: WriteInputs) -> tuple[StatePlan | None, str | None]:
    """The view's aggregate as its state plan (the table's, or one analysed here for a table kept without state),
    or None and why not (None: the query has no aggregate at all, as sqlglot reads it)."""
    from mvsink.incremental.aggplan import state_plan
    from mvsink.incremental.statequeries import state_queries

    if plan.state is not None:
        return plan.state, None
    q = state_queries(inputs.view.query)  # (pure: no Spark)
    if isinstance(q, str):
        return None, None if q == "the query has no aggregate" else q
    got = state_plan(inputs.spark, inputs.view, plan.result)  # (analysis only: no Spark job)
    return (None, got) if isinstance(got, str) else (got, None)


def _input_tree(plan: PlanFacts, st: StatePlan) -> PlanNode | str:
    """The plan of the aggregate's input query (keys and arguments over the query's FROM/WHERE), or why not."""
    if st is plan.state:
        return plan.input_tree
    from mvsink.plan.read import plan_tree
    from mvsink.plan.tree import PlanFormatError

    try:
        return plan_tree(plan.spark, st.queries.input_query, desired=st.input)
    except PlanFormatError as exc:
        return f"the plan could not be read: {exc}"


def _groupable(dt: DataType) -> bool:
    """Does DuckDB read, compute and group values of this Spark type exactly as Spark does (what
    :func:`mvsink.engines.duckdbsql.unsupported` allows: no floating point, collations, nesting, timestamps)?"""
    from pyspark.sql import types as T

    if isinstance(dt, T.StringType):
        return getattr(dt, "collation", "UTF8_BINARY") == "UTF8_BINARY"
    return isinstance(dt, (T.IntegralType, T.DecimalType, T.DateType, T.BooleanType))


def _compute(
    plan: PlanFacts,
    inputs: WriteInputs,
    st: StatePlan | None,
    *,
    with_state: bool,
    top: _TopK | None,
    casts: dict[Comparison, CastPair],
    aggregates: _Aggregates = (None, None),
    first_build: bool,
) -> pa.Table | str:
    """:func:`duckdb_full_diff` once refusals from the plan are ruled out: the query and the sources' reads taken
    from Spark's analysis, then :func:`run_full_diff`. A select-project-join view with a view source keeps them
    for refreshes without Spark (:func:`mvsink.incremental.driverfacts.remember_full`)."""
    from mvsink.engines.duckdbsql import Untranslatable
    from mvsink.engines.duckdbtext import duckdb_schema, duckdb_sql
    from mvsink.incremental.driverfacts import FullDiffQuery
    from mvsink.incremental.partreads import named_columns
    from mvsink.spark.sources import arrow_table_schema

    spark, view, desc = inputs.spark, inputs.view, inputs.desc
    text = _text(inputs, st, top)
    try:
        query = duckdb_sql(text, casts=casts, average=aggregates[0], total=aggregates[1])
    except Untranslatable as exc:
        return f"the query does not translate to DuckDB exactly ({exc})"
    if st is not None:  # an aggregate's rows (and its state where the table keeps it), grouped by DuckDB
        from mvsink.incremental.duckdbagg import state_sql

        query = state_sql(st.queries, query, sum_types=st.sum_types, avg_types=st.avg_types, with_state=with_state)
    # (None where it selects *: each source gives all its columns; an aggregate: those its keys and arguments name)
    # (an input naming no column, a count(*) alone: every column, as for a *)
    columns = named_columns(text) or None
    zone = str(spark.conf.get("spark.sql.session.timeZone"))
    spec = FullDiffQuery(
        query=query,
        schemas={s.name: duckdb_schema(spark.table(s.name).schema, columns, zone) for s in desc.sources},
        schema=arrow_table_schema(plan.desired.schema),
    )
    got = run_full_diff(spec, desc, None if first_build else inputs.table, top=top)
    if not isinstance(got, str) and st is None and top is None and any(s.kind == "view" for s in desc.sources):
        from mvsink.incremental.driverfacts import remember_full
        from mvsink.incremental.modes.ordered import full_only_changes

        names = [s.name for s in desc.sources]
        spec = dataclasses.replace(spec, full_for=full_only_changes(plan, names, incremental=view.incremental))
        remember_full(view, desc, inputs.table, spec, columns=got.column_names if first_build else None)
    return got


def run_full_diff(
    spec: FullDiffQuery, desc: BatchDescription, table: ViewTable | None, *, top: _TopK | None = None
) -> pa.Table | str:
    """The full diff's corrections by DuckDB, without Spark: ``spec``'s query over the sources at ``desc``'s
    versions (a view source: its rows at the batch's time) against ``table``'s updates before the batch (None: a
    first build, the query's rows as they are); or why not (the reads' checks, any DuckDB error)."""
    import shutil
    import tempfile

    import duckdb

    from mvsink.core.readlog import read_log
    from mvsink.incremental.duckdbterms import snapshot_relation, view_relation

    for s in desc.sources:
        if not s.path.is_local:
            return f"source {s.name!r} is not on the local disk (DuckDB reads local files only)"
    rel = None if table is None else _table_relation(table, spec.schema)
    if rel is not None and rel.startswith("!"):
        return rel[1:]
    budget = {"scan": MAX_SCAN_BYTES, "memory": 0}  # DuckDB scans the files itself; nothing read into memory
    sources: dict[str, Any] = {}
    with read_log():  # (the full diff's reads are recorded already, each source whole: not counted twice)
        for s in desc.sources:
            sch = spec.schemas.get(s.name)
            if sch is None:
                return f"source {s.name!r} has no read in the full diff's query"
            if s.kind == "view":  # (an upstream view's rows at the batch's time, consolidated by DuckDB)
                got = view_relation(s, list(sch.names), sch, through=desc.time, budget=budget)
            else:
                got = snapshot_relation(s, s.version, None, list(sch.names), sch, budget)
            if isinstance(got, str):
                return got
            sources[s.name] = got[0]
    spill = tempfile.mkdtemp(prefix="mvsink-duckdb-")
    con = duckdb.connect(config={"memory_limit": MEMORY_LIMIT, "temp_directory": spill})
    try:
        return _run(con, sources, spec.query, rel, spec.schema, lower=desc.upper, at=desc.time, top=top)
    except Exception as exc:  # noqa: BLE001 (any failure here: the caller's fallback gives the answer)
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return f"DuckDB failed ({type(exc).__name__}: {first})"
    finally:
        con.close()
        shutil.rmtree(spill, ignore_errors=True)


def _table_relation(table: ViewTable, schema: pa.Schema) -> str:
    """DuckDB's read of the view table's updates: a subquery of its user columns (under the names ``c0``, ``c1``
    ..., of the query's types) and ``_mv_time``, ``_mv_diff``; or ``!why`` not (a file not local, a column missing
    or not of the query's type or an exact widening of it, another number of columns than the query's)."""
    import pyarrow as pa

    from mvsink.engines.duckdb import parquet_relation

    names = [c for c in table.column_names if c not in (TIME, DIFF, ERROR)]
    user = [f for f in schema if f.name not in (TIME, DIFF)]
    if len(names) != len(user):
        return f"!the table has {len(names)} columns, the query {len(user)}"
    uris = table.file_uris()
    if not uris:
        return "!the table has no files"
    want = pa.schema(
        [pa.field(f"c{i}", f.type) for i, f in enumerate(user)]
        + [pa.field(TIME, pa.int64()), pa.field(DIFF, pa.int64())]
    )
    pairs = [(f"c{i}", n) for i, n in enumerate(names)] + [(TIME, TIME), (DIFF, DIFF)]
    rel = parquet_relation(uris, pairs, want)
    if rel is None:
        return "!the table's files are not local Parquet of the query's types"
    return rel


def _run(
    con: Any,
    sources: dict[str, Any],
    query: str,
    table: str | None,
    schema: pa.Schema,
    *,
    lower: int,
    at: int,
    top: _TopK | None = None,
) -> pa.Table | str:
    """The comparison in DuckDB of ``query`` over ``sources`` (subqueries over files, or Arrow tables) with the
    table's updates before ``lower`` (None: no table, the query's rows as they are), counted before it is fetched; the corrections cast to the table's Arrow
    ``schema``, stamped ``at``."""
    from mvsink.engines.duckdb import duckdb_identifier as q
    from mvsink.engines.duckdb import duckdb_type

    for name, src in sources.items():
        if isinstance(src, str):
            con.sql(f"CREATE TEMP VIEW {q(name)} AS {src}")
        else:
            con.register(name, src)
    user = [f for f in schema if f.name not in (TIME, DIFF)]
    cols = [f"c{i}" for i in range(len(user))]
    if top is not None:
        query = _top_rows(con, query, cols, top)
        if query.startswith("!"):
            return query[1:]
    desired = con.sql(f"SELECT * FROM ({query}) AS _q({', '.join(cols)})")
    for f, t in zip(user, desired.types, strict=True):  # DuckDB's type of each column, before anything runs
        why = _same_kind(str(t), f.type)
        if why:
            return f"column {f.name!r}: {why}"
    typed = ", ".join(f"CAST({c} AS {duckdb_type(f.type)}) AS {c}" for c, f in zip(cols, user, strict=True))
    listed = ", ".join(cols)
    if table is None:
        con.sql(f"CREATE TEMP TABLE {_CORR} AS SELECT {typed}, 1::BIGINT AS {_D} FROM ({query}) AS _q({listed})")
        return _fetch(con, user, schema, at=at)
    con.sql(
        f"CREATE TEMP TABLE {_CORR} AS SELECT {listed}, sum({_D})::BIGINT AS {_D} FROM ("
        f"SELECT {typed}, 1::BIGINT AS {_D} FROM ({query}) AS _q({listed}) "
        f"UNION ALL SELECT {listed}, -{DIFF} AS {_D} FROM {table} WHERE {TIME} < {int(lower)}) "
        f"GROUP BY {listed} HAVING sum({_D}) <> 0"
    )
    return _fetch(con, user, schema, at=at)


def _top_rows(con: Any, query: str, cols: list[str], top: _TopK) -> str:
    """A top-k view's rows: the first ``top.limit`` of ``query``'s (columns ``cols``) in the view's order, kept in a
    temporary table by one top-N (``limit + 1`` rows, ranked); a query over it, or ``!why`` not: the rows ranked k
    and k + 1 tie in every ORDER BY column (NULLs equal), so the top k is not one set of rows."""
    k = int(top.limit)
    order = ", ".join(
        f"c{p} {'DESC' if desc else 'ASC'} NULLS {'FIRST' if nulls_first else 'LAST'}"
        for p, desc, nulls_first in top.order
    )
    listed = ", ".join(cols)
    con.sql(
        f"CREATE TEMP TABLE _mv_top AS SELECT *, row_number() OVER (ORDER BY {order}) AS _mv_rank FROM "
        f"(SELECT * FROM ({query}) AS _q({listed}) ORDER BY {order} LIMIT {k + 1}) AS _t"
    )
    same = " AND ".join(f"a.c{p} IS NOT DISTINCT FROM b.c{p}" for p, _, _ in top.order) or "true"
    ((ties,),) = con.sql(
        f"SELECT count(*) FROM _mv_top a JOIN _mv_top b ON a._mv_rank = {k} AND b._mv_rank = {k + 1} AND {same}"
    ).fetchall()
    if ties:
        return f"!the rows ranked {k} and {k + 1} tie in the ORDER BY: Spark's top {k} picks among them"
    return f"SELECT {listed} FROM _mv_top WHERE _mv_rank <= {k}"


def _same_kind(duck: str, want: pa.DataType) -> str | None:
    """Why DuckDB's result type ``duck`` of a column may not be cast to Spark's (Arrow) ``want`` exactly, or None:
    a decimal of Spark's scale, any integer (a cast that does not fit fails), or the same type."""
    import re

    import pyarrow as pa

    if pa.types.is_decimal(want):
        m = re.fullmatch(r"DECIMAL\((\d+),\s*(\d+)\)", duck)
        return None if m and int(m.group(2)) == want.scale else f"DuckDB's {duck} is not of Spark's scale {want.scale}"
    if pa.types.is_integer(want):
        ok = duck in ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT")
        return None if ok else f"DuckDB's {duck} is not an integer"
    expected = {"VARCHAR": pa.types.is_string, "DATE": pa.types.is_date32, "BOOLEAN": pa.types.is_boolean}
    return None if expected.get(duck, lambda _: False)(want) else f"DuckDB's {duck} for Spark's {want}"


def _fetch(con: Any, user: list[pa.Field], schema: pa.Schema, *, at: int) -> pa.Table | str:
    """The corrections table counted (rows, bytes: fixed widths and string lengths), then fetched as Arrow in
    ``schema`` when within the bounds."""
    import pyarrow as pa

    from mvsink.core.arrowvalues import repeat_int64
    from mvsink.engines.duckdbtext import as_spark_types

    strings = [f"c{i}" for i, f in enumerate(user) if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)]
    width = 8 * (len(user) + 2)
    lengths = " + ".join(f"coalesce(sum(strlen({c})), 0)" for c in strings) or "0"
    ((rows, text),) = con.sql(f"SELECT count(*), {lengths} FROM {_CORR}").fetchall()
    size = int(rows) * width + int(text)
    if rows > MAX_CORRECTION_ROWS or size > MAX_CORRECTION_BYTES:
        return f"{rows} corrections (~{size // (1024 * 1024)} MiB), more than the process holds"
    got = con.sql(f"SELECT * FROM {_CORR}").to_arrow_table()
    body = got.drop_columns([_D]).rename_columns([f.name for f in user])
    typed = as_spark_types(body, pa.schema(user))
    if isinstance(typed, str):
        return typed
    out = typed.append_column(TIME, repeat_int64(at, got.num_rows)).append_column(DIFF, got.column(_D))
    return out.cast(schema)
