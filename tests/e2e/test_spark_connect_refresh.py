"""CLI refreshes through a long-lived Spark Connect server (no JVM start per refresh) equal the oracle."""

from __future__ import annotations

import json
import random

import pytest

from mvsink.definitions.catalog import Catalog
from mvsink.readers.arrow import read_view
from tests.support.cli import run_cli_process
from tests.support.data import PROJECT, make_orders
from tests.support.delta import BASE, HOUR, delete_at, staged_leftovers, write_at
from tests.support.oracle import multiset, oracle
from tests.support.viewfiles import write_view

# An aggregate with hidden state: over Connect its Δ per group is collected (toArrow), the new rows are
# finalised over a local relation and the SQL statements take DataFrame arguments (WithRelations).
AGGREGATE = (
    "SELECT status, count(*) AS n, sum(qty) AS q, avg(price) AS p, count(price) AS np FROM orders GROUP BY status"
)


@pytest.mark.slow
def test_refreshes_through_spark_connect_match_oracle(env, tmp_path, monkeypatch, connect_url):
    url = connect_url
    monkeypatch.setenv("MVSINK_INCREMENTAL_MAX_FRACTION", "100")  # small tables: every change rewrites the file
    data, views = env
    orders = str(data / "orders")
    write_at(orders, make_orders(random.Random(21), 0, 30), BASE)
    write_view(views, "proj", query=PROJECT, sources={"orders": "orders"}, target="views/proj", as_of=BASE)
    write_view(views, "agg", query=AGGREGATE, sources={"orders": "orders"}, target="views/agg", as_of=BASE)
    catalog = Catalog(views)
    view = catalog.get("proj")
    for k, r in enumerate((BASE + HOUR, BASE + 2 * HOUR, BASE + 3 * HOUR)):
        if k:
            write_at(orders, make_orders(random.Random(k), 100 * k, 6), r - 60_000)
        if k == 2:  # a delete too: both the inserted and the deleted change terms are evaluated remotely
            delete_at(orders, "id % 3 = 0", r - 30_000)
        for name, query, mode in (("proj", PROJECT, "incremental"), ("agg", AGGREGATE, "incremental:aggregate")):
            # a fresh process, as a CLI call or an Airflow task is (a classic session lives in this one)
            out = run_cli_process(views, "refresh", name, "--at", str(r), "--remote", url, "--json", timeout=300)
            res = json.loads(out.stdout)
            assert res["status"] == "appended" and res["upper"] == r + 1
            assert res["mode"] == ("full" if k == 0 else mode), res
            got = read_view(catalog.get(name), as_of=r)
            assert multiset(got) == oracle(query, {"orders": orders}, r), name
    assert staged_leftovers(view.target) == [] and staged_leftovers(catalog.get("agg").target) == []
