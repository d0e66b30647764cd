"""A top-k over an aggregate refreshed through an intermediate table (DESIGN.md section 8, docs/refresh.md).

A view ``SELECT keys, aggregates FROM ... GROUP BY keys ORDER BY o LIMIT k`` whose aggregate is not partitioned by
the changed sources' keys (TPC-H Q10: customers ranked by the revenue of their lineitems; Q21: suppliers by their
waiting orders) has no incremental form of its own: the top k may need any group of the aggregate, and the view's
table keeps only k of them. It is refreshed as two views, as Databricks' Enzyme does with an intermediate
materialization:

* the *intermediate* view: the query without its ORDER BY and LIMIT (every group of the aggregate), with the view's
  sources, kept in a Delta table of its own in the view's folder (``<target>/_mv_inner``), refreshed first at the
  same refresh time, in whichever mode its own query allows (an aggregate: ``incremental:aggregate`` from its
  hidden state);
* the view itself: ``SELECT <its columns> FROM <intermediate> ORDER BY o LIMIT k``, a view over that view: its change
  is the intermediate's change (a projection of one view source: ``incremental:topk``, or a full diff over the
  intermediate's rows, which are few where the aggregate's input is large).

An aggregate in a WITH clause (TPC-H Q15: ``WITH revenue0 AS (SELECT l_suppkey, sum(...) FROM lineitem ... GROUP BY
l_suppkey) SELECT ... FROM supplier, revenue0 WHERE ... total_revenue = (SELECT max(total_revenue) FROM revenue0)``)
is split alike (:func:`split_cte`): the CTE's body is the intermediate view, over the sources it reads; the query's
body is the view, over the intermediate (a view source under the CTE's name) and the sources it reads itself. The
body is refreshed in whichever mode applies; a full diff of it reads the intermediate's rows, not the sources'.

A HAVING over uncorrelated scalar subqueries (TPC-H Q11: the parts above a fraction of the total) is split into
several intermediates (:func:`split_having`): the groups (the text before the HAVING), then each subquery as a view
of one row (``<view>__mv_inner2``, ...); the view is the HAVING as a filter over their join, its aggregates written
as the view's columns and its subqueries as their tables' columns.

The rewrite is on sqlglot's tree and fails closed (:func:`intermediate_split` returns None, and the view is refreshed
as one query): it needs a top-level ``SELECT`` with a ``GROUP BY``, an ``ORDER BY`` of plain names of the view's
columns, an integer ``LIMIT`` without ``OFFSET``, every select item a column or an aliased expression with a name of
its own (no ``*``, no window function, no ``DISTINCT``), a declared ``key``, no checks, incremental refreshes on
and ``MVSINK_INTERMEDIATE`` not false. Equal by construction: Spark resolves an ``ORDER BY`` name against the
select list first, so ordering the intermediate's columns by the same names, directions and NULL placement, with
the declared key making the order total, keeps the same k rows of the same values and types
(``tests/spark/test_intermediate.py`` checks it against Spark over randomized histories).
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Protocol

from mvsink import settings
from mvsink.definitions.catalog import Catalog
from mvsink.definitions.view import Source, ViewDefinition

if TYPE_CHECKING:
    from sqlglot import exp


class Described(Protocol):
    """What a batch description says of the definition it was minted for (:class:`mvsink.core.batch.BatchDescription`)."""

    @property
    def view(self) -> str: ...

    @property
    def definition(self) -> str: ...


INNER_SUFFIX: Final = "__mv_inner"  # the intermediate view's name: the view's, with this suffix
INNER_FOLDER: Final = "_mv_inner"  # its table, in the view's folder (a folder Delta and vacuum leave alone)
# A WITH clause's split: the view's refresh counts as its intermediate's (incremental) where the query's body,
# recomputed over the intermediate's rows, read at most this much of other tables (a dimension such as TPC-H's
# supplier, 10,000 rows at SF 1, 0.9 MB): its cost is then that of the intermediate's rows, not of the sources'.
OUTER_FULL_MAX_BYTES: Final = 64 * 1024 * 1024


TOPK: Final = "topk"  # a top-k over an aggregate: the outer view is the top k of the intermediate's rows
CTE: Final = "cte"  # an aggregate in a WITH clause: the outer view is the query's body over the intermediate
HAVING: Final = "having"  # a HAVING over scalar subqueries: the groups, each subquery's one row, the filter over them


@dataclasses.dataclass(frozen=True)
class IntermediateSplit:
    """A view refreshed through intermediate tables: ``inner`` (the aggregate, every group) and ``more`` (a HAVING's
    scalar subqueries, one row each), then ``outer`` (the view itself over them; the view's name, target and
    options). ``kind``: :data:`TOPK`, :data:`CTE` or :data:`HAVING`."""

    inner: ViewDefinition
    outer: ViewDefinition
    kind: str = TOPK
    more: tuple[ViewDefinition, ...] = ()

    @property
    def inners(self) -> tuple[ViewDefinition, ...]:
        """Every intermediate view, in the order they are refreshed (each before the view)."""
        return (self.inner, *self.more)

    @property
    def outer_role(self) -> str:
        """What the outer view is, in words (explain and logs)."""
        if self.kind == CTE:
            return "the query's body over it (a full diff over the intermediate's rows where no mode applies)"
        if self.kind == HAVING:
            return (
                f"the HAVING's filter of its groups, each scalar subquery read from an intermediate table of one row "
                f"({', '.join(v.name for v in self.more)})"
            )
        return "its top k (incremental:topk, without Spark where the intermediate's change is in its log)"

    def catalog(self, catalog: Catalog | None) -> IntermediateCatalog:
        """A catalog in which the outer view's sources resolve to the intermediate views."""
        return IntermediateCatalog(self.inners, catalog, outer=self.outer)


class IntermediateCatalog(Catalog):
    """``catalog`` (may be None) with the intermediate views added, and the view as it reads them: what mint resolves
    view sources through, and what holds the intermediates' compaction back."""

    def __init__(self, inners: tuple[ViewDefinition, ...], catalog: Catalog | None, *, outer: ViewDefinition):
        # (no folder loaded again; the view as it reads the intermediates, which holds their compaction back)
        self.inners = {v.name: v for v in inners}
        self.base = catalog
        self.views_dir = catalog.views_dir if catalog is not None else Path()
        self.views = {**(catalog.views if catalog is not None else {}), outer.name: outer, **self.inners}
        self.errors = dict(catalog.errors) if catalog is not None else {}

    def upstream(self, view: ViewDefinition, source: Source) -> ViewDefinition:
        if source.kind == "view" and source.view in self.inners:
            return self.inners[source.view]
        if self.base is None:
            raise ValueError(f"view {view.name}: source '{source.name}' is a view; mint needs the catalog")
        return self.base.upstream(view, source)


def inner_name(view: str, number: int = 1) -> str:
    """The name of ``view``'s intermediate view ``number`` (the first: ``<view>__mv_inner``, then ``__mv_inner2``)."""
    return f"{view}{INNER_SUFFIX}{number if number > 1 else ''}"


def intermediate_split(view: ViewDefinition) -> IntermediateSplit | None:
    """The view as an intermediate aggregate and a top-k over it, or as an aggregate of a WITH clause and the
    query's body over it (the module's docstring), or None."""
    if not settings.intermediate() or not view.incremental or view.checks:
        return None
    name = inner_name(view.name)
    if any(s.kind == "view" and s.view == name for s in view.sources):
        return None
    got = split_query(view.query, key=view.key) if view.key else None
    if got is not None:
        inner_sql, outer_body = got
        inner = _inner_view(view, inner_sql, view.sources)
        outer = dataclasses.replace(
            view,
            query=outer_body.replace("{source}", f"`{name}`"),
            sources=(Source(name=name, kind="view", view=name),),
        )
        return IntermediateSplit(inner=inner, outer=outer, kind=TOPK)
    cte = split_cte(view.query, sources=[s.name for s in view.sources]) if _starts_with_with(view.query) else None
    if cte is None:
        return _having_split(view) if settings.intermediate_having() and _has_having(view.query) else None
    inner = _inner_view(view, cte.inner, tuple(s for s in view.sources if s.name.casefold() in cte.inner_reads))
    outer = dataclasses.replace(
        view,
        query=cte.outer,
        sources=(
            *(s for s in view.sources if s.name.casefold() in cte.outer_reads),
            Source(name=cte.name, kind="view", view=name),
        ),
    )
    return IntermediateSplit(inner=inner, outer=outer, kind=CTE)


def _starts_with_with(query: str) -> bool:
    """Does ``query`` begin with ``WITH`` (cheap, no parse: a refresh that finds nothing to do imports no sqlglot)?"""
    return re.match(r"\s*with\b", query, flags=re.IGNORECASE) is not None


def _has_having(query: str) -> bool:
    """Does ``query``'s text hold a ``HAVING`` with a ``(SELECT`` after it (cheap, no parse: a refresh of another
    view imports no sqlglot)?"""
    return re.search(r"\bhaving\b.*\(\s*select\b", query, flags=re.IGNORECASE | re.DOTALL) is not None


def _having_split(view: ViewDefinition) -> IntermediateSplit | None:
    """``view`` as its groups, its HAVING's scalar subqueries and the filter over them (:func:`split_having`)."""
    got = split_having(view.query, sources=[s.name for s in view.sources], view=view.name)
    if got is None:
        return None

    def reading(reads: frozenset[str]) -> tuple[Source, ...]:
        return tuple(s for s in view.sources if s.name.casefold() in reads)

    inner = _inner_view(view, got.inner, reading(got.inner_reads))
    more = tuple(
        dataclasses.replace(
            _inner_view(view, text, reading(reads), number=i),
            description=f"an intermediate table of view {view.name} (a scalar subquery of its HAVING: one row)",
        )
        for i, (text, reads) in enumerate(got.scalars, start=2)
    )
    # The filter is recomputed over the intermediates' rows (one per group, one per subquery), by DuckDB without
    # Spark where it can: a change of a subquery's row (the total, TPC-H Q11's) moves every group's comparison, so
    # the change terms of the join would read every group too.
    outer = dataclasses.replace(
        view,
        query=got.outer,
        sources=tuple(Source(name=v.name, kind="view", view=v.name) for v in (inner, *more)),
        incremental=False,
    )
    return IntermediateSplit(inner=inner, outer=outer, kind=HAVING, more=more)


def _inner_view(view: ViewDefinition, query: str, sources: tuple[Source, ...], *, number: int = 1) -> ViewDefinition:
    """The intermediate view ``number`` of ``view``: ``query`` over ``sources``, in ``<target>/_mv_inner`` (then
    ``_mv_inner2``, ...), without a key."""
    return dataclasses.replace(
        view,
        name=inner_name(view.name, number),
        description=f"the intermediate table of view {view.name} (every group of its aggregate)",
        query=query,
        sources=sources,
        target=view.target.joinpath(f"{INNER_FOLDER}{number if number > 1 else ''}"),
        key=(),
        tags=(),
        max_lag_ms=None,
        notify=(),
        full_refresh_every=view.full_refresh_every,
    )


@dataclasses.dataclass(frozen=True)
class CteSplit:
    """A query ``WITH name AS (inner) outer`` cut in two: the user's texts of both, and the sources (casefolded)
    each reads."""

    name: str
    inner: str
    outer: str
    inner_reads: frozenset[str]
    outer_reads: frozenset[str]


def split_cte(query: str, *, sources: list[str]) -> CteSplit | None:
    """``query`` (Spark SQL) as one aggregate in a WITH clause and the body that reads it, or None where it is not
    that shape (failing closed): exactly one WITH in the query, at its top, of one CTE without a column list
    whose body is a SELECT with a GROUP BY (no ORDER BY, LIMIT, DISTINCT or window; each item named), named
    neither as a source nor as a reserved name; every other table either reads is a source of the view, unqualified.

    Equal by construction: the body reads the CTE's rows, and the intermediate view's rows are those rows, of
    Spark's types (an aggregate's groups are distinct rows, so the multiset is the same)."""
    import sqlglot
    from sqlglot import exp

    from mvsink.definitions.view import IDENT_RE, RESERVED_PREFIX

    try:
        tree = sqlglot.parse_one(query, dialect="spark")
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError):
        return None
    if not isinstance(tree, exp.Select) or len(list(tree.find_all(exp.With))) != 1:
        return None
    with_ = tree.args.get("with_") or tree.args.get("with")
    if not isinstance(with_, exp.With) or with_.args.get("recursive") or len(with_.expressions) != 1:
        return None
    cte = with_.expressions[0]
    alias = cte.args.get("alias")
    body = cte.this
    if not isinstance(alias, exp.TableAlias) or alias.columns or not isinstance(body, exp.Select):
        return None
    name = alias.name
    known = {s.casefold() for s in sources}
    if not IDENT_RE.match(name) or name.lower().startswith(RESERVED_PREFIX) or name.casefold() in known:
        return None
    if not body.args.get("group") or any(
        body.args.get(a) for a in ("distinct", "order", "limit", "offset", "qualify", "windows", "into", "sample")
    ):
        return None
    if _output_names(body) is None:
        return None
    inner_reads = _reads(body)
    outer_tree = tree.copy()
    outer_tree.set("with_" if "with_" in tree.args else "with", None)
    outer_reads = _reads(outer_tree)
    if inner_reads is None or outer_reads is None or name.casefold() not in outer_reads:
        return None
    if not inner_reads <= known or not (outer_reads - {name.casefold()}) <= known:
        return None
    texts = _cte_texts(query)
    if texts is None or texts[0].casefold() != name.casefold():
        return None
    return CteSplit(
        name=name,
        inner=texts[1],
        outer=texts[2],
        inner_reads=frozenset(inner_reads),
        outer_reads=frozenset(outer_reads - {name.casefold()}),
    )


def _reads(tree: exp.Expr) -> set[str] | None:
    """The tables ``tree`` reads (casefolded), or None where one is qualified or a table function."""
    from sqlglot import exp

    got = set()
    for t in tree.find_all(exp.Table):
        if t.args.get("db") or t.args.get("catalog") or not isinstance(t.this, exp.Identifier):
            return None
        got.add(t.name.casefold())
    return got


def _cte_texts(query: str) -> tuple[str, str, str] | None:
    """(the CTE's name, the user's text of its body, the user's text of the query's body) of a query
    ``WITH name AS ( body ) query``, cut by sqlglot's tokens; None where the text is not of that form."""
    from sqlglot import tokens
    from sqlglot.dialects.spark import Spark

    T = tokens.TokenType
    try:
        toks = Spark().tokenize(query)
    except Exception:  # noqa: BLE001 (a text sqlglot cannot tokenize: not split)
        return None
    if len(toks) < 6 or toks[0].token_type != T.WITH or toks[2].token_type != T.ALIAS:
        return None
    if toks[3].token_type != T.L_PAREN:
        return None
    depth, close = 0, None
    for i in range(3, len(toks)):
        t = toks[i].token_type
        if t in (T.L_PAREN, T.L_BRACKET):
            depth += 1
        elif t in (T.R_PAREN, T.R_BRACKET):
            depth -= 1
            if depth == 0:
                close = i
                break
    if close is None or close + 1 >= len(toks) or toks[close + 1].token_type != T.SELECT:
        return None
    inner = query[toks[4].start : toks[close].start].strip()
    outer = query[toks[close + 1].start :].strip().rstrip(";").rstrip()
    return toks[1].text.strip("`"), inner, outer


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


def split_having(query: str, *, sources: list[str], view: str) -> HavingSplit | None:
    """``query`` (Spark SQL) as an aggregate, the uncorrelated scalar subqueries of its HAVING, and the HAVING's
    filter over them (TPC-H Q11: the parts whose stock value is above a fraction of the total), or None where it
    is not that shape (failing closed). ``view``: the view's name, of which the intermediate views' are made.

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
    main_reads = _reads(body)
    if not main_reads or not main_reads <= known:
        return None
    inner_text, having_text, order_text = texts
    rewritten = _rewrite_having(having_text, items=items, aliased=aliased, view=view)
    if rewritten is None:
        return None
    outer_pred, subqueries = rewritten
    if not subqueries:  # (a HAVING over the aggregate alone is the aggregate mode's)
        return None
    scalars = [_scalar_subquery(t, c, main_reads=main_reads, known=known, aliased=aliased) for t, c in subqueries]
    tables = {inner_name(view, i).casefold(): sub for i, (sub, _) in enumerate(subqueries, start=2)}
    if None in scalars or not _restores(outer_pred, tree.args["having"].this, items, aliased, tables):
        return None
    columns = ", ".join(f"`{n}`" for n in names)
    froms = ", ".join(f"`{inner_name(view, i)}`" for i in range(1, len(scalars) + 2))
    return HavingSplit(
        inner=inner_text,
        inner_reads=frozenset(main_reads),
        scalars=tuple(s for s in scalars if s is not None),
        outer=f"SELECT {columns} FROM {froms} WHERE {outer_pred}" + (f" {order_text}" if order_text else ""),
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
    names = _output_names(tree)
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


def _tokens(text: str) -> list[Any] | None:
    """sqlglot's Spark tokens of ``text``, or None where it cannot tokenize it."""
    from sqlglot.dialects.spark import Spark

    try:
        return list(Spark().tokenize(text))
    except Exception:  # noqa: BLE001 (a text sqlglot cannot tokenize: not split)
        return None


def _close_of(toks: list[Any], i: int) -> int | None:
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


def _having_texts(query: str) -> tuple[str, str, str] | None:
    """(the user's text before the top-level HAVING, the HAVING's predicate, the ORDER BY clause or "") of
    ``query``, cut by sqlglot's tokens; None where there is not exactly one top-level HAVING, or an ORDER BY comes
    before it."""
    from sqlglot import tokens

    T = tokens.TokenType
    toks = _tokens(query)
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
    text: str, *, items: dict[str, exp.Expression], aliased: set[str], view: str
) -> tuple[str, list[tuple[str, str]]] | None:
    """The HAVING's predicate ``text`` with each scalar subquery written as the column of its intermediate table
    (``<view>__mv_inner2``, ...) and each aggregate that is a view's column's expression as that column's name;
    and each subquery's text with the name of its column. None where a token span cannot be read."""
    from sqlglot import tokens

    T = tokens.TokenType
    toks = _tokens(text)
    if toks is None:
        return None
    by_expr = {e.this.sql(dialect="spark"): n for n, e in items.items() if n in aliased}
    used = set(items)
    out: list[str] = []
    subqueries: list[tuple[str, str]] = []
    at, i = 0, 0
    while i < len(toks):
        t, nxt = toks[i], (toks[i + 1] if i + 1 < len(toks) else None)
        j = _close_of(toks, i + (0 if t.token_type == T.L_PAREN else 1)) if nxt is not None else None
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
            replacement = f"`{inner_name(view, len(subqueries) + 1)}`.`{column}`"
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
    reads = _reads(sel)
    if reads is None or not main_reads <= reads or not reads <= known:
        return None
    defined = {t.alias_or_name.casefold() for t in sel.find_all(exp.Table)}
    for c in sel.find_all(exp.Column):
        if (c.table and c.table.casefold() not in defined) or (not c.table and c.name.casefold() in aliased):
            return None
    if isinstance(sel.expressions[0], exp.Alias):
        return text, frozenset(reads)
    from sqlglot import tokens

    toks = _tokens(text) or []
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


def described_view(view: ViewDefinition, desc: Described) -> ViewDefinition:
    """The definition a batch of ``view``'s refresh was minted for: ``view``, or its intermediate or outer view
    (a write step in another process, given the view's file, finds the one its batch description names)."""
    split = intermediate_split(view)
    if split is not None:
        for inner in split.inners:
            if desc.view == inner.name:
                return inner
        if desc.definition == split.outer.definition_hash():
            return split.outer
    return view


def split_query(query: str, *, key: tuple[str, ...]) -> tuple[str, str] | None:
    """(the intermediate query, the outer query with ``{source}`` where the intermediate's name goes), or None
    where ``query`` (Spark SQL) is not a top-k over an aggregate this rewrite proves equal (failing closed)."""
    import sqlglot
    from sqlglot import exp

    try:
        tree = sqlglot.parse_one(query, dialect="spark")
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError):
        return None
    if not isinstance(tree, exp.Select) or not tree.args.get("group") or tree.args.get("distinct"):
        return None
    if tree.args.get("offset") or not tree.args.get("order") or limit_of(tree) is None:
        return None
    if any(tree.args.get(a) for a in ("qualify", "windows", "into", "locks", "sample", "settings")):
        return None
    names = _output_names(tree)
    if names is None:
        return None
    lower = [n.lower() for n in names]
    if not all(k.lower() in lower for k in key):
        return None
    items = order_by(tree, names)
    if items is None:
        return None
    order = [
        f"`{n}` " + ("DESC" if d else "ASC") + (" NULLS FIRST" if first else " NULLS LAST") for n, d, first in items
    ]
    inner = _before_order_by(query)
    if inner is None:
        return None
    columns = ", ".join(f"`{n}`" for n in names)
    outer = f"SELECT {columns} FROM {{source}} ORDER BY {', '.join(order)} LIMIT {limit_of(tree)}"
    return inner, outer


def _before_order_by(query: str) -> str | None:
    """The text of ``query`` before its top-level ORDER BY (the user's own text, not sqlglot's rendering of it),
    where only ``LIMIT n`` and a ``;`` follow the ORDER BY's items; else None."""
    from sqlglot import tokens
    from sqlglot.dialects.spark import Spark

    T = tokens.TokenType
    try:
        toks = Spark().tokenize(query)
    except Exception:  # noqa: BLE001 (a text sqlglot cannot tokenize: not split)
        return None
    depth, at = 0, None
    for i, t in enumerate(toks):
        if t.token_type in (T.L_PAREN, T.L_BRACKET):
            depth += 1
        elif t.token_type in (T.R_PAREN, T.R_BRACKET):
            depth -= 1
        elif depth == 0 and t.token_type == T.ORDER_BY:
            if at is not None:
                return None
            at = i
    if at is None or depth != 0:
        return None
    tail = [t for t in toks[at:] if t.token_type != T.SEMICOLON]
    limits = [i for i, t in enumerate(tail) if t.token_type == T.LIMIT]
    if len(limits) != 1 or limits[0] != len(tail) - 2 or tail[-1].token_type != T.NUMBER:
        return None
    return query[: toks[at].start].rstrip()


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


def _output_names(tree: exp.Select) -> list[str] | None:
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
