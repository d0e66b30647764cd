"""Acceptance 4: four CLI processes race on the same refresh; exactly one appends (spark-submit)."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from deltalake import DeltaTable

from mvsink.definitions.catalog import Catalog
from mvsink.readers.arrow import read_view
from tests.support.cli import CLI
from tests.support.data import PROJECT
from tests.support.delta import BASE, HOUR, staged_leftovers
from tests.support.oracle import multiset, oracle

pytestmark = pytest.mark.slow


def test_four_processes_race_on_the_same_refresh(proj):

    data, views, orders = proj
    r = BASE + HOUR
    procs = [
        subprocess.Popen(
            [*CLI, "refresh", "proj", "--at", str(r), "--json", "--run-id", f"racer-{i}", "--views-dir", str(views)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ),
        )
        for i in range(4)
    ]
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


def test_a_batch_cleaned_up_by_a_winner_after_validation_is_rescheduled_not_an_error(proj):
    """A refresh validates its batch (the upper still equals its lower), then a competing refresh of the same
    time commits and cleans up the now dead batch before its staged files are checked: the loser re-validates
    and is rescheduled (exit 0), it does not fail on its vanished files; one append, the oracle's rows."""
    data, views, orders = proj
    r = BASE + HOUR
    env = {**os.environ, "MVSINK_FAIL_POINTS": "append:before_files_check@proj:compete:once"}
    env["MVSINK_SYNC_DIR"] = str(data / "sync")
    (data / "sync").mkdir()
    p = subprocess.run(
        [*CLI, "refresh", "proj", "--at", str(r), "--json", "--run-id", "loser", "--views-dir", str(views)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    result = json.loads(p.stdout)
    assert result["status"] == "rescheduled" and result["upper"] == r + 1, result
    assert (data / "sync" / "append-before_files_check@proj.fired").exists()  # the competitor ran there
    target = str(data / "views" / "proj")
    dt = DeltaTable(target)
    ops = [json.loads(h["mvsink.operation"]) for h in dt.history()]
    assert ops.count("append") == 1, ops
    appended = [h for h in dt.history() if json.loads(h["mvsink.operation"]) == "append"]
    assert "injected-competitor" in json.loads(appended[0]["mvsink.batch_id"])
    assert dt.transaction_version("mvsink:upper:proj") == r + 1
    assert multiset(read_view(Catalog(views).get("proj"))) == oracle(PROJECT, {"orders": orders}, r)
    assert staged_leftovers(target) == []
