"""Every ``MVSINK_*`` environment variable, read and validated here and only here.

Nothing is read when this module is imported: each setting has an accessor that reads the
environment when it is called, so a process sees the value it was started with (or a
test's ``monkeypatch.setenv``), and a bad value fails where it is used, never an import.

An empty (or blank) value counts as unset. A value that does not parse raises
:class:`~mvsink.exceptions.SettingsError` naming the variable, the value and the fix.

The Airflow-only settings (:data:`AIRFLOW_SETTINGS`: task retries and their delay, the
reschedule limit and the Spark connection id) can also come from Airflow's configuration,
section ``[mvsink]`` (``airflow.cfg`` or ``AIRFLOW__MVSINK__<OPTION>``): the ``airflow``
subpackage passes that section as ``fallback`` (see :mod:`mvsink.airflow.config`; this
module never imports Airflow). Precedence, highest first: the ``MVSINK_*`` variable, the
``[mvsink]`` option, the default.

:data:`REGISTRY` (:mod:`mvsink.variables`, where every variable is declared) lists every setting (name, default,
meaning); ``docs/configuration.md`` documents each one and a test keeps the two in step. :data:`TEST_ONLY` lists the variables
only the test suite sets (fail points, read by :mod:`mvsink.core.failpoints`).
"""

from __future__ import annotations

import math
import os
import re
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

from mvsink.exceptions import SettingsError
from mvsink.location import is_uri
from mvsink.variables import (  # noqa: F401 (the variables are the settings' too: settings.DATA_ROOT ...)
    AIRFLOW_SETTINGS,
    ALLOW_OUTSIDE_DATA_ROOT,
    ALLOWED_LOCATIONS,
    CACHE_DIR,
    COMPACT_MEMORY,
    COST_MODEL,
    COST_RECHECK_EVERY,
    DATA_ROOT,
    DECODED_COPIES_MB,
    DUCKDB_FULL_DIFF,
    INCREMENTAL_AGGREGATE,
    INCREMENTAL_DRIVER_TERMS,
    INCREMENTAL_GROUPS,
    INCREMENTAL_MAX_FRACTION,
    INCREMENTAL_MAX_SCAN_RATIO,
    INCREMENTAL_PARTITIONED,
    INCREMENTAL_PRUNE_MIN_BYTES,
    INCREMENTAL_TOPK,
    INTERMEDIATE,
    INTERMEDIATE_CORRELATED,
    INTERMEDIATE_HAVING,
    MAX_RESCHEDULES,
    NOT_VARIABLES,
    PLAIN_READ_MAX_PARTITIONS,
    PLAN_FACTS_MAX_AGE,
    REGISTRY,
    REPORTS_DIR,
    SOURCE_READS,
    SPARK_CDS,
    SPARK_CONN_ID,
    SPARK_FREE,
    SPARK_JARS,
    SPARK_JOB,
    SPARK_JOB_ENV,
    SPARK_REMOTE,
    STAGING_GRACE_SECONDS,
    TASK_RETRIES,
    TASK_RETRY_DELAY_SECONDS,
    TEST_ONLY,
    VIEWS_DIR,
    Setting,
)

#: Looks an option of Airflow's ``[mvsink]`` section up (None when it is not set).
Fallback = Callable[[str], "str | None"]

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def is_set(setting: Setting) -> bool:
    """Is the variable set to a non-blank value (whether or not it parses)?"""
    return _raw(setting) is not None


# ---------------------------------------------------------------- reading and parsing


def _raw(setting: Setting, fallback: Fallback | None = None) -> tuple[str, str] | None:
    """(where the value came from, the value), or None if unset (blank counts as unset)."""
    value = os.environ.get(setting.name)
    if value is not None and value.strip():
        return setting.name, value
    if fallback is not None and setting.airflow_option:
        value = fallback(setting.airflow_option)
        if value is not None and str(value).strip():
            return f"[mvsink] {setting.airflow_option} ({setting.airflow_env})", str(value)
    return None


def _error(setting: Setting, origin: str, value: str, expected: str, example: str) -> SettingsError:
    shown = repr(value) if len(value) <= 80 else repr(value[:77] + "...")
    where = setting.name if origin == setting.name else origin
    return SettingsError(
        f"{where}={shown} is not {expected}. Fix: set it to e.g. {example}, or unset it for the "
        f"default {setting.default}."
    )


def _int(
    setting: Setting, default: int, *, minimum: int = 0, example: str = "2", fallback: Fallback | None = None
) -> int:
    got = _raw(setting, fallback)
    if got is None:
        return default
    origin, value = got
    text = value.strip()
    if not re.fullmatch(r"[+-]?\d{1,9}", text) or int(text) < minimum:
        raise _error(setting, origin, value, f"a whole number >= {minimum}", example)
    return int(text)


def _float(
    setting: Setting, default: float, *, minimum: float = 0.0, example: str = "10", fallback: Fallback | None = None
) -> float:
    got = _raw(setting, fallback)
    if got is None:
        return default
    origin, value = got
    try:
        number = float(value.strip())
    except ValueError:
        number = math.nan
    if not math.isfinite(number) or number < minimum:
        raise _error(setting, origin, value, f"a number >= {minimum:g}", example)
    return number


def _flag(setting: Setting, default: bool) -> bool:
    got = _raw(setting)
    if got is None:
        return default
    origin, value = got
    text = value.strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise _error(setting, origin, value, "true or false (1, true, yes, on / 0, false, no, off)", "1")


def _folder(setting: Setting, example: str) -> Path | None:
    """A folder path (it need not exist yet; if something exists there, it must be a folder)."""
    got = _raw(setting)
    if got is None:
        return None
    origin, value = got
    path = Path(value.strip()).expanduser()
    if path.exists() and not path.is_dir():
        raise _error(setting, origin, value, "a folder (a file of that name exists)", example)
    return path


# ---------------------------------------------------------------- the settings


def data_root() -> Path | None:
    """``MVSINK_DATA_ROOT`` resolved to an absolute path, or None (then each view file's folder is the root)."""
    p = _folder(DATA_ROOT, "/data")
    return p.resolve() if p is not None else None


def allow_outside_data_root() -> bool:
    """``MVSINK_ALLOW_OUTSIDE_DATA_ROOT``: may view paths leave the data root (default false)?"""
    return _flag(ALLOW_OUTSIDE_DATA_ROOT, False)


def allowed_locations() -> tuple[str, ...]:
    """``MVSINK_ALLOWED_LOCATIONS``: location prefixes (URIs as written, local paths absolute), empty if unset."""
    got = _raw(ALLOWED_LOCATIONS)
    if got is None:
        return ()
    origin, value = got
    out = []
    for item in (v.strip() for v in value.split(",") if v.strip()):
        if not is_uri(item) and not os.path.isabs(os.path.expanduser(item)):
            raise _error(
                ALLOWED_LOCATIONS, origin, value, "URIs (scheme://bucket/prefix) or absolute paths", "s3://lake/,/data"
            )
        out.append(item if is_uri(item) else os.path.expanduser(item))
    return tuple(out)


def views_dir() -> Path:
    """``MVSINK_VIEWS_DIR``: the default folder of view files (``dags/views``)."""
    return views_dir_if_set() or Path("dags/views")


def incremental_groups() -> bool:
    """``MVSINK_INCREMENTAL_GROUPS``: may aggregate, DISTINCT and window views refresh by recomputing their affected
    groups (default true)?"""
    return _flag(INCREMENTAL_GROUPS, True)


def incremental_partitioned() -> bool:
    """``MVSINK_INCREMENTAL_PARTITIONED``: may a view partitioned by a key refresh by recomputing the changed keys'
    partitions (default true)?"""
    return _flag(INCREMENTAL_PARTITIONED, True)


def incremental_topk() -> bool:
    """``MVSINK_INCREMENTAL_TOPK``: may top-k views refresh from their persisted top k (default true)?"""
    return _flag(INCREMENTAL_TOPK, True)


def intermediate() -> bool:
    """``MVSINK_INTERMEDIATE``: may an ORDER BY ... LIMIT view over a GROUP BY be refreshed through an intermediate
    table of its aggregate (default true; :mod:`mvsink.definitions.intermediate`)?"""
    return _flag(INTERMEDIATE, True)


def intermediate_having() -> bool:
    """``MVSINK_INTERMEDIATE_HAVING``: may a HAVING over scalar subqueries be refreshed through intermediate tables
    (default true; :func:`mvsink.definitions.intermediate.split_having`)?"""
    return _flag(INTERMEDIATE_HAVING, True)


def intermediate_correlated() -> bool:
    """``MVSINK_INTERMEDIATE_CORRELATED``: may a correlated scalar subquery of a WHERE be refreshed through an
    intermediate table (default false; :func:`mvsink.definitions.correlated.split_correlated`)?"""
    return _flag(INTERMEDIATE_CORRELATED, False)


def incremental_driver_terms() -> bool:
    """``MVSINK_INCREMENTAL_DRIVER_TERMS``: may an aggregate's small change terms run in DuckDB (default true)?"""
    return _flag(INCREMENTAL_DRIVER_TERMS, True)


def duckdb_full_diff() -> bool:
    """``MVSINK_DUCKDB_FULL_DIFF``: may a full diff run in DuckDB in the refreshing process (default true)?"""
    return _flag(DUCKDB_FULL_DIFF, True)


def spark_free() -> bool:
    """``MVSINK_SPARK_FREE``: may a small refresh with kept plan facts run without Spark (default true)?"""
    return _flag(SPARK_FREE, True)


def decoded_copies_mb() -> int:
    """``MVSINK_DECODED_COPIES_MB``: megabytes of decoded source copies a view keeps (1024; 0: none)."""
    return _int(DECODED_COPIES_MB, 1024, example="1024")


def plan_facts_max_age() -> float:
    """``MVSINK_PLAN_FACTS_MAX_AGE``: seconds kept plan facts are used (default 86400)."""
    return _float(PLAN_FACTS_MAX_AGE, 86400.0, minimum=0.0, example="3600")


def incremental_aggregate() -> bool:
    """``MVSINK_INCREMENTAL_AGGREGATE``: may aggregates refresh from their hidden state (default true)?"""
    return _flag(INCREMENTAL_AGGREGATE, True)


def spark_cds() -> bool:
    """``MVSINK_SPARK_CDS``: may driver JVMs map the class-data archive of ``make install`` (default true)?"""
    return _flag(SPARK_CDS, True)


def views_dir_if_set() -> Path | None:
    """``MVSINK_VIEWS_DIR`` if it is set (the UI plugin otherwise uses ``<dags_folder>/views``)."""
    return _folder(VIEWS_DIR, "dags/views")


def spark_job() -> str | None:
    """``MVSINK_SPARK_JOB``: the write job script spark-submit runs, or None for the one in the package."""
    got = _raw(SPARK_JOB)
    if got is None:
        return None
    origin, value = got
    text = value.strip()
    if not text.endswith(".py") or any(c.isspace() for c in text):
        raise _error(SPARK_JOB, origin, value, "the path of a Python script (*.py)", "/opt/mvsink/mv_write.py")
    return os.path.expanduser(text)  # kept as text: it may be a URL (hdfs://, s3://) on a cluster


def spark_remote() -> str | None:
    """``MVSINK_SPARK_REMOTE``: ``sc://host:port`` of a Spark Connect server, or None (spark-submit)."""
    got = _raw(SPARK_REMOTE)
    if got is None:
        return None
    origin, value = got
    text = value.strip()
    if not re.fullmatch(r"sc://[^\s/:;]+(:\d{1,5})?(/[^\s]*)?", text):
        raise _error(SPARK_REMOTE, origin, value, "a Spark Connect URL sc://HOST[:PORT]", "sc://127.0.0.1:15002")
    return text


def spark_jars() -> Path | None:
    """``MVSINK_SPARK_JARS``: the folder of the JVM jars (delta-spark, connectors), or None (the checkout's)."""
    p = _folder(SPARK_JARS, "/opt/mvsink/jars")
    return p.resolve() if p is not None else None


def reports_dir() -> Path:
    """``MVSINK_REPORTS_DIR``: where the DAG's write task leaves its report for append."""
    import tempfile

    return _folder(REPORTS_DIR, "/data/_mvsink_reports") or Path(tempfile.gettempdir()) / "mvsink-reports"


def cache_dir() -> Path:
    """``MVSINK_CACHE_DIR``: this machine's cache of work derived from view definitions alone
    (:mod:`mvsink.definitions.cache`); default ``$XDG_CACHE_HOME/mvsink``, else ``~/.cache/mvsink``."""
    got = _folder(CACHE_DIR, "/var/cache/mvsink")
    if got is not None:
        return got
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    return (Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache") / "mvsink"


def staging_grace_seconds() -> float:
    """``MVSINK_STAGING_GRACE_SECONDS``: an unfinished staged write younger than this is in flight (3600)."""
    return _float(STAGING_GRACE_SECONDS, 3600.0, example="3600")


def compact_memory() -> str:
    """``MVSINK_COMPACT_MEMORY``: DuckDB's memory limit for a compaction (``1GB``)."""
    got = _raw(COMPACT_MEMORY)
    if got is None:
        return "1GB"
    origin, value = got
    text = value.strip()
    size = re.fullmatch(r"(\d+(\.\d+)?)\s*([KMGT]i?B|[KMGT]|B|bytes?|%)", text, flags=re.IGNORECASE)
    if size is None or float(size.group(1)) <= 0:
        raise _error(COMPACT_MEMORY, origin, value, "a memory size such as 512MB, 2GiB or 50%", "2GB")
    return text


def incremental_max_fraction() -> float:
    """``MVSINK_INCREMENTAL_MAX_FRACTION``: largest change-to-size ratio refreshed incrementally (0.5)."""
    return _float(INCREMENTAL_MAX_FRACTION, 0.5, example="0.5")


def incremental_max_scan_ratio() -> float:
    """``MVSINK_INCREMENTAL_MAX_SCAN_RATIO``: largest scan of the aggregate state's change terms, against
    the full diff's (1.0)."""
    return _float(INCREMENTAL_MAX_SCAN_RATIO, 1.0, example="1.0")


def cost_model() -> bool:
    """``MVSINK_COST_MODEL``: may the view's refresh history override the scan guard (default true)?"""
    return _flag(COST_MODEL, True)


def cost_recheck_every() -> int:
    """``MVSINK_COST_RECHECK_EVERY``: refreshes after which the cost model re-runs the alternative it passed over
    (10; 0: never)."""
    return _int(COST_RECHECK_EVERY, 10, example="10")


def incremental_prune_min_bytes() -> int:
    """``MVSINK_INCREMENTAL_PRUNE_MIN_BYTES``: smallest source a change term reads pruned by join keys."""
    return _int(INCREMENTAL_PRUNE_MIN_BYTES, 8_000_000, example="8000000")


def source_reads() -> str:
    """``MVSINK_SOURCE_READS``: ``auto`` (plain Parquet where a snapshot's files are plain) or ``delta``."""
    raw = _raw(SOURCE_READS)
    if raw is None:
        return "auto"
    origin, value = raw
    v = value.strip().lower()
    if v not in ("auto", "delta"):
        raise _error(SOURCE_READS, origin, value, "auto or delta", "auto")
    return v


def plain_read_max_partitions() -> int:
    """``MVSINK_PLAIN_READ_MAX_PARTITIONS``: most partition values a plain Parquet snapshot read takes."""
    return _int(PLAIN_READ_MAX_PARTITIONS, 64, example="64")


def spark_conn_id(fallback: Fallback | None = None) -> str:
    """``MVSINK_SPARK_CONN_ID`` (or ``[mvsink] spark_conn_id``): the write task's Spark connection."""
    got = _raw(SPARK_CONN_ID, fallback)
    if got is None:
        return "spark_default"
    origin, value = got
    text = value.strip()
    if not re.fullmatch(r"[\w.-]{1,250}", text):
        raise _error(SPARK_CONN_ID, origin, value, "an Airflow connection id (letters, digits, _ . -)", "spark_default")
    return text


def task_retries(fallback: Fallback | None = None) -> int:
    """``MVSINK_TASK_RETRIES`` (or ``[mvsink] task_retries``): Airflow retries of every task (2)."""
    return _int(TASK_RETRIES, 2, example="2", fallback=fallback)


def task_retry_delay_seconds(fallback: Fallback | None = None) -> float:
    """``MVSINK_TASK_RETRY_DELAY_SECONDS`` (or ``[mvsink] task_retry_delay_seconds``): seconds between tries (10)."""
    return _float(TASK_RETRY_DELAY_SECONDS, 10.0, example="10", fallback=fallback)


def max_reschedules(fallback: Fallback | None = None) -> int:
    """``MVSINK_MAX_RESCHEDULES`` (or ``[mvsink] max_reschedules``): new runs after lost races (3)."""
    return _int(MAX_RESCHEDULES, 3, example="3", fallback=fallback)


#: The accessor of each setting (tests call each one; ``check_all`` validates them all at once).
ACCESSORS: dict[str, Callable[[], object]] = {
    DATA_ROOT.name: data_root,
    ALLOW_OUTSIDE_DATA_ROOT.name: allow_outside_data_root,
    ALLOWED_LOCATIONS.name: allowed_locations,
    VIEWS_DIR.name: views_dir,
    SPARK_JOB.name: spark_job,
    SPARK_REMOTE.name: spark_remote,
    SPARK_JARS.name: spark_jars,
    SPARK_CDS.name: spark_cds,
    REPORTS_DIR.name: reports_dir,
    CACHE_DIR.name: cache_dir,
    STAGING_GRACE_SECONDS.name: staging_grace_seconds,
    COMPACT_MEMORY.name: compact_memory,
    INCREMENTAL_MAX_FRACTION.name: incremental_max_fraction,
    INCREMENTAL_MAX_SCAN_RATIO.name: incremental_max_scan_ratio,
    COST_MODEL.name: cost_model,
    COST_RECHECK_EVERY.name: cost_recheck_every,
    INCREMENTAL_PRUNE_MIN_BYTES.name: incremental_prune_min_bytes,
    SOURCE_READS.name: source_reads,
    PLAIN_READ_MAX_PARTITIONS.name: plain_read_max_partitions,
    SPARK_CONN_ID.name: spark_conn_id,
    TASK_RETRIES.name: task_retries,
    TASK_RETRY_DELAY_SECONDS.name: task_retry_delay_seconds,
    MAX_RESCHEDULES.name: max_reschedules,
    INCREMENTAL_AGGREGATE.name: incremental_aggregate,
    SPARK_FREE.name: spark_free,
    DECODED_COPIES_MB.name: decoded_copies_mb,
    PLAN_FACTS_MAX_AGE.name: plan_facts_max_age,
    INCREMENTAL_GROUPS.name: incremental_groups,
    INCREMENTAL_TOPK.name: incremental_topk,
    INTERMEDIATE.name: intermediate,
    INTERMEDIATE_HAVING.name: intermediate_having,
    INTERMEDIATE_CORRELATED.name: intermediate_correlated,
    INCREMENTAL_PARTITIONED.name: incremental_partitioned,
    INCREMENTAL_DRIVER_TERMS.name: incremental_driver_terms,
    DUCKDB_FULL_DIFF.name: duckdb_full_diff,
}


def check_all() -> dict[str, object]:
    """Every setting's current value (raises the first :class:`SettingsError`)."""
    return {name: get() for name, get in ACCESSORS.items()}


# ---------------------------------------------------------------- the process environment
# Child processes (spark-submit, Airflow components) get their environment from here, so that
# this module stays the one place that touches os.environ (besides the test-only fail points).


def process_env() -> dict[str, str]:
    """A copy of this process's whole environment (for a child process to inherit)."""
    return dict(os.environ)


def env_subset(names: Iterable[str]) -> dict[str, str]:
    """The variables of ``names`` that are set, with their raw values; registered ones are validated first."""
    out: dict[str, str] = {}
    for name in names:
        if name in ACCESSORS:
            ACCESSORS[name]()
        if name in os.environ:
            out[name] = os.environ[name]
    return out


def spark_local_ip() -> str:
    """``SPARK_LOCAL_IP`` of this process, else 127.0.0.1 (mvsink's local Spark stays on loopback)."""
    return os.environ.get("SPARK_LOCAL_IP") or "127.0.0.1"


def prepare_local_spark() -> None:
    """Set this process up for an in-process local Spark: loopback, this Python, pyspark's own Spark.

    Writes the process environment (before the JVM starts): ``SPARK_LOCAL_IP`` defaults to
    127.0.0.1, ``PYSPARK_PYTHON`` to this interpreter, and ``SPARK_HOME`` is dropped so that
    the pyspark wheel's own ``spark-submit`` is used.
    """
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.pop("SPARK_HOME", None)


def pyspark_python() -> str:
    """The Python of Spark's Python workers: ``PYSPARK_PYTHON``, else this interpreter (an absolute path)."""
    return (os.environ.get("PYSPARK_PYTHON") or "").strip() or os.path.abspath(sys.executable)


def export(setting: Setting, value: str) -> None:
    """Set ``setting`` for this process and the children it starts (the demo sets its data root)."""
    os.environ[setting.name] = value
