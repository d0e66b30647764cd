"""What every Airflow fault test asserts once the faulted run is over: it succeeded (through Airflow's own
task retry), its contents equal the oracle, exactly one append commit landed, and ``mvsink gc`` finds nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from deltalake import DeltaTable

from mvsink.definitions.catalog import Catalog
from mvsink.devtools.localairflow import LocalAirflow
from mvsink.readers.arrow import read_view
from tests.support.airflow import task_instance, wait_run, xcom
from tests.support.cli import run_cli_process
from tests.support.data import PROJECT
from tests.support.delta import BASE, HOUR, staged_leftovers
from tests.support.oracle import multiset, oracle

R = BASE + 2 * HOUR  # the refresh time of every faulted run


def gc(views: Path, name: str, *args: str) -> dict[str, Any]:
    """``mvsink gc NAME --json`` (with no fail point armed); its report."""
    proc = run_cli_process(views, "gc", name, "--json", *args, unset=("MVSINK_FAIL_POINTS",))
    return dict(json.loads(proc.stdout))


def check_outcome(
    af: LocalAirflow, data: Path, views: Path, name: str, run_id: str, retried_task: str | None
) -> dict[str, Any]:
    """The run succeeded through a retry of ``retried_task``, with exact contents and nothing left over."""
    dag_id = f"mv_{name}"
    run = wait_run(af, dag_id, run_id, timeout=900)
    assert run["state"] == "success", run
    if retried_task is not None:
        ti = task_instance(af, dag_id, run_id, retried_task)
        assert ti["state"] == "success" and ti["try_number"] >= 2, ti  # Airflow's retry recovered it
    summary = xcom(af, dag_id, run_id, "append", "summary")
    assert summary["status"] == "appended" and summary["upper"] == R + 1, summary
    view = Catalog(views).get(name)
    hist = DeltaTable(view.target).history()
    appends = [h for h in hist if h.get("mvsink.operation") == '"append"']
    assert len(appends) == 1, appends  # nothing appended twice
    assert json.loads(appends[0]["mvsink.batch_id"]) == summary["batch_id"]
    assert json.loads(appends[0]["mvsink.run_id"]) == run_id
    assert multiset(read_view(view, as_of=R)) == oracle(PROJECT, {"orders": str(data / "orders")}, R)
    res = gc(views, name)
    assert res["kept"] == [] and res["orphans"] == [], res
    assert staged_leftovers(view.target) == []
    return dict(summary)
