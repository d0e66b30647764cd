"""Issue 13, acceptance 3: refreshes on a real Spark standalone cluster (a master and 2 workers from the wheel).

One cluster (with ``spark.authenticate`` and a generated secret) serves every test of this module. Each
test checks the contents against the DuckDB oracle, and that the work ran on the cluster: the master
lists the application, and both workers ran executors of it that finished tasks.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from deltalake import DeltaTable

from mvsink.definitions.catalog import Catalog
from mvsink.devtools.localairflow import free_port
from mvsink.devtools.sparkcluster import SparkCluster
from mvsink.readers.arrow import read_view
from mvsink.spark.connect import start_server
from tests.support.airflow import AirflowHome
from tests.support.cli import CLI
from tests.support.data import JOIN_AGG, PROJECT, make_customers, make_orders
from tests.support.delta import BASE, HOUR, mvsink_history, operations, staged_leftovers, write_at
from tests.support.oracle import multiset, oracle
from tests.support.sparkcluster import WAIT_FOR_EXECUTORS, app_workers, apps, new_apps, running_cluster
from tests.support.viewfiles import write_view

pytestmark = [pytest.mark.slow]

WAIT_ARGS = [a for k, v in WAIT_FOR_EXECUTORS.items() for a in ("--spark-conf", f"{k}={v}")]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    with running_cluster(tmp_path_factory.mktemp("spark-cluster")) as c:
        yield c


@pytest.fixture
def cluster_env(cluster: SparkCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """This process (and its children) set up as clients of the cluster (its SPARK_CONF_DIR holds the secret)."""
    for k, v in cluster.client_env().items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("MVSINK_INCREMENTAL_MAX_FRACTION", "100")  # small tables: every change rewrites a file


def sources(data: Path, seed: int) -> dict[str, str]:
    """Orders and customers with history from BASE; their paths by name."""
    orders, customers = str(data / "orders"), str(data / "customers")
    write_at(orders, make_orders(random.Random(seed), 0, 40), BASE)
    write_at(customers, make_customers(random.Random(seed + 1)), BASE + 1000)
    return {"orders": orders, "customers": customers}


def start(views: Path, view: str, at: int, *args: str) -> subprocess.Popen[str]:
    """``mvsink refresh VIEW --at AT --json ARGS`` in a subprocess with this process's environment."""
    return subprocess.Popen(
        [*CLI, "refresh", view, "--at", str(at), "--json", "--views-dir", str(views), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )


def finish(proc: subprocess.Popen[str]) -> dict[str, object]:
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-3000:]
    return dict(json.loads(out))


def assert_ran_on_both_workers(cluster: SparkCluster, app: dict[str, object]) -> None:
    workers = app_workers(cluster, str(app["id"]))
    assert sorted(workers) == [0, 1], (app, workers)  # an executor of the application on each worker
    assert any(workers.values()), (app, workers)  # and executors ran its tasks


def test_cli_refreshes_on_the_cluster_match_the_oracle(cluster, cluster_env, env):
    """A join+aggregate view and a linear view through spark-submit, then the linear one incrementally in-process."""
    data, views = env
    src = sources(data, 3)
    write_view(views, "agg", query=JOIN_AGG, sources=src, target="views/agg", as_of=BASE)
    write_view(views, "proj", query=PROJECT, sources={"orders": src["orders"]}, target="views/proj", as_of=BASE)
    catalog = Catalog(views)
    before = {a["id"] for a in apps(cluster)}
    r1, r2 = BASE + HOUR, BASE + 2 * HOUR
    master = ["--master", cluster.url, *WAIT_ARGS]

    first = [start(views, v, r1, *master) for v in ("agg", "proj")]  # two applications on the cluster at once
    for res in map(finish, first):
        assert res["status"] == "appended" and res["upper"] == r1 + 1 and res["mode"] == "full", res
    write_at(src["orders"], make_orders(random.Random(8), 100, 6), r2 - 60_000)  # an insert: proj goes incremental
    res = finish(start(views, "proj", r2, "--in-process", *master))  # Spark in the CLI's own process
    assert res["status"] == "appended" and res["upper"] == r2 + 1, res

    for name, query, times in (("agg", JOIN_AGG, (r1,)), ("proj", PROJECT, (r1, r2))):
        view = catalog.get(name)
        view_sources = {s.name: src[s.name] for s in view.sources}
        for r in times:
            assert multiset(read_view(view, as_of=r)) == oracle(query, view_sources, r), (name, r)
        assert operations(view.target) == ["create", "bump", *["append"] * len(times)]
        assert staged_leftovers(view.target) == []
    assert mvsink_history(catalog.get("proj").target)[0]["mode"] == "incremental"

    ran = new_apps(cluster, before)
    assert sorted(a["name"] for a in ran) == ["mvsink", "mvsink-write-agg", "mvsink-write-proj"], ran
    for app in ran:
        assert app["state"] == "FINISHED", app
        assert_ran_on_both_workers(cluster, app)


def test_four_processes_race_on_the_cluster(cluster, cluster_env, env):
    """Four CLI refreshes of one view at one time, all on the cluster: exactly one appends, nothing left staged."""
    data, views = env
    orders = str(data / "orders")
    write_at(orders, make_orders(random.Random(5), 0, 40), BASE)
    write_view(views, "proj", query=PROJECT, sources={"orders": "orders"}, target="views/proj", as_of=BASE)
    before = {a["id"] for a in apps(cluster)}
    r = BASE + HOUR
    # one core per application: two of the four run at a time on the two workers
    args = ["--master", cluster.url, "--spark-conf", "spark.cores.max=1"]
    racers = [start(views, "proj", r, *args, "--run-id", f"racer-{i}") for i in range(4)]
    results = [finish(p) for p in racers]
    statuses = sorted(str(x["status"]) for x in results)
    assert statuses.count("appended") == 1, results
    assert set(statuses) <= {"appended", "rescheduled", "up_to_date"}, results
    target = str(data / "views" / "proj")
    dt = DeltaTable(target)
    ops = [json.loads(h["mvsink.operation"]) for h in dt.history()]
    assert ops.count("append") == 1 and ops.count("create") == 1 and ops.count("bump") == 1
    assert dt.transaction_version("mvsink:upper:proj") == r + 1
    assert multiset(read_view(Catalog(views).get("proj"))) == oracle(PROJECT, {"orders": orders}, r)
    assert staged_leftovers(target) == []
    writes = new_apps(cluster, before, name="mvsink-write-proj")  # a racer that minted nothing started no Spark
    assert 1 <= len(writes) <= 4 and all(a["state"] == "FINISHED" for a in writes), (writes, results)
    assert any(any(app_workers(cluster, str(a["id"])).values()) for a in writes), writes  # executors did the work


@pytest.mark.airflow
def test_airflow_write_task_runs_on_the_cluster(cluster, cluster_env, tmp_path, monkeypatch):
    """`airflow dags test` with the Spark connection's host = the cluster's master."""
    data = tmp_path / "data"
    data.mkdir()
    home = AirflowHome(tmp_path, data)
    src = sources(data, 11)
    write_view(home.views, "agg", query=JOIN_AGG, sources=src, target="views/agg", as_of=BASE)
    home.env.update(cluster.client_env())
    home.env["AIRFLOW_CONN_SPARK_DEFAULT"] = json.dumps(
        {"conn_type": "spark", "host": cluster.url, "extra": {"spark_conf": WAIT_FOR_EXECUTORS}}
    )
    home.migrate()
    home.run("dags", "reserialize")
    before = {a["id"] for a in apps(cluster)}
    run = home.run("dags", "test", "mv_agg", "2026-01-01T01:00:00+00:00")
    out = run.stdout + run.stderr
    assert "appended [" in out and "Spark-Submit cmd" in out and cluster.url in out  # the real operator, on the cluster
    monkeypatch.setenv("MVSINK_DATA_ROOT", str(data))
    view = Catalog(home.views).get("agg")
    r = BASE + HOUR
    assert multiset(read_view(view, as_of=r)) == oracle(JOIN_AGG, src, r)
    assert operations(view.target) == ["create", "bump", "append"]
    assert staged_leftovers(view.target) == []
    (app,) = new_apps(cluster, before)
    assert app["name"] == "mvsink-write-agg" and app["state"] == "FINISHED", app
    assert_ran_on_both_workers(cluster, app)


def test_spark_connect_server_on_the_cluster(cluster, cluster_env, env, tmp_path):
    """A Spark Connect server whose master is the cluster: CLI refreshes through it, full then incremental."""
    data, views = env
    orders = str(data / "orders")
    write_at(orders, make_orders(random.Random(21), 0, 30), BASE)
    write_view(views, "proj", query=PROJECT, sources={"orders": "orders"}, target="views/proj", as_of=BASE)
    view = Catalog(views).get("proj")
    before = {a["id"] for a in apps(cluster)}
    port = free_port()
    server = start_server(port=port, master=cluster.url, conf=WAIT_FOR_EXECUTORS, log_path=tmp_path / "connect.log")
    try:
        url = f"sc://127.0.0.1:{port}"
        for k, r in enumerate((BASE + HOUR, BASE + 2 * HOUR)):
            if k:
                write_at(orders, make_orders(random.Random(k), 100, 6), r - 60_000)
            res = finish(start(views, "proj", r, "--remote", url))
            assert res["status"] == "appended" and res["upper"] == r + 1, res
            assert res["mode"] == ("full" if k == 0 else "incremental"), res
            assert multiset(read_view(view, as_of=r)) == oracle(PROJECT, {"orders": orders}, r)
        assert staged_leftovers(view.target) == []
        (app,) = new_apps(cluster, before)
        assert app["name"] == "mvsink-connect" and app["state"] == "RUNNING", app
        assert_ran_on_both_workers(cluster, app)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)
