"""Acceptance 1 and 2: after every refresh the view equals an independent oracle (DuckDB)."""

from __future__ import annotations

import decimal
import json
import random

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from deltahelp import BASE, HOUR, delete_at, multiset, oracle, update_at, write_at, write_view
from mvsink.definitions.catalog import Catalog
from mvsink.readers.arrow import read_view
from mvsink.spark.runners import refresh

pytestmark = pytest.mark.spark

JOIN_AGG = """
SELECT c.region, o.status, count(*) AS n, sum(o.qty) AS qty, max(o.price) AS max_price
FROM orders o LEFT JOIN customers c ON o.cust_id = c.id
GROUP BY c.region, o.status
""".strip()

PROJECT = """
SELECT o.cust_id, o.status, o.qty FROM orders o WHERE o.qty > 1 OR o.qty IS NULL
""".strip()

ORDERS = pa.schema([("id", pa.int64()), ("cust_id", pa.int32()), ("status", pa.string()),
                    ("qty", pa.int32()), ("price", pa.decimal128(10, 2))])
CUSTOMERS = pa.schema([("id", pa.int32()), ("region", pa.string())])


def _orders(rng: random.Random, start_id: int, n: int) -> pa.Table:
    rows = []
    for i in range(n):
        rows.append({
            "id": start_id + i,
            "cust_id": rng.choice([1, 2, 3, 4, 5, 9, None]),
            "status": rng.choice(["A", "B", "C", None]),
            "qty": rng.choice([0, 1, 2, 3, 3, None]),
            "price": rng.choice([decimal.Decimal("1.50"), decimal.Decimal("2.25"), None]),
        })
    return pa.Table.from_pylist(rows, schema=ORDERS)


def _customers(rng: random.Random) -> pa.Table:
    return pa.Table.from_pylist([{"id": i, "region": rng.choice(["eu", "us", None])} for i in range(1, 6)],
                                schema=CUSTOMERS)


def _random_change(rng: random.Random, orders: str, customers: str, next_id: list[int], ts: int) -> str:
    op = rng.choice(["insert", "insert", "delete", "update", "customers", "dupes"])
    if op == "insert":
        t = _orders(rng, next_id[0], rng.randint(1, 6))
        next_id[0] += t.num_rows
        write_at(orders, t, ts)
    elif op == "dupes":  # exact copies of existing rows except the id: duplicates in the projection
        t = _orders(random.Random(7), next_id[0], 4)
        next_id[0] += 4
        write_at(orders, t, ts)
    elif op == "delete":
        delete_at(orders, f"id % 5 = {rng.randint(0, 4)}", ts)
    elif op == "update":
        update_at(orders, {"status": "'B'", "qty": "qty + 1"}, f"id % 3 = {rng.randint(0, 2)}", ts)
    else:
        write_at(customers, _customers(rng), ts, mode="overwrite")
    return op


@pytest.mark.parametrize("seed", [11, 29])
def test_randomized_histories_match_oracle(spark, env, seed):
    data, views = env
    rng = random.Random(seed)
    orders, customers = str(data / "orders"), str(data / "customers")
    write_at(orders, _orders(rng, 0, 12), BASE)
    write_at(customers, _customers(rng), BASE + 1)
    next_id = [12]
    for name, query in (("agg", JOIN_AGG), ("proj", PROJECT)):
        sources = {"orders": "orders", "customers": "customers"} if name == "agg" else {"orders": "orders"}
        write_view(views, name, query=query, sources=sources, target=f"views/{name}", as_of=BASE)
    catalog = Catalog(views)
    t = BASE + HOUR
    refreshes = 0
    times = []
    for step in range(7):
        for _ in range(rng.randint(0, 2)):  # sometimes no change at all between refreshes
            t += rng.randint(1, 10) * 60_000
            _random_change(rng, orders, customers, next_id, t)
        t += HOUR
        times.append(t)
        for name, query in (("agg", JOIN_AGG), ("proj", PROJECT)):
            view = catalog.get(name)
            result = refresh(view, t, catalog=catalog, runner="inprocess", spark=spark, run_id=f"r{step}")
            assert result.status == "appended", result
            assert result.upper == t + 1
            srcs = {"orders": orders, "customers": customers} if name == "agg" else {"orders": orders}
            expected = oracle(query, srcs, t)
            assert multiset(read_view(view, as_of=t)) == expected, f"{name} at step {step}"
            refreshes += 1
    # every earlier refresh time still reads its own oracle (the table is a history), and a time
    # between two refreshes reads the earlier refresh's result
    proj = catalog.get("proj")
    for r in times:
        assert multiset(read_view(proj, as_of=r)) == oracle(PROJECT, {"orders": orders}, r)
        if r != times[-1]:
            assert multiset(read_view(proj, as_of=r + 1)) == multiset(read_view(proj, as_of=r))
    assert refreshes >= 10
    assert sum(multiset(read_view(proj)).values()) > 0


def test_repeat_refresh_is_up_to_date_and_no_change_commits_no_files(spark, env):
    data, views = env
    rng = random.Random(3)
    orders = str(data / "orders")
    write_at(orders, _orders(rng, 0, 20), BASE)
    write_view(views, "proj", query=PROJECT, sources={"orders": "orders"}, target="views/proj", as_of=BASE)
    catalog = Catalog(views)
    view = catalog.get("proj")
    r1 = refresh(view, BASE + HOUR, catalog=catalog, runner="inprocess", spark=spark)
    assert r1.status == "appended" and r1.files >= 1 and r1.rows_added > 0

    again = refresh(view, BASE + HOUR, catalog=catalog, runner="inprocess", spark=spark)
    assert again.status == "up_to_date"
    assert "up to date" in again.reason
    dt = DeltaTable(view.target)
    version_before, files_before = dt.version(), set(dt.file_uris())

    # no source change between the refreshes: only the upper moves, no Spark job, no data file
    r2 = refresh(view, BASE + 2 * HOUR, catalog=catalog, runner="inprocess", spark=spark)
    assert r2.status == "appended" and r2.files == 0 and r2.bytes == 0 and r2.rows_added == 0
    assert "write" in r2.timings and r2.timings["write"] < 0.5  # no Spark step ran
    dt = DeltaTable(view.target)
    assert dt.version() == version_before + 1
    assert set(dt.file_uris()) == files_before
    last = dt.history(1)[0]
    assert last.get("operationMetrics", {}).get("num_added_files", 0) == 0
    assert json.loads(last["mvsink.operation"]) == "append"
    assert json.loads(last["mvsink.rows_added"]) == 0
    assert dt.transaction_version(view.app_id) == BASE + 2 * HOUR + 1
    assert multiset(read_view(view, as_of=BASE + 2 * HOUR)) == oracle(PROJECT, {"orders": orders}, BASE + 2 * HOUR)

    # a source change after that is picked up again
    write_at(orders, _orders(rng, 100, 3), BASE + 2 * HOUR + 5)
    r3 = refresh(view, BASE + 3 * HOUR, catalog=catalog, runner="inprocess", spark=spark)
    assert r3.status == "appended"
    assert multiset(read_view(view)) == oracle(PROJECT, {"orders": orders}, BASE + 3 * HOUR)
