"""The sections of a view's tab (:func:`.render.view_page`): its mode reason and fixes, commit log, lineage, run
history, data sample and controls (pure: no I/O)."""

from __future__ import annotations

from typing import Any

from mvsink.airflow.dag_factory import dag_id_for
from mvsink.airflow.plugin.cells import NOTHING_FINAL, OUTCOME_BADGE, Links, is_airflow_run_id, mode_badge, time_cell
from mvsink.airflow.plugin.common import esc, human_bytes, iso_html, short_time, when_html
from mvsink.airflow.plugin.runs import RUN_STATES
from mvsink.readers.modefix import mode_fixes
from mvsink.readers.status import append_details, format_commit
from mvsink.times import format_duration, format_time


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
            time_cell(r["refresh_time"], "refresh_time")
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
