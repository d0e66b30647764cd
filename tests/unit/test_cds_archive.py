"""The Spark driver's class-data archive (mvsink/spark/cds.py): named by what a driver's class path is made of,
mapped by every driver mvsink starts when it exists, never when turned off, and a user's own JVM options kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from mvsink.definitions.viewfile import parse_view
from mvsink.spark import cds
from mvsink.spark.conf import spark_conf_for
from mvsink.spark.connect import server_command

pytestmark = pytest.mark.unit

JAVA_OPTS = "spark.driver.extraJavaOptions"


@pytest.fixture
def jars_dir(tmp_path, monkeypatch):
    """A jars folder of its own (``MVSINK_SPARK_JARS``) holding the jar names a session needs (empty files)."""
    from mvsink.spark import jars

    folder = tmp_path / "jars"
    folder.mkdir()
    for prefix in (*jars.DELTA_JARS, *jars.S3A_JARS, *jars.AZURE_JARS):  # (the connectors at pyspark's Hadoop)
        version = jars.pyspark_hadoop_version() if prefix in ("hadoop-aws-", "hadoop-azure-") else "1.0"
        (folder / f"{prefix}{version}.jar").write_bytes(b"")
    monkeypatch.setenv("MVSINK_SPARK_JARS", str(folder))
    monkeypatch.delenv("MVSINK_SPARK_CDS", raising=False)
    cds._key.cache_clear()
    yield folder
    cds._key.cache_clear()


def _view(tmp_path: Path, **extra: str):
    conf = "".join(f"\n  {k}: {v!r}" for k, v in extra.items())
    text = "name: v\nquery: SELECT 1 AS x FROM s\nsources: {s: s}\ntarget: t\nas_of: 0\n"
    text += f"spark_conf:{conf}\n" if extra else ""
    return parse_view(text, data_root=tmp_path)


def test_no_archive_no_option_then_every_driver_maps_the_one_built(jars_dir, tmp_path):
    path = cds.archive_path()
    assert path is not None and path.parent == jars_dir / "cds" and path.name.startswith("driver-")
    assert cds.driver_java_options() is None
    view = _view(tmp_path)
    assert JAVA_OPTS not in spark_conf_for(view, master="local[2]")
    path.parent.mkdir()
    path.write_bytes(b"archive")
    want = f"-XX:SharedArchiveFile={path}"
    assert (cds.driver_java_options() or "").startswith(want + " ")
    assert spark_conf_for(view, master="local[2]")[JAVA_OPTS].startswith(want)  # spark-submit, Airflow's operator
    assert JAVA_OPTS not in spark_conf_for(view)  # (the DAG file's parse-time settings: no file looked at)
    server = server_command(port=15002)
    assert any(a.startswith(f"{JAVA_OPTS}={want}") for a in server)  # the Spark Connect server


def test_turned_off_by_the_setting(jars_dir, tmp_path, monkeypatch):
    path = cds.archive_path()
    assert path is not None
    path.parent.mkdir()
    path.write_bytes(b"archive")
    monkeypatch.setenv("MVSINK_SPARK_CDS", "false")
    assert cds.driver_java_options() is None
    assert JAVA_OPTS not in spark_conf_for(_view(tmp_path), master="local[2]")


def test_the_name_changes_with_the_jars(jars_dir):
    first = cds.archive_path()
    (jars_dir / "extra-connector-2.0.jar").write_bytes(b"x")
    cds._key.cache_clear()
    second = cds.archive_path()
    assert first is not None and second is not None and first != second


def test_a_users_own_java_options_are_kept_after_ours(jars_dir, tmp_path):
    path = cds.archive_path()
    assert path is not None
    path.parent.mkdir()
    path.write_bytes(b"archive")
    conf = spark_conf_for(_view(tmp_path, **{JAVA_OPTS: "-Dmine=1"}), master="local[2]")
    assert conf[JAVA_OPTS].startswith(f"-XX:SharedArchiveFile={path} ") and conf[JAVA_OPTS].endswith(" -Dmine=1")


@pytest.mark.parametrize("theirs", ["-Xshare:off", "-XX:SharedArchiveFile=/x.jsa", "-XX:ArchiveClassesAtExit=/y.jsa"])
def test_options_that_choose_sharing_themselves_are_left_alone(theirs):
    conf = {JAVA_OPTS: theirs}
    assert cds.with_java_options(conf, "-XX:SharedArchiveFile=/ours.jsa") == conf
    assert cds.with_java_options({}, None) == {}
    assert cds.with_java_options({}, "-Xa") == {JAVA_OPTS: "-Xa"}
