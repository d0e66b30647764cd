"""append: ``compare_and_append`` the staged batch in one Delta commit. Cheap, no Spark.

The commit adds the staged files and sets the upper (a Delta application transaction)
only if the table's upper still equals the batch's ``lower``; it is made with
``max_commit_retries=0`` so it lands at exactly the version that was validated, or fails.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from pathlib import Path
from typing import Any, Literal

from mvsink.columns import ERROR
from mvsink.core.batch import BatchDescription, WriteReport
from mvsink.core.checks import format_counts
from mvsink.core.failpoints import failpoint
from mvsink.core.staging import collect_garbage, discard_batch, forget_manifest, read_manifest, staged_files_ok
from mvsink.core.table import (
    CONTENT_PRESERVING,
    META,
    active_paths,
    check_readable,
    history_after,
    meta_json,
    op_of,
    open_table,
    read_frontier,
)
from mvsink.definitions.view import ViewDefinition
from mvsink.exceptions import MvSinkError, StagingError
from mvsink.times import format_time

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
    checks: dict[str, Any] = dataclasses.field(default_factory=dict)  # {check: {"action", "rows"}}: totals at R
    reason: str = ""
    batch_id: str | None = None
    timings: dict[str, float] = dataclasses.field(default_factory=dict)

    def summary(self) -> str:
        checks = f"; checks: {format_counts(self.checks)}" if self.checks else ""
        if self.status == "appended":
            return (f"{self.view}: appended [{self.lower}, {self.upper}) at {format_time(self.refresh_time)}: "
                    f"+{self.rows_added} -{self.rows_retracted} rows, {self.bytes} bytes in {self.files} file(s), "
                    f"Delta version {self.version}, upper {self.upper}" + (f", {self.mode} diff" if self.mode else "")
                    + (f" ({self.reason})" if self.reason else "") + checks)
        if self.status == "dry_run":
            return (f"{self.view}: dry run [{self.lower}, {self.upper}): would add {self.rows_added} and retract "
                    f"{self.rows_retracted} rows" + (f" ({self.mode} diff)" if self.mode else "") + "; nothing written"
                    + checks)
        if self.status == "rescheduled":
            return f"{self.view}: rescheduled: upper is now {self.upper} ({self.reason})"
        return f"{self.view}: up to date: {self.reason}"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def commit_metadata(desc: BatchDescription, operation: str, **extra: Any) -> dict[str, str]:
    """Commit-info keys of our commits: a refresh log with lineage (values JSON-encoded)."""
    meta: dict[str, Any] = {
        "operation": operation, "view": desc.view, "lower": desc.lower, "upper": desc.upper,
        "refresh_time": desc.refresh_time, "run_id": desc.run_id, "batch_id": desc.batch_id,
    }
    if operation == "append":
        meta["sources"] = {s.name: s.version for s in desc.sources}
        meta["source_ids"] = {s.name: s.table_id for s in desc.sources}
        meta["definition"] = desc.definition
    meta.update(extra)
    return {META + k: json.dumps(v) for k, v in meta.items()}


def _commit(dt: Any, desc: BatchDescription, *, app_id: str, txn_version: int, schema: Any,
            actions: list[Any], meta: dict[str, str]) -> None:
    from deltalake.transaction import CommitProperties, Transaction

    dt.create_write_transaction(
        actions, mode="append", schema=schema,
        commit_properties=CommitProperties(custom_metadata=meta, max_commit_retries=0,
                                           app_transactions=[Transaction(app_id, txn_version)]),
    )


def _create_table(view: ViewDefinition, schema_b64: str) -> None:
    from deltalake import DeltaTable
    from deltalake.transaction import CommitProperties

    from mvsink.core.schema import decode_schema
    from mvsink.core.table import is_delta_table

    schema = decode_schema(schema_b64)
    try:
        DeltaTable.create(view.target, schema=schema, mode="error", name=view.name,
                          description=(view.description or None),
                          commit_properties=CommitProperties(custom_metadata={
                              META + "operation": json.dumps("create"), META + "view": json.dumps(view.name)}))
        log.info("view %s: created table %s", view.name, view.target)
    except Exception:
        if not is_delta_table(view.target):  # not a lost creation race: a real failure
            raise


def append(view: ViewDefinition, desc: BatchDescription, report: WriteReport | None) -> RefreshResult:
    """Commit the staged batch if the table's upper still equals ``desc.lower``.

    ``report`` is the write step's report (None for a no-change batch, which only advances
    the upper). Returns ``appended``, ``rescheduled`` (another writer moved the upper, or the
    table changed under the batch; staged files deleted) or ``dry_run``.
    """
    from deltalake.exceptions import CommitFailedError
    from deltalake.transaction import AddAction

    res = dict(view=view.name, refresh_time=desc.refresh_time, lower=desc.lower, batch_id=desc.batch_id)
    if desc.dry_run:
        assert report is not None
        return RefreshResult(status="dry_run", upper=desc.upper, rows_added=report.rows_added,
                             rows_retracted=report.rows_retracted, mode=report.mode, checks=report.checks,
                             **res)  # type: ignore[arg-type]
    if report is None and not desc.empty:
        report = read_manifest(desc.target, desc.batch_id)
        if report is None:
            raise StagingError(f"view {view.name}: batch {desc.batch_id} has no manifest under {desc.target}. "
                               "Fix: re-run the refresh (the write step did not finish).")
    staged = report is not None and report.status == "staged"
    if report is not None and report.status == "stale":
        return _mismatch(view, desc, None, "the batch was stale when write read the table", res)

    if open_table(desc.target) is None:
        if report is None:
            raise StagingError(f"view {view.name}: table {desc.target} vanished. Fix: re-run the refresh.")
        _create_table(view, report.schema)
    base_version = report.read_version if report is not None else desc.table_version
    files = report.files if staged and report is not None else ()
    now_ms = int(time.time() * 1000)
    actions = [AddAction(path=f.path, size=f.size, partition_values={}, modification_time=now_ms,
                         data_change=True, stats=f.stats) for f in files]

    failpoint("append:before_validate", view=view.name, views_dir=str(Path(view.file).parent),
              refresh_time=desc.refresh_time)
    for _ in range(MAX_ATTEMPTS):
        dt = open_table(desc.target)
        assert dt is not None
        check_readable(dt, path=desc.target, role=f"view {view.name}: target table")
        fr = read_frontier(dt, app_id=view.app_id, since_app_id=view.since_app_id)
        hist = history_after(dt, base_version)
        mine = [h for h in hist if op_of(h) == "append" and meta_json(h, "batch_id") == desc.batch_id]
        if mine:  # a retry after a lost reply: our batch is already in the log
            v = mine[0]["version"]
            _settle(view, desc, dt, fr.upper)
            return _appended(view, desc, report, v, fr.upper, res, note="already committed by an earlier attempt")

        if fr.upper == desc.lower:
            # Our own content-preserving commits are benign: a lost commit race to a compaction is
            # re-validated and retried here. A compaction is benign only if its since is below
            # lower (contents at lower - 1, which write read, are then unchanged); compaction
            # never goes past upper - 1, so anything else is treated like a foreign commit.
            foreign = [h for h in hist if op_of(h) not in CONTENT_PRESERVING
                       or (op_of(h) == "compact" and int(meta_json(h, "since") or 0) >= desc.lower)]
            if foreign:
                h = foreign[0]
                what = op_of(h) or h.get("operation", "unknown")
                return _mismatch(view, desc, fr.upper, f"the table changed after write read it "
                                 f"(version {h['version']}: {what})", res)
            problem = staged_files_ok(desc.target, files)
            if problem:
                raise StagingError(f"view {view.name}: {problem}. Fix: re-run the refresh; the batch will be restaged.")
            if report is not None and _needs_error_column(dt, report):
                _add_error_column(view, desc, dt)
                continue
            failpoint("append:before_commit", view=view.name)
            try:
                _commit(dt, desc, app_id=view.app_id, txn_version=desc.upper, schema=dt.schema(), actions=actions,
                        meta=commit_metadata(desc, "append",
                                             rows_added=report.rows_added if report else 0,
                                             rows_retracted=report.rows_retracted if report else 0,
                                             bytes=report.bytes if report else 0,
                                             mode=report.mode if report else "unchanged",
                                             mode_reason=report.mode_reason if report else "no source changed",
                                             **_checks_meta(desc, report)))
            except CommitFailedError as exc:
                log.info("view %s: commit at version %d lost a race (%s); re-validating", view.name,
                         dt.version() + 1, exc)
                continue
            version = dt.version() + 1
            failpoint("append:after_commit", view=view.name)
            _settle(view, desc, None, desc.upper)
            return _appended(view, desc, report, version, desc.upper, res)

        if fr.upper < desc.lower and desc.lower == view.as_of:
            try:
                _commit(dt, desc, app_id=view.app_id, txn_version=desc.lower, schema=dt.schema(), actions=[],
                        meta=commit_metadata(desc, "bump", from_upper=fr.upper))
                log.info("view %s: advanced the upper from %d to as_of %d", view.name, fr.upper, desc.lower)
            except CommitFailedError:
                pass
            continue
        return _mismatch(view, desc, fr.upper, "another writer moved the upper", res)
    raise MvSinkError(f"view {view.name}: append lost {MAX_ATTEMPTS} commit races in a row to unrelated commits. "
                      "Fix: re-run the refresh when the table is quieter.")


def _checks_of(desc: BatchDescription, report: WriteReport | None) -> dict[str, Any]:
    """Check counts of this append: write's, or for a no-change batch the last refresh's (unchanged)."""
    if report is not None:
        return report.checks
    return desc.base_checks or {}


def _checks_meta(desc: BatchDescription, report: WriteReport | None) -> dict[str, Any]:
    counts = _checks_of(desc, report)
    return {"checks": counts} if counts else {}


def _needs_error_column(dt: Any, report: WriteReport) -> bool:
    """The batch carries ``_mv_error`` (the view got checks) but the table has no such column yet."""
    from mvsink.core.schema import decode_schema

    return ERROR in decode_schema(report.schema).names and ERROR not in [f.name for f in dt.schema().fields]


def _add_error_column(view: ViewDefinition, desc: BatchDescription, dt: Any) -> None:
    """Add the nullable ``_mv_error`` column (a content-preserving commit: existing rows read it as NULL)."""
    from deltalake import Field
    from deltalake.schema import PrimitiveType
    from deltalake.transaction import CommitProperties

    try:
        dt.alter.add_columns([Field(ERROR, PrimitiveType("string"), nullable=True)],
                             commit_properties=CommitProperties(custom_metadata=commit_metadata(desc, "evolve"),
                                                                max_commit_retries=0))
        log.info("view %s: added column %s to %s (the view now has checks)", view.name, ERROR, view.target)
    except Exception as exc:  # lost a race (someone else added it, or another commit landed): re-validate
        log.info("view %s: adding %s did not commit (%s); re-validating", view.name, ERROR, exc)


def _settle(view: ViewDefinition, desc: BatchDescription, dt: Any | None, upper: int) -> None:
    forget_manifest(desc.target, desc.batch_id)
    dt = dt if dt is not None else open_table(desc.target)
    if dt is not None:
        dt.update_incremental()
        collect_garbage(desc.target, upper=upper, active=active_paths(dt))


def _appended(view: ViewDefinition, desc: BatchDescription, report: WriteReport | None, version: int,
              upper: int, res: dict[str, Any], note: str = "") -> RefreshResult:
    r = RefreshResult(status="appended", upper=upper, version=version,
                      rows_added=report.rows_added if report else 0,
                      rows_retracted=report.rows_retracted if report else 0,
                      bytes=report.bytes if report else 0, files=len(report.files) if report else 0,
                      mode=report.mode if report else "", checks=_checks_of(desc, report),
                      reason=note or ("no source changed: only the upper moved" if desc.empty else ""), **res)
    log.info("%s", r.summary())
    return r


def _mismatch(view: ViewDefinition, desc: BatchDescription, upper: int | None, why: str,
              res: dict[str, Any]) -> RefreshResult:
    discard_batch(desc.target, desc.batch_id)
    dt = open_table(desc.target)
    if dt is not None:
        fr = read_frontier(dt, app_id=view.app_id, since_app_id=view.since_app_id)
        upper = fr.upper
        collect_garbage(desc.target, upper=upper, active=active_paths(dt))
    log.warning("view %s: batch [%d, %d) not appended: %s; upper is now %s", view.name, desc.lower, desc.upper,
                why, upper)
    return RefreshResult(status="rescheduled", upper=upper, reason=why, **res)
