"""Incremental refresh of a top-k view, ``... ORDER BY o LIMIT k`` (mode ``incremental:topk``; DESIGN.md section 8).

A view whose analysed plan is ``[Project/SubqueryAlias/Sort]* -> GlobalLimit k -> LocalLimit k ->
[Project/SubqueryAlias]* -> Sort(o) -> M``, with M linear in every changed source — or partitioned by a key
(:mod:`mvsink.plan.partitioning`: an aggregate grouped by the join key, as TPC-H Q3 and Q18; Δ of M is then M over
the changed keys' partitions, new rows +1 and old ones -1, :mod:`mvsink.incremental.partitioned`) — keeps the first k
rows of M in the order o. Write refreshes it from the sources' changes without recomputing M when that is exact:

1. *Δ*, the change of M in the view's columns: every change term of the telescoping
   (:func:`mvsink.incremental.telescope.telescope`) is run through the user's query with the limit and the sorts
   taken off its analysed plan (:func:`mvsink.incremental.groups.strip_operators`), signed, and summed per row
   (so a copy-on-write rewrite's unchanged rows, and the rows a term reads from the other branches of a
   UNION ALL, cancel). Rows with a positive sum were inserted, with a negative one deleted. Collected to the
   driver: one Spark job (up to :data:`~mvsink.engines.duckdb.MAX_DRIVER_ROWS` rows; more: step 2 runs by Spark, as a DataFrame).
2. T = the table's consolidated rows (the persisted top k), read in the driver with pyarrow, where every
   check below is made (:mod:`mvsink.incremental.duckdbtopk`). The candidates are T − deleted ∪ inserted. If at
   least k of them rank at or before L, T's last row in the order o (always when no deleted row is in T), or
   T held fewer than k rows, the new top k is the candidates' first k, diffed against T. Otherwise the query is
   recomputed (by pyarrow over the source's files where M is one source's columns, else by Spark: a second
   job) and diffed against T. pyarrow orders the candidates where its order is Spark's (integers, decimals,
   dates, timestamps, booleans, binary-collation strings; NULLs placed per column as the query says), else
   Spark does over local rows (a second, small job; a deleted row of T then recomputes), so collations and
   floats order as Spark orders them. Δ is summed per row in the driver where every column groups there as in
   Spark (no shuffle). The corrections are an Arrow table, staged without Spark.

Why step 2 is exact. It needs o to be a *total* order on M: two different rows never tie. The view must
therefore declare a ``key`` (columns unique per row, a promise the view file makes) and the ORDER BY must
list every key column, of a type whose order has no ties between different values (not FLOAT/DOUBLE:
``-0.0`` and ``0.0`` tie; strings only in the binary collation). Then T holds the k first rows of M, every
other row of M comes after all of T, and deleting rows outside T leaves T's rows first; so the first k of
M' = M − deleted + inserted are among T ∪ inserted; and when deleted rows of T leave a gap, any k
candidates ranking at or before L still come before every row of M outside T. Duplicates cannot occur (the
key is unique); if Δ changes a row's multiplicity by more than one, or T ∪ inserted holds a key twice, or T
is not k rows of multiplicity one at most, the promise or the table is broken and the refresh takes the full
diff. Ties among the ORDER BY's other columns are broken by the key columns, in the query and here alike (the candidates are
sorted by the same columns, directions and NULL placement, by the same engine).

Not eligible (the full diff, with the reason): no declared key, an ORDER BY without all key columns, an
ORDER BY item that is an expression or not a column of the view, an OFFSET, a LIMIT without ORDER BY, a
filter above the limit, views with checks, a view column Spark cannot group on, M neither linear nor partitioned, Spark
Connect (its EXPLAIN text has neither expression ids nor sort directions), and everything the linear path
refuses.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING, Any, Final

from mvsink.columns import DIFF, TIME
from mvsink.engines.arrow import collect_small
from mvsink.incremental.duckdbtopk import CHANGE_COUNT, refresh_in_driver, sort_column
from mvsink.spark.connectplan import has_plan
from mvsink.spark.transforms import null_safe_match
from mvsink.spark.transforms import quote_name as _quote

if TYPE_CHECKING:
    from collections.abc import Callable

    import pyarrow as pa
    from pyspark.sql import DataFrame
    from pyspark.sql.types import DataType

    from mvsink.core.batch import BatchDescription, SourceRead
    from mvsink.core.table import ViewTable
    from mvsink.definitions.view import ViewDefinition
    from mvsink.incremental.telescope import ChangeFrames, ChangeInputs
    from mvsink.plan.partitioning import Partitioning
    from mvsink.plan.tree import PlanNode

MODE: Final = "incremental:topk"
# The start of the reason when the query is not ORDER BY ... LIMIT at all (the caller may leave it out).
NOT_TOPK: Final = "the query's top is not ORDER BY ... LIMIT"
_ABOVE_LIMIT = frozenset({"Project", "SubqueryAlias", "Sort"})
_N = CHANGE_COUNT


@dataclasses.dataclass(frozen=True)
class TopKSplit:
    """``limit``: k; ``order``: per ORDER BY item, (position of the view's column, descending, NULLs first);
    ``chain``: the operators from the plan's root down to the Sort; ``input``: M, the Sort's input."""

    limit: int
    order: tuple[tuple[int, bool, bool], ...]
    chain: tuple[str, ...]
    input: PlanNode
    partitioned: Partitioning | None = None  # M not linear but partitioned by a key: Δ by a partitioned recompute


def topk_split(tree: PlanNode, sources: list[str]) -> TopKSplit | str:
    """The split of a top-k plan over changes of ``sources``, or why it is not one (failing closed)."""
    from mvsink.plan.linearity import SUBQUERY_REASON, whole_plan_reason
    from mvsink.plan.splits import output_columns, output_refs
    from mvsink.plan.tree import PlanExpr

    chain: list[PlanNode] = []
    node = tree
    while node.name in _ABOVE_LIMIT and len(node.children) == 1:
        chain.append(node)
        node = node.children[0]
    if node.name != "GlobalLimit":
        return f"{NOT_TOPK} ({node.name})"
    why = whole_plan_reason(tree)
    if why and not why.startswith(SUBQUERY_REASON):  # (a subquery in M may still partition it: below)
        return why
    limit = _limit(node)
    local = node.children[0] if len(node.children) == 1 else None
    if limit is None or local is None or local.name != "LocalLimit" or _limit(local) != limit:
        return "the LIMIT could not be read (it must be a number)"
    below: list[PlanNode] = []  # projections between the limit and the sort (ORDER BY a column not selected)
    sort = local.children[0] if len(local.children) == 1 else local
    while sort.name in ("Project", "SubqueryAlias") and len(sort.children) == 1:
        below.append(sort)
        sort = sort.children[0]
    if sort.name != "Sort":
        return "an OFFSET below the LIMIT" if sort.name == "Offset" else "a LIMIT without ORDER BY keeps arbitrary rows"
    got = _order_by(sort)
    if isinstance(got, str):
        return got
    order_ids, specs = got
    refs = output_refs(sort.children[0])
    if refs is None:
        return "the columns of the ORDER BY's input could not be read"
    cols = output_columns([PlanExpr("AttributeReference", ref=r) for r in refs], order_ids, chain + below)
    if isinstance(cols, str):
        return cols
    order = []
    for i, (descending, nulls_first) in enumerate(specs):
        at = [p for p, (_, k) in enumerate(cols) if k == i]
        if not at:
            return f"ORDER BY item #{i + 1} is not a column of the view"
        order.append((at[0], descending, nulls_first))
    if why and any(x.plans for n in (*chain, node, local, *below, sort) for x in n.all_expressions()):
        return why  # (a subquery above M)
    part = _partitioned(sort.children[0], sources)
    if isinstance(part, str):
        return part
    names = (*(n.name for n in chain), node.name, local.name, *(n.name for n in below), sort.name)
    return TopKSplit(limit, tuple(order), names, sort.children[0], part)


def _partitioned(m: PlanNode, sources: list[str]) -> Partitioning | str | None:
    """None where M is linear in every changed source; else the key that partitions it, or why neither."""
    from mvsink import settings
    from mvsink.plan.linearity import nonlinear_reason
    from mvsink.plan.partitioning import partitioning

    for s in sources:
        why = nonlinear_reason(m, s)
        if why:
            part = partitioning(m, sources) if settings.incremental_partitioned() else None
            if part is None or isinstance(part, str):
                also = f"; and not partitioned by a key: {part}" if part else ""
                return f"the ORDER BY's input is not linear in {s!r}: {why}{also}"
            return part
    return None


def _order_by(sort: PlanNode) -> tuple[dict[int, int], list[tuple[bool, bool]]] | str:
    """({expression id of an ORDER BY column: its index}, [(descending, NULLs first)] per item), or why not."""
    if sort.attrs.get("global") is not True or "order" not in sort.attrs or len(sort.children) != 1:
        return "the ORDER BY could not be read"
    o0, o1 = sort.attrs["order"]
    order_ids: dict[int, int] = {}
    specs: list[tuple[bool, bool]] = []
    for i, e in enumerate(sort.expressions[o0:o1]):
        child = e.children[0] if e.name == "SortOrder" and e.children else None
        if child is None or "descending" not in e.attrs:
            return "the ORDER BY could not be read"
        if child.name != "AttributeReference" or child.ref is None:
            return f"ORDER BY item #{i + 1} is an expression ({child.name}), not a column"
        order_ids.setdefault(child.ref[1], i)
        specs.append((bool(e.attrs["descending"]), bool(e.attrs["nulls_first"])))
    return order_ids, specs


def _limit(node: PlanNode) -> int | None:
    """The limit of a GlobalLimit/LocalLimit when it is an integer literal."""
    e = node.expressions[0] if len(node.expressions) == 1 else None
    if e is None or e.name != "Literal" or e.attrs.get("type") != "integer":
        return None
    try:
        return int(str(e.attrs.get("value")))
    except ValueError:
        return None


def _total(dt: DataType) -> bool:
    """Different values of this type never compare equal (so a unique key of it makes an order total)."""
    from pyspark.sql import types as T

    if isinstance(dt, T.StringType):
        return getattr(dt, "collation", "UTF8_BINARY") == "UTF8_BINARY"
    return isinstance(
        dt,
        (T.IntegralType, T.DecimalType, T.DateType, T.TimestampType, T.TimestampNTZType, T.BooleanType, T.BinaryType),
    )


def key_positions(view: ViewDefinition, desired: DataFrame, split: TopKSplit) -> list[int] | str:
    """Positions of the view's declared key columns when they make the ORDER BY total, else why not."""
    if not view.key:
        return (
            "ORDER BY ... LIMIT needs a total order: declare the view's `key` (columns unique per row) "
            "and list all of it in the ORDER BY"
        )
    lower = [c.lower() for c in desired.columns]
    ordered = {p for p, _, _ in split.order}
    out = []
    for k in view.key:
        if k.lower() not in lower:
            return f"key column {k!r} is not a column of the view"
        p = lower.index(k.lower())
        if p not in ordered:
            return (
                f"the ORDER BY does not list key column {k!r}: rows that tie would make the top {split.limit} arbitrary"
            )
        dt = desired.schema.fields[p].dataType
        if not _total(dt):
            return f"key column {k!r} has type {dt.simpleString()}, whose order ties different values"
        out.append(p)
    return out


def topk_corrections(
    ci: ChangeInputs,
    *,
    desired: DataFrame,
    table: ViewTable,
    table_df: Callable[[], DataFrame],
    with_error: bool,
) -> tuple[DataFrame | pa.Table | None, str]:
    """Corrections of ``ci.desc`` for a top-k view from the sources' changes, or (None, why not).

    ``desired``: the view's query over the sources at the versions ``desc`` reads (analysed, not run);
    ``table``/``table_df()``: the view's table at the version write read (delta-rs's handle; Spark's read of
    it, made only when needed). Leaves every source registered at the version ``desc`` reads.

    Up to :data:`~mvsink.engines.duckdb.MAX_DRIVER_ROWS` changed rows of M (the usual case), Δ is collected with one Spark job and
    step 2 runs in the driver (T read with pyarrow; the candidates ordered by Spark over local rows, a second
    job when rows were inserted); the corrections are then an Arrow table.
    """
    from pyspark.errors import PySparkException

    from mvsink.incremental.groups import groupable
    from mvsink.incremental.linear import prepare_changes
    from mvsink.plan.read import plan_tree
    from mvsink.plan.tree import PlanFormatError
    from mvsink.spark.messages import first_paragraph

    spark, view, desc, changed = ci.spark, ci.view, ci.desc, ci.changed
    try:
        tree = plan_tree(spark, view.query, desired=desired)
    except PlanFormatError as exc:
        return None, f"the plan could not be read: {exc}"
    split = topk_split(tree, [s.name for s in changed])
    if isinstance(split, str):
        return None, split
    if with_error:
        return None, "the view has checks (or its table has error rows): their totals need the whole view"
    key = key_positions(view, desired, split)
    if isinstance(key, str):
        return None, key
    bad = [f.name for f in desired.schema.fields if not groupable(f.dataType)]
    if bad:
        return None, f"column {bad[0]!r} has a type Spark cannot group rows by"
    if not has_plan(desired):
        return None, "over this Spark Connect server the query's plan cannot be taken apart"
    frames = prepare_changes(ci, tree=lambda: tree)
    if isinstance(frames, str):
        return None, frames
    names = ", ".join(s.name for s in changed)
    projected = projection(desired, split, changed) if split.partitioned is None else None
    got = _projected_change(desired, projected, frames)

    def in_driver(delta: pa.Table) -> tuple[DataFrame | pa.Table | None, str]:
        return refresh_in_driver(
            spark, desired, table, desc, split.order, split.limit, key, delta, changed=names, projection=projected
        )

    if got is not None:  # no Spark job: Δ read from the change files
        return in_driver(got)
    union = _change(ci, split, frames, table, desired)
    names += "" if split.partitioned is None else f" (a partitioned recompute on {split.partitioned.describe()})"
    if isinstance(union, str):
        return None, union
    if not hasattr(union, "sparkSession"):  # Δ from DuckDB (the partitioned recompute in the driver)
        return in_driver(union)
    try:
        got = _change_in_driver(desired, union)
        delta = _summed(union)
        if got is None:
            got = collect_small(delta)
        if got is not None:
            return in_driver(got)
        return _refresh(desired, table_df(), desc, split, key, delta.localCheckpoint(eager=True), changed=names)
    except PySparkException as exc:  # e.g. an expression the limit kept from failing (ANSI): the full diff
        return None, f"the change of the ORDER BY's input could not be computed: {first_paragraph(exc)}"


def _change(
    ci: ChangeInputs, split: TopKSplit, frames: ChangeFrames, table: ViewTable, desired: DataFrame
) -> DataFrame | pa.Table | str:
    """The change terms of M in the view's columns, each row with its sign (``_mv_topk_n``); not run. Where M is
    partitioned by a key (not linear), M over the changed keys' partitions, new rows +1 and old ones -1
    (:func:`~mvsink.incremental.partitioned.partitioned_rows`): evaluated by DuckDB where it may (the query without
    its ORDER BY and LIMIT, :func:`_without_order`), Δ then (:func:`_arrow_change`)."""
    from pyspark.sql import functions as F

    from mvsink.incremental.groups import strip_operators
    from mvsink.incremental.telescope import telescope
    from mvsink.plan.tree import PlanFormatError

    spark, view = ci.spark, ci.view
    chain = split.chain
    drop = frozenset(i for i, name in enumerate(chain) if name in ("GlobalLimit", "LocalLimit", "Sort"))

    def term(sign: int) -> DataFrame:
        out = strip_operators(spark, spark.sql(view.query), chain, drop)
        return out.select("*", F.lit(sign).cast("bigint").alias(_N))

    try:
        if split.partitioned is not None:
            from mvsink.incremental.partitioned import partitioned_rows

            inner = _without_order(spark, view.query)
            got = partitioned_rows(
                ci.terms(frames),
                split.partitioned,
                view.query,
                table,
                frame=lambda sql: strip_operators(spark, spark.sql(sql), chain, drop),
                weight=_N,
                mode="incremental:topk",
                tree=None if inner is None else inner[1],
                driver_query=None if inner is None else inner[0],
            )
            if isinstance(got, str) or hasattr(got, "sparkSession"):
                return got
            arrow = _arrow_change(desired, got)
            return (
                f"the change of the ORDER BY's input evaluated by DuckDB: {arrow}" if isinstance(arrow, str) else arrow
            )
        terms = telescope(ci.terms(frames), term)
    except PlanFormatError as exc:
        return f"the query's plan could not be taken apart: {exc}"
    return functools.reduce(lambda a, b: a.unionByName(b), terms)


def _without_order(spark: Any, query: str) -> tuple[str, PlanNode] | None:
    """The top-k ``query`` without its ORDER BY and LIMIT (Spark SQL) and its analysed plan, which DuckDB may
    evaluate over a partitioned recompute's restricted sources; None where it is not one plain SELECT."""
    import sqlglot
    from pyspark.errors import PySparkException
    from sqlglot import exp

    from mvsink.plan.read import plan_tree
    from mvsink.plan.tree import PlanFormatError

    try:
        q = sqlglot.parse_one(query, dialect="spark")
    except sqlglot.errors.ParseError:
        return None
    if not isinstance(q, exp.Select) or not q.args.get("order") or not q.args.get("limit") or q.args.get("offset"):
        return None
    inner = q.copy()
    inner.set("order", None)
    inner.set("limit", None)
    text = inner.sql(dialect="spark")
    try:
        return text, plan_tree(spark, text)
    except (PlanFormatError, PySparkException):
        return None


def _arrow_change(desired: DataFrame, rows: pa.Table) -> pa.Table | str:
    """Δ from DuckDB's signed rows of the ORDER BY's input (the view's columns and ``_mv_topk_n``): cast to Spark's
    types and summed per row in the driver, where every column groups there as in Spark; or why not."""
    from mvsink.engines.arrow import same_equality
    from mvsink.engines.duckdb import consolidated
    from mvsink.incremental.duckdbterms import as_view_rows
    from mvsink.spark.sources import arrow_table_schema

    if not all(same_equality(f.dataType) for f in desired.schema.fields):
        return "a column of the view does not group in the driver as in Spark"
    signed = rows.rename_columns([DIFF if c == _N else c for c in rows.column_names])
    typed = as_view_rows(signed, list(desired.columns), arrow_table_schema(desired.schema))
    if isinstance(typed, str):
        return typed
    net = consolidated(typed)
    return net.rename_columns([_N if c == DIFF else c for c in net.column_names])


def _summed(union: DataFrame) -> DataFrame:
    """Δ: the change terms' rows summed per row by Spark, zero sums dropped (not run)."""
    from pyspark.sql import functions as F

    columns = [F.col(_quote(c)) for c in union.columns if c != _N]
    return union.groupBy(*columns).agg(F.sum(_N).alias(_N)).where(F.col(_N) != 0)


def projection(
    desired: DataFrame, split: TopKSplit, changed: list[SourceRead]
) -> tuple[SourceRead, list[tuple[str, str]]] | None:
    """M as one changed source's columns: the source and each view column's ``(name, source column)``, where M is
    a Project of columns (renamed or not) straight over the one changed source and the view is M's top k (no
    operator above the limit, every column grouped in the driver as in Spark); else None."""
    from mvsink.engines.arrow import same_equality

    m = split.input
    if len(changed) != 1 or split.chain != ("GlobalLimit", "LocalLimit", "Sort") or m.name != "Project":
        return None
    source = changed[0]
    if not all(same_equality(f.dataType) for f in desired.schema.fields):
        return None
    below = m.children[0] if len(m.children) == 1 else None
    while below is not None and below.name == "SubqueryAlias" and len(below.children) == 1:
        below = below.children[0]
    if below is None or below.name != "View" or str(below.attrs.get("view", "")).lower() != source.name.lower():
        return None
    columns: list[tuple[str, str]] = []
    for e in m.expressions:
        if e.name == "AttributeReference" and e.ref is not None:
            columns.append((e.ref[0], e.ref[0]))
        elif e.name == "Alias" and e.ref is not None and len(e.children) == 1:
            inner = e.children[0]
            if inner.name != "AttributeReference" or inner.ref is None:
                return None
            columns.append((e.ref[0], inner.ref[0]))
        else:
            return None
    if [name for name, _ in columns] != list(desired.columns):
        return None
    return source, columns


def _projected_change(
    desired: DataFrame, projected: tuple[SourceRead, list[tuple[str, str]]] | None, frames: ChangeFrames
) -> pa.Table | None:
    """Δ read from the change files with pyarrow where M is one source's columns (:func:`projection`): the change
    rows projected, summed per row (:func:`~mvsink.engines.duckdb.change_rows`). None otherwise, or where the
    driver cannot be sure (see there); Spark computes Δ then."""
    import pyarrow as pa

    from mvsink.engines.arrow import change_rows
    from mvsink.engines.duckdb import consolidated
    from mvsink.spark.sources import arrow_table_schema

    sets = frames.sets or {}
    if projected is None or projected[0].name not in sets:
        return None
    source, columns = projected
    user = [f for f in arrow_table_schema(desired.schema) if f.name not in (TIME, DIFF)]
    raw = change_rows(sets[source.name], columns, pa.schema([*user, pa.field(DIFF, pa.int64())]), weight=DIFF)
    if raw is None:
        return None
    net = consolidated(raw)
    return net.rename_columns([_N if c == DIFF else c for c in net.column_names])


def _change_in_driver(desired: DataFrame, union: DataFrame) -> pa.Table | None:
    """Δ with the change terms' rows collected (one job, no shuffle) and summed per row in the driver, where
    every column groups there as in Spark (:func:`~mvsink.engines.duckdb.same_equality`); else None."""
    from mvsink.engines.arrow import same_equality
    from mvsink.engines.duckdb import consolidated

    if not all(same_equality(f.dataType) for f in desired.schema.fields):
        return None
    raw = collect_small(union)
    if raw is None:
        return None
    net = consolidated(raw.rename_columns([DIFF if c == _N else c for c in raw.column_names]))
    return net.rename_columns([_N if c == DIFF else c for c in net.column_names])


def _refresh(
    desired: DataFrame,
    table_df: DataFrame,
    desc: BatchDescription,
    split: TopKSplit,
    key: list[int],
    delta: DataFrame,
    *,
    changed: str,
) -> tuple[DataFrame | None, str]:
    """Step 2 of the module docstring: the corrections from T and Δ, or (None, why not)."""
    from pyspark.sql import functions as F

    from mvsink.columns import ERROR
    from mvsink.spark.transforms import consolidate, corrections

    columns = list(desired.columns)
    key_cols = [columns[p] for p in key]
    k = split.limit
    user_t = [c for c in table_df.columns if c not in (TIME, DIFF, ERROR)]
    rows = table_df.select(*[F.col(_quote(a)).alias(b) for a, b in zip(user_t, columns)], TIME, DIFF)
    persisted = consolidate(rows, columns, before=desc.lower).localCheckpoint(eager=True)
    t = persisted.agg(F.count(F.lit(1)), F.min(DIFF), F.max(DIFF)).collect()[0]
    n_t = int(t[0])
    if n_t > k or (n_t and (t[1] != 1 or t[2] != 1)):
        return None, f"the table's rows are not a top {k} ({n_t} row(s), multiplicities {t[1]} to {t[2]})"
    d = delta.agg(
        F.count(F.when(F.col(_N) > 0, 1)), F.count(F.when(F.col(_N) < 0, 1)), F.max(F.abs(F.col(_N)))
    ).collect()[0]
    inserted, deleted = int(d[0]), int(d[1])
    if d[2] is not None and d[2] > 1:
        return None, (
            f"a row of the ORDER BY's input changed its multiplicity by {d[2]}: "
            f"the declared key {', '.join(key_cols)} is not unique there"
        )
    gone = delta.where(F.col(_N) < 0)
    in_top = null_safe_match(gone, persisted, [(c, c) for c in key_cols])
    if deleted and gone.join(persisted, in_top, "left_semi").limit(1).count():
        return corrections(desired, persisted, time=desc.time), (
            f"a deleted row was in the top {k}: recomputed the query, diffed against the table's {n_t} row(s) "
            f"(changes of {changed})"
        )
    candidates = persisted.select(*[F.col(_quote(c)) for c in columns]).unionByName(
        delta.where(F.col(_N) > 0).select(*[F.col(_quote(c)) for c in columns])
    )
    names = [F.col(_quote(c)) for c in key_cols]
    if inserted and candidates.groupBy(*names).count().where(F.col("count") > 1).limit(1).count():
        return None, f"the declared key {', '.join(key_cols)} is not unique among the top {k} and the inserted rows"
    order = [sort_column(columns[p], descending, nulls_first) for p, descending, nulls_first in split.order]
    new = candidates.orderBy(*order).limit(k)
    return corrections(new, persisted, time=desc.time), (
        f"top {k} of the table's {n_t} row(s) and {inserted} inserted row(s); {deleted} deleted row(s) "
        f"outside it (changes of {changed})"
    )
