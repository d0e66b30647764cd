"""A pruned read's key read stops once its keys reach every file of the targets (incremental/keyreads.py: Cover)."""

from __future__ import annotations

import datetime as dt
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mvsink.core.deltalog import ChangeFile
from mvsink.incremental import keyreads
from mvsink.incremental.keyreads import ChangeFiles, Cover, KeyRanges, key_ranges, keys_in_driver, scan_keys
from mvsink.location import parse

pytestmark = pytest.mark.unit


def _files(tmp_path: Path, *tables: pa.Table, missing: int = 0) -> ChangeFiles:
    out = []
    for i, t in enumerate(tables):
        p = tmp_path / f"part-{i}.parquet"
        pq.write_table(t, p)
        out.append(ChangeFile(parse(str(p)), (), p.stat().st_size))
    for i in range(missing):  # a file the read must never open
        out.append(ChangeFile(parse(str(tmp_path / f"absent-{i}.parquet")), (), 1))
    return ChangeFiles(tuple(out), ())


def test_a_file_is_reached_by_a_key_within_its_bounds_or_by_any_key_without_statistics() -> None:
    cover = Cover({"k": [(1, 10), (11, 20), (None, 5), (30, 40)]})
    cover.add("k", [None, 12])
    assert cover.spans["k"] == [(1, 10), (30, 40)]
    cover.add("k", [10])  # bounds are inclusive
    assert cover.spans["k"] == [(30, 40)] and not cover.done
    cover.add("k", [41, 29])
    assert not cover.done
    cover.add("k", [40])
    assert cover.done


def test_a_cover_by_several_columns_is_done_when_each_is() -> None:
    cover = Cover({"a": [(1, 2)], "b": [(dt.date(2026, 1, 1), dt.date(2026, 1, 31))]})
    cover.add("a", [2])
    assert not cover.done
    cover.add("b", [dt.date(2026, 1, 31)])
    assert cover.done


def test_statistics_of_another_type_count_as_reached_as_may_hold_says() -> None:
    cover = Cover({"k": [("a", "z")]})
    cover.add("k", [5])
    assert cover.done
    assert KeyRanges(((5, 5),), (5,)).may_hold("a", "z")


def test_a_reached_file_is_one_the_keys_ranges_keep() -> None:
    keys = [1, 2, 3, 100, 200, 1000, 5000]
    spans = [(0, 0), (2, 2), (4, 99), (150, 250), (1001, 4999), (5000, 6000)]
    cover = Cover({"k": list(spans)})
    cover.add("k", keys)
    reached = [s for s in spans if s not in cover.spans["k"]]
    ranges = key_ranges(keys, max_ranges=2)
    assert reached == [(2, 2), (150, 250), (5000, 6000)]
    assert all(ranges.may_hold(lo, hi) for lo, hi in reached)


def test_the_read_stops_at_the_batch_whose_keys_reach_every_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(keyreads, "COVER_BATCH_ROWS", 4)
    t = pa.table({"o": pa.array(range(12), pa.int64()), "c": pa.array([5, 5, 5, 5, 5, 5, 50, 50, 7, 7, 7, 7])})
    change = _files(tmp_path, t, missing=1)  # reading on would fail on the absent file
    where = (("o", KeyRanges(((0, 7),), None)),)
    got = scan_keys(change, ["c"], where, Cover({"c": [(0, 9), (40, 60)]}))
    assert isinstance(got, Cover) and got.done


def test_without_a_cover_reached_the_keys_are_those_of_the_whole_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(keyreads, "COVER_BATCH_ROWS", 4)
    t1 = pa.table({"o": pa.array(range(12), pa.int64()), "c": pa.array([5, 5, 5, 5, 5, 5, 50, 50, 7, 7, 7, 7])})
    t2 = pa.table({"o": pa.array(range(12, 20), pa.int64()), "c": pa.array([1, 2, 3, 4, 5, 6, 8, 9])})
    change = _files(tmp_path, t1, t2)
    where = (("o", KeyRanges(((0, 7), (14, 15)), None)),)
    got = scan_keys(change, ["c"], where, Cover({"c": [(0, 9), (100, 200)]}))
    assert isinstance(got, dict)
    assert sorted(got["c"]) == [3, 4, 5, 50]
    assert got == keys_in_driver(change, ["c"], where=where)


def test_a_key_type_pyarrow_may_read_unlike_spark_still_refuses_the_read(tmp_path: Path) -> None:
    t = pa.table({"o": pa.array(range(4), pa.int64()), "c": pa.array([0.5, 1.5, 2.5, 3.5])})
    change = _files(tmp_path, t)
    assert scan_keys(change, ["c"], (), Cover({"c": [(0.0, 9.0)]})) is None


# ---------------------------------------------------------------- a term's chained read (TermPruning)


def _delta(path: Path, *parts: pa.Table) -> int:
    from deltalake import write_deltalake

    for t in parts:  # one file each
        write_deltalake(str(path), t, mode="append")
    return len(parts) - 1


def _chain(tmp_path: Path, *, further: bool) -> tuple[Any, dict[str, Any], list[Any]]:
    """Change set a (ak 0..99) prunes b (by bk); b's kept rows prune c (by ck, 4 files), and with ``further`` c prunes
    d (by dk). b's kept file has c's keys 0..39 in its first 40 rows."""
    from mvsink.core.batch import SourceRead
    from mvsink.incremental.pruning import TermPruning, spark_needed
    from mvsink.plan.joinkeys import Column, Edge

    ints = pa.int64()
    tmp_path.mkdir(exist_ok=True)
    a = tmp_path / "a.parquet"
    pq.write_table(pa.table({"ak": pa.array(range(100), ints)}), a)
    change = ChangeFiles((ChangeFile(parse(str(a)), (), a.stat().st_size),), ())
    vb = _delta(
        tmp_path / "b",
        pa.table({"bk": pa.array(range(100), ints), "ck": pa.array([i % 40 for i in range(100)], ints)}),
        pa.table({"bk": pa.array(range(1000, 1100), ints), "ck": pa.array([0] * 100, ints)}),
    )
    vc = _delta(
        tmp_path / "c",
        *(
            pa.table({"ck": pa.array(range(lo, lo + 10), ints), "dk": pa.array(range(lo, lo + 10), ints)})
            for lo in (0, 10, 20, 30)
        ),
    )
    vd = _delta(tmp_path / "d", *(pa.table({"dk": pa.array(range(lo, lo + 20), ints)}) for lo in (0, 20)))
    sources = [
        SourceRead("a", "path", parse(str(tmp_path / "a")), 1),
        SourceRead("b", "path", parse(str(tmp_path / "b")), vb),
        SourceRead("c", "path", parse(str(tmp_path / "c")), vc),
        SourceRead("d", "path", parse(str(tmp_path / "d")), vd),
    ]
    edges = [Edge(Column("a", "ak"), Column("b", "bk")), Edge(Column("b", "ck"), Column("c", "ck"))]
    if further:
        edges.append(Edge(Column("c", "dk"), Column("d", "dk")))
    tp = TermPruning(None, "", sources, change_files={"a": change}, edges=edges)
    read_at = {s.name: (spark_needed, s.version) for s in sources[1:]}
    return tp, read_at, edges


def _counted(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Each batch a key read that may stop early reads: (its table's folder name, rows)."""
    from mvsink.engines import arrow

    seen: list[tuple[str, int]] = []
    real = arrow.parquet_column_batches

    def counting(path: Any, columns: Any, rows: int) -> Any:
        got = real(path, columns, rows)
        return None if got is None else (seen.append((Path(path.key).parent.name, t.num_rows)) or t for t in got)

    monkeypatch.setattr(arrow, "parquet_column_batches", counting)
    return seen


@pytest.mark.parametrize("further", [False, True])
def test_a_chained_read_stops_once_its_keys_reach_every_file_it_alone_decides(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, further: bool
) -> None:
    from mvsink.incremental import pruning

    monkeypatch.setenv("MVSINK_INCREMENTAL_PRUNE_MIN_BYTES", "0")
    monkeypatch.setattr(keyreads, "COVER_BATCH_ROWS", 8)
    seen = _counted(monkeypatch)
    tp, read_at, _ = _chain(tmp_path, further=further)
    got = tp.reads({"a": pruning.spark_needed}, read_at)
    assert [r.source for r in got] == ["b"] and (got[0].files, got[0].total_files) == (1, 2)
    from_b = [n for table, n in seen if table == "b"]
    if further:  # c's keys lead on to d: b's keys are all read (c is then read whole: they skip none of its files)
        assert from_b == []  # (no cover: that read is not batched; c's keys of d's files may stop early)
    else:
        assert 0 < sum(from_b) <= 48 and all(n <= 8 for n in from_b)  # c's 4 files reached by the 40th row of 100

    monkeypatch.setattr(pruning.TermPruning, "_cover", lambda *a, **k: None)
    tp, read_at, _ = _chain(tmp_path / "again", further=further)
    assert [(r.source, r.files, r.total_files, r.filters) for r in tp.reads({"a": pruning.spark_needed}, read_at)] == [
        (r.source, r.files, r.total_files, r.filters) for r in got
    ]


def test_files_over_the_driver_bound_are_read_there_when_the_columns_read_fit_it(tmp_path, monkeypatch) -> None:
    # one small key column beside a wide string column: the files are large, the key column's chunks small
    n, rng = 20_000, random.Random(7)
    t = pa.table({"k": pa.array(range(n), pa.int64()), "pad": pa.array([rng.randbytes(64).hex() for _ in range(n)])})
    change = _files(tmp_path, t, t.slice(0, 5_000))
    key_bytes = sum(keyreads_column_bytes(f.path, ["k"]) for f in change.files)
    assert key_bytes * 5 < change.bytes  # (the key column is a small part of the files)
    monkeypatch.setattr(keyreads, "MAX_DRIVER_KEY_BYTES", key_bytes + 1)
    got = keys_in_driver(change, ["k"], where=(("k", key_ranges([3, 4, 19_999])),))
    assert got is not None and sorted(got["k"]) == [3, 4, 19_999]
    monkeypatch.setattr(keyreads, "MAX_DRIVER_KEY_BYTES", key_bytes - 1)  # the column's chunks over it: Spark's
    assert keys_in_driver(change, ["k"]) is None
    monkeypatch.setattr(keyreads, "MAX_DRIVER_KEY_BYTES", key_bytes + 1)
    monkeypatch.setattr(keyreads, "MAX_DRIVER_KEY_FILE_BYTES", change.bytes - 1)  # the files over the outer bound
    assert keys_in_driver(change, ["k"]) is None
    monkeypatch.setattr(keyreads, "MAX_DRIVER_KEY_FILE_BYTES", change.bytes)
    assert keys_in_driver(change, ["k", "nope"]) is None  # a column a file lacks: Spark's read (NULLs there)


def keyreads_column_bytes(path: Any, columns: list[str]) -> int:
    from mvsink.engines.arrow import parquet_column_bytes

    got = parquet_column_bytes(path, columns)
    assert got is not None
    return got
