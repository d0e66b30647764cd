"""Issue 23 item 2 (first part) through a real scheduler and api-server on 127.0.0.1: a view's run fails (its
source table does not exist); the "Materialized views" page and the view's tab show the failed run, the
failed task with a link to its log and the first lines of its error, read from Airflow's log."""

from __future__ import annotations

import pytest

from tests.support.airflow import dags_folder, running_airflow, trigger_run, wait_run
from tests.support.data import PROJECT
from tests.support.delta import BASE
from tests.support.viewfiles import write_view

pytestmark = [pytest.mark.airflow, pytest.mark.slow]


def page(af, path: str) -> str:
    status, body = af.api("GET", path, token=af.token())
    assert status == 200, (path, status, str(body)[:500])
    return str(body)


def test_the_page_shows_a_failed_run_its_task_log_link_and_error(tmp_path):
    data, dags = dags_folder(tmp_path)
    write_view(
        dags / "views",
        "nosource",
        query=PROJECT,
        sources={"orders": "no_such_table"},
        target="views/nosource",
        as_of=BASE,
    )
    with running_airflow(tmp_path, dags, data, wanted={"mv_nosource"}, timeout=180) as af:
        run_id = trigger_run(af, "mv_nosource", {"refresh_time": "2026-01-01T02:00:00Z"})
        assert wait_run(af, "mv_nosource", run_id)["state"] == "failed"
        from urllib.parse import quote

        link = f"/dags/mv_nosource/runs/{quote(run_id, safe='')}/tasks/mint?try_number=1"
        for html in (page(af, "/mvsink/"), page(af, "/mvsink/dags/mv_nosource")):
            assert f'data-run="{run_id}" data-state="failed"' in html
            assert 'data-failed-task="mint"' in html and f'href="{link}"' in html
            start = html.index('<pre class="error" data-error>')
            error = html[start : html.index("</pre>", start)]
            assert "AirflowFailException" in error and "no_such_table" in error, error
