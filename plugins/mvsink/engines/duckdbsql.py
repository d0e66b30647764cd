"""What DuckDB evaluates exactly as Spark does, and Spark SQL translated for it (:mod:`mvsink.incremental.duckdbterms`).

:func:`unsupported` reads Spark's analysed plan (its implicit casts included) and fails closed: it accepts column
references, literals, comparisons, AND/OR/NOT, IS [NOT] NULL, IN lists, BETWEEN, year(), CASE WHEN, LIKE '%...', an
uncorrelated ``IN (subquery)`` of one column as a conjunct of a filter, ``+ - *`` and negation on int, long and
decimals whose Spark result needs at most 38 digits, and casts proven exact in both engines; over integers, longs,
decimals, strings, dates and booleans only. Everything else is refused, so Spark computes it.

DuckDB's own decimal types differ from Spark's (a product of DECIMAL(18,6) and INT stays a checked DECIMAL(18,6) in
DuckDB, where Spark widens to DECIMAL(29,6)). So DuckDB reads every decimal column as DECIMAL(38, its scale)
(:func:`duckdb_schema`): its ``+ - *`` then keep Spark's scale at precision 38, exact wherever Spark's result fits in
38 digits (which :func:`unsupported` requires), and the result is cast back to Spark's type (:func:`as_spark_types`).
The differential test ``tests/spark/test_duckdb_translation.py`` is what shows these equal.
"""

from __future__ import annotations

import contextvars
import dataclasses
import re
from collections.abc import Mapping
from decimal import Decimal
from typing import TYPE_CHECKING, Final

from mvsink.engines.sparktypes import (
    _INTEGRAL_DIGITS,
    _INTEGRAL_RANGE,
    _INTEGRAL_SAFE,
    MAX_PRECISION,
    _allowed,
    _cast,
    _decimal,
    _fits,
    _literal_value,
)
from mvsink.plan.tree import PlanExpr, is_correlated, query_operators

if TYPE_CHECKING:
    from collections.abc import Callable

    from mvsink.plan.tree import PlanNode

TRUE: Final = PlanExpr("Literal", attrs={"type": "boolean", "value": "true"})  # (a conjunct judged apart)
_OPERATORS: Final = frozenset({"Project", "Filter", "Join", "SubqueryAlias", "View", "LogicalRelation", "Relation"})
_BOOLEAN: Final = frozenset(
    {
        "EqualTo",
        "EqualNullSafe",
        "LessThan",
        "LessThanOrEqual",
        "GreaterThan",
        "GreaterThanOrEqual",
        "And",
        "Or",
        "Not",
        "IsNull",
        "IsNotNull",
        "In",
    }
)


class Untranslatable(ValueError):
    """Spark SQL text the translation does not carry to DuckDB exactly."""


# ---------------------------------------------------------------- what DuckDB evaluates as Spark does


def unsupported(tree: PlanNode, *, carried: Mapping[Comparison, CastPair] | None = None) -> str | None:
    """Why DuckDB might not evaluate the plan ``tree`` exactly as Spark does, or None (failing closed). A View is
    a source as mvsink registers it (its columns cast to the table's types, as the driver reads them too): not
    looked into; what the query does with its columns is. ``carried``: the comparisons whose decimal casts the
    DuckDB text carries (:func:`carried_casts`; :func:`duckdb_sql` writes them), their rounding then accepted."""
    if carried:
        token = _CARRIED.set(carried)
        try:
            return unsupported(tree)
        finally:
            _CARRIED.reset(token)
    node = tree
    if node.name == "View":
        return None
    if node.name not in _OPERATORS:
        return f"the operator {node.name}"
    if node.name == "Join" and node.attrs.get("join_type") not in ("Inner", "Cross"):  # (comma joins: Cross)
        return f"a {node.attrs.get('join_type', '?')} join"
    exprs = node.expressions
    if node.name == "Filter" and len(exprs) == 1:
        try:
            exprs = (_in_subqueries(exprs[0]),)
        except ValueError as exc:
            return str(exc)
    for e in exprs:
        got = spark_type(e)
        if got.startswith("!"):
            return got[1:]
    return next((why for why in map(unsupported, node.children) if why), None)


def _in_subqueries(condition: PlanExpr) -> PlanExpr:
    """A filter's condition, each top-level conjunct ``value IN (subquery)`` judged here and replaced by TRUE (raising
    ValueError with the reason where it is refused). Uncorrelated (an outer reference is refused by the subquery's
    own check), one column of the value's type (integers, strings, dates, decimals: equality is identity in both
    engines), as a conjunct of a filter: both engines give NULL where the value is NULL or the subquery holds a NULL
    and no match, and the filter drops the row for NULL as for FALSE. Under NOT or OR it is refused (NOT IN's
    null-aware form is not proven equal)."""
    if condition.name == "And" and len(condition.children) == 2:
        return dataclasses.replace(condition, children=tuple(map(_in_subqueries, condition.children)))
    if condition.name != "InSubquery":
        return condition
    kids = condition.children
    if len(kids) != 2 or kids[1].name != "ListQuery" or len(kids[1].plans) != 1:
        raise ValueError("an IN subquery of unknown form")
    plan = kids[1].plans[0]
    why = unsupported(plan)
    if why:
        raise ValueError(f"{why} in an IN subquery")
    value = spark_type(kids[0])
    out = [spark_type(x) for x in plan.expressions] if plan.name == "Project" else []
    if value.startswith("!"):
        raise ValueError(value[1:])
    if out != [value] or not _IN_KEY.fullmatch(value):
        raise ValueError(f"an IN subquery comparing {value} with {', '.join(out) or 'an unknown output'}")
    return TRUE


_IN_KEY: Final = re.compile(r"byte|short|integer|long|string|date|decimal\(\d+,\d+\)")


def spark_type(e: PlanExpr) -> str:
    """Spark's type of ``e`` (as its plan prints it: ``integer``, ``decimal(12,2)``) where DuckDB computes the same
    value, else ``!why``."""
    name = e.name
    form = _FORMS.get(name)
    if form is not None:  # (judged on their own terms: BETWEEN's common expression, CASE's branches twice)
        return form(e)
    if name == "ScalarSubquery":
        return correlated_scalar_type(e) if is_correlated(e) else _scalar_extreme(e)
    carried = _CARRIED.get()
    if carried and name in _COMPARISONS and _comparison(e) in carried:
        return _carried_comparison(e)
    kids = [spark_type(c) for c in e.children]
    bad = next((k for k in kids if k.startswith("!")), None)
    if bad:
        return bad
    if name == "AttributeReference":
        return _allowed(e.attrs.get("type"))
    if name == "Literal":
        t = _allowed(e.attrs.get("type"), literal=True)
        if t == "string" and any(ch in str(e.attrs.get("value")) for ch in "\\'\""):  # escapes differ by dialect
            return "!a string literal with a quote or a backslash"
        return t
    if name == "Alias":
        return kids[0]
    if name == "Cast":
        return _cast(e, kids[0]) if len(kids) == 1 else "!a cast of unknown form"
    if name in _BOOLEAN:
        if name in ("And", "Or", "Not") and any(k not in ("boolean", "void") for k in kids):
            return f"!{name} of {', '.join(kids)}"
        if name not in ("And", "Or", "Not", "IsNull", "IsNotNull") and _unwrapped(e.children):
            return f"!{name} of a widened column and a literal beyond its type (Spark's optimiser rewrites it)"
        return "boolean"
    if name in ("Add", "Subtract", "Multiply", "UnaryMinus"):
        return _arithmetic(e, kids)
    return f"!the expression {name}"


# ---------------------------------------------------------------- comparisons at a common decimal type

# A comparison of two columns (or a column and a constant) at the common decimal type Spark's analyser casts both to,
# where that type rounds one of them (TPC-H Q11's filter: a DECIMAL(36,2) sum against a DECIMAL(38,6) total, compared
# at DECIMAL(38,4), the total rounded HALF_UP). DuckDB compares at its own common type, exactly, so the DuckDB text
# must carry Spark's casts: :func:`carried_casts` matches each such comparison of the plan with the one comparison
# of the query's text over the same names, :func:`duckdb_sql` writes the casts into the text, and
# :func:`unsupported` accepts the rounding (DuckDB rounds a decimal's scale down HALF_UP too, away from zero;
# ``tests/spark/test_duckdb_translation.py`` checks it against Spark). Any other shape stays refused.
Comparison = tuple[str, str, str]  # (Spark's comparison, its left column's name, its right's; casefolded)
CastPair = tuple[str | None, str | None]  # (the left operand's decimal cast, the right's; None: not cast)
_COMPARISONS: Final = {
    "EqualTo": "eq",
    "EqualNullSafe": "nullsafeeq",
    "LessThan": "lt",
    "LessThanOrEqual": "lte",
    "GreaterThan": "gt",
    "GreaterThanOrEqual": "gte",
}
_CARRIED: contextvars.ContextVar[Mapping[Comparison, CastPair] | None] = contextvars.ContextVar(
    "mvsink_carried_casts", default=None
)


def _operand(e: PlanExpr) -> tuple[str, str | None] | None:
    """(the column's name, casefolded; the decimal type Spark casts it to, or None) of a comparison's operand that
    is a column or a cast of one; else None."""
    cast = None
    if e.name == "Cast" and len(e.children) == 1:
        cast = e.attrs.get("type")
        e = e.children[0]
    if e.name != "AttributeReference" or e.ref is None:
        return None
    if cast is not None and (not isinstance(cast, str) or _decimal(cast.replace(" ", "")) is None):
        return None
    return e.ref[0].casefold(), cast.replace(" ", "") if isinstance(cast, str) else None


def _comparison(e: PlanExpr) -> Comparison | None:
    """The key of a comparison of two columns (each maybe cast), else None."""
    if e.name not in _COMPARISONS or len(e.children) != 2:
        return None
    left, right = (_operand(c) for c in e.children)
    if left is None or right is None:
        return None
    return e.name, left[0], right[0]


def _rounds(e: PlanExpr) -> bool:
    """A cast of a decimal column to a decimal of a lower scale (Spark rounds it HALF_UP)."""
    if e.name != "Cast" or len(e.children) != 1:
        return False
    have, want = _decimal(str(e.children[0].attrs.get("type", ""))), _decimal(str(e.attrs.get("type", "")))
    return have is not None and want is not None and want[1] < have[1]


def _carried_comparison(e: PlanExpr) -> str:
    """A comparison :func:`carried_casts` matched: each operand's type, its decimal cast accepted where the integer
    digits are kept (no overflow; the scale rounded alike in both engines)."""
    for c in e.children:
        if c.name != "Cast":
            got = spark_type(c)
            if got.startswith("!"):
                return got
            continue
        child = _allowed(c.children[0].attrs.get("type"))
        have, want = _decimal(child), _decimal(str(c.attrs.get("type", "")))
        if have is None or want is None:
            got = spark_type(c)
            if got.startswith("!"):
                return got
        elif want[0] - want[1] < have[0] - have[1]:
            return f"!a comparison's cast from {child} to {c.attrs.get('type')} that may overflow"
    return "boolean"


def _plan_comparisons(node: PlanNode, found: dict[Comparison, list[tuple[CastPair, bool]]]) -> None:
    """Every comparison of columns in the operators :func:`unsupported` reads (a View's inside not), by key: its
    operands' casts, and whether one rounds."""
    if node.name == "View":
        return
    for x in node.all_expressions():
        key = _comparison(x)
        if key is not None:
            left, right = (_operand(c) for c in x.children)
            pair = (left[1] if left else None, right[1] if right else None)
            found.setdefault(key, []).append((pair, any(_rounds(c) for c in x.children)))
    for c in node.children:
        _plan_comparisons(c, found)


def _scalar_extreme(e: PlanExpr) -> str:
    """An uncorrelated scalar subquery ``(SELECT max(c) FROM ...)`` (or ``min``) of an integer, decimal or date
    column over a plan DuckDB evaluates as Spark does: its type (one row always, NULL over no rows, in both; the
    extreme of a column is one of its values, of its type); else ``!why``."""
    if e.children or len(e.plans) != 1:
        return "!a correlated scalar subquery"
    agg = e.plans[0]
    if agg.name != "Aggregate" or len(agg.children) != 1 or len(agg.expressions) != 1:
        return "!a scalar subquery other than one MIN or MAX"
    if any(x.name == "OuterReference" for n in agg.walk() for ex in n.all_expressions() for x in ex.walk()):
        return "!a correlated scalar subquery"
    shape = [x.name for x in agg.expressions[0].walk()]
    if shape not in (
        ["Alias", "AggregateExpression", "Max", "AttributeReference"],
        ["Alias", "AggregateExpression", "Min", "AttributeReference"],
    ):
        return "!a scalar subquery other than one MIN or MAX of a column"
    agg_expr = agg.expressions[0].children[0]
    if agg_expr.attrs.get("isDistinct") not in (None, False, "false") or len(agg_expr.children) != 1:
        return "!a scalar subquery's aggregate with DISTINCT or FILTER"
    t = _allowed(agg_expr.children[0].children[0].attrs.get("type"))
    if t.startswith("!") or t in ("string", "boolean"):
        return f"!a scalar MIN or MAX of type {t.lstrip('!')}"
    why = unsupported(agg.children[0])
    return f"!{why} in a scalar subquery" if why else t


_MIN_EXACT_AVG_DIGITS: Final = 11  # Spark's AVG of a DECIMAL(p, s), p + 4 <= 15, is computed through DOUBLE
MAX_AVG_DIGITS: Final = 34  # beyond, Spark's AVG type is bounded at 38 digits


def correlated_scalar_type(e: PlanExpr) -> str:
    """A correlated scalar subquery of one row, ``(SELECT f(agg(x), ...) FROM ... WHERE inner = outer ...)`` (TPC-H
    Q17's ``0.2 * avg(l_quantity)``, Q20's ``0.5 * sum(l_quantity)``, Q2's ``min(ps_supplycost)``): an Aggregate
    without grouping whose one output is arithmetic this check takes over non-distinct, unfiltered MIN and MAX (of
    integers, decimals, dates), COUNT, SUM of a decimal, and AVG of a DECIMAL(p, s) with 11 < p <= 34 (SUM and AVG
    written out as Spark computes them by :func:`mvsink.engines.duckdbtext.duckdb_sql`: :func:`text_aggregates`),
    over a plan this check takes once its outer references are read as columns. One row in both engines, the
    aggregates NULL (COUNT 0) over no rows; DuckDB decorrelates it as Spark does. Its type, else ``!why``."""
    if len(e.plans) != 1:
        return "!a ScalarSubquery of unknown form"
    agg = e.plans[0]
    grouping = agg.attrs.get("grouping")
    if (
        agg.name != "Aggregate"
        or len(agg.children) != 1
        or len(agg.expressions) != 1
        or not isinstance(grouping, tuple)
        or len(grouping) != 2
        or grouping[0] != grouping[1]
    ):
        return "!a correlated ScalarSubquery other than one aggregate without GROUP BY"
    why = unsupported(_outer_as_columns(agg.children[0]))
    if why:
        return f"!{why} in a correlated ScalarSubquery"
    out = _aggregates_as_columns(agg.expressions[0])
    return out if isinstance(out, str) and out.startswith("!") else spark_type(out)  # type: ignore[arg-type]


def _outer_as_columns(node: PlanNode) -> PlanNode:
    """``node`` (a correlated subquery's plan) with each outer reference of its own operators read as the outer
    row's column; a nested subquery keeps its own (its own check refuses them)."""

    def expr(x: PlanExpr) -> PlanExpr:
        if x.name == "OuterReference" and len(x.children) == 1:
            return x.children[0]
        return dataclasses.replace(x, children=tuple(map(expr, x.children))) if x.children else x

    if node.name == "View":
        return node
    return dataclasses.replace(
        node, expressions=tuple(map(expr, node.expressions)), children=tuple(map(_outer_as_columns, node.children))
    )


def _aggregates_as_columns(e: PlanExpr) -> PlanExpr | str:
    """``e`` with each aggregate judged (:func:`correlated_scalar_type`) and replaced by a column of its Spark type, or
    ``!why``."""
    if e.name != "AggregateExpression":
        kids = [_aggregates_as_columns(c) for c in e.children]
        bad = next((k for k in kids if isinstance(k, str)), None)
        if bad is not None:
            return bad
        return dataclasses.replace(e, children=tuple(kids)) if kids else e  # type: ignore[arg-type]
    if e.attrs.get("distinct") is not False or len(e.children) != 1 or len(e.children[0].children) != 1:
        return "!an aggregate that is DISTINCT, filtered or of unknown form in a correlated ScalarSubquery"
    fn = e.children[0]
    arg = spark_type(fn.children[0])
    if arg.startswith("!"):
        return arg
    dec = _decimal(arg)
    if fn.name == "Count":
        t = "long"
    elif fn.name in ("Min", "Max") and (arg in _INTEGRAL_DIGITS or arg == "date" or dec):
        t = arg
    elif fn.name == "Sum" and dec:
        t = f"decimal({min(dec[0] + 10, MAX_PRECISION)},{dec[1]})"
    elif fn.name == "Average" and dec and _MIN_EXACT_AVG_DIGITS < dec[0] <= MAX_AVG_DIGITS:
        t = f"decimal({dec[0] + 4},{dec[1] + 4})"
    else:
        return f"!the aggregate {fn.name} of {arg} in a correlated ScalarSubquery"
    return PlanExpr("AttributeReference", attrs={"type": t})


def text_aggregates(tree: PlanNode) -> tuple[tuple[int, int] | None, tuple[int, int] | None] | str:
    """The DECIMAL(p, s) every AVG of ``tree`` (subqueries included) averages and the one every SUM sums (None:
    there is none), which :func:`mvsink.engines.duckdbtext.duckdb_sql` writes out as Spark computes them (all of
    one kind alike: the text's aggregates are not matched to the plan's one by one); why not where one kind's
    arguments differ or are not such decimals."""
    found: dict[str, set[tuple[int, int] | None]] = {"Average": set(), "Sum": set()}
    for n in query_operators(tree):
        for x in n.all_expressions():
            if x.name in found and len(x.children) == 1:
                dec = _decimal(spark_type(x.children[0]))
                ok = dec is not None and (x.name == "Sum" or _MIN_EXACT_AVG_DIGITS < dec[0] <= MAX_AVG_DIGITS)
                found[x.name].add(dec if ok else None)
    for name, kinds in found.items():
        if len(kinds) > 1 or None in kinds:
            return f"{name}s of other types than one DECIMAL (each written out as Spark computes it)"
    return next(iter(found["Average"]), None), next(iter(found["Sum"]), None)


def _year_of(e: PlanExpr) -> str:
    """``year(d)`` of a date: DuckDB's is a BIGINT, cast back; arithmetic over it is refused (:func:`_year`); of
    NULL, DuckDB's is a DOUBLE."""
    if any(_null(c) for c in e.children):
        return "!year() of NULL"
    kids = [spark_type(c) for c in e.children]
    return "integer" if kids == ["date"] else f"!year() of {', '.join(kids)}"


def _extract(e: PlanExpr) -> str:
    """``EXTRACT(YEAR FROM d)``: its replacement first, then the field and the source."""
    if not e.children or e.children[0].name != "Year":
        return "!an EXTRACT of another field than YEAR"
    return _year_of(e.children[0])


def _between(e: PlanExpr) -> str:
    """``x BETWEEN a AND b``: Spark's replacement, ``x >= a AND x <= b`` over one common ``x`` (its casts
    included), judged with ``x`` put back in (one common expression only; anything else, fail closed)."""
    import dataclasses

    with_ = e.children[0] if e.children else None
    if with_ is None or with_.name != "With" or len(with_.children) != 2:
        return "!a BETWEEN of unknown form"
    body, common = with_.children
    if common.name != "CommonExpressionDef" or len(common.children) != 1:
        return "!a BETWEEN of unknown form"

    def put_back(x: PlanExpr) -> PlanExpr:
        if x.name == "CommonExpressionRef":
            return common.children[0]
        return dataclasses.replace(x, children=tuple(put_back(c) for c in x.children))

    got = spark_type(put_back(body))
    return got if got.startswith("!") or got == "boolean" else f"!a BETWEEN of type {got}"


def _same(a: PlanExpr, b: PlanExpr) -> bool:
    """Whether two expressions are the same tree (name, reference, attributes and children)."""
    return (
        a.name == b.name
        and a.ref == b.ref
        and dict(a.attrs) == dict(b.attrs)
        and len(a.children) == len(b.children)
        and all(_same(x, y) for x, y in zip(a.children, b.children, strict=True))
    )


def _like(e: PlanExpr) -> str:
    """``s LIKE 'pattern'``: equal in both engines for a literal pattern of literal characters and ``%`` only (``_``
    and the escape character are left out: what each engine counts as one character, and its escapes, differ)."""
    kids = [spark_type(c) for c in e.children]
    bad = next((k for k in kids if k.startswith("!")), None)
    if bad:
        return bad
    if len(e.children) != 2 or kids[0] != "string" or e.children[1].name != "Literal":
        return "!a LIKE of another form than a string and a literal pattern"
    value = e.children[1].attrs.get("value")
    if not isinstance(value, str) or "_" in value or "\\" in value:  # (an ESCAPE clause: :func:`duckdb_sql`)
        return "!a LIKE pattern with _ or an escape"
    return "boolean"


def _case_when(e: PlanExpr) -> str:
    """``CASE WHEN c THEN v ... [ELSE v] END``: the values' one type, where DuckDB's is the same or, for decimals, a
    DECIMAL(38, the same scale) (each decimal value of that scale once Spark's implicit casts are set aside, or an
    integer literal: DuckDB would widen other mixes beyond 38 digits to a DOUBLE)."""
    kids = list(e.children)
    half = len(kids) // 2
    # (mvsink.plan.read gives its children, then its branches again and an ELSE again: anything else, fail closed)
    if not kids or len(kids) % 2 or not all(_same(a, b) for a, b in zip(kids[:half], kids[half:], strict=True)):
        return "!a CASE whose branches could not be told apart"
    kids = kids[:half]
    conds = kids[0 : len(kids) - len(kids) % 2 : 2]
    values = kids[1 : len(kids) - len(kids) % 2 : 2] + (kids[-1:] if len(kids) % 2 else [])
    for c in conds:
        t = spark_type(c)
        if t.startswith("!"):
            return t
        if t not in ("boolean", "void"):
            return f"!a CASE condition of type {t}"
    types = {spark_type(v) for v in values}
    bad = next((t for t in types if t.startswith("!")), None)
    if bad:
        return bad
    types.discard("void")
    if len(types) != 1:
        return f"!a CASE of the types {', '.join(sorted(types))}"
    (result,) = types
    dec = _decimal(result)
    if dec is None:
        return result
    for v in values:
        inner = v
        while inner.name == "Cast" and len(inner.children) == 1:
            inner = inner.children[0]
        it = spark_type(inner)
        d = _decimal(it)
        if _null(inner) or (d is not None and d[1] == dec[1]):
            continue
        if inner.name == "Literal" and it == "integer" and MAX_PRECISION - dec[1] >= _INTEGRAL_DIGITS["integer"]:
            continue
        return f"!a CASE of {result} with a value of {it}"
    return result


_FORMS: Final[dict[str, Callable[[PlanExpr], str]]] = {
    "Year": _year_of,
    "Extract": _extract,
    "CaseWhen": _case_when,
    "Like": _like,
    "Between": _between,
}


def _arithmetic(e: PlanExpr, kids: list[str]) -> str:
    """Spark's result type of ``+ - *`` or negation, where DuckDB (reading decimals as DECIMAL(38, s)) gives the
    same value: int and long only (DuckDB types an integer literal by its operand, so a byte or short operand,
    even cast, is refused), decimals whose result fits in 38 digits (Spark would round beyond); no NULL
    operand (DuckDB's result would be typed NULL)."""
    name = e.name
    label = f"{name} of {', '.join(kids)}"
    if any(k in ("byte", "short") or _narrow_cast(c) for k, c in zip(kids, e.children, strict=True)):
        return f"!{label} (a byte or short operand)"
    if any(_year(c) for c in e.children):  # (DuckDB's year is a BIGINT: no overflow where Spark's INT has one)
        return f"!{label} (over a year)"
    if any(_null(c) for c in e.children):  # DuckDB types NULL + x by the NULL, not as Spark does
        return f"!{label} (a NULL operand)"
    if all(k in ("integer", "long") for k in kids):  # integers: both engines fail on an overflow ...
        if not any(x.name == "AttributeReference" for x in e.walk()):  # ... but DuckDB widens constants' types
            return f"!{label} of constants"
        if _reordered(e):
            return f"!{label} (Spark's optimiser may reorder it, and overflow where DuckDB does not)"
        return kids[0] if len(set(kids)) == 1 else f"!{label}"
    decimals = [_decimal(k) for k in kids]
    if any(d is None for d in decimals):
        return f"!{label}"
    if name == "UnaryMinus":  # (Spark 4.2 fails on -(-x) of a DECIMAL(38,10) near its limit)
        return kids[0] if decimals[0][0] <= _INTEGRAL_SAFE["long"] else f"!{label} (a wide decimal)"  # type: ignore[index]
    (p1, s1), (p2, s2) = decimals  # type: ignore[misc]
    if name == "Multiply":
        scale, precision = s1 + s2, p1 + p2 + 1
    else:
        scale = max(s1, s2)
        precision = max(p1 - s1, p2 - s2) + scale + 1
    if precision > MAX_PRECISION:  # Spark would round (or fail) where DuckDB does not
        return f"!{label} needs {precision} digits"
    return f"decimal({precision},{scale})"


def _unwrapped(operands: tuple[PlanExpr, ...]) -> bool:
    """Whether Spark's optimiser (UnwrapCastInBinaryComparison) may rewrite a comparison of a widened column with
    a literal its own type cannot hold (``i64 < 12345678901234567890``) to a constant, NULL rows included."""
    values = [v for v in map(_constant, operands) if v is not None]
    for x in operands:
        if x.name == "Cast" and len(x.children) == 1 and _constant(x) is None:
            inner = spark_type(x.children[0])
            if (inner in _INTEGRAL_RANGE or _decimal(inner)) and any(not _fits(v, inner) for v in values):
                return True
    return False


def _constant(e: PlanExpr) -> Decimal | None:
    """The value of a numeric literal, through casts of it."""
    if e.name == "Cast" and len(e.children) == 1:
        return _constant(e.children[0])
    return _literal_value(e)


def _null(e: PlanExpr) -> bool:
    """The NULL literal, or a cast of it."""
    if e.name == "Cast" and len(e.children) == 1:
        return _null(e.children[0])
    return e.name == "Literal" and e.attrs.get("type") == "void"


def _reordered(e: PlanExpr) -> bool:
    """Whether Spark's optimiser (ReorderAssociativeOperator) may regroup an integer chain of ``+`` or ``*``: one
    with a constant and two other operands (``(i * 0) * i`` runs as ``(i * i) * 0``, which overflows)."""
    if e.name not in ("Add", "Multiply"):
        return False
    operands: list[PlanExpr] = []
    stack = [e]
    while stack:
        x = stack.pop()
        if x.name == e.name:
            stack.extend(x.children)
        else:
            operands.append(x)
    constants = sum(1 for x in operands if not any(y.name == "AttributeReference" for y in x.walk()))
    return constants >= 1 and len(operands) - constants >= 2


def _year(e: PlanExpr) -> bool:
    """A year (``year(d)``, ``EXTRACT(YEAR FROM d)``), through casts and aliases: a BIGINT in DuckDB."""
    while e.name in ("Cast", "Alias") and len(e.children) == 1:
        e = e.children[0]
    return e.name in ("Year", "Extract")


def _narrow_cast(e: PlanExpr) -> bool:
    """A cast (by Spark's analyser) of a byte or short expression, which DuckDB's SQL text does not carry."""
    return e.name == "Cast" and bool(e.children) and spark_type(e.children[0]) in ("byte", "short")
