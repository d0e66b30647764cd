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
