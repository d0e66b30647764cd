"""Staged batches: Parquet files under ``<table>/batches/<batch_id>/`` and their manifests.

A batch's data files are written where they will live once committed (Delta adds
files by path; they are never moved). Its manifest (the write report) lives apart,
in ``<table>/_mv_staging/<batch_id>.json``, from before Spark writes until append has
committed the files or thrown them away; so the staging folder lists exactly the
batches that are in flight or were abandoned by a crash.

Rows the write step computed in the refreshing process and hands Spark as input (a partitioned recompute's
restricted reads: :mod:`mvsink.incremental.partreads`) are Parquet files under
``<table>/_mv_staging/reads/<batch_id>/``, a local table's only: Spark reads files faster than rows sent as local
relations. The write step deletes them once it is done (:meth:`Staging.drop_reads`); a crash leaves them to
:func:`collect_garbage`.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import posixpath
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mvsink import settings
from mvsink.core import storage
from mvsink.core.batch import StagedFile, WriteReport, parse_batch_id
from mvsink.core.deltalog import batches_committed
from mvsink.location import Location, Where, joinpath, parse

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)

BATCHES = "batches"
STAGING = "_mv_staging"
READS = "reads"


@dataclasses.dataclass(frozen=True)
class Staging:
    """Where one batch is staged under its table, derived once: its folder of data files and its manifest
    (both with the table's store options). The write step stages through it; the free functions below
    name a batch by its table and id."""

    batch_id: str
    folder: Location
    manifest: Location
    reads: Location  # the input rows the write step handed Spark as files (see the module docstring)

    @classmethod
    def of(cls, table: Where, batch_id: str) -> Staging:
        root = parse(table)
        return cls(
            batch_id,
            root.joinpath(BATCHES, batch_id),
            root.joinpath(STAGING, f"{batch_id}.json"),
            root.joinpath(STAGING, READS, batch_id),
        )

    def write_intent(self) -> None:
        """Record that the batch is being staged (before any file is written)."""
        storage.write_text(
            self.manifest, json.dumps({"batch_id": self.batch_id, "status": "writing", "started": time.time()})
        )

    def write_manifest(self, report: WriteReport) -> None:
        storage.write_text(self.manifest, report.to_json())

    def forget_manifest(self) -> None:
        """Drop the manifest of a committed batch (its files now belong to the table)."""
        storage.delete_file(self.manifest)

    def discard(self) -> None:
        """Delete a batch that will never be committed: its files, then its manifest."""
        storage.delete_dir(self.folder)
        storage.delete_file(self.manifest)
        self.drop_reads()

    def write_read(self, name: str, rows: pa.Table) -> Location | None:
        """Write ``rows`` as ``<reads>/<name>.parquet`` for Spark to read; None (nothing written) unless the table
        is on the local disk, where the Spark that stages the batch reads it too."""
        import pyarrow.parquet as pq

        if not self.reads.is_local:
            return None
        folder = Path(self.reads.key)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{name}.parquet"
        pq.write_table(rows, str(path), compression="snappy")
        return self.reads.joinpath(f"{name}.parquet")

    def drop_reads(self) -> None:
        """Delete the batch's input rows written by :meth:`write_read` (none on another store than the local disk)."""
        if self.reads.is_local:
            import shutil

            shutil.rmtree(self.reads.key, ignore_errors=True)

    def write_rows(self, rows: pa.Table) -> None:
        """Write rows held in the driver as the batch's one Parquet file (none when empty), as Spark would: an
        earlier try's files go first."""
        import uuid

        import pyarrow.parquet as pq

        storage.delete_dir(self.folder)
        if rows.num_rows:
            fs, folder = storage.filesystem(self.folder)
            fs.create_dir(folder, recursive=True)
            with fs.open_output_stream(posixpath.join(folder, f"part-00000-{uuid.uuid4()}-c000.snappy.parquet")) as out:
                pq.write_table(rows, out, compression="snappy")

    def files(self) -> list[StagedFile]:
        """The folder's non-empty Parquet files with their Delta stats (read from the footers); empty files
        and a writer's other files (``_SUCCESS``, checksums) are deleted."""
        out = []
        for e in sorted(storage.list_dir(self.folder), key=lambda e: e.name):
            if e.is_dir:
                continue
            file = self.folder.joinpath(e.name)
            if not e.name.endswith(".parquet"):
                storage.delete_file(file)
                continue
            rows, stats = stats_json(file)
            if rows == 0:
                storage.delete_file(file)
                continue
            out.append(StagedFile(path=f"{BATCHES}/{self.batch_id}/{e.name}", size=e.size, rows=rows, stats=stats))
        return out


def batch_location(table: Where, batch_id: str) -> Location:
    """The batch's folder (with the table's store options)."""
    return Staging.of(table, batch_id).folder


def manifest_location(table: Where, batch_id: str) -> Location:
    """The batch's manifest (with the table's store options)."""
    return Staging.of(table, batch_id).manifest


def batch_dir(table: Where, batch_id: str) -> Path:
    """The batch's folder of a table on local disk (tests and tools; mvsink itself uses :func:`batch_location`)."""
    return Path(parse(table).key) / BATCHES / batch_id


def manifest_path(table: Where, batch_id: str) -> Path:
    """The manifest of a table on local disk (tests and tools; mvsink itself uses :func:`manifest_location`)."""
    return Path(parse(table).key) / STAGING / f"{batch_id}.json"


def write_intent(table: Where, batch_id: str) -> None:
    """Record that a batch is being staged (before any file is written)."""
    Staging.of(table, batch_id).write_intent()


def write_manifest(table: Where, report: WriteReport) -> None:
    Staging.of(table, report.batch_id).write_manifest(report)


def read_manifest(table: Where, batch_id: str) -> WriteReport | None:
    text = storage.read_text(manifest_location(table, batch_id))
    if text is None:
        return None
    d = json.loads(text)
    return WriteReport.from_json(text) if d.get("status") == "staged" else None


def forget_manifest(table: Where, batch_id: str) -> None:
    """Drop the manifest of a committed batch (its files now belong to the table)."""
    Staging.of(table, batch_id).forget_manifest()


def discard_batch(table: Where, batch_id: str) -> None:
    """Delete a batch that will never be committed: its files, then its manifest."""
    Staging.of(table, batch_id).discard()


def list_staged(table: Where) -> list[str]:
    entries = storage.list_dir(joinpath(table, STAGING))
    return sorted(
        e.name[:-5] for e in entries if not e.is_dir and e.name.endswith(".json") and not e.name.startswith(".")
    )


def staged_files(table: Where, batch_id: str) -> list[StagedFile]:
    """The batch's staged files (:meth:`Staging.files`)."""
    return Staging.of(table, batch_id).files()


def _writing_since(table: Where, batch_id: str) -> float | None:
    """Start time of a batch whose Spark write has not finished, None if it finished (or is unknown)."""
    try:
        text = storage.read_text(manifest_location(table, batch_id))
        if text is None:
            return None
        d = json.loads(text)
    except json.JSONDecodeError:
        return None
    return float(d.get("started", 0)) if d.get("status") == "writing" else None


def collect_garbage(
    table: Where,
    *,
    upper: int,
    active: set[str],
    keep: str | None = None,
    grace_seconds: float | None = None,
    dry_run: bool = False,
) -> dict[str, list[str]]:
    """Clean up after crashes and lost races, never touching a batch that may still commit.

    A batch ``[lower, u)`` can commit only while the table's upper equals ``lower``; once
    ``upper > lower`` it is either committed (its files are in the log: drop the manifest)
    or dead (delete its files and manifest). ``active`` holds the table's active file paths.
    A dead batch whose Spark write is still running is left to its own append (which
    discards it) unless it started more than ``grace_seconds`` ago (a crashed write).
    ``dry_run``: only report what would be done.
    """
    grace = settings.staging_grace_seconds() if grace_seconds is None else grace_seconds
    committed_dirs = {p.split("/")[1] for p in active if p.startswith(BATCHES + "/") and p.count("/") >= 2}
    done: dict[str, list[str]] = {"discarded": [], "settled": []}
    dead: list[str] = []
    for batch_id in list_staged(table):
        parsed = parse_batch_id(batch_id)
        if batch_id == keep or parsed is None or parsed[1] >= upper:
            continue
        if batch_id in committed_dirs:
            if not dry_run:
                forget_manifest(table, batch_id)
            done["settled"].append(batch_id)
        else:
            started = _writing_since(table, batch_id)
            if started is not None and time.time() - started < grace:
                continue
            dead.append(batch_id)
    # A batch whose files are not active may still have been committed, its files since
    # compacted away (or removed by hand): its append commit names it. Such a batch is settled
    # (its files stay for time travel until vacuum), never deleted as if it had not committed.
    in_log = committed_in_log(table, dead) if dead else set()
    for batch_id in dead:
        if batch_id in in_log:
            if not dry_run:
                forget_manifest(table, batch_id)
            done["settled"].append(batch_id)
        else:
            if not dry_run:
                discard_batch(table, batch_id)
            done["discarded"].append(batch_id)
    if (done["discarded"] or done["settled"]) and not dry_run:
        log.info("table %s: cleaned up staged batches %s", table, done)
    if not dry_run:
        _drop_dead_reads(table, upper=upper, keep=keep)
    return done


def _drop_dead_reads(table: Where, *, upper: int, keep: str | None) -> None:
    """Delete the input rows (:meth:`Staging.write_read`) of batches that can no longer commit (their ``lower`` is
    below the table's ``upper``): those a crashed write step left behind."""
    root = joinpath(table, STAGING, READS)
    if not parse(root).is_local:
        return
    gone = []
    for e in storage.list_dir(root):
        parsed = parse_batch_id(e.name)
        if not e.is_dir or e.name == keep or parsed is None or parsed[1] >= upper:
            continue
        Staging.of(table, e.name).drop_reads()
        gone.append(e.name)
    if gone:
        log.info("table %s: deleted the input rows of dead batches %s", table, gone)


def committed_in_log(table: Where, batch_ids: list[str], *, slack_seconds: float = 3600) -> set[str]:
    """The batch ids among ``batch_ids`` that an append commit in the Delta log records.

    Reads only the commit files written after the oldest of these batches' manifests (less
    ``slack_seconds``): a batch commits after its manifest is written.
    """
    oldest = None
    for b in batch_ids:
        entry = storage.info(manifest_location(table, b))
        m = entry.mtime_ms / 1000 if entry is not None else 0.0
        oldest = m if oldest is None else min(oldest, m)
    bound = (oldest or 0.0) - slack_seconds
    return batches_committed(table, batch_ids, committed_from_ms=bound * 1000)


def staged_files_ok(table: Where, files: tuple[StagedFile, ...]) -> str | None:
    """None if every staged file exists with its recorded size, else what is wrong."""
    for f in files:
        p = joinpath(table, f.path)
        entry = storage.info(p)
        if entry is None:
            return f"staged file {p} is missing"
        size = entry.size
        if size != f.size:
            return f"staged file {p} has {size} bytes, manifest says {f.size}"
    return None


_STAT_TYPES = {"int8", "int16", "int32", "int64", "float", "double", "bool"}


def stats_json(path: Where) -> tuple[int, str]:
    """(row count, Delta stats JSON) from a Parquet file's footer (top-level primitive columns only)."""
    import pyarrow.parquet as pq

    fs, inner = storage.filesystem(path)
    with fs.open_input_file(inner) as f:
        md = pq.ParquetFile(f).metadata
    n = md.num_rows
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    leaf = {md.schema.column(i).path: i for i in range(md.num_columns)}
    for field in md.schema.to_arrow_schema():
        ci = leaf.get(field.name)
        if ci is None or str(field.type) not in _STAT_TYPES:
            continue  # nested or non-numeric: no stats (Delta treats missing stats as unknown)
        lo = hi = None
        nn = 0
        minmax_known = nulls_known = True
        for rg in range(md.num_row_groups):
            st = md.row_group(rg).column(ci).statistics
            if st is None or not st.has_null_count:
                nulls_known = False
            else:
                nn += st.null_count
            if st is not None and st.has_min_max:
                lo = st.min if lo is None else min(lo, st.min)
                hi = st.max if hi is None else max(hi, st.max)
            elif st is None or not st.has_null_count or st.null_count != md.row_group(rg).num_rows:
                minmax_known = False
        if minmax_known and lo is not None and str(field.type) not in ("float", "double", "bool"):
            mins[field.name], maxs[field.name] = lo, hi
        if nulls_known:
            nulls[field.name] = nn
    return n, json.dumps({"numRecords": n, "minValues": mins, "maxValues": maxs, "nullCount": nulls})
