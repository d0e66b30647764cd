"""The write step: compute ``desired - persisted`` with Spark and stage it, without committing.

:func:`run_write` does the I/O around the pure transformations of :mod:`mvsink.spark.transforms`;
:func:`main` is the spark-submit entry point (the script ``mvsink/write/mv_write.py``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mvsink.columns import DIFF, ERROR, is_hidden
from mvsink.core.batch import BatchDescription, WriteReport
from mvsink.core.checks import add_counts, counts_of
from mvsink.core.commitinfo import format_reads
from mvsink.core.costrecord import commit_cost, noting
from mvsink.core.deltalog import snapshot_cache
from mvsink.core.failpoints import failpoint
from mvsink.core.readlog import current_reads, read_log
from mvsink.core.schema import encode_schema
from mvsink.core.sourceschema import source_columns
from mvsink.core.sparklocation import spark_uri
from mvsink.core.staging import Staging
from mvsink.core.table import ViewTable, no_table
from mvsink.definitions.intermediate import described_view
from mvsink.definitions.view import ViewDefinition
from mvsink.definitions.viewfile import load_view_file
from mvsink.exceptions import MvSinkError, SchemaChangedError
from mvsink.incremental.aggplan import StatePlan, state_plan
from mvsink.incremental.modes.base import PlanFacts, WriteInputs
from mvsink.incremental.modes.full import refresh_change
from mvsink.incremental.modes.registry import REFRESH_MODES, Choice, choose
from mvsink.spark.conf import apply_storage_conf
from mvsink.spark.sources import Snapshot, arrow_table_schema, read_snapshot, register_sources
from mvsink.spark.validation import analyse, compare_schema

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame, Observation, SparkSession

log = logging.getLogger(__name__)

REPORT_PREFIX = "MVSINK_REPORT "
ERROR_PREFIX = "MVSINK_ERROR "
BAD_INPUT_EXIT = 2  # exit status of the job for bad input (MvSinkError): retrying will not help


def error_path(report: str) -> Path:
    """Where the job records bad input beside ``--report`` (read by the DAG's write task: no retry)."""
    return Path(report + ".error")


def run_write(spark: SparkSession, view: ViewDefinition, desc: BatchDescription) -> WriteReport:
    """Compute the corrections of ``desc`` and stage them (or only count them in a dry run)."""
    from mvsink.spark.jars import require_delta

    require_delta(spark, role=f"view {view.name}")
    jobs_before = _spark_jobs(spark)
    try:
        # each table version the step reads is opened once; what decides its cost is noted
        with snapshot_cache(), read_log(), noting() as notes:
            report = _run_write(spark, view, desc)
    finally:  # the input rows the step handed Spark as files (a partitioned recompute's restricted reads)
        Staging.of(desc.target, desc.batch_id).drop_reads()
    jobs_after = _spark_jobs(spark)
    if jobs_before is not None and jobs_after is not None:
        delta_jobs = _delta_log_jobs(spark, jobs_after - jobs_before)
        report = dataclasses.replace(
            report, spark_jobs=len(jobs_after - jobs_before) - delta_jobs, delta_log_jobs=delta_jobs
        )
    engine = str(notes.pop("engine", "spark"))  # (DuckDB's terms: only where the aggregate mode ran after all)
    engine = engine if report.mode == "incremental:aggregate" else "spark"
    report = dataclasses.replace(
        report, cost=commit_cost(notes, engine=engine, spark_jobs=report.spark_jobs, phases=report.phases)
    )
    log.info(
        "view %s: write step %.2fs (%s)%s%s",
        view.name,
        report.seconds,
        ", ".join(f"{k} {v:.2f}s" for k, v in report.phases.items()) or "-",
        # a Spark Connect client cannot see the server's jobs (no SparkContext): no count rather than a guess
        "" if report.spark_jobs < 0 else f", {report.spark_jobs} Spark job{'' if report.spark_jobs == 1 else 's'}",
        f" (and {report.delta_log_jobs} of Delta's to load table snapshots)" if report.delta_log_jobs > 0 else "",
    )
    return report


def _delta_log_jobs(spark: SparkSession, ids: set[int]) -> int:
    """How many of the jobs ``ids`` Delta's reader ran to load table snapshots: those it describes as
    ``Delta: ...`` (state reconstruction, file skipping) and the ``load`` of a table's protocol and metadata."""
    try:
        store = spark.sparkContext._jsc.sc().statusStore()
        n = 0
        for i in ids:
            job = store.job(i)
            description = job.description()
            text = str(description.get()) if description.isDefined() else ""
            if text.startswith("Delta:") or str(job.name()).startswith("load at "):
                n += 1
        return n
    except Exception:  # no status store (Connect) or a job already dropped from it: count none as Delta's
        return 0


def _spark_jobs(spark: SparkSession) -> set[int] | None:
    """The ids of the jobs Spark ran so far in this thread's job group (none set: the jobs outside every group), or
    None where Spark cannot say (Connect)."""
    try:
        sc = spark.sparkContext
        group = sc.getLocalProperty("spark.jobGroup.id")  # a caller's job group holds the write step's jobs too
        tracker = sc.statusTracker()
        jtracker, jvm = getattr(tracker, "_jtracker", None), getattr(sc, "_jvm", None)
        if jtracker is None or jvm is None:
            return set(tracker.getJobIdsForGroup(group))
        # A Java int[] of up to spark.ui.retainedJobs ids, as text in one py4j call (pyspark's list() of the array
        # makes one call per element: 0.1 s for 400 jobs, twice a write step).
        text = str(jvm.java.util.Arrays.toString(jtracker.getJobIdsForGroup(group)))
        return {int(x) for x in text.strip("[]").split(",") if x.strip()}
    except Exception:  # Spark Connect has no SparkContext
        return None


def _run_write(spark: SparkSession, view: ViewDefinition, desc: BatchDescription) -> WriteReport:
    from pyspark.sql import DataFrame as DataFrameType
    from pyspark.sql import Observation

    t0 = time.monotonic()
    apply_storage_conf(spark, view)  # a shared session (in-process, Connect) may not have been started for it
    register_sources(spark, view, desc)
    table = ViewTable.open_path(desc.target, view.name)
    fr = table.frontier
    result = analyse(spark, view)
    # Tables of views with checks carry _mv_error; a table that has it keeps it (checks removed later
    # retract the error rows); tables of views that never had checks stay as they were.
    with_error = bool(view.checks) or ERROR in table.column_names
    state = _state(spark, view, table, result, with_error=with_error)
    head = WriteReport.begun(
        desc,
        view=view.name,
        read_version=fr.version,
        table_upper=fr.upper,
        schema=encode_schema(arrow_table_schema((state.desired if state else result).schema, with_error=with_error)),
    )
    if fr.upper > desc.lower:
        log.warning(
            "view %s: batch [%d, %d) is stale: the table's upper is already %d; staging nothing",
            view.name,
            desc.lower,
            desc.upper,
            fr.upper,
        )
        return dataclasses.replace(head, seconds=time.monotonic() - t0)

    check_obs = Observation(f"mvsink_checks_{desc.batch_id[-8:]}") if view.checks else None
    t1 = time.monotonic()
    got = _corrections(spark, view, desc, table, result, state, with_error=with_error, check_obs=check_obs)
    corr, mode, reason = got.corrections, got.mode, got.reason
    log.info("view %s: %s diff (%s)", view.name, mode, reason)
    reads = _reads()
    if reads:
        log.info("view %s: read %s", view.name, format_reads(reads))
    # plan: sources and the query analysed; corrections: the changes read and, where the mode does it
    # eagerly, computed; stage: the corrections written (a lazy mode's computation happens here)
    phases = {"plan": t1 - t0, "corrections": time.monotonic() - t1}
    head = dataclasses.replace(head, mode=mode, mode_reason=reason, phases=phases, reads=reads)

    def check_counts() -> dict[str, Any]:
        if check_obs is None:
            return {}
        counts = counts_of(view, check_obs.get)
        if got.counts_change:  # the change's signed counts on top of the last refresh's totals
            return add_counts(view, desc.base_checks or {}, counts) or {}
        return counts

    if desc.dry_run:
        if isinstance(corr, DataFrameType):
            row = corr.agg(*_sizes()).collect()[0].asDict()
        else:
            row = local_sizes(corr)
        log.info("view %s: dry run: %d rows to add, %d to retract", view.name, row["added"], row["retracted"])
        return dataclasses.replace(
            head,
            status="dry_run",
            rows_added=int(row["added"]),
            rows_retracted=int(row["retracted"]),
            checks=check_counts(),
            seconds=time.monotonic() - t0,
        )
    return stage(view, desc, corr, head, check_counts=check_counts, t0=t0)


def _reads() -> dict[str, dict[str, int]]:
    """What the step read per source (:mod:`mvsink.incremental.pruning`'s log; the full diff logs every table
    source whole and the view's table, ``_table``)."""
    got = current_reads()
    return {} if got is None else {k: dict(v) for k, v in got.sources.items()}


def _state(
    spark: SparkSession, view: ViewDefinition, table: ViewTable, result: DataFrame, *, with_error: bool
) -> StatePlan | None:
    """The view's accumulable aggregate state (incremental/modes/aggregate.py), or None for a view without one.

    A new table of an eligible view gets the state; a table keeps what it was created with: one without
    state stays without, one with state keeps the same state columns (or the refresh is refused).
    """
    have = [c for c in table.column_names if is_hidden(c)] if table.exists else None
    if have == [] or (have is None and (not view.incremental or with_error)):
        return None
    plan = state_plan(spark, view, result)
    if have is None:
        if isinstance(plan, str):
            log.info("view %s: no hidden aggregate state: %s", view.name, plan)
            return None
        return plan
    if isinstance(plan, str) or list(plan.state_columns) != have:
        why = plan if isinstance(plan, str) else f"it would keep {list(plan.state_columns)}"
        raise SchemaChangedError(
            f"view {view.name}: table {view.target} holds hidden aggregate state {have} for an earlier "
            f"definition, which the query cannot keep ({why}). Fix: point `target` at a new table path "
            "(or delete the old table) to rebuild the view."
        )
    return plan


def _corrections(
    spark: SparkSession,
    view: ViewDefinition,
    desc: BatchDescription,
    table: ViewTable,
    result: DataFrame,
    state: StatePlan | None,
    *,
    with_error: bool,
    check_obs: Observation | None,
) -> Choice:
    """The batch's corrections, with the mode that computed them and why: the first refresh mode that applies
    and succeeds (:data:`~mvsink.incremental.modes.registry.REFRESH_MODES`, the full diff last).

    Corrections are a DataFrame, or an Arrow table when they were computed in the driver (few rows)."""
    fr = table.frontier
    snap = Snapshot(table.path, fr.version, table.delta) if table.exists else None  # (the handle write opened)
    if snap is not None:
        compare_schema(view, result.schema, snap.schema)

    def table_df() -> DataFrame:  # the table as Spark reads it (once per write step), for the modes that do
        if snap is None:
            raise no_table(table.path, role=table.role)
        return read_snapshot(spark, snap)

    base = desc.base_versions or {}
    inputs = WriteInputs(spark, view, desc, base, result, state, table, table_df, with_error, check_obs)
    plan = PlanFacts(spark, view, result, state, with_error)
    return choose(REFRESH_MODES, plan, refresh_change(inputs), inputs)


def _sizes() -> tuple[Column, Column]:
    """Aggregates of a correction set: rows added and rows retracted."""
    from pyspark.sql import functions as F

    added = F.coalesce(F.sum(F.when(F.col(DIFF) > 0, F.col(DIFF))), F.lit(0)).alias("added")
    retracted = F.coalesce(F.sum(F.when(F.col(DIFF) < 0, -F.col(DIFF))), F.lit(0)).alias("retracted")
    return added, retracted


def local_sizes(corr: pa.Table) -> dict[str, int]:
    """:func:`_sizes` of corrections held in the driver."""
    diffs = corr.column(DIFF).to_pylist()
    return {"added": sum(d for d in diffs if d > 0), "retracted": -sum(d for d in diffs if d < 0)}


def stage(
    view: ViewDefinition,
    desc: BatchDescription,
    corr: DataFrame | pa.Table,
    head: WriteReport,
    *,
    check_counts: Callable[[], dict[str, Any]],
    t0: float,
) -> WriteReport:
    """Write the corrections as the batch's Parquet files and its manifest (``empty``: nothing to stage).

    ``check_counts`` gives the check counts once the corrections were computed (by the write). Corrections held
    in the driver (an Arrow table) are staged with pyarrow: no Spark (a refresh without Spark stages here too).
    """
    import pyarrow as pa

    staging = Staging.of(desc.target, desc.batch_id)
    # The batch folder is overwritten below. A try of this write orphaned by a killed Airflow task may
    # get here after a retry of the same batch committed: never overwrite a batch that can no longer
    # be staged (its files may be the table's now).
    if ViewTable.open_path(desc.target, view.name, check=False).frontier.upper > desc.lower:
        log.warning(
            "view %s: batch [%d, %d) went stale before staging; staging nothing", view.name, desc.lower, desc.upper
        )
        return dataclasses.replace(head, status="stale", seconds=time.monotonic() - t0)
    t_stage = time.monotonic()
    staging.write_intent()
    try:
        if not isinstance(corr, pa.Table):
            from pyspark.sql import Observation

            obs = Observation(f"mvsink_{desc.batch_id[-8:]}")
            corr.observe(obs, *_sizes()).write.mode("overwrite").parquet(spark_uri(staging.folder))
            metrics = obs.get
        else:
            staging.write_rows(corr)
            metrics = local_sizes(corr)
    except Exception:
        # A writer that won the race may have cleaned up this (now dead) batch under us.
        now = ViewTable.open_path(desc.target, view.name, check=False).frontier
        if now.upper > desc.lower:
            staging.discard()
            log.warning(
                "view %s: batch [%d, %d) went stale while staging (upper is now %d); staged nothing",
                view.name,
                desc.lower,
                desc.upper,
                now.upper,
            )
            return dataclasses.replace(head, status="stale", seconds=time.monotonic() - t0)
        raise
    files = staging.files()
    report = dataclasses.replace(
        head,
        status="staged" if files else "empty",
        rows_added=int(metrics["added"]),
        rows_retracted=int(metrics["retracted"]),
        bytes=sum(f.size for f in files),
        files=tuple(files),
        checks=check_counts(),
        seconds=time.monotonic() - t0,
    )
    report = dataclasses.replace(report, phases={**report.phases, "stage": time.monotonic() - t_stage})
    if files:
        staging.write_manifest(report)
        log.info(
            "view %s: staged %d file(s), %d bytes: +%d -%d rows in batch %s",
            view.name,
            len(files),
            report.bytes,
            report.rows_added,
            report.rows_retracted,
            desc.batch_id,
        )
        failpoint("write:after_staging", view=view.name)
    else:
        staging.discard()
        log.info("view %s: no corrections; nothing staged", view.name)
    return report


def main(argv: list[str] | None = None) -> int:
    """spark-submit entry point: ``mv_write.py --view-file F --description JSON [--report PATH]``."""
    parser = argparse.ArgumentParser(prog="mv_write", description="Compute and stage a view's corrections.")
    parser.add_argument("--view-file", required=True)
    parser.add_argument("--description", required=True, help="batch description JSON, or @path to a file")
    parser.add_argument("--report", help="write the report JSON to this path")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        text = Path(args.description[1:]).read_text() if args.description.startswith("@") else args.description
        desc = BatchDescription.from_json(text)
        view = described_view(load_view_file(args.view_file), desc, columns_of=source_columns)
        from pyspark.sql import SparkSession

        spark = SparkSession.builder.appName(f"mvsink-write-{view.name}").getOrCreate()
        report = run_write(spark, view, desc)
    except MvSinkError as exc:  # bad input: one line, no traceback; anything else fails with its traceback
        record = json.dumps({"type": type(exc).__name__, "message": str(exc)})
        print(ERROR_PREFIX + record, flush=True)
        print(f"error: {exc}", file=sys.stderr)
        if args.report:
            error_path(args.report).write_text(record)
        return BAD_INPUT_EXIT
    print(REPORT_PREFIX + report.to_json(), flush=True)
    if args.report:
        Path(args.report).write_text(report.to_json())
    return 0
