"""What DuckDB evaluates as Spark does beyond :func:`mvsink.engines.duckdbsql.unsupported`, for the partitioned
recompute's queries (:mod:`mvsink.incremental.partduck`): ``[NOT] EXISTS (subquery)``, left outer, left semi and
left anti joins, an inner ``GROUP BY`` whose aggregates are plain COUNTs, a correlated scalar subquery of one
aggregate without GROUP BY (MIN, MAX, COUNT, or an AVG of a decimal written out as Spark computes it: TPC-H Q17),
and ``substring`` with a positive literal position and a literal length; and a string literal cast to a decimal it
fits exactly (a scalar subquery's value written in), and a filter's comparison of numbers with a literal beyond a
widened column's type.

:func:`unsupported_extended` judges those forms itself, then rewrites each into one the base check knows (a join to
an inner join of the same condition, an aggregate to a projection of its grouping expressions, EXISTS to a boolean
and substring to a string literal) and asks :func:`~mvsink.engines.duckdbsql.unsupported` about the rest, failing
closed. The other callers of the base check (the change terms, the full diff in DuckDB) keep their own assumptions
about a plan's shape, so they do not take these. ``tests/spark/test_partitioned_duckdb.py`` is the differential
test showing them equal (NULL keys and strings, empty and multi-byte strings). Refused: ``IN``/``NOT IN
(subquery)`` (NOT IN's null-aware anti join is not proven equal), right and full outer joins, DISTINCT or filtered
aggregates and every aggregate but COUNT (but MIN, MAX and AVG in a correlated scalar subquery), SUM in a scalar
subquery (its overflow is Spark's own), an uncorrelated scalar subquery (the partitioned recompute writes those in as
literals), a substring position of 0 or below (Spark counts those otherwise).
"""

from __future__ import annotations

import dataclasses
import re
from decimal import Decimal, InvalidOperation
from typing import Final

from mvsink.engines.duckdbsql import TRUE, correlated_scalar_type, is_correlated, spark_type, unsupported
from mvsink.plan.tree import PlanExpr, PlanNode

__all__ = ["unsupported_extended"]

_JOINS: Final = frozenset({"LeftOuter", "LeftSemi", "LeftAnti"})
_STRING: Final = PlanExpr("Literal", attrs={"type": "string", "value": "s"})
_DECIMAL: Final = re.compile(r"decimal\((\d+),(\d+)\)")
_COMPARISONS: Final = frozenset({"EqualTo", "LessThan", "LessThanOrEqual", "GreaterThan", "GreaterThanOrEqual"})
_INTEGRAL: Final = frozenset({"integer", "long"})
_NUMERAL: Final = re.compile(r"-?\d{1,38}(\.\d{1,38})?")


class _Refused(Exception):  # noqa: N818 (a reason, carried out of the recursion)
    pass


def unsupported_extended(tree: PlanNode) -> str | None:
    """Why DuckDB might not evaluate the plan ``tree`` exactly as Spark does, with this module's forms, or None."""
    try:
        rewritten = _node(tree)
    except _Refused as exc:
        return str(exc)
    return unsupported(rewritten)


def _node(node: PlanNode) -> PlanNode:
    if node.name == "View":  # (a source as mvsink registers it: not looked into, as the base check does)
        return node
    children = tuple(_node(c) for c in node.children)
    name, attrs, exprs = node.name, dict(node.attrs), node.expressions
    if name == "Join" and attrs.get("join_type") in _JOINS:
        attrs["join_type"] = "Inner"  # (the same condition, judged alike)
    if name == "Aggregate":
        name, exprs = "Project", _grouping(node)
    if name == "Filter" and len(exprs) == 1:
        exprs = (_filter(exprs[0]),)
    return dataclasses.replace(node, name=name, children=children, expressions=tuple(map(_expr, exprs)), attrs=attrs)


def _filter(condition: PlanExpr) -> PlanExpr:
    """A filter's condition, each top-level conjunct that compares two numbers (integers or decimals, each
    evaluated alike) judged here and replaced by a boolean: the base check refuses a widened column compared with a
    literal its own type cannot hold (TPC-H Q22's ``c_acctbal > CAST('4999.998700' AS DECIMAL(19,6))``) because
    Spark's optimiser may then give FALSE where the comparison is NULL; a filter drops the row either way, and both
    engines compare the values exactly."""
    if condition.name == "And" and len(condition.children) == 2:
        return dataclasses.replace(condition, children=tuple(map(_filter, condition.children)))
    if condition.name in _COMPARISONS and len(condition.children) == 2:
        operands = [_expr(c) for c in condition.children]
        types = [spark_type(o) for o in operands]
        if all(t in _INTEGRAL or _DECIMAL.fullmatch(t) for t in types):
            return TRUE
    return condition


def _grouping(node: PlanNode) -> tuple[PlanExpr, ...]:
    """An Aggregate's expressions but its aggregates, each of which must be a non-distinct, unfiltered COUNT (a
    BIGINT in both engines; NULLs not counted, as of the null-supplying side after an outer join)."""
    kept = []
    for e in node.expressions:
        inner = e.children[0] if e.name == "Alias" and len(e.children) == 1 else e
        if not any(x.name == "AggregateExpression" for x in inner.walk()):
            kept.append(e)
            continue
        if inner.name != "AggregateExpression":
            raise _Refused("an expression over an aggregate")
        if inner.attrs.get("distinct") is not False or len(inner.children) != 1:
            raise _Refused("an aggregate that is DISTINCT, filtered or of unknown form")
        fn = inner.children[0]
        if fn.name != "Count" or len(fn.children) != 1:
            raise _Refused(f"the aggregate {fn.name}")
        _judge(_expr(fn.children[0]))
    return tuple(kept)


def _expr(e: PlanExpr) -> PlanExpr:
    if e.name == "Exists":
        return _exists(e)
    if e.name == "OuterReference":  # (a correlated subquery's reference to its outer row's column)
        if len(e.children) != 1:
            raise _Refused("an outer reference of unknown form")
        return _expr(e.children[0])
    if e.name == "InSubquery":
        raise _Refused("an InSubquery (IN or NOT IN over a subquery)")
    if e.name == "ScalarSubquery":
        return _correlated_scalar(e)
    if e.name == "Substring":
        return _substring(e)
    if e.name == "Cast" and len(e.children) == 1 and e.children[0].name == "Literal":
        return _decimal_literal(e) or e
    if not e.children:
        return e
    return dataclasses.replace(e, children=tuple(map(_expr, e.children)))


def _exists(e: PlanExpr) -> PlanExpr:
    """``[NOT] EXISTS (subquery)``: two-valued in both engines; its subquery judged as a query (its top projection's
    plain columns are not used)."""
    if len(e.plans) != 1:
        raise _Refused("an EXISTS of unknown form")
    plan = e.plans[0]
    if plan.name == "Project" and len(plan.children) == 1:
        if all(x.name in ("AttributeReference", "Literal") for x in plan.expressions):
            plan = plan.children[0]
    why = unsupported_extended(plan)
    if why:
        raise _Refused(f"{why} in an EXISTS subquery")
    for c in e.children:
        _judge(_expr(c))
    return TRUE


def _correlated_scalar(e: PlanExpr) -> PlanExpr:
    """A correlated scalar subquery of one aggregate (TPC-H Q17's ``0.2 * avg(l_quantity)``): as the base check takes
    it (:func:`mvsink.engines.duckdbsql.unsupported`), its input judged with this module's forms. Stands in as a
    column of its type. An uncorrelated one is left to the partitioned recompute (written in as a literal)."""
    if len(e.plans) != 1 or not is_correlated(e):
        raise _Refused("a ScalarSubquery (a partitioned recompute writes in only the constant ones, as literals)")
    agg = e.plans[0]
    if agg.name != "Aggregate" or len(agg.children) != 1:
        raise _Refused("a correlated ScalarSubquery other than one aggregate without GROUP BY")
    why = unsupported_extended(agg.children[0])
    if why:
        raise _Refused(f"{why} in a correlated ScalarSubquery")
    # (the base check judges the aggregate itself, its input now a plain relation of the same columns)
    stand_in = dataclasses.replace(agg, children=(PlanNode("View", attrs={"view": "_mv_judged"}),))
    got = correlated_scalar_type(dataclasses.replace(e, plans=(stand_in,)))
    if got.startswith("!"):
        raise _Refused(got[1:])
    return PlanExpr("AttributeReference", attrs={"type": got})


def _substring(e: PlanExpr) -> PlanExpr:
    """``substring(s, pos, len)`` of a string column or expression: both engines count characters (code points)
    where ``pos`` is a positive integer literal and ``len`` an integer literal of at least 0."""
    if len(e.children) != 3:
        raise _Refused("a substring of unknown form")
    s, pos, length = (_expr(c) for c in e.children)
    if _judge(s) != "string" or (s.name == "Literal" and s.attrs.get("value") is None):
        raise _Refused("a substring of another value than a string")
    p, n = _integer(pos), _integer(length)
    if p is None or n is None or p < 1 or n < 0:
        raise _Refused("a substring whose position is not a positive literal (or whose length is not a literal)")
    return _STRING


def _decimal_literal(e: PlanExpr) -> PlanExpr | None:
    """``CAST('4999.998700' AS DECIMAL(19,6))`` (a scalar subquery's value as :mod:`mvsink.incremental.scalars`
    writes it in: TPC-H Q22) as the decimal literal it is, where the string is a plain numeral that the type holds
    exactly (both engines parse it to that value); else None."""
    m = _DECIMAL.fullmatch(str(e.attrs.get("type", "")).replace(" ", ""))
    lit = e.children[0]
    value = lit.attrs.get("value")
    if m is None or lit.attrs.get("type") != "string" or not isinstance(value, str) or not _NUMERAL.fullmatch(value):
        return None
    p, sc = int(m.group(1)), int(m.group(2))
    v = Decimal(value)
    if abs(v) >= Decimal(10) ** (p - sc) or v != v.quantize(Decimal(1).scaleb(-sc)):
        return None
    return PlanExpr("Literal", attrs={"type": f"decimal({p},{sc})", "value": value})


def _integer(e: PlanExpr) -> int | None:
    if e.name != "Literal" or e.attrs.get("type") != "integer":
        return None
    try:
        v = Decimal(str(e.attrs.get("value")))
    except InvalidOperation:
        return None
    return int(v) if v.is_finite() and v == v.to_integral_value() else None


def _judge(e: PlanExpr) -> str:
    """The base check's type of ``e`` (rewritten), or :class:`_Refused` with why not."""
    got = spark_type(e)
    if got.startswith("!"):
        raise _Refused(got[1:])
    return got
