"""When a refresh falls back from incremental to the full diff: hand edits, vacuumed change files, schema changes,
too large a change, `incremental: false`, a source recreated at the same path."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from mvsink.definitions.catalog import Catalog
from mvsink.readers.arrow import read_view
from mvsink.write.runners import refresh
from tests.support.data import (
    INC_JOIN,
    inc_join_view,
    inc_orders,
)
from tests.support.delta import BASE, HOUR, delete_at, mvsink_history, stamp, update_at, write_at
from tests.support.oracle import multiset, oracle
from tests.support.viewfiles import write_view

pytestmark = pytest.mark.spark


def test_hand_edit_forces_full_diff_and_repairs(spark, env):
    rng = random.Random(2)
    view, srcs = inc_join_view(env, rng, 20)
    orders = srcs["orders"]
    refresh(view, BASE + HOUR, runner="inprocess", spark=spark)
    # someone deletes rows of the view by hand, then the source changes
    DeltaTable(view.target).delete("id < 5")
    write_at(orders, inc_orders(rng, 100, 3), BASE + HOUR + 5)
    res = refresh(view, BASE + 2 * HOUR, runner="inprocess", spark=spark)
    assert res.mode == "full"
    assert multiset(read_view(view, as_of=BASE + 2 * HOUR)) == oracle(INC_JOIN, srcs, BASE + 2 * HOUR)
    write_at(orders, inc_orders(rng, 200, 3), BASE + 2 * HOUR + 5)
    res = refresh(view, BASE + 3 * HOUR, runner="inprocess", spark=spark)
    assert res.mode == "incremental" and res.rows_retracted == 0
    assert multiset(read_view(view, as_of=BASE + 3 * HOUR)) == oracle(INC_JOIN, srcs, BASE + 3 * HOUR)


def test_fallbacks_to_full_diff(spark, env, monkeypatch):
    """Vacuumed change files, a source schema change, a too-large change set, `incremental: false`."""
    rng = random.Random(4)
    view, srcs = inc_join_view(env, rng, 40)
    orders = srcs["orders"]
    write_view(
        env[1],
        "off",
        query=INC_JOIN,
        sources={"orders": "orders", "customers": "customers"},
        target="views/off",
        as_of=BASE,
        incremental=False,
    )
    off = Catalog(env[1]).get("off")
    t = BASE + HOUR
    refresh(view, t, runner="inprocess", spark=spark)
    refresh(off, t, runner="inprocess", spark=spark)

    def step(expect: str, reason: str) -> None:
        nonlocal t
        t += HOUR
        for v, want in ((view, expect), (off, "full")):
            res = refresh(v, t, runner="inprocess", spark=spark)
            assert res.mode == want, (v.name, res)
            assert multiset(read_view(v, as_of=t)) == oracle(INC_JOIN, srcs, t)
        assert reason in str(mvsink_history(view.target)[0]["mode_reason"])
        assert "incremental: false" in str(mvsink_history(off.target)[0]["mode_reason"])

    # a small change: incremental (rewrites a 40-row file, so allow a large fraction)
    monkeypatch.setenv("MVSINK_INCREMENTAL_MAX_FRACTION", "100")
    update_at(orders, {"qty": "5"}, "id = 3", t + 10)
    step("incremental", "from the changes of orders")
    # the same kind of change over the default limit: the rewritten file is most of the table
    monkeypatch.delenv("MVSINK_INCREMENTAL_MAX_FRACTION")
    update_at(orders, {"qty": "6"}, "id = 4", t + 10)
    step("full", "over 50%")
    # a removed file vacuumed away before the refresh
    monkeypatch.setenv("MVSINK_INCREMENTAL_MAX_FRACTION", "100")
    before = set(DeltaTable(orders).file_uris())
    delete_at(orders, "id = 5", t + 10)
    for gone in before - set(DeltaTable(orders).file_uris()):
        Path(gone.removeprefix("file://")).unlink()
    step("full", "gone")
    # a new column in the source (schema change in the log)
    extra = inc_orders(rng, 500, 2).append_column("note", pa.array(["x", "y"]))
    write_deltalake(orders, extra, mode="append", schema_mode="merge")
    stamp(orders, t + 10)
    step("full", "schema")
    write_at(orders, inc_orders(rng, 600, 2).append_column("note", pa.array(["z", None])), t + 10)
    step("incremental", "from the changes of orders")


def test_recreated_source_is_not_mistaken_for_the_old_one(spark, env):
    """A source deleted and written anew reaches the same version numbers: no shortcut, no incremental diff."""
    rng = random.Random(8)
    view, srcs = inc_join_view(env, rng, 10)
    orders = srcs["orders"]
    write_at(orders, inc_orders(rng, 10, 10), BASE + 2)
    refresh(view, BASE + HOUR, runner="inprocess", spark=spark)
    shutil.rmtree(orders)  # same path, a new table with as many commits (versions 0 and 1 again)
    for ts in (BASE + HOUR + 10, BASE + HOUR + 20):  # versions 0 and 1 again
        write_at(orders, inc_orders(rng, 50, 10), ts)
    res = refresh(view, BASE + 2 * HOUR, runner="inprocess", spark=spark)
    assert res.mode == "full" and res.rows_added > 0, res
    assert multiset(read_view(view, as_of=BASE + 2 * HOUR)) == oracle(INC_JOIN, srcs, BASE + 2 * HOUR)
