from __future__ import annotations

import random
import shutil

import pytest

from mvsink.definitions.catalog import Catalog
from mvsink.write.runners import refresh
from tests.support.data import PROJECT, make_orders, project_views, random_change
from tests.support.delta import BASE, HOUR, write_at
from tests.support.oracle import oracle
from tests.support.viewfiles import write_view

N_REFRESHES = 7


@pytest.fixture
def proj(env):
    """A projection view with duplicate rows over an orders table with history from BASE: (catalog, view, orders)."""
    data, views = env
    orders = str(data / "orders")
    write_at(orders, make_orders(random.Random(5), 0, 30), BASE)
    write_view(views, "proj", query=PROJECT, sources={"orders": "orders"}, target="views/proj", as_of=BASE)
    catalog = Catalog(views)
    return catalog, catalog.get("proj"), orders


@pytest.fixture(scope="session")
def history(spark, tmp_path_factory):
    """A refreshed view, built once: (data folder, refresh times, oracle per refresh time). Tests use ``copy``."""
    root = tmp_path_factory.mktemp("history") / "data"
    rng = random.Random(41)
    orders = str(root / "orders")
    write_at(orders, make_orders(rng, 0, 25), BASE)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MVSINK_DATA_ROOT", str(root.parent))  # view paths must lie inside the data root
        catalog = project_views(root, root.parent / "views")
        view = catalog.get("proj")
        next_id = [25]
        t = BASE + HOUR
        times, expected = [], {}
        for step in range(N_REFRESHES):
            for _ in range(1 + step % 2):
                t += rng.randint(1, 10) * 60_000
                random_change(rng, orders, str(root / "customers"), next_id, t)
            t += HOUR
            res = refresh(view, t, catalog=catalog, runner="inprocess", spark=spark, run_id=f"h{step}")
            assert res.status == "appended", res
            times.append(t)
            expected[t] = oracle(PROJECT, {"orders": orders}, t)
    return root, times, expected


@pytest.fixture
def copy(history, tmp_path, monkeypatch):
    """This test's own copy of the history (commit times of the sources preserved):
    (catalog, view, data folder, refresh times, oracle per refresh time)."""
    monkeypatch.setenv("MVSINK_DATA_ROOT", str(tmp_path))
    root, times, expected = history
    data = tmp_path / "data"
    shutil.copytree(root, data)
    catalog = project_views(data, tmp_path / "views")
    return catalog, catalog.get("proj"), data, times, dict(expected)


@pytest.fixture
def plan_views(spark):
    """Temp views ``orders`` and ``customers`` of one row each, for the plan analyses' tests (analysed, not run)."""
    spark.createDataFrame(
        [(1, 1, "A", 1, 1.0)], "id long, cust int, status string, qty int, price double"
    ).createOrReplaceTempView("orders")
    spark.createDataFrame([(1, "eu", "x")], "id int, region string, seg string").createOrReplaceTempView("customers")
