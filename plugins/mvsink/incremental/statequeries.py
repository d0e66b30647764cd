"""The state queries of an aggregate view, read from sqlglot's tree of its query (pure; no Spark).

Which select items are the group's keys and which are COUNT/SUM/AVG/MIN/MAX expressions over which arguments;
the *input query* (keys and arguments over the query's FROM/WHERE), the *state query* (the user's query with
the state aggregates appended) and the expressions that finalise each output column from the state.
Classification only: :mod:`mvsink.incremental.modes.aggregate` has Spark's analysis decide what is safe.
"""

from __future__ import annotations

import dataclasses
import decimal
import re
from collections.abc import Callable, Sequence
from typing import Any, Final

from mvsink.columns import DIFF, STATE_PREFIX
from mvsink.spark.transforms import quote_name as _quote

COUNT: Final = STATE_PREFIX + "count"


KEY_COLUMN = "_mv_k{}"


ARG_COLUMN = "_mv_a{}"


VALUES_COLUMN = "_mv_values{}"  # Δ's count of non-null values of argument i (whatever their sign)


def nonnull_column(i: int) -> str:
    return f"{STATE_PREFIX}n{i}"


def sum_column(i: int) -> str:
    return f"{STATE_PREFIX}s{i}"


Extreme = tuple[int, str]
"""A MIN or MAX kept in the state: (its argument's index, ``"min"`` or ``"max"``)."""

# The multiplicity of a group's extreme is counted up to this many rows: the state query takes it from Spark's
# ``min_by(a, a, k)``/``max_by(a, a, k)`` (the k extreme values of the group, a bounded buffer), since no Spark
# aggregate counts the rows holding the extreme in one pass. A kept multiplicity of MULTIPLICITY_CAP means "at least
# that many": deleting copies of such an extreme cannot be counted down (the refresh then recomputes the group).
MULTIPLICITY_CAP: Final = 64


def extreme_column(kind: str, i: int) -> str:
    """The group's MIN (``kind`` "min") or MAX of argument ``i`` (NULL when it has no non-null value); in Δ: the
    extreme value whose net count is not zero."""
    return f"{STATE_PREFIX}{kind}{i}"


def multiplicity_column(kind: str, i: int) -> str:
    """How many rows of the group hold its extreme (capped at :data:`MULTIPLICITY_CAP`; 0 with no non-null value);
    in Δ: the net count of Δ's extreme value."""
    return f"{STATE_PREFIX}{kind}c{i}"


@dataclasses.dataclass(frozen=True)
class StateQueries:
    """What sqlglot's tree of a view's query gives (pure; no Spark): the queries and columns of the state.

    ``keys``: the view's key columns (output names, in GROUP BY order); ``args``: the aggregates' distinct
    arguments (SQL) with whether a sum is kept for each; ``input_query``: the keys as ``_mv_k<i>`` and the
    arguments as ``_mv_a<i>`` over the query's FROM/WHERE; ``state_query``: the user's query with the state
    aggregates appended; ``finalise``: per output column, a Spark SQL expression over the keys and the state.
    """

    keys: tuple[str, ...]
    args: tuple[tuple[str, bool], ...]
    input_query: str
    state_query: str
    finalise: tuple[tuple[str, str], ...]
    extremes: tuple[Extreme, ...] = ()

    @property
    def state_columns(self) -> tuple[str, ...]:
        cols = [COUNT]
        for i, (_, with_sum) in enumerate(self.args):
            cols.append(nonnull_column(i))
            if with_sum:
                cols.append(sum_column(i))
        for i, kind in self.extremes:
            cols += [extreme_column(kind, i), multiplicity_column(kind, i)]
        return tuple(cols)

    @property
    def is_global(self) -> bool:
        return not self.keys

    def signed_input(self, source: str | tuple[str, ...]) -> str | None:
        """The input query with the weight ``_mv_diff`` taken from ``source``'s sign column (several sources': their
        product), or None (:func:`mvsink.incremental.telescope.signed_query`)."""
        from mvsink.incremental.telescope import signed_query

        return signed_query(self.input_query, source, weight=DIFF)


def state_queries(query: str) -> StateQueries | str:
    """Split a single-block aggregate query into its state queries, or say why it has no accumulable state."""
    import sqlglot
    from sqlglot import exp

    try:
        tree = sqlglot.parse_one(query, dialect="spark")
    except sqlglot.errors.ParseError as exc:
        return f"the query could not be classified ({str(exc).splitlines()[0]})"
    if not isinstance(tree, exp.Select):
        return f"the query's top is a {type(tree).__name__}, not one SELECT ... GROUP BY"
    tree = _distinct_as_group_by(tree)
    for part in ("having", "distinct", "limit", "offset", "qualify", "windows", "laterals"):
        if tree.args.get(part):
            return f"the query has {part.upper()} at its top"
    if tree.find(exp.Window):
        return "the query has a window function"
    if not tree.args.get("from_"):
        return "the query has no FROM"
    items = list(tree.expressions)
    keys = _group_keys(tree, items)
    if isinstance(keys, str):
        return keys
    key_items, key_names = keys
    if not key_names and not any(it.find(exp.AggFunc) for it in items):
        return "the query has no aggregate"
    args: dict[str, bool] = {}
    extremes: set[Extreme] = set()
    finalise: list[tuple[str, str]] = []
    for i, item in enumerate(items):
        name = item.alias_or_name
        if i in key_items:
            finalise.append((name, _quote(name)))
            continue
        got = _finalise_item(item, args, set(key_names), extremes)
        if got.startswith("!"):
            return got[1:]
        finalise.append((name, got))
    arg_list = list(args.items())
    inp = tree.copy()
    inp.set("group", None)
    inp.set("order", None)
    group = tree.args["group"].expressions if tree.args.get("group") else []
    inp.set(
        "expressions",
        [exp.alias_(g.copy(), KEY_COLUMN.format(i)) for i, g in enumerate(group)]
        + [
            exp.alias_(sqlglot.parse_one(a, dialect="spark"), ARG_COLUMN.format(i)) for i, (a, _) in enumerate(arg_list)
        ],
    )
    if not inp.expressions:
        inp.set("expressions", [exp.alias_(exp.Literal.number(1), "_mv_one")])
    state = tree.copy()
    state.set("order", None)
    kept = tuple(sorted(extremes))
    state.set("expressions", list(state.expressions) + _state_items(arg_list, kept))
    return StateQueries(
        keys=tuple(key_names),
        args=tuple(arg_list),
        input_query=inp.sql(dialect="spark"),
        state_query=state.sql(dialect="spark"),
        finalise=tuple(finalise),
        extremes=kept,
    )


def _state_items(args: list[tuple[str, bool]], extremes: tuple[Extreme, ...]) -> list[Any]:
    """The state query's items appended to the user's: the row count, per argument its non-null count (and sum),
    per MIN/MAX its extreme and multiplicity."""
    import sqlglot

    extra = [f"count(*) AS {COUNT}"]
    for i, (a, with_sum) in enumerate(args):
        extra.append(f"count({a}) AS {nonnull_column(i)}")
        if with_sum:
            extra.append(f"sum({a}) AS {sum_column(i)}")
    parsed = [sqlglot.parse_one(e, dialect="spark") for e in extra]
    for i, kind in extremes:
        parsed += _extreme_state(args[i][0], i, kind)
    return parsed


def _extreme_state(arg: str, i: int, kind: str) -> list[Any]:
    """The state query's items of a MIN/MAX of argument ``arg`` (index ``i``): the extreme, and how many rows hold it
    (up to :data:`MULTIPLICITY_CAP`: of the ``k`` extreme values ``min_by(a, a, k)`` gives, those equal to it; 0
    over no non-null value)."""
    import sqlglot
    from sqlglot import exp

    a = sqlglot.parse_one(arg, dialect="spark")
    # (built as an anonymous call: sqlglot drops min_by's third argument when it writes Spark SQL)
    top = exp.Anonymous(this=f"{kind}_by", expressions=[a.copy(), a.copy(), exp.Literal.number(MULTIPLICITY_CAP)])
    count = sqlglot.parse_one(
        f"CAST(coalesce(size(filter(_mv_top, _mv_e -> _mv_e = {kind}({arg}))), 0) AS BIGINT)", dialect="spark"
    )
    count = count.transform(lambda n: top.copy() if isinstance(n, exp.Column) and n.name == "_mv_top" else n)
    return [
        exp.alias_(sqlglot.parse_one(f"{kind}({arg})", dialect="spark"), extreme_column(kind, i)),
        exp.alias_(count, multiplicity_column(kind, i)),
    ]


def _distinct_as_group_by(tree: Any) -> Any:
    """``SELECT DISTINCT cols FROM ...`` (no GROUP BY, no aggregate, not DISTINCT ON) as ``SELECT cols FROM ... GROUP
    BY cols``: the same rows (Spark itself plans a DISTINCT as that aggregate), whose state is each row's count of
    input rows; any other tree as it is."""
    from sqlglot import exp

    distinct = tree.args.get("distinct")
    if (
        not isinstance(distinct, exp.Distinct)
        or distinct.args.get("on")
        or tree.args.get("group")
        or any(it.find(exp.AggFunc) for it in tree.expressions)
    ):
        return tree
    out = tree.copy()
    out.set("distinct", None)
    out.set("group", exp.Group(expressions=[it.unalias().copy() for it in out.expressions]))
    return out


def _group_keys(tree: Any, items: list[Any]) -> tuple[set[int], list[str]] | str:
    """(positions of the select items that are the grouping keys, their output names), or why not."""
    from sqlglot import exp

    assert isinstance(tree, exp.Select)
    group = tree.args["group"].expressions if tree.args.get("group") else []
    if tree.args.get("group") and any(tree.args["group"].args.get(k) for k in ("rollup", "cube", "grouping_sets")):
        return "the query groups by ROLLUP, CUBE or GROUPING SETS"
    positions: set[int] = set()
    names: list[str] = []
    for g in group:
        if not isinstance(g, exp.Column) or not isinstance(g.this, exp.Identifier):
            return f"grouping key {g.sql(dialect='spark')!r} is not a plain column"
        at = [
            i
            for i, it in enumerate(items)
            if isinstance(it, (exp.Column, exp.Alias))
            and isinstance(it.unalias(), exp.Column)
            and it.unalias().sql(dialect="spark").lower() == g.sql(dialect="spark").lower()
        ]
        if not at:
            return f"grouping key {g.sql(dialect='spark')!r} is not a column of the view"
        positions.add(at[0])
        names.append(items[at[0]].alias_or_name)
    for i, it in enumerate(items):
        if i not in positions and isinstance(it, exp.Expression) and not it.find(exp.AggFunc):
            return f"column {it.alias_or_name!r} is neither a grouping key nor an aggregate"
    return positions, names


def _finalise_item(item: Any, args: dict[str, bool], keys: set[str], extremes: set[Extreme]) -> str:
    """The item as a Spark SQL expression over the state (its COUNT/SUM/AVG/MIN/MAX calls replaced), or why not;
    the MIN/MAX it uses are added to ``extremes``.

    A returned string starting with ``"!"`` is a reason; :func:`state_queries` maps it.
    """
    from sqlglot import exp

    assert isinstance(item, exp.Expression)
    body = item.unalias().copy()
    problems: list[str] = []

    def arg_index(a: exp.Expression, with_sum: bool) -> int:
        sql = a.sql(dialect="spark")
        args[sql] = args.get(sql, False) or with_sum
        return list(args).index(sql)

    def replace(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.AggFunc):
            if isinstance(node, exp.Count):
                inner = node.this
                if isinstance(inner, exp.Distinct):
                    problems.append("COUNT(DISTINCT ...)")
                    return node
                if (
                    inner is None
                    or isinstance(inner, exp.Star)
                    or (isinstance(inner, exp.Literal) and not inner.is_string)
                ):
                    return exp.column(COUNT)
                return exp.column(nonnull_column(arg_index(inner, False)))
            if isinstance(node, (exp.Sum, exp.Avg)) and not isinstance(node.this, exp.Distinct):
                i = arg_index(node.this, True)
                fn = "sum" if isinstance(node, exp.Sum) else "avg"
                return exp.Anonymous(this=f"_mv_final_{fn}", expressions=[exp.Literal.number(i)])
            if (
                isinstance(node, (exp.Min, exp.Max))
                and not node.expressions
                and node.this is not None
                and not isinstance(node.this, exp.Distinct)
            ):
                i = arg_index(node.this, False)
                kind = "min" if isinstance(node, exp.Min) else "max"
                extremes.add((i, kind))
                return exp.Anonymous(this=f"_mv_final_{kind}", expressions=[exp.Literal.number(i)])
            problems.append(node.sql(dialect="spark").split("(")[0].upper() + "(...)")
            return node
        if isinstance(node, (exp.Subquery, exp.Exists)):
            problems.append("a subquery")
        if isinstance(node, exp.Column) and node.name in keys:
            return exp.column(node.name)  # a grouping key, unqualified: the finalising frame has no tables
        return node

    out = body.transform(replace)
    if problems:
        return "!" + f"column {item.alias_or_name!r} uses {problems[0]}, which has no accumulable state"
    outside = [c for c in out.find_all(exp.Column) if not c.name.startswith(STATE_PREFIX) and c.name not in keys]
    if outside:
        return "!" + f"column {item.alias_or_name!r} uses column {outside[0].sql()!r} outside an aggregate"
    return out.sql(dialect="spark")


def delta_sql(
    keys: Sequence[str],
    sums: Sequence[bool],
    extremes: Sequence[Extreme],
    *,
    ident: Callable[[str], str],
    source: str,
    sum_types: Sequence[str | None] | None = None,
) -> str:
    """Δ per affected group over the signed input rows ``source`` (keys ``_mv_k<i>``, arguments ``_mv_a<i>``,
    weight ``_mv_diff``), in Spark SQL (``sum_types`` given: overflowing sums are NULL, cast to Spark's SUM types)
    or DuckDB's (None: an overflow is an error); ``ident`` quotes a name; ``sums``: per argument, whether its sum is
    kept; ``extremes``: the MIN/MAX kept.

    Without MIN/MAX: one aggregation of the rows per group. With them: the rows are first summed per group and
    value of the MIN/MAX arguments, each value's net count over the group taken (a window), then per group: the
    smallest (MIN) or largest (MAX) value whose net count is not zero, and that count (NULL and NULL when every
    value's count is zero), beside the other parts summed again (a sum that overflowed in the first step stays
    NULL: its count of values says so).
    """
    spark = sum_types is not None
    w = f"CAST({ident(DIFF)} AS BIGINT)"
    key_cols = [ident(KEY_COLUMN.format(i)) for i in range(len(keys))]
    zero = [f"{ident(COUNT)} = 0"]
    for i, with_sum in enumerate(sums):
        zero.append(f"{ident(nonnull_column(i))} = 0")
        if with_sum:
            s, v = ident(sum_column(i)), ident(VALUES_COLUMN.format(i))
            zero.append(f"({s} = 0 OR ({v} = 0 AND {s} IS NULL))")
    for i, kind in extremes:
        zero.append(f"{ident(extreme_column(kind, i))} IS NULL")
    total = "try_sum" if spark else "sum"

    def parts() -> list[str]:
        """The per-argument aggregates over the signed rows."""
        out = []
        for i, with_sum in enumerate(sums):
            a = ident(ARG_COLUMN.format(i))
            out.append(f"sum(CASE WHEN {a} IS NOT NULL THEN {w} ELSE 0 END) AS {ident(nonnull_column(i))}")
            if with_sum:
                out.append(f"{total}(CASE WHEN {w} > 0 THEN {a} ELSE -{a} END) AS {ident(sum_column(i))}")
                # (a NULL sum of values is an overflow)
                out.append(f"count({a}) AS {ident(VALUES_COLUMN.format(i))}")
        return out

    def where_changed(select: list[str], rows: str, group: list[str]) -> str:
        by = f" GROUP BY {', '.join(group)}" if group else ""
        # (a global aggregate over an empty Δin has one row of NULLs: nothing changed)
        return (
            f"SELECT * FROM (SELECT {', '.join(select)} FROM {rows}{by}) "
            f"WHERE {ident(COUNT)} IS NOT NULL AND NOT coalesce({' AND '.join(zero)}, false)"
        )

    named = [f"{k} AS {ident(name)}" for k, name in zip(key_cols, keys)]
    if not extremes:
        return where_changed([*named, f"sum({w}) AS {ident(COUNT)}", *parts()], source, key_cols)
    values = sorted({i for i, _ in extremes})
    value_cols = [ident(ARG_COLUMN.format(i)) for i in values]
    rows = ident("_mv_rows")
    level1 = (
        f"SELECT {', '.join([*key_cols, *value_cols, f'sum({w}) AS {rows}', *parts()])} "
        f"FROM {source} GROUP BY {', '.join([*key_cols, *value_cols])}"
    )
    nets = [
        f"sum({rows}) OVER (PARTITION BY {', '.join([*key_cols, ident(ARG_COLUMN.format(i))])}) "
        f"AS {ident(f'_mv_net{i}')}"
        for i in values
    ]
    level2 = f"(SELECT *, {', '.join(nets)} FROM ({level1}) AS _mv_l1) AS _mv_l2"

    def summed(i: int) -> str:
        s, v = ident(sum_column(i)), ident(VALUES_COLUMN.format(i))
        if not spark:
            return f"sum({s})"
        lost = f"max(CASE WHEN {s} IS NULL AND {v} > 0 THEN 1 ELSE 0 END) = 1"
        return f"try_cast(CASE WHEN {lost} THEN NULL ELSE try_sum({s}) END AS {(sum_types or [])[i] or 'bigint'})"

    second = []
    for i, with_sum in enumerate(sums):
        second.append(f"sum({ident(nonnull_column(i))}) AS {ident(nonnull_column(i))}")
        if with_sum:
            second.append(f"{summed(i)} AS {ident(sum_column(i))}")
            second.append(f"sum({ident(VALUES_COLUMN.format(i))}) AS {ident(VALUES_COLUMN.format(i))}")
    for i, kind in extremes:
        a, net = ident(ARG_COLUMN.format(i)), ident(f"_mv_net{i}")
        live = f"{a} IS NOT NULL AND {net} <> 0"
        by = f"{kind}_by" if spark else f"arg_{kind}"
        second.append(f"{kind}(CASE WHEN {live} THEN {a} END) AS {ident(extreme_column(kind, i))}")
        second.append(
            f"{by}(CASE WHEN {live} THEN {net} END, CASE WHEN {live} THEN {a} END) "
            f"AS {ident(multiplicity_column(kind, i))}"
        )
    return where_changed([*named, f"sum({rows}) AS {ident(COUNT)}", *second], level2, key_cols)


# ---------------------------------------------------------------- Spark's AVG of decimals, from (sum, count)

AVG_COLUMN = "_mv_avg{}"  # a driver-computed AVG of argument i, beside the state rows being finalised

_DECIMAL_TYPE = re.compile(r"decimal\((\d+),\s*(\d+)\)")
_DOUBLE_AVG_DIGITS: Final = 15  # Spark's DecimalAggregates: AVG of DECIMAL(p, s) with p + 4 <= 15 goes through DOUBLE


def decimal_type(type_name: str | None) -> tuple[int, int] | None:
    """(precision, scale) of Spark's simple string ``decimal(p,s)``, else None."""
    m = _DECIMAL_TYPE.fullmatch(type_name or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def decimal_average(total: decimal.Decimal, n: int, *, precision: int, scale: int) -> decimal.Decimal | None:
    """Spark's ``avg`` of ``n`` (> 0) decimals summing to ``total`` whose result type is DECIMAL(precision, scale)
    with precision > 15: Decimal's ``/`` truncates the exact quotient at scale 39 (its MathContext rounds DOWN),
    then the result is rounded HALF_UP to ``scale`` (DecimalDivideWithOverflowCheck, Spark 4.2); None where it
    overflows the type (Spark: NULL, or an error under ANSI)."""
    with decimal.localcontext() as ctx:
        ctx.prec = 200  # exact for any DECIMAL(38, s) sum over any count
        q = (total / decimal.Decimal(n)).quantize(decimal.Decimal(1).scaleb(-39), decimal.ROUND_DOWN)
        q = q.quantize(decimal.Decimal(1).scaleb(-scale), decimal.ROUND_HALF_UP)
        return q if abs(q) < decimal.Decimal(10) ** (precision - scale) else None


def average_sql(
    sum_sql: str, count_sql: str, *, sum_type: str, avg_type: str, precision_loss: bool = True
) -> tuple[str, decimal.Decimal] | None:
    """Spark SQL computing exactly what Spark's ``avg`` gives for a decimal group of sum ``sum_sql`` and (positive)
    count ``count_sql``, and the bound below which the sum's absolute value must lie for it to be exact (the caller
    checks: a larger sum takes the full diff); or None where no such expression is known (with
    ``spark.sql.decimalOperations.allowPrecisionLoss`` off (``precision_loss``), AVG of DECIMAL(p > 11, s), and of
    DECIMAL(p, s > 34)).

    ``sum / count`` as written rounds to whatever scale the division's precision rule leaves (DECIMAL(38,4) /
    DECIMAL(20,0) keeps 6 digits, where AVG keeps 8). What Spark's AVG does instead:

    - DECIMAL(p <= 11, s): its optimizer averages the unscaled values as DOUBLE, divides by ``10^s`` and casts to
      DECIMAL(p + 4, s + 4) (DecimalAggregates); the same here from the sum (exact while the unscaled sum is below
      2^53, where Spark's sum of doubles is exact too).
    - otherwise: the exact quotient rounded HALF_UP at scale s + 4. Here the sum is cast so that the division's
      result type has exactly that scale (Decimal's ``/`` truncates at scale 39, then the division rounds HALF_UP
      to its scale: a single rounding, as AVG's). Below scale 2 the division cannot keep fewer than 6 digits: the
      sum is divided by ``10^m`` first and the quotient multiplied back (both exact below the bound).
    """
    s_t, a_t = decimal_type(sum_type), decimal_type(avg_type)
    if s_t is None or a_t is None:
        return None
    s, t = s_t[1], a_t[1]
    n = f"CAST({count_sql} AS DECIMAL(19,0))"
    if a_t[0] <= _DOUBLE_AVG_DIGITS:
        unscaled = f"CAST({sum_sql} * CAST(1E{s} AS DECIMAL({s + 1},0)) AS DOUBLE)"
        sql = f"CAST(({unscaled} / CAST({count_sql} AS DOUBLE)) / CAST(1E{s} AS DOUBLE) AS {avg_type})"
        return sql, decimal.Decimal(2**53).scaleb(-s)
    if t != s + 4 or s > 34 or not precision_loss:
        return None
    if s >= 3:  # DECIMAL(34, s) / DECIMAL(19,0): DECIMAL(38, s + 4)
        return f"CAST(CAST({sum_sql} AS DECIMAL(34,{s})) / {n} AS {avg_type})", decimal.Decimal(10 ** (34 - s))
    if s == 2:  # DECIMAL(38, 2) / DECIMAL(19,0): DECIMAL(38, 6)
        return f"CAST(CAST({sum_sql} AS DECIMAL(38,2)) / {n} AS {avg_type})", decimal.Decimal(10**36)
    m = 2 - s  # DECIMAL(38, 2) / DECIMAL(19,0) keeps 6 = t + m digits of the sum divided by 10^m
    shifted = f"CAST({sum_sql} * CAST(1E-{m} AS DECIMAL({m},{m})) AS DECIMAL(38,2))"
    sql = f"CAST(({shifted} / {n}) * CAST(1E{m} AS DECIMAL({m + 1},0)) AS {avg_type})"
    return sql, decimal.Decimal(10**32)  # (the product is DECIMAL(38,6): an average of 32 integer digits at most)
