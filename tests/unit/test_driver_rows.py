"""The driver-side helpers of the incremental modes (spark/driver.py): row keys, consolidation, corrections."""

from __future__ import annotations

import math
from decimal import Decimal

import pyarrow as pa
import pytest

from mvsink.spark.driver import consolidated, matching, row_corrections, row_key

pytestmark = pytest.mark.unit

SCHEMA = pa.schema(
    [
        pa.field("k", pa.string()),
        pa.field("x", pa.float64()),
        pa.field("d", pa.decimal128(5, 2)),
        pa.field("_mv_time", pa.int64()),
        pa.field("_mv_diff", pa.int64()),
    ]
)
USER = pa.schema(list(SCHEMA)[:3])


def _rows(rows: list[tuple[object, ...]], *, diff: bool = False) -> pa.Table:
    schema = pa.schema([*USER, pa.field("_mv_diff", pa.int64())]) if diff else USER
    return pa.Table.from_pylist([dict(zip(schema.names, r)) for r in rows], schema=schema)


def test_row_key_groups_what_spark_groups():
    assert row_key(float("nan")) == row_key(float("nan"))
    assert row_key((1, float("nan"))) == row_key((1, float("nan")))
    assert hash(row_key((-0.0, None))) == hash(row_key((0.0, None))) and row_key((-0.0,)) == row_key((0.0,))
    assert row_key({"a": [1, {"b": 2}]}) == (("a", (1, (("b", 2),))),)
    assert row_key([("m", 1)]) == (("m", 1),)  # a map's entries
    assert row_key((None,)) != row_key((0,))


def test_row_corrections_count_rows_both_sides():
    desired = _rows(
        [("a", 1.0, Decimal("1.00")), ("a", 1.0, Decimal("1.00")), ("b", None, None), ("n", math.nan, None)]
    )
    persisted = _rows(
        [("a", 1.0, Decimal("1.00"), 1), ("b", None, None, 1), ("c", 2.0, None, 2), ("n", math.nan, None, 1)],
        diff=True,
    )
    got = row_corrections(desired, persisted, SCHEMA, at=7)
    assert got.schema == SCHEMA
    assert sorted(got.to_pylist(), key=lambda r: r["k"]) == [
        {"k": "a", "x": 1.0, "d": Decimal("1.00"), "_mv_time": 7, "_mv_diff": 1},
        {"k": "c", "x": 2.0, "d": None, "_mv_time": 7, "_mv_diff": -2},
    ]


def test_row_corrections_match_columns_by_position_and_repair_damage():
    desired = _rows([("a", 1.0, None)]).rename_columns(["K", "X", "D"])
    persisted = _rows([("a", 1.0, None, 3), ("z", 0.0, None, -1)], diff=True)
    got = row_corrections(desired, persisted, SCHEMA, at=1)
    assert sorted((r["k"], r["_mv_diff"]) for r in got.to_pylist()) == [("a", -2), ("z", 1)]
    assert row_corrections(desired.slice(0, 0), persisted.slice(0, 0), SCHEMA, at=1).num_rows == 0


def test_consolidated_sums_rows_and_matches_keys_null_safely():
    rows = _rows(
        [
            ("a", 1.0, None, 1),
            ("a", 1.0, None, 1),
            (None, 2.0, None, 1),
            ("b", 3.0, None, 1),
            ("b", 3.0, None, -1),  # retracted: gone
            ("c", 4.0, None, 1),
        ],
        diff=True,
    )
    everything = consolidated(rows)
    assert sorted(everything.to_pylist(), key=lambda r: str(r["k"])) == [
        {"k": None, "x": 2.0, "d": None, "_mv_diff": 1},
        {"k": "a", "x": 1.0, "d": None, "_mv_diff": 2},
        {"k": "c", "x": 4.0, "d": None, "_mv_diff": 1},
    ]
    keys = pa.table({"k": pa.array([None, "a", "b"], pa.string())})
    some = consolidated(rows, keys=keys, key_columns=["k"])
    assert sorted((r["k"] or "", r["_mv_diff"]) for r in some.to_pylist()) == [("", 1), ("a", 2)]


def test_matching_keeps_rows_of_the_keys_only():
    rows = _rows([("a", 1.0, None), (None, 2.0, None), ("b", 3.0, None), ("a", 4.0, None)])
    keys = pa.table({"k": pa.array([None, "a"], pa.string()), "x": pa.array([2.0, 4.0])})
    got = matching(rows, keys, ["k", "x"])
    assert sorted((r["k"] or "", r["x"]) for r in got.to_pylist()) == [("", 2.0), ("a", 4.0)]
    assert matching(rows, keys, ["k"]).num_rows == 3
