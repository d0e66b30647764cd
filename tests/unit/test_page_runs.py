"""Issue 23 item 2 (first part): the page's last run, failed tasks and last dry run of each view, shaped from
Airflow's runs (mvsink.airflow.plugin.runs) and rendered with links into Airflow."""

from __future__ import annotations

import datetime as dt
import re

import pytest

from mvsink.airflow.plugin import render
from mvsink.airflow.plugin.runs import is_dry_run, run_summary

pytestmark = pytest.mark.unit

LINKS = render.Links(airflow_root="/", app_root="/mvsink/")
T = dt.datetime(2026, 11, 25, 7, 22, 17, tzinfo=dt.UTC)
NOW = int(T.timestamp() * 1000) + 95_000


def summary(**kw):
    args = {
        "run_id": "scheduled__2026-11-25T07:22:17+00:00",
        "state": "success",
        "run_type": "scheduled",
        "logical_date": T,
        "start": T + dt.timedelta(seconds=1),
        "end": T + dt.timedelta(seconds=31, milliseconds=500),
        "conf": {},
        "failed_tasks": [],
        "report": None,
        "now": NOW,
        **kw,
    }
    return run_summary(**args)


def test_a_finished_run_has_its_wall_time():
    r = summary()
    assert r["state"] == "success" and r["wall_ms"] == 30_500 and not r["running"] and not r["dry_run"]
    assert r["logical_date"] == int(T.timestamp() * 1000)


def test_a_running_run_counts_to_now_and_naive_times_are_utc():
    r = summary(state="running", end=None, start=T.replace(tzinfo=None))
    assert r["running"] and r["wall_ms"] == 95_000


def test_dry_runs_and_reports():
    assert is_dry_run({"dry_run": True}) and is_dry_run({"dry_run": "true"}) and not is_dry_run({"dry_run": False})
    assert not is_dry_run(None) and not is_dry_run({})
    r = summary(conf={"dry_run": True}, report='"v: dry run [a, b): would add 3 and retract 0 rows; nothing written"')
    assert r["dry_run"] and r["report"].startswith("v: dry run") and "would add 3" in r["report"]


def test_the_overview_shows_each_views_last_run_with_links():
    failed = summary(
        run_id="manual__2026-11-25T08:00:00+00:00",
        state="failed",
        failed_tasks=[("mint", 1)],
    )
    rows = [_row("a"), _row("b"), _row("c")]
    runs = {"mv_a": {"last": summary(), "last_dry_run": None}, "mv_b": {"last": failed, "last_dry_run": None}}
    page = render.overview_page(rows, links=LINKS, nonce="n", runs=runs)
    a, b, c = (_tr(page, v) for v in "abc")
    assert 'data-state="success" data-wall-ms="30500"' in a and ">30.5 s</a>" in a
    assert 'href="/dags/mv_a/runs/scheduled__2026-11-25T07%3A22%3A17%2B00%3A00"' in a
    assert 'data-state="failed"' in b and 'class="badge run-failed"' in b
    assert 'data-failed-task="mint"' in b
    assert 'href="/dags/mv_b/runs/manual__2026-11-25T08%3A00%3A00%2B00%3A00/tasks/mint?try_number=1"' in b
    assert 'data-run="none"' in c and "no last run" in c


def test_the_view_page_shows_the_last_run_the_last_dry_run_and_opens_all_views_on_top(catalog_detail):
    dry = summary(run_id="manual__dry", conf={"dry_run": True}, report="v: dry run: would add 3 and retract 0 rows")
    page = render.view_page(
        catalog_detail, links=LINKS, nonce="n", runs={"last": summary(state="running", end=None), "last_dry_run": dry}
    )
    assert 'data-card="last_run"' in page and 'data-state="running"' in page and ">1m 34s so far</a>" in page
    assert 'data-dry-run="manual__dry"' in page and "would add 3 and retract 0 rows" in page
    assert '<a data-top class="muted" href="/plugin/materialized-views"' in page  # the Airflow page, not the frame
    assert "white-space: pre-wrap" in page  # the commit log wraps
    empty = render.view_page(catalog_detail, links=LINKS, nonce="n")
    assert 'data-run="none"' in empty and 'data-dry-run="none"' in empty


def _tr(page: str, view: str) -> str:
    start = page.index(f'<tr data-view="{view}"')
    return page[start : page.index("</tr>", start)]


def _row(view: str) -> dict:
    return {
        "view": view,
        "description": "",
        "schedule": "manual",
        "next_run": None,
        "as_of": 0,
        "since": 0,
        "upper": 0,
        "lag_ms": None,
        "max_lag_ms": None,
        "stale": False,
        "last_refresh": None,
        "checks": {},
        "error_rows": 0,
        "staged_batches": [],
        "in_flight": [],
        "sources": [],
    }


@pytest.fixture
def catalog_detail():
    return {
        **_row("v"),
        "target": "/data/views/v",
        "final_through": None,
        "version": 0,
        "history": [],
        "last_commits": [],
        "upstream": [],
        "downstream": [],
    }


def test_first_error_takes_the_raised_exception_of_the_last_traceback():
    from mvsink.airflow.plugin.runs import first_error

    records = [
        {"event": "starting", "level": "info"},
        {"event": "retrying", "level": "warning"},
        {
            "event": "Task failed with exception",
            "level": "error",
            "error_detail": [
                {
                    "exc_type": "AirflowFailException",
                    "exc_value": "view v: source 'o': no table at x.\nFix: create it.",
                },
                {"exc_type": "MvSinkError", "exc_value": "view v: source 'o': no table at x.", "is_cause": True},
            ],
        },
        {"event": "done", "level": "info"},
    ]
    assert first_error(records) == "AirflowFailException: view v: source 'o': no table at x.\nFix: create it."
    assert first_error([{"event": "Spark died", "level": "error"}, {"event": "x", "level": "info"}]) == "Spark died"
    assert first_error([{"event": "fine", "level": "info"}]) is None
    long = [{"event": "\n".join(f"line {i}" for i in range(10)), "level": "error"}]
    assert first_error(long) == "line 0\nline 1\nline 2\nline 3"


def test_a_failed_tasks_error_is_shown_escaped_under_its_log_link():
    failed = summary(state="failed", failed_tasks=[("write", 3)], errors={"write": "Boom: <b>x</b> & y"})
    page = render.overview_page([_row("a")], links=LINKS, nonce="n", runs={"mv_a": {"last": failed}})
    tr = _tr(page, "a")
    assert '<pre class="error" data-error>Boom: &lt;b&gt;x&lt;/b&gt; &amp; y</pre>' in tr
    assert "tasks/write?try_number=3" in tr


# --------------------------------------------------------------------------- charts on a real time axis

H = 3_600_000
DAY = 24 * H
T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def _append(version: int, refresh_time: int, committed: int, **kw) -> dict:
    return {
        "version": version,
        "operation": "append",
        "foreign": False,
        "refresh_time": refresh_time,
        "committed_ms": committed,
        "upper": refresh_time + 1,
        "since": T0,
        "mode": "full",
        "mode_kind": "full",
        "rows_added": 3,
        "rows_retracted": 1,
        "bytes": 100,
        "duration_ms": 2000,
        **kw,
    }


def test_a_twenty_day_gap_is_a_gap_on_the_refresh_charts_time_axis():
    import re

    history = [_append(1, T0, T0 + 60_000), _append(2, T0 + H, T0 + H + 60_000), _append(3, T0 + 21 * DAY, T0)]
    svg = render.refresh_chart(history)
    xs = [float(x) for x in re.findall(r'<rect class="added" x="([0-9.]+)"', svg)]
    assert len(xs) == 3 and xs[0] < xs[1] < xs[2]
    # the hour between the first two is 1/504 of the 21 days: their bars are close, the third far right
    assert (xs[2] - xs[1]) > 100 * (xs[1] - xs[0])
    ticks = re.findall(r'data-tick="(\d+)"', svg)
    assert ticks[0] == str(T0) and ticks[-1] == str(T0 + 21 * DAY) and len(ticks) == 5
    assert "2026-01-01 00:00" in svg and "2026-01-22 00:00" in svg and "time (UTC, refresh time)" in svg


def test_lag_over_time_is_a_sawtooth_with_max_lag_drawn():
    from mvsink.airflow.plugin.charts import lag_chart, lag_points

    history = [
        _append(1, T0, T0 + 5 * 60_000),  # committed 5 min after its refresh time
        {"version": 2, "operation": "compact", "foreign": False, "upper": T0 + 1, "since": T0, "committed_ms": T0 + H},
        _append(3, T0 + 2 * H, T0 + 2 * H + 60_000),
    ]
    now = T0 + 3 * H
    assert lag_points(history, now) == [
        (T0 + 5 * 60_000, 5 * 60_000),
        (T0 + 2 * H + 60_000, 2 * H + 60_000),  # grew until the next append
        (T0 + 2 * H + 60_000, 60_000),  # dropped with it
        (now, H),  # and grew since
    ]
    svg = lag_chart(history, max_lag_ms=90 * 60_000, now=now)
    assert svg.count('class="lag-point"') == 2 and 'data-lag-ms="300000"' in svg and 'data-lag-ms="60000"' in svg
    assert 'class="max-lag" data-max-lag="5400000"' in svg and "max_lag 1h 30m" in svg
    assert "freshness lag (now 1h 00m)" in svg and "time (UTC)" in svg
    assert "No refreshes yet." in lag_chart([], max_lag_ms=None, now=now)


def test_the_frontier_chart_steps_at_each_commits_time():
    import re

    history = [
        {**_append(1, T0, T0 + 60_000), "upper": T0 + 1},
        {**_append(2, T0 + H, T0 + H + 60_000), "upper": T0 + H + 1},
        {**_append(3, T0 + 2 * H, T0 + 20 * DAY), "upper": T0 + 2 * H + 1},  # committed 20 days later
    ]
    svg = render.frontier_chart(history)
    xs = [float(x) for x in re.findall(r'<circle class="point upper"[^>]* cx="([0-9.]+)"', svg)]
    assert len(xs) == 3 and (xs[2] - xs[1]) > 100 * (xs[1] - xs[0]) > 0  # a gap in time is a gap on the axis
    assert "time (UTC, commit time)" in svg and "2026-01-01 00:01" in svg and "2026-01-21 00:00" in svg


def test_relative_times_with_the_absolute_time_on_hover():
    from mvsink.airflow.plugin.common import relative, span, when_html

    now = 1_795_000_000_000
    assert [
        span(ms) for ms in (999, 45_000, 3 * 60_000 + 59_000, 2 * 3_600_000 + 5 * 60_000, 12 * 3_600_000 + 60_000)
    ] == [
        "0 s",
        "45 s",
        "3 min",
        "2 h 5 min",
        "12 h",
    ]
    assert [span(d * 86_400_000 + h * 3_600_000) for d, h in ((2, 3), (20, 5))] == ["2 d 3 h", "20 d"]
    assert relative(now - 180_000, now) == "3 min ago" and relative(now + 120_000, now) == "in 2 min"
    assert relative(now - 400, now) == "just now"
    html = when_html(now + 120_000, now, key="next-run", before="next")
    iso = "2026-11-18T11:08:40.000Z"
    assert html == (
        f'<time class="rel" datetime="{iso}" title="{iso}" data-next-run="{now + 120_000}">next in 2 min</time>'
    )
    assert when_html(None, now, key="x") == '<span class="muted" data-x="">-</span>'


def test_the_buttons_post_to_airflows_trigger_endpoint():
    rows = [_row("a"), _row("b")]
    runs = {"mv_a": {"last": summary(), "last_dry_run": None, "paused": True}}
    page = render.overview_page(
        rows,
        links=render.Links(airflow_root="/af/", app_root="/af/mvsink/"),
        nonce="n",
        runs=runs,
        can_trigger={"mv_a"},
    )
    a, b = _tr(page, "a"), _tr(page, "b")
    assert 'data-url="/af/api/v2/dags/mv_a/dagRuns" data-runs="/af/dags/mv_a/runs/" data-paused>' in a
    assert '<button type="button" data-trigger="refresh">Refresh</button>' in a
    assert '<button type="button" data-trigger="dry_run">Dry run</button>' in a and "badge paused" in a
    # a user who may not trigger mv_b: its buttons are disabled (Airflow would answer 403 anyway)
    assert b.count(" disabled ") == 2 and "paused" not in b
    assert "conf: {dry_run: dry}" in page and "credentials: 'same-origin'" in page  # the script's request
    tab = render.view_page({**_row("v"), **_detail_extra()}, links=LINKS, nonce="n", can_trigger=False)
    assert 'data-url="/api/v2/dags/mv_v/dagRuns"' in tab and tab.count(" disabled ") == 2


def test_every_overview_cell_carries_its_columns_name_for_narrow_screens():
    page = render.overview_page([_row("a")], links=LINKS, nonce="n", now=NOW)
    tr = _tr(page, "a")
    labels = re.findall(r'<td\b[^>]* data-label="([^"]+)" data-col="(\w+)"', tr)
    assert [c for _, c in labels] == [c for c, _ in render.COLUMNS]
    assert dict((c, lab) for lab, c in labels)["lag"] == "Freshness lag"
    assert "@media (max-width: 760px)" in page and "content: attr(data-label)" in page


def _detail_extra():
    return {
        "target": "/data/views/v",
        "final_through": None,
        "version": 0,
        "history": [],
        "last_commits": [],
        "upstream": [],
        "downstream": [],
    }
