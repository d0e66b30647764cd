"""``mvsink vacuum``: delete files no retained version needs, never those of a staged batch in flight."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from mvsink.core import storage
from mvsink.core.sourceschema import source_columns
from mvsink.core.table import ViewTable
from mvsink.definitions.intermediate import intermediate_split
from mvsink.definitions.view import ViewDefinition
from mvsink.exceptions import MvSinkError
from mvsink.location import Where, is_uri, joinpath, normalize

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class VacuumResult:
    view: str
    dry_run: bool
    retention_hours: int | None  # None: the table's delta.deletedFileRetentionDuration (default 7 days)
    deleted: tuple[str, ...]  # paths relative to the table root (to be deleted, in a dry run)
    protected: tuple[str, ...]  # unreferenced files kept because their staged batch is still in flight

    def summary(self) -> str:
        keep = f"; kept {len(self.protected)} file(s) of staged batches in flight" if self.protected else ""
        ret = "the table's retention" if self.retention_hours is None else f"retention {self.retention_hours} h"
        verb = "would delete" if self.dry_run else "deleted"
        return f"{self.view}: vacuum ({ret}) {verb} {len(self.deleted)} unreferenced file(s){keep}"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def vacuum(
    view: ViewDefinition, *, retention_hours: int | None = None, dry_run: bool = False, enforce_retention: bool = True
) -> VacuumResult:
    """Delete files no version within the retention needs, never those of a staged batch in flight.

    Candidates are what delta-rs's full vacuum lists (files removed from the log longer than the
    retention ago, and files never in the log older than the retention; names starting with ``_``
    such as ``_delta_log`` and ``_mv_staging`` are never listed). delta-rs would also delete the
    Parquet files of a staged batch that is still waiting for its append, so mvsink deletes the
    candidates itself, minus every file under ``batches/<id>/`` whose manifest is in
    ``_mv_staging``, minus anything active in the newest version. It commits nothing (delta-rs's
    own vacuum writes VACUUM commits, which would count as foreign commits). A view refreshed through an
    intermediate table (:mod:`mvsink.definitions.intermediate`) has that table vacuumed too, alike.
    """
    res = _vacuum(view, retention_hours=retention_hours, dry_run=dry_run, enforce_retention=enforce_retention)
    split = intermediate_split(view, columns_of=source_columns)
    for part in split.inners if split is not None else ():
        if ViewTable.open(part, check=False).exists:
            inner = _vacuum(part, retention_hours=retention_hours, dry_run=dry_run, enforce_retention=enforce_retention)
            log.info("view %s: intermediate table %s: %s", view.name, part.name, inner.summary())
    return res


def _vacuum(
    view: ViewDefinition, *, retention_hours: int | None, dry_run: bool, enforce_retention: bool
) -> VacuumResult:
    from mvsink.core.staging import BATCHES, list_staged

    table = ViewTable.open(view, check=False)
    if not table.exists:
        raise MvSinkError(f"view {view.name}: table {view.target} does not exist yet. Fix: refresh the view first.")
    in_flight = set(list_staged(view.target))
    from deltalake.exceptions import DeltaError

    try:
        candidates = table.delta.vacuum(
            retention_hours=retention_hours, dry_run=True, enforce_retention_duration=enforce_retention, full=True
        )
    except DeltaError as exc:  # a retention below the table's minimum is bad input; anything else propagates
        if "retention" in str(exc).lower():
            raise MvSinkError(
                f"view {view.name}: {exc}. Fix: keep the retention at or above the table's "
                "delta.deletedFileRetentionDuration (default 168 hours), or pass --force "
                "if no reader or refresh still needs older versions."
            ) from exc
        raise
    active = table.reload().active_paths()
    in_flight |= set(list_staged(view.target))
    deleted, protected = [], []
    root = normalize(view.target).rstrip("/") + "/"
    listed = sorted(c.removeprefix(root) if is_uri(c) else c for c in candidates)
    # a store with real folders (SeaweedFS) lists their markers too ("", "batches"): never files to delete
    folders = {p.rsplit("/", i)[0] for p in [*listed, *active] for i in range(1, p.count("/") + 1)}
    for rel in listed:
        parts = rel.split("/")
        if not rel or rel.endswith("/") or rel in folders or rel in active or parts[0].startswith("_"):
            continue
        if len(parts) >= 3 and parts[0] == BATCHES and parts[1] in in_flight:
            protected.append(rel)
            continue
        deleted.append(rel)
    if not dry_run:
        for rel in deleted:
            storage.delete_file(joinpath(view.target, rel))
        _remove_empty_batch_dirs(joinpath(view.target, BATCHES), in_flight)
    res = VacuumResult(view.name, dry_run, retention_hours, tuple(deleted), tuple(protected))
    log.info("%s", res.summary())
    return res


def _remove_empty_batch_dirs(batches: Where, in_flight: set[str], *, min_age_seconds: float = 600) -> None:
    """Remove batch folders left empty by vacuum (not in flight, untouched for a while).

    On object storage a folder with no files does not exist, so there is nothing to do there.
    """
    import time

    for d in storage.list_dir(batches):
        try:
            folder = joinpath(batches, d.name)
            if (
                d.is_dir
                and d.name not in in_flight
                and not storage.list_files(folder)
                and time.time() - d.mtime_ms / 1000 > min_age_seconds
            ):
                storage.delete_dir(folder)
        except OSError:
            continue
