"""Issue 23 item 4: the write step's log line names the number of Spark jobs it ran when Spark can say (a classic
session), and says nothing of them through Spark Connect, whose client cannot see the server's jobs (no "?",
no guess)."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from mvsink.core.batch import WriteReport
from mvsink.write import job

pytestmark = pytest.mark.unit


def _report(**kw) -> WriteReport:
    return WriteReport(
        view="v", batch_id="b", lower=0, upper=1, status="empty", read_version=0, table_upper=0, schema="", **kw
    )


class ClassicSpark:
    """What run_write asks of a classic session: its job group (none) and its jobs (ids grow by three during the
    step)."""

    def __init__(self):
        self.calls = 0

    @property
    def sparkContext(self):  # noqa: N802 (pyspark's name)
        outer = self

        class Tracker:
            def getJobIdsForGroup(self, jobGroup=None):  # noqa: N802, N803 (pyspark's names)
                assert jobGroup is None
                outer.calls += 1
                return [0, 1] if outer.calls == 1 else [0, 1, 2, 3, 4]

        class Context:
            def statusTracker(self):  # noqa: N802
                return Tracker()

            def getLocalProperty(self, key):  # noqa: N802
                return None

        return Context()


class ConnectSpark:
    """A Spark Connect session: no SparkContext."""

    @property
    def sparkContext(self):  # noqa: N802
        raise RuntimeError("[JVM_ATTRIBUTE_NOT_SUPPORTED] sparkContext is not supported in Spark Connect")


@pytest.fixture
def step(monkeypatch, tmp_path):
    monkeypatch.setattr("mvsink.spark.jars.require_delta", lambda spark, role: None)
    monkeypatch.setattr(job, "_run_write", lambda spark, view, desc: _report(seconds=1.5, phases={"plan": 0.5}))

    class View:
        name = "v"

    desc = SimpleNamespace(target=str(tmp_path / "t"), batch_id="b")  # (where its input rows would be: none)
    return lambda spark: job.run_write(spark, View(), desc)  # type: ignore[arg-type]


def test_a_classic_session_logs_its_job_count(step, caplog):
    caplog.set_level(logging.INFO, logger="mvsink.write.job")
    report = step(ClassicSpark())
    assert report.spark_jobs == 3
    (line,) = [r.getMessage() for r in caplog.records if "write step" in r.getMessage()]
    assert line == "view v: write step 1.50s (plan 0.50s), 3 Spark jobs", line


def test_spark_connect_logs_no_job_count(step, caplog):
    caplog.set_level(logging.INFO, logger="mvsink.write.job")
    report = step(ConnectSpark())
    assert report.spark_jobs == -1  # unknown, in the report as before
    (line,) = [r.getMessage() for r in caplog.records if "write step" in r.getMessage()]
    assert line == "view v: write step 1.50s (plan 0.50s)", line
    assert "?" not in line and "job" not in line.lower()
