"""Source kinds: partitioned Delta tables, views over views (frontier capped by the input's upper)."""

from __future__ import annotations

import random

import duckdb
import pytest
from deltalake import write_deltalake

from mvsink.definitions.catalog import Catalog
from mvsink.readers.arrow import read_view
from mvsink.write.runners import refresh
from tests.support.data import PROJECT, make_orders
from tests.support.delta import BASE, HOUR, snapshot, stamp, write_at
from tests.support.oracle import multiset, oracle
from tests.support.viewfiles import write_view

pytestmark = pytest.mark.spark


def test_partitioned_source_with_null_partition(spark, env):
    data, views = env
    orders = str(data / "orders")
    t = make_orders(random.Random(4), 0, 40)
    write_deltalake(orders, t, partition_by=["status"])
    stamp(orders, BASE)
    write_view(views, "proj", query=PROJECT, sources={"orders": "orders"}, target="views/proj", as_of=BASE)
    catalog = Catalog(views)
    view = catalog.get("proj")
    res = refresh(view, BASE + HOUR, catalog=catalog, runner="inprocess", spark=spark)
    assert res.status == "appended"
    expected = oracle(PROJECT, {"orders": orders}, BASE + HOUR)
    assert any(row[1] is None for row in expected)  # the NULL partition is in the result
    assert multiset(read_view(view)) == expected


DOWN = "SELECT status, count(*) AS n, sum(qty) AS qty FROM up GROUP BY status"


def test_view_over_view_is_capped_by_its_input(spark, env):
    data, views = env
    orders = str(data / "orders")
    write_at(orders, make_orders(random.Random(6), 0, 30), BASE)
    write_view(views, "proj", query=PROJECT, sources={"orders": "orders"}, target="views/proj", as_of=BASE)
    write_view(
        views,
        "down",
        query=DOWN,
        sources={"up": {"view": "proj"}},
        target="views/down",
        as_of=BASE,
        schedule={"on_commit": ["proj"]},
    )
    catalog = Catalog(views)
    proj, down = catalog.get("proj"), catalog.get("down")

    waiting = refresh(down, BASE + HOUR, catalog=catalog, runner="inprocess", spark=spark)
    assert waiting.status == "up_to_date" and waiting.reason.startswith("waiting for inputs: ")
    assert "final only below 0" in waiting.reason
    assert waiting.upper == 0

    r1, r2 = BASE + HOUR, BASE + 3 * HOUR
    assert refresh(proj, r1, catalog=catalog, runner="inprocess", spark=spark).status == "appended"
    write_at(orders, make_orders(random.Random(7), 100, 10), BASE + 2 * HOUR)

    capped = refresh(down, r2, catalog=catalog, runner="inprocess", spark=spark)
    assert capped.status == "appended" and capped.upper == r1 + 1  # never past its input's upper

    def down_oracle(t: int):
        """DOWN over PROJECT over the orders snapshot at t, all in DuckDB (independent of mvsink)."""
        con = duckdb.connect()
        con.register("orders", snapshot(orders, t))
        con.execute(f"CREATE TABLE up AS {PROJECT}")
        return multiset(con.sql(DOWN).to_arrow_table())

    assert multiset(read_view(down, as_of=r1)) == down_oracle(r1)
    assert down_oracle(r1) != down_oracle(r2)  # the capped refresh really used the input as of r1

    assert refresh(proj, r2, catalog=catalog, runner="inprocess", spark=spark).status == "appended"
    again = refresh(down, r2, catalog=catalog, runner="inprocess", spark=spark)
    assert again.status == "appended" and again.upper == r2 + 1
    assert multiset(read_view(down, as_of=r2)) == down_oracle(r2)
    # the upstream view itself matches the oracle on the sources, so the chain is exact end to end
    assert multiset(read_view(proj, as_of=r2)) == oracle(PROJECT, {"orders": orders}, r2)
