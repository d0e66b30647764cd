"""Issue 23 item 2 (first part) through real Airflow: the page's run data (mvsink.airflow.plugin.runs.last_runs)
read from Airflow's metadata database after `airflow dags test` runs: the last run (a failed one, its failed
task) and the last dry run (with what it would have done)."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.airflow


def test_last_run_and_last_dry_run_from_airflows_database(af, monkeypatch, connect_url):
    af.use_connect(connect_url)
    monkeypatch.setenv("MVSINK_DATA_ROOT", str(af.data))
    af.run("dags", "reserialize")
    dry = json.dumps({"refresh_time": "2026-01-01T02:00:00Z", "dry_run": True})
    af.run("dags", "test", "mv_proj", "2026-01-01T02:00:00+00:00", "-c", dry)
    bad = json.dumps({"refresh_time": "not-a-time"})
    af.run("dags", "test", "mv_proj", "2026-01-01T03:00:00+00:00", "-c", bad, check=False)
    proc = af.python(
        "import json, time\n"
        "from mvsink.airflow.plugin.runs import last_runs\n"
        "print('RUNS ' + json.dumps(last_runs(['mv_proj', 'mv_nothing'], now=int(time.time() * 1000))))\n"
    )
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RUNS ")), None)
    assert line, proc.stderr[-3000:]
    runs = json.loads(line[len("RUNS ") :])
    assert list(runs) == ["mv_proj"]  # a DAG without runs has no entry
    last, dry_run = runs["mv_proj"]["last"], runs["mv_proj"]["last_dry_run"]
    assert last["state"] == "failed" and last["run_type"] == "manual" and not last["dry_run"]
    # `airflow dags test` writes no task log file: no error text here (test_page_failed_run.py reads one)
    assert last["failed_tasks"] == [{"task_id": "mint", "try_number": 1, "error": None}]
    assert last["wall_ms"] is not None and last["wall_ms"] >= 0 and not last["running"]
    assert dry_run["state"] == "success" and dry_run["dry_run"] and dry_run["failed_tasks"] == []
    assert dry_run["report"].startswith("proj: dry run [") and "would add" in dry_run["report"], dry_run
    assert dry_run["wall_ms"] > 0 and dry_run["run_id"] != last["run_id"]
