"""The partitioned recompute's key filter (mvsink.incremental.partitioned.key_filter): exact values while few, the
keys' ranges alone past MAX_LISTED_KEYS (a superset of the keys is as exact; Spark analyses a long IN slowly)."""

from __future__ import annotations

import pytest

from mvsink.incremental.keyreads import key_ranges
from mvsink.incremental.partitioned import MAX_LISTED_KEYS, key_filter

pytestmark = pytest.mark.unit


def _rows(sql: str, column: str, candidates: list[object]) -> list[object]:
    import duckdb

    con = duckdb.connect()
    con.execute(f"CREATE TABLE t ({column} {'BIGINT' if isinstance(candidates[0], int) else 'VARCHAR'})")
    con.executemany("INSERT INTO t VALUES (?)", [(c,) for c in candidates])
    return sorted(r[0] for r in con.execute(f"SELECT {column} FROM t WHERE {sql.replace('`', '')}").fetchall())


def test_few_keys_are_listed_and_filtered_exactly():
    values = [3, 5, 9, 1000]
    sql = key_filter("k", values, key_ranges(values), nulls=False)
    assert " IN (" in sql
    assert _rows(sql, "k", list(range(0, 1200))) == values


def test_many_integer_keys_keep_their_ranges_only_a_superset():
    band = list(range(100_000, 100_000 + 2 * MAX_LISTED_KEYS, 2))  # every other key of one narrow band
    far = [5, 7]
    values = far + band
    sql = key_filter("k", values, key_ranges(values), nulls=True)
    assert " IN (" not in sql and len(sql) < 2_000 and "IS NULL" in sql
    got = _rows(sql, "k", [1, 5, 6, 7, 99_999, *range(100_000, 100_000 + 2 * MAX_LISTED_KEYS), 10**9])
    assert set(values) <= set(got)  # every key kept ...
    assert 1 not in got and 99_999 not in got and 10**9 not in got  # ... and only keys within their ranges


def test_many_string_keys_stay_listed():
    values = [f"k{i:06d}" for i in range(MAX_LISTED_KEYS + 5)]
    sql = key_filter("s", values, key_ranges(values), nulls=False)
    assert " IN (" in sql
