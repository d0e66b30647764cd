"""The pieces both pages of the UI plugin are made of (:mod:`.render`, :mod:`.viewtab`): the links into Airflow and
the plugin, and the cells of a view's row (its last run, freshness, checks, last refresh, sources) (pure: no I/O)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from mvsink.airflow.dag_factory import dag_id_for
from mvsink.airflow.plugin import NAV_ROUTE, VIEW_TAB_ROUTE
from mvsink.airflow.plugin.common import MODE_COLOURS, esc, human_bytes, short_time, when_html
from mvsink.readers.freshness import mode_label
from mvsink.times import format_duration, format_time


@dataclasses.dataclass(frozen=True)
class Links:
    """Where pages point: the Airflow UI root (``/`` or the base_url's path) and this app's prefix."""

    airflow_root: str = "/"
    app_root: str = "/mvsink/"

    def dag(self, view: str) -> str:
        return f"{self.airflow_root}dags/{dag_id_for(view)}"

    def view_page(self, view: str) -> str:
        return f"{self.app_root}dags/{dag_id_for(view)}"

    def view_tab(self, view: str) -> str:
        return f"{self.airflow_root}dags/{dag_id_for(view)}/plugin/{VIEW_TAB_ROUTE}"

    def runs(self, view: str) -> str:
        """The prefix of a run's page (a run id, URL-quoted, follows)."""
        return f"{self.airflow_root}dags/{dag_id_for(view)}/runs/"

    def run(self, view: str, run_id: str) -> str:
        return self.runs(view) + quote(run_id, safe="")

    def trigger(self, view: str) -> str:
        """Airflow's own endpoint that triggers a run of the view's DAG (the REST API's, as the UI's trigger)."""
        return f"{self.airflow_root}api/v2/dags/{dag_id_for(view)}/dagRuns"

    def api(self) -> str:
        """Airflow's REST API root (its own auth and permission checks apply to every call the page makes)."""
        return f"{self.airflow_root}api/v2/"

    def task_log(self, view: str, run_id: str, task_id: str, try_number: int) -> str:
        return f"{self.run(view, run_id)}/tasks/{quote(task_id, safe='')}?try_number={int(try_number)}"

    def overview_top(self) -> str:
        """The "Materialized views" page in Airflow's navigation (opened in the Airflow window, not the frame)."""
        return f"{self.airflow_root}plugin/{NAV_ROUTE}"

    def overview(self, **query: str) -> str:
        q = "&".join(f"{k}={v}" for k, v in query.items())
        return self.app_root + (f"?{q}" if q else "")


def next_run(s: dict[str, Any], now: int | None, *, paused: bool = False) -> str:
    """The next run of an every/at schedule (the timetable's arithmetic), under its description; a paused DAG
    has none: it says so instead."""
    if paused:
        return (
            '<div data-paused-note><span class="badge paused">paused</span> '
            '<span class="muted">no scheduled runs until it is resumed</span></div>'
        )
    if s.get("next_run") is None:
        return ""
    return f'<div class="muted">{when_html(s["next_run"], now, key="next-run", before="next")}</div>'


def actions_html(view: str, links: Links, *, allowed: bool = True, paused: bool = False) -> str:
    """The view's **Refresh** and **Dry run** buttons: they trigger a run of its DAG through Airflow's own
    endpoint (conf ``{"dry_run": false}`` or ``{"dry_run": true}``, refresh time: now); the answer shows beside
    them. Disabled when the user may not trigger the DAG's runs (Airflow would answer 403)."""
    off = "" if allowed else ' disabled title="you may not trigger runs of this DAG"'
    note = (
        ' <span class="badge paused" data-paused title="a triggered run waits until the DAG is unpaused">paused</span>'
        if paused
        else ""
    )
    return (
        f'<div class="actions" data-actions="{esc(view)}" data-url="{esc(links.trigger(view))}" '
        f'data-runs="{esc(links.runs(view))}"{" data-paused" if paused else ""}>'
        f'<button type="button" data-trigger="refresh"{off}>Refresh</button> '
        f'<button type="button" data-trigger="dry_run"{off}>Dry run</button>{note}'
        f'<span class="trigger-result" role="status"></span></div>'
    )


def run_html(
    view: str, run: dict[str, Any] | None, links: Links, *, what: str = "last run", now: int | None = None
) -> str:
    """A run's state badge, when it ended (or started, while it runs; relative, absolute on hover), its wall time
    linked to the run, and its failed tasks' log links with the first lines of their errors."""
    if run is None:
        return f'<span class="muted" data-run="none">no {esc(what)}</span>'
    state = run["state"]
    wall = run["wall_ms"]
    time_text = "" if wall is None else format_duration(wall) + (" so far" if run["running"] else "")
    at = run["start"] if run["running"] or run["end"] is None else run["end"]
    when = "" if at is None else " " + when_html(at, now, key="run-at", before="started" if run["running"] else "")
    out = (
        f'<span data-run="{esc(run["run_id"])}" data-state="{esc(state)}" data-wall-ms="{"" if wall is None else wall}">'
        f'<span class="badge run-{esc(state)}">{esc(state)}</span>{when} '
        + ("" if not time_text or run["running"] else '<span class="muted">took</span> ')
        + f'<a data-top href="{esc(links.run(view, run["run_id"]))}" title="{esc(run["run_id"])}">'
        f"{esc(time_text or 'run')}</a>" + (' <span class="muted">dry run</span>' if run["dry_run"] else "") + "</span>"
    )
    outcome = run.get("outcome")
    if outcome in ("refreshed", "up to date", "skipped", "rescheduled") and not run["dry_run"]:
        detail = run.get("detail") or ""
        out += (
            f'<div class="muted" data-outcome="{esc(outcome)}"><span class="badge {OUTCOME_BADGE[outcome]}">'
            f"{esc(outcome)}</span> {esc(detail)}</div>"
        )
    for t in run["failed_tasks"]:
        error = t.get("error")
        out += (
            f'<div data-failed-task="{esc(t["task_id"])}">failed: '
            f'<a data-top href="{esc(links.task_log(view, run["run_id"], t["task_id"], t["try_number"]))}">'
            f"{esc(t['task_id'])} (try {int(t['try_number'])}) log</a>"
            + (f'<pre class="error" data-error>{esc(error)}</pre>' if error else "")
            + "</div>"
        )
    return out


def dry_run_html(view: str, run: dict[str, Any] | None, links: Links, *, now: int | None = None) -> str:
    """The last dry run: when (relative, absolute on hover), its link, and what it would have done (the append
    task's report)."""
    if run is None:
        return '<span class="muted" data-dry-run="none">none</span>'
    at = run["end"] if run["end"] is not None else run["start"]
    when = when_html(at, now, key="dry-run-at") if at is not None else esc(run["run_id"])
    return (
        f'<span data-dry-run="{esc(run["run_id"])}">{when} '
        f'<a data-top href="{esc(links.run(view, run["run_id"]))}" title="{esc(run["run_id"])}">run</a>: '
        f"{esc(run['report'] or '(no report)')}</span>"
    )


AIRFLOW_RUN_TYPES = ("manual__", "scheduled__", "backfill__", "asset_triggered__", "asset_materialization__")


def is_airflow_run_id(run_id: object) -> bool:
    """An Airflow run's id (``manual__…``, ``scheduled__…``, …), not a command line's (``cli-…``)."""
    return isinstance(run_id, str) and run_id.startswith(AIRFLOW_RUN_TYPES)


def time_cell(ms: int | None, col: str, *, empty: str = "-") -> str:
    """A data time (as_of, since, a refresh time): ``2026-01-01 00:00`` UTC, the full ISO time and the epoch
    milliseconds on hover."""
    if ms is None:
        return f'<td class="time" data-col="{col}" data-value="">{esc(empty)}</td>'
    return (
        f'<td class="time" data-col="{col}" data-value="{ms}" title="{esc(format_time(ms))} ({ms})">'
        f"{esc(short_time(ms))}</td>"
    )


def upper_cell(upper: int, now: int | None) -> str:
    """Data through (the upper): relative to now, the absolute time on hover."""
    if upper <= 0:
        return f'<td class="time" data-col="upper" data-value="0"><span class="muted">{NOTHING_FINAL}</span></td>'
    return f'<td class="time" data-col="upper" data-value="{upper}">{when_html(upper, now, key="upper")}</td>'


def mode_badge(kind: str, mode: str) -> str:
    colour = MODE_COLOURS.get(kind, MODE_COLOURS[""])
    return (
        f'<span class="mode" style="background:{colour}"></span>'
        f'<span data-mode="{esc(mode)}">{esc(mode_label(mode) or mode or "-")}</span>'
    )


NOTHING_FINAL = "nothing final yet"


def failing_html(s: dict[str, Any], run: dict[str, Any] | None, now: int | None) -> str:
    """When the view's last (non-dry) run failed: since when its data is stale (its final time plus ``max_lag``,
    when it is past it), else since when it has not been refreshed (its last commit), or that it never was."""
    if run is None or run.get("dry_run") or run.get("state") != "failed":
        return ""
    committed = (s.get("last_refresh") or {}).get("committed_ms")
    final, max_lag = s.get("final_through"), s.get("max_lag_ms")
    if s.get("stale") and final is not None and max_lag is not None:
        what, at = "data stale since", final + max_lag
    elif committed is not None:
        what, at = "data not refreshed since", committed
    else:
        what, at = "never refreshed", None
    when = "" if at is None else " " + when_html(at, now, key="stale-since")
    return (
        f'<div class="failing" data-failing="{esc(run["run_id"])}" data-stale-since="{"" if at is None else at}">'
        f'<span class="badge stale">last run failed</span> {esc(what)}{when}</div>'
    )


def freshness_cell(s: dict[str, Any], run: dict[str, Any] | None = None, now: int | None = None) -> str:
    lag = s["lag_ms"]
    text = "never refreshed" if lag is None else format_duration(lag)
    if s["max_lag_ms"] is None:
        badge, target = '<span class="badge notarget" title="the view file sets no max_lag">no max_lag set</span>', ""
    else:
        badge = (
            '<span class="badge stale" data-stale="true">STALE</span>'
            if s["stale"]
            else '<span class="badge fresh" data-stale="false">fresh</span>'
        )
        target = f'<div class="muted">max_lag {esc(format_duration(s["max_lag_ms"]))}</div>'
    return (
        f'<td data-col="lag" data-value="{"" if lag is None else lag}" data-max-lag="{s["max_lag_ms"] or ""}" '
        f'data-stale="{str(bool(s["stale"])).lower()}">{esc(text)} {badge}{target}{failing_html(s, run, now)}</td>'
    )


def checks_cell(s: dict[str, Any]) -> str:
    checks = s["checks"]
    if not checks:
        return '<td data-col="checks" data-value="0" class="muted">-</td>'
    words = {"error": "error row(s)", "drop": "dropped", "warn": "warned"}
    items = "".join(
        f'<li data-check="{esc(name)}" data-action="{esc(c.get("action"))}" data-rows="{int(c.get("rows", 0))}">'
        f"{esc(name)}: {int(c.get('rows', 0))} {esc(words.get(c.get('action', ''), 'rows'))}</li>"
        for name, c in checks.items()
    )
    cls = ' class="errors"' if s["error_rows"] else ""
    return f'<td data-col="checks" data-value="{s["error_rows"]}"{cls}><ul class="plain">{items}</ul></td>'


def last_refresh_cells(last: dict[str, Any] | None, now: int | None = None) -> dict[str, str]:
    """The newest append's cells by column: its refresh time, commit time, mode, rows, bytes, mint to commit."""
    if last is None:
        return {
            "last_refresh": '<td data-col="last_refresh" data-value="" class="muted">never</td>',
            "refreshed_at": '<td data-col="refreshed_at" data-value=""></td>',
            "mode": '<td data-col="mode" data-value=""></td>',
            "rows": '<td class="num" data-col="rows"></td>',
            "bytes": '<td class="num" data-col="bytes"></td>',
            "duration": '<td class="num" data-col="duration"></td>',
        }
    dur = last["duration_ms"]
    refreshed = when_html(last.get("committed_ms"), now, key="refreshed", empty="")
    return {
        "last_refresh": time_cell(last["refresh_time"], "last_refresh"),
        "refreshed_at": f'<td data-col="refreshed_at" data-value="{last.get("committed_ms") or ""}">{refreshed}</td>',
        "mode": f'<td data-col="mode" data-value="{esc(last["mode"])}" title="{esc(last["mode_reason"])}">'
        f"{mode_badge(last['mode_kind'], last['mode'])}</td>",
        "rows": f'<td class="num" data-col="rows" data-added="{last["rows_added"]}" '
        f'data-retracted="{last["rows_retracted"]}">+{last["rows_added"]} &minus;{last["rows_retracted"]}</td>',
        "bytes": f'<td class="num" data-col="bytes" data-value="{last["bytes"]}">{esc(human_bytes(last["bytes"]))}</td>',
        "duration": f'<td class="num" data-col="duration" data-value="{"" if dur is None else dur}" '
        f'title="Spark step {esc(format_duration(last["write_ms"] or 0))}">'
        f"{esc('-' if dur is None else format_duration(dur))}</td>",
    }


def sources_cell(s: dict[str, Any], links: Links) -> str:
    items = []
    for src in s["sources"]:
        version = src["version_read"]
        v = f' <span class="muted">v{version}</span>' if version is not None else ""
        what = (
            f'view <a href="{esc(links.view_page(src["view"]))}">{esc(src["view"])}</a>'
            if src["kind"] == "view"
            else f'<span title="{esc(src["table"])}">{esc(_short_path(src["table"]))}</span>'
        )
        items.append(
            f'<li data-source="{esc(src["name"])}" data-version="{"" if version is None else version}">'
            f"{esc(src['name'])}: {what}{v}</li>"
        )
    return f'<td data-col="sources"><ul class="plain">{"".join(items)}</ul></td>'


def _short_path(path: str | None) -> str:
    parts = (path or "").rstrip("/").split("/")
    return "/".join(parts[-2:]) if len(parts) > 2 else (path or "")


SORT_KEYS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "view": lambda s: s["view"],
    "schedule": lambda s: s["schedule"],
    "as_of": lambda s: s["as_of"],
    "since": lambda s: s["since"],
    "upper": lambda s: s["upper"],
    "lag": lambda s: (s["lag_ms"] is None, s["lag_ms"] or 0),
    "stale": lambda s: (not s["stale"], s["view"]),
    "last_refresh": lambda s: (s["last_refresh"] or {}).get("refresh_time") or -1,
    "refreshed_at": lambda s: (s["last_refresh"] or {}).get("committed_ms") or -1,
    "mode": lambda s: (s["last_refresh"] or {}).get("mode") or "",
    "rows": lambda s: (
        ((s["last_refresh"] or {}).get("rows_added") or 0) + ((s["last_refresh"] or {}).get("rows_retracted") or 0)
    ),
    "bytes": lambda s: (s["last_refresh"] or {}).get("bytes") or 0,
    "duration": lambda s: (s["last_refresh"] or {}).get("duration_ms") or 0,
    "checks": lambda s: s["error_rows"],
    "staged": lambda s: len(s["in_flight"]),
}
COLUMNS = [  # what an operator looks at first comes first (the table scrolls sideways in its own box)
    ("view", "View"),
    ("last_run", "Last run"),
    ("lag", "Freshness lag"),
    ("upper", "Data through (upper)"),
    ("refreshed_at", "Refreshed at"),
    ("schedule", "Schedule"),
    ("last_refresh", "Last refresh (refresh time)"),
    ("mode", "Mode"),
    ("rows", "Rows ±"),
    ("bytes", "Bytes"),
    ("duration", "Mint to commit"),
    ("checks", "Checks"),
    ("staged", "Staged"),
    ("sources", "Sources (Delta version read)"),
    ("as_of", "as_of"),
    ("since", "since"),
]

OUTCOME_BADGE = {  # a history run's outcome -> its badge's class
    "refreshed": "run-success",
    "up to date": "run-uptodate",
    "dry run": "run-dry",
    "failed": "run-failed",
    "skipped": "run-skipped",
    "queued": "run-queued",
    "running": "run-running",
    "rescheduled": "run-queued",
}
