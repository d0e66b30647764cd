"""The keys a partitioned recompute restricts its sources to (:mod:`mvsink.incremental.partitioned`): the distinct key
values of every changed source's changed rows, read from its plain change files in the driver (or collected by
Spark), and for a changed source tied to a keyed one through a join (:attr:`~mvsink.plan.partitioning.Partitioning.via`)
the keys of the keyed rows it matches, read by DuckDB from that source's files at both versions."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from mvsink.incremental import keyreads

if TYPE_CHECKING:
    from mvsink.core.batch import SourceRead
    from mvsink.incremental.telescope import ChangeTerms
    from mvsink.plan.partitioning import Partitioning

log = logging.getLogger(__name__)


def changed_keys(ct: ChangeTerms, part: Partitioning) -> tuple[list[Any], bool] | str:
    """The distinct non-null key values of every changed source's changed rows (inserted and deleted), and
    whether one has a NULL key; or why they cannot be used (too many, of types that do not compare)."""
    values: set[Any] = set()
    has_null = False
    for s in ct.changed:
        column = part.columns.get(s.name)
        got: tuple[list[Any], bool] | str | None
        if column is None and s.name in part.via:
            got = _via_keys(ct, part, s.name)
        elif column is None:  # (the partitioning keys every changed source, or ties it to a keyed one)
            return f"the changed source {s.name!r} has no key column"
        else:
            got = _driver_keys(ct, s.name, column)
            if got is None:
                got = _spark_keys(ct, s.name, column)
        if isinstance(got, str):
            return got
        vals, null = got
        values |= set(vals)
        has_null = has_null or null
        if len(values) > keyreads.MAX_KEYS:
            return f"the changes hold over {keyreads.MAX_KEYS} keys of {part.describe()}"
    return checked_keys(values, has_null, part.describe())


def checked_keys(values: set[Any], has_null: bool, described: str) -> tuple[list[Any], bool] | str:
    """The changed keys ``values`` sorted (and whether NULL is one), or why they cannot restrict the reads: too many,
    of several types, or of a type the file statistics may not compare (``described``: the partitioning, in words)."""
    if len(values) > keyreads.MAX_KEYS:
        return f"the changes hold over {keyreads.MAX_KEYS} keys of {described}"
    kinds = {type(v) for v in values}
    if len(kinds) > 1 and not kinds <= {int, bool}:
        return f"the changed keys of {described} are of several types ({', '.join(sorted(k.__name__ for k in kinds))})"
    if values and not (kinds <= {int, str} or _dates(kinds)):
        return (
            f"the keys of {described} are of a type the file statistics may not compare ({next(iter(kinds)).__name__})"
        )
    return sorted(values), has_null


def _via_keys(ct: ChangeTerms, part: Partitioning, name: str) -> tuple[list[Any], bool] | str:
    """The keys of the changed source ``name`` read without a column of the key but tied to a keyed source
    (:attr:`~mvsink.plan.partitioning.Partitioning.via`): the key values of that source's rows, before and after the
    change, whose tied column equals the tied column of a changed row (a NULL matches none)."""
    own, keyed, theirs = part.via[name]
    tied: tuple[list[Any], bool] | str | None = _driver_keys(ct, name, own)
    if tied is None:
        tied = _spark_keys(ct, name, own)
    if isinstance(tied, str):
        return tied
    values = tied[0]
    if not values:
        return [], False
    if len(values) > keyreads.MAX_KEYS:
        return f"the changes of {name!r} hold over {keyreads.MAX_KEYS} values of {own}"
    source = next(s for s in ct.desc.sources if s.name == keyed)
    versions = {source.version} | ({ct.base[keyed]} if keyed in {c.name for c in ct.changed} else set())
    found: set[Any] = set()
    null = False
    for version in sorted(versions):
        got = _tied_keys(source, version, theirs, part.columns[keyed], values)
        if isinstance(got, str):
            return got
        found |= set(got[0])
        null = null or got[1]
    log.info(
        "view %s: %d changed %s value(s) of %s tie to %d key(s) of %s (%s)",
        ct.view.name,
        len(values),
        own,
        name,
        len(found),
        keyed,
        part.describe(),
    )
    return sorted(found), null


def _tied_keys(
    source: SourceRead, version: int, column: str, key: str, values: list[Any]
) -> tuple[list[Any], bool] | str:
    """The distinct ``key`` values (and whether one is NULL) of ``source``'s rows at ``version`` whose ``column`` is
    one of ``values``: DuckDB over the snapshot's files, in the driver (no Spark job)."""
    import pyarrow as pa

    from mvsink.engines.duckdb import duckdb_cursor, duckdb_identifier
    from mvsink.engines.duckdbtext import duckdb_schema
    from mvsink.incremental.duckdbterms import MAX_SCAN_BYTES, snapshot_relation
    from mvsink.spark.sources import snapshot

    if source.kind != "path":
        return f"source {source.name!r} is a view"
    snap = snapshot(source.path, version, role=f"source {source.name!r}")
    schema = duckdb_schema(snap.schema, {column.casefold(), key.casefold()}, "UTC")
    rel = snapshot_relation(source, version, None, schema.names, schema, {"scan": MAX_SCAN_BYTES, "memory": 0})
    if isinstance(rel, str):
        return rel
    con = duckdb_cursor()
    try:
        if isinstance(rel[0], str):
            con.execute(f"CREATE TEMP VIEW _mv_tied AS {rel[0]}")
        else:
            con.register("_mv_tied", rel[0])
        con.register("_mv_values", pa.table({"v": values}))
        k, c = duckdb_identifier(key), duckdb_identifier(column)
        got = con.sql(f"SELECT DISTINCT t.{k} FROM _mv_tied t JOIN _mv_values v ON t.{c} = v.v").fetchall()
    except Exception as exc:  # noqa: BLE001 (any DuckDB failure: no partitioned recompute)
        return f"the keys tied to the change could not be read ({str(exc).splitlines()[0]})"
    finally:
        con.close()
    keys = [r[0] for r in got]
    return sorted(k for k in keys if k is not None), any(k is None for k in keys)


def _dates(kinds: set[type]) -> bool:
    import datetime as dt

    return kinds == {dt.date}


def _driver_keys(ct: ChangeTerms, name: str, column: str) -> tuple[list[Any], bool] | None:
    """Source ``name``'s changed keys read from its plain change files with pyarrow (no Spark job), or None."""
    files = getattr(ct.frames, "files", None) or {}
    return driver_keys(files.get(name), column)


def driver_keys(change: keyreads.ChangeFiles | None, column: str) -> tuple[list[Any], bool] | None:
    """The distinct non-null values of ``column`` in a source's plain change files ``change`` read with pyarrow (no
    Spark job), and whether one is NULL; or None (no files, a partition column, over the driver's bytes, a type
    other than an integer, a string or a date)."""
    import pyarrow as pa

    from mvsink.engines.arrow import parquet_columns

    if change is None or column in change.partition_columns or change.bytes > keyreads.MAX_DRIVER_KEY_BYTES:
        return None
    found: set[Any] = set()
    null = False
    for f in change.files:
        t = parquet_columns(f.path, [column])
        if t is None:
            return None
        typ = t.schema.field(column).type
        if not (pa.types.is_integer(typ) or pa.types.is_string(typ) or pa.types.is_date32(typ)):
            return None
        col = t.column(column)
        null = null or col.null_count > 0
        found.update(v for v in col.unique().to_pylist() if v is not None)
    return sorted(found), null


def _spark_keys(ct: ChangeTerms, name: str, column: str) -> tuple[list[Any], bool] | str:
    """Source ``name``'s changed keys collected by Spark (one job)."""
    from pyspark.sql import functions as F

    plus, minus = ct.frames[name]
    c = F.col(f"`{column}`")
    rows = plus.select(c.alias("k")).unionByName(minus.select(c.alias("k"))).distinct().limit(keyreads.MAX_KEYS + 1)
    got = [r[0] for r in rows.collect()]
    if len(got) > keyreads.MAX_KEYS:
        return f"the changes of {name!r} hold over {keyreads.MAX_KEYS} keys"
    return sorted(v for v in got if v is not None), any(v is None for v in got)
