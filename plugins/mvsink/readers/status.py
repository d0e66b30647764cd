"""Status of a view: frontiers and the refresh log from the Delta commit history."""

from __future__ import annotations

import json
from typing import Any

from mvsink.core.checks import format_counts
from mvsink.core.staging import list_staged
from mvsink.core.table import META, iter_history, op_of, open_table, read_frontier
from mvsink.definitions.view import ViewDefinition
from mvsink.times import format_time


def view_status(view: ViewDefinition, *, last: int = 10) -> dict[str, Any]:
    dt = open_table(view.target)
    fr = read_frontier(dt, app_id=view.app_id, since_app_id=view.since_app_id)
    refreshes: list[dict[str, Any]] = []
    if dt is not None:
        for h in iter_history(dt, limit=200):
            op = op_of(h)
            if op is None:
                refreshes.append({"version": h.get("version"), "operation": h.get("operation"), "foreign": True,
                                  "committed": format_time(int(h.get("timestamp", 0)))})
            else:
                entry = {k[len(META):]: json.loads(v) for k, v in h.items() if k.startswith(META)}
                entry.update(version=h.get("version"), committed=format_time(int(h.get("timestamp", 0))))
                refreshes.append(entry)
            if len(refreshes) >= last:
                break
    return {
        "view": view.name, "target": view.target, "exists": dt is not None,
        "as_of": view.as_of, "since": max(fr.since, view.as_of), "upper": fr.upper,
        "final_through": fr.upper - 1 if fr.upper > 0 else None, "version": fr.version,
        "staged_batches": list_staged(view.target) if dt is not None else [],
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
