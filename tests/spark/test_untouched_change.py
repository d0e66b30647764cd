"""A change no column of the query reads writes nothing, without Spark (incremental/untouched.py), whatever the query:
a TPC-H Q16 shape (NOT IN over a subquery, COUNT(DISTINCT)) over part, partsupp and supplier whose prices change
(delta-rs updates: copy-on-write rewrites, no change data feed) refreshes with no corrections, no Spark job and an
empty commit; a change of a column it reads (a supplier's comment), a floating-point column the query reads (0.0 to
-0.0) and a deleted row take the usual modes. Every state exact against DuckDB's oracle; the commit log asserted."""

from __future__ import annotations

import random
from collections import Counter
from decimal import Decimal

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from mvsink.core.table import ViewTable
from mvsink.definitions.catalog import Catalog
from mvsink.readers.arrow import read_view
from mvsink.write.runners import refresh
from tests.support.delta import BASE, HOUR, delete_at, stamp, update_at, write_at
from tests.support.oracle import multiset, oracle
from tests.support.viewfiles import write_view

pytestmark = pytest.mark.spark

Q16 = """SELECT p_brand, p_type, p_size, count(DISTINCT ps_suppkey) AS supplier_cnt
FROM partsupp JOIN part ON p_partkey = ps_partkey
WHERE p_brand <> 'Brand#5' AND p_size IN (1, 3, 5, 7)
  AND ps_suppkey NOT IN (SELECT s_suppkey FROM supplier WHERE s_comment LIKE '%Complaints%')
GROUP BY p_brand, p_type, p_size"""
WEIGHTS = "SELECT p_partkey, p_weight FROM part WHERE p_size < 4"
# (TPC-H Q21's EXISTS (SELECT * ...): whether a row is found, whatever its columns hold)
EXISTS = (
    "SELECT s_suppkey, s_comment FROM supplier WHERE EXISTS (SELECT * FROM partsupp WHERE ps_suppkey = s_suppkey "
    "AND ps_partkey < 50)"
)
SOURCES = {"q16": ("part", "partsupp", "supplier"), "weights": ("part",), "exists": ("supplier", "partsupp")}
NOTHING = "touches no column the query reads"


def _lake(data, rng: random.Random) -> dict[str, str]:
    parts = range(1, 301)
    write_at(
        data / "part",
        pa.table(
            {
                "p_partkey": pa.array(list(parts), pa.int64()),
                "p_brand": [f"Brand#{rng.randrange(1, 8)}" for _ in parts],
                "p_type": [rng.choice(["STEEL", "TIN", "COPPER"]) for _ in parts],
                "p_size": pa.array([rng.randrange(1, 9) for _ in parts], pa.int32()),
                "p_retailprice": pa.array(
                    [Decimal(rng.randrange(100, 99999)) / 100 for _ in parts], pa.decimal128(15, 2)
                ),
                "p_weight": pa.array([0.0 if p % 7 == 0 else rng.random() for p in parts], pa.float64()),
            }
        ),
        BASE,
    )
    rows = [(p, s) for p in parts for s in rng.sample(range(1, 41), 4)]
    write_at(
        data / "partsupp",
        pa.table(
            {
                "ps_partkey": pa.array([p for p, _ in rows], pa.int64()),
                "ps_suppkey": pa.array([s for _, s in rows], pa.int64()),
                "ps_supplycost": pa.array(
                    [Decimal(rng.randrange(100, 99999)) / 100 for _ in rows], pa.decimal128(15, 2)
                ),
            }
        ),
        BASE,
    )
    sups = range(1, 41)
    write_at(
        data / "supplier",
        pa.table(
            {
                "s_suppkey": pa.array(list(sups), pa.int64()),
                "s_comment": ["Customer Complaints" if s % 9 == 0 else f"fine {s}" for s in sups],
                "s_acctbal": pa.array([Decimal(rng.randrange(-999, 9999)) / 100 for _ in sups], pa.decimal128(15, 2)),
            }
        ),
        BASE,
    )
    return {n: str(data / n) for n in ("part", "partsupp", "supplier")}


def _signless(rows: Counter) -> Counter:
    """Rows with -0.0 as 0.0: equal in SQL, and Spark's grouping (every mode's consolidation) stores 0.0 for the
    query's -0.0 (docs/limits.md)."""
    out: Counter = Counter()
    for row, n in rows.items():
        out[tuple("0.000000" if v == "-0.000000" else v for v in row)] += n
    return out


def _commits(view) -> list[dict]:
    return [h.info for h in ViewTable.open(view).history(limit=100)]


def test_a_change_of_columns_no_view_reads_writes_nothing_without_spark(spark, env):
    data, views = env
    paths = _lake(data, random.Random(5))
    for name, query in (("q16", Q16), ("weights", WEIGHTS), ("exists", EXISTS)):
        write_view(views, name, query=query, sources={s: s for s in SOURCES[name]}, target=f"views/{name}", as_of=BASE)
    catalog = Catalog(views)

    def step(t: int) -> dict:
        got = {}
        for name, query in (("q16", Q16), ("weights", WEIGHTS), ("exists", EXISTS)):
            view = catalog.get(name)
            res = refresh(view, t, catalog=catalog, runner="inprocess", spark=spark)
            assert res.status == "appended", res
            rows = _signless(multiset(read_view(view, as_of=t)))
            want = _signless(oracle(query, {s: paths[s] for s in SOURCES[name]}, t))
            assert rows == want, (name, t, res.mode, res.mode_reason)
            got[name] = res
        return got

    t = BASE + HOUR
    step(t)
    # prices of parts, partsupp rows and suppliers: columns neither view reads
    t += HOUR
    update_at(data / "part", {"p_retailprice": "p_retailprice + 1"}, "p_partkey <= 100", t - 10)
    update_at(data / "partsupp", {"ps_supplycost": "ps_supplycost * 2"}, "ps_suppkey < 20", t - 9)
    update_at(data / "supplier", {"s_acctbal": "s_acctbal - 5"}, "s_suppkey > 10", t - 8)
    before = {n: len(_commits(catalog.get(n))) for n in SOURCES}
    got = step(t)
    for name, res in got.items():
        assert res.mode == "incremental" and NOTHING in res.mode_reason, (name, res.mode_reason)
        assert res.spark_jobs == 0 and res.rows_added == res.rows_retracted == 0, res
        history = _commits(catalog.get(name))
        assert len(history) == before[name] + 1  # one commit: the frontier moves, the source versions recorded
        assert history[0].mode == "incremental" and NOTHING in history[0].mode_reason
    # a supplier's comment now matches the NOT IN subquery: q16 changes; weights still untouched
    t += HOUR
    update_at(data / "supplier", {"s_comment": "'Customer Complaints'"}, "s_suppkey = 11", t - 10)
    got = step(t)
    assert NOTHING not in got["q16"].mode_reason and got["q16"].rows_added + got["q16"].rows_retracted > 0
    weights = got["weights"]  # (supplier is not its source and part did not change: mint's no-change refresh)
    assert weights.rows_added == weights.rows_retracted == 0 and NOTHING not in weights.mode_reason
    # a read floating-point column from 0.0 to -0.0: not consolidated away (the usual mode decides)
    t += HOUR
    update_at(data / "part", {"p_weight": "-0.0"}, "p_weight = 0.0 AND p_size < 4", t - 10)
    got = step(t)
    assert NOTHING not in got["weights"].mode_reason, got["weights"].mode_reason
    assert NOTHING in got["q16"].mode_reason  # (q16 reads no p_weight)
    # a deleted partsupp row of a sized part: its rows changed
    t += HOUR
    delete_at(data / "partsupp", "ps_partkey = 3", t - 10)
    got = step(t)
    assert NOTHING not in got["q16"].mode_reason
    assert NOTHING not in got["exists"].mode_reason  # (a row of the EXISTS's source is gone: looked into)


@pytest.mark.parametrize("cdf", [False, True])
def test_an_update_of_unread_columns_writes_nothing_before_the_aggregate_state(spark, env, monkeypatch, cdf):
    """An aggregate view the refresh without Spark serves from its state (plan facts kept) writes nothing for an
    update that keeps the row count and changes no column it reads (write/driver.py tries that first); an update of
    a column it reads, and an insert, take the aggregate state as before."""
    monkeypatch.setenv("MVSINK_INCREMENTAL_MAX_FRACTION", "100")  # (one-file tables: every update rewrites it all)
    monkeypatch.setenv("MVSINK_INCREMENTAL_MAX_SCAN_RATIO", "1000")
    data, views = env
    paths = _lake(data, random.Random(8))
    if cdf:  # updates then write change data feed files (update images) instead of removing and adding files
        for name in ("part", "partsupp"):
            DeltaTable(paths[name]).alter.set_table_properties({"delta.enableChangeDataFeed": "true"})
            stamp(paths[name], BASE + 2)
    query = "SELECT p_size, count(*) AS n, sum(ps_supplycost) AS cost FROM partsupp JOIN part ON p_partkey = ps_partkey GROUP BY p_size"
    write_view(
        views, "agg", query=query, sources={"part": "part", "partsupp": "partsupp"}, target="views/agg", as_of=BASE
    )
    view = Catalog(views).get("agg")

    def step(t: int):
        res = refresh(view, t, runner="inprocess", spark=spark)
        assert res.status == "appended", res
        want = oracle(query, {s: paths[s] for s in ("part", "partsupp")}, t)
        assert multiset(read_view(view, as_of=t)) == want, (t, res.mode, res.mode_reason)
        return res

    t = BASE + HOUR
    step(t)
    t += HOUR  # a read column: the aggregate state (a Spark refresh, which keeps the plan facts)
    update_at(data / "partsupp", {"ps_supplycost": "ps_supplycost + 1"}, "ps_suppkey < 5", t - 10)
    assert step(t).mode == "incremental:aggregate"
    t += HOUR
    update_at(data / "partsupp", {"ps_supplycost": "ps_supplycost + 1"}, "ps_suppkey > 35", t - 10)
    res = step(t)
    assert res.mode == "incremental:aggregate" and res.spark_jobs == 0, res  # (without Spark: the facts are kept)
    t += HOUR  # the price of parts: agg reads no p_retailprice
    update_at(data / "part", {"p_retailprice": "p_retailprice * 2"}, "p_partkey <= 150", t - 10)
    if cdf:
        assert any((data / "part" / "_change_data").iterdir())
    res = step(t)
    assert res.mode == "incremental" and NOTHING in res.mode_reason and res.spark_jobs == 0, res
    assert res.rows_added == res.rows_retracted == 0
    t += HOUR  # a read column again: not nothing
    update_at(data / "partsupp", {"ps_supplycost": "ps_supplycost - 1"}, "ps_suppkey = 7", t - 10)
    res = step(t)
    assert res.mode == "incremental:aggregate" and res.spark_jobs == 0 and res.rows_added > 0, res
