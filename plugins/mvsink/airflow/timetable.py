"""The Airflow timetable of ``{every: E, aligned_to: A}`` and ``{at: [...]}`` schedules.

A thin shell over :mod:`mvsink.definitions.schedule` (where the arithmetic lives, Airflow-free): runs land
exactly on the aligned instants (or the listed ones) whatever the time the DAG was unpaused, and each
scheduled run's logical date, data interval start and end are that instant. Registered by the plugin
(:class:`mvsink.airflow.plugin.airflow_plugin.MvsinkPlugin`), which the scheduler needs to deserialize it.
"""

from __future__ import annotations

import calendar
import datetime as _dt
from typing import Any

from airflow.timetables.base import DagRunInfo, DataInterval, TimeRestriction, Timetable

from mvsink.definitions import schedule as sched
from mvsink.definitions.view import Schedule
from mvsink.times import format_duration, format_time

_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)


def to_ms(when: _dt.datetime) -> int:
    """Epoch milliseconds of an aware datetime (exact: no float rounding; sub-milliseconds dropped)."""
    return calendar.timegm(when.utctimetuple()) * 1000 + when.microsecond // 1000


def from_ms(ms: int) -> Any:
    """A pendulum UTC DateTime (what Airflow's timetables hand around) at epoch milliseconds."""
    import pendulum

    return pendulum.instance(_EPOCH + _dt.timedelta(milliseconds=ms))


def now() -> _dt.datetime:
    """The scheduler's clock (a seam for tests)."""
    return _dt.datetime.now(_dt.UTC)


class MvsinkTimetable(Timetable):
    """Runs at ``aligned_to + k*every`` (``every`` schedules) or at each listed time (``at`` schedules)."""

    def __init__(self, schedule: Schedule) -> None:
        if not sched.is_timed(schedule):
            raise ValueError(f"MvsinkTimetable handles every/at schedules, not {schedule.kind}")
        self.schedule = schedule
        if schedule.kind == "interval":
            self.description = (
                f"every {format_duration(schedule.every_ms or 0)} aligned to {format_time(schedule.aligned_to_ms or 0)}"
            )
            self._summary = f"every {format_duration(schedule.every_ms or 0)}"
        else:
            n = len(schedule.at_ms)
            self.description = (
                f"at {n} listed time(s), {format_time(schedule.at_ms[0])} to {format_time(schedule.at_ms[-1])}"
            )
            self._summary = f"at {n} time(s)"

    @property
    def summary(self) -> str:
        return self._summary

    def __repr__(self) -> str:
        return f"MvsinkTimetable({self.description})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MvsinkTimetable) and other.schedule == self.schedule

    def __hash__(self) -> int:
        return hash(self.schedule)

    def next_dagrun_info(
        self, *, last_automated_data_interval: DataInterval | None, restriction: TimeRestriction
    ) -> DagRunInfo | None:
        when = sched.next_run(
            self.schedule,
            last=None if last_automated_data_interval is None else to_ms(last_automated_data_interval.end),
            earliest=None if restriction.earliest is None else to_ms(restriction.earliest),
            latest=None if restriction.latest is None else to_ms(restriction.latest),
            catchup=restriction.catchup,
            now=to_ms(now()),
        )
        return None if when is None else DagRunInfo.exact(from_ms(when))

    def infer_manual_data_interval(self, *, run_after: Any) -> DataInterval:
        # a manual run refreshes when it is triggered (or at its refresh_time param), as before
        return DataInterval.exact(run_after)

    def serialize(self) -> dict[str, Any]:
        s = self.schedule
        return {
            "kind": s.kind,
            "every_ms": s.every_ms,
            "aligned_to_ms": s.aligned_to_ms,
            "at_ms": list(s.at_ms),
            "catchup": s.catchup,
        }

    @classmethod
    def deserialize(cls, data: dict[str, Any]) -> Timetable:
        return cls(
            Schedule(
                kind=data["kind"],
                every_ms=data.get("every_ms"),
                aligned_to_ms=data.get("aligned_to_ms"),
                at_ms=tuple(data.get("at_ms") or ()),
                catchup=bool(data.get("catchup", False)),
            )
        )
