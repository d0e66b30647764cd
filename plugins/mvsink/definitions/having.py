"""A HAVING over uncorrelated scalar subqueries cut into intermediate views (TPC-H Q11: the parts above a fraction of
the total): :func:`split_having` (:mod:`mvsink.definitions.intermediate` makes the views of it; docs/refresh.md,
"A HAVING over scalar subqueries")."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from mvsink.definitions.querytext import close_of, order_by, output_names, table_reads, tokens_of

if TYPE_CHECKING:
    from collections.abc import Callable

    from sqlglot import exp


@dataclasses.dataclass(frozen=True)
class HavingSplit:
    """A query ``SELECT ... GROUP BY ... HAVING p`` cut in three: ``inner`` (the user's text before its HAVING:
    every group), ``scalars`` (each scalar subquery of ``p``: the user's text, its one item named, and the sources
    it reads, casefolded) and ``outer`` (the view's columns from the groups and the subqueries' one-row tables,
    filtered by ``p`` with each aggregate written as its column's name and each subquery as its table's column)."""

    inner: str
    inner_reads: frozenset[str]
    scalars: tuple[tuple[str, frozenset[str]], ...]
    outer: str


def split_having(query: str, *, sources: list[str], name_of: Callable[[int], str]) -> HavingSplit | None:
    """``query`` (Spark SQL) as an aggregate, the uncorrelated scalar subqueries of its HAVING, and the HAVING's
    filter over them (TPC-H Q11: the parts whose stock value is above a fraction of the total), or None where it
    is not that shape (failing closed). ``name_of``: the name of intermediate view ``n`` (1: the groups, then each
    subquery's).

    The shape: a top-level SELECT (no WITH, DISTINCT, LIMIT, window) whose items are each named, with a GROUP BY and
    a HAVING, an ORDER BY of the view's column names if any, over unqualified sources of the view. In the HAVING,
    each aggregate outside a subquery is the expression of one of the view's columns, each plain column is one of
    the view's plain columns, and each subquery is a scalar one (not IN, EXISTS, ANY or ALL) of one item that
    aggregates with no GROUP BY, HAVING, ORDER BY, LIMIT, DISTINCT, window or subquery of its own, reading at least
    every table the query's FROM reads (so every name it could take from the query resolves in its own FROM first:
    it is uncorrelated), each qualifier its own, no name of the view's aliased columns.

    Equal by construction: a HAVING keeps the groups for which ``p`` holds over the group's row of the aggregate;
    the outer reads each group's row (its columns: the same values and types) and each subquery's value from a
    table that holds its one row (an aggregate without GROUP BY is one row, over no rows too), and applies ``p``
    written over those names. The rewritten text is checked by parsing it and putting the aggregates and
    subqueries back: that must give the HAVING's own tree."""
    import sqlglot

    try:
        tree = sqlglot.parse_one(query, dialect="spark")
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError):
        return None
    names = _having_shape(tree)
    texts = _having_texts(query) if names is not None else None
    if names is None or texts is None:
        return None
    items = {n.casefold(): e for n, e in zip(names, tree.expressions, strict=True)}
    aliased = {n for n, e in items.items() if e.key == "alias"}
    known = {x.casefold() for x in sources}
    body = tree.copy()
    body.set("having", None)
    body.set("order", None)
    main_reads = table_reads(body)
    if not main_reads or not main_reads <= known:
        return None
    inner_text, having_text, _ = texts
    rewritten = _rewrite_having(having_text, items=items, aliased=aliased, name_of=name_of)
    if rewritten is None:
        return None
    outer_pred, subqueries = rewritten
    if not subqueries:  # (a HAVING over the aggregate alone is the aggregate mode's)
        return None
    scalars = [_scalar_subquery(t, c, main_reads=main_reads, known=known, aliased=aliased) for t, c in subqueries]
    tables = {name_of(i).casefold(): sub for i, (sub, _) in enumerate(subqueries, start=2)}
    if None in scalars or not _restores(outer_pred, tree.args["having"].this, items, aliased, tables):
        return None
    columns = ", ".join(f"`{n}`" for n in names)
    froms = ", ".join(f"`{name_of(i)}`" for i in range(1, len(scalars) + 2))
    return HavingSplit(
        inner=inner_text,
        inner_reads=frozenset(main_reads),
        scalars=tuple(s for s in scalars if s is not None),
        # (without the ORDER BY: with no LIMIT it orders nothing a table keeps, and DuckDB's full diff refuses a Sort)
        outer=f"SELECT {columns} FROM {froms} WHERE {outer_pred}",
    )


def _having_shape(tree: exp.Expr) -> list[str] | None:
    """The output names of ``tree`` where it is a SELECT with a GROUP BY and a HAVING that :func:`split_having` may
    cut (no WITH, DISTINCT, LIMIT, window; an ORDER BY of output names only), else None."""
    from sqlglot import exp

    if not isinstance(tree, exp.Select) or not tree.args.get("group") or not tree.args.get("having"):
        return None
    shut = ("with_", "with", "distinct", "limit", "offset", "qualify", "windows", "into", "locks", "sample", "settings")
    if any(tree.args.get(a) for a in shut):
        return None
    names = output_names(tree)
    if names is None or (tree.args.get("order") is not None and order_by(tree, names) is None):
        return None
    return names


def _restores(
    outer_pred: str, pred: exp.Expression, items: dict[str, exp.Expression], aliased: set[str], tables: dict[str, str]
) -> bool:
    """Whether ``outer_pred``, parsed, reads only the view's columns and the subqueries' tables (``tables``: each
    one's subquery text), and gives ``pred`` back with each aggregate and subquery put back in."""
    import sqlglot
    from sqlglot import exp

    try:
        back = sqlglot.parse_one(outer_pred, dialect="spark")
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError):
        return False
    if any(isinstance(n, (exp.Select, exp.AggFunc)) for n in back.walk()):
        return False
    found = list(back.find_all(exp.Column))  # (listed first: what is put back is not looked into again)
    for c in found:
        ours = bool(c.table) and c.table.casefold() in tables
        if not ours and (c.table or c.name.casefold() not in items):
            return False
    for c in found:
        if c.table:
            new: exp.Expression = exp.Subquery(this=sqlglot.parse_one(tables[c.table.casefold()], dialect="spark"))
        elif c.name.casefold() in aliased:
            new = items[c.name.casefold()].this.copy()
        else:
            continue
        if c is back:
            back = new
        else:
            c.replace(new)
    return bool(back.sql(dialect="spark") == pred.sql(dialect="spark"))


def _having_texts(query: str) -> tuple[str, str, str] | None:
    """(the user's text before the top-level HAVING, the HAVING's predicate, the ORDER BY clause or "") of
    ``query``, cut by sqlglot's tokens; None where there is not exactly one top-level HAVING, or an ORDER BY comes
    before it."""
    from sqlglot import tokens

    T = tokens.TokenType
    toks = tokens_of(query)
    if toks is None:
        return None
    depth = 0
    found: dict[Any, list[int]] = {T.HAVING: [], T.ORDER_BY: []}
    for i, t in enumerate(toks):
        if t.token_type in (T.L_PAREN, T.L_BRACKET):
            depth += 1
        elif t.token_type in (T.R_PAREN, T.R_BRACKET):
            depth -= 1
        elif depth == 0 and t.token_type in found:
            found[t.token_type].append(i)
    having, order = found[T.HAVING], found[T.ORDER_BY]
    if depth != 0 or len(having) != 1 or len(order) > 1 or (order and order[0] < having[0]):
        return None
    end = toks[order[0]].start if order else len(query)
    pred = query[toks[having[0]].end + 1 : end].strip().rstrip(";").rstrip()
    order_text = query[toks[order[0]].start :].strip().rstrip(";").rstrip() if order else ""
    return query[: toks[having[0]].start].rstrip(), pred, order_text


def _rewrite_having(
    text: str, *, items: dict[str, exp.Expression], aliased: set[str], name_of: Callable[[int], str]
) -> tuple[str, list[tuple[str, str]]] | None:
    """The HAVING's predicate ``text`` with each scalar subquery written as the column of its intermediate table
    (``<view>__mv_inner2``, ...) and each aggregate that is a view's column's expression as that column's name;
    and each subquery's text with the name of its column. None where a token span cannot be read."""
    from sqlglot import tokens

    T = tokens.TokenType
    toks = tokens_of(text)
    if toks is None:
        return None
    by_expr = {e.this.sql(dialect="spark"): n for n, e in items.items() if n in aliased}
    used = set(items)
    out: list[str] = []
    subqueries: list[tuple[str, str]] = []
    at, i = 0, 0
    while i < len(toks):
        t, nxt = toks[i], (toks[i + 1] if i + 1 < len(toks) else None)
        j = close_of(toks, i + (0 if t.token_type == T.L_PAREN else 1)) if nxt is not None else None
        if j is None or nxt is None or nxt.token_type not in (T.SELECT, T.L_PAREN) or t.token_type == T.R_PAREN:
            i += 1
            continue
        if t.token_type == T.L_PAREN and nxt.token_type == T.SELECT:  # a subquery
            sub = text[nxt.start : toks[j].start].strip()
            column = _subquery_column(sub, used)
            if column is None:
                return None
            used.add(column.casefold())
            subqueries.append((sub, column))
            replacement = f"`{name_of(len(subqueries) + 1)}`.`{column}`"
        elif nxt.token_type == T.L_PAREN and (name := _aggregate_of(text[t.start : toks[j].end + 1], by_expr)):
            replacement = f"`{items[name].alias}`"  # a view's column's aggregate
        else:
            i += 1
            continue
        out += [text[at : t.start], replacement]
        at, i = toks[j].end + 1, j + 1
    out.append(text[at:])
    return "".join(out).strip(), subqueries


def _aggregate_of(span: str, by_expr: dict[str, str]) -> str | None:
    """The (casefolded) name of the view's column whose expression the text ``span`` is, where it is an aggregate."""
    import sqlglot
    from sqlglot import exp

    try:
        node = sqlglot.parse_one(span, dialect="spark")
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError):
        return None
    return by_expr.get(node.sql(dialect="spark")) if isinstance(node, exp.AggFunc) else None


def _subquery_column(sub: str, used: set[str]) -> str | None:
    """The column name of a HAVING's scalar subquery ``sub``: its item's own name, else ``scalar_<n>``; None where
    that name is one of ``used`` (casefolded) or the text does not parse."""
    import sqlglot
    from sqlglot import exp

    try:
        parsed = sqlglot.parse_one(sub, dialect="spark")
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError):
        return None
    first = parsed.expressions[0] if isinstance(parsed, exp.Select) and parsed.expressions else None
    if isinstance(first, exp.Alias):
        column = first.alias
    else:
        column = next(f"scalar_{k}" for k in range(1, 1000) if f"scalar_{k}" not in used)
    return None if column.casefold() in used else column


def _scalar_subquery(
    text: str, column: str, *, main_reads: set[str], known: set[str], aliased: set[str]
) -> tuple[str, frozenset[str]] | None:
    """A HAVING's scalar subquery ``text`` as an intermediate view's query (its one item named ``column`` where it
    has no name) and the sources it reads, or None where it is not an uncorrelated aggregate of one row
    (:func:`split_having`)."""
    import sqlglot
    from sqlglot import exp

    try:
        sel = sqlglot.parse_one(text, dialect="spark")
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError):
        return None
    if not _one_row_aggregate(sel):
        return None
    reads = table_reads(sel)
    if reads is None or not main_reads <= reads or not reads <= known:
        return None
    defined = {t.alias_or_name.casefold() for t in sel.find_all(exp.Table)}
    for c in sel.find_all(exp.Column):
        if (c.table and c.table.casefold() not in defined) or (not c.table and c.name.casefold() in aliased):
            return None
    if isinstance(sel.expressions[0], exp.Alias):
        return text, frozenset(reads)
    from sqlglot import tokens

    toks = tokens_of(text) or []
    depth, cut = 0, None
    for t in toks:
        depth += t.token_type in (tokens.TokenType.L_PAREN, tokens.TokenType.L_BRACKET)
        depth -= t.token_type in (tokens.TokenType.R_PAREN, tokens.TokenType.R_BRACKET)
        if depth == 0 and t.token_type == tokens.TokenType.FROM:
            cut = t.start
            break
    return None if cut is None else (f"{text[:cut].rstrip()} AS {column} {text[cut:]}", frozenset(reads))


def _one_row_aggregate(sel: exp.Expr) -> bool:
    """Whether ``sel`` is a SELECT of one item that aggregates every column it reads, with no GROUP BY, HAVING,
    ORDER BY, LIMIT, DISTINCT, window, WITH or subquery of its own: one row, always."""
    from sqlglot import exp

    if not isinstance(sel, exp.Select) or len(sel.expressions) != 1 or len(list(sel.find_all(exp.Select))) != 1:
        return False
    shut = ("with_", "with", "group", "having", "order", "limit", "offset", "distinct", "qualify", "windows")
    item = sel.expressions[0]
    if any(sel.args.get(a) for a in shut) or item.find(exp.AggFunc) is None or item.find(exp.Window) is not None:
        return False
    return all(c.find_ancestor(exp.AggFunc) is not None for c in item.find_all(exp.Column))
