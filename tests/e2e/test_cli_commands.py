"""The CLI end to end through spark-submit (as the DAG runs it): dry run, refresh, read, status."""

from __future__ import annotations

import csv
import io
import json

import pytest

from tests.support.cli import run_cli_process
from tests.support.data import PROJECT
from tests.support.delta import BASE, HOUR
from tests.support.oracle import multiset, oracle

pytestmark = pytest.mark.slow


def test_cli_dry_run_refresh_read_status(proj):
    data, views, orders = proj
    r = BASE + HOUR
    dry = json.loads(run_cli_process(views, "refresh", "proj", "--at", str(r), "--dry-run", "--json").stdout)
    expected = oracle(PROJECT, {"orders": orders}, r)
    assert dry["status"] == "dry_run" and dry["rows_added"] == sum(expected.values()) and dry["rows_retracted"] == 0
    assert not (data / "views" / "proj").exists()  # a dry run writes nothing

    out = run_cli_process(views, "refresh", "proj", "--at", "2026-01-01T01:00:00Z").stdout
    assert out.startswith("proj: appended [") and f"+{sum(expected.values())} -0 rows" in out

    rows = list(csv.DictReader(io.StringIO(run_cli_process(views, "read", "proj", "--format", "csv").stdout)))
    assert len(rows) == sum(expected.values())
    jsonl = [
        json.loads(line) for line in run_cli_process(views, "read", "proj", "--format", "jsonl").stdout.splitlines()
    ]
    got = multiset(__import__("pyarrow").Table.from_pylist(jsonl))
    assert got == expected

    st = json.loads(run_cli_process(views, "status", "proj", "--json").stdout)
    assert st["upper"] == r + 1 and st["as_of"] == BASE and st["staged_batches"] == []
    assert [c["operation"] for c in st["last_commits"]] == ["append", "bump", "create"]
    text = run_cli_process(views, "status", "proj").stdout
    assert "upper     " + str(r + 1) in text and "append [" in text

    again = run_cli_process(views, "refresh", "proj", "--at", str(r)).stdout
    assert "up to date" in again
