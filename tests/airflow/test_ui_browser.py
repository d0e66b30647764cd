"""Issue 14, acceptance 1 and 3, as an operator uses it: Debian chromium (headless) + playwright against a real
local Airflow (LocalAirflow on 127.0.0.1) whose UI plugin is loaded from the repository's plugins folder.

The example views of dags/views (their queries, sources and targets; made ``schedule: manual`` so only the
test's runs refresh them, and revenue_by_region given a freshness target it meets) over the demo's source
history are refreshed through Airflow runs. Then: log in, open **Materialized views** from the navigation,
compare every view's row with ``mvsink status --all --json`` (open_orders, past its ``max_lag``, flagged
stale; revenue_by_region fresh), open open_orders' **View** tab after its three refreshes and compare the
chart's three refreshes with the Delta commit log, and read the append task's summary XCom as JSON.
Screenshots go to ``test-artifacts/browser/ui-*.png`` (``MVSINK_TEST_ARTIFACTS`` moves them).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import pytest
from deltalake import DeltaTable

from mvsink.devtools.demo import build_sources
from mvsink.devtools.localairflow import LocalAirflow
from mvsink.times import format_time, parse_time
from tests.support.airflow import migrated_home
from tests.support.browser import artifacts_dir, browser_page

pytestmark = [pytest.mark.browser, pytest.mark.airflow, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
REFRESHES = {  # view -> refresh times, in order (the last one of open_orders: no source moved since the one before)
    "open_orders": ["2026-11-01T12:00:00Z", "2026-11-02T12:00:00Z", "2026-11-02T18:00:00Z"],
    "revenue_by_region": ["2026-11-02T12:00:00Z"],
}


@pytest.fixture(scope="module")
def artifacts() -> Path:
    return artifacts_dir("ui-*.png")  # this test's own files (other tests share the folder)


def _example_views(dest: Path) -> None:
    for f in sorted((REPO / "dags" / "views").glob("*.yaml")):
        text = re.sub(r"(?m)^schedule:.*$", "schedule: manual", f.read_text())
        if f.stem == "revenue_by_region":
            text = re.sub(r"(?m)^max_lag:.*$", "max_lag: 36500d", text)
        (dest / f.name).write_text(text)


def _trigger_and_wait(af: LocalAirflow, dag_id: str, refresh_time: str, timeout: float = 420) -> str:
    status, body = af.api(
        "POST",
        f"/api/v2/dags/{dag_id}/dagRuns",
        {"logical_date": None, "conf": {"refresh_time": refresh_time}},
        token=af.token(),
    )
    assert status in (200, 201), body
    run_id = body["dag_run_id"]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status, body = af.api("GET", f"/api/v2/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}", token=af.token())
        if status == 200 and body["state"] in ("success", "failed"):
            assert body["state"] == "success", body
            return str(run_id)
        time.sleep(2)
    raise AssertionError(f"{dag_id} run {run_id} did not finish in {timeout}s")


@pytest.fixture(scope="module")
def airflow(tmp_path_factory, connect_url):
    root = tmp_path_factory.mktemp("ui-browser")
    data, dags = root / "data", root / "dags"
    (dags / "views").mkdir(parents=True)
    data.mkdir()
    (dags / "mvsink_views.py").write_bytes((REPO / "dags" / "mvsink_views.py").read_bytes())
    _example_views(dags / "views")
    build_sources(data)  # the demo's source history (commits dated 2026-11-01..04)
    af = LocalAirflow(
        root / "home",
        dags,
        data_root=data,
        extra_env={"MVSINK_REPORTS_DIR": str(root / "reports")},
        spark="connect",
        connect_url=connect_url,
        migrated_home=migrated_home(),
    )
    af.start()
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            status, body = af.api("GET", "/api/v2/dags", token=af.token())
            if status == 200 and {f"mv_{v}" for v in REFRESHES} <= {d["dag_id"] for d in body["dags"]}:
                break
            time.sleep(2)
        else:
            raise AssertionError(f"DAGs not parsed: {body}")
        runs = {v: [_trigger_and_wait(af, f"mv_{v}", t) for t in times] for v, times in REFRESHES.items()}
        yield af, data, dags / "views", runs
    finally:
        af.stop()


@pytest.fixture(scope="module")
def page(airflow, artifacts):
    with browser_page(width=1600, height=1000) as pg:
        yield pg


def _status_all(af: LocalAirflow, views: Path) -> list[dict]:
    proc = subprocess.run(
        [sys.executable, "-m", "mvsink", "status", "--all", "--json", "--views-dir", str(views)],
        env=af.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode in (0, 1), proc.stderr
    return list(json.loads(proc.stdout))


def _cells(row) -> dict[str, dict[str, str]]:
    """``data-col`` -> its attributes and visible text, for one row of the overview table."""
    return row.locator("td[data-col]").evaluate_all(
        "tds => Object.fromEntries(tds.map(td => [td.dataset.col, {...td.dataset, text: td.innerText, title: td.title,"
        " hover: (td.querySelector('time') || td).title}]))"
    )


def test_operator_sees_every_view_and_a_views_history(airflow, page, artifacts):
    try:
        _operator(airflow, page, artifacts)
    except BaseException:
        page.screenshot(path=str(artifacts / "ui-failure.png"), full_page=True)
        raise


def _operator(airflow, page, artifacts):
    from playwright.sync_api import expect

    af, data, views, runs = airflow
    t0 = time.monotonic()

    # log in, then open "Materialized views" from the navigation
    page.goto(f"{af.url}/")
    page.get_by_label("Username").fill("admin")
    page.get_by_label("Password").fill(af.password())
    page.get_by_role("button", name="Sign in").click()
    nav = page.get_by_role("link", name=re.compile("Materialized views"))
    nav.click()
    page.wait_for_url(re.compile(r".*/plugin/materialized-views"))
    frame = page.frame_locator("iframe[title='Materialized views']")
    expected = _status_all(af, views)
    names = sorted(v.stem for v in views.glob("*.yaml"))
    expect(frame.locator("tr[data-view]")).to_have_count(len(names))
    page.screenshot(path=str(artifacts / "ui-01-materialized-views.png"), full_page=True)

    # every example view: the page's values are status --all --json's
    assert sorted(r["view"] for r in expected) == names == ["open_orders", "revenue_by_region"]
    for st in expected:
        cells = _cells(frame.locator(f"tr[data-view='{st['view']}']"))
        for col in ("as_of", "since", "upper"):  # readable (upper: relative), the ISO time on hover
            assert int(cells[col]["value"]) == st[col], (st["view"], col)
            assert cells[col]["hover"].startswith(st[f"{col}_utc"]), (st["view"], col, cells[col])
        assert re.match(r"^(in .+|.+ ago)$", cells["upper"]["text"]), cells["upper"]
        assert cells["schedule"]["text"] == st["schedule"] == "manual"
        assert cells["lag"]["stale"] == str(st["stale"]).lower() and int(cells["lag"]["maxLag"]) == st["max_lag_ms"]
        assert abs(int(cells["lag"]["value"]) - st["lag_ms"]) < 300_000  # the same lag, read moments apart
        last = st["last_refresh"]
        assert int(cells["last_refresh"]["value"]) == last["refresh_time"]
        assert cells["last_refresh"]["title"].startswith(last["refresh_time_utc"])
        assert cells["mode"]["value"] == last["mode"]
        assert (int(cells["rows"]["added"]), int(cells["rows"]["retracted"])) == (
            last["rows_added"],
            last["rows_retracted"],
        )
        assert int(cells["bytes"]["value"]) == last["bytes"] and int(cells["duration"]["value"]) == last["duration_ms"]
        assert int(cells["checks"]["value"]) == st["error_rows"] == 0
        assert int(cells["staged"]["value"]) == len(st["in_flight"]) == 0
        srcs = frame.locator(f"tr[data-view='{st['view']}'] li[data-source]").evaluate_all(
            "lis => lis.map(li => [li.dataset.source, li.dataset.version])"
        )
        assert srcs == [[s["name"], str(s["version_read"])] for s in st["sources"]]
    # acceptance 3: past its max_lag, open_orders is flagged stale on the page (and in status --all)
    by = {r["view"]: r for r in expected}
    assert by["open_orders"]["stale"] is True and by["revenue_by_region"]["stale"] is False
    expect(frame.locator("tr[data-view='open_orders'] .badge.stale").first).to_be_visible()
    expect(frame.locator("tr[data-view='revenue_by_region'] .badge.fresh")).to_be_visible()
    expect(frame.locator("[data-summary='stale']")).to_have_text("1")
    # issue 23: each view's last Airflow run, its state and wall time, linked to the run
    for v, ids in runs.items():
        last_run = frame.locator(f"tr[data-view='{v}'] td[data-col='last_run'] [data-run]")
        expect(last_run).to_have_attribute("data-run", ids[-1])
        expect(last_run).to_have_attribute("data-state", "success")
        assert int(last_run.get_attribute("data-wall-ms") or "0") > 0

    # sortable: by freshness lag, most behind first (open_orders was refreshed last on 2026-11-02T18:00)
    frame.locator("th[data-sort='lag'] a").click()
    expect(frame.locator("th[data-sort='lag']")).to_contain_text("▲")  # the sorted page has loaded
    frame.locator("th[data-sort='lag'] a").click()
    expect(frame.locator("th[data-sort='lag']")).to_contain_text("▼")
    order = frame.locator("tr[data-view]").evaluate_all("trs => trs.map(tr => tr.dataset.view)")
    assert order == sorted(names, key=lambda v: by[v]["lag_ms"], reverse=True)

    # open_orders' View tab (from its "history" link) after three refreshes: three refreshes, as the log has them
    frame.locator("tr[data-view='open_orders'] a", has_text="history").click()
    page.wait_for_url(re.compile(r".*/dags/mv_open_orders/plugin/mvsink-view$"))
    tab = page.frame_locator("iframe[title='View']")
    bars = tab.locator("#refresh-chart g.refresh")
    expect(bars).to_have_count(3)
    target = by["open_orders"]["target"]
    log = sorted(
        (
            {
                "version": h["version"],
                **{k[len("mvsink.") :]: json.loads(v) for k, v in h.items() if k.startswith("mvsink.")},
            }
            for h in DeltaTable(target).history()
            if h.get("mvsink.operation") == '"append"'
        ),
        key=lambda e: e["version"],
    )
    assert [c["refresh_time"] for c in log] == [parse_time(t) for t in REFRESHES["open_orders"]]
    chart = bars.evaluate_all("gs => gs.map(g => ({...g.dataset}))")
    assert [
        (
            int(g["version"]),
            int(g["refreshTime"]),
            g["mode"],
            int(g["rowsAdded"]),
            int(g["rowsRetracted"]),
            int(g["bytes"]),
            int(g["durationMs"]),
        )
        for g in chart
    ] == [
        (c["version"], c["refresh_time"], c["mode"], c["rows_added"], c["rows_retracted"], c["bytes"], c["duration_ms"])
        for c in log
    ]
    assert log[0]["rows_added"] > 0 and log[-1]["mode"] == "unchanged"  # the first fills it, the last changed nothing
    expect(tab.locator("#frontier-chart circle.upper")).to_have_count(DeltaTable(target).version() + 1)
    expect(tab.locator("#commits")).to_contain_text(
        f"at {format_time(parse_time(REFRESHES['open_orders'][-1]))}: +0 -0 rows"
    )
    expect(tab.locator("#sources")).to_contain_text(f"version {log[-1]['sources']['orders']} read by the last refresh")
    expect(tab.locator("[data-card='lag'] .badge.stale")).to_be_visible()
    page.screenshot(path=str(artifacts / "ui-02-view-tab.png"), full_page=True)
    # issue 23: at 1280x800 the tab's frame is as tall as its content (no scrollbar inside it: Airflow's panel
    # scrolls), and it follows the window's size
    page.set_viewport_size({"width": 1280, "height": 800})
    page.wait_for_function(
        """() => { const f = document.querySelector("iframe[title='View']");
                   const d = f && f.contentDocument && f.contentDocument.documentElement;
                   return !!d && f.clientHeight > 800 && d.scrollHeight <= f.clientHeight + 1; }"""
    )
    page.set_viewport_size({"width": 1600, "height": 1000})
    # issue 23: the lag over time with max_lag drawn, the last run, each refresh's commit linked to its run
    expect(tab.locator("#lag-chart circle.lag-point")).to_have_count(3)
    expect(tab.locator("#lag-chart line.max-lag")).to_have_attribute("data-max-lag", str(2 * 3_600_000))
    expect(tab.locator("[data-card='last_run'] [data-run]")).to_have_attribute("data-run", runs["open_orders"][-1])
    made_by_runs = [
        h for h in DeltaTable(target).history() if json.loads(h.get("mvsink.run_id") or "null") in runs["open_orders"]
    ]
    assert len(made_by_runs) >= 3  # the three appends (and the first one's bump)
    expect(tab.locator("#commits a[data-run-link]")).to_have_count(len(made_by_runs))
    tab.locator("#commits").scroll_into_view_if_needed()
    page.screenshot(path=str(artifacts / "ui-03-view-tab-commits.png"), full_page=True)
    # "all views" opens the Materialized views page in the Airflow window, not inside the tab's frame. The link
    # goes to /plugin/materialized-views; once the page's frame has loaded, Airflow replaces that URL with one
    # ending in the frame's own path (/plugin/materialized-views/mvsink/), at times before this test first reads
    # the URL: either is the overview (not a sorted one, not another page)
    tab.locator("a", has_text="all views").click()
    page.wait_for_url(re.compile(r".*/plugin/materialized-views(/mvsink/)?$"))
    expect(page.frame_locator("iframe[title='Materialized views']").locator("tr[data-view]")).to_have_count(len(names))
    expect(page.locator("iframe[title='View']")).to_have_count(0)  # the tab (and its frame) was left

    # the refresh summary XCom of the last real refresh: a JSON object with ISO times and the lag
    run = runs["open_orders"][-1]
    page.goto(f"{af.url}/dags/mv_open_orders/runs/{quote(run, safe='')}/tasks/append/xcom")
    row = page.locator("tr", has=page.get_by_text("summary", exact=True))
    expect(row.locator("[data-testid='xcom-value']")).to_be_visible()
    expand = page.get_by_role("button", name=re.compile("Expand all", re.I))
    if expand.count():
        expand.first.click()
    final = format_time(parse_time(REFRESHES["open_orders"][-1]))
    for needle in (
        f'"refresh_time_utc": "{final}"',
        f'"final_through_utc": "{final}"',
        '"lag": "',
        '"stale": true',
        '"max_lag": "2h 00m"',
    ):  # the top of the JSON, which the UI shows
        expect(row).to_contain_text(needle)
    report = page.locator("tr", has=page.get_by_text("report", exact=True))
    expect(report).to_contain_text("max_lag 2h 00m: STALE")
    row.scroll_into_view_if_needed()
    page.screenshot(path=str(artifacts / "ui-04-summary-xcom.png"), full_page=True)
    print(f"UI browser test: login to the summary XCom in {time.monotonic() - t0:.1f}s")
    assert sorted(p.name for p in artifacts.glob("ui-*.png")) == [
        "ui-01-materialized-views.png",
        "ui-02-view-tab.png",
        "ui-03-view-tab-commits.png",
        "ui-04-summary-xcom.png",
    ]
