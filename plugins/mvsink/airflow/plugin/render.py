"""HTML pages of the UI plugin: the "Materialized views" overview and a view's tab (pure: no I/O, no Airflow).

Server-rendered HTML with inline CSS and inline SVG charts: nothing is fetched from anywhere, so the
pages work offline. The pages only render what :mod:`mvsink.readers.overview` computed; every value a
test or a person may check carries its raw value in a ``data-*`` attribute beside the readable text.
Sorting is server-side (links), so it works in the UI's sandboxed frame without scripts; the one inline
script (with a per-response nonce) opens DAG links in the Airflow window around the frame.
"""

from __future__ import annotations

import dataclasses
import html
import json
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from mvsink.airflow.dag_factory import dag_id_for
from mvsink.airflow.plugin import NAV_ROUTE, VIEW_TAB_ROUTE
from mvsink.readers.freshness import mode_label
from mvsink.readers.status import format_commit
from mvsink.times import format_duration, format_time

MODE_COLOURS = {"incremental": "#2f74c0", "full": "#e0862b", "unchanged": "#9aa3ad", "": "#6b4fa8"}


def esc(value: object) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def human_bytes(n: int | None) -> str:
    if n is None:
        return "-"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


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

    def run(self, view: str, run_id: str) -> str:
        return f"{self.airflow_root}dags/{dag_id_for(view)}/runs/{quote(run_id, safe='')}"

    def task_log(self, view: str, run_id: str, task_id: str, try_number: int) -> str:
        return f"{self.run(view, run_id)}/tasks/{quote(task_id, safe='')}?try_number={int(try_number)}"

    def overview_top(self) -> str:
        """The "Materialized views" page in Airflow's navigation (opened in the Airflow window, not the frame)."""
        return f"{self.airflow_root}plugin/{NAV_ROUTE}"

    def overview(self, **query: str) -> str:
        q = "&".join(f"{k}={v}" for k, v in query.items())
        return self.app_root + (f"?{q}" if q else "")


CSS = """
:root { --fg:#1d2733; --muted:#5d6b7a; --line:#d9dee4; --bg:#ffffff; --head:#f3f5f8; --stale:#b3261e;
        --err:#fde8e6; --ok:#1e7d32; }
* { box-sizing: border-box; }
body { font: 13px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg);
       background: var(--bg); margin: 12px 16px; }
h1 { font-size: 18px; margin: 0 0 4px; } h2 { font-size: 15px; margin: 18px 0 6px; }
p.lead { color: var(--muted); margin: 0 0 10px; }
table { border-collapse: collapse; width: 100%; }
th, td { border-bottom: 1px solid var(--line); padding: 5px 7px; text-align: left; vertical-align: top; }
th { background: var(--head); font-weight: 600; white-space: nowrap; position: sticky; top: 0; }
th a { color: inherit; text-decoration: none; } th a:hover { text-decoration: underline; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.time, span.time { font-variant-numeric: tabular-nums; }
div.scroll { overflow-x: auto; }
a { color: #1f5fa8; }
.muted { color: var(--muted); }
.badge { display: inline-block; border-radius: 9px; padding: 0 7px; font-size: 11px; font-weight: 600;
         color: #fff; white-space: nowrap; }
.badge.stale { background: var(--stale); } .badge.fresh { background: var(--ok); }
.badge.foreign { background: #7a4a00; } .badge.notarget { background: #8a96a3; }
.badge.run-success { background: var(--ok); } .badge.run-failed { background: var(--stale); }
.badge.run-running, .badge.run-queued { background: #2f74c0; } .badge.run-none { background: #8a96a3; }
tr.stale td { background: #fff6f5; }
td.errors { background: var(--err); color: var(--stale); font-weight: 600; }
.mode { display: inline-block; width: 9px; height: 9px; border-radius: 2px; margin-right: 4px; }
pre.log { background: var(--head); padding: 8px 10px; overflow-x: auto; margin: 0; font-size: 12px;
          white-space: pre-wrap; overflow-wrap: anywhere; }
pre.error { white-space: pre-wrap; overflow-wrap: anywhere; margin: 2px 0 0; font-size: 11px; color: var(--stale);
            max-width: 42em; }
pre.log .foreign { color: #7a4a00; font-weight: 600; }
.cards { display: flex; flex-wrap: wrap; gap: 8px 22px; margin: 8px 0 4px; }
.cards div { min-width: 150px; } .cards b { display: block; font-size: 11px; color: var(--muted); font-weight: 600; }
svg text { font: 11px system-ui, sans-serif; fill: var(--fg); }
svg .axis { stroke: #9aa3ad; stroke-width: 1; } svg .grid { stroke: #eceff3; stroke-width: 1; }
.legend span { margin-right: 14px; white-space: nowrap; }
ul.plain { margin: 0; padding-left: 18px; }
"""

# Opens links marked data-top in the Airflow window around the plugin's frame (a same-origin parent):
# the frame's sandbox forbids navigating the top window, so the parent's router is asked to do it.
SCRIPT = """
document.addEventListener('click', function (e) {
  var a = e.target.closest ? e.target.closest('a[data-top]') : null;
  if (!a || e.ctrlKey || e.metaKey || e.shiftKey || e.button !== 0) return;
  try {
    var w = window.top;
    if (w === window || w.location.origin !== window.location.origin) return;
    e.preventDefault();
    var idx = ((w.history.state && w.history.state.idx) || 0) + 1;
    w.history.pushState({usr: null, key: 'mvsink' + idx, idx: idx}, '', a.href);
    w.dispatchEvent(new PopStateEvent('popstate', {state: w.history.state}));
  } catch (err) { /* not framed by Airflow: follow the link here */ }
});
// Size Airflow's frame to this page's content, so the page scrolls with Airflow's panel rather than inside
// a frame of its own (a same-origin parent: the frame's sandbox allows same-origin access).
function mvsinkFit() {
  try {
    var f = window.frameElement;
    if (!f) return;
    var h = Math.ceil(document.body.getBoundingClientRect().height) + 28;  // + the body's margins
    if (Math.abs(f.getBoundingClientRect().height - h) > 1) {
      f.style.height = h + 'px';
      f.style.minHeight = h + 'px';
    }
  } catch (err) { /* not framed, or framed elsewhere: nothing to size */ }
}
window.addEventListener('load', mvsinkFit);
window.addEventListener('resize', mvsinkFit);
if (window.ResizeObserver) { new ResizeObserver(mvsinkFit).observe(document.body); }
mvsinkFit();
"""


def page(title: str, body: str, *, nonce: str) -> str:
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>'
        f'<meta name="viewport" content="width=device-width, initial-scale=1"><style>{CSS}</style></head>'
        f'<body>{body}<script nonce="{esc(nonce)}">{SCRIPT}</script></body></html>'
    )


def iso_html(ms: int) -> str:
    """ISO-8601 UTC text that may wrap between the date and the time (the text itself is unchanged)."""
    date, _, clock = format_time(ms).partition("T")
    return f"{esc(date)}<wbr>T{esc(clock)}"


def _next_run(s: dict[str, Any]) -> str:
    """The next run of an every/at schedule (the timetable's arithmetic), under its description."""
    if s.get("next_run") is None:
        return ""
    return f'<div class="muted" data-next-run="{s["next_run"]}">next {esc(s["next_run_utc"])}</div>'


def run_html(view: str, run: dict[str, Any] | None, links: Links, *, what: str = "last run") -> str:
    """A run's state badge, wall time and link, and its failed tasks' log links (empty when there is none)."""
    if run is None:
        return f'<span class="muted" data-run="none">no {esc(what)}</span>'
    state = run["state"]
    wall = run["wall_ms"]
    time_text = "" if wall is None else format_duration(wall) + (" so far" if run["running"] else "")
    out = (
        f'<span data-run="{esc(run["run_id"])}" data-state="{esc(state)}" data-wall-ms="{"" if wall is None else wall}">'
        f'<span class="badge run-{esc(state)}">{esc(state)}</span> '
        f'<a data-top href="{esc(links.run(view, run["run_id"]))}" title="{esc(run["run_id"])}">'
        f"{esc(time_text or 'run')}</a>" + (' <span class="muted">dry run</span>' if run["dry_run"] else "") + "</span>"
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


def dry_run_html(view: str, run: dict[str, Any] | None, links: Links) -> str:
    """The last dry run: its link and what it would have done (the append task's report)."""
    if run is None:
        return '<span class="muted" data-dry-run="none">none</span>'
    return (
        f'<span data-dry-run="{esc(run["run_id"])}"><a data-top href="{esc(links.run(view, run["run_id"]))}">'
        f"{esc(format_time(run['start']) if run['start'] is not None else run['run_id'])}</a>: "
        f"{esc(run['report'] or '(no report)')}</span>"
    )


AIRFLOW_RUN_TYPES = ("manual__", "scheduled__", "backfill__", "asset_triggered__", "asset_materialization__")


def is_airflow_run_id(run_id: object) -> bool:
    """An Airflow run's id (``manual__…``, ``scheduled__…``, …), not a command line's (``cli-…``)."""
    return isinstance(run_id, str) and run_id.startswith(AIRFLOW_RUN_TYPES)


def ago_html(ms: int | None, now: int | None, *, what: str) -> str:
    """``<what> 3h 05m ago`` (or ``in …``), the absolute UTC time on hover (empty without a time or a now)."""
    if ms is None or now is None:
        return ""
    delta = now - ms
    rel = f"{format_duration(abs(delta))} ago" if delta >= 0 else f"in {format_duration(-delta)}"
    return (
        f'<div class="muted" data-{what.replace(" ", "-")}="{ms}" title="{esc(format_time(ms))}">'
        f"{esc(what)} {esc(rel)}</div>"
    )


def _time_cell(ms: int | None, col: str, *, empty: str = "-") -> str:
    if ms is None:
        return f'<td class="time" data-col="{col}" data-value="">{esc(empty)}</td>'
    return f'<td class="time" data-col="{col}" data-value="{ms}" title="{ms}">{iso_html(ms)}</td>'


def mode_badge(kind: str, mode: str) -> str:
    colour = MODE_COLOURS.get(kind, MODE_COLOURS[""])
    return (
        f'<span class="mode" style="background:{colour}"></span>'
        f'<span data-mode="{esc(mode)}">{esc(mode_label(mode) or mode or "-")}</span>'
    )


def freshness_cell(s: dict[str, Any]) -> str:
    lag = s["lag_ms"]
    text = "never refreshed" if lag is None else format_duration(lag)
    if s["max_lag_ms"] is None:
        badge, target = '<span class="badge notarget">no target</span>', ""
    else:
        badge = (
            '<span class="badge stale" data-stale="true">STALE</span>'
            if s["stale"]
            else '<span class="badge fresh" data-stale="false">fresh</span>'
        )
        target = f'<div class="muted">max_lag {esc(format_duration(s["max_lag_ms"]))}</div>'
    return (
        f'<td data-col="lag" data-value="{"" if lag is None else lag}" data-max-lag="{s["max_lag_ms"] or ""}" '
        f'data-stale="{str(bool(s["stale"])).lower()}">{esc(text)} {badge}{target}</td>'
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


def last_refresh_cells(last: dict[str, Any] | None, now: int | None = None) -> str:
    if last is None:
        return (
            '<td data-col="last_refresh" data-value="" class="muted">never</td>'
            '<td data-col="refreshed_at" data-value=""></td>'
            '<td data-col="mode" data-value=""></td><td class="num" data-col="rows"></td>'
            '<td class="num" data-col="bytes"></td><td class="num" data-col="duration"></td>'
        )
    dur = last["duration_ms"]
    refreshed = ago_html(last.get("committed_ms"), now, what="refreshed")
    return (
        _time_cell(last["refresh_time"], "last_refresh")
        + f'<td data-col="refreshed_at" data-value="{last.get("committed_ms") or ""}">{refreshed}</td>'
        + f'<td data-col="mode" data-value="{esc(last["mode"])}" title="{esc(last["mode_reason"])}">'
        f"{mode_badge(last['mode_kind'], last['mode'])}</td>"
        + f'<td class="num" data-col="rows" data-added="{last["rows_added"]}" data-retracted="{last["rows_retracted"]}">'
        f"+{last['rows_added']} &minus;{last['rows_retracted']}</td>"
        + f'<td class="num" data-col="bytes" data-value="{last["bytes"]}">{esc(human_bytes(last["bytes"]))}</td>'
        + f'<td class="num" data-col="duration" data-value="{"" if dur is None else dur}" '
        f'title="Spark step {esc(format_duration(last["write_ms"] or 0))}">'
        f"{esc('-' if dur is None else format_duration(dur))}</td>"
    )


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
COLUMNS = [
    ("view", "View"),
    ("last_run", "Last run"),
    ("schedule", "Schedule"),
    ("as_of", "as_of"),
    ("since", "since"),
    ("upper", "Data through (upper)"),
    ("lag", "Freshness lag"),
    ("last_refresh", "Last refresh (refresh time)"),
    ("refreshed_at", "Refreshed at"),
    ("mode", "Mode"),
    ("rows", "Rows ±"),
    ("bytes", "Bytes"),
    ("duration", "Mint to commit"),
    ("checks", "Checks"),
    ("staged", "Staged"),
    ("sources", "Sources (Delta version read)"),
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
) -> str:
    """The "Materialized views" page: one row per view (``rows`` from ``readers.overview.all_views``; ``runs``:
    Airflow's last run of each view's DAG by DAG id, from :func:`mvsink.airflow.plugin.runs.last_runs`)."""
    runs = runs or {}
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
        in_flight = s["in_flight"]
        staged_title = ", ".join(s["staged_batches"]) or "none"
        row_cls = ' class="stale"' if s["stale"] else ""
        flag = ' <span class="badge stale">STALE</span>' if s["stale"] else ""
        body.append(
            f'<tr data-view="{esc(s["view"])}"{row_cls}>'
            f'<td data-col="view" data-value="{esc(s["view"])}"><a data-top href="{esc(links.dag(s["view"]))}" '
            f'title="{esc(s["description"])}">{esc(s["view"])}</a>{flag}'
            f'<div class="muted"><a data-top href="{esc(links.view_tab(s["view"]))}">history</a></div></td>'
            f'<td data-col="last_run">{run_html(s["view"], _last(runs, s["view"]), links)}</td>'
            f'<td data-col="schedule" data-value="{esc(s["schedule"])}">{esc(s["schedule"])}{_next_run(s)}</td>'
            + _time_cell(s["as_of"], "as_of")
            + _time_cell(s["since"], "since")
            + (
                _time_cell(s["upper"], "upper")
                if s["upper"] > 0
                else '<td class="time" data-col="upper" data-value="0">0 <span class="muted">(nothing final)</span></td>'
            )
            + freshness_cell(s)
            + last_refresh_cells(s["last_refresh"], now)
            + checks_cell(s)
            + f'<td class="num" data-col="staged" data-value="{len(in_flight)}" '
            f'data-staged="{len(s["staged_batches"])}" title="{esc(staged_title)}">{len(in_flight)}'
            + (
                f' <span class="muted">(+{len(s["staged_batches"]) - len(in_flight)} dead)</span>'
                if len(s["staged_batches"]) > len(in_flight)
                else ""
            )
            + "</td>"
            + sources_cell(s, links)
            + "</tr>"
        )
    stale = sum(1 for r in good if r["stale"])
    errors = sum(1 for r in good if r["error_rows"])
    summary = (
        f'<p class="lead"><span data-summary="views">{len(good)}</span> view(s), '
        f'<span data-summary="stale">{stale}</span> stale, <span data-summary="errors">{errors}</span> with '
        f"error rows"
        + (f", {len(bad)} broken view file(s)" if bad else "")
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
    legend = _legend()
    return page("Materialized views", f"<h1>Materialized views</h1>{summary}{legend}{table}{broken}", nonce=nonce)


def _legend() -> str:
    return (
        '<p class="legend muted">'
        + "".join(
            f'<span><span class="mode" style="background:{MODE_COLOURS[k]}"></span>{esc(label)}</span>'
            for k, label in (("incremental", "incremental"), ("full", "full diff"), ("unchanged", "no change"))
        )
        + "</p>"
    )


# ---------------------------------------------------------------------------------------------------------
# a view's tab


def _short_time(ms: int) -> str:
    """``2026-01-01 02:00`` (UTC; seconds when they are not zero): an axis label."""
    text = format_time(ms)  # 2026-01-01T02:00:00.000Z
    date, clock = text[:10], text[11:19]
    return f"{date} {clock[:5] if clock.endswith(':00') else clock}"


class TimeAxis:
    """A linear UTC time axis from ``t0`` to ``t1`` over ``[x0, x1]`` pixels (a gap in time is a gap on the axis)."""

    def __init__(self, t0: int, t1: int, x0: float, x1: float) -> None:
        if t1 <= t0:  # one instant: centred in a one-hour window
            t0, t1 = t0 - 1_800_000, t0 + 1_800_000
        self.t0, self.t1, self.x0, self.x1 = t0, t1, x0, x1

    def x(self, t: int) -> float:
        return self.x0 + (self.x1 - self.x0) * (t - self.t0) / (self.t1 - self.t0)

    def svg(self, y: float, *, ticks: int = 4, label: str = "UTC") -> str:
        """The axis line at ``y``, ``ticks + 1`` evenly spaced labelled ticks, and its unit."""
        parts = [f'<line class="axis" x1="{self.x0}" x2="{self.x1}" y1="{y:.1f}" y2="{y:.1f}"/>']
        for k in range(ticks + 1):
            t = self.t0 + (self.t1 - self.t0) * k // ticks
            x = self.x(t)
            anchor = "start" if k == 0 else "end" if k == ticks else "middle"
            parts.append(
                f'<line class="axis" x1="{x:.1f}" x2="{x:.1f}" y1="{y:.1f}" y2="{y + 4:.1f}"/>'
                f'<text class="tick" data-tick="{t}" x="{x:.1f}" y="{y + 15:.1f}" text-anchor="{anchor}">'
                f"{esc(_short_time(t))}</text>"
            )
        parts.append(f'<text class="muted" x="{self.x1}" y="{y + 28:.1f}" text-anchor="end">time ({esc(label)})</text>')
        return "".join(parts)


def lag_points(history: list[dict[str, Any]], now: int) -> list[tuple[int, int]]:
    """The view's freshness lag over wall-clock time (pure): after each append committed at ``t`` with upper
    ``u`` the lag is ``t - (u - 1)`` and grows by one every millisecond until the next append (or ``now``).
    ``(time, lag)`` vertices of that sawtooth, oldest first."""
    appends = [
        p
        for p in history
        if p.get("operation") == "append" and not p.get("foreign") and p.get("committed_ms") and p["upper"] > 0
    ]
    pts: list[tuple[int, int]] = []
    for i, p in enumerate(appends):
        t, final = int(p["committed_ms"]), int(p["upper"]) - 1
        end = int(appends[i + 1]["committed_ms"]) if i + 1 < len(appends) else max(now, t)
        pts += [(t, t - final), (end, end - final)]
    return pts


def lag_chart(history: list[dict[str, Any]], *, max_lag_ms: int | None, now: int, width: int = 900) -> str:
    """Freshness lag over time (a sawtooth: it drops at each append and grows until the next), with the view's
    ``max_lag`` as a dashed line; the x axis is real time (UTC), the y axis a duration."""
    pts = lag_points(history, now)
    if not pts:
        return '<p class="muted" id="lag-chart">No refreshes yet.</p>'
    left, right, top, height = 70, 14, 16, 200
    bottom = height - 44
    axis = TimeAxis(pts[0][0], pts[-1][0], left, width - right)
    top_lag = max(max(v for _, v in pts), max_lag_ms or 0, 1)

    def y(v: int) -> float:
        return bottom - (bottom - top) * max(0, v) / top_lag

    d = "M" + " L".join(f"{axis.x(t):.1f},{y(v):.1f}" for t, v in pts)
    parts = [
        f'<svg id="lag-chart" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="freshness lag over time">',
        f'<text x="{left}" y="{top - 4}">freshness lag (now {esc(format_duration(pts[-1][1]))})</text>',
        f'<text x="{left - 6}" y="{bottom + 4:.1f}" text-anchor="end">0</text>',
        f'<text x="{left - 6}" y="{top + 8:.1f}" text-anchor="end">{esc(format_duration(top_lag))}</text>',
        f'<path class="lag" d="{d}" fill="none" stroke="#2f74c0" stroke-width="2"/>',
    ]
    for t, v in pts[::2]:  # each append
        parts.append(
            f'<circle class="lag-point" cx="{axis.x(t):.1f}" cy="{y(v):.1f}" r="3" fill="#2f74c0" '
            f'data-time="{t}" data-lag-ms="{v}"><title>{esc(_short_time(t))}: lag {esc(format_duration(v))}'
            f"</title></circle>"
        )
    if max_lag_ms is not None:
        parts.append(
            f'<line class="max-lag" data-max-lag="{max_lag_ms}" x1="{left}" x2="{width - right}" '
            f'y1="{y(max_lag_ms):.1f}" y2="{y(max_lag_ms):.1f}" stroke="#b3261e" stroke-dasharray="6 4"/>'
            f'<text x="{width - right}" y="{y(max_lag_ms) - 4:.1f}" text-anchor="end" fill="#b3261e">'
            f"max_lag {esc(format_duration(max_lag_ms))}</text>"
        )
    parts.append(axis.svg(bottom))
    parts.append("</svg>")
    return "".join(parts)


def refresh_chart(history: list[dict[str, Any]], *, width: int = 900) -> str:
    """Refresh history: per append (oldest first) rows added (up) and retracted (down), bytes written and
    duration, coloured by mode. One ``<g class="refresh">`` per refresh, its values in ``data-*``."""
    refreshes = [p for p in history if p.get("operation") == "append" and not p.get("foreign")]
    if not refreshes:
        return '<p class="muted" id="refresh-chart">No refreshes yet.</p>'
    left, right, panel, gap = 70, 10, 90, 26
    # a real time axis of refresh times (a gap in time is a gap here); bars as wide as the closest pair allows
    axis = TimeAxis(refreshes[0]["refresh_time"], refreshes[-1]["refresh_time"], left + 16, width - right - 16)
    xs = [axis.x(p["refresh_time"]) for p in refreshes]
    closest = min((b - a for a, b in zip(xs, xs[1:]) if b > a), default=width)
    bar = max(2.0, min(28.0, closest * 0.7))
    max_rows = max(1, max(max(p["rows_added"], p["rows_retracted"]) for p in refreshes))
    max_bytes = max(1, max(p["bytes"] for p in refreshes))
    max_dur = max(1, max(p.get("duration_ms") or 0 for p in refreshes))
    top_rows, top_bytes, top_dur = 18, 18 + 2 * panel + gap, 18 + 3 * panel + 2 * gap
    mid = top_rows + panel  # the rows panel is two panels high: added above the line, retracted below
    height = top_dur + panel + 44
    parts = [
        f'<svg id="refresh-chart" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="refresh history">'
    ]
    for y, label in (
        (top_rows - 6, f"rows added (up, max {max_rows}) / retracted (down)"),
        (top_bytes - 6, f"bytes written (max {human_bytes(max_bytes)})"),
        (top_dur - 6, f"duration, mint to commit (max {format_duration(max_dur)})"),
    ):
        parts.append(f'<text x="{left}" y="{y}">{esc(label)}</text>')
    parts.append(f'<line class="axis" x1="{left}" x2="{width - right}" y1="{mid}" y2="{mid}"/>')
    for base in (top_bytes + panel, top_dur + panel):
        parts.append(f'<line class="axis" x1="{left}" x2="{width - right}" y1="{base}" y2="{base}"/>')
    for i, p in enumerate(refreshes):
        x = xs[i] - bar / 2
        colour = MODE_COLOURS.get(p["mode_kind"], MODE_COLOURS[""])
        up = panel * p["rows_added"] / max_rows
        down = panel * p["rows_retracted"] / max_rows
        hb = max(1.5, panel * p["bytes"] / max_bytes)  # a tick on the axis for zero: every refresh shows
        hd = max(1.5, panel * (p.get("duration_ms") or 0) / max_dur)
        if up == down == 0:
            up = 1.5
        tip = (
            f"v{p['version']} refresh at {format_time(p['refresh_time'])}: {mode_label(p['mode']) or p['mode']}, "
            f"+{p['rows_added']} -{p['rows_retracted']} rows, {human_bytes(p['bytes'])}, "
            f"{format_duration(p.get('duration_ms') or 0)}"
        )
        parts.append(
            f'<g class="refresh" data-version="{p["version"]}" data-refresh-time="{p["refresh_time"]}" '
            f'data-mode="{esc(p["mode"])}" data-mode-kind="{esc(p["mode_kind"])}" data-rows-added="{p["rows_added"]}" '
            f'data-rows-retracted="{p["rows_retracted"]}" data-bytes="{p["bytes"]}" '
            f'data-duration-ms="{"" if p.get("duration_ms") is None else p["duration_ms"]}" fill="{colour}">'
            f"<title>{esc(tip)}</title>"
            f'<rect class="added" x="{x:.1f}" y="{mid - up:.1f}" width="{bar:.1f}" height="{up:.1f}"/>'
            f'<rect class="retracted" x="{x:.1f}" y="{mid:.1f}" width="{bar:.1f}" height="{down:.1f}" opacity="0.55"/>'
            f'<rect class="bytes" x="{x:.1f}" y="{top_bytes + panel - hb:.1f}" width="{bar:.1f}" height="{hb:.1f}"/>'
            f'<rect class="duration" x="{x:.1f}" y="{top_dur + panel - hd:.1f}" width="{bar:.1f}" height="{hd:.1f}"/>'
            f"</g>"
        )
    parts.append(axis.svg(top_dur + panel + 2, label="UTC, refresh time"))
    parts.append(f'<text x="{left - 6}" y="{mid + 4}" text-anchor="end">0</text></svg>')
    return "".join(parts)


def frontier_chart(history: list[dict[str, Any]], *, width: int = 900, height: int = 234) -> str:
    """since and upper after each commit (oldest first, a step at each commit's time on a real UTC time axis),
    one ``<circle class="point">`` per commit and frontier, its value in ``data-*``."""
    pts = history
    ys = [v for p in pts for v in (p["since"], p["upper"]) if v > 0]
    if not pts or not ys:
        return '<p class="muted" id="frontier-chart">No frontiers yet.</p>'
    left, right, top, bottom = 170, 14, 14, 44
    y0, y1 = min(ys), max(ys)
    span_y = max(1, y1 - y0)
    # a real time axis of commit times when every commit has one (else one step per commit, as before)
    times = [t for p in pts if isinstance(t := p.get("committed_ms"), int)]
    axis = TimeAxis(min(times), max(times), left, width - right) if len(times) == len(pts) else None
    step = (width - left - right) / max(1, len(pts) - 1)

    def sx(i: int) -> float:
        if axis is not None:
            return axis.x(int(pts[i]["committed_ms"]))
        return left + step * i if len(pts) > 1 else (left + width - right) / 2

    def sy(v: int) -> float:
        return float(top + (height - top - bottom) * (1 - (max(v, y0) - y0) / span_y))

    parts = [
        f'<svg id="frontier-chart" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="since and upper after each commit">'
    ]
    for v in sorted({y0, y1}):
        parts.append(
            f'<line class="grid" x1="{left}" x2="{width - right}" y1="{sy(v):.1f}" y2="{sy(v):.1f}"/>'
            f'<text x="{left - 6}" y="{sy(v) + 4:.1f}" text-anchor="end">{esc(format_time(v))}</text>'
        )
    for key, colour in (("upper", "#2f74c0"), ("since", "#b3261e")):
        d = [f"M{sx(0):.1f},{sy(pts[0][key]):.1f}"] + [f"H{sx(i):.1f}V{sy(p[key]):.1f}" for i, p in enumerate(pts)][1:]
        parts.append(f'<path class="{key}" d="{" ".join(d)}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for i, p in enumerate(pts):
            parts.append(
                f'<circle class="point {key}" data-version="{p["version"]}" data-{key}="{p[key]}" '
                f'cx="{sx(i):.1f}" cy="{sy(p[key]):.1f}" r="3" fill="{colour}">'
                f"<title>v{p['version']} {esc(p['operation'])} at {esc(p.get('committed') or '')}: "
                f"{key} {esc(format_time(p[key]))}</title></circle>"
            )
    if axis is not None:
        parts.append(axis.svg(height - bottom + 4, label="UTC, commit time"))
    else:
        parts.append(
            f'<text x="{left}" y="{height - 8}">v{pts[0]["version"]} {esc(pts[0].get("committed") or "")}</text>'
        )
        if len(pts) > 1:
            parts.append(
                f'<text x="{width - right}" y="{height - 8}" text-anchor="end">v{pts[-1]["version"]} '
                f"{esc(pts[-1].get('committed') or '')}</text>"
            )
    parts.append("</svg>")
    return "".join(parts)


def view_page(d: dict[str, Any], *, links: Links, nonce: str, runs: dict[str, Any] | None = None) -> str:
    """A view's tab: status, refresh history chart, since/upper over time, last commits, lineage (``runs``:
    Airflow's last run and last dry run of the view's DAG, as :func:`mvsink.airflow.plugin.runs.last_runs`)."""
    name = d["view"]
    runs = runs or {}
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
        ("last_run", "last run", run_html(name, runs.get("last"), links)),
        ("last_dry_run", "last dry run", dry_run_html(name, runs.get("last_dry_run"), links)),
        ("schedule", "Schedule", esc(d["schedule"]) + _next_run(d)),
        ("as_of", "as_of", _time_span(d["as_of"])),
        ("since", "since", _time_span(d["since"])),
        ("upper", "data through (upper)", _time_span(d["upper"]) if d["upper"] > 0 else "0 (nothing final)"),
        (
            "refreshed_at",
            "refreshed at (last commit)",
            _time_span((d.get("last_refresh") or {}).get("committed_ms"))
            + ago_html((d.get("last_refresh") or {}).get("committed_ms"), d.get("checked_at"), what="refreshed"),
        ),
        ("final_through", "final through", _time_span(d["final_through"])),
        (
            "lag",
            "freshness lag",
            esc(lag)
            + verdict
            + (
                f' <span class="muted">max_lag {esc(format_duration(d["max_lag_ms"]))}</span>'
                if d["max_lag_ms"] is not None
                else ""
            ),
        ),
        ("version", "Delta version", esc(d["version"])),
        ("staged", "staged batches", f"{len(d['in_flight'])} in flight, {len(d['staged_batches'])} staged"),
    ]
    cards_html = (
        '<div class="cards">'
        + "".join(f'<div data-card="{k}"><b>{esc(label)}</b>{v}</div>' for k, label, v in cards)
        + "</div>"
    )
    lines = []
    for c in d["last_commits"]:
        line = esc(format_commit(c))
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
            lines.append(f'<span data-version="{c["version"]}" data-foreign="false">{line}</span>{run}')
    commits = (
        f'<pre class="log" id="commits">{chr(10).join(lines)}</pre>'
        if lines
        else '<p class="muted">No commits yet.</p>'
    )
    checks = (
        f"<h2>Checks (last refresh)</h2><table><tbody><tr>{checks_cell(d)}</tr></tbody></table>" if d["checks"] else ""
    )
    body = (
        f'<h1>{esc(name)} <a data-top class="muted" href="{esc(links.dag(name))}" style="font-size:12px">DAG</a>'
        f' <a data-top class="muted" href="{esc(links.overview_top())}" style="font-size:12px">all views</a></h1>'
        f'<p class="lead">{esc(d["description"] or "")} <span class="muted">table {esc(d["target"])}</span></p>'
        f"{cards_html}<h2>Refresh history</h2>{_legend()}{refresh_chart(d['history'])}"
        f"<h2>Freshness lag over time</h2>"
        f"{lag_chart(d['history'], max_lag_ms=d['max_lag_ms'], now=d.get('checked_at') or 0)}"
        f'<h2>since and upper after each commit</h2><p class="legend muted"><span style="color:#2f74c0">━ upper</span>'
        f'<span style="color:#b3261e">━ since</span></p>{frontier_chart(d["history"])}'
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
