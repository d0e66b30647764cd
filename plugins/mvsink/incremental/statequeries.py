"""The state queries of an aggregate view, read from sqlglot's tree of its query (pure; no Spark).

Which select items are the group's keys and which are COUNT/SUM/AVG expressions over which arguments;
the *input query* (keys and arguments over the query's FROM/WHERE), the *state query* (the user's query with
the state aggregates appended) and the expressions that finalise each output column from the state.
Classification only: :mod:`mvsink.incremental.modes.aggregate` has Spark's analysis decide what is safe.
"""

from __future__ import annotations

import dataclasses
import decimal
import re
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

    @property
    def state_columns(self) -> tuple[str, ...]:
        cols = [COUNT]
        for i, (_, with_sum) in enumerate(self.args):
            cols.append(nonnull_column(i))
            if with_sum:
                cols.append(sum_column(i))
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
    finalise: list[tuple[str, str]] = []
    for i, item in enumerate(items):
        name = item.alias_or_name
        if i in key_items:
            finalise.append((name, _quote(name)))
            continue
        got = _finalise_item(item, args, set(key_names))
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
    extra = [f"count(*) AS {COUNT}"]
    for i, (a, with_sum) in enumerate(arg_list):
        extra.append(f"count({a}) AS {nonnull_column(i)}")
        if with_sum:
            extra.append(f"sum({a}) AS {sum_column(i)}")
    state.set("expressions", list(state.expressions) + [sqlglot.parse_one(e, dialect="spark") for e in extra])
    return StateQueries(
        keys=tuple(key_names),
        args=tuple(arg_list),
        input_query=inp.sql(dialect="spark"),
        state_query=state.sql(dialect="spark"),
        finalise=tuple(finalise),
    )


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


def _finalise_item(item: Any, args: dict[str, bool], keys: set[str]) -> str:
    """The item as a Spark SQL expression over the state (its COUNT/SUM/AVG calls replaced), or why not.

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
