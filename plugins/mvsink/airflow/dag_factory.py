"""Airflow DAG factory: one DAG per view file (``mint`` -> ``write`` -> ``append``).

DAG files stay thin::

    from mvsink.airflow.dag_factory import build_dags
    build_dags(globals(), views_dir=Path(__file__).parent / "views")

Tasks only gather parameters and call into :mod:`mvsink.airflow.tasks`; the write step
(:mod:`mvsink.airflow.operators`, which keeps secret settings off the command line and out of the
serialized DAG) runs through the Spark Connect server of its connection when that connection is of
type ``spark_connect``, else it is the apache-spark provider's ``SparkSubmitOperator`` running the
job script shipped in the package (``mvsink/write/mv_write.py``). The choice is made when the task
runs (:mod:`mvsink.airflow.connections`): the DAG is the same either way.
"""

from __future__ import annotations

import datetime as _dt
import logging
from pathlib import Path
from typing import Any

from mvsink.airflow import config
from mvsink.airflow.import_errors import parsing_for_a_task, report_broken_view_file
from mvsink.definitions.catalog import load_views
from mvsink.definitions.schedule import first_at_or_after, is_timed
from mvsink.definitions.view import Schedule, ViewDefinition
from mvsink.exceptions import ViewDefinitionError
from mvsink.spark.conf import spark_conf_for, split_secret_conf
from mvsink.write.runners import job_file

log = logging.getLogger(__name__)

DAG_PREFIX = "mv_"


def task_retries() -> dict[str, Any]:
    """Airflow retries of every task of a view's DAG (``MVSINK_TASK_RETRIES``, ``MVSINK_TASK_RETRY_DELAY_SECONDS``,
    or ``[mvsink] task_retries`` / ``task_retry_delay_seconds`` in Airflow's configuration).

    Every task is safe to retry: mint re-mints (the same batch id while the upper has not moved),
    write restages the same batch (overwriting what a crashed try left), and append first looks
    for its batch id in the commit log, so a commit whose reply was lost is reported, not redone.
    Retries are for runtime failures: bad input fails a task at once (:mod:`mvsink.airflow.config`).
    """
    return {"retries": config.task_retries(), "retry_delay": _dt.timedelta(seconds=config.task_retry_delay_seconds())}


def dag_id_for(view_name: str) -> str:
    return f"{DAG_PREFIX}{view_name}"


def asset_for(view: ViewDefinition) -> Any:
    """The Airflow Asset a view's appends update (its Delta table)."""
    from airflow.sdk import Asset

    return Asset(name=f"mvsink_{view.name}", uri=f"file://{view.target}", group="mvsink")


def asset_alias_for(view: ViewDefinition) -> Any:
    """Alias through which append emits an event for the view's Asset only when it appended."""
    from airflow.sdk import AssetAlias

    return AssetAlias(name=f"mvsink_{view.name}_appends", group="mvsink")


def timetable_for(schedule: Schedule, views: dict[str, ViewDefinition], file: str) -> Any:
    """Airflow schedule for a view's refresh schedule."""
    from airflow.sdk import CronTriggerTimetable

    if schedule.kind == "cron":
        assert schedule.cron is not None
        return CronTriggerTimetable(schedule.cron, timezone="UTC")
    if is_timed(schedule):  # every/at: runs exactly on the aligned (or listed) instants
        from mvsink.airflow.timetable import MvsinkTimetable

        return MvsinkTimetable(schedule)
    if schedule.kind == "on_commit":
        missing = [v for v in schedule.on_commit if v not in views]
        if missing:
            raise ViewDefinitionError(
                f"view file {file}: field 'schedule': on_commit names unknown view(s) "
                f"{missing}. Fix: name views defined in the same folder."
            )
        return [asset_for(views[v]) for v in schedule.on_commit]
    return None


def _start_date(view: ViewDefinition) -> _dt.datetime:
    # every/at: the first instant at or after as_of; else as_of
    start = first_at_or_after(view.schedule, view.as_of) if is_timed(view.schedule) else view.as_of
    return _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC) + _dt.timedelta(milliseconds=start)


def _doc_md(view: ViewDefinition) -> str:
    srcs = "\n".join(
        f"- `{s.name}`: " + (f"view `{s.view}`" if s.kind == "view" else f"`{s.path}`") for s in view.sources
    )
    return (
        f"### {view.name}\n\n{view.description or '(no description)'}\n\n"
        f"**Target** `{view.target}` — **as_of** {_dt.datetime.fromtimestamp(view.as_of / 1000, _dt.UTC)}"
        f" — **schedule** {view.schedule.kind}\n\n**Sources**\n{srcs}\n\n```sql\n{view.query}\n```\n\n"
        f"Defined in `{view.file}`. Trigger with params `refresh_time` (ISO-8601 or epoch ms; empty = "
        "the run's logical date) and `dry_run`."
    )


def _dag_params() -> dict[str, Any]:
    """The parameters of a view's DAG run: ``refresh_time`` and ``dry_run``."""
    from airflow.sdk import Param

    return {
        # nullable: the UI's trigger form treats an empty non-null param as missing and blocks the trigger
        "refresh_time": Param(
            None,
            type=["null", "string"],
            title="Refresh time",
            description="ISO-8601 (UTC if no zone) or epoch ms; empty: the run's logical date",
        ),
        "dry_run": Param(
            False,
            type="boolean",
            title="Dry run",
            description="Compute and report the corrections; write nothing",
        ),
    }


def _dag(view: ViewDefinition, views: dict[str, ViewDefinition], dag_id: str) -> Any:
    """The (empty) DAG of one view: its schedule, dates, documentation, retries, parameters and the callbacks of
    its ``notify:`` (:mod:`mvsink.airflow.notifications`)."""
    from airflow.sdk import DAG

    callbacks: dict[str, Any] = {}
    if view.notify:
        from mvsink.airflow.notifications import dag_callbacks

        callbacks = dag_callbacks(view)
    return DAG(
        dag_id=dag_id,
        schedule=timetable_for(view.schedule, views, view.file),
        start_date=_start_date(view),
        end_date=_dt.datetime.fromtimestamp(view.until / 1000, tz=_dt.UTC) if view.until is not None else None,
        catchup=view.schedule.catchup,  # every/at only (cron and on-commit views never catch up)
        max_active_runs=1,
        tags=["mvsink", *view.tags],
        doc_md=_doc_md(view),
        description=(view.description.splitlines()[0][:200] if view.description else f"materialized view {view.name}"),
        default_args=task_retries(),
        params=_dag_params(),
        render_template_as_native_obj=False,
        **callbacks,
    )


def _write_and_append(view: ViewDefinition, views_dir: str) -> tuple[Any, Any]:
    """The view's write task and its append task."""
    from airflow.sdk import TriggerRule

    from mvsink.airflow import tasks
    from mvsink.airflow.operators import ViewAppendOperator, ViewWriteOperator

    write = ViewWriteOperator(  # Spark Connect or spark-submit, from the connection's type when it runs
        task_id="write",
        view_name=view.name,
        views_dir=views_dir,
        application=job_file(),
        conn_id=config.spark_conn_id(),
        name=f"mvsink-write-{view.name}",
        conf=split_secret_conf(spark_conf_for(view))[0],
        application_args=[
            "--view-file",
            view.file,
            "--description",
            "{{ ti.xcom_pull(task_ids='mint', key='description') }}",
            "--report",
            "{{ ti.xcom_pull(task_ids='mint', key='report_path') }}",
        ],
        env_vars=tasks.spark_env(),
        verbose=False,
    )
    append = ViewAppendOperator(  # a branch: reschedule after a lost race; reports the refresh's OpenLineage
        task_id="append",
        view_name=view.name,
        views_dir=views_dir,
        asset=asset_for(view),
        alias=asset_alias_for(view),
        max_reschedules=config.max_reschedules(),
        trigger_rule=TriggerRule.NONE_FAILED_MIN_ONE_SUCCESS,
        outlets=[asset_alias_for(view)],
    )
    return write, append


def _reschedule_task(dag_id: str) -> Any:
    """The reschedule task: triggers the view's DAG again at the time append asks for."""
    from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator

    return TriggerDagRunOperator(
        task_id="reschedule",
        trigger_dag_id=dag_id,
        conf={
            "refresh_time": "{{ ti.xcom_pull(task_ids='append', key='reschedule_time') }}",
            "attempt": "{{ ti.xcom_pull(task_ids='append', key='reschedule_attempt') }}",
        },
        note="rescheduled by mvsink: another writer moved the table's upper",
    )


def build_dag(
    view: ViewDefinition, *, views: dict[str, ViewDefinition] | None = None, views_dir: str | Path | None = None
) -> Any:
    """The DAG of one view: mint (branch) -> write (Spark Connect or spark-submit) -> append -> reschedule."""
    from airflow.sdk import task

    from mvsink.airflow import tasks

    views = views or {view.name: view}
    views_dir = str(views_dir or Path(view.file).parent)
    dag_id = dag_id_for(view.name)
    with _dag(view, views, dag_id) as dag:

        @task.branch(task_id="mint")
        def mint_task(**context: Any) -> list[str]:
            with config.no_retry_on_bad_input():
                return tasks.mint_step(view.name, views_dir, context)

        write, append = _write_and_append(view, views_dir)
        reschedule = _reschedule_task(dag_id)
        m = mint_task()
        m >> [write, append]
        write >> append
        append >> reschedule
    return dag


def build_dags(namespace: dict[str, Any], *, views_dir: str | Path) -> dict[str, Any]:
    """Build one DAG per view file of ``views_dir`` into ``namespace`` (a DAG file's globals()).

    A broken view file becomes an import error naming that file and the fix; every other
    view's DAG still loads. When a task's process parses the DAG file to find its task, a broken file is
    reported nowhere (at DEBUG): its error is the DAG processor's import error, not a line in other views' task logs.
    """
    views, errors = load_views(views_dir)
    broken: dict[Path, Exception] = {Path(f): exc for f, exc in errors.items()}
    built: dict[str, Any] = {}
    for v in views.values():
        try:
            dag = build_dag(v, views=views, views_dir=views_dir)
        except ViewDefinitionError as exc:
            broken[Path(v.file)] = exc
            continue
        namespace[dag.dag_id] = built[dag.dag_id] = dag
    quiet = bool(broken) and parsing_for_a_task()
    for f, err in broken.items():
        if quiet:
            log.debug("mvsink: skipped view file %s (its DAG's import error says why)", f)
        else:
            report_broken_view_file(f, err)
    return built
