"""Small change sets finished in the driver: collected once as Arrow, consolidated there, staged without Spark.

A refresh of a small change spends most of its Spark time on fixed per-stage costs: the shuffle that
consolidates the corrections per row, and the Parquet write with its commit protocol. When the unconsolidated
corrections are few (at most :data:`MAX_DRIVER_ROWS`), one Spark job collects them (``toArrow``, no shuffle)
and pyarrow (DuckDB for nested columns) sums ``_mv_diff`` per row in the driver; the write step then stages the Arrow table with pyarrow
(:func:`mvsink.spark.job._write_local`).

Only for columns whose equality is the same in Spark and in the driver (:func:`same_equality`): integers, decimals,
binary-collation strings, binary, booleans, dates, timestamps, and structs and arrays of them. Floating-point
values are not (Spark's grouping makes ``-0.0`` equal to ``0.0`` and every NaN equal), nor collated strings.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Final

from mvsink.columns import DIFF

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa
    from pyspark.sql import DataFrame
    from pyspark.sql.types import DataType

# Up to this many unconsolidated correction rows, they are consolidated in the driver.
MAX_DRIVER_ROWS: Final = 200_000

_DUCKDB: duckdb.DuckDBPyConnection | None = None
_DUCKDB_LOCK = threading.Lock()


def same_equality(dt: DataType) -> bool:
    """Do Spark's grouping and the driver's (pyarrow, DuckDB) consider the same values of this type equal?"""
    from pyspark.sql import types as T

    if isinstance(dt, T.StringType):
        return getattr(dt, "collation", "UTF8_BINARY") == "UTF8_BINARY"
    if isinstance(dt, T.ArrayType):
        return same_equality(dt.elementType)
    if isinstance(dt, T.StructType):
        return all(same_equality(f.dataType) for f in dt.fields)
    return isinstance(
        dt,
        (T.IntegralType, T.DecimalType, T.BinaryType, T.BooleanType, T.DateType, T.TimestampType, T.TimestampNTZType),
    )


def consolidate_arrow(rows: pa.Table, columns: list[str]) -> pa.Table:
    """``rows`` summed per ``columns`` (``_mv_diff`` summed as BIGINT, zero sums dropped), in the driver.

    pyarrow's hash grouping for flat columns (NULLs form one group, as in Spark); DuckDB where a column is
    nested (pyarrow cannot group by a struct or a list).
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    if any(pa.types.is_nested(rows.schema.field(c).type) for c in columns):
        return _consolidate_duckdb(rows, columns)
    diffs = rows.column(DIFF).cast(pa.int64())
    if not columns:
        total = pc.sum(diffs).as_py() or 0
        return pa.table({DIFF: pa.array([total] if total else [], pa.int64())})
    summed = (
        pa.table([*(rows.column(c) for c in columns), diffs], names=[*columns, DIFF])
        .group_by(columns, use_threads=False)
        .aggregate([(DIFF, "sum")])
    )
    out = summed.select([*columns, f"{DIFF}_sum"]).rename_columns([*columns, DIFF])
    return out.filter(pc.not_equal(out.column(DIFF), 0))


def duckdb_cursor() -> duckdb.DuckDBPyConnection:
    """A connection to the process's one in-memory DuckDB database (~2 ms; a new database costs ~15 ms).
    Close it after use: what was registered on it goes with it."""
    import duckdb

    global _DUCKDB
    with _DUCKDB_LOCK:
        if _DUCKDB is None:
            _DUCKDB = duckdb.connect()
        return _DUCKDB.cursor()


def _consolidate_duckdb(rows: pa.Table, columns: list[str]) -> pa.Table:
    def q(name: str) -> str:
        return '"' + name.replace('"', '""') + '"'

    con = duckdb_cursor()
    try:
        con.register("rows", rows)
        cols = ", ".join(q(c) for c in columns)
        sql = f"SELECT {cols}, sum({q(DIFF)})::BIGINT AS {q(DIFF)} FROM rows GROUP BY {cols}"
        return con.sql(f"SELECT * FROM ({sql}) WHERE {q(DIFF)} <> 0").to_arrow_table()
    finally:
        con.close()


def collect_small(updates: DataFrame) -> pa.Table | None:
    """``updates`` as Arrow in one Spark job, or None when they are more than :data:`MAX_DRIVER_ROWS` rows."""
    got = updates.limit(MAX_DRIVER_ROWS + 1).toArrow()
    return got if got.num_rows <= MAX_DRIVER_ROWS else None
