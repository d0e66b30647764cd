"""An aggregate's state finalised exactly as Spark's own aggregate: AVG of every decimal type, from (sum, count).

Spark's AVG of DECIMAL(p, s) rounds the exact quotient HALF_UP to DECIMAL(p + 4, s + 4) (bounded at 38; for
p <= 11 it averages as DOUBLE); ``sum / count`` in SQL rounds where the division's precision rule says instead (TPC-H Q1's
``avg(l_extendedprice * (1 - l_discount))``: 34062.94000000 against AVG's 34062.93999966). Both ways the state
is finalised — :func:`decimal_average` in the driver, :func:`average_sql` by Spark — are compared here with
Spark's AVG over real rows: random values of many decimal types, groups of random sizes, sums near the types'
limits, quotients that end in a 5, quotients whose rounding at scale 38 or 39 first would differ, overflow to
NULL; with ANSI off and on, and with ``spark.sql.decimalOperations.allowPrecisionLoss`` on and off.
"""

from __future__ import annotations

import decimal
import random
from decimal import Decimal

import pytest

from mvsink.incremental.statequeries import average_sql, decimal_average, decimal_type

pytestmark = pytest.mark.spark

LOSS = "spark.sql.decimalOperations.allowPrecisionLoss"
# (precision, scale) of the AVG's argument
TYPES = [
    (1, 0),
    (5, 0),
    (10, 1),
    (11, 4),
    (12, 2),
    (15, 2),
    (18, 6),
    (20, 3),
    (32, 4),
    (38, 0),
    (38, 10),
    (28, 24),
    (38, 33),
    (38, 34),
]


def _digits(rng: random.Random, p: int, s: int) -> int:
    """Unscaled digits of a group's values: mostly averages in range, now and then the type's limit."""
    avg_int = min(38, p + 4) - min(38, s + 4)  # the AVG's integer digits
    cap = min(p, max(1, avg_int - 1 + s))
    return min(p, rng.choice([1, 3, p // 2 or 1, min(cap, 30), cap, cap, p]))


def _value(rng: random.Random, digits: int, s: int) -> Decimal:
    unscaled = rng.randint(-(10**digits) + 1, 10**digits - 1)
    return Decimal(unscaled).scaleb(-s)


def _rounding_at_38_differs(rng: random.Random, s: int, limit: Decimal) -> tuple[Decimal, int] | None:
    """(sum, count) whose quotient rounds differently at scale 38 then ``s + 4`` than at 39 then ``s + 4``."""
    t = s + 4
    with decimal.localcontext() as ctx:
        ctx.prec = 200
        for _ in range(20_000):
            n = rng.randint(3, 40)
            total = Decimal(rng.randint(-(10**33), 10**33)).scaleb(-s)
            if abs(total) >= limit:
                continue
            exact = total / Decimal(n)
            at38 = exact.quantize(Decimal(1).scaleb(-38), decimal.ROUND_HALF_UP)
            if at38.quantize(Decimal(1).scaleb(-t), decimal.ROUND_HALF_UP) != exact.quantize(
                Decimal(1).scaleb(-39), decimal.ROUND_HALF_UP
            ).quantize(Decimal(1).scaleb(-t), decimal.ROUND_HALF_UP):
                return total, n
    return None


@pytest.mark.parametrize("ansi", ["false", "true"])
def test_every_decimal_average_from_state_is_sparks(spark, ansi):
    from pyspark.sql import functions as F

    rng = random.Random(33)
    rows: list[tuple[int, int, Decimal | None]] = []
    g = 0
    for k, (p, s) in enumerate(TYPES):
        for _ in range(14):
            n = rng.choice([1, 2, 3, 7, 9, 13, 16, 32, 40])  # (16, 32: quotients that end in a 5, ties)
            digits = _digits(rng, p, s)
            if ansi == "true":  # (an overflowing AVG is an error under ANSI: keep the averages in range)
                digits = min(digits, max(1, min(38, p + 4) - min(38, s + 4) - 1 + s))
            vals = [_value(rng, digits, s) for _ in range(n)]
            rows += [(k, g, v) for v in vals] + [(k, g, None)] * rng.choice([0, 0, 1])
            g += 1
        if s + 4 >= 37:  # where rounding HALF_UP at 38 or 39 first would differ (with few rows: t >= 37)
            got = _rounding_at_38_differs(rng, s, Decimal(10) ** (p - s))
            assert got is not None
            total, n = got
            rows += [(k, g, total)] + [(k, g, Decimal(0))] * (n - 1)
            g += 1
        rows.append((k, g, None))  # a group of NULLs only: AVG is NULL
        g += 1
    old = {key: spark.conf.get(key) for key in ("spark.sql.ansi.enabled", LOSS)}
    spark.conf.set("spark.sql.ansi.enabled", ansi)
    try:
        for k, (p, s) in enumerate(TYPES):
            part = [(gg, v) for kk, gg, v in rows if kk == k]
            df = spark.createDataFrame(part, f"g INT, v DECIMAL({p},{s})")
            agg = df.groupBy("g").agg(F.avg("v").alias("a"), F.sum("v").alias("s"), F.count("v").alias("n"))
            avg_type = agg.schema["a"].dataType.simpleString()
            sum_type = agg.schema["s"].dataType.simpleString()
            assert decimal_type(avg_type) == (min(38, p + 4), min(38, s + 4))
            ap, ascale = decimal_type(avg_type)  # type: ignore[misc]
            got = {r["g"]: (r["a"], r["s"], r["n"]) for r in agg.collect()}
            assert sum(1 for a, _, _ in got.values() if a is not None) >= 6, (p, s)
            # the driver, where no SQL is exact: Python's decimals (AVG of DECIMAL(p > 11, s); p <= 11 is a DOUBLE)
            for gg, (a, total, n) in got.items():
                if ap <= 15:
                    break
                if n and total is None:  # the sum overflowed (NULL): the state path takes the full diff then
                    assert a is None
                    continue
                mine = decimal_average(total, n, precision=ap, scale=ascale) if n else None
                assert mine == a, (p, s, gg, total, n, a, mine)
            # Spark SQL over the state, with either precision-loss rule of Spark's decimal arithmetic
            for loss in (True, False):
                shaped = average_sql("s", "n", sum_type=sum_type, avg_type=avg_type, precision_loss=loss)
                if shaped is None:  # refused: s > 34, or p > 11 without precision loss (Python's, or the full diff)
                    assert s > 34 or (not loss and p > 11), (p, s, loss)
                    continue
                spark.conf.set(LOSS, str(loss).lower())
                sql, bound = shaped
                fits = agg.where(F.col("s").isNull() | (F.abs("s") < F.lit(bound))) if bound < 10**38 else agg
                out = fits.selectExpr("g", f"CASE WHEN n > 0 THEN {sql} END AS a2", "a")
                assert out.schema["a2"].dataType == agg.schema["a"].dataType
                compared = out.collect()
                # (a sum beyond the bound: _merge_rows and _violations send it to the full diff)
                assert len(compared) >= 4, (p, s)
                for r in compared:
                    assert r["a2"] == r["a"], (p, s, loss, r["g"], got[r["g"]], r["a"], r["a2"])
    finally:
        for key, value in old.items():
            spark.conf.set(key, value)


def test_the_overflowing_average_is_null_as_sparks(spark):
    """AVG of DECIMAL(38, 0) values near the limit: the DECIMAL(38, 4) result overflows (NULL without ANSI)."""
    from pyspark.sql import functions as F

    big = Decimal(10) ** 36 * 9
    df = spark.createDataFrame([(1, big), (1, big)], "g INT, v DECIMAL(38,0)")
    old = spark.conf.get("spark.sql.ansi.enabled")
    spark.conf.set("spark.sql.ansi.enabled", "false")
    try:
        row = df.groupBy("g").agg(F.avg("v").alias("a"), F.sum("v").alias("s"), F.count("v").alias("n")).collect()[0]
    finally:
        spark.conf.set("spark.sql.ansi.enabled", old)
    assert row["a"] is None and row["s"] == 2 * big
    assert decimal_average(row["s"], row["n"], precision=38, scale=4) is None


@pytest.mark.unit
def test_averages_without_an_exact_spark_expression_are_refused():
    assert average_sql("s", "n", sum_type="decimal(38,35)", avg_type="decimal(38,38)") is None
    assert average_sql("s", "n", sum_type="bigint", avg_type="double") is None
    assert average_sql("s", "n", sum_type="decimal(38,4)", avg_type="decimal(36,8)", precision_loss=False) is None
    sql, bound = average_sql("s", "n", sum_type="decimal(38,4)", avg_type="decimal(36,8)") or ("", 0)
    assert "DECIMAL(34,4)" in sql and bound == 10**30
