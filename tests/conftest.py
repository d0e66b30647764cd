from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.pop("SPARK_HOME", None)
# The short-lived JVMs the tests start (each spark-submit write step, Airflow's write tasks, a test's own Connect
# server) compile with the JIT's first tier only: the same results, about a third less CPU each on 2 cores
# (docs/spark.md, "The driver's class-data archive"). The run's own session and Connect server, which serve
# thousands of queries, keep both tiers (:func:`long_lived_jvm`). A value set outside is kept.
SHORT_LIVED_JVM = "-XX:TieredStopAtLevel=1"
os.environ.setdefault("SPARK_SUBMIT_OPTS", SHORT_LIVED_JVM)
# The cost model (on by default) picks a mode from the measured seconds of a view's own refreshes: a test asserting a
# mode would then depend on the machine's load. The tests run the scan guard's choice (the model's prior, what it
# falls back to), and the model's own tests turn it on (tests/unit/test_cost_*.py, tests/spark/test_cost_history.py).
# A value set outside is kept.
os.environ.setdefault("MVSINK_COST_MODEL", "false")
# The machine's cache of query splits (mvsink.definitions.cache): the run's own, not the user's ~/.cache (xdist's
# workers inherit the controller's folder). A value set outside is kept.
os.environ.setdefault("MVSINK_CACHE_DIR", tempfile.mkdtemp(prefix="mvsink-test-cache-"))


# The run's own session and Connect server collect with the parallel collector: on 2 cores it measured ~8 % less CPU
# and wall than G1 over tests/spark/test_incremental_shapes.py (190 vs 207 CPU-s, 121 vs 131 s; 2 runs each).
LONG_LIVED_JVM_CONF = {"spark.driver.extraJavaOptions": "-XX:+UseParallelGC"}


@contextlib.contextmanager
def long_lived_jvm():
    """While a JVM that serves the whole test run starts: ``SPARK_SUBMIT_OPTS`` as it was outside the tests; yields
    the Spark conf of such a JVM (:data:`LONG_LIVED_JVM_CONF`)."""
    ours = os.environ.get("SPARK_SUBMIT_OPTS")
    if ours == SHORT_LIVED_JVM:
        del os.environ["SPARK_SUBMIT_OPTS"]
    try:
        yield dict(LONG_LIVED_JVM_CONF)
    finally:
        if ours is not None:
            os.environ["SPARK_SUBMIT_OPTS"] = ours


TESTS = Path(__file__).resolve().parent
# ``make test`` runs the tests in two processes (pytest-xdist, ``--dist loadgroup``) in groups of files sent to one
# process each, in collection order: the Airflow tests are one group, since they mostly wait on a scheduler's loop and
# on wall-clock instants, so one process runs them while the other keeps both cores busy with Spark; the
# object-storage tests are one group (their servers start once); every other file is a group of its own (its module
# fixtures built once).
SHARED_GROUPS = ("airflow", "storage")


def group_of(nodeid: str) -> str:
    """The group of a test's node id (``tests/<folder>/<file>::<name>``): its folder's in :data:`SHARED_GROUPS`,
    else its file."""
    path = nodeid.split("::", 1)[0]
    parts = Path(path).parts
    return parts[1] if len(parts) > 2 and parts[0] == TESTS.name and parts[1] in SHARED_GROUPS else path


def pytest_xdist_make_scheduler(config, log):
    """``--dist loadgroup`` by :func:`group_of` (xdist 3.8's own loadgroup reads ``xdist_group`` marks through a
    node id suffix that pytest 9 no longer takes); other ``--dist`` modes as xdist makes them."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class FolderGroups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    return FolderGroups(config, log)


@pytest.fixture(scope="session")
def spark():
    """One SparkSession (local[2]) for the whole test run."""
    from mvsink.write.runners import local_session

    with long_lived_jvm() as conf:
        session = local_session("local[2]", {"spark.driver.memory": "2g", **conf})
    yield session
    session.stop()


@pytest.fixture(scope="session")
def connect_url(tmp_path_factory):
    """One Spark Connect server for the whole test run (started on first use; Delta and the object stores'
    connectors on its class path, no store settings: a client sets them per view): its ``sc://`` URL."""
    import os
    import signal

    from mvsink.devtools.localairflow import free_port
    from mvsink.spark.connect import start_server

    port = free_port()
    with long_lived_jvm() as conf:
        proc = start_server(port=port, conf=conf, log_path=tmp_path_factory.mktemp("connect") / "connect.log")
    yield f"sc://127.0.0.1:{port}"
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=60)


@pytest.fixture
def env(tmp_path, monkeypatch):
    """A data root and a views folder, with relative paths resolving into the data root."""
    data = tmp_path / "data"
    views = tmp_path / "views"
    data.mkdir()
    views.mkdir()
    monkeypatch.setenv("MVSINK_DATA_ROOT", str(data))
    monkeypatch.delenv("MVSINK_FAIL_POINTS", raising=False)
    return data, views


def pytest_addoption(parser):
    """The differential test of the DuckDB translation (tests/spark/test_duckdb_translation.py): its seed and
    how many expressions it generates (e.g. ``--translator-cases 20000`` once by hand)."""
    parser.addoption("--translator-seed", type=int, default=20240611, help="seed of the generated expressions")
    parser.addoption("--translator-cases", type=int, default=1000, help="how many expressions to generate")
