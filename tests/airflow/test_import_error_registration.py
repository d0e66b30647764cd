"""The broken-view-file registration relies on Airflow internals: pin them to the version it was written for.

``mvsink.airflow.import_errors`` finds the DAG processor's ``DagImportResult`` on the call stack (a
local named ``result`` beside ``filepath`` in the Python importer) and appends a ``DagImportError``.
These tests fail, naming what to re-check, as soon as an Airflow upgrade changes any of it; the
end-to-end behaviour (one import error per broken view file, the other DAGs loaded) is tested
with a real DagBag in the Airflow DAG tests.
"""

from __future__ import annotations

import dataclasses
import inspect
import warnings
from pathlib import Path

import pytest

pytestmark = pytest.mark.airflow


def test_airflow_is_the_version_the_registration_was_written_for() -> None:
    import airflow

    from mvsink.airflow.import_errors import AIRFLOW_VERSION

    assert airflow.__version__ == AIRFLOW_VERSION, (
        f"Airflow is {airflow.__version__}, mvsink.airflow.import_errors was written against {AIRFLOW_VERSION}: "
        "re-check DagImportResult/DagImportError and the Python importer's locals, then update AIRFLOW_VERSION"
    )


def test_the_importer_shapes_it_relies_on_are_there() -> None:
    from airflow.dag_processing.importers.base import DagImportError, DagImportResult
    from airflow.dag_processing.importers.python_importer import PythonDagImporter

    assert {"file_path", "message", "error_type", "stacktrace"} <= {f.name for f in dataclasses.fields(DagImportError)}
    assert {"file_path", "errors"} <= {f.name for f in dataclasses.fields(DagImportResult)}
    params = inspect.signature(PythonDagImporter._load_modules_from_file).parameters
    assert "filepath" in params and "result" in params


def test_it_appends_to_the_result_found_on_the_stack(tmp_path: Path) -> None:
    from airflow.dag_processing.importers.base import DagImportResult

    from mvsink.airflow.import_errors import report_broken_view_file

    view_file = tmp_path / "dags" / "views" / "broken.yaml"

    def _load_modules_from_file(filepath: str, result: DagImportResult) -> None:  # the importer's frame
        report_broken_view_file(view_file, ValueError("view file broken.yaml: field 'query': missing"))

    result = DagImportResult(file_path="mvsink_views.py")
    _load_modules_from_file(str(tmp_path / "dags" / "mvsink_views.py"), result)
    assert [(e.file_path, e.message) for e in result.errors] == [
        ("views/broken.yaml", "view file broken.yaml: field 'query': missing")
    ]


def test_outside_a_dag_processor_it_warns() -> None:
    from mvsink.airflow.import_errors import report_broken_view_file

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report_broken_view_file(Path("/x/broken.yaml"), ValueError("bad view"))
    assert [str(w.message) for w in caught] == ["mvsink: bad view"]


def test_the_task_runner_parses_the_dag_file_in_parse() -> None:
    """A task's process loads the DAG file in ``task_runner.parse`` (a ``BundleDagBag``): the frame
    ``parsing_for_a_task`` looks for."""
    from airflow.sdk.execution_time import task_runner

    from mvsink.airflow.import_errors import TASK_RUNNER_MODULE

    assert task_runner.__name__ == TASK_RUNNER_MODULE
    assert "BundleDagBag(" in inspect.getsource(task_runner.parse)


def test_parsing_for_a_task_is_true_only_under_the_task_runners_parse() -> None:
    from mvsink.airflow.import_errors import TASK_RUNNER_MODULE, parsing_for_a_task

    def probe() -> bool:
        return parsing_for_a_task()

    assert probe() is False
    scope: dict[str, object] = {"__name__": TASK_RUNNER_MODULE, "probe": probe}
    exec("def parse():\n    return probe()\n\ndef startup():\n    return probe()\n", scope)
    assert scope["parse"]() is True  # type: ignore[operator]
    assert scope["startup"]() is False  # type: ignore[operator]
