"""Issue 14: the freshness target (max_lag), lag and stale, and the pure helpers the status and the UI share."""

from __future__ import annotations

import pytest

from mvsink.definitions.viewfile import parse_view
from mvsink.exceptions import ViewDefinitionError
from mvsink.readers.freshness import format_freshness, freshness, mode_kind, mode_label
from mvsink.readers.overview import describe_schedule, history_points, lineage
from mvsink.times import format_duration, parse_time

pytestmark = pytest.mark.unit

AS_OF = parse_time("2026-01-01T00:00:00Z")
H = 3_600_000


def _view(tmp_path, extra: str = "", name: str = "v", sources: str = "{orders: orders}", query: str = "") -> object:
    text = (
        f"name: {name}\nquery: {query or 'SELECT id FROM orders'}\nsources: {sources}\ntarget: t/{name}\n"
        f"as_of: 2026-01-01T00:00:00Z\n{extra}"
    )
    return parse_view(text, file=str(tmp_path / f"{name}.yaml"), data_root=tmp_path)


def test_max_lag_is_a_duration_and_optional(tmp_path):
    assert _view(tmp_path).max_lag_ms is None
    assert _view(tmp_path, "max_lag: 90m\n").max_lag_ms == 90 * 60_000
    assert _view(tmp_path, "max_lag: 2h\n").max_lag_ms == 2 * H


@pytest.mark.parametrize("bad", ["soon", "0h", "-5m", "2 hours", "[1h]"])
def test_a_bad_max_lag_names_the_field_and_the_fix(tmp_path, bad):
    with pytest.raises(ViewDefinitionError) as exc:
        _view(tmp_path, f"max_lag: {bad}\n")
    msg = str(exc.value)
    assert "field 'max_lag'" in msg and "Fix:" in msg and "e.g. max_lag: 2h" in msg, msg


def test_lag_is_now_minus_the_newest_final_time(tmp_path):
    v = _view(tmp_path, "max_lag: 1h\n")
    final = AS_OF + 5 * H
    f = freshness(v, final, now=final + 30 * 60_000)
    assert f == {"lag_ms": 30 * 60_000, "max_lag_ms": H, "stale": False, "checked_at": final + 30 * 60_000}
    assert freshness(v, final, now=final + H)["stale"] is False  # exactly at the target: still fresh
    assert freshness(v, final, now=final + H + 1)["stale"] is True  # past it: stale
    assert freshness(_view(tmp_path), final, now=final + 100 * H)["stale"] is False  # no target: never stale


def test_a_view_with_nothing_final_has_no_lag_and_is_stale_once_as_of_plus_max_lag_passed(tmp_path):
    v = _view(tmp_path, "max_lag: 1h\n")
    assert freshness(v, None, now=AS_OF - H) == {
        "lag_ms": None,
        "max_lag_ms": H,
        "stale": False,
        "checked_at": AS_OF - H,
    }
    assert freshness(v, None, now=AS_OF + H)["stale"] is False
    assert freshness(v, None, now=AS_OF + H + 1)["stale"] is True
    assert freshness(v, AS_OF - 1, now=AS_OF + 2 * H)["lag_ms"] is None  # only bumped to as_of: nothing final


def test_a_view_whose_schedule_ended_is_judged_at_until(tmp_path):
    v = _view(tmp_path, "max_lag: 1h\nuntil: 2026-01-02T00:00:00Z\n")
    until = parse_time("2026-01-02T00:00:00Z")
    f = freshness(v, until - 30 * 60_000, now=until + 1000 * H)
    assert f["lag_ms"] == 30 * 60_000 and f["stale"] is False


def test_format_freshness():
    assert format_freshness({"lag_ms": 302_000, "max_lag_ms": H, "stale": False}) == "5m 02s (max_lag 1h 00m: fresh)"
    assert format_freshness({"lag_ms": 3 * 86_400_000 + 2 * H, "max_lag_ms": 2 * H, "stale": True}) == (
        "3d 2h (max_lag 2h 00m: STALE)"
    )
    assert format_freshness({"lag_ms": None, "max_lag_ms": None, "stale": False}) == "never refreshed (no max_lag)"


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (0, "0 ms"),
        (850, "850 ms"),
        (12_400, "12.4 s"),
        (250_000, "4m 10s"),
        (2 * H + 5 * 60_000, "2h 05m"),
        (3 * 86_400_000 + 4 * H, "3d 4h"),
        (-1500, "-1.5 s"),
    ],
)
def test_format_duration(ms, text):
    assert format_duration(ms) == text


def test_modes():
    assert [
        mode_kind(m) for m in ("incremental", "incremental:aggregate", "full", "full:foreign", "unchanged", "")
    ] == ["incremental", "incremental", "full", "full", "unchanged", ""]
    assert [mode_label(m) for m in ("incremental", "full", "unchanged", None)] == [
        "incremental",
        "full diff",
        "no change",
        "",
    ]


def test_schedule_and_lineage(tmp_path):
    up = _view(tmp_path, "schedule: '0 * * * *'\n", name="up")
    down = _view(
        tmp_path, "schedule: {on_commit: [up]}\n", name="down", sources="{u: {view: up}}", query="SELECT id FROM u"
    )
    other = _view(tmp_path, "schedule: {every: 1h, aligned_to: 2026-01-01T00:00:00Z}\n", name="other")
    views = {v.name: v for v in (up, down, other)}
    assert describe_schedule(up.schedule) == "cron 0 * * * *"
    assert describe_schedule(down.schedule) == "on commit of up"
    assert describe_schedule(other.schedule) == "every 1h 00m from 2026-01-01T00:00:00.000Z"
    assert describe_schedule(_view(tmp_path).schedule) == "manual"
    assert lineage(up, views) == {"upstream": [], "downstream": ["down"]}
    assert lineage(down, views) == {"upstream": ["up"], "downstream": []}


def test_history_points_carry_since_and_upper_after_each_commit():
    newest_first = [
        {
            "version": 5,
            "operation": "append",
            "lower": 30,
            "upper": 40,
            "refresh_time": 39,
            "committed_ms": 5,
            "mode": "incremental",
            "rows_added": 1,
        },
        {"version": 4, "operation": "compact", "since": 25, "committed_ms": 4},
        {"version": 3, "operation": "DELETE", "foreign": True, "committed_ms": 3},
        {
            "version": 2,
            "operation": "append",
            "lower": 10,
            "upper": 30,
            "refresh_time": 29,
            "committed_ms": 2,
            "mode": "full",
        },
        {"version": 1, "operation": "bump", "lower": 10, "upper": 30, "committed_ms": 1},
        {"version": 0, "operation": "create", "committed_ms": 0},
    ]
    pts = history_points(newest_first, as_of=10)
    assert [(p["version"], p["since"], p["upper"]) for p in pts] == [
        (0, 10, 0),
        (1, 10, 10),
        (2, 10, 30),
        (3, 10, 30),
        (4, 25, 30),
        (5, 25, 40),
    ]
    assert [p["foreign"] for p in pts] == [False, False, False, True, False, False]
    assert pts[5]["mode_kind"] == "incremental" and pts[2]["mode_kind"] == "full" and pts[5]["rows_added"] == 1


def test_the_next_run_comes_from_the_timetables_arithmetic(tmp_path):
    """Issue 23: the page's "next run" of an every/at view is the instant its DAG's timetable runs on next."""
    from mvsink.readers.overview import view_summary

    every = _view(tmp_path, "schedule: {every: 2m, aligned_to: 2026-01-01T00:00:17Z}\n", name="every")
    listed = _view(
        tmp_path, "schedule: {at: [2026-01-01T05:00:00.250Z, 2026-01-02T00:00:00Z]}\nuntil: 2026-01-01T12:00:00Z\n"
    )
    cron = _view(tmp_path, "schedule: '0 * * * *'\n", name="cron")
    now = parse_time("2026-01-01T03:00:40Z")
    s = view_summary(every, {"every": every}, now=now)
    assert s["next_run"] == parse_time("2026-01-01T03:02:17Z") and s["next_run_utc"] == "2026-01-01T03:02:17.000Z"
    s = view_summary(listed, {"v": listed}, now=now)
    assert s["next_run_utc"] == "2026-01-01T05:00:00.250Z"
    assert view_summary(listed, {"v": listed}, now=parse_time("2026-01-01T06:00:00Z"))["next_run"] is None  # until
    assert view_summary(cron, {"cron": cron}, now=now)["next_run"] is None  # Airflow's cron: not ours to say
    # before as_of: the first instant at or after as_of
    early = view_summary(every, {"every": every}, now=AS_OF - 10 * H)
    assert early["next_run_utc"] == "2026-01-01T00:00:17.000Z"
