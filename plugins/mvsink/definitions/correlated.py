"""A correlated scalar subquery compared in a WHERE, decorrelated into an intermediate view (TPC-H Q2: the suppliers
whose cost of a part is the part's least cost in a region): :func:`split_correlated`
(:mod:`mvsink.definitions.intermediate` makes the views of it; docs/refresh.md, "A correlated scalar subquery").

``SELECT ... FROM t, ... WHERE ... AND x op (SELECT agg(e) FROM s, ... WHERE ... AND inner = outer)`` is refreshed as

* the intermediate ``SELECT inner AS mv_corr_1, agg(e) AS mv_scalar FROM s, ... WHERE ... GROUP BY inner``: the
  subquery's value for every value of its correlation key, kept with the aggregate's state (MIN/MAX per group,
  refreshed from the sources' changes);
* the view: the query with the intermediate in its FROM, ``<intermediate>.mv_corr_1 = outer`` in its WHERE and the
  subquery written as ``<intermediate>.mv_scalar``: a select-project-join (or a top-k of one) over its sources and
  the intermediate, refreshed from their changes.

Equal by construction, where the shape below holds. For an outer row whose ``outer`` is v, Spark's subquery is the
aggregate over the inner rows whose ``inner = v``: the intermediate's row of the group v (the same type on both
sides, so equality is identity, and a group's key is unique: at most one row joins). Where no inner row has
``inner = v`` (or v is NULL) the subquery is NULL and the comparison is NULL, so the WHERE drops the row, as the
join does: which is why the aggregate must be one that is NULL over no rows (MIN, MAX, SUM, AVG; not COUNT),
optionally times, plus or minus a literal, and the comparison a conjunct of the WHERE itself (not under OR or NOT).

The WHERE may be the query's own or that of a SELECT nested in one of its subqueries (TPC-H Q20: the correlated sum
sits in the WHERE of an ``IN (SELECT ps_suppkey FROM partsupp WHERE ...)``): that SELECT, the host, gets the
intermediate in its FROM. The host's rows are the same after the split, so whatever holds it (an IN, the query)
sees the same rows; the host alone must be of the shape below, and its other subqueries stay as they are.

Which names of the subquery are the outer query's is read from the sources' columns (``columns``: the Delta
schemas, :func:`mvsink.core.sourceschema.source_columns`), as Spark resolves them: a name resolves in the
subquery's own FROM first, else in the query's. A name found in neither, or in two tables of one scope, fails the
split (closed), as does any other shape: a WITH anywhere; a DISTINCT, GROUP BY, aggregate or window in the host;
more than one scalar subquery compared in a WHERE; a subquery with a GROUP BY, HAVING, ORDER BY, LIMIT, DISTINCT,
join condition or subquery of its own; an outer name that is not the host's, or anywhere but in an equality with an
inner column of the same type (integers, decimals, strings, dates); a table that is not an unqualified source of the
view; an intermediate column name a source has.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from mvsink.definitions.querytext import output_names

if TYPE_CHECKING:
    from sqlglot import exp

CORR_PREFIX: Final = "mv_corr_"  # the intermediate's correlation key columns: mv_corr_1, ...
SCALAR: Final = "mv_scalar"  # its value column
_KEY_TYPES = re.compile(r"(byte|short|integer|long|string|date|decimal\(\d+,\s*\d+\))")


@dataclasses.dataclass(frozen=True)
class CorrelatedSplit:
    """A query cut at its correlated scalar subquery: ``inner`` (the subquery grouped by its correlation key, over
    the sources ``inner_reads``) and ``outer`` (the query over ``outer_reads`` and the intermediate); casefolded
    source names."""

    inner: str
    inner_reads: frozenset[str]
    outer: str
    outer_reads: frozenset[str]


def has_correlated_shape(query: str) -> bool:
    """Does ``query``'s text hold a subquery (cheap, no parse: a refresh of another view imports no sqlglot)?"""
    return re.search(r"\(\s*select\b", query, flags=re.IGNORECASE) is not None


def split_correlated(
    query: str, *, columns: Mapping[str, Mapping[str, str]], intermediate: str
) -> CorrelatedSplit | None:
    """``query`` (Spark SQL) decorrelated into an intermediate view named ``intermediate`` and the query over it (the
    module's docstring), or None where it is not that shape (failing closed). ``columns``: each source's columns
    and their Spark types, by casefolded source and column name."""
    import sqlglot
    from sqlglot import exp

    try:
        tree = sqlglot.parse_one(query, dialect="spark")
        copy = sqlglot.parse_one(query, dialect="spark")  # (the outer's rewrite: the same nodes, in the same order)
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError):
        return None
    if not isinstance(tree, exp.Select) or not isinstance(copy, exp.Select) or tree.find(exp.With) is not None:
        return None
    parens = list(tree.find_all(exp.Subquery))
    found = _compared_subquery(tree)
    if found is None:
        return None
    host, paren = found
    sub = paren.this
    outer_scope = _scope(host, columns)
    inner_scope = _scope(sub, columns)
    if outer_scope is None or inner_scope is None or _has(sub, "distinct", "group", "having", "order", "limit"):
        return None
    if _has(sub, "with_", "with", "qualify", "windows", "offset") or len(sub.expressions) != 1:
        return None
    if _inner_selects(sub):
        return None
    item = sub.expressions[0]
    item = item.this if isinstance(item, exp.Alias) else item
    got = _keys(sub, inner_scope, outer_scope) if _null_over_no_rows(item) else None
    if got is None:
        return None
    keys, rest = got
    if any(_resolve(c, inner_scope, outer_scope) != "inner" for c in item.find_all(exp.Column)):
        return None
    every = {c for cols in columns.values() for c in cols}
    names = [f"{CORR_PREFIX}{i}" for i in range(1, len(keys) + 1)]
    if SCALAR in every or any(n in every for n in names):
        return None
    inner_tree = sub.copy()
    inner_tree.set("expressions", [exp.alias_(k.copy(), n) for (k, _), n in zip(keys.values(), names, strict=True)])
    inner_tree.append("expressions", exp.alias_(item.copy(), SCALAR))
    inner_tree.set("where", exp.Where(this=exp.and_(*(c.copy() for c in rest))) if rest else None)
    inner_tree.set("group", exp.Group(expressions=[k.copy() for k, _ in keys.values()]))
    table = exp.to_identifier(intermediate, quoted=True)
    at = next(i for i, p in enumerate(parens) if p is paren)  # (by identity: an equal subquery may come first)
    copied = list(copy.find_all(exp.Subquery))[at]
    copied_host = copied.find_ancestor(exp.Select)
    if not isinstance(copied_host, exp.Select) or copied_host.sql() != host.sql():  # (the same parse: never)
        return None
    copied.replace(exp.column(SCALAR, table=table.copy()))
    copied_host.append("joins", exp.Join(this=exp.Table(this=table.copy())))
    on = [
        exp.EQ(this=exp.column(n, table=table.copy()), expression=o.copy())
        for (_, outers), n in zip(keys.values(), names, strict=True)
        for o in outers
    ]
    where = copied_host.args.get("where")
    conds = [where.this, *on] if isinstance(where, exp.Where) else on
    copied_host.set("where", exp.Where(this=exp.and_(*conds)))
    outer_reads = {t.name.casefold() for t in copy.find_all(exp.Table)} - {intermediate.casefold()}
    if not outer_reads <= set(columns):
        return None
    return CorrelatedSplit(
        inner=inner_tree.sql(dialect="spark"),
        inner_reads=frozenset(_sources(inner_scope)),
        outer=copy.sql(dialect="spark"),
        outer_reads=frozenset(outer_reads),
    )


Scope = dict[str, tuple[str, Mapping[str, str]]]  # alias (or table name), casefolded -> (source, its columns)


def _compared_subquery(tree: exp.Select) -> tuple[exp.Select, exp.Subquery] | None:
    """The query's one scalar subquery compared in a conjunct of a WHERE, and the SELECT whose WHERE that is (the
    query itself, or a SELECT nested in one of its subqueries: TPC-H Q20's IN), where that SELECT is of the shape the
    split takes (no DISTINCT, GROUP BY, aggregate or window outside the subquery; each column named); else None.

    The host's rows are the same after the split (each joins at most one row of the intermediate, and is kept where
    the comparison holds), so whatever holds the host sees the same rows: an aggregate outside the host is allowed."""
    from sqlglot import exp

    found = []
    for paren in tree.find_all(exp.Subquery):
        host = paren.find_ancestor(exp.Select)
        where = host.args.get("where") if isinstance(host, exp.Select) else None
        if not isinstance(where, exp.Where) or not isinstance(paren.this, exp.Select):
            continue
        conjuncts = _conjuncts(where.this)
        compared = [c for c in conjuncts if paren in set(c.walk())]
        if len(compared) == 1 and _comparison_with(compared[0], paren):
            found.append((host, paren))
    if len(found) != 1:
        return None
    host, paren = found[0]
    assert isinstance(host, exp.Select)
    if _has(host, "with_", "with", "distinct", "group", "having", "qualify", "windows"):
        return None
    if any(w.find_ancestor(exp.Select) is host for w in tree.find_all(exp.Window)) or output_names(host) is None:
        return None
    if any(isinstance(a, exp.AggFunc) and not _inside(a, paren) for a in host.find_all(exp.AggFunc)):
        return None
    return host, paren


def _inner_selects(sub: exp.Select) -> bool:
    """Does the subquery hold a subquery of its own?"""
    from sqlglot import exp

    return any(s is not sub for s in sub.find_all(exp.Subquery, exp.Select))


Keys = dict[str, tuple["exp.Column", list["exp.Column"]]]  # an inner column's text -> (it, the outer ones equal to it)


def _keys(sub: exp.Select, inner: Scope, outer: Scope) -> tuple[Keys, list[exp.Expr]] | None:
    """The subquery's correlation (each inner column equal to outer ones) and its other conjuncts, of inner names
    only; None where it has no correlation or one of another form."""
    from sqlglot import exp

    keys: Keys = {}
    rest = []
    where = sub.args.get("where")
    for c in _conjuncts(where.this) if isinstance(where, exp.Where) else []:
        sides = _correlation(c, inner, outer)
        if sides is None:
            return None
        if not sides:
            rest.append(c)
            continue
        inner_col, outer_col = sides
        keys.setdefault(inner_col.sql(dialect="spark").casefold(), (inner_col, []))[1].append(outer_col)
    return (keys, rest) if keys else None


def _sources(scope: Scope) -> set[str]:
    """The sources a scope reads (casefolded)."""
    return {source for source, _ in scope.values()}


def _has(tree: exp.Expr, *args: str) -> bool:
    return any(tree.args.get(a) for a in args)


def _inside(node: exp.Expr, ancestor: exp.Expr) -> bool:
    p = node.parent
    while p is not None:
        if p is ancestor:
            return True
        p = p.parent
    return False


def _conjuncts(e: exp.Expr) -> list[exp.Expr]:
    from sqlglot import exp

    if isinstance(e, exp.Paren):
        return _conjuncts(e.this)
    if isinstance(e, exp.And):
        return _conjuncts(e.this) + _conjuncts(e.expression)
    return [e]


def _comparison_with(c: exp.Expr, paren: exp.Expr) -> bool:
    """``x op (subquery)`` or ``(subquery) op x``, ``op`` a comparison that is NULL where either side is, and ``x``
    without a subquery."""
    from sqlglot import exp

    if not isinstance(c, (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE)):
        return False
    other = c.expression if c.this is paren else c.this if c.expression is paren else None
    return other is not None and other.find(exp.Subquery, exp.Select) is None


def _null_over_no_rows(item: exp.Expr) -> bool:
    """One MIN, MAX, SUM or AVG (no DISTINCT, no FILTER), or that times, plus or minus a numeric literal: NULL over no
    rows."""
    from sqlglot import exp

    while isinstance(item, (exp.Mul, exp.Add, exp.Sub, exp.Paren)):
        if isinstance(item, exp.Paren):
            item = item.this
            continue
        a, b = item.this, item.expression
        lit = [x for x in (a, b) if isinstance(x, exp.Literal) and not x.is_string]
        if len(lit) != 1:
            return False
        item = b if lit[0] is a else a
    if not isinstance(item, (exp.Min, exp.Max, exp.Sum, exp.Avg)) or [k for k, v in item.args.items() if v] != ["this"]:
        return False
    arg = item.this
    return not isinstance(arg, exp.Distinct) and arg.find(exp.AggFunc, exp.Subquery, exp.Select, exp.Window) is None


def _scope(select: exp.Select, columns: Mapping[str, Mapping[str, str]]) -> Scope | None:
    """The SELECT's FROM as a comma (or CROSS) list of unqualified sources, by alias; None otherwise."""
    from sqlglot import exp

    from_ = select.args.get("from_") or select.args.get("from")
    if not isinstance(from_, exp.From):
        return None
    tables: list[Any] = [from_.this]
    for j in select.args.get("joins") or []:
        if j.args.get("on") or j.args.get("using") or j.args.get("side") or j.args.get("kind") not in (None, "CROSS"):
            return None
        tables.append(j.this)
    scope: Scope = {}
    for t in tables:
        if not isinstance(t, exp.Table) or t.args.get("db") or t.args.get("catalog"):
            return None
        source = t.name.casefold()
        alias = (t.alias or t.name).casefold()
        if source not in columns or alias in scope:
            return None
        scope[alias] = (source, {k.casefold(): v for k, v in columns[source].items()})
    return scope


def _resolve(c: exp.Column, inner: Scope, outer: Scope) -> str | None:
    """``inner`` or ``outer`` as Spark resolves the column in the subquery (its FROM first), else None (not
    found, ambiguous, or a qualifier of more parts)."""
    name = c.name.casefold()
    if c.args.get("db") or c.args.get("catalog"):
        return None
    if c.table:
        q = c.table.casefold()
        for where, scope in (("inner", inner), ("outer", outer)):
            if q in scope:
                return where if name in scope[q][1] else None
        return None
    for where, scope in (("inner", inner), ("outer", outer)):
        found = [a for a, (_, cols) in scope.items() if name in cols]
        if len(found) == 1:
            return where
        if found:
            return None
    return None


def _type(c: exp.Column, scope: Scope) -> str | None:
    name = c.name.casefold()
    found = [cols[name] for a, (_, cols) in scope.items() if name in cols and (not c.table or a == c.table.casefold())]
    return found[0].replace(" ", "") if len(found) == 1 else None


def _correlation(c: exp.Expr, inner: Scope, outer: Scope) -> tuple[exp.Column, exp.Column] | tuple[()] | None:
    """``()`` for a conjunct of inner names only; (inner column, outer column) for ``inner = outer`` of one key type;
    None otherwise."""
    from sqlglot import exp

    cols = list(c.find_all(exp.Column))
    where = [_resolve(x, inner, outer) for x in cols]
    if None in where:
        return None
    if "outer" not in where:
        return ()
    if not isinstance(c, exp.EQ) or not isinstance(c.this, exp.Column) or not isinstance(c.expression, exp.Column):
        return None
    a, b = c.this, c.expression
    sides = {_resolve(a, inner, outer): a, _resolve(b, inner, outer): b}
    if set(sides) != {"inner", "outer"}:
        return None
    ti, to = _type(sides["inner"], inner), _type(sides["outer"], outer)
    if ti is None or ti != to or not _KEY_TYPES.fullmatch(ti):
        return None
    return sides["inner"], sides["outer"]
