"""A view source as DuckDB reads it (mvsink.incremental.duckdbterms.view_relation): its upstream table's updates
through a time, consolidated over every visible column, its ok rows repeated by their multiplicity, as
mvsink.spark.transforms.view_contents gives them to Spark (here: an independent pyarrow/Python computation)."""

from __future__ import annotations

import collections
import random
from decimal import Decimal

import duckdb
import pyarrow as pa
import pytest
from deltalake import write_deltalake

from mvsink.core.batch import SourceRead
from mvsink.core.deltalog import snapshot_cache
from mvsink.incremental.duckdbterms import view_relation

pytestmark = pytest.mark.unit

SCHEMA = pa.schema(
    [
        ("k", pa.int64()),
        ("v", pa.decimal128(12, 2)),
        ("_mv_error", pa.string()),
        ("_mv_agg_s", pa.decimal128(22, 2)),  # hidden state: not part of a row a reader sees
        ("_mv_time", pa.int64()),
        ("_mv_diff", pa.int64()),
    ]
)


def _updates(rng: random.Random, n: int) -> list[dict]:
    rows = []
    for _ in range(n):
        rows.append(
            {
                "k": rng.choice([1, 2, 3, None]),
                "v": rng.choice([Decimal("1.50"), Decimal("-2.00"), None]),
                "_mv_error": rng.choice([None, None, None, "too_big"]),
                "_mv_agg_s": Decimal(rng.randint(0, 5)),
                "_mv_time": rng.randint(1, 10),
                "_mv_diff": rng.choice([1, 1, 2, -1]),
            }
        )
    return rows


def _expected(rows: list[dict], through: int) -> collections.Counter:
    sums: collections.Counter = collections.Counter()
    for r in rows:
        if r["_mv_time"] <= through:
            sums[(r["k"], r["v"], r["_mv_error"])] += r["_mv_diff"]
    out: collections.Counter = collections.Counter()
    for (k, v, err), n in sums.items():
        if n > 0 and err is None:
            out[(k, v)] += n
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_view_source_reads_as_spark_reads_it(tmp_path, seed):
    rng = random.Random(seed)
    rows = _updates(rng, 60)
    path = tmp_path / "up"
    for part in (rows[:30], rows[30:]):  # (two files)
        write_deltalake(str(path), pa.Table.from_pylist(part, schema=SCHEMA), mode="append")
    src = SourceRead(name="up", kind="view", path=str(path), version=1, view="up")
    want_schema = pa.schema([("v", pa.decimal128(12, 2)), ("k", pa.int64())])
    for through in (0, 4, 10):
        with snapshot_cache():
            budget = {"scan": 1 << 30, "memory": 0}
            got = view_relation(src, ["v", "k"], want_schema, through=through, budget=budget)
        assert not isinstance(got, str), got
        con = duckdb.connect()
        table = con.sql(f"SELECT * FROM {got[0]}").to_arrow_table()
        assert table.schema.names == ["v", "k"]
        assert collections.Counter((r["k"], r["v"]) for r in table.to_pylist()) == _expected(rows, through)
        assert budget["scan"] < 1 << 30  # (its files' bytes taken from the budget)


def test_a_column_duckdb_may_group_otherwise_is_refused(tmp_path):
    schema = pa.schema([("x", pa.float64()), ("_mv_time", pa.int64()), ("_mv_diff", pa.int64())])
    write_deltalake(
        str(tmp_path / "up"), pa.table({"x": [0.0, -0.0], "_mv_time": [1, 1], "_mv_diff": [1, 1]}, schema=schema)
    )
    src = SourceRead(name="up", kind="view", path=str(tmp_path / "up"), version=0, view="up")
    with snapshot_cache():
        got = view_relation(src, ["x"], pa.schema([("x", pa.float64())]), through=5, budget={"scan": 1 << 30})
    assert isinstance(got, str) and "'x'" in got and "group otherwise" in got
