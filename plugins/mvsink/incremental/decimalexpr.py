"""Spark's decimal arithmetic over an aggregate view's finalised values, in Python (TPC-H Q14's
``100.00 * sum(...) / sum(...)``, Q8's ``sum(CASE ...) / sum(volume)``).

An aggregate view whose column is ``+ - * /`` over decimal SUMs and AVGs and numeric literals is finalised by Spark
over the affected groups' state, which costs a Spark session per refresh. This module computes such a column as
Spark 4 does, so the refresh can run without Spark (:mod:`mvsink.incremental.aggfacts`):

- **types** (``spark.sql.decimalOperations.allowPrecisionLoss=true``, the default): ``a ± b`` is
  DECIMAL(max(s1, s2) + max(p1 - s1, p2 - s2) + 1, max(s1, s2)), ``a * b`` DECIMAL(p1 + p2 + 1, s1 + s2),
  ``a / b`` DECIMAL(p1 - s1 + s2 + max(6, s1 + p2 + 1), max(6, s1 + p2 + 1)); beyond 38 digits the scale gives way
  to the integer digits but keeps at least min(s, 6) (``DecimalType.adjustPrecisionScale``). A literal ``100.00`` is
  DECIMAL(5, 2); an integer literal beside a decimal is the smallest DECIMAL(d, 0) holding it;
- **values** (``org.apache.spark.sql.types.Decimal``): a sum or difference is exact, a product truncated to 39
  significant digits, a quotient truncated to 39 decimal places (``divide(_, MAX_SCALE + 1, DOWN)``); then each
  node's value is rounded HALF_UP to its type's scale. A NULL operand gives NULL; a value beyond its type's
  precision or a division by zero raises in ANSI mode (:class:`Overflow`: the refresh then takes the full diff,
  where Spark raises its own error) and is NULL otherwise.

Expressions are kept as nested lists (JSON): ``["lit", "100.00"]``, ``["sum", i]``, ``["avg", i]``,
``[op, left, right]`` with ``op`` one of ``+ - * /``. The result type of the whole expression must equal the type
Spark's analysis gave the column, else the column is left to Spark.
"""

from __future__ import annotations

import decimal
import re
from collections.abc import Callable
from typing import Any, Final

__all__ = ["Overflow", "evaluate", "parse", "result_type"]

MAX_PRECISION: Final = 38
_MIN_ADJUSTED_SCALE: Final = 6
_EXACT = decimal.Context(prec=1000, rounding=decimal.ROUND_HALF_UP, Emax=10_000, Emin=-10_000)
_OPS: Final = ("+", "-", "*", "/")

Node = list[Any]
DecimalType = tuple[int, int]


class Overflow(ArithmeticError):
    """A value beyond its decimal type, or a division by zero, in ANSI mode: Spark raises."""


def parse(sql: str) -> Node | None:
    """The expression tree of a finalising Spark SQL expression (:mod:`mvsink.incremental.statequeries`'s, over
    ``_mv_final_sum(i)`` and ``_mv_final_avg(i)``), or None where it holds anything else."""
    import sqlglot
    from sqlglot import exp

    try:
        tree = sqlglot.parse_one(sql, read="spark")
    except sqlglot.errors.ParseError:
        return None

    def walk(node: Any) -> Node | None:
        if isinstance(node, exp.Paren):
            return walk(node.this)
        if isinstance(node, exp.Literal) and not node.is_string:
            text = node.this
            return ["lit", text] if re.fullmatch(r"\d+(\.\d+)?", text) else None
        if isinstance(node, exp.Anonymous):
            m = re.fullmatch(r"_mv_final_(sum|avg)", str(node.this), re.I)
            args = node.expressions
            if m and len(args) == 1 and isinstance(args[0], exp.Literal) and str(args[0].this).isdigit():
                return [m.group(1).lower(), int(args[0].this)]
            return None
        ops: dict[type, str] = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/"}
        op = ops.get(type(node))
        if op is None or not isinstance(node, exp.Binary):
            return None
        left, right = walk(node.left), walk(node.right)
        return None if left is None or right is None else [op, left, right]

    return walk(tree) if isinstance(tree, exp.Expression) else None


def _decimal(name: str | None) -> DecimalType | None:
    m = re.fullmatch(r"decimal\((\d+),\s*(\d+)\)", (name or "").strip().lower())
    return (int(m.group(1)), int(m.group(2))) if m else None


def _adjust(p: int, s: int) -> DecimalType:
    """``DecimalType.adjustPrecisionScale``."""
    if p <= MAX_PRECISION:
        return p, s
    int_digits = p - s
    min_scale = min(s, _MIN_ADJUSTED_SCALE)
    return MAX_PRECISION, max(MAX_PRECISION - int_digits, min_scale)


def _literal_type(text: str, *, beside_decimal: bool) -> DecimalType | None:
    if "." in text:
        whole, frac = text.split(".")
        digits = len((whole + frac).lstrip("0")) or 1
        s = len(frac)
        p = max(digits, s)
        return (p, s) if p <= MAX_PRECISION else None
    if not beside_decimal:
        return None
    digits = len(text.lstrip("0")) or 1
    return (digits, 0) if digits <= 18 else None


def result_type(node: Node, types: Callable[[str, int], str | None]) -> DecimalType | None:
    """Spark's type of ``node`` (``types(kind, i)``: Spark's SUM or AVG result type of argument ``i``), or None where
    an operand is not a decimal (or a literal beside one)."""
    return _type(node, types, beside_decimal=False)


def _type(node: Node, types: Callable[[str, int], str | None], *, beside_decimal: bool) -> DecimalType | None:
    kind = node[0]
    if kind == "lit":
        return _literal_type(str(node[1]), beside_decimal=beside_decimal)
    if kind in ("sum", "avg"):
        return _decimal(types(kind, int(node[1])))
    if kind not in _OPS:
        return None
    left_is_lit, right_is_lit = node[1][0] == "lit", node[2][0] == "lit"
    if left_is_lit and right_is_lit:
        return None  # (Spark folds it: left to Spark)
    a = _type(node[1], types, beside_decimal=not right_is_lit)
    b = _type(node[2], types, beside_decimal=not left_is_lit)
    if a is None or b is None:
        return None
    (p1, s1), (p2, s2) = a, b
    if kind in ("+", "-"):
        s = max(s1, s2)
        return _adjust(max(p1 - s1, p2 - s2) + s + 1, s)
    if kind == "*":
        return _adjust(p1 + p2 + 1, s1 + s2)
    scale = max(_MIN_ADJUSTED_SCALE, s1 + p2 + 1)
    return _adjust(p1 - s1 + s2 + scale, scale)


def evaluate(
    node: Node,
    value: Callable[[str, int], decimal.Decimal | None],
    types: Callable[[str, int], str | None],
    *,
    ansi: bool,
) -> decimal.Decimal | None:
    """``node``'s value as Spark computes it (``value(kind, i)``: the group's SUM or AVG of argument ``i``, None for
    NULL); :class:`Overflow` where Spark in ANSI mode raises."""
    got, _ = _eval(node, value, types, ansi=ansi, beside_decimal=False)
    return got


def _eval(
    node: Node,
    value: Callable[[str, int], decimal.Decimal | None],
    types: Callable[[str, int], str | None],
    *,
    ansi: bool,
    beside_decimal: bool,
) -> tuple[decimal.Decimal | None, DecimalType]:
    t = _type(node, types, beside_decimal=beside_decimal)
    if t is None:
        raise ValueError(f"not a decimal expression: {node!r}")
    kind = node[0]
    if kind == "lit":
        return decimal.Decimal(str(node[1])), t
    if kind in ("sum", "avg"):
        return value(kind, int(node[1])), t
    left_is_lit, right_is_lit = node[1][0] == "lit", node[2][0] == "lit"
    a, _ = _eval(node[1], value, types, ansi=ansi, beside_decimal=not right_is_lit)
    b, _ = _eval(node[2], value, types, ansi=ansi, beside_decimal=not left_is_lit)
    if a is None or b is None:
        return None, t
    if kind == "+":
        exact = _EXACT.add(a, b)
    elif kind == "-":
        exact = _EXACT.subtract(a, b)
    elif kind == "*":
        exact = decimal.Context(prec=MAX_PRECISION + 1, rounding=decimal.ROUND_DOWN).multiply(a, b)
    else:
        if b == 0:
            if ansi:
                raise Overflow("division by zero")
            return None, t
        exact = _quotient(a, b, MAX_PRECISION + 1)
    return _to_type(exact, t, ansi=ansi), t


def _quotient(a: decimal.Decimal, b: decimal.Decimal, places: int) -> decimal.Decimal:
    """``a / b`` truncated (toward zero) to ``places`` decimal places, exactly (integer arithmetic)."""
    sa, ta, ea = a.as_tuple()
    sb, tb, eb = b.as_tuple()
    assert isinstance(ea, int) and isinstance(eb, int)
    ia = int("".join(map(str, ta)) or "0")
    ib = int("".join(map(str, tb)) or "0")
    # a / b = (ia * 10**ea) / (ib * 10**eb); scaled by 10**places
    shift = ea - eb + places
    num, den = (ia * 10**shift, ib) if shift >= 0 else (ia, ib * 10**-shift)
    q = num // den
    negative = bool(sa) != bool(sb)
    return decimal.Decimal((1 if negative and q else 0, tuple(int(d) for d in str(q)), -places))


def _to_type(v: decimal.Decimal, t: DecimalType, *, ansi: bool) -> decimal.Decimal | None:
    """``Decimal.toPrecision(p, s, ROUND_HALF_UP)``: rounded to scale s; None (or :class:`Overflow` in ANSI mode)
    beyond p digits."""
    p, s = t
    rounded = v.quantize(decimal.Decimal(1).scaleb(-s), rounding=decimal.ROUND_HALF_UP, context=_EXACT)
    digits = len(rounded.as_tuple().digits)
    if rounded != 0 and digits > p:
        if ansi:
            raise Overflow(f"a value beyond DECIMAL({p},{s})")
        return None
    return rounded
