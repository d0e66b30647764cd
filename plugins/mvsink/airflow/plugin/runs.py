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
            shaped = run_summary(
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
            summaries = {
                str(t): _json(v)
                for t, v in session.execute(
                    select(XComModel.task_id, XComModel.value).where(
                        XComModel.dag_id == run.dag_id, XComModel.run_id == run.run_id, XComModel.key == "summary"
                    )
                ).all()
            }
            mint, append = summaries.get("mint"), summaries.get("append")
            shaped["outcome"], shaped["detail"] = run_outcome(  # what it did: a no-op is "up to date", not "success"
                state=shaped["state"],
                dry_run=shaped["dry_run"],
                mint=mint if isinstance(mint, Mapping) else None,
                append=append if isinstance(append, Mapping) else None,
                commit=None,
            )
            return shaped

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


# --------------------------------------------------------------------------- the run history (issue 39)

RUN_STATES = ("queued", "running", "success", "failed")  # what the history filters on (Airflow's run states)
PAGE_SIZE = 20
DAY_MS = 86_400_000
SKIPPED = {"before_as_of": "before as_of", "waiting_for_inputs": "waiting for inputs"}


def _json(value: Any) -> Any:
    """An XCom value as stored (JSON text, or already decoded)."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def first_line(text: str | None) -> str | None:
    return None if not text else text.strip().splitlines()[0][:300]


def run_outcome(
    *,
    state: str,
    dry_run: bool,
    mint: Mapping[str, Any] | None,
    append: Mapping[str, Any] | None,
    commit: Mapping[str, Any] | None,
    error: str | None = None,
) -> tuple[str, str]:
    """What a run did, in a word and a detail (pure): ``queued``/``running``; ``failed`` (the error's first line);
    ``skipped`` (mint found nothing to refresh: before ``as_of``, waiting for inputs); ``up to date`` (nothing
    changed: mint's ``up_to_date``, or an append of no rows by no source moving); ``dry run`` (what it would do);
    ``refreshed`` (its commit's mode and rows); ``rescheduled`` (it lost a race and made a new run)."""
    if state in ("queued", "running"):
        return state, ""
    if state == "failed":
        return "failed", first_line(error) or "see the failed task's log"
    status = str((append or {}).get("status") or (mint or {}).get("status") or "")
    if status in SKIPPED:
        return "skipped", f"{SKIPPED[status]}: {(mint or {}).get('reason') or ''}".rstrip(": ")
    if status == "up_to_date":
        return "up to date", str((mint or {}).get("reason") or "nothing new to refresh")
    if dry_run or status == "dry_run":
        return "dry run", ""
    if status == "rescheduled":
        return "rescheduled", str((append or {}).get("reason") or "")
    c = commit or append or {}
    added, retracted = int(c.get("rows_added") or 0), int(c.get("rows_retracted") or 0)
    if c.get("mode") == "unchanged" or (
        (commit or append) is not None and added == retracted == 0 and not c.get("mode")
    ):
        return "up to date", "no source changed: +0 −0 rows"
    if commit is None and append is None:
        return state, ""
    mode = str(c.get("mode") or "")
    return "refreshed", f"{mode_word(mode)} +{added} −{retracted} rows".strip()


def mode_word(mode: str) -> str:
    from mvsink.readers.freshness import mode_label

    return str(mode_label(mode) or mode)


def history_entry(
    *,
    run: Mapping[str, Any],
    mint: Mapping[str, Any] | None,
    append: Mapping[str, Any] | None,
    commit: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """One run of the history (pure): ``run`` as :func:`run_summary` shapes it (plus ``conf`` and
    ``triggered_by``), the mint and append tasks' ``summary`` XComs, and the view's commit made by the run."""
    error = next((t.get("error") for t in run.get("failed_tasks") or [] if t.get("error")), None)
    outcome, detail = run_outcome(
        state=run["state"], dry_run=run["dry_run"], mint=mint, append=append, commit=commit, error=error
    )
    conf = run.get("conf") or {}
    refresh_time = (append or {}).get("refresh_time") or (mint or {}).get("refresh_time")
    if refresh_time is None and conf.get("refresh_time") is None:
        refresh_time = run.get("logical_date") or run.get("run_after")
    run_type = str(run.get("run_type") or "")
    trigger = "dry run" if run["dry_run"] else run_type.replace("_", " ") or "-"
    return {
        **{k: run[k] for k in ("run_id", "state", "start", "end", "wall_ms", "running", "dry_run", "failed_tasks")},
        "run_type": run_type,
        "trigger": trigger,
        "triggered_by": run.get("triggered_by") or "",
        "outcome": outcome,
        "detail": detail,
        "refresh_time": refresh_time if isinstance(refresh_time, int) else None,
        "refresh_time_text": None if isinstance(refresh_time, int) else (conf.get("refresh_time") or None),
        "version": None if commit is None else commit.get("version"),
    }


def run_history(
    dag_id: str,
    *,
    now: int,
    commits: Iterable[Mapping[str, Any]] = (),
    state: str | None = None,
    page: int = 1,
    size: int = PAGE_SIZE,
) -> dict[str, Any]:
    """A page of the DAG's runs, the newest made first (``state``: only runs in that Airflow state), each joined with the
    view's commit it made (``commits``: the view's commit log, by run id), and the counts by state:
    ``{"runs": [...], "total": n, "page": p, "pages": k, "state": s, "counts": {state: n}}``."""
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import func, select

    by_run = {str(c.get("run_id")): c for c in commits if c.get("run_id") and c.get("operation") == "append"}
    state = state if state in RUN_STATES else None
    page = max(1, int(page))
    with create_session() as session:
        counts = {
            str(s): int(n)
            for s, n in session.execute(
                select(DagRun.state, func.count()).where(DagRun.dag_id == dag_id).group_by(DagRun.state)
            ).all()
        }
        total = counts.get(state, 0) if state else sum(counts.values())
        q = select(DagRun).where(DagRun.dag_id == dag_id)
        if state:
            q = q.where(DagRun.state == state)
        # newest made first (a backfill's runs have old run_after times but are new)
        rows = session.scalars(q.order_by(DagRun.id.desc()).offset((page - 1) * size).limit(size)).all()
        ids = [r.run_id for r in rows]
        failed: dict[str, list[Any]] = {}
        for ti in session.scalars(
            select(TaskInstance).where(
                TaskInstance.dag_id == dag_id, TaskInstance.run_id.in_(ids), TaskInstance.state == "failed"
            )
        ).all():
            failed.setdefault(ti.run_id, []).append(ti)
        summaries: dict[tuple[str, str], Any] = {}
        for run_id, task_id, value in session.execute(
            select(XComModel.run_id, XComModel.task_id, XComModel.value).where(
                XComModel.dag_id == dag_id, XComModel.run_id.in_(ids), XComModel.key == "summary"
            )
        ).all():
            summaries[(str(run_id), str(task_id))] = _json(value)
        out = []
        for r in rows:
            tis = sorted(failed.get(r.run_id, []), key=lambda t: str(t.task_id))
            shaped = run_summary(
                run_id=r.run_id,
                state=str(r.state) if r.state is not None else None,
                run_type=str(r.run_type) if r.run_type is not None else None,
                logical_date=r.logical_date,
                start=r.start_date,
                end=r.end_date,
                conf=r.conf,
                failed_tasks=[(str(t.task_id), int(t.try_number)) for t in tis],
                report=None,
                now=now,
                errors={t.task_id: task_error(t) for t in tis},
            )
            shaped.update(
                conf=dict(r.conf or {}),
                triggered_by=str(getattr(r, "triggered_by", "") or "").rsplit(".", 1)[-1].lower(),
                run_after=_ms(getattr(r, "run_after", None)),
            )
            mint, append = summaries.get((r.run_id, "mint")), summaries.get((r.run_id, "append"))
            out.append(
                history_entry(
                    run=shaped,
                    mint=mint if isinstance(mint, Mapping) else None,
                    append=append if isinstance(append, Mapping) else None,
                    commit=by_run.get(str(r.run_id)),
                )
            )
    return {
        "runs": out,
        "total": total,
        "page": page,
        "pages": max(1, -(-total // size)),
        "state": state or "",
        "counts": counts,
    }


def failures_since(dag_ids: Collection[str], *, since: int) -> dict[str, int]:
    """Failed runs per DAG that ended at or after ``since`` (epoch ms): the overview's failures over 24 h."""
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from sqlalchemy import func, select

    when = _dt.datetime.fromtimestamp(since / 1000, tz=_dt.UTC)
    with create_session() as session:
        return {
            str(d): int(n)
            for d, n in session.execute(
                select(DagRun.dag_id, func.count())
                .where(DagRun.dag_id.in_(list(dag_ids)), DagRun.state == "failed", DagRun.end_date >= when)
                .group_by(DagRun.dag_id)
            ).all()
        }
