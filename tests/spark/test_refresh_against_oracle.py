"""Acceptance 1 and 2: after every refresh of a random history the view equals an independent oracle (DuckDB)."""

from __future__ import annotations

import random

import pytest

from mvsink.definitions.catalog import Catalog
from mvsink.readers.arrow import read_view
from mvsink.write.runners import refresh
from tests.support.data import JOIN_AGG, PROJECT, make_customers, make_orders, random_change
from tests.support.delta import BASE, HOUR, write_at
from tests.support.oracle import multiset, oracle
from tests.support.viewfiles import write_view

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("seed", [11, 29])
def test_randomized_histories_match_oracle(spark, env, seed):
    data, views = env
    rng = random.Random(seed)
    orders, customers = str(data / "orders"), str(data / "customers")
    write_at(orders, make_orders(rng, 0, 12), BASE)
    write_at(customers, make_customers(rng), BASE + 1)
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
            random_change(rng, orders, customers, next_id, t)
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
