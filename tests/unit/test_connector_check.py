"""A missing or mismatched Hadoop connector is refused before any Spark starts, on every path that starts one."""

from __future__ import annotations

from types import SimpleNamespace
from typing import cast

import pytest

from mvsink.core.batch import BatchDescription
from mvsink.exceptions import SparkSetupError
from mvsink.spark import jars
from mvsink.spark.conf import check_connectors, spark_conf_for
from tests.support.viewfiles import doc, parse

pytestmark = pytest.mark.unit

DELTA = [
    "delta-spark_4.2_2.13-4.4.0.jar",
    "delta-storage-4.4.0.jar",
    "delta-kernel-api-4.4.0.jar",
    "delta-kernel-defaults-4.4.0.jar",
    "delta-kernel-unitycatalog-4.4.0.jar",
]
AZURE = [
    "azure-storage-7.0.1.jar",
    "azure-keyvault-core-1.0.0.jar",
    "hadoop-shaded-guava-1.5.0.jar",
    "HdrHistogram-2.1.12.jar",
]


@pytest.fixture
def jar_folder(tmp_path, monkeypatch):
    """An empty MVSINK_SPARK_JARS folder; the test puts (empty) jar files into it."""
    folder = tmp_path / "jars"
    folder.mkdir()
    monkeypatch.setenv("MVSINK_SPARK_JARS", str(folder))
    monkeypatch.setenv("MVSINK_ALLOWED_LOCATIONS", "s3://lake/,az://lake/")
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_NAME", "acct")
    jars._listing.cache_clear()

    def put(*names: str) -> None:
        for n in names:
            (folder / n).write_bytes(b"")
        jars._listing.cache_clear()

    yield put
    jars._listing.cache_clear()


def _view(target: str = "s3://lake/views/v", source: str = "s3://lake/src/orders"):
    return parse(doc(target=target, sources=f"{{orders: {source}}}"))


def test_a_missing_s3a_connector_is_named_with_the_fix(jar_folder):
    jar_folder(*DELTA)
    with pytest.raises(SparkSetupError, match=r"no hadoop-aws jar in .*Fix: run `make install`"):
        check_connectors(_view())
    with pytest.raises(SparkSetupError, match="no hadoop-aws jar"):
        spark_conf_for(_view(), master="local[2]")  # spark-submit's settings: checked before the command runs


def test_a_connector_of_another_hadoop_version_is_refused(jar_folder):
    want = jars.pyspark_hadoop_version()
    assert want == "3.5.0"
    jar_folder(*DELTA, "hadoop-aws-3.3.1.jar", "bundle-2.35.4.jar", "analyticsaccelerator-s3-1.3.1.jar")
    jar_folder("wildfly-openssl-2.2.5.Final.jar")
    with pytest.raises(SparkSetupError) as err:
        check_connectors(_view())
    msg = str(err.value)
    assert "hadoop-aws-3.3.1.jar" in msg and "pyspark's Hadoop is 3.5.0" in msg and "use hadoop-aws-3.5.0.jar" in msg
    # Azure: the view's abfs locations need hadoop-azure, of the same version
    jar_folder("hadoop-azure-3.4.1.jar", *AZURE)
    with pytest.raises(SparkSetupError, match=r"abfss:// connector is hadoop-azure-3.4.1.jar"):
        check_connectors(_view("az://lake/views/v", "az://lake/src/orders"))


def test_matching_connectors_pass_and_local_views_need_none(jar_folder):
    jar_folder(*DELTA)
    check_connectors(_view("views/v", "orders"))  # local: no connector needed
    jar_folder("hadoop-aws-3.5.0.jar", "bundle-2.35.4.jar", "analyticsaccelerator-s3-1.3.1.jar")
    jar_folder("wildfly-openssl-2.2.5.Final.jar", "hadoop-azure-3.5.0.jar", *AZURE)
    check_connectors(_view())
    check_connectors(_view("az://lake/views/v", "s3://lake/src/orders"))


def test_every_spark_start_checks_first(jar_folder, monkeypatch):
    """In-process, spark-submit and a Connect server's start fail at once, before a JVM is started."""
    import subprocess

    from mvsink.spark import connect
    from mvsink.write import runners

    def no_jvm(*a, **k):
        raise AssertionError("a JVM was started")

    monkeypatch.setattr(subprocess, "run", no_jvm)
    monkeypatch.setattr(subprocess, "Popen", no_jvm)
    monkeypatch.setattr(runners, "local_session", no_jvm)
    jar_folder(*DELTA, "hadoop-aws-3.3.1.jar", "bundle-2.35.4.jar", "analyticsaccelerator-s3-1.3.1.jar")
    jar_folder("wildfly-openssl-2.2.5.Final.jar")
    view = _view()
    desc = cast(BatchDescription, SimpleNamespace(to_json=lambda: "{}"))
    with pytest.raises(SparkSetupError, match="in-process Spark for view v"):
        runners.run_write_inprocess(view, desc)
    with pytest.raises(SparkSetupError, match="hadoop-aws-3.3.1.jar"):
        runners.run_write_submit(view, desc)
    with pytest.raises(SparkSetupError, match="hadoop-aws-3.3.1.jar"):
        connect.server_command(port=15999)
