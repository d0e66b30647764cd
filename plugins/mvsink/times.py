"""Logical times: integer milliseconds since the Unix epoch (UTC)."""

from __future__ import annotations

import datetime as _dt
import re

_INT_RE = re.compile(r"^-?[0-9]+\Z")
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)


def parse_time(value: object, *, what: str = "time") -> int:
    """Parse ISO-8601 (UTC if no zone), a datetime/date, or integer epoch milliseconds."""
    if isinstance(value, bool):
        raise ValueError(f"{what}: expected a time, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, _dt.datetime):
        dt = value if value.tzinfo else value.replace(tzinfo=_dt.UTC)
        return (dt - _EPOCH) // _dt.timedelta(milliseconds=1)
    if isinstance(value, _dt.date):
        return parse_time(_dt.datetime(value.year, value.month, value.day), what=what)
    if not isinstance(value, str):
        raise ValueError(f"{what}: expected ISO-8601 or epoch milliseconds, got {value!r}")
    text = value.strip()
    if _INT_RE.match(text):
        return int(text)
    iso = text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text
    try:
        dt = _dt.datetime.fromisoformat(iso)
    except ValueError:
        raise ValueError(
            f"{what}: {value!r} is not a time; write ISO-8601 such as 2026-01-31T12:00:00Z "
            "or integer epoch milliseconds"
        ) from None
    return parse_time(dt, what=what)


def format_time(ms: int) -> str:
    """Render epoch milliseconds as ISO-8601 UTC (millisecond precision)."""
    dt = _dt.datetime.fromtimestamp(ms / 1000, tz=_dt.UTC)
    return dt.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def format_time_or_none(ms: int | None) -> str | None:
    """:func:`format_time`, passing None through (an absent time in a report)."""
    return format_time(ms) if ms is not None else None


def to_datetime(ms: int) -> _dt.datetime:
    return _dt.datetime.fromtimestamp(ms / 1000, tz=_dt.UTC)


_DURATION_RE = re.compile(r"^\s*(\d+)\s*(ms|s|m|h|d|w)\s*$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}


def parse_duration(value: object, *, what: str = "duration") -> int:
    """Parse a duration such as ``90s``, ``15m``, ``1h``, ``7d`` into milliseconds."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    m = _DURATION_RE.match(str(value)) if isinstance(value, str) else None
    if not m or int(m.group(1)) <= 0:
        raise ValueError(
            f"{what}: {value!r} is not a duration; write a positive number with a unit "
            "ms, s, m, h, d or w, e.g. 15m or 1d"
        )
    return int(m.group(1)) * _UNIT_MS[m.group(2)]


def format_duration(ms: int | float) -> str:
    """A duration for people: ``850 ms``, ``12.4 s``, ``4m 10s``, ``2h 05m``, ``3d 4h`` (negative: ``-`` first)."""
    if ms < 0:
        return "-" + format_duration(-ms)
    if ms < 1000:
        return f"{int(ms)} ms"
    s = ms / 1000
    if s < 60:
        return f"{s:.1f} s"
    m, sec = divmod(int(s), 60)
    if m < 60:
        return f"{m}m {sec:02d}s"
    h, m = divmod(m, 60)
    if h < 24:
        return f"{h}h {m:02d}m"
    d, h = divmod(h, 24)
    return f"{d}d {h}h"
