"""Delta file statistics from a Parquet footer (staging.stats_json)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mvsink.core.staging import stats_json

pytestmark = pytest.mark.unit


def _write(path: Path, table, **kw) -> str:
    import pyarrow.parquet as pq

    pq.write_table(table, path, **kw)
    return str(path)


def test_stats_json(tmp_path):
    import pyarrow as pa

    t = pa.table(
        {
            "i64": pa.array([5, None, -3, 10, 7], pa.int64()),
            "i32": pa.array([1, 2, 3, 4, 5], pa.int32()),
            "f": pa.array([1.5, None, 0.5, 2.0, None], pa.float64()),
            "f32": pa.array([1, 2, 3, 4, 5], pa.float32()),
            "b": pa.array([True, False, None, True, True]),
            "s": pa.array(["a", None, "c", "d", "e"]),
        }
    )
    rows, text = stats_json(_write(tmp_path / "a.parquet", t, row_group_size=3))
    assert rows == 5
    stats = json.loads(text)
    assert stats == {
        "numRecords": 5,
        "minValues": {"i64": -3, "i32": 1},
        "maxValues": {"i64": 10, "i32": 5},
        "nullCount": {"i64": 1, "i32": 0, "f": 2, "f32": 0, "b": 1},
    }


def test_stats_json_all_null_and_empty(tmp_path):
    import pyarrow as pa

    t = pa.table({"x": pa.array([None, None, None], pa.int64()), "y": pa.array([1, 2, 3], pa.int64())})
    rows, text = stats_json(_write(tmp_path / "n.parquet", t, row_group_size=2))
    assert rows == 3
    assert json.loads(text) == {
        "numRecords": 3,
        "minValues": {"y": 1},
        "maxValues": {"y": 3},
        "nullCount": {"x": 3, "y": 0},
    }
    rows, text = stats_json(_write(tmp_path / "e.parquet", t.slice(0, 0)))
    assert rows == 0
    assert json.loads(text)["numRecords"] == 0
    assert json.loads(text)["minValues"] == {}


def test_stats_json_after_struct_column(tmp_path):
    import pyarrow as pa

    t = pa.table(
        {"s": pa.array([{"a": 100, "b": 200}, {"a": 101, "b": 201}]), "_mv_time": pa.array([1, 2], pa.int64())}
    )
    _, text = stats_json(_write(tmp_path / "s.parquet", t))
    stats = json.loads(text)
    assert stats["minValues"] == {"_mv_time": 1}
    assert stats["maxValues"] == {"_mv_time": 2}


def test_stats_json_without_statistics_claims_no_null_count(tmp_path):
    import pyarrow as pa

    t = pa.table({"x": pa.array([1, None], pa.int64())})
    _, text = stats_json(_write(tmp_path / "x.parquet", t, write_statistics=False))
    stats = json.loads(text)
    assert stats["minValues"] == {}
    assert stats["nullCount"].get("x") in (None, 1)  # unknown or exact, never a false 0
