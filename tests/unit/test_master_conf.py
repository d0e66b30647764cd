"""Driver settings per Spark master: every write path derives them from the master, and they stay overridable."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from mvsink.definitions.view import ViewDefinition
from mvsink.definitions.viewfile import parse_view
from mvsink.spark import conf as sparkconf
from mvsink.spark.connect import server_command

pytestmark = pytest.mark.unit

CLUSTER = "spark://127.0.0.1:7077"


def _view(spark_conf: dict[str, str] | None = None) -> ViewDefinition:
    v = parse_view("name: v\nquery: SELECT a FROM t\nsources: {t: t}\ntarget: o\nas_of: 0\n", data_root=Path("/d"))
    return ViewDefinition(**{**v.__dict__, "spark_conf": spark_conf or {}})


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    monkeypatch.delenv("SPARK_LOCAL_IP", raising=False)
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)


def test_local_master_stays_on_loopback():
    assert sparkconf.master_conf("local[2]") == {
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1",
    }


def test_standalone_master_gets_driver_address_python_and_small_executors():
    conf = sparkconf.master_conf(CLUSTER)
    assert conf["spark.driver.host"] == conf["spark.driver.bindAddress"] == "127.0.0.1"
    assert conf["spark.pyspark.python"] == str(Path(sys.executable).absolute())
    assert Path(conf["spark.pyspark.python"]).is_absolute()
    assert (
        conf["spark.executor.memory"] == "1g" and conf["spark.cores.max"] == "2" and conf["spark.executor.cores"] == "1"
    )


def test_remote_standalone_master_uses_spark_local_ip_and_no_size_limits(monkeypatch):
    monkeypatch.setenv("SPARK_LOCAL_IP", "10.0.0.7")
    monkeypatch.setenv("PYSPARK_PYTHON", "/opt/venv/bin/python")
    conf = sparkconf.master_conf("spark://spark-master:7077")
    assert conf == {
        "spark.driver.bindAddress": "10.0.0.7",
        "spark.driver.host": "10.0.0.7",
        "spark.pyspark.python": "/opt/venv/bin/python",
    }


@pytest.mark.parametrize("master", ["yarn", "k8s://https://10.0.0.1:6443", "mesos://m:5050"])
def test_other_masters_get_nothing(master):
    assert sparkconf.master_conf(master) == {}


@pytest.mark.parametrize(
    ("master", "loopback"),
    [
        ("spark://127.0.0.1:7077", True),
        ("spark://localhost:7077", True),
        ("spark://127.0.0.1:7077,localhost:7078", True),
        ("spark://[::1]:7077", True),
        ("spark://spark-master:7077", False),
        ("spark://127.0.0.1:7077,10.0.0.2:7077", False),
        ("local[2]", False),
        ("yarn", False),
    ],
)
def test_is_loopback_cluster(master, loopback):
    assert sparkconf.is_loopback_cluster(master) is loopback


def test_view_and_caller_settings_override_the_master_defaults():
    view = _view({"spark.executor.memory": "4g", "spark.driver.host": "10.1.1.1"})
    conf = sparkconf.spark_conf_for(view, {"spark.cores.max": "6"}, master=CLUSTER)
    assert conf["spark.executor.memory"] == "4g" and conf["spark.driver.host"] == "10.1.1.1"
    assert conf["spark.cores.max"] == "6" and conf["spark.driver.bindAddress"] == "127.0.0.1"
    assert conf["spark.sql.session.timeZone"] == "UTC"  # the defaults are still there


def test_connect_server_on_a_cluster_gets_the_driver_settings():
    cmd = server_command(port=15999, master=CLUSTER, conf={"spark.cores.max": "1"})
    assert cmd[cmd.index("--master") + 1] == CLUSTER
    assert "spark.driver.host=127.0.0.1" in cmd and "spark.driver.bindAddress=127.0.0.1" in cmd
    assert "spark.cores.max=1" in cmd and "spark.cores.max=2" not in cmd
    assert "spark.connect.grpc.binding.address=127.0.0.1" in cmd


@pytest.mark.parametrize(
    ("conn_type", "host", "port", "master"),
    [
        ("spark", "spark://127.0.0.1:7077", None, "spark://127.0.0.1:7077"),
        ("spark", "spark://127.0.0.1", 7077, "spark://127.0.0.1:7077"),  # JSON form with a port
        ("spark", "127.0.0.1", 7077, "spark://127.0.0.1:7077"),  # URI form spark://127.0.0.1:7077
        ("spark", "local[2]", None, "local[2]"),
        ("spark", "yarn", None, "yarn"),
    ],
)
def test_connection_master_as_the_provider_resolves_it(conn_type, host, port, master, monkeypatch):
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    from mvsink.airflow.operators import connection_master, write_conf

    assert connection_master(conn_type, host, port) == master
    conn = {"conn_type": conn_type, "host": host, **({"port": port} if port else {})}
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_TEST", json.dumps(conn))
    assert SparkSubmitHook(conn_id="spark_test")._connection["master"] == master  # the provider agrees
    expected = {"local[2]": "127.0.0.1", "yarn": None}.get(master, "127.0.0.1")
    assert write_conf(_view(), {}, master=master).get("spark.driver.host") == expected


def test_the_connection_and_the_view_override_the_master_defaults_in_the_write_task():
    from mvsink.airflow.operators import write_conf

    conf = write_conf(
        _view({"spark.executor.memory": "3g"}), {"spark.cores.max": "1", "spark.executor.memory": "2g"}, master=CLUSTER
    )
    assert conf["spark.cores.max"] == "1"  # the connection's spark_conf beats mvsink's default
    assert conf["spark.executor.memory"] == "3g"  # and the view's beats the connection's
    assert conf["spark.driver.host"] == "127.0.0.1" and conf["spark.executor.cores"] == "1"
