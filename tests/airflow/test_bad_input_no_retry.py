"""Bad input fails an Airflow task at once (try 1, no retry); Airflow's retries are kept for runtime failures.

Runs ``dag.test()`` (in a subprocess with its own AIRFLOW_HOME) with retries switched on
(``MVSINK_TASK_RETRIES=2``, 1 s apart): without the fix each failing task would run three times.
"""

from __future__ import annotations

import json
import random

import pytest

from tests.support.airflow import AirflowHome
from tests.support.data import PROJECT, make_orders
from tests.support.delta import BASE, HOUR, write_at
from tests.support.viewfiles import write_view

pytestmark = pytest.mark.airflow

RUN = """
import datetime as dt, json, sys
from airflow.dag_processing.dagbag import DagBag

bag = DagBag(dag_folder={dags!r})
assert not bag.import_errors, bag.import_errors
out = {{}}
for key, dag_id, conf, hour in {runs!r}:
    dag = bag.dags[dag_id]
    when = dt.datetime(2026, 1, 1, hour, tzinfo=dt.timezone.utc)
    dr = dag.test(logical_date=when, run_conf=conf)  # always the full run_conf: params leak between calls
    out[key] = {{"run": str(getattr(dr.state, "value", dr.state)),
                "tis": {{ti.task_id: [str(getattr(ti.state, "value", ti.state)), ti.try_number]
                         for ti in dr.get_task_instances()}}}}
print("RESULT " + json.dumps(out))
"""


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    root = tmp_path_factory.mktemp("noretry")
    data = root / "data"
    data.mkdir()
    af = AirflowHome(root, data)
    af.env.update({"MVSINK_TASK_RETRIES": "2", "MVSINK_TASK_RETRY_DELAY_SECONDS": "1"})
    write_at(str(data / "orders"), make_orders(random.Random(3), 0, 20), BASE)
    write_view(
        af.views,
        "nosource",
        query=PROJECT,
        sources={"orders": "no_such_table"},
        target="views/nosource",
        as_of=BASE,
        schedule="manual",
    )
    write_view(
        af.views,
        "badsql",
        query="SELECT o.no_such_column FROM orders o",
        sources={"orders": "orders"},
        target="views/badsql",
        as_of=BASE,
        schedule="manual",
    )
    af.migrate()
    return af


def _run(af: AirflowHome, runs: list[tuple[str, str, dict[str, object], int]]) -> tuple[dict, str]:
    proc = af.python(RUN.format(dags=str(af.dags), runs=runs))
    out = proc.stdout + proc.stderr
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    assert line, out[-5000:]
    return json.loads(line[len("RESULT ") :]), out


def test_bad_input_fails_at_once_without_retries(home):
    conf = {"refresh_time": "2026-01-01T02:00:00Z", "dry_run": False}
    res, out = _run(
        home,
        [
            ("nosource", "mv_nosource", conf, 2),  # mint: the source table does not exist
            ("badparam", "mv_badsql", {"refresh_time": "yesterday", "dry_run": False}, 3),  # mint: a bad run param
            ("badsql", "mv_badsql", conf, 4),  # write (spark-submit): the query does not analyse
        ],
    )
    nosource = res["nosource"]["tis"]
    assert res["nosource"]["run"] == "failed"
    assert nosource["mint"] == ["failed", 1], nosource  # try 1, no retry (was: 3 tries, 2 x 1 s apart)
    assert "source 'orders'" in out and "Fix:" in out and "AirflowFailException" in out

    badparam = res["badparam"]["tis"]
    assert badparam["mint"] == ["failed", 1], badparam
    assert "run param refresh_time='yesterday'" in out

    badsql = res["badsql"]["tis"]
    assert res["badsql"]["run"] == "failed"
    assert badsql["mint"][0] == "success"
    assert badsql["write"] == ["failed", 1], badsql  # the job exited 2 and recorded QueryError: no retry
    assert badsql["append"][0] == "upstream_failed"
    assert "does not analyse" in out


def test_runtime_failure_is_still_retried(home, tmp_path):
    """An injected runtime fault in append (once) fails try 1; Airflow's retry then appends."""
    write_view(
        home.views,
        "good",
        query=PROJECT,
        sources={"orders": "orders"},
        target="views/good",
        as_of=BASE,
        schedule="manual",
    )
    home.env.update({"MVSINK_FAIL_POINTS": "append:before_validate@good:raise:once", "MVSINK_SYNC_DIR": str(tmp_path)})
    try:
        res, out = _run(home, [("good", "mv_good", {"refresh_time": str(BASE + HOUR), "dry_run": False}, 6)])
    finally:
        home.env.pop("MVSINK_FAIL_POINTS")
        home.env.pop("MVSINK_SYNC_DIR")
    tis = res["good"]["tis"]
    assert res["good"]["run"] == "success", (tis, out[-3000:])
    assert tis["append"] == ["success", 2], tis  # InjectedFault (a runtime error) was retried
    assert tis["mint"] == ["success", 1] and tis["write"] == ["success", 1]
    assert "InjectedFault" in out
