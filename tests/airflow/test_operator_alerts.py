"""Issue 39 items 6 and 7 through a real scheduler, DAG processor and api-server on 127.0.0.1: a broken view file is
one import error of its own and no line in another view's task log."""

from __future__ import annotations

import json
import random

import pytest

from tests.support.airflow import _get, dags_folder, running_airflow, task_log, trigger_run, wait_for, wait_run
from tests.support.data import PROJECT, make_orders
from tests.support.delta import BASE, write_at
from tests.support.viewfiles import write_view

pytestmark = [pytest.mark.airflow, pytest.mark.slow]

BROKEN = "zz_broken_view"


@pytest.fixture(scope="module")
def installation(tmp_path_factory):
    """A running installation with a good view (``good``: its runs need no Spark) and a broken view file."""
    root = tmp_path_factory.mktemp("alerts")
    data, dags = dags_folder(root)
    views = dags / "views"
    write_at(str(data / "orders"), make_orders(random.Random(5), 0, 10), BASE)
    write_view(
        views, "good", query=PROJECT, sources={"orders": "orders"}, target="views/good", as_of=BASE, max_lag="1h"
    )
    (views / f"{BROKEN}.yaml").write_text(f"name: {BROKEN}\nquery: [unclosed\n")
    with running_airflow(root, dags, data, wanted={"mv_good"}, timeout=180) as af:
        yield af


def test_a_broken_view_file_is_its_own_import_error_and_not_in_other_task_logs(installation):
    af = installation
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
