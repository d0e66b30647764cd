"""Issue 6, the UI as a person uses it: Debian chromium (headless) + playwright against the local Airflow.

Logs in, opens a view's DAG, triggers a dry run with params, reads the corrections it reports
in the append task's XCom tab, triggers a real run and reads its refresh summary. Screenshots go to
``test-artifacts/browser/`` (``MVSINK_TEST_ARTIFACTS`` overrides the folder). The browser is the
system's ``/usr/bin/chromium`` (``MVSINK_CHROMIUM`` overrides it); ``playwright install`` is never used.
"""

from __future__ import annotations

import random
import re
import time
from pathlib import Path
from urllib.parse import quote, unquote

import pytest
from deltalake import DeltaTable

from mvsink.devtools.localairflow import LocalAirflow
from mvsink.times import format_time
from tests.support.airflow import dags_folder, running_airflow, wait_run
from tests.support.browser import artifacts_dir, browser_page
from tests.support.data import PROJECT, make_orders
from tests.support.delta import BASE, HOUR, write_at
from tests.support.oracle import oracle
from tests.support.viewfiles import write_view

pytestmark = [pytest.mark.browser, pytest.mark.airflow, pytest.mark.slow]


@pytest.fixture(scope="module")
def artifacts() -> Path:
    return artifacts_dir("0*.png", "failure.png")  # this test's own files (other tests share the folder)


@pytest.fixture(scope="module")
def airflow(tmp_path_factory, connect_url):
    root = tmp_path_factory.mktemp("browser")
    data, dags = dags_folder(root)
    write_at(str(data / "orders"), make_orders(random.Random(21), 0, 30), BASE)
    write_view(
        dags / "views",
        "orders_proj",
        query=PROJECT,
        sources={"orders": "orders"},
        target="views/orders_proj",
        as_of=BASE,
        description="Orders with a positive quantity.",
    )
    with running_airflow(root, dags, data, wanted={"mv_orders_proj"}, connect_url=connect_url) as af:
        yield af, data


@pytest.fixture(scope="module")
def page(airflow, artifacts):
    with browser_page(width=1400, height=900) as pg:
        yield pg


def _wait_run(af: LocalAirflow, run_id: str) -> str:
    return str(wait_run(af, "mv_orders_proj", run_id, timeout=420)["state"])


def _trigger(page, af: LocalAirflow, *, refresh_time: str, dry_run: bool, shot: Path) -> str:
    """Trigger from the DAG page's dialog with params; returns the new run's id (from the page it opens)."""
    from playwright.sync_api import expect

    if not page.url.endswith("/dags/mv_orders_proj"):
        page.goto(f"{af.url}/dags/mv_orders_proj")
    page.get_by_test_id("trigger-dag-button").click()
    page.locator("input[name=element_refresh_time]").fill(refresh_time)
    switch = page.locator("input[name=element_dry_run]")
    if switch.is_checked() != dry_run:
        page.locator("label:has(input[name=element_dry_run])").click()
    expect(switch).to_be_checked(checked=dry_run)
    page.screenshot(path=str(shot))
    page.get_by_test_id("trigger-dag-submit").click()
    page.wait_for_url(re.compile(r".*/dags/mv_orders_proj/runs/[^/]+$"))
    return unquote(page.url.rsplit("/runs/", 1)[1])


def _open_report(page, af: LocalAirflow, run_id: str, shot: Path, *needles: str) -> str:
    """The append task's XCom tab of a run: the 'report' row must show every needle."""
    from playwright.sync_api import expect

    page.goto(f"{af.url}/dags/mv_orders_proj/runs/{quote(run_id, safe='')}/tasks/append/xcom")
    row = page.locator("tr", has=page.get_by_text("report", exact=True))
    expect(row).to_be_visible()
    for needle in needles:
        expect(row).to_contain_text(needle)
    expect(page.get_by_text("Success").first).to_be_visible()  # the task's state badge
    page.screenshot(path=str(shot), full_page=True)
    return row.inner_text()


def test_ui_login_trigger_dry_run_then_real_run(airflow, page, artifacts):
    try:
        _person_uses_the_ui(airflow, page, artifacts)
    except BaseException:
        page.screenshot(path=str(artifacts / "failure.png"), full_page=True)
        raise


def _person_uses_the_ui(airflow, page, artifacts):
    from playwright.sync_api import expect

    af, data = airflow
    t0 = time.monotonic()
    r = BASE + HOUR
    expected = sum(oracle(PROJECT, {"orders": data / "orders"}, r).values())
    target = data / "views" / "orders_proj"

    # log in (the DAG page redirects to the login form first)
    page.goto(f"{af.url}/dags/mv_orders_proj")
    page.get_by_label("Username").fill("admin")
    page.get_by_label("Password").fill(af.password())
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(re.compile(r".*/dags/mv_orders_proj$"))
    for task in ("mint", "write", "append", "reschedule"):
        expect(page.get_by_text(task, exact=True).first).to_be_visible()
    page.screenshot(path=str(artifacts / "01-dag.png"))

    # a dry run with params: the corrections are reported, nothing is written
    dry = _trigger(
        page, af, refresh_time="2026-01-01T01:00:00Z", dry_run=True, shot=artifacts / "02-trigger-dry-run.png"
    )
    assert _wait_run(af, dry) == "success"
    text = _open_report(
        page,
        af,
        dry,
        artifacts / "03-dry-run-report.png",
        "orders_proj: dry run [",
        f"would add {expected} and retract 0 rows",
        "nothing written",
    )
    assert f"{format_time(r + 1)})" in text, text  # the batch ends at the desired frontier R + 1 (ISO-8601 UTC)
    assert not target.exists()

    # a real run at the same refresh time: the refresh summary shows the rows, the upper and the Delta version
    real = _trigger(page, af, refresh_time=str(r), dry_run=False, shot=artifacts / "04-trigger-real-run.png")
    assert _wait_run(af, real) == "success"
    version = DeltaTable(str(target)).version()
    _open_report(
        page,
        af,
        real,
        artifacts / "05-real-run-report.png",
        "orders_proj: appended [",
        f"+{expected} -0 rows",
        f"Delta version {version}, final through {format_time(r)}",
    )
    assert DeltaTable(str(target)).transaction_version("mvsink:upper:orders_proj") == r + 1
    print(f"browser test: login to both runs reported in {time.monotonic() - t0:.1f}s")
    assert sorted(p.name for p in artifacts.glob("0*.png")) == [
        "01-dag.png",
        "02-trigger-dry-run.png",
        "03-dry-run-report.png",
        "04-trigger-real-run.png",
        "05-real-run-report.png",
    ]
