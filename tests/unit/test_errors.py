"""Errors: bad input vs runtime failures, the CLI's one-line errors, and excepts that must not fail open."""

from __future__ import annotations

import json
import logging
import types
from pathlib import Path

import pytest

from mvsink import exceptions as errors
from mvsink.cli.app import main

pytestmark = pytest.mark.unit

VIEW = """name: proj
query: SELECT id FROM orders
sources: {orders: orders}
target: out/proj
as_of: 2026-01-01T00:00:00Z
schedule: manual
"""


@pytest.fixture
def views(tmp_path, monkeypatch):
    d = tmp_path / "views"
    d.mkdir()
    (d / "proj.yaml").write_text(VIEW)
    monkeypatch.setenv("MVSINK_DATA_ROOT", str(tmp_path))
    for name in ("MVSINK_SPARK_REMOTE", "MVSINK_FAIL_POINTS", "MVSINK_STAGING_GRACE_SECONDS"):
        monkeypatch.delenv(name, raising=False)
    return d


def _err_lines(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.strip()]


def test_hierarchy():
    for bad_input in (
        errors.ViewDefinitionError,
        errors.SourceError,
        errors.QueryError,
        errors.StagingError,
        errors.SettingsError,
        errors.UnsafePathError,
        errors.ViewErrorsError,
    ):
        assert issubclass(bad_input, errors.MvSinkError) and issubclass(bad_input, ValueError)
        assert not issubclass(bad_input, RuntimeError)
    for runtime in (errors.SparkJobError, errors.CommitRaceError, errors.StoreError, errors.InjectedFault):
        assert issubclass(runtime, errors.MvSinkRuntimeError) and issubclass(runtime, RuntimeError)
        assert not issubclass(runtime, errors.MvSinkError)
    e = errors.SparkJobError("boom", exit_code=97, output="tail")
    assert str(e) == "boom" and e.exit_code == 97 and e.output == "tail"


# ---------------------------------------------------------------- the CLI


def test_cli_bad_input_is_one_line_and_exit_2(views, capsys):
    assert main(["read", "nope", "--views-dir", str(views)]) == 2
    lines = _err_lines(capsys)
    assert len(lines) == 1 and lines[0].startswith("mvsink: error: view 'nope' is not defined"), lines
    assert "Fix:" in lines[0]


def test_cli_bad_setting_is_one_line_and_exit_2(views, capsys, monkeypatch):
    monkeypatch.setenv("MVSINK_SPARK_REMOTE", "localhost:15002")
    assert main(["refresh", "proj", "--at", "2026-01-01T01:00:00Z", "--views-dir", str(views)]) == 2
    lines = _err_lines(capsys)
    assert len(lines) == 1 and lines[0].startswith("mvsink: error: MVSINK_SPARK_REMOTE='localhost:15002' is not"), lines
    assert "Fix:" in lines[0]


@pytest.mark.parametrize(
    "exc",
    [
        errors.SparkJobError(
            "view proj: the Spark write step failed (exit 97): boom. Fix: see the job's output",
            exit_code=97,
            output="line 1\nline 2",
        ),
        errors.CommitRaceError("view proj: append lost 20 commit races in a row\nto unrelated commits. Fix: re-run"),
    ],
)
def test_cli_runtime_error_is_one_line_and_exit_1(views, capsys, monkeypatch, exc):
    def refresh(*args, **kwargs):
        raise exc

    monkeypatch.setattr("mvsink.write.runners.refresh", refresh)
    assert main(["refresh", "proj", "--at", "2026-01-01T01:00:00Z", "--views-dir", str(views)]) == 1
    lines = _err_lines(capsys)
    assert len(lines) == 1 and lines[0] == "mvsink: error: " + " ".join(str(exc).split()), lines
    assert "Traceback" not in lines[0]


def test_cli_verbose_keeps_the_traceback_and_the_jobs_output(views, capsys, monkeypatch):
    def refresh(*args, **kwargs):
        raise errors.SparkJobError(
            "view proj: the Spark write step failed (exit 1): x", exit_code=1, output="java.lang.OutOfMemoryError"
        )

    monkeypatch.setattr("mvsink.write.runners.refresh", refresh)
    assert main(["-v", "refresh", "proj", "--at", "2026-01-01T01:00:00Z", "--views-dir", str(views)]) == 1
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "java.lang.OutOfMemoryError" in err
    assert err.rstrip().splitlines()[-1] == "mvsink: error: view proj: the Spark write step failed (exit 1): x"


def test_cli_unexpected_error_is_one_line_and_exit_1(views, capsys, monkeypatch):
    def status(view):
        raise KeyError("upper")

    monkeypatch.setattr("mvsink.readers.status.view_status", status)
    assert main(["status", "proj", "--views-dir", str(views)]) == 1
    lines = _err_lines(capsys)
    assert len(lines) == 1 and lines[0].startswith("mvsink: error: KeyError: 'upper' (unexpected"), lines


def test_cli_bad_grace_setting_for_gc(views, capsys, monkeypatch, tmp_path):
    import pyarrow as pa
    from deltalake import write_deltalake

    write_deltalake(str(tmp_path / "out" / "proj"), pa.table({"id": [1]}))
    monkeypatch.setenv("MVSINK_STAGING_GRACE_SECONDS", "an hour")
    assert main(["gc", "proj", "--views-dir", str(views)]) == 2
    lines = _err_lines(capsys)
    assert len(lines) == 1 and "MVSINK_STAGING_GRACE_SECONDS='an hour'" in lines[0] and "Fix:" in lines[0]


# ---------------------------------------------------------------- what the write job reports


def test_job_error_lines_become_bad_input_only():
    from mvsink.write.runners import job_error

    out = "noise\nMVSINK_ERROR " + json.dumps({"type": "SourceError", "message": "view v: gone. Fix: x"}) + "\n"
    err = job_error(out)
    assert type(err) is errors.SourceError and str(err) == "view v: gone. Fix: x"
    for other in ("InjectedFault", "Exception", "annotations", "SparkJobError"):
        got = job_error("MVSINK_ERROR " + json.dumps({"type": other, "message": "m"}))
        assert type(got) is errors.MvSinkError  # never a runtime type, never an arbitrary attribute
    assert job_error("all fine\nMVSINK_REPORT {}") is None


def test_job_main_records_bad_input_beside_its_report(tmp_path, capsys):
    from mvsink.write.job import BAD_INPUT_EXIT, error_path
    from mvsink.write.job import main as job_main

    report = tmp_path / "r.json"
    code = job_main(
        [
            "--view-file",
            str(tmp_path / "missing.yaml"),
            "--description",
            _desc(str(tmp_path)).to_json(),
            "--report",
            str(report),
        ]
    )
    assert code == BAD_INPUT_EXIT == 2
    record = json.loads(error_path(str(report)).read_text())
    assert record["type"] in ("ViewDefinitionError", "MvSinkError") and record["message"]
    assert capsys.readouterr().out.startswith("MVSINK_ERROR ")
    assert not report.exists()


# ---------------------------------------------------------------- excepts that must not fail open


class _ClassicFrame:
    """A classic (JVM) DataFrame whose plan cannot be read: a py4j failure."""

    @property
    def _jdf(self):
        raise RuntimeError("py4j.protocol.Py4JNetworkError: Answer from Java side is empty")


def test_plan_determinism_failure_propagates(monkeypatch):
    from mvsink.spark import connectplan
    from mvsink.spark.declaredchecks import plan_deterministic
    from mvsink.spark.session import is_connect

    with pytest.raises(RuntimeError, match="Py4JNetworkError"):
        plan_deterministic(_ClassicFrame())  # type: ignore[arg-type]
    connect = type("DataFrame", (), {"__module__": "pyspark.sql.connect.dataframe"})()
    assert is_connect(connect)
    # over Connect: Spark's verdict from mvsink's server plugin; None (not "deterministic") from a server without it
    monkeypatch.setattr(connectplan, "analyzed_plan", lambda df: ("[]", False))
    assert plan_deterministic(connect) is False
    monkeypatch.setattr(connectplan, "analyzed_plan", lambda df: None)
    assert plan_deterministic(connect) is None

    class Frame:
        class _jdf:  # noqa: N801 - mimics py4j's object chain
            @staticmethod
            def queryExecution():  # noqa: N802
                return types.SimpleNamespace(analyzed=lambda: types.SimpleNamespace(deterministic=lambda: False))

    assert plan_deterministic(Frame()) is False  # type: ignore[arg-type]


def _desc(target: str):
    from mvsink.core.batch import BatchDescription

    return BatchDescription(
        view="proj",
        target=target,
        lower=1,
        upper=2,
        refresh_time=1,
        table_version=0,
        sources=(),
        run_id="r",
        batch_id="b",
        definition="d",
    )


def _delta_without_error_column(raise_exc: Exception):
    def add_columns(*args, **kwargs):
        raise raise_exc

    return types.SimpleNamespace(
        alter=types.SimpleNamespace(add_columns=add_columns),
        schema=lambda: types.SimpleNamespace(fields=[types.SimpleNamespace(name="id")]),
    )


def test_add_error_column_reports_the_real_failure(monkeypatch, tmp_path):
    from deltalake.exceptions import CommitFailedError, DeltaError

    from mvsink.core import table as table_mod
    from mvsink.core.commitinfo import CommitInfo

    info = CommitInfo.for_batch(_desc(str(tmp_path)), "evolve")

    def table(exc: Exception) -> table_mod.ViewTable:
        return table_mod.ViewTable(str(tmp_path), "proj", _delta_without_error_column(exc))  # type: ignore[arg-type]

    monkeypatch.setattr(table_mod, "open_delta", lambda path: _delta_without_error_column(DeltaError("x")))
    with pytest.raises(errors.StoreError) as ei:
        table(DeltaError("Generic LocalFileSystem error: Permission denied")).add_error_column(info)
    assert "Permission denied" in str(ei.value) and "DeltaError" in str(ei.value) and "Fix:" in str(ei.value)
    assert isinstance(ei.value.__cause__, DeltaError)
    # a lost race is not an error: the caller re-validates
    assert table(CommitFailedError("Concurrent transaction failed.")).add_error_column(info) is False
    # another writer added the column first: not an error either
    with_col = types.SimpleNamespace(
        schema=lambda: types.SimpleNamespace(fields=[types.SimpleNamespace(name="_mv_error")])
    )
    monkeypatch.setattr(table_mod, "open_delta", lambda path: with_col)
    assert table(DeltaError("exists")).add_error_column(info) is False


def test_open_delta_keeps_the_cause(tmp_path):
    from mvsink.core.table import open_delta

    log = tmp_path / "t" / "_delta_log"
    log.mkdir(parents=True)
    (log / "00000000000000000000.json").write_text("{not json")
    with pytest.raises(errors.SourceError) as ei:
        open_delta(str(tmp_path / "t"))
    assert "cannot be opened" in str(ei.value) and "Fix:" in str(ei.value)
    assert ei.value.__cause__ is not None and type(ei.value.__cause__).__name__ in str(ei.value)


def test_compaction_after_append_never_fails_it_but_logs_the_type(monkeypatch, caplog):
    from mvsink.airflow.tasks import compact_if_due

    def compact(*args, **kwargs):
        raise OSError("No space left on device")

    monkeypatch.setattr("mvsink.maintenance.compaction.compact", compact)
    with caplog.at_level(logging.WARNING):
        assert compact_if_due(types.SimpleNamespace(name="proj"), catalog=None) is None  # type: ignore[arg-type]
    assert "OSError: No space left on device" in caplog.text


# ---------------------------------------------------------------- Airflow: bad input is not retried


def test_bad_input_fails_an_airflow_task_without_retry(tmp_path):
    pytest.importorskip("airflow.sdk.exceptions")
    from airflow.sdk.exceptions import AirflowFailException

    from mvsink.airflow.config import no_retry_on_bad_input

    with pytest.raises(AirflowFailException, match="^view v: source gone. Fix: x$") as ei:
        with no_retry_on_bad_input():
            raise errors.SourceError("view v: source gone. Fix: x")
    assert isinstance(ei.value.__cause__, errors.SourceError)
    with pytest.raises(errors.CommitRaceError):  # a runtime failure keeps Airflow's retries
        with no_retry_on_bad_input():
            raise errors.CommitRaceError("lost")


def test_write_operator_reads_the_jobs_bad_input_record(tmp_path):
    pytest.importorskip("airflow.providers.apache.spark")
    from mvsink.airflow.operators import ViewWriteOperator, read_job_error
    from mvsink.write.job import error_path

    report = str(tmp_path / "b.json")
    assert read_job_error(report) is None and read_job_error(None) is None
    error_path(report).write_text(json.dumps({"type": "QueryError", "message": "view v: bad SQL. Fix: y"}))
    assert read_job_error(report) == "view v: bad SQL. Fix: y"
    op = ViewWriteOperator(
        task_id="write",
        view_name="v",
        views_dir=str(tmp_path),
        application="x.py",
        application_args=["--view-file", "v.yaml", "--report", report],
    )
    assert op.report_path() == report
    assert Path(report + ".error").exists()
