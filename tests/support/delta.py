"""Delta tables for tests: sources written at controlled commit times, table states, staged leftovers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from mvsink.core.deltalog import set_commit_time

BASE = 1_767_225_600_000  # 2026-01-01T00:00:00Z
HOUR = 3_600_000


def stamp(path: str | Path, ts_ms: int) -> int:
    """Give the table's newest commit the commit time ``ts_ms`` (Delta time travel uses it)."""
    return set_commit_time(str(path), ts_ms)


def write_at(path: str | Path, table: pa.Table, ts: int, *, mode: str = "append") -> int:
    write_deltalake(str(path), table, mode=mode)  # type: ignore[arg-type]
    return stamp(path, ts)


def delete_at(path: str | Path, predicate: str, ts: int) -> int:
    DeltaTable(str(path)).delete(predicate)
    return stamp(path, ts)


def update_at(path: str | Path, updates: dict[str, str], predicate: str, ts: int) -> int:
    DeltaTable(str(path)).update(updates=updates, predicate=predicate)
    return stamp(path, ts)


def version_at(path: str | Path, ts: int) -> int:
    from mvsink.core.table import version_at as va

    return va(str(path), ts, role="test")


def snapshot(path: str | Path, ts: int) -> pa.Table:
    """The table as of ``ts``, read by delta-rs (independently of Spark)."""
    return pa.table(DeltaTable(str(path), version=version_at(path, ts)).to_pyarrow_table())


def table_state(path: str | Path) -> tuple[int, list[str]] | None:
    """(version, sorted file listing) of a table folder, to prove nothing changed."""
    p = Path(path)
    if not p.exists():
        return None
    files = sorted(str(f.relative_to(p)) for f in p.rglob("*") if f.is_file())
    return (DeltaTable(str(p)).version() if (p / "_delta_log").exists() else -1, files)


def staged_leftovers(target: str | Path) -> list[str]:
    """Manifests, and batch folders that no commit ever appended (must be empty after a refresh)."""
    t = Path(target)
    manifests = sorted(f.name for f in (t / "_mv_staging").glob("*.json")) if (t / "_mv_staging").exists() else []
    committed = set()
    if (t / "_delta_log").exists():
        committed = {
            json.loads(h["mvsink.batch_id"])
            for h in DeltaTable(str(t)).history()
            if h.get("mvsink.operation") == '"append"'
        }
    dirs = (
        sorted(d.name for d in (t / "batches").iterdir() if d.is_dir() and d.name not in committed)
        if (t / "batches").exists()
        else []
    )
    return manifests + dirs


def mvsink_history(target: str | Path) -> list[dict[str, Any]]:
    """The mvsink metadata of every commit, newest first, keys without the ``mvsink.`` prefix, values decoded."""
    return [
        {k.removeprefix("mvsink."): json.loads(v) for k, v in h.items() if k.startswith("mvsink.")}
        for h in DeltaTable(str(target)).history()
    ]


def operations(target: str | Path) -> list[str]:
    """The mvsink operation of every commit, oldest first (``foreign`` for a commit mvsink did not make)."""
    return [json.loads(h.get("mvsink.operation", '"foreign"')) for h in reversed(DeltaTable(str(target)).history())]


def active_files(target: str | Path) -> set[str]:
    """The paths (relative to the table root) of the view table's active files."""
    from mvsink.core.table import ViewTable

    return set(ViewTable.open_path(str(target), check=False).active_paths())
