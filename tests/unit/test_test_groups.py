"""The groups ``make test``'s two pytest processes take (tests/conftest.py): the Airflow tests and the object-storage
tests each one group, every other file a group of its own; the scheduler groups by them in collection order."""

from __future__ import annotations

import types

import pytest

from tests.conftest import group_of, pytest_xdist_make_scheduler

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("nodeid", "group"),
    [
        ("tests/airflow/test_task_faults.py::test_lost_reply_after_commit_retry_recognises_its_batch", "airflow"),
        ("tests/airflow/test_dagbag.py::test_x[a::b]", "airflow"),
        ("tests/storage/test_object_storage.py::test_y[seaweedfs]", "storage"),
        ("tests/spark/test_real_lakes.py::test_timestamp_ntz_column", "tests/spark/test_real_lakes.py"),
        ("tests/unit/test_errors.py::test_hierarchy", "tests/unit/test_errors.py"),
        ("tests/e2e/test_soak.py::TestSoak::test_z", "tests/e2e/test_soak.py"),
    ],
)
def test_each_test_has_its_group(nodeid, group):
    assert group_of(nodeid) == group


def _config(dist: str) -> types.SimpleNamespace:
    values = {"dist": dist, "tx": ["2*popen"], "loadscopereorder": False, "numprocesses": 2, "maxworkerrestart": None}
    return types.SimpleNamespace(getvalue=values.get, option=types.SimpleNamespace(**values))


def test_loadgroup_schedules_by_these_groups_and_other_modes_are_xdists():
    sched = pytest_xdist_make_scheduler(_config("loadgroup"), log=None)
    assert sched is not None
    assert sched._split_scope("tests/airflow/test_dagbag.py::test_x") == "airflow"
    assert sched._split_scope("tests/spark/test_as_of.py::test_y") == "tests/spark/test_as_of.py"
    assert pytest_xdist_make_scheduler(_config("load"), log=None) is None
