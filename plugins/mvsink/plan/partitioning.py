"""Which key partitions a query's result by, found on Spark's analysed plan: the ground of a *partitioned
recompute* (:mod:`mvsink.incremental.partitioned`).

A plan P is partitioned by a class of columns (attributes tied by equalities: join and filter conditions, a
correlated subquery's ``inner = outer(...)``, an ``IN (subquery)``'s value and the subquery's column) when each of
its rows is made from rows of the *keyed* reads (the sources' reads with a column in the class) that share one
value of that column, their partition, plus rows of the other reads. Then, with K the key values of a change's
rows, every row of a partition outside K is the same before and after the change, so

    P(new) - P(old) = P(new restricted to K) - P(old restricted to K)

where "restricted to K" reads each keyed source with its class column in K (null-safely: the NULL partition too)
and every other source whole; unchanged sources read alike in both terms, so a partition outside K
that a whole read brings in is computed twice alike and cancels. This holds where:

* every read of each changed source is keyed (a changed source read elsewhere, e.g. in an uncorrelated
  subquery, makes rows that depend on every partition);
* a join of two keyed inputs has an equality between their class columns in its condition (or in the conditions
  of the filters right above an inner join: comma joins); a keyed input may be joined with an unkeyed one by an
  inner or cross join, or as the preserved side of an outer, semi or anti join (the other side's rows are the
  same before and after);
* an aggregate over a keyed input groups by a class column; a DISTINCT keeps one; a UNION ALL's keyed children
  pass a class column at the same position for it to stay one;
* a subquery (EXISTS, IN, scalar) that reads a keyed source is correlated with its outer row on the class
  (``inner = outer(key)`` in a filter whose input is keyed, everything above that filter then seeing one partition's
  rows), or is an ``IN`` whose value and column are both class columns;
* no window, limit, sample, set difference, CTE, nondeterminism or unknown operator over a keyed input.

Anything else fails closed with the reason (the plan is then not partitioned; the refresh takes another mode).
The attributes of the null-supplying side of an outer join leave the class (NULL for rows of every partition).
The JSON plan's attribute ids are needed (classic Spark, or Spark Connect with mvsink's server plugin).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator

from mvsink.plan.joinkeys import conjuncts, output_ids
from mvsink.plan.linearity import with_article
from mvsink.plan.tree import (
    KNOWN_OPERATORS,
    NONDETERMINISTIC,
    SUBQUERY,
    SUBQUERY_OPERATORS,
    UDF,
    UNSTABLE_OPERATORS,
    PlanExpr,
    PlanNode,
    expression_category,
)

__all__ = ["Partitioning", "partitioning"]

_PASS = frozenset(
    {"SubqueryAlias", "Sort", "Repartition", "RepartitionByExpression", "RebalancePartitions", "ResolvedHint"}
)
_SUBQUERIES = frozenset({"Exists", "ScalarSubquery", "ListQuery"})
_SUBQUERY_EXPRESSIONS = _SUBQUERIES | {"InSubquery", "OuterReference"}
_CANDIDATES = 12  # class candidates tried, at most


class _Refused(Exception):  # noqa: N818 (a reason, carried out of the recursion)
    pass


@dataclasses.dataclass(frozen=True)
class Partitioning:
    """A class that partitions the plan: ``columns`` maps each source every read of which is keyed to its class
    column (it may be read restricted to the keys); ``attributes``: the class's columns, for logs."""

    columns: dict[str, str]
    attributes: tuple[str, ...]
    # A changed source read without a column of the class, each read tied by an equality of a filter or an inner join
    # to a keyed read (TPC-H Q2's supplier, by s_suppkey = ps_suppkey to partsupp keyed by ps_partkey): its column,
    # the keyed source and that source's column (its changed keys are those of the keyed rows it matches).
    via: dict[str, tuple[str, str, str]] = dataclasses.field(default_factory=dict)

    def describe(self) -> str:
        tied = "".join(f", {s} through {r}.{b}" for s, (_, r, b) in sorted(self.via.items()))
        return " = ".join(self.attributes) + tied


@dataclasses.dataclass(frozen=True)
class _Out:
    keyed: bool  # the rows belong to partitions (some keyed read below)
    carry: frozenset[int]  # output attributes equal to each row's partition key
    correlated: bool = False  # (in a subquery) every row is of the outer row's partition


def partitioning(tree: PlanNode, changed: Iterable[str]) -> Partitioning | str:
    """A class of columns that partitions ``tree`` with every read of the ``changed`` sources keyed (the module's
    docstring), or why none was found (the first candidate's reason)."""
    changed_set = {c.casefold() for c in changed}
    if not changed_set:
        return "no source changed"
    why = _whole_reason(tree)
    if why:
        return why
    reads = [n for n in tree.walk() if n.name == "View" and n.attrs.get("view")]
    if not any(str(n.attrs["view"]).casefold() in changed_set for n in reads):
        return "no changed source is read"
    classes = _classes(tree)
    first: str | None = None
    tried: set[frozenset[int]] = set()
    for attr in _candidates(tree, reads, changed_set, classes):
        cls = classes.get(attr, frozenset({attr}))
        if cls is None or cls in tried:
            continue
        tried.add(cls)
        if len(tried) > _CANDIDATES:
            break
        got = _check(tree, cls, changed_set, reads)
        if isinstance(got, Partitioning):
            return got
        first = first or got
    return first or "no equality ties the changed sources' reads to one key"


def _whole_reason(tree: PlanNode) -> str | None:
    """Why no class can partition ``tree``, whatever it is: the plan's shape or expressions (failing closed)."""
    if tree.attrs.get("deterministic") is False:
        return "the query is not deterministic (Spark's analysed plan says so)"
    for n in tree.walk():
        if "class" not in n.attrs:
            return "the plan has no attribute ids (a Connect server without mvsink's plugin)"
        if n.name in ("WithCTE", "CTERelationDef", "CTERelationRef"):
            return "the query has a CTE"
        if n.name not in KNOWN_OPERATORS or n.name in SUBQUERY_OPERATORS:
            return f"the plan has {with_article(n.name)}"
        if n.name in UNSTABLE_OPERATORS:
            return f"{with_article(n.name)} may return different rows each time it is evaluated"
        for e in n.all_expressions():
            cat = expression_category(e.name)
            if cat is None:
                return f"the query has an expression this check does not know: {e.name}"
            if cat in (UDF, NONDETERMINISTIC):
                return f"the query has a {cat} expression ({e.name})"
            if cat == SUBQUERY and e.name not in _SUBQUERY_EXPRESSIONS:
                return f"the query has a {e.name}"
    return None


def _candidates(
    tree: PlanNode, reads: list[PlanNode], changed: set[str], classes: dict[int, frozenset[int]]
) -> Iterator[int]:
    """Attributes of the changed sources' reads that some equality ties to another (their class has several), then
    those an aggregate groups by (a GROUP BY over one source partitions it by itself)."""
    mine = [a for n in reads if str(n.attrs["view"]).casefold() in changed for a in output_ids(n)]
    yield from (a for a in mine if len(classes.get(a, ())) > 1)
    grouped = {a for n in tree.walk() if n.name == "Aggregate" for a in _grouping(n)}
    yield from (a for a in mine if a in grouped)


def _check(tree: PlanNode, cls: frozenset[int], changed: set[str], reads: list[PlanNode]) -> Partitioning | str:
    per_read: dict[str, set[str | None]] = {}
    names: dict[int, str] = {}
    unkeyed: list[PlanNode] = []  # reads of changed sources without a column of the class
    keyed_ids: dict[int, tuple[str, str]] = {}  # attribute of a keyed read: (its source, its column)
    for n in reads:
        source = str(n.attrs["view"])
        ids = output_ids(n)
        names.update(ids)
        keyed = sorted(ids[a] for a in ids if a in cls)
        per_read.setdefault(source.casefold(), set()).add(keyed[0] if keyed else None)
        if keyed:
            keyed_ids.update({a: (source, ids[a]) for a in ids})
        elif source.casefold() in changed:
            unkeyed.append(n)
    via = _via(tree, unkeyed, keyed_ids, per_read)
    if isinstance(via, str):
        return f"{via} ({_describe(cls, names)})"
    columns = {s: next(iter(c)) if len(c) == 1 else None for s, c in per_read.items()}
    for source, column in columns.items():
        if source in changed and column is None and source not in {v.casefold() for v in via}:
            return f"{source!r} is read keyed by different columns"
    try:
        top = _visit(tree, cls, frozenset(), ())
    except _Refused as exc:
        return f"{exc} (key {_describe(cls, names)})"
    if not top.keyed:
        return "no read is keyed"
    by_name = {str(n.attrs["view"]).casefold(): str(n.attrs["view"]) for n in reads}
    keyed_columns = {by_name[s]: c for s, c in columns.items() if c is not None}
    if any(r not in keyed_columns for _, r, _ in via.values()):
        return "a changed source is tied to a source read keyed by different columns"
    return Partitioning(keyed_columns, tuple(sorted({names[a] for a in cls if a in names})), via)


def _via(
    tree: PlanNode, unkeyed: list[PlanNode], keyed_ids: dict[int, tuple[str, str]], per_read: dict[str, set[str | None]]
) -> dict[str, tuple[str, str, str]] | str:
    """For each changed source whose reads (``unkeyed``) have no column of the class: the one (its column, keyed
    source, that source's column) every read of it is tied by, or why not. A read is tied where an equality conjunct
    of a filter or of an inner or cross join compares one of its columns with a column of a keyed read (``keyed_ids``)
    in the same scope (not an outer reference): every row the read gives past that operator matches a keyed row, and
    makes rows of that row's partition only; so a changed row of it changes only the partitions of the keyed rows
    (before or after the change) whose column equals its own. A source also read keyed is refused."""
    ties: dict[str, set[tuple[str, str, str]]] = {}
    for read in unkeyed:
        source = str(read.attrs["view"])
        if per_read.get(source.casefold(), set()) != {None}:
            return f"{source!r} is read both with and without a column of the key"
        mine = output_ids(read)
        found: set[tuple[str, str, str]] = set()
        for n in tree.walk():
            if n.name == "Filter" or (n.name == "Join" and n.attrs.get("join_type") in ("Inner", "Cross")):
                for a, b in _equal_pairs(n.expressions[:1]):
                    for x, y in ((a, b), (b, a)):
                        if x in mine and y in keyed_ids and _row_wise(n, read):
                            found.add((mine[x], *keyed_ids[y]))
        ties[source] = ties[source] & found if source in ties else found
        if not ties[source]:
            return f"{source!r} is read without a column of the key, nor tied to a keyed read by an equality"
    return {s: sorted(t)[0] for s, t in ties.items()}


_ROW_WISE: frozenset[str] = frozenset({"Project", "Filter", "SubqueryAlias", "Join", "Sort", "ResolvedHint"})


def _row_wise(top: PlanNode, read: PlanNode) -> bool:
    """Is ``read`` below ``top`` through row-wise operators only (projections, filters, joins): each row reaching
    ``top`` made from at most one of its rows? An aggregate, a window or a DISTINCT in between mixes its rows (a
    window's value at a row tied one way depends on rows tied another), so the tie does not hold."""
    for child in top.children:
        if child is read:
            return True
        if child.name in _ROW_WISE and _row_wise(child, read):
            return True
    return False


def _describe(cls: frozenset[int], names: dict[int, str]) -> str:
    return " = ".join(sorted({names[a] for a in cls if a in names})) or "?"


# ---------------------------------------------------------------- the classes (union-find over equalities)


def _classes(tree: PlanNode) -> dict[int, frozenset[int]]:
    parent: dict[int, int] = {}

    def find(a: int) -> int:
        parent.setdefault(a, a)
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    def union(a: int, b: int) -> None:
        parent[find(a)] = find(b)

    for n in tree.walk():
        for a, b in _tied_pairs(n):
            union(a, b)
    groups: dict[int, set[int]] = {}
    for a in list(parent):
        groups.setdefault(find(a), set()).add(a)
    return {a: frozenset(g) for g in groups.values() for a in g}


def _tied_pairs(n: PlanNode) -> Iterator[tuple[int, int]]:
    """Attribute pairs ``n`` makes equal: equality conjuncts (an outer reference's attribute included), an alias of an
    attribute, an IN subquery's value and column."""
    for e in n.expressions:
        for x in e.walk():
            if x.name == "EqualTo" and len(x.children) == 2:
                a, b = (_attr(c, outer=True) for c in x.children)
                if a is not None and b is not None:
                    yield a, b
            elif x.name == "Alias" and len(x.children) == 1 and x.ref is not None:
                a = _attr(x.children[0], outer=False)
                if a is not None:
                    yield x.ref[1], a
            elif x.name == "InSubquery":
                pair = _in_pair(x)
                if pair is not None:
                    yield pair


def _attr(e: PlanExpr, *, outer: bool) -> int | None:
    if e.name == "AttributeReference" and e.ref is not None:
        return e.ref[1]
    if outer and e.name == "OuterReference" and len(e.children) == 1:
        return _attr(e.children[0], outer=False)
    return None


def _in_pair(x: PlanExpr) -> tuple[int, int] | None:
    """(value, subquery column) of a one-column ``value IN (subquery)``."""
    if len(x.children) != 2 or x.children[1].name != "ListQuery" or len(x.children[1].plans) != 1:
        return None
    value = _attr(x.children[0], outer=False)
    cols = list(output_ids(x.children[1].plans[0]))
    if value is None or len(cols) != 1:
        return None
    return value, cols[0]


# ---------------------------------------------------------------- the check


def _equal_pairs(conds: Iterable[PlanExpr]) -> list[tuple[int, int]]:
    out = []
    for cond in conds:
        for c in conjuncts(cond):
            if c.name == "EqualTo" and len(c.children) == 2:
                a, b = (_attr(x, outer=False) for x in c.children)
                if a is not None and b is not None:
                    out.append((a, b))
    return out


def _visit(n: PlanNode, cls: frozenset[int], outer: frozenset[int], above: tuple[PlanExpr, ...]) -> _Out:
    """What ``n`` outputs for class ``cls``; ``outer``: the outer row's key attributes (inside a subquery);
    ``above``: the conditions of the filters right above (an inner join takes them as its own)."""
    name = n.name
    if name == "View" and n.attrs.get("view"):
        carry = frozenset(a for a in output_ids(n) if a in cls)
        return _Out(bool(carry), carry)
    if not n.children:
        if name in ("LocalRelation", "OneRowRelation", "Range", "LogicalRDD", "LogicalRelation", "Relation"):
            return _Out(False, frozenset())
        raise _Refused(f"a {name} is read")
    if name in _PASS or (name == "View" and len(n.children) == 1) or name == "Generate":
        return _visit(n.children[0], cls, outer, ())
    if name == "Join":
        return _join(n, cls, outer, above)
    if name == "Filter":
        return _filter(n, cls, outer, above)
    if name in ("Project", "Aggregate", "Distinct"):
        return _single(n, cls, outer)
    if name == "Union":
        return _union(n, cls, outer)
    child_outs = [_visit(c, cls, outer, ()) for c in n.children]
    if any(c.keyed for c in child_outs):
        raise _Refused(f"{with_article(name)} over a keyed input")
    return _Out(False, frozenset())


def _filter(n: PlanNode, cls: frozenset[int], outer: frozenset[int], above: tuple[PlanExpr, ...]) -> _Out:
    cond = n.expressions[:1]
    child = _visit(n.children[0], cls, outer, (*above, *cond))
    _subqueries(n, cls, child)
    carry = set(child.carry)
    for a, b in _equal_pairs(cond):
        if a in carry or b in carry:
            carry |= {a, b}
    correlated = child.correlated or (child.keyed and _correlates(cond, child.carry, outer))
    return _Out(child.keyed, frozenset(carry), correlated)


def _single(n: PlanNode, cls: frozenset[int], outer: frozenset[int]) -> _Out:
    """A Project, an Aggregate or a Distinct."""
    child = _visit(n.children[0], cls, outer, ())
    _subqueries(n, cls, child)
    if n.name == "Project":
        return _Out(child.keyed, _passed(n, "list", child.carry), child.correlated)
    if n.name == "Distinct":
        if child.keyed and not child.carry and not child.correlated:
            raise _Refused("a DISTINCT over a keyed input does not keep the key")
        return child
    grouping = _grouping(n)
    if child.keyed and not (grouping & child.carry) and not child.correlated:
        raise _Refused("an aggregate over a keyed input does not group by the key")
    return _Out(child.keyed, _passed(n, "aggregates", child.carry, only=grouping), child.correlated)


def _union(n: PlanNode, cls: frozenset[int], outer: frozenset[int]) -> _Out:
    kids = [_visit(c, cls, outer, ()) for c in n.children]
    if any(k.correlated for k in kids):
        raise _Refused("a UNION inside a correlated subquery")
    outs = [list(output_ids(c)) for c in n.children]
    if any(len(o) != len(outs[0]) for o in outs):
        raise _Refused("a UNION's children have no attribute ids")
    keep = frozenset(
        outs[0][i]
        for i in range(len(outs[0]))
        if all(not k.keyed or o[i] in k.carry for k, o in zip(kids, outs, strict=True))
    )
    return _Out(any(k.keyed for k in kids), keep)


def _grouping(n: PlanNode) -> frozenset[int]:
    span = n.attrs.get("grouping")
    if not span:
        return frozenset()
    return frozenset(
        e.ref[1] for e in n.expressions[span[0] : span[1]] if e.name == "AttributeReference" and e.ref is not None
    )


def _passed(n: PlanNode, span_key: str, carry: frozenset[int], *, only: frozenset[int] | None = None) -> frozenset[int]:
    """The output attributes of ``n``'s select list that are (or alias) an attribute of ``carry`` (and of ``only``)."""
    span = n.attrs.get(span_key)
    if not span:
        return frozenset()
    out = set()
    for e in n.expressions[span[0] : span[1]]:
        if e.ref is None:
            continue
        src = e.ref[1] if e.name == "AttributeReference" else None
        if e.name == "Alias" and len(e.children) == 1:
            src = _attr(e.children[0], outer=False)
        if src is not None and src in carry and (only is None or src in only):
            out.add(e.ref[1])
    return frozenset(out)


def _correlates(conds: tuple[PlanExpr, ...], carry: frozenset[int], outer: frozenset[int]) -> bool:
    """Does a conjunct ``inner = outer(key)`` tie a key attribute of the input to the outer row's key?"""
    for cond in conds:
        for c in conjuncts(cond):
            if c.name != "EqualTo" or len(c.children) != 2:
                continue
            x, y = c.children
            for inner, out in ((x, y), (y, x)):
                if (
                    out.name == "OuterReference"
                    and _attr(inner, outer=False) in carry
                    and _attr(out, outer=True) in outer
                ):
                    return True
    return False


_PRESERVES = {  # join type -> (a keyed left alone is fine, a keyed right alone is fine)
    "Inner": (True, True),
    "Cross": (True, True),
    "LeftOuter": (True, False),
    "LeftSemi": (True, False),
    "LeftAnti": (True, False),
    "RightOuter": (False, True),
    "FullOuter": (False, False),
}


def _join(n: PlanNode, cls: frozenset[int], outer: frozenset[int], above: tuple[PlanExpr, ...]) -> _Out:
    kind = str(n.attrs.get("join_type"))
    if kind not in _PRESERVES or len(n.children) != 2:
        raise _Refused(f"a {kind} join")
    inner = kind in ("Inner", "Cross")
    own = n.expressions[:1]
    passed = above if inner else ()
    left = _visit(n.children[0], cls, outer, passed)
    right = _visit(n.children[1], cls, outer, passed)
    if left.correlated or right.correlated:
        other = right if left.correlated else left
        if other.keyed or not inner:
            raise _Refused("a join inside a correlated subquery")
    _subqueries(n, cls, _Out(left.keyed or right.keyed, left.carry | right.carry))
    lids, rids = set(output_ids(n.children[0])), set(output_ids(n.children[1]))
    eqs = [(a, b) if a in lids else (b, a) for a, b in _equal_pairs((*own, *passed)) if {a, b} & lids and {a, b} & rids]
    tied = [(a, b) for a, b in eqs if a in left.carry and b in right.carry]
    ok_left, ok_right = _PRESERVES[kind]
    correlated = left.correlated or right.correlated
    if left.keyed and right.keyed:
        if not tied:
            raise _Refused(f"a {kind} join of two keyed inputs is not on the key")
        if kind == "FullOuter":
            return _Out(True, frozenset(), correlated)
    elif (left.keyed and not ok_left) or (right.keyed and not ok_right):
        side = "left" if left.keyed else "right"
        raise _Refused(f"a {kind} join of a keyed input ({side}) with one that is not keyed")
    carry: set[int]
    if kind in ("LeftSemi", "LeftAnti", "LeftOuter"):
        carry = set(left.carry)
    elif kind == "RightOuter":
        carry = set(right.carry)
    else:
        carry = set(left.carry | right.carry)
        for a, b in eqs:
            if a in carry or b in carry:
                carry |= {a, b}
    return _Out(left.keyed or right.keyed, frozenset(carry), correlated)


def _subqueries(n: PlanNode, cls: frozenset[int], here: _Out) -> None:
    """Check the subquery expressions of ``n`` (over an input that outputs ``here``)."""
    for e in n.expressions:
        for x in e.walk():
            if x.name in ("InSubquery",):
                _in_subquery(x, cls, here)
            elif x.name in _SUBQUERIES and not _inside_in(e, x):
                _subquery(x, cls, here, allow_in=None)
            elif x.name in ("LateralSubquery", "LateralJoin", "FunctionTableSubqueryArgumentExpression"):
                raise _Refused(f"a {x.name}")


def _inside_in(root: PlanExpr, x: PlanExpr) -> bool:
    return any(y.name == "InSubquery" and any(c is x for c in y.children) for y in root.walk())


def _in_subquery(x: PlanExpr, cls: frozenset[int], here: _Out) -> None:
    lq = x.children[-1] if x.children else None
    if lq is None or lq.name != "ListQuery":
        raise _Refused("an IN subquery of an unknown shape")
    pair = _in_pair(x)
    allow = pair if pair is not None and pair[0] in here.carry and pair[1] in cls else None
    _subquery(lq, cls, here, allow_in=allow)


def _subquery(x: PlanExpr, cls: frozenset[int], here: _Out, *, allow_in: tuple[int, int] | None) -> None:
    for p in x.plans:
        got = _visit(p, cls, here.carry, ())
        if not got.keyed or got.correlated:
            continue
        if allow_in is not None and allow_in[1] in got.carry:
            continue
        raise _Refused(f"a subquery ({x.name}) reads a keyed source without a correlation on the key")
