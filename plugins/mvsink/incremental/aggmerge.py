"""The aggregate state's merge: each affected group's persisted state ⊕ its Δ, checked, and finalised into the
corrections (step 3 and 4 of :mod:`mvsink.incremental.modes.aggregate`).

It takes Δ per group (:class:`~mvsink.incremental.aggdelta.GroupDeltas`: collected as an Arrow table, or Spark's
frame when there are more groups than the driver merges) and the view's :class:`~mvsink.incremental.aggplan.StatePlan`;
it reads the table's rows of only those groups. Up to :data:`~mvsink.engines.arrow.MAX_DRIVER_ROWS` groups
(:func:`merge_in_driver`): the persisted rows read with pyarrow and matched null-safely in DuckDB, old ⊕ Δ in exact
Python arithmetic (:func:`_merge_rows`), the new rows finalised in Python where
:class:`~mvsink.incremental.aggfacts.AggregateFacts` says how, else by Spark over local rows. More groups
(:func:`merge_by_spark`): the same by Spark (:func:`_new_state`, its invariants checked by :func:`_violations`).
A state that cannot be trusted (a broken invariant, an overflow) is a reason: the full diff repairs it.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from mvsink.columns import DIFF, TIME
from mvsink.core.arrowvalues import empty_table, repeat_int64
from mvsink.incremental.aggfacts import AggregateFacts, finalised_rows
from mvsink.incremental.aggplan import StatePlan, formattable
from mvsink.incremental.statequeries import (
    AVG_COLUMN,
    COUNT,
    MULTIPLICITY_CAP,
    VALUES_COLUMN,
    decimal_average,
    decimal_type,
    extreme_column,
    multiplicity_column,
    nonnull_column,
    sum_column,
)
from mvsink.spark.transforms import null_safe_match
from mvsink.spark.transforms import quote_name as _quote

if TYPE_CHECKING:
    import decimal
    from collections.abc import Callable

    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from mvsink.core.table import ViewTable


def merge_in_driver(
    facts: AggregateFacts,
    delta: pa.Table,
    table: ViewTable,
    *,
    lower: int,
    at: int,
    spark: SparkSession | None = None,
    plan: StatePlan | None = None,
) -> tuple[pa.Table, int] | str:
    """:func:`_new_state` for few affected groups, without a Spark job: the old rows read with delta-rs,
    old ⊕ Δ merged here, and the new rows finalised in Python where ``facts.finalise`` says how
    (:func:`~mvsink.incremental.aggfacts.finalised_rows`), else by Spark over local rows (a local relation: no job;
    ``spark`` and ``plan`` then given).

    Returns (the corrections: −old, +new, stamped ``at``, in the table's Arrow schema; how many groups),
    or a reason for the full diff.
    """
    import pyarrow as pa

    from mvsink.engines.duckdb import consolidated_updates

    cols = list(facts.columns)
    out_schema = facts.schema
    if not delta.num_rows:  # nothing changed (a global aggregate's one row included)
        return empty_table(out_schema), 0
    # the table's consolidated rows (updates before ``lower``) of the groups in ``delta``: the view's columns
    # (named as the query's) and ``_mv_diff``
    old = consolidated_updates(table, cols, lower=lower, keys=delta, key_columns=facts.keys)
    averages: dict[int, tuple[str, decimal.Decimal] | None] = {}
    if facts.finalise is None:
        assert spark is not None and plan is not None
        averages = plan.averages(precision_loss=precision_loss(spark)) if plan.decimal_averages else {}
    merged = _merge_rows(facts, delta, old, averages=averages)
    if isinstance(merged, str):
        return merged
    new_rows, n_keys = merged
    parts = [
        old.select(cols)
        .append_column(TIME, repeat_int64(at, old.num_rows))
        .append_column(DIFF, pa.compute.negate(old.column(DIFF).cast(pa.int64())))
        .cast(out_schema)
    ]
    if new_rows:
        if facts.finalise is not None:
            new = finalised_rows(facts, new_rows)
            if isinstance(new, str):
                return new
        else:
            assert spark is not None and plan is not None
            new = _finalised_locally(spark, plan, new_rows, averages)
        parts.append(
            new.append_column(TIME, repeat_int64(at, new.num_rows))
            .append_column(DIFF, repeat_int64(1, new.num_rows))
            .cast(out_schema)
        )
    return pa.concat_tables(parts), n_keys


def _finalised_locally(
    spark: SparkSession,
    plan: StatePlan,
    new_rows: list[dict[str, Any]],
    averages: dict[int, tuple[str, decimal.Decimal] | None],
) -> pa.Table:
    """New state rows finalised by Spark over a local relation (no job): :func:`finalised`."""
    import pyarrow as pa
    from pyspark.sql import types as T
    from pyspark.sql.pandas.types import to_arrow_schema

    from mvsink.engines.arrow import local_arrow

    schema = plan.desired.schema
    in_python = [
        T.StructField(AVG_COLUMN.format(i), T.DecimalType(*(decimal_type(plan.avg_types[i]) or (38, 18))))
        for i, sql in averages.items()
        if sql is None
    ]
    q = plan.queries
    state_schema = T.StructType([schema[k] for k in q.keys] + [schema[c] for c in plan.state_columns] + in_python)
    live = spark.createDataFrame(
        pa.Table.from_pylist(new_rows, schema=to_arrow_schema(state_schema, timezone="UTC")), schema=state_schema
    )
    return local_arrow(finalised(spark, plan, live, averages=averages))


def _merge_rows(
    facts: AggregateFacts,
    delta: pa.Table,
    old: pa.Table,
    *,
    averages: dict[int, tuple[str, decimal.Decimal] | None] | None = None,
) -> tuple[list[dict[str, Any]], int] | str:
    """New state rows (keys and state columns) of the affected groups, old ⊕ Δ, or why the state cannot be
    trusted (the full diff repairs it). Exact: Python integers and decimals, each sum checked against its type
    (an overflow falls back, never wraps). Per decimal AVG of ``averages``: a sum outside its SQL's bound falls
    back; one without SQL is computed here as Spark does (``_mv_avg<i>``): NULL where it overflows its type, as
    Spark's, or under ANSI (``facts.ansi``) the full diff, which raises Spark's error."""
    import decimal

    keys = list(facts.keys)
    olds = _live_rows(old, keys)
    if isinstance(olds, str):
        return olds
    limits = [_sum_limit(t) for t in facts.sum_types]
    out: list[dict[str, Any]] = []
    exhausted: dict[str, set[tuple[Any, ...]]] = {}  # per kind: the groups whose kept extreme the change deleted
    with decimal.localcontext() as ctx:
        ctx.prec = 120  # exact: sums of DECIMAL(38, s) values
        for d in delta.to_pylist():
            k = tuple(d[c] for c in keys)
            o = olds.get(k)
            count = (o[COUNT] if o else 0) + d[COUNT]
            if count < 0:
                return (
                    "an affected group's row count would be negative "
                    "(the table's state is damaged; the full diff repairs it)"
                )
            new: dict[str, Any] = {c: d[c] for c in keys}
            new[COUNT] = count
            for i, (with_sum, _, _) in enumerate(facts.args):
                n_col, s_col = nonnull_column(i), sum_column(i)
                n = (o[n_col] if o else 0) + d[n_col]
                if n < 0 or n > count:
                    return "an affected group's state is inconsistent (the full diff repairs it)"
                new[n_col] = n
                if with_sum:
                    if d[s_col] is None and d[VALUES_COLUMN.format(i)] > 0:
                        return "a decimal sum of the change overflows (the full diff)"
                    prev = o[s_col] if o else None
                    if o and o[n_col] > 0 and prev is None:
                        return "an affected group's state is inconsistent (the full diff repairs it)"
                    total = (prev or 0) + (d[s_col] or 0)
                    if abs(total) > limits[i]:
                        return "an affected group's sum overflows its type (the full diff)"
                    new[s_col] = total if n > 0 else None  # as SUM over no non-null value
                    if averages and i in averages:
                        got = _average(facts, i, averages[i], total if n > 0 else None, n)
                        if isinstance(got, str):
                            return got
                        if averages[i] is None:
                            new[AVG_COLUMN.format(i)] = got
            why = _merge_extremes(facts, o, d, new, exhausted)
            if why:
                return why
            if count > 0 or facts.is_global:
                out.append(new)
        n_keys = delta.num_rows
    return exhausted_reason({kind: len(g) for kind, g in exhausted.items()}) if exhausted else (out, n_keys)


def _live_rows(old: pa.Table, keys: list[str]) -> dict[tuple[Any, ...], dict[str, Any]] | str:
    """The table's live row of each affected group, by key, or why not (one group with two rows)."""
    olds: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in old.to_pylist():
        k = tuple(row[c] for c in keys)
        if row[DIFF] != 1 or k in olds:
            return "an affected group has more than one live row in the table (the full diff repairs it)"
        olds[k] = row
    return olds


def _merge_extremes(
    facts: AggregateFacts,
    o: dict[str, Any] | None,
    d: dict[str, Any],
    new: dict[str, Any],
    exhausted: dict[str, set[tuple[Any, ...]]],
) -> str | None:
    """A group's MIN/MAX states merged into ``new`` (its non-null counts already there), or why the state cannot be
    trusted; a group whose kept extreme the change deleted is added to ``exhausted`` (per kind)."""
    for i, kind in facts.extremes:
        x, c, n_col = extreme_column(kind, i), multiplicity_column(kind, i), nonnull_column(i)
        kept = (o[x], o[c]) if o and o[n_col] > 0 else None
        if o and o[n_col] > 0 and (o[x] is None or not o[c] or o[c] < 1):
            return "an affected group's state is inconsistent (the full diff repairs it)"
        merged = merge_extreme(kind, kept, (d[x], d[c]), new[n_col])
        if merged == EXHAUSTED:
            exhausted.setdefault(kind, set()).add(tuple(new[k] for k in facts.keys))
            continue
        if isinstance(merged, str):
            return merged
        new[x], new[c] = merged
    return None


EXHAUSTED = "exhausted"  # :func:`merge_extreme`: every row holding the kept extreme was deleted


def merge_extreme(
    kind: str, kept: tuple[Any, int] | None, delta: tuple[Any, int | None], n: int
) -> tuple[Any, int] | str:
    """A group's new MIN (``kind`` "min") or MAX state (value, how many rows hold it, capped at
    :data:`~mvsink.incremental.statequeries.MULTIPLICITY_CAP`) from its kept state (None: it had no non-null
    value) and Δ's extreme (the best value whose net count is not zero, and that count; None: no such value), ``n``
    the group's new count of non-null values. :data:`EXHAUSTED` when the rows of the kept extreme are all deleted
    (the new extreme is not in the state: the group is recomputed), a reason when the state cannot be trusted.

    Δ's value better than the kept one: it is the new extreme (its count must be positive). Equal: the counts
    add up (a capped count only grows: counting it down is unknown). Worse, or no Δ value: the kept state stays.
    """
    if n == 0:
        return (None, 0)
    value, count = delta
    inconsistent = "an affected group's MIN/MAX state is inconsistent with the change (the full diff repairs it)"
    if value is None:
        return kept if kept is not None else inconsistent
    if not count:
        return inconsistent
    if kept is None or (value < kept[0] if kind == "min" else value > kept[0]):
        return (value, min(count, MULTIPLICITY_CAP)) if count > 0 else inconsistent
    if value != kept[0]:
        return kept
    if kept[1] >= MULTIPLICITY_CAP:
        return (kept[0], MULTIPLICITY_CAP) if count > 0 else EXHAUSTED
    left = kept[1] + count
    if left > 0:
        return (kept[0], min(left, MULTIPLICITY_CAP))
    return EXHAUSTED if left == 0 else inconsistent


def exhausted_reason(groups: dict[str, int]) -> str:
    """The refusal when the change deleted the kept MIN/MAX of some groups (``groups``: how many, per kind)."""
    what = " and ".join(f"the {kind.upper()} of {n} affected group(s)" for kind, n in sorted(groups.items()) if n)
    return f"every row holding {what} was deleted: the new extreme is not in the state (the groups are recomputed)"


def _average(
    facts: AggregateFacts, i: int, sql: tuple[str, decimal.Decimal] | None, total: Any, n: int
) -> decimal.Decimal | None | str:
    """A group's decimal AVG of argument ``i`` where no SQL computes it (``sql`` None), else None; or why the full
    diff (a sum beyond the SQL's bound; an overflow under ANSI)."""
    import decimal

    if total is None:
        return None
    if sql is not None:
        return None if abs(total) < sql[1] else "an affected group's sum is too large for its AVG's exact division"
    avg_t = decimal_type(facts.avg_types[i])
    assert avg_t is not None
    avg = decimal_average(decimal.Decimal(total), n, precision=avg_t[0], scale=avg_t[1])
    if avg is None and facts.ansi:
        return "an affected group's AVG overflows its type (the full diff: Spark's error)"
    return avg


def _sum_limit(type_name: str | None) -> int | decimal.Decimal:
    """The largest absolute value a sum of ``type_name`` (Spark's simple string) holds."""
    import decimal
    import re

    m = re.fullmatch(r"decimal\((\d+),(\d+)\)", type_name or "")
    if m:
        p, sc = int(m.group(1)), int(m.group(2))
        return decimal.Decimal(10) ** (p - sc) - decimal.Decimal(1).scaleb(-sc)
    return 2**63 - 1


def merge_by_spark(
    spark: SparkSession, plan: StatePlan, delta: DataFrame, table_df: Callable[[], DataFrame], *, lower: int, at: int
) -> tuple[DataFrame, int] | str:
    """Old ⊕ Δ by Spark (too many groups for the driver): the corrections (old rows retracted, new ones added)
    and the number of affected groups, or why not."""
    from pyspark.sql import functions as F

    averages = spark_averages(spark, plan)
    if isinstance(averages, str):
        return averages
    got = _new_state(plan, delta, table_df(), lower=lower, averages=averages)
    if isinstance(got, str):
        return got
    new, old, n_keys = got
    corr = old.select(*old.columns[:-1], (-F.col(DIFF)).alias(DIFF)).unionByName(
        new.select("*", F.lit(1).cast("bigint").alias(DIFF))
    )
    return corr.select(*new.columns, F.lit(at).cast("bigint").alias(TIME), DIFF), n_keys


def _new_state(
    plan: StatePlan,
    delta: DataFrame,
    table_df: DataFrame,
    *,
    lower: int,
    averages: dict[int, tuple[str, decimal.Decimal] | None],
) -> tuple[DataFrame, DataFrame, int] | str:
    """(new rows of the affected groups, their persisted rows, how many groups), or a reason for the full diff.

    One Spark job computes the affected groups' old and new state together (checkpointed: both the
    invariant checks and the corrections read it).
    """
    from pyspark.sql import functions as F

    from mvsink.spark.transforms import consolidate

    q = plan.queries
    cols = list(plan.desired.columns)
    keys = list(q.keys)
    # The affected groups first (small: at most the change's rows), so the table is read for them only and
    # the old state joins them by broadcast (no shuffle of either side).
    delta = delta.localCheckpoint(eager=True)
    rows = table_df.select(*cols, TIME, DIFF)
    if keys:
        dk = delta.select(*[F.col(_quote(k)).alias(f"_mv_dk{i}") for i, k in enumerate(keys)])
        match = null_safe_match(rows, dk, [(k, f"_mv_dk{i}") for i, k in enumerate(keys)])
        rows = rows.join(F.broadcast(dk), match, "left_semi")
    old = consolidate(rows, cols, before=lower)
    o = old.select(*[F.col(_quote(c)).alias(f"_mv_o_{c}") for c in cols], F.col(DIFF).alias("_mv_o_diff"))
    d = delta.select(*[F.col(_quote(c)).alias(f"_mv_d_{c}") for c in delta.columns])
    if keys:
        match = null_safe_match(d, o, [(f"_mv_d_{k}", f"_mv_o_{k}") for k in keys])
        joined = d.join(F.broadcast(o), match, "left_outer")
    else:  # a global aggregate: Δ has its one row (if anything changed), the table its one row
        joined = d.join(F.broadcast(o), F.lit(True), "left_outer")
    state = [F.coalesce(F.col(f"_mv_d_{k}"), F.col(f"_mv_o_{k}")).alias(k) for k in keys]
    z = F.lit(0).cast("bigint")
    state.append((F.coalesce(F.col(f"_mv_o_{COUNT}"), z) + F.coalesce(F.col(f"_mv_d_{COUNT}"), z)).alias(COUNT))
    for i, (_, with_sum) in enumerate(q.args):
        n, s = nonnull_column(i), sum_column(i)
        state.append((F.coalesce(F.col(f"_mv_o_{n}"), z) + F.coalesce(F.col(f"_mv_d_{n}"), z)).alias(n))
        if with_sum:
            # DECIMAL(38, s) + DECIMAL(38, s) would be DECIMAL(38, s - 1) by Spark's precision-loss rule (a digit
            # rounded away): add as DECIMAL(37, s) (a larger sum is NULL: the full diff, _violations)
            dt = decimal_type(plan.sum_types[i])
            narrow = f"decimal({min(dt[0], 37)},{dt[1]})" if dt else "bigint"
            total = F.try_add(
                F.coalesce(F.col(f"_mv_o_{s}"), F.lit(0)).try_cast(narrow),
                F.coalesce(F.col(f"_mv_d_{s}"), F.lit(0)).try_cast(narrow),
            )
            state.append(total.try_cast(plan.sum_types[i] or "bigint").alias(s))
    extremes, flags = _extreme_states(q.extremes)
    state += extremes
    olds = [F.col(f"_mv_o_{c}") for c in cols] + [F.col("_mv_o_diff")]
    overflow = [
        (F.col(f"_mv_d_{VALUES_COLUMN.format(i)}") > 0) & F.col(f"_mv_d_{sum_column(i)}").isNull()
        for i, (_, with_sum) in enumerate(q.args)
        if with_sum
    ]
    lost = functools.reduce(lambda a, b: a | b, overflow) if overflow else F.lit(False)
    merged = joined.select(*state, *olds, F.coalesce(lost, F.lit(False)).alias("_mv_overflow"), *flags)
    merged = merged.localCheckpoint(eager=True)
    problems = _violations(plan, merged, delta.count(), averages)
    if isinstance(problems, str):
        return problems
    changed = merged
    old_rows = changed.where(F.col("_mv_o_diff").isNotNull()).select(
        *[F.col(f"_mv_o_{c}").alias(c) for c in cols], F.col("_mv_o_diff").alias(DIFF)
    )
    live = changed if q.is_global else changed.where(F.col(COUNT) > 0)
    return finalised(changed.sparkSession, plan, live, averages=averages), old_rows, problems


def _extreme_states(extremes: tuple[tuple[int, str], ...]) -> tuple[list[Any], list[Any]]:
    """Spark's :func:`merge_extreme` over the joined old (``_mv_o_*``) and Δ (``_mv_d_*``) columns: the new extreme
    and multiplicity columns, and per MIN/MAX two flags: ``_mv_x_bad<j>`` (the state cannot be trusted) and
    ``_mv_x_gone<j>`` (the kept extreme was deleted)."""
    from pyspark.sql import functions as F

    z = F.lit(0).cast("bigint")
    cap = F.lit(MULTIPLICITY_CAP).cast("bigint")
    cols: list[Any] = []
    flags: list[Any] = []
    for j, (i, kind) in enumerate(extremes):
        x, c, n = extreme_column(kind, i), multiplicity_column(kind, i), nonnull_column(i)
        ox, oc, dx, dc = (F.col(f"_mv_o_{x}"), F.col(f"_mv_o_{c}"), F.col(f"_mv_d_{x}"), F.col(f"_mv_d_{c}"))
        n_new = F.coalesce(F.col(f"_mv_o_{n}"), z) + F.coalesce(F.col(f"_mv_d_{n}"), z)
        have = F.coalesce(F.col(f"_mv_o_{n}"), z) > 0
        beats = (dx < ox) if kind == "min" else (dx > ox)
        better = dx.isNotNull() & (~have | F.coalesce(beats, F.lit(False)))
        equal = dx.isNotNull() & have & F.coalesce(dx == ox, F.lit(False))
        capped = F.coalesce(oc, z) >= cap
        left = F.coalesce(oc, z) + F.coalesce(dc, z)
        live = n_new > 0
        cols.append(F.when(~live, F.lit(None)).when(better, dx).otherwise(ox).alias(x))
        cols.append(
            F.when(~live, z)
            .when(better, F.least(dc, cap))
            .when(equal, F.when(capped, cap).otherwise(F.least(left, cap)))
            .otherwise(oc)
            .alias(c)
        )
        bad = live & (
            (have & (ox.isNull() | (F.coalesce(oc, z) < 1)))
            | (~have & dx.isNull())
            | (dx.isNotNull() & (F.coalesce(dc, z) == 0))
            | (better & (dc <= 0))
            | (equal & ~capped & (left < 0))
        )
        gone = live & equal & ((capped & (dc < 0)) | (~capped & (left == 0)))
        flags += [
            F.coalesce(bad, F.lit(False)).alias(f"_mv_x_bad{j}"),
            F.coalesce(gone, F.lit(False)).alias(f"_mv_x_gone{j}"),
        ]
    return cols, flags


def _violations(
    plan: StatePlan, merged: DataFrame, n_delta: int, averages: dict[int, tuple[str, decimal.Decimal] | None]
) -> str | int:
    """Why the affected groups' state cannot be trusted (the full diff then repairs it), else their number."""
    from pyspark.sql import functions as F

    q = plan.queries
    conds = [
        (F.col("_mv_o_diff").isNotNull() & (F.col("_mv_o_diff") != 1)).alias("dup"),
        (F.col(COUNT) < 0).alias("neg"),
        F.col("_mv_overflow").alias("overflow"),
    ]
    for i, (_, with_sum) in enumerate(q.args):
        n = F.col(nonnull_column(i))
        conds.append(((n < 0) | (n > F.col(COUNT))).alias(f"n{i}"))
        if with_sum:
            conds.append(((n > 0) & F.col(sum_column(i)).isNull()).alias(f"s{i}"))
    for i, sql in averages.items():  # a sum too large for its AVG's exact SQL
        if sql is not None and sql[1] < 10**38:  # (a bound of 10^38: no DECIMAL(38, s) sum reaches it)
            big = F.abs(F.col(sum_column(i))) >= F.lit(sql[1])
            conds.append(((F.col(nonnull_column(i)) > 0) & big).alias(f"a{i}"))
    for j in range(len(q.extremes)):
        conds.append(F.col(f"_mv_x_bad{j}").alias(f"x{j}"))
    flags = [F.max(c.cast("int")).alias(f"f{j}") for j, c in enumerate(conds)]
    # per kind: how many groups' kept MIN (MAX) the change deleted
    kinds = sorted({kind for _, kind in q.extremes})
    per_kind = [
        F.sum(
            functools.reduce(
                lambda a, b: a | b, [F.col(f"_mv_x_gone{j}") for j, (_, k) in enumerate(q.extremes) if k == kind]
            ).cast("int")
        ).alias(f"k_{kind}")
        for kind in kinds
    ]
    row = merged.select(F.count(F.lit(1)).alias("groups"), *flags, *per_kind).collect()[0]
    if row[1]:
        return "an affected group has more than one live row in the table (the full diff repairs it)"
    if row[0] != n_delta:
        return "an affected group has two different rows in the table (the full diff repairs it)"
    if row[2]:
        return (
            "an affected group's row count would be negative (the table's state is damaged; the full diff repairs it)"
        )
    if row[3]:
        return "a decimal sum of the change overflows (the full diff)"
    if any(row[j] for j in range(4, len(conds) + 1)):
        return (
            "an affected group's state is inconsistent or a decimal sum overflows its type or its AVG's exact "
            "division (the full diff)"
        )
    exhausted = {kind: int(row[f"k_{kind}"] or 0) for kind in kinds}
    if any(exhausted.values()):
        return exhausted_reason(exhausted)
    return int(row[0])


# ---------------------------------------------------------------- finalised into the view's columns


def finalised(
    spark: SparkSession, plan: StatePlan, live: DataFrame, *, averages: dict[int, tuple[str, decimal.Decimal] | None]
) -> DataFrame:
    """The view's rows (its columns, the state included, in the view's order) of state rows ``live``
    (keys and state columns, and ``_mv_avg<i>`` for each decimal AVG ``averages`` has no SQL for, computed by
    :func:`decimal_average`): each output column's finalising expression, cast to the view's type.

    One SQL statement over ``live`` when every cast type is atomic (one analysis of the plan); column
    expressions otherwise (a nested type's SQL name is not needed then).
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    schema = plan.desired.schema
    q = plan.queries
    final = dict(q.finalise)
    nested = (T.StructType, T.ArrayType, T.MapType, T.UserDefinedType)
    if not any(isinstance(schema[name].dataType, nested) for name in final):
        items = [
            f"CAST(({formattable(_final_sql(plan, final[c], averages))}) AS {schema[c].dataType.simpleString()}) "
            f"AS {formattable(_quote(c))}"
            if c in final
            else formattable(_quote(c))
            for c in plan.desired.columns
        ]
        return spark.sql(f"SELECT {', '.join(items)} FROM {{live}}", live=live)
    cols = [
        F.expr(_final_sql(plan, final[c], averages)).cast(schema[c].dataType).alias(c)
        if c in final
        else F.col(_quote(c))
        for c in plan.desired.columns
    ]
    return live.select(*cols)


def _final_sql(plan: StatePlan, expr: str, averages: dict[int, tuple[str, decimal.Decimal] | None]) -> str:
    """Replace the ``_mv_final_sum(i)``/``_mv_final_avg(i)``/``_mv_final_min(i)``/``_mv_final_max(i)`` markers with
    Spark SQL over the state (a MIN/MAX: the kept extreme, NULL over no non-null value).

    A decimal AVG is Spark's exactly: ``averages``' SQL (:meth:`StatePlan.averages`), else the driver's
    :func:`decimal_average` column. AVG of an integer is ``double(sum) / double(count)``: Spark's own AVG sums the
    values as doubles, equal to it while the sum stays within 2^53 (beyond, Spark's value depends on its order of
    summation).
    """
    import re

    def sub(m: re.Match[str]) -> str:
        fn, i = m.group(1).lower(), int(m.group(2))
        n, s = nonnull_column(i), sum_column(i)
        if fn == "sum":
            return f"(CASE WHEN {n} > 0 THEN {s} END)"
        if fn in ("min", "max"):
            return f"(CASE WHEN {n} > 0 THEN {extreme_column(fn, i)} END)"
        if i in averages:
            got = averages[i]
            return f"(CASE WHEN {n} > 0 THEN {got[0]} END)" if got else AVG_COLUMN.format(i)
        return f"(CASE WHEN {n} > 0 THEN CAST({s} AS DOUBLE) / CAST({n} AS DOUBLE) END)"

    return re.sub(r"_MV_FINAL_(SUM|AVG|MIN|MAX)\((\d+)\)", sub, expr, flags=re.IGNORECASE)


def conf_true(spark: SparkSession, key: str, default: str = "false") -> bool:
    return str(spark.conf.get(key, default)).strip().lower() == "true"


def precision_loss(spark: SparkSession) -> bool:
    return conf_true(spark, "spark.sql.decimalOperations.allowPrecisionLoss", "true")


def spark_averages(spark: SparkSession, plan: StatePlan) -> dict[int, tuple[str, decimal.Decimal] | None] | str:
    """The view's decimal AVGs as Spark SQL over the state (:meth:`StatePlan.averages`), or why Spark cannot
    finalise one exactly (the full diff then: such refreshes of many groups only)."""
    averages = plan.averages(precision_loss=precision_loss(spark)) if plan.decimal_averages else {}
    missing = [i for i, sql in averages.items() if sql is None]
    if missing:
        return (
            f"AVG of {(plan.avg_types[missing[0]] or '').upper()} over more groups than the driver merges, with no "
            "exact finalisation by Spark (spark.sql.decimalOperations.allowPrecisionLoss=false, or a scale over 34)"
        )
    return averages
