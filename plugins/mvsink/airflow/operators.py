"""The DAGs' write and append tasks. The write task: Spark Connect or the apache-spark provider's SparkSubmitOperator, with secrets kept safe.

Imported only when a DAG is built (it needs Airflow). Differences from the plain operator:

- Which Spark runs the write is decided when the task runs, from the type of its Spark
  connection (:mod:`mvsink.airflow.connections`): a ``spark_connect`` connection writes from
  the task's process through that Spark Connect server; any other runs spark-submit. The
  DAG's shape is the same either way. A Connect server that does not answer fails the try
  within seconds, naming the connection, the address and the fix; the task's retry passes
  once the server is back.

- The Spark settings are resolved when the task runs, from the view file and the Spark
  connection's extra ``{"spark_conf": {...}}`` (defaults < connection < view file), so a
  secret in them never enters the serialized DAG or the rendered template fields.
- Secret-looking settings (``*secret*``, ``*password*``, ``*token*``, ``*.key``, ...; see
  :func:`mvsink.write.runners.is_secret_key`) never go onto the spark-submit command line (which
  the provider logs and other users can read in the process list): they go to a properties
  file readable by this user only, deleted when the task ends. Their values, and the
  connection's password, are also registered with Airflow's secrets masker.
- Bad input fails the task at once, without retries (``AirflowFailException``): a broken view
  file or connection here, or bad input the Spark job reported (it exits 2 and records the
  error beside its report, see :func:`mvsink.write.job.error_path`). A crash is retried.
"""

from __future__ import annotations

import json
import os
from typing import Any
from urllib.parse import quote

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.providers.standard.operators.branch import BaseBranchOperator

from mvsink import settings
from mvsink.airflow import tasks
from mvsink.airflow.config import fail_exception, no_retry_on_bad_input
from mvsink.airflow.connections import connect_target, uses_spark_connect
from mvsink.definitions.catalog import Catalog
from mvsink.definitions.view import ViewDefinition
from mvsink.exceptions import MvSinkError
from mvsink.spark.conf import spark_conf_for, split_secret_conf, write_properties_file
from mvsink.write.job import error_path


def connection_spark_conf(extra: dict[str, Any], conn_id: str) -> dict[str, str]:
    """The ``spark_conf`` mapping of a Spark connection's extra (pure; tested)."""
    raw = extra.get("spark_conf") or {}
    if isinstance(raw, str):
        import json

        try:
            raw = json.loads(raw)
        except ValueError:
            raw = None
    if not isinstance(raw, dict) or not all(isinstance(k, str) for k in raw):
        raise MvSinkError(
            f"connection {conn_id}: extra field spark_conf must be a JSON object of Spark settings. "
            'Fix: write e.g. {"spark_conf": {"spark.hadoop.fs.s3a.secret.key": "..."}}.'
        )
    return {k: str(v) for k, v in raw.items()}


def connection_master(conn_type: str | None, host: str | None, port: int | None) -> str:
    """The master a Spark connection names, as the provider's SparkSubmitHook resolves it (pure; tested)."""
    if conn_type == "spark" and host and ("://" in host or not port):
        master = host
    else:
        master = f"{conn_type}://{host or ''}"
    return f"{master}:{port}" if port else master


def write_conf(view: ViewDefinition, connection_conf: dict[str, str], *, master: str | None = None) -> dict[str, str]:
    """Settings of a write run by the DAG: mvsink's defaults (the driver's address and executor sizes for
    ``master``) < the connection's spark_conf < the view's."""
    return spark_conf_for(view, {**connection_conf, **view.spark_conf}, master=master)


class ViewWriteOperator(SparkSubmitOperator):
    """One view's write step: over Spark Connect or spark-submit, chosen from the connection at run time."""

    def __init__(self, *, view_name: str, views_dir: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.view_name = view_name
        self.views_dir = views_dir

    def execute(self, context: Any) -> Any:
        from airflow.sdk import BaseHook
        from airflow.sdk.exceptions import AirflowNotFoundException
        from airflow.sdk.log import mask_secret

        with no_retry_on_bad_input():
            view = Catalog(self.views_dir).get(self.view_name)
            done = tasks.write_spark_free_step(self.view_name, self.views_dir, context)
        if done is not None:  # a small refresh with kept plan facts: no Spark session, no JVM
            return done
        if settings.is_set(settings.SPARK_REMOTE):
            self.log.warning(
                "%s is set but the DAGs no longer read it (only the command line does): the write task uses "
                "Airflow connection %r. Fix: to write through Spark Connect, make that connection of type "
                "spark_connect (host and port of the server), and unset %s for Airflow.",
                settings.SPARK_REMOTE.name,
                self._conn_id,
                settings.SPARK_REMOTE.name,
            )
        conn_conf: dict[str, str] = {}
        master = "yarn"  # the provider's default without a connection
        try:
            conn = BaseHook.get_connection(self._conn_id)
        except AirflowNotFoundException:  # the provider falls back to yarn without a connection; so do we
            conn = None
        if conn is not None:
            if conn.password:
                mask_secret(conn.password)
                mask_secret(quote(conn.password))  # as it appears in an sc:// URL
            master = connection_master(conn.conn_type, conn.host, conn.port)
            with no_retry_on_bad_input():
                conn_conf = connection_spark_conf(conn.extra_dejson, self._conn_id)
        if conn is not None and uses_spark_connect(conn.conn_type):
            return self.execute_connect(context, view=view, conn=conn, conn_conf=conn_conf)
        with no_retry_on_bad_input():
            public, secret = split_secret_conf(write_conf(view, conn_conf, master=master))
        for key, value in secret.items():
            mask_secret(value, None)
            self.log.info("Spark setting %s is passed in a private properties file (value hidden)", key)
        self.conf = public
        props = write_properties_file(secret) if secret else None
        self.properties_file = props
        self._hook = None
        report = self.report_path()
        if report:
            error_path(report).unlink(missing_ok=True)
        try:
            super().execute(context)
        except Exception:
            bad = read_job_error(report)
            if bad is not None:  # the job refused bad input: retrying cannot help
                raise fail_exception()(bad) from None
            raise
        finally:
            if props:
                os.unlink(props)
        return None

    def execute_connect(
        self, context: Any, *, view: ViewDefinition, conn: Any, conn_conf: dict[str, str]
    ) -> dict[str, Any]:
        """The write through the Spark Connect server of a ``spark_connect`` connection (no spark-submit)."""
        with no_retry_on_bad_input():
            target = connect_target(
                conn_id=self._conn_id,
                host=conn.host,
                port=conn.port,
                login=conn.login,
                password=conn.password,
                extra=conn.extra_dejson,
            )
        self.log.info(
            "view %s: writing through the Spark Connect server %s (Airflow connection %r, type spark_connect)",
            view.name,
            target.shown,
            self._conn_id,
        )
        with no_retry_on_bad_input():  # bad input fails at once; an unreachable server is retried
            return tasks.write_connect_step(
                self.view_name,
                self.views_dir,
                context,
                url=target.url,
                conf={**conn_conf, **view.spark_conf},
                fix=target.unavailable_fix(),
            )

    def report_path(self) -> str | None:
        """The job's ``--report`` argument (rendered)."""
        args = [str(a) for a in (self.application_args or [])]
        return args[args.index("--report") + 1] if "--report" in args[:-1] else None


def read_job_error(report: str | None) -> str | None:
    """The bad-input message a write job recorded beside its report, if it did."""
    if not report:
        return None
    try:
        record = json.loads(error_path(report).read_text())
    except (OSError, ValueError):
        return None
    return str(record.get("message") or record)


class ViewAppendOperator(BaseBranchOperator):
    """One view's append step (a branch: ``reschedule`` after a lost race, else nothing), and its OpenLineage.

    When ``apache-airflow-providers-openlineage`` is configured, its listener asks this operator for the
    refresh's lineage on completion (:meth:`get_openlineage_facets_on_complete`): the sources at the versions
    read, the view's table at the version committed; nothing when the run appended nothing
    (:mod:`mvsink.airflow.lineage`).
    """

    def __init__(
        self, *, view_name: str, views_dir: str, asset: Any, alias: Any, max_reschedules: int, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.view_name = view_name
        self.views_dir = views_dir
        self.asset = asset
        self.alias = alias
        self.max_reschedules = max_reschedules
        self._lineage_input: tuple[Any, Any, Any] = (None, None, None)

    def choose_branch(self, context: Any) -> list[str]:
        with no_retry_on_bad_input():
            branches = tasks.append_step(
                self.view_name,
                self.views_dir,
                context,
                asset=self.asset,
                alias=self.alias,
                max_reschedules=self.max_reschedules,
            )
        # kept for get_openlineage_facets_on_complete, which the provider's listener calls in a forked
        # process that must not talk to the supervisor (an XCom read there hangs until it is killed)
        # (and the facets that read the tables' schemas and parse the query: gathered here, not in that process,
        # only when the provider is configured to send events)
        ti = context["ti"]
        raw, summary = (
            ti.xcom_pull(task_ids="mint", key="description"),
            ti.xcom_pull(task_ids=self.task_id, key="summary"),
        )
        self._lineage_input = (raw, summary, self._lineage_extras(raw, summary))
        return branches

    def _lineage_extras(self, raw: Any, summary: Any) -> dict[str, Any]:
        from mvsink.airflow.lineage import lineage_enabled, lineage_extras

        if not raw or not summary or not lineage_enabled():
            return {}
        try:
            description = json.loads(raw) if isinstance(raw, str) else raw
            summary = json.loads(summary) if isinstance(summary, str) else summary
            view = Catalog(self.views_dir).get(self.view_name)
            return lineage_extras(view.query, description, summary)
        except Exception:  # the append is committed: lineage's extras never fail it
            self.log.warning("mvsink: no schema or column lineage facets for this refresh", exc_info=True)
            return {}

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        from mvsink.airflow.lineage import operator_lineage

        raw, summary, extras = getattr(self, "_lineage_input", (None, None, None))
        description = json.loads(raw) if isinstance(raw, str) else raw
        if isinstance(summary, str):
            summary = json.loads(summary)
        return operator_lineage(description, summary, extras)
