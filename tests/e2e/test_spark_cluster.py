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
from tests.support.probes import grep_files, listening_sockets, process_tree
from tests.support.sparkcluster import (
    WAIT_FOR_EXECUTORS,
    app_workers,
    apps,
    cluster_secret,
    new_apps,
    running_cluster,
    wait_for_app,
)
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
    # the full diffs on the cluster's executors (these tests show its executors doing the work), not in the driver by
    # DuckDB, which computes a projection's full diff without a Spark task
    monkeypatch.setenv("MVSINK_DUCKDB_FULL_DIFF", "false")


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


def command_line(pid: int) -> str:
    """A process's command line ("" once it has ended)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except (FileNotFoundError, ProcessLookupError):
        return ""


def assert_ran_on_both_workers(cluster: SparkCluster, app: dict[str, object]) -> None:
    workers = app_workers(cluster, str(app["id"]))
    assert sorted(workers) == [0, 1], (app, workers)  # an executor of the application on each worker
    assert any(workers.values()), (app, workers)  # and executors ran its tasks


def test_cli_refreshes_and_a_four_process_race_on_the_cluster(cluster, cluster_env, env):
    """Through ``mvsink refresh --master spark://…``: a join+aggregate view, and four processes racing on the
    first refresh of a linear view (all at once on the cluster); then the linear view incrementally, in-process."""
    data, views = env
    src = sources(data, 3)
    write_view(views, "agg", query=JOIN_AGG, sources=src, target="views/agg", as_of=BASE)
    write_view(views, "proj", query=PROJECT, sources={"orders": src["orders"]}, target="views/proj", as_of=BASE)
    catalog = Catalog(views)
    before = {a["id"] for a in apps(cluster)}
    r1, r2 = BASE + HOUR, BASE + 2 * HOUR
    master = ["--master", cluster.url, *WAIT_ARGS]

    agg = start(views, "agg", r1, *master)
    wait_for_app(cluster, "mvsink-write-agg", cores=2)  # its executors first, one per worker, then the racers'
    # one core each, so that the racers and agg (two cores) fit the cluster's four slots together
    racers = [
        start(views, "proj", r1, *master, "--spark-conf", "spark.cores.max=1", "--run-id", f"racer-{i}")
        for i in range(4)
    ]
    res = finish(agg)
    assert res["status"] == "appended" and res["upper"] == r1 + 1 and res["mode"] == "full", res
    results = [finish(p) for p in racers]
    statuses = sorted(str(x["status"]) for x in results)
    assert statuses.count("appended") == 1, results
    assert set(statuses) <= {"appended", "rescheduled", "up_to_date"}, results
    proj = catalog.get("proj")
    assert DeltaTable(proj.target).transaction_version(proj.app_id) == r1 + 1
    assert staged_leftovers(proj.target) == []
    race_apps = new_apps(cluster, before, name="mvsink-write-proj")  # a racer that minted nothing started no Spark
    assert 1 <= len(race_apps) <= 4 and all(a["state"] == "FINISHED" for a in race_apps), (race_apps, results)
    assert any(any(app_workers(cluster, str(a["id"])).values()) for a in race_apps), race_apps  # executors worked

    write_at(src["orders"], make_orders(random.Random(8), 100, 6), r2 - 60_000)  # an insert: proj goes incremental
    between = {a["id"] for a in apps(cluster)}
    # Spark's change terms (DuckDB would evaluate this small change's terms in the driver, with no task for the
    # cluster): the incremental refresh's work runs on the cluster's executors
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MVSINK_INCREMENTAL_DRIVER_TERMS", "false")
        res = finish(start(views, "proj", r2, "--in-process", *master))  # Spark in the CLI's own process
    assert res["status"] == "appended" and res["upper"] == r2 + 1, res
    assert mvsink_history(proj.target)[0]["mode"] == "incremental"

    for view, query, times in ((catalog.get("agg"), JOIN_AGG, (r1,)), (proj, PROJECT, (r1, r2))):
        view_sources = {s.name: src[s.name] for s in view.sources}
        for r in times:
            assert multiset(read_view(view, as_of=r)) == oracle(query, view_sources, r), (view.name, r)
        assert operations(view.target) == ["create", "bump", *["append"] * len(times)]  # the race appended once
        assert staged_leftovers(view.target) == []

    # the two-core applications had an executor on each worker, and those executors ran tasks
    (agg_app,) = new_apps(cluster, before, name="mvsink-write-agg")
    (inprocess_app,) = new_apps(cluster, between, name="mvsink")
    for app in (agg_app, inprocess_app):
        assert app["state"] == "FINISHED", app
        assert_ran_on_both_workers(cluster, app)


@pytest.mark.airflow
def test_airflow_write_task_runs_on_the_cluster(cluster, cluster_env, tmp_path, monkeypatch):
    """`airflow dags test` with the Spark connection's host = the cluster's master."""
    data = tmp_path / "data"
    data.mkdir()
    home = AirflowHome(tmp_path, data)
    src = sources(data, 11)
    write_view(home.views, "agg", query=JOIN_AGG, sources=src, target="views/agg", as_of=BASE)
    secret = cluster_secret(cluster)
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
    assert secret not in out and grep_files(tmp_path, {"secret": secret}) == []  # task logs, Airflow's home


def test_spark_connect_server_on_the_cluster(cluster, cluster_env, env, tmp_path):
    """A Spark Connect server whose master is the cluster: CLI refreshes through it, full then incremental;
    everything listens on 127.0.0.1 and the cluster's secret is on no command line and in no log."""
    data, views = env
    orders = str(data / "orders")
    write_at(orders, make_orders(random.Random(21), 0, 30), BASE)
    write_view(views, "proj", query=PROJECT, sources={"orders": "orders"}, target="views/proj", as_of=BASE)
    view = Catalog(views).get("proj")
    before = {a["id"] for a in apps(cluster)}
    secret = cluster_secret(cluster)
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
        # while the server and its executors run: every listener is on loopback, the secret on no command line
        pids = set().union(*(process_tree(p.pid) for p in [server, *cluster.procs.values()]))
        sockets = listening_sockets(pids)
        assert {p for *_, p in sockets} >= {cluster.master_port, cluster.ui_port, port}, sockets
        assert {ip for _, _, ip, _ in sockets} == {"127.0.0.1"}, sockets
        assert not [pid for pid in pids if secret in command_line(pid)]
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)
    # nor in any log: the daemons', the executors' (work dirs) and the server's
    assert grep_files(cluster.folder, {"secret": secret}) == [f"secret in {cluster.conf_dir / 'spark-defaults.conf'}"]
    assert grep_files(tmp_path, {"secret": secret}) == []
