"""Compaction: advance `since` by consolidating old updates into one update per row. No Spark.

The view's table is an update log. Compaction to ``since = S`` replaces every update with
``time <= S`` by one update per distinct row at time ``S`` (the row's summed diff, zero
sums dropped), and records ``S`` as the Delta application transaction
``mvsink:since:<view>`` in the same commit. Contents at every time ``>= S`` are unchanged
(DESIGN.md section 6); reads below ``S`` are refused from then on.

How the commit is made (:meth:`~mvsink.core.table.ViewTable.commit_compaction`): delta-rs
``write_deltalake(mode="overwrite", predicate="_mv_time <= S")`` on a handle at version ``N``,
with ``max_commit_retries=0``. delta-rs removes the files
that hold rows with ``time <= S`` (files wholly after ``S`` are not touched; a file that
straddles ``S`` is rewritten keeping its rows after ``S``) and adds the consolidated rows,
all at exactly version ``N + 1`` or not at all. The commit carries only the ``since``
transaction, never the upper's, and ``mvsink.operation = "compact"`` in its commit info,
which mint's no-change shortcut and append's re-validation treat as content-preserving.
Its add/remove actions have ``dataChange = true``: the rows of the log do change (times
move, rows merge), and Delta's ``dataChange = false`` promises that the removed records
reappear unchanged in the added files, which is not true here (a Delta streaming reader
of the raw table must therefore skip change commits; consumers of a view's changes use
:func:`mvsink.changes` instead).

Concurrency: a refresh's append and a compaction that both read version ``N`` race for
``N + 1``; the loser gets ``CommitFailedError``. A losing append re-validates and commits
at the next version (a compaction leaves the upper and the contents it read unchanged);
a losing compaction starts over from the new version (up to ``attempts`` times), so it
never loses or duplicates an appended batch and never moves the upper.

Memory: the consolidation runs in DuckDB over a pyarrow dataset of the files that hold
rows with ``time <= S`` and streams its result in record batches into delta-rs's writer.
DuckDB's hash aggregate spills to a temporary folder beyond ``MVSINK_COMPACT_MEMORY``
(default ``1GB``); delta-rs rewrites straddling files in streaming fashion. Peak memory
is therefore about that limit plus a few record batches and a Parquet row group; disk
needs the live rows once more (the new file) plus DuckDB's spill.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
import tempfile
import uuid
from typing import Any, Literal

from mvsink import settings
from mvsink.columns import TIME
from mvsink.core import storage
from mvsink.core.commitinfo import CommitInfo
from mvsink.core.failpoints import failpoint
from mvsink.core.frontier import Frontier
from mvsink.core.sourceschema import source_columns
from mvsink.core.staging import collect_garbage
from mvsink.core.table import ViewTable
from mvsink.definitions.catalog import Catalog
from mvsink.definitions.intermediate import intermediate_split
from mvsink.definitions.view import ViewDefinition
from mvsink.exceptions import MvSinkError
from mvsink.location import Location, Where, parse
from mvsink.readers.sql import consolidation_sql
from mvsink.times import format_time

log = logging.getLogger(__name__)

# Compaction is due when ``since`` would advance by at least this fraction of retain_history:
# the log then holds at most (1 + 1/DUE_FRACTION) x retain_history of history, and each
# compaction rewrites the live rows at most DUE_FRACTION times per retain_history.
DUE_FRACTION = 4
MAX_ATTEMPTS = 5

Status = Literal["compacted", "not_due", "nothing_to_do", "gave_up"]


@dataclasses.dataclass(frozen=True)
class CompactResult:
    view: str
    status: Status
    since: int  # the table's since after this step
    previous_since: int
    upper: int | None = None  # the upper the compaction saw (it never moves it)
    version: int | None = None  # Delta version of the compaction commit
    rows_before: int = 0  # rows in the log before / after
    rows_after: int = 0
    rows_consolidated: int = 0  # rows written at time since
    files_removed: int = 0
    files_added: int = 0
    attempts: int = 0
    reason: str = ""

    def summary(self) -> str:
        if self.status == "compacted":
            return (
                f"{self.view}: compacted to since {format_time(self.since)} ({self.since}) at Delta version "
                f"{self.version}: {self.rows_before} -> {self.rows_after} rows in the log, "
                f"{self.files_removed} file(s) removed, {self.files_added} added; upper {self.upper} unchanged"
                + (f" ({self.attempts - 1} lost race(s) retried)" if self.attempts > 1 else "")
            )
        return f"{self.view}: {self.status.replace('_', ' ')}: {self.reason}"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def downstream_hold(view: ViewDefinition, catalog: Catalog | None) -> tuple[int, str] | None:
    """The lowest time a view reading ``view`` may still read, and which view that is.

    A downstream view's next refresh reads this view at a time ``>= max(its upper, its as_of)``, and its
    incremental path reads this view's updates after the time its last refresh read (``its upper - 1``),
    so ``since`` must not pass ``max(its upper - 1, its as_of)`` (Materialize's read holds): a since at
    that time keeps every later update apart (core/viewchanges.py).
    """
    if catalog is None:
        return None
    hold: tuple[int, str] | None = None
    for other in catalog.views.values():
        if not any(s.kind == "view" and s.view == view.name for s in other.sources):
            continue
        t = max(ViewTable.open(other, check=False).frontier.upper - 1, other.as_of)
        if hold is None or t < hold[0]:
            hold = (t, other.name)
    return hold


def target_since(view: ViewDefinition, fr: Frontier, hold: tuple[int, str] | None = None) -> int | None:
    """The since that ``retain_history`` asks for now, or None if it asks for nothing new."""
    if view.retain_history_ms is None or fr.upper <= 0:
        return None
    t = fr.upper - 1 - view.retain_history_ms
    if hold is not None:
        t = min(t, hold[0])
    return t if t > max(fr.since, view.as_of) else None


def is_due(view: ViewDefinition, fr: Frontier, target: int | None) -> bool:
    """True if ``target`` advances since by at least retain_history / DUE_FRACTION."""
    if target is None or view.retain_history_ms is None:
        return False
    step = max(view.retain_history_ms // DUE_FRACTION, 1)
    return target - max(fr.since, view.as_of) >= step


def _rows(actions: Any) -> int:
    import pyarrow.compute as pc

    return int(pc.sum(actions.column("num_records")).as_py() or 0) if actions.num_rows else 0


def _input_uris(root: Where, actions: Any, since: int) -> list[Location]:
    """Paths of the active files that may hold rows with ``time <= since`` (from their stats)."""
    from urllib.parse import unquote

    col = f"min.{TIME}"
    mins = actions.column(col).to_pylist() if col in actions.column_names else [None] * actions.num_rows
    out = []
    for path, lo in zip(actions.column("path").to_pylist(), mins):
        if lo is None or int(lo) <= since:
            out.append(parse(root).file(unquote(path)))
    return out


def _consolidated(uris: list[Location], schema: Any, since: int, spill_dir: str) -> tuple[Any, Any]:
    """A record-batch reader of the consolidated updates at ``since`` (and the DuckDB connection)."""
    import duckdb
    import pyarrow as pa
    import pyarrow.dataset as ds

    con = duckdb.connect(
        config={
            "memory_limit": settings.compact_memory(),
            "temp_directory": spill_dir,
            "preserve_insertion_order": False,
        }
    )
    if uris:
        fs, _ = storage.filesystem(uris[0])
        paths = [storage.filesystem(u)[1] for u in uris]
        con.register("updates", ds.dataset(paths, schema=schema, format="parquet", filesystem=fs))
    else:
        con.register("updates", schema.empty_table())
    rel = con.sql(consolidation_sql(schema.names, through=since, at=since))
    src = rel.to_arrow_reader(64 * 1024)
    reader = pa.RecordBatchReader.from_batches(schema, (b.cast(schema) for b in src))
    return reader, con


def _due_target(
    view: ViewDefinition, fr: Frontier, hold: tuple[int, str] | None, if_due: bool, base: CompactResult
) -> int | CompactResult:
    """The since ``retain_history`` asks for, or the result that says why there is nothing to do now."""
    target = target_since(view, fr, hold)
    if target is None:
        why = (
            "retain_history is forever"
            if view.retain_history_ms is None
            else f"retain_history {view.retain_history_ms} ms behind upper {fr.upper} asks for no since "
            f"above the current {format_time(max(fr.since, view.as_of))}"
        )
        return dataclasses.replace(base, reason=why)
    if if_due and not is_due(view, fr, target):
        return dataclasses.replace(
            base,
            status="not_due",
            reason=(
                f"since would advance only to {format_time(target)}, less than retain_history/"
                f"{DUE_FRACTION} past {format_time(max(fr.since, view.as_of))}"
            ),
        )
    return target


def _explicit_target(
    view: ViewDefinition, fr: Frontier, target: int, hold: tuple[int, str] | None, base: CompactResult
) -> int | CompactResult:
    """An explicit ``since``: itself, the result when it is already reached, or :class:`MvSinkError` when it
    lies past the upper, before as_of, or past a downstream view's hold."""
    if target <= fr.since:
        return dataclasses.replace(base, reason=f"since is already {format_time(fr.since)} ({fr.since})")
    if target >= fr.upper:
        raise MvSinkError(
            f"view {view.name}: cannot compact to since {format_time(target)} ({target}): the view is final "
            f"only through {format_time(fr.upper - 1)} (upper {fr.upper}). Fix: pass --since at or below "
            f"{fr.upper - 1}, or refresh the view first."
        )
    if target < view.as_of:
        raise MvSinkError(
            f"view {view.name}: since {format_time(target)} is before the view's as_of "
            f"{format_time(view.as_of)}. Fix: pass --since at or after as_of."
        )
    if hold is not None and target > hold[0]:
        raise MvSinkError(
            f"view {view.name}: since {format_time(target)} would pass view {hold[1]}, which reads this "
            f"view and still needs times from {format_time(hold[0])} ({hold[0]}). Fix: refresh {hold[1]} "
            f"first, or pass --since at or below {hold[0]}."
        )
    return target


def _commit(view: ViewDefinition, table: ViewTable, fr: Frontier, target: int, run_id: str) -> tuple[int | None, int]:
    """Consolidate and commit at the version ``table`` is at: (the new version or None if the race for it
    was lost, the rows in the log before)."""
    # Batches whose files are active at this version are committed: drop their manifests
    # before their files leave the log, so no one mistakes them for uncommitted batches.
    collect_garbage(view.target, upper=fr.upper, active=table.active_paths())
    actions = table.add_actions()
    rows_before = _rows(actions)
    uris = _input_uris(view.target, actions, target)
    schema = table.arrow_schema()
    spill = tempfile.mkdtemp(prefix="mvsink-compact-")
    info = CommitInfo(
        operation="compact",
        view=view.name,
        since=target,
        previous_since=fr.since,
        upper_seen=fr.upper,
        run_id=run_id,
        rows_before=rows_before,
    )
    try:
        reader, con = _consolidated(uris, schema, target, spill)
        failpoint("compact:before_commit", view=view.name)
        try:
            version = table.commit_compaction(reader, predicate=f"{TIME} <= {int(target)}", info=info)
        finally:
            con.close()
    finally:
        shutil.rmtree(spill, ignore_errors=True)
    return version, rows_before


def _compacted(base: CompactResult, table: ViewTable, version: int, rows_before: int, target: int) -> CompactResult:
    """The result of the compaction committed at ``version`` (its counts from that commit's metrics)."""
    after = table.at_version(version)
    metrics = after.history(1)[0].metrics
    return dataclasses.replace(
        base,
        status="compacted",
        version=version,
        rows_before=rows_before,
        rows_after=_rows(after.add_actions()),
        rows_consolidated=int(metrics.get("num_added_rows", 0)),
        files_removed=int(metrics.get("num_removed_files", 0)),
        files_added=int(metrics.get("num_added_files", 0)),
        since=target,
    )


def compact(
    view: ViewDefinition,
    *,
    catalog: Catalog | None = None,
    since: int | None = None,
    if_due: bool = False,
    run_id: str | None = None,
    attempts: int = MAX_ATTEMPTS,
) -> CompactResult:
    """Consolidate every update with ``time <= since`` into one update per row at ``since``.

    ``since`` defaults to what the view's ``retain_history`` asks for (``upper - 1 - retain_history``,
    held back by views that read this one). With ``if_due`` (the DAG after an append) it compacts only
    when :func:`is_due`. An explicit ``since`` must lie in ``(current since, upper - 1]``.
    """
    run_id = run_id or f"compact-{uuid.uuid4().hex[:12]}"
    res = _compact(view, catalog=catalog, since=since, if_due=if_due, run_id=run_id, attempts=attempts)
    split = intermediate_split(view, columns_of=source_columns)
    # its intermediate tables too, each by its own retain_history, held by the view's upper
    for part in split.inners if split is not None else ():
        inner = _compact(
            part,
            catalog=split.catalog(catalog) if split else None,
            since=None,
            if_due=if_due,
            run_id=run_id,
            attempts=attempts,
        )
        log.info("view %s: intermediate table %s: %s", view.name, part.name, inner.summary())
    return res


def _compact(
    view: ViewDefinition,
    *,
    catalog: Catalog | None,
    since: int | None,
    if_due: bool,
    run_id: str,
    attempts: int,
) -> CompactResult:
    for attempt in range(1, attempts + 1):
        table = ViewTable.open(view)
        if not table.exists:
            return CompactResult(
                view.name, "nothing_to_do", since=0, previous_since=0, reason=f"table {view.target} does not exist yet"
            )
        fr = table.frontier
        base = CompactResult(
            view=view.name,
            status="nothing_to_do",
            since=fr.since,
            previous_since=fr.since,
            upper=fr.upper,
            attempts=attempt,
        )
        hold = downstream_hold(view, catalog)
        if since is None:
            target = _due_target(view, fr, hold, if_due, base)
        else:
            target = _explicit_target(view, fr, since, hold, base)
        if isinstance(target, CompactResult):
            return target
        version, rows_before = _commit(view, table, fr, target, run_id)
        if version is None:  # lost the race for the next version: start over from the new one
            continue
        res = _compacted(base, table, version, rows_before, target)
        log.info("%s", res.summary())
        return res
    return CompactResult(
        view.name,
        "gave_up",
        since=fr.since,
        previous_since=fr.since,
        upper=fr.upper,
        attempts=attempts,
        reason=f"lost {attempts} commit races in a row; the next compaction will try again",
    )
