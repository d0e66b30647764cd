"""The Spark Connect server's command line (loopback, defaults), and a client with no server fails fast."""

from __future__ import annotations

import time

import pytest

from mvsink.devtools.localairflow import free_port
from mvsink.exceptions import MvSinkError
from mvsink.spark.connect import remote_session, server_command


@pytest.mark.unit
def test_server_command_binds_loopback_and_carries_defaults():
    cmd = server_command(port=15999, master="local[2]", conf={"spark.driver.memory": "2g"})
    assert "org.apache.spark.sql.connect.service.SparkConnectServer" in cmd
    assert "spark.connect.grpc.binding.address=127.0.0.1" in cmd
    assert "spark.connect.grpc.binding.port=15999" in cmd
    assert "spark.sql.parquet.outputTimestampType=TIMESTAMP_MICROS" in cmd
    assert "spark.driver.memory=2g" in cmd and cmd[-1] == "spark-internal"


@pytest.mark.unit
def test_remote_session_fails_fast_without_server():
    t0 = time.monotonic()
    with pytest.raises(MvSinkError, match="no Spark Connect server.*Fix:"):
        remote_session(f"sc://127.0.0.1:{free_port()}")
    assert time.monotonic() - t0 < 5
