"""Issue 6: faults injected through the real Airflow path (api-server, scheduler, LocalExecutor workers).

Each view of the cluster gets one fault, armed with a ``:once`` fail point so that Airflow's own
task retry (``MVSINK_TASK_RETRIES``) is what recovers:

- ``lost``: append commits, then its process exits before reporting (a lost reply);
- ``crashw``: the Spark job exits after staging;
- ``killw``: the Spark job's driver is ``kill -9``-ed by the test while it holds a staged batch;
- ``killa``: the append task's process is ``kill -9``-ed by the test just before its commit;
- ``killt``: the write task's own process (the Airflow task runner that started spark-submit) is
  ``kill -9``-ed while its Spark job holds a staged batch; the orphaned job is released afterwards.

Every test asserts the run succeeded through a retry, contents == the DuckDB oracle, exactly one
append commit for the refresh, and no staged leftovers after ``mvsink gc``.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from pathlib import Path

import pytest
from deltalake import DeltaTable

from mvsink.definitions.catalog import Catalog
from mvsink.readers.arrow import read_view
from tests.support.airflow import dags_folder, running_airflow, trigger_run, wait_run
from tests.support.data import PROJECT, make_orders
from tests.support.delta import BASE, HOUR, staged_leftovers, write_at
from tests.support.faults import R, check_outcome, gc
from tests.support.oracle import multiset, oracle
from tests.support.viewfiles import write_view

pytestmark = [pytest.mark.airflow, pytest.mark.slow]

FAULTS = {
    "lost": "append:after_commit@lost:exit:once",
    "crashw": "write:after_staging@crashw:exit:once",
    "killw": "write:after_staging@killw:sync:once",
    "killa": "append:before_commit@killa:sync:once",
    "killt": "write:after_staging@killt:sync:once",
}
KILL = {"write:after_staging@killw": "self", "append:before_commit@killa": "self", "write:after_staging@killt": "task"}


@pytest.fixture(scope="module")
def faulty(tmp_path_factory):
    """A running Airflow with one view per fault; one run of each is triggered at once (they overlap)."""
    root = tmp_path_factory.mktemp("faults")
    data, dags = dags_folder(root)
    sync = root / "sync"
    sync.mkdir()
    orders = str(data / "orders")
    rng = random.Random(61)
    write_at(orders, make_orders(rng, 0, 30), BASE)
    write_at(orders, make_orders(rng, 100, 6), BASE + HOUR)
    for name in FAULTS:
        write_view(
            dags / "views", name, query=PROJECT, sources={"orders": "orders"}, target=f"views/{name}", as_of=BASE
        )
    old_root = os.environ.get("MVSINK_DATA_ROOT")
    os.environ["MVSINK_DATA_ROOT"] = str(data)  # the views' relative targets resolve here (also for the gc CLI)
    stop = threading.Event()
    try:
        with running_airflow(
            root,
            dags,
            data,
            wanted={f"mv_{n}" for n in FAULTS},
            timeout=180,
            extra_env={
                "MVSINK_FAIL_POINTS": ",".join(FAULTS.values()),
                "MVSINK_SYNC_DIR": str(sync),
                "MVSINK_TASK_RETRIES": "2",
                "MVSINK_TASK_RETRY_DELAY_SECONDS": "1",
            },
        ) as af:
            runs = {n: trigger_run(af, f"mv_{n}", {"refresh_time": str(R)}) for n in FAULTS}
            killed: dict[str, int] = {}
            killer = threading.Thread(target=_killer, args=(sync, killed, stop), daemon=True)
            killer.start()  # kills at once: the runs overlap, a test may reach its turn later
            try:
                yield af, data, dags / "views", sync, runs, killed
            finally:
                stop.set()
    finally:
        if old_root is None:
            os.environ.pop("MVSINK_DATA_ROOT", None)
        else:
            os.environ["MVSINK_DATA_ROOT"] = old_root


def _task_process(pid: int) -> int:
    """The Airflow task runner process above ``pid`` (``airflow worker -- <ti id>``, not the executor's worker)."""
    p = pid
    while p > 1:
        p = int(Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[1])
        cmd = Path(f"/proc/{p}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        if cmd.startswith("airflow worker -- ") and "LocalExecutor" not in cmd:
            return p
    raise AssertionError(f"no Airflow task process above pid {pid}")


def _killer(sync: Path, killed: dict[str, int], stop: threading.Event) -> None:
    """``kill -9`` the process a ``sync`` fail point holds (its pid is in the ``.ready`` file), or its task
    process, once per point; records the pid killed and, for the task, the held process as ``<point>/held``."""
    while not stop.is_set() and len([k for k in killed if "/" not in k]) < len(KILL):
        for point, whom in KILL.items():
            ready = sync / f"{point.replace(':', '-')}.ready"
            if point not in killed and ready.exists():
                held = int(ready.read_text())
                pid = held if whom == "self" else _task_process(held)
                os.kill(pid, signal.SIGKILL)
                killed[point + "/held"] = held
                killed[point] = pid
        time.sleep(0.2)


def _killed(killed: dict[str, int], point: str, timeout: float = 900) -> int:
    deadline = time.monotonic() + timeout
    while point not in killed:
        assert time.monotonic() < deadline, f"nobody reached {point}"
        time.sleep(1)
    return killed[point]


def test_lost_reply_after_commit_retry_recognises_its_batch(faulty):
    af, data, views, sync, runs, killed = faulty
    summary = check_outcome(af, data, views, "lost", runs["lost"], "append")
    assert summary["reason"] == "already committed by an earlier attempt", summary
    assert (sync / "append-after_commit@lost.fired").exists()


def test_spark_job_crash_after_staging_is_retried_and_restages(faulty):
    af, data, views, sync, runs, killed = faulty
    check_outcome(af, data, views, "crashw", runs["crashw"], "write")
    assert (sync / "write-after_staging@crashw.fired").exists()


def test_kill_9_of_the_spark_driver_during_write(faulty):
    af, data, views, sync, runs, killed = faulty
    pid = _killed(killed, "write:after_staging@killw")
    assert int((sync / "write-after_staging@killw.fired").read_text()) == pid
    check_outcome(af, data, views, "killw", runs["killw"], "write")


def test_kill_9_of_the_append_task_process_before_commit(faulty):
    af, data, views, sync, runs, killed = faulty
    pid = _killed(killed, "append:before_commit@killa")
    assert int((sync / "append-before_commit@killa.fired").read_text()) == pid
    check_outcome(af, data, views, "killa", runs["killa"], "append")


def test_kill_9_of_the_write_task_process_during_the_spark_step(faulty):
    af, data, views, sync, runs, killed = faulty
    task_pid = _killed(killed, "write:after_staging@killt")
    driver = killed["write:after_staging@killt/held"]
    assert int((sync / "write-after_staging@killt.fired").read_text()) == driver != task_pid
    check_outcome(af, data, views, "killt", runs["killt"], "write")
    target = Catalog(views).get("killt").target
    version = DeltaTable(target).version()
    (sync / "write-after_staging@killt.go").touch()  # release the orphaned Spark job, if it still lives
    deadline = time.monotonic() + 180
    while Path(f"/proc/{driver}").exists() and b"mv_write" in Path(f"/proc/{driver}/cmdline").read_bytes():
        assert time.monotonic() < deadline, "the orphaned Spark job did not end"
        time.sleep(1)
    assert DeltaTable(target).version() == version  # the late job changed nothing
    assert staged_leftovers(target) == []
    assert multiset(read_view(Catalog(views).get("killt"), as_of=R)) == oracle(
        PROJECT, {"orders": str(data / "orders")}, R
    )


def test_gc_removes_only_what_no_commit_references_and_cannot_commit(faulty):
    from mvsink.core.batch import make_batch_id
    from mvsink.core.staging import batch_dir, manifest_path, write_intent

    af, data, views, _, runs, _ = faulty
    assert wait_run(af, "mv_lost", runs["lost"], timeout=900)["state"] == "success"
    view = Catalog(views).get("lost")
    t = view.target
    committed = sorted(p.name for p in (Path(t) / "batches").iterdir())
    assert committed and staged_leftovers(t) == []
    crashed = make_batch_id("lost", BASE, R, "crashed-mid-write")  # lower below the upper: can never commit
    inflight = make_batch_id("lost", R + 1, R + 2, "in-flight")  # lower == upper: may still commit
    orphan = make_batch_id("lost", BASE, R, "orphan-folder")  # files left without a manifest
    for b in (crashed, inflight, orphan):
        batch_dir(t, b).mkdir(parents=True)
        (batch_dir(t, b) / "part-0.parquet").write_bytes(b"x")
    write_intent(t, crashed)
    write_intent(t, inflight)
    before = DeltaTable(t).version()

    fresh = gc(views, "lost")  # default grace: a young unfinished write counts as in flight
    assert fresh["discarded"] == [] and fresh["orphans"] == [] and sorted(fresh["kept"]) == sorted([crashed, inflight])
    dry = gc(views, "lost", "--grace-seconds", "0", "--dry-run")
    assert dry["discarded"] == [crashed] and dry["orphans"] == [orphan] and dry["kept"] == [inflight]
    assert manifest_path(t, crashed).exists() and batch_dir(t, orphan).exists()  # dry run removed nothing
    done = gc(views, "lost", "--grace-seconds", "0")
    assert done["discarded"] == [crashed] and done["orphans"] == [orphan] and done["kept"] == [inflight]
    assert not batch_dir(t, crashed).exists() and not manifest_path(t, crashed).exists()
    assert not batch_dir(t, orphan).exists()
    assert batch_dir(t, inflight).exists() and manifest_path(t, inflight).exists()  # never one in flight
    assert sorted(p.name for p in (Path(t) / "batches").iterdir() if p.name != inflight) == committed
    assert DeltaTable(t).version() == before
    assert multiset(read_view(view, as_of=R)) == oracle(PROJECT, {"orders": str(data / "orders")}, R)
