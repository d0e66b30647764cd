"""CLI end to end through spark-submit (as the DAG runs it), and acceptance 4: racing refreshes."""

from __future__ import annotations

import csv
import io
import json
import random
import subprocess
import sys

import pytest
from deltalake import DeltaTable

from deltahelp import BASE, HOUR, multiset, oracle, staged_leftovers, write_at, write_view
from mvsink.definitions.catalog import Catalog
from mvsink.readers.arrow import read_view
from test_oracle import PROJECT, _orders

pytestmark = pytest.mark.slow

CLI = [sys.executable, "-m", "mvsink"]


def _cli(views, *args, env_extra=None, check=True):
    import os

    env = {**os.environ, **(env_extra or {})}
    proc = subprocess.run([*CLI, *args, "--views-dir", str(views)], capture_output=True, text=True, env=env)
    if check:
        assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


@pytest.fixture
def proj(env):
    data, views = env
    orders = str(data / "orders")
    write_at(orders, _orders(random.Random(5), 0, 40), BASE)
    write_view(views, "proj", query=PROJECT, sources={"orders": "orders"}, target="views/proj", as_of=BASE)
    return data, views, orders


def test_cli_dry_run_refresh_read_status(proj):
    data, views, orders = proj
    r = BASE + HOUR
    dry = json.loads(_cli(views, "refresh", "proj", "--at", str(r), "--dry-run", "--json").stdout)
    expected = oracle(PROJECT, {"orders": orders}, r)
    assert dry["status"] == "dry_run" and dry["rows_added"] == sum(expected.values()) and dry["rows_retracted"] == 0
    assert not (data / "views" / "proj").exists()  # a dry run writes nothing

    out = _cli(views, "refresh", "proj", "--at", "2026-01-01T01:00:00Z").stdout
    assert out.startswith("proj: appended [") and f"+{sum(expected.values())} -0 rows" in out

    rows = list(csv.DictReader(io.StringIO(_cli(views, "read", "proj", "--format", "csv").stdout)))
    assert len(rows) == sum(expected.values())
    jsonl = [json.loads(line) for line in _cli(views, "read", "proj", "--format", "jsonl").stdout.splitlines()]
    got = multiset(__import__("pyarrow").Table.from_pylist(jsonl))
    assert got == expected

    st = json.loads(_cli(views, "status", "proj", "--json").stdout)
    assert st["upper"] == r + 1 and st["as_of"] == BASE and st["staged_batches"] == []
    assert [c["operation"] for c in st["last_commits"]] == ["append", "bump", "create"]
    text = _cli(views, "status", "proj").stdout
    assert "upper     " + str(r + 1) in text and "append [" in text

    again = _cli(views, "refresh", "proj", "--at", str(r)).stdout
    assert "up to date" in again


def test_crash_of_spark_job_after_staging_then_recovery(proj):
    data, views, orders = proj
    r = BASE + HOUR
    crashed = _cli(views, "refresh", "proj", "--at", str(r), env_extra={"MVSINK_FAIL_POINTS": "write:after_staging:exit"},
                   check=False)
    assert crashed.returncode != 0 and "Spark write step failed" in crashed.stderr
    target = str(data / "views" / "proj")
    assert staged_leftovers(target)  # the killed job left its batch behind
    out = _cli(views, "refresh", "proj", "--at", str(r), "--json").stdout
    assert json.loads(out)["status"] == "appended"
    assert staged_leftovers(target) == []
    assert multiset(read_view(Catalog(views).get("proj"))) == oracle(PROJECT, {"orders": orders}, r)


def test_four_processes_race_on_the_same_refresh(proj):
    import os

    data, views, orders = proj
    r = BASE + HOUR
    procs = [subprocess.Popen([*CLI, "refresh", "proj", "--at", str(r), "--json", "--run-id", f"racer-{i}",
                               "--views-dir", str(views)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=dict(os.environ)) for i in range(4)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-3000:]
        results.append(json.loads(out))
    statuses = sorted(x["status"] for x in results)
    assert statuses.count("appended") == 1, results
    assert set(statuses) <= {"appended", "rescheduled", "up_to_date"}
    for x in results:
        if x["status"] == "rescheduled":
            assert x["upper"] == r + 1
    target = str(data / "views" / "proj")
    dt = DeltaTable(target)
    ops = [json.loads(h["mvsink.operation"]) for h in dt.history()]
    assert ops.count("append") == 1 and ops.count("create") == 1 and ops.count("bump") == 1
    assert dt.transaction_version("mvsink:upper:proj") == r + 1
    assert multiset(read_view(Catalog(views).get("proj"))) == oracle(PROJECT, {"orders": orders}, r)
    assert staged_leftovers(target) == []
