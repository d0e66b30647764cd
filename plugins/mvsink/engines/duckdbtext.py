"""Spark SQL text translated for DuckDB (:func:`duckdb_sql`, with the decimal casts :func:`carried_casts` matches
in it written out), the Arrow schema DuckDB reads a source as (:func:`duckdb_schema`) and its results cast back to
Spark's types (:func:`as_spark_types`). What DuckDB evaluates as Spark does is :mod:`mvsink.engines.duckdbsql`'s
judgement, on Spark's analysed plan."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any

from mvsink.engines.duckdbsql import _COMPARISONS, CastPair, Comparison, Untranslatable, _plan_comparisons
from mvsink.engines.sparktypes import _INTEGRAL_RANGE, MAX_PRECISION, _iso_date

if TYPE_CHECKING:
    from collections.abc import Callable

    import pyarrow as pa
    from pyspark.sql.types import StructType

    from mvsink.plan.tree import PlanNode


def carried_casts(tree: PlanNode, spark_sql: str) -> dict[Comparison, CastPair]:
    """The comparisons of ``tree`` (Spark's analysed plan of ``spark_sql``) that compare columns at a decimal type
    rounding one of them, each matched with the one comparison of the same columns in the text, and each operand's
    cast; empty where there are none or any is not matched one to one (they stay refused)."""
    import sqlglot

    found: dict[Comparison, list[tuple[CastPair, bool]]] = {}
    _plan_comparisons(tree, found)
    rounding = {k: v for k, v in found.items() if any(r for _, r in v)}
    if not rounding or any(len(v) != 1 for v in rounding.values()):
        return {}
    try:
        text = sqlglot.parse_one(spark_sql, dialect="spark")
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError):
        return {}
    counts: dict[Comparison, int] = {}
    for node in text.walk():
        key = _text_comparison(node)
        if key is not None:
            counts[key] = counts.get(key, 0) + 1
    if not all(counts.get(k) == 1 for k in rounding):
        return {}
    return {k: v[0][0] for k, v in rounding.items()}


def _text_comparison(node: Any) -> Comparison | None:
    """The key of a comparison of two columns in sqlglot's tree of the query's text, else None."""
    from sqlglot import exp

    name = next((k for k, v in _COMPARISONS.items() if node.key == v), None)
    if name is None or not isinstance(node.this, exp.Column) or not isinstance(node.expression, exp.Column):
        return None
    return name, node.this.name.casefold(), node.expression.name.casefold()


def duckdb_sql(
    spark_sql: str,
    *,
    casts: Mapping[Comparison, CastPair] | None = None,
    average: tuple[int, int] | None = None,
    total: tuple[int, int] | None = None,
) -> str:
    """``spark_sql`` in DuckDB's dialect, or :class:`Untranslatable`. Spark's CAST stays a CAST (an invalid literal
    fails, as in ANSI Spark). ``casts``: comparisons whose operands get Spark's implicit decimal casts written out
    (:func:`carried_casts`). Refused: a backslash anywhere (Spark's string escapes are not DuckDB's), a number
    beyond a long (Spark's analyser turns ``i64 < 12345678901234567890`` into ``false``, even where i64 is NULL), a date
    literal or a string cast to a date other than ``'YYYY-MM-DD'`` (the parsers differ beyond it), a LIKE's ``ESCAPE``
    clause (Spark's plan does not carry the escape character that :func:`unsupported` would check). ``average``:
    the DECIMAL(p, s) every ``avg`` of the text averages, ``total``: the one every ``sum`` sums
    (:func:`mvsink.engines.duckdbsql.text_aggregates`), each written out as Spark computes it (:func:`exact_average`,
    :func:`exact_sum`); without them an ``avg`` or ``sum`` stays DuckDB's."""
    import sqlglot
    from sqlglot import exp

    if "\\" in spark_sql:
        raise Untranslatable("a backslash (string escapes differ)")
    tree = sqlglot.parse_one(spark_sql, dialect="spark")
    if any(isinstance(n, exp.Escape) for n in tree.walk()):  # (the plan does not carry a LIKE's escape character)
        raise Untranslatable("a LIKE with an ESCAPE clause")
    tree = tree.transform(
        lambda n: exp.Cast(this=n.this, to=n.args["to"]) if isinstance(n, exp.TryCast) else n, copy=False
    )
    for lit in tree.find_all(exp.Literal):  # Spark's analyser folds a long's comparison with a number beyond it
        if not lit.is_string and not _within_long(lit.this):  # (NULL rows included)
            raise Untranslatable(f"the number {lit.this} beyond a long")
    for cast in tree.find_all(exp.Cast):
        to = cast.args.get("to")
        if isinstance(to, exp.DataType) and to.is_type(exp.DataType.Type.DATE):
            lit = cast.this
            if isinstance(lit, exp.Literal) and lit.is_string and not _iso_date(lit.this):
                raise Untranslatable(f"the date {lit.this!r}")
    _written_out(tree, exp.Avg, average, exact_average)
    _written_out(tree, exp.Sum, total, exact_sum)
    if casts:
        for node in list(tree.walk()):
            pair = casts.get(_text_comparison(node))  # type: ignore[arg-type]
            for arg, to in zip(("this", "expression"), pair or (), strict=False):
                if to is not None:
                    node.set(arg, exp.Cast(this=node.args[arg], to=exp.DataType.build(to.upper(), dialect="duckdb")))
    return tree.sql(dialect="duckdb")


def _written_out(tree: Any, kind: Any, dec: tuple[int, int] | None, form: Callable[[str, int, int], str]) -> None:
    """Each ``kind`` (sqlglot's Avg or Sum) of ``tree`` replaced by ``form`` of its argument at ``dec`` (if given)."""
    import sqlglot
    from sqlglot import exp

    if dec is None:
        return
    for node in list(tree.find_all(kind)):
        if isinstance(node.this, exp.Distinct):
            raise Untranslatable(f"an aggregate over DISTINCT ({node.sql(dialect='spark')})")
        node.replace(sqlglot.parse_one(form(node.this.sql(dialect="duckdb"), *dec), dialect="duckdb"))


def exact_sum(x: str, precision: int, scale: int) -> str:
    """DuckDB SQL of Spark's ``sum(x)`` of a DECIMAL(``precision``, ``scale``) ``x``: DuckDB's exact sum cast to
    Spark's type, DECIMAL(p + 10, s) (at most 38 digits), which fails beyond it as ANSI Spark's sum does."""
    return f"CAST(sum({x}) AS DECIMAL({min(precision + 10, 38)},{scale}))"


def exact_average(x: str, precision: int, scale: int) -> str:
    """DuckDB SQL of Spark's ``avg(x)`` of a DECIMAL(``precision``, ``scale``) ``x`` (read as DECIMAL(38, scale)):
    NULL over no non-null value, else the sum divided by the count rounded HALF_UP at scale + 4
    (``DecimalDivideWithOverflowCheck``), in 128-bit integers from the sum's unscaled value (its text without the
    point, exact), as :mod:`mvsink.incremental.duckdbagg` finalises it. The sum is cast to Spark's buffer,
    DECIMAL(p + 10, s): beyond it the cast fails, as ANSI Spark's sum does (a cast, not DuckDB's ``error()``, which
    is volatile and keeps DuckDB's optimiser from decorrelating a subquery: TPC-H Q17's took 4 s instead of
    0.02 s). DuckDB's own AVG goes through DOUBLE."""
    n = f"CAST(count({x}) AS HUGEINT)"
    u = f"CAST(replace(CAST({exact_sum(x, precision, scale)} AS VARCHAR), '.', '') AS HUGEINT)"
    rounded = f"sign({u}) * ((abs({u}) * 20000 + {n}) // (2 * {n}))"
    unit = "0." + "0" * (scale + 3) + "1"
    return (
        f"(CASE WHEN {n} = 0 THEN NULL "
        f"ELSE CAST({rounded} AS DECIMAL(38,0)) * CAST('{unit}' AS DECIMAL({scale + 5},{scale + 4})) END)"
    )


def _within_long(number: str) -> bool:
    try:
        return abs(Decimal(number)) < _INTEGRAL_RANGE["long"]
    except InvalidOperation:
        return False


def duckdb_schema(schema: StructType, columns: set[str] | None, timezone: str) -> pa.Schema:
    """The Arrow schema DuckDB reads a source as: Spark's ``schema`` (its ``columns`` only, casefolded; None:
    all), with the session ``timezone`` for timestamps, and every decimal as DECIMAL(38, its scale) (an exact
    widening, so DuckDB's decimal arithmetic keeps Spark's scale without its DECIMAL(18) overflow)."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_type

    fields = []
    for f in schema.fields:
        if columns is not None and f.name.casefold() not in columns:
            continue
        t = to_arrow_type(f.dataType, timezone=timezone)
        if pa.types.is_decimal(t):
            t = pa.decimal128(MAX_PRECISION, t.scale)
        fields.append(pa.field(f.name, t, f.nullable))
    return pa.schema(fields)


def as_spark_types(table: pa.Table, schema: pa.Schema) -> pa.Table | str:
    """DuckDB's ``table`` cast to Spark's ``schema``, or why it does not cast exactly: the same types, but a decimal
    of Spark's scale at another precision, an integer of another width (DuckDB's year is a BIGINT) and a string view;
    a value out of the type's range fails."""
    import pyarrow as pa

    from mvsink.engines.arrow import without_view_types

    table = without_view_types(table)
    for have, want in zip(table.schema, schema, strict=True):
        if have.type == want.type:
            continue
        if pa.types.is_decimal(have.type) and pa.types.is_decimal(want.type) and have.type.scale == want.type.scale:
            continue
        if pa.types.is_integer(have.type) and pa.types.is_integer(want.type):  # (a year: DuckDB's BIGINT)
            continue
        return f"DuckDB's type {have.type} of {want.name!r} is not Spark's {want.type}"
    try:
        return table.cast(pa.schema([w.with_nullable(True) for w in schema]))
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
        return f"a value does not fit Spark's type ({exc})"
