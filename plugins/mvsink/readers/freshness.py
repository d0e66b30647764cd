"""Freshness of a view: its lag behind now against the view's ``max_lag`` target (pure: no I/O).

The lag is ``now - final_through``, where ``final_through = upper - 1`` is the view's newest final
time. A view whose schedule ended (``until``) is judged at ``until``, not at now: nothing refreshes
it later. A view with nothing final yet has no lag; it is stale once ``as_of + max_lag`` has passed.
"""

from __future__ import annotations

import time
from typing import Any

from mvsink.definitions.view import ViewDefinition
from mvsink.times import format_duration


def now_ms() -> int:
    return int(time.time() * 1000)


def freshness(view: ViewDefinition, final_through: int | None, now: int | None = None) -> dict[str, Any]:
    """``lag_ms`` (None: nothing final yet), ``max_lag_ms`` (None: no target) and ``stale`` at ``now``."""
    now = now_ms() if now is None else now
    horizon = min(now, view.until) if view.until is not None else now
    target = view.max_lag_ms
    if final_through is None or final_through < view.as_of:  # nothing final yet (or only bumped to as_of)
        lag = None
        stale = target is not None and horizon - view.as_of > target
    else:
        lag = max(0, horizon - final_through)
        stale = target is not None and lag > target
    return {"lag_ms": lag, "max_lag_ms": target, "stale": stale, "checked_at": now}


def format_freshness(st: dict[str, Any]) -> str:
    """``5m 02s (max_lag 1h 00m: fresh)``, ``3d 2h (max_lag 2h 00m: STALE)``, ``never refreshed (no max_lag)``."""
    lag = "never refreshed" if st["lag_ms"] is None else format_duration(st["lag_ms"])
    if st["max_lag_ms"] is None:
        return f"{lag} (no max_lag)"
    verdict = "STALE" if st["stale"] else "fresh"
    return f"{lag} (max_lag {format_duration(st['max_lag_ms'])}: {verdict})"


def mode_kind(mode: str | None) -> str:
    """The family of an append's ``mvsink.mode``: ``incremental``, ``full``, ``unchanged`` or ``""``."""
    if not mode:
        return ""
    if mode == "unchanged":
        return "unchanged"
    return "incremental" if mode.startswith("incremental") else "full"


def mode_label(mode: str | None) -> str:
    """How an append computed its corrections, for people: ``incremental``, ``full diff``, ``no change``."""
    return {"incremental": "incremental", "full": "full diff", "unchanged": "no change", "": ""}[mode_kind(mode)]
