"""write: compute ``desired - persisted`` with Spark and stage it, without committing.

The transformations (:func:`consolidate`, :func:`corrections`, :func:`expand`) are pure
``DataFrame -> DataFrame`` functions; :func:`run_write` does the I/O around them and
:func:`main` is the spark-submit entry point (``spark_jobs/mv_write.py``).
"""

from __future__ import annotations

import argparse
import base64
import json
import logging
import re
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mvsink.core.batch import BatchDescription, StagedFile, WriteReport
from mvsink.core.failpoints import failpoint
from mvsink.core.staging import batch_dir, discard_batch, stats_json, write_intent, write_manifest
from mvsink.core.table import check_readable, open_table, read_frontier, since_app_id, upper_app_id
from mvsink.definitions.view import RESERVED_PREFIX, ViewDefinition, load_view_file
from mvsink.exceptions import MvSinkError, QueryError, SchemaChangedError
from mvsink.spark.checks import ERROR, add_counts, apply_checks, counts_of, validate_checks
from mvsink.spark.incremental import incremental_corrections
from mvsink.times import format_time

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import DataType, StructType

log = logging.getLogger(__name__)

TIME = "_mv_time"
DIFF = "_mv_diff"
REPORT_PREFIX = "MVSINK_REPORT "
ERROR_PREFIX = "MVSINK_ERROR "
_BAD_NAME_CHARS = re.compile(r"[ ,;{}()\n\t=]")


# ---------------------------------------------------------------- pure transformations

def consolidate(updates: DataFrame, columns: list[str], *, before: int | None = None,
                through: int | None = None) -> DataFrame:
    """Sum ``_mv_diff`` per row over updates with ``time < before`` / ``time <= through``; drop zeros."""
    from pyspark.sql import functions as F

    df = updates
    if before is not None:
        df = df.where(F.col(TIME) < F.lit(before))
    if through is not None:
        df = df.where(F.col(TIME) <= F.lit(through))
    return (df.groupBy(*columns).agg(F.sum(DIFF).cast("bigint").alias(DIFF))
            .where(F.col(DIFF) != 0))


def corrections(desired: DataFrame, persisted: DataFrame, *, time: int) -> DataFrame:
    """Updates at ``time`` that turn ``persisted`` (consolidated, with ``_mv_diff``) into ``desired``.

    Union + group-by over all columns: NULLs group together, duplicates are counted, and
    damaged persisted state (negative or spurious multiplicities) is repaired.
    """
    from pyspark.sql import functions as F

    columns = desired.columns
    plus = desired.select(*columns, F.lit(1).cast("bigint").alias(DIFF))
    minus = persisted.select(*columns, (-F.col(DIFF)).alias(DIFF))
    return (plus.unionByName(minus).groupBy(*columns)
            .agg(F.sum(DIFF).cast("bigint").alias(DIFF))
            .where(F.col(DIFF) != 0)
            .select(*columns, F.lit(time).cast("bigint").alias(TIME), DIFF))


def expand(consolidated: DataFrame) -> DataFrame:
    """Rows of a consolidated update set, each repeated by its (positive) multiplicity."""
    from pyspark.sql import functions as F

    columns = [c for c in consolidated.columns if c not in (DIFF, TIME)]
    return (consolidated.where(F.col(DIFF) > 0)
            .select(*columns, F.explode(F.sequence(F.lit(1).cast("bigint"), F.col(DIFF))).alias("_mv_n"))
            .drop("_mv_n"))


# ---------------------------------------------------------------- validation

def unsupported_type(dt: DataType) -> str | None:
    """Why Spark-side grouping or Delta cannot hold this type, or None."""
    from pyspark.sql import types as T

    if isinstance(dt, T.MapType):
        return "MAP (Spark cannot group rows by a map)"
    if isinstance(dt, T.NullType):
        return "VOID (an untyped NULL)"
    if isinstance(dt, (T.CalendarIntervalType, T.DayTimeIntervalType, T.YearMonthIntervalType)):
        return "INTERVAL (Delta has no interval type)"
    name = type(dt).__name__
    if name in ("VariantType", "TimeType", "ObjectType", "GeographyType", "GeometryType"):
        return f"{dt.simpleString().upper()} (not supported by Delta tables written here)"
    if isinstance(dt, T.ArrayType):
        return unsupported_type(dt.elementType)
    if isinstance(dt, T.StructType):
        for f in dt.fields:
            why = unsupported_type(f.dataType)
            if why:
                return why
    return None


_TYPE_FIX = {
    "MAP": "convert it, e.g. to_json(col) or map_entries(col)",
    "VOID": "cast it to a type, e.g. CAST(NULL AS STRING)",
    "INTERVAL": "convert it to a number, e.g. a count of seconds",
}


def validate_output(view: ViewDefinition, schema: StructType) -> None:
    """Refuse result columns the table cannot hold or the diff cannot group on."""
    seen: dict[str, str] = {}
    for f in schema.fields:
        low = f.name.lower()
        if low.startswith(RESERVED_PREFIX):
            raise QueryError(f"view {view.name}: the query returns column {f.name!r}; names starting with "
                             f"{RESERVED_PREFIX} are reserved. Fix: alias the column to another name.")
        if _BAD_NAME_CHARS.search(f.name) or not f.name:
            raise QueryError(f"view {view.name}: the query returns column {f.name!r}, whose name a Delta table "
                             "cannot hold (spaces, commas, parentheses, =). Fix: give it an alias, e.g. "
                             "count(*) AS n.")
        if low in seen:
            raise QueryError(f"view {view.name}: the query returns column {f.name!r} twice. "
                             "Fix: alias one of them.")
        seen[low] = f.name
        why = unsupported_type(f.dataType)
        if why:
            fix = next((v for k, v in _TYPE_FIX.items() if why.startswith(k)), "cast it to a supported type")
            raise QueryError(f"view {view.name}: column {f.name!r} has type {why}. Fix: {fix}.")
    missing = [k for k in view.key if k.lower() not in seen]
    if missing:
        raise QueryError(f"view {view.name}: key column(s) {missing} are not in the query's result "
                         f"{list(seen.values())}. Fix: correct `key` in the view file.")


def _first_paragraph(exc: BaseException) -> str:
    text = str(exc).strip()
    for cut in ("\n\nJVM stacktrace", ";\n'", "\n== SQL", "\n\tat "):
        if cut in text:
            text = text[: text.index(cut)]
    return text[:800]


def analyse(spark: SparkSession, view: ViewDefinition) -> DataFrame:
    """The view's query as a DataFrame, validated (analysis errors become QueryError)."""
    from pyspark.errors import PySparkException

    try:
        desired = spark.sql(view.query)
        schema = desired.schema
    except PySparkException as exc:
        raise QueryError(f"view {view.name}: the query does not analyse: {_first_paragraph(exc)}. "
                         f"Fix: correct the SQL in {view.file or 'the view file'}; sources are available "
                         f"as {[s.name for s in view.sources]}.") from None
    validate_output(view, schema)
    validate_checks(view, desired)
    try:
        deterministic = bool(desired._jdf.queryExecution().analyzed().deterministic())
    except Exception:  # Spark Connect has no _jdf; the lexical check at parse time still applies
        deterministic = True
    if not deterministic:
        raise QueryError(f"view {view.name}: the query is not deterministic (it uses a random, time- or "
                         "file-dependent expression). Fix: make the view a function of its sources.")
    return desired


# ---------------------------------------------------------------- I/O

def arrow_table_schema(schema: StructType, *, with_error: bool = False) -> pa.Schema:
    """Arrow schema of the view's table: the query's columns, then ``_mv_time``, ``_mv_diff``
    (and ``_mv_error`` for a view with checks)."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    user = to_arrow_schema(schema, timezone="UTC")
    fields = [f.with_nullable(True) for f in user] + [pa.field(TIME, pa.int64()), pa.field(DIFF, pa.int64())]
    if with_error:
        fields.append(pa.field(ERROR, pa.string()))
    return pa.schema(fields)


def encode_schema(schema: pa.Schema) -> str:
    return base64.b64encode(schema.serialize().to_pybytes()).decode()


def decode_schema(text: str) -> pa.Schema:
    import pyarrow as pa

    return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(text)))


def _spark_schema_of(dt: Any) -> StructType:
    import pyarrow as pa
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(pa.schema(dt.schema().to_arrow()), prefer_timestamp_ntz=False)


def read_delta(spark: SparkSession, path: str, *, version: int | None, role: str) -> DataFrame:
    """A Delta snapshot as a DataFrame, read as Parquet from the file list delta-rs resolves."""
    dt = open_table(path, version=version)
    if dt is None:
        from mvsink.exceptions import SourceError

        raise SourceError(f"{role}: no Delta table at {path}. Fix: create it or correct the path.")
    check_readable(dt, path=path, role=role)
    schema = _spark_schema_of(dt)
    uris = dt.file_uris()
    if not uris:
        return spark.createDataFrame([], schema)
    reader = spark.read.schema(schema)
    if dt.metadata().partition_columns:
        reader = reader.option("basePath", str(Path(path).resolve()))
    return reader.parquet(*uris).select(*schema.names)


def register_sources(spark: SparkSession, view: ViewDefinition, desc: BatchDescription) -> None:
    """Expose each source as a temp view, at the snapshot mint chose."""
    for s in desc.sources:
        role = f"view {view.name}: source '{s.name}'"
        df = read_delta(spark, s.path, version=s.version, role=role)
        if s.kind == "view":
            assert s.view is not None
            up = read_frontier(open_table(s.path, version=s.version), app_id=upper_app_id(s.view),
                               since_app_id=since_app_id(s.view))
            if desc.time < up.since:
                from mvsink.exceptions import SourceError

                raise SourceError(f"{role}: view {s.view} is compacted up to {format_time(up.since)} "
                                  f"({up.since}); it cannot be read at {format_time(desc.time)}. Fix: refresh "
                                  f"at or after that time, or give {s.view} a longer retain_history.")
            cols = [c for c in df.columns if c not in (TIME, DIFF)]
            df = expand(consolidate(df, cols, through=desc.time))
            if ERROR in cols:  # a view reads another view's ok collection
                from pyspark.sql import functions as F

                df = df.where(F.col(ERROR).isNull()).drop(ERROR)
        df.createOrReplaceTempView(s.name)


def _compare_schema(view: ViewDefinition, desired: StructType, table: StructType) -> None:
    want = [(f.name.lower(), f.dataType.simpleString()) for f in desired.fields]
    have = [(f.name.lower(), f.dataType.simpleString()) for f in table.fields if f.name not in (TIME, DIFF, ERROR)]
    if want != have:
        raise SchemaChangedError(
            f"view {view.name}: the query now returns columns {want} but table {view.target} holds {have}. "
            "Fix: restore the query's columns and types, or point `target` at a new table path "
            "(or delete the old table) to rebuild the view with the new shape.")


def run_write(spark: SparkSession, view: ViewDefinition, desc: BatchDescription) -> WriteReport:
    """Compute the corrections of ``desc`` and stage them (or only count them in a dry run)."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    t0 = time.monotonic()
    dt = open_table(desc.target)
    if dt is not None:
        check_readable(dt, path=desc.target, role=f"view {view.name}: target table")
    fr = read_frontier(dt, app_id=view.app_id, since_app_id=view.since_app_id)

    register_sources(spark, view, desc)
    result = analyse(spark, view)
    # Tables of views with checks carry _mv_error; a table that has it keeps it (checks removed later
    # retract the error rows); tables of views that never had checks stay as they were.
    table_names = [f.name for f in dt.schema().fields] if dt is not None else []
    with_error = bool(view.checks) or ERROR in table_names
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
    if dt is not None:
        table_df = read_delta(spark, desc.target, version=fr.version, role=f"view {view.name}: target table")
        _compare_schema(view, result.schema, table_df.schema)
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
        if dt is None:
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
    if read_frontier(open_table(desc.target), app_id=view.app_id, since_app_id=view.since_app_id).upper > desc.lower:
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
        now = read_frontier(open_table(desc.target), app_id=view.app_id, since_app_id=view.since_app_id)
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
