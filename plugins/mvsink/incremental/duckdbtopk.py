"""Step 2 of a top-k refresh in the driver (mode ``incremental:topk``; :mod:`mvsink.incremental.topk`, DESIGN.md section 8).

With Δ (the change of M, the ORDER BY's input, in the view's columns) held as Arrow, T (the persisted top k)
is read with pyarrow and every check is made here:

* T ∪ inserted − deleted holds the new top k whenever at least k of its rows rank at or before L, T's last
  row in the order o (every row of M outside T ranks after L). So a deleted row of T costs no recompute
  while enough inserted rows (an update's new version, say) rank before L; and a T of fewer than k rows
  was all of M, so nothing else can enter.
* Else the query is recomputed: where M is one source's columns (:func:`mvsink.incremental.topk.projection`)
  and its snapshot is plain Parquet of at most :data:`MAX_DRIVER_SCAN_BYTES`, in the driver (no Spark job):
  by DuckDB's top-N over the snapshot's files (~40 ms for TPC-H's 1.5 M orders), or where DuckDB would not
  read them exactly, by pyarrow, one file at a time (rows whose first ORDER BY value is worse than the k-th
  best one dropped before any sort); else by Spark (one job).

The order is pyarrow's where it is Spark's (:func:`order_keys`): integers, decimals, dates, timestamps,
booleans, binary-collation strings; NULLs placed per column as the query says. Else Spark orders the
candidates over local rows (a small job) and a deleted row of T recomputes the query.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from mvsink.columns import DIFF, TIME
from mvsink.engines.arrow import MAX_DRIVER_ROWS

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    import pyarrow as pa
    from pyspark.sql import Column, DataFrame, SparkSession

    from mvsink.core.batch import BatchDescription, SourceRead
    from mvsink.core.table import ViewTable
    from mvsink.location import Location

# A recomputed top k over one source's columns is taken in the driver over at most this many bytes of
# Parquet files (the snapshot's; only the view's columns are read, a file at a time).
MAX_DRIVER_SCAN_BYTES: Final = 256 * 1024 * 1024
# Δ's column: each changed row's signed change of multiplicity in M.
CHANGE_COUNT: Final = "_mv_topk_n"
_POS: Final = "_mv_topk_pos"
_MARK: Final = "_mv_topk_mark"

OrderKeys = list[tuple[str, str, str]]  # (column, "ascending"/"descending", "at_start"/"at_end")
# The ORDER BY: per item, (position of the view's column, descending, NULLs first).
OrderSpec = tuple[tuple[int, bool, bool], ...]


def order_keys(desired: DataFrame, spec: OrderSpec) -> OrderKeys | None:
    """pyarrow sort keys of the ORDER BY (the view's column names) where pyarrow orders as Spark does (every
    ORDER BY column an integer, decimal, date, timestamp, boolean or binary-collation string, whose bytes
    order is Spark's UTF8_BINARY), else None."""
    from pyspark.sql import types as T

    exact = (T.IntegralType, T.DecimalType, T.DateType, T.TimestampType, T.TimestampNTZType, T.BooleanType)
    columns = list(desired.columns)
    keys: OrderKeys = []
    for p, descending, nulls_first in spec:
        dt = desired.schema.fields[p].dataType
        binary_string = isinstance(dt, T.StringType) and getattr(dt, "collation", "UTF8_BINARY") == "UTF8_BINARY"
        if not (isinstance(dt, exact) or binary_string):
            return None
        keys.append((columns[p], "descending" if descending else "ascending", "at_start" if nulls_first else "at_end"))
    return keys


def first_rows(rows: pa.Table, keys: OrderKeys, k: int) -> pa.Table:
    """The first ``k`` of ``rows`` in the order ``keys`` (a total order: ties are not broken)."""
    import pyarrow.compute as pc

    by = rows.select([c for c, _, _ in keys]).rename_columns([f"k{i}" for i in range(len(keys))])
    sort = [(f"k{i}", order, nulls) for i, (_, order, nulls) in enumerate(keys)]
    return rows.take(pc.sort_indices(by, sort_keys=sort)[:k])


def ranked_up_to(candidates: pa.Table, last: pa.Table, keys: OrderKeys) -> int:
    """How many ``candidates`` rank at or before ``last`` (one row) in the order ``keys``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    names = [c for c, _, _ in keys]
    both = pa.concat_tables([candidates.select(names), last.select(names).cast(candidates.select(names).schema)])
    both = both.rename_columns([f"k{i}" for i in range(len(keys))]).append_column(
        _MARK, pa.array([0] * candidates.num_rows + [1], pa.int8())
    )
    sort = [(f"k{i}", order, nulls) for i, (_, order, nulls) in enumerate(keys)] + [(_MARK, "ascending", "at_end")]
    order = pc.sort_indices(both, sort_keys=sort)
    return int(pc.index(order, candidates.num_rows).as_py())


def top_of_snapshot(
    source: SourceRead, columns: Sequence[tuple[str, str]], schema: pa.Schema, keys: OrderKeys, k: int
) -> pa.Table | None:
    """The first ``k`` rows, in the order ``keys``, of ``source``'s snapshot projected to ``columns`` (``(name,
    source column)``), as ``schema``: by DuckDB's top-N over the files where it reads them exactly
    (:func:`_duckdb_top`), else read with pyarrow a file at a time; None where that is not sure
    (Delta's reader needed, over :data:`MAX_DRIVER_SCAN_BYTES` of files, a partition column, a file without a
    column, a value that does not cast exactly)."""
    import pyarrow as pa

    from mvsink.engines.arrow import parquet_columns
    from mvsink.spark.sources import plain_files

    if source.kind != "path" or source.version < 0:
        return None
    files = plain_files(source.path, source.version)
    if files is None or sum(f.size for f in files) > MAX_DRIVER_SCAN_BYTES:
        return None
    wanted = sorted({c for _, c in columns})
    if any(name in wanted for f in files for name, _ in f.partition_values):
        return None
    got = _duckdb_top([f.path for f in files], columns, schema, keys, k)
    if got is not None:
        return got
    top = schema.empty_table()
    for f in files:
        rows = parquet_columns(f.path, wanted)  # the file's row groups read by pyarrow's threads
        if rows is None:
            return None
        try:
            part = pa.table([rows.column(src) for _, src in columns], names=[name for name, _ in columns]).cast(schema)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            return None
        if part.num_rows:
            top = first_rows(_pruned(pa.concat_tables([top, part]), keys[0], k), keys, k)
    return top


def _duckdb_top(
    paths: list[Location], columns: Sequence[tuple[str, str]], schema: pa.Schema, keys: OrderKeys, k: int
) -> pa.Table | None:
    """:func:`top_of_snapshot` by DuckDB's top-N over the files (its threads; rows that cannot be among the first
    ``k`` skipped in the scan), where :func:`mvsink.engines.duckdb.parquet_relation` reads them exactly; else None."""
    import pyarrow as pa

    from mvsink.engines.duckdb import duckdb_cursor, duckdb_identifier, parquet_relation

    rel = parquet_relation(paths, columns, schema)
    if rel is None:
        return None
    order = ", ".join(
        duckdb_identifier(c)
        + (" DESC" if o == "descending" else " ASC")
        + (" NULLS FIRST" if n == "at_start" else " NULLS LAST")
        for c, o, n in keys
    )
    con = duckdb_cursor()
    try:
        got = con.sql(f"SELECT * FROM {rel} ORDER BY {order} LIMIT {int(k)}").to_arrow_table()
    except Exception:  # noqa: BLE001 (any DuckDB failure: pyarrow reads the files)
        return None
    finally:
        con.close()
    try:
        return got.cast(schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        return None


def _pruned(rows: pa.Table, first: tuple[str, str, str], k: int) -> pa.Table:
    """``rows`` without rows that cannot be among the first ``k``: those whose first ORDER BY value is worse
    than the k-th best non-NULL one (which at least k rows reach); NULLs kept where they come first."""
    import pyarrow.compute as pc

    name, order, nulls = first
    if rows.num_rows <= 4 * k:
        return rows
    values = rows.column(name)
    valid = values.drop_null() if values.null_count else values
    if len(valid) < k:
        return rows
    best = valid.take(pc.select_k_unstable(valid, k, sort_keys=[("dummy", order)]))
    bound = pc.min(best) if order == "descending" else pc.max(best)
    beat = pc.greater_equal if order == "descending" else pc.less_equal
    return rows.filter(pc.fill_null(beat(values, bound), nulls == "at_start"))


def _repeated(rows: pa.Table, key_cols: list[str]) -> bool:
    """Do two of ``rows`` share their key (NULLs equal)?"""
    import pyarrow.compute as pc

    from mvsink.engines.arrow import row_key

    if len(key_cols) == 1:
        return bool(pc.count_distinct(rows.column(key_cols[0]), mode="all").as_py() < rows.num_rows)
    seen = [row_key(r) for r in zip(*[rows.column(c).to_pylist() for c in key_cols])]
    return len(set(seen)) < len(seen)


def refresh_in_driver(
    spark: SparkSession,
    desired: DataFrame,
    table: ViewTable,
    desc: BatchDescription,
    spec: OrderSpec,
    k: int,
    key: list[int],
    delta: pa.Table,
    *,
    changed: str,
    projection: tuple[SourceRead, list[tuple[str, str]]] | None,
) -> tuple[DataFrame | pa.Table | None, str]:
    """The corrections from T and Δ (``delta``: the view's columns and ``_mv_topk_n``), or (None, why not); see
    the module docstring. ``projection``: M as one source's columns, for a recompute in the driver."""
    from mvsink.spark.sources import arrow_table_schema

    columns = list(desired.columns)
    out_schema = arrow_table_schema(desired.schema)
    persisted = consolidated_top(table, columns, lower=desc.lower)
    order = order_keys(desired, spec)

    def recompute() -> tuple[DataFrame | pa.Table, str]:
        return _recomputed(desired, k, persisted, out_schema, order, projection, at=desc.time, spark=spark)

    return top_k_corrections(
        persisted,
        delta,
        k=k,
        key_cols=[columns[p] for p in key],
        out_schema=out_schema,
        order=order,
        at=desc.time,
        changed=changed,
        recompute=recompute,
        first=lambda candidates: _spark_first(spark, candidates, desired, spec, k),
    )


def consolidated_top(table: ViewTable, columns: list[str], *, lower: int) -> pa.Table:
    """T: the table's rows before ``lower``, consolidated (the view's columns and ``_mv_diff``)."""
    from mvsink.engines.duckdb import consolidated

    return consolidated(table.updates_before(columns, lower=lower))


def top_k_corrections(
    persisted: pa.Table,
    delta: pa.Table,
    *,
    k: int,
    key_cols: list[str],
    out_schema: pa.Schema,
    order: OrderKeys | None,
    at: int,
    changed: str,
    recompute: Callable[[], tuple[DataFrame | pa.Table, str]],
    first: Callable[[pa.Table], pa.Table],
) -> tuple[DataFrame | pa.Table | None, str]:
    """The corrections from T (``persisted``) and Δ, or (None, why not): step 2 of the module docstring.
    ``order``: pyarrow's sort keys where its order is the query's, else None (``first`` then orders the
    candidates, and a deleted row of T recomputes); ``recompute``: the query's top k diffed against T, and where."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from mvsink.engines.arrow import row_corrections

    columns = [f.name for f in out_schema if f.name not in (TIME, DIFF)]
    user = pa.schema([f for f in out_schema if f.name not in (TIME, DIFF)])
    n_t = persisted.num_rows
    broken = _not_a_top_k(persisted, delta, k, key_cols)
    if broken:
        return None, broken
    n = delta.column(CHANGE_COUNT)
    inserted = delta.filter(pc.greater(n, 0)).select(columns).cast(user)
    deleted = delta.filter(pc.less(n, 0))
    t_rows = persisted.select(columns).rename_columns(user.names).cast(user)
    survivors, hit = _without_deleted(t_rows, deleted, key_cols)
    candidates = pa.concat_tables([survivors, inserted])
    if _repeated(candidates, key_cols):
        return None, f"the declared key {', '.join(key_cols)} is not unique among the top {k} and the inserted rows"
    if hit and n_t == k:  # M may hold rows outside T: enough candidates must rank at or before T's last row
        ranked = -1
        if order is not None:
            last = first_rows(t_rows, order, k).slice(k - 1, 1)
            ranked = ranked_up_to(candidates, last, order)
        if ranked < k:
            out, where = recompute()
            return out, (
                f"a deleted row was in the top {k} ({hit} of them) and fewer than {k} rows rank at or before "
                f"its last: recomputed the query {where}, diffed against the table's {n_t} row(s) (changes of {changed})"
            )
    if hit:
        why = (
            f"top {k} of the table's {n_t - hit} remaining row(s) and {inserted.num_rows} inserted row(s); "
            f"{deleted.num_rows} deleted row(s), {hit} of them in the top {k} (changes of {changed})"
        )
    else:
        why = (
            f"top {k} of the table's {n_t} row(s) and {inserted.num_rows} inserted row(s); {deleted.num_rows} "
            f"deleted row(s) outside it (changes of {changed})"
        )
    if not inserted.num_rows and not hit:  # T stays the top k
        return out_schema.empty_table(), why
    top = first_rows(candidates, order, k) if order is not None else first(candidates)
    return row_corrections(top, persisted, out_schema, at=at), why


def _not_a_top_k(persisted: pa.Table, delta: pa.Table, k: int, key_cols: list[str]) -> str | None:
    """Why T (``persisted``, consolidated) and Δ cannot be used: T is not k rows at most, each once; or a row of
    M changed its multiplicity by more than one (the declared key is not unique there). None: they can."""
    import pyarrow.compute as pc

    n_t = persisted.num_rows
    mult = persisted.column(DIFF).to_pylist()
    if n_t > k or any(m != 1 for m in mult):
        return f"the table's rows are not a top {k} ({n_t} row(s), multiplicities {min(mult)} to {max(mult)})"
    n = delta.column(CHANGE_COUNT)
    worst = pc.max(pc.abs(n)).as_py() if delta.num_rows else None
    if worst is not None and worst > 1:
        return (
            f"a row of the ORDER BY's input changed its multiplicity by {worst}: "
            f"the declared key {', '.join(key_cols)} is not unique there"
        )
    return None


def _without_deleted(t_rows: pa.Table, deleted: pa.Table, key_cols: list[str]) -> tuple[pa.Table, int]:
    """T's rows whose key is not among the deleted rows' (matched null-safely), and how many were deleted."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from mvsink.engines.arrow import row_key

    if len(key_cols) == 1:  # pyarrow: is_in matches NULL to NULL (the null-safe match); key types are exact
        kc = key_cols[0]
        in_t = pc.is_in(
            t_rows.column(kc), value_set=deleted.column(kc).cast(t_rows.schema.field(kc).type), skip_nulls=False
        )
    else:
        gone = {row_key(r) for r in zip(*[deleted.column(c).to_pylist() for c in key_cols])}
        in_t = pa.array([row_key(r) in gone for r in zip(*[t_rows.column(c).to_pylist() for c in key_cols])])
    hit = int(pc.sum(in_t).as_py() or 0)
    return (t_rows.filter(pc.invert(in_t)) if hit else t_rows), hit


def _recomputed(
    desired: DataFrame,
    k: int,
    persisted: pa.Table,
    out_schema: pa.Schema,
    order: OrderKeys | None,
    projection: tuple[SourceRead, list[tuple[str, str]]] | None,
    *,
    at: int,
    spark: SparkSession,
) -> tuple[DataFrame | pa.Table, str]:
    """The query's top k diffed against T, and where it was computed: in the driver where it can be, else by
    Spark."""
    import pyarrow as pa

    from mvsink.engines.arrow import row_corrections

    user = pa.schema([f for f in out_schema if f.name not in (TIME, DIFF)])
    if order is not None and projection is not None:
        top = top_of_snapshot(projection[0], projection[1], user, order, k)
        if top is not None:
            return row_corrections(top, persisted, out_schema, at=at), "in the driver"
    if k > MAX_DRIVER_ROWS:
        return _spark_corrections(spark, desired, persisted, at=at), "by Spark"
    return row_corrections(desired.toArrow(), persisted, out_schema, at=at), "by Spark"


def _spark_first(spark: SparkSession, candidates: pa.Table, desired: DataFrame, spec: OrderSpec, k: int) -> pa.Table:
    """The first k candidates ordered by Spark over local rows (the ORDER BY's columns and each row's position;
    one small job: a sort over local rows is not folded by the optimizer), so collations and floats order as
    Spark orders them."""
    import pyarrow as pa
    from pyspark.sql import types as T

    columns = list(desired.columns)
    by = sorted({p for p, _, _ in spec})
    local = candidates.select([columns[p] for p in by]).append_column(
        _POS, pa.array(range(candidates.num_rows), pa.int64())
    )
    fields = [T.StructField(columns[p], desired.schema.fields[p].dataType, True) for p in by]
    schema = T.StructType([*fields, T.StructField(_POS, T.LongType(), False)])
    order = [sort_column(columns[p], descending, nulls_first) for p, descending, nulls_first in spec]
    first = spark.createDataFrame(local, schema=schema).orderBy(*order).limit(k).select(_POS).collect()
    return candidates.take(pa.array([r[0] for r in first], pa.int64()))


def _spark_corrections(spark: SparkSession, desired: DataFrame, persisted: pa.Table, *, at: int) -> DataFrame:
    """:func:`mvsink.spark.transforms.corrections` of ``desired`` against T held in the driver."""
    from pyspark.sql import types as T

    from mvsink.spark.transforms import corrections

    fields = [T.StructField(f.name, f.dataType, True) for f in desired.schema.fields]
    schema = T.StructType([*fields, T.StructField(DIFF, T.LongType(), True)])
    return corrections(desired, spark.createDataFrame(persisted, schema=schema), time=at)


def sort_column(name: str, descending: bool, nulls_first: bool) -> Column:
    """Spark's sort expression of one ORDER BY item."""
    from pyspark.sql import functions as F

    from mvsink.spark.transforms import quote_name

    c = F.col(quote_name(name))
    if descending:
        return c.desc_nulls_first() if nulls_first else c.desc_nulls_last()
    return c.asc_nulls_first() if nulls_first else c.asc_nulls_last()
