"""Issue 23, the page in every state an operator meets, in one real Airflow (api-server, scheduler, DAG processor
on 127.0.0.1) and one headless Chromium: a fresh view, a stale one, a failed run with its error, a running one,
a dry run, a view with a 20-day gap in its history, the lag chart with its ``max_lag`` line; relative times with
the absolute UTC time on hover; the Refresh and Dry run buttons going through Airflow's own trigger (its auth:
401 anonymous, 403 forged; no run from a form post); no scrollbar inside the frame at 1280x800; readable at
390 px wide.

The views' histories are real mvsink commits made without Spark (``tests/support/refreshlog``), dated at the
times they describe; the runs the buttons trigger need no Spark either (no source moved since the last
refresh: the write step is skipped). The running one is held just before its commit by a fail point.

Each state's facts are read from the DOM; screenshots go to ``test-artifacts/browser/state-*.png``, and with
``MVSINK_UPDATE_DOCS_IMG=1`` also to ``docs/img/ui-*.png`` (the ones docs/ui.md shows).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import quote

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from mvsink.core.deltalog import set_commit_time
from mvsink.core.refresh import run_refresh
from mvsink.definitions.catalog import Catalog
from mvsink.times import format_time, parse_time
from tests.support import REPO
from tests.support.airflow import backfills, dags_folder, running_airflow, runs, wait_for, wait_run
from tests.support.browser import artifacts_dir, browser_page
from tests.support.refreshlog import HOUR, refresh, source, view_file
from tests.support.sparkfree import sparkfree_write

pytestmark = [pytest.mark.browser, pytest.mark.airflow, pytest.mark.slow]

MINUTE, DAY = 60_000, 24 * HOUR
DOCS_IMG = REPO / "docs" / "img"
SHOTS = (  # the screenshots this test writes (docs/img/ui-<name>.png)
    "overview",
    "fresh",
    "stale",
    "failed",
    "running",
    "dry-run",
    "gap",
    "lag-chart",
    "overview-390",
    "view-390",
    "paused",
    "mode-reason",
    "overview-390-airflow",
    "view-390-airflow",
    "history",
    "data",
    "controls",
)
REASON = (  # the reason the gap view's full refreshes record (as the modes' combined reason reads)
    "the query is not linear: rand() is not deterministic (the linear refresh is off; "
    "MVSINK_INCREMENTAL_LINEAR=true enables it)"
)
HELD = "append-before_validate@running"  # the fail point holding the running view's run before its commit
ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
RELATIVE = re.compile(
    r"^(?:(?:next|started) )?(?:just now|in \d+ (?:s|min|h|d)(?: \d+ (?:min|h))?|\d+ (?:s|min|h|d)(?: \d+ (?:min|h))? ago)$"
)


def redate(target: Path, version: int, t_ms: int) -> None:
    """Date commit ``version`` at ``t_ms``: its commitInfo's timestamp (which the history reads) and its file's
    modification time (which time travel reads)."""
    f = target / "_delta_log" / f"{version:020d}.json"
    actions = [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
    for a in actions:
        if "commitInfo" in a:
            a["commitInfo"]["timestamp"] = t_ms
    f.write_text("".join(json.dumps(a) + "\n" for a in actions))
    os.utime(f, ns=(t_ms * 1_000_000, t_ms * 1_000_000))


def history(catalog: Catalog, data: Path, name: str, times: list[int]) -> None:
    """Refreshes of ``name`` at ``times``, each after a commit of its source ten minutes before (so each one adds
    rows), each commit dated 25 s after its refresh time (its mint-to-commit time)."""
    target = data / "views" / name
    done = -1
    for i, t in enumerate(times):
        source(data, f"src_{name}", at=t - 10 * MINUTE)
        refresh(
            catalog,
            name,
            t,
            added=20 + 7 * (i % 5),
            retracted=3 * (i % 3),
            nbytes=4096 + 512 * i,
            mode=("incremental", "full")[i % 4 == 0],
            seconds=2.0 + i % 3,
            reason=REASON if i % 4 == 0 else "",
        )
        newest = max(int(p.name[:20]) for p in (target / "_delta_log").glob("*.json"))
        for k, v in enumerate(range(done + 1, newest + 1)):
            redate(target, v, t + 25_000 + 1_000 * k)
        done = newest


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("ui-states")
    data, dags = dags_folder(root)
    views = dags / "views"
    now = int(time.time() * 1000)
    next_at = (now + 3 * HOUR) // MINUTE * MINUTE
    gap_times = [now - 26 * DAY + k * 3 * HOUR for k in range(4)] + [now - 6 * DAY + k * 8 * HOUR for k in range(8)]
    gap_times.append(now - 40 * MINUTE)
    plan = {  # view -> (extra view-file lines, refresh times)
        "fresh": (
            f'max_lag: 1h\nschedule: {{at: ["{format_time(next_at)}"]}}\n',
            [now - 8 * HOUR + k * 2 * HOUR for k in range(4)] + [now - 25 * MINUTE],
        ),
        "stale": ("max_lag: 2h\n", [now - 30 * HOUR + k * 2 * HOUR for k in range(6)]),
        "gap": ("max_lag: 1d\n", gap_times),
        "running": ("max_lag: 2h\n", [now - 5 * HOUR, now - 3 * HOUR, now - HOUR]),
        "dry": ("max_lag: 6h\n", [now - 4 * HOUR, now - 2 * HOUR]),
        "paused": (
            f'max_lag: 30d\nschedule: {{at: ["{format_time(next_at)}"]}}\n',
            [now - 3 * HOUR, now - 2 * HOUR],
        ),
    }
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MVSINK_DATA_ROOT", str(data))
        for name, (extra, _) in plan.items():
            view_file(views, name, extra=extra, sources=f"{{orders: src_{name}}}")
        view_file(views, "failed", extra="max_lag: 1h\n", sources="{orders: no_such_table}")
        view_file(
            views,
            "ops",
            # twice a year: the scheduler runs the latest past fire (July 1) at once, the backfill takes January 1
            extra='max_lag: 1d\nschedule: "0 0 1 1,7 *"\n',
            sources="{orders: src_ops}",
            query="SELECT id, qty, note FROM orders",
        )
        catalog = Catalog(views)
        for name, (_, times) in plan.items():
            history(catalog, data, name, times)
        # ops: a real refresh (the Spark-free write step), so its tab shows real rows
        rows = pa.table(
            {"id": list(range(30)), "qty": [i * 3 for i in range(30)], "note": [f"order {i}" for i in range(30)]}
        )
        write_deltalake(str(data / "src_ops"), rows, mode="append")
        set_commit_time(str(data / "src_ops"), now - 3 * HOUR - 10 * MINUTE)
        run_refresh(catalog.get("ops"), now - 3 * HOUR, write=sparkfree_write, catalog=catalog, run_id="cli-ops")
    return {
        "root": root,
        "data": data,
        "dags": dags,
        "now": now,
        "next_at": next_at,
        "gap_times": gap_times,
        "plan": plan,
    }


@pytest.fixture(scope="module")
def airflow(built, connect_url):
    sync = built["root"] / "sync"
    sync.mkdir()
    env = {"MVSINK_FAIL_POINTS": "append:before_validate@running:sync", "MVSINK_SYNC_DIR": str(sync)}
    wanted = {f"mv_{v}" for v in ("fresh", "stale", "gap", "running", "dry", "failed", "paused", "ops")}
    env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"] = "admin:admin,viewer:viewer"  # viewer: read-only
    try:
        with running_airflow(
            built["root"], built["dags"], built["data"], wanted=wanted, extra_env=env, connect_url=connect_url
        ) as af:
            yield af, sync
    finally:
        (sync / f"{HELD}.go").touch()  # release the held run (it would give up after 300 s)


@pytest.fixture(scope="module")
def artifacts() -> Path:
    return artifacts_dir("state-*.png")


@pytest.fixture(scope="module")
def ui(airflow, artifacts):
    af, _ = airflow
    with browser_page(width=1280, height=800) as page:
        page.goto(f"{af.url}/")
        page.get_by_label("Username").fill("admin")
        page.get_by_label("Password").fill(af.password())
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(re.compile(r".*/$"))
        yield page


def shot(target, artifacts: Path, name: str, **kw) -> None:
    """A screenshot of ``target`` (a page or a locator) as ``state-<name>.png``, and as docs/img/ui-<name>.png with
    ``MVSINK_UPDATE_DOCS_IMG=1``."""
    assert name in SHOTS, name
    path = artifacts / f"state-{name}.png"
    target.screenshot(path=str(path), **kw)
    if os.environ.get("MVSINK_UPDATE_DOCS_IMG") == "1":
        DOCS_IMG.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, DOCS_IMG / f"ui-{name}.png")


def overview(page, af):
    """The "Materialized views" page in Airflow, its frame, every view listed."""
    from playwright.sync_api import expect

    page.goto(f"{af.url}/plugin/materialized-views")
    frame = page.frame_locator("iframe[title='Materialized views']")
    expect(frame.locator("tr[data-view]")).to_have_count(8)
    return frame


def view_tab(page, af, view: str):
    from playwright.sync_api import expect

    page.goto(f"{af.url}/dags/mv_{view}/plugin/mvsink-view")
    tab = page.frame_locator("iframe[title='View']")
    expect(tab.locator("[data-card='lag']")).to_be_visible()
    return tab


def click(frame, scope: str, which: str) -> tuple[str, str | None]:
    """Click a view's Refresh or Dry run button; (the HTTP status it shows, the new run's id)."""
    from playwright.sync_api import expect

    frame.locator(f"{scope} button[data-trigger='{which}']").click()
    result = frame.locator(f"{scope} .trigger-result")
    expect(result).to_have_attribute("data-status", re.compile(r".+"))
    return str(result.get_attribute("data-status")), result.get_attribute("data-run-id")


@pytest.fixture(scope="module")
def triggered(airflow, ui):
    """The failed, running and dry views' runs, triggered with the page's buttons: {view: run id}."""
    af, sync = airflow
    frame = overview(ui, af)
    ids = {}
    for view, which in (("failed", "refresh"), ("running", "refresh"), ("dry", "dry_run")):
        status, run_id = click(frame, f"tr[data-view='{view}']", which)
        assert status == "200" and run_id and run_id.startswith("manual__"), (view, status, run_id)
        ids[view] = run_id
    assert wait_run(af, "mv_failed", ids["failed"], timeout=240)["state"] == "failed"
    assert wait_run(af, "mv_dry", ids["dry"], timeout=240)["state"] == "success"
    wait_for("the running view's run held before its commit", lambda: (sync / f"{HELD}.ready").exists(), timeout=240)
    return ids


def test_the_buttons_trigger_runs_of_the_views_dag_with_their_conf(airflow, triggered):
    af, _ = airflow
    for view, dry in (("failed", False), ("running", False), ("dry", True)):
        (run,) = runs(af, f"mv_{view}")
        assert run["dag_run_id"] == triggered[view] and run["conf"] == {"dry_run": dry}, run
        assert run["run_type"] == "manual" and run["triggered_by"] in ("rest_api", "ui"), run
    status, body = af.api(
        "GET", f"/api/v2/dags/mv_running/dagRuns/{quote(triggered['running'], safe='')}", token=af.token()
    )
    assert status == 200 and body["state"] == "running", body


def _post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, str]:
    req = urllib.request.Request(url, data=body, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_the_buttons_keep_airflows_auth(airflow, ui):
    """The buttons post to Airflow's trigger endpoint with the session cookie: a forged cookie gets Airflow's 403,
    none its 401 (shown beside the buttons), and the endpoint takes no form post (CSRF); no run is made."""
    import jwt
    from playwright.sync_api import expect

    af, _ = airflow
    frame = overview(ui, af)
    row = "tr[data-view='fresh']"
    url = af.url + str(frame.locator(f"{row} .actions").get_attribute("data-url"))
    assert url == f"{af.url}/api/v2/dags/mv_fresh/dagRuns"
    forged = jwt.encode(
        {"sub": "admin", "role": "ADMIN", "exp": int(time.time()) + 600, "iat": int(time.time())},
        "not-the-server-secret-" * 4,
        algorithm="HS512",
    )
    context = ui.context
    saved = context.cookies()
    try:
        context.add_cookies([{"name": "_token", "value": forged, "url": af.url}])
        assert click(frame, row, "refresh")[0] == "403"
        expect(frame.locator(f"{row} .trigger-result")).to_contain_text("not triggered: HTTP 403")
        context.clear_cookies()
        assert click(frame, row, "dry_run")[0] == "401"
        expect(frame.locator(f"{row} .trigger-result.error")).to_contain_text("HTTP 401")
    finally:
        context.clear_cookies()
        context.add_cookies(saved)
    token = af.token()
    # a cross-site form can send text/plain or form-encoded bodies, never JSON: Airflow's endpoint refuses them
    for ctype in ("text/plain", "application/x-www-form-urlencoded"):
        status, body = _post(
            url, b'{"logical_date": null, "conf": {}}', {"Content-Type": ctype, "Cookie": f"_token={token}"}
        )
        assert status == 422, (ctype, status, body[:300])
    assert _post(url, b"{}", {"Content-Type": "application/json"})[0] == 401  # anonymous
    assert runs(af, "mv_fresh") == []  # nothing triggered any of it
    # the plugin's own routes still take nothing but GET
    for path in ("/mvsink/", "/mvsink/dags/mv_fresh", "/mvsink/api/views"):
        assert _post(af.url + path, b"{}", {"Content-Type": "application/json", "Cookie": f"_token={token}"})[0] == 405


def _rel_times(frame) -> list[dict[str, str]]:
    return frame.locator("time.rel").evaluate_all(
        "ts => ts.map(t => ({text: t.innerText.trim(), title: t.title, datetime: t.getAttribute('datetime')}))"
    )


def test_the_overview_shows_every_state_with_relative_times(airflow, built, triggered, ui, artifacts):
    from playwright.sync_api import expect

    af, _ = airflow
    frame = overview(ui, af)
    state = {
        v: frame.locator(f"tr[data-view='{v}'] td[data-col='last_run'] [data-run]").first.get_attribute("data-state")
        for v in ("failed", "running", "dry")
    }
    assert state == {"failed": "failed", "running": "running", "dry": "success"}
    for view, stale in (
        ("fresh", "false"),
        ("stale", "true"),
        ("gap", "false"),
        ("running", "false"),
        ("dry", "false"),
    ):
        expect(frame.locator(f"tr[data-view='{view}'] td[data-col='lag']")).to_have_attribute("data-stale", stale)
    expect(frame.locator("tr[data-view='failed'] pre[data-error]")).to_contain_text("no_such_table")
    expect(frame.locator("tr[data-view='failed'] td[data-col='lag']")).to_have_attribute("data-stale", "true")
    expect(frame.locator("[data-summary='stale']")).to_have_text("2")  # stale, and failed (never refreshed)
    times = _rel_times(frame)
    assert len(times) >= 5 * 2 + 3  # data through and refreshed at of five views, the runs, the next run
    for t in times:  # relative, the absolute UTC time on hover
        assert RELATIVE.match(t["text"]) and ISO.match(t["title"]) and t["title"] == t["datetime"], t
    nxt = frame.locator("tr[data-view='fresh'] time[data-next-run]")
    expect(nxt).to_have_attribute("title", format_time(built["next_at"]))
    expect(nxt).to_have_text(re.compile(r"^next in [12] h( \d+ min)?$"))
    # at 1280x800 the frame is as tall as the page: no scrollbar inside it, Airflow's panel scrolls
    ui.wait_for_function(
        """() => { const f = document.querySelector("iframe[title='Materialized views']");
                   const d = f && f.contentDocument && f.contentDocument.documentElement;
                   return !!d && f.clientHeight >= d.scrollHeight - 1 && d.scrollWidth <= d.clientWidth; }"""
    )
    shot(ui, artifacts, "overview", full_page=True)


def test_a_fresh_view(airflow, built, ui, artifacts):
    from playwright.sync_api import expect

    af, _ = airflow
    tab = view_tab(ui, af, "fresh")
    expect(tab.locator("[data-card='lag'] .badge.fresh")).to_be_visible()
    expect(tab.locator("[data-card='last_run'] [data-run='none']")).to_be_visible()
    refreshed = tab.locator("[data-card='refreshed_at'] time")
    committed = built["plan"]["fresh"][1][-1] + 25_000
    expect(refreshed).to_have_attribute("data-refreshed", str(committed))
    expect(refreshed).to_have_attribute("title", format_time(committed))
    minutes = int(re.sub(r" min ago$", "", refreshed.inner_text()))
    assert 24 <= minutes <= (int(time.time() * 1000) - committed) // MINUTE, refreshed.inner_text()
    expect(tab.locator("[data-card='schedule'] time[data-next-run]")).to_have_attribute(
        "title", format_time(built["next_at"])
    )
    expect(tab.locator("#refresh-chart g.refresh")).to_have_count(len(built["plan"]["fresh"][1]))
    shot(ui, artifacts, "fresh")


def test_a_stale_view_and_its_lag_over_max_lag(airflow, built, ui, artifacts):
    from playwright.sync_api import expect

    af, _ = airflow
    tab = view_tab(ui, af, "stale")
    expect(tab.locator("[data-card='lag'] .badge.stale")).to_be_visible()
    line = tab.locator("#lag-chart line.max-lag")
    expect(line).to_have_attribute("data-max-lag", str(2 * HOUR))
    expect(tab.locator("#lag-chart circle.lag-point")).to_have_count(len(built["plan"]["stale"][1]))
    # the lag now (the sawtooth's last vertex) is drawn above the max_lag line (SVG y grows downwards)
    d = str(tab.locator("#lag-chart path.lag").get_attribute("d"))
    last_y = float(d.rsplit(",", 1)[1])
    assert last_y < float(line.get_attribute("y1") or 0), (d[-40:], line.get_attribute("y1"))
    shot(ui, artifacts, "stale")
    tab.locator("#lag-chart").scroll_into_view_if_needed()
    shot(tab.locator("#lag-chart"), artifacts, "lag-chart")


def test_a_failed_run_with_its_error(airflow, triggered, ui, artifacts):
    from playwright.sync_api import expect

    af, _ = airflow
    tab = view_tab(ui, af, "failed")
    run = tab.locator("[data-card='last_run'] [data-run]")
    expect(run).to_have_attribute("data-run", triggered["failed"])
    expect(run).to_have_attribute("data-state", "failed")
    task = tab.locator("[data-card='last_run'] [data-failed-task='mint']")
    expect(task.locator("pre[data-error]")).to_contain_text("no_such_table")
    href = task.locator("a").get_attribute("href")
    assert href == f"/dags/mv_failed/runs/{quote(triggered['failed'], safe='')}/tasks/mint?try_number=1"
    ended = run.locator("time[data-run-at]")
    expect(ended).to_have_text(re.compile(r"ago$"))
    shot(ui, artifacts, "failed")


def test_a_running_refresh(airflow, triggered, ui, artifacts):
    from playwright.sync_api import expect

    af, _ = airflow
    tab = view_tab(ui, af, "running")
    run = tab.locator("[data-card='last_run'] [data-run]")
    expect(run).to_have_attribute("data-state", "running")
    expect(run).to_contain_text("so far")
    expect(run.locator("time[data-run-at]")).to_have_text(re.compile(r"^started .* ago$|^started just now$"))
    status, body = af.api(
        "GET", f"/api/v2/dags/mv_running/dagRuns/{quote(triggered['running'], safe='')}", token=af.token()
    )
    assert status == 200 and body["state"] == "running"
    started = int(str(run.locator("time[data-run-at]").get_attribute("data-run-at")))
    assert format_time(started)[:19] == body["start_date"][:19]  # the run's own start time, on hover
    shot(ui, artifacts, "running")


def test_a_dry_run(airflow, triggered, ui, artifacts):
    from playwright.sync_api import expect

    af, _ = airflow
    tab = view_tab(ui, af, "dry")
    dry = tab.locator(f"[data-card='last_dry_run'] [data-dry-run='{triggered['dry']}']")
    expect(dry).to_contain_text("would add 0 and retract 0 rows (no source changed); nothing written")
    expect(dry.locator("time[data-dry-run-at]")).to_have_text(re.compile(r"ago$|^just now$"))
    expect(tab.locator("[data-card='last_run'] [data-run]")).to_contain_text("dry run")
    shot(ui, artifacts, "dry-run")


def test_a_gap_of_20_days_is_a_gap_on_the_time_axis(airflow, built, ui, artifacts):
    from playwright.sync_api import expect

    af, _ = airflow
    tab = view_tab(ui, af, "gap")
    bars = tab.locator("#refresh-chart g.refresh")
    times = built["gap_times"]
    expect(bars).to_have_count(len(times))
    marks = bars.evaluate_all(
        "gs => gs.map(g => { const r = g.querySelector('rect.added');"
        " return [Number(g.dataset.refreshTime), Number(r.getAttribute('x')) + Number(r.getAttribute('width')) / 2]; })"
    )
    assert [t for t, _ in marks] == times
    xs = [x for _, x in marks]
    span_x, span_t = xs[-1] - xs[0], times[-1] - times[0]
    for i in range(1, len(xs)):  # every distance on the axis is proportional to the time between the refreshes
        assert abs((xs[i] - xs[i - 1]) / span_x - (times[i] - times[i - 1]) / span_t) < 0.005, i
    gap = (xs[4] - xs[3]) / span_x
    assert gap > 0.7, gap  # the 20 days without a refresh take most of the axis
    expect(tab.locator("#lag-chart line.max-lag")).to_have_attribute("data-max-lag", str(DAY))
    ticks = tab.locator("#refresh-chart text.tick").evaluate_all("ts => ts.map(t => Number(t.dataset.tick))")
    assert ticks[0] <= times[0] and ticks[-1] >= times[-1] and ticks[-1] - ticks[0] > 25 * DAY
    tab.locator("#refresh-chart").scroll_into_view_if_needed()
    shot(tab.locator("#refresh-chart"), artifacts, "gap")


def test_readable_at_390_px(airflow, triggered, ui, artifacts):
    """At 390 px the pages do not overflow: the table turns into one block per view (each value under its
    column's name), the charts keep a readable size and scroll sideways in their own box."""
    af, _ = airflow
    ui.set_viewport_size({"width": 390, "height": 844})
    try:
        for path, name in (("/mvsink/", "overview-390"), ("/mvsink/dags/mv_gap", "view-390")):
            ui.goto(af.url + path)
            width = ui.evaluate("() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
            assert width[0] <= width[1] <= 390, (path, width)
            for el in ("div.chart", "pre", "table", ".cards", "h1", "p"):
                widest = ui.evaluate(
                    f"() => Math.max(0, ...[...document.querySelectorAll('{el}')].map(e => e.getBoundingClientRect().right))"
                )
                assert widest <= 390, (path, el, widest)
            scales = ui.evaluate(
                "() => [...document.querySelectorAll('div.chart svg')].map(s => s.getBoundingClientRect().width / s.viewBox.baseVal.width)"
            )
            assert all(x >= 0.75 for x in scales), scales  # 11 px labels stay at least 8 px
            if name == "overview-390":
                assert ui.evaluate("() => getComputedStyle(document.querySelector('tr[data-view]')).display") == "block"
                cell = "tr[data-view='stale'] td[data-col='lag']"
                assert ui.evaluate(f'() => document.querySelector("{cell}").dataset.label') == "Freshness lag"
                before = ui.evaluate(f"() => getComputedStyle(document.querySelector(\"{cell}\"), '::before').float")
                assert before == "left", before
                # no label runs into the next value: each cell is at least as tall as its label
                overlaps = ui.evaluate(
                    """() => [...document.querySelectorAll('tr[data-view] td[data-label]')].filter(td => {
                         const lines = Math.ceil(td.dataset.label.length / 14);
                         return td.getBoundingClientRect().height + 1 < lines * 11 * 1.3; }).map(td => td.dataset.label)"""
                )
                assert overlaps == [], overlaps
            shot(ui, artifacts, name)
        # and inside Airflow's frame
        frame = overview(ui, af)
        assert frame.locator("body").evaluate(
            "b => b.ownerDocument.documentElement.scrollWidth <= b.ownerDocument.documentElement.clientWidth"
        )
    finally:
        ui.set_viewport_size({"width": 1280, "height": 800})


def test_a_paused_view_says_paused_and_shows_no_next_run(airflow, built, ui, artifacts):
    """Issue 39: a paused view (paused in Airflow) says so and shows no "next in …" on the overview and its tab."""
    from playwright.sync_api import expect

    af, _ = airflow
    status, body = af.api("PATCH", "/api/v2/dags/mv_paused", {"is_paused": True}, token=af.token())
    assert status == 200 and body["is_paused"] is True, body
    frame = overview(ui, af)
    row = frame.locator("tr[data-view='paused']")
    expect(row.locator("td[data-col='schedule'] [data-paused-note]")).to_contain_text("paused")
    expect(row.locator("time[data-next-run]")).to_have_count(0)
    expect(frame.locator("tr[data-view='fresh'] time[data-next-run]")).to_have_count(1)  # the same schedule, unpaused
    tab = view_tab(ui, af, "paused")
    card = tab.locator("[data-card='schedule']")
    expect(card.locator("[data-paused-note]")).to_contain_text("no scheduled runs until it is resumed")
    expect(card.locator("time[data-next-run]")).to_have_count(0)
    shot(ui, artifacts, "paused")


def test_the_mode_reason_and_its_fix_on_the_views_tab(airflow, built, ui, artifacts):
    from playwright.sync_api import expect

    af, _ = airflow
    tab = view_tab(ui, af, "gap")
    why = tab.locator(".why[data-card='mode']")
    expect(why).to_be_visible()
    expect(why).to_have_attribute("data-mode-kind", "full")
    expect(why.locator("[data-mode-reason]")).to_have_text(REASON)
    expect(why.locator("li[data-fix]").first).to_have_text(
        "set MVSINK_INCREMENTAL_LINEAR=true (a setting of the refresh's environment)"
    )
    shot(why, artifacts, "mode-reason")


def test_a_failed_runs_view_says_since_when_its_data_is_stale(airflow, triggered, ui):
    from playwright.sync_api import expect

    af, _ = airflow
    tab = view_tab(ui, af, "failed")
    failing = tab.locator("[data-card='lag'] .failing")
    expect(failing).to_have_attribute("data-failing", triggered["failed"])
    expect(failing).to_contain_text("never refreshed")  # its source never existed: no refresh ever committed


def test_at_390_px_inside_airflow_nothing_is_clipped(airflow, triggered, ui, artifacts):
    """Issue 39: at 390 px, inside Airflow's frames (the page and a view's tab), the frame's document is no wider
    than the frame (scrollWidth <= clientWidth)."""
    af, _ = airflow
    ui.set_viewport_size({"width": 390, "height": 844})
    try:
        for title, path, name in (
            ("Materialized views", "/plugin/materialized-views", "overview-390-airflow"),
            ("View", "/dags/mv_gap/plugin/mvsink-view", "view-390-airflow"),
        ):
            ui.goto(af.url + path)
            frame = ui.frame_locator(f"iframe[title='{title}']")
            frame.locator("h1").first.wait_for()
            ui.wait_for_timeout(500)
            widths = frame.locator("body").evaluate(
                """b => { const d = b.ownerDocument.documentElement;
                          const wide = [...b.ownerDocument.querySelectorAll('body *')]
                            .filter(e => e.getBoundingClientRect().right > d.clientWidth + 0.5
                                         && !e.closest('div.chart, div.scroll, pre'))
                            .slice(0, 5).map(e => e.tagName + '.' + e.className + ' ' + e.getBoundingClientRect().right);
                          return [d.scrollWidth, d.clientWidth, wide]; }"""
            )
            assert widths[0] <= widths[1] and widths[2] == [], (name, widths)
            shot(ui, artifacts, name)
    finally:
        ui.set_viewport_size({"width": 1280, "height": 800})


def test_at_1280_the_tables_scrollbar_is_above_the_fold(airflow, triggered, ui):
    af, _ = airflow
    ui.set_viewport_size({"width": 1280, "height": 800})
    frame = overview(ui, af)
    ui.wait_for_timeout(500)
    box = frame.locator("div.scroll").evaluate(
        """d => { const f = d.ownerDocument.defaultView.frameElement.getBoundingClientRect();
                  const r = d.getBoundingClientRect();
                  return [f.top + r.bottom, d.scrollWidth > d.clientWidth, window.innerHeight]; }"""
    )
    assert box[1], box  # the table is wider than the page at 1280: it scrolls sideways in its box
    assert box[0] <= 800, box  # ... and that box, with its scrollbar, ends above the fold


def control(tab, which: str) -> dict[str, str | None]:
    """Click a control of the view's tab, confirm it in the page; the answer's attributes once Airflow answered."""
    from playwright.sync_api import expect

    box = tab.locator(".controls")
    box.locator(f"button[data-control='{which}']").click()
    expect(box.locator(".confirm")).to_be_visible()
    box.locator("button[data-confirm='yes']").click()
    out = box.locator(".control-result")
    expect(out).to_have_attribute("data-status", re.compile(r"^(\d+|error)$"))
    return {k: out.get_attribute(k) for k in ("data-status", "data-run-id", "data-backfill-id")} | {
        "text": out.inner_text()
    }


def local_input(ms: int) -> str:
    """A ``datetime-local`` input's value for a UTC instant."""
    return format_time(ms)[:19]


@pytest.fixture(scope="module")
def ops_runs(airflow, built, ui, artifacts):
    """mv_ops' runs of every kind, made from its tab (its controls and its Refresh button) and the REST API: a
    failed one, a refresh at a chosen time, a no-op refresh, a backfill; and pause then resume. {kind: run id}."""
    from playwright.sync_api import expect

    af, _ = airflow
    ids: dict[str, str] = {}
    status, body = af.api(
        "POST",
        "/api/v2/dags/mv_ops/dagRuns",
        {"logical_date": None, "conf": {"refresh_time": "not-a-time"}},
        token=af.token(),
    )
    assert status in (200, 201), body
    ids["failed"] = body["dag_run_id"]
    assert wait_run(af, "mv_ops", ids["failed"], timeout=240)["state"] == "failed"
    tab = view_tab(ui, af, "ops")
    # pause, then resume: Airflow's PATCH, confirmed in the page
    assert control(tab, "pause")["data-status"] == "200"
    assert af.api("GET", "/api/v2/dags/mv_ops", token=af.token())[1]["is_paused"] is True
    expect(tab.locator(".controls button[data-control='pause']")).to_have_text("Resume")
    assert control(tab, "pause")["data-status"] == "200"
    assert af.api("GET", "/api/v2/dags/mv_ops", token=af.token())[1]["is_paused"] is False
    # cancelling a confirmation makes no call
    tab.locator(".controls button[data-control='pause']").click()
    tab.locator(".controls button[data-confirm='no']").click()
    expect(tab.locator(".controls .control-result")).to_have_attribute("data-status", "cancelled")
    assert af.api("GET", "/api/v2/dags/mv_ops", token=af.token())[1]["is_paused"] is False
    at = (built["now"] - HOUR) // 1000 * 1000
    tab.locator(".controls input[name=refresh_at]").fill(local_input(at))
    got = control(tab, "refresh_at")
    assert got["data-status"] == "200" and got["data-run-id"], got
    ids["refresh_at"] = str(got["data-run-id"])
    assert wait_run(af, "mv_ops", ids["refresh_at"], timeout=240)["state"] == "success"
    status, run_id = click(tab, "h1", "refresh")
    assert status == "200" and run_id, status
    ids["noop"] = str(run_id)
    assert wait_run(af, "mv_ops", ids["noop"], timeout=240)["state"] == "success"
    tab = view_tab(ui, af, "ops")
    tab.locator(".controls input[name=backfill_from]").fill("2025-12-31T00:00:00")
    tab.locator(".controls input[name=backfill_to]").fill("2026-01-02T00:00:00")
    got = control(tab, "backfill")
    assert got["data-status"] == "200" and got["data-backfill-id"], got
    shot(tab.locator(".controls"), artifacts, "controls")

    def backfill_run():
        rs = [r for r in runs(af, "mv_ops") if r["run_type"] == "backfill"]
        return rs[0] if rs and rs[0]["state"] in ("success", "failed") else None

    try:
        ids["backfill"] = wait_for("the backfill's run", backfill_run, timeout=420)["dag_run_id"]
    except AssertionError as exc:
        raise AssertionError(f"{exc}; runs {runs(af, 'mv_ops')}; backfills {backfills(af, 'mv_ops')}") from None
    return ids


def test_the_controls_call_airflow_and_the_run_history_shows_every_run(airflow, built, ops_runs, ui, artifacts):
    """Issue 39: every run of mv_ops in its tab's history (the scheduler's own run, a failed one with its error's
    first line, a refresh at a chosen time, a no-op refresh, a backfill), filterable by state; the overview counts
    the failures of 24 h."""
    from playwright.sync_api import expect

    af, _ = airflow
    made = {r["dag_run_id"]: r for r in runs(af, "mv_ops")}
    assert made[ops_runs["backfill"]]["run_type"] == "backfill" and made[ops_runs["backfill"]]["state"] == "success"
    at = (built["now"] - HOUR) // 1000 * 1000
    assert made[ops_runs["refresh_at"]]["conf"] == {"refresh_time": format_time(at)[:19] + "Z", "dry_run": False}
    tab = view_tab(ui, af, "ops")
    rows = tab.locator("table#runs tr[data-run]")
    expect(rows).to_have_count(5)
    got = {
        r["run"]: r
        for r in rows.evaluate_all(
            "trs => trs.map(tr => ({...tr.dataset, text: tr.innerText,"
            " refresh: tr.querySelector('[data-col=refresh_time]').dataset.value}))"
        )
    }
    failed = got[ops_runs["failed"]]
    assert failed["state"] == "failed" and failed["outcome"] == "failed" and "not-a-time" in failed["text"], failed
    assert got[ops_runs["noop"]]["outcome"] == "up to date" and got[ops_runs["noop"]]["runType"] == "manual"
    assert got[ops_runs["refresh_at"]]["outcome"] == "up to date"
    assert got[ops_runs["refresh_at"]]["refresh"] == str(at)
    (scheduled,) = [r for r in got.values() if r["runType"] == "scheduled"]  # the July 1 fire, before the upper
    assert scheduled["outcome"] == "up to date" and scheduled["refresh"] == str(parse_time("2026-07-01T00:00:00Z"))
    back = got[ops_runs["backfill"]]
    assert back["runType"] == "backfill" and "backfill" in back["text"] and back["outcome"] == "up to date", back
    # the no-op committed an empty append: its commit is linked in the history
    assert re.search(r"^v\d+$", str(tab.locator(f"tr[data-run='{ops_runs['noop']}'] td[data-col=commit]").inner_text()))
    assert rows.evaluate_all("trs => trs.map(tr => tr.dataset.run)")[0] == ops_runs["backfill"]  # newest made first
    shot(tab.locator("#run-history"), artifacts, "history")
    tab.locator("a[data-filter='failed']").click()
    expect(tab.locator("table#runs tr[data-run]")).to_have_count(1)
    expect(tab.locator("table#runs tr[data-run]")).to_have_attribute("data-run", ops_runs["failed"])
    frame = overview(ui, af)
    expect(frame.locator("tr[data-view='ops'] [data-failures-24h]")).to_have_attribute("data-failures-24h", "1")
    # its last run (the backfill's) says what it did: up to date, not a bare "success"
    expect(frame.locator("tr[data-view='ops'] td[data-col='last_run'] [data-outcome]")).to_have_attribute(
        "data-outcome", "up to date"
    )


def test_the_views_schema_and_first_rows(airflow, built, ui, artifacts):
    from playwright.sync_api import expect

    af, _ = airflow
    # the history's filter and page come from the query string: values it does not know change nothing
    for query in ("?state=bogus&page=abc", "?page=-1", "?state=failed&page=99"):
        response = ui.goto(f"{af.url}/mvsink/dags/mv_ops{query}")
        assert response is not None and response.status == 200, query
    tab = view_tab(ui, af, "ops")
    cols = tab.locator("table#sample th").evaluate_all("ths => ths.map(th => [th.dataset.column, th.dataset.type])")
    assert cols == [["id", "int64"], ["qty", "int64"], ["note", "string"]]
    expect(tab.locator("table#sample tr[data-sample-row]")).to_have_count(20)
    expect(tab.locator("[data-sample-as-of]")).to_contain_text("first 20 of 30 rows")
    first = tab.locator("table#sample tr[data-sample-row]").first.locator("td").all_inner_texts()
    assert len(first) == 3 and first[2].startswith("order "), first
    shot(tab.locator("#view-data"), artifacts, "data")


LOCKED = {
    "detail": "Database is locked. Backfill creation is not supported on SQLite under concurrent access. Please use "
    "PostgreSQL or MySQL.",
    "status": 503,
    "title": "Service Unavailable",
}


@pytest.mark.parametrize("locked_calls", [1, 5])
def test_a_backfill_refused_by_a_locked_database_is_called_again(airflow, ui, locked_calls):
    """Airflow on SQLite answers 503 "Database is locked" to a backfill while its scheduler writes, having made
    nothing: the page calls again, up to 5 calls, then shows the answer (Airflow's answers stood in for here, so that
    the test does not depend on the scheduler's timing; the suite met a real one)."""
    af, _ = airflow
    bodies: list = []

    def answer(route):
        bodies.append(route.request.post_data_json)
        if len(bodies) <= locked_calls:
            route.fulfill(status=503, content_type="application/json", body=json.dumps(LOCKED))
        else:
            made = {"id": 4242, "from_date": "2025-12-31T00:00:00Z", "to_date": "2026-01-02T00:00:00Z"}
            route.fulfill(status=200, content_type="application/json", body=json.dumps(made))

    ui.route("**/api/v2/backfills", answer)
    try:
        tab = view_tab(ui, af, "ops")
        tab.locator(".controls input[name=backfill_from]").fill("2025-12-31T00:00:00")
        tab.locator(".controls input[name=backfill_to]").fill("2026-01-02T00:00:00")
        got = control(tab, "backfill")
    finally:
        ui.unroute("**/api/v2/backfills")
    if locked_calls < 5:
        assert got["data-status"] == "200" and got["data-backfill-id"] == "4242", got
        assert len(bodies) == locked_calls + 1, bodies
    else:  # five refusals: the fifth is shown
        assert got["data-status"] == "503" and "Database is locked" in str(got["text"]), got
        assert len(bodies) == 5, bodies
    assert all(b == bodies[0] for b in bodies) and bodies[0]["dag_id"] == "mv_ops", bodies


def test_a_forbidden_user_gets_airflows_403_and_anonymous_401(airflow, ops_runs, ui):
    """A read-only user (Airflow's viewer) sees the controls disabled; forced on, Airflow refuses them (403) and
    nothing changes; a forged cookie gets 403 and no cookie 401."""
    import jwt
    from playwright.sync_api import expect

    af, _ = airflow
    before = len(runs(af, "mv_ops"))
    context = ui.context.browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    try:
        page.goto(f"{af.url}/")
        page.get_by_label("Username").fill("viewer")
        page.get_by_label("Password").fill(af.password("viewer"))
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(re.compile(r".*/$"))
        tab = view_tab(page, af, "ops")
        for which in ("pause", "refresh_at", "backfill"):
            expect(tab.locator(f".controls button[data-control='{which}']")).to_be_disabled()
        tab.locator(".controls button").evaluate_all("bs => bs.forEach(b => { b.disabled = false; })")
        tab.locator(".controls input[name=refresh_at]").fill("2026-06-01T00:00:00")
        tab.locator(".controls input[name=backfill_from]").fill("2025-12-31T00:00:00")
        tab.locator(".controls input[name=backfill_to]").fill("2026-01-02T00:00:00")
        for which in ("pause", "refresh_at", "backfill"):
            got = control(tab, which)
            assert got["data-status"] == "403" and "refused: HTTP 403" in str(got["text"]), (which, got)
        forged = jwt.encode(
            {"sub": "admin", "role": "ADMIN", "exp": int(time.time()) + 600, "iat": int(time.time())},
            "not-the-server-secret-" * 4,
            algorithm="HS512",
        )
        # The cookie swaps below are made in the tab's own page, outside Airflow's: Airflow's page polls its API
        # and, its session gone, leaves for the login page, taking the tab's frame with it (under load the click
        # then found no frame: a timeout, 3 of 8 suite runs on 2026-11-29/30).
        page.goto(f"{af.url}/mvsink/dags/mv_ops")
        expect(page.locator("[data-card='lag']")).to_be_visible()
        page.locator(".controls button").evaluate_all("bs => bs.forEach(b => { b.disabled = false; })")
        page.locator(".controls input[name=refresh_at]").fill("2026-06-01T00:00:00")
        context.clear_cookies()
        context.add_cookies([{"name": "_token", "value": forged, "url": af.url}])
        assert control(page, "pause")["data-status"] == "403"
        context.clear_cookies()
        assert control(page, "refresh_at")["data-status"] == "401"
    finally:
        context.close()
    assert len(runs(af, "mv_ops")) == before
    assert af.api("GET", "/api/v2/dags/mv_ops", token=af.token())[1]["is_paused"] is False


def test_the_docs_show_these_screenshots():
    text = (REPO / "docs" / "ui.md").read_text()
    for name in SHOTS:
        assert f"img/ui-{name}.png" in text, name
        assert (DOCS_IMG / f"ui-{name}.png").is_file(), name
