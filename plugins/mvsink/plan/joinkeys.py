"""Which sources a change term may read pruned by join keys, found on Spark's analyzed plan.

A change term evaluates the view's query with one source replaced by its change set Δ. A row of another
source that matches no row of Δ on an equality of the join tree contributes nothing to the term, so that
source may be read with a filter ``column IN keys`` — and Delta skips the files whose min/max statistics
hold none of the keys (:mod:`mvsink.incremental.pruning` does the reading). This module finds, on the plan tree
(:class:`~mvsink.plan.tree.PlanNode`), the equalities that allow it:

* an equality conjunct ``a = b`` of a join's condition, or of a filter's condition (comma joins put them
  there), between two attributes;
* ``a`` traced down to a source column through operators that keep its values (the keys collected from
  that source over-approximate the values ``a`` takes at the equality): projections (the attribute or an
  alias of it), filters, joins, sorts, a DISTINCT, an aggregate's grouping attribute, a window's passed
  columns;
* ``b`` traced down to a source column through operators a filter on it commutes with (so the filter at
  the source equals a filter at the equality): projections, filters, sorts, a DISTINCT, an aggregate's
  grouping attribute, and a join only into a side whose rows it keeps or drops by matching (not the
  null-supplying side of an outer join);
* at a join's own condition, ``b``'s side must drop its rows that match nothing: an inner join either way,
  a left outer, semi or anti join for its right side, a right outer join for its left side. A filter drops
  any row whose ``a`` and ``b`` differ.

Sources read more than once, through a CTE or a subquery, or with an attribute that cannot be traced, give
no edge: the term then reads that source whole (failing closed costs time, never rows). The JSON plan
(classic Spark; Spark Connect with mvsink's server plugin) carries attribute ids; from the EXPLAIN text (a
Connect server without the plugin) the parser keeps the
``name#id`` references of View outputs, Project and Aggregate lists and equality conjuncts
(:func:`mvsink.plan.read._add_text_refs`), which is all this reads.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from mvsink.plan.tree import PlanExpr, PlanNode

# operators an attribute's values pass through unchanged (key side)
_KEEPS_VALUES = frozenset(
    {
        "Project",
        "Filter",
        "SubqueryAlias",
        "Sort",
        "Join",
        "Aggregate",
        "Distinct",
        "Window",
        "GlobalLimit",
        "LocalLimit",
    }
)
# operators a filter on a passed-through attribute commutes with (pruned side)
_COMMUTES = frozenset({"Project", "Filter", "SubqueryAlias", "Sort", "Join", "Aggregate", "Distinct"})
# at a join's condition: the sides whose unmatched rows the join drops
_DROPS_UNMATCHED = {
    "Inner": ("left", "right"),
    "Cross": ("left", "right"),
    "LeftOuter": ("right",),
    "LeftSemi": ("right",),
    "LeftAnti": ("right",),
    "RightOuter": ("left",),
}
# when passing down through a join, the sides a filter on that side's column commutes into
_FILTER_INTO = {
    "Inner": ("left", "right"),
    "Cross": ("left", "right"),
    "LeftOuter": ("left",),
    "LeftSemi": ("left",),
    "LeftAnti": ("left",),
    "RightOuter": ("right",),
}


@dataclasses.dataclass(frozen=True)
class Column:
    """A source's column: the temp view's name (as the query reads it) and the column's name."""

    source: str
    name: str


@dataclasses.dataclass(frozen=True)
class Edge:
    """``target`` may be read filtered to the values ``keys`` takes (in the source that holds it)."""

    keys: Column
    target: Column


def _ref_id(e: PlanExpr) -> int | None:
    return e.ref[1] if e.ref is not None else None


def _top_level(node: PlanNode, span_key: str) -> tuple[PlanExpr, ...]:
    span = node.attrs.get(span_key) or node.attrs.get(f"text_{span_key}")  # (JSON plan, else EXPLAIN text)
    if not span:
        return ()
    start, end = span
    return node.expressions[start:end]


def output_ids(node: PlanNode) -> dict[int, str]:
    """The attribute ids (with names) ``node`` outputs, where the plan says; {} where it does not."""
    name = node.name
    if name == "Project":
        return {e.ref[1]: e.ref[0] for e in _top_level(node, "list") if e.ref is not None}
    if name == "Aggregate":
        return {e.ref[1]: e.ref[0] for e in _top_level(node, "aggregates") if e.ref is not None}
    if name == "Join":
        kind = str(node.attrs.get("join_type"))
        out = dict(output_ids(node.children[0]))
        if kind not in ("LeftSemi", "LeftAnti") and len(node.children) > 1:
            out.update(output_ids(node.children[1]))
        return out
    if name == "Window":
        out = dict(output_ids(node.children[0])) if node.children else {}
        out.update({e.ref[1]: e.ref[0] for e in _top_level(node, "windows") if e.ref is not None})
        return out
    if not node.children:  # a relation: its output attributes
        return {e.ref[1]: e.ref[0] for e in node.expressions if e.name == "AttributeReference" and e.ref is not None}
    if name == "View" and "output" in node.attrs:  # (the EXPLAIN text lists a View's output)
        return {i: n for n, i in node.attrs["output"]}
    if name in ("Filter", "SubqueryAlias", "Sort", "Distinct", "View", "GlobalLimit", "LocalLimit", "Deduplicate"):
        return output_ids(node.children[0])
    return {}


def trace(node: PlanNode, attr: int, *, pruning: bool) -> Column | None:
    """The source column attribute ``attr`` of ``node``'s output comes from, through operators allowed for
    the key side (``pruning=False``) or for the pruned side (``pruning=True``); None if it cannot be told."""
    allowed = _COMMUTES if pruning else _KEEPS_VALUES
    while True:
        if node.name == "View":
            view = node.attrs.get("view")
            names = output_ids(node)
            if not view or attr not in names or node.attrs.get("temp") is False:
                return None
            return Column(str(view), names[attr])
        if node.name not in allowed or not node.children:
            return None
        if node.name == "Project":
            nxt = _through_project(node, attr)
            if nxt is None:
                return None
            attr, node = nxt, node.children[0]
        elif node.name == "Aggregate":  # a grouping attribute, passed as it is or renamed
            grouping = {_ref_id(e) for e in _top_level(node, "grouping") if e.name == "AttributeReference"}
            nxt = _through_list(_top_level(node, "aggregates"), attr)
            if nxt is None or nxt not in grouping:
                return None
            attr, node = nxt, node.children[0]
        elif node.name == "Window":
            if attr not in output_ids(node.children[0]):
                return None
            node = node.children[0]
        elif node.name == "Join":
            side = _side(node, attr)
            if side is None:
                return None
            if pruning and side not in _FILTER_INTO.get(str(node.attrs.get("join_type")), ()):
                return None
            node = node.children[0 if side == "left" else 1]
        else:
            node = node.children[0]


def _through_project(node: PlanNode, attr: int) -> int | None:
    return _through_list(_top_level(node, "list"), attr)


def _through_list(items: tuple[PlanExpr, ...], attr: int) -> int | None:
    """The input attribute an output ``attr`` of a select list is (itself, or the attribute it aliases)."""
    for e in items:
        if _ref_id(e) != attr:
            continue
        if e.name == "AttributeReference":
            return attr
        if e.name == "Alias" and len(e.children) == 1 and e.children[0].name == "AttributeReference":
            return _ref_id(e.children[0])
        return None
    return None


def _side(join: PlanNode, attr: int) -> str | None:
    if len(join.children) != 2:
        return None
    if attr in output_ids(join.children[0]):
        return "left"
    if attr in output_ids(join.children[1]):
        return "right"
    return None


def conjuncts(e: PlanExpr) -> Iterator[PlanExpr]:
    """The conjuncts of a condition (``a AND b AND c``: a, b, c)."""
    if e.name == "And":
        for c in e.children:
            yield from conjuncts(c)
    else:
        yield e


def _equalities(node: PlanNode) -> Iterator[tuple[int, int]]:
    """The (attribute id, attribute id) pairs of ``a = b`` conjuncts of a join's or filter's condition (the
    JSON plan's first expression; the EXPLAIN text's is where ``condition`` says, if it had any)."""
    at = node.attrs.get("condition")
    if at is None and node.attrs.get("class") is None:  # EXPLAIN text without a readable equality
        return
    for e in node.expressions[at : at + 1] if at is not None else node.expressions[:1]:
        for c in conjuncts(e):
            if c.name != "EqualTo" or len(c.children) != 2:
                continue
            a, b = c.children
            if a.name == b.name == "AttributeReference" and a.ref is not None and b.ref is not None:
                yield a.ref[1], b.ref[1]


def _once_read_sources(tree: PlanNode) -> set[str]:
    seen: dict[str, int] = {}
    for n in tree.walk():
        if n.name == "View" and n.attrs.get("view"):
            key = str(n.attrs["view"])
            seen[key] = seen.get(key, 0) + 1
        if n.name in ("CTERelationDef", "CTERelationRef", "WithCTE"):
            return set()
    return {k for k, v in seen.items() if v == 1}


def join_edges(tree: PlanNode) -> list[Edge]:
    """Every (keys -> target) edge the plan allows (see the module's docstring), between sources read once."""
    once = _once_read_sources(tree)
    subquery_roots = {id(p) for n in tree.walk() for e in n.all_expressions() for p in e.plans}
    edges: list[Edge] = []
    for node in _main_nodes(tree, subquery_roots):
        if node.name == "Join" and len(node.children) == 2 and node.expressions:
            kind = str(node.attrs.get("join_type"))
            drops = _DROPS_UNMATCHED.get(kind, ())
            for a, b in _equalities(node):
                left, right = (a, b) if _side(node, a) == "left" else (b, a)
                if _side(node, left) != "left" or _side(node, right) != "right":
                    continue
                for key_attr, key_side, target_attr, target_side in (
                    (left, 0, right, "right"),
                    (right, 1, left, "left"),
                ):
                    if target_side not in drops:
                        continue
                    keys = trace(node.children[key_side], key_attr, pruning=False)
                    target = trace(node.children[1 - key_side], target_attr, pruning=True)
                    _add(edges, keys, target, once)
        elif node.name == "Filter" and node.children and node.expressions:
            child = node.children[0]
            for a, b in _equalities(node):
                for key_attr, target_attr in ((a, b), (b, a)):
                    keys = trace(child, key_attr, pruning=False)
                    target = trace(child, target_attr, pruning=True)
                    _add(edges, keys, target, once)
    return edges


def _main_nodes(tree: PlanNode, skip: set[int]) -> Iterator[PlanNode]:
    """The plan's operators outside subquery plans."""
    stack = [tree]
    while stack:
        n = stack.pop()
        if id(n) in skip:
            continue
        yield n
        stack.extend(n.children)


def _add(edges: list[Edge], keys: Column | None, target: Column | None, once: set[str]) -> None:
    if keys is None or target is None or keys.source == target.source:
        return
    if keys.source not in once or target.source not in once:
        return
    edge = Edge(keys, target)
    if edge not in edges:
        edges.append(edge)
