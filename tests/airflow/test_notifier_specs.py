"""``notify:`` made into Airflow notifiers and DAG callbacks (no servers): the notifier classes and their arguments
checked when the DAG is built, a view's callbacks by event, and the file notifier's line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mvsink.definitions.view import Notify
from mvsink.exceptions import ViewDefinitionError
from tests.support.viewfiles import doc, parse

pytestmark = pytest.mark.airflow

FILE_NOTIFIER = "mvsink.airflow.notifications.FileNotifier"


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        (Notify("no_such_module.Notifier"), "cannot be imported"),
        (Notify("mvsink.airflow.notifications.NoSuch"), "cannot be imported"),
        (Notify("mvsink.airflow.notifications.ViewCallback"), "is not an Airflow notifier"),
        (Notify(FILE_NOTIFIER, {"nope": 1}), "its args do not fit"),
    ],
)
def test_a_bad_notifier_is_the_view_files_error(spec: Notify, fragment: str) -> None:
    from mvsink.airflow.notifications import notifier_for

    with pytest.raises(ViewDefinitionError, match=fragment) as ei:
        notifier_for(parse(doc()), spec)
    assert "field 'notify'" in str(ei.value) and "Fix:" in str(ei.value)


def test_callbacks_by_event_and_the_file_notifiers_line(tmp_path: Path) -> None:
    from mvsink.airflow.notifications import ViewCallback, dag_callbacks

    out = tmp_path / "n.jsonl"
    view = parse(doc(notify=f"[{{notifier: {FILE_NOTIFIER}, args: {{path: '{out}'}}, events: [failure]}}]"))
    cbs = dag_callbacks(view)
    assert set(cbs) == {"on_failure_callback"}
    cb = cbs["on_failure_callback"]
    assert isinstance(cb, ViewCallback) and cb.event == "failure"

    from airflow.sdk import DAG

    class Run:
        run_id = "r1"

    cb({"dag_run": Run(), "dag": DAG("mv_v", schedule=None), "reason": "task_failure"})
    assert [json.loads(x) for x in out.read_text().splitlines()] == [
        {
            "event": "failure",
            "view": "v",
            "dag_id": "mv_v",
            "run_id": "r1",
            "message": "view v: run r1 failed (task_failure); see its failed task's log",
        }
    ]
    assert dag_callbacks(parse(doc())) == {}


def test_the_stale_callback_tells_only_when_the_view_is_past_max_lag(tmp_path: Path, monkeypatch) -> None:
    """A view with nothing final yet is stale once as_of + max_lag has passed; without max_lag never."""
    from airflow.sdk import DAG

    from mvsink.airflow.notifications import dag_callbacks

    monkeypatch.setenv("MVSINK_DATA_ROOT", str(tmp_path))
    out = tmp_path / "n.jsonl"
    spec = f"[{{notifier: {FILE_NOTIFIER}, args: {{path: '{out}'}}, events: [stale]}}]"

    class Run:
        run_id = "r2"

    context = {"dag_run": Run(), "dag": DAG("mv_v", schedule=None)}
    for lag in ("36500d", None):  # as_of 1970 + 100 years: not yet; no max_lag: never
        dag_callbacks(parse(doc(notify=spec, max_lag=lag), root=tmp_path))["on_success_callback"](context)
    assert not out.exists()
    dag_callbacks(parse(doc(notify=spec, max_lag="1h"), root=tmp_path))["on_success_callback"](context)
    (line,) = [json.loads(x) for x in out.read_text().splitlines()]
    assert (line["event"], line["run_id"]) == ("stale", "r2")
    assert line["message"] == "view v is stale after run r2: nothing final yet, past its max_lag 1h 00m"
