"""Reading Delta snapshots into Spark: sources at the versions mint chose, the view's own table.

Every snapshot is read by Delta's own reader (delta-spark: ``spark.read.format("delta")`` at
``versionAsOf``), so deletion vectors, column mapping, partition values kept only in the log, type
widening and ``timestamp_ntz`` are Delta's job. delta-rs still resolves versions and reads the log.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from mvsink.columns import DIFF, ERROR, TIME, is_hidden
from mvsink.core import storage
from mvsink.core.batch import BatchDescription, SourceRead
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
    """The Spark schema of a Delta table (from its log; no Spark call): ``timestamp`` columns are
    ``TIMESTAMP``, ``timestamp_ntz`` ones ``TIMESTAMP_NTZ``, as Delta's reader reads them."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(pa.schema(dt.schema().to_arrow()), prefer_timestamp_ntz=True)


def read_delta(spark: SparkSession, path: str, *, version: int | None, role: str) -> DataFrame:
    """A Delta snapshot as a DataFrame, read by Delta's reader at ``version`` (the DataFrame is built
    once per version within a write step: :func:`mvsink.core.deltalog.snapshot_cache`)."""
    if version is None:
        return _read_delta(spark, path, version=version, role=role)
    return cached_snapshot(
        ("spark", id(spark), path, version), lambda: _read_delta(spark, path, version=version, role=role)
    )


def _read_delta(spark: SparkSession, path: str, *, version: int | None, role: str) -> DataFrame:
    open_readable(path, version=version, role=role)  # a clear error for a missing table or version
    return delta_reader(spark, path, version=version)


def delta_reader(spark: SparkSession, path: str, *, version: int | None) -> DataFrame:
    """``spark.read.format("delta")`` of the table at ``path`` (at ``version``), by Spark's URI for it."""
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", str(version))
    return reader.load(delta_uri(path))


def delta_uri(path: str) -> str:
    """The URI Spark's Delta reader loads the table at ``path`` by (``s3a://`` for ``s3://``, absolute paths)."""
    return storage.spark_uri(path) if storage.is_uri(path) else str(Path(path).resolve())


def register_sources(spark: SparkSession, view: ViewDefinition, desc: BatchDescription) -> None:
    """Expose each source as a temp view, at the snapshot mint chose."""
    for s in desc.sources:
        read_source(spark, view, s, version=s.version, time=desc.time).createOrReplaceTempView(s.name)


def read_source(spark: SparkSession, view: ViewDefinition, s: SourceRead, *, version: int, time: int) -> DataFrame:
    """Source ``s`` as the view's query reads it: a table at ``version``; an upstream view's contents at ``time``
    from its table at ``version`` (its ok rows, each repeated by its multiplicity, without hidden columns)."""
    role = f"view {view.name}: source '{s.name}'"
    df = read_delta(spark, s.path, version=version, role=role)
    if s.kind != "view":
        return df
    assert s.view is not None
    up = ViewTable.open_path(s.path, s.view, version=version, check=False).frontier
    if time < up.since:
        from mvsink.exceptions import SourceError

        raise SourceError(
            f"{role}: view {s.view} is compacted up to {format_time(up.since)} "
            f"({up.since}); it cannot be read at {format_time(time)}. Fix: refresh "
            f"at or after that time, or give {s.view} a longer retain_history."
        )
    return view_rows(consolidate(df, visible_columns(df.columns), through=time), expand_rows=True)


def visible_columns(columns: list[str]) -> list[str]:
    """The columns of an upstream view's table that make a row: its own and ``_mv_error`` (not the hidden state)."""
    return [c for c in columns if c not in (TIME, DIFF) and not is_hidden(c)]


def view_rows(consolidated: DataFrame, *, expand_rows: bool) -> DataFrame:
    """An upstream view's consolidated updates -> its ok rows (``_mv_error`` dropped), repeated by their
    multiplicity (``expand_rows``), else kept with their ``_mv_diff``."""
    from pyspark.sql import functions as F

    df = consolidated
    if ERROR in df.columns:  # a view reads another view's ok collection
        df = df.where(F.col(ERROR).isNull()).drop(ERROR)
    return expand(df) if expand_rows else df
