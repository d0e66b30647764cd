"""A partitioned recompute without Spark (write/driverpart.py): a first build (incremental/partkeep.py), and a Spark
refresh whose partitioned recompute of an aggregate's input ran in DuckDB (TPC-H Q4, Q13 and Q22's shapes), keep
how (the plan facts' ``partitioned`` term of a set of changed sources), and the next refresh changing the same
sources runs in the refreshing process. Each
refresh is exact against DuckDB's oracle and leaves the table (hidden state included) equal to a twin refreshed by
Spark; a scalar subquery written in as a literal holds only while the sources it read keep their versions; a
command-line refresh then imports no pyspark and needs no server."""

from __future__ import annotations

import json
import logging
import random

import pytest

from mvsink.core.table import ViewTable
from mvsink.definitions.catalog import Catalog
from mvsink.incremental.driverfacts import FOLDER
from mvsink.readers.arrow import read_view
from mvsink.write.runners import refresh
from tests.spark.test_spark_free_refresh import _state
from tests.support import aggdata
from tests.support.aggdata import appends
from tests.support.cli import refresh_without_server
from tests.support.delta import BASE, HOUR, delete_at, update_at, write_at
from tests.support.oracle import multiset, oracle
from tests.support.viewfiles import write_view

pytestmark = pytest.mark.spark

VIEWS = {
    # Q22's: a scalar subquery over customers (unchanged while orders change: written in as a literal) and NOT EXISTS
    "q22": "SELECT cc, count(*) AS n, sum(id) AS s FROM (SELECT substring(c.region, 1, 1) AS cc, c.id "
    "FROM customers c WHERE c.id > (SELECT min(id) FROM customers WHERE region IS NOT NULL OR seg IS NULL) "
    "AND NOT EXISTS (SELECT * FROM orders o WHERE o.cust = c.id)) t GROUP BY cc",
    # Q4's: an EXISTS correlated on the key
    "q4": "SELECT c.region, count(*) AS n FROM customers c "
    "WHERE EXISTS (SELECT * FROM orders o WHERE o.cust = c.id AND o.qty > 1) GROUP BY c.region",
    # Q13's: a count of a LEFT OUTER JOIN's null-supplying side per key, counted again
    "q13": "SELECT c_count, count(*) AS custdist FROM (SELECT c.id, count(o.id) AS c_count FROM customers c "
    "LEFT OUTER JOIN orders o ON c.id = o.cust AND o.status <> 'B' GROUP BY c.id) AS c_orders GROUP BY c_count",
}
WITHOUT = "without Spark"


def _reason(view) -> str:
    info = ViewTable.open(view).history(limit=1)[0].info
    return (info.mode_reason if info else None) or ""


def _orders_change(rng: random.Random, orders: str, next_id: list[int], ts: int) -> str:
    """Orders only: inserts (of new and known customers), deletes (a customer's last order included), updates."""
    op = rng.choice(["insert", "insert", "delete", "delete_cust", "update"])
    if op == "insert":
        t = aggdata.agg_orders(rng, next_id[0], rng.randint(1, 4))  # (price dropped: the fixture)
        next_id[0] += t.num_rows
        write_at(orders, t, ts)
    elif op == "delete":
        delete_at(orders, f"id % 5 = {rng.randint(0, 4)}", ts)
    elif op == "delete_cust":  # every order of a customer: it passes NOT EXISTS again
        delete_at(orders, f"cust = {rng.randint(1, 4)}", ts)
    else:
        update_at(orders, {"status": "'B'", "qty": "qty + 1"}, f"id % 4 = {rng.randint(0, 3)}", ts)
    return op


@pytest.fixture
def lake(env, monkeypatch):
    monkeypatch.setenv("MVSINK_INCREMENTAL_MAX_FRACTION", "100")
    made = aggdata.agg_orders  # (no DOUBLE column: DuckDB's reads in the driver refuse one)
    monkeypatch.setattr(aggdata, "agg_orders", lambda *a, **k: made(*a, **k).drop_columns(["price"]))
    data, views = env
    orders, customers = aggdata.write_sources(data, random.Random(5), 40)
    srcs = {"orders": orders, "customers": customers}
    for name, q in VIEWS.items():
        for suffix in ("", "_spark"):
            write_view(
                views, name + suffix, query=q, sources={s: s for s in srcs}, target=f"views/{name}{suffix}", as_of=BASE
            )
    return data, views, Catalog(views), srcs


def _refresh_both(spark, catalog, name: str, t: int, monkeypatch, step: int):
    monkeypatch.setenv("MVSINK_SPARK_FREE", "true")
    res = refresh(catalog.get(name), t, catalog=catalog, runner="inprocess", spark=spark, run_id=f"s{step}")
    monkeypatch.setenv("MVSINK_SPARK_FREE", "false")
    twin = refresh(catalog.get(name + "_spark"), t, catalog=catalog, runner="inprocess", spark=spark, run_id=f"s{step}")
    monkeypatch.setenv("MVSINK_SPARK_FREE", "true")
    assert res.status == twin.status == "appended", (name, res, twin)
    return res


def _check(catalog, srcs, name: str, t: int, ops) -> None:
    view, twin = catalog.get(name), catalog.get(name + "_spark")
    got = read_view(view, as_of=t)
    assert multiset(got) == oracle(VIEWS[name], srcs, t), (name, ops)
    assert multiset(got) == multiset(read_view(twin, as_of=t)), (name, ops)
    assert got.schema == read_view(twin, as_of=t).schema, name
    assert _state(view, t) == _state(twin, t), (name, ops)  # the hidden state too
    assert WITHOUT not in _reason(twin), name


@pytest.mark.parametrize("seed", [3, 8])
def test_partitioned_recomputes_run_without_spark_once_kept_and_match_spark(spark, lake, monkeypatch, seed):
    data, _, catalog, srcs = lake
    rng = random.Random(seed)
    next_id, t, ops = [40], BASE + HOUR, []
    for step in range(6):
        for _ in range(rng.randint(1, 2)):
            t += rng.randint(1, 10) * 60_000
            ops.append(_orders_change(rng, srcs["orders"], next_id, t))
        t += HOUR
        for name in VIEWS:
            _refresh_both(spark, catalog, name, t, monkeypatch, step)
            _check(catalog, srcs, name, t, ops)
    for name in VIEWS:
        # (the first build keeps the term of a change of orders: every refresh after it runs without Spark)
        history = [a for a in appends(str(data / "views" / name))[1:] if a["mode"] != "unchanged"]
        without = [a for a in history if a["mode"] == "incremental:aggregate"]
        assert len(without) >= 4, (name, [(a["mode"], a["mode_reason"]) for a in history])
        for a in without:
            assert WITHOUT in str(a["mode_reason"]), (name, a["mode_reason"], ops)
            assert "a partitioned recompute on" in str(a["mode_reason"]), a
            assert (a["cost"]["engine"], a["cost"]["spark_jobs"]) == ("driver", 0), a
        kept = [json.loads(p.read_text()) for p in (data / "views" / name / FOLDER).glob("*.json")]
        assert len(kept) == 1 and "orders" in kept[0]["partitioned"], (name, kept)


def test_a_literal_scalar_holds_only_while_its_sources_keep_their_versions(spark, lake, monkeypatch, caplog):
    """Q22's minimum customer id is written into the kept SQL as a literal (at the first build, pinning customers at
    its version): once customers changed (deleting the customer holding the minimum), the kept term is not used
    until a Spark refresh keeps it again."""
    data, _, catalog, srcs = lake
    rng = random.Random(4)
    next_id, t, ops = [40], BASE + HOUR, []
    reasons = []

    def step(change, n: int) -> None:
        nonlocal t
        t += 10 * 60_000
        ops.append(change())
        t += HOUR
        _refresh_both(spark, catalog, "q22", t, monkeypatch, n)
        _check(catalog, srcs, "q22", t, ops)
        reasons.append(_reason(catalog.get("q22")))

    orders = srcs["orders"]

    def insert() -> str:
        rows = aggdata.agg_orders(rng, next_id[0], 3)
        next_id[0] += rows.num_rows
        write_at(orders, rows, t)
        return "insert"

    customers = srcs["customers"]
    # the first build: it keeps the term, the minimum (1: every region set) read at this version of customers
    step(lambda: (update_at(customers, {"region": "'eu'"}, "id > 0", t), "regions")[1], 0)
    step(insert, 1)  # without Spark
    step(lambda: (delete_at(orders, "cust = 3", t), "delete")[1], 2)  # without Spark: customer 3 appears
    assert multiset(read_view(catalog.get("q22"), as_of=t)), "customer 3 is in the view"
    step(lambda: (update_at(customers, {"region": "'apac'"}, "id = 4", t), "customers")[1], 3)
    step(lambda: (delete_at(customers, "id = 1", t), "min customer")[1], 4)
    caplog.clear()
    caplog.set_level(logging.INFO, logger="mvsink.write.driver")
    step(insert, 5)  # the literal's source moved: Spark, which keeps the term again with the new minimum
    said = [r.getMessage() for r in caplog.records if r.name == "mvsink.write.driver"]
    assert any("source 'customers' moved since its scalar subquery was evaluated" in m for m in said), said
    step(lambda: (delete_at(orders, "id % 5 = 1", t), "delete")[1], 6)  # without Spark again
    assert [WITHOUT in r for r in reasons] == [False, True, True, False, False, False, True], reasons
    assert "moved since its scalar subquery was evaluated" not in reasons[5], reasons  # (Spark's reason)


def test_a_command_line_partitioned_refresh_imports_no_pyspark(spark, lake, monkeypatch):
    data, views, catalog, srcs = lake
    rng = random.Random(6)
    next_id, t = [40], BASE + HOUR
    for _ in range(2):  # the first build, which keeps the term, then a partitioned recompute from it
        assert refresh(catalog.get("q4"), t, catalog=catalog, runner="inprocess", spark=spark).status == "appended"
        _orders_change(rng, srcs["orders"], next_id, t + HOUR // 2)
        t += HOUR
    assert refresh(catalog.get("q4"), t, catalog=catalog, runner="inprocess", spark=spark).status == "appended"
    write_at(srcs["orders"], aggdata.agg_orders(rng, next_id[0], 3), t + HOUR // 2)
    t += HOUR
    result, heavy = refresh_without_server(
        views,
        "q4",
        t,
        env_extra={"MVSINK_DATA_ROOT": str(data), "MVSINK_INCREMENTAL_MAX_FRACTION": "100"},
        heavy=("pyspark", "sqlglot", "py4j", "grpc", "pandas"),
    )
    assert heavy == []
    assert (result["status"], result["mode"], result["spark_jobs"]) == ("appended", "incremental:aggregate", 0)
    assert WITHOUT in _reason(catalog.get("q4"))
    assert multiset(read_view(catalog.get("q4"), as_of=t)) == oracle(VIEWS["q4"], srcs, t)
