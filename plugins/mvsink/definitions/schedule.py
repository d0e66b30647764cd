"""When a view's ``{every, aligned_to}`` or ``{at: [...]}`` schedule fires: plain UTC arithmetic on epoch
milliseconds (no time zones, so no daylight-saving shifts), shared by the Airflow timetable
(:mod:`mvsink.airflow.timetable`), the "Materialized views" page and ``mvsink status --all``.

Semantics (docs/airflow.md, "Schedules"):

- ``{every: E, aligned_to: A}`` fires at every instant ``A + k*E`` (k any integer; ``aligned_to`` defaults
  to the epoch, so ``every: 1h`` fires on the hour), whenever the DAG was unpaused.
- ``{at: [T1, T2, ...]}`` fires at each listed instant once.
- A scheduled run's refresh time (its logical date) and its data interval's start and end are that
  instant exactly.
- Catch-up off (the default): a DAG that was paused, or created late, runs only the most recent due instant
  (if it has not run it yet), then each following instant on time. Catch-up on: every instant from the
  view's ``as_of`` (or the last scheduled run) onwards, in order.
- Nothing fires before the DAG's start (the first instant at or after ``as_of``) nor after ``until``.

Cron schedules stay Airflow's (``CronTriggerTimetable``): they are not handled here.
"""

from __future__ import annotations

import bisect

from mvsink.definitions.view import Schedule

TIMED_KINDS = ("interval", "at")


def is_timed(schedule: Schedule) -> bool:
    """True for the schedules this module computes (``every`` and ``at``)."""
    return schedule.kind in TIMED_KINDS


def _every(schedule: Schedule) -> tuple[int, int]:
    every = schedule.every_ms
    if not every or every <= 0:
        raise ValueError(f"an interval schedule needs a positive period, not {every!r}")
    return every, schedule.aligned_to_ms or 0


def at_or_after(schedule: Schedule, t: int) -> int | None:
    """The first firing instant ``>= t`` (None: none left)."""
    if schedule.kind == "interval":
        every, anchor = _every(schedule)
        return anchor - ((anchor - t) // every) * every  # anchor + ceil((t - anchor) / every) * every
    if schedule.kind == "at":
        i = bisect.bisect_left(schedule.at_ms, t)
        return schedule.at_ms[i] if i < len(schedule.at_ms) else None
    raise ValueError(f"a {schedule.kind} schedule has no firing instants here")


def after(schedule: Schedule, t: int) -> int | None:
    """The first firing instant ``> t`` (None: none left)."""
    return at_or_after(schedule, t + 1)


def at_or_before(schedule: Schedule, t: int) -> int | None:
    """The last firing instant ``<= t`` (None: none yet)."""
    if schedule.kind == "interval":
        every, anchor = _every(schedule)
        return anchor + ((t - anchor) // every) * every
    if schedule.kind == "at":
        i = bisect.bisect_right(schedule.at_ms, t)
        return schedule.at_ms[i - 1] if i > 0 else None
    raise ValueError(f"a {schedule.kind} schedule has no firing instants here")


def first_at_or_after(schedule: Schedule, as_of: int) -> int:
    """The DAG's start: the first firing instant at or after ``as_of`` (``as_of`` itself if none is left)."""
    first = at_or_after(schedule, as_of)
    return as_of if first is None else first


def next_run(
    schedule: Schedule,
    *,
    last: int | None,
    earliest: int | None,
    latest: int | None,
    catchup: bool,
    now: int,
) -> int | None:
    """The instant of the next scheduled run (None: no run to create now, or none ever again).

    ``last``: the end of the last scheduled run's data interval (None: no scheduled run yet);
    ``earliest`` / ``latest``: the DAG's start and end (inclusive); ``now``: the scheduler's clock.
    """
    nxt = after(schedule, last) if last is not None else None
    if last is not None and nxt is None:
        return None  # an at-list that is used up
    start = at_or_after(schedule, earliest) if earliest is not None else None
    if earliest is not None and start is None:
        return None  # every listed time is before the start
    if catchup:
        candidates = [c for c in (nxt, start) if c is not None]
        if not candidates:  # no start and no run yet: the first instant there is (an at-list), else the latest due
            first = schedule.at_ms[0] if schedule.kind == "at" else at_or_before(schedule, now)
            candidates = [first] if first is not None else []
    else:
        # never older than the latest due instant: missed instants are skipped, the latest is run once
        candidates = [c for c in (at_or_before(schedule, now), nxt, start) if c is not None]
        if not candidates:  # an at-list whose times are all ahead, no start, no run yet
            candidates = list(schedule.at_ms[:1])
    if not candidates:
        return None
    when = max(candidates)
    if latest is not None and when > latest:
        return None
    return when


def upcoming(schedule: Schedule, now: int, *, count: int = 1, until: int | None = None) -> list[int]:
    """The next ``count`` firing instants after ``now`` (fewer if the schedule ends first)."""
    out: list[int] = []
    t = now
    while len(out) < count:
        nxt = after(schedule, t)
        if nxt is None or (until is not None and nxt > until):
            break
        out.append(nxt)
        t = nxt
    return out


def next_instant(schedule: Schedule, now: int, *, as_of: int, until: int | None = None) -> int | None:
    """The next instant the view's DAG runs on after ``now`` (the page's "next run"): the first firing instant
    after ``now`` and at or after the DAG's start, none after ``until``; None for cron, on-commit and manual
    schedules (Airflow's) and for a schedule that has ended."""
    if not is_timed(schedule):
        return None
    start = first_at_or_after(schedule, as_of)
    nxt = after(schedule, max(now, start - 1))
    if nxt is None or (until is not None and nxt > until):
        return None
    return nxt
