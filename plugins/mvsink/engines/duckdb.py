"""The process's DuckDB: one in-memory database, sums and matches of Arrow rows, and reads of local Parquet files.

* :func:`duckdb_cursor`: a connection to the process's one database;
* :func:`consolidated`: rows summed per row (pyarrow's hash grouping where it groups as Spark does, else
  DuckDB), optionally only those matching a small key table (:func:`matching`);
* :func:`parquet_relation`: a subquery reading local Parquet files as a given Arrow schema, exactly, with
  filters and a top-N pushed into DuckDB's scan.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from mvsink.columns import DIFF
from mvsink.core.arrowvalues import int64_array, scalar_of
from mvsink.location import Location

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

    from mvsink.core.table import ViewTable

_DUCKDB: duckdb.DuckDBPyConnection | None = None


_DUCKDB_LOCK = threading.Lock()


def duckdb_cursor() -> duckdb.DuckDBPyConnection:
    """A connection to the process's one in-memory DuckDB database (~2 ms; a new database costs ~15 ms).
    Close it after use: what was registered on it goes with it."""
    import duckdb

    global _DUCKDB
    with _DUCKDB_LOCK:
        if _DUCKDB is None:
            _DUCKDB = duckdb.connect()
        return _DUCKDB.cursor()


def consolidated(rows: pa.Table, *, keys: pa.Table | None = None, key_columns: Sequence[str] = ()) -> pa.Table:
    """``rows`` (columns and ``_mv_diff``) summed per row, zero sums dropped; with ``keys``, only the rows whose
    ``key_columns`` match a row of ``keys`` (:func:`matching`).

    Without keys and over flat columns of exact types, pyarrow's hash grouping (NULLs form one group, as in
    Spark; ~1 ms for 2,000 rows); else DuckDB (~20 ms).
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    columns = [c for c in rows.column_names if c != DIFF]
    if keys is not None or not all(arrow_groupable(rows.schema.field(c).type) for c in columns):
        return _duckdb(rows, keys, key_columns, consolidate=True)
    diffs = rows.column(DIFF).cast(pa.int64())
    if not columns:
        total = pc.sum(diffs).as_py() or 0
        return pa.table({DIFF: int64_array([total] if total else [])})
    # Table.group_by's plan, built from pyarrow._acero (what pyarrow.acero re-exports): pyarrow.acero imports
    # pyarrow.dataset, which imports pandas (0.2 s of a small refresh's process)
    from pyarrow._acero import AggregateNodeOptions, Declaration, TableSourceNodeOptions

    source = pa.table([*(rows.column(c) for c in columns), diffs], names=[*columns, DIFF])
    summed = Declaration.from_sequence(
        [
            Declaration("table_source", TableSourceNodeOptions(source)),
            Declaration("aggregate", AggregateNodeOptions([(DIFF, "hash_sum", None, DIFF)], keys=columns)),
        ]
    ).to_table(use_threads=False)
    out = summed.select([*columns, DIFF])
    return out.filter(pc.not_equal(out.column(DIFF), scalar_of(0, pa.int64())))


def arrow_groupable(t: pa.DataType) -> bool:
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
            semi_keys = keys.select(list(key_columns))
            con.register("keys", semi_keys)
            semi = _matching_keys(key_columns, semi_keys)
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


def _matching_keys(key_columns: Sequence[str], keys: pa.Table) -> str:
    """The WHERE clause keeping the rows ``r`` whose ``key_columns`` match, NULLs included, a row of the registered
    table ``keys`` (the same columns). A column without NULLs in ``keys`` is matched by ``=``, the same there (a NULL
    of ``r`` equals no key): DuckDB then filters the scan of ``r`` by the keys and decodes only matching rows."""
    q = duckdb_identifier
    match = " AND ".join(
        f"r.{q(k)} = d.{q(k)}" if keys.column(k).null_count == 0 else f"r.{q(k)} IS NOT DISTINCT FROM d.{q(k)}"
        for k in key_columns
    )
    return f"WHERE EXISTS (SELECT 1 FROM keys d WHERE {match})"


def consolidated_updates(
    table: ViewTable, columns: Sequence[str], *, lower: int, keys: pa.Table, key_columns: Sequence[str]
) -> pa.Table:
    """``consolidated(table.updates_before(columns, lower=lower), keys=keys, key_columns=key_columns)``: the table's
    consolidated rows (before ``lower``) whose ``key_columns`` match a row of ``keys``. Over local files DuckDB scans
    them itself, decoding the other columns of matching rows only (a large view's table holds many more groups than
    a small change touches); else, or where its types would differ from pyarrow's read, as written above."""
    import pyarrow as pa

    from mvsink.columns import ERROR, TIME
    from mvsink.core.schema import plain_type

    names = [c for c in table.column_names if c not in (TIME, DIFF, ERROR)]
    want = table.arrow_schema()
    plain = pa.schema(
        [pa.field(c, plain_type(want.field(n).type)) for c, n in zip(columns, names, strict=True)]
        + [pa.field(DIFF, pa.int64())]
    )
    uris = table.file_uris()
    if uris and all(u.is_local and "'" not in u.key for u in uris) and key_columns:
        dq = duckdb_identifier
        select = ", ".join(f"{dq(n)} AS {dq(c)}" for c, n in zip(columns, names, strict=True))
        files = "[" + ", ".join(f"'{u.key}'" for u in uris) + "]"
        cols = "".join(f"r.{dq(c)}, " for c in columns)
        semi_keys = keys.select(list(key_columns))
        sql = (
            f"SELECT {cols}sum(r.{dq(DIFF)})::BIGINT AS {dq(DIFF)} FROM (SELECT {select}, {dq(DIFF)} "
            f"FROM read_parquet({files}, union_by_name = true) WHERE {dq(TIME)} < {int(lower)}) r "
            f"{_matching_keys(key_columns, semi_keys)} GROUP BY ALL HAVING sum(r.{dq(DIFF)}) <> 0"
        )
        con = duckdb_cursor()
        try:
            con.register("keys", semi_keys)
            got = con.sql(sql).to_arrow_table()
        finally:
            con.close()
        try:
            if [f.name for f in got.schema] == plain.names:
                return got.cast(plain, safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass
    return consolidated(table.updates_before(columns, lower=lower), keys=keys, key_columns=key_columns)


def parquet_relation(paths: Sequence[Location], columns: Sequence[tuple[str, str]], schema: pa.Schema) -> str | None:
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
        t = duckdb_type(schema.field(name).type)
        if t is None:
            return None
        targets.append(t)
    if any(not p.is_local or "'" in p.key for p in paths):
        return None
    local = [p.key for p in paths]
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


def duckdb_type(t: pa.DataType) -> str | None:
    """DuckDB's type of Arrow type ``t`` where DuckDB reads, compares and groups its values as Spark does its
    type's (integers, decimals, strings, dates, booleans), else None."""
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
