"""A view table's frontier as read from its Delta log (:class:`Frontier`: ``upper``, ``since`` and the version read;
:data:`MISSING` for no table) and the check of a read time against it (:func:`check_read_time`). The table itself,
which reads and commits the frontier, is :class:`mvsink.core.table.ViewTable`."""

from __future__ import annotations

import dataclasses

from mvsink.exceptions import ReadTimeError
from mvsink.times import format_time


@dataclasses.dataclass(frozen=True)
class Frontier:
    upper: int
    since: int
    version: int  # Delta version read; -1 when the table does not exist


MISSING = Frontier(upper=0, since=0, version=-1)


def check_read_time(name: str, fr: Frontier, as_of_view: int, as_of: int | None) -> int:
    """The time to read (default ``upper - 1``), refusing times outside ``[max(since, as_of), upper)``."""
    lowest = max(fr.since, as_of_view)
    if fr.upper <= lowest:
        raise ReadTimeError(
            f"view {name}: nothing is readable yet (upper {fr.upper}, oldest readable time "
            f"{format_time(lowest)} ({lowest})). Fix: refresh the view at or after "
            f"{format_time(lowest)}."
        )
    t = fr.upper - 1 if as_of is None else as_of
    if t >= fr.upper:
        raise ReadTimeError(
            f"view {name}: {format_time(t)} ({t}) is at or past the upper {fr.upper}: the view is "
            f"final only through {format_time(fr.upper - 1)}. Fix: read at an earlier time, or "
            f"refresh the view at {format_time(t)} first."
        )
    if t < as_of_view:
        raise ReadTimeError(
            f"view {name}: {format_time(t)} is before the view's as_of "
            f"{format_time(as_of_view)}; the view has no contents then. Fix: read at or after as_of."
        )
    if t < fr.since:
        raise ReadTimeError(
            f"view {name}: {format_time(t)} ({t}) is below since {format_time(fr.since)}: older "
            f"history was compacted; the oldest readable time is {format_time(fr.since)} "
            f"({fr.since}). Fix: read at {format_time(fr.since)} or later."
        )
    return t
