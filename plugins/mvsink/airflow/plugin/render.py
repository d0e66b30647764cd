"""HTML pages of the UI plugin: the "Materialized views" overview and a view's tab (pure: no I/O, no Airflow).

Server-rendered HTML with inline CSS and inline SVG charts (:mod:`.charts`): nothing is fetched from anywhere,
so the pages work offline. The pages only render what :mod:`mvsink.readers.overview` computed and what Airflow
knows of the views' runs (:mod:`.runs`); every value a test or a person may check carries its raw value in a
``data-*`` attribute beside the readable text. Times are shown relative to the page's time ("3 min ago",
"in 2 min") with the absolute UTC time on hover. Sorting is server-side (links), so it works in the UI's
sandboxed frame without scripts; the one inline script (:mod:`.assets`, allowed by a per-response nonce)
opens DAG links in the Airflow window, sizes the frame, and sends the Refresh / Dry run buttons to Airflow's
own trigger endpoint.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Collection
from typing import Any
from urllib.parse import quote

from mvsink.airflow.dag_factory import dag_id_for
from mvsink.airflow.plugin import NAV_ROUTE, VIEW_TAB_ROUTE
from mvsink.airflow.plugin.assets import page
from mvsink.airflow.plugin.charts import frontier_chart, lag_chart, legend, refresh_chart
from mvsink.airflow.plugin.common import MODE_COLOURS, esc, human_bytes, iso_html, short_time, when_html
from mvsink.airflow.plugin.runs import RUN_STATES
from mvsink.readers.freshness import mode_label
from mvsink.readers.modefix import mode_fixes
from mvsink.readers.status import append_details, format_commit
from mvsink.times import format_duration, format_time

__all__ = [
    "MODE_COLOURS",
    "Links",
    "frontier_chart",
    "lag_chart",
    "not_found_page",
    "overview_page",
    "refresh_chart",
    "view_page",
]


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


def _next_run(s: dict[str, Any], now: int | None, *, paused: bool = False) -> str:
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


def _time_cell(ms: int | None, col: str, *, empty: str = "-") -> str:
    """A data time (as_of, since, a refresh time): ``2026-01-01 00:00`` UTC, the full ISO time and the epoch
    milliseconds on hover."""
    if ms is None:
        return f'<td class="time" data-col="{col}" data-value="">{esc(empty)}</td>'
    return (
        f'<td class="time" data-col="{col}" data-value="{ms}" title="{esc(format_time(ms))} ({ms})">'
        f"{esc(short_time(ms))}</td>"
    )


def _upper_cell(upper: int, now: int | None) -> str:
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
        "last_refresh": _time_cell(last["refresh_time"], "last_refresh"),
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


def _last(runs: dict[str, dict[str, Any]], view: str, key: str = "last") -> dict[str, Any] | None:
    return (runs.get(dag_id_for(view)) or {}).get(key)


def sort_rows(rows: list[dict[str, Any]], sort: str, order: str) -> list[dict[str, Any]]:
    key = SORT_KEYS.get(sort, SORT_KEYS["view"])
    return sorted(rows, key=key, reverse=(order == "desc"))


def overview_page(
    rows: list[dict[str, Any]],
    *,
    links: Links,
    nonce: str,
    sort: str = "view",
    order: str = "asc",
    now: int | None = None,
    views_dir: str = "",
    runs: dict[str, dict[str, Any]] | None = None,
    can_trigger: Collection[str] | None = None,
    failures: dict[str, int] | None = None,
) -> str:
    """The "Materialized views" page: one row per view (``rows`` from ``readers.overview.all_views``; ``runs``:
    Airflow's last run of each view's DAG by DAG id, from :func:`mvsink.airflow.plugin.runs.last_runs`;
    ``can_trigger``: the DAG ids whose runs the user may trigger, None: every one)."""
    runs = runs or {}
    labels = dict(COLUMNS)
    sort = sort if sort in SORT_KEYS else "view"
    order = "desc" if order == "desc" else "asc"
    good = [r for r in rows if not r.get("error")]
    bad = [r for r in rows if r.get("error")]
    head = []
    for col, label in COLUMNS:
        if col not in SORT_KEYS:
            head.append(f"<th>{esc(label)}</th>")
            continue
        nxt = "desc" if (col == sort and order == "asc") else "asc"
        arrow = (" ▲" if order == "asc" else " ▼") if col == sort else ""
        head.append(
            f'<th data-sort="{col}"><a href="{esc(links.overview(sort=col, order=nxt))}">{esc(label)}{arrow}</a></th>'
        )
    body = []
    for s in sort_rows(good, sort, order):
        cells = row_cells(
            s,
            links,
            now=now,
            run=_last(runs, s["view"]),
            actions=_actions(s["view"], runs, links, can_trigger),
            paused=bool((runs.get(dag_id_for(s["view"])) or {}).get("paused")),
            failed_24h=(failures or {}).get(dag_id_for(s["view"]), 0),
        )
        row_cls = ' class="stale"' if s["stale"] else ""
        body.append(
            f'<tr data-view="{esc(s["view"])}"{row_cls}>'
            + "".join(_labelled(cells[col], labels) for col, _ in COLUMNS)
            + "</tr>"
        )
    stale = sum(1 for r in good if r["stale"])
    errors = sum(1 for r in good if r["error_rows"])
    summary = (
        f'<p class="lead"><span data-summary="views">{len(good)}</span> view(s), '
        f'<span data-summary="stale">{stale}</span> stale, <span data-summary="errors">{errors}</span> with '
        f"error rows"
        + (f", {len(bad)} broken view file(s)" if bad else "")
        + (
            f', <span data-summary="failures">{sum(failures.values())}</span> failed run(s) in the last 24 h'
            if failures is not None
            else ""
        )
        + (f" · views folder <code>{esc(views_dir)}</code>" if views_dir else "")
        + (f" · as of {esc(format_time(now))}" if now is not None else "")
        + "</p>"
    )
    broken = ""
    if bad:
        items = "".join(
            f'<li data-broken="{esc(r.get("view") or r.get("file"))}">'
            f"<b>{esc(r.get('view') or r.get('file'))}</b>: {esc(r['error'])}</li>"
            for r in bad
        )
        broken = f'<h2>Cannot be read</h2><ul class="plain">{items}</ul>'
    table = (
        f'<div class="scroll"><table id="views"><thead><tr>{"".join(head)}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
        if good
        else '<p class="muted">No views you may read in this DAG folder.</p>'
    )
    return page("Materialized views", f"<h1>Materialized views</h1>{summary}{legend()}{table}{broken}", nonce=nonce)


def row_cells(
    s: dict[str, Any],
    links: Links,
    *,
    now: int | None,
    run: dict[str, Any] | None,
    actions: str,
    paused: bool = False,
    failed_24h: int = 0,
) -> dict[str, str]:
    """One view's overview cells (``<td data-col=…>``) by column."""
    in_flight = s["in_flight"]
    staged_title = ", ".join(s["staged_batches"]) or "none"
    flag = ' <span class="badge stale">STALE</span>' if s["stale"] else ""
    dead = len(s["staged_batches"]) - len(in_flight)
    return {
        "view": f'<td data-col="view" data-value="{esc(s["view"])}"><a data-top href="{esc(links.dag(s["view"]))}" '
        f'title="{esc(s["description"])}">{esc(s["view"])}</a>{flag}'
        f'<div class="muted"><a data-top href="{esc(links.view_tab(s["view"]))}">history</a></div>{actions}</td>',
        "last_run": f'<td data-col="last_run">{run_html(s["view"], run, links, now=now)}'
        + (
            f'<div class="failing" data-failures-24h="{failed_24h}">{failed_24h} failed run(s) in the last 24 h</div>'
            if failed_24h
            else ""
        )
        + "</td>",
        "schedule": f'<td data-col="schedule" data-value="{esc(s["schedule"])}">{esc(s["schedule"])}'
        f"{_next_run(s, now, paused=paused)}</td>",
        "as_of": _time_cell(s["as_of"], "as_of"),
        "since": _time_cell(s["since"], "since"),
        "upper": _upper_cell(s["upper"], now),
        "lag": freshness_cell(s, run, now),
        **last_refresh_cells(s["last_refresh"], now),
        "checks": checks_cell(s),
        "staged": f'<td class="num" data-col="staged" data-value="{len(in_flight)}" '
        f'data-staged="{len(s["staged_batches"])}" title="{esc(staged_title)}">{len(in_flight)}'
        + (f' <span class="muted">(+{dead} dead)</span>' if dead > 0 else "")
        + "</td>",
        "sources": sources_cell(s, links),
    }


def _actions(view: str, runs: dict[str, dict[str, Any]], links: Links, can_trigger: Collection[str] | None) -> str:
    dag_id = dag_id_for(view)
    allowed = can_trigger is None or dag_id in can_trigger
    return actions_html(view, links, allowed=allowed, paused=bool((runs.get(dag_id) or {}).get("paused")))


_TD_COL = re.compile(r'^<td\b([^>]*?) data-col="(\w+)"')


def _labelled(cell: str, labels: dict[str, str]) -> str:
    """An overview cell with its column's name in ``data-label`` (shown beside the value when the table turns
    into one block per view on a narrow screen)."""
    return _TD_COL.sub(lambda m: f'<td{m[1]} data-label="{esc(labels.get(m[2], m[2]))}" data-col="{m[2]}"', cell)


def _cards_html(d: dict[str, Any], runs: dict[str, Any], links: Links, now: int | None) -> str:
    """The cards at the top of a view's tab: its runs, schedule, frontiers, freshness and staged batches."""
    name = d["view"]
    committed = (d.get("last_refresh") or {}).get("committed_ms")
    lag = "never refreshed" if d["lag_ms"] is None else format_duration(d["lag_ms"])
    verdict = (
        ""
        if d["max_lag_ms"] is None
        else (
            ' <span class="badge stale" data-stale="true">STALE</span>'
            if d["stale"]
            else ' <span class="badge fresh" data-stale="false">fresh</span>'
        )
    )
    cards = [
        ("last_run", "last run", run_html(name, runs.get("last"), links, now=now)),
        ("last_dry_run", "last dry run", dry_run_html(name, runs.get("last_dry_run"), links, now=now)),
        ("schedule", "Schedule", esc(d["schedule"]) + _next_run(d, now, paused=bool(runs.get("paused")))),
        ("as_of", "as_of", _time_span(d["as_of"])),
        ("since", "since", _time_span(d["since"])),
        (
            "upper",
            "data through (upper)",
            when_html(d["upper"], now, key="upper")
            if d["upper"] > 0
            else f'<span class="muted">{NOTHING_FINAL}</span>',
        ),
        ("refreshed_at", "refreshed at (last commit)", when_html(committed, now, key="refreshed")),
        ("final_through", "final through", _time_span(d["final_through"])),
        (
            "lag",
            "freshness lag",
            esc(lag)
            + verdict
            + (
                f' <span class="muted">max_lag {esc(format_duration(d["max_lag_ms"]))}</span>'
                if d["max_lag_ms"] is not None
                else ' <span class="badge notarget" title="the view file sets no max_lag">no max_lag set</span>'
            )
            + failing_html(d, runs.get("last"), now),
        ),
        ("version", "Delta version", version_text(d["version"])),
        ("staged", "staged batches", f"{len(d['in_flight'])} in flight, {len(d['staged_batches'])} staged"),
    ]
    return (
        '<div class="cards">'
        + "".join(f'<div data-card="{k}"><b>{esc(label)}</b>{v}</div>' for k, label, v in cards)
        + "</div>"
        + mode_reason_html(d)
    )


def version_text(version: int | None) -> str:
    """A table's Delta version as a person reads it (``-1``: no table yet)."""
    if version is None or version < 0:
        return '<span class="muted" data-version="none">no table yet</span>'
    return f'<span data-version="{int(version)}">{int(version)}</span>'


def mode_reason_html(d: dict[str, Any]) -> str:
    """Why the last refresh took its mode (the commit info's ``mvsink.mode_reason``) and, where one is known, what
    would change it (:func:`mvsink.readers.modefix.mode_fixes`, the fixes ``mvsink explain`` names)."""
    last = d.get("last_refresh")
    if not last:
        return ""
    reason = last.get("mode_reason") or ""
    fixes = mode_fixes(reason) if last.get("mode_kind") == "full" else []
    why = (
        f"<span data-mode-reason>{esc(reason)}</span>"
        if reason
        else (
            '<span class="muted" data-mode-reason>(no reason recorded)</span>'
            if last.get("mode_kind") == "full"
            else '<span class="muted" data-mode-reason></span>'
        )
    )
    fix = "".join(f"<li data-fix>{esc(f)}</li>" for f in fixes)
    hint = (
        f'<ul class="plain fixes">{fix}</ul>'
        if fix
        else (
            f'<div class="muted">mvsink explain {esc(d["view"])} shows what would make it incremental</div>'
            if last.get("mode_kind") == "full"
            else ""
        )
    )
    return (
        f'<div class="why" data-card="mode" data-mode-kind="{esc(last.get("mode_kind"))}"><b>mode of the last refresh</b>'
        f"{mode_badge(last.get('mode_kind') or '', last.get('mode') or '')}: {why}{hint}</div>"
    )


def data_range(lower: int, upper: int) -> str:
    """An append's range of data times ``[lower, upper)`` as a person reads it (UTC): ``data after 01:00 through
    02:00`` (a lower one past a whole second: the previous refresh time), ``data from 2026-01-01 00:00 through
    …``, ``data at …`` (one millisecond)."""
    through = short_time(upper - 1)
    if upper - 1 <= lower:
        return f"data at {through}"
    after = lower % 1000 == 1
    first = short_time(lower - 1 if after else lower)
    start = f"after {first}" if after else f"from {first}"
    if first[:10] == through[:10]:
        through = through[11:]  # the same day: the time only
    return f"data {start} through {through}"


def commit_line(c: dict[str, Any]) -> str:
    """One commit of the view's log as the page prints it: as ``mvsink status`` does, with human data ranges and
    sizes instead of epoch milliseconds and bytes."""
    if c.get("operation") == "bump" and not c.get("foreign") and isinstance(c.get("lower"), int):
        return f"v{c['version']:<5} {c['committed']}  bump upper -> {format_time(c['lower'])}"
    if c.get("foreign") or c.get("operation") != "append":
        return format_commit(c)
    return (
        f"v{c['version']:<5} {c['committed']}  append {data_range(int(c['lower']), int(c['upper']))} at "
        f"{format_time(c['refresh_time'])}: +{c.get('rows_added', 0)} -{c.get('rows_retracted', 0)}"
        f" rows, {human_bytes(c.get('bytes') or 0)}" + append_details(c)
    )


def _commits_html(d: dict[str, Any], links: Links) -> str:
    """The view's last commits as ``mvsink status`` prints them, foreign ones flagged, refreshes linked to
    their Airflow runs."""
    name = d["view"]
    lines = []
    for c in d["last_commits"]:
        line = esc(commit_line(c))
        if c.get("foreign"):
            lines.append(
                f'<span class="foreign" data-version="{c["version"]}" data-foreign="true">{line}  '
                f"[foreign commit: not made by mvsink]</span>"
            )
        else:
            run = (
                f'  <a data-top href="{esc(links.run(name, c["run_id"]))}" data-run-link>run</a>'
                if is_airflow_run_id(c.get("run_id"))
                else ""
            )
            bounds = (
                f' data-lower="{int(c["lower"])}" data-upper="{int(c["upper"])}"'
                if c.get("operation") == "append"
                else ""
            )
            lines.append(f'<span data-version="{c["version"]}" data-foreign="false"{bounds}>{line}</span>{run}')
    return (
        f'<pre class="log" id="commits">{chr(10).join(lines)}</pre>'
        if lines
        else '<p class="muted">No commits yet.</p>'
    )


def view_page(
    d: dict[str, Any],
    *,
    links: Links,
    nonce: str,
    runs: dict[str, Any] | None = None,
    can_trigger: bool = True,
    history: dict[str, Any] | None = None,
    sample: dict[str, Any] | None = None,
    can_pause: bool | None = None,
) -> str:
    """A view's tab: status, refresh history chart, since/upper over time, last commits, lineage (``runs``:
    Airflow's last run and last dry run of the view's DAG, as :func:`mvsink.airflow.plugin.runs.last_runs`;
    ``can_trigger``: whether the user may trigger its runs)."""
    name = d["view"]
    runs = runs or {}
    now = d.get("checked_at")
    cards_html = _cards_html(d, runs, links, now)
    commits = _commits_html(d, links)
    checks = (
        f"<h2>Checks (last refresh)</h2><table><tbody><tr>{checks_cell(d)}</tr></tbody></table>" if d["checks"] else ""
    )
    body = (
        f'<h1>{esc(name)} <a data-top class="muted" href="{esc(links.dag(name))}" style="font-size:12px">DAG</a>'
        f' <a data-top class="muted" href="{esc(links.overview_top())}" style="font-size:12px">all views</a>'
        f"{actions_html(name, links, allowed=can_trigger, paused=bool(runs.get('paused')))}</h1>"
        f'<p class="lead">{esc(d["description"] or "")} <span class="muted">table {esc(d["target"])}'
        + (f" · as of {esc(format_time(now))}" if now is not None else "")
        + "</span></p>"
        f"{cards_html}"
        + (
            controls_html(name, links, paused=bool(runs.get("paused")), can_trigger=can_trigger, can_pause=can_pause)
            if can_pause is not None
            else ""
        )
        + (
            f'<section id="run-history"><h2>Runs</h2>{history_html(name, history, links, now=now)}</section>'
            if history is not None
            else ""
        )
        + (
            f'<section id="view-data"><h2>Data</h2>{sample_html(sample, now=now)}</section>'
            if sample is not None
            else ""
        )
        + f'<h2>Refresh history</h2>{legend()}<div class="chart">{refresh_chart(d["history"])}</div>'
        f"<h2>Freshness lag over time</h2>"
        f'<div class="chart">{lag_chart(d["history"], max_lag_ms=d["max_lag_ms"], now=now or 0)}</div>'
        f'<h2>since and upper after each commit</h2><p class="legend muted"><span style="color:#2f74c0">━ upper</span>'
        f'<span style="color:#b3261e">━ since</span></p><div class="chart">{frontier_chart(d["history"])}</div>'
        f'<h2>Last commits <span class="muted" style="font-weight:400">(as mvsink status prints them)</span></h2>'
        f"{commits}{checks}<h2>Lineage</h2>{lineage_html(d, links)}"
    )
    return page(f"{name} — materialized view", body, nonce=nonce)


def _time_span(ms: int | None) -> str:
    if ms is None:
        return "-"
    return f'<span class="time" data-value="{ms}" title="{ms}">{iso_html(ms)}</span>'


def lineage_html(d: dict[str, Any], links: Links) -> str:
    srcs = "".join(
        f'<li data-source="{esc(s["name"])}" data-version="{"" if s["version_read"] is None else s["version_read"]}">'
        f"<b>{esc(s['name'])}</b>: "
        + (
            f'view <a href="{esc(links.view_page(s["view"]))}">{esc(s["view"])}</a>'
            if s["kind"] == "view"
            else f"Delta table <code>{esc(s['table'])}</code>"
        )
        + (f" — version {s['version_read']} read by the last refresh" if s["version_read"] is not None else "")
        + "</li>"
        for s in d["sources"]
    )

    def names(items: list[str], kind: str) -> str:
        if not items:
            return '<span class="muted">none</span>'
        return ", ".join(f'<a data-{kind}="{esc(v)}" href="{esc(links.view_page(v))}">{esc(v)}</a>' for v in items)

    return (
        f'<ul class="plain" id="sources">{srcs}</ul>'
        f"<p>Upstream views: {names(d['upstream'], 'upstream')}<br>"
        f"Downstream views: {names(d['downstream'], 'downstream')}</p>"
    )


def not_found_page(what: str, *, links: Links, nonce: str) -> str:
    return page(
        "Not a materialized view",
        f'<h1>Not a materialized view</h1><p class="lead">{esc(what)}</p>'
        f'<p><a href="{esc(links.overview())}">All materialized views</a></p>',
        nonce=nonce,
    )


def to_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True)


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


def history_html(view: str, hist: dict[str, Any] | None, links: Links, *, now: int | None) -> str:
    """The view's runs (every Airflow run of its DAG, newest first, a page at a time, filterable by state): its
    trigger, outcome (with the mode and rows, or the error's first line), refresh time, wall time, commit."""
    if hist is None or hist.get("error"):
        return '<p class="muted" id="runs">Airflow\'s runs cannot be read just now.</p>'
    counts = hist["counts"]
    here = links.view_page(view)
    filters = [("", "all", sum(counts.values()))] + [(s, s, counts.get(s, 0)) for s in RUN_STATES]
    tabs = " · ".join(
        f'<b data-filter="{s}">{esc(label)} ({n})</b>'
        if s == hist["state"]
        else f'<a data-filter="{s}" href="{esc(here + ("?state=" + s if s else ""))}">{esc(label)} ({n})</a>'
        for s, label, n in filters
    )
    rows = []
    for r in hist["runs"]:
        when = when_html(r["start"], now, key="started", empty="not started")
        refresh = (
            _time_cell(r["refresh_time"], "refresh_time")
            if r["refresh_time"] is not None
            else f'<td class="time" data-col="refresh_time" data-value="">{esc(r["refresh_time_text"] or "-")}</td>'
        )
        wall = r["wall_ms"]
        wall_text = "-" if wall is None else format_duration(wall) + (" so far" if r["running"] else "")
        errors = "".join(
            f'<a data-top href="{esc(links.task_log(view, r["run_id"], t["task_id"], t["try_number"]))}">'
            f"{esc(t['task_id'])} log</a> "
            for t in r["failed_tasks"]
        )
        commit = (
            f'<td data-col="commit" data-value="{int(r["version"])}">v{int(r["version"])}</td>'
            if r["version"] is not None
            else '<td data-col="commit" data-value="" class="muted">-</td>'
        )
        rows.append(
            f'<tr data-run="{esc(r["run_id"])}" data-state="{esc(r["state"])}" data-outcome="{esc(r["outcome"])}" '
            f'data-run-type="{esc(r["run_type"])}">'
            f'<td data-col="run"><a data-top href="{esc(links.run(view, r["run_id"]))}" title="{esc(r["run_id"])}">'
            f"{when}</a></td>"
            f'<td data-col="trigger">{esc(r["trigger"])}'
            + (f' <span class="muted">by {esc(r["triggered_by"])}</span>' if r["triggered_by"] else "")
            + "</td>"
            f'<td data-col="outcome"><span class="badge {OUTCOME_BADGE.get(r["outcome"], "run-none")}">'
            f"{esc(r['outcome'])}</span>"
            + (f' <span class="detail" data-detail>{esc(r["detail"])}</span>' if r["detail"] else "")
            + (f"<div>{errors}</div>" if errors else "")
            + "</td>"
            f"{refresh}"
            f'<td class="num" data-col="wall" data-value="{"" if wall is None else wall}">{esc(wall_text)}</td>'
            f"{commit}</tr>"
        )
    pager = ""
    if hist["pages"] > 1:
        q = f"state={hist['state']}&" if hist["state"] else ""
        prev = (
            f'<a data-page="{hist["page"] - 1}" href="{esc(here)}?{esc(q)}page={hist["page"] - 1}">newer</a>'
            if hist["page"] > 1
            else ""
        )
        nxt = (
            f'<a data-page="{hist["page"] + 1}" href="{esc(here)}?{esc(q)}page={hist["page"] + 1}">older</a>'
            if hist["page"] < hist["pages"]
            else ""
        )
        pager = f'<p class="pager">{prev} page {hist["page"]} of {hist["pages"]} {nxt}</p>'
    table = (
        '<div class="scroll"><table id="runs"><thead><tr><th>Run (started)</th><th>Trigger</th><th>Outcome</th>'
        "<th>Refresh time</th><th>Wall time</th><th>Commit</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table></div>"
        if rows
        else '<p class="muted" id="runs">No runs'
        + (f" in state {esc(hist['state'])}" if hist["state"] else "")
        + " yet.</p>"
    )
    return f'<p class="filters">{tabs}</p>{table}{pager}'


def sample_html(sample: dict[str, Any], *, now: int | None) -> str:
    """The view's schema and first rows (:func:`mvsink.readers.sample.view_sample`): one table, each column's
    name over its type, values cut where they are long (the full value is ``mvsink read``'s)."""
    if sample.get("error"):
        return f'<p class="error" id="sample" data-error>{esc(sample["error"])}</p>'
    if sample.get("as_of") is None:
        return f'<p class="muted" id="sample">{NOTHING_FINAL}: no rows to show.</p>'
    cols = sample["columns"]
    head = "".join(
        f'<th data-column="{esc(c["name"])}" data-type="{esc(c["type"])}">{esc(c["name"])}'
        f'<div class="type">{esc(c["type"])}</div></th>'
        for c in cols
    )
    body = "".join(
        f'<tr data-sample-row="{i}">' + "".join(f"<td>{esc(v)}</td>" for v in row) + "</tr>"
        for i, row in enumerate(sample["rows"])
    )
    n, total = len(sample["rows"]), sample["total_rows"]
    lead = (
        f'<p class="muted" data-sample-as-of="{sample["as_of"]}">'
        + (f"first {n} of {total} rows" if n < total else f"all {total} rows")
        + f" as of {when_html(sample['as_of'], now, key='sample-at')} (as <code>mvsink read</code> reads them)"
        + (f"; {sample['cut_cells']} long value(s) cut" if sample.get("cut_cells") else "")
        + "</p>"
    )
    return (
        f'{lead}<div class="scroll sample"><table id="sample"><thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table></div>"
    )


def controls_html(view: str, links: Links, *, paused: bool, can_trigger: bool, can_pause: bool) -> str:
    """The view's controls, each a call to Airflow's own REST API (its auth and permission checks), each asked to
    be confirmed in the page first: **Pause** / **Resume** (``PATCH dags/<dag_id>``, ``is_paused``), **Refresh
    at** a chosen time (``POST dags/<dag_id>/dagRuns``, conf ``refresh_time``), **Backfill** a range of refresh
    times (``POST backfills``: Airflow's backfill, one run per schedule time in the range). Disabled when the user
    may not make that call (Airflow would answer 403)."""
    dag_id = dag_id_for(view)
    no_pause = "" if can_pause else ' disabled title="you may not edit this DAG"'
    no_run = "" if can_trigger else ' disabled title="you may not trigger runs of this DAG"'
    return (
        f'<div class="controls" data-controls="{esc(view)}" data-dag="{esc(dag_id)}" data-api="{esc(links.api())}" '
        f'data-runs="{esc(links.runs(view))}" data-paused="{str(paused).lower()}">'
        f'<button type="button" data-control="pause"{no_pause}>{"Resume" if paused else "Pause"}</button>'
        f' <span class="ctl"><label>refresh time (UTC) <input type="datetime-local" step="1" name="refresh_at">'
        f'</label> <button type="button" data-control="refresh_at"{no_run}>Refresh at</button></span>'
        f' <span class="ctl"><label>backfill from <input type="datetime-local" step="1" name="backfill_from"></label>'
        f' <label>to <input type="datetime-local" step="1" name="backfill_to"></label> (UTC)'
        f' <button type="button" data-control="backfill"{no_run}>Backfill</button></span>'
        f'<div class="confirm" hidden><span class="confirm-text"></span> '
        f'<button type="button" data-confirm="yes">Confirm</button> '
        f'<button type="button" data-confirm="no">Cancel</button></div>'
        f'<div class="control-result" role="status"></div></div>'
    )
