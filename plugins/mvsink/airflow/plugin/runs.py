"""What Airflow knows of each view's runs, for the page (issue 23): the last run's state and wall time, its failed
tasks with links to their logs, and the last dry run's result.

Read from Airflow's metadata database in the api-server's process (:func:`last_runs`); the shaping is pure
(:func:`run_summary`), so it is unit-tested without Airflow. Only the HTML pages show these: ``/api/views``
keeps the values of ``mvsink status --all --json``, which knows nothing of Airflow.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Collection, Iterable, Mapping
from typing import Any

RUNS_SCANNED = 50  # a view's newest runs looked through for its last dry run
DRY_RUN_TRUE = (True, "true", "True", "1", 1)


def _ms(when: _dt.datetime | None) -> int | None:
    if when is None:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=_dt.UTC)
    return int(when.timestamp() * 1000)


def is_dry_run(conf: Mapping[str, Any] | None) -> bool:
    return bool(conf) and (conf or {}).get("dry_run") in DRY_RUN_TRUE


ERROR_LINES = 4  # lines of a failed try's error shown on the page


def first_error(records: Iterable[Mapping[str, Any]], *, lines: int = ERROR_LINES) -> str | None:
    """The first lines of the error a failed try logged (pure): the exception of its last error record with a
    traceback (``error_detail``: the exception raised first, then its causes), else its last error message."""
    found: str | None = None
    for r in records:
        level = str(r.get("level") or "").lower()
        detail = r.get("error_detail")
        if isinstance(detail, list) and detail and isinstance(detail[0], Mapping):
            top = detail[0]
            found = f"{top.get('exc_type') or 'Error'}: {top.get('exc_value') or ''}".rstrip(": ")
        elif level in ("error", "critical") and r.get("event"):
            found = str(r["event"])
    if found is None:
        return None
    text = "\n".join(found.strip().splitlines()[:lines])
    return text[:1000]


def run_summary(
    *,
    run_id: str,
    state: str | None,
    run_type: str | None,
    logical_date: _dt.datetime | None,
    start: _dt.datetime | None,
    end: _dt.datetime | None,
    conf: Mapping[str, Any] | None,
    failed_tasks: list[tuple[str, int]],
    report: Any,
    now: int,
    errors: Mapping[str, str | None] | None = None,
) -> dict[str, Any]:
    """One run as the page shows it: state, wall time (start to end, or to ``now`` while it runs), failed tasks."""
    started, ended = _ms(start), _ms(end)
    wall = None if started is None else (ended if ended is not None else now) - started
    if isinstance(report, str) and report.startswith('"'):
        report = json.loads(report)
    return {
        "run_id": run_id,
        "state": state or "none",
        "run_type": run_type or "",
        "logical_date": _ms(logical_date),
        "start": started,
        "end": ended,
        "wall_ms": wall,
        "running": ended is None and started is not None,
        "dry_run": is_dry_run(conf),
        "failed_tasks": [{"task_id": t, "try_number": n, "error": (errors or {}).get(t)} for t, n in failed_tasks],
        "report": report if isinstance(report, str) else None,
    }


def task_error(ti: Any) -> str | None:
    """The first lines of a failed task instance's error, from its log as Airflow's log reader serves it
    (None when the log cannot be read: the link to the log stays)."""
    try:
        from airflow.utils.log.log_reader import TaskLogReader

        metadata: Any = {}
        chunks, _ = TaskLogReader().read_log_chunks(ti, ti.try_number, metadata)
        records = []
        for c in chunks:
            if hasattr(c, "model_dump"):
                records.append(c.model_dump())
            elif isinstance(c, str):
                try:
                    records.append(json.loads(c))
                except ValueError:
                    continue
        return first_error(records)
    except Exception:  # a log that cannot be read must not break the page
        return None


def last_runs(dag_ids: Collection[str], *, now: int) -> dict[str, dict[str, Any]]:
    """``{dag_id: {"last": run, "last_dry_run": run or None, "paused": bool}}`` for the DAGs that have runs, and
    ``{"paused": bool}`` for the other DAGs Airflow knows (a DAG not parsed yet has no entry)."""
    from airflow.models.dag import DagModel
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    out: dict[str, dict[str, Any]] = {}
    with create_session() as session:

        def summary(run: Any) -> dict[str, Any]:
            failed_tis = session.scalars(
                select(TaskInstance).where(
                    TaskInstance.dag_id == run.dag_id, TaskInstance.run_id == run.run_id, TaskInstance.state == "failed"
                )
            ).all()
            failed = [(ti.task_id, ti.try_number) for ti in failed_tis]
            report = session.scalar(
                select(XComModel.value).where(
                    XComModel.dag_id == run.dag_id,
                    XComModel.run_id == run.run_id,
                    XComModel.task_id == "append",
                    XComModel.key == "report",
                )
            )
            return run_summary(
                run_id=run.run_id,
                state=str(run.state) if run.state is not None else None,
                run_type=str(run.run_type) if run.run_type is not None else None,
                logical_date=run.logical_date,
                start=run.start_date,
                end=run.end_date,
                conf=run.conf,
                failed_tasks=sorted((str(t), int(n)) for t, n in failed),
                report=report,
                now=now,
                errors={ti.task_id: task_error(ti) for ti in failed_tis},
            )

        paused = dict(
            session.execute(select(DagModel.dag_id, DagModel.is_paused).where(DagModel.dag_id.in_(list(dag_ids)))).all()
        )
        for dag_id in dag_ids:
            runs = session.scalars(
                select(DagRun).where(DagRun.dag_id == dag_id).order_by(DagRun.run_after.desc()).limit(RUNS_SCANNED)
            ).all()
            if not runs:
                if dag_id in paused:
                    out[dag_id] = {"paused": bool(paused[dag_id])}
                continue
            dry = next((r for r in runs if is_dry_run(r.conf) and str(r.state) == "success"), None)
            out[dag_id] = {
                "last": summary(runs[0]),
                "last_dry_run": summary(dry) if dry is not None else None,
                "paused": bool(paused.get(dag_id)),
            }
    return out
