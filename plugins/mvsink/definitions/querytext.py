"""Spark SQL texts read with sqlglot for the intermediate splits (:mod:`mvsink.definitions.intermediate`,
:mod:`mvsink.definitions.having`): the tables a tree reads, a SELECT's output names, its ORDER BY and LIMIT, and the
tokens of a text with their brackets. Each fails closed (None where the text is not of the form read)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqlglot import exp


def table_reads(tree: exp.Expr) -> set[str] | None:
    """The tables ``tree`` reads (casefolded), or None where one is qualified or a table function."""
    from sqlglot import exp

    got = set()
    for t in tree.find_all(exp.Table):
        if t.args.get("db") or t.args.get("catalog") or not isinstance(t.this, exp.Identifier):
            return None
        got.add(t.name.casefold())
    return got


def limit_of(tree: exp.Select) -> int | None:
    """The SELECT's LIMIT where it is a non-negative integer literal, else None."""
    from sqlglot import exp

    lim = tree.args.get("limit")
    e = lim.expression if isinstance(lim, exp.Limit) else None
    if not isinstance(e, exp.Literal) or e.is_string:
        return None
    try:
        n = int(e.this)
    except ValueError:
        return None
    return n if n >= 0 else None


def output_names(tree: exp.Select) -> list[str] | None:
    """Each select item's output name (an alias, or a plain column's name), or None where one has none, is a
    ``*``, a window function or a name used twice or reserved."""
    from sqlglot import exp

    from mvsink.definitions.view import IDENT_RE, RESERVED_PREFIX

    names: list[str] = []
    for e in tree.expressions:
        if isinstance(e, exp.Star) or isinstance(e.this, exp.Star) or e.find(exp.Window) is not None:
            return None
        if isinstance(e, exp.Alias):
            name = e.alias
        elif isinstance(e, exp.Column) and isinstance(e.this, exp.Identifier):
            name = e.this.name
        else:
            return None
        if not IDENT_RE.match(name) or name.lower().startswith(RESERVED_PREFIX):
            return None
        names.append(name)
    if len({n.lower() for n in names}) != len(names):
        return None
    return names


def order_by(tree: exp.Select, names: list[str]) -> list[tuple[str, bool, bool]] | None:
    """The SELECT's ORDER BY as (the name in ``names`` it is, descending, NULLs first), Spark's NULL placement written
    out where the query leaves it (first ascending, last descending); None where an item is not an unqualified
    name of ``names`` (casefolded) or there is no ORDER BY."""
    from sqlglot import exp

    order = tree.args.get("order")
    if order is None:
        return None
    lower = [n.lower() for n in names]
    out = []
    for o in order.expressions:
        c = o.this if isinstance(o, exp.Ordered) else None
        if not isinstance(c, exp.Column) or c.table or not isinstance(c.this, exp.Identifier):
            return None
        if c.name.lower() not in lower:
            return None
        desc = bool(o.args.get("desc"))
        nulls_first = o.args.get("nulls_first")
        out.append((names[lower.index(c.name.lower())], desc, (not desc) if nulls_first is None else bool(nulls_first)))
    return out


def tokens_of(text: str) -> list[Any] | None:
    """sqlglot's Spark tokens of ``text``, or None where it cannot tokenize it."""
    from sqlglot.dialects.spark import Spark

    try:
        return list(Spark().tokenize(text))
    except Exception:  # noqa: BLE001 (a text sqlglot cannot tokenize: not split)
        return None


def close_of(toks: list[Any], i: int) -> int | None:
    """The index of the token closing the bracket opened at ``toks[i]``, or None."""
    from sqlglot import tokens

    T = tokens.TokenType
    depth = 0
    for j in range(i, len(toks)):
        if toks[j].token_type in (T.L_PAREN, T.L_BRACKET):
            depth += 1
        elif toks[j].token_type in (T.R_PAREN, T.R_BRACKET):
            depth -= 1
            if depth == 0:
                return j
    return None
