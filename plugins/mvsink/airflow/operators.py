"""The DAGs' write task: the apache-spark provider's SparkSubmitOperator, with secrets kept safe.

Imported only when a DAG is built (it needs Airflow). Differences from the plain operator:

- The Spark settings are resolved when the task runs, from the view file and the Spark
  connection's extra ``{"spark_conf": {...}}`` (defaults < connection < view file), so a
  secret in them never enters the serialized DAG or the rendered template fields.
- Secret-looking settings (``*secret*``, ``*password*``, ``*token*``, ``*.key``, ...; see
  :func:`mvsink.spark.runners.is_secret_key`) never go onto the spark-submit command line (which
  the provider logs and other users can read in the process list): they go to a properties
  file readable by this user only, deleted when the task ends. Their values, and the
  connection's password, are also registered with Airflow's secrets masker.
"""

from __future__ import annotations

import os
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

from mvsink.definitions.catalog import Catalog
from mvsink.definitions.view import ViewDefinition
from mvsink.exceptions import MvSinkError
from mvsink.spark.conf import spark_conf_for, split_secret_conf, write_properties_file


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
        raise MvSinkError(f"connection {conn_id}: extra field spark_conf must be a JSON object of Spark settings. "
                          'Fix: write e.g. {"spark_conf": {"spark.hadoop.fs.s3a.secret.key": "..."}}.')
    return {k: str(v) for k, v in raw.items()}


def write_conf(view: ViewDefinition, connection_conf: dict[str, str]) -> dict[str, str]:
    """Settings of a write run by the DAG: mvsink's defaults < the connection's spark_conf < the view's."""
    return spark_conf_for(view, {**connection_conf, **view.spark_conf})


class ViewSparkSubmitOperator(SparkSubmitOperator):
    """SparkSubmitOperator for one view's write step (settings resolved at run time, secrets off argv)."""

    def __init__(self, *, view_name: str, views_dir: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.view_name = view_name
        self.views_dir = views_dir

    def execute(self, context: Any) -> None:
        from airflow.sdk import BaseHook
        from airflow.sdk.log import mask_secret

        view = Catalog(self.views_dir).get(self.view_name)
        conn_conf: dict[str, str] = {}
        try:
            conn = BaseHook.get_connection(self._conn_id)
        except Exception:  # the provider falls back to yarn without a connection; so do we for settings
            conn = None
        if conn is not None:
            if conn.password:
                mask_secret(conn.password)
            conn_conf = connection_spark_conf(conn.extra_dejson, self._conn_id)
        public, secret = split_secret_conf(write_conf(view, conn_conf))
        for key, value in secret.items():
            mask_secret(value, None)
            self.log.info("Spark setting %s is passed in a private properties file (value hidden)", key)
        self.conf = public
        props = write_properties_file(secret) if secret else None
        self.properties_file = props
        self._hook = None
        try:
            super().execute(context)
        finally:
            if props:
                os.unlink(props)
