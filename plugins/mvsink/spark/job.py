"""The write step: compute ``desired - persisted`` with Spark and stage it, without committing.

:func:`run_write` does the I/O around the pure transformations of :mod:`mvsink.spark.transforms`;
:func:`main` is the spark-submit entry point (the script ``mvsink/spark/mv_write.py``).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mvsink.columns import DIFF, ERROR, TIME
from mvsink.core.batch import BatchDescription, StagedFile, WriteReport
from mvsink.core.checks import add_counts, counts_of
from mvsink.core.failpoints import failpoint
from mvsink.core.schema import encode_schema
from mvsink.core.staging import batch_dir, discard_batch, stats_json, write_intent, write_manifest
from mvsink.core.table import ViewTable
from mvsink.definitions.view import ViewDefinition, load_view_file
from mvsink.exceptions import MvSinkError
from mvsink.spark.checks import apply_checks
from mvsink.spark.incremental import incremental_corrections
from mvsink.spark.sources import arrow_table_schema, read_delta, register_sources
from mvsink.spark.transforms import consolidate, corrections
from mvsink.spark.validation import analyse, compare_schema

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

REPORT_PREFIX = "MVSINK_REPORT "
ERROR_PREFIX = "MVSINK_ERROR "


def run_write(spark: SparkSession, view: ViewDefinition, desc: BatchDescription) -> WriteReport:
    """Compute the corrections of ``desc`` and stage them (or only count them in a dry run)."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    t0 = time.monotonic()
    table = ViewTable.open_path(desc.target, view.name)
    fr = table.frontier

    register_sources(spark, view, desc)
    result = analyse(spark, view)
    # Tables of views with checks carry _mv_error; a table that has it keeps it (checks removed later
    # retract the error rows); tables of views that never had checks stay as they were.
    with_error = bool(view.checks) or ERROR in table.column_names
    schema_b64 = encode_schema(arrow_table_schema(result.schema, with_error=with_error))
    check_obs = Observation(f"mvsink_checks_{desc.batch_id[-8:]}") if view.checks else None
    base: dict[str, Any] = dict(view=view.name, batch_id=desc.batch_id, lower=desc.lower, upper=desc.upper,
                                read_version=fr.version, table_upper=fr.upper, schema=schema_b64)
    if fr.upper > desc.lower:
        log.warning("view %s: batch [%d, %d) is stale: the table's upper is already %d; staging nothing",
                    view.name, desc.lower, desc.upper, fr.upper)
        return WriteReport(status="stale", seconds=time.monotonic() - t0, **base)  # type: ignore[arg-type]

    corr, mode, reason = None, "full", "no earlier refresh of this definition to start from"
    zero = {c.name: {"action": c.action, "rows": 0} for c in view.checks}
    if table.exists:
        table_df = read_delta(spark, desc.target, version=fr.version, role=table.role)
        compare_schema(view, result.schema, table_df.schema)
        if desc.base_versions is not None and fr.version != desc.table_version:
            reason = f"the table moved from version {desc.table_version} to {fr.version} after mint"
        elif desc.base_versions is not None and view.checks and add_counts(view, desc.base_checks or {}, zero) is None:
            reason = "the last refresh recorded no check counts to start from"
        elif desc.base_versions is not None:
            corr, reason = incremental_corrections(spark, view, desc, base=desc.base_versions, desired=result,
                                                   with_error=with_error, observation=check_obs)
            mode = "incremental" if corr is not None else "full"
        elif not view.incremental:
            reason = "incremental: false in the view file"
        if corr is None:
            user_t = [c for c in table_df.columns if c not in (TIME, DIFF, ERROR)]
            err = [F.col(ERROR) if ERROR in table_df.columns else F.lit(None).cast("string").alias(ERROR)]
            renamed = table_df.select(*[F.col(a).alias(b) for a, b in zip(user_t, result.columns)],
                                      *(err if with_error else []), TIME, DIFF)
            persisted = consolidate(renamed, [c for c in renamed.columns if c not in (TIME, DIFF)],
                                    before=desc.lower)
    if corr is None:
        desired = apply_checks(result, view, with_error=with_error, observation=check_obs)
        if not table.exists:
            persisted = spark.createDataFrame([], desired.schema).withColumn(DIFF, F.lit(0).cast("bigint"))
        corr = corrections(desired, persisted, time=desc.time)

    def check_counts() -> dict[str, Any]:
        if check_obs is None:
            return {}
        counts = counts_of(view, check_obs.get)
        if mode == "incremental":  # the change's signed counts on top of the last refresh's totals
            return add_counts(view, desc.base_checks or {}, counts) or {}
        return counts
    log.info("view %s: %s diff (%s)", view.name, mode, reason)
    added = F.coalesce(F.sum(F.when(F.col(DIFF) > 0, F.col(DIFF))), F.lit(0)).alias("added")
    retracted = F.coalesce(F.sum(F.when(F.col(DIFF) < 0, -F.col(DIFF))), F.lit(0)).alias("retracted")

    base.update(mode=mode, mode_reason=reason)
    if desc.dry_run:
        row = corr.agg(added, retracted).collect()[0]
        log.info("view %s: dry run: %d rows to add, %d to retract", view.name, row["added"], row["retracted"])
        return WriteReport(status="dry_run", rows_added=int(row["added"]), rows_retracted=int(row["retracted"]),
                           checks=check_counts(), seconds=time.monotonic() - t0, **base)  # type: ignore[arg-type]

    folder = batch_dir(desc.target, desc.batch_id)
    # The batch folder is overwritten below. A try of this write orphaned by a killed Airflow task may
    # get here after a retry of the same batch committed: never overwrite a batch that can no longer
    # be staged (its files may be the table's now).
    if ViewTable.open_path(desc.target, view.name, check=False).frontier.upper > desc.lower:
        log.warning("view %s: batch [%d, %d) went stale before staging; staging nothing", view.name, desc.lower,
                    desc.upper)
        return WriteReport(status="stale", seconds=time.monotonic() - t0, **base)  # type: ignore[arg-type]
    write_intent(desc.target, desc.batch_id)
    obs = Observation(f"mvsink_{desc.batch_id[-8:]}")
    try:
        corr.observe(obs, added, retracted).write.mode("overwrite").parquet(str(folder))
        metrics = obs.get
    except Exception:
        # A writer that won the race may have cleaned up this (now dead) batch under us.
        now = ViewTable.open_path(desc.target, view.name, check=False).frontier
        if now.upper > desc.lower:
            discard_batch(desc.target, desc.batch_id)
            log.warning("view %s: batch [%d, %d) went stale while staging (upper is now %d); staged nothing",
                        view.name, desc.lower, desc.upper, now.upper)
            return WriteReport(status="stale", seconds=time.monotonic() - t0, **base)  # type: ignore[arg-type]
        raise
    files = []
    for p in sorted(folder.glob("*.parquet")):
        rows, stats = stats_json(str(p))
        if rows == 0:
            p.unlink()
            continue
        files.append(StagedFile(path=p.relative_to(desc.target).as_posix(), size=p.stat().st_size,
                                rows=rows, stats=stats))
    for junk in folder.iterdir():
        if not junk.name.endswith(".parquet"):
            junk.unlink() if junk.is_file() else None
    report = WriteReport(
        status="staged" if files else "empty", rows_added=int(metrics["added"]),
        rows_retracted=int(metrics["retracted"]), bytes=sum(f.size for f in files), files=tuple(files),
        checks=check_counts(), seconds=time.monotonic() - t0, **base,  # type: ignore[arg-type]
    )
    if files:
        write_manifest(desc.target, report)
        log.info("view %s: staged %d file(s), %d bytes: +%d -%d rows in batch %s", view.name, len(files),
                 report.bytes, report.rows_added, report.rows_retracted, desc.batch_id)
        failpoint("write:after_staging", view=view.name)
    else:
        discard_batch(desc.target, desc.batch_id)
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
        view = load_view_file(args.view_file)
        from pyspark.sql import SparkSession

        spark = SparkSession.builder.appName(f"mvsink-write-{view.name}").getOrCreate()
        report = run_write(spark, view, desc)
    except MvSinkError as exc:
        print(ERROR_PREFIX + json.dumps({"type": type(exc).__name__, "message": str(exc)}), flush=True)
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(REPORT_PREFIX + report.to_json(), flush=True)
    if args.report:
        Path(args.report).write_text(report.to_json())
    return 0
