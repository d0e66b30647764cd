"""The Spark Connect server's command line (loopback, defaults), and a client with no server fails fast
(a runtime failure, so that an Airflow task retries it), its token never shown."""

from __future__ import annotations

import time

import pytest

from mvsink.devtools.localairflow import free_port
from mvsink.exceptions import MvSinkError, MvSinkRuntimeError, SparkConnectUnavailableError
from mvsink.spark.connect import address, probe, redact_url, remote_session, server_command


@pytest.mark.unit
def test_server_command_binds_loopback_and_carries_defaults():
    cmd = server_command(port=15999, master="local[2]", conf={"spark.driver.memory": "2g"})
    assert "org.apache.spark.sql.connect.service.SparkConnectServer" in cmd
    assert "spark.connect.grpc.binding.address=127.0.0.1" in cmd
    assert "spark.connect.grpc.binding.port=15999" in cmd
    assert "spark.sql.parquet.outputTimestampType=TIMESTAMP_MICROS" in cmd
    assert "spark.driver.memory=2g" in cmd and cmd[-1] == "spark-internal"


@pytest.mark.unit
def test_server_command_registers_the_plugin_only_where_its_jar_is(tmp_path, monkeypatch):
    """mvsink's Connect plugin: on the driver's class path beside the other jars and registered, added to a
    user's own relation plugins; a jars folder without it starts a server without it."""
    from mvsink.spark import jars

    real = jars.jars_folder()
    for jar in real.glob("*.jar"):
        if jar.name != "mvsink-connect-plugin.jar":
            (tmp_path / jar.name).symlink_to(jar)
    monkeypatch.setenv("MVSINK_SPARK_JARS", str(tmp_path))
    conf = dict(a.split("=", 1) for a in server_command(port=15999) if "=" in a)
    assert "spark.connect.extensions.relation.classes" not in conf
    assert "mvsink-connect-plugin.jar" not in conf["spark.driver.extraClassPath"]
    (tmp_path / "mvsink-connect-plugin.jar").write_bytes(b"PK")
    jars._listing.cache_clear()  # (a folder's listing is read once per process)
    conf = dict(
        a.split("=", 1)
        for a in server_command(port=15999, conf={"spark.connect.extensions.relation.classes": "my.Plugin"})
        if "=" in a
    )
    assert conf["spark.connect.extensions.relation.classes"] == "my.Plugin,mvsink.connect.AnalyzedPlanRelation"
    path = conf["spark.driver.extraClassPath"].split(":")
    assert path[-1] == str(tmp_path / "mvsink-connect-plugin.jar")
    assert any(p.startswith(str(tmp_path / "delta-spark_")) for p in path)


@pytest.mark.unit
def test_remote_session_fails_fast_without_server():
    t0 = time.monotonic()
    with pytest.raises(SparkConnectUnavailableError, match="no Spark Connect server.*Fix:") as ei:
        remote_session(f"sc://127.0.0.1:{free_port()}")
    assert time.monotonic() - t0 < 5
    assert isinstance(ei.value, MvSinkRuntimeError) and not isinstance(ei.value, MvSinkError)  # retried


@pytest.mark.unit
def test_probe_names_the_address_and_the_fix_and_hides_the_token():
    port = free_port()
    url = f"sc://127.0.0.1:{port}/;user_id=u;token=s3cr3t-t0k3n"
    with pytest.raises(SparkConnectUnavailableError) as ei:
        probe(url, timeout=1, fix="start it")
    msg = str(ei.value)
    assert f"127.0.0.1:{port}" in msg and msg.endswith("Fix: start it.") and "s3cr3t" not in msg, msg
    t0 = time.monotonic()
    with pytest.raises(SparkConnectUnavailableError, match="no-such-host.invalid:15002"):
        probe("sc://no-such-host.invalid", timeout=1)  # an unknown host fails as fast
    assert time.monotonic() - t0 < 5


@pytest.mark.unit
def test_address_and_redaction():
    assert address("sc://spark-connect:15003/;use_ssl=true") == ("spark-connect", 15003)
    assert address("sc://127.0.0.1") == ("127.0.0.1", 15002)
    assert redact_url("sc://h:1/;user_id=u;token=abc;use_ssl=true") == "sc://h:1/;user_id=u;token=***;use_ssl=true"
    assert redact_url("sc://h:1/;token=abc") == "sc://h:1/;token=***"
    for bad in ("http://h:1", "sc://", "sc://h:notaport"):
        with pytest.raises(MvSinkError, match="Fix:"):
            address(bad)
