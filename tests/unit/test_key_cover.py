"""A pruned read's key read stops once its keys reach every file of the targets (incremental/keyreads.py: Cover)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

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
