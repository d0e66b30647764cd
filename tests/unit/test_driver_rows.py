"""The driver-side helpers of the incremental modes (engines/duckdb.py): row keys, consolidation, corrections."""

from __future__ import annotations

import math
from decimal import Decimal

import pyarrow as pa
import pytest

from mvsink.engines.arrow import full_corrections, row_corrections, row_key
from mvsink.engines.duckdb import consolidated, matching

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


def _brute_force(desired: pa.Table, updates: pa.Table) -> dict[tuple[object, ...], int]:
    """Per distinct row (NaN = NaN, -0.0 = 0.0): desired's count minus the updates' summed diffs, zeros dropped."""
    total: dict[object, int] = {}
    for r in desired.to_pylist():
        k = row_key(tuple(r.values()))
        total[k] = total.get(k, 0) + 1
    for r in updates.to_pylist():
        d = r.pop("_mv_diff")
        k = row_key(tuple(r.values()))
        total[k] = total.get(k, 0) - d
    return {k: v for k, v in total.items() if v}


def _as_counts(corr: pa.Table) -> dict[tuple[object, ...], int]:
    out: dict[object, int] = {}
    for r in corr.to_pylist():
        r.pop("_mv_time")
        k = row_key(tuple(v for c, v in r.items() if c != "_mv_diff"))
        assert k not in out, (k, corr)  # one correction per distinct row
        out[k] = r["_mv_diff"]
    return out


@pytest.mark.parametrize("exact", [True, False])
def test_full_corrections_equal_a_brute_force_count(exact):
    """Randomised tables with duplicates, NULLs and unconsolidated updates (a row added twice, retracted once);
    floats (NaN, -0.0) only where the path is not exact, as the caller decides from the Spark types."""
    import random

    rng = random.Random(3 if exact else 4)
    xs = [1.5, 2.0, None] if exact else [1.5, 0.0, -0.0, math.nan, None]
    for _ in range(30):
        rows = [(rng.choice(["a", "b", None]), rng.choice(xs), rng.choice([Decimal("1.00"), None])) for _ in range(12)]
        desired = _rows(rng.sample(rows, 8))
        updates = _rows([(*r, rng.choice([1, 1, 2, -1])) for r in rng.sample(rows, 9)], diff=True)
        got = full_corrections(desired, updates, SCHEMA, at=9, exact=exact)
        assert got.schema == SCHEMA
        assert set(got.column("_mv_time").to_pylist()) <= {9}
        assert _as_counts(got) == _brute_force(desired, updates)


def test_full_corrections_of_nested_rows_and_empty_sides():
    """Structs and arrays of exact types (DuckDB sums them); an empty table gives the desired rows, an empty
    result retracts the table's rows."""
    schema = pa.schema(
        [
            pa.field("s", pa.struct([pa.field("t", pa.string()), pa.field("n", pa.int32())])),
            pa.field("arr", pa.list_(pa.int64())),
            pa.field("_mv_time", pa.int64()),
            pa.field("_mv_diff", pa.int64()),
        ]
    )
    user = pa.schema(list(schema)[:2])
    with_diff = pa.schema([*user, pa.field("_mv_diff", pa.int64())])
    desired = pa.Table.from_pylist(
        [{"s": {"t": "a", "n": 1}, "arr": [1, 2]}, {"s": {"t": "a", "n": 1}, "arr": [1, 2]}, {"s": None, "arr": None}],
        schema=user,
    )
    updates = pa.Table.from_pylist(
        [
            {"s": {"t": "a", "n": 1}, "arr": [1, 2], "_mv_diff": 1},
            {"s": {"t": "a", "n": 1}, "arr": [2, 1], "_mv_diff": 1},
            {"s": None, "arr": None, "_mv_diff": 1},
        ],
        schema=with_diff,
    )
    got = full_corrections(desired, updates, schema, at=5, exact=True)
    assert sorted(got.to_pylist(), key=lambda r: r["_mv_diff"]) == [
        {"s": {"t": "a", "n": 1}, "arr": [2, 1], "_mv_time": 5, "_mv_diff": -1},
        {"s": {"t": "a", "n": 1}, "arr": [1, 2], "_mv_time": 5, "_mv_diff": 1},
    ]
    none = with_diff.empty_table()
    assert full_corrections(desired, none, schema, at=5, exact=True).num_rows == 2
    gone = full_corrections(user.empty_table(), updates, schema, at=5, exact=True)
    assert sorted(gone.column("_mv_diff").to_pylist()) == [-1, -1, -1]


def test_duckdb_reads_parquet_files_exactly_or_not_at_all(tmp_path):
    """``parquet_relation``: DuckDB's read of local files as the table's schema where every file's column is the
    schema's type or an exact widening of it (rows equal pyarrow's read, cast); else None (pyarrow reads)."""
    import duckdb
    import pyarrow.parquet as pq

    from mvsink.engines.duckdb import parquet_relation
    from mvsink.location import parse

    a = pa.table(
        {
            "k": pa.array([1, 2, None], pa.int32()),
            "d": pa.array([Decimal("1.50"), None, Decimal("-2.25")], pa.decimal128(5, 2)),
            "s": pa.array(["é", "", None], pa.string()),
        }
    )
    b = pa.table(
        {
            "k": pa.array([2**40], pa.int64()),
            "d": pa.array([Decimal("99999.99")], pa.decimal128(7, 2)),
            "s": pa.array(["z"], pa.large_string()),
            "extra": pa.array([True]),
        }
    )
    pq.write_table(a, tmp_path / "a.parquet")
    pq.write_table(b, tmp_path / "b.parquet")
    paths = [parse(str(tmp_path / "a.parquet")), parse("file://" + str(tmp_path / "b.parquet"))]
    want = pa.schema([("key", pa.int64()), ("d", pa.decimal128(9, 2)), ("s", pa.string())])
    columns = [("key", "k"), ("d", "d"), ("s", "s")]
    rel = parquet_relation(paths, columns, want)
    assert rel is not None
    got = duckdb.sql(f"SELECT * FROM {rel}").to_arrow_table().cast(want)
    expected = pa.concat_tables([t.select(["k", "d", "s"]).rename_columns(want.names).cast(want) for t in (a, b)])
    assert sorted(got.to_pylist(), key=str) == sorted(expected.to_pylist(), key=str)
    # narrowing (int64 into int32), another decimal scale, a missing column, a remote file, an unread type
    assert parquet_relation(paths, columns, want.set(0, pa.field("key", pa.int32()))) is None
    assert parquet_relation(paths, columns, want.set(1, pa.field("d", pa.decimal128(9, 3)))) is None
    assert parquet_relation(paths, [*columns, ("e", "extra")], want.append(pa.field("e", pa.bool_()))) is None
    assert parquet_relation([parse("s3://bucket/a.parquet")], columns, want) is None
    assert parquet_relation(paths[:1], [("d", "d")], pa.schema([("d", pa.float64())])) is None
    assert parquet_relation([], columns, want) is None
