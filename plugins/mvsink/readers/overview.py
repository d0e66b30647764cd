"""Every view of a folder at a glance (``mvsink status --all`` and the Airflow "Materialized views" page),
and one view's refresh history and lineage (the view's tab in Airflow). Spark-free and Airflow-free.

Everything here is computed from :func:`mvsink.readers.status.view_status` (the Delta log of each view's
table) and the view definitions, so the command line and the UI print the same values.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from mvsink.core.batch import parse_batch_id
from mvsink.core.deltalog import newest_commit
from mvsink.core.staging import list_staged
from mvsink.definitions.catalog import Catalog
from mvsink.definitions.schedule import next_instant
from mvsink.definitions.view import Schedule, ViewDefinition
from mvsink.exceptions import MvSinkError
from mvsink.readers.freshness import format_freshness, freshness, mode_kind, now_ms
from mvsink.readers.status import view_status
from mvsink.times import format_duration, format_time, format_time_or_none

# Commits read per view for the overview (the newest append is almost always among the first few)
# and for a view's history chart.
SUMMARY_COMMITS = 20
HISTORY_COMMITS = 60
READ_THREADS = 4  # views read at once by all_views


def describe_schedule(s: Schedule) -> str:
    """A view's schedule in a few words: ``cron 0 * * * *``, ``every 1h 00m``, ``on commit of a, b`` ..."""
    if s.kind == "cron":
        return f"cron {s.cron}"
    if s.kind == "interval":
        every = f"every {format_duration(s.every_ms or 0)}"
        return every + (f" from {format_time(s.aligned_to_ms)}" if s.aligned_to_ms else "")
    if s.kind == "at":
        return f"at {len(s.at_ms)} time(s), first {format_time(s.at_ms[0])}"
    if s.kind == "on_commit":
        return "on commit of " + ", ".join(s.on_commit)
    return "manual"


def lineage(view: ViewDefinition, views: dict[str, ViewDefinition]) -> dict[str, Any]:
    """Sources (tables and views), upstream views (read or waited on) and downstream views (reading this one)."""
    upstream = sorted({s.view for s in view.sources if s.kind == "view" and s.view} | set(view.schedule.on_commit))
    downstream = sorted(
        v.name
        for v in views.values()
        if v.name != view.name
        and (any(s.kind == "view" and s.view == view.name for s in v.sources) or view.name in v.schedule.on_commit)
    )
    return {"upstream": upstream, "downstream": downstream}


def _refresh(c: dict[str, Any]) -> dict[str, Any]:
    """An append commit of ``view_status``'s ``last_commits``, as the page and ``--all`` show it."""
    return {
        "version": c.get("version"),
        "committed": c.get("committed"),
        "committed_ms": c.get("committed_ms"),
        "refresh_time": c.get("refresh_time"),
        "refresh_time_utc": format_time_or_none(c.get("refresh_time")),
        "lower": c.get("lower"),
        "upper": c.get("upper"),
        "mode": c.get("mode") or "",
        "mode_kind": mode_kind(c.get("mode")),
        "mode_reason": c.get("mode_reason") or "",
        "rows_added": int(c.get("rows_added") or 0),
        "rows_retracted": int(c.get("rows_retracted") or 0),
        "bytes": int(c.get("bytes") or 0),
        "duration_ms": c.get("duration_ms"),
        "write_ms": c.get("write_ms"),
        "run_id": c.get("run_id"),
        "checks": c.get("checks") or {},
        "sources": c.get("sources") or {},
        "reads": c.get("reads") or {},
    }


# target -> (newest commit, as_of, the status read then): a table's upper, since and commit log only change with a
# new commit, so the overview re-reads a log only when its newest commit file changed (freshness and staged
# batches are always current)
_STATUS_CACHE: dict[str, tuple[tuple[int, int], int, dict[str, Any]]] = {}


def summary_status(view: ViewDefinition, *, now: int | None = None) -> dict[str, Any]:
    """``view_status(view, last=SUMMARY_COMMITS)``, from a cache while the table has no new commit."""
    key = newest_commit(view.target)
    hit = _STATUS_CACHE.get(view.target.uri)
    if key is None or hit is None or hit[0] != key or hit[1] != view.as_of:
        st = view_status(view, last=SUMMARY_COMMITS, now=now)
        if key is not None and newest_commit(view.target) == key:  # no commit landed while reading it
            _STATUS_CACHE[view.target.uri] = (key, view.as_of, st)
        return st
    st = dict(hit[2])
    st.update(freshness(view, st["final_through"], now), staged_batches=list_staged(view.target))
    return st


def view_summary(
    view: ViewDefinition,
    views: dict[str, ViewDefinition],
    *,
    now: int | None = None,
    status: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One line of the overview: frontiers as ISO-8601 UTC, freshness, the last refresh, checks, staging, sources."""
    st = status if status is not None else summary_status(view, now=now)
    appends = [c for c in st["last_commits"] if not c.get("foreign") and c.get("operation") == "append"]
    last = _refresh(appends[0]) if appends else None
    read = last["sources"] if last else {}
    staged = st["staged_batches"]
    in_flight = [b for b in staged if (p := parse_batch_id(b)) is not None and p[1] == st["upper"]]
    checks = last["checks"] if last else {}
    return {
        "view": view.name,
        "description": view.description,
        "target": view.target.uri,
        "exists": st["exists"],
        "schedule": describe_schedule(view.schedule),
        # every/at: the next instant the DAG runs on (the same arithmetic as the DAG's timetable)
        "next_run": (nxt := next_instant(view.schedule, st["checked_at"], as_of=view.as_of, until=view.until)),
        "next_run_utc": format_time_or_none(nxt),
        "as_of": st["as_of"],
        "as_of_utc": format_time(st["as_of"]),
        "since": st["since"],
        "since_utc": format_time(st["since"]),
        "upper": st["upper"],
        "upper_utc": format_time(st["upper"]) if st["upper"] > 0 else None,
        "final_through": st["final_through"],
        "final_through_utc": format_time_or_none(st["final_through"]),
        "version": st["version"],
        "lag_ms": st["lag_ms"],
        "max_lag_ms": st["max_lag_ms"],
        "stale": st["stale"],
        "checked_at": st["checked_at"],
        "freshness": format_freshness(st),
        "last_refresh": last,
        "checks": checks,
        "error_rows": sum(int(c.get("rows", 0)) for c in checks.values() if c.get("action") == "error"),
        "staged_batches": staged,
        "in_flight": in_flight,
        "sources": [
            {
                "name": s.name,
                "kind": s.kind,
                "table": s.path.uri if s.path is not None else None,
                "view": s.view,
                "version_read": read.get(s.name),
            }
            for s in view.sources
        ],
        "foreign_commits": sum(1 for c in st["last_commits"] if c.get("foreign")),
        **lineage(view, views),
    }


def all_views(catalog: Catalog, *, now: int | None = None) -> list[dict[str, Any]]:
    """A summary of every view of the folder (sorted by name), then one entry per broken view file."""
    now = now_ms() if now is None else now

    def one(name: str) -> dict[str, Any]:
        try:
            return view_summary(catalog.views[name], catalog.views, now=now)
        except MvSinkError as exc:  # an unreadable table fails its own line, never the page
            return {"view": name, "error": str(exc)}

    # delta-rs reads each log outside the GIL: a few threads overlap the views' reads (bench/reports/ui.md)
    with ThreadPoolExecutor(max_workers=min(READ_THREADS, max(1, len(catalog.views)))) as pool:
        out = list(pool.map(one, sorted(catalog.views)))
    out += [{"view": None, "file": f, "error": str(e)} for f, e in sorted(catalog.errors.items())]
    return out


def history_points(commits_newest_first: list[dict[str, Any]], as_of: int) -> list[dict[str, Any]]:
    """The view's commits oldest first, each with the since and upper in force after it (for the charts)."""
    since, upper = as_of, 0
    out = []
    for c in reversed(commits_newest_first):
        op = None if c.get("foreign") else c.get("operation")
        if op == "append":
            upper = int(c["upper"])
        elif op == "bump":
            upper = int(c["lower"])
        elif op == "compact":
            since = max(since, int(c["since"]))
        point = {
            "version": c.get("version"),
            "committed_ms": c.get("committed_ms"),
            "committed": c.get("committed"),
            "operation": op or c.get("operation"),
            "foreign": bool(c.get("foreign")),
            "since": since,
            "upper": upper,
        }
        if op == "append":
            point.update(_refresh(c))
        out.append(point)
    return out


def view_detail(
    view: ViewDefinition, views: dict[str, ViewDefinition], *, now: int | None = None, last: int = HISTORY_COMMITS
) -> dict[str, Any]:
    """The overview line plus the last ``last`` commits (newest first, as ``mvsink status``) and the history."""
    st = view_status(view, last=last, now=now)
    return {
        **view_summary(view, views, now=now, status=st),
        "last_commits": st["last_commits"],
        "history": history_points(st["last_commits"], view.as_of),
    }


def format_summary_line(s: dict[str, Any]) -> str:
    """One line of ``mvsink status --all``."""
    if s.get("error"):
        return f"{s['view'] or s.get('file')}: ERROR {s['error']}"
    last = s["last_refresh"]
    refresh = (
        "never refreshed"
        if last is None
        else (
            f"last {last['refresh_time_utc']} {last['mode_kind'] or '?'} +{last['rows_added']} -{last['rows_retracted']}"
        )
    )
    flag = "STALE " if s["stale"] else ""
    extra = (f"; {s['error_rows']} error row(s)" if s["error_rows"] else "") + (
        f"; {len(s['in_flight'])} batch(es) in flight" if s["in_flight"] else ""
    )
    return f"{flag}{s['view']}: final through {s['final_through_utc'] or '-'}, lag {s['freshness']}; {refresh}{extra}"
