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
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Final, Protocol

from mvsink import settings
from mvsink.definitions import cache
from mvsink.definitions.catalog import Catalog
from mvsink.definitions.view import Source, ViewDefinition

if TYPE_CHECKING:
    from mvsink.definitions.having import HavingSplit

# (the modules that split a query's text on sqlglot's tree are imported where a split is computed: a refresh whose
# split is kept (mvsink.definitions.cache) imports neither them nor sqlglot)


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


NOT_INCREMENTAL: Final = "incremental: false in the view file"  # (a full diff's reason)
# (a HAVING over scalar subqueries refreshed through intermediate tables: its filter over them is always recomputed)
FILTER_RECOMPUTED: Final = "the HAVING's filter over its intermediate tables is recomputed"

TOPK: Final = "topk"  # a top-k over an aggregate: the outer view is the top k of the intermediate's rows
CTE: Final = "cte"  # an aggregate in a WITH clause: the outer view is the query's body over the intermediate
HAVING: Final = "having"  # a HAVING over scalar subqueries: the groups, each subquery's one row, the filter over them
CORRELATED: Final = "correlated"  # a correlated scalar subquery: its value per correlation key, the query joining it
# The sources' columns and their Spark types by casefolded names (mvsink.core.sourceschema.source_columns), or None
ColumnsOf = Callable[[ViewDefinition], "Mapping[str, Mapping[str, str]] | None"]


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
        if self.kind == CORRELATED:
            return "the query joining it on the correlation key, over its other sources"
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


def intermediate_split(view: ViewDefinition, *, columns_of: ColumnsOf | None = None) -> IntermediateSplit | None:
    """The view as an intermediate aggregate and a top-k over it, or as an aggregate of a WITH clause and the
    query's body over it, or as a HAVING's groups and subqueries and the filter over them, or as a correlated
    subquery's values per key and the query joining them (the module's docstring), or None. ``columns_of``: the
    sources' columns (:func:`mvsink.core.sourceschema.source_columns`; without it, no correlated split)."""
    if not settings.intermediate() or not view.incremental or view.checks:
        return None
    name = inner_name(view.name)
    if any(s.kind == "view" and s.view == name for s in view.sources):
        return None
    got = _kept_split_query(view.query, key=view.key) if view.key else None
    if got is not None:
        inner_sql, outer_body = got
        inner = _inner_view(view, inner_sql, view.sources)
        outer = dataclasses.replace(
            view,
            query=outer_body.replace("{source}", f"`{name}`"),
            sources=(Source(name=name, kind="view", view=name),),
        )
        return IntermediateSplit(inner=inner, outer=outer, kind=TOPK)
    cte = _kept_split_cte(view.query, sources=[s.name for s in view.sources]) if _starts_with_with(view.query) else None
    if cte is None:
        having = _having_split(view) if settings.intermediate_having() and _has_having(view.query) else None
        if having is not None or columns_of is None or not settings.intermediate_correlated():
            return having
        from mvsink.definitions.correlated import has_correlated_shape

        return _correlated_split(view, columns_of) if has_correlated_shape(view.query) else None
    inner = _inner_view(view, cte.inner, _reading(view, cte.inner_reads))
    outer = dataclasses.replace(
        view,
        query=cte.outer,
        sources=(
            *_reading(view, cte.outer_reads),
            Source(name=cte.name, kind="view", view=name),
        ),
    )
    return IntermediateSplit(inner=inner, outer=outer, kind=CTE)


def not_incremental(view: ViewDefinition) -> str:
    """Why a view that is not incremental takes the full diff: the view file says so, or it is the filter of a
    HAVING over its intermediate tables (:func:`split_having`)."""
    inner = f"{view.name}{INNER_SUFFIX}"
    if view.sources and all(s.kind == "view" and (s.view or "").startswith(inner) for s in view.sources):
        return FILTER_RECOMPUTED
    return NOT_INCREMENTAL


def _starts_with_with(query: str) -> bool:
    """Does ``query`` begin with ``WITH`` (cheap, no parse: a refresh that finds nothing to do imports no sqlglot)?"""
    return re.match(r"\s*with\b", query, flags=re.IGNORECASE) is not None


def _has_having(query: str) -> bool:
    """Does ``query``'s text hold a ``HAVING`` with a ``(SELECT`` after it (cheap, no parse: a refresh of another
    view imports no sqlglot)?"""
    return re.search(r"\bhaving\b.*\(\s*select\b", query, flags=re.IGNORECASE | re.DOTALL) is not None


def split_having(query: str, *, sources: list[str], view: str) -> HavingSplit | None:
    """:func:`mvsink.definitions.having.split_having` of ``query``, the intermediates named after ``view``."""
    from mvsink.definitions.having import split_having as split

    return split(query, sources=sources, name_of=lambda n: inner_name(view, n))


def _having_split(view: ViewDefinition) -> IntermediateSplit | None:
    """``view`` as its groups, its HAVING's scalar subqueries and the filter over them (:func:`split_having`)."""
    got = _kept_split_having(view.query, sources=[s.name for s in view.sources], view=view.name)
    if got is None:
        return None

    inner = _inner_view(view, got.inner, _reading(view, got.inner_reads))
    more = tuple(
        dataclasses.replace(
            _inner_view(view, text, _reading(view, reads), number=i),
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


def _kept_split_query(query: str, *, key: tuple[str, ...]) -> tuple[str, str] | None:
    """:func:`split_query`, kept on this machine (:mod:`mvsink.definitions.cache`)."""
    return cache.kept(
        "query",
        {"query": query, "key": list(key)},
        lambda: split_query(query, key=key),
        encode=list,
        decode=lambda v: (str(v[0]), str(v[1])),
    )


def _kept_split_cte(query: str, *, sources: list[str]) -> CteSplit | None:
    """:func:`split_cte`, kept on this machine (:mod:`mvsink.definitions.cache`)."""
    return cache.kept(
        "cte",
        {"query": query, "sources": sources},
        lambda: split_cte(query, sources=sources),
        encode=lambda c: {
            **dataclasses.asdict(c),
            "inner_reads": sorted(c.inner_reads),
            "outer_reads": sorted(c.outer_reads),
        },
        decode=lambda v: CteSplit(
            name=v["name"],
            inner=v["inner"],
            outer=v["outer"],
            inner_reads=frozenset(v["inner_reads"]),
            outer_reads=frozenset(v["outer_reads"]),
        ),
    )


def _kept_split_having(query: str, *, sources: list[str], view: str) -> HavingSplit | None:
    """:func:`split_having`, kept on this machine (:mod:`mvsink.definitions.cache`)."""
    from mvsink.definitions.having import HavingSplit

    return cache.kept(
        "having",
        {"query": query, "sources": sources, "view": view},
        lambda: split_having(query, sources=sources, view=view),
        encode=lambda h: {
            "inner": h.inner,
            "inner_reads": sorted(h.inner_reads),
            "scalars": [[text, sorted(reads)] for text, reads in h.scalars],
            "outer": h.outer,
        },
        decode=lambda v: HavingSplit(
            inner=v["inner"],
            inner_reads=frozenset(v["inner_reads"]),
            scalars=tuple((str(text), frozenset(reads)) for text, reads in v["scalars"]),
            outer=v["outer"],
        ),
    )


def _correlated_split(view: ViewDefinition, columns_of: ColumnsOf) -> IntermediateSplit | None:
    """``view`` as its correlated subquery's values per correlation key and the query joining them
    (:func:`mvsink.definitions.correlated.split_correlated`)."""
    columns = columns_of(view)
    if columns is None:
        return None
    name = inner_name(view.name)
    from mvsink.definitions.correlated import split_correlated

    got = split_correlated(view.query, columns=columns, intermediate=name)
    if got is None:
        return None

    inner = dataclasses.replace(
        _inner_view(view, got.inner, _reading(view, got.inner_reads)),
        description=f"the intermediate table of view {view.name} (its subquery's value per correlation key)",
    )
    outer = dataclasses.replace(
        view, query=got.outer, sources=(*_reading(view, got.outer_reads), Source(name=name, kind="view", view=name))
    )
    return IntermediateSplit(inner=inner, outer=outer, kind=CORRELATED)


def _reading(view: ViewDefinition, reads: frozenset[str]) -> tuple[Source, ...]:
    """``view``'s sources whose casefolded names are in ``reads``, in the view file's order."""
    return tuple(s for s in view.sources if s.name.casefold() in reads)


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

    from mvsink.definitions.querytext import output_names, table_reads
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
    if output_names(body) is None:
        return None
    inner_reads = table_reads(body)
    outer_tree = tree.copy()
    outer_tree.set("with_" if "with_" in tree.args else "with", None)
    outer_reads = table_reads(outer_tree)
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


def described_view(view: ViewDefinition, desc: Described, *, columns_of: ColumnsOf | None = None) -> ViewDefinition:
    """The definition a batch of ``view``'s refresh was minted for: ``view``, or its intermediate or outer view
    (a write step in another process, given the view's file, finds the one its batch description names)."""
    split = intermediate_split(view, columns_of=columns_of)
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

    from mvsink.definitions.querytext import limit_of, order_by, output_names

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
    names = output_names(tree)
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
