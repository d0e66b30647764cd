"""spark-submit's environment: no Spark Connect state leaks from a process that made a Connect session."""

from __future__ import annotations

import pytest

from mvsink.spark.conf import DEFAULT_SPARK_CONF
from mvsink.spark.submit import submit_env

pytestmark = pytest.mark.unit


def test_connect_mode_variables_do_not_reach_the_job(monkeypatch):
    # what pyspark sets in a process once SparkSession.builder.remote(...) made a session
    monkeypatch.setenv("SPARK_CONNECT_MODE_ENABLED", "1")
    monkeypatch.setenv("SPARK_REMOTE", "sc://127.0.0.1:15002")
    monkeypatch.setenv("SPARK_LOCAL_REMOTE", "1")
    env = submit_env()
    assert not {"SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE", "SPARK_LOCAL_REMOTE"} & set(env)


def test_spark_submit_ends_its_jvm_when_the_job_returns():
    # ABFS (Hadoop 3.5) leaves non-daemon thread pools: without this a finished write step's JVM never exits
    assert DEFAULT_SPARK_CONF["spark.submit.callSystemExitOnMainExit"] == "true"
