"""Check counts and the error a read raises on error rows (pure: no Spark).

Counts as recorded in commit info and reports: ``{check name: {"action": ..., "rows": n}}``, totals
over the desired contents at a refresh time.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mvsink.exceptions import MvSinkError, ViewErrorsError

if TYPE_CHECKING:
    from mvsink.definitions.view import ViewDefinition

ERRORS_MODES = ("fail", "include", "ignore")  # what a read does with error rows


def check_errors_mode(view_name: str, errors: str) -> None:
    """Refuse an ``errors=`` that is not one of :data:`ERRORS_MODES` (the Arrow and Spark readers)."""
    if errors not in ERRORS_MODES:
        raise MvSinkError(
            f"view {view_name}: errors={errors!r} is not one of {list(ERRORS_MODES)}. "
            "Fix: pass errors='fail' (default), 'include' or 'ignore'."
        )


# counts as recorded in commit info and reports: {check name: {"action": ..., "rows": n}}
CheckCounts = dict[str, dict[str, Any]]


def counts_of(view: ViewDefinition, metrics: Mapping[str, Any]) -> CheckCounts:
    """Observation metrics -> ``{check: {"action": ..., "rows": n}}``."""
    return {
        c.name: {"action": c.action, "rows": int(metrics.get(f"check_{i}") or 0)} for i, c in enumerate(view.checks)
    }


def add_counts(view: ViewDefinition, base: Mapping[str, Any], delta: CheckCounts) -> CheckCounts | None:
    """Totals = the last refresh's totals + the change's signed counts (None if ``base`` lacks a check)."""
    out: CheckCounts = {}
    for c in view.checks:
        b = base.get(c.name)
        if not isinstance(b, dict) or b.get("action") != c.action:
            return None
        out[c.name] = {"action": c.action, "rows": int(b.get("rows", 0)) + int(delta[c.name]["rows"])}
    return out


def format_counts(counts: Mapping[str, Any]) -> str:
    """``positive_qty: 2 errors, test_rows: 1 dropped, big_qty: 3 warned``."""
    words = {"error": "error row(s)", "drop": "dropped", "warn": "warned"}
    return ", ".join(
        f"{name}: {c.get('rows', 0)} {words.get(c.get('action', ''), 'rows')}" for name, c in counts.items()
    )


def worst_check(per: dict[str, int]) -> str:
    """The check with the most error rows (ties: by name)."""
    return sorted(per.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]


def view_errors(view_name: str, per: dict[str, int], sample: dict[str, Any], *, at: str = "") -> ViewErrorsError:
    """The error a read raises when the contents hold error rows (``per``: rows per check)."""
    first = worst_check(per)
    sample_text = ", ".join(f"{k}={v!r}" for k, v in sample.items())
    if len(sample_text) > 300:
        sample_text = sample_text[:297] + "..."
    when = f" at {at}" if at else ""
    ordered = sorted(per.items(), key=lambda kv: (-kv[1], kv[0]))
    checks = ", ".join(f"'{name}' ({n} row(s))" for name, n in ordered)
    return ViewErrorsError(
        f"view {view_name}{when}: {sum(per.values())} row(s) failed error checks: {checks}; e.g. row "
        f"({sample_text}) failed check '{first}'. Fix: correct the source rows (the next refresh removes "
        "the errors), or read with errors='include' (--errors include) to get them with their _mv_error, "
        "or errors='ignore' (--errors ignore) to read only the ok rows.",
        counts=dict(per),
        sample=sample,
        check=first,
    )
