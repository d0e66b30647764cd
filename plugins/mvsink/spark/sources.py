"""Reading Delta snapshots into Spark: sources at the versions mint chose, the view's own table.

A snapshot whose files are plain Parquet (no deletion vectors, column mapping, type widening or VARIANT:
:func:`mvsink.core.table.plain_parquet_files`) is read as its active files from the log that delta-rs
resolved, with the table's schema and partition values from the log (:func:`read_files`): Spark plans a
Parquet scan of a file list in milliseconds, where Delta's reader loads the snapshot's state and, for a
filtered read, runs a data-skipping query first (0.3-0.6 s a scan, measured at TPC-H SF 1). A pruned read
(:mod:`mvsink.incremental.pruning`) passes the files the log's statistics keep, so the skipping is ours. Every
other snapshot is read by Delta's own reader (delta-spark: ``spark.read.format("delta")`` at
``versionAsOf``), so deletion vectors, column mapping and type widening are Delta's job.
``MVSINK_SOURCE_READS=delta`` sends every read through Delta's reader.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from mvsink import settings
from mvsink.columns import DIFF, ERROR, TIME
from mvsink.core.batch import BatchDescription, SourceRead
from mvsink.core.deltalog import CHANGE_TYPE, ChangeFile, cached_snapshot, snapshot_files
from mvsink.core.sparklocation import spark_uri
from mvsink.core.table import ViewTable, open_readable, plain_parquet_files
from mvsink.definitions.view import ViewDefinition
from mvsink.location import Location, Where, is_uri
from mvsink.spark.session import is_connect
from mvsink.spark.transforms import view_contents
from mvsink.times import format_time

if TYPE_CHECKING:
    import pyarrow as pa
    from deltalake import DeltaTable
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType


def arrow_table_schema(schema: StructType, *, with_error: bool = False) -> pa.Schema:
    """Arrow schema of the view's table: the query's columns, then ``_mv_time``, ``_mv_diff``
    (and ``_mv_error`` for a view with checks)."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    user = to_arrow_schema(schema, timezone="UTC")
    fields = [f.with_nullable(True) for f in user] + [pa.field(TIME, pa.int64()), pa.field(DIFF, pa.int64())]
    if with_error:
        fields.append(pa.field(ERROR, pa.string()))
    return pa.schema(fields)


def spark_schema_of(dt: DeltaTable) -> StructType:
    """The Spark schema of a Delta table (from its log; no Spark call): ``timestamp`` columns are
    ``TIMESTAMP``, ``timestamp_ntz`` ones ``TIMESTAMP_NTZ``, as Delta's reader reads them."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(pa.schema(dt.schema().to_arrow()), prefer_timestamp_ntz=True)


# partition column types whose log text Spark casts back to the same value (others go through Delta's reader)
_PLAIN_PARTITION_TYPES = (
    "string",
    "byte",
    "short",
    "integer",
    "long",
    "boolean",
    "date",
)


@dataclasses.dataclass(eq=False)
class Snapshot:
    """A Delta table at one version as Spark reads it, opened once per write step (:func:`snapshot`): where it is,
    delta-rs's handle, and (read on first use) its Spark schema, partition columns and plain files."""

    path: Where
    version: int
    delta: DeltaTable

    @functools.cached_property
    def schema(self) -> StructType:
        return spark_schema_of(self.delta)

    @functools.cached_property
    def partition_columns(self) -> list[str]:
        return list(self.delta.metadata().partition_columns)

    @functools.cached_property
    def files(self) -> list[ChangeFile] | None:
        """The active files if Spark may read them as plain Parquet (``MVSINK_SOURCE_READS=auto``, files plain,
        partition columns of simple types and at most ``MVSINK_PLAIN_READ_MAX_PARTITIONS`` values), else None
        (Delta's reader)."""
        if settings.source_reads() != "auto" or not plain_parquet_files(self.delta):
            return None
        parts = self.partition_columns
        if parts and any(self.schema[c].dataType.typeName() not in _PLAIN_PARTITION_TYPES for c in parts):
            return None
        files = snapshot_files(self.path, self.version)
        if files is None or len({f.partition_values for f in files}) > settings.plain_read_max_partitions():
            return None
        return files

    def read_files(self, spark: SparkSession, files: list[ChangeFile]) -> DataFrame:
        """``files`` (some of :attr:`files`) as plain Parquet rows of the table's schema."""
        return read_files(spark, files, self.schema, self.partition_columns, with_change_type=False)


def snapshot(path: Where, version: int, *, role: str) -> Snapshot:
    """The table at ``path`` at ``version`` ("role" names it in errors), opened once per write step."""
    return cached_snapshot(
        ("snapshot", path, version),
        lambda: Snapshot(path, version, open_readable(path, version=version, role=role)),  # (an error if missing)
    )


def read_delta(spark: SparkSession, path: Where, *, version: int | None, role: str) -> DataFrame:
    """A Delta snapshot as a DataFrame at ``version``: its files as plain Parquet where :func:`plain_files` lists
    them, else by Delta's reader (the DataFrame is built once per version within a write step:
    :func:`mvsink.core.deltalog.snapshot_cache`)."""
    if version is None:
        open_readable(path, version=version, role=role)  # a clear error for a missing table
        return delta_reader(spark, path, version=version)
    return read_snapshot(spark, snapshot(path, version, role=role))


def read_snapshot(spark: SparkSession, snap: Snapshot) -> DataFrame:
    """:func:`read_delta` of an opened snapshot (built once per write step)."""

    def make() -> DataFrame:
        if snap.files is None:
            return delta_reader(spark, snap.path, version=snap.version)
        return snap.read_files(spark, snap.files)

    return cached_snapshot(("spark", id(spark), snap.path, snap.version), make)


def read_delta_files(
    spark: SparkSession, path: Where, *, version: int, files: list[Location], role: str
) -> DataFrame | None:
    """Only ``files`` (a subset of the snapshot's active files, as :func:`plain_files` lists them) of the snapshot at ``version``,
    as plain Parquet; None where the snapshot is not read that way (:func:`plain_files`)."""
    listed = plain_files(path, version)
    if listed is None:
        return None
    wanted = set(files)
    return snapshot(path, version, role=role).read_files(spark, [f for f in listed if f.path in wanted])


def plain_files(path: Where, version: int) -> list[ChangeFile] | None:
    """The snapshot's active files if Spark may read them as plain Parquet (:attr:`Snapshot.files`), else None
    (Delta's reader). Cached per write step."""
    if settings.source_reads() != "auto":
        return None
    return snapshot(path, version, role=f"Delta table {path}").files


def read_files(
    spark: SparkSession,
    files: list[ChangeFile],
    schema: StructType,
    partition_columns: list[str],
    *,
    with_change_type: bool,
) -> DataFrame:
    """Plain Parquet ``files`` of a Delta table as rows of ``schema`` (its logical schema: a column missing
    from a file is NULL), partition columns from the log's values (one scan per distinct value;
    ``with_change_type``: change data feed files, with their ``_change_type``)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if not files:  # a local relation (an empty RDD would be a scan of its own)
        out_schema = T.StructType([schema[n] for n in schema.names])
        if with_change_type:
            out_schema = out_schema.add(CHANGE_TYPE, T.StringType())
        return empty_frame(spark, out_schema)
    data_schema = T.StructType([f for f in schema.fields if f.name not in partition_columns])
    if with_change_type:
        data_schema = data_schema.add(CHANGE_TYPE, T.StringType())
    names = schema.names + ([CHANGE_TYPE] if with_change_type else [])
    groups: dict[tuple[tuple[str, str | None], ...], list[Location]] = defaultdict(list)
    for f in files:
        groups[f.partition_values].append(f.path)
    frames: list[DataFrame] = []
    for pv, paths in groups.items():
        with _listed_in_driver(spark, paths):
            df = spark.read.schema(data_schema).parquet(*(spark_uri(p) for p in paths))
        values = dict(pv)
        for c in partition_columns:
            df = df.withColumn(c, F.lit(values.get(c)).cast(schema[c].dataType))
        # (without partition columns the read's columns are already ``names``: no Project, which would cost every
        # plan over this source ~40 ms more to write as JSON, plan/read.py)
        frames.append(df.select(*names) if partition_columns else df)
    return functools.reduce(lambda a, b: a.unionByName(b), frames)


_LISTING_THRESHOLD = "spark.sql.sources.parallelPartitionDiscovery.threshold"


@contextlib.contextmanager
def _listed_in_driver(spark: SparkSession, paths: list[Location]) -> Iterator[None]:
    """Local ``paths`` looked up by the driver, not by a Spark job: over 32 paths (the threshold's default)
    Spark lists them in a job of its own (0.5 s for a 75-file table), though a local file's status costs
    microseconds. Object-store paths keep Spark's parallel listing; so does Spark Connect (analysed later)."""
    if len(paths) <= 32 or any(is_uri(p) for p in paths) or is_connect(spark):
        yield
        return
    before = spark.conf.get(_LISTING_THRESHOLD) or "32"
    spark.conf.set(_LISTING_THRESHOLD, str(len(paths) + 1))
    try:
        yield
    finally:
        spark.conf.set(_LISTING_THRESHOLD, before)


def empty_frame(spark: SparkSession, schema: StructType) -> DataFrame:
    """No rows of ``schema``, as a local relation."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return spark.createDataFrame(to_arrow_schema(schema, timezone="UTC").empty_table(), schema=schema)


def delta_reader(spark: SparkSession, path: Where, *, version: int | None) -> DataFrame:
    """``spark.read.format("delta")`` of the table at ``path`` (at ``version``), by Spark's URI for it."""
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", str(version))
    return reader.load(delta_uri(path))


def delta_uri(path: Where) -> str:
    """The URI Spark's Delta reader loads the table at ``path`` by (``s3a://`` for ``s3://``, absolute paths)."""
    return spark_uri(path) if is_uri(path) else str(Path(path).resolve())


def register_sources(spark: SparkSession, view: ViewDefinition, desc: BatchDescription) -> None:
    """Expose each source as a temp view, at the snapshot mint chose."""
    for s in desc.sources:
        read_source(spark, view, s, version=s.version, time=desc.time).createOrReplaceTempView(s.name)


def read_source(spark: SparkSession, view: ViewDefinition, s: SourceRead, *, version: int, time: int) -> DataFrame:
    """Source ``s`` as the view's query reads it: a table at ``version``; an upstream view's contents at ``time``
    from its table at ``version`` (its ok rows, each repeated by its multiplicity, without hidden columns)."""
    role = f"view {view.name}: source '{s.name}'"
    snap = snapshot(s.path, version, role=role)
    df = read_snapshot(spark, snap)
    if s.kind != "view":
        return df
    assert s.view is not None
    up = ViewTable(s.path, s.view, snap.delta).frontier  # (the snapshot's handle: not opened again)
    if time < up.since:
        from mvsink.exceptions import SourceError

        raise SourceError(
            f"{role}: view {s.view} is compacted up to {format_time(up.since)} "
            f"({up.since}); it cannot be read at {format_time(time)}. Fix: refresh "
            f"at or after that time, or give {s.view} a longer retain_history."
        )
    return view_contents(df, through=time)
