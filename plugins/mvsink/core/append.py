"""append: ``compare_and_append`` the staged batch in one Delta commit. Cheap, no Spark.

The commit adds the staged files and sets the upper (a Delta application transaction)
only if the table's upper still equals the batch's ``lower``; it is made with
``max_commit_retries=0`` so it lands at exactly the version that was validated, or fails.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from pathlib import Path
from typing import Any, Literal

from mvsink.columns import ERROR
from mvsink.core.batch import BatchDescription, WriteReport
from mvsink.core.checks import format_counts
from mvsink.core.commitinfo import CommitInfo, format_reads
from mvsink.core.costrecord import add_to_history, record_of
from mvsink.core.failpoints import failpoint
from mvsink.core.staging import collect_garbage, discard_batch, forget_manifest, read_manifest, staged_files_ok
from mvsink.core.table import ViewTable
from mvsink.definitions.view import ViewDefinition
from mvsink.exceptions import CommitRaceError, StagingError
from mvsink.times import format_time, format_time_or_none

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 20

Status = Literal["appended", "rescheduled", "up_to_date", "dry_run"]


@dataclasses.dataclass(frozen=True)
class RefreshResult:
    """The outcome of a refresh, as reported to the CLI, the DAG and the logs."""

    view: str
    status: Status
    refresh_time: int
    lower: int | None = None
    upper: int | None = None  # the table's upper after this step
    rows_added: int = 0
    rows_retracted: int = 0
    bytes: int = 0
    files: int = 0
    version: int | None = None
    mode: str = ""  # how write computed the corrections: full, incremental ("" when write did not run)
    mode_reason: str = ""  # why that mode (the commit info's mvsink.mode_reason; "" when write did not run)
    checks: dict[str, Any] = dataclasses.field(default_factory=dict)  # {check: {"action", "rows"}}: totals at R
    reason: str = ""
    batch_id: str | None = None
    timings: dict[str, float] = dataclasses.field(default_factory=dict)  # seconds: mint, write (write.<phase>), append
    spark_jobs: int = -1  # Spark jobs the write step ran (0: none, or it did not run; -1: unknown)
    reads: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)  # per source: bytes, files read

    def summary(self) -> str:
        """One readable line (times as ISO-8601 UTC); ``to_dict`` keeps the integers."""
        checks = f"; checks: {format_counts(self.checks)}" if self.checks else ""
        batch = f"[{format_time_or_none(self.lower)}, {format_time_or_none(self.upper)})"
        if self.status == "appended":
            return (
                f"{self.view}: appended {batch} at {format_time(self.refresh_time)}: "
                f"+{self.rows_added} -{self.rows_retracted} rows, {self.bytes} bytes in {self.files} file(s), "
                f"Delta version {self.version}, final through {format_time_or_none(_final(self.upper))}"
                + (f", {self.mode} diff" if self.mode else "")
                + (f" ({self.reason})" if self.reason else "")
                + checks
                + (f"; read {format_reads(self.reads)}" if self.reads else "")
            )
        if self.status == "dry_run":
            return (
                f"{self.view}: dry run {batch}: would add {self.rows_added} and retract "
                f"{self.rows_retracted} rows"
                + (" (no source changed)" if self.mode == "unchanged" else f" ({self.mode} diff)" if self.mode else "")
                + "; nothing written"
                + checks
            )
        if self.status == "rescheduled":
            return f"{self.view}: rescheduled: upper is now {format_time_or_none(self.upper)} ({self.reason})"
        return f"{self.view}: up to date: {self.reason}"

    def to_dict(self) -> dict[str, Any]:
        """Every field (times as integer epoch ms), plus the times as ISO-8601 UTC (``*_utc``)."""
        d = dataclasses.asdict(self)
        iso = {
            "refresh_time": format_time(self.refresh_time),
            "lower": format_time_or_none(self.lower),
            "upper": format_time_or_none(self.upper),
        }
        out: dict[str, Any] = {}
        for k, v in d.items():  # each ISO-8601 time right after its integer, for people reading the JSON
            out[k] = v
            if k in iso:
                out[f"{k}_utc"] = iso[k]
        out["final_through_utc"] = format_time_or_none(_final(self.upper))
        return out


def _final(upper: int | None) -> int | None:
    return upper - 1 if upper is not None and upper > 0 else None


def append(view: ViewDefinition, desc: BatchDescription, report: WriteReport | None) -> RefreshResult:
    """Commit the staged batch if the table's upper still equals ``desc.lower``.

    ``report`` is the write step's report (None for a no-change batch, which only advances
    the upper). Returns ``appended``, ``rescheduled`` (another writer moved the upper, or the
    table changed under the batch; staged files deleted) or ``dry_run``.
    """
    res = RefreshResult(
        view=view.name, status="rescheduled", refresh_time=desc.refresh_time, lower=desc.lower, batch_id=desc.batch_id
    )
    if desc.dry_run:  # what the refresh would do (a no-change batch, which skips write: nothing)
        return dataclasses.replace(
            res,
            status="dry_run",
            upper=desc.upper,
            rows_added=report.rows_added if report else 0,
            rows_retracted=report.rows_retracted if report else 0,
            mode=report.mode if report else "unchanged",
            mode_reason=report.mode_reason if report else "",
            reads=report.reads if report else {},
            checks=_checks_of(desc, report),
        )
    report = _staged_report(view, desc, report)
    if report is not None and report.status == "stale":
        return _mismatch(view, desc, None, "the batch was stale when write read the table", res)
    if not _table(view, desc, check=False).exists:
        if report is None:
            raise StagingError(f"view {view.name}: table {desc.target} vanished. Fix: re-run the refresh.")
        from mvsink.core.schema import decode_schema

        ViewTable.create(view, decode_schema(report.schema))

    failpoint(
        "append:before_validate", view=view.name, views_dir=str(Path(view.file).parent), refresh_time=desc.refresh_time
    )
    for _ in range(MAX_ATTEMPTS):
        result = _attempt(view, desc, report, res)
        if result is not None:
            return result
    raise CommitRaceError(
        f"view {view.name}: append lost {MAX_ATTEMPTS} commit races in a row to unrelated commits. "
        "Fix: re-run the refresh when the table is quieter."
    )


def _staged_report(view: ViewDefinition, desc: BatchDescription, report: WriteReport | None) -> WriteReport | None:
    """The write step's report: as given, else the batch's manifest (None only for a no-change batch)."""
    if report is not None or desc.empty:
        return report
    report = read_manifest(desc.target, desc.batch_id)
    if report is None:
        raise StagingError(
            f"view {view.name}: batch {desc.batch_id} has no manifest under {desc.target}. "
            "Fix: re-run the refresh (the write step did not finish)."
        )
    return report


def _attempt(
    view: ViewDefinition, desc: BatchDescription, report: WriteReport | None, res: RefreshResult
) -> RefreshResult | None:
    """One validate-and-commit round; None when it must be re-validated (a lost race, an evolve, a bump)."""
    files = report.files if report is not None and report.status == "staged" else ()
    table = _table(view, desc).require()
    fr = table.frontier
    hist = table.commits_after(report.read_version if report is not None else desc.table_version)
    mine = [h for h in hist if h.op == "append" and h.info is not None and h.info.batch_id == desc.batch_id]
    if mine:  # a retry after a lost reply: our batch is already in the log
        _settle(view, desc, table, fr.upper)
        return _appended(
            view, desc, report, mine[0].version, fr.upper, res, note="already committed by an earlier attempt"
        )
    if fr.upper == desc.lower:
        # Our own content-preserving commits are benign: a lost commit race to a compaction is
        # re-validated and retried here. A compaction is benign only if its since is below
        # lower (contents at lower - 1, which write read, are then unchanged); compaction
        # never goes past upper - 1, so anything else is treated like a foreign commit.
        foreign = [
            h
            for h in hist
            if h.info is None
            or not h.info.content_preserving
            or (h.info.operation == "compact" and int(h.info.since or 0) >= desc.lower)
        ]
        if foreign:
            h = foreign[0]
            return _mismatch(
                view,
                desc,
                fr.upper,
                f"the table changed after write read it (version {h.version}: {h.op or h.operation})",
                res,
            )
        failpoint(
            "append:before_files_check",
            view=view.name,
            views_dir=str(Path(view.file).parent),
            refresh_time=desc.refresh_time,
        )
        problem = staged_files_ok(desc.target, files)
        if problem:
            if _table(view, desc, check=False).frontier.upper != desc.lower:
                # Another writer committed since the frontier above was read and cleaned up this batch, dead
                # from that moment: re-validate, which finds the moved upper and reschedules.
                return None
            raise StagingError(f"view {view.name}: {problem}. Fix: re-run the refresh; the batch will be restaged.")
        if report is not None and _needs_error_column(table, report):
            table.add_error_column(CommitInfo.for_batch(desc, "evolve"))
            return None
        failpoint("append:before_commit", view=view.name)
        info = _append_info(desc, report)
        version = table.commit_files(info, files, upper=desc.upper)
        if version is None:  # lost a race to another commit: re-validate
            return None
        failpoint("append:after_commit", view=view.name)
        _add_to_history(desc, info, version)
        _settle(view, desc, None, desc.upper)
        return _appended(view, desc, report, version, desc.upper, res)
    if fr.upper < desc.lower and desc.lower == view.as_of:
        if (
            table.commit_files(CommitInfo.for_batch(desc, "bump", from_upper=fr.upper), (), upper=desc.lower)
            is not None
        ):
            log.info("view %s: advanced the upper from %d to as_of %d", view.name, fr.upper, desc.lower)
        return None
    return _mismatch(view, desc, fr.upper, "another writer moved the upper", res)


def _table(view: ViewDefinition, desc: BatchDescription, *, check: bool = True) -> ViewTable:
    """The view's table as the batch names it (the table mint read and write staged into)."""
    return ViewTable.open_path(desc.target, view.name, check=check)


def _append_info(desc: BatchDescription, report: WriteReport | None) -> CommitInfo:
    """The append's commit info: the batch, its lineage, what write computed and how."""
    counts = _checks_of(desc, report)
    return CommitInfo.for_batch(
        desc,
        "append",
        rows_added=report.rows_added if report else 0,
        rows_retracted=report.rows_retracted if report else 0,
        bytes=report.bytes if report else 0,
        mode=report.mode if report else "unchanged",
        mode_reason=report.mode_reason if report else "no source changed",
        checks=counts or None,
        reads=(report.reads or None) if report else None,
        cost=(report.cost or None) if report else None,
        **_timing(desc, report),
    )


def _add_to_history(desc: BatchDescription, info: CommitInfo, version: int) -> None:
    """Add the committed refresh to the view's cost history (never fails the refresh: the commit has landed); a
    batch without a write step (no source changed) costs nothing to choose and is left out."""
    if info.mode == "unchanged":
        return
    try:
        record = record_of(
            info.cost,
            version=version,
            at=int(time.time() * 1000),
            mode=info.mode or "",
            write_ms=info.write_ms,
            duration_ms=info.duration_ms,
            reads=info.reads,
        )
    except (TypeError, ValueError):  # a malformed note: no record rather than a failed refresh
        log.warning("view %s: the refresh's cost was not recorded in its history", desc.view, exc_info=True)
        return
    add_to_history(desc.target, record)


def _timing(desc: BatchDescription, report: WriteReport | None) -> dict[str, int]:
    """How long the refresh took: from mint to this commit (``duration_ms``), and the write step's own time."""
    out = {"write_ms": round(report.seconds * 1000) if report else 0}
    if desc.minted_at is not None:
        out["duration_ms"] = max(0, int(time.time() * 1000) - desc.minted_at)
    return out


def _checks_of(desc: BatchDescription, report: WriteReport | None) -> dict[str, Any]:
    """Check counts of this append: write's, or for a no-change batch the last refresh's (unchanged)."""
    if report is not None:
        return report.checks
    return desc.base_checks or {}


def _needs_error_column(table: ViewTable, report: WriteReport) -> bool:
    """The batch carries ``_mv_error`` (the view got checks) but the table has no such column yet."""
    from mvsink.core.schema import decode_schema

    return ERROR in decode_schema(report.schema).names and ERROR not in table.column_names


def _settle(view: ViewDefinition, desc: BatchDescription, table: ViewTable | None, upper: int) -> None:
    forget_manifest(desc.target, desc.batch_id)
    table = table.reload() if table is not None else _table(view, desc, check=False)
    if table.exists:
        collect_garbage(desc.target, upper=upper, active=table.active_paths())


def _appended(
    view: ViewDefinition,
    desc: BatchDescription,
    report: WriteReport | None,
    version: int,
    upper: int,
    res: RefreshResult,
    note: str = "",
) -> RefreshResult:
    r = dataclasses.replace(
        res,
        status="appended",
        upper=upper,
        version=version,
        rows_added=report.rows_added if report else 0,
        rows_retracted=report.rows_retracted if report else 0,
        bytes=report.bytes if report else 0,
        files=len(report.files) if report else 0,
        mode=report.mode if report else "",
        mode_reason=report.mode_reason if report else "",
        reads=report.reads if report else {},
        checks=_checks_of(desc, report),
        reason=note or ("no source changed: only the upper moved" if desc.empty else ""),
    )
    log.info("%s", r.summary())
    return r


def _mismatch(
    view: ViewDefinition, desc: BatchDescription, upper: int | None, why: str, res: RefreshResult
) -> RefreshResult:
    discard_batch(desc.target, desc.batch_id)
    table = _table(view, desc, check=False)
    if table.exists:
        upper = table.frontier.upper
        collect_garbage(desc.target, upper=upper, active=table.active_paths())
    log.warning(
        "view %s: batch [%d, %d) not appended: %s; upper is now %s", view.name, desc.lower, desc.upper, why, upper
    )
    return dataclasses.replace(res, status="rescheduled", upper=upper, reason=why)
