"""Incremental refresh: corrections from the sources' changes equal the full diff's, checked by an oracle."""

from __future__ import annotations

import random
import shutil

import pytest
from deltalake import write_deltalake

from mvsink.definitions.catalog import Catalog
from mvsink.readers.arrow import read_view
from mvsink.write.runners import refresh
from tests.support.data import (
    INC_AGG,
    INC_JOIN,
    INC_LEFT,
    INC_UNION,
    inc_change,
    inc_customers,
    inc_join_view,
    inc_orders,
)
from tests.support.delta import BASE, HOUR, delete_at, mvsink_history, stamp, update_at, write_at
from tests.support.oracle import multiset, oracle
from tests.support.viewfiles import write_view

pytestmark = pytest.mark.spark


CDF = {"delta.enableChangeDataFeed": "true"}


def _modes(view_target: str) -> list[str]:
    """Diff mode of each append, oldest first."""
    return [h.get("mode", "") for h in reversed(mvsink_history(view_target)) if h.get("operation") == "append"]


@pytest.mark.parametrize("seed,cdf", [(5, True), (17, False)])
def test_randomized_histories_incremental_matches_oracle(spark, env, monkeypatch, seed, cdf):
    """Linear views refresh incrementally and equal the oracle; the aggregate falls back to the full diff."""
    monkeypatch.setenv("MVSINK_INCREMENTAL_MAX_FRACTION", "100")  # always incremental when allowed
    data, views = env
    rng = random.Random(seed)
    orders, customers = str(data / "orders"), str(data / "customers")
    write_deltalake(orders, inc_orders(rng, 0, 30), configuration=CDF if cdf else None)
    stamp(orders, BASE)
    write_deltalake(customers, inc_customers(rng), configuration=CDF if cdf else None)
    stamp(customers, BASE + 1)
    queries = {"join": INC_JOIN, "proj": INC_UNION, "left": INC_LEFT, "agg": INC_AGG}
    for name, q in queries.items():
        write_view(
            views,
            name,
            query=q,
            sources={"orders": "orders", "customers": "customers"},
            target=f"views/{name}",
            as_of=BASE,
        )
    catalog = Catalog(views)
    next_id, t = [30], BASE + HOUR
    srcs = {"orders": orders, "customers": customers}
    for step in range(6):
        for _ in range(rng.randint(1, 3)):
            t += rng.randint(1, 10) * 60_000
            inc_change(rng, orders, customers, next_id, t)
        t += HOUR
        for name, q in queries.items():
            view = catalog.get(name)
            res = refresh(view, t, catalog=catalog, runner="inprocess", spark=spark, run_id=f"s{step}")
            assert res.status == "appended", res
            assert multiset(read_view(view, as_of=t)) == oracle(q, srcs, t), f"{name} at step {step}"
    modes = {name: _modes(str(data / "views" / name)) for name in queries}
    # an aggregate over a linear join: its state unless the scan guard prefers the full diff
    # (or nothing to write where a change touches no column it reads: "incremental", incremental/untouched.py)
    agg_modes = {"full", "unchanged", "incremental", "incremental:groups", "incremental:aggregate"}
    agg_modes.add("incremental:partitioned")
    assert set(modes["agg"]) <= agg_modes, modes["agg"]
    for name in ("join", "proj"):
        assert modes[name][0] == "full" and "incremental" in modes[name], modes[name]
        assert "full" not in modes[name][1:], modes[name]
    # LEFT is linear in orders only: incremental when only orders changed; when customers did, partitioned by the
    # join's key (or the full diff where the scan guard prefers it)
    appends = [h for h in reversed(mvsink_history(str(data / "views" / "left"))) if h.get("operation") == "append"]
    for prev, cur in zip(appends, appends[1:]):
        customers_moved = prev["sources"]["customers"] != cur["sources"]["customers"]  # type: ignore[index]
        untouched = "touches no column the query reads" in str(cur.get("mode_reason", ""))  # (nothing to write)
        moved = ("incremental",) if untouched else ("full", "incremental:partitioned")
        assert cur["mode"] in (moved if customers_moved else ("incremental",)), (prev, cur)


def test_incremental_over_partitioned_source_with_null_partition(spark, env, monkeypatch):
    monkeypatch.setenv("MVSINK_INCREMENTAL_MAX_FRACTION", "100")
    rng = random.Random(9)
    view, srcs = inc_join_view(env, rng, 30, partition_by=["status"], configuration=CDF)
    orders = srcs["orders"]
    refresh(view, BASE + HOUR, runner="inprocess", spark=spark)
    t = BASE + HOUR
    for i in range(3):
        update_at(orders, {"qty": "qty + 1"}, f"id % 3 = {i}", t + 10)
        delete_at(orders, f"id % 5 = {i}", t + 20)
        write_at(orders, inc_orders(rng, 100 + 10 * i, 4), t + 30)
        t += HOUR
        res = refresh(view, t, runner="inprocess", spark=spark)
        assert res.mode == "incremental", res
        assert multiset(read_view(view, as_of=t)) == oracle(INC_JOIN, srcs, t)
    shutil.rmtree(env[0] / "views")


def test_small_changes_are_consolidated_in_the_driver_unless_a_type_forbids(spark, env, monkeypatch):
    """Few change rows are summed in the driver (one Spark job, no shuffle); floating-point columns, whose
    equality differs between Spark (-0.0 = 0.0, NaN = NaN) and the driver, and too many rows stay with Spark.
    Every way equals the oracle, and the staged files hold consolidated corrections."""
    import pyarrow as pa

    from mvsink.engines import arrow as driver

    monkeypatch.setenv("MVSINK_INCREMENTAL_MAX_FRACTION", "100")
    data, views = env
    src = str(data / "items")
    rows = [{"id": i, "tag": ["x", "y", None][i % 3], "price": [0.0, 1.5, None][i % 3]} for i in range(12)]
    write_deltalake(src, pa.Table.from_pylist(rows), configuration=CDF)
    stamp(src, BASE)
    queries = {"tags": "SELECT id % 4 AS g, tag FROM items", "prices": "SELECT tag, price FROM items"}
    for name, q in queries.items():
        write_view(views, name, query=q, sources={"items": "items"}, target=f"views/{name}", as_of=BASE)
    catalog = Catalog(views)
    t = BASE + HOUR
    for name in queries:
        refresh(catalog.get(name), t, catalog=catalog, runner="inprocess", spark=spark)

    def step(changes, expect_driver):
        nonlocal t
        changes(t + 10)
        t += HOUR
        for name, q in queries.items():
            res = refresh(catalog.get(name), t, catalog=catalog, runner="inprocess", spark=spark, run_id=f"r{t}")
            assert res.mode == "incremental", res
            reason = str(mvsink_history(str(data / "views" / name))[0]["mode_reason"])
            assert ("in the driver" in reason) is expect_driver[name], (name, reason)
            assert multiset(read_view(catalog.get(name), as_of=t)) == oracle(q, {"items": src}, t), name
            # consolidated: no row is both added and retracted in one batch
            batch = [r for r in read_updates(data / "views" / name) if r["_mv_time"] == t]
            keys = [tuple(v for k, v in r.items() if not k.startswith("_mv_")) for r in batch]
            assert len(keys) == len(set(keys)), (name, batch)

    # an update that leaves some rows of each view as they were (their - and + cancel) and moves others
    step(
        lambda ts: update_at(src, {"price": "price * 2", "id": "id + 4"}, "id < 6", ts), {"tags": True, "prices": False}
    )
    step(lambda ts: delete_at(src, "id % 2 = 0", ts), {"tags": True, "prices": False})
    monkeypatch.setattr(driver, "MAX_DRIVER_ROWS", 1)
    step(lambda ts: update_at(src, {"tag": "'z'"}, "tag IS NULL", ts), {"tags": False, "prices": False})


def read_updates(target) -> list[dict]:
    from deltalake import DeltaTable

    return DeltaTable(str(target)).to_pyarrow_table().to_pylist()
