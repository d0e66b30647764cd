"""Decoded copies of unchanged sources (incremental/decodedcopies.py): the rows picked by key from a copy are the rows
DuckDB's filtered read of the source's Parquet files gives (NULL keys, duplicates, strings and dates included); the
first read writes the copy and later ones read it; a rewritten file, a copy that does not read back, the budget, a
dry run and the least-recently-used eviction behave as documented. Real Parquet files, DuckDB and pyarrow."""

from __future__ import annotations

import datetime as dt
import os
import random
from collections import Counter
from decimal import Decimal
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mvsink.incremental import decodedcopies
from mvsink.incremental.decodedcopies import FOLDER, Copies, copy_name, for_target, rows_with_keys
from mvsink.location import parse

pytestmark = pytest.mark.unit

SCHEMA = pa.schema(
    [
        ("k", pa.int64()),
        ("name", pa.string()),
        ("d", pa.date32()),
        ("bal", pa.decimal128(15, 2)),
    ]
)


def _files(tmp: Path, rng: random.Random, *, n: int = 3, rows: int = 5000) -> list[Path]:
    out = []
    for i in range(n):
        ks = [None if rng.random() < 0.02 else rng.randrange(rows) for _ in range(rows)]
        table = pa.table(
            {
                "k": ks,
                "name": [rng.choice(["", "é", "a" * 40, None, f"n{rng.randrange(99)}"]) for _ in ks],
                "d": [dt.date(1992, 1, 1) + dt.timedelta(days=rng.randrange(3000)) for _ in ks],
                "bal": [None if rng.random() < 0.1 else Decimal(rng.randrange(-99999, 99999)) / 100 for _ in ks],
            }
        )
        p = tmp / f"part-{i}.parquet"
        pq.write_table(table.cast(SCHEMA), p, row_group_size=1000)
        out.append(p)
    return out


def _union(files: list[Path]) -> str:
    return f"(SELECT * FROM read_parquet({[str(f) for f in files]}))"


def _expected(files: list[Path], column: str, keys: pa.Array) -> Counter:
    con = duckdb.connect()
    con.register("keys", pa.table({"x": keys}))
    got = con.sql(f"SELECT * FROM {_union(files)} AS s WHERE s.{column} IN (SELECT x FROM keys)").to_arrow_table()
    return Counter(tuple(r.values()) for r in got.to_pylist())


def _scan(file) -> pa.RecordBatchReader:
    return duckdb.connect().sql(f"SELECT * FROM read_parquet(['{file.key}'])").to_arrow_reader(777)


def _picked(copies: Copies, files: list[Path], column: str, keys: pa.Array) -> tuple[Counter, pa.Table]:
    got = rows_with_keys(
        copies, files=[parse(str(f)) for f in files], schema=SCHEMA, column=column, keys=keys, scan=_scan
    )
    assert got is not None
    return Counter(tuple(r.values()) for r in got.to_pylist()), got


def _names(files: list[Path]) -> set[str]:
    return {copy_name(parse(str(f)), SCHEMA) for f in files}  # type: ignore[misc]


def _copies(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.arrow"))


@pytest.mark.parametrize("column", ["k", "name", "d"])
def test_rows_picked_from_a_copy_are_the_filtered_reads_rows(tmp_path: Path, column: str) -> None:
    rng = random.Random(7)
    files = _files(tmp_path, rng)
    every = duckdb.connect().sql(f"SELECT DISTINCT {column} FROM {_union(files)}").to_arrow_table().column(0)
    values = [v for v in every.to_pylist() if v is not None]
    copies = Copies(tmp_path / FOLDER, 1 << 30, True)
    for round_ in range(4):
        keys = pa.array([*rng.sample(values, 25), None], type=every.type)  # (NULL matches nothing)
        got, table = _picked(copies, files, column, keys)
        assert got == _expected(files, column, keys), round_
        assert sum(got.values()) > 25
        assert table.schema.names == SCHEMA.names
        assert {p.stem for p in _copies(copies.folder)} == _names(files)  # one per file, written by the first read


def test_a_rewritten_file_makes_a_new_copy_and_the_budget_evicts_the_least_recently_used(tmp_path: Path) -> None:
    rng = random.Random(8)
    files = _files(tmp_path, rng)
    keys = pa.array([1, 2, 3, 4000], pa.int64())
    copies = Copies(tmp_path / FOLDER, 1 << 30, True)
    _picked(copies, files[:2], "k", keys)  # (a pruned read: two of the files)
    assert {p.stem for p in _copies(copies.folder)} == _names(files[:2])
    got, _ = _picked(copies, files, "k", keys)  # (all three: the third's copy is added)
    assert got == _expected(files, "k", keys)
    first = {p.stem: p for p in _copies(copies.folder)}
    size = max(p.stat().st_size for p in first.values())
    (tmp_path / "other").mkdir()
    new = _files(tmp_path / "other", rng, n=1)[0]
    os.replace(new, files[1])  # files[1] rewritten: its size and modification time differ
    got, _ = _picked(copies, files, "k", keys)
    assert got == _expected(files, "k", keys)
    assert len(_copies(copies.folder)) == 4  # (the old one fits the budget)
    stale = {p.stem for p in _copies(copies.folder)} - _names(files)
    assert len(stale) == 1
    for i, p in enumerate(_copies(copies.folder)):
        if p.stem in stale:
            os.utime(p, (1 + i, 1 + i))  # the least recently used
    pq.write_table(pq.read_table(files[0]).slice(0, 4000), files[0], row_group_size=1000)
    small = Copies(copies.folder, int(size * 3.2), True)  # room for the three current copies only
    got, _ = _picked(small, files, "k", keys)
    assert got == _expected(files, "k", keys)
    assert {p.stem for p in _copies(copies.folder)} == _names(files)  # the two stale copies evicted


def test_a_copy_that_does_not_read_back_is_replaced_and_over_the_budget_or_in_a_dry_run_none_is_written(
    tmp_path: Path,
) -> None:
    rng = random.Random(10)
    files = _files(tmp_path, rng)
    keys = pa.array([5, 6, 7], pa.int64())
    want = _expected(files, "k", keys)
    dry = Copies(tmp_path / FOLDER, 1 << 30, False)
    assert _picked(dry, files, "k", keys)[0] == want
    assert not dry.folder.exists()
    tiny = Copies(tmp_path / FOLDER, 1000, True)
    assert _picked(tiny, files, "k", keys)[0] == want
    assert _copies(tiny.folder) == [] and list(tiny.folder.glob(".*.tmp")) == []
    copies = Copies(tmp_path / FOLDER, 1 << 30, True)
    _picked(copies, files, "k", keys)
    (path, *_) = _copies(copies.folder)
    path.write_bytes(b"not an arrow file")
    assert _picked(copies, files, "k", keys)[0] == want
    again = copies.folder / path.name
    assert again.stat().st_size > 1000  # written again


def test_keys_of_another_type_serve_no_copy_and_the_setting_and_location_decide(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(11)
    files = _files(tmp_path, rng, n=1)
    copies = Copies(tmp_path / FOLDER, 1 << 30, True)
    assert (
        rows_with_keys(
            copies, files=[parse(str(files[0]))], schema=SCHEMA, column="k", keys=pa.array(["x"]), scan=_scan
        )
        is None
    )
    monkeypatch.setenv("MVSINK_DECODED_COPIES_MB", "0")
    assert for_target(parse(str(tmp_path / "v")), dry_run=False) is None
    monkeypatch.setenv("MVSINK_DECODED_COPIES_MB", "5")
    got = for_target(parse(str(tmp_path / "v")), dry_run=True)
    assert got == Copies(tmp_path / "v" / FOLDER, 5 << 20, False)
    assert for_target(parse("s3://bucket/v"), dry_run=False) is None
    assert copy_name(parse("s3://bucket/f.parquet"), SCHEMA) is None
    assert decodedcopies.copy_name(parse(str(files[0])), SCHEMA) != copy_name(
        parse(str(files[0])), pa.schema([("k", pa.int32())])
    )
