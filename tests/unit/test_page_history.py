"""Issue 39, the run history (pure part): what each run did, from its Airflow state, its tasks' summary XComs and
the commit it made (mvsink.airflow.plugin.runs.run_outcome / history_entry), and the history's table, filters and
pages as the view's tab renders them."""

from __future__ import annotations

import re

import pytest

from mvsink.airflow.plugin import render
from mvsink.airflow.plugin.runs import history_entry, run_outcome

pytestmark = pytest.mark.unit

LINKS = render.Links()
T = 1_795_000_000_000


def _run(run_id: str, state: str, *, run_type: str = "manual", dry: bool = False, error: str | None = None) -> dict:
    return {
        "run_id": run_id,
        "state": state,
        "run_type": run_type,
        "start": T,
        "end": None if state in ("queued", "running") else T + 12_000,
        "wall_ms": 12_000,
        "running": state == "running",
        "dry_run": dry,
        "failed_tasks": [{"task_id": "mint", "try_number": 1, "error": error}] if error else [],
        "conf": {"dry_run": dry},
        "triggered_by": "rest_api",
        "logical_date": None,
        "run_after": T,
    }


@pytest.mark.parametrize(
    ("kw", "want"),
    [
        ({"state": "queued"}, ("queued", "")),
        ({"state": "running"}, ("running", "")),
        (
            {"state": "failed", "error": "MvSinkError: view v: bad refresh_time\nTraceback ..."},
            ("failed", "MvSinkError: view v: bad refresh_time"),
        ),
        ({"state": "failed"}, ("failed", "see the failed task's log")),
        (
            {"mint": {"status": "waiting_for_inputs", "reason": "source a not committed yet"}},
            ("skipped", "waiting for inputs: source a not committed yet"),
        ),
        ({"mint": {"status": "up_to_date", "reason": "upper already past"}}, ("up to date", "upper already past")),
        (
            {"append": {"status": "appended", "mode": "unchanged", "rows_added": 0, "rows_retracted": 0}},
            ("up to date", "no source changed: +0 −0 rows"),
        ),
        (
            {"append": {"status": "appended", "rows_added": 0, "rows_retracted": 0}},  # an empty append: no mode
            ("up to date", "no source changed: +0 −0 rows"),
        ),
        ({"dry_run": True, "append": {"status": "dry_run"}}, ("dry run", "")),
        (
            {"commit": {"mode": "incremental", "rows_added": 4, "rows_retracted": 1, "version": 7}},
            ("refreshed", "incremental +4 −1 rows"),
        ),
    ],
)
def test_what_a_run_did(kw, want):
    args = {"state": "success", "dry_run": False, "mint": None, "append": None, "commit": None, **kw}
    assert run_outcome(**args) == want


def test_a_history_entry_joins_the_run_its_summaries_and_its_commit():
    commit = {"version": 9, "mode": "full", "rows_added": 3, "rows_retracted": 0}
    e = history_entry(
        run=_run("backfill__2026-01-01T00:00:00+00:00", "success", run_type="backfill"),
        mint=None,
        append={"status": "appended", "refresh_time": T - 5_000, "mode": "full", "rows_added": 3},
        commit=commit,
    )
    assert (e["trigger"], e["outcome"], e["version"], e["refresh_time"]) == ("backfill", "refreshed", 9, T - 5_000)
    dry = history_entry(run=_run("manual__1", "success", dry=True), mint=None, append=None, commit=None)
    assert dry["trigger"] == "dry run" and dry["outcome"] == "dry run" and dry["version"] is None


def _hist(entries, *, state="", page=1, pages=1):
    return {
        "runs": entries,
        "total": len(entries),
        "page": page,
        "pages": pages,
        "state": state,
        "counts": {"success": 2, "failed": 1},
    }


def test_the_history_table_filters_and_pages():
    entries = [
        history_entry(
            run=_run("manual__f", "failed", error="MvSinkError: view v: bad refresh_time\nmore"),
            mint=None,
            append=None,
            commit=None,
        ),
        history_entry(
            run=_run("scheduled__s", "success", run_type="scheduled"),
            mint={"status": "up_to_date", "reason": "nothing new", "refresh_time": T},
            append=None,
            commit=None,
        ),
    ]
    html = render.history_html("v", _hist(entries, page=2, pages=3), LINKS, now=T + 60_000)
    rows = re.findall(r'<tr data-run="([^"]+)" data-state="(\w+)" data-outcome="([^"]+)"', html)
    assert rows == [("manual__f", "failed", "failed"), ("scheduled__s", "success", "up to date")]
    assert "MvSinkError: view v: bad refresh_time</span>" in html and "more" not in html
    assert 'href="/dags/mv_v/runs/manual__f/tasks/mint?try_number=1"' in html
    assert '<a data-filter="failed" href="/mvsink/dags/mv_v?state=failed">failed (1)</a>' in html
    assert '<b data-filter="">all (3)</b>' in html
    assert 'data-page="1"' in html and 'data-page="3"' in html and "page 2 of 3" in html
    assert f'data-col="refresh_time" data-value="{T}"' in html
    empty = render.history_html("v", _hist([], state="queued"), LINKS, now=T)
    assert "No runs in state queued yet." in empty
    assert "cannot be read" in render.history_html("v", {"error": "x"}, LINKS, now=T)


def test_the_last_run_says_what_it_did():
    """A no-op run is "up to date", not a bare "success" (the overview's Last run and the tab's last run)."""
    run = {**_run("manual__n", "success"), "outcome": "up to date", "detail": "no source changed: +0 −0 rows"}
    html = render.run_html("v", run, LINKS, now=T + 60_000)
    assert 'data-state="success"' in html and 'data-outcome="up to date"' in html and "no source changed" in html
    assert "data-outcome" not in render.run_html("v", {**run, "outcome": "dry run", "dry_run": True}, LINKS)
    assert "data-outcome" not in render.run_html("v", _run("manual__x", "failed"), LINKS)
