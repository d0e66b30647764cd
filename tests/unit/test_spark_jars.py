"""The JVM jars every Spark session gets (spark_jobs/pom.xml, .jars/): complete, no duplicates of pyspark's,
settings per master, and clear errors for a missing jar, a mismatched connector and a session without Delta."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from mvsink.exceptions import SparkSetupError
from mvsink.spark import jars
from mvsink.spark.conf import session_conf

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]


def _artifact(name: str) -> str:
    """``hadoop-aws-3.5.0.jar`` -> ``hadoop-aws`` (the name without its version)."""
    return re.sub(r"[-_]\d[\w.]*\.jar$", "", name)


def test_the_fetched_jars_are_complete_and_ship_nothing_pyspark_already_has():
    folder = jars.jars_folder()
    names = sorted(p.name for p in folder.glob("*.jar"))
    assert names, f"no jars in {folder}: run make install"
    for prefix in (*jars.DELTA_JARS, *jars.S3A_JARS, *jars.AZURE_JARS):
        assert any(n.startswith(prefix) for n in names), prefix
    pyspark_jars = Path(__import__("pyspark").__file__).parent / "jars"
    theirs = {_artifact(p.name) for p in pyspark_jars.glob("*.jar")}
    assert {_artifact(n) for n in names} & theirs == set()
    assert "hadoop-aws-3.5.0.jar" in names and "hadoop-azure-3.5.0.jar" in names
    assert jars.pyspark_hadoop_version() == "3.5.0"


def test_pom_pins_delta_4_4_0_and_hadoop_at_pysparks_version():
    pom = (REPO / "spark_jobs" / "pom.xml").read_text()
    assert "<delta.version>4.4.0</delta.version>" in pom
    assert f"<hadoop.version>{jars.pyspark_hadoop_version()}</hadoop.version>" in pom
    assert "delta-spark_4.2_2.13" in pom
    pyproject = (REPO / "pyproject.toml").read_text()
    assert '"delta-spark==4.4.0"' in pyproject


def test_local_sessions_get_the_jars_on_the_class_path_and_delta_settings():
    conf = session_conf(master="local[2]")
    path = conf["spark.driver.extraClassPath"].split(":")
    assert conf["spark.executor.extraClassPath"] == conf["spark.driver.extraClassPath"]
    assert any(Path(p).name.startswith("delta-spark_4.2_2.13-4.4.0") for p in path)
    assert all(Path(p).is_file() for p in path)
    assert conf["spark.sql.extensions"] == jars.DELTA_EXTENSION
    assert conf["spark.sql.catalog.spark_catalog"] == jars.DELTA_CATALOG
    assert "spark.jars" not in conf and "spark.jars.packages" not in conf
    assert session_conf(master="spark://127.0.0.1:7077")["spark.driver.extraClassPath"]


def test_a_remote_cluster_gets_delta_and_only_the_connectors_its_locations_use():
    conf = session_conf(master="spark://spark-master:7077", schemes=["s3a"])
    shipped = [Path(p).name for p in conf["spark.jars"].split(",")]
    assert any(n.startswith("delta-spark_") for n in shipped)
    assert "hadoop-aws-3.5.0.jar" in shipped
    assert not any(n.startswith("hadoop-azure") for n in shipped)
    assert "spark.driver.extraClassPath" not in conf


def test_a_missing_jar_names_the_jar_and_the_fix(tmp_path, monkeypatch):
    folder = tmp_path / "jars"
    folder.mkdir()
    for p in jars.jars_folder().glob("*.jar"):
        if not p.name.startswith("delta-storage"):
            (folder / p.name).symlink_to(p)
    monkeypatch.setenv("MVSINK_SPARK_JARS", str(folder))
    with pytest.raises(SparkSetupError, match=r"no delta-storage jar in .*Fix: run `make install`"):
        session_conf(master="local[2]")


def test_a_mismatched_connector_is_refused_before_spark_starts(tmp_path, monkeypatch):
    folder = tmp_path / "jars"
    folder.mkdir()
    for p in jars.jars_folder().glob("*.jar"):
        name = "hadoop-aws-3.3.1.jar" if p.name.startswith("hadoop-aws-") else p.name
        (folder / name).symlink_to(p)
    monkeypatch.setenv("MVSINK_SPARK_JARS", str(folder))
    with pytest.raises(
        SparkSetupError, match=r"s3a:// connector is hadoop-aws-3.3.1.jar, but pyspark's Hadoop is 3.5.0"
    ):
        session_conf(master="local[2]", schemes=["s3a"])
    with pytest.raises(SparkSetupError, match="hadoop-aws-3.3.1.jar"):  # not on a local class path either
        session_conf(master="local[2]")


class _Conf:
    def __init__(self, values: dict[str, str]):
        self.values = values

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.values.get(key, default)


class _Session:
    def __init__(self, values: dict[str, str]):
        self.conf = _Conf(values)


def test_a_session_without_delta_is_refused_with_the_fix():
    with pytest.raises(
        SparkSetupError, match=r"view v: the Spark session has no Delta Lake.*delta-spark_4.2_2.13-4.4.0"
    ):
        jars.require_delta(_Session({}), role="view v")  # type: ignore[arg-type]
    jars.require_delta(_Session(dict(jars.DELTA_SESSION_CONF)), role="view v")  # type: ignore[arg-type]


def test_the_jars_folder_is_the_checkouts_unless_set(monkeypatch, tmp_path):
    monkeypatch.delenv("MVSINK_SPARK_JARS", raising=False)
    assert jars.jars_folder() == REPO / ".jars"
    monkeypatch.setenv("MVSINK_SPARK_JARS", str(tmp_path))
    assert jars.jars_folder() == tmp_path
    assert shutil.which("mvn"), "mvn fetches the jars (make install)"
