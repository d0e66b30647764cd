"""Spark settings of a write (no pyspark import): defaults, precedence, and keeping secrets off argv."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit

from mvsink import settings
from mvsink.core.sparklocation import spark_hadoop_conf, spark_uri
from mvsink.definitions.view import ViewDefinition
from mvsink.exceptions import MvSinkError
from mvsink.location import scheme_of
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
    # spark-submit ends its JVM when the job's main returns: Hadoop 3.5's ABFS leaves non-daemon thread pools
    # behind, which otherwise keep a finished write step's JVM alive for ever
    "spark.submit.callSystemExitOnMainExit": "true",
    # Spark's default, plus Azure's account keys: redacted in the UI's environment page and event logs
    "spark.redaction.regex": "(?i)secret|password|token|access[.]?key|account[.]key",
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
        jars.check_present_connectors(role="Spark")
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
    explicit = {**view.spark_conf, **(extra or {})}
    conf = {**DEFAULT_SPARK_CONF, **by_master, **jvm, **_unless_set(storage_conf(view), explicit), **explicit}
    return driver_conf(conf) if master is not None else conf


def driver_conf(conf: dict[str, str]) -> dict[str, str]:
    """``conf`` of a driver JVM mvsink starts, with the options that map the class-data archive where there is one
    (:mod:`mvsink.spark.cds`; a user's own ``spark.driver.extraJavaOptions`` kept after them)."""
    from mvsink.spark import cds

    return cds.with_java_options(conf, cds.driver_java_options())


_BUCKET_KEY = re.compile(r"^spark\.hadoop\.fs\.s3a\.bucket\.[^.]+\.(.+)$")


def _unless_set(derived: Mapping[str, str], explicit: Mapping[str, str]) -> dict[str, str]:
    """The derived store settings, less the bucket-scoped ones whose global key is set explicitly (Hadoop lets
    a bucket's key win over the global one; an explicit setting must win over a derived one)."""
    out = {}
    for k, v in derived.items():
        m = _BUCKET_KEY.match(k)
        if m is None or f"spark.hadoop.fs.s3a.{m.group(1)}" not in explicit:
            out[k] = v
    return out


def view_schemes(view: ViewDefinition) -> list[str]:
    """Spark's URI schemes of the view's target and path sources on object storage (``s3a``, ``abfss``, ...)."""
    out = [scheme_of(spark_uri(loc)) for loc in view.locations().values() if not loc.is_local]
    return list(dict.fromkeys(out))


def check_connectors(view: ViewDefinition, *, role: str = "Spark") -> None:
    """Fail before Spark starts when a connector the view's locations need is missing or of another Hadoop
    version than pyspark's (:func:`mvsink.spark.jars.check_connector`)."""
    for scheme in view_schemes(view):
        jars.check_connector(scheme, role=f"{role} for view {view.name}")


def storage_conf(view: ViewDefinition) -> dict[str, str]:
    """``spark.hadoop.*`` settings for the view's target and path sources on object storage, credentials
    included (see :func:`mvsink.core.spark_hadoop_conf`): secret values, to be split off with
    :func:`split_secret_conf` before anything reaches a command line."""
    out: dict[str, str] = {}
    for loc in view.locations().values():
        out.update(spark_hadoop_conf(loc))
    return out


HADOOP_PREFIX = "spark.hadoop."


def storage_runtime_conf(view: ViewDefinition) -> dict[str, str]:
    """The view's store settings as session settings (``fs.s3a.bucket.<b>.*``, ``fs.azure.*``): a running
    session (in this process, or a Spark Connect server's) copies them into the Hadoop configuration of every
    read and write, so one session reaches the stores of every view it serves."""
    return {
        k.removeprefix(HADOOP_PREFIX): v
        for k, v in storage_conf(view).items()
        if k.startswith(HADOOP_PREFIX) and not k.endswith(".impl")
    }


def apply_storage_conf(spark: object, view: ViewDefinition) -> None:
    """Set the view's store settings (:func:`storage_runtime_conf`) on a running session."""
    for k, v in storage_runtime_conf(view).items():
        spark.conf.set(k, v)  # type: ignore[attr-defined]


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
    import tempfile

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
