"""Bodies of the Airflow tasks: gather parameters from the task context, call the protocol."""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mvsink import settings
from mvsink.airflow.params import run_params
from mvsink.core.append import append
from mvsink.core.batch import BatchDescription, NothingToDo, WriteReport
from mvsink.core.mint import mint
from mvsink.definitions.catalog import Catalog
from mvsink.exceptions import MvSinkError
from mvsink.times import format_time

log = logging.getLogger(__name__)


def reports_dir() -> Path:
    """Where the write job leaves its report for append (must be shared by both tasks' workers)."""
    return settings.reports_dir()


def spark_env() -> dict[str, str]:
    """Environment of the spark-submit process (the data root and this Python), fixed when the DAG is parsed.

    The provider's hook starts spark-submit with the task's whole environment updated with these.
    """
    env = {
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": settings.spark_local_ip(),
    }
    env.update(settings.env_subset(settings.SPARK_JOB_ENV))
    return env


def mint_step(view_name: str, views_dir: str, context: dict[str, Any]) -> list[str]:
    catalog = Catalog(views_dir)
    view = catalog.get(view_name)
    ti = context["ti"]
    params = run_params(context, view=view.name)
    r, dry_run = params.refresh_time, params.dry_run
    run_id = str(context["dag_run"].run_id)
    desc = mint(view, r, catalog=catalog, run_id=run_id, dry_run=dry_run)
    if isinstance(desc, NothingToDo):
        status = "waiting for inputs" if desc.reason == "waiting_for_inputs" else desc.reason.replace("_", " ")
        log.info("view %s at %s: %s: %s; skipping write and append", view.name, format_time(r), status, desc.detail)
        ti.xcom_push(
            key="summary",
            value={
                "view": view.name,
                "status": desc.reason,
                "refresh_time": r,
                "upper": desc.upper,
                "reason": desc.detail,
            },
        )
        ti.xcom_push(key="report", value=f"{view.name}: {status}: {desc.detail}")
        return []
    report_path = reports_dir() / f"{desc.batch_id}.json"
    report_path.parent.mkdir(parents=True, exist_ok=True)
    report_path.unlink(missing_ok=True)
    from mvsink.write.job import error_path

    error_path(str(report_path)).unlink(missing_ok=True)  # a bad-input record of an earlier run
    ti.xcom_push(key="description", value=desc.to_json())
    ti.xcom_push(key="report_path", value=str(report_path))
    log.info(
        "view %s: minted [%d, %d) at %s%s%s",
        view.name,
        desc.lower,
        desc.upper,
        format_time(r),
        " (dry run)" if dry_run else "",
        " (no source changed: skipping the Spark step)" if desc.empty else "",
    )
    return ["append"] if desc.empty else ["write"]


def write_spark_free_step(view_name: str, views_dir: str, context: dict[str, Any]) -> dict[str, Any] | None:
    """The write step without Spark where it can run so (:mod:`mvsink.write.driver`): its summary, with the report
    left where append reads it; else None (the write task then runs Spark)."""
    from mvsink.write.driver import write_without_spark

    view = Catalog(views_dir).get(view_name)
    ti = context["ti"]
    desc = BatchDescription.from_json(ti.xcom_pull(task_ids="mint", key="description"))
    report = write_without_spark(view, desc)
    if report is None:
        return None
    Path(ti.xcom_pull(task_ids="mint", key="report_path")).write_text(report.to_json())
    return _summary(report)


def _summary(report: WriteReport) -> dict[str, Any]:
    return {
        "status": report.status,
        "rows_added": report.rows_added,
        "rows_retracted": report.rows_retracted,
        "bytes": report.bytes,
        "files": len(report.files),
        "seconds": round(report.seconds, 3),
    }


def write_connect_step(
    view_name: str,
    views_dir: str,
    context: dict[str, Any],
    *,
    url: str,
    conf: Mapping[str, str] | None = None,
    fix: str,
) -> dict[str, Any]:
    """The write step over a Spark Connect server (instead of spark-submit); leaves the same report.

    ``conf``: Spark settings of the connection and the view (only session settings reach a
    Connect session). A server that does not answer fails within seconds naming ``fix``
    (:class:`~mvsink.exceptions.SparkConnectUnavailableError`, a runtime failure: retried).
    """
    from mvsink.spark.connect import released_session
    from mvsink.write.job import run_write

    view = Catalog(views_dir).get(view_name)
    ti = context["ti"]
    desc = BatchDescription.from_json(ti.xcom_pull(task_ids="mint", key="description"))
    with released_session(url, conf=conf, fix=fix) as session:  # (the server keeps nothing of this task's)
        report = run_write(session, view, desc)
    Path(ti.xcom_pull(task_ids="mint", key="report_path")).write_text(report.to_json())
    return _summary(report)


def append_step(
    view_name: str, views_dir: str, context: dict[str, Any], *, asset: Any, alias: Any, max_reschedules: int
) -> list[str]:
    catalog = Catalog(views_dir)
    view = catalog.get(view_name)
    ti = context["ti"]
    desc = BatchDescription.from_json(ti.xcom_pull(task_ids="mint", key="description"))
    report = None
    report_file = Path(ti.xcom_pull(task_ids="mint", key="report_path"))
    if not desc.empty:
        if not report_file.exists():
            raise MvSinkError(
                f"view {view.name}: the write step left no report at {report_file}. Fix: check the "
                "write task's log; MVSINK_REPORTS_DIR must be shared by the write and append workers."
            )
        report = WriteReport.from_json(report_file.read_text())
    result = append(view, desc, report)
    report_file.unlink(missing_ok=True)
    summary, line = refresh_summary(view, result)
    ti.xcom_push(key="summary", value=summary)  # a JSON object: the UI's XCom tab shows it as JSON
    ti.xcom_push(key="report", value=line)  # one readable line, shown in the UI's XCom tab
    log.info("%s", line)
    if result.status == "appended":  # only a real append wakes views that read this one
        context["outlet_events"][alias].add(asset, extra={k: summary[k] for k in ASSET_EVENT_KEYS})
        compaction = compact_if_due(view, catalog)
        if compaction is not None:
            ti.xcom_push(key="compaction", value=compaction)
    if result.status != "rescheduled":
        return []
    attempt = run_params(context, view=view.name).attempt
    if attempt >= max_reschedules:
        raise MvSinkError(
            f"view {view.name}: refresh at {format_time(desc.refresh_time)} lost the race "
            f"{attempt + 1} times ({result.reason}). Fix: check for competing writers of "
            f"{view.target}; raise MVSINK_MAX_RESCHEDULES to retry longer."
        )
    ti.xcom_push(key="reschedule_time", value=str(desc.refresh_time))
    ti.xcom_push(key="reschedule_attempt", value=str(attempt + 1))
    log.warning(
        "view %s: %s; starting a new run for refresh time %s (attempt %d)",
        view.name,
        result.summary(),
        format_time(desc.refresh_time),
        attempt + 1,
    )
    return ["reschedule"]


# what an Asset event of a view's append carries (integers and their ISO-8601 UTC forms, and the freshness)
ASSET_EVENT_KEYS = (
    "lower",
    "upper",
    "refresh_time",
    "rows_added",
    "rows_retracted",
    "bytes",
    "version",
    "refresh_time_utc",
    "final_through_utc",
    "lag_ms",
    "lag",
    "max_lag_ms",
    "max_lag",
    "stale",
)


SUMMARY_FIRST = (
    "view",
    "status",
    "refresh_time_utc",
    "final_through_utc",
    "lag",
    "stale",
    "max_lag",
    "rows_added",
    "rows_retracted",
    "bytes",
    "mode",
    "mode_reason",
    "version",
    "reason",
)


def refresh_summary(view: Any, result: Any) -> tuple[dict[str, Any], str]:
    """The append task's ``summary`` XCom (integers kept, ISO-8601 UTC beside them, the view's freshness once
    the append landed) and its one-line ``report``."""
    from mvsink.readers.freshness import format_freshness, freshness
    from mvsink.times import format_duration

    full = {k: v for k, v in result.to_dict().items() if k != "timings"}
    line = result.summary()
    if result.status == "appended" and result.upper is not None:
        fresh = freshness(view, result.upper - 1)
        full.update(
            fresh,
            lag=None if fresh["lag_ms"] is None else format_duration(fresh["lag_ms"]),
            max_lag=None if fresh["max_lag_ms"] is None else format_duration(fresh["max_lag_ms"]),
        )
        line += f"; lag {format_freshness(fresh)}"
    # what a person looks for first (the UI shows the top of the JSON), then everything else
    summary = {k: full[k] for k in SUMMARY_FIRST if k in full}
    summary.update((k, v) for k, v in full.items() if k not in summary)
    return summary, line


def compact_if_due(view: Any, catalog: Catalog) -> dict[str, Any] | None:
    """After a successful append: compact the view's history if its retain_history says it is due.

    Never fails the append (it is committed): an error is logged and the next append tries again.
    """
    from mvsink.maintenance.compaction import compact

    try:
        res = compact(view, catalog=catalog, if_due=True)
    except Exception as exc:  # the append is committed: nothing here may fail it
        log.warning(
            "view %s: compaction after the append failed (%s: %s); the next append will try again",
            view.name,
            type(exc).__name__,
            exc,
            exc_info=True,
        )
        return None
    log.info("%s", res.summary())
    return res.to_dict()
