"""The pages' one stylesheet and one script (inline: nothing is fetched), and the HTML shell around a page's body.

The script (allowed by the response's CSP nonce) does three things:

- links marked ``data-top`` open in the Airflow window around the plugin's frame;
- the frame is sized to the page's content (no scrollbar inside the frame: Airflow's panel scrolls);
- the **Refresh** and **Dry run** buttons (``button[data-trigger]``) trigger a run of the view's DAG through
  Airflow's own REST API (``POST <airflow>/api/v2/dags/<dag_id>/dagRuns``, JSON, the UI's session cookie): the
  same endpoint, authentication and permission check as Airflow's own trigger button. The answer is shown
  beside the buttons (the new run, linked; or Airflow's status and message: 401, 403, ...).
"""

from __future__ import annotations

from mvsink.airflow.plugin.common import esc

NARROW_PX = 760  # below this width the overview's table turns into one block per view

CSS = """
:root { --fg:#1d2733; --muted:#5d6b7a; --line:#d9dee4; --bg:#ffffff; --head:#f3f5f8; --stale:#b3261e;
        --err:#fde8e6; --ok:#1e7d32; }
* { box-sizing: border-box; }
body { font: 13px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg);
       background: var(--bg); margin: 12px 16px; }
h1 { font-size: 18px; margin: 0 0 4px; } h2 { font-size: 15px; margin: 18px 0 6px; }
p.lead { color: var(--muted); margin: 0 0 10px; overflow-wrap: anywhere; }
code { overflow-wrap: anywhere; }
table { border-collapse: collapse; width: 100%; }
th, td { border-bottom: 1px solid var(--line); padding: 5px 7px; text-align: left; vertical-align: top; }
th { background: var(--head); font-weight: 600; white-space: nowrap; position: sticky; top: 0; }
th a { color: inherit; text-decoration: none; } th a:hover { text-decoration: underline; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.time, span.time, time.rel { font-variant-numeric: tabular-nums; }
time.rel { white-space: nowrap; border-bottom: 1px dotted #9aa3ad; cursor: help; }
div.scroll { overflow: auto; max-width: 100%; }
a { color: #1f5fa8; }
.muted { color: var(--muted); }
.badge { display: inline-block; border-radius: 9px; padding: 0 7px; font-size: 11px; font-weight: 600;
         color: #fff; white-space: nowrap; }
.badge.stale { background: var(--stale); } .badge.fresh { background: var(--ok); }
.badge.foreign { background: #7a4a00; } .badge.notarget { background: #8a96a3; }
.badge.run-success { background: var(--ok); } .badge.run-failed { background: var(--stale); }
.badge.run-running, .badge.run-queued { background: #2f74c0; } .badge.run-none { background: #8a96a3; }
.badge.paused { background: #8a96a3; }
tr.stale td { background: #fff6f5; }
td.errors { background: var(--err); color: var(--stale); font-weight: 600; }
.mode { display: inline-block; width: 9px; height: 9px; border-radius: 2px; margin-right: 4px; }
pre.log { background: var(--head); padding: 8px 10px; overflow-x: auto; margin: 0; font-size: 12px;
          white-space: pre-wrap; overflow-wrap: anywhere; }
pre.error { white-space: pre-wrap; overflow-wrap: anywhere; margin: 2px 0 0; font-size: 11px; color: var(--stale);
            max-width: 42em; }
pre.log .foreign { color: #7a4a00; font-weight: 600; }
.cards { display: flex; flex-wrap: wrap; gap: 8px 22px; margin: 8px 0 4px; }
.cards > div { min-width: 150px; max-width: 100%; }
.cards b { display: block; font-size: 11px; color: var(--muted); font-weight: 600; }
svg { max-width: 100%; height: auto; }
div.chart { overflow-x: auto; max-width: 100%; }
td[data-col="last_run"] { min-width: 16em; } td[data-col="lag"] { min-width: 9.5em; }
td[data-col="mode"] { white-space: nowrap; }
svg text { font: 11px system-ui, sans-serif; fill: var(--fg); }
svg .axis { stroke: #9aa3ad; stroke-width: 1; } svg .grid { stroke: #eceff3; stroke-width: 1; }
.legend span { margin-right: 14px; white-space: nowrap; }
ul.plain { margin: 0; padding-left: 18px; }
.actions { margin-top: 4px; white-space: nowrap; }
.actions button { font: inherit; font-size: 12px; padding: 1px 8px; border: 1px solid #9aa3ad; border-radius: 4px;
                  background: #fff; color: var(--fg); cursor: pointer; }
.actions button:hover:not(:disabled) { background: var(--head); }
.actions button:disabled { color: var(--muted); cursor: default; }
.trigger-result { font-size: 12px; white-space: normal; overflow-wrap: anywhere; }
.trigger-result.error { color: var(--stale); }
.failing { margin-top: 3px; font-size: 12px; color: var(--stale); }
.why { margin: 8px 0 4px; padding: 6px 10px; background: var(--head); border-left: 3px solid #9aa3ad;
       overflow-wrap: anywhere; }
.why b { display: block; font-size: 11px; color: var(--muted); font-weight: 600; }
.why .fixes { margin-top: 3px; } .why .fixes li::marker { content: "fix: "; color: var(--muted); }
table#sample th .type { font-weight: 400; color: var(--muted); font-size: 11px; }
table#sample td { white-space: pre-wrap; overflow-wrap: anywhere; max-width: 28em; font-size: 12px; }
.filters a, .filters b { white-space: nowrap; } .pager a { margin: 0 6px; }
.badge.run-uptodate { background: #6b8f71; } .badge.run-dry { background: #6b4fa8; }
.badge.run-skipped { background: #8a96a3; }
.controls { margin: 10px 0 4px; padding: 6px 8px; border: 1px solid var(--line); border-radius: 4px; }
.controls .ctl { display: inline-block; margin: 2px 0; }
.controls button { font: inherit; font-size: 12px; padding: 1px 8px; border: 1px solid #9aa3ad; border-radius: 4px;
                   background: #fff; color: var(--fg); cursor: pointer; }
.controls button:disabled { color: var(--muted); cursor: default; }
.controls input { font: inherit; font-size: 12px; max-width: 100%; }
.confirm { margin-top: 6px; padding: 4px 6px; background: #fff8e1; border-left: 3px solid #e0862b; }
.control-result { font-size: 12px; margin-top: 4px; overflow-wrap: anywhere; }
.control-result.error { color: var(--stale); }
h1 .actions { display: inline-block; margin: 0 0 0 10px; font-size: 13px; font-weight: 400; vertical-align: 2px; }
"""
NARROW_CSS = """
@media (max-width: NARROW_PXpx) {
  body { margin: 8px 10px; }
  .cards > div { min-width: 0; flex: 1 1 100%; }
  /* the overview's table: one block per view, each value under its column's name */
  table#views, table#views tbody, table#views tr, table#views td { display: block; width: 100%; }
  table#views thead tr { display: flex; flex-wrap: wrap; gap: 2px 10px; padding: 4px 0; }
  table#views thead tr::before { content: "Sort by"; color: var(--muted); font-weight: 600; }
  table#views th { position: static; background: none; border: none; padding: 0; font-weight: 400; }
  table#views th:not([data-sort]) { display: none; }
  table#views tbody tr { border-top: 2px solid var(--line); padding: 6px 0; }
  table#views td { display: flow-root; border: none; padding: 2px 0 2px 8.5em; min-width: 0;
                   text-align: left; white-space: normal; overflow-wrap: anywhere; }
  table#views td::before { content: attr(data-label); float: left; margin-left: -8.5em; width: 8em;
                           color: var(--muted); font-size: 11px; font-weight: 600; line-height: 1.3; padding-top: 2px; }
  table#views td[data-col="view"] { padding-left: 0; font-size: 15px; }
  table#views td[data-col="view"]::before { content: none; }
  pre.error { max-width: 100%; }
  /* the charts keep a readable size and scroll sideways in their own box */
  div.chart svg { max-width: none; min-width: 720px; }
}
"""
CSS = CSS + NARROW_CSS.replace("NARROW_PX", str(NARROW_PX))

SCRIPT = """
document.addEventListener('click', function (e) {
  var b = e.target.closest ? e.target.closest('button[data-trigger]') : null;
  if (b) { e.preventDefault(); mvsinkTrigger(b); return; }
  var c = e.target.closest ? e.target.closest('button[data-control], button[data-confirm]') : null;
  if (c) { e.preventDefault(); mvsinkControl(c); return; }
  var a = e.target.closest ? e.target.closest('a[data-top]') : null;
  if (!a || e.ctrlKey || e.metaKey || e.shiftKey || e.button !== 0) return;
  // Opens links marked data-top in the Airflow window around the plugin's frame (a same-origin parent):
  // the frame's sandbox forbids navigating the top window, so the parent's router is asked to do it.
  try {
    var w = window.top;
    if (w === window || w.location.origin !== window.location.origin) return;
    e.preventDefault();
    var idx = ((w.history.state && w.history.state.idx) || 0) + 1;
    w.history.pushState({usr: null, key: 'mvsink' + idx, idx: idx}, '', a.href);
    w.dispatchEvent(new PopStateEvent('popstate', {state: w.history.state}));
  } catch (err) { /* not framed by Airflow: follow the link here */ }
});
// Refresh / Dry run: Airflow's own trigger endpoint (its auth, its permission check), the UI's session cookie.
function mvsinkTrigger(b) {
  var box = b.closest('.actions');
  var out = box.querySelector('.trigger-result');
  var dry = b.getAttribute('data-trigger') === 'dry_run';
  var buttons = box.querySelectorAll('button[data-trigger]');
  buttons.forEach(function (x) { x.disabled = true; });
  out.className = 'trigger-result';
  out.removeAttribute('data-status'); out.removeAttribute('data-run-id');
  out.textContent = dry ? ' starting a dry run\\u2026' : ' starting a refresh\\u2026';
  fetch(box.getAttribute('data-url'), {
    method: 'POST', credentials: 'same-origin', cache: 'no-store',
    headers: {'Content-Type': 'application/json', 'Accept': 'application/json'},
    body: JSON.stringify({logical_date: null, conf: {dry_run: dry}})
  }).then(function (r) {
    return r.json().catch(function () { return {}; }).then(function (j) { return [r.status, j]; });
  }).then(function (res) {
    var status = res[0], j = res[1] || {};
    out.setAttribute('data-status', String(status));
    if (status === 200 || status === 201) {
      out.setAttribute('data-run-id', j.dag_run_id);
      out.textContent = ' ' + (dry ? 'dry run ' : 'refresh ') + (j.state || 'queued') + ': ';
      var a = document.createElement('a');
      a.href = box.getAttribute('data-runs') + encodeURIComponent(j.dag_run_id);
      a.setAttribute('data-top', '');
      a.textContent = j.dag_run_id;
      out.appendChild(a);
      if (box.hasAttribute('data-paused')) out.appendChild(document.createTextNode(' (the DAG is paused: the run waits for it to be unpaused)'));
    } else {
      var why = typeof j.detail === 'string' ? j.detail : JSON.stringify(j.detail || j);
      out.className = 'trigger-result error';
      out.textContent = ' not triggered: HTTP ' + status + (why && why !== '{}' ? ' ' + why : '');
    }
  }).catch(function (err) {
    out.className = 'trigger-result error';
    out.setAttribute('data-status', 'error');
    out.textContent = ' not triggered: ' + err;
  }).then(function () { buttons.forEach(function (x) { x.disabled = false; }); });
}
// The view's controls: each asks to be confirmed in the page, then calls Airflow's REST API (its auth, its
// permission check, the UI's session cookie); the answer is shown below them.
var mvsinkPending = null;
function mvsinkUtc(v) { return v ? (v.length === 16 ? v + ':00' : v) + 'Z' : null; }
function mvsinkControl(b) {
  var box = b.closest('.controls');
  var out = box.querySelector('.control-result');
  var ask = box.querySelector('.confirm');
  var dag = box.getAttribute('data-dag'), api = box.getAttribute('data-api');
  if (b.hasAttribute('data-confirm')) {
    ask.hidden = true;
    var call = mvsinkPending; mvsinkPending = null;
    if (b.getAttribute('data-confirm') === 'yes' && call) mvsinkCall(box, out, call);
    else { out.className = 'control-result'; out.textContent = 'cancelled'; out.setAttribute('data-status', 'cancelled'); }
    return;
  }
  var what = b.getAttribute('data-control'), call = null;
  out.className = 'control-result'; out.removeAttribute('data-status'); out.textContent = '';
  if (what === 'pause') {
    var pause = box.getAttribute('data-paused') !== 'true';
    call = {what: what, method: 'PATCH', url: api + 'dags/' + encodeURIComponent(dag), body: {is_paused: pause},
            text: (pause ? 'Pause ' + dag + '? Its scheduled runs stop until it is resumed.'
                         : 'Resume ' + dag + '? Its scheduled runs start again.')};
  } else if (what === 'refresh_at') {
    var at = mvsinkUtc(box.querySelector('input[name=refresh_at]').value);
    if (!at) { out.className = 'control-result error'; out.textContent = 'choose a refresh time first'; return; }
    call = {what: what, method: 'POST', url: api + 'dags/' + encodeURIComponent(dag) + '/dagRuns',
            body: {logical_date: null, conf: {refresh_time: at, dry_run: false}},
            text: 'Refresh ' + dag + ' at ' + at + '?'};
  } else if (what === 'backfill') {
    var from = mvsinkUtc(box.querySelector('input[name=backfill_from]').value);
    var to = mvsinkUtc(box.querySelector('input[name=backfill_to]').value);
    if (!from || !to || from > to) {
      out.className = 'control-result error'; out.textContent = 'choose a range: from at or before to'; return;
    }
    call = {what: what, method: 'POST', url: api + 'backfills',
            body: {dag_id: dag, from_date: from, to_date: to, max_active_runs: 1, reprocess_behavior: 'none',
                   run_backwards: false, dag_run_conf: {}},
            text: 'Backfill ' + dag + ': one run per schedule time from ' + from + ' to ' + to + '?'};
  }
  if (!call) return;
  mvsinkPending = call;
  ask.querySelector('.confirm-text').textContent = call.text;
  ask.hidden = false;
  out.setAttribute('data-status', 'confirm');
}
// Airflow on SQLite (the embedded default) answers 503 "Database is locked" while its scheduler writes, having made
// nothing (a backfill's creation is refused whole): the call is made again, up to mvsinkCalls times.
var mvsinkCalls = 5;
function mvsinkCall(box, out, call, attempt) {
  attempt = attempt || 1;
  out.textContent = attempt > 1
    ? 'Airflow\u2019s database is busy: calling again (' + attempt + ' of ' + mvsinkCalls + ')\u2026'
    : 'calling Airflow\u2026';
  fetch(call.url, {
    method: call.method, credentials: 'same-origin', cache: 'no-store',
    headers: {'Content-Type': 'application/json', 'Accept': 'application/json'}, body: JSON.stringify(call.body)
  }).then(function (r) {
    return r.json().catch(function () { return {}; }).then(function (j) { return [r.status, j]; });
  }).then(function (res) {
    var status = res[0], j = res[1] || {};
    var locked = status === 503 && typeof j.detail === 'string' && /database is locked/i.test(j.detail);
    if (locked && attempt < mvsinkCalls) {
      setTimeout(function () { mvsinkCall(box, out, call, attempt + 1); }, 1000 * attempt);
      return;
    }
    out.setAttribute('data-status', String(status));
    out.setAttribute('data-control', call.what);
    if (status === 200 || status === 201) {
      if (call.what === 'pause') {
        box.setAttribute('data-paused', String(!!j.is_paused));
        box.querySelector('button[data-control=pause]').textContent = j.is_paused ? 'Resume' : 'Pause';
        out.textContent = j.is_paused ? 'paused' : 'resumed';
      } else if (call.what === 'refresh_at') {
        out.setAttribute('data-run-id', j.dag_run_id);
        out.textContent = 'refresh ' + (j.state || 'queued') + ': ';
        var a = document.createElement('a');
        a.href = box.getAttribute('data-runs') + encodeURIComponent(j.dag_run_id);
        a.setAttribute('data-top', ''); a.textContent = j.dag_run_id; out.appendChild(a);
      } else {
        out.setAttribute('data-backfill-id', String(j.id));
        out.textContent = 'backfill ' + j.id + ' created: ' + j.from_date + ' to ' + j.to_date;
      }
    } else {
      var why = typeof j.detail === 'string' ? j.detail : JSON.stringify(j.detail || j);
      out.className = 'control-result error';
      out.textContent = 'refused: HTTP ' + status + (why && why !== '{}' ? ' ' + why : '');
    }
  }).catch(function (err) {
    out.className = 'control-result error'; out.setAttribute('data-status', 'error');
    out.textContent = 'refused: ' + err;
  });
}
// Size Airflow's frame to this page's content, so the page scrolls with Airflow's panel rather than inside
// a frame of its own (a same-origin parent: the frame's sandbox allows same-origin access).
function mvsinkFit() {
  mvsinkFold();
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
// A table wider than the page scrolls sideways in its own box: that box ends above the fold of the window the
// person sees (Airflow's, around the frame), so its horizontal scrollbar is in sight; its rows then scroll in
// it under the sticky header.
function mvsinkFold() {
  var view = window, top = 0;
  try {
    if (window.frameElement && window.top.location.origin === window.location.origin) {
      view = window.top; top = window.frameElement.getBoundingClientRect().top;
    }
  } catch (err) { view = window; top = 0; }
  document.querySelectorAll('div.scroll').forEach(function (box) {
    box.style.maxHeight = '';
    if (box.scrollWidth <= box.clientWidth) return;  // nothing to scroll sideways: no box of its own
    var at = top + box.getBoundingClientRect().top;
    var room = Math.floor(view.innerHeight - Math.max(at, 0) - 8);
    box.style.maxHeight = Math.max(room, 240) + 'px';
  });
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
