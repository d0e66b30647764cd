"""A class-data sharing archive of the Spark driver JVM's classes: a new driver starts in half the CPU time.

Every spark-submit write step (the CLI's default runner, the DAG's write task) starts a JVM that loads and verifies
some 15,000 classes of Spark, Delta and Hadoop before its first query: on 2 cores about 30 CPU-seconds of a small
refresh's 32. The JVM can map those classes, already parsed and verified, from an archive made by an earlier run
(JDK's dynamic class-data sharing, ``-XX:ArchiveClassesAtExit`` then ``-XX:SharedArchiveFile``). Measured here
(docs/spark.md): a small refresh through spark-submit 20.0 s wall / 33 CPU-s without, 12.3 s / 20 CPU-s with it
(10.5 s / 13 CPU-s with the JIT compiler's first tier only too, as the tests' short-lived drivers run).

- :mod:`mvsink.write.cdsarchive` makes the archive once per machine and install (``make install`` runs it:
  ``python -m mvsink.write.cdsarchive``): a real refresh of a small view through spark-submit, its JVM told to
  archive the classes it loaded at exit. About 50 s.
- :func:`driver_java_options` gives the option that maps it, for every driver JVM mvsink starts
  (:func:`mvsink.spark.conf.driver_conf`: spark-submit, the in-process session, the Spark Connect server), when an
  archive of this JVM and these jars exists (``MVSINK_SPARK_CDS=false`` turns it off).

The archive's name is a digest of what it depends on (the ``java`` binary, pyspark's jars, the jars folder's), so a
new JDK, pyspark or jar set simply finds none (the JVM then starts as before) until ``make install`` builds one.
The JVM itself refuses an archive that does not match its class path (``-Xshare:auto``: it runs without).
No pyspark import here.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import logging
import shutil
from pathlib import Path

from mvsink import settings
from mvsink.spark import jars

log = logging.getLogger(__name__)

ARCHIVE_DIR = "cds"  # beside the jars it was made of (jars.jars_folder())
#: JVM options beside the archive's: the unified log's cds messages off (a warning about an archive the JVM cannot
#: use, e.g. a class path changed since, would go to stdout, among what a job prints there).
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"


def java_binary() -> Path | None:
    """The ``java`` spark-submit runs: ``$JAVA_HOME/bin/java``, else the one on ``PATH`` (resolved), or None."""
    home = (settings.process_env().get("JAVA_HOME") or "").strip()
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).exists() else None


def pyspark_jars_dir() -> Path | None:
    """pyspark's ``jars`` folder (found without importing pyspark)."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "jars"
    return folder if folder.is_dir() else None


def _stamp(path: Path) -> str:
    st = path.stat()
    return f"{path.name}:{st.st_size}:{st.st_mtime_ns}"


@functools.cache
def _key(java: str, spark_jars: str, our_jars: str) -> str:
    """A digest of the JVM, pyspark's jars and the jars folder's: what a driver's class path is made of."""
    h = hashlib.sha256()
    h.update(_stamp(Path(java)).encode())
    for folder in (Path(spark_jars), Path(our_jars)):
        for p in sorted(folder.glob("*.jar")):
            h.update(b"\0" + _stamp(p).encode())
    return h.hexdigest()[:16]


def archive_path() -> Path | None:
    """Where the archive of this JVM and these jars is (or would be), or None where one cannot be made (no java,
    no pyspark)."""
    java, spark_jars = java_binary(), pyspark_jars_dir()
    if java is None or spark_jars is None:
        return None
    folder = jars.jars_folder()
    return folder / ARCHIVE_DIR / f"driver-{_key(str(java), str(spark_jars), str(folder))}.jsa"


def driver_java_options() -> str | None:
    """The driver JVM's options that map the archive, or None (none built for this JVM and these jars, or
    ``MVSINK_SPARK_CDS=false``)."""
    if not settings.spark_cds():
        return None
    path = archive_path()
    if path is None or not path.is_file():
        return None
    return f"-XX:SharedArchiveFile={path} {QUIET}"


def with_java_options(conf: dict[str, str], options: str | None) -> dict[str, str]:
    """``conf`` with ``options`` put before its ``spark.driver.extraJavaOptions`` (a user's own options kept, and
    left alone where they already choose an archive or turn sharing off)."""
    if not options:
        return conf
    key = "spark.driver.extraJavaOptions"
    theirs = conf.get(key, "").strip()
    if any(o in theirs for o in ("SharedArchiveFile", "ArchiveClassesAtExit", "-Xshare")):
        return conf
    return {**conf, key: f"{options} {theirs}".strip()}
