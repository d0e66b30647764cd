"""Issue 3 through real Airflow: the DagBag loads every view's DAG, isolates a broken view file, and turns each
schedule into its timetable."""

from __future__ import annotations

import pytest

from tests.support.data import PROJECT
from tests.support.delta import BASE, HOUR
from tests.support.viewfiles import write_view

pytestmark = pytest.mark.airflow


def test_dagbag_loads_views_and_isolates_a_broken_file(af):
    (af.views / "zz_broken.yaml").write_text("name: zz_broken\nquery: SELECT 1\nsources: {}\n")
    try:
        bag = af.dagbag()
    finally:
        (af.views / "zz_broken.yaml").unlink()
    assert "mv_proj" in bag["dags"]
    assert list(bag["errors"]) == [str(af.views / "zz_broken.yaml")] or [
        k.endswith("views/zz_broken.yaml") for k in bag["errors"]
    ] == [True]
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
        write_view(
            af.views,
            f"s_{name}",
            query=PROJECT,
            sources={"orders": "orders"},
            target=f"views/s_{name}",
            as_of=BASE,
            schedule=schedule,
            until=BASE + 48 * HOUR,
        )
    try:
        bag = af.dagbag()
    finally:
        for name in extra:
            (af.views / f"s_{name}.yaml").unlink()
    assert bag["errors"] == {}
    info = bag["info"]
    assert info["mv_proj"]["timetable"] == "CronTriggerTimetable" and "'0 * * * *'" in info["mv_proj"]["summary"]
    assert info["mv_s_every"]["timetable"] == "MvsinkTimetable" and info["mv_s_every"]["summary"] == "every 15m 00s"
    assert info["mv_s_every"]["start"].startswith("2026-01-01 00:05:00")  # first aligned instant >= as_of
    assert info["mv_s_listed"]["timetable"] == "MvsinkTimetable" and info["mv_s_listed"]["summary"] == "at 2 time(s)"
    assert info["mv_s_chained"]["timetable"] == "AssetTriggeredTimetable"
    assert info["mv_s_manual"]["timetable"] == "NullTimetable"
    assert info["mv_s_every"]["end"].startswith("2026-01-03 00:00:00")
    for d in info.values():
        assert d["max_active_runs"] == 1 and "mvsink" in d["tags"]
        assert d["tasks"] == ["append", "mint", "reschedule", "write"]
        assert d["params"] == ["dry_run", "refresh_time"]
    assert "Projection with duplicates." in info["mv_proj"]["doc"] and "SELECT" in info["mv_proj"]["doc"]
