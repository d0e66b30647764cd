"""The DAG tasks' retries and retry delay, from the environment."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.unit


def test_dag_task_retries_from_the_environment(monkeypatch):
    import datetime as dt

    from mvsink.airflow.dag_factory import task_retries

    monkeypatch.delenv("MVSINK_TASK_RETRIES", raising=False)
    monkeypatch.delenv("MVSINK_TASK_RETRY_DELAY_SECONDS", raising=False)
    assert task_retries() == {"retries": 2, "retry_delay": dt.timedelta(seconds=10)}
    monkeypatch.setenv("MVSINK_TASK_RETRIES", "5")
    monkeypatch.setenv("MVSINK_TASK_RETRY_DELAY_SECONDS", "0.5")
    assert task_retries() == {"retries": 5, "retry_delay": dt.timedelta(seconds=0.5)}
    monkeypatch.setenv("MVSINK_TASK_RETRIES", "-1")
    with pytest.raises(ValueError, match="MVSINK_TASK_RETRIES='-1' is not a whole number >= 0.*Fix:"):
        task_retries()
