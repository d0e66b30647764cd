"""Small results in the driver, without a Spark job (the incremental modes' few-rows paths; DESIGN.md section 8).

* :func:`table_rows`: a view table's updates before a time, read with pyarrow over its active files (delta-rs's
  file list), and :func:`consolidated`: their sum per row, optionally only the rows whose key columns match a
  row of a small key table (null-safely, in DuckDB: :func:`matching`);
* :func:`row_corrections`: :func:`mvsink.spark.transforms.corrections` of an Arrow desired and persisted;
* :func:`full_diff`: the full diff of a small view (its query collected, its table read with pyarrow), and
  :func:`full_corrections`, its pure Arrow part;
* :func:`local_arrow`: a DataFrame over local rows as Arrow;
* :func:`collect_small`: a DataFrame's rows in one Spark job, when they are at most :data:`MAX_DRIVER_ROWS`;
  :func:`same_equality`: may rows of this type be grouped in the driver as Spark groups them.

Why: a refresh of a small change spends most of its Spark time on fixed per-stage costs (a shuffle to
consolidate, the Parquet write's commit protocol, a checkpoint, one job per ``count``); one job that collects
the change and the rest in the driver is cheaper whenever the change is small.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from mvsink.columns import DIFF, ERROR, TIME

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa
    from pyspark.sql import DataFrame
    from pyspark.sql.types import DataType

    from mvsink.core.deltalog import ChangeSet
    from mvsink.core.table import ViewTable

# Up to this many rows, a mode's change (or recomputed groups) is collected and finished in the driver.
MAX_DRIVER_ROWS: Final = 100_000
# A linear view's change terms are tried in the driver only over change sets of at most this many bytes of
# files (Parquet: some 25-40 bytes a row; more would likely overflow MAX_DRIVER_ROWS after paying for a try).
MAX_DRIVER_CHANGE_BYTES: Final = 4 * 1024 * 1024

_DUCKDB: duckdb.DuckDBPyConnection | None = None
_DUCKDB_LOCK = threading.Lock()


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


def duckdb_cursor() -> duckdb.DuckDBPyConnection:
    """A connection to the process's one in-memory DuckDB database (~2 ms; a new database costs ~15 ms).
    Close it after use: what was registered on it goes with it."""
    import duckdb

    global _DUCKDB
    with _DUCKDB_LOCK:
        if _DUCKDB is None:
            _DUCKDB = duckdb.connect()
        return _DUCKDB.cursor()


def table_rows(table: ViewTable, columns: Sequence[str] | None, *, lower: int) -> pa.Table:
    """The table's updates with ``_mv_time < lower``: its user columns (hidden state included) renamed to
    ``columns`` in order (None: none of them), and ``_mv_diff``. Not consolidated."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    from mvsink.core import storage

    names = [c for c in table.column_names if c not in (TIME, DIFF, ERROR)] if columns is not None else []
    # A dataset over the active files (not delta-rs's to_pyarrow_dataset, whose fragments wrongly drop a
    # filtered column's rows when the add action has no stats for it, as ours have none for strings).
    uris = table.file_uris()
    fs, _ = storage.filesystem(uris[0]) if uris else (None, "")
    schema = pa.schema(
        [
            f.with_type(
                pa.string() if f.type == pa.string_view() else pa.binary() if f.type == pa.binary_view() else f.type
            )
            for f in table.arrow_schema()
        ]
    )  # delta-rs may give view types, which pyarrow's filters cannot compare with plain values
    dataset = ds.dataset([storage.filesystem(u)[1] for u in uris], schema=schema, format="parquet", filesystem=fs)
    rows = dataset.to_table(columns=[*names, DIFF], filter=pc.field(TIME) < lower)
    return rows.rename_columns([*(columns or []), DIFF])


def consolidated(rows: pa.Table, *, keys: pa.Table | None = None, key_columns: Sequence[str] = ()) -> pa.Table:
    """``rows`` (columns and ``_mv_diff``) summed per row, zero sums dropped; with ``keys``, only the rows whose
    ``key_columns`` match a row of ``keys`` (:func:`matching`).

    Without keys and over flat columns of exact types, pyarrow's hash grouping (NULLs form one group, as in
    Spark; ~1 ms for 2,000 rows); else DuckDB (~20 ms).
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    columns = [c for c in rows.column_names if c != DIFF]
    if keys is not None or not all(_arrow_groupable(rows.schema.field(c).type) for c in columns):
        return _duckdb(rows, keys, key_columns, consolidate=True)
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


def _arrow_groupable(t: pa.DataType) -> bool:
    """Does pyarrow group values of this type as Spark does (flat, exact: no floats, no nesting)?"""
    import pyarrow as pa

    return bool(
        pa.types.is_integer(t)
        or pa.types.is_decimal(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_boolean(t)
        or pa.types.is_date(t)
        or pa.types.is_timestamp(t)
    )


def matching(rows: pa.Table, keys: pa.Table, key_columns: Sequence[str]) -> pa.Table:
    """The rows whose ``key_columns`` equal (``IS NOT DISTINCT FROM``) the same-named columns of a row of ``keys``.

    DuckDB's, not a pushed-down pyarrow filter: that cannot compare a file's view-typed strings (files delta-rs
    wrote) with plain ones.
    """
    return _duckdb(rows, keys, key_columns, consolidate=False)


def _duckdb(rows: pa.Table, keys: pa.Table | None, key_columns: Sequence[str], *, consolidate: bool) -> pa.Table:
    def dq(name: str) -> str:
        return '"' + name.replace('"', '""') + '"'

    con = duckdb_cursor()
    try:
        con.register("rows", rows)
        semi = ""
        if keys is not None and key_columns:
            con.register("keys", keys.select(list(key_columns)))
            match = " AND ".join(f"r.{dq(k)} IS NOT DISTINCT FROM d.{dq(k)}" for k in key_columns)
            semi = f"WHERE EXISTS (SELECT 1 FROM keys d WHERE {match})"
        if not consolidate:
            return con.sql(f"SELECT r.* FROM rows r {semi}").to_arrow_table()
        cols = "".join(f"r.{dq(c)}, " for c in rows.column_names if c != DIFF)
        sql = (
            f"SELECT {cols}sum(r.{dq(DIFF)})::BIGINT AS {dq(DIFF)} FROM rows r {semi} "
            f"GROUP BY ALL HAVING sum(r.{dq(DIFF)}) <> 0"
        )
        return con.sql(sql).to_arrow_table()
    finally:
        con.close()


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
    updates = table_rows(table, [f.name for f in fields], lower=lower)
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


# A change data feed row's ``_change_type``: the row inserted, or deleted (the feed's readers all use these).
PLUS_CHANGE_TYPES: Final = ("insert", "update_postimage")
MINUS_CHANGE_TYPES: Final = ("delete", "update_preimage")


def change_rows(
    changes: ChangeSet, columns: Sequence[tuple[str, str]], schema: pa.Schema, *, weight: str
) -> pa.Table | None:
    """A plain change set's rows read with pyarrow, as ``schema``: each ``(name, source column)`` of ``columns``
    and ``weight`` (+1 an inserted row, -1 a deleted one: an added or removed file's rows, a change data feed
    file's by its ``_change_type``); not consolidated. None where that is not sure: more than
    :data:`MAX_DRIVER_CHANGE_BYTES` of files, deletion vectors, a partition column, a file without a column, a
    value that does not cast to ``schema`` exactly."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from mvsink.spark.sources import CHANGE_TYPE

    files = [(f, 1) for f in changes.inserted] + [(f, -1) for f in changes.deleted] + [(f, 0) for f in changes.cdc]
    if changes.bytes > MAX_DRIVER_CHANGE_BYTES or changes.deletion_vectors:
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
            signs = pc.if_else(
                pc.is_in(kind, value_set=pa.array(PLUS_CHANGE_TYPES)),
                1,
                pc.if_else(pc.is_in(kind, value_set=pa.array(MINUS_CHANGE_TYPES)), -1, 0),
            )
            rows = rows.append_column(weight, pc.cast(signs, pa.int64())).filter(pc.not_equal(signs, 0))
        else:
            rows = rows.append_column(weight, pa.array([sign] * rows.num_rows, pa.int64()))
        try:
            out.append(
                pa.table(
                    [rows.column(src) for _, src in columns] + [rows.column(weight)],
                    names=[name for name, _ in columns] + [weight],
                ).cast(schema)
            )
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            return None
    return pa.concat_tables(out) if out else schema.empty_table()


def parquet_columns(path: str, columns: Sequence[str]) -> pa.Table | None:
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


def without_view_types(table: pa.Table) -> pa.Table:
    """``table`` with string_view / binary_view columns (delta-rs writes them) as string / binary, which every
    pyarrow kernel takes (``take`` and ``filter`` have no view kernels)."""
    import pyarrow as pa

    def plain(t: pa.DataType) -> pa.DataType:
        return pa.string() if t == pa.string_view() else pa.binary() if t == pa.binary_view() else t

    if not any(plain(f.type) != f.type for f in table.schema):
        return table
    return table.cast(pa.schema([f.with_type(plain(f.type)) for f in table.schema]))


def parquet_relation(paths: Sequence[str], columns: Sequence[tuple[str, str]], schema: pa.Schema) -> str | None:
    """DuckDB's read of local Parquet files ``paths`` as ``schema``: a subquery giving each ``(name, source
    column)`` of ``columns``, cast to ``schema``'s type of ``name``; DuckDB scans it in its threads, with
    filters and a top-N pushed into the scan. None where that would not be what :func:`parquet_columns` and a
    safe Arrow cast give: a file not on the local disk, without a column, or whose column's type is not
    ``schema``'s or an exact widening of it (a wider integer; a decimal of the same scale), or a type this
    reads no further (integers, decimals, strings, dates, booleans only)."""
    import pyarrow.parquet as pq

    q = duckdb_identifier
    targets: list[str] = []
    for name, _ in columns:
        t = _duckdb_type(schema.field(name).type)
        if t is None:
            return None
        targets.append(t)
    local = [p.removeprefix("file://") for p in paths]
    if any("://" in p or "'" in p for p in local):
        return None
    for p in local:
        have = pq.read_schema(p)
        for name, src in columns:
            i = have.get_field_index(src)
            if i < 0 or not _widens(have.field(i).type, schema.field(name).type):
                return None
    if not local:
        return None
    select = ", ".join(f"CAST({q(src)} AS {t}) AS {q(name)}" for (name, src), t in zip(columns, targets, strict=True))
    files = "[" + ", ".join(f"'{p}'" for p in local) + "]"
    return f"(SELECT {select} FROM read_parquet({files}, union_by_name = true))"


def duckdb_identifier(name: str) -> str:
    """``name`` quoted as a DuckDB identifier."""
    return '"' + name.replace('"', '""') + '"'


def _duckdb_type(t: pa.DataType) -> str | None:
    import pyarrow as pa

    ints = {pa.int8(): "TINYINT", pa.int16(): "SMALLINT", pa.int32(): "INTEGER", pa.int64(): "BIGINT"}
    if t in ints:
        return ints[t]
    if pa.types.is_decimal128(t) and t.precision <= 38:
        return f"DECIMAL({t.precision}, {t.scale})"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or t == pa.string_view():
        return "VARCHAR"
    if pa.types.is_date32(t):
        return "DATE"
    if pa.types.is_boolean(t):
        return "BOOLEAN"
    return None


def _widens(have: pa.DataType, want: pa.DataType) -> bool:
    """Is every value of ``have`` a value of ``want`` (a cast that never fails nor rounds)?"""
    import pyarrow as pa

    if have == want:
        return True
    order = [pa.int8(), pa.int16(), pa.int32(), pa.int64()]
    if have in order and want in order:
        return order.index(have) <= order.index(want)
    if pa.types.is_decimal(have) and pa.types.is_decimal(want):
        return bool(have.scale == want.scale and have.precision <= want.precision)
    text = (pa.string(), pa.large_string(), pa.string_view())
    return bool(have in text and want in text)
