"""Sources are read by Delta's reader: filters reach Delta's per-file statistics (data skipping), and the
change read picks the change data feed where it is on."""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from mvsink.core.deltalog import change_set, snapshot_cache
from mvsink.spark.incremental import change_frames
from mvsink.spark.sources import read_delta

pytestmark = pytest.mark.spark


def _files_read(df) -> int:
    """Files the query's scans read (Spark's numFiles metric of each file scan), after running it."""
    df.collect()
    leaves = df._jdf.queryExecution().executedPlan().collectLeaves()
    total = 0
    for i in range(leaves.size()):
        metrics = leaves.apply(i).metrics()
        if metrics.contains("numFiles"):
            total += int(metrics.apply("numFiles").value())
    return total


def _ten_files(path: str, *, cdf: bool) -> None:
    """Ten appends of 100 ids each (ids 0-999 in order): one file per append, disjoint min/max statistics."""
    for i in range(10):
        ids = list(range(i * 100, (i + 1) * 100))
        write_deltalake(
            path,
            pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array([x % 7 for x in ids], pa.int64())}),
            mode="append",
            configuration={"delta.enableChangeDataFeed": str(cdf).lower()} if i == 0 else None,
        )


def test_a_key_filter_on_a_source_skips_files_by_their_statistics(spark, tmp_path):
    path = str(tmp_path / "src")
    _ten_files(path, cdf=False)
    with snapshot_cache():
        df = read_delta(spark, path, version=9, role="test")
        assert _files_read(df) == 10
        assert _files_read(df.where("id = 250")) == 1
        # Delta skips by an IN list's smallest and largest value: files 0-2 overlap [5, 250]
        assert _files_read(df.where("id IN (5, 250)")) == 3
        assert _files_read(df.where("id BETWEEN 310 AND 420")) == 2
        assert sorted(r["id"] for r in df.where("id IN (5, 250)").collect()) == [5, 250]
        # an older version holds fewer files
        assert _files_read(read_delta(spark, path, version=3, role="test")) == 4


@pytest.mark.parametrize("cdf", [True, False])
def test_change_frames_between_two_versions(spark, tmp_path, cdf):
    """Inserts of versions 4..9 come back as inserted rows, from the change feed or from the added files."""
    path = str(tmp_path / "src")
    _ten_files(path, cdf=cdf)
    changes = change_set(path, 3, 9)
    assert not isinstance(changes, str), changes
    assert changes.change_data_feed is cdf
    schema = read_delta(spark, path, version=9, role="test").schema
    plus, minus = change_frames(spark, path, changes, schema, [], from_version=3, to_version=9, plain_files=True)
    assert sorted(r["id"] for r in plus.collect()) == list(range(400, 1000))
    assert minus.count() == 0
