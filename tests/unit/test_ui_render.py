"""Issue 14: the UI plugin's pages render what the readers computed (real Delta logs, no Airflow, no Spark):
the overview holds every view's values, stale views are flagged, the history chart has one bar group per
refresh and the frontier chart one point per commit, foreign commits are flagged, nothing is unescaped."""

from __future__ import annotations

from html.parser import HTMLParser

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from mvsink.airflow.plugin import render
from mvsink.airflow.plugin.common import relative
from mvsink.core.deltalog import set_commit_time
from mvsink.definitions.catalog import Catalog
from mvsink.readers.overview import all_views, view_detail
from mvsink.times import format_duration, format_time
from tests.support.refreshlog import BASE, HOUR, appends, refresh, source, view_file

pytestmark = pytest.mark.unit

LINKS = render.Links(airflow_root="/", app_root="/mvsink/")


class Elements(HTMLParser):
    """Every start tag with its attributes, and the text, of an HTML page."""

    def __init__(self, text: str):
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.text: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, {k: v or "" for k, v in attrs}))

    def handle_data(self, data):
        self.text.append(data)

    def find(self, tag: str, **attrs: str) -> list[dict[str, str]]:
        out = []
        for t, a in self.tags:
            if t == tag and all(
                (a.get(k.replace("_", "-")) == v if v != "*" else k.replace("_", "-") in a) for k, v in attrs.items()
            ):
                out.append(a)
        return out

    def find_class(self, tag: str, cls: str) -> list[dict[str, str]]:
        return [a for t, a in self.tags if t == tag and cls in a.get("class", "").split()]


@pytest.fixture
def catalog(env):
    data, views = env
    src = source(data)
    view_file(
        views,
        "sales",
        extra="max_lag: 1h\nchecks: [{name: positive, expr: 'qty > 0', action: error}, "
        "{name: small, expr: 'qty < 100', action: warn}]\n",
    )
    view_file(
        views,
        "fresh",
        extra="max_lag: 36500d\nschedule: {on_commit: [sales]}\n",
        sources="{s: {view: sales}}",
        query="SELECT id, qty FROM s",
    )
    (views / "evil.yaml").write_text(
        "name: evil\ndescription: <script>alert(1)</script>\nquery: SELECT id FROM o\n"
        "sources: {o: orders}\ntarget: views/evil\nas_of: 2026-01-01T00:00:00Z\n"
    )
    cat = Catalog(views)
    refresh(
        cat,
        "sales",
        BASE,
        added=5,
        nbytes=4096,
        mode="full",
        seconds=2.0,
        checks={"positive": {"action": "error", "rows": 3}, "small": {"action": "warn", "rows": 1}},
    )
    write_deltalake(str(src), pa.table({"id": [3], "qty": [3]}), mode="append")
    set_commit_time(str(src), BASE + HOUR - 1)
    refresh(
        cat,
        "sales",
        BASE + HOUR,
        added=1,
        retracted=2,
        nbytes=1024,
        mode="incremental",
        seconds=1.0,
        checks={"positive": {"action": "error", "rows": 3}, "small": {"action": "warn", "rows": 1}},
    )
    refresh(cat, "sales", BASE + 2 * HOUR)  # no source moved: no change (the check counts carry over)
    refresh(cat, "fresh", BASE + HOUR, added=7, nbytes=100)
    return cat


def test_overview_shows_every_views_values(catalog):
    rows = all_views(catalog)
    page = render.overview_page(rows, links=LINKS, nonce="n0nce", now=BASE)
    el = Elements(page)
    text = "".join(el.text)
    by = {r["view"]: r for r in rows}
    assert [a["data-view"] for a in el.find("tr", data_view="*")] == ["evil", "fresh", "sales"]  # sorted by name
    for name, r in by.items():
        tr = _row(page, name)
        assert (
            f'data-col="as_of" data-value="{r["as_of"]}"' in tr and f'data-col="since" data-value="{r["since"]}"' in tr
        )
        assert f'data-col="upper" data-value="{r["upper"]}"' in tr
        assert f'href="/dags/mv_{name}"' in tr  # the name links to its DAG
    s = by["sales"]
    tr = _row(page, "sales")
    for ms, iso in (
        (s["as_of"], s["as_of_utc"]),
        (s["since"], s["since_utc"]),
        (s["last_refresh"]["refresh_time"], s["last_refresh"]["refresh_time_utc"]),
    ):  # readable UTC (to the minute), the full ISO time and the epoch ms on hover
        assert f'title="{iso} ({ms})">{iso[:10]} {iso[11:16]}</td>' in tr
    # data through: relative to the page's time, the absolute UTC time on hover
    iso = s["upper_utc"]
    assert f'<time class="rel" datetime="{iso}" title="{iso}" data-upper="{s["upper"]}">' in tr
    assert f">{relative(s['upper'], BASE)}</time>" in tr
    last = s["last_refresh"]
    assert last["mode_kind"] == "unchanged" and 'data-mode="unchanged"' in tr and "no change" in tr
    assert (
        f'data-col="duration" data-value="{last["duration_ms"]}"' in tr and format_duration(last["duration_ms"]) in tr
    )
    assert 'data-stale="true"' in tr and "STALE" in tr and 'class="stale"' in tr  # flagged
    assert format_duration(s["lag_ms"]) in tr and "max_lag 1h 00m" in tr
    assert 'data-col="checks" data-value="3" class="errors">' in tr  # error rows highlighted
    assert "positive: 3 error row(s)" in tr and "small: 1 warned" in tr
    assert f'data-source="orders" data-version="{last["sources"]["orders"]}"' in tr
    f = _row(page, "fresh")
    assert 'data-stale="false"' in f and "STALE" not in f and 'data-source="s" data-version="' in f
    assert "+7 &minus;0" in f and "100 B" in f and "full diff" in f
    # the summary line, and the untrusted description escaped
    assert "3 view(s), 1 stale, 1 with error rows" in text
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert page.count("<script") == 1 and '<script nonce="n0nce">' in page  # only the page's own script
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")  # nothing fetched


def _row(page: str, view: str) -> str:
    start = page.index(f'<tr data-view="{view}"')
    return page[start : page.index("</tr>", start)]


def test_overview_sorts_on_the_server(catalog):
    rows = all_views(catalog)
    order = [
        a["data-view"]
        for a in Elements(render.overview_page(rows, links=LINKS, nonce="x", sort="lag", order="desc")).find(
            "tr", data_view="*"
        )
    ]
    lags = {r["view"]: r["lag_ms"] for r in rows}
    assert lags["evil"] is None and lags["fresh"] > lags["sales"]
    assert order == ["evil", "fresh", "sales"]  # never refreshed is the most behind
    stale_first = Elements(render.overview_page(rows, links=LINKS, nonce="x", sort="stale")).find("tr", data_view="*")
    assert stale_first[0]["data-view"] == "sales"
    page = render.overview_page(rows, links=LINKS, nonce="x", sort="lag", order="desc")
    assert 'href="/mvsink/?sort=lag&amp;order=asc"' in page and "Freshness lag ▼" in page
    assert render.overview_page(rows, links=LINKS, nonce="x", sort="nonsense") == render.overview_page(
        rows, links=LINKS, nonce="x", sort="view"
    )


def test_view_page_chart_has_one_bar_group_per_refresh_matching_the_log(catalog):
    view = catalog.get("sales")
    d = view_detail(view, catalog.views)
    page = render.view_page(d, links=LINKS, nonce="x")
    el = Elements(page)
    groups = el.find("g", data_version="*")
    log = appends(view.target)
    assert len(log) == 3 and len(groups) == 3  # one group per refresh
    for g, c in zip(groups, log):
        assert (
            int(g["data-version"]),
            int(g["data-refresh-time"]),
            g["data-mode"],
            int(g["data-rows-added"]),
            int(g["data-rows-retracted"]),
            int(g["data-bytes"]),
            int(g["data-duration-ms"]),
        ) == (
            c["version"],
            c["refresh_time"],
            c["mode"],
            c["rows_added"],
            c["rows_retracted"],
            c["bytes"],
            c["duration_ms"],
        )
        assert (
            g["fill"] == render.MODE_COLOURS[{"full": "full", "incremental": "incremental"}.get(c["mode"], "unchanged")]
        )
    # each group draws rows added, retracted, bytes and duration
    assert [len(el.find_class("rect", k)) for k in ("added", "retracted", "bytes", "duration")] == [3, 3, 3, 3]
    # since/upper: one point per commit and frontier, the last at the table's upper
    commits = DeltaTable(view.target).history()
    uppers = el.find_class("circle", "upper")
    assert len(uppers) == len(commits) == len(el.find_class("circle", "since"))
    assert int(uppers[-1]["data-upper"]) == d["upper"] == BASE + 2 * HOUR + 1
    # the last commits as mvsink status prints them; lineage
    # (issue 39: the data range as times, not epoch milliseconds; the raw bounds in data-lower / data-upper)
    assert f"append data after 2026-01-01 01:00 through 02:00 at {format_time(BASE + 2 * HOUR)}" in page
    assert f'data-lower="{BASE + HOUR + 1}" data-upper="{BASE + 2 * HOUR + 1}"' in page
    assert f"[{BASE + HOUR + 1}, " not in page
    assert 'data-downstream="fresh"' in page and 'Upstream views: <span class="muted">none</span>' in page
    assert "STALE" in page and "<h2>Checks (last refresh)</h2>" in page
    assert '<td data-col="checks" data-value="3" class="errors">' in page  # error rows highlighted


def test_a_foreign_commit_is_flagged(catalog):
    view = catalog.get("fresh")
    write_deltalake(
        view.target.uri, pa.table({"id": [9], "qty": [9], "_mv_time": [BASE], "_mv_diff": [1]}), mode="append"
    )  # a hand edit: not made by mvsink
    page = render.view_page(view_detail(view, catalog.views), links=LINKS, nonce="x")
    el = Elements(page)
    foreign = el.find("span", data_foreign="true")
    assert (
        len(foreign) == 1 and "FOREIGN WRITE (not by mvsink)" in page and "[foreign commit: not made by mvsink]" in page
    )
    assert int(foreign[0]["data-version"]) == DeltaTable(view.target).version()
    assert len(el.find("g", data_version="*")) == 1


def test_pages_for_nothing_yet(env):
    data, views = env
    source(data)
    view_file(views, "new", extra="max_lag: 1h\n")
    cat = Catalog(views)
    d = view_detail(cat.get("new"), cat.views)
    page = render.view_page(d, links=LINKS, nonce="x")
    assert "No refreshes yet." in page and "never refreshed" in page
    overview = render.overview_page(all_views(cat), links=LINKS, nonce="x")
    assert "never" in _row(overview, "new") and "nothing final yet" in _row(overview, "new")
    assert "No views you may read" in render.overview_page([], links=LINKS, nonce="x")
    nf = render.not_found_page("DAG 'x<y>' is not a view", links=LINKS, nonce="x")
    assert "x&lt;y&gt;" in nf


def test_the_schedule_column_shows_the_next_run_of_an_every_or_at_view(catalog):
    rows = all_views(catalog)
    rows[0] = {**rows[0], "next_run": 1_767_225_617_000, "next_run_utc": "2026-01-01T00:00:17.000Z"}
    page = render.overview_page(rows, links=LINKS, nonce="n0nce", now=BASE)
    tr = _row(page, rows[0]["view"])
    assert 'title="2026-01-01T00:00:17.000Z" data-next-run="1767225617000">next in 17 s</time>' in tr
    for r in rows[1:]:  # no next run of their own (cron, manual): nothing added
        assert "data-next-run" not in _row(page, r["view"])


def test_data_through_and_refreshed_at_are_labelled_apart_and_commits_link_to_their_runs(catalog):
    """Issue 23: "data through" (the upper) and "refreshed at" (the commit time, relative, absolute on hover)
    apart; the commit log links each refresh to its run."""
    view = catalog.get("sales")
    d = view_detail(view, catalog.views, now=BASE + 30 * 24 * HOUR)
    page = render.view_page(d, links=LINKS, nonce="x")
    assert "<b>data through (upper)</b>" in page and "<b>refreshed at (last commit)</b>" in page
    committed = d["last_refresh"]["committed_ms"]
    iso = format_time(committed)
    rel = relative(committed, d["checked_at"])
    assert f'datetime="{iso}" title="{iso}" data-refreshed="{committed}">{rel}</time>' in page
    # the fixture's refreshes are the command line's (run ids test-…): no Airflow run to link to
    assert all(not str(c.get("run_id") or "").startswith("manual__") for c in d["last_commits"])
    assert "data-run-link" not in page
    # a refresh made by an Airflow run links to it
    airflow_made = {
        **d,
        "last_commits": [{**c, "run_id": "manual__2026-01-01T02:00:00+00:00"} for c in d["last_commits"]],
    }
    linked = render.view_page(airflow_made, links=LINKS, nonce="x")
    assert linked.count("data-run-link") == len(d["last_commits"]) >= 3
    assert 'href="/dags/mv_sales/runs/manual__2026-01-01T02%3A00%3A00%2B00%3A00" data-run-link>run</a>' in linked
    rows = all_views(catalog, now=BASE + 30 * 24 * HOUR)
    overview = render.overview_page(rows, links=LINKS, nonce="n", now=BASE + 30 * 24 * HOUR)
    assert ">Data through (upper)" in overview and ">Last refresh (refresh time)" in overview
    assert ">Mint to commit" in overview
    assert f'data-refreshed="{committed}"' in _row(overview, "sales")
