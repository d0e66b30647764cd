"""Input rows a write step hands Spark as files (core/staging.py: ``Staging.write_read``): where they go, and who
deletes them (the write step when it ends, ``discard`` with its batch, garbage collection after a crash)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mvsink.core.batch import make_batch_id
from mvsink.core.staging import Staging, collect_garbage

pytestmark = pytest.mark.unit

ROWS = pa.table({"k": pa.array([1, 2, None], pa.int64()), "s": pa.array(["a", None, "c"])})


def test_rows_are_written_under_the_tables_staging_folder_and_dropped(tmp_path):
    table = str(tmp_path / "t")
    staging = Staging.of(table, make_batch_id("v", 10, 20, "r1"))
    got = staging.write_read("source_0_new", ROWS)
    assert got is not None
    assert got.key == f"{table}/_mv_staging/reads/{staging.batch_id}/source_0_new.parquet"
    assert pq.read_table(got.key).equals(ROWS)
    staging.drop_reads()
    assert not (tmp_path / "t" / "_mv_staging" / "reads" / staging.batch_id).exists()
    staging.drop_reads()  # (nothing left: no error)


def test_a_table_on_an_object_store_gets_no_files():
    staging = Staging.of("s3://bucket/views/t", make_batch_id("v", 10, 20, "r1"))
    assert staging.write_read("source_0_new", ROWS) is None
    staging.drop_reads()  # (nothing to delete; no store reached)


def test_discard_drops_the_batchs_rows(tmp_path):
    table = str(tmp_path / "t")
    staging = Staging.of(table, make_batch_id("v", 10, 20, "r1"))
    got = staging.write_read("x", ROWS)
    assert got is not None
    staging.discard()
    assert not (tmp_path / "t" / "_mv_staging" / "reads" / staging.batch_id).exists()


def test_garbage_collection_drops_the_rows_of_batches_that_can_no_longer_commit(tmp_path):
    table = str(tmp_path / "t")
    dead = Staging.of(table, make_batch_id("v", 10, 20, "crashed"))
    live = Staging.of(table, make_batch_id("v", 20, 30, "running"))  # (lower == the table's upper: may commit)
    kept = Staging.of(table, make_batch_id("v", 10, 20, "mine"))
    for s in (dead, live, kept):
        assert s.write_read("x", ROWS) is not None
    reads = tmp_path / "t" / "_mv_staging" / "reads"

    collect_garbage(table, upper=20, active=set(), keep=kept.batch_id, dry_run=True)
    assert sorted(p.name for p in reads.iterdir()) == sorted(s.batch_id for s in (dead, live, kept))

    done = collect_garbage(table, upper=20, active=set(), keep=kept.batch_id)
    assert done == {"discarded": [], "settled": []}  # (no manifest: no batch)
    assert sorted(p.name for p in reads.iterdir()) == sorted([live.batch_id, kept.batch_id])
