"""Issue 3 acceptance through real Airflow: DagBag, `airflow dags test` with the real SparkSubmitOperator."""

from __future__ import annotations

import json
import random

import pytest
from deltalake import DeltaTable

from airflowhelp import AirflowHome
from deltahelp import BASE, HOUR, multiset, oracle, staged_leftovers, write_at, write_view
from mvsink.definitions.catalog import Catalog
from mvsink.readers.arrow import read_view
from test_oracle import PROJECT, _orders

pytestmark = pytest.mark.airflow


@pytest.fixture(scope="module")
def af(tmp_path_factory):
    root = tmp_path_factory.mktemp("af")
    data = root / "data"
    data.mkdir()
    home = AirflowHome(root, data)
    write_at(str(data / "orders"), _orders(random.Random(5), 0, 30), BASE)
    write_view(home.views, "proj", query=PROJECT, sources={"orders": "orders"}, target="views/proj", as_of=BASE,
               schedule="0 * * * *", description="Projection with duplicates.", tags=["test"])
    home.migrate()
    return home


def _ops(target: str) -> list[str]:
    return [json.loads(h.get("mvsink.operation", '"foreign"')) for h in reversed(DeltaTable(target).history())]


def test_dagbag_loads_views_and_isolates_a_broken_file(af):
    (af.views / "zz_broken.yaml").write_text("name: zz_broken\nquery: SELECT 1\nsources: {}\n")
    try:
        bag = af.dagbag()
    finally:
        (af.views / "zz_broken.yaml").unlink()
    assert "mv_proj" in bag["dags"]
    assert list(bag["errors"]) == [str(af.views / "zz_broken.yaml")] or \
        [k.endswith("views/zz_broken.yaml") for k in bag["errors"]] == [True]
    msg = next(iter(bag["errors"].values()))
    assert "zz_broken.yaml" in msg and "sources" in msg and "Fix:" in msg
    clean = af.dagbag()
    assert clean["errors"] == {} and clean["dags"] == ["mv_proj"]


def test_schedules_become_timetables(af):
    extra = {
        "every": {"every": "15m", "aligned_to": "2025-12-31T23:50:00Z"},
        "listed": {"at": ["2026-01-02T00:00:00Z", "2026-01-01T12:00:00Z"]},
        "chained": {"on_commit": ["proj"]},
        "manual": "manual",
    }
    for name, schedule in extra.items():
        write_view(af.views, f"s_{name}", query=PROJECT, sources={"orders": "orders"}, target=f"views/s_{name}",
                   as_of=BASE, schedule=schedule, until=BASE + 48 * HOUR)
    try:
        bag = af.dagbag()
    finally:
        for name in extra:
            (af.views / f"s_{name}.yaml").unlink()
    assert bag["errors"] == {}
    info = bag["info"]
    assert info["mv_proj"]["timetable"] == "CronTriggerTimetable" and "'0 * * * *'" in info["mv_proj"]["summary"]
    assert info["mv_s_every"]["timetable"] == "DeltaTriggerTimetable"
    assert info["mv_s_every"]["start"].startswith("2026-01-01 00:05:00")  # first aligned instant >= as_of
    assert info["mv_s_listed"]["timetable"] == "EventsTimetable"
    assert info["mv_s_chained"]["timetable"] == "AssetTriggeredTimetable"
    assert info["mv_s_manual"]["timetable"] == "NullTimetable"
    assert info["mv_s_every"]["end"].startswith("2026-01-03 00:00:00")
    for d in info.values():
        assert d["max_active_runs"] == 1 and "mvsink" in d["tags"]
        assert d["tasks"] == ["append", "mint", "reschedule", "write"]
        assert d["params"] == ["dry_run", "refresh_time"]
    assert "Projection with duplicates." in info["mv_proj"]["doc"] and "SELECT" in info["mv_proj"]["doc"]


def test_dags_test_refreshes_then_second_run_is_up_to_date(af, monkeypatch):
    monkeypatch.setenv("MVSINK_DATA_ROOT", str(af.data))
    af.run("dags", "reserialize")
    r = BASE + 2 * HOUR
    date = "2026-01-01T02:00:00+00:00"
    first = af.run("dags", "test", "mv_proj", date)
    out = first.stdout + first.stderr
    target = str(af.data / "views" / "proj")
    assert _ops(target) == ["create", "bump", "append"]
    view = Catalog(af.views).get("proj")
    assert DeltaTable(target).transaction_version(view.app_id) == r + 1
    assert multiset(read_view(view, as_of=r)) == oracle(PROJECT, {"orders": str(af.data / "orders")}, r)
    assert "appended [" in out and "Spark-Submit cmd" in out  # the real SparkSubmitOperator ran
    assert staged_leftovers(target) == []

    second = af.run("dags", "test", "mv_proj", date)
    out2 = second.stdout + second.stderr
    assert "up to date" in out2
    assert _ops(target) == ["create", "bump", "append"]  # nothing written


def test_dry_run_param_reports_counts_and_writes_nothing(af):
    af.run("dags", "reserialize")
    before = DeltaTable(str(af.data / "views" / "proj")).version()
    write_at(str(af.data / "orders"), _orders(random.Random(9), 500, 10), BASE + 2 * HOUR + 5)
    conf = json.dumps({"refresh_time": "2026-01-01T03:00:00Z", "dry_run": True})
    proc = af.run("dags", "test", "mv_proj", "2026-01-01T03:00:00+00:00", "-c", conf)
    out = proc.stdout + proc.stderr
    assert "dry run" in out and "would add" in out
    assert DeltaTable(str(af.data / "views" / "proj")).version() == before
