"""Source tables written by delta-spark (Delta's own Spark writer, not delta-rs), dated by the test, and the
oracle that reads them back through delta-spark.

- :class:`Lake`: one source table at a path. Every write (``create``, ``append``, ``sql``, ``merge``) must make
  exactly one commit, which is then dated at the next tick of a shared :class:`Clock` (the commit file's
  modification time, which Delta time travel and mvsink read; the tables are created without in-commit
  timestamps). The table's versions at each refresh are known to the test, not resolved by mvsink.
- :func:`spark_oracle`: the view's query evaluated by Spark over ``spark.read.format("delta")
  .option("versionAsOf", v)`` of each source, in a separate Spark session (its own temp views), as a multiset.
- :func:`strip_partition_columns`: rewrite the data files a commit added without the partition columns (as
  writers that keep partition values only in the log leave them), keeping the log consistent.
- log inspection (``log_actions``, ``active_adds``) to prove a scenario really has the feature it is about.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow.parquet as pq

from tests.support.oracle import multiset

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

MINUTE = 60_000


class Clock:
    """Commit and refresh times of one test, in ms, strictly increasing."""

    def __init__(self, start: int) -> None:
        self.now = start

    def tick(self, ms: int = MINUTE) -> int:
        self.now += ms
        return self.now


def _commit_file(path: str, version: int) -> Path:
    return Path(path) / "_delta_log" / f"{version:020d}.json"


def newest_version(path: str | Path) -> int:
    """The newest commit's version, from the log folder's listing (-1: no table)."""
    log = Path(path) / "_delta_log"
    if not log.exists():
        return -1
    versions = [int(f.name[:20]) for f in log.iterdir() if f.name.endswith(".json") and f.name[:20].isdigit()]
    return max(versions, default=-1)


def log_actions(path: str | Path, version: int) -> list[dict[str, Any]]:
    """The actions of one commit file, in file order."""
    with open(_commit_file(str(path), version)) as f:
        return [json.loads(line) for line in f if line.strip()]


def active_adds(path: str | Path) -> dict[str, dict[str, Any]]:
    """The add actions of the newest version, by path, replayed from every JSON commit (the tables keep them all:
    :meth:`Lake.create` turns off Delta's log cleanup)."""
    active: dict[str, dict[str, Any]] = {}
    for v in range(newest_version(path) + 1):
        for a in log_actions(path, v):
            if "add" in a:
                active[a["add"]["path"]] = a["add"]
            elif "remove" in a:
                active.pop(a["remove"]["path"], None)
    return active


def metadata(path: str | Path) -> dict[str, Any]:
    """The newest metaData action."""
    found: dict[str, Any] = {}
    for v in range(newest_version(path) + 1):
        for a in log_actions(path, v):
            if "metaData" in a:
                found = a["metaData"]
    return found


def protocol(path: str | Path) -> dict[str, Any]:
    """The newest protocol action."""
    found: dict[str, Any] = {}
    for v in range(newest_version(path) + 1):
        for a in log_actions(path, v):
            if "protocol" in a:
                found = a["protocol"]
    return found


class Lake:
    """One source table written by delta-spark, each commit dated by ``clock``."""

    def __init__(self, spark: SparkSession, path: str | Path, clock: Clock) -> None:
        self.spark = spark
        self.path = str(path)
        self.clock = clock
        self.ref = f"delta.`{self.path}`"

    # ---------------------------------------------------------------- dating commits

    def version(self) -> int:
        return newest_version(self.path)

    def _dated(self, before: int) -> int:
        """Check that exactly one commit was made since ``before``; date it at the next tick. Its version."""
        v = self.version()
        assert v == before + 1, f"{self.path}: expected one commit after version {before}, the log is at {v}"
        t = self.clock.tick()
        os.utime(_commit_file(self.path, v), ns=(t * 1_000_000, t * 1_000_000))
        return v

    # ---------------------------------------------------------------- writes

    def frame(self, rows: list[dict[str, Any]], ddl: str | None = None) -> DataFrame:
        """``rows`` as a DataFrame with the table's current columns (or ``ddl``); keys the table lacks are left out."""
        if ddl is None:
            schema = self.spark.read.format("delta").load(self.path).schema
            ddl = ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in schema.fields)
            names = schema.names
        else:
            names = [c.strip().split(" ")[0].strip("`") for c in ddl.split(",")]
        return self.spark.createDataFrame([tuple(r.get(n) for n in names) for r in rows], ddl)

    def create(
        self,
        rows: list[dict[str, Any]],
        ddl: str,
        *,
        properties: dict[str, str] | None = None,
        partition_by: tuple[str, ...] = (),
        files: int = 3,
    ) -> int:
        """Create the table with ``rows`` (in ``files`` files by ``id`` range, per partition) and table
        ``properties``. Range files let a predicate on ``id`` rewrite some files and leave others as written."""
        assert self.version() == -1, self.path
        # Commits are dated in the past: without these, Delta's log cleanup at a checkpoint would delete the
        # commit files older than its retention (30 days by modification time), and in-commit timestamps
        # would override the dates.
        props = {
            "delta.enableInCommitTimestamps": "false",
            "delta.enableExpiredLogCleanup": "false",
            **(properties or {}),
        }
        df = self.frame(rows, ddl)
        writer = (df.repartitionByRange(files, "id") if "id" in df.columns else df.repartition(files)).write.format(
            "delta"
        )
        for k, v in props.items():
            writer = writer.option(k, v)
        if partition_by:
            writer = writer.partitionBy(*partition_by)
        writer.save(self.path)
        return self._dated(-1)

    def append(self, rows: list[dict[str, Any]]) -> int:
        before = self.version()
        self.frame(rows).write.format("delta").mode("append").save(self.path)
        return self._dated(before)

    def sql(self, statement: str) -> int:
        """Run one SQL statement (``{t}`` stands for the table) that makes one commit."""
        before = self.version()
        self.spark.sql(statement.format(t=self.ref))
        return self._dated(before)

    def merge(self, rows: list[dict[str, Any]], *, delete_when: str = "s.q IS NULL") -> int:
        """MERGE ``rows`` on ``id``: a matched row is deleted where ``delete_when``, else replaced; others inserted."""
        before = self.version()
        self.frame(rows).createOrReplaceTempView("mvsink_merge_source")
        self.spark.sql(
            f"MERGE INTO {self.ref} AS t USING mvsink_merge_source AS s ON t.id = s.id "
            f"WHEN MATCHED AND {delete_when} THEN DELETE "
            "WHEN MATCHED THEN UPDATE SET * "
            "WHEN NOT MATCHED THEN INSERT *"
        )
        self.spark.catalog.dropTempView("mvsink_merge_source")
        return self._dated(before)

    # ---------------------------------------------------------------- reading back

    def read(self, version: int) -> DataFrame:
        return self.spark.read.format("delta").option("versionAsOf", version).load(self.path)

    def columns(self) -> list[str]:
        return self.spark.read.format("delta").load(self.path).columns


def spark_oracle(spark: SparkSession, query: str, sources: dict[str, tuple[str, int]]) -> Counter[tuple[Any, ...]]:
    """``query`` evaluated by Spark (no mvsink) over each source read by delta-spark at its version:
    ``sources`` maps the query's table names to (path, version). A multiset of rows."""
    session = spark.newSession()  # its own temp views: mvsink's (same names) stay untouched
    for name, (path, version) in sources.items():
        session.read.format("delta").option("versionAsOf", version).load(path).createOrReplaceTempView(name)
    return multiset(session.sql(query).toArrow())


def strip_partition_columns(spark: SparkSession, path: str, version: int) -> list[str]:
    """Rewrite each data file that commit ``version`` added without the table's partition columns (pyarrow,
    same file name), as writers that keep partition values only in the log leave them.

    The log stays consistent: each add action's ``size`` is patched to the new file's size, Hadoop's ``.crc``
    sidecars of the file and of the commit file and the commit's ``.crc`` checksum (which records the table's size) are removed, and
    Delta's in-memory snapshot cache is cleared. Returns the rewritten paths (relative to the table root)."""
    log = _commit_file(path, version)
    parts = metadata(path)["partitionColumns"]
    assert parts, f"{path} is not partitioned"
    mtime = os.stat(log).st_mtime_ns
    lines = []
    rewritten = []
    for a in log_actions(path, version):
        add = a.get("add")
        if add is not None:
            f = Path(path) / add["path"]
            table = pq.read_table(f)
            kept = [c for c in table.column_names if c not in parts]
            if len(kept) != len(table.column_names):
                pq.write_table(table.select(kept), f, compression="snappy")
                sidecar = f.parent / f".{f.name}.crc"
                sidecar.unlink(missing_ok=True)
                add["size"] = f.stat().st_size
                rewritten.append(add["path"])
        lines.append(json.dumps(a))
    log.write_text("\n".join(lines) + "\n")
    os.utime(log, ns=(mtime, mtime))  # the commit keeps its date
    (log.parent / f".{log.name}.crc").unlink(missing_ok=True)  # Hadoop's sidecar of the commit file
    (log.parent / f"{version:020d}.crc").unlink(missing_ok=True)
    spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()  # type: ignore[union-attr]
    return rewritten


def file_columns(path: str | Path, rel: str) -> list[str]:
    """The columns a data file holds (from its Parquet footer)."""
    return pq.read_schema(Path(path) / rel).names
