"""The full diff of a small view runs in the driver: the query collected in one Spark job, the table read with
pyarrow, the corrections summed here (engines/duckdb.py: ``full_diff``). Larger views, views with checks and
collated strings keep the Spark diff. Each way equals the DuckDB oracle and stages consolidated corrections."""

from __future__ import annotations

import math
from collections import Counter
from decimal import Decimal

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from mvsink.definitions.catalog import Catalog
from mvsink.readers.arrow import read_view
from mvsink.write.runners import refresh
from tests.support.delta import BASE, HOUR, delete_at, mvsink_history, stamp, update_at, write_at
from tests.support.oracle import multiset, oracle
from tests.support.viewfiles import write_view

pytestmark = pytest.mark.spark

QUERIES = {
    # duplicates (multiplicity > 1), NULLs, decimals: summed by pyarrow
    "exact": "SELECT id % 3 AS g, tag, amount FROM items",
    # floating-point values (NaN, -0.0): compared row by row as Spark groups them
    "floats": "SELECT tag, price FROM items",
    # a struct and an array: summed by DuckDB
    "nested": "SELECT named_struct('t', tag, 'g', id % 2) AS s, array(id % 2, id % 3) AS arr FROM items",
}
# the same queries in DuckDB's dialect, for the oracle
DUCK = {**QUERIES, "nested": "SELECT {'t': tag, 'g': id % 2} AS s, [id % 2, id % 3] AS arr FROM items"}


def _items(ids: range) -> pa.Table:
    prices = [0.0, -0.0, math.nan, None, 2.5]
    return pa.Table.from_pylist(
        [
            {
                "id": i,
                "tag": ["x", "y", None][i % 3],
                "price": prices[i % 5],
                "amount": [Decimal("1.50"), None][i % 2],
            }
            for i in ids
        ],
        schema=pa.schema(
            [
                pa.field("id", pa.int64()),
                pa.field("tag", pa.string()),
                pa.field("price", pa.float64()),
                pa.field("amount", pa.decimal128(7, 2)),
            ]
        ),
    )


def _batch(target, t: int) -> list[dict]:
    return [r for r in DeltaTable(str(target)).to_pyarrow_table().to_pylist() if r["_mv_time"] == t]


def _same(a, b) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


def test_full_diff_of_a_small_view_runs_in_the_driver(spark, env, monkeypatch):
    from mvsink.engines import arrow as driver

    data, views = env
    src = str(data / "items")
    write_at(src, _items(range(20)), BASE)
    for name, q in QUERIES.items():
        write_view(
            views, name, query=q, sources={"items": "items"}, target=f"views/{name}", as_of=BASE, incremental=False
        )
    catalog = Catalog(views)
    t = BASE + HOUR
    for name in QUERIES:  # the first refresh (no table yet) is Spark's
        res = refresh(catalog.get(name), t, catalog=catalog, runner="inprocess", spark=spark)
        assert res.status == "appended" and res.mode == "full", res

    def step(change, *, in_driver: bool) -> None:
        nonlocal t
        change(t + 10)
        t += HOUR
        for name in QUERIES:
            target = data / "views" / name
            version = DeltaTable(str(target)).version()
            res = refresh(catalog.get(name), t, catalog=catalog, runner="inprocess", spark=spark, run_id=f"r{t}")
            assert res.status == "appended" and res.mode == "full", (name, res)
            reason = str(mvsink_history(str(target))[0]["mode_reason"])
            assert reason.startswith("incremental: false in the view file"), reason
            assert ("a full diff in the driver" in reason) is in_driver, (name, reason)
            if in_driver:
                assert res.spark_jobs in (1, -1), (name, res)  # the query collected; -1: not counted (Connect)
            got = _zero(multiset(read_view(catalog.get(name), as_of=t)))
            assert got == _zero(oracle(DUCK[name], {"items": src}, t)), name
            batch = _batch(target, t)
            keys = [tuple(v for k, v in r.items() if not k.startswith("_mv_")) for r in batch]
            assert len(keys) == len(set(map(repr, keys))), (name, batch)  # consolidated: one update per row
            dt = DeltaTable(str(target))
            assert dt.version() == version + 1, name  # one append: the batch's files and the frontier together
            before = DeltaTable(str(target), version=version).file_uris()
            assert len(dt.file_uris()) == len(before) + res.files, name  # nothing removed, the batch's files added
            if in_driver:
                assert res.files == (1 if batch else 0), (name, res)  # the driver writes one Parquet file

    step(lambda ts: update_at(src, {"price": "price * 2", "id": "id + 40"}, "id < 8", ts), in_driver=True)
    step(lambda ts: delete_at(src, "id % 4 = 1", ts), in_driver=True)
    step(lambda ts: write_at(src, _items(range(100, 106)), ts), in_driver=True)
    monkeypatch.setattr(driver, "MAX_DRIVER_ROWS", 5)  # over the bound: the Spark diff
    step(lambda ts: update_at(src, {"tag": "'z'"}, "tag IS NULL", ts), in_driver=False)
    monkeypatch.setattr(driver, "MAX_DRIVER_ROWS", 100_000)
    step(lambda ts: delete_at(src, "id > 100", ts), in_driver=True)


def _zero(rows: Counter) -> Counter:
    """Rows with -0.0 written as 0.0: SQL equality makes them one value (Spark's grouping stores 0.0, DuckDB's
    projection keeps -0.0); NaNs are already one value ("nan")."""
    out: Counter = Counter()
    for row, n in rows.items():
        out[tuple("0.000000" if v == "-0.000000" else v for v in row)] += n
    return out


def test_hand_edits_are_repaired_by_the_driver_diff(spark, env):
    """Junk rows (a double count, a negative count) and deleted rows in the table: the full diff in the driver
    repairs them, with exact rows (the table's own updates are never consolidated first)."""
    data, views = env
    src = str(data / "items")
    write_at(src, _items(range(12)), BASE)
    q = QUERIES["exact"]
    write_view(views, "v", query=q, sources={"items": "items"}, target="views/v", as_of=BASE, incremental=False)
    view = Catalog(views).get("v")
    t = BASE + HOUR
    refresh(view, t, runner="inprocess", spark=spark)
    target = str(data / "views" / "v")
    DeltaTable(target).delete("g = 0")
    junk = pa.Table.from_pylist(
        [
            {"g": 1, "tag": "x", "amount": Decimal("1.50"), "_mv_time": t, "_mv_diff": 2},
            {"g": 7, "tag": None, "amount": None, "_mv_time": BASE, "_mv_diff": -1},
        ],
        schema=pa.schema(DeltaTable(target).schema().to_arrow()),
    )
    write_deltalake(target, junk, mode="append")
    assert multiset(read_view(view, as_of=t)) != oracle(q, {"items": src}, t)  # damaged
    t += HOUR
    res = refresh(view, t, runner="inprocess", spark=spark)
    assert res.mode == "full" and "a full diff in the driver" in str(mvsink_history(target)[0]["mode_reason"]), res
    assert multiset(read_view(view, as_of=t)) == oracle(q, {"items": src}, t)


def test_views_with_checks_or_collations_keep_the_spark_diff(spark, env):
    """Check counts are Spark observations; a collated string's equality differs from the driver's."""
    data, views = env
    src = str(data / "items")
    write_at(src, _items(range(12)), BASE)
    stamp(src, BASE)
    kinds = {
        "checked": dict(query=QUERIES["exact"], checks=[{"name": "g_small", "expr": "g < 3", "action": "warn"}]),
        "collated": dict(query="SELECT tag COLLATE UTF8_LCASE AS tag, amount FROM items"),
        "plain": dict(query=QUERIES["exact"]),
    }
    for name, spec in kinds.items():
        write_view(
            views, name, sources={"items": "items"}, target=f"views/{name}", as_of=BASE, incremental=False, **spec
        )
    catalog = Catalog(views)
    for t in (BASE + HOUR, BASE + 2 * HOUR):
        update_at(src, {"tag": "upper(tag)"}, "id % 2 = 0", t - 10)
        for name in kinds:
            res = refresh(catalog.get(name), t, catalog=catalog, runner="inprocess", spark=spark, run_id=f"{t}")
            assert res.status == "appended" and res.mode == "full", (name, res)
    for name in kinds:
        reason = str(mvsink_history(str(data / "views" / name))[0]["mode_reason"])
        assert ("a full diff in the driver" in reason) is (name == "plain"), (name, reason)
