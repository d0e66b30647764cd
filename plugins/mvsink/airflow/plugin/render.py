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

import json
import re
from collections.abc import Collection
from typing import Any

from mvsink.airflow.dag_factory import dag_id_for
from mvsink.airflow.plugin.assets import page
from mvsink.airflow.plugin.cells import (
    COLUMNS,
    NOTHING_FINAL,
    SORT_KEYS,
    Links,
    actions_html,
    checks_cell,
    dry_run_html,
    failing_html,
    freshness_cell,
    last_refresh_cells,
    next_run,
    run_html,
    sources_cell,
    time_cell,
    upper_cell,
)
from mvsink.airflow.plugin.charts import frontier_chart, lag_chart, legend, refresh_chart
from mvsink.airflow.plugin.common import MODE_COLOURS, esc, when_html
from mvsink.airflow.plugin.viewtab import (
    _commits_html,
    _time_span,
    controls_html,
    history_html,
    lineage_html,
    mode_reason_html,
    sample_html,
    version_text,
)
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
    "COLUMNS",
    "controls_html",
    "history_html",
    "run_html",
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
        f"{next_run(s, now, paused=paused)}</td>",
        "as_of": time_cell(s["as_of"], "as_of"),
        "since": time_cell(s["since"], "since"),
        "upper": upper_cell(s["upper"], now),
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
        ("schedule", "Schedule", esc(d["schedule"]) + next_run(d, now, paused=bool(runs.get("paused")))),
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


def not_found_page(what: str, *, links: Links, nonce: str) -> str:
    return page(
        "Not a materialized view",
        f'<h1>Not a materialized view</h1><p class="lead">{esc(what)}</p>'
        f'<p><a href="{esc(links.overview())}">All materialized views</a></p>',
        nonce=nonce,
    )


def to_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True)
