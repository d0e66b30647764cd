"""How sources are read: a snapshot of plain Parquet files as its file list (partition values from the log; a
pruned read only the files the log's statistics keep), anything else by Delta's reader, whose filters reach
Delta's per-file statistics (data skipping); the change read picks the change data feed where it is on."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from mvsink.core.batch import SourceRead
from mvsink.core.deltalog import change_set, snapshot_cache
from mvsink.incremental import keyreads, pruning
from mvsink.incremental.linear import change_frames
from mvsink.location import parse
from mvsink.spark.sources import delta_reader, plain_files, read_delta

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


def _reads_delta(df) -> bool:
    """Is the DataFrame's scan Delta's (its file index Delta's), not a plain Parquet file list?"""
    return "DeltaFileIndex" in df._jdf.queryExecution().sparkPlan().toString()


def test_a_key_filter_through_deltas_reader_skips_files_by_their_statistics(spark, tmp_path, monkeypatch):
    monkeypatch.setenv("MVSINK_SOURCE_READS", "delta")
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


def test_a_plain_snapshot_is_read_as_its_file_list_and_a_pruned_read_skips_files(spark, tmp_path):
    path = str(tmp_path / "src")
    _ten_files(path, cdf=False)
    with snapshot_cache():
        df = read_delta(spark, path, version=9, role="test")
        assert not _reads_delta(df)
        assert _files_read(df) == 10
        assert sorted(df.inputFiles()) == sorted(f"file://{p}" for p in DeltaTable(path).file_uris())
        assert _files_read(read_delta(spark, path, version=3, role="test")) == 4
        # a term's read pruned by keys 250 and 310-420: the log's min/max keep files 2, 3 and 4 only
        keys = keyreads.key_ranges([250, *range(310, 421)], max_ranges=2)
        est = pruning.estimate(path, 9, [("id", keys)])
        assert est is not None and est[0] == 3 and len(est[4]) == 3
        r = pruning.PrunedRead("src", (("id", keys),), *est)
        pruned = r.frame(spark, SourceRead(name="src", kind="table", path=path, version=9), 9, df)
        assert _files_read(pruned) == 3
        assert sorted(x["id"] for x in pruned.collect()) == [250, *range(310, 421)]


@pytest.mark.parametrize("keys", [[250, *range(310, 421)], list(range(250, 2000, 3))])
def test_a_pruned_reads_keys_are_read_in_the_driver_as_spark_collects_them(spark, tmp_path, keys):
    """Chained keys (a pruned read's other column) come from its kept files with pyarrow, the same set Spark
    collects from the pruned frame: exact list (<= 1,000 keys) and ranges only (more)."""
    path = str(tmp_path / "src")
    _ten_files(path, cdf=False)
    with snapshot_cache():
        ranges = keyreads.key_ranges(keys, max_ranges=2)
        assert (ranges.values is None) is (len(keys) > keyreads.MAX_INLINE)
        est = pruning.estimate(path, 9, [("id", ranges)])
        assert est is not None
        r = pruning.PrunedRead("src", (("id", ranges),), *est)
        s = SourceRead(name="src", kind="table", path=path, version=9)
        frame = r.frame(spark, s, 9, read_delta(spark, path, version=9, role="test"))
        spark_keys = sorted({row["v"] for row in frame.collect()})
        tp = pruning.TermPruning.__new__(pruning.TermPruning)
        tp.sources, tp.edges, tp._files = {"src": s}, [], {}
        got = tp._read_keys(r, {"src": (lambda: frame, 9)}, ["v"])
        assert got is not None and sorted(got["v"]) == spark_keys
        ids = tp._read_keys(r, {"src": (lambda: frame, 9)}, ["id"])
        assert ids is not None and sorted(ids["id"]) == sorted(row["id"] for row in frame.collect())
        assert len(ids["id"]) == len([k for k in keys if k < 1000])


def test_a_snapshot_of_many_local_files_is_listed_without_a_spark_job(spark, tmp_path):
    """Over 32 paths Spark lists files in a job of its own; local files are looked up in the driver."""
    path = str(tmp_path / "src")
    for i in range(40):
        write_deltalake(path, pa.table({"id": pa.array([i], pa.int64())}), mode="append")
    tracker = spark.sparkContext.statusTracker()
    spark.sparkContext.setJobGroup("listing", "listing")
    try:
        with snapshot_cache():
            df = read_delta(spark, path, version=39, role="test")
        assert not _reads_delta(df)
        assert list(tracker.getJobIdsForGroup("listing")) == []
        assert spark.conf.get("spark.sql.sources.parallelPartitionDiscovery.threshold") == "32"
        assert sorted(r["id"] for r in df.collect()) == list(range(40))
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)  # no group again, as before the test
        spark.sparkContext.setLocalProperty("spark.job.description", None)


def _partitioned(path: str) -> None:
    """A table partitioned by a date and a string (NULL partitions too), then a column added by a later append
    (older files lack it)."""
    rows = pa.table(
        {
            "id": pa.array([1, 2, 3, 4], pa.int64()),
            "day": pa.array([dt.date(2026, 1, 1), dt.date(2026, 1, 2), None, dt.date(2026, 1, 1)]),
            "region": pa.array(["eu", None, "us", "us"]),
        }
    )
    write_deltalake(path, rows, partition_by=["day", "region"])
    more = pa.table(
        {
            "id": pa.array([5], pa.int64()),
            "day": pa.array([dt.date(2026, 1, 3)]),
            "region": pa.array(["eu"]),
            "note": pa.array(["new"]),
        }
    )
    write_deltalake(path, more, mode="append", schema_mode="merge")


def test_a_partitioned_snapshot_read_plain_equals_deltas_reader(spark, tmp_path, monkeypatch):
    path = str(tmp_path / "src")
    _partitioned(path)
    with snapshot_cache():
        files = plain_files(path, 1)
        assert files is not None and len({f.partition_values for f in files}) == 5
        df = read_delta(spark, path, version=1, role="test")
        assert not _reads_delta(df)
        ours = sorted(tuple(r) for r in df.select("id", "day", "region", "note").collect())
    assert ours == [
        (1, dt.date(2026, 1, 1), "eu", None),
        (2, dt.date(2026, 1, 2), None, None),
        (3, None, "us", None),
        (4, dt.date(2026, 1, 1), "us", None),
        (5, dt.date(2026, 1, 3), "eu", "new"),
    ]
    delta = delta_reader(spark, path, version=1)
    assert ours == sorted(tuple(r) for r in delta.select("id", "day", "region", "note").collect())
    assert [(f.name, f.dataType) for f in df.schema.fields] == [(f.name, f.dataType) for f in delta.schema.fields]
    # more partition values than MVSINK_PLAIN_READ_MAX_PARTITIONS, or MVSINK_SOURCE_READS=delta: Delta's reader
    for var, value in (("MVSINK_PLAIN_READ_MAX_PARTITIONS", "4"), ("MVSINK_SOURCE_READS", "delta")):
        with monkeypatch.context() as mp, snapshot_cache():
            mp.setenv(var, value)
            assert plain_files(path, 1) is None
            assert _reads_delta(read_delta(spark, path, version=1, role="test"))


def test_a_table_with_deletion_vectors_enabled_goes_through_deltas_reader(spark, tmp_path):
    path = str(tmp_path / "src")
    _ten_files(path, cdf=False)
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id % 10 = 3")
    version = DeltaTable(path).version()
    with snapshot_cache():
        assert plain_files(path, version) is None
        df = read_delta(spark, path, version=version, role="test")
        assert _reads_delta(df)
        assert df.count() == 900


def test_change_keys_are_read_in_the_driver_from_plain_change_files(tmp_path):
    path = str(tmp_path / "src")
    _ten_files(path, cdf=True)
    changes = change_set(path, 7, 9)
    assert not isinstance(changes, str)
    files = keyreads.ChangeFiles(tuple(changes.inserted + changes.deleted + changes.cdc), ())
    got = keyreads.keys_in_driver(files, ["id", "v"])
    assert got is not None
    assert sorted(got["id"]) == list(range(800, 1000)) and sorted(got["v"]) == list(range(7))
    # a partition column's values are in the log, a column no file has: Spark collects them instead
    assert keyreads.keys_in_driver(keyreads.ChangeFiles(files.files, ("v",)), ["v"]) is None
    assert keyreads.keys_in_driver(files, ["nope"]) is None
    # a file of a type pyarrow and Spark may give differently (a double): not in the driver
    odd = tmp_path / "odd.parquet"
    pq.write_table(pa.table({"id": pa.array([1.5])}), odd)
    one = dataclasses.replace(files.files[0], path=parse(str(odd)), size=odd.stat().st_size)
    assert keyreads.keys_in_driver(keyreads.ChangeFiles((one,), ()), ["id"]) is None


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
