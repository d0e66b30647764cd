"""Reading Delta snapshots into Spark: sources at the versions mint chose, the view's own table.

Spark cannot load Delta here (no Delta Spark connector), so a snapshot is read as Parquet from the
file list delta-rs resolves at one version.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from mvsink.columns import DIFF, ERROR, TIME, is_hidden
from mvsink.core import storage
from mvsink.core.batch import BatchDescription
from mvsink.core.deltalog import cached_snapshot
from mvsink.core.table import ViewTable, open_readable
from mvsink.definitions.view import ViewDefinition
from mvsink.spark.transforms import consolidate, expand
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
    """The Spark schema of a Delta table (from its log; no Spark call)."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(pa.schema(dt.schema().to_arrow()), prefer_timestamp_ntz=False)


def read_delta(spark: SparkSession, path: str, *, version: int | None, role: str) -> DataFrame:
    """A Delta snapshot as a DataFrame, read as Parquet from the file list delta-rs resolves (once per
    version within a write step: :func:`mvsink.core.deltalog.snapshot_cache`)."""
    if version is None:
        return _read_delta(spark, path, version=version, role=role)
    return cached_snapshot(
        ("spark", id(spark), path, version), lambda: _read_delta(spark, path, version=version, role=role)
    )


def _read_delta(spark: SparkSession, path: str, *, version: int | None, role: str) -> DataFrame:
    dt = open_readable(path, version=version, role=role)
    schema = spark_schema_of(dt)
    uris = [storage.spark_uri(u) for u in dt.file_uris()]
    if not uris:
        return spark.createDataFrame([], schema)
    reader = spark.read.schema(schema)
    if dt.metadata().partition_columns:
        base = storage.spark_uri(path) if storage.is_uri(path) else str(Path(path).resolve())
        reader = reader.option("basePath", base)
    return reader.parquet(*uris).select(*schema.names)


def register_sources(spark: SparkSession, view: ViewDefinition, desc: BatchDescription) -> None:
    """Expose each source as a temp view, at the snapshot mint chose."""
    for s in desc.sources:
        role = f"view {view.name}: source '{s.name}'"
        df = read_delta(spark, s.path, version=s.version, role=role)
        if s.kind == "view":
            assert s.view is not None
            up = ViewTable.open_path(s.path, s.view, version=s.version, check=False).frontier
            if desc.time < up.since:
                from mvsink.exceptions import SourceError

                raise SourceError(
                    f"{role}: view {s.view} is compacted up to {format_time(up.since)} "
                    f"({up.since}); it cannot be read at {format_time(desc.time)}. Fix: refresh "
                    f"at or after that time, or give {s.view} a longer retain_history."
                )
            cols = [c for c in df.columns if c not in (TIME, DIFF) and not is_hidden(c)]
            df = expand(consolidate(df, cols, through=desc.time))
            if ERROR in cols:  # a view reads another view's ok collection
                from pyspark.sql import functions as F

                df = df.where(F.col(ERROR).isNull()).drop(ERROR)
        df.createOrReplaceTempView(s.name)
