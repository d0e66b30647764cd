"""A real Spark standalone cluster for the tests (master + workers from the pyspark wheel, on 127.0.0.1).

- ``running_cluster``: one started cluster (``mvsink.devtools.sparkcluster``), stopped afterwards;
- ``apps``, ``new_apps``: the applications the master lists (finished and running); ``wait_for_app``: until
  a running one holds its cores;
- ``cluster_secret``: the generated secret (to check it leaks nowhere);
- ``app_workers``: which workers ran executors of an application, and whether those executors ran tasks
  (read from the workers' work dirs, where each executor of an application gets a folder and its log).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mvsink.devtools.sparkcluster import SparkCluster

# Executors register before the first job runs (each test app gets one executor on each worker):
# else a short job can finish on the first executor before the second is launched.
WAIT_FOR_EXECUTORS = {
    "spark.scheduler.minRegisteredResourcesRatio": "1.0",
    "spark.scheduler.maxRegisteredResourcesWaitingTime": "60s",
}


@contextmanager
def running_cluster(folder: Path, *, workers: int = 2, cores: int = 2) -> Iterator[SparkCluster]:
    """A started cluster of ``workers`` workers (``cores`` task slots and 2 GB each) with its state in ``folder``.

    Two slots per worker let two applications (2 cores each, one executor per worker) run at once.
    """
    cluster = SparkCluster(folder, workers=workers, cores=cores, memory="2g")
    cluster.start(timeout=180)
    try:
        yield cluster
    finally:
        cluster.stop()


def apps(cluster: SparkCluster) -> list[dict[str, Any]]:
    """Every application the master knows (running and finished)."""
    st = cluster.state()
    assert st is not None, f"the master at {cluster.ui_url} does not answer"
    return list(st.get("activeapps", [])) + list(st.get("completedapps", []))


def new_apps(cluster: SparkCluster, before: Iterable[str], *, name: str | None = None) -> list[dict[str, Any]]:
    """The applications not in ``before`` (ids), optionally only those called ``name``."""
    seen = set(before)
    return [a for a in apps(cluster) if a["id"] not in seen and (name is None or a.get("name") == name)]


def wait_for_app(cluster: SparkCluster, name: str, *, cores: int, timeout: float = 300) -> dict[str, Any]:
    """Wait until a running application called ``name`` holds ``cores`` cores (its executors are launched)."""
    deadline = time.monotonic() + timeout
    while True:
        st = cluster.state() or {}
        running = [a for a in st.get("activeapps", []) if a.get("name") == name and a.get("cores", 0) >= cores]
        if running:
            return dict(running[0])
        if time.monotonic() > deadline:
            raise AssertionError(f"no running application {name} with {cores} cores after {timeout:.0f}s: {st}")
        time.sleep(0.5)


def cluster_secret(cluster: SparkCluster) -> str:
    """The cluster's generated ``spark.authenticate.secret`` (from its spark-defaults.conf)."""
    for line in (cluster.conf_dir / "spark-defaults.conf").read_text().splitlines():
        key, _, value = line.partition(" ")
        if key == "spark.authenticate.secret":
            return value.strip()
    raise AssertionError(f"no spark.authenticate.secret in {cluster.conf_dir}")


def app_workers(cluster: SparkCluster, app_id: str) -> dict[int, bool]:
    """Worker index -> whether an executor of ``app_id`` there finished a task, for every worker that ran one."""
    out: dict[int, bool] = {}
    for i in range(cluster.workers):
        app_dir = cluster.work_dir(i) / app_id
        if app_dir.is_dir():
            logs = [p.read_text(errors="replace") for p in app_dir.glob("*/stderr")]
            out[i] = any("Finished task" in text for text in logs)
    return out
