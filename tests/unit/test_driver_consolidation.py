"""Consolidation of small change sets in the driver (engines/duckdb.py): sums per row, and which types qualify."""

from __future__ import annotations

from decimal import Decimal

import pyarrow as pa
import pytest
from pyspark.sql import types as T

from mvsink.engines.arrow import same_equality
from mvsink.engines.duckdb import consolidated

pytestmark = pytest.mark.unit


def test_sums_per_row_drops_zero_sums_and_groups_nulls():
    rows = pa.table(
        {
            "k": pa.array(["a", "a", None, None, "b", "c"]),
            "d": pa.array([Decimal("1.10"), Decimal("1.10"), None, None, Decimal("2.00"), Decimal("3.00")]),
            "_mv_diff": pa.array([1, 1, 1, -1, 1, -1], pa.int64()),
        }
    )
    out = consolidated(rows)
    got = sorted(out.to_pylist(), key=lambda r: r["k"])
    assert got == [
        {"k": "a", "d": Decimal("1.10"), "_mv_diff": 2},
        {"k": "b", "d": Decimal("2.00"), "_mv_diff": 1},
        {"k": "c", "d": Decimal("3.00"), "_mv_diff": -1},
    ]
    assert out.schema.field("_mv_diff").type == pa.int64()


def test_nested_values_and_odd_column_names():
    rows = pa.table(
        {
            'a "b"': pa.array([[1, 2], [1, 2], [3]]),
            "s": pa.array([{"x": 1}, {"x": 1}, {"x": None}]),
            "_mv_diff": pa.array([1, -1, 2], pa.int64()),
        }
    )
    assert consolidated(rows).to_pylist() == [{'a "b"': [3], "s": {"x": None}, "_mv_diff": 2}]


def test_no_columns_sums_everything():
    rows = pa.table({"_mv_diff": pa.array([1, 1, -2], pa.int64())})
    assert consolidated(rows).num_rows == 0


@pytest.mark.parametrize(
    "dt,ok",
    [
        (T.LongType(), True),
        (T.DecimalType(38, 4), True),
        (T.StringType(), True),
        (T.StringType("UTF8_LCASE"), False),  # Spark groups 'A' with 'a'
        (T.TimestampType(), True),
        (T.DateType(), True),
        (T.DoubleType(), False),  # Spark groups -0.0 with 0.0 and NaN with NaN
        (T.FloatType(), False),
        (T.ArrayType(T.IntegerType()), True),
        (T.ArrayType(T.DoubleType()), False),
        (T.StructType([T.StructField("x", T.StringType()), T.StructField("y", T.DoubleType())]), False),
        (T.StructType([T.StructField("x", T.StringType())]), True),
        (T.DayTimeIntervalType(), False),
    ],
)
def test_same_equality(dt, ok):
    assert same_equality(dt) is ok


def test_rows_match_keys_nulls_included_whether_or_not_the_keys_hold_a_null():
    from mvsink.columns import DIFF
    from mvsink.engines.duckdb import _matching_keys, matching

    rows = pa.table({"k": pa.array([1, 2, None, 3], pa.int64()), "s": pa.array(["a", None, "c", "d"]), DIFF: [1] * 4})
    no_null = pa.table({"k": pa.array([2, 3], pa.int64()), "s": pa.array([None, "d"])})
    assert 'r."k" = d."k"' in _matching_keys(["k"], no_null)
    assert "IS NOT DISTINCT FROM" in _matching_keys(["s"], no_null)
    assert sorted(matching(rows, no_null, ["k"]).column("k").to_pylist()) == [2, 3]  # the NULL key matches none
    with_null = pa.table({"k": pa.array([None, 1], pa.int64())})
    assert "IS NOT DISTINCT FROM" in _matching_keys(["k"], with_null)
    assert sorted(matching(rows, with_null, ["k"]).column("s").to_pylist()) == ["a", "c"]
    both = matching(rows, no_null, ["k", "s"])  # the keys' NULL of "s" matches row 2's
    assert sorted(both.column("k").to_pylist()) == [2, 3]
    summed = consolidated(rows, keys=no_null, key_columns=["k"])
    assert sorted(summed.column("k").to_pylist()) == [2, 3]
