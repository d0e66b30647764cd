"""Incremental refresh by affected groups (mode ``incremental:groups``).

A view whose analysed plan is ``[Project/Sort/SubqueryAlias/Filter]* -> P -> C``, with C linear in every
changed source, where P computes each group of C's rows on its own --

* an Aggregate with a GROUP BY (groups: its grouping keys; a HAVING is a Filter above it),
* a Distinct (groups: whole rows; ``SELECT DISTINCT``, and ``UNION`` = Distinct over a bag union),
* a Window with a PARTITION BY (groups: its partitions; a per-group top-k ``WHERE rn <= k`` is a Filter above),

and every key a plain column of the view (possibly renamed), is refreshed from the sources' changes in
three steps (DESIGN.md section 8; the split is :func:`mvsink.plan.splits.aggregate_split`):

1. *Affected keys*, from Δin, the change of C. Every change term of the telescoping
   (:func:`mvsink.incremental.telescope.telescope`: one source's inserted or deleted rows, the sources before it
   new, those after it old) is run through the user's query with the Filters and Sorts above P removed
   (and a Distinct itself: its input's rows are the keys), on Spark's analysed plan (:func:`strip_operators`).
   With the Filters gone nothing hides a group: an aggregate or window has a row for every group of the term's
   rows of C, and the key columns of those rows are exactly the groups the term touches. A row that moves
   between groups (a dimension change) shows up in a deleted term under its old group and in an inserted term
   under its new one, so both are affected. For an aggregate or window each source's inserted and deleted rows
   are consolidated first (:func:`net_changes`: the unchanged rows a copy-on-write rewrite removes and adds
   again cancel); for a Distinct the terms' rows are summed with their signs per key and only keys whose count
   in C changed are kept, which also cancels the rows a term reads from the other branches of a UNION (the
   same in its inserted and deleted halves).
2. *Cost guards.* Before any Spark job, the scan guard (:func:`mvsink.incremental.scanguard.scan_guard`: the change
   terms would read more than the full diff). The keys are collected (one Spark job, at most
   :data:`MAX_INLINE_KEYS` + 1 of them); more affected keys than :data:`MAX_AFFECTED_FRACTION` of the view's
   rows (at least one; counted from the table's rows, read in the driver): the full diff (recomputing most
   groups costs as much, and the restriction only adds work).
3. *Recompute only those groups.* desired = the query at the new versions restricted to the affected keys
   (a HAVING or ``rn <= k`` applies as usual); persisted = the table's consolidated rows of those keys;
   corrections = desired - persisted, per distinct row. Exact: a group outside the key set has the same
   rows of C before and after, so its rows of the view are unchanged; a HAVING crossing its threshold either
   way, a DISTINCT row whose count reaches or leaves zero, a top-k partition losing its first row, all show up
   as a recomputed group that differs from its persisted rows. Up to :data:`MAX_INLINE_KEYS` keys (the usual
   case), each key column's values are inlined as an ``IN`` filter on the view's output, which Spark pushes
   below the filter, the aggregate (or the window, on its partition columns) and into the sources' scans (a
   semi-join alone is not pushed below the aggregate); the filtered rows are collected (the second Spark job,
   at most :data:`~mvsink.engines.duckdb.MAX_DRIVER_ROWS`), and the rest runs in the driver (:mod:`mvsink.engines.duckdb`): the exact
   key match (null-safe, in DuckDB) on them and on the table's rows (read with pyarrow), and the corrections,
   an Arrow table staged without Spark. More keys or rows, or a key Spark and DuckDB compare differently (a
   collated string): the same by Spark, the keys matched by a null-safe semi-join (``<=>``).

Not eligible (the full diff, with the reason): views with checks (their totals cannot be counted from the
affected groups alone), a global aggregate, a window without PARTITION BY, a key that is an expression or not
in the view's output, an input C that is not linear, a Spark Connect server without mvsink's plugin (its EXPLAIN
text has no expression ids to prove the keys), and everything the linear path refuses. ``ORDER BY ... LIMIT`` is :mod:`mvsink.incremental.topk`.
"""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING, Any, Final

from mvsink.columns import DIFF, ERROR, TIME
from mvsink.core.costrecord import note
from mvsink.engines.arrow import collect_small, same_equality
from mvsink.spark.connectplan import has_plan
from mvsink.spark.session import is_connect
from mvsink.spark.transforms import null_safe_match
from mvsink.spark.transforms import quote_name as _quote

if TYPE_CHECKING:
    from collections.abc import Callable

    import pyarrow as pa
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import DataType, StructType

    from mvsink.core.batch import BatchDescription
    from mvsink.core.table import ViewTable
    from mvsink.incremental.telescope import ChangeInputs
    from mvsink.plan.splits import AggregateSplit

log = logging.getLogger(__name__)

MODE: Final = "incremental:groups"
# Above this many affected keys per row of the view, the full diff is used instead.
MAX_AFFECTED_FRACTION = 0.5
# Up to this many affected keys, each key column's values are inlined as an IN filter (pushed down).
MAX_INLINE_KEYS = 10_000
_SIGN = "_mv_groups_sign"
_KEY = "_mv_key_{}"


def groupable(dt: DataType) -> bool:
    """Can Spark group rows by a value of this type?"""
    from pyspark.sql import types as T

    if isinstance(dt, (T.MapType, T.VariantType)):
        return False
    if isinstance(dt, T.ArrayType):
        return groupable(dt.elementType)
    if isinstance(dt, T.StructType):
        return all(groupable(f.dataType) for f in dt.fields)
    return True


def net_changes(plus: DataFrame, minus: DataFrame) -> tuple[DataFrame, DataFrame]:
    """The rows a change set really inserted and deleted: equal rows removed and added again cancel.

    Multiplicities are dropped (only which groups the rows reach matters here). A source with a column
    Spark cannot group on (a map) keeps its change set as it is: correct, only more keys.
    """
    from pyspark.sql import functions as F

    if not all(groupable(f.dataType) for f in plus.schema.fields):
        return plus, minus
    cols = [F.col(_quote(c)) for c in plus.columns]
    signed = plus.select(*cols, F.lit(1).cast("bigint").alias(_SIGN)).unionByName(
        minus.select(*cols, F.lit(-1).cast("bigint").alias(_SIGN))
    )
    net = signed.groupBy(*cols).agg(F.sum(_SIGN).alias(_SIGN))
    return net.where(F.col(_SIGN) > 0).drop(_SIGN), net.where(F.col(_SIGN) < 0).drop(_SIGN)


def _key_match(left: DataFrame, keys: DataFrame, key_columns: list[str]) -> Column:
    return null_safe_match(left, keys, [(c, _KEY.format(i)) for i, c in enumerate(key_columns)])


def _exact_literals(dt: DataType) -> bool:
    """Values of this type come back from ``collect`` and go into a literal unchanged (a TIMESTAMP goes
    through the local time zone of Python, ambiguous in a DST fold; structs and arrays have no literal)."""
    from pyspark.sql import types as T

    return isinstance(dt, (T.NumericType, T.StringType, T.BooleanType, T.DateType, T.BinaryType, T.TimestampNTZType))


def _inline_filter(rows: list[Any], key_columns: list[str], types: list[DataType] | None = None) -> Column | None:
    """``k IN (values) [OR k IS NULL]`` per key column, ANDed: a superset of the keys Spark pushes down.

    Key columns of a type whose values may not survive the round trip through Python are left out
    (the semi-join after it stays exact either way; a filter must never drop an affected group).
    """
    from pyspark.sql import functions as F

    parts = []
    for i, c in enumerate(key_columns):
        if types is not None and not _exact_literals(types[i]):
            continue
        values = list(dict.fromkeys(r[i] for r in rows))  # first-seen order: a stable plan and log
        col = F.col(_quote(c))
        present = [v for v in values if v is not None]
        try:
            cond = col.isin(*present) if present else F.lit(False)
        except Exception:  # a value Spark has no literal for (a struct or array key): no prefilter on it
            log.debug("affected groups: no inline filter on key column %s", c, exc_info=True)
            continue
        parts.append(cond | col.isNull() if None in values else cond)
    return functools.reduce(lambda a, b: a & b, parts) if parts else None


def strip_operators(spark: SparkSession, df: DataFrame, chain: tuple[str, ...], drop: frozenset[int]) -> DataFrame:
    """``df`` without the operators at depths ``drop`` of ``chain`` (operator names from the plan's root down).

    Works on the analysed plan object (classic Spark over py4j; over Spark Connect in the server, by mvsink's
    plugin): each dropped operator must keep its input's columns (Filter, Sort, Distinct, limits), so the
    operators above it stay valid. Raises PlanFormatError when the plan's top is not ``chain``.
    """
    from pyspark.sql import DataFrame

    from mvsink.plan.tree import PlanFormatError

    if is_connect(df):  # the same, by mvsink's plugin in the Connect server
        from mvsink.spark import connectplan

        try:
            return connectplan.strip_operators(df, chain, drop)
        except ValueError as exc:
            raise PlanFormatError(str(exc).removeprefix("mvsink: ")) from None
    jvm = spark._jvm
    assert jvm is not None
    path = []
    node = df._jdf.queryExecution().analyzed()
    for depth, name in enumerate(chain):
        got = str(node.getClass().getSimpleName())
        if got != name or int(node.children().size()) != 1:
            raise PlanFormatError(f"the plan's operator at depth {depth} is {got}, not {name}")
        path.append(node)
        node = node.children().apply(0)
    for depth in reversed(range(len(chain))):
        if depth not in drop:
            node = path[depth].withNewChildren(jvm.PythonUtils.toSeq([node]))
    return DataFrame(jvm.org.apache.spark.sql.classic.Dataset.ofRows(spark._jsparkSession, node), spark)


def group_corrections(
    ci: ChangeInputs,
    *,
    desired: DataFrame,
    table: ViewTable,
    table_df: Callable[[], DataFrame],
    with_error: bool,
) -> tuple[DataFrame | pa.Table | None, str]:
    """Corrections of ``ci.desc`` from recomputing only the groups the sources' changes touch, or (None, why not).

    ``desired``: the view's query over the sources at the versions ``desc`` reads (analysed, not run);
    ``table``/``table_df()``: the view's table at the version write read (delta-rs's handle; Spark's read of
    it, made only when needed). Leaves every source registered at the version ``desc`` reads.

    Up to :data:`MAX_INLINE_KEYS` affected keys (the usual case) cost two Spark jobs: the keys collected, then
    the recomputed groups collected; the table's rows are read in the driver and the corrections are an Arrow
    table. More keys: the same by Spark.
    """
    from mvsink.plan.splits import aggregate_keys

    spark, view, desc, changed = ci.spark, ci.view, ci.desc, ci.changed
    if with_error:
        return None, (
            "the view has checks (or its table has error rows): their totals cannot be counted "
            "from the affected groups alone"
        )
    got = aggregate_keys(spark, view.query, [s.name for s in changed], desired=desired)
    if isinstance(got, str):
        return None, got
    key_columns, split = got
    prepared = _guarded_changes(ci, table, desired=desired)
    if isinstance(prepared, str):
        return None, prepared
    few = _driver_keys(ci, split, key_columns, prepared=prepared, desired=desired)
    keys = few if few is not None else _affected_keys(ci, split, key_columns, prepared=prepared, desired=desired)
    if isinstance(keys, str):
        return None, keys
    recomputed = _recomputed(spark, desc, desired, table, table_df, keys, key_columns)
    if isinstance(recomputed, str):
        return None, recomputed
    corr, n_keys, live = recomputed
    note(groups=n_keys)
    what = {"Aggregate": "group(s)", "Distinct": "distinct row(s)", "Window": "window partition(s)"}[split.kind]
    how = " (found by the change terms evaluated in the driver)" if few is not None else ""
    return corr, (
        f"recomputed {n_keys} affected {what} of {live} row(s) (keys {', '.join(key_columns)}) "
        f"from the changes of {', '.join(s.name for s in changed)}{how}"
    )


Recomputed = tuple["DataFrame | pa.Table", int, int]
"""Corrections of the affected groups, how many keys were affected, and the view's row count."""


def _too_many(n_keys: int, live: int) -> str | None:
    """Why ``n_keys`` affected groups are too many for a view of ``live`` rows (None: they are not)."""
    if n_keys <= MAX_AFFECTED_FRACTION * max(live, 1):
        return None
    return (
        f"{n_keys} affected group(s) against {live} row(s) of the view "
        f"(over {MAX_AFFECTED_FRACTION:.0%}: the full diff is cheaper)"
    )


def _recomputed(
    spark: SparkSession,
    desc: BatchDescription,
    desired: DataFrame,
    table: ViewTable,
    table_df: Callable[[], DataFrame],
    keys: DataFrame | pa.Table,
    key_columns: list[str],
) -> Recomputed | str:
    """Step 3: the groups of ``keys`` recomputed and diffed against their persisted rows, or why not (too many
    affected groups, a recompute that fails). Many keys: checkpointed, counted and joined by Spark. ``keys``: Spark's
    (not run), or the driver's (:func:`_driver_keys`: at most :data:`MAX_INLINE_KEYS`, of Spark's types)."""
    import pyarrow as pa
    from pyspark.errors import PySparkException

    from mvsink.spark.messages import first_paragraph

    try:
        if isinstance(keys, pa.Table):
            key_schema = _key_schema(desired, key_columns)
            return _few_keys(spark, desc, desired, table, table_df, key_schema, keys, key_columns)
        few = keys.limit(MAX_INLINE_KEYS + 1).toArrow()
        if few.num_rows > MAX_INLINE_KEYS:
            keys = keys.localCheckpoint(eager=True)
            n_keys = keys.count()
            live = _live(table.updates_before(None, lower=desc.lower))
            return _too_many(n_keys, live) or (_by_spark(desired, table_df(), desc, keys, key_columns), n_keys, live)
        return _few_keys(spark, desc, desired, table, table_df, keys.schema, few, key_columns)
    except PySparkException as exc:  # e.g. an expression a filter kept from failing (ANSI): the full diff
        return f"the affected keys could not be computed: {first_paragraph(exc)}"


def _few_keys(
    spark: SparkSession,
    desc: BatchDescription,
    desired: DataFrame,
    table: ViewTable,
    table_df: Callable[[], DataFrame],
    key_schema: StructType,
    few: pa.Table,
    key_columns: list[str],
) -> Recomputed | str:
    """:func:`_recomputed` for up to :data:`MAX_INLINE_KEYS` keys (``few``, collected, of Spark's types
    ``key_schema``, columns ``_mv_key_<i>``): the table's rows read in
    the driver, the groups recomputed by Spark and collected, and diffed here (by Spark when Spark and the
    driver compare the keys differently, or when the groups are large)."""
    from mvsink.engines.arrow import row_corrections
    from mvsink.engines.duckdb import consolidated, matching
    from mvsink.spark.sources import arrow_table_schema

    rows = table.updates_before(list(desired.columns), lower=desc.lower)
    n_keys, live = few.num_rows, _live(rows)
    big = _too_many(n_keys, live)
    if big:
        return big
    out_schema = arrow_table_schema(desired.schema)
    if not n_keys:
        return out_schema.empty_table(), 0, live
    local = spark.createDataFrame(few, schema=_nullable(key_schema))
    values = list(zip(*[c.to_pylist() for c in few.columns]))
    types = [desired.schema[c].dataType for c in key_columns]
    if not all(same_equality(t) for t in types):  # keys Spark and the driver compare differently
        return _by_spark(desired, table_df(), desc, local, key_columns, values), n_keys, live
    # The IN filter (a superset of the keys, pushed down) in Spark, the exact key match here; only without
    # any IN filter a semi-join with the keys in Spark (its broadcast of local rows is a Spark job of its own).
    pre = _inline_filter(values, key_columns, types)
    some = desired.where(pre) if pre is not None else _restricted(desired, local, key_columns)
    recomputed = collect_small(some)
    if recomputed is None:  # large groups: their rows diffed by Spark
        return _by_spark(desired, table_df(), desc, local, key_columns, values), n_keys, live
    exact = few.rename_columns(key_columns)
    want = matching(recomputed, exact, key_columns)
    persisted = consolidated(rows, keys=exact, key_columns=key_columns)
    return row_corrections(want, persisted, out_schema, at=desc.time), n_keys, live


def _key_schema(desired: DataFrame, key_columns: list[str]) -> StructType:
    """Spark's types of the view's key columns, named ``_mv_key_<i>``."""
    from pyspark.sql import types as T

    return T.StructType(
        [T.StructField(_KEY.format(i), desired.schema[c].dataType, True) for i, c in enumerate(key_columns)]
    )


def _driver_keys(
    ci: ChangeInputs,
    split: AggregateSplit,
    key_columns: list[str],
    *,
    prepared: dict[str, tuple[DataFrame, DataFrame]],
    desired: DataFrame,
) -> pa.Table | None:
    """Step 1 without a Spark job, where DuckDB evaluates the change terms exactly as Spark does
    (:func:`~mvsink.incremental.duckdbterms.signed_rows_in_driver`): the keys (columns ``_mv_key_<i>``, Spark's
    types) of the groups of an aggregate whose rows of C the changes touch, at most :data:`MAX_INLINE_KEYS`; else
    None (Spark's terms find them).

    C is the query's FROM/WHERE giving each key and every column its aggregates (and HAVING, ORDER BY) read
    (:func:`keys_query`); the terms' signed rows of C are summed per row, and the keys of the rows whose sum is not
    zero are the affected ones. Exact: two rows of C equal in the keys and in every column an aggregate reads
    count the same in every aggregate, so a pair of them that cancels (a copy-on-write rewrite's unchanged row)
    changes no group."""
    import pyarrow as pa

    from mvsink.core.arrowvalues import repeat_int64
    from mvsink.engines.duckdb import consolidated
    from mvsink.incremental import duckdbterms
    from mvsink.incremental.telescope import term_reads
    from mvsink.plan.read import plan_tree
    from mvsink.plan.tree import PlanFormatError
    from mvsink.spark.sources import arrow_table_schema

    if split.kind != "Aggregate":
        return None
    sql = keys_query(ci.view.query, key_columns)
    if sql is None:
        return None
    try:  # (C's own plan: what DuckDB must evaluate as Spark does, the columns its aggregates read included)
        tree = plan_tree(ci.spark, sql)
    except PlanFormatError:
        return None
    ct = ci.terms(prepared)
    rows = duckdbterms.signed_rows_in_driver(ct, sql, term_reads(ct), tree=tree, analysed=desired)
    if rows is None:
        return None
    names = [_KEY.format(i) for i in range(len(key_columns))]
    changed = consolidated(rows)
    keys = consolidated(changed.select(names).append_column(DIFF, repeat_int64(1, changed.num_rows)))
    if keys.num_rows > MAX_INLINE_KEYS:
        return None
    table_types = arrow_table_schema(_key_schema(desired, key_columns))  # (with the table's time and diff)
    types = pa.schema([table_types.field(n) for n in names])
    try:
        return keys.select(names).cast(types)  # safe: a key that does not fit Spark's type fails here
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
        log.info("view %s: affected keys by Spark: a key does not cast to Spark's type (%s)", ci.view.name, exc)
        return None


def keys_query(query: str, key_columns: list[str]) -> str | None:
    """The rows of an aggregate's input C as one SELECT: each of ``key_columns`` (the view's columns that are its
    grouping keys) as ``_mv_key_<i>`` and every column the aggregates of its select list, HAVING and ORDER BY read
    (their FILTER clauses too) as ``_mv_col_<j>``, over the query's FROM and WHERE; None where the query is not one
    plain ``SELECT ... GROUP BY`` of columns (a CTE, a set operation, DISTINCT, a window, a subquery, grouping sets)."""
    import sqlglot
    from sqlglot import exp

    try:
        tree = sqlglot.parse_one(query, dialect="spark")
    except sqlglot.errors.ParseError:
        return None
    if not isinstance(tree, exp.Select) or not tree.args.get("group") or not tree.args.get("from_"):
        return None
    if any(tree.args.get(k) for k in ("with_", "distinct", "windows", "qualify", "laterals", "limit", "offset")):
        return None
    if tree.find(exp.Window, exp.Subquery, exp.Exists, exp.Union) is not None:
        return None
    group = tree.args["group"]
    if any(group.args.get(k) for k in ("rollup", "cube", "grouping_sets")):
        return None
    grouped = {g.sql(dialect="spark").lower() for g in group.expressions if isinstance(g, exp.Column)}
    if len(grouped) != len(group.expressions):
        return None
    keys = []
    for name in key_columns:
        items = [it for it in tree.expressions if it.alias_or_name == name]
        key = items[0].unalias() if len(items) == 1 else None
        if not isinstance(key, exp.Column) or key.sql(dialect="spark").lower() not in grouped:
            return None
        keys.append(key.copy())
    read: dict[str, exp.Column] = {}  # (outside an aggregate a column is a key, or an output column's alias)
    for part in [*tree.expressions, tree.args.get("having"), tree.args.get("order")]:
        for agg in part.find_all(exp.AggFunc, exp.Filter) if part is not None else ():
            if isinstance(agg, exp.AggFunc) or isinstance(agg.this, exp.AggFunc):
                for c in agg.find_all(exp.Column):
                    read.setdefault(c.sql(dialect="spark").lower(), c)
    inp = tree.copy()
    for k in ("group", "having", "order"):
        inp.set(k, None)
    inp.set(
        "expressions",
        [exp.alias_(k, _KEY.format(i)) for i, k in enumerate(keys)]
        + [exp.alias_(c.copy(), f"_mv_col_{j}") for j, c in enumerate(read.values())],
    )
    return inp.sql(dialect="spark")


def _guarded_changes(
    ci: ChangeInputs, table: ViewTable, *, desired: DataFrame
) -> dict[str, tuple[DataFrame, DataFrame]] | str:
    """The sources' changes (:func:`~mvsink.incremental.linear.prepare_changes`), or why not: too large, or
    change terms that would read more than the full diff (the scan guard, on the pruned reads; the join edges
    from ``desired``'s plan, already read)."""
    from mvsink.incremental.linear import prepare_changes
    from mvsink.incremental.scanguard import scan_guard
    from mvsink.incremental.telescope import term_reads
    from mvsink.plan.read import plan_tree

    prepared = prepare_changes(ci, tree=lambda: plan_tree(ci.spark, ci.view.query, desired=desired))
    if isinstance(prepared, str):
        return prepared
    ct = ci.terms(prepared)
    too_big = scan_guard(ct, table, pruned=term_reads(ct), mode="incremental:groups")
    return too_big or prepared


def _live(rows: pa.Table) -> int:
    """The view's row count: the sum of ``_mv_diff`` over the table's updates."""
    import pyarrow.compute as pc

    return int(pc.sum(rows.column(DIFF)).as_py() or 0)


def _nullable(schema: StructType) -> StructType:
    from pyspark.sql import types as T

    return T.StructType([T.StructField(f.name, f.dataType, True) for f in schema.fields])


def _restricted(
    df: DataFrame, keys: DataFrame, key_columns: list[str], values: list[tuple[Any, ...]] | None = None
) -> DataFrame:
    """The rows of ``df`` whose key columns match a row of ``keys`` (columns ``_mv_key_<i>``), null-safely;
    with the keys' ``values`` also inlined as an IN filter (pushed down to the sources' scans)."""
    if values is not None:
        pre = _inline_filter(values, key_columns, [df.schema[c].dataType for c in key_columns])
        if pre is not None:
            df = df.where(pre)
    return df.join(keys, _key_match(df, keys, key_columns), "left_semi")


def _by_spark(
    desired: DataFrame,
    table_df: DataFrame,
    desc: BatchDescription,
    keys: DataFrame,
    key_columns: list[str],
    values: list[tuple[Any, ...]] | None = None,
) -> DataFrame:
    """Step 3 by Spark: corrections of the groups of ``keys`` (recomputed) against their rows in ``table_df``."""
    from pyspark.sql import functions as F

    from mvsink.spark.transforms import consolidate, corrections

    user_t = [c for c in table_df.columns if c not in (TIME, DIFF, ERROR)]
    rows = table_df.select(*[F.col(_quote(a)).alias(b) for a, b in zip(user_t, desired.columns)], TIME, DIFF)
    want = _restricted(desired, keys, key_columns, values)
    have = _restricted(rows, keys, key_columns, values)
    return corrections(want, consolidate(have, list(desired.columns), before=desc.lower), time=desc.time)


def _affected_keys(
    ci: ChangeInputs,
    split: AggregateSplit,
    key_columns: list[str],
    *,
    prepared: dict[str, tuple[DataFrame, DataFrame]],
    desired: DataFrame,
) -> DataFrame | str:
    """The keys (columns ``_mv_key_<i>``) of the groups whose rows of C the sources' changes touch (not run);
    or why they cannot be found. Leaves every source registered at the version ``desc`` reads. ``desired``: the
    view's query, analysed (whether its plan can be taken apart is asked of it: already known)."""
    from pyspark.sql import functions as F

    from mvsink.incremental.telescope import ChangeFrames, telescope
    from mvsink.plan.tree import PlanFormatError

    spark, view = ci.spark, ci.view
    chain = (*split.chain, split.kind)
    # Filters (HAVING, rn <= k) and Sorts above P come off, and a Distinct itself (its input rows are its keys).
    drop = frozenset(i for i, name in enumerate(chain) if name in ("Filter", "Sort", "Distinct"))
    if drop and not has_plan(desired):
        return "over this Spark Connect server the query's plan cannot be taken apart (its filters hide groups)"
    signed = split.kind == "Distinct"
    frames: dict[str, tuple[DataFrame, DataFrame]] = prepared
    if not signed:  # (the net changes' keys are among the changes': the pruned reads still hold)
        netted = ChangeFrames({name: net_changes(plus, minus) for name, (plus, minus) in prepared.items()})
        netted.pruned = prepared.pruned if isinstance(prepared, ChangeFrames) else None
        frames = netted
    key_cols = [F.col(_quote(c)).alias(_KEY.format(i)) for i, c in enumerate(key_columns)]

    def term(sign: int) -> DataFrame:
        out = spark.sql(view.query)
        if drop:
            out = strip_operators(spark, out, chain, drop)
        return out.select(*key_cols, *([F.lit(sign).cast("bigint").alias(_SIGN)] if signed else []))

    try:
        terms = telescope(ci.terms(frames), term)
    except PlanFormatError as exc:
        return f"the query's plan could not be taken apart: {exc}"
    union = functools.reduce(lambda a, b: a.unionByName(b), terms)
    if signed:  # the keys whose count in C changed
        names = [_KEY.format(i) for i in range(len(key_columns))]
        return union.groupBy(*names).agg(F.sum(_SIGN).alias(_SIGN)).where(F.col(_SIGN) != 0).drop(_SIGN)
    return union.distinct()
