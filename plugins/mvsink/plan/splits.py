"""Splitting a plan at its top aggregate, DISTINCT or window (the affected-groups mode, :mod:`mvsink.incremental.groups`),
and the view's output columns that are keys (also used by the top-k split, :mod:`mvsink.incremental.topk`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING

from mvsink.plan.linearity import nonlinear_reason, whole_plan_reason, with_article
from mvsink.plan.read import plan_tree
from mvsink.plan.tree import PlanExpr, PlanFormatError, PlanNode

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

# ---------------------------------------------------------------- splitting at the top aggregate, DISTINCT or window

# Operators that may sit above the top aggregate, DISTINCT or window of a view refreshed by affected groups.
# Each acts on one row at a time: a Project may drop or rename columns, a Filter (HAVING, ``rn <= k``) may
# drop rows. So a group's rows of the view depend only on the group's rows of C.
_ABOVE_AGGREGATE = frozenset({"Project", "Sort", "SubqueryAlias", "Filter"})
# Operators whose output columns are their (only) child's (the same expression ids).
_SAME_COLUMNS = frozenset({"SubqueryAlias", "Filter", "Sort", "Distinct", "View"})


@dataclasses.dataclass(frozen=True)
class AggregateSplit:
    """A plan ``[Project/Sort/SubqueryAlias/Filter]* -> P -> C`` split at P, an operator that computes each
    group of C's rows on its own: an Aggregate (groups: its grouping keys), a Distinct (all its columns) or a
    Window (its PARTITION BY).

    ``key_positions``: for each key, the position of a column of the view's output that is that key
    unchanged (a plain column, possibly renamed); ``keys``: the keys' names below P; ``input``: C;
    ``kind``: P's name; ``chain``: the names of the operators above P, top first.
    """

    key_positions: tuple[int, ...]
    keys: tuple[str, ...]
    input: PlanNode
    kind: str = "Aggregate"
    chain: tuple[str, ...] = ()


def aggregate_split(tree: PlanNode) -> AggregateSplit | str:
    """Split the plan at its top aggregate, DISTINCT or window, or say why it cannot be (failing closed)."""
    chain: list[PlanNode] = []
    node = tree
    while node.name in _ABOVE_AGGREGATE:
        if len(node.children) != 1:
            return f"{with_article(node.name)} above the aggregate has {len(node.children)} inputs"
        chain.append(node)
        node = node.children[0]
    if len(node.children) != 1:
        return f"the query's top operator is not an aggregate, DISTINCT or window ({node.name})"
    got = _split_keys(node)
    if isinstance(got, str):
        return got
    keys, base = got
    key_ids: dict[int, int] = {}  # expression id of a key -> its index
    for i, e in enumerate(keys):
        if e.name != "AttributeReference" or e.ref is None:
            return f"grouping key #{i + 1} is an expression ({e.name}), not a column"
        key_ids.setdefault(e.ref[1], i)
    cols = output_columns(base, key_ids, chain)
    if isinstance(cols, str):
        return cols
    positions = []
    for i, e in enumerate(keys):
        at = [p for p, (_, k) in enumerate(cols) if k == i]
        if not at:
            return f"grouping key {e.ref[0] if e.ref else '#' + str(i + 1)!r} is not a column of the view"
        positions.append(at[0])
    return AggregateSplit(
        tuple(positions),
        tuple(e.ref[0] if e.ref else "" for e in keys),
        node.children[0],
        node.name,
        tuple(n.name for n in chain),
    )


def _split_keys(node: PlanNode) -> tuple[list[PlanExpr], list[PlanExpr] | None] | str:
    """(P's keys, P's output list, None when P passes its input's columns through), or why P is no split point."""
    if node.name == "Aggregate":
        if "grouping" not in node.attrs or "aggregates" not in node.attrs:
            return "the aggregate's grouping keys could not be read"
        g0, g1 = node.attrs["grouping"]
        a0, a1 = node.attrs["aggregates"]
        if g0 == g1:
            return "a global aggregate (no GROUP BY)"
        return list(node.expressions[g0:g1]), list(node.expressions[a0:a1])
    if node.name == "Distinct":  # its keys are its input's columns, and so is its output
        refs = output_refs(node.children[0])
        if refs is None:
            return "the columns of the DISTINCT's input could not be read"
        columns = [PlanExpr("AttributeReference", ref=r) for r in refs]
        return columns, columns
    if node.name == "Window":
        if "partition" not in node.attrs:
            return "the window's PARTITION BY could not be read"
        p0, p1 = node.attrs["partition"]
        if p0 == p1:
            return "a window over all rows (no PARTITION BY)"
        return list(node.expressions[p0:p1]), None  # its input's columns, then the window functions
    return f"the query's top operator is not an aggregate, DISTINCT or window ({node.name})"


def output_refs(node: PlanNode) -> list[tuple[str, int]] | None:
    """(name, expression id) of each output column of ``node``, where the plan says them plainly (else None)."""
    items: tuple[PlanExpr, ...] | None = None
    if node.name == "Project" and "list" in node.attrs:
        items = node.expressions[node.attrs["list"][0] : node.attrs["list"][1]]
    elif node.name == "Aggregate" and "aggregates" in node.attrs:
        items = node.expressions[node.attrs["aggregates"][0] : node.attrs["aggregates"][1]]
    elif node.name == "Union" and node.children:  # a union's columns are its first input's
        return output_refs(node.children[0])
    elif node.name in _SAME_COLUMNS and len(node.children) == 1:
        return output_refs(node.children[0])
    if items is None or any(e.ref is None for e in items):
        return None
    return [e.ref for e in items if e.ref is not None]


def output_columns(
    base: list[PlanExpr] | None, key_ids: Mapping[int, int | None], chain: list[PlanNode]
) -> list[tuple[int, int | None]] | str:
    """The view's columns as (expression id, index of the key the column is, or None), or why not.

    ``base``: the output list of the operator below ``chain`` (None: it passes the keys' columns through
    under their own ids, e.g. a Window, so only a projection above says where they are). Follows it up
    through the projections in ``chain`` (top first), bottom-up.
    """
    cols: list[tuple[int, int | None]] | None = None
    if base is not None:
        out = [_passes(e, key_ids) for e in base]
        if any(o is None for o in out):
            return "an output column of the aggregate could not be read"
        cols = [o for o in out if o is not None]
    for op in reversed(chain):
        if op.name != "Project":
            continue
        if "list" not in op.attrs:
            return "a projection above the aggregate could not be read"
        l0, l1 = op.attrs["list"]
        known = key_ids if cols is None else {i: k for i, k in cols}
        projected = [_passes(e, known) for e in op.expressions[l0:l1]]
        if any(o is None for o in projected):
            return "a column of a projection above the aggregate could not be read"
        cols = [o for o in projected if o is not None]
    if cols is None:
        return "the view's columns could not be read (no projection above the window)"
    return cols


def _passes(e: PlanExpr, key_of: Mapping[int, int | None]) -> tuple[int, int | None] | None:
    """(expression id of the column ``e`` makes, the key it is unchanged) -- None if ``e`` cannot be read."""
    if e.ref is None:
        return None
    if e.name == "AttributeReference":
        return e.ref[1], key_of.get(e.ref[1])
    # an Alias: a column renamed is still the key; anything computed is not
    child = e.children[0] if len(e.children) == 1 else None
    if child is not None and child.name == "AttributeReference" and child.ref is not None:
        return e.ref[1], key_of.get(child.ref[1])
    return e.ref[1], None


def groups_reason(tree: PlanNode, sources: list[str]) -> AggregateSplit | str:
    """The split when the view can be refreshed by affected groups over changes of ``sources``, else why not.

    The whole plan must pass the checks of :func:`nonlinear_reason` (no subquery, UDF, unknown or
    nondeterministic expression anywhere), and the input C must be linear in every source.
    """
    why = whole_plan_reason(tree)
    if why:
        return why
    split = aggregate_split(tree)
    if isinstance(split, str):
        return split
    for s in sources:
        why = nonlinear_reason(split.input, s)
        if why:
            return f"the aggregate's input is not linear in {s!r}: {why}"
    return split


def aggregate_keys(
    spark: SparkSession, query: str, sources: list[str], *, desired: DataFrame | None = None
) -> tuple[list[str], AggregateSplit] | str:
    """The view's output columns that are its groups' keys (and the split), or why the view cannot be
    refreshed by affected groups over changes of ``sources``."""
    try:
        tree = plan_tree(spark, query, desired=desired)
    except PlanFormatError as exc:
        return f"the plan could not be read: {exc}"
    return group_keys(tree, sources, (desired if desired is not None else spark.sql(query)).columns)


def group_keys(tree: PlanNode, sources: list[str], columns: list[str]) -> tuple[list[str], AggregateSplit] | str:
    """:func:`aggregate_keys` on a plan already read: ``columns`` are the view's output columns."""
    split = groups_reason(tree, sources)
    if isinstance(split, str):
        return split
    if len(set(columns)) != len(columns):
        return "the view has two columns of the same name"
    return [columns[p] for p in split.key_positions], split
