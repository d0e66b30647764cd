"""Status of a view: frontiers and the refresh log from the Delta commit history."""

from __future__ import annotations

from typing import Any

from mvsink.core.checks import format_counts
from mvsink.core.staging import list_staged
from mvsink.core.table import ViewTable
from mvsink.definitions.view import ViewDefinition
from mvsink.times import format_time


def view_status(view: ViewDefinition, *, last: int = 10) -> dict[str, Any]:
    table = ViewTable.open(view, check=False)
    fr = table.frontier
    refreshes: list[dict[str, Any]] = []
    for h in table.history(limit=200)[:last]:
        if h.info is None:
            refreshes.append({"version": h.version, "operation": h.operation, "foreign": True,
                              "committed": format_time(h.timestamp)})
        else:
            refreshes.append({**h.info.to_dict(), "version": h.version, "committed": format_time(h.timestamp)})
    return {
        "view": view.name, "target": view.target, "exists": table.exists,
        "as_of": view.as_of, "since": max(fr.since, view.as_of), "upper": fr.upper,
        "final_through": fr.upper - 1 if fr.upper > 0 else None, "version": fr.version,
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
    ]
    if st["staged_batches"]:
        lines.append(f"staged    {', '.join(st['staged_batches'])}")
    if st["last_commits"]:
        lines.append("last commits (newest first):")
    for c in st["last_commits"]:
        if c.get("foreign"):
            lines.append(f"  v{c['version']:<5} {c['committed']}  FOREIGN {c['operation']} (not by mvsink)")
        elif c.get("operation") == "append":
            lines.append(f"  v{c['version']:<5} {c['committed']}  append [{c['lower']}, {c['upper']}) at "
                         f"{format_time(c['refresh_time'])}: +{c.get('rows_added', 0)} -{c.get('rows_retracted', 0)}"
                         f" rows, {c.get('bytes', 0)} bytes, run {c['run_id']}"
                         + (f"; checks: {format_counts(c['checks'])}" if c.get("checks") else ""))
        elif c.get("operation") == "compact":
            lines.append(f"  v{c['version']:<5} {c['committed']}  compact since -> {format_time(c['since'])}: "
                         f"{c.get('rows_before', '?')} rows in the log before, upper unchanged")
        else:
            lines.append(f"  v{c['version']:<5} {c['committed']}  {c.get('operation')}"
                         + (f" upper -> {c['lower']}" if c.get("operation") == "bump" else ""))
    return "\n".join(lines)
