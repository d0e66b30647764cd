"""Issue 23 item 3 and issue 39 item 8 through real Airflow: with ``apache-airflow-providers-openlineage`` writing to
its ``file`` transport (no server), ``airflow dags test`` of a refresh emits the refresh's lineage: the source at the
Delta version read at the refresh time (not its newest), the view's table at the version committed, each with its
schema facet, the output's column lineage and the job's SQL facet; exactly one such event per refresh, and none from
a second run at the same refresh time (mint finds nothing to do)."""

from __future__ import annotations

import json
import random

import pytest
from deltalake import DeltaTable

from tests.support.data import PROJECT, make_orders
from tests.support.delta import BASE, HOUR, version_at, write_at

pytestmark = pytest.mark.airflow


def events(path):
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def with_outputs(evs):
    return [e for e in evs if e.get("outputs")]


def test_a_refresh_emits_its_lineage_once_with_versions(af, tmp_path, monkeypatch, connect_url):
    af.use_connect(connect_url)  # the write through the test run's Spark Connect server
    log = tmp_path / "openlineage.jsonl"
    af.env["AIRFLOW__OPENLINEAGE__TRANSPORT"] = json.dumps({"type": "file", "log_file_path": str(log), "append": True})
    af.env["AIRFLOW__OPENLINEAGE__NAMESPACE"] = "mvsink-test"
    monkeypatch.setenv("MVSINK_DATA_ROOT", str(af.data))
    orders = af.data / "orders"
    write_at(str(orders), make_orders(random.Random(11), 200, 8), BASE + HOUR)
    write_at(str(orders), make_orders(random.Random(12), 300, 8), BASE + 3 * HOUR)  # after R: not read
    read = version_at(orders, BASE + 2 * HOUR)
    assert read == 1 and DeltaTable(str(orders)).version() == 2
    af.run("dags", "reserialize")
    date = "2026-01-01T02:00:00+00:00"

    af.run("dags", "test", "mv_proj", date)
    first = events(log)
    assert first, "the provider wrote no events: is the openlineage transport configured?"
    lineage = with_outputs(first)
    assert len(lineage) == 1, [(e["eventType"], e["job"]["name"]) for e in lineage]
    (ev,) = lineage
    assert ev["eventType"] == "COMPLETE" and ev["job"]["namespace"] == "mvsink-test"
    assert ev["job"]["name"] == "mv_proj.append"
    target = str(af.data / "views" / "proj")
    committed = DeltaTable(target).version()
    (out,) = ev["outputs"]
    assert (out["namespace"], out["name"]) == ("file", target)
    assert out["facets"]["version"]["datasetVersion"] == str(committed)
    assert out["outputFacets"]["outputStatistics"]["rowCount"] > 0
    assert [(i["namespace"], i["name"], i["facets"]["version"]["datasetVersion"]) for i in ev["inputs"]] == [
        ("file", str(orders), str(read))
    ]
    # schema facets: the source's columns at the version read, the view table's columns as committed
    (inp,) = ev["inputs"]
    assert [(f["name"], f["type"]) for f in inp["facets"]["schema"]["fields"]] == [
        ("id", "long"),
        ("cust_id", "integer"),
        ("status", "string"),
        ("qty", "integer"),
        ("price", "decimal(10,2)"),
    ]
    out_fields = [f["name"] for f in out["facets"]["schema"]["fields"]]
    assert out_fields[:3] == ["cust_id", "status", "qty"] and {"_mv_time", "_mv_diff"} <= set(out_fields)
    # the SQL facet: the view's query; column lineage: each view column from its source column
    assert ev["job"]["facets"]["sql"]["query"] == PROJECT
    lineage_fields = out["facets"]["columnLineage"]["fields"]
    assert {
        col: [(i["namespace"], i["name"], i["field"]) for i in f["inputFields"]] for col, f in lineage_fields.items()
    } == {col: [("file", str(orders), col)] for col in ("cust_id", "status", "qty")}
    # the run's tasks reported too (mint's START and COMPLETE), without datasets
    assert {e["job"]["name"] for e in first} >= {"mv_proj.mint", "mv_proj.append"}

    # the same refresh time again: nothing to do, nothing committed, no lineage with an output
    af.run("dags", "test", "mv_proj", date)
    second = events(log)[len(first) :]
    assert any(e["job"]["name"] == "mv_proj.mint" and e["eventType"] == "COMPLETE" for e in second)
    assert with_outputs(second) == []
    assert DeltaTable(target).version() == committed
