"""The JVM side of every Spark session mvsink starts: delta-spark and Hadoop's object-storage connectors.

The jars are fetched once by ``make install`` (``mvn dependency:copy-dependencies`` over
``spark_jobs/pom.xml``) into a folder (:func:`jars_folder`: ``MVSINK_SPARK_JARS``, else ``.jars/`` of the
source checkout). Nothing is resolved by Spark (Ivy) when a session starts. No pyspark import here: this
module only builds settings and checks files, before any JVM starts.

- :func:`delta_jars`, :func:`connector_jars`: the jars of Delta and of a scheme's connector (a clear error
  naming a missing one); :func:`mvsink.spark.conf.session_conf` puts them into a session's settings;
- :func:`check_connector`: a location's Hadoop connector is there and matches pyspark's Hadoop version,
  checked before Spark starts (a mismatch otherwise fails 25-45 s later, deep in the JVM);
- :func:`require_delta`: a session mvsink did not start (someone's Connect server) has Delta, else a clear error;
- :func:`connect_plugin_jar`: mvsink's Spark Connect plugin, compiled by ``make install`` (spark_jobs/connect).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from mvsink import settings
from mvsink.exceptions import SparkSetupError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
#: Delta's two session settings; static (fixed when the session starts).
DELTA_SESSION_CONF: dict[str, str] = {
    "spark.sql.extensions": DELTA_EXTENSION,
    "spark.sql.catalog.spark_catalog": DELTA_CATALOG,
}

#: The jars each part needs (artifact name prefixes; versions come from spark_jobs/pom.xml).
DELTA_JARS = (
    "delta-spark_",
    "delta-storage-",
    "delta-kernel-api-",
    "delta-kernel-defaults-",
    "delta-kernel-unitycatalog-",
)
S3A_JARS = ("hadoop-aws-", "bundle-", "analyticsaccelerator-s3-", "wildfly-openssl-")
AZURE_JARS = ("hadoop-azure-", "azure-storage-", "azure-keyvault-core-", "hadoop-shaded-guava-", "HdrHistogram-")
#: Hadoop connector per Spark URI scheme.
CONNECTORS = {
    "s3a": "hadoop-aws",
    "abfs": "hadoop-azure",
    "abfss": "hadoop-azure",
    "wasb": "hadoop-azure",
    "wasbs": "hadoop-azure",
}

FETCH_FIX = (
    "run `make install` (it runs `mvn -f spark_jobs/pom.xml dependency:copy-dependencies`), or set MVSINK_SPARK_JARS"
)


def jars_folder() -> Path:
    """``MVSINK_SPARK_JARS``, else ``.jars/`` in the source checkout that holds this package (``make install``).

    The checkout is the nearest folder above the package with ``spark_jobs/pom.xml`` (the jars' Maven
    file); an installed wheel has none, so ``.jars/`` of the working directory (then the error names the fix).
    """
    configured = settings.spark_jars()
    if configured is not None:
        return configured
    root = source_checkout()
    return (root if root is not None else Path.cwd()) / ".jars"


def source_checkout() -> Path | None:
    """The repository checkout this package runs from (the folder with ``spark_jobs/pom.xml``), else None."""
    for folder in Path(__file__).resolve().parents:
        if (folder / "spark_jobs" / "pom.xml").is_file():
            return folder
    return None


@functools.cache
def _listing(folder: str) -> tuple[str, ...]:
    p = Path(folder)
    return tuple(sorted(x.name for x in p.glob("*.jar"))) if p.is_dir() else ()


def _pick(prefixes: Iterable[str], *, what: str) -> list[Path]:
    folder = jars_folder()
    names = _listing(str(folder))
    out: list[Path] = []
    for prefix in prefixes:
        found = [n for n in names if n.startswith(prefix)]
        if not found:
            raise SparkSetupError(
                f"{what}: no {prefix.rstrip('-_')} jar in {folder}. Fix: {FETCH_FIX} (the folder must hold the jars "
                "spark_jobs/pom.xml lists)."
            )
        out.append(folder / found[-1])
    return out


def delta_jars() -> list[Path]:
    """The delta-spark jars (a :class:`SparkSetupError` naming the missing one and the fix)."""
    return _pick(DELTA_JARS, what="Delta Lake for Spark")


def connector_jars(scheme: str) -> list[Path]:
    """The Hadoop connector jars of a Spark URI scheme (``s3a``, ``abfss``, ...); none for local files."""
    artifact = CONNECTORS.get(scheme)
    if artifact is None:
        return []
    return _pick(S3A_JARS if artifact == "hadoop-aws" else AZURE_JARS, what=f"the {scheme}:// connector ({artifact})")


def available_connector_jars() -> list[Path]:
    """Every connector jar present (a local session gets them all: a class path entry costs nothing until used)."""
    folder = jars_folder()
    names = _listing(str(folder))
    return [folder / n for n in names if n.startswith(S3A_JARS + AZURE_JARS)]


#: mvsink's Spark Connect plugin (spark_jobs/connect), built by ``make install`` beside the fetched jars.
CONNECT_PLUGIN_JAR = "mvsink-connect-plugin.jar"
#: Its relation plugin class: a client's relation in, its analysed plan's JSON out (spark/connectplan.py).
CONNECT_PLUGIN_CLASS = "mvsink.connect.AnalyzedPlanRelation"


def connect_plugin_jar() -> Path | None:
    """The plugin jar in the jars folder, or None (a Connect server then starts without it: the plan facts its
    clients need are read from EXPLAIN text, coarser)."""
    folder = jars_folder()
    return folder / CONNECT_PLUGIN_JAR if CONNECT_PLUGIN_JAR in _listing(str(folder)) else None


def pyspark_hadoop_version() -> str | None:
    """The Hadoop version of pyspark's own jars (``hadoop-client-api-X.jar``), or None if not found."""
    import importlib.util

    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        return None
    jars = Path(next(iter(spec.submodule_search_locations))) / "jars"
    for p in jars.glob("hadoop-client-api-*.jar"):
        m = re.match(r"hadoop-client-api-(.+)\.jar$", p.name)
        if m:
            return m.group(1)
    return None


def check_connector(scheme: str, *, role: str) -> None:
    """Fail before Spark starts if the connector of ``scheme`` is missing or of another Hadoop version."""
    artifact = CONNECTORS.get(scheme)
    if artifact is None:
        return
    jars = connector_jars(scheme)
    want = pyspark_hadoop_version()
    main = next(j for j in jars if j.name.startswith(artifact + "-"))
    have = main.name.removeprefix(artifact + "-").removesuffix(".jar")
    if want is not None and have != want:
        raise SparkSetupError(
            f"{role}: the {scheme}:// connector is {main.name}, but pyspark's Hadoop is {want}; Hadoop does not "
            f"support mixing versions. Fix: use {artifact}-{want}.jar ({FETCH_FIX})."
        )


def check_present_connectors(*, role: str) -> None:
    """:func:`check_connector` for every connector whose jars are in the folder (a session that gets them all,
    e.g. a Spark Connect server, must not start with a mismatched one)."""
    names = _listing(str(jars_folder()))
    for scheme, artifact in {"s3a": "hadoop-aws", "abfss": "hadoop-azure"}.items():
        if any(n.startswith(artifact + "-") for n in names):
            check_connector(scheme, role=role)


def require_delta(spark: SparkSession, *, role: str) -> None:
    """Refuse a session without Delta Lake (e.g. someone's Spark Connect server started without it)."""
    try:
        extensions = spark.conf.get("spark.sql.extensions", "") or ""
        catalog = spark.conf.get("spark.sql.catalog.spark_catalog", "") or ""
    except Exception:  # a server that does not answer conf reads: let the first Delta read fail as it will
        return
    if DELTA_EXTENSION not in extensions or catalog != DELTA_CATALOG:
        raise SparkSetupError(
            f"{role}: the Spark session has no Delta Lake (spark.sql.extensions={extensions or 'unset'}, "
            f"spark.sql.catalog.spark_catalog={catalog or 'unset'}). Fix: start Spark with the delta-spark jars "
            f"(delta-spark_4.2_2.13-4.4.0.jar and the other jars of spark_jobs/pom.xml) and "
            f"spark.sql.extensions={DELTA_EXTENSION}, spark.sql.catalog.spark_catalog={DELTA_CATALOG}; "
            "`mvsink connect-server` does both."
        )
