"""The state queries of an aggregate view, read from sqlglot's tree of its query (pure; no Spark).

Which select items are the group's keys and which are COUNT/SUM/AVG expressions over which arguments;
the *input query* (keys and arguments over the query's FROM/WHERE), the *state query* (the user's query with
the state aggregates appended) and the expressions that finalise each output column from the state.
Classification only: :mod:`mvsink.spark.aggstate` has Spark's analysis decide what is safe.
"""

from __future__ import annotations

import dataclasses
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
        product), or None (:func:`mvsink.spark.telescope.signed_query`)."""
        from mvsink.spark.telescope import signed_query

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
