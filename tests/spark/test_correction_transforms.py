"""The write step's pure DataFrame -> DataFrame functions, on the shared Spark session."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql import types as T

from mvsink.definitions.viewfile import parse_view
from mvsink.exceptions import QueryError
from mvsink.spark.transforms import consolidate, corrections, expand, null_safe_match
from mvsink.spark.validation import validate_output

pytestmark = pytest.mark.spark

SCHEMA = T.StructType([T.StructField("k", T.StringType()), T.StructField("v", T.IntegerType())])
UPDATES = T.StructType(
    [*SCHEMA.fields, T.StructField("_mv_time", T.LongType()), T.StructField("_mv_diff", T.LongType())]
)


def _rows(df):
    return Counter(tuple(r) for r in df.collect())


def test_corrections_count_duplicates_nulls_and_repair_damage(spark):
    desired = spark.createDataFrame([("a", 1), ("a", 1), (None, None), ("b", 2)], SCHEMA)
    persisted = spark.createDataFrame(
        [("a", 1, 1), (None, None, 1), ("c", 3, 2), ("b", 2, -1)],
        T.StructType([*SCHEMA.fields, T.StructField("_mv_diff", T.LongType())]),
    )
    out = corrections(desired, persisted, time=42)
    assert out.columns == ["k", "v", "_mv_time", "_mv_diff"]
    assert _rows(out) == Counter({("a", 1, 42, 1): 1, ("c", 3, 42, -2): 1, ("b", 2, 42, 2): 1})


def test_corrections_of_equal_sides_are_empty(spark):
    desired = spark.createDataFrame([("a", 1), (None, 2), (None, 2)], SCHEMA)
    persisted = spark.createDataFrame(
        [("a", 1, 1), (None, 2, 2)], T.StructType([*SCHEMA.fields, T.StructField("_mv_diff", T.LongType())])
    )
    assert corrections(desired, persisted, time=1).count() == 0


def test_consolidate_bounds_and_expand(spark):
    updates = spark.createDataFrame(
        [("a", 1, 10, 1), ("a", 1, 20, 2), ("b", 2, 10, 1), ("b", 2, 30, -1), ("c", 3, 10, 1), ("c", 3, 10, -1)],
        UPDATES,
    )
    assert _rows(consolidate(updates, ["k", "v"], before=20)) == Counter({("a", 1, 1): 1, ("b", 2, 1): 1})
    assert _rows(consolidate(updates, ["k", "v"], through=20)) == Counter({("a", 1, 3): 1, ("b", 2, 1): 1})
    assert _rows(consolidate(updates, ["k", "v"])) == Counter({("a", 1, 3): 1})
    assert _rows(expand(consolidate(updates, ["k", "v"], through=20))) == Counter({("a", 1): 3, ("b", 2): 1})


VIEW = parse_view(
    "name: v\nquery: SELECT * FROM s\nsources: {s: /tmp/s}\ntarget: /tmp/t\nas_of: 0\nkey: [k]\n",
    data_root=Path("/tmp"),
)


@pytest.mark.parametrize(
    ("sql", "needle"),
    [
        ("SELECT 1 AS _mv_x", "reserved"),
        ("SELECT map('a', 1) AS m", "MAP"),
        ("SELECT NULL AS n", "VOID"),
        ("SELECT array(map('a', 1)) AS m", "MAP"),
        ("SELECT 1 AS k, 2 AS K", "twice"),
        ("SELECT 1 + 1", "alias"),
        ("SELECT 1 AS x", "key column"),
    ],
)
def test_validate_output_refuses(spark, sql, needle):
    with pytest.raises(QueryError, match=needle) as info:
        validate_output(VIEW, spark.sql(sql).schema)
    assert "view v" in str(info.value) and "Fix:" in str(info.value)


def test_validate_output_accepts_nested_types(spark):
    validate_output(
        VIEW, spark.sql("SELECT 1 AS k, array(1, 2) AS a, named_struct('x', 1) AS s, current_date() AS d").schema
    )


def test_null_safe_match_pairs_nulls_and_odd_names(spark):
    left = spark.createDataFrame(
        [("a", 1), (None, 2), ("b", None), (None, None)],
        T.StructType([T.StructField("k`1", T.StringType()), T.StructField("v", T.IntegerType())]),
    )
    right = spark.createDataFrame(
        [("a", 1), (None, 2), ("b", 3), (None, None)],
        T.StructType([T.StructField("rk", T.StringType()), T.StructField("r.v", T.IntegerType())]),
    )
    got = left.join(right, null_safe_match(left, right, [("k`1", "rk"), ("v", "r.v")]), "left_semi")
    assert _rows(got) == Counter({("a", 1): 1, (None, 2): 1, (None, None): 1})  # ("b", NULL) vs ("b", 3): no
    with pytest.raises(ValueError, match="at least one"):
        null_safe_match(left, right, [])
