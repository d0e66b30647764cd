"""``make airflow``'s Spark Connect server: started on loopback next to Airflow, answers through the connection it
defines, and is gone after stop (no Airflow components needed to check that)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from mvsink.devtools.localairflow import LocalAirflow, free_port
from mvsink.spark.connect import listening

pytestmark = [pytest.mark.airflow, pytest.mark.slow]


def test_connect_server_starts_answers_and_stops(tmp_path):
    port = free_port()
    af = LocalAirflow(tmp_path / "home", tmp_path / "dags", spark="connect", connect_port=port)
    server = af.start_connect_server()
    try:
        conn = json.loads(af.env["AIRFLOW_CONN_SPARK_CONNECT_DEFAULT"])
        code = (
            "from mvsink.airflow.connections import connect_target\n"
            "from mvsink.spark.connect import remote_session\n"
            f"t = connect_target(conn_id='c', host={conn['host']!r}, port={conn['port']})\n"
            "print('COUNT', remote_session(t.url).range(7).count())\n"
        )
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180)
        assert "COUNT 7" in out.stdout, out.stderr[-3000:]
        assert (af.home / "component-logs" / "spark-connect.log").exists()
    finally:
        af.stop()
    assert server.poll() is not None and not listening(port)
    assert af.connect_server is None
