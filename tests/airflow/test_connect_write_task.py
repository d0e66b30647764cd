"""`airflow dags test` with the write task over a Spark Connect server: no JVM started for the refresh."""

from __future__ import annotations

import os
import random
import signal
import time

import pytest

from mvsink.definitions.catalog import Catalog
from mvsink.devtools.localairflow import free_port
from mvsink.readers.arrow import read_view
from mvsink.spark.connect import start_server
from tests.support.airflow import AirflowHome
from tests.support.data import PROJECT, make_orders
from tests.support.delta import BASE, HOUR, write_at
from tests.support.oracle import multiset, oracle
from tests.support.viewfiles import write_view


@pytest.mark.airflow
@pytest.mark.slow
def test_airflow_write_task_over_spark_connect(tmp_path, monkeypatch):
    data = tmp_path / "data"
    data.mkdir()
    home = AirflowHome(tmp_path, data)
    write_at(str(data / "orders"), make_orders(random.Random(31), 0, 20), BASE)
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
