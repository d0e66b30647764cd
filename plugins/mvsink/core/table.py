"""The view's Delta table (the "shard"): frontiers, commit log, sources' versions.

The table's ``upper`` is the version of a Delta application transaction
(``mvsink:upper:<view>``) committed atomically with the data; ``since`` lives the
same way under ``mvsink:since:<view>``. Each of our commits carries ``mvsink.*``
keys in its commit info so ``history()`` reads as a refresh log.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mvsink.exceptions import MvSinkError, ReadTimeError, SourceError, UnsupportedFeatureError
from mvsink.times import format_time

if TYPE_CHECKING:
    from mvsink.definitions.view import ViewDefinition

META = "mvsink."
# Commit kinds of ours that leave contents at every time unchanged.
CONTENT_PRESERVING = frozenset({"create", "bump", "compact", "evolve"})

# Reader features a Parquet file-list read cannot honour.
UNSUPPORTED_READER_FEATURES = {
    "deletionVectors": "deletion vectors (rows deleted without rewriting files)",
    "columnMapping": "column mapping (physical column names differ from logical ones)",
    "typeWidening": "type widening (files hold narrower types than the table schema)",
    "variantType": "the VARIANT type",
    "variantType-preview": "the VARIANT type",
}


def is_delta_table(path: str) -> bool:
    return (Path(path) / "_delta_log").is_dir() and any((Path(path) / "_delta_log").glob("*.json"))


def open_table(path: str, *, version: int | None = None) -> Any | None:
    """Open a Delta table (``deltalake.DeltaTable``), or None if there is none at ``path``."""
    from deltalake import DeltaTable

    if not is_delta_table(path):
        return None
    try:
        return DeltaTable(path, version=version) if version is not None else DeltaTable(path)
    except Exception as exc:  # delta-rs raises several types; all mean "cannot read this table"
        raise SourceError(f"Delta table at {path} cannot be opened: {exc}. Fix: check the table's _delta_log.") from None


def check_readable(dt: Any, *, path: str, role: str) -> None:
    """Refuse tables whose reader features a Parquet file-list read cannot honour."""
    proto = dt.protocol()
    features = set(proto.reader_features or [])
    config = dt.metadata().configuration or {}
    problems = [desc for f, desc in UNSUPPORTED_READER_FEATURES.items() if f in features]
    mode = config.get("delta.columnMapping.mode", "none")
    if (proto.min_reader_version == 2 or mode != "none") and UNSUPPORTED_READER_FEATURES["columnMapping"] not in problems:
        problems.append(UNSUPPORTED_READER_FEATURES["columnMapping"])
    if proto.min_reader_version > 3:
        problems.append(f"reader version {proto.min_reader_version}")
    if problems:
        raise UnsupportedFeatureError(
            f"{role}: Delta table {path} uses {', '.join(problems)}, which this project cannot read "
            "correctly through a Parquet file list. Fix: rewrite the table without the feature "
            "(e.g. REORG TABLE ... APPLY (PURGE) and disable delta.enableDeletionVectors / column mapping), "
            "or point the view at a copy without it."
        )


@dataclasses.dataclass(frozen=True)
class Frontier:
    upper: int
    since: int
    version: int  # Delta version read; -1 when the table does not exist


def read_frontier(dt: Any | None, *, app_id: str, since_app_id: str) -> Frontier:
    if dt is None:
        return Frontier(upper=0, since=0, version=-1)
    return Frontier(
        upper=dt.transaction_version(app_id) or 0,
        since=dt.transaction_version(since_app_id) or 0,
        version=dt.version(),
    )


def log_version_times(path: str) -> dict[int, int]:
    """Version -> commit time in ms (the commit file's modification time, as Delta time travel uses)."""
    out: dict[int, int] = {}
    log = Path(path) / "_delta_log"
    with os.scandir(log) as it:
        for e in it:
            n = e.name
            if n.endswith(".json") and n[:-5].isdigit() and len(n) == 25:
                out[int(n[:-5])] = int(e.stat().st_mtime_ns // 1_000_000)
    return out


def set_commit_time(path: str, t_ms: int) -> int:
    """Date the table's newest commit at ``t_ms`` (the log file's mtime, which time travel reads).

    For demos, tests and benchmarks that build a source history at chosen times. Returns the version.
    """
    from deltalake import DeltaTable

    v = DeltaTable(path).version()
    log = Path(path) / "_delta_log" / f"{v:020d}.json"
    os.utime(log, ns=(t_ms * 1_000_000, t_ms * 1_000_000))
    return int(v)


def version_at(path: str, t_ms: int, *, role: str) -> int:
    """The Delta version of the table at ``path`` as of time ``t_ms`` (last commit at or before it)."""
    if not is_delta_table(path):
        raise SourceError(
            f"{role}: no Delta table at {path}. Fix: create the table, or correct the path in the view file."
        )
    times = log_version_times(path)
    at = [v for v, ts in times.items() if ts <= t_ms]
    if not at:
        first = min(times)
        raise SourceError(
            f"{role}: Delta table {path} has no version at or before {format_time(t_ms)} (its oldest retained commit, "
            f"version {first}, is from {format_time(times[first])}). Fix: refresh at a later time, or move the "
            "view's as_of past the source's creation."
        )
    return max(at)


def history_after(dt: Any, version: int, *, limit: int = 1000) -> list[dict[str, Any]]:
    """Commit infos of versions ``> version`` up to the handle's version, oldest first."""
    n = dt.version() - version
    if n <= 0:
        return []
    if n > limit:
        raise MvSinkError(f"table {dt.table_uri}: {n} commits since version {version}; too many to re-validate")
    entries = [h for h in dt.history(n) if h.get("version", -1) > version]
    return sorted(entries, key=lambda h: h["version"])


def iter_history(dt: Any, *, limit: int | None = None) -> Iterator[dict[str, Any]]:
    """Commit infos, newest first."""
    yield from dt.history(limit)


def op_of(entry: dict[str, Any]) -> str | None:
    """Our operation name of a commit (create, bump, append, compact), None for foreign commits."""
    v = meta_json(entry, "operation")
    return str(v) if v is not None else None


def meta_json(entry: dict[str, Any], key: str) -> Any:
    raw = entry.get(META + key)
    if raw is None:
        return None
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            return raw
    return raw


def active_paths(dt: Any) -> set[str]:
    """Paths (relative to the table root) of the table's active files."""
    import pyarrow as pa

    actions = pa.table(dt.get_add_actions(flatten=True))
    return set(actions.column("path").to_pylist()) if actions.num_rows else set()


def check_read_time(name: str, fr: Frontier, as_of_view: int, as_of: int | None) -> int:
    """The time to read (default ``upper - 1``), refusing times outside ``[max(since, as_of), upper)``."""
    lowest = max(fr.since, as_of_view)
    if fr.upper <= lowest:
        raise ReadTimeError(f"view {name}: nothing is readable yet (upper {fr.upper}, oldest readable time "
                            f"{format_time(lowest)} ({lowest})). Fix: refresh the view at or after "
                            f"{format_time(lowest)}.")
    t = fr.upper - 1 if as_of is None else as_of
    if t >= fr.upper:
        raise ReadTimeError(f"view {name}: {format_time(t)} ({t}) is at or past the upper {fr.upper}: the view is "
                            f"final only through {format_time(fr.upper - 1)}. Fix: read at an earlier time, or "
                            f"refresh the view at {format_time(t)} first.")
    if t < as_of_view:
        raise ReadTimeError(f"view {name}: {format_time(t)} is before the view's as_of "
                            f"{format_time(as_of_view)}; the view has no contents then. Fix: read at or after as_of.")
    if t < fr.since:
        raise ReadTimeError(f"view {name}: {format_time(t)} ({t}) is below since {format_time(fr.since)}: older "
                            f"history was compacted; the oldest readable time is {format_time(fr.since)} "
                            f"({fr.since}). Fix: read at {format_time(fr.since)} or later.")
    return t


def readable_time(view: ViewDefinition, as_of: int | None) -> tuple[int, object]:
    """Check ``as_of`` against since/as_of/upper; return the time to read and the table handle."""
    dt, fr = open_view_table(view)
    return check_read_time(view.name, fr, view.as_of, as_of), dt


def open_view_table(view: ViewDefinition) -> tuple[Any, Frontier]:
    """The view's table and its frontiers; a clear error if it does not exist yet or cannot be read."""
    dt = open_table(view.target)
    if dt is None:
        raise ReadTimeError(f"view {view.name}: table {view.target} does not exist yet. "
                            f"Fix: refresh the view first (mvsink refresh {view.name} --at TIME).")
    check_readable(dt, path=view.target, role=f"view {view.name}: target table")
    return dt, read_frontier(dt, app_id=view.app_id, since_app_id=view.since_app_id)
