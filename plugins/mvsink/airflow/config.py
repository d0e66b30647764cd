"""Airflow-side settings and failure handling of the DAGs' tasks.

Settings: the Airflow-only settings of :mod:`mvsink.settings` (task retries and their delay,
the reschedule limit, the Spark connection id) may also be set in Airflow's configuration,
section ``[mvsink]``::

    [mvsink]
    task_retries = 2
    task_retry_delay_seconds = 10
    max_reschedules = 3
    spark_conn_id = spark_default

or as ``AIRFLOW__MVSINK__TASK_RETRIES`` and so on. Precedence, highest first: the
``MVSINK_*`` environment variable, the ``[mvsink]`` option, the default.

Failures: bad input (:class:`~mvsink.exceptions.MvSinkError`: a missing source table, a
broken view file, a bad run param or setting) fails a task at once, without its retries,
as Airflow's ``AirflowFailException``; runtime failures are retried.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from mvsink import settings
from mvsink.exceptions import MvSinkError


def airflow_option(key: str) -> str | None:
    """An option of Airflow's ``[mvsink]`` configuration section, or None."""
    from airflow.configuration import conf

    value: Any = conf.get("mvsink", key, fallback=None)
    return None if value is None else str(value)


def task_retries() -> int:
    return settings.task_retries(fallback=airflow_option)


def task_retry_delay_seconds() -> float:
    return settings.task_retry_delay_seconds(fallback=airflow_option)


def max_reschedules() -> int:
    return settings.max_reschedules(fallback=airflow_option)


def spark_conn_id() -> str:
    return settings.spark_conn_id(fallback=airflow_option)


def fail_exception() -> type[Exception]:
    """Airflow's exception that fails a task without retrying it."""
    from airflow.sdk.exceptions import AirflowFailException

    return AirflowFailException


@contextlib.contextmanager
def no_retry_on_bad_input() -> Iterator[None]:
    """Turn bad input (:class:`MvSinkError`) into a task failure without retries (same message)."""
    try:
        yield
    except MvSinkError as exc:
        raise fail_exception()(str(exc)) from exc
