"""Acceptance 3, 5, 6: self-correction after hand edits, crash points, as_of; plus append's races."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from deltahelp import BASE, HOUR, multiset, oracle, staged_leftovers, write_at, write_view
from mvsink.core.append import append
from mvsink.core.mint import mint
from mvsink.core.staging import list_staged
from mvsink.definitions.catalog import Catalog
from mvsink.exceptions import InjectedFault
from mvsink.readers.arrow import read_view
from mvsink.spark.job import run_write
from mvsink.spark.runners import refresh
from test_oracle import JOIN_AGG, PROJECT, _customers, _orders

pytestmark = pytest.mark.spark


@pytest.fixture
def proj(env):
    """A projection view with duplicate rows over an orders table with history from BASE."""
    data, views = env
    orders = str(data / "orders")
    write_at(orders, _orders(random.Random(5), 0, 30), BASE)
    write_view(views, "proj", query=PROJECT, sources={"orders": "orders"}, target="views/proj", as_of=BASE)
    catalog = Catalog(views)
    return catalog, catalog.get("proj"), orders


def _ops(view) -> list[str]:
    return [json.loads(h.get("mvsink.operation", '"foreign"')) for h in reversed(DeltaTable(view.target).history())]


def _remove_file_from_log(target: str) -> str:
    """Commit a Delta `remove` of one data file by hand, as a careless operator would."""
    dt = DeltaTable(target)
    acts = pa.table(dt.get_add_actions(flatten=True))
    path = acts.column("path")[0].as_py()
    size = acts.column("size_bytes")[0].as_py()
    v = dt.version() + 1
    now = int(time.time() * 1000)
    lines = [
        {"commitInfo": {"timestamp": now, "operation": "DELETE", "operationParameters": {}}},
        {"remove": {"path": path, "deletionTimestamp": now, "dataChange": True, "extendedFileMetadata": True,
                    "partitionValues": {}, "size": size}},
    ]
    (Path(target) / "_delta_log" / f"{v:020d}.json").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return path


@pytest.mark.parametrize("edit", ["delete_rows", "junk_rows", "remove_file", "all"])
def test_hand_edits_are_corrected_by_next_refresh(spark, proj, edit):
    catalog, view, orders = proj
    r1 = BASE + HOUR
    assert refresh(view, r1, catalog=catalog, runner="inprocess", spark=spark).status == "appended"
    good = oracle(PROJECT, {"orders": orders}, r1)
    assert multiset(read_view(view)) == good

    if edit in ("delete_rows", "all"):
        DeltaTable(view.target).delete("qty = 3")
    if edit in ("junk_rows", "all"):
        junk = pa.table({"cust_id": pa.array([77, None], pa.int32()), "status": ["Z", None],
                         "qty": pa.array([9, 9], pa.int32()), "_mv_time": [r1, BASE - 5],
                         "_mv_diff": [3, -2]})
        write_deltalake(view.target, junk, mode="append")
    if edit in ("remove_file", "all"):
        _remove_file_from_log(view.target)
    assert multiset(read_view(view, as_of=r1)) != good  # the table is damaged now

    # no source changed: the no-change shortcut must not apply after a foreign commit
    r2 = BASE + 2 * HOUR
    res = refresh(view, r2, catalog=catalog, runner="inprocess", spark=spark)
    assert res.status == "appended" and res.files >= 1, res
    assert multiset(read_view(view, as_of=r2)) == oracle(PROJECT, {"orders": orders}, r2)
    assert staged_leftovers(view.target) == []


def test_hand_edit_between_write_and_append_reschedules(spark, proj):
    catalog, view, orders = proj
    refresh(view, BASE + HOUR, catalog=catalog, runner="inprocess", spark=spark)
    write_at(orders, _orders(random.Random(8), 100, 5), BASE + HOUR + 10)
    desc = mint(view, BASE + 2 * HOUR, catalog=catalog)
    report = run_write(spark, view, desc)
    assert report.status == "staged" and list_staged(view.target) == [desc.batch_id]
    DeltaTable(view.target).delete("qty = 3")  # lands after write read the table, before append
    res = append(view, desc, report)
    assert res.status == "rescheduled" and "changed after write read it" in res.reason
    assert res.upper == BASE + HOUR + 1
    assert staged_leftovers(view.target) == []
    again = refresh(view, BASE + 2 * HOUR, catalog=catalog, runner="inprocess", spark=spark)
    assert again.status == "appended"
    assert multiset(read_view(view)) == oracle(PROJECT, {"orders": orders}, BASE + 2 * HOUR)


def test_competing_append_wins_and_loser_cleans_up(spark, proj):
    catalog, view, orders = proj
    a = mint(view, BASE + HOUR, catalog=catalog, run_id="a")
    b = mint(view, BASE + HOUR, catalog=catalog, run_id="b")
    ra, rb = run_write(spark, view, a), run_write(spark, view, b)
    assert sorted(list_staged(view.target)) == sorted([a.batch_id, b.batch_id])
    assert append(view, b, rb).status == "appended"
    lost = append(view, a, ra)
    assert lost.status == "rescheduled" and lost.upper == BASE + HOUR + 1
    assert _ops(view).count("append") == 1
    assert staged_leftovers(view.target) == []
    assert multiset(read_view(view)) == oracle(PROJECT, {"orders": orders}, BASE + HOUR)
    # a stale description is refused by write itself: nothing staged
    assert run_write(spark, view, a).status == "stale"
    assert staged_leftovers(view.target) == []


@pytest.mark.parametrize("point", ["write:after_staging", "append:before_commit", "append:after_commit"])
def test_crash_points_then_next_refresh_is_exact(spark, proj, point, monkeypatch):
    catalog, view, orders = proj
    r1 = BASE + HOUR
    monkeypatch.setenv("MVSINK_FAIL_POINTS", point)
    with pytest.raises(InjectedFault):
        refresh(view, r1, catalog=catalog, runner="inprocess", spark=spark, run_id="crashed")
    monkeypatch.delenv("MVSINK_FAIL_POINTS")
    assert list_staged(view.target), "the crash left a staged batch behind"

    again = refresh(view, r1, catalog=catalog, runner="inprocess", spark=spark, run_id="again")
    if point == "append:after_commit":
        assert again.status == "up_to_date"  # the crashed run had committed
    else:
        assert again.status == "appended"
    assert _ops(view).count("append") == 1  # nothing appended twice
    assert multiset(read_view(view, as_of=r1)) == oracle(PROJECT, {"orders": orders}, r1)
    assert staged_leftovers(view.target) == []

    write_at(orders, _orders(random.Random(9), 200, 4), r1 + 10)
    later = refresh(view, BASE + 2 * HOUR, catalog=catalog, runner="inprocess", spark=spark)
    assert later.status == "appended"
    assert multiset(read_view(view)) == oracle(PROJECT, {"orders": orders}, BASE + 2 * HOUR)
    assert staged_leftovers(view.target) == []


def test_retried_append_after_lost_reply_does_not_duplicate(spark, proj, monkeypatch):
    catalog, view, orders = proj
    desc = mint(view, BASE + HOUR, catalog=catalog, run_id="once")
    report = run_write(spark, view, desc)
    monkeypatch.setenv("MVSINK_FAIL_POINTS", "append:after_commit")
    with pytest.raises(InjectedFault):
        append(view, desc, report)
    monkeypatch.delenv("MVSINK_FAIL_POINTS")
    retry = append(view, desc, report)  # an Airflow retry of the same task
    assert retry.status == "appended" and "already committed" in retry.reason
    assert _ops(view).count("append") == 1
    assert multiset(read_view(view)) == oracle(PROJECT, {"orders": orders}, BASE + HOUR)
    assert staged_leftovers(view.target) == []


def test_as_of_in_the_past_bumps_upper_then_appends(spark, env):
    data, views = env
    orders, customers = str(data / "orders"), str(data / "customers")
    write_at(orders, _orders(random.Random(1), 0, 15), BASE)
    write_at(customers, _customers(random.Random(1)), BASE + 1)
    as_of = BASE + 2 * HOUR
    write_view(views, "agg", query=JOIN_AGG, sources={"orders": "orders", "customers": "customers"},
               target="views/agg", as_of=as_of)
    catalog = Catalog(views)
    view = catalog.get("agg")

    early = refresh(view, BASE + HOUR, catalog=catalog, runner="inprocess", spark=spark)
    assert early.status == "up_to_date" and "before as_of" in early.reason
    assert not Path(view.target).exists()  # nothing written below as_of, not even the table

    r = BASE + 3 * HOUR
    res = refresh(view, r, catalog=catalog, runner="inprocess", spark=spark)
    assert res.status == "appended" and res.lower == as_of and res.upper == r + 1
    history = list(reversed(DeltaTable(view.target).history()))
    assert _ops(view) == ["create", "bump", "append"]
    assert json.loads(history[1]["mvsink.lower"]) == as_of  # the bump set the upper to as_of
    assert json.loads(history[2]["mvsink.lower"]) == as_of and json.loads(history[2]["mvsink.upper"]) == r + 1
    sources = json.loads(history[2]["mvsink.sources"])
    assert sources == {"orders": 0, "customers": 0}
    assert multiset(read_view(view, as_of=r)) == oracle(JOIN_AGG, {"orders": orders, "customers": customers}, r)
    assert min(DeltaTable(view.target).to_pyarrow_table().column("_mv_time").to_pylist()) >= as_of
