"""A DAG run's parameters, parsed into typed values (never used as text in SQL or a command line)."""

from __future__ import annotations

import dataclasses
import datetime as _dt
from typing import Any

from mvsink.exceptions import MvSinkError
from mvsink.times import parse_time

MAX_TIME_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z: a refresh time past it is junk


_TRUE = ("true", "1", "yes", "on")


_FALSE = ("false", "0", "no", "off", "")


@dataclasses.dataclass(frozen=True)
class RunParams:
    """A run's parameters, parsed into typed values (never used as text in SQL or a command line)."""

    refresh_time: int  # epoch milliseconds
    dry_run: bool
    attempt: int = 0  # how many times this refresh was rescheduled before


def _param_error(view: str, name: str, value: object, expected: str) -> MvSinkError:
    shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
    return MvSinkError(
        f"view {view}: run param {name}={shown} is not {expected}. Fix: trigger the run with {name} as {expected}."
    )


def parse_refresh_time(value: object, *, view: str = "?") -> int | None:
    """A refresh time param: epoch ms (int or digits) or ISO-8601; None when empty (use the logical date)."""
    if value is None or (isinstance(value, str) and value.strip() in ("", "None")):
        return None
    expected = "ISO-8601 (e.g. 2026-01-31T12:00:00Z) or integer epoch milliseconds"
    if isinstance(value, bool) or not isinstance(value, (int, str, _dt.datetime)):
        raise _param_error(view, "refresh_time", value, expected)
    try:
        t = parse_time(value.strip() if isinstance(value, str) else value, what="refresh_time")
    except (ValueError, OverflowError):
        raise _param_error(view, "refresh_time", value, expected) from None
    if not 0 <= t <= MAX_TIME_MS:
        raise _param_error(view, "refresh_time", value, "a time between 1970-01-01 and 9999-12-31")
    return t


def parse_flag(value: object, *, name: str, view: str = "?") -> bool:
    """A boolean param: true/false (JSON or text: true, false, 1, 0, yes, no); None is false."""
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
        return value.strip().lower() in _TRUE
    raise _param_error(view, name, value, "true or false")


def parse_attempt(value: object, *, view: str = "?") -> int:
    if value is None or value == "":
        return 0
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 1000:
        return value
    if isinstance(value, str) and value.strip().isdigit() and int(value) <= 1000:
        return int(value)
    raise _param_error(view, "attempt", value, "a small non-negative integer")


def run_params(context: dict[str, Any], *, view: str = "?") -> RunParams:
    """Typed params of a run: ``refresh_time`` (else the logical date, or run_after), ``dry_run``, ``attempt``.

    Values come from the DAG params (the trigger form, ``conf`` of a REST or CLI trigger).
    """
    params = context.get("params") or {}
    dag_run = context["dag_run"]
    conf = getattr(dag_run, "conf", None) or {}
    r = parse_refresh_time(params.get("refresh_time"), view=view)
    if r is None:
        when = getattr(dag_run, "logical_date", None) or getattr(dag_run, "run_after", None)
        r = parse_time(when)
    return RunParams(
        refresh_time=r,
        dry_run=parse_flag(params.get("dry_run", False), name="dry_run", view=view),
        attempt=parse_attempt(conf.get("attempt"), view=view),
    )
