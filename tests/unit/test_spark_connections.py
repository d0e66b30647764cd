"""The write task's Spark connection: a ``spark_connect`` one names a Connect server (the provider's URL
conventions), any other type means spark-submit; a connection naming no server is bad input."""

from __future__ import annotations

import json

import pytest

from mvsink.airflow.connections import SPARK_CONNECT_CONN_TYPE, connect_target, uses_spark_connect
from mvsink.exceptions import MvSinkError

pytestmark = pytest.mark.unit


def test_only_the_spark_connect_type_uses_connect():
    assert uses_spark_connect("spark_connect") and uses_spark_connect(" Spark_Connect ")
    for other in ("spark", "spark_sql", "generic", "", None):
        assert not uses_spark_connect(other)


@pytest.mark.parametrize(
    ("host", "port", "login", "password", "extra", "url"),
    [
        ("127.0.0.1", 15002, None, None, {}, "sc://127.0.0.1:15002/"),
        ("sc://spark-connect", 15003, None, None, {}, "sc://spark-connect:15003/"),
        ("sc://h:15010", None, None, None, {}, "sc://h:15010/"),
        ("h", None, None, None, {}, "sc://h/"),
        ("h", 1, "me", "t/k n", {"use_ssl": True}, "sc://h:1/;user_id=me;token=t/k%20n;use_ssl=true"),
        ("h", 1, None, None, {"use_ssl": "false"}, "sc://h:1/;use_ssl=false"),
    ],
)
def test_url_follows_the_provider_hook(host, port, login, password, extra, url):
    t = connect_target(conn_id="c", host=host, port=port, login=login, password=password, extra=extra)
    assert t.url == url
    assert (t.host, t.port) == (url.split("//")[1].split("/")[0].split(":")[0], port or t.port)
    if password:
        assert "t/k" not in t.shown and "token=***" in t.shown
        assert password not in t.unavailable_fix()


def test_the_same_url_as_the_providers_hook(monkeypatch):
    """Kept in step with apache-airflow-providers-apache-spark's SparkConnectHook.get_connection_url."""
    pytest.importorskip("airflow.providers.apache.spark")
    from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook

    assert SparkConnectHook.conn_type == SPARK_CONNECT_CONN_TYPE
    cases = [
        {"host": "127.0.0.1", "port": 15002},
        {"host": "sc://spark-connect", "port": 15003, "login": "me", "password": "tok"},
    ]
    for i, fields in enumerate(cases):
        conn_id = f"mvsink_test_{i}"
        monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": "spark_connect", **fields}))
        hook_url = SparkConnectHook(conn_id=conn_id).get_connection_url()
        ours = connect_target(conn_id=conn_id, **{"host": None, "port": None, **fields}).url
        assert ours == hook_url


@pytest.mark.parametrize(
    ("host", "port", "needle"),
    [(None, 15002, "has no host"), ("  ", None, "has no host"), ("sc://h/path", None, "no path"), ("h", 99999, "port")],
)
def test_a_connection_naming_no_server_is_bad_input(host, port, needle):
    with pytest.raises(MvSinkError, match="connection 'spark_default'") as ei:
        connect_target(conn_id="spark_default", host=host, port=port)
    assert needle in str(ei.value) and "Fix:" in str(ei.value)
