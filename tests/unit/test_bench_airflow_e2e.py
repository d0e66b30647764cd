"""The Airflow end-to-end benchmark's pure parts (bench/airflow_e2e.py): trigger -> commit's split, the changes
measured, the report's names and tables."""

from __future__ import annotations

import argparse
import os

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from bench.airflow_e2e import (
    change_label,
    commit_split,
    commit_time,
    groups,
    report_name,
    resolve_rates,
    target_lines,
    write_report,
)

pytestmark = pytest.mark.unit

# trigger at 100.0; run starts 100.8; mint queued 100.9, running 101.0, ends 101.4; write queued 102.0,
# running 102.1, ends 103.6; append queued 104.0, running 104.1, commits 104.5, ends 104.9
TASKS = {"mint": (100.9, 101.0, 101.4), "write": (102.0, 102.1, 103.6), "append": (104.0, 104.1, 104.9)}


def test_split_adds_up_to_trigger_to_commit():
    got = commit_split(100.0, 100.8, TASKS, 104.5)
    assert got["trigger_to_commit_s"] == pytest.approx(4.5)
    assert got["scheduling_s"] == pytest.approx(0.8 + 0.1 + 0.6 + 0.4)  # run start; each task's wait to queue
    assert got["task_start_s"] == pytest.approx(0.1 + 0.1 + 0.1)
    assert (got["mint_work_s"], got["write_work_s"], got["append_work_s"]) == pytest.approx((0.4, 1.5, 0.4))
    assert got["work_s"] == pytest.approx(2.3)
    assert got["scheduling_s"] + got["task_start_s"] + got["work_s"] == pytest.approx(got["trigger_to_commit_s"])


def test_split_without_write():
    tasks = {"mint": TASKS["mint"], "append": (102.0, 102.1, 102.6)}  # no source changed: write skipped
    got = commit_split(100.0, 100.8, tasks, 102.4)
    assert got["write_work_s"] is None and got["append_work_s"] == pytest.approx(0.3)
    assert got["scheduling_s"] == pytest.approx(0.8 + 0.1 + 0.6)  # append waits from mint's end
    assert got["scheduling_s"] + got["task_start_s"] + got["work_s"] == pytest.approx(2.4)


@pytest.mark.parametrize(
    ("run_start", "tasks", "commit"),
    [
        (100.8, TASKS, None),  # nothing committed
        (None, TASKS, 104.5),  # the run's start unknown
        (100.8, {**TASKS, "write": (102.0, None, 103.6)}, 104.5),  # a task without its start
        (100.8, {}, 104.5),
    ],
)
def test_split_unknown(run_start, tasks, commit):
    got = commit_split(100.0, run_start, tasks, commit)
    assert set(got.values()) == {None}
    assert {"trigger_to_commit_s", "scheduling_s", "task_start_s", "work_s", "append_work_s"} <= set(got)


def test_commit_time_reads_the_views_log(tmp_path):
    write_deltalake(str(tmp_path), pa.table({"a": [1]}))
    log = tmp_path / "_delta_log" / f"{0:020d}.json"
    os.utime(log, ns=(1_767_225_600_123_000_000, 1_767_225_600_123_000_000))
    assert commit_time(tmp_path, {"status": "appended", "version": 0}) == pytest.approx(1_767_225_600.123)
    assert commit_time(tmp_path, {"status": "up_to_date"}) is None
    assert commit_time(tmp_path, {"status": "appended", "version": 7}) is None  # no such commit


def test_changes_and_names():
    assert resolve_rates("scattered", None, None) == [0.0, 0.01]  # the first runs' changes
    assert resolve_rates("rf", None, None) == [0.0, 0.001]
    assert resolve_rates("rf", None, 3) == [0.0, 0.003]
    assert resolve_rates("rf", "0.002", 1) == [0.002]
    assert change_label("scattered", 0.01, "1.0%") == "1%" and change_label("rf", 0, "x") == "none"
    assert change_label("rf", 0.001, "1 pair (0.1%)") == "1 pair (0.1%)"
    assert report_name(0.1, "scattered") == "airflow.md" and report_name(1.0, "rf") == "airflow-sf1-rf.md"


def _row(view, rate, total, *, commit=None, pairs=None, path="airflow-connect"):
    row = {"path": path, "view": view, "rate": rate, "stream": "rf", "total_s": total, "mode": "aggregate"}
    row["change"] = change_label("rf", rate, "1 pair (0.1%)")
    row["changed"] = {"pairs": pairs} if pairs else {}
    if commit is not None:
        row.update(trigger_to_commit_s=commit, scheduling_s=1.0, task_start_s=0.5, work_s=commit - 1.5)
        row.update(mint_work_s=0.3, write_work_s=commit - 2.2, append_work_s=0.4, commit_to_run_end_s=0.6)
    return row


def _results():
    single = [_row(v, 0.001, c + 1, commit=c, pairs=1) for v, c in (("wide", 4.0), ("q3", 5.5), ("wide", 5.0))]
    single.append(_row("wide", 0, 2.0, commit=1.8))
    warm = _row("wide", 0.001, 30.0)
    return [{"path": "connect", "single": single, "warmup": warm, "warmups": [warm], "concurrent": None}]


def test_groups_by_view_and_change():
    got = [(v, ch, len(rows)) for v, ch, rows in groups(_results()[0]["single"])]
    assert got == [("wide", "1 pair (0.1%)", 2), ("q3", "1 pair (0.1%)", 1), ("wide", "none", 1)]
    old = [{"rate": 0.01, "total_s": 5.0}, {"rate": 0, "total_s": 3.0}]  # rows of the first runs: wide only
    assert [(v, ch) for v, ch, _ in groups(old)] == [("wide", "1%"), ("wide", "none")]


def _args(sf=1.0):
    return argparse.Namespace(
        sf=sf, runs=3, views=0, paths="connect", connect_memory="6g", stream="rf", view_names="wide,q3", note=None
    )


def test_issue_35_target():
    lines = target_lines(_results(), args=_args(), stream="rf")
    wide = next(line for line in lines if "`wide`" in line)
    assert "trigger -> commit: 4.50 s" in wide and wide.endswith("(met).")
    assert "scheduling 1.00, task start 0.50, refresh 3.00" in wide
    assert next(line for line in lines if "`q3`" in line).endswith("(not met).")
    small = target_lines(_results(), args=_args(0.01), stream="rf")  # a trial: no verdict
    assert not any("met)" in line for line in small)


def test_report(tmp_path):
    info = {
        "date_utc": "2026-01-01 00:00",
        "cpus": 2,
        "memory_gib": 8,
        "platform": "Linux",
        "python": "3.11",
        "java": "17",
        "versions": {},
        "load_average": [0.0],
    }
    out = tmp_path / "r.md"
    write_report(out, _results(), args=_args(), info=info, raw="`raw.json`")
    text = out.read_text()
    assert "## Trigger to the append's commit" in text and "`path: airflow-connect`" in text
    line = next(x for x in text.splitlines() if x.startswith("| connect | wide | 1 pair (0.1%) | 2 | **4.50**"))
    assert "| 4.0-5.0 | 1.00 | 0.50 | 3.00 | 0.30 / 2.30 / 0.40 | 0.60 | aggregate |" in line
    assert "connect wide 30.00 s" in text  # the warm-up, apart
