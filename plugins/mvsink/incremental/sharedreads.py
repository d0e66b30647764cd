"""Files of one source that several DuckDB change terms scan, scanned once (:mod:`mvsink.incremental.duckdbterms`).

Terms that read files of the same source at the same version (an unchanged dimension that each changed fact's term
joins) read one table of the process's DuckDB database instead: the rows of their files whose join key is among the
keys of the source each term joins them with (an edge of the plan, as for a pruned read:
:mod:`mvsink.plan.joinkeys`), that source itself first reduced by the term's change sets where an edge allows.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import uuid
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

    from mvsink.incremental.decodedcopies import Copies
    from mvsink.location import Location
    from mvsink.plan.joinkeys import Edge

log = logging.getLogger(__name__)

# A source's files that two terms or more scan are scanned once, filtered by their join keys, from this size
# (below it a second scan costs less than the filtering query)
SHARE_MIN_BYTES: Final = 16 * 1024 * 1024


# Types whose equality is the same in Spark and DuckDB (a shared read filters by IN over the keys' values)
_SHARE_KEY_TYPES: Final = ("int8", "int16", "int32", "int64", "string", "large_string", "date32[day]")


@dataclasses.dataclass(frozen=True)
class _KeyRead:
    """One term's keys for a shared read: ``column`` of the term's source ``source``, that source's rows reduced
    to those whose ``reduce`` columns are among the keys of the term's change sets (``(column, change set,
    its column)``, each an edge of the plan)."""

    source: str
    column: str
    reduce: tuple[tuple[str, str, str], ...]


@dataclasses.dataclass(frozen=True)
class Scan:
    """A term's DuckDB scan of source ``source`` at ``version``: its files and their sizes."""

    source: str
    version: int
    files: tuple[tuple[Location, int], ...]


@contextlib.contextmanager
def shared_reads(
    terms: list[tuple[dict[str, pa.Table | str], set[str]]],
    scans: dict[str, Scan],
    edges: Sequence[Edge],
    schemas: dict[str, pa.Schema],
    *,
    copies: Copies | None = None,
) -> Iterator[dict[str, str]]:
    """Terms (each: its tables by source name and its changed sources) that scan files of the same source at the
    same version (at least :data:`SHARE_MIN_BYTES` together) scan them once. DuckDB keeps the rows of their files
    whose join key is among the keys of the source each term joins them with (an edge of the plan, as for a pruned
    read: a row with another key contributes to no term, and a file no term reads holds none of the keys), that
    source itself reduced by the term's change sets where an edge allows, in a table of the process's database,
    which those terms read instead. Yields the replacements (subquery by subquery); the tables are dropped on exit.
    TPC-H Q10 at SF 10 (1,500 orders changed): customer's 138 MB of names, addresses and comments are decoded once
    rather than once per term. With ``copies``, those rows are picked from the source's decoded copy
    (:mod:`mvsink.incremental.decodedcopies`), which the first such read writes."""
    from mvsink.engines.duckdb import duckdb_cursor, duckdb_identifier, parquet_relation

    q = duckdb_identifier
    out: dict[str, str] = {}
    made: list[str] = []
    groups: dict[tuple[str, int], list[str]] = {}
    for rel, scan in scans.items():
        groups.setdefault((scan.source, scan.version), []).append(rel)
    try:
        for (name, _), rels in groups.items():
            users = [u for u in terms if any(isinstance(v, str) and v in rels for v in u[0].values())]
            files = dict(f for rel in rels for f in scans[rel].files)
            size = sum(files.values())
            if len(users) < 2 or size < SHARE_MIN_BYTES:
                continue
            keys = _share_keys(name, users, edges, schemas)
            sch = schemas[name]
            union = parquet_relation(list(files), [(c, c) for c in sch.names], sch)
            if keys is None or union is None:
                continue
            column, reads = keys
            table = f"_mv_shared_{uuid.uuid4().hex}"
            con = duckdb_cursor()
            try:
                selects = []
                for i, ((tables, _), kr) in enumerate(zip(users, reads, strict=True)):
                    aliases: dict[str, str] = {}
                    for src in {kr.source, *(c for _, c, _ in kr.reduce)}:
                        aliases[src] = f"_mv_keys_{i}_{len(aliases)}"
                        v = tables[src]
                        if isinstance(v, str):
                            con.execute(f"CREATE TEMP VIEW {q(aliases[src])} AS {v}")
                        else:
                            con.register(aliases[src], v)
                    where = " AND ".join(
                        f"{q(col)} IN (SELECT {q(ccol)} FROM {q(aliases[change])})" for col, change, ccol in kr.reduce
                    )
                    selects.append(
                        f"SELECT {q(kr.column)} AS k FROM {q(aliases[kr.source])}"
                        + (f" WHERE {where}" if where else "")
                    )
                keys_of = f"SELECT k FROM ({' UNION ALL '.join(selects)})"
                picked = _from_copy(con, copies, list(files), sch, column, keys_of)
                if picked is not None:
                    alias = f"_mv_picked_{uuid.uuid4().hex}"
                    con.register(alias, picked)
                    con.execute(f"CREATE TABLE {q(table)} AS SELECT * FROM {q(alias)}")
                    con.unregister(alias)
                else:
                    con.execute(
                        f"CREATE TABLE {q(table)} AS SELECT * FROM {union} AS s WHERE s.{q(column)} IN ({keys_of})"
                    )
                made.append(table)
                rows = con.execute(f"SELECT count(*) FROM {q(table)}").fetchone()
            except Exception as exc:  # noqa: BLE001 (the terms then scan the files each, as before)
                log.info("terms read %s each: its shared read failed (%s)", name, str(exc).splitlines()[0])
                continue
            finally:
                con.close()
            log.info(
                "%d terms read %s once: %s row(s) of %d file(s), %.1f MB, whose %s is among their keys",
                len(users),
                name,
                rows[0] if rows else "?",
                len(files),
                size / 1e6,
                column,
            )
            for rel in rels:
                out[rel] = f"(SELECT * FROM {q(table)})"
        yield out
    finally:
        if made:
            con = duckdb_cursor()
            try:
                for table in made:
                    con.execute(f"DROP TABLE IF EXISTS {q(table)}")
            finally:
                con.close()


# Rows per batch of a decoded copy (about 50 MB of TPC-H customer's columns): the memory a copy's writing holds
_COPY_BATCH_ROWS: Final = 262_144


def _from_copy(
    con: duckdb.DuckDBPyConnection,
    copies: Copies | None,
    files: list[Location],
    schema: pa.Schema,
    column: str,
    keys_of: str,
) -> pa.Table | None:
    """The rows of the read of ``files`` as ``schema`` whose ``column`` is among the keys ``keys_of`` selects,
    picked from the files' decoded copies (written now where there are none); None where no copy serves."""
    from mvsink.engines.duckdb import parquet_relation
    from mvsink.incremental.decodedcopies import rows_with_keys

    if copies is None:
        return None
    keys = con.sql(f"SELECT DISTINCT k FROM ({keys_of}) WHERE k IS NOT NULL").to_arrow_table().column(0)

    def scan(file: Location) -> pa.RecordBatchReader | None:
        one = parquet_relation([file], [(c, c) for c in schema.names], schema)
        return None if one is None else con.sql(f"SELECT * FROM {one}").to_arrow_reader(_COPY_BATCH_ROWS)

    return rows_with_keys(copies, files=files, schema=schema, column=column, keys=keys.combine_chunks(), scan=scan)


def _share_keys(
    name: str,
    users: list[tuple[dict[str, pa.Table | str], set[str]]],
    edges: Sequence[Edge],
    schemas: dict[str, pa.Schema],
) -> tuple[str, list[_KeyRead]] | None:
    """For source ``name`` read by the terms ``users``: a column of it and, for each term, the source (and column)
    whose values that column must take, of the same type (an edge of the plan); or None."""
    by_column = _edges_into(name, edges)
    for column in sorted(by_column):
        target = _key_field(schemas, name, column)
        if target is None:
            continue
        reads = []
        for tables, changed in users:
            names = {n.casefold(): n for n in tables}
            found = None
            for e in by_column[column]:
                src = names.get(e.keys.source.casefold())
                f = None if src is None else _key_field(schemas, src, e.keys.name)
                if src is not None and f is not None and f.type == target.type:
                    found = _KeyRead(src, f.name, _reduced(src, names, changed, edges, schemas))
                    break
            if found is None:
                break
            reads.append(found)
        else:
            return target.name, reads
    return None


def _key_field(schemas: dict[str, pa.Schema], source: str, column: str) -> pa.Field | None:
    """Source ``source``'s field ``column`` (any case) where its type is one of :data:`_SHARE_KEY_TYPES`."""
    f = {f.name.casefold(): f for f in schemas[source]}.get(column.casefold())
    return f if f is not None and str(f.type) in _SHARE_KEY_TYPES else None


def _edges_into(target: str, edges: Sequence[Edge]) -> dict[str, list[Edge]]:
    """The edges that filter source ``target`` by another source's keys, by the column they filter (casefolded)."""
    by: dict[str, list[Edge]] = {}
    for e in edges:
        if e.target.source.casefold() == target.casefold() and e.keys.source.casefold() != target.casefold():
            by.setdefault(e.target.name.casefold(), []).append(e)
    return by


def _reduced(
    src: str, names: dict[str, str], changed: set[str], edges: Sequence[Edge], schemas: dict[str, pa.Schema]
) -> tuple[tuple[str, str, str], ...]:
    """The filters of a term's source ``src`` by its change sets' keys (:attr:`_KeyRead.reduce`): none for a change
    set itself."""
    if src in changed:
        return ()
    out = []
    for es in _edges_into(src, edges).values():
        for e in es:
            change = names.get(e.keys.source.casefold())
            if change not in changed:
                continue
            mine, theirs = _key_field(schemas, src, e.target.name), _key_field(schemas, change, e.keys.name)
            if mine is not None and theirs is not None and mine.type == theirs.type:
                out.append((mine.name, change, theirs.name))
    return tuple(out)
