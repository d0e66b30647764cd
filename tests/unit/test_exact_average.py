"""Spark's AVG of a decimal as DuckDB's text computes it for a correlated scalar subquery
(:func:`mvsink.engines.duckdbtext.exact_average`, used by the partitioned recompute in DuckDB), against Python's
reference of Spark's rule (:func:`~mvsink.incremental.statequeries.decimal_average`): random groups of either sign,
ties, no non-null value, and a sum past Spark's DECIMAL(p + 10, s) buffer failing. The differential test against
Spark itself is tests/spark/test_partitioned_duckdb.py."""

from __future__ import annotations

import random
from decimal import Decimal

import duckdb
import pyarrow as pa
import pytest

from mvsink.engines.duckdbtext import exact_average
from mvsink.incremental.statequeries import decimal_average

pytestmark = pytest.mark.unit


def _averages(groups: dict[int, list[Decimal | None]], *, precision: int, scale: int) -> dict[int, Decimal | None]:
    rows = [(g, x) for g, xs in groups.items() for x in xs]
    src = pa.table(
        {"g": pa.array([g for g, _ in rows], pa.int32()), "x": pa.array([x for _, x in rows], pa.decimal128(38, scale))}
    )
    con = duckdb.connect()
    con.register("src", src)
    got = con.sql(f"SELECT g, {exact_average('x', precision, scale)} AS a FROM src GROUP BY g").fetchall()
    return dict(got)


@pytest.mark.parametrize("seed", range(6))
def test_random_groups_equal_sparks_rule(seed: int) -> None:
    rng = random.Random(seed)
    precision, scale = rng.choice([(12, 0), (15, 2), (18, 4), (20, 2), (34, 6)])
    unit = Decimal(1).scaleb(-scale)
    top = 10 ** min(precision - scale, 12) - 1
    groups: dict[int, list[Decimal | None]] = {}
    for g in range(40):
        xs: list[Decimal | None] = [
            None if rng.random() < 0.1 else Decimal(rng.randint(-top, top)) * unit + Decimal(rng.randint(0, 99)) * unit
            for _ in range(rng.randint(1, 40))
        ]
        groups[g] = [None if x is None else max(min(x, Decimal(top)), Decimal(-top)) for x in xs]
    got = _averages(groups, precision=precision, scale=scale)
    for g, xs in groups.items():
        vals = [x for x in xs if x is not None]
        want = (
            decimal_average(sum(vals, Decimal(0)), len(vals), precision=precision + 4, scale=scale + 4)
            if vals
            else None
        )
        assert got[g] == want, (g, precision, scale, got[g], want)
        assert got[g] is None or got[g].as_tuple().exponent == -(scale + 4)  # (Spark's scale)


def test_ties_round_half_up_away_from_zero() -> None:
    got = _averages(
        {1: [Decimal("0.01")] + [Decimal(0)] * 31, 2: [Decimal("-0.01")] + [Decimal(0)] * 31, 3: [None, None]},
        precision=15,
        scale=2,
    )
    assert got == {1: Decimal("0.000313"), 2: Decimal("-0.000313"), 3: None}


def test_a_sum_past_sparks_buffer_fails() -> None:
    # DECIMAL(12, 2)'s AVG sums in DECIMAL(22, 2), below 10^20: a sum past it fails (as ANSI Spark's does), one
    # below it does not
    big = Decimal("6" + "0" * 19 + ".00")
    with pytest.raises(duckdb.ConversionException, match="out of range"):
        _averages({1: [big, big]}, precision=12, scale=2)
    assert _averages({1: [big, Decimal(0)]}, precision=12, scale=2) == {1: Decimal("30000000000000000000.000000")}
