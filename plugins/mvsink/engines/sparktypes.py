"""Spark's types as its analysed plans print them (``integer``, ``decimal(12,2)``), and what is exact between them:
the types DuckDB computes alike, a literal's exact value, a value that fits a type, a widening
(:mod:`mvsink.engines.duckdbsql` judges expressions with them)."""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal, InvalidOperation, localcontext
from typing import Any, Final

from mvsink.plan.tree import PlanExpr

# Digits of the largest value of an integral type, and digits every value with that many digits fits in.
_INTEGRAL_DIGITS: Final = {"byte": 3, "short": 5, "integer": 10, "long": 19}
_INTEGRAL_SAFE: Final = {"byte": 2, "short": 4, "integer": 9, "long": 18}
_INTEGRAL_RANGE: Final = {"byte": 2**7, "short": 2**15, "integer": 2**31, "long": 2**63}
# Spark's decimal of an integral type (a cast to it is exact), as Spark widens them.
_INTEGRAL_DECIMAL: Final = {"byte": 3, "short": 5, "integer": 10, "long": 20}
_PLAIN: Final = frozenset({"date", "string", "boolean"})
_DECIMAL = re.compile(r"decimal\((\d+),\s*(\d+)\)")
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
MAX_PRECISION: Final = 38


def _allowed(t: Any, *, literal: bool = False) -> str:
    if not isinstance(t, str):
        return "!a column of unknown type"
    if t in _INTEGRAL_DIGITS or t in _PLAIN or _DECIMAL.fullmatch(t) or (literal and t == "void"):
        return t.replace(" ", "")
    return f"!the type {t}"


def _decimal(t: str) -> tuple[int, int] | None:
    """(precision, scale) of a decimal type, else None."""
    m = _DECIMAL.fullmatch(t)
    return (int(m.group(1)), int(m.group(2))) if m else None


def _literal_value(e: PlanExpr) -> Decimal | None:
    """The exact value of a numeric literal (as the plan prints it), else None."""
    if e.name != "Literal" or e.attrs.get("value") is None:
        return None
    try:
        v = Decimal(str(e.attrs["value"]))
    except InvalidOperation:
        return None
    return v if v.is_finite() else None


def _fits(v: Decimal, target: str) -> bool:
    """Whether ``v`` is a value of ``target`` exactly (no rounding, no overflow)."""
    if target in _INTEGRAL_RANGE:
        return v == v.to_integral_value() and -_INTEGRAL_RANGE[target] <= v < _INTEGRAL_RANGE[target]
    d = _decimal(target)
    if d is None:
        return False
    p, s = d
    with localcontext() as ctx:
        ctx.prec = 4 * MAX_PRECISION
        return abs(v) < Decimal(10) ** (p - s) and v == v.quantize(Decimal(1).scaleb(-s))


def _iso_date(s: str) -> bool:
    if not _ISO_DATE.fullmatch(s):
        return False
    try:
        dt.date.fromisoformat(s)
    except ValueError:
        return False
    return True


def _exact(child: str, target: str) -> bool:
    """Whether every value of ``child`` is a value of ``target`` (an exact widening)."""
    have, want = _decimal(child), _decimal(target)
    if child in _INTEGRAL_DIGITS:
        if target in _INTEGRAL_SAFE:
            return _INTEGRAL_DIGITS[child] <= _INTEGRAL_SAFE[target]
        return want is not None and want[0] - want[1] >= _INTEGRAL_DECIMAL[child]
    if have is None:
        return False
    if target in _INTEGRAL_SAFE:
        return have[1] == 0 and have[0] <= _INTEGRAL_SAFE[target]
    return want is not None and want[0] - want[1] >= have[0] - have[1] and want[1] >= have[1]


def _cast(e: PlanExpr, child: str) -> str:
    """A cast's target where both engines give the same value: proven by the value of a literal, or by the types
    (a widening); anything else (a cast that rounds, parses or formats) is refused."""
    target = _allowed(e.attrs.get("type"))
    if target.startswith("!"):
        return target
    if target == child or child == "void":
        return target
    inner = e.children[0]
    value = _literal_value(inner)
    if value is not None and (child in _INTEGRAL_DIGITS or _decimal(child)):
        return target if _fits(value, target) else f"!a cast of the literal {value} to {target} that may round"
    if inner.name == "Literal" and child == "string" and target == "date":  # only 'YYYY-MM-DD', parsed alike
        return target if _iso_date(str(inner.attrs.get("value"))) else "!a cast of a string to a date"
    if _exact(child, target):
        return target
    return f"!a cast from {child} to {target} that may round (or differ)"
