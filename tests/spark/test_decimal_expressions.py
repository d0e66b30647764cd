"""Spark's decimal arithmetic in Python (incremental/decimalexpr.py) against Spark itself: random expression trees of
``+ - * /`` over decimal columns of random types and numeric literals, each evaluated by Spark over random values
(HALF_UP ties, values near their type's limits, zeros) and by Python. The result type must be the type Spark's
analysis gives, and every value equal (NULL where Spark gives NULL: an overflow or a division by zero with ANSI
off); with ANSI on, Python raises where Spark raises."""

from __future__ import annotations

import decimal
import random
import re

import pytest

from mvsink.incremental.decimalexpr import Overflow, evaluate, parse, result_type

pytestmark = pytest.mark.spark

LITERALS = ("100.00", "2", "1", "0.05", "1.0", "12.345", "7")


def _tree(rng: random.Random, depth: int, columns: int) -> str:
    if depth == 0 or rng.random() < 0.25:
        return f"_mv_final_sum({rng.randrange(columns)})"
    op = rng.choice("+-*/")
    left, right = _tree(rng, depth - 1, columns), _tree(rng, depth - 1, columns)
    if rng.random() < 0.3:
        left = rng.choice(LITERALS)  # (a literal beside an expression of columns)
    return f"({left} {op} {right})"


def _value(rng: random.Random, p: int, s: int) -> decimal.Decimal | None:
    r = rng.random()
    if r < 0.05:
        return None
    if r < 0.12:
        return decimal.Decimal(0).scaleb(-s)
    digits = rng.randrange(1, p + 1) if rng.random() < 0.7 else p  # (often at the type's limit)
    unscaled = rng.randrange(10 ** (digits - 1), 10**digits) * rng.choice((1, -1))
    if rng.random() < 0.2:
        unscaled = unscaled - unscaled % 10 + 5  # (a 5 in the last place: HALF_UP ties one level up)
    return decimal.Decimal(unscaled).scaleb(-s)


def _type(rng: random.Random) -> tuple[int, int]:
    p = rng.choice((5, 12, 15, 18, 22, 28, 38, rng.randrange(1, 39)))
    return p, rng.randrange(0, min(p, 10) + 1)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_python_decimal_arithmetic_is_sparks(spark, seed):
    from pyspark.sql.types import DecimalType, StructField, StructType

    rng = random.Random(seed)
    columns = 3
    types = [_type(rng) for _ in range(columns)]
    schema = StructType([StructField(f"c{i}", DecimalType(p, s)) for i, (p, s) in enumerate(types)])
    rows = [tuple(_value(rng, p, s) for p, s in types) for _ in range(400)]
    frame = spark.createDataFrame(rows, schema)
    frame.createOrReplaceTempView("decimal_values")
    type_of = {("sum", i): f"decimal({p},{s})" for i, (p, s) in enumerate(types)}

    def types_cb(kind: str, i: int) -> str | None:
        return type_of.get((kind, i))

    checked = 0
    seen: set[str] = set()
    for _ in range(25):
        sql = _tree(rng, rng.randrange(1, 4), columns)
        node = parse(sql)
        assert node is not None, sql
        spark_sql = re.sub(r"_mv_final_sum\((\d+)\)", r"c\1", sql)
        mine = result_type(node, types_cb)
        spark.conf.set("spark.sql.ansi.enabled", "false")
        try:
            got = spark.sql(f"SELECT {spark_sql} AS v FROM decimal_values")
            spark_type = got.schema["v"].dataType.simpleString()
            if mine is None:  # (refused: a literal beside a literal, a type Python does not derive)
                continue
            assert f"decimal({mine[0]},{mine[1]})" == spark_type, (sql, types)
            values = [r.v for r in got.collect()]
        finally:
            spark.conf.set("spark.sql.ansi.enabled", "true")
        for row, want in zip(rows, values, strict=True):
            py = evaluate(node, lambda kind, i, row=row: row[i], types_cb, ansi=False)
            assert py == want and (py is None) is (want is None), (sql, types, row, py, want)
            checked += 1
        seen.update(re.findall(r"[-+*/]|\d+\.\d+|(?<![(\d])\b\d+\b(?!\))", sql))
    assert checked > 2000
    assert {"+", "-", "*", "/"} <= seen and any("." in x for x in seen), seen  # (every operator, literals too)


def test_with_ansi_python_raises_where_spark_raises(spark):
    from pyspark.errors import ArithmeticException, SparkRuntimeException

    cases = [  # (expression over c0 DECIMAL(38, 0) and c1 DECIMAL(10, 2), c0, c1)
        ("_mv_final_sum(0) / _mv_final_sum(1)", "1", "0.00"),  # a division by zero
        ("_mv_final_sum(0) * _mv_final_sum(1)", "9" * 38, "99999999.99"),  # beyond DECIMAL(38, 2)
        ("_mv_final_sum(0) + _mv_final_sum(1)", "9" * 38, "1.00"),
        ("_mv_final_sum(0) / _mv_final_sum(1)", "7", "3.00"),  # (no error)
    ]
    type_of = {("sum", 0): "decimal(38,0)", ("sum", 1): "decimal(10,2)"}
    for sql, a, b in cases:
        node = parse(sql)
        assert node is not None
        spark_sql = re.sub(r"_mv_final_sum\((\d+)\)", r"c\1", sql)
        query = (
            f"SELECT {spark_sql} AS v FROM VALUES (CAST({a} AS DECIMAL(38,0)), CAST({b} AS DECIMAL(10,2))) AS t(c0, c1)"
        )
        values = {0: decimal.Decimal(a), 1: decimal.Decimal(b)}
        try:
            want = spark.sql(query).collect()[0].v
        except (ArithmeticException, SparkRuntimeException):
            with pytest.raises(Overflow):
                evaluate(node, lambda kind, i, values=values: values[i], lambda kind, i: type_of[kind, i], ansi=True)
        else:
            assert (
                evaluate(node, lambda kind, i, values=values: values[i], lambda kind, i: type_of[kind, i], ansi=True)
                == want
            )
