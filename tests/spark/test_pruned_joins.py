"""Joins refreshed incrementally with key-pruned change terms (issue 22): on narrow changes (TPC-H's RF1/RF2:
new orders on an advancing band of keys, deletes of the oldest) and on scattered ones, every refresh exact
against DuckDB and against the same view refreshed by the full diff, with the mode asserted and what was
read: a change term reads the other side's files that hold its keys, fewer than the table has."""

from __future__ import annotations

import datetime as dt
import decimal
import random

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from mvsink.definitions.catalog import Catalog
from mvsink.readers.arrow import read_view
from mvsink.write.runners import refresh
from tests.support.delta import BASE, HOUR, delete_at, stamp, update_at, write_at
from tests.support.oracle import multiset, oracle
from tests.support.viewfiles import write_view

pytestmark = pytest.mark.spark

BAND = 20  # orders per file: the tables are laid out in order-key order, as dbgen writes them
BANDS = 20

LINEAR = """SELECT o_orderkey, o_custkey, l_suppkey, l_price
FROM orders JOIN lineitem ON l_orderkey = o_orderkey"""
Q3 = """SELECT l_orderkey, o_orderdate, sum(l_price * l_qty) AS revenue, count(*) AS n
FROM customer, orders, lineitem
WHERE c_mktsegment = 'B' AND c_custkey = o_custkey AND l_orderkey = o_orderkey
GROUP BY l_orderkey, o_orderdate"""
Q5 = """SELECT n_name, sum(l_price * l_qty) AS revenue, count(*) AS n
FROM customer, orders, lineitem, supplier, nation, region
WHERE c_custkey = o_custkey AND l_orderkey = o_orderkey AND l_suppkey = s_suppkey
  AND c_nationkey = s_nationkey AND s_nationkey = n_nationkey AND n_regionkey = r_regionkey AND r_name = 'R1'
GROUP BY n_name"""
# (COUNT(DISTINCT) keeps no aggregate state: affected groups)
GROUPS = """SELECT o_custkey, max(l_price) AS top_price, count(*) AS n, count(DISTINCT l_suppkey) AS suppliers
FROM orders JOIN lineitem ON l_orderkey = o_orderkey GROUP BY o_custkey"""

TOPK = """SELECT o_orderkey, l_line, o_custkey, l_price
FROM orders JOIN lineitem ON l_orderkey = o_orderkey ORDER BY l_price DESC, o_orderkey, l_line LIMIT 10"""

VIEWS = {
    "lin": (LINEAR, ("orders", "lineitem"), "incremental"),
    "q3": (Q3, ("customer", "orders", "lineitem"), "incremental:aggregate"),
    "q5": (Q5, ("customer", "orders", "lineitem", "supplier", "nation", "region"), "incremental:aggregate"),
    "grp": (GROUPS, ("orders", "lineitem"), "incremental:groups"),
    "topk": (TOPK, ("orders", "lineitem"), "incremental:topk"),
}
KEYS = {"topk": ["o_orderkey", "l_line"]}


def _orders(rng: random.Random, keys: range) -> pa.Table:
    return pa.table(
        {
            "o_orderkey": pa.array(list(keys), pa.int64()),
            "o_custkey": pa.array([rng.randint(1, 40) for _ in keys], pa.int64()),
            "o_orderdate": pa.array([dt.date(1995, 1, 1) + dt.timedelta(days=rng.randint(0, 60)) for _ in keys]),
        }
    )


def _lineitems(rng: random.Random, keys: range) -> pa.Table:
    rows = [
        (k, line, rng.randint(1, 16), decimal.Decimal(rng.randint(100, 999)) / 10, rng.randint(1, 5))
        for k in keys
        for line in range(rng.randint(1, 3))
    ]
    return pa.table(
        {
            "l_orderkey": pa.array([r[0] for r in rows], pa.int64()),
            "l_line": pa.array([r[1] for r in rows], pa.int32()),
            "l_suppkey": pa.array([r[2] for r in rows], pa.int64()),
            "l_price": pa.array([r[3] for r in rows], pa.decimal128(12, 2)),
            "l_qty": pa.array([r[4] for r in rows], pa.int64()),
        }
    )


def rf_pair(data, rng: random.Random, new: range, oldest: int, t: int) -> None:
    """RF1: orders ``new`` with their lineitems; RF2: orders ``oldest`` to ``oldest + 3`` with theirs (at t to t + 3)."""
    write_at(data / "orders", _orders(rng, new), t)
    write_at(data / "lineitem", _lineitems(rng, new), t + 1)
    gone = f"{oldest} AND {oldest + 3}"
    delete_at(data / "orders", f"o_orderkey BETWEEN {gone}", t + 2)
    delete_at(data / "lineitem", f"l_orderkey BETWEEN {gone}", t + 3)


def _dims(data, rng: random.Random) -> None:
    write_at(data / "region", pa.table({"r_regionkey": [0, 1, 2], "r_name": ["R0", "R1", "R2"]}), BASE)
    write_at(
        data / "nation",
        pa.table(
            {
                "n_nationkey": list(range(8)),
                "n_regionkey": [i % 3 for i in range(8)],
                "n_name": [f"N{i}" for i in range(8)],
            }
        ),
        BASE,
    )
    for part in range(4):  # customers in 4 files by key
        keys = range(1 + part * 10, 11 + part * 10)
        write_at(
            data / "customer",
            pa.table(
                {
                    "c_custkey": pa.array(list(keys), pa.int64()),
                    "c_nationkey": pa.array([rng.randint(0, 7) for _ in keys], pa.int64()),
                    "c_mktsegment": [rng.choice("AB") for _ in keys],
                }
            ),
            BASE,
        )
    for part in range(2):
        keys = range(1 + part * 8, 9 + part * 8)
        write_at(
            data / "supplier",
            pa.table(
                {
                    "s_suppkey": pa.array(list(keys), pa.int64()),
                    "s_nationkey": pa.array([k % 8 for k in keys], pa.int64()),
                }
            ),
            BASE,
        )


def banded_lake(data, rng: random.Random, bands: int = 8) -> None:
    """The dimensions, and orders and lineitems in one file per band of order keys, with the change data feed (a
    changed row is a row of a change file), all stamped ``BASE``."""
    _dims(data, rng)
    for b in range(bands):
        keys = range(1 + b * BAND, 1 + (b + 1) * BAND)
        for name, rows in (("orders", _orders(rng, keys)), ("lineitem", _lineitems(rng, keys))):
            cdf = {"delta.enableChangeDataFeed": "true"} if b == 0 else None
            write_deltalake(str(data / name), rows, mode="append", configuration=cdf)
            stamp(data / name, BASE)


def _reason(view) -> str | None:
    from mvsink.core.table import ViewTable

    info = ViewTable.open(view).history(limit=1)[0].info
    return info.mode_reason if info else None


def _files(path) -> int:
    return len(DeltaTable(str(path)).file_uris())


@pytest.mark.parametrize("stream", ["rf", "scattered"])
def test_joins_refresh_from_pruned_change_terms(spark, env, monkeypatch, stream):
    data, views = env
    monkeypatch.setenv("MVSINK_INCREMENTAL_PRUNE_MIN_BYTES", "0")  # the test's tables are small
    monkeypatch.setenv("MVSINK_INCREMENTAL_GROUPS", "true")
    monkeypatch.setenv("MVSINK_INCREMENTAL_MAX_FRACTION", "0.9")
    rng = random.Random(7 if stream == "rf" else 8)
    _dims(data, rng)
    for b in range(BANDS):  # one file per band of order keys, in each table
        keys = range(1 + b * BAND, 1 + (b + 1) * BAND)
        write_at(data / "orders", _orders(rng, keys), BASE)
        write_at(data / "lineitem", _lineitems(rng, keys), BASE)
    paths = {n: str(data / n) for n in ("customer", "orders", "lineitem", "supplier", "nation", "region")}
    twins = ("", "_full") if stream == "rf" else ("",)  # the full diff's twin on the RF stream
    for name, (query, sources, _) in VIEWS.items():
        for suffix, incremental in (("", True), ("_full", False))[: len(twins)]:
            write_view(
                views,
                name + suffix,
                query=query,
                sources={s: s for s in sources},
                target=f"views/{name}{suffix}",
                as_of=BASE,
                incremental=incremental,
                **({"key": KEYS[name]} if name in KEYS else {}),
            )
    catalog = Catalog(views)
    t = BASE + HOUR
    for name in VIEWS:
        for suffix in twins:
            assert (
                refresh(catalog.get(name + suffix), t, catalog=catalog, runner="inprocess", spark=spark).status
                == "appended"
            )

    next_key, oldest = 1 + BANDS * BAND, 1
    pruned_terms = 0
    rounds = 4 if stream == "rf" else 3
    for step in range(rounds):
        t += HOUR // 2
        if stream == "rf":  # RF1: a band of new orders with their lineitems; RF2: the oldest orders go
            rf_pair(data, rng, range(next_key, next_key + 6), oldest, t)
            next_key, oldest = next_key + 6, oldest + 4
        else:  # a few orders with keys scattered over the whole key range: deleted, or their lineitems updated
            live = sorted(
                DeltaTable(str(data / "orders")).to_pyarrow_table(columns=["o_orderkey"])["o_orderkey"].to_pylist()
            )
            gone, touched = rng.sample(live, 2), rng.sample(live, 1)
            keys = ", ".join(map(str, gone))
            delete_at(data / "orders", f"o_orderkey IN ({keys})", t)
            delete_at(data / "lineitem", f"l_orderkey IN ({keys})", t + 1)
            update_at(
                data / "lineitem", {"l_qty": "l_qty + 1"}, f"l_orderkey IN ({', '.join(map(str, touched))})", t + 2
            )
            new = range(next_key, next_key + 3)
            next_key += 3
            write_at(data / "orders", _orders(rng, new), t + 3)
            write_at(data / "lineitem", _lineitems(rng, new), t + 4)
        t += HOUR
        lineitem_files, orders_files = _files(data / "lineitem"), _files(data / "orders")
        for name, (query, sources, mode) in VIEWS.items():
            res = refresh(
                catalog.get(name), t, catalog=catalog, runner="inprocess", spark=spark, run_id=f"{stream}{step}"
            )
            assert res.status == "appended", res
            expected = oracle(query, {s: paths[s] for s in sources}, t)
            assert multiset(read_view(catalog.get(name), as_of=t)) == expected, (name, stream, step, res.mode)
            if stream == "rf":
                full = refresh(catalog.get(name + "_full"), t, catalog=catalog, runner="inprocess", spark=spark)
                assert full.status == "appended" and full.mode == "full", full
                assert multiset(read_view(catalog.get(name + "_full"), as_of=t)) == expected, (name, step)
                assert full.reads["lineitem"]["files"] == lineitem_files
            assert res.mode == mode, (name, stream, step, res.reason)
            # what was read: the lineitem read by the orders term is pruned to the files holding its keys
            assert set(res.reads) >= {"orders", "lineitem"}, res.reads
            if stream == "rf":  # each side read by the other's term pruned to the bands of the changed keys
                assert res.reads["lineitem"]["files"] < lineitem_files, (name, step, res.reads)
                assert res.reads["orders"]["files"] < orders_files, (name, step, res.reads)
                pruned_terms += 1
    assert stream != "rf" or pruned_terms == rounds * len(VIEWS)


def test_reads_are_recorded_in_the_commit_and_status(spark, env, monkeypatch):
    """The refresh report, the append's commit info and ``mvsink status`` carry the bytes and files read."""
    from mvsink.core.table import ViewTable
    from mvsink.readers.status import format_status, view_status

    data, views = env
    monkeypatch.setenv("MVSINK_INCREMENTAL_PRUNE_MIN_BYTES", "0")
    rng = random.Random(3)
    for b in range(6):
        keys = range(1 + b * BAND, 1 + (b + 1) * BAND)
        write_at(data / "orders", _orders(rng, keys), BASE)
        write_at(data / "lineitem", _lineitems(rng, keys), BASE)
    write_view(
        views, "lin", query=LINEAR, sources={"orders": "orders", "lineitem": "lineitem"}, target="views/lin", as_of=BASE
    )
    catalog = Catalog(views)
    view = catalog.get("lin")
    assert refresh(view, BASE + HOUR, catalog=catalog, runner="inprocess", spark=spark).mode == "full"
    write_at(data / "orders", _orders(rng, range(500, 503)), BASE + 2 * HOUR)
    res = refresh(view, BASE + 3 * HOUR, catalog=catalog, runner="inprocess", spark=spark)
    assert res.mode == "incremental", res
    # the new orders' keys are in no lineitem file: Delta's statistics skip them all
    assert res.reads["lineitem"] == {"bytes": 0, "files": 0}, res.reads
    assert res.reads["orders"]["files"] == 1
    assert "read lineitem 0 files 0.0 MB, orders 1 file" in res.summary()
    info = ViewTable.open(view).history(limit=1)[0].info
    assert info is not None and info.reads == res.reads
    assert "; read lineitem 0 files" in format_status(view_status(view))


EDGE_SHAPES = [
    LINEAR,
    Q3,
    Q5,
    GROUPS,
    TOPK,
    "SELECT o_orderkey, l_price FROM orders LEFT JOIN lineitem ON l_orderkey = o_orderkey",
    "SELECT o_orderkey FROM orders LEFT SEMI JOIN lineitem ON l_orderkey = o_orderkey AND l_qty > 2",
    "SELECT o.o_orderkey, x.k FROM orders o JOIN (SELECT l_orderkey AS k, sum(l_qty) AS q FROM lineitem "
    "GROUP BY l_orderkey) x ON x.k = o.o_orderkey",
]


def test_the_explain_text_gives_the_json_plans_edges(spark, env):
    """Spark Connect has only the EXPLAIN text: its edges must be the JSON plan's (classic Spark)."""
    from mvsink.plan.joinkeys import join_edges
    from mvsink.plan.read import tree_from_explain, tree_of_dataframe

    data, _ = env
    rng = random.Random(1)
    _dims(data, rng)
    write_at(data / "orders", _orders(rng, range(1, 5)), BASE)
    write_at(data / "lineitem", _lineitems(rng, range(1, 5)), BASE)
    for name in ("customer", "orders", "lineitem", "supplier", "nation", "region"):
        spark.read.format("delta").load(str(data / name)).createOrReplaceTempView(name)
    for query in EDGE_SHAPES:
        from_json = join_edges(tree_of_dataframe(spark.sql(query)))
        from_text = join_edges(tree_from_explain(spark.sql("EXPLAIN EXTENDED " + query).collect()[0][0]))
        assert from_json, query
        assert set(from_text) == set(from_json), query


def test_the_scan_guard_refuses_before_any_change_frame_is_made(spark, env, monkeypatch):
    """A change whose keys hit every file of the other side is refused from the log's statistics and the keys
    read in the driver: no change frame is built (no Spark plan, no job) before the full diff runs."""
    from mvsink.incremental import linear as incremental

    data, views = env
    monkeypatch.setenv("MVSINK_INCREMENTAL_PRUNE_MIN_BYTES", "0")
    monkeypatch.setenv("MVSINK_INCREMENTAL_MAX_SCAN_RATIO", "0.5")
    monkeypatch.setenv("MVSINK_INCREMENTAL_MAX_FRACTION", "0.9")  # the test's tables are small
    monkeypatch.setenv("MVSINK_INCREMENTAL_DRIVER_TERMS", "false")  # (Spark's terms; DuckDB's: test_driver_terms)
    made: list[str] = []
    real = incremental.change_frames
    monkeypatch.setattr(incremental, "change_frames", lambda *a, **k: made.append(str(a[1])) or real(*a, **k))
    rng = random.Random(5)
    banded_lake(data, rng)
    write_view(
        views, "q3", query=Q3, sources={s: s for s in ("customer", "orders", "lineitem")}, target="views/q3", as_of=BASE
    )
    catalog = Catalog(views)
    view = catalog.get("q3")
    assert refresh(view, BASE + HOUR, catalog=catalog, runner="inprocess", spark=spark).mode == "full"
    paths = {n: str(data / n) for n in ("customer", "orders", "lineitem")}
    # one order of every band loses a lineitem and one order of every band changes customer
    t = BASE + 2 * HOUR
    keys = ", ".join(str(1 + b * BAND + 3) for b in range(8))
    delete_at(data / "lineitem", f"l_orderkey IN ({keys}) AND l_line = 0", t)
    update_at(data / "orders", {"o_custkey": "o_custkey % 40 + 1"}, f"o_orderkey IN ({keys})", t + 1)
    res = refresh(view, t + HOUR, catalog=catalog, runner="inprocess", spark=spark)
    assert res.mode == "full" and "would be joined with" in (_reason(view) or ""), _reason(view)
    assert made == []
    assert multiset(read_view(view, as_of=t + HOUR)) == oracle(Q3, paths, t + HOUR)
    # a narrow change (new orders) passes the guard (at its default ratio): its change frames are made and used
    # (by Spark's terms: evaluated in the driver, incremental/duckdbterms.py, the change needs no Spark frame at all)
    monkeypatch.delenv("MVSINK_INCREMENTAL_MAX_SCAN_RATIO")
    write_at(data / "orders", _orders(rng, range(500, 503)), t + 2 * HOUR)
    write_at(data / "lineitem", _lineitems(rng, range(500, 503)), t + 2 * HOUR + 1)
    res = refresh(view, t + 3 * HOUR, catalog=catalog, runner="inprocess", spark=spark)
    assert res.mode == "incremental:aggregate", _reason(view)
    assert sorted(made) == sorted([paths["orders"], paths["lineitem"]])
    assert multiset(read_view(view, as_of=t + 3 * HOUR)) == oracle(Q3, paths, t + 3 * HOUR)
