"""Acceptance 6: a view's as_of: refreshes before it write nothing; the first one after bumps the upper, then appends."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from deltalake import DeltaTable

from mvsink.definitions.catalog import Catalog
from mvsink.readers.arrow import read_view
from mvsink.write.runners import refresh
from tests.support.data import JOIN_AGG, make_customers, make_orders
from tests.support.delta import BASE, HOUR, operations, write_at
from tests.support.oracle import multiset, oracle
from tests.support.viewfiles import write_view

pytestmark = pytest.mark.spark


def test_as_of_in_the_past_bumps_upper_then_appends(spark, env):
    data, views = env
    orders, customers = str(data / "orders"), str(data / "customers")
    write_at(orders, make_orders(random.Random(1), 0, 15), BASE)
    write_at(customers, make_customers(random.Random(1)), BASE + 1)
    as_of = BASE + 2 * HOUR
    write_view(
        views,
        "agg",
        query=JOIN_AGG,
        sources={"orders": "orders", "customers": "customers"},
        target="views/agg",
        as_of=as_of,
    )
    catalog = Catalog(views)
    view = catalog.get("agg")

    early = refresh(view, BASE + HOUR, catalog=catalog, runner="inprocess", spark=spark)
    assert early.status == "up_to_date" and "before as_of" in early.reason
    assert not Path(view.target).exists()  # nothing written below as_of, not even the table

    r = BASE + 3 * HOUR
    res = refresh(view, r, catalog=catalog, runner="inprocess", spark=spark)
    assert res.status == "appended" and res.lower == as_of and res.upper == r + 1
    history = list(reversed(DeltaTable(view.target).history()))
    assert operations(view.target) == ["create", "bump", "append"]
    assert json.loads(history[1]["mvsink.lower"]) == as_of  # the bump set the upper to as_of
    assert json.loads(history[2]["mvsink.lower"]) == as_of and json.loads(history[2]["mvsink.upper"]) == r + 1
    sources = json.loads(history[2]["mvsink.sources"])
    assert sources == {"orders": 0, "customers": 0}
    assert multiset(read_view(view, as_of=r)) == oracle(JOIN_AGG, {"orders": orders, "customers": customers}, r)
    assert min(DeltaTable(view.target).to_pyarrow_table().column("_mv_time").to_pylist()) >= as_of
