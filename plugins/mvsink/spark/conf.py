"""Spark settings of a write (no pyspark import): defaults, precedence, and keeping secrets off argv."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit

from mvsink import settings
from mvsink.definitions.view import ViewDefinition
from mvsink.exceptions import MvSinkError
from mvsink.spark import jars

# Settings every write needs: Delta-compatible timestamps, UTC, no UI, no Hadoop side files.
DEFAULT_SPARK_CONF: dict[str, str] = {
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.adaptive.enabled": "true",
    "spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs": "false",
    "spark.hadoop.parquet.summary.metadata.level": "NONE",
    # delta-spark 4.x refuses versionAsOf / readChangeFeed reads of versions committed longer ago than the
    # table's delta.deletedFileRetentionDuration (7 days by default). Refreshes and backfills read sources at
    # old refresh times on purpose; a version whose files are gone fails on its own (mvsink checks
    # change files first and says which file was vacuumed).
    "spark.databricks.delta.vacuum.enforceTimeTravelWithinDeletedFileRetentionDuration": "false",
    # Delta rebuilds a snapshot's state (log replay) in Spark jobs of 50 partitions by default, sized for large
    # clusters; for the logs of refreshes' sources one partition measured 2-5x faster here (docs/spark.md).
    "spark.databricks.delta.snapshotPartitions": "1",
}


# The driver's address for local[...] masters: everything stays on loopback.
LOCAL_MASTER_CONF: dict[str, str] = {"spark.driver.bindAddress": "127.0.0.1", "spark.driver.host": "127.0.0.1"}

# Executors of a standalone cluster on this machine (spark://127.0.0.1:…, e.g. ``make cluster``): small,
# and at most two cores per application, so that several refreshes share a 2-core machine.
LOOPBACK_CLUSTER_CONF: dict[str, str] = {
    "spark.executor.cores": "1",
    "spark.executor.memory": "1g",
    "spark.cores.max": "2",
}

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


def is_loopback_cluster(master: str) -> bool:
    """True for a cluster master on this machine (``spark://127.0.0.1:7077``, ``spark://localhost:7077``)."""
    if not master.startswith("spark://"):
        return False
    try:
        hosts = [urlsplit(f"spark://{h}").hostname for h in master.removeprefix("spark://").split(",")]
    except ValueError:
        return False
    return all(h in LOOPBACK_HOSTS for h in hosts)


def master_conf(master: str) -> dict[str, str]:
    """Settings every driver needs for ``master``: its address, the executors' Python, small local executors.

    - ``local[...]``: the driver binds to and advertises 127.0.0.1;
    - ``spark://`` (standalone; Python drivers always run in client mode there): the driver binds to and
      advertises ``SPARK_LOCAL_IP`` (127.0.0.1 when unset, as spark-submit is started with it), the
      address executors connect back to; executors run ``PYSPARK_PYTHON`` (else this interpreter) by its
      absolute path; on a cluster on this machine (:func:`is_loopback_cluster`) executors are small;
    - any other master (YARN, Kubernetes, possibly in cluster deploy mode): nothing, its deployment decides.

    Lower precedence than the connection's, the view's and the caller's settings.
    """
    if master.startswith("local"):
        return dict(LOCAL_MASTER_CONF)
    if not master.startswith("spark://"):
        return {}
    address = settings.spark_local_ip()
    conf = {
        "spark.driver.bindAddress": address,
        "spark.driver.host": address,
        "spark.pyspark.python": settings.pyspark_python(),
    }
    return {**conf, **(LOOPBACK_CLUSTER_CONF if is_loopback_cluster(master) else {})}


def session_conf(*, master: str, schemes: Iterable[str] = ()) -> dict[str, str]:
    """Settings that put Delta (and the connectors) into a session started for ``master``.

    On ``local[...]`` and a cluster on this machine the jars go on the class path where they lie
    (``extraClassPath``: nothing is copied, which matters for the AWS SDK bundle's 690 MB); on any other
    master they are shipped with ``spark.jars`` (Delta, and the connectors of ``schemes`` only).
    """
    schemes = list(schemes)
    for s in schemes:
        jars.check_connector(s, role="Spark")
    delta = jars.delta_jars()
    if master.startswith("local") or is_loopback_cluster(master):
        path = ":".join(str(j) for j in [*delta, *jars.available_connector_jars()])
        jar_conf = {"spark.driver.extraClassPath": path, "spark.executor.extraClassPath": path}
    else:
        shipped = [*delta, *(j for s in dict.fromkeys(schemes) for j in jars.connector_jars(s))]
        jar_conf = {"spark.jars": ",".join(str(j) for j in shipped)}
    return {**jar_conf, **jars.DELTA_SESSION_CONF}


SECRET_HINTS = (
    "password",
    "secret",
    "token",
    "credential",
    "access.key",
    "key.id",
    "account.key",
    "private.key",
    ".key",
)


def spark_conf_for(
    view: ViewDefinition, extra: Mapping[str, str] | None = None, *, master: str | None = None
) -> dict[str, str]:
    """Spark settings of a write: defaults (with :func:`master_conf` and Delta's jars and session settings,
    :func:`mvsink.spark.jars.session_conf`, when ``master`` is known) < the store settings of its locations <
    the view's spark_conf < ``extra``."""
    by_master = master_conf(master) if master is not None else {}
    jvm = session_conf(master=master, schemes=view_schemes(view)) if master is not None else {}
    return {**DEFAULT_SPARK_CONF, **by_master, **jvm, **storage_conf(view), **view.spark_conf, **(extra or {})}


def view_schemes(view: ViewDefinition) -> list[str]:
    """Spark's URI schemes of the view's target and path sources on object storage (``s3a``, ``abfss``, ...)."""
    from mvsink.core import storage

    out: list[str] = []
    for location in (view.target, *(s.path for s in view.sources if s.path)):
        if storage.is_uri(location) and not storage.parse(location).is_local:
            out.append(storage.spark_uri(location).split("://", 1)[0])
    return list(dict.fromkeys(out))


def storage_conf(view: ViewDefinition) -> dict[str, str]:
    """``spark.hadoop.*`` settings for the view's target and path sources on object storage (no secrets:
    credentials by reference to the environment; see :func:`mvsink.core.storage.spark_hadoop_conf`)."""
    from mvsink.core import storage

    storage.register_view(view)
    out: dict[str, str] = {}
    for location in (view.target, *(s.path for s in view.sources if s.path)):
        if storage.is_uri(location):
            out.update(storage.spark_hadoop_conf(location))
    return out


def is_secret_key(key: str) -> bool:
    """True for a Spark setting whose value must never be logged or put on a command line."""
    low = key.lower()
    return any(h in low for h in SECRET_HINTS)


def split_secret_conf(conf: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """``(public, secret)`` settings: secret ones go to a private properties file, not onto argv."""
    public = {k: v for k, v in conf.items() if not is_secret_key(k)}
    return public, {k: v for k, v in conf.items() if is_secret_key(k)}


def _escape_property(text: str, *, key: bool) -> str:
    out = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    if key:
        for ch in "=: #!":
            out = out.replace(ch, "\\" + ch)
    return out


def write_properties_file(conf: Mapping[str, str], folder: str | None = None) -> str:
    """Write settings to a new Java properties file readable by this user only (0600); returns its path.

    Spark trims property values: a value with leading or trailing blanks cannot pass through a
    properties file and is refused.
    """
    for k, v in conf.items():
        if v != v.strip():
            raise MvSinkError(
                f"Spark setting {k}: its value has leading or trailing blanks, which Spark "
                "strips from a properties file. Fix: remove the blanks from the value."
            )
    fd, path = tempfile.mkstemp(prefix="mvsink-spark-", suffix=".properties", dir=folder)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        for k, v in sorted(conf.items()):
            f.write(f"{_escape_property(k, key=True)}={_escape_property(v, key=False)}\n")
    return path


def redact(cmd: list[str]) -> list[str]:
    return [
        c.split("=", 1)[0] + "=***" if "=" in c and any(h in c.split("=", 1)[0].lower() for h in SECRET_HINTS) else c
        for c in cmd
    ]
