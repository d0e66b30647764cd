"""Issue 6: ``kill -9`` of the Airflow scheduler while a refresh's Spark step runs; a new scheduler finishes it."""

from __future__ import annotations

import os
import random
import signal
import time

import pytest

from tests.support.airflow import dags_folder, running_airflow, trigger_run, wait_for
from tests.support.data import PROJECT, make_orders
from tests.support.delta import BASE, HOUR, write_at
from tests.support.faults import R, check_outcome
from tests.support.viewfiles import write_view

pytestmark = [pytest.mark.airflow, pytest.mark.slow]


def test_kill_9_of_the_scheduler_during_the_spark_step(tmp_path):
    data, dags = dags_folder(tmp_path)
    sync = tmp_path / "sync"
    sync.mkdir()
    rng = random.Random(62)
    write_at(str(data / "orders"), make_orders(rng, 0, 30), BASE)
    write_at(str(data / "orders"), make_orders(rng, 100, 6), BASE + HOUR)
    write_view(dags / "views", "ksched", query=PROJECT, sources={"orders": "orders"}, target="views/ksched", as_of=BASE)
    old_root = os.environ.get("MVSINK_DATA_ROOT")
    os.environ["MVSINK_DATA_ROOT"] = str(data)
    killed_group = None
    try:
        with running_airflow(
            tmp_path,
            dags,
            data,
            wanted={"mv_ksched"},
            timeout=180,
            extra_env={
                "MVSINK_FAIL_POINTS": "write:after_staging@ksched:sync:once",
                "MVSINK_SYNC_DIR": str(sync),
                "MVSINK_TASK_RETRIES": "2",
                "MVSINK_TASK_RETRY_DELAY_SECONDS": "1",
                # a dead scheduler's tasks are noticed in seconds, not minutes
                "AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_THRESHOLD": "10",
                "AIRFLOW__SCHEDULER__ORPHANED_TASKS_CHECK_INTERVAL": "10",
                "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": "60",
            },
        ) as af:
            run_id = trigger_run(af, "mv_ksched", {"refresh_time": str(R)})
            ready = sync / "write-after_staging@ksched.ready"
            # the Spark job has staged its batch and is held there
            wait_for("the Spark step to reach its fail point", ready.exists, timeout=600, poll=0.5)
            sched = af.procs["scheduler"]
            os.kill(sched.pid, signal.SIGKILL)
            sched.wait(timeout=30)
            killed_group = sched.pid  # its LocalExecutor workers live on in its session; cleaned up below
            time.sleep(5)
            af.start_component("scheduler")
            (sync / "write-after_staging@ksched.go").touch()  # the Spark step carries on
            check_outcome(af, data, dags / "views", "ksched", run_id, None)
    finally:
        if killed_group is not None:  # the dead scheduler's idle LocalExecutor workers ignore SIGTERM
            try:
                os.killpg(killed_group, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if old_root is None:
            os.environ.pop("MVSINK_DATA_ROOT", None)
        else:
            os.environ["MVSINK_DATA_ROOT"] = old_root
