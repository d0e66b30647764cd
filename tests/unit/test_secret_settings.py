"""Secret Spark settings go to a private properties file, never onto a command line; the connection's extra settings."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from mvsink.definitions.viewfile import parse_view
from mvsink.exceptions import MvSinkError
from mvsink.spark import conf as sparkconf
from mvsink.write import runners as sparkrun
from tests.support.viewfiles import view_text


@pytest.mark.unit
def test_secret_settings_never_go_onto_a_command_line(monkeypatch, tmp_path):
    monkeypatch.setattr(sparkrun, "spark_submit_binary", lambda: "spark-submit")
    # secret values with a '-': a temporary folder's random name (in the repo's path under CI) never has one
    conf = {
        "spark.driver.memory": "2g",
        "spark.hadoop.fs.s3a.secret.key": "S3CR3T-secret-key",
        "spark.hadoop.fs.s3a.session.token": "T0K3N-session-token",
        "spark.jdbc.password": "PW-jdbc-password",
        "spark.x.access.key": "AK-access-key",
    }
    public, secret = sparkconf.split_secret_conf(conf)
    assert public == {"spark.driver.memory": "2g"} and set(secret) == set(conf) - {"spark.driver.memory"}
    with pytest.raises(MvSinkError, match="look secret and may not go onto a command line"):
        sparkrun.submit_command(view_file="v", description="{}", report_path="r", master="local[2]", conf=conf)
    props = sparkconf.write_properties_file({**secret, "spark.odd key=x": "a\\b=c\nd"}, str(tmp_path))
    cmd = sparkrun.submit_command(
        view_file="v", description="{}", report_path="r", master="local[2]", conf=public, properties_file=props
    )
    assert cmd[cmd.index("--properties-file") + 1] == props
    assert not any(v in " ".join(cmd) for v in secret.values())
    assert stat.S_IMODE(os.stat(props).st_mode) == 0o600
    lines = Path(props).read_text().splitlines()
    assert "spark.hadoop.fs.s3a.secret.key=S3CR3T-secret-key" in lines and "spark.odd\\ key\\=x=a\\\\b=c\\nd" in lines
    with pytest.raises(MvSinkError, match="leading or trailing blanks"):
        sparkconf.write_properties_file({"spark.a.password": "pw "}, str(tmp_path))


@pytest.mark.unit
def test_connection_spark_conf_is_read_from_the_extra():
    pytest.importorskip("airflow.providers.apache.spark")
    from mvsink.airflow.operators import connection_spark_conf, write_conf

    assert connection_spark_conf({}, "c") == {}
    assert connection_spark_conf({"spark_conf": {"spark.a.token": 5}}, "c") == {"spark.a.token": "5"}
    assert connection_spark_conf({"spark_conf": '{"spark.b": "x"}'}, "c") == {"spark.b": "x"}
    with pytest.raises(MvSinkError, match="connection c: extra field spark_conf must be a JSON object"):
        connection_spark_conf({"spark_conf": ["x"]}, "c")
    view = parse_view(
        view_text(spark_conf="{spark.a: view, spark.driver.memory: 1g}"), file="/d/v.yaml", data_root=Path("/d")
    )
    conf = write_conf(view, {"spark.a": "conn", "spark.b": "conn", "spark.sql.shuffle.partitions": "3"})
    assert conf["spark.a"] == "view" and conf["spark.b"] == "conn" and conf["spark.sql.shuffle.partitions"] == "3"
