"""Real view tables without Spark: mint and append (the project's own protocol) with a write report
that stages no files, so a view's Delta log holds real mvsink commits (create, bump, appends with their
modes, row counts, bytes, durations, checks and source versions) in milliseconds.

The tables' contents stay empty; what the status, ``status --all`` and the UI read is the log.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from mvsink.core.append import RefreshResult, append
from mvsink.core.batch import NothingToDo, WriteReport
from mvsink.core.deltalog import set_commit_time
from mvsink.core.mint import mint
from mvsink.core.schema import encode_schema
from mvsink.definitions.catalog import Catalog

BASE = 1_767_225_600_000  # 2026-01-01T00:00:00Z
HOUR = 3_600_000
SCHEMA = encode_schema(
    pa.schema([("id", pa.int64()), ("qty", pa.int64()), ("_mv_time", pa.int64()), ("_mv_diff", pa.int64())])
)


def source(data: Path, name: str = "orders", *, at: int = BASE - HOUR) -> Path:
    """A source Delta table committed at ``at``."""
    path = data / name
    write_deltalake(str(path), pa.table({"id": [1, 2], "qty": [1, 2]}), mode="append")
    set_commit_time(str(path), at)
    return path


def view_file(
    views: Path,
    name: str,
    *,
    extra: str = "",
    sources: str = "{orders: orders}",
    query: str = "SELECT id, qty FROM orders",
) -> None:
    (views / f"{name}.yaml").write_text(
        f"name: {name}\ndescription: view {name}\nquery: {query}\n"
        f"sources: {sources}\ntarget: views/{name}\nas_of: {BASE}\n{extra}"
    )


def refresh(
    catalog: Catalog,
    name: str,
    at: int,
    *,
    added: int = 0,
    retracted: int = 0,
    nbytes: int = 0,
    mode: str = "full",
    seconds: float = 0.5,
    checks: dict[str, Any] | None = None,
    reason: str = "",
) -> RefreshResult | None:
    """One refresh at ``at`` through mint and append; a no-change batch (no source moved) writes nothing."""
    view = catalog.get(name)
    desc = mint(view, at, catalog=catalog, run_id=f"test-{name}-{at}")
    if isinstance(desc, NothingToDo):
        return None
    report = (
        None
        if desc.empty
        else WriteReport(
            view=name,
            batch_id=desc.batch_id,
            lower=desc.lower,
            upper=desc.upper,
            status="empty",
            read_version=desc.table_version,
            table_upper=0,
            schema=SCHEMA,
            rows_added=added,
            rows_retracted=retracted,
            bytes=nbytes,
            seconds=seconds,
            mode=mode,
            mode_reason=reason,
            checks=checks or {},
        )
    )  # type: ignore[arg-type]
    return append(view, desc, report)


def appends(target: str | Path) -> list[dict[str, Any]]:
    """The table's append commits from its Delta log (delta-rs, not mvsink), oldest first, values decoded."""
    import json

    out = []
    for h in DeltaTable(str(target)).history():
        if h.get("mvsink.operation") == '"append"':
            out.append(
                {
                    "version": h["version"],
                    **{k[len("mvsink.") :]: json.loads(v) for k, v in h.items() if k.startswith("mvsink.")},
                }
            )
    return sorted(out, key=lambda e: e["version"])
