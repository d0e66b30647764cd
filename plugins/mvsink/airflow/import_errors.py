"""Making one broken view file an Airflow import error of its own (pinned to Airflow 3.3 internals).

Airflow keys import errors by Python file and fails a whole DAG file on an exception. A factory
that builds many DAGs from many view files wants one import error per broken *view* file while
the other DAGs keep loading. Airflow 3.3 has no public API for that, so
:func:`report_broken_view_file` finds the ``DagImportResult`` of the DAG processor that is
parsing the DAG file on the call stack and appends a ``DagImportError`` under the view file's
path. Outside a DAG processor (a plain import, ``dag.test()``) it falls back to a warning.

A task's process parses the DAG file again to find its task (Airflow 3.3's task runner, ``parse``, through a
``BundleDagBag``): :func:`parsing_for_a_task` tells the factory so, and it then reports nothing. The broken file's
error is the DAG processor's import error, once, not an ERROR line in every other view's task log.
``AIRFLOW_VERSION`` names the version this was written against; a test pins it.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

AIRFLOW_VERSION = "3.3.2"  # the DagImportResult / DagImportError shapes this relies on


TASK_RUNNER_MODULE = "airflow.sdk.execution_time.task_runner"  # its ``parse`` loads the DAG file for a task


def parsing_for_a_task() -> bool:
    """True while Airflow's task runner parses the DAG file to find the task it runs (not the DAG processor)."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_globals.get("__name__") == TASK_RUNNER_MODULE and frame.f_code.co_name == "parse":
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


def report_broken_view_file(path: Path, error: Exception) -> None:
    """Make one broken view file an Airflow import error of its own, keeping the other DAGs.

    Airflow keys import errors by file and fails a whole DAG file on an exception, so the
    factory records the error with the importer that is parsing the DAG file (Airflow 3.3's
    ``DagImportResult``), under the view file's own path. Outside a DAG processor (a plain
    import) it falls back to a warning.
    """
    try:
        frame = sys._getframe(1)
        while frame is not None:
            result: Any = frame.f_locals.get("result")
            if type(result).__name__ == "DagImportResult" and hasattr(result, "errors"):
                from airflow.dag_processing.importers.base import DagImportError

                py_rel = Path(result.file_path)
                dag_file = Path(frame.f_locals.get("filepath") or "")
                n = len(py_rel.parts)
                rel = str(path)
                if not py_rel.is_absolute() and dag_file.is_absolute() and 0 < n <= len(dag_file.parents):
                    rel = os.path.relpath(path, dag_file.parents[n - 1])
                result.errors.append(
                    DagImportError(
                        file_path=rel,
                        message=str(error),
                        error_type="import",
                        stacktrace=f"{type(error).__name__}: {error}",
                    )
                )
                return
            frame = frame.f_back  # type: ignore[assignment]
    except Exception:  # reporting must never take the other DAGs down
        log.exception("mvsink: could not register the import error of %s", path)
    warnings.warn(f"mvsink: {error}", UserWarning, stacklevel=2)
