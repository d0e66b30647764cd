"""`airflow dags test` with the write task over Spark Connect, chosen by the write task's Airflow connection
(type ``spark_connect``) when it runs: no spark-submit for the refresh, the same DAG; a dead server fails the
try within seconds naming the connection, the address and the fix, and the task's retry writes once it is back.

(The spark-submit path, with a plain ``spark`` connection, is tests/airflow/test_dags_test.py.)
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import threading
import time

import pytest
from deltalake import DeltaTable

from mvsink.definitions.catalog import Catalog
from mvsink.devtools.localairflow import free_port
from mvsink.readers.arrow import read_view
from mvsink.spark.connect import address, start_server
from tests.support.airflow import AirflowHome
from tests.support.data import PROJECT, make_orders
from tests.support.delta import BASE, HOUR, operations, staged_leftovers, write_at
from tests.support.oracle import multiset, oracle
from tests.support.viewfiles import write_view

pytestmark = [pytest.mark.airflow, pytest.mark.slow]

DATE = "2026-01-01T01:00:00+00:00"


def connect_conn(port: int, **fields: object) -> str:
    return json.dumps({"conn_type": "spark_connect", "host": "127.0.0.1", "port": port, **fields})


def proj_home(tmp_path, seed: int) -> AirflowHome:
    data = tmp_path / "data"
    data.mkdir()
    home = AirflowHome(tmp_path, data)
    write_at(str(data / "orders"), make_orders(random.Random(seed), 0, 20), BASE)
    write_view(home.views, "proj", query=PROJECT, sources={"orders": "orders"}, target="views/proj", as_of=BASE)
    home.env.pop("MVSINK_SPARK_REMOTE", None)  # the connection alone decides
    return home


def assert_refreshed_once(home: AirflowHome, monkeypatch) -> None:
    """The view equals the oracle at BASE + 1h, committed by exactly one append, nothing left staged."""
    monkeypatch.setenv("MVSINK_DATA_ROOT", str(home.data))
    view = Catalog(home.views).get("proj")
    r = BASE + HOUR
    assert operations(view.target) == ["create", "bump", "append"]
    assert DeltaTable(view.target).transaction_version(view.app_id) == r + 1
    assert multiset(read_view(view, as_of=r)) == oracle(PROJECT, {"orders": str(home.data / "orders")}, r)
    assert staged_leftovers(view.target) == []


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=60)


def test_write_task_over_a_spark_connect_connection(tmp_path, monkeypatch, connect_url):
    """The conventions of `make airflow`: spark_default stays a plain Spark connection (local[2]) and the write
    task's connection (MVSINK_SPARK_CONN_ID) is spark_connect_default; the token is masked in the task's log;
    MVSINK_SPARK_REMOTE (pointing nowhere) changes nothing but a warning."""
    home = proj_home(tmp_path, 31)
    _, port = address(connect_url)  # the test run's server
    # A token is only sent to a server named localhost without TLS (pyspark); the server ignores it.
    home.env["AIRFLOW_CONN_SPARK_CONNECT_DEFAULT"] = connect_conn(port, host="localhost", password="tok-9f3e1c")
    home.env["MVSINK_SPARK_CONN_ID"] = "spark_connect_default"
    home.env["MVSINK_SPARK_REMOTE"] = "sc://127.0.0.1:1"  # the command line's: the DAGs only warn about it
    home.migrate()
    home.run("dags", "reserialize")
    t0 = time.monotonic()
    run = home.run("dags", "test", "mv_proj", DATE)
    elapsed = time.monotonic() - t0
    out = run.stdout + run.stderr
    assert "appended [" in out
    assert "Spark-Submit cmd" not in out  # no spark-submit (no JVM) for this refresh
    assert f"writing through the Spark Connect server sc://localhost:{port}/;token=***" in out, out[-3000:]
    assert "connection 'spark_connect_default', type spark_connect" in out
    assert "tok-9f3e1c" not in out  # the token never reaches the log
    assert "MVSINK_SPARK_REMOTE is set but the DAGs no longer read it" in out
    assert_refreshed_once(home, monkeypatch)
    print(f"airflow dags test with the write over Spark Connect: {elapsed:.1f}s")


def test_dead_server_fails_the_try_fast_and_the_retry_writes_once_it_is_back(tmp_path, monkeypatch):
    home = proj_home(tmp_path, 37)
    port = free_port()  # nothing listens here until the first try has failed
    home.env["AIRFLOW_CONN_SPARK_DEFAULT"] = connect_conn(port)
    # the server starts in about 7 s; on a loaded machine later tries may still find it down (asserted alike)
    home.env["MVSINK_TASK_RETRIES"] = "5"
    home.env["MVSINK_TASK_RETRY_DELAY_SECONDS"] = "15"
    home.migrate()
    home.run("dags", "reserialize")
    lines: list[str] = []
    failed = threading.Event()

    def read(stream) -> None:
        for raw in stream:
            line = raw.decode(errors="replace")
            lines.append(line)
            if "no Spark Connect server at" in line:
                failed.set()

    run = subprocess.Popen(
        [home.airflow, "dags", "test", "mv_proj", DATE],
        env=home.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    reader = threading.Thread(target=read, args=(run.stdout,), daemon=True)
    reader.start()
    server = None
    try:
        assert failed.wait(timeout=180), "".join(lines)[-4000:]
        server = start_server(port=port, log_path=tmp_path / "connect.log")  # back before the retry
        assert run.wait(timeout=300) == 0, "".join(lines)[-4000:]
        reader.join(timeout=10)
        out = "".join(lines)
        message = next(x for x in lines if "no Spark Connect server at" in x)
        assert f"sc://127.0.0.1:{port}/" in message and f"127.0.0.1:{port}" in message, message
        assert "Fix: start the Spark Connect server" in message and "connection 'spark_default'" in message, message
        assert "Spark-Submit cmd" not in out and "appended [" in out
        tries = write_tries(home)
        # one task instance: every try before the last found the server down and failed within seconds (no
        # 10-minute gRPC retries); a retry wrote once the server was back
        assert len(tries) >= 2 and [t["state"] for t in tries] == ["failed"] * (len(tries) - 1) + ["success"], tries
        assert all(t["seconds"] < 10 for t in tries[:-1]), tries
        assert_refreshed_once(home, monkeypatch)
        print(f"write tries: {tries}\nfirst try: {message.strip()}")
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGTERM)
            run.wait(timeout=60)
        if server is not None:
            stop(server)


def write_tries(home: AirflowHome) -> list[dict[str, object]]:
    """Every try of mv_proj's write task (state, seconds), oldest first, from the metadata database."""
    proc = home.python(
        "import json\n"
        "from airflow.models.taskinstance import TaskInstance as TI\n"
        "from airflow.models.taskinstancehistory import TaskInstanceHistory as H\n"
        "from airflow.utils.session import create_session\n"
        "with create_session() as s:\n"
        "    rows = [(t.try_number, str(t.state), (t.end_date - t.start_date).total_seconds())\n"
        "            for m in (H, TI) for t in s.query(m).filter(m.dag_id == 'mv_proj', m.task_id == 'write')]\n"
        "print('TRIES ' + json.dumps(sorted(rows)))\n"
    )
    line = next((x for x in proc.stdout.splitlines() if x.startswith("TRIES ")), None)
    assert line, proc.stderr[-3000:]
    return [{"try": n, "state": s, "seconds": sec} for n, s, sec in json.loads(line[len("TRIES ") :])]


AGG = "SELECT status, count(*) AS n, sum(price) AS s, avg(qty) AS q FROM orders GROUP BY status"


def test_a_small_refresh_runs_without_the_spark_connect_server_once_plan_facts_are_kept(
    tmp_path, monkeypatch, connect_url
):
    """Issue 35: the write task of a small aggregate refresh whose plan facts an earlier refresh kept opens no Spark
    session (the facts the first build kept): with the connection pointing where nothing listens, the runs still
    commit, exact against the oracle."""
    data = tmp_path / "data"
    data.mkdir()
    home = AirflowHome(tmp_path, data)
    rng = random.Random(43)
    orders = str(data / "orders")
    for part in range(4):  # several files: one appended file is a small change
        write_at(orders, make_orders(rng, 20 * part, 20), BASE)
    write_view(home.views, "agg", query=AGG, sources={"orders": "orders"}, target="views/agg", as_of=BASE)
    home.env.pop("MVSINK_SPARK_REMOTE", None)
    _, port = address(connect_url)
    home.env["MVSINK_SPARK_CONN_ID"] = "spark_connect_default"
    home.migrate()
    home.run("dags", "reserialize")
    outs = []
    for hour in (1, 2, 3):  # the first build, which keeps the facts (the server's); then twice without Spark
        if hour > 1:
            write_at(orders, make_orders(rng, 100 * hour, 5), BASE + hour * HOUR - HOUR // 2)
        alive = hour < 2
        home.env["AIRFLOW_CONN_SPARK_CONNECT_DEFAULT"] = connect_conn(port if alive else free_port())
        run = home.run("dags", "test", "mv_agg", f"2026-01-01T0{hour}:00:00+00:00")
        outs.append(run.stdout + run.stderr)
        assert "appended [" in outs[-1], outs[-1][-3000:]
    assert "writing through the Spark Connect server" in outs[0]
    assert "plan facts kept for refreshes without Spark" in outs[0], outs[0][-3000:]
    for out in outs[1:]:
        assert "write step without Spark" in out, out[-3000:]
        assert "writing through the Spark Connect server" not in out
    monkeypatch.setenv("MVSINK_DATA_ROOT", str(data))
    view = Catalog(home.views).get("agg")
    r = BASE + 3 * HOUR
    assert operations(view.target) == ["create", "bump", "append", "append", "append"]
    assert multiset(read_view(view, as_of=r)) == oracle(AGG, {"orders": orders}, r)
    info = DeltaTable(view.target).history(1)[0]
    assert json.loads(info["mvsink.mode"]) == "incremental:aggregate"
    assert "without Spark" in json.loads(info["mvsink.mode_reason"])
    assert staged_leftovers(view.target) == []
