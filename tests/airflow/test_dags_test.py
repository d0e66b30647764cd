"""Issue 3 through real Airflow: `airflow dags test` with the real SparkSubmitOperator refreshes a view, a second
run is up to date, and a dry run reports counts and writes nothing."""

from __future__ import annotations

import json
import random

import pytest
from deltalake import DeltaTable

from mvsink.definitions.catalog import Catalog
from mvsink.readers.arrow import read_view
from tests.support.data import PROJECT, make_orders
from tests.support.delta import BASE, HOUR, operations, staged_leftovers, write_at
from tests.support.oracle import multiset, oracle

pytestmark = pytest.mark.airflow


def test_dags_test_refreshes_then_second_run_is_up_to_date(af, monkeypatch):
    monkeypatch.setenv("MVSINK_DATA_ROOT", str(af.data))
    af.run("dags", "reserialize")
    r = BASE + 2 * HOUR
    date = "2026-01-01T02:00:00+00:00"
    first = af.run("dags", "test", "mv_proj", date)
    out = first.stdout + first.stderr
    target = str(af.data / "views" / "proj")
    assert operations(target) == ["create", "bump", "append"]
    view = Catalog(af.views).get("proj")
    assert DeltaTable(target).transaction_version(view.app_id) == r + 1
    assert multiset(read_view(view, as_of=r)) == oracle(PROJECT, {"orders": str(af.data / "orders")}, r)
    assert "appended [" in out and "Spark-Submit cmd" in out  # the real SparkSubmitOperator ran
    assert staged_leftovers(target) == []

    second = af.run("dags", "test", "mv_proj", date)
    out2 = second.stdout + second.stderr
    assert "up to date" in out2
    assert operations(target) == ["create", "bump", "append"]  # nothing written


def test_dry_run_param_reports_counts_and_writes_nothing(af):
    af.run("dags", "reserialize")
    before = DeltaTable(str(af.data / "views" / "proj")).version()
    write_at(str(af.data / "orders"), make_orders(random.Random(9), 500, 10), BASE + 2 * HOUR + 5)
    conf = json.dumps({"refresh_time": "2026-01-01T03:00:00Z", "dry_run": True})
    proc = af.run("dags", "test", "mv_proj", "2026-01-01T03:00:00+00:00", "-c", conf)
    out = proc.stdout + proc.stderr
    assert "dry run" in out and "would add" in out
    assert DeltaTable(str(af.data / "views" / "proj")).version() == before
