"""The Spark job of a CLI refresh dies after staging its batch; the next refresh recovers (spark-submit)."""

from __future__ import annotations

import json

import pytest

from mvsink.definitions.catalog import Catalog
from mvsink.readers.arrow import read_view
from tests.support.cli import run_cli_process
from tests.support.data import PROJECT
from tests.support.delta import BASE, HOUR, staged_leftovers
from tests.support.oracle import multiset, oracle

pytestmark = pytest.mark.slow


def test_crash_of_spark_job_after_staging_then_recovery(proj):
    data, views, orders = proj
    r = BASE + HOUR
    crashed = run_cli_process(
        views,
        "refresh",
        "proj",
        "--at",
        str(r),
        env_extra={"MVSINK_FAIL_POINTS": "write:after_staging:exit"},
        check=False,
    )
    assert crashed.returncode != 0 and "Spark write step failed" in crashed.stderr
    target = str(data / "views" / "proj")
    assert staged_leftovers(target)  # the killed job left its batch behind
    out = run_cli_process(views, "refresh", "proj", "--at", str(r), "--json").stdout
    assert json.loads(out)["status"] == "appended"
    assert staged_leftovers(target) == []
    assert multiset(read_view(Catalog(views).get("proj"))) == oracle(PROJECT, {"orders": orders}, r)
