"""Issue 14: ``mvsink status`` shows the lag, ``mvsink status --all [--json]`` lists every view with its
freshness, and a view past its ``max_lag`` is flagged stale (real Delta logs written by mint and append)."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest
from deltalake import DeltaTable

from mvsink.cli.app import main
from mvsink.definitions.catalog import Catalog
from mvsink.readers.freshness import now_ms
from mvsink.times import format_time
from tests.support.refreshlog import BASE, HOUR, appends, refresh, source, view_file

pytestmark = pytest.mark.unit


def _cli(*args: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(args))
    return rc, out.getvalue() + err.getvalue()


@pytest.fixture
def folder(env):
    data, views = env
    source(data)
    view_file(views, "hourly", extra="max_lag: 1h\n")  # refreshed in 2026-01: far past its target now
    view_file(views, "relaxed", extra="max_lag: 36500d\n")  # a target it meets
    view_file(views, "untargeted")  # no target: never stale
    view_file(
        views,
        "downstream",
        extra="max_lag: 36500d\nschedule: {on_commit: [hourly]}\n",
        sources="{h: {view: hourly}}",
        query="SELECT id, qty FROM h",
    )
    (views / "broken.yaml").write_text("name: broken\nquery: SELECT 1\n")
    catalog = Catalog(views)
    for name in ("hourly", "relaxed", "untargeted", "downstream"):
        refresh(
            catalog,
            name,
            BASE,
            added=2,
            nbytes=1000,
            checks={"positive": {"action": "error", "rows": 1}} if name == "relaxed" else None,
        )
    refresh(catalog, "hourly", BASE + HOUR)  # no source moved: a no-change append
    return data, views


def test_status_all_json_flags_the_view_past_its_target(folder):
    data, views = folder
    t0 = now_ms()
    rc, out = _cli("status", "--all", "--json", "--views-dir", str(views))
    assert rc == 1, out  # a stale view (or a broken file) makes status --all fail, for monitoring
    rows = json.loads(out)
    by = {r["view"]: r for r in rows if r.get("view")}
    assert sorted(by) == ["downstream", "hourly", "relaxed", "untargeted"]
    assert [r["file"].endswith("broken.yaml") for r in rows if r.get("view") is None] == [True]
    assert (by["hourly"]["stale"], by["relaxed"]["stale"], by["untargeted"]["stale"], by["downstream"]["stale"]) == (
        True,
        False,
        False,
        False,
    )
    h = by["hourly"]
    assert h["final_through"] == BASE + HOUR and h["final_through_utc"] == format_time(BASE + HOUR)
    assert h["upper"] == BASE + HOUR + 1 and h["upper_utc"] == format_time(BASE + HOUR + 1)
    assert h["max_lag_ms"] == HOUR and t0 - (BASE + HOUR) <= h["lag_ms"] <= now_ms() - (BASE + HOUR)
    assert h["last_refresh"]["mode_kind"] == "unchanged" and h["last_refresh"]["refresh_time"] == BASE + HOUR
    assert h["downstream"] == ["downstream"] and by["downstream"]["upstream"] == ["hourly"]
    assert by["untargeted"]["max_lag_ms"] is None
    assert by["relaxed"]["error_rows"] == 1 and by["relaxed"]["checks"] == {"positive": {"action": "error", "rows": 1}}
    # the values are the Delta log's
    log = appends(h["target"])
    assert h["version"] == DeltaTable(h["target"]).version() == log[-1]["version"]
    assert h["last_refresh"]["version"] == log[-1]["version"]
    assert h["sources"] == [
        {
            "name": "orders",
            "kind": "path",
            "table": str((data / "orders").resolve()),
            "view": None,
            "version_read": log[-1]["sources"]["orders"],
        }
    ]


def test_status_all_text_one_line_per_view(folder):
    _, views = folder
    rc, out = _cli("status", "--all", "--views-dir", str(views))
    lines = out.strip().splitlines()
    assert rc == 1 and len(lines) == 5, out
    assert lines[0].startswith("broken") is False  # views first (by name), then broken files
    assert [ln.split(":")[0] for ln in lines[:4]] == ["downstream", "STALE hourly", "relaxed", "untargeted"]
    assert "(max_lag 1h 00m: STALE)" in lines[1] and "last 2026-01-01T01:00:00.000Z unchanged +0 -0" in lines[1]
    assert "(max_lag 36500d 0h: fresh)" in lines[2] and "1 error row(s)" in lines[2]
    assert "(no max_lag)" in lines[3]
    assert "broken.yaml: ERROR" in lines[4]


def test_status_of_one_view_shows_its_lag(folder):
    _, views = folder
    rc, out = _cli("status", "hourly", "--views-dir", str(views))
    assert rc == 0, out
    assert "lag       " in out and "(max_lag 1h 00m: STALE)" in out, out
    assert "no change" in out and "full diff" in out  # each append's mode
    rc, out = _cli("status", "hourly", "--json", "--views-dir", str(views))
    st = json.loads(out)
    assert st["stale"] is True and st["max_lag_ms"] == HOUR and st["lag_ms"] > 0


def test_status_needs_a_view_or_all(folder):
    _, views = folder
    assert _cli("status", "--views-dir", str(views))[0] == 2
    assert _cli("status", "hourly", "--all", "--views-dir", str(views))[0] == 2


def test_all_fresh_exits_zero(env):
    data, views = env
    source(data)
    view_file(views, "ok", extra="max_lag: 36500d\n")
    refresh(Catalog(views), "ok", BASE)
    rc, out = _cli("status", "--all", "--views-dir", str(views))
    assert rc == 0 and out.startswith("ok: final through 2026-01-01T00:00:00.000Z"), out


def test_the_overview_rereads_a_log_only_after_a_new_commit(env):
    """all_views caches each view's status until the table's newest commit file changes; the lag and staged
    batches are always current."""
    from mvsink.core.staging import STAGING
    from mvsink.readers.overview import all_views

    data, views = env
    source(data)
    view_file(views, "v", extra="max_lag: 1h\n")
    catalog = Catalog(views)
    refresh(catalog, "v", BASE)
    first = all_views(catalog, now=BASE + HOUR)[0]
    assert first["final_through"] == BASE and first["lag_ms"] == HOUR and first["stale"] is False
    again = all_views(catalog, now=BASE + 2 * HOUR)[0]  # from the cache: the lag still moves
    assert again["final_through"] == BASE and again["lag_ms"] == 2 * HOUR and again["stale"] is True
    refresh(catalog, "v", BASE + 2 * HOUR)  # a new commit: read again
    after = all_views(catalog, now=BASE + 2 * HOUR)[0]
    assert after["final_through"] == BASE + 2 * HOUR and after["lag_ms"] == 0 and after["stale"] is False
    assert after["version"] == first["version"] + 1 and after["last_refresh"]["refresh_time"] == BASE + 2 * HOUR
    staging = Path(after["target"]) / STAGING
    staging.mkdir(exist_ok=True)
    batch = f"v__{after['upper']}_{after['upper'] + HOUR}__run-1"
    (staging / f"{batch}.json").write_text("{}")  # a batch in flight (no new commit)
    assert all_views(catalog)[0]["in_flight"] == [batch]
