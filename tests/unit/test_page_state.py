"""Issue 39, items "honest state" and "readable values", on pages rendered from real Delta logs (no Airflow): a
paused view says so and shows no next run, a view whose last run failed says since when its data is stale, the
reason for the last refresh's mode (and its fix) is on the view's tab, values read as a person reads them, the
since/upper chart is scaled to its data with ticks that do not collide."""

from __future__ import annotations

import re

import pytest

from mvsink.airflow.plugin import render
from mvsink.airflow.plugin.charts import frontier_chart, lag_chart, time_ticks
from mvsink.definitions.catalog import Catalog
from mvsink.readers.modefix import mode_fixes
from mvsink.readers.overview import all_views, view_detail
from tests.support.refreshlog import BASE, HOUR, refresh, source, view_file

pytestmark = pytest.mark.unit

LINKS = render.Links()
MINUTE = 60_000
REASON = (
    "the query is not linear: rand() is not deterministic (the linear refresh is off; MVSINK_X_LINEAR=true enables it)"
)


@pytest.fixture
def cat(env):
    data, views = env
    source(data)
    view_file(views, "every", extra="max_lag: 1h\nschedule: {every: 1h}\n")
    view_file(views, "plain")
    view_file(views, "empty", extra="max_lag: 1h\n")
    c = Catalog(views)
    refresh(c, "every", BASE, added=3, mode="full", reason=REASON)
    refresh(c, "plain", BASE, added=3, mode="full")
    return c


def _run(state: str, *, dry: bool = False) -> dict:
    return {
        "run_id": f"manual__{state}",
        "state": state,
        "run_type": "manual",
        "start": BASE + 3 * HOUR,
        "end": BASE + 3 * HOUR + 5_000,
        "wall_ms": 5_000,
        "running": False,
        "dry_run": dry,
        "failed_tasks": [],
        "report": None,
    }


def _row(page: str, view: str) -> str:
    m = re.search(rf'<tr data-view="{view}".*?</tr>', page, re.S)
    assert m, view
    return m.group(0)


def test_a_paused_view_says_paused_and_shows_no_next_run(cat):
    now = BASE + 30 * MINUTE
    rows = all_views(cat, now=now)
    runs = {"mv_every": {"paused": True}}
    page = render.overview_page(rows, links=LINKS, nonce="n", now=now, runs=runs)
    row = _row(page, "every")
    assert "data-paused-note" in row and "no scheduled runs until it is resumed" in row
    assert "data-next-run" not in row and "next in" not in row
    unpaused = render.overview_page(rows, links=LINKS, nonce="n", now=now, runs={"mv_every": {"paused": False}})
    assert "next in 30 min" in _row(unpaused, "every") and "data-paused-note" not in _row(unpaused, "every")
    d = view_detail(cat.get("every"), cat.views, now=now)
    tab = render.view_page(d, links=LINKS, nonce="n", runs={"paused": True})
    card = re.search(r'<div data-card="schedule">.*?</div></div>', tab, re.S)
    assert card and "paused" in card.group(0) and "data-next-run" not in card.group(0)


def test_a_failed_last_run_says_since_when_the_data_is_stale(cat):
    now = BASE + 5 * HOUR  # final through BASE, max_lag 1 h: stale since BASE + 1 h
    d = view_detail(cat.get("every"), cat.views, now=now)
    assert d["stale"]
    tab = render.view_page(d, links=LINKS, nonce="n", runs={"last": _run("failed")})
    m = re.search(r'data-failing="manual__failed" data-stale-since="(\d+)"', tab)
    assert m and int(m.group(1)) == BASE + HOUR, tab[:0]
    assert "data stale since" in tab and 'title="2026-01-01T01:00:00.000Z"' in tab
    # no max_lag: since its last commit; a success or a failed dry run says nothing of the kind
    p = view_detail(cat.get("plain"), cat.views, now=now)
    tab = render.view_page(p, links=LINKS, nonce="n", runs={"last": _run("failed")})
    assert "data not refreshed since" in tab
    assert f'data-stale-since="{p["last_refresh"]["committed_ms"]}"' in tab
    for run in (_run("success"), _run("failed", dry=True)):
        assert "data-failing" not in render.view_page(d, links=LINKS, nonce="n", runs={"last": run})
    e = view_detail(cat.get("empty"), cat.views, now=now)
    rows = render.overview_page([e], links=LINKS, nonce="n", now=now, runs={"mv_empty": {"last": _run("failed")}})
    assert 'data-stale-since="">' in rows and "never refreshed" in _row(rows, "empty")


def test_the_mode_reason_and_its_fix_are_on_the_views_tab(cat):
    d = view_detail(cat.get("every"), cat.views, now=BASE + HOUR)
    tab = render.view_page(d, links=LINKS, nonce="n")
    why = re.search(r'<div class="why" data-card="mode".*?</div>', tab, re.S)
    assert why, "no mode card"
    text = why.group(0)
    assert "rand() is not deterministic" in text and 'data-mode-kind="full"' in text
    assert "set MVSINK_X_LINEAR=true" in text and "compute that value where the data is written" in text
    # a full refresh with no recorded reason points to mvsink explain
    p = render.view_page(view_detail(cat.get("plain"), cat.views, now=BASE + HOUR), links=LINKS, nonce="n")
    assert "(no reason recorded)" in p and "mvsink explain plain shows what would make it incremental" in p


def test_mode_fixes_from_the_reasons_words():
    assert mode_fixes("") == []
    assert mode_fixes("incremental: false in the view file") == [
        "set `incremental: true` in the view file (the default)"
    ]
    assert mode_fixes("a correlated subquery") == [
        "rewrite the subquery as a join (a correlated or scalar subquery is not linear)"
    ]
    assert mode_fixes("more than 20% of the source changed") == []  # the data decided: nothing to fix


def test_values_read_as_a_person_reads_them(cat):
    e = view_detail(cat.get("empty"), cat.views, now=BASE)
    tab = render.view_page(e, links=LINKS, nonce="n")
    assert "nothing final yet" in tab and "(nothing final)" not in tab
    assert "no table yet" in tab and ">-1<" not in tab
    p = view_detail(cat.get("plain"), cat.views, now=BASE)
    overview = render.overview_page([p], links=LINKS, nonce="n", now=BASE)
    assert "no max_lag set" in overview and ">no target<" not in overview
    assert re.search(
        r"append data at 2026-01-01 00:00 at 2026-01-01T00:00:00.000Z: \+3 -0 rows",
        render.view_page(p, links=LINKS, nonce="n"),
    )


def test_time_ticks_are_round_and_few():
    ticks = time_ticks(BASE + 7 * MINUTE, BASE + 23 * MINUTE, max_ticks=5)
    assert ticks == [BASE + 5 * MINUTE, BASE + 10 * MINUTE, BASE + 15 * MINUTE, BASE + 20 * MINUTE, BASE + 25 * MINUTE]
    assert len(time_ticks(BASE, BASE + 40 * 86_400_000, max_ticks=5)) <= 5
    assert len(time_ticks(BASE, BASE, max_ticks=3)) <= 3


def _points(uppers: list[int], since: int) -> list[dict]:
    return [
        {"version": i, "committed_ms": u + 20_000, "committed": "", "operation": "append", "since": since, "upper": u}
        for i, u in enumerate(uppers)
    ]


def test_the_frontier_chart_is_scaled_to_its_uppers_not_from_as_of():
    as_of = BASE - 30 * 86_400_000
    uppers = [BASE + k * 2 * MINUTE for k in range(4)]
    svg = frontier_chart(_points(uppers, as_of))
    ys = [float(y) for y in re.findall(r'class="point upper"[^>]*cy="([\d.]+)"', svg)]
    assert ys[0] - ys[-1] > 100, ys  # minutes-apart steps span most of the 176 px plot
    assert "(below the axis)" in svg and f'data-since="{as_of}"' in svg
    ticks = [float(y) for y in re.findall(r'class="ytick"[^>]*y="([\d.]+)"', svg)]
    assert len(ticks) >= 2 and all(b - a >= 14 for a, b in zip(sorted(ticks), sorted(ticks)[1:])), ticks


def test_the_max_lag_label_is_above_the_plot():
    hist = [
        {"operation": "append", "committed_ms": BASE + k * HOUR, "upper": BASE + k * HOUR - HOUR + 1} for k in range(3)
    ]
    svg = lag_chart(hist, max_lag_ms=3 * HOUR, now=BASE + 3 * HOUR)
    label_y = float(re.search(r'class="max-lag-label"[^>]*y="([\d.]+)"', svg).group(1))
    line_y = float(re.search(r'class="max-lag"[^>]*y1="([\d.]+)"', svg).group(1))
    path_ys = [float(v) for v in re.findall(r",([\d.]+)", re.search(r'class="lag" d="([^"]+)"', svg).group(1))]
    assert label_y < min(path_ys + [line_y]) - 2  # the label's baseline above every line drawn
