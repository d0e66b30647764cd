"""Issue 39 items 6 and 7 through a real scheduler, DAG processor and api-server on 127.0.0.1: a broken view file is
one import error of its own and no line in another view's task log; a failed run and a run that leaves its view past
``max_lag`` each notify the view's notifiers once (``notify:``, a notifier that writes to a file)."""

from __future__ import annotations

import json
import random
import time

import pytest

from tests.support.airflow import _get, dags_folder, running_airflow, task_log, trigger_run, wait_for, wait_run
from tests.support.data import PROJECT, make_orders
from tests.support.delta import BASE, write_at
from tests.support.viewfiles import write_view

pytestmark = [pytest.mark.airflow, pytest.mark.slow]

BROKEN = "zz_broken_view"


NOTIFIER = "mvsink.airflow.notifications.FileNotifier"


@pytest.fixture(scope="module")
def installation(tmp_path_factory):
    """A running installation and its notices file: views ``good`` (max_lag 1h), ``fresh`` (max_lag 100 years) and
    ``failing`` (its source table does not exist), each notifying the file, and a broken view file. Their runs
    need no Spark (a refresh time before as_of: mint finds nothing to do; ``failing``'s mint fails)."""
    root = tmp_path_factory.mktemp("alerts")
    data, dags = dags_folder(root)
    views = dags / "views"
    notices = root / "notices.jsonl"
    notify = [{"notifier": NOTIFIER, "args": {"path": str(notices)}}]
    write_at(str(data / "orders"), make_orders(random.Random(5), 0, 10), BASE)
    for name, lag, source in (("good", "1h", "orders"), ("fresh", "36500d", "orders"), ("failing", "1h", "nowhere")):
        write_view(
            views,
            name,
            query=PROJECT,
            sources={"orders": source},
            target=f"views/{name}",
            as_of=BASE,
            max_lag=lag,
            notify=notify,
        )
    (views / f"{BROKEN}.yaml").write_text(f"name: {BROKEN}\nquery: [unclosed\n")
    wanted = {"mv_good", "mv_fresh", "mv_failing"}
    with running_airflow(root, dags, data, wanted=wanted, timeout=180) as af:
        yield af, notices


def test_a_broken_view_file_is_its_own_import_error_and_not_in_other_task_logs(installation):
    af, _ = installation
    errors = wait_for(
        "the broken view file's import error",
        lambda: [e for e in _get(af, "/api/v2/importErrors")["import_errors"] if BROKEN in e["filename"]],
        timeout=60,
    )
    assert len(errors) == 1 and errors[0]["filename"].endswith(f"views/{BROKEN}.yaml"), errors
    assert "not valid YAML" in errors[0]["stack_trace"] and "Fix:" in errors[0]["stack_trace"]
    # a run of the good view before its as_of: mint only (nothing to do), no Spark
    run_id = trigger_run(af, "mv_good", {"refresh_time": "2025-12-31T00:00:00Z"})
    assert wait_run(af, "mv_good", run_id)["state"] == "success"
    text = json.dumps(task_log(af, "mv_good", run_id, "mint"))
    assert "before as_of" in text or "up to date" in text or "skipping write and append" in text, text[-2000:]
    assert BROKEN not in text and "not valid YAML" not in text, text[-3000:]


def _notices(path) -> list[dict[str, str]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_a_failed_run_and_a_stale_view_notify_once_each(installation):
    af, notices = installation
    runs = {}
    for dag_id in ("mv_fresh", "mv_good"):  # before as_of: nothing to do, the view stays as it was
        runs[dag_id] = trigger_run(af, dag_id, {"refresh_time": "2025-12-31T00:00:00Z"})
    runs["mv_failing"] = trigger_run(af, "mv_failing", {"refresh_time": "2026-01-01T02:00:00Z"})  # no source table
    states = {d: wait_run(af, d, r)["state"] for d, r in runs.items()}
    assert states == {"mv_fresh": "success", "mv_good": "success", "mv_failing": "failed"}
    # the DAG processor runs the DAG callbacks: wait for both notices, then a little longer for any extra one (the
    # first test's run of `good` notifies too: only this test's runs are counted)

    def ours() -> list[dict[str, str]]:
        return [n for n in _notices(notices) if n["run_id"] in runs.values()]

    wait_for("two notices", lambda: len(ours()) >= 2, timeout=120)
    time.sleep(10)
    got = sorted(ours(), key=lambda n: n["event"])
    assert [(n["event"], n["view"], n["dag_id"], n["run_id"]) for n in got] == [
        ("failure", "failing", "mv_failing", runs["mv_failing"]),
        ("stale", "good", "mv_good", runs["mv_good"]),
    ], got
    assert got[0]["message"].startswith(f"view failing: run {runs['mv_failing']} failed")
    assert "view good is stale after run" in got[1]["message"] and "past its max_lag 1h" in got[1]["message"]
