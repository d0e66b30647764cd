"""The local cluster's launcher without starting Java: a port in use is refused, the secret file is private."""

from __future__ import annotations

import socket
import stat

import pytest

from mvsink.devtools.sparkcluster import ClusterError, SparkCluster

pytestmark = pytest.mark.unit


def test_a_port_in_use_is_refused_before_anything_starts(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        cluster = SparkCluster(tmp_path / "c", master_port=s.getsockname()[1])
        with pytest.raises(ClusterError, match="already in use. Fix:"):
            cluster.start()
    assert cluster.procs == {} and not (tmp_path / "c").exists()


def test_the_shared_secret_is_generated_into_a_private_spark_defaults_file(tmp_path):
    cluster = SparkCluster(tmp_path, workers=2)
    cluster._write_conf()
    conf = cluster.conf_dir / "spark-defaults.conf"
    lines = dict(line.split(" ", 1) for line in conf.read_text().splitlines())
    assert lines["spark.authenticate"] == "true" and len(lines["spark.authenticate.secret"]) == 64
    assert stat.S_IMODE(conf.stat().st_mode) == 0o600 and stat.S_IMODE(cluster.conf_dir.stat().st_mode) == 0o700
    assert cluster.client_env() == {"SPARK_CONF_DIR": str(cluster.conf_dir), "SPARK_LOCAL_IP": "127.0.0.1"}
    assert cluster.url == f"spark://127.0.0.1:{cluster.master_port}"
    other = SparkCluster(tmp_path / "o", authenticate=False)
    other._write_conf()
    assert "authenticate" not in (other.conf_dir / "spark-defaults.conf").read_text()
