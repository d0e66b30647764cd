"""core/deltalog: commit versions and times, one commit's actions, our batches, change sets.

Tables written with delta-rs (no Spark): plain, partitioned (values with a space, a slash and
NULL), with Change Data Feed; every change set is checked against what the table holds.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from deltalake.transaction import CommitProperties

from mvsink.core import deltalog
from mvsink.core.commitinfo import CommitInfo
from mvsink.core.table import version_at
from mvsink.exceptions import SourceError

from .legacy_commits import APPEND_COMMIT_FILE

pytestmark = pytest.mark.unit

BASE = 1_767_225_600_000
HOUR = 3_600_000
CDF = {"delta.enableChangeDataFeed": "true"}


def _rows(ids: list[int], part: list[str | None] | None = None) -> pa.Table:
    cols = {"id": pa.array(ids, pa.int64()), "qty": pa.array([i * 10 for i in ids], pa.int32())}
    if part is not None:
        cols["p"] = pa.array(part, pa.string())
    return pa.table(cols)


def _log(path: Path, version: int) -> Path:
    return path / "_delta_log" / f"{version:020d}.json"


def test_versions_and_commit_times_are_the_commit_files_mtimes(tmp_path):
    t = tmp_path / "t"
    assert not deltalog.is_delta_table(str(t)) and deltalog.commit_times(str(t)) == {}
    for i in range(3):
        write_deltalake(str(t), _rows([i]), mode="append")
        assert deltalog.set_commit_time(str(t), BASE + i * HOUR) == i
    assert deltalog.is_delta_table(str(t))
    assert deltalog.commit_times(str(t)) == {0: BASE, 1: BASE + HOUR, 2: BASE + 2 * HOUR}
    assert deltalog.set_commit_time(str(t), BASE + 30 * 60_000, version=1) == 1  # redate an older commit
    assert deltalog.commit_times(str(t))[1] == BASE + 30 * 60_000
    assert os.stat(_log(t, 1)).st_mtime_ns == (BASE + 30 * 60_000) * 1_000_000
    # time travel by the same rule
    assert version_at(str(t), BASE + 45 * 60_000, role="test") == 1
    assert version_at(str(t), BASE + 2 * HOUR, role="test") == 2
    with pytest.raises(SourceError, match="no version at or before"):
        version_at(str(t), BASE - 1, role="test")
    (t / "_delta_log" / "00000000000000000002.checkpoint.parquet").write_bytes(b"")  # not a commit file
    assert sorted(deltalog.commit_times(str(t))) == [0, 1, 2]


def test_one_commits_actions(tmp_path):
    t = tmp_path / "t"
    write_deltalake(str(t), _rows([1, 2]))
    DeltaTable(str(t)).delete("id = 1")
    c0, c1 = deltalog.read_commit(str(t), 0), deltalog.read_commit(str(t), 1)
    assert c0 is not None and c1 is not None
    assert c0.version == 0 and c0.timestamp == deltalog.commit_times(str(t))[0]
    assert c0.protocol is not None and c0.protocol["minReaderVersion"] >= 1
    assert c0.metadata is not None and json.loads(c0.metadata["schemaString"])["fields"][0]["name"] == "id"
    assert [a["path"] for a in c0.adds] == list(_sizes(t, 0))
    assert c0.commit_info["operation"] == "WRITE" and c0.info is None  # foreign: not one of ours
    assert c1.metadata is None and c1.protocol is None and not c1.cdc
    assert [r["path"] for r in c1.removes] == [a["path"] for a in c0.adds]
    assert [a["path"] for a in c1.adds] == list(_sizes(t, 1))
    assert deltalog.read_commit(str(t), 2) is None


def test_an_append_commit_of_ours_as_earlier_versions_wrote_it(tmp_path):
    t = tmp_path / "v"
    (t / "_delta_log").mkdir(parents=True)
    _log(t, 2).write_text(APPEND_COMMIT_FILE)
    c = deltalog.read_commit(str(t), 2)
    assert c is not None and c.info is not None
    assert c.info.operation == "append" and c.info.upper == 1767229200001
    assert c.transactions == {"mvsink:upper:v": 1767229200001}
    assert [a["size"] for a in c.adds] == [1309] and c.adds[0]["path"].startswith(f"batches/{c.info.batch_id}/")
    assert deltalog.batches_committed(str(t), [str(c.info.batch_id), "v__1_2__other"]) == {c.info.batch_id}


def test_batches_committed_reads_append_commits_from_a_time_on(tmp_path):
    t = tmp_path / "v"
    write_deltalake(str(t), _rows([1]))
    for i, (op, batch) in enumerate([("append", "b1"), ("bump", "b2"), ("append", "b3")], start=1):
        meta = CommitInfo(operation=op, view="v", batch_id=batch).to_metadata()
        write_deltalake(
            str(t), _rows([10 + i]), mode="append", commit_properties=CommitProperties(custom_metadata=meta)
        )
        deltalog.set_commit_time(str(t), BASE + i * HOUR)
    wanted = ["b1", "b2", "b3", "b4"]
    assert deltalog.batches_committed(str(t), wanted) == {"b1", "b3"}  # a bump appends no batch
    assert deltalog.batches_committed(str(t), wanted, committed_from_ms=BASE + 2 * HOUR) == {"b3"}
    assert deltalog.batches_committed(str(t), []) == set()
    assert deltalog.batches_committed(str(tmp_path / "none"), wanted) == set()


def _sizes(t: Path, version: int) -> dict[str, int]:
    acts = pa.table(DeltaTable(str(t), version=version).get_add_actions(flatten=True))
    return dict(zip(acts.column("path").to_pylist(), acts.column("size_bytes").to_pylist()))


def _read(files: list[deltalog.ChangeFile]) -> list[tuple]:
    """Rows of change files with their partition value (as Spark reads them: data + partition columns)."""
    import pyarrow.parquet as pq

    out = []
    for f in files:
        tab = pq.read_table(f.path)
        pv = dict(f.partition_values)
        for r in tab.to_pylist():
            out.append((r["id"], r["qty"], pv.get("p"), r.get("_change_type")))
    return sorted(out, key=repr)


def test_change_set_of_a_partitioned_copy_on_write_table(tmp_path):
    t = tmp_path / "t"
    write_deltalake(str(t), _rows([1, 2, 3], ["a b", "c/d", None]), partition_by=["p"])
    write_deltalake(str(t), _rows([4], ["a b"]), partition_by=["p"], mode="append")  # v1: insert
    DeltaTable(str(t)).delete("id = 2")  # v2: the c/d file removed
    DeltaTable(str(t)).update(updates={"qty": "99"}, predicate="id = 3")  # v3: the NULL partition rewritten
    cs = deltalog.change_set(str(t), 0, 3)
    assert not isinstance(cs, str) and not cs.cdc
    assert _read(cs.inserted) == sorted([(3, 99, None, None), (4, 40, "a b", None)], key=repr)
    assert _read(cs.deleted) == sorted([(2, 20, "c/d", None), (3, 30, None, None)], key=repr)
    for f in cs.inserted + cs.deleted:
        assert Path(f.path).is_file() and f.size == os.path.getsize(f.path)
    assert dict(cs.inserted[0].partition_values).keys() == {"p"}
    assert cs.bytes == sum(os.path.getsize(f.path) for f in cs.inserted + cs.deleted)
    # between other versions: only what those commits did
    one = deltalog.change_set(str(t), 1, 2)
    assert not isinstance(one, str) and not one.inserted and _read(one.deleted) == [(2, 20, "c/d", None)]
    assert deltalog.change_set(str(t), 3, 3) == deltalog.ChangeSet()


def test_change_set_prefers_change_data_feed_files(tmp_path):
    t = tmp_path / "t"
    write_deltalake(str(t), _rows([1, 2, 3], ["a b", "c/d", "c/d"]), partition_by=["p"], configuration=CDF)
    DeltaTable(str(t)).update(updates={"qty": "7"}, predicate="id = 1")  # v1: CDF files
    write_deltalake(str(t), _rows([5], ["a b"]), partition_by=["p"], mode="append")  # v2: a plain add
    cs = deltalog.change_set(str(t), 0, 2)
    assert not isinstance(cs, str)
    assert _read(cs.cdc) == sorted([(1, 7, "a b", "update_postimage"), (1, 10, "a b", "update_preimage")], key=repr)
    assert all(f.path.uri.startswith(str(t / "_change_data")) for f in cs.cdc)
    assert _read(cs.inserted) == [(5, 50, "a b", None)] and not cs.deleted  # v1's add/remove are not counted
    for f in cs.cdc:
        assert f.size == os.path.getsize(f.path)


def test_sizes_a_remove_does_not_record_come_from_the_add_actions(tmp_path):
    t = tmp_path / "t"
    write_deltalake(str(t), _rows([1, 2]))
    DeltaTable(str(t)).delete("id = 1")
    lines = [json.loads(x) for x in _log(t, 1).read_text().splitlines()]
    for a in lines:
        a.get("remove", {}).pop("size", None)  # optional in the Delta protocol
    _log(t, 1).write_text("\n".join(json.dumps(a) for a in lines) + "\n")
    cs = deltalog.change_set(str(t), 0, 1)
    assert not isinstance(cs, str) and len(cs.deleted) == 1
    assert cs.deleted[0].size == os.path.getsize(cs.deleted[0].path) == next(iter(_sizes(t, 0).values()))


def test_active_bytes_are_the_add_actions_sizes(tmp_path):
    t = tmp_path / "t"
    write_deltalake(str(t), _rows([1, 2]))
    write_deltalake(str(t), _rows([3]), mode="append")
    assert deltalog.active_bytes(str(t), 1) == sum(os.path.getsize(u) for u in DeltaTable(str(t)).file_uris())
    assert deltalog.active_bytes(str(t), 0) == sum(_sizes(t, 0).values()) > 0
    assert deltalog.active_bytes(str(tmp_path / "none"), 0) == 0


def test_change_sets_it_cannot_give_say_why(tmp_path):
    t = tmp_path / "t"
    write_deltalake(str(t), _rows([1]))
    write_deltalake(str(t), _rows([2]), mode="append")
    write_deltalake(
        str(t), _rows([3]).append_column("extra", pa.array(["x"])), mode="append", schema_mode="merge"
    )  # v2 changes the schema
    assert deltalog.change_set(str(t), 1, 2) == "commit 2 changed the table's schema or protocol"
    assert deltalog.change_set(str(t), 2, 5) == "commit 3 is no longer in the log"
    cs = deltalog.change_set(str(t), 0, 1)
    assert not isinstance(cs, str)
    Path(cs.inserted[0].path).unlink()
    assert "1 changed file(s) are gone (vacuumed?)" in str(deltalog.change_set(str(t), 0, 1))
    shutil.rmtree(t / "_delta_log")
    assert not deltalog.is_delta_table(str(t))


def test_deletion_vectors_are_marked_for_delta_to_read(tmp_path):
    t = tmp_path / "t"
    write_deltalake(str(t), _rows([1]))
    (t / "_delta_log" / "00000000000000000001.json").write_text(
        json.dumps(
            {
                "remove": {
                    "path": "x.parquet",
                    "dataChange": True,
                    "deletionVector": {"storageType": "u", "pathOrInlineDv": "ab", "sizeInBytes": 1, "cardinality": 1},
                }
            }
        )
        + "\n"
    )
    (t / "x.parquet").write_bytes(b"")
    got = deltalog.change_set(str(t), 0, 1)
    assert not isinstance(got, str), got
    assert got.deletion_vectors and [f.deletion_vector for f in got.deleted] == [True]
    assert [f.version for f in got.deleted] == [0]  # a removed file's rows are those of the version before
    assert not got.change_data_feed
