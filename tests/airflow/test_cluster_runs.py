"""Issue 3 acceptance against a running Airflow (api-server, scheduler, dag-processor, triggerer) on 127.0.0.1:
REST trigger with params and auth, views on views through Assets, reschedule on upper mismatch, backfill."""

from __future__ import annotations

import json
import random
from pathlib import Path

import duckdb
import pytest
from deltalake import DeltaTable

from mvsink.definitions.catalog import Catalog
from mvsink.readers.arrow import read_view
from tests.support.airflow import (
    backfill,
    create_backfill,
    dags_folder,
    finished,
    running_airflow,
    runs,
    trigger_run,
    wait_for,
    wait_run,
    xcom,
)
from tests.support.data import PROJECT, make_orders
from tests.support.delta import BASE, HOUR, snapshot, staged_leftovers, write_at
from tests.support.oracle import multiset, oracle
from tests.support.viewfiles import write_view

pytestmark = [pytest.mark.airflow, pytest.mark.slow]

DOWN = "SELECT status, count(*) AS n, sum(qty) AS qty FROM up GROUP BY status"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, connect_url):
    """A running Airflow whose write tasks go through the test run's Spark Connect server (as `make airflow`'s)."""
    root = tmp_path_factory.mktemp("cluster")
    data, dags = dags_folder(root)
    orders = str(data / "orders")
    rng = random.Random(12)
    write_at(orders, make_orders(rng, 0, 25), BASE)
    for k in range(1, 4):  # a change 10 minutes after each hour: backfilled hours differ
        write_at(orders, make_orders(rng, 100 * k, 5), BASE + k * HOUR - 50 * 60_000)
    views = dags / "views"
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
    write_view(views, "race", query=PROJECT, sources={"orders": "orders"}, target="views/race", as_of=BASE)
    write_view(
        views,
        "hist",
        query=PROJECT,
        sources={"orders": "orders"},
        target="views/hist",
        as_of=BASE,
        schedule="0 * * * *",
        until=BASE + 3 * HOUR,
    )  # no scheduled run at "now": history by backfill
    with running_airflow(
        root,
        dags,
        data,
        wanted={"mv_proj", "mv_down", "mv_race", "mv_hist"},
        extra_env={"MVSINK_FAIL_POINTS": "append:before_validate@race:compete"},
        connect_url=connect_url,
    ) as af:
        yield af, data, views


def test_api_refuses_unauthenticated_calls(cluster):
    af, _, _ = cluster
    for method, path in (("GET", "/api/v2/dags"), ("POST", "/api/v2/dags/mv_proj/dagRuns")):
        status, _ = af.api(method, path, {"logical_date": None} if method == "POST" else None)
        assert status in (401, 403), (method, path, status)
    status, _ = af.api("GET", "/api/v2/dags", token="not-a-token")
    assert status in (401, 403)


def test_ui_trigger_dry_run_then_real_run_and_downstream_asset(cluster, monkeypatch):
    af, data, views = cluster
    monkeypatch.setenv("MVSINK_DATA_ROOT", str(data))
    catalog = Catalog(views)
    proj, down = catalog.get("proj"), catalog.get("down")
    r = BASE + 2 * HOUR

    dry = trigger_run(af, "mv_proj", {"refresh_time": "2026-01-01T02:00:00Z", "dry_run": True})
    assert wait_run(af, "mv_proj", dry)["state"] == "success"
    summary = xcom(af, "mv_proj", dry, "append", "summary")
    expected = oracle(PROJECT, {"orders": str(data / "orders")}, r)
    assert summary["status"] == "dry_run" and summary["rows_added"] == sum(expected.values())
    assert not Path(proj.target).exists()

    real = trigger_run(af, "mv_proj", {"refresh_time": str(r), "dry_run": False})
    assert wait_run(af, "mv_proj", real)["state"] == "success"
    summary = xcom(af, "mv_proj", real, "append", "summary")
    assert summary["status"] == "appended" and summary["upper"] == r + 1 and summary["version"] >= 1
    assert multiset(read_view(proj, as_of=r)) == expected

    # the append emitted an Asset event: the downstream view refreshes by itself
    done = wait_for("a run of mv_down", lambda: [x for x in runs(af, "mv_down") if finished([x])], timeout=300)
    assert done[0]["state"] == "success", done
    down_upper = DeltaTable(down.target).transaction_version(down.app_id)
    assert down_upper is not None and down_upper <= r + 1  # never past its input's upper
    t = down_upper - 1
    con = duckdb.connect()
    con.register("orders", snapshot(data / "orders", t))
    con.execute(f"CREATE TABLE up AS {PROJECT}")
    assert multiset(read_view(down, as_of=t)) == multiset(con.sql(DOWN).to_arrow_table())


def test_upper_mismatch_reschedules_a_new_run(cluster, monkeypatch):
    af, data, views = cluster
    monkeypatch.setenv("MVSINK_DATA_ROOT", str(data))
    race = Catalog(views).get("race")
    r = BASE + 3 * HOUR
    first = trigger_run(af, "mv_race", {"refresh_time": str(r)})
    assert wait_run(af, "mv_race", first)["state"] == "success"
    summary = xcom(af, "mv_race", first, "append", "summary")
    assert summary["status"] == "rescheduled" and summary["upper"] == r + 1
    others = wait_for(
        "the rescheduled run of mv_race",
        lambda: (o := [x for x in runs(af, "mv_race") if x["dag_run_id"] != first]) and finished(o[:1]) and o,
        timeout=300,
    )
    assert others[0]["state"] == "success", others
    assert others[0]["conf"]["refresh_time"] == str(r) and others[0]["conf"]["attempt"] == "1"
    ops = [json.loads(h.get("mvsink.operation", '"x"')) for h in DeltaTable(race.target).history()]
    assert ops.count("append") == 1  # the competitor's; the rescheduled run found it up to date
    assert multiset(read_view(race, as_of=r)) == oracle(PROJECT, {"orders": str(data / "orders")}, r)
    assert staged_leftovers(race.target) == []


def _closed(af, backfill_id):
    """The backfill's body once the scheduler has closed it, else None."""
    b = backfill(af, "mv_hist", backfill_id)
    return b if b.get("completed_at") else None


def test_backfill_fills_history_in_order_and_reprocessing_is_a_no_op(cluster, monkeypatch):
    af, data, views = cluster
    monkeypatch.setenv("MVSINK_DATA_ROOT", str(data))
    hist = Catalog(views).get("hist")
    window = [
        "--from-date",
        "2026-01-01T01:00:00+00:00",
        "--to-date",
        "2026-01-01T03:00:00+00:00",
    ]
    first = create_backfill(af, "mv_hist", *window, "--max-active-runs", "1")
    dates = [BASE + k * HOUR for k in (1, 2, 3)]

    def three_finished():
        rs = runs(af, "mv_hist")
        return rs if len(rs) >= 3 and finished(rs) else None

    hist_runs = wait_for("3 backfill runs", three_finished, timeout=600)
    assert len(hist_runs) == 3 and all(x["state"] == "success" for x in hist_runs), hist_runs
    for t in dates:
        assert multiset(read_view(hist, as_of=t)) == oracle(PROJECT, {"orders": str(data / "orders")}, t)
    history = [h for h in reversed(DeltaTable(hist.target).history()) if h.get("mvsink.operation") == '"append"']
    assert [json.loads(h["mvsink.refresh_time"]) for h in history] == dates  # in order
    version = DeltaTable(hist.target).version()

    wait_for(
        "the first backfill to close", lambda: _closed(af, first["id"]), timeout=120
    )  # one backfill per DAG at a time
    made = create_backfill(af, "mv_hist", *window, "--reprocess-behavior", "completed")
    assert made["id"] > first["id"], (first, made)
    # Followed by id: a create that was tried again may leave a closed, run-less backfill beside it.
    second = wait_for("the reprocessing backfill to close", lambda: _closed(af, made["id"]), timeout=400)
    hist_runs = runs(af, "mv_hist")
    assert len(hist_runs) == 3 and all(x["state"] == "success" for x in hist_runs), hist_runs
    assert all(x["end_date"] >= second["created_at"] for x in hist_runs), (hist_runs, second)  # every date ran again
    assert DeltaTable(hist.target).version() == version  # reprocessing wrote nothing
