"""Refreshes through a long-lived Spark Connect server (no JVM start per refresh)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from deltahelp import BASE, HOUR, delete_at, multiset, oracle, staged_leftovers, write_at, write_view
from mvsink.definitions.catalog import Catalog
from mvsink.devtools.localairflow import free_port
from mvsink.exceptions import MvSinkError
from mvsink.readers.arrow import read_view
from mvsink.spark.connect import remote_session, server_command, start_server
from test_oracle import PROJECT, _orders


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


@pytest.mark.slow
def test_refreshes_through_spark_connect_match_oracle(env, tmp_path, monkeypatch):
    monkeypatch.setenv("MVSINK_INCREMENTAL_MAX_FRACTION", "100")  # small tables: every change rewrites the file
    data, views = env
    orders = str(data / "orders")
    write_at(orders, _orders(random.Random(21), 0, 30), BASE)
    write_view(views, "proj", query=PROJECT, sources={"orders": "orders"}, target="views/proj", as_of=BASE)
    catalog = Catalog(views)
    view = catalog.get("proj")
    port = free_port()
    proc = start_server(port=port, log_path=tmp_path / "connect.log")
    try:
        url = f"sc://127.0.0.1:{port}"
        for k, r in enumerate((BASE + HOUR, BASE + 2 * HOUR, BASE + 3 * HOUR)):
            if k:
                write_at(orders, _orders(random.Random(k), 100 * k, 6), r - 60_000)
            if k == 2:  # a delete too: both the inserted and the deleted change terms are evaluated remotely
                delete_at(orders, "id % 3 = 0", r - 30_000)
            # a fresh process, as a CLI call or an Airflow task is (a classic session lives in this one)
            out = subprocess.run([sys.executable, "-m", "mvsink", "refresh", "proj", "--at", str(r), "--remote", url,
                                  "--json", "--views-dir", str(views)], capture_output=True, text=True, timeout=300)
            assert out.returncode == 0, out.stderr[-3000:]
            res = json.loads(out.stdout)
            assert res["status"] == "appended" and res["upper"] == r + 1
            assert res["mode"] == ("full" if k == 0 else "incremental"), res
            assert multiset(read_view(view, as_of=r)) == oracle(PROJECT, {"orders": orders}, r)
        assert staged_leftovers(view.target) == []
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)


@pytest.mark.airflow
@pytest.mark.slow
def test_airflow_write_task_over_spark_connect(tmp_path, monkeypatch):
    from airflowhelp import AirflowHome

    data = tmp_path / "data"
    data.mkdir()
    home = AirflowHome(tmp_path, data)
    write_at(str(data / "orders"), _orders(random.Random(31), 0, 20), BASE)
    write_view(home.views, "proj", query=PROJECT, sources={"orders": "orders"}, target="views/proj", as_of=BASE)
    port = free_port()
    proc = start_server(port=port, log_path=tmp_path / "connect.log")
    try:
        home.env["MVSINK_SPARK_REMOTE"] = f"sc://127.0.0.1:{port}"
        home.migrate()
        home.run("dags", "reserialize")
        t0 = time.monotonic()
        run = home.run("dags", "test", "mv_proj", "2026-01-01T01:00:00+00:00")
        elapsed = time.monotonic() - t0
        out = run.stdout + run.stderr
        assert "appended [" in out and "Spark-Submit cmd" not in out  # no JVM started for this refresh
        monkeypatch.setenv("MVSINK_DATA_ROOT", str(data))
        view = Catalog(home.views).get("proj")
        r = BASE + HOUR
        assert multiset(read_view(view, as_of=r)) == oracle(PROJECT, {"orders": str(data / "orders")}, r)
        print(f"airflow dags test with the write over Spark Connect: {elapsed:.1f}s")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
