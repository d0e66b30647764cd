"""Issue 23 item 1: the timetable of ``{every, aligned_to}`` and ``{at: [...]}`` schedules.

The arithmetic (:mod:`mvsink.definitions.schedule`) in epoch milliseconds, then the Airflow shell
(:class:`mvsink.airflow.timetable.MvsinkTimetable`): next run, catch-up on and off, the DAG's start and
end, serialization, and UTC arithmetic across a daylight-saving change of Europe (none happens in UTC).
"""

from __future__ import annotations

import datetime as dt

import pytest

from mvsink.definitions import schedule as sched
from mvsink.definitions.view import Schedule

pytestmark = pytest.mark.unit

MIN = 60_000
HOUR = 60 * MIN
T0 = 1_795_591_200_000  # 2026-11-25T07:20:00Z
EVERY_2M = Schedule(kind="interval", every_ms=2 * MIN, aligned_to_ms=T0 + 30_000)  # ...:00:30, :02:30, ...
LISTED = Schedule(kind="at", at_ms=(T0 + MIN, T0 + 3 * MIN, T0 + 10 * MIN))


def utc(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).isoformat(timespec="milliseconds")


def test_aligned_instants_on_both_sides_of_the_anchor():
    a = T0 + 30_000
    assert sched.at_or_after(EVERY_2M, a) == a
    assert sched.at_or_after(EVERY_2M, a + 1) == a + 2 * MIN
    assert sched.after(EVERY_2M, a) == a + 2 * MIN
    assert sched.at_or_before(EVERY_2M, a + 2 * MIN - 1) == a
    assert sched.at_or_before(EVERY_2M, a - 1) == a - 2 * MIN  # before the anchor too
    assert sched.at_or_after(EVERY_2M, a - 5 * MIN) == a - 4 * MIN
    # the default anchor is the epoch: every: 1h fires on the hour
    hourly = Schedule(kind="interval", every_ms=HOUR, aligned_to_ms=0)
    assert utc(sched.after(hourly, T0 + 123)) == "2026-11-25T08:00:00.000+00:00"


def test_listed_instants():
    assert sched.at_or_after(LISTED, T0) == T0 + MIN
    assert sched.after(LISTED, T0 + MIN) == T0 + 3 * MIN
    assert sched.at_or_before(LISTED, T0 + 5 * MIN) == T0 + 3 * MIN
    assert sched.at_or_before(LISTED, T0) is None
    assert sched.after(LISTED, T0 + 10 * MIN) is None
    assert sched.upcoming(LISTED, T0 + 2 * MIN, count=5) == [T0 + 3 * MIN, T0 + 10 * MIN]


def test_unpaused_at_an_unaligned_moment_without_catchup():
    """The bug of DeltaTriggerTimetable: unpaused at 07:23:41.846, runs came at .846 forever after."""
    a = T0 + 30_000
    unpaused = T0 + 3 * MIN + 41_846  # 07:23:41.846
    first = sched.next_run(EVERY_2M, last=None, earliest=a - 60 * MIN, latest=None, catchup=False, now=unpaused)
    assert first == a + 2 * MIN  # 07:22:30: the latest due instant, run at once, with that logical date
    second = sched.next_run(EVERY_2M, last=first, earliest=a - 60 * MIN, latest=None, catchup=False, now=unpaused + 5)
    assert second == a + 4 * MIN  # 07:24:30, on time
    # paused for a while: the missed instants are skipped, the latest due one runs
    later = sched.next_run(EVERY_2M, last=second, earliest=None, latest=None, catchup=False, now=a + 17 * MIN)
    assert later == a + 16 * MIN
    assert all(utc(t).endswith(":30.000+00:00") for t in (first, second, later))


def test_catchup_runs_every_missed_instant_in_order():
    a = T0 + 30_000
    start = a - 6 * MIN
    now = a + 3 * MIN
    runs, last = [], None
    while (nxt := sched.next_run(EVERY_2M, last=last, earliest=start, latest=None, catchup=True, now=now)) <= now:
        runs.append(nxt)
        last = nxt
    assert runs == [a - 6 * MIN, a - 4 * MIN, a - 2 * MIN, a, a + 2 * MIN]
    assert (
        last is not None
        and sched.next_run(EVERY_2M, last=last, earliest=start, latest=None, catchup=True, now=now) == a + 4 * MIN
    )


def test_start_in_the_future_and_end():
    a = T0 + 30_000
    # the DAG starts after now: its first run is its start (the first instant at or after as_of)
    start = sched.first_at_or_after(EVERY_2M, a + 7 * MIN)
    assert start == a + 8 * MIN
    for catchup in (True, False):
        assert sched.next_run(EVERY_2M, last=None, earliest=start, latest=None, catchup=catchup, now=a) == start
    # until: nothing after the end (inclusive)
    assert sched.next_run(EVERY_2M, last=a, earliest=None, latest=a + 2 * MIN, catchup=True, now=a) == a + 2 * MIN
    assert sched.next_run(EVERY_2M, last=a + 2 * MIN, earliest=None, latest=a + 3 * MIN, catchup=True, now=a) is None


def test_listed_times_with_and_without_catchup():
    start = T0  # as_of before every listed time
    # catch-up off, unpaused at +5m: the 1m time is skipped, the 3m one (the latest due) runs, then 10m
    now = T0 + 5 * MIN
    first = sched.next_run(LISTED, last=None, earliest=start, latest=None, catchup=False, now=now)
    assert first == T0 + 3 * MIN
    assert sched.next_run(LISTED, last=first, earliest=start, latest=None, catchup=False, now=now) == T0 + 10 * MIN
    assert sched.next_run(LISTED, last=T0 + 10 * MIN, earliest=start, latest=None, catchup=False, now=now) is None
    # catch-up on: every listed time in order
    runs, last = [], None
    while (nxt := sched.next_run(LISTED, last=last, earliest=start, latest=None, catchup=True, now=now)) is not None:
        runs.append(nxt)
        last = nxt
    assert runs == list(LISTED.at_ms)
    # unpaused before the first time: the first time, on time
    assert sched.next_run(LISTED, last=None, earliest=start, latest=None, catchup=False, now=T0) == T0 + MIN
    # an end before the last time drops it; a start after every time leaves nothing
    assert sched.next_run(LISTED, last=T0 + 3 * MIN, earliest=start, latest=T0 + 9 * MIN, catchup=True, now=now) is None
    assert sched.next_run(LISTED, last=None, earliest=T0 + HOUR, latest=None, catchup=True, now=now) is None
    assert sched.first_at_or_after(LISTED, T0 + HOUR) == T0 + HOUR


def test_utc_arithmetic_has_no_daylight_saving_shift():
    """Europe left summer time on 2026-10-25 at 01:00Z: in UTC a 1h schedule is still every 3,600,000 ms."""
    anchor = 1_792_800_000_000  # 2026-10-24T00:00:00Z
    hourly = Schedule(kind="interval", every_ms=HOUR, aligned_to_ms=anchor)
    daily = Schedule(kind="interval", every_ms=24 * HOUR, aligned_to_ms=anchor)
    times = sched.upcoming(hourly, anchor, count=48)
    assert [b - a for a, b in zip(times, times[1:], strict=False)] == [HOUR] * 47
    assert [utc(t) for t in sched.upcoming(daily, anchor, count=3)] == [
        "2026-10-25T00:00:00.000+00:00",
        "2026-10-26T00:00:00.000+00:00",
        "2026-10-27T00:00:00.000+00:00",
    ]


# --------------------------------------------------------------------------- the Airflow timetable


def _pdt(ms: int):
    from mvsink.airflow.timetable import from_ms

    return from_ms(ms)


def test_airflow_timetable_next_run_and_data_interval(monkeypatch):
    from airflow.timetables.base import DataInterval, TimeRestriction

    from mvsink.airflow import timetable as tt

    a = T0 + 30_000
    unpaused = dt.datetime(2026, 11, 25, 7, 23, 41, 846_000, tzinfo=dt.UTC)
    monkeypatch.setattr(tt, "now", lambda: unpaused)
    table = tt.MvsinkTimetable(EVERY_2M)
    restriction = TimeRestriction(earliest=_pdt(a - HOUR), latest=None, catchup=False)
    info = table.next_dagrun_info(last_automated_data_interval=None, restriction=restriction)
    assert info is not None
    assert info.run_after.isoformat() == info.logical_date.isoformat() == "2026-11-25T07:22:30+00:00"
    assert info.data_interval.start == info.data_interval.end == info.run_after
    nxt = table.next_dagrun_info(last_automated_data_interval=info.data_interval, restriction=restriction)
    assert nxt is not None and nxt.data_interval.end.isoformat() == "2026-11-25T07:24:30+00:00"
    # the last run was made by the old timetable at an odd moment: the next one is back on the boundary
    odd = _pdt(T0 + 3 * MIN + 41_846)
    back = table.next_dagrun_info(last_automated_data_interval=DataInterval(odd, odd), restriction=restriction)
    assert back is not None and back.logical_date.isoformat() == "2026-11-25T07:24:30+00:00"
    # catch-up on: from the start, in order
    caught = table.next_dagrun_info(
        last_automated_data_interval=None, restriction=TimeRestriction(_pdt(a - 4 * MIN), None, True)
    )
    assert caught is not None and caught.logical_date.isoformat() == "2026-11-25T07:16:30+00:00"
    # a manual run refreshes when triggered
    manual = table.infer_manual_data_interval(run_after=unpaused)
    assert manual.start == manual.end == unpaused


def test_airflow_timetable_listed_times_and_serialization(monkeypatch):
    from airflow.timetables.base import TimeRestriction

    from mvsink.airflow import timetable as tt

    monkeypatch.setattr(tt, "now", lambda: dt.datetime.fromtimestamp((T0 + 5 * MIN) / 1000, dt.UTC))
    table = tt.MvsinkTimetable(LISTED)
    info = table.next_dagrun_info(last_automated_data_interval=None, restriction=TimeRestriction(_pdt(T0), None, False))
    assert info is not None and info.data_interval.end.isoformat() == "2026-11-25T07:23:00+00:00"
    assert table.summary == "at 3 time(s)" and "2026-11-25T07:30:00" in table.description
    for s in (LISTED, EVERY_2M, Schedule(kind="interval", every_ms=HOUR, aligned_to_ms=0, catchup=True)):
        t = tt.MvsinkTimetable(s)
        back = tt.MvsinkTimetable.deserialize(t.serialize())
        assert back == t and back.schedule == s
    assert tt.MvsinkTimetable(EVERY_2M).summary == "every 2m 00s"
    assert tt.MvsinkTimetable(EVERY_2M).description == "every 2m 00s aligned to 2026-11-25T07:20:30.000Z"
    with pytest.raises(ValueError, match="every/at"):
        tt.MvsinkTimetable(Schedule(kind="cron", cron="0 * * * *"))


def test_plugin_registers_the_timetable():
    from mvsink.airflow.plugin.airflow_plugin import MvsinkPlugin
    from mvsink.airflow.timetable import MvsinkTimetable

    assert MvsinkTimetable in MvsinkPlugin.timetables


def test_backfill_walks_the_aligned_instants_between_its_dates(monkeypatch):
    """`airflow backfill create` asks the timetable for every run between two dates (catch-up on)."""
    from airflow.timetables.base import TimeRestriction

    from mvsink.airflow import timetable as tt

    monkeypatch.setattr(tt, "now", lambda: dt.datetime(2030, 1, 1, tzinfo=dt.UTC))
    table = tt.MvsinkTimetable(EVERY_2M)
    a = T0 + 30_000
    restriction = TimeRestriction(_pdt(a - 3 * MIN), _pdt(a + 4 * MIN), True)  # unaligned from, aligned to
    got, info = [], None
    while (info := table.next_dagrun_info_v2(last_dagrun_info=info, restriction=restriction)) is not None:
        got.append(info.logical_date.isoformat())
    assert got == [
        "2026-11-25T07:18:30+00:00",
        "2026-11-25T07:20:30+00:00",
        "2026-11-25T07:22:30+00:00",
        "2026-11-25T07:24:30+00:00",
    ]
