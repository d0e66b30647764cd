"""Incremental refresh of an aggregate by its affected groups (mode ``incremental:groups``).

A view whose plan is ``[Project/Sort]* -> Aggregate(keys, aggregates) -> C``, with C linear in every
changed source and every grouping key a plain column of the view, is refreshed from the sources'
changes in three steps (DESIGN.md section 8):

1. *Affected keys.* Every change term of the telescoping (:func:`mvsink.spark.incremental.telescope`:
   one source's inserted or deleted rows, the sources before it new, those after it old) is run through
   the user's query; the key columns of its output rows are exactly the groups that term's rows of C
   fall into (no HAVING: it could hide a group, so HAVING is not eligible). A row that moves between
   groups (a dimension change) shows up in a deleted term under its old group and in an inserted term
   under its new one, so both are affected. Each source's inserted and deleted rows are consolidated
   first, so the unchanged rows a copy-on-write rewrite removes and adds again cancel out and do not
   inflate the key set.
2. *Cost guard.* More affected keys than :data:`MAX_AFFECTED_FRACTION` of the view's rows: the full
   diff (recomputing most groups costs as much, and the restriction only adds work).
3. *Recompute only those groups.* desired = the query at the new versions restricted to the affected
   keys; persisted = the table's consolidated rows of those keys; corrections = the existing correction
   function over both. Exact: a group outside the key set has the same rows of C before and after, so
   its row of the view is unchanged. Keys are matched null-safely (a semi-join on ``<=>``); when there
   are at most :data:`MAX_INLINE_KEYS`, each key column's values are also inlined as an ``IN`` filter on
   the view's output, which Spark pushes below the aggregate and into the sources' scans (a semi-join
   alone is not pushed below the aggregate).

Not eligible (the full diff, with the reason): views with checks (their totals cannot be counted from the
affected groups alone), HAVING, a global aggregate, DISTINCT, a grouping key that is an expression or
not in the view's output, an input C that is not linear, and everything the linear path refuses.
"""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING, Any, Final

from mvsink.spark.transforms import quote_name as _quote

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import DataType

    from mvsink.core.batch import BatchDescription
    from mvsink.definitions.view import ViewDefinition

log = logging.getLogger(__name__)

MODE: Final = "incremental:groups"
# Above this many affected keys per row of the view, the full diff is used instead.
MAX_AFFECTED_FRACTION = 0.5
# Up to this many affected keys, each key column's values are inlined as an IN filter (pushed down).
MAX_INLINE_KEYS = 10_000
_SIGN = "_mv_groups_sign"
_KEY = "_mv_key_{}"


def net_changes(plus: DataFrame, minus: DataFrame) -> tuple[DataFrame, DataFrame]:
    """The rows a change set really inserted and deleted: equal rows removed and added again cancel.

    Multiplicities are dropped (only which groups the rows reach matters here). A source with a column
    Spark cannot group on (a map) keeps its change set as it is: correct, only more keys.
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    def groupable(dt: T.DataType) -> bool:
        if isinstance(dt, (T.MapType, T.VariantType)):
            return False
        if isinstance(dt, T.ArrayType):
            return groupable(dt.elementType)
        if isinstance(dt, T.StructType):
            return all(groupable(f.dataType) for f in dt.fields)
        return True

    if not all(groupable(f.dataType) for f in plus.schema.fields):
        return plus, minus
    cols = [F.col(_quote(c)) for c in plus.columns]
    signed = plus.select(*cols, F.lit(1).cast("bigint").alias(_SIGN)).unionByName(
        minus.select(*cols, F.lit(-1).cast("bigint").alias(_SIGN))
    )
    net = signed.groupBy(*cols).agg(F.sum(_SIGN).alias(_SIGN))
    return net.where(F.col(_SIGN) > 0).drop(_SIGN), net.where(F.col(_SIGN) < 0).drop(_SIGN)


def _key_match(left: DataFrame, keys: DataFrame, key_columns: list[str]) -> Column:
    return functools.reduce(
        lambda a, b: a & b, [left[_quote(c)].eqNullSafe(keys[_KEY.format(i)]) for i, c in enumerate(key_columns)]
    )


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


def group_corrections(
    spark: SparkSession,
    view: ViewDefinition,
    desc: BatchDescription,
    *,
    base: dict[str, int],
    desired: DataFrame,
    table_df: DataFrame,
    with_error: bool,
) -> tuple[DataFrame | None, str]:
    """Corrections of ``desc`` from recomputing only the groups the sources' changes touch, or (None, why not).

    ``desired``: the view's query over the sources at the versions ``desc`` reads (analysed, not run);
    ``table_df``: the view's table at the version write read. Leaves every source registered at the
    version ``desc`` reads.
    """
    from pyspark.sql import functions as F

    from mvsink.columns import DIFF, ERROR, TIME
    from mvsink.spark.incremental import changed_sources, prepare_changes, source_check, telescope
    from mvsink.spark.plan import aggregate_keys
    from mvsink.spark.transforms import consolidate, corrections

    why = source_check(desc, base)
    if why:
        return None, why
    if with_error:
        return None, (
            "the view has checks (or its table has error rows): their totals cannot be counted "
            "from the affected groups alone"
        )
    changed = changed_sources(desc, base)
    got = aggregate_keys(spark, view.query, [s.name for s in changed], desired=desired)
    if isinstance(got, str):
        return None, got
    key_columns, _ = got
    frames = prepare_changes(spark, view, desc, base, changed)
    if isinstance(frames, str):
        return None, frames
    net = {name: net_changes(plus, minus) for name, (plus, minus) in frames.items()}

    def term(sign: int) -> DataFrame:
        out = spark.sql(view.query)
        return out.select(*[F.col(_quote(c)).alias(_KEY.format(i)) for i, c in enumerate(key_columns)])

    terms = telescope(spark, view, desc, base, changed, net, term)
    keys = functools.reduce(lambda a, b: a.unionByName(b), terms).distinct().localCheckpoint(eager=True)
    n_keys = keys.count()
    live = table_df.where(F.col(TIME) < F.lit(desc.lower)).agg(F.sum(DIFF)).collect()[0][0] or 0
    if n_keys > MAX_AFFECTED_FRACTION * live:
        return None, (
            f"{n_keys} affected group(s) against {live} row(s) of the view "
            f"(over {MAX_AFFECTED_FRACTION:.0%}: the full diff is cheaper)"
        )

    user_t = [c for c in table_df.columns if c not in (TIME, DIFF, ERROR)]
    rows = table_df.select(*[F.col(_quote(a)).alias(b) for a, b in zip(user_t, desired.columns)], TIME, DIFF)
    want, have = desired, rows
    if n_keys <= MAX_INLINE_KEYS:
        pre = _inline_filter(keys.collect(), key_columns, [desired.schema[c].dataType for c in key_columns])
        if pre is not None:
            want, have = want.where(pre), have.where(pre)
    want = want.join(keys, _key_match(want, keys, key_columns), "left_semi")
    have = have.join(keys, _key_match(have, keys, key_columns), "left_semi")
    persisted = consolidate(have, list(desired.columns), before=desc.lower)
    corr = corrections(want, persisted, time=desc.time)
    return corr, (
        f"recomputed {n_keys} affected group(s) of {live} row(s) (keys {', '.join(key_columns)}) "
        f"from the changes of {', '.join(s.name for s in changed)}"
    )
