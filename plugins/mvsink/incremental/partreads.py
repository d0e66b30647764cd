"""The partitioned recompute's keyed sources read in the driver (:mod:`mvsink.incremental.partitioned`).

Restricted to the changed keys, a keyed source is a few rows, but Spark finds them by scanning the source's files
twice (once per restricted query) wherever the keys skip no file (TPC-H Q13's and Q22's customer keys in orders,
Q17's part keys in lineitem), which made the recompute cost more than the full diff. Here DuckDB scans the files
once, in the refreshing process, for both versions at once (the files both versions hold, those only the new one
holds, those only the old one holds), keeping the rows whose key is among the changed keys (integers, strings and
dates: equal in both engines), only the columns the query names; and Spark gets the rows as Parquet files of the
source's own Spark types under the view table's staging folder (:meth:`mvsink.core.staging.Staging.write_read`,
deleted when the write step ends), or as local relations where the table is not on the local disk (Spark runs a
query over local relations ~3x slower than over the same rows in Parquet). Spark still evaluates the whole query:
only the key filter runs elsewhere.

Only a plain Delta table on the local disk (plain Parquet files, no partition columns, the same schema at both
versions) of types DuckDB reads exactly (:func:`mvsink.engines.duckdb.parquet_relation`) is read so, where the
changed keys' rows are few (:data:`MAX_ROWS_FRACTION` of the files' rows, :data:`MAX_ROWS_BYTES`); anything else is
left to Spark's read (and the scan guard asked again).
"""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Iterable

    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from mvsink.core.batch import SourceRead
    from mvsink.core.deltalog import ChangeFile
    from mvsink.core.staging import Staging
    from mvsink.incremental.pruning import PrunedRead
    from mvsink.location import Location

log = logging.getLogger(__name__)

# The restricted rows of one source (both versions) held in the driver and sent to Spark, at most: this share of
# the rows of the files scanned (else the recompute saves little: TPC-H Q20's supplier keys, a change of 0.1 % of
# lineitem touching half of the suppliers, took 7x the overwrite through Connect), never more than MAX_FILE_ROWS
# written as Parquet files or MAX_ROWS sent as local relations (Spark runs a query over local relations ~3x slower
# than over Parquet files: Q17's 350,000 lineitem rows of its 11,726 changed part keys took longer than the full
# diff that way), and MAX_ROWS_BYTES
MAX_ROWS_FRACTION: Final = 0.1
MAX_ROWS: Final = 100_000
MAX_FILE_ROWS: Final = 1_000_000
MAX_ROWS_ALWAYS: Final = 10_000  # (up to this many rows, whatever their share: a small table)
MAX_ROWS_BYTES: Final = 64 * 1024 * 1024
_SIDE: Final = "__mv_side"  # 0: a file both versions hold, 1: only the new one, 2: only the old one
_KEYS: Final = "__mv_keys"


@dataclasses.dataclass(frozen=True)
class DriverRead:
    """A keyed source's restricted read in the driver: its files at the new version (and the old one, for a changed
    source), the columns read, and the bytes of the files scanned (each once)."""

    source: SourceRead
    new: tuple[ChangeFile, ...]
    old: tuple[ChangeFile, ...] | None
    schema: StructType
    bytes: int


def named_columns(query: str) -> set[str] | None:
    """Every column name ``query`` (Spark SQL) mentions, casefolded: a superset of what each source must give; None
    where it selects ``*`` (every column) or does not parse."""
    import sqlglot
    from sqlglot import exp

    try:
        tree = sqlglot.parse_one(query, dialect="spark")
    except sqlglot.errors.ParseError:
        return None
    if any(True for _ in tree.find_all(exp.Star)):
        return None
    return {c.name.casefold() for c in tree.find_all(exp.Column)}


def plan_driver_read(
    s: SourceRead,
    *,
    new_version: int,
    old_version: int | None,
    reads: dict[int, PrunedRead | None],
    columns: set[str] | None,
) -> DriverRead | str:
    """Whether source ``s`` (keyed) may be read in the driver at ``new_version`` (and ``old_version``), from its
    log alone: its files (``reads``: a pruned read's kept files, per version), the columns ``columns`` names
    (casefolded; None: every column); or why not."""
    from pyspark.sql.types import StructType

    from mvsink.spark.sources import snapshot

    if s.kind != "path":
        return f"source {s.name!r} is not a Delta path"
    versions = [new_version] + ([old_version] if old_version is not None else [])
    snaps = [snapshot(s.path, v, role=f"source {s.name!r}") for v in versions]
    if any(sn.files is None for sn in snaps):
        return f"source {s.name!r} needs Delta's reader"
    if any(sn.partition_columns for sn in snaps):
        return f"source {s.name!r} is partitioned"
    if len({sn.schema.json() for sn in snaps}) > 1:
        return f"source {s.name!r} changed its schema"
    kept: list[tuple[ChangeFile, ...]] = []
    for sn, v in zip(snaps, versions, strict=True):
        files = list(sn.files or [])
        read = reads.get(v)
        if read is not None and read.paths is not None:
            keep = set(read.paths)
            files = [f for f in files if f.path in keep]
        if any(not f.path.is_local for f in files):
            return f"source {s.name!r} is not on the local disk"
        kept.append(tuple(files))
    schema = snaps[0].schema
    fields = [f for f in schema.fields if columns is None or f.name.casefold() in columns]
    size = sum(f.size for f in {f.path: f for files in kept for f in files}.values())
    return DriverRead(s, kept[0], kept[1] if len(kept) > 1 else None, StructType(fields), size)


def read_in_driver(
    spark: SparkSession,
    dr: DriverRead,
    *,
    column: str,
    values: list[Any],
    nulls: bool,
    staging: Staging | None = None,
    name: str = "rows",
) -> tuple[DataFrame, DataFrame | None] | str:
    """The rows of ``dr``'s source whose ``column`` is one of ``values`` (``nulls``: or NULL), at the new version
    and (for a changed source) the old one, as Spark DataFrames of the source's types; or why not. With
    ``staging`` (a table on the local disk) they are Parquet files ``<name>_new``, ``<name>_old`` of the batch's
    input rows, else local relations."""
    from mvsink.spark.sources import empty_frame

    files = staging is not None and staging.reads.is_local
    rows = restricted_rows(dr, column=column, values=values, nulls=nulls, cap=MAX_FILE_ROWS if files else MAX_ROWS)
    if isinstance(rows, str):
        return rows
    return _frames(spark, dr, rows, empty_frame, staging=staging if files else None, name=name)


def restricted_rows(
    dr: DriverRead, *, column: str, values: list[Any], nulls: bool, cap: int = MAX_FILE_ROWS
) -> dict[str, pa.Table] | None | str:
    """The rows of ``dr``'s source whose ``column`` is one of ``values`` (``nulls``: or NULL) as Arrow tables of
    the source's Spark types: ``new`` and ``old`` (the same table for an unchanged source); None where no file is
    read; or why not (at most ``cap`` rows, and :data:`MAX_ROWS_FRACTION` of the files' rows beyond
    :data:`MAX_ROWS_ALWAYS`). One DuckDB scan of the files of both versions."""
    from pyspark.sql.pandas.types import to_arrow_schema

    target = to_arrow_schema(dr.schema, timezone="UTC")
    return restricted_arrow(
        dr.source.name, dr.new, dr.old, target, column=column, values=values, nulls=nulls, cap=cap, size=dr.bytes
    )


def restricted_arrow(
    source: str,
    new_files: tuple[ChangeFile, ...],
    old_files: tuple[ChangeFile, ...] | None,
    target: pa.Schema,
    *,
    column: str,
    values: list[Any],
    nulls: bool,
    cap: int = MAX_FILE_ROWS,
    size: int,
) -> dict[str, pa.Table] | None | str:
    """:func:`restricted_rows` of the files ``new_files`` and ``old_files`` (None: an unchanged source) of
    ``source`` read as the Arrow schema ``target`` (Spark's types of the columns read), without Spark: the plan
    facts' partitioned recompute (:mod:`mvsink.write.driverpart`) reads them so. ``size``: the bytes recorded as
    read."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from mvsink.core.arrowvalues import array_of, scalar_of
    from mvsink.core.readlog import record
    from mvsink.engines.duckdb import duckdb_cursor, duckdb_identifier, parquet_relation

    names = [(n, n) for n in target.names]
    new = {f.path: f for f in new_files}
    old = {f.path: f for f in old_files} if old_files is not None else new
    groups = [
        (0, [p for p in new if p in old]),
        (1, [p for p in new if p not in old]),
        (2, [p for p in old if p not in new]),
    ]
    parts = []
    for side, paths in groups:
        if not paths:
            continue
        rel = parquet_relation(paths, names, target)
        if rel is None:
            return f"DuckDB may not read source {source!r} exactly"
        parts.append(f"SELECT *, {side} AS {_SIDE} FROM {rel}")
    if not parts:
        return None
    column = next((n for n in target.names if n.casefold() == column.casefold()), column)
    if column not in target.names:
        return f"source {source!r}: its key column {column!r} is not read"
    c = duckdb_identifier(column)
    key_type = target.field(column).type
    keys = pa.Table.from_arrays([array_of(values, key_type)], names=["k"])  # (pa.array would import pandas)
    where = f"{c} IN (SELECT k FROM {_KEYS})" + (f" OR {c} IS NULL" if nulls else "")
    share = int(MAX_ROWS_FRACTION * _rows(p for _, paths in groups for p in paths))
    cap = max(MAX_ROWS_ALWAYS, min(cap, share))
    con = duckdb_cursor()
    try:
        con.register(_KEYS, keys)
        got = con.sql(f"SELECT * FROM ({' UNION ALL '.join(parts)}) WHERE {where} LIMIT {cap + 1}").to_arrow_table()
    except Exception as exc:  # noqa: BLE001 (any DuckDB failure: Spark reads the source)
        return f"DuckDB could not read source {source!r} ({str(exc).splitlines()[0]})"
    finally:
        con.close()
    if got.num_rows > cap:
        what = f"{MAX_ROWS_FRACTION:.0%} of its rows" if cap == share else f"{cap} of its rows"
        return f"source {source!r}: more than {what} hold a changed key"
    if got.nbytes > MAX_ROWS_BYTES:
        return f"source {source!r}: {got.nbytes} bytes of restricted rows, over the driver's budget"
    record(source, bytes_read=size, files=len({*new, *old}))
    side = got.column(_SIDE)
    try:
        return {
            # (scalars made by arrowvalues: pyarrow's conversion of a Python int imports pandas)
            "new": got.filter(pc.not_equal(side, scalar_of(2, side.type))).drop_columns([_SIDE]).cast(target),
            "old": got.filter(pc.not_equal(side, scalar_of(1, side.type))).drop_columns([_SIDE]).cast(target),
        }
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        return f"source {source!r}: a value that does not cast exactly"


def _rows(paths: Iterable[Location]) -> int:
    """Rows of the local Parquet files ``paths`` (their footers)."""
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(p.key).metadata.num_rows for p in paths)


def _frames(
    spark: SparkSession,
    dr: DriverRead,
    rows: dict[str, pa.Table] | None,
    empty: Any,
    *,
    staging: Staging | None,
    name: str,
) -> tuple[DataFrame, DataFrame | None]:
    from mvsink.core.sparklocation import spark_uri

    def frame(t: pa.Table | None, role: str) -> DataFrame:
        if t is None or t.num_rows == 0:
            return empty(spark, dr.schema)  # type: ignore[no-any-return]
        written = staging.write_read(f"{name}_{role}", t) if staging is not None else None
        if written is not None:
            return spark.read.schema(dr.schema).parquet(spark_uri(written))
        return spark.createDataFrame(t, schema=dr.schema)

    new = frame(rows["new"] if rows else None, "new")
    old = frame(rows["old"] if rows else None, "old") if dr.old is not None else None
    return new, old
