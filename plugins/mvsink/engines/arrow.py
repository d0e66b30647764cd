"""Small results in the process, as Arrow, without a Spark job (the incremental modes' few-rows paths; DESIGN.md section 8).

* :func:`change_rows`: a plain change set's rows (a view table's updates before a time:
  :meth:`mvsink.core.table.ViewTable.updates_before`); :func:`parquet_columns`: one file's columns;
* :func:`row_corrections`: :func:`mvsink.spark.transforms.corrections` of an Arrow desired and persisted;
* :func:`full_diff`: the full diff of a small view (its query collected, its table read with pyarrow), and
  :func:`full_corrections`, its pure Arrow part;
* :func:`local_arrow`: a DataFrame over local rows as Arrow;
* :func:`collect_small`: a DataFrame's rows in one Spark job, when they are at most :data:`MAX_DRIVER_ROWS`;
  :func:`same_equality`: may rows of this type be grouped here as Spark groups them.

Why: a refresh of a small change spends most of its Spark time on fixed per-stage costs (a shuffle to
consolidate, the Parquet write's commit protocol, a checkpoint, one job per ``count``); one job that collects
the change and the rest in the process is cheaper whenever the change is small.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Final

from mvsink.columns import DIFF, TIME
from mvsink.core.arrowvalues import array_of, empty_table, repeat_int64, scalar_of
from mvsink.core.deltalog import CHANGE_TYPE, MINUS_CHANGE_TYPES, PLUS_CHANGE_TYPES
from mvsink.engines.duckdb import consolidated

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame
    from pyspark.sql.types import DataType

    from mvsink.core.deltalog import ChangeSet
    from mvsink.core.table import ViewTable
    from mvsink.location import Location

# Up to this many rows, a mode's change (or recomputed groups) is collected and finished in the driver.
MAX_DRIVER_ROWS: Final = 100_000


# A linear view's change terms are tried in the driver only over change sets of at most this many bytes of
# files (Parquet: some 25-40 bytes a row; more would likely overflow MAX_DRIVER_ROWS after paying for a try).
MAX_DRIVER_CHANGE_BYTES: Final = 4 * 1024 * 1024


def collect_small(df: DataFrame) -> pa.Table | None:
    """``df`` as Arrow in one Spark job, or None when it has more than :data:`MAX_DRIVER_ROWS` rows."""
    got = df.limit(MAX_DRIVER_ROWS + 1).toArrow()
    return got if got.num_rows <= MAX_DRIVER_ROWS else None


def same_equality(dt: DataType) -> bool:
    """Do Spark's grouping and the driver's (pyarrow, DuckDB) consider the same values of this type equal?

    Integers, decimals, binary-collation strings, binary, booleans, dates, timestamps, and structs and arrays
    of them; not floating-point values (Spark groups ``-0.0`` with ``0.0`` and NaN with NaN) nor collated
    strings (``'a' = 'A'`` under UTF8_LCASE).
    """
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


class _NaN:
    """The one hashable stand-in for every float NaN (Spark groups NaNs together)."""

    def __repr__(self) -> str:
        return "NaN"


_NAN = _NaN()


def row_key(value: Any) -> Any:
    """A hashable value equal for two values Spark groups together: NaNs equal, ``-0.0 == 0.0`` (as in
    Python), structs (dicts), arrays and maps (lists) as tuples."""
    if isinstance(value, float) and math.isnan(value):
        return _NAN
    if isinstance(value, dict):
        return tuple((k, row_key(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return tuple(row_key(v) for v in value)
    return value


def row_corrections(desired: pa.Table, persisted: pa.Table, schema: pa.Schema, *, at: int) -> pa.Table:
    """Updates at ``at`` that turn ``persisted`` (consolidated: columns and ``_mv_diff``) into ``desired``
    (rows, each of multiplicity one), in the table's Arrow ``schema`` (user columns, ``_mv_time``,
    ``_mv_diff``; columns matched by position): per distinct row, desired's count minus persisted's.

    Each correction carries the exact values of the first row it was counted from (desired's first).
    """
    import pyarrow as pa

    user = pa.schema([f for f in schema if f.name not in (TIME, DIFF)])
    n = len(user)
    want = desired.select(list(range(n))).rename_columns(user.names).cast(user)
    have = persisted.select(list(range(n))).rename_columns(user.names).cast(user)
    both = pa.concat_tables([want, have])
    weights = [1] * want.num_rows + [-int(d) for d in persisted.column(DIFF).to_pylist()]
    totals: dict[Any, int] = {}
    first: dict[Any, int] = {}
    values = [c.to_pylist() for c in both.columns]
    for i, row in enumerate(zip(*values)):
        k = row_key(row)
        totals[k] = totals.get(k, 0) + weights[i]
        first.setdefault(k, i)
    keep = [(first[k], d) for k, d in totals.items() if d]
    out = both.take(pa.array([i for i, _ in keep], pa.int64()))
    return (
        out.append_column(TIME, pa.array([at] * len(keep), pa.int64()))
        .append_column(DIFF, pa.array([d for _, d in keep], pa.int64()))
        .cast(schema)
    )


def full_corrections(desired: pa.Table, updates: pa.Table, schema: pa.Schema, *, at: int, exact: bool) -> pa.Table:
    """Updates at ``at`` that turn a table whose updates are ``updates`` (user columns matched by position,
    and ``_mv_diff``; not consolidated) into ``desired`` (rows of multiplicity one), in the table's Arrow
    ``schema``: per distinct row, desired's count minus the table's.

    ``exact``: every column's values are equal in the driver exactly when Spark groups them together
    (:func:`same_equality`): summed by :func:`consolidated`; else row by row with :func:`row_corrections`.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    if not exact:
        return row_corrections(desired, updates, schema, at=at)
    user = pa.schema([f for f in schema if f.name not in (TIME, DIFF)])
    n = len(user)

    def signed(rows: pa.Table, diffs: pa.Array) -> pa.Table:
        body = rows.select(list(range(n))).rename_columns(user.names).cast(user)
        return body.append_column(DIFF, diffs)

    want = signed(desired, pa.array([1] * desired.num_rows, pa.int64()))
    have = signed(updates, pc.negate(updates.column(DIFF).cast(pa.int64())))
    summed = consolidated(pa.concat_tables([want, have]))
    return summed.append_column(TIME, pa.array([at] * summed.num_rows, pa.int64())).select(schema.names).cast(schema)


def full_diff(desired: DataFrame, table: ViewTable, schema: pa.Schema, *, lower: int, at: int) -> pa.Table | None:
    """The corrections of a full diff done in the driver (one Spark job: ``desired`` collected), in the table's
    Arrow ``schema``; None when the view is not small or its columns cannot be compared here.

    Small: the table's active files hold at most :data:`MAX_DRIVER_ROWS` updates (from their statistics;
    unknown counts do not qualify), and the query gives at most as many rows. Comparable: no map columns
    (Spark cannot group them either) and no collated strings; floating-point columns are compared as Spark
    groups them (:func:`row_key`).
    """
    import pyarrow.compute as pc
    from pyspark.sql import types as T

    def comparable(dt: DataType) -> bool:
        if isinstance(dt, (T.FloatType, T.DoubleType)):
            return True
        if isinstance(dt, T.ArrayType):
            return comparable(dt.elementType)
        if isinstance(dt, T.StructType):
            return all(comparable(f.dataType) for f in dt.fields)
        return same_equality(dt)

    fields = desired.schema.fields
    if not table.exists or not all(comparable(f.dataType) for f in fields):
        return None
    actions = table.add_actions()
    if actions.num_rows:
        counts = actions.column("num_records")
        if counts.null_count or (pc.sum(counts).as_py() or 0) > MAX_DRIVER_ROWS:
            return None
    want = collect_small(desired)
    if want is None:
        return None
    updates = table.updates_before([f.name for f in fields], lower=lower)
    exact = all(same_equality(f.dataType) for f in fields)
    return full_corrections(want, updates, schema, at=at, exact=exact)


def local_arrow(df: DataFrame) -> pa.Table:
    """A DataFrame over local rows as Arrow: by ``collect`` (a local relation's, which runs no Spark job)
    unless a column holds timestamps, which ``collect`` turns into the driver's local time."""
    import pyarrow as pa
    from pyspark.sql import types as T
    from pyspark.sql.pandas.types import to_arrow_schema

    if any(isinstance(f.dataType, (T.TimestampType, T.TimestampNTZType)) for f in df.schema.fields):
        return df.toArrow()
    schema = to_arrow_schema(df.schema, timezone="UTC")
    rows = df.collect()
    return pa.Table.from_pylist([r.asDict(recursive=True) for r in rows], schema=schema)


def change_rows(
    changes: ChangeSet,
    columns: Sequence[tuple[str, str]],
    schema: pa.Schema,
    *,
    weight: str,
    max_bytes: int = MAX_DRIVER_CHANGE_BYTES,
) -> pa.Table | None:
    """A plain change set's rows read with pyarrow, as ``schema``: each ``(name, source column)`` of ``columns``
    and ``weight`` (+1 an inserted row, -1 a deleted one: an added or removed file's rows, a change data feed
    file's by its ``_change_type``); not consolidated. None where that is not sure: more than
    :data:`MAX_DRIVER_CHANGE_BYTES` of files, deletion vectors, a partition column, a file without a column, a
    value that does not cast to ``schema`` exactly. (``max_bytes``: another bound than that one.)"""
    import pyarrow as pa
    import pyarrow.compute as pc

    files = [(f, 1) for f in changes.inserted] + [(f, -1) for f in changes.deleted] + [(f, 0) for f in changes.cdc]
    if changes.bytes > max_bytes or changes.deletion_vectors:
        return None
    wanted = sorted({c for _, c in columns})
    out: list[pa.Table] = []
    for f, sign in files:
        if any(name in wanted for name, _ in f.partition_values):
            return None
        rows = parquet_columns(f.path, wanted + ([CHANGE_TYPE] if sign == 0 else []))
        if rows is None:
            return None
        if sign == 0:
            kind = rows.column(CHANGE_TYPE)
            one, zero, minus = (scalar_of(v, pa.int64()) for v in (1, 0, -1))
            signs = pc.if_else(
                pc.is_in(kind, value_set=array_of(PLUS_CHANGE_TYPES, pa.string())),
                one,
                pc.if_else(pc.is_in(kind, value_set=array_of(MINUS_CHANGE_TYPES, pa.string())), minus, zero),
            )
            rows = rows.append_column(weight, signs).filter(pc.not_equal(signs, zero))
        else:
            rows = rows.append_column(weight, repeat_int64(sign, rows.num_rows))
        try:
            out.append(
                pa.table(
                    [rows.column(src) for _, src in columns] + [rows.column(weight)],
                    names=[name for name, _ in columns] + [weight],
                ).cast(schema)
            )
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            return None
    return pa.concat_tables(out) if out else empty_table(schema)


def parquet_columns(path: Location, columns: Sequence[str]) -> pa.Table | None:
    """``columns`` of one Parquet file (local or object store) read with pyarrow, view types cast away
    (:func:`without_view_types`); None if the file lacks one of them (Spark would read NULLs there)."""
    import pyarrow.parquet as pq

    from mvsink.core import storage

    fs, at = storage.filesystem(path)
    with fs.open_input_file(at) as handle:
        pf = pq.ParquetFile(handle)
        if any(c not in pf.schema_arrow.names for c in columns):
            return None
        return without_view_types(pf.read(columns=list(columns)))


def parquet_column_bytes(path: Location, columns: Sequence[str]) -> int | None:
    """The compressed bytes of ``columns``' chunks in one Parquet file (local or object store), by its footer; None
    if the file lacks one of them."""
    import pyarrow.parquet as pq

    from mvsink.core import storage

    fs, at = storage.filesystem(path)
    with fs.open_input_file(at) as handle:
        pf = pq.ParquetFile(handle)
        if any(c not in pf.schema_arrow.names for c in columns):
            return None
        md = pf.metadata
    wanted = set(columns)
    return sum(
        int(md.row_group(g).column(i).total_compressed_size)
        for g in range(md.num_row_groups)
        for i in range(md.num_columns)
        if md.row_group(g).column(i).path_in_schema in wanted
    )


def parquet_column_batches(path: Location, columns: Sequence[str], rows: int) -> Iterator[pa.Table] | None:
    """``columns`` of one Parquet file as :func:`parquet_columns` reads them, ``rows`` rows at a time (a reader that
    stops early decodes no more of the file), or None if the file lacks one of them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from mvsink.core import storage

    fs, at = storage.filesystem(path)
    handle = fs.open_input_file(at)
    try:
        pf = pq.ParquetFile(handle)
        missing = any(c not in pf.schema_arrow.names for c in columns)
    except BaseException:
        handle.close()
        raise
    if missing:
        handle.close()
        return None

    def batches() -> Iterator[pa.Table]:
        with handle:
            for batch in pf.iter_batches(batch_size=rows, columns=list(columns)):
                yield without_view_types(pa.Table.from_batches([batch]))

    return batches()


def without_view_types(table: pa.Table) -> pa.Table:
    """``table`` with string_view / binary_view columns (delta-rs writes them) as string / binary, which every
    pyarrow kernel takes (``take`` and ``filter`` have no view kernels)."""
    import pyarrow as pa

    from mvsink.core.schema import plain_type

    if not any(plain_type(f.type) != f.type for f in table.schema):
        return table
    return table.cast(pa.schema([f.with_type(plain_type(f.type)) for f in table.schema]))
