"""Issue 23 item 1 through a real scheduler on 127.0.0.1: a view ``{every: 1m, aligned_to: <fixed time>}`` and a
view ``{at: [...]}``, both unpaused at an unaligned moment, run exactly on the aligned (or listed) instants: the
run ids, logical dates (the refresh times), data-interval starts and ends are those instants, and the DAG's
"next run" is the next of them.

The views read an upstream view that never refreshes, so each run mints "waiting for inputs" and stops there:
what is asserted is when the runs happen, not a Spark step (covered elsewhere).
"""

from __future__ import annotations

import datetime as dt
import time

import pytest

from mvsink.definitions import schedule as sched
from mvsink.definitions.view import Schedule
from tests.support.airflow import dags_folder, finished, running_airflow, runs, wait_for, xcom
from tests.support.data import PROJECT

pytestmark = [pytest.mark.airflow, pytest.mark.slow]

MIN = 60_000
ANCHOR = 1_767_225_617_000  # 2026-01-01T00:00:17Z: boundaries at :17 past every minute
EVERY = MIN


def iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse(value: str) -> int:
    when = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    return int(round(when.timestamp() * 1000))


def now_ms() -> int:
    return int(time.time() * 1000)


def write_views(views, *, listed: list[int]) -> None:
    from tests.support.viewfiles import write_view

    common = {"query": PROJECT.replace("orders", "up"), "sources": {"up": {"view": "up"}}}
    write_view(views, "up", query=PROJECT, sources={"orders": "orders"}, target="views/up", as_of=ANCHOR)
    write_view(
        views,
        "aligned",
        target="views/aligned",
        as_of=iso(ANCHOR),
        schedule={"every": "1m", "aligned_to": iso(ANCHOR)},
        **common,
    )
    write_view(views, "listed", target="views/listed", as_of=iso(ANCHOR), schedule={"at": listed}, **common)


def unpause(af, dag_id: str) -> int:
    status, body = af.api("PATCH", f"/api/v2/dags/{dag_id}", {"is_paused": False}, token=af.token())
    assert status == 200 and body["is_paused"] is False, (status, body)
    return now_ms()


def unpause_mid_period(af, dag_id: str, schedule: Schedule) -> int:
    """Unpause ``dag_id`` 20 to 35 s into a period and return that period's boundary.

    The API server on SQLite can stall on a lock (CI saw a PATCH time out after 60 s). A PATCH is sent with a 12 s
    timeout; whether it took is then read back. The unpause took effect between sending and reading back; when both
    are in one period, that period's boundary is the one due. Otherwise it is tried again in a later period.
    """
    for _ in range(3):
        wait_for(
            "an unaligned moment",
            lambda: 20_000 <= (now_ms() - ANCHOR) % EVERY <= 35_000,
            timeout=EVERY / 1000 + 5,
            poll=0.5,
        )
        sent = now_ms()
        try:
            af.api("PATCH", f"/api/v2/dags/{dag_id}", {"is_paused": False}, token=af.token(), timeout=12)
        except TimeoutError:
            pass
        paused = dag(af, dag_id)["is_paused"]
        seen = now_ms()
        b0 = sched.at_or_before(schedule, sent)
        assert b0 is not None
        if not paused:
            assert sched.at_or_before(schedule, seen) == b0, (
                f"{dag_id} was unpaused at an unknown moment across a boundary: sent at {iso(sent)}, seen {iso(seen)}"
            )
            return b0
    raise AssertionError(f"{dag_id} could not be unpaused in three tries")


def dag(af, dag_id: str) -> dict:
    status, body = af.api("GET", f"/api/v2/dags/{dag_id}/details", token=af.token())
    assert status == 200, (status, body)
    return dict(body)


def check_runs_on(af, dag_id: str, expected: list[int]) -> list[dict]:
    """Every scheduled run of ``dag_id`` is on one of ``expected`` (in order) and succeeded; refresh time = instant."""
    rs = [r for r in runs(af, dag_id) if r["run_type"] == "scheduled"]
    assert [parse(r["logical_date"]) for r in rs] == expected, [r["dag_run_id"] for r in rs]
    for r, t in zip(rs, expected, strict=True):
        assert r["dag_run_id"] == f"scheduled__{dt.datetime.fromtimestamp(t / 1000, dt.UTC).isoformat()}"
        assert parse(r["data_interval_start"]) == parse(r["data_interval_end"]) == parse(r["run_after"]) == t, r
        assert r["state"] == "success", r
        summary = xcom(af, dag_id, r["dag_run_id"], "mint", "summary")
        assert summary["refresh_time"] == t and summary["status"] == "waiting_for_inputs", summary
    return rs


def test_every_and_at_schedules_run_exactly_on_their_instants(tmp_path):
    data, dags = dags_folder(tmp_path)
    written = now_ms()
    base = written - written % 1000 + 250  # listed times with milliseconds: .250
    listed = [base - 5 * MIN, base - 2 * MIN, base + 3 * MIN, base + 600 * MIN]
    write_views(dags / "views", listed=listed)
    with running_airflow(
        tmp_path,
        dags,
        data,
        wanted={"mv_aligned", "mv_listed", "mv_up"},
        timeout=240,
        extra_env={"AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True"},
    ) as af:
        # the at-list: unpaused as soon as it is parsed, before its third time
        t_listed = unpause(af, "mv_listed")
        assert listed[1] < t_listed < listed[2] - 30_000, "the DAGs took too long to parse for this test's times"
        # the every-1m view: unpaused in the middle of a period (20 to 35 s after a boundary)
        schedule = Schedule(kind="interval", every_ms=EVERY, aligned_to_ms=ANCHOR)
        b0 = unpause_mid_period(af, "mv_aligned", schedule)  # the latest boundary due at unpause: run at once
        expected = [b0, b0 + EVERY]
        # wait for the second boundary's run to finish (the first runs at once)
        wait_for(
            "two scheduled runs of mv_aligned",
            lambda: (
                len(rs := [r for r in runs(af, "mv_aligned") if r["run_type"] == "scheduled"]) >= 2 and finished(rs)
            ),
            timeout=(b0 + 2 * EVERY - now_ms()) / 1000 + 120,
        )
        check_runs_on(af, "mv_aligned", expected)
        # the next run is the next boundary, from the same timetable
        details = dag(af, "mv_aligned")
        assert parse(details["next_dagrun_logical_date"]) == b0 + 2 * EVERY, details
        assert parse(details["next_dagrun_run_after"]) == b0 + 2 * EVERY, details
        assert details["timetable_summary"] == "every 1m 00s", details

        # the at-list: the 5m-ago time is skipped (catch-up off), the 2m-ago one ran at unpause, +3m on time
        wait_for(
            "two scheduled runs of mv_listed",
            lambda: len(rs := [r for r in runs(af, "mv_listed") if r["run_type"] == "scheduled"]) >= 2 and finished(rs),
            timeout=(listed[2] - now_ms()) / 1000 + 120,
        )
        rs = check_runs_on(af, "mv_listed", listed[1:3])
        assert rs[1]["dag_run_id"].endswith(".250000+00:00")
        assert parse(rs[1]["start_date"]) >= listed[2]  # not before its time
        assert parse(dag(af, "mv_listed")["next_dagrun_logical_date"]) == listed[3]
