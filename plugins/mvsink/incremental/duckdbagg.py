"""An aggregate view's rows as its table keeps them (visible columns, then the hidden ``_mv_agg_*`` state), computed
by DuckDB: the query the DuckDB full diff and first build compare (:mod:`mvsink.incremental.modes.duckdbdiff`).

Pure: DuckDB SQL from the view's state queries (:class:`~mvsink.incremental.statequeries.StateQueries`) and Spark's
types of its columns, no data read. The state is what Spark's state query gives: the group's row count, per argument
its non-null count and (for SUM/AVG) its sum, per MIN/MAX the extreme and how many rows hold it (up to
:data:`~mvsink.incremental.statequeries.MULTIPLICITY_CAP`: DuckDB's ``min(a, k)`` is Spark's ``min_by(a, a, k)``).
Each visible column must be a grouping key or a bare COUNT, SUM, AVG, MIN or MAX of an exact type
(:func:`aggregate_refused`), finalised from the state as Spark does:

- SUM: the state's sum, NULL over no non-null value; Spark's SUM of DECIMAL(p,s) is DECIMAL(min(38, p+10), s) and
  fails under ANSI where a sum overflows it, also part-way. DuckDB sums exactly in 128 bits, so a group whose sum of
  absolute values might not fit the type raises (DuckDB's ``error()``): the refresh takes Spark's diff, whose error
  (or result) is Spark's. The cast to the table's type fails on a final overflow too; nothing wraps.
- AVG of DECIMAL(p > 11, s): the exact quotient of the sum by the count rounded HALF_UP at scale s + 4 (Spark's
  ``DecimalDivideWithOverflowCheck``; :func:`~mvsink.incremental.statequeries.decimal_average`), here in 128-bit
  integers from the sum's unscaled value. DuckDB's own AVG rounds otherwise: not used. AVG of DECIMAL(p <= 11)
  (Spark averages through DOUBLE) and AVG of integers (a DOUBLE) are refused.
- COUNT, MIN, MAX: the state's count or extreme (NULL over no non-null value).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Final

from mvsink.incremental.statequeries import (
    ARG_COLUMN,
    COUNT,
    KEY_COLUMN,
    MULTIPLICITY_CAP,
    StateQueries,
    decimal_type,
    extreme_column,
    multiplicity_column,
    nonnull_column,
    sum_column,
)

__all__ = ["aggregate_refused", "state_sql"]

_DOUBLE_AVG_DIGITS: Final = 15  # Spark's AVG of DECIMAL(p, s) with p + 4 <= 15 goes through DOUBLE
_BIGINT_BOUND: Final = "9.2e18"  # (below 2^63: a sum of absolute values at least this takes Spark's diff)
_ABS: Final = "_mv_abs{}"  # a group's sum of the absolute values of argument i (the overflow check)
_LIST: Final = "_mv_list{}{}"  # a group's MULTIPLICITY_CAP extreme values of argument i (min or max)


def aggregate_refused(
    queries: StateQueries,
    *,
    sum_types: Sequence[str | None],
    avg_types: Sequence[str | None],
    types: Mapping[str, str],
) -> str | None:
    """Why DuckDB may not compute this aggregate view's rows exactly as Spark does (``types``: Spark's type of each of
    the table's columns, simple strings), or None: a visible column that is not a grouping key or a bare
    COUNT/SUM/AVG/MIN/MAX of Spark's type for it, an AVG Spark computes through DOUBLE."""
    from mvsink.incremental.aggfacts import python_finalise

    args = tuple(
        (with_sum, sum_types[i], avg_types[i]) for i, (_, with_sum) in enumerate(queries.args)
    )  # (python_finalise's form)
    for column, sql in queries.finalise:
        bare_avg = re.fullmatch(r"_mv_final_avg\((\d+)\)", sql.strip(), re.I)
        if bare_avg and int(bare_avg.group(1)) < len(avg_types):
            avg = avg_types[int(bare_avg.group(1))]
            dt = decimal_type(avg)
            if dt is None:
                return f"column {column!r} is an AVG of {avg} (Spark's AVG of integers is a DOUBLE)"
            if dt[0] <= _DOUBLE_AVG_DIGITS:
                return (
                    f"column {column!r} is an AVG of a DECIMAL of {dt[0] - 4} digits, which Spark computes as a DOUBLE"
                )
            if dt[1] > 37:
                return f"column {column!r} is an AVG of scale {dt[1]}"
        if python_finalise([(column, sql)], keys=queries.keys, args=args, types=dict(types)) is None:
            return f"column {column!r} ({sql}) is not a grouping key or a bare COUNT, SUM, AVG, MIN or MAX"
    return None


def state_sql(
    queries: StateQueries,
    input_sql: str,
    *,
    sum_types: Sequence[str | None],
    avg_types: Sequence[str | None],
    with_state: bool = True,
) -> str:
    """DuckDB SQL giving the view's table rows from ``input_sql`` (the view's input query in DuckDB's dialect: keys
    ``_mv_k<i>``, arguments ``_mv_a<i>``): the visible columns in the view's order, then (``with_state``)
    :attr:`StateQueries.state_columns`. Its values are of DuckDB's types (decimals at precision 38, integers
    possibly wider); the caller casts them to the table's (a value that does not fit fails). Only for views
    :func:`aggregate_refused` accepts."""
    from mvsink.engines.duckdb import duckdb_identifier as q

    keys = [q(KEY_COLUMN.format(i)) for i in range(len(queries.keys))]
    level1 = [*keys, f"count(*) AS {q(COUNT)}"]
    for i, (_, with_sum) in enumerate(queries.args):
        a = q(ARG_COLUMN.format(i))
        level1.append(f"count({a}) AS {q(nonnull_column(i))}")
        if with_sum:
            level1 += [f"sum({a}) AS {q(sum_column(i))}", f"sum(CAST(abs({a}) AS DOUBLE)) AS {q(_ABS.format(i))}"]
    for i, kind in queries.extremes:
        a = q(ARG_COLUMN.format(i))
        level1 += [
            f"{kind}({a}) AS {q(extreme_column(kind, i))}",
            f"{kind}({a}, {MULTIPLICITY_CAP}) AS {q(_LIST.format(kind, i))}",
        ]
    by = f" GROUP BY {', '.join(keys)}" if keys else ""
    grouped = f"SELECT {', '.join(level1)} FROM ({input_sql}) AS _mv_in{by}"

    checked = {  # each kept sum, raising where a partial sum might overflow Spark's type
        i: _checked_sum(i, sum_types[i]) for i, (_, with_sum) in enumerate(queries.args) if with_sum
    }
    state = [q(COUNT)]
    for i, (_, with_sum) in enumerate(queries.args):
        state.append(q(nonnull_column(i)))
        if with_sum:
            state.append(f"{checked[i]} AS {q(sum_column(i))}")
    for i, kind in queries.extremes:
        e, listed = q(extreme_column(kind, i)), q(_LIST.format(kind, i))
        state += [
            e,
            f"coalesce(len(list_filter({listed}, lambda _mv_e: _mv_e = {e})), 0) AS {q(multiplicity_column(kind, i))}",
        ]
    visible = []
    for column, sql in queries.finalise:
        visible.append(f"{_visible(queries, sql, checked, avg_types)} AS {q(column)}")
    return f"SELECT {', '.join(visible + (state if with_state else []))} FROM ({grouped}) AS _mv_g"


def _index(sql: str) -> int:
    m = re.search(r"\((\d+)\)", sql)
    assert m is not None, sql
    return int(m.group(1))


def _checked_sum(i: int, sum_type: str | None) -> str:
    """The group's sum of argument ``i``, or DuckDB's ``error()`` where its sum of absolute values (a bound on every
    partial sum Spark may hold) might not fit Spark's ``sum_type``: a conservative test in DOUBLE."""
    from mvsink.engines.duckdb import duckdb_identifier as q

    dt = decimal_type(sum_type)
    bound = f"1e{dt[0] - dt[1]}" if dt is not None else _BIGINT_BOUND
    # (summed in DOUBLE, compared with the bound less a millionth: below 10^9 rows a group's rounding errors stay
    # under it, so the test may refuse near the bound but never lets an overflow through)
    # (no quote in the message: it is a SQL string literal)
    message = f"a SUM might overflow the Spark type {sum_type or 'bigint'} (Spark computes it, or raises its error)"
    s, x = q(sum_column(i)), q(_ABS.format(i))
    return f"(CASE WHEN {x} >= {bound} * 0.999999 THEN error('{message}') ELSE {s} END)"


def _visible(queries: StateQueries, sql: str, checked: Mapping[int, str], avg_types: Sequence[str | None]) -> str:
    """A visible column's DuckDB expression over the grouped state (the caller checked its form)."""
    from mvsink.engines.duckdb import duckdb_identifier as q
    from mvsink.spark.transforms import quote_name

    for k, name in enumerate(queries.keys):
        if sql == quote_name(name):
            return q(KEY_COLUMN.format(k))
    low = sql.strip().lower()
    if low == COUNT:
        return q(COUNT)
    if low.startswith("_mv_agg_n"):
        return q(nonnull_column(int(low.removeprefix("_mv_agg_n"))))
    i = _index(low)
    n = q(nonnull_column(i))
    for kind in ("min", "max"):
        if low.startswith(f"_mv_final_{kind}("):
            return f"CASE WHEN {n} > 0 THEN {q(extreme_column(kind, i))} END"
    if low.startswith("_mv_final_sum("):
        return f"CASE WHEN {n} > 0 THEN {checked[i]} END"
    dt = decimal_type(avg_types[i])
    assert low.startswith("_mv_final_avg(") and dt is not None, sql
    scale = dt[1]  # the average's scale: the argument's + 4
    # the sum's unscaled value (its text without the point: exact), then round(|u| * 10^4 / n) HALF_UP, signed
    u = f"CAST(replace(CAST({checked[i]} AS VARCHAR), '.', '') AS HUGEINT)"
    rounded = f"sign({u}) * ((abs({u}) * 20000 + {n}) // (2 * CAST({n} AS HUGEINT)))"
    unit = "0." + "0" * (scale - 1) + "1" if scale else "1"
    return (
        f"CASE WHEN {n} > 0 THEN CAST({rounded} AS DECIMAL(38,0)) * CAST('{unit}' AS DECIMAL({scale + 1},{scale})) END"
    )
