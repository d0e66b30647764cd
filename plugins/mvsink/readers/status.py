"""Status of a view: frontiers and the refresh log from the Delta commit history."""

from __future__ import annotations

from typing import Any

from mvsink.core.checks import format_counts
from mvsink.core.commitinfo import format_reads
from mvsink.core.staging import list_staged
from mvsink.core.table import ViewTable
from mvsink.definitions.view import ViewDefinition
from mvsink.readers.freshness import format_freshness, freshness, mode_label
from mvsink.times import format_duration, format_time


def view_status(view: ViewDefinition, *, last: int = 10, now: int | None = None) -> dict[str, Any]:
    """Frontiers, freshness (lag against ``max_lag`` at ``now``, default the clock) and the last commits."""
    table = ViewTable.open(view, check=False)
    fr = table.frontier
    refreshes: list[dict[str, Any]] = []
    for h in table.history(limit=last):  # one entry per commit: the newest `last` commits
        if h.info is None:
            refreshes.append(
                {
                    "version": h.version,
                    "operation": h.operation,
                    "foreign": True,
                    "committed": format_time(h.timestamp),
                    "committed_ms": h.timestamp,
                }
            )
        else:
            entry = {
                **h.info.to_dict(),
                "version": h.version,
                "committed": format_time(h.timestamp),
                "committed_ms": h.timestamp,
            }
            choice = cost_choice(entry)
            refreshes.append({**entry, "cost_choice": choice} if choice else entry)
    final_through = fr.upper - 1 if fr.upper > 0 else None
    return {
        "view": view.name,
        "target": view.target.uri,
        "exists": table.exists,
        "as_of": view.as_of,
        "since": max(fr.since, view.as_of),
        "upper": fr.upper,
        "final_through": final_through,
        "version": fr.version,
        **freshness(view, final_through, now),
        "staged_batches": list_staged(view.target) if table.exists else [],
        "last_commits": refreshes,
    }


def format_status(st: dict[str, Any]) -> str:
    up = st["upper"]
    lines = [
        f"view      {st['view']}",
        f"table     {st['target']}" + ("" if st["exists"] else "  (not created yet)"),
        f"as_of     {format_time(st['as_of'])} ({st['as_of']})",
        f"since     {format_time(st['since'])} ({st['since']})",
        f"upper     {up}" + (f"  (final through {format_time(up - 1)})" if up > 0 else ""),
        f"version   {st['version']}",
        f"lag       {format_freshness(st)}",
    ]
    if st["staged_batches"]:
        lines.append(f"staged    {', '.join(st['staged_batches'])}")
    if st["last_commits"]:
        lines.append("last commits (newest first):")
    lines += [f"  {format_commit(c)}" for c in st["last_commits"]]
    return "\n".join(lines)


def format_commit(c: dict[str, Any]) -> str:
    """One commit of ``view_status``'s ``last_commits`` as ``mvsink status`` prints it."""
    if c.get("foreign"):
        return f"v{c['version']:<5} {c['committed']}  FOREIGN {c['operation']} (not by mvsink)"
    if c.get("operation") == "append":
        return (
            f"v{c['version']:<5} {c['committed']}  append [{c['lower']}, {c['upper']}) at "
            f"{format_time(c['refresh_time'])}: +{c.get('rows_added', 0)} -{c.get('rows_retracted', 0)}"
            f" rows, {c.get('bytes', 0)} bytes" + append_details(c)
        )
    if c.get("operation") == "compact":
        return (
            f"v{c['version']:<5} {c['committed']}  compact since -> {format_time(c['since'])}: "
            f"{c.get('rows_before', '?')} rows in the log before, upper unchanged"
        )
    return f"v{c['version']:<5} {c['committed']}  {c.get('operation')}" + (
        f" upper -> {c['lower']}" if c.get("operation") == "bump" else ""
    )


def append_details(c: dict[str, Any]) -> str:
    """What an append's line says after its rows and bytes: its mode, duration, run, checks, reads and the cost
    model's estimates."""
    choice = c.get("cost_choice") or cost_choice(c)
    return (
        (f", {mode_label(c['mode'])}" if c.get("mode") else "")
        + (f", {format_duration(c['duration_ms'])}" if c.get("duration_ms") is not None else "")
        + f", run {c['run_id']}"
        + (f"; checks: {format_counts(c['checks'])}" if c.get("checks") else "")
        + (f"; read {format_reads(c['reads'])}" if c.get("reads") else "")
        + (f"; cost: {format_choice(choice)}" if choice else "")
    )


def cost_choice(c: dict[str, Any]) -> dict[str, Any] | None:
    """What an append's recorded cost (``mvsink.cost``) says of its choice: the candidate that ran
    (``<mode>/<engine>``, or ``full``), its estimate against the write step's actual seconds, the next-best
    estimate, the estimates' basis and the refresh's re-check of the model (``recheck``, or None); None where the
    refresh recorded no estimates (an older commit, a mode the cost model does not weigh)."""
    cost = c.get("cost") or {}
    estimates = cost.get("estimates") or {}
    mode = c.get("mode")
    if c.get("operation") != "append" or not estimates or not mode:
        return None
    chosen = "full" if mode == "full" else f"{mode}/{cost.get('engine', 'spark')}"
    others = sorted((v, k) for k, v in estimates.items() if k != chosen)
    return {
        "chosen": chosen,
        "estimate_s": estimates.get(chosen),
        "actual_s": (c.get("write_ms") or 0) / 1000,
        "next_best": others[0][1] if others else None,
        "next_best_s": others[0][0] if others else None,
        "model_picked": cost.get("picked"),
        "basis": cost.get("basis", "prior"),
        "recheck": cost.get("recheck") or None,
    }


def format_choice(ch: dict[str, Any]) -> str:
    """:func:`cost_choice` in words: ``incremental:aggregate/spark estimated 0.90 s, took 1.20 s; next best full
    2.00 s (prior)``."""
    est = ch["estimate_s"]
    text = (
        f"{ch['chosen']} "
        + ("(no estimate)" if est is None else f"estimated {est:.2f} s")
        + f", took {ch['actual_s']:.2f} s"
    )
    if ch["next_best"] is not None:
        text += f"; next best {ch['next_best']} {ch['next_best_s']:.2f} s"
    text += f" ({ch['basis']})"
    rc = ch.get("recheck")
    if rc and rc.get("kind") == "alternative":
        text += f"; a re-check: ran instead of {rc.get('instead_of')}"
    elif rc:
        text += "; a re-check of the choice"
    return text
