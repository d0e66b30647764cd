"""Issue 6: ``kill -9`` of the Airflow scheduler while a refresh's Spark step runs; a new scheduler finishes it."""

from __future__ import annotations

import os
import random
import shutil
import signal
import time

import pytest

from airflowhelp import trigger_run
from deltahelp import BASE, HOUR, write_at, write_view
from mvsink.devtools.localairflow import LocalAirflow
from test_faults_airflow import REPO, R, _check_outcome
from test_oracle import PROJECT, _orders

pytestmark = [pytest.mark.airflow, pytest.mark.slow]


def test_kill_9_of_the_scheduler_during_the_spark_step(tmp_path):
    data, dags, sync = tmp_path / "data", tmp_path / "dags", tmp_path / "sync"
    (dags / "views").mkdir(parents=True)
    data.mkdir()
    sync.mkdir()
    shutil.copy(REPO / "dags" / "mvsink_views.py", dags / "mvsink_views.py")
    rng = random.Random(62)
    write_at(str(data / "orders"), _orders(rng, 0, 30), BASE)
    write_at(str(data / "orders"), _orders(rng, 100, 6), BASE + HOUR)
    write_view(dags / "views", "ksched", query=PROJECT, sources={"orders": "orders"}, target="views/ksched",
               as_of=BASE)
    af = LocalAirflow(tmp_path / "home", dags, data_root=data, extra_env={
        "MVSINK_FAIL_POINTS": "write:after_staging@ksched:sync:once", "MVSINK_SYNC_DIR": str(sync),
        "MVSINK_TASK_RETRIES": "2", "MVSINK_TASK_RETRY_DELAY_SECONDS": "1",
        "MVSINK_REPORTS_DIR": str(tmp_path / "reports"),
        # a dead scheduler's tasks are noticed in seconds, not minutes
        "AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_THRESHOLD": "10",
        "AIRFLOW__SCHEDULER__ORPHANED_TASKS_CHECK_INTERVAL": "10",
        "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": "60"})
    old_root = os.environ.get("MVSINK_DATA_ROOT")
    os.environ["MVSINK_DATA_ROOT"] = str(data)
    af.start()
    killed_group = None
    try:
        deadline = time.monotonic() + 180
        while True:
            status, body = af.api("GET", "/api/v2/dags?limit=100", token=af.token())
            if status == 200 and "mv_ksched" in {d["dag_id"] for d in body["dags"]}:
                break
            assert time.monotonic() < deadline, body
            time.sleep(2)
        run_id = trigger_run(af, "mv_ksched", {"refresh_time": str(R)})
        ready = sync / "write-after_staging@ksched.ready"
        deadline = time.monotonic() + 600
        while not ready.exists():  # the Spark job has staged its batch and is held there
            assert time.monotonic() < deadline, "the Spark step never reached its fail point"
            time.sleep(0.5)
        sched = af.procs["scheduler"]
        os.kill(sched.pid, signal.SIGKILL)
        sched.wait(timeout=30)
        killed_group = sched.pid  # its LocalExecutor workers live on in its session; cleaned up below
        time.sleep(5)
        af.start_component("scheduler")
        (sync / "write-after_staging@ksched.go").touch()  # the Spark step carries on
        _check_outcome(af, data, tmp_path / "dags" / "views", "ksched", run_id, None)
    finally:
        af.stop()
        if killed_group is not None:  # the dead scheduler's idle LocalExecutor workers ignore SIGTERM
            try:
                os.killpg(killed_group, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if old_root is None:
            os.environ.pop("MVSINK_DATA_ROOT", None)
        else:
            os.environ["MVSINK_DATA_ROOT"] = old_root
