"""Is a view's query multiset-linear in a source? Decided on Spark's analyzed plan as a tree, failing closed.

Incremental refresh (``mvsink.incremental``) evaluates the user's query with one source replaced by
its change set. That is only correct when the query is *linear* in that source: every operator
between the source and the result maps a multiset of input rows to the sum of its rows' outputs
(projections, filters, inner joins, UNION ALL, explode ...). This module proves that on the
analyzed logical plan, and answers "not linear, because ..." for anything it cannot prove.


The analysis (``nonlinear_reason(tree, source)``; the source is the temp view ``View (`source`)``)
    1. Whole plan, including subquery plans and CTE definitions, in this order of report:
       a subquery operator or expression (ScalarSubquery, Exists, ListQuery/InSubquery, LateralSubquery,
       LateralJoin, OuterReference i.e. correlation) -> not linear in any source;
       an operator not in the tables below -> not linear, naming it;
       an expression class not in the tables below -> not linear, naming it;
       a user-defined function (its determinism is only a promise) -> not linear;
       a nondeterministic expression, including ones that depend on the clock, the session or the
       Spark version (rand, uuid, current_timestamp, current_user, version, aes_encrypt ...) -> not linear.
    2. The source must be read (a temp view matched by name, case-insensitively); once, or several times where
       every two reads meet only in a Union (UNION ALL: each row of the query comes from one read, and a change
       term replaces every read at once), none through a CTE; reads meeting in a join (a self-join) are not linear.
    3. From that read up to the root, each operator must be linear in the input the path comes from:
       Project, Filter, SubqueryAlias, View, Union (bag union; UNION DISTINCT is a Distinct above it),
       Generate, Sort, Repartition, RepartitionByExpression, RebalancePartitions, ResolvedHint,
       PipeOperator, WithCTE; a CTERelationDef continues from its one CTERelationRef (a CTE over the
       source read twice is not linear); Join: Inner and Cross always, LeftOuter/LeftSemi/LeftAnti with
       the source on the left, RightOuter with the source on the right. Anything else on the path
       (Aggregate, Distinct, Deduplicate, Window, Expand, Intersect, Except, limits, Sample ...) -> not linear.
       The expressions of those operators must all be row-level; a Generate's generator must be a known one.
    4. Off the path, the other inputs are evaluated again in every change term, so they must give the
       same rows each time: a GlobalLimit/LocalLimit/Offset/Tail/Sample anywhere -> not linear.


The plan is read by :mod:`mvsink.plan.read`; the operator and expression tables are in
:mod:`mvsink.plan.tree`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mvsink.plan.read import plan_tree
from mvsink.plan.tree import (
    CTE_DEF,
    CTE_REF,
    GENERATOR,
    JOIN_OPERATORS,
    KNOWN_OPERATORS,
    LINEAR_OPERATORS,
    NONDETERMINISTIC,
    ROW,
    SUBQUERY,
    SUBQUERY_OPERATORS,
    UDF,
    UNSTABLE_OPERATORS,
    PlanFormatError,
    PlanNode,
    expression_category,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

_LEFT_PRESERVING = frozenset({"LeftOuter", "LeftSemi", "LeftAnti"})
SUBQUERY_REASON = "the query has a subquery"  # (how :func:`whole_plan_reason`'s reason for one starts)
_BOTH_SIDES = frozenset({"Inner", "Cross"})


def nonlinear_reason(tree: PlanNode, source: str) -> str | None:
    """Why the plan is not linear in temp view ``source`` (None: it is)."""
    why = whole_plan_reason(tree)
    if why:
        return why
    parents: dict[int, tuple[PlanNode, int]] = {}  # id(node) -> (parent, index of node among its children)
    refs: dict[str, list[PlanNode]] = {}
    for node in tree.walk():
        for i, c in enumerate(node.children):
            parents[id(c)] = (node, i)
        if node.name == CTE_REF:
            refs.setdefault(str(node.attrs.get("cte_id")), []).append(node)
    want = source.casefold()
    hits = [n for n in tree.walk() if n.name == "View" and str(n.attrs.get("view") or "").casefold() == want]
    if not hits:
        return f"source {source!r} is not read"
    if len(hits) > 1:
        why = _reads_reason(hits, parents, source)
        if why:
            return why
    for node in hits:
        why = _path_reason(node, tree, parents, refs, source)
        if why:
            return why
    for n in tree.walk():
        if n.name in UNSTABLE_OPERATORS:
            return f"{with_article(n.name)} may return different rows each time it is evaluated"
    return None


def _path_reason(
    node: PlanNode,
    tree: PlanNode,
    parents: dict[int, tuple[PlanNode, int]],
    refs: dict[str, list[PlanNode]],
    source: str,
) -> str | None:
    """Why the path from read ``node`` of ``source`` up to the root is not linear (rule 3 of the module docstring)."""
    while id(node) in parents:
        parent, index = parents[id(node)]
        if parent.name == CTE_DEF:  # continue from the one place the CTE is used
            uses = refs.get(str(parent.attrs.get("cte_id")), [])
            if len(uses) != 1:
                return f"a CTE over {source!r} is read {len(uses)} times"
            node = uses[0]
            continue
        why = _step_reason(parent, index, source)
        if why:
            return why
        node = parent
    if node is not tree:  # a subquery plan's root: cannot happen once subqueries are refused
        return f"{source!r} is read somewhere this check cannot follow"
    return None


def _reads_reason(hits: list[PlanNode], parents: dict[int, tuple[PlanNode, int]], source: str) -> str | None:
    """Why a source read several times is not linear: its reads must meet only in a bag union (``UNION ALL``), so
    that every row of the query comes from one read (the change terms replace every read at once: Q(A + ΔA) =
    Q(A) + Q(ΔA)); reads meeting in a join (a self-join) or read through a CTE are not linear."""
    paths: list[list[PlanNode]] = []
    for node in hits:
        path = [node]
        while id(path[-1]) in parents:
            path.append(parents[id(path[-1])][0])
        if any(n.name in (CTE_DEF, CTE_REF) for n in path):
            return f"source {source!r} is read {len(hits)} times, through a CTE"
        paths.append(path)
    for i, a in enumerate(paths):
        on_a = {id(n) for n in a}
        for b in paths[i + 1 :]:
            meet = next(n for n in b if id(n) in on_a)  # (both paths end at the root)
            if meet.name != "Union":
                return f"source {source!r} is read {len(hits)} times, and two reads meet in {with_article(meet.name)}"
    return None


def whole_plan_reason(tree: PlanNode) -> str | None:
    nodes = list(tree.walk())
    found: dict[str, list[str]] = {}
    for n in nodes:
        if n.name in SUBQUERY_OPERATORS:
            found.setdefault(SUBQUERY, []).append(n.name)
        elif n.name not in KNOWN_OPERATORS:
            found.setdefault("operator", []).append(n.name)
        for e in n.all_expressions():
            cat = expression_category(e.name)
            found.setdefault(cat or "expression", []).append(e.name)
    if found.get(SUBQUERY):
        return f"{SUBQUERY_REASON} ({found[SUBQUERY][0]})"
    if found.get("operator"):
        return f"the plan has an operator this check does not know: {found['operator'][0]}"
    if found.get("expression"):
        return f"the query has an expression this check does not know: {found['expression'][0]}"
    if found.get(UDF):
        return f"the query calls a user-defined function ({found[UDF][0]}), not known to be deterministic"
    if found.get(NONDETERMINISTIC):
        return (
            f"the query has an expression that is not deterministic or depends on the time or session "
            f"({found[NONDETERMINISTIC][0]})"
        )
    if tree.attrs.get("deterministic") is False:
        return "the query is not deterministic (Spark's analyzed plan says so)"
    return None


def with_article(word: str) -> str:
    """``word`` with its indefinite article: "an Aggregate", "an aggregate", "a Window", "a Union"."""
    w = word.lower()
    vowel = w[:1] in ("a", "e", "i", "o") or (w.startswith("u") and not w.startswith(("uni", "use", "usi")))
    return f"{'an' if vowel else 'a'} {word}"


def _step_reason(op: PlanNode, index: int, source: str) -> str | None:
    """Why operator ``op`` is not linear in its ``index``-th child, which carries ``source``."""
    if op.name in JOIN_OPERATORS:
        kind = str(op.attrs.get("join_type"))
        side = "left" if index == 0 else "right"
        ok = (
            kind in _BOTH_SIDES
            or (kind in _LEFT_PRESERVING and side == "left")
            or (kind == "RightOuter" and side == "right")
        )
        if not ok:
            return f"{source!r} is on the {side} side of a {kind} join"
    elif op.name not in LINEAR_OPERATORS:
        return f"{with_article(op.name)} is computed over {source!r}"
    for k, e in enumerate(op.expressions):
        for x in e.walk():
            cat = expression_category(x.name)
            if cat == ROW or (cat == GENERATOR and op.name == "Generate" and x is e and k == 0):
                continue
            return f"{with_article(cat or 'unknown')} expression ({x.name}) in {with_article(op.name)} is computed over {source!r}"
    return None


def linearity(
    spark: SparkSession, query: str, sources: list[str], *, desired: DataFrame | None = None
) -> dict[str, str | None]:
    """For each source: None if the query is linear in it, else why not.

    Classic Spark reads the analyzed plan of ``desired`` (or analyses ``query``; nothing runs); Spark Connect
    the same plan from mvsink's server plugin, else ``EXPLAIN EXTENDED`` (:func:`mvsink.plan.read.plan_tree`).
    """
    try:
        tree = plan_tree(spark, query, desired=desired)
    except PlanFormatError as exc:
        return {s: f"the plan could not be read: {exc}" for s in sources}
    return {s: nonlinear_reason(tree, s) for s in sources}
