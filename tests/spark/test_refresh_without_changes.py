"""A repeated refresh is up to date; a refresh with no source change only moves the upper (no Spark job, no file)."""

from __future__ import annotations

import json
import random

import pytest
from deltalake import DeltaTable

from mvsink.definitions.catalog import Catalog
from mvsink.readers.arrow import read_view
from mvsink.write.runners import refresh
from tests.support.data import PROJECT, make_orders
from tests.support.delta import BASE, HOUR, write_at
from tests.support.oracle import multiset, oracle
from tests.support.viewfiles import write_view

pytestmark = pytest.mark.spark


def test_repeat_refresh_is_up_to_date_and_no_change_commits_no_files(spark, env):
    data, views = env
    rng = random.Random(3)
    orders = str(data / "orders")
    write_at(orders, make_orders(rng, 0, 20), BASE)
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
    write_at(orders, make_orders(rng, 100, 3), BASE + 2 * HOUR + 5)
    r3 = refresh(view, BASE + 3 * HOUR, catalog=catalog, runner="inprocess", spark=spark)
    assert r3.status == "appended"
    assert multiset(read_view(view)) == oracle(PROJECT, {"orders": orders}, BASE + 3 * HOUR)
