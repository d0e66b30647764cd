"""A change no column of the query reads: nothing to write, whatever the query (subqueries, outer joins, DISTINCT).

A view is a function of its sources (non-deterministic functions are refused when its file is read), and of only
the columns its query names. So where every changed source's change set, projected on those columns, consolidates
to nothing (an update of a price no view column uses: TPC-H Q16 when ``p_retailprice``, ``ps_supplycost`` and
``s_acctbal`` change), the query's result did not change and the refresh writes nothing, at any scale, without Spark.

Failing closed (None: the refresh goes on as before):

- the columns a query names are every identifier its SQL holds (a superset: names of tables, aliases and columns
  alike); a ``*`` makes them all of the source's columns (not ``count(*)``'s, nor an ``EXISTS (SELECT * ...)``'s:
  a count of rows and whether a row is found read no column's value); an unknown function (a UDF: its result may be anything),
  a table sample or a file metadata column (``input_file_name()``, ``_metadata``) refuses;
- change sets must be plain Parquet (no deletion vectors) of at most :data:`MAX_CHANGE_BYTES` of files (whatever
  their share of the source: only the named columns are read), the source's files plain
  (:func:`mvsink.incremental.linear.plain_change`), no partition column among those columns, and each column of a
  type the consolidation compares exactly (integers, decimals, strings, binary, dates, timestamps, booleans, and
  floating point by its bits, so ``-0.0`` and ``0.0`` do not cancel; no nested types);
- a source the query reads no named column of (``count(*)``) refuses.
"""

from __future__ import annotations

import functools
import logging
import math
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    import pyarrow as pa

    from mvsink.core.batch import BatchDescription, SourceRead
    from mvsink.definitions.view import ViewDefinition

log = logging.getLogger(__name__)

# The change set files read (only the columns the query names: an update rewrites whole files, e.g. TPC-H SF 1's
# partsupp, 2 x 40 MB, for a price change)
MAX_CHANGE_BYTES: Final = 1024 * 1024 * 1024

# Functions and names whose values depend on more than the named columns' values
_REFUSED_NAMES: Final = frozenset(
    {"input_file_name", "input_file_block_start", "input_file_block_length", "_metadata", "spark_partition_id"}
)


@functools.lru_cache(maxsize=64)
def read_names(query: str) -> frozenset[str] | None:
    """Every identifier of ``query`` (casefolded), ``{"*"}`` added where it has a star (not ``count(*)``'s); None where the query's
    result may depend on more than its sources' named columns (an unknown function, a table sample, file
    metadata) or does not parse."""
    import sqlglot
    from sqlglot import exp

    try:
        tree = sqlglot.parse_one(query, read="spark")
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError):
        return None
    names: set[str] = set()
    for node in tree.walk():
        if isinstance(node, (exp.Anonymous, exp.TableSample)):
            return None
        if isinstance(node, exp.Star):
            # (count(*) counts rows, and EXISTS (SELECT * ...) asks for one: neither reads a column's value)
            if not isinstance(node.parent, exp.Count) and not _exists_list(node):
                names.add("*")
        elif isinstance(node, exp.Identifier):
            names.add(str(node.this).casefold())
        elif isinstance(node, exp.Func) and node.sql_name().casefold() in _REFUSED_NAMES:
            return None
    if names & _REFUSED_NAMES:
        return None
    return frozenset(names)


def _exists_list(star: Any) -> bool:
    """Is ``star`` an item of the select list of an ``EXISTS`` subquery (``EXISTS (SELECT * FROM ...)``, TPC-H Q4,
    Q21, Q22), whose value is whether a row is found, whatever its columns hold?"""
    from sqlglot import exp

    select = star.parent
    return isinstance(select, exp.Select) and star.arg_key == "expressions" and isinstance(select.parent, exp.Exists)


def untouched_change(view: ViewDefinition, desc: BatchDescription) -> str | None:
    """Why the batch writes nothing (its changes touch no column the query names), or None where that is not sure."""
    from mvsink.incremental.linear import changed_sources, source_check

    base = desc.base_versions
    if base is None or not view.incremental:
        return None
    if source_check(desc, base):
        return None
    changed = changed_sources(desc, base)
    if not changed or any(s.kind != "path" for s in changed):  # (a view source that did not change: no matter)
        return None
    names = read_names(view.query)
    if names is None:
        return None
    for s in changed:
        if not _untouched(s, base[s.name], names):
            return None
    sources = ", ".join(repr(s.name) for s in changed)
    return f"the change of {sources} touches no column the query reads: nothing to write (computed without Spark)"


def _untouched(s: SourceRead, base: int, names: frozenset[str]) -> bool:
    """Does source ``s``'s change since ``base``, projected on the columns ``names`` holds, consolidate to
    nothing?"""
    from mvsink.columns import DIFF
    from mvsink.engines.arrow import change_rows
    from mvsink.engines.duckdb import consolidated
    from mvsink.incremental.linear import plain_change, table_change

    cs = table_change(s, base, math.inf)  # (a rewrite's files count twice: bounded by MAX_CHANGE_BYTES instead)
    if isinstance(cs, str) or cs.deletion_vectors:
        return False
    plain, partition_columns = plain_change(s)
    if not plain:
        return False
    schema = _source_schema(s)
    if schema is None:
        return False
    wanted = [f for f in schema if "*" in names or f.name.casefold() in names]
    if not wanted or any(f.name in partition_columns for f in wanted) or not all(_exact(f.type) for f in wanted):
        return False
    columns = [(f.name, f.name) for f in wanted]
    rows = change_rows(cs, columns, _arrow_schema(wanted, DIFF), weight=DIFF, max_bytes=MAX_CHANGE_BYTES)
    if rows is None:
        return False
    left = consolidated(_bits(rows)).num_rows
    log.info(
        "source %s: %d change row(s) over the %d column(s) the query reads, %d after consolidation",
        s.name,
        rows.num_rows,
        len(wanted),
        left,
    )
    return bool(left == 0)


def _source_schema(s: SourceRead) -> pa.Schema | None:
    import pyarrow as pa

    from mvsink.core.table import open_delta

    dt = open_delta(s.path, version=s.version)
    return None if dt is None else pa.schema(dt.schema().to_arrow())


def _arrow_schema(fields: list[pa.Field], weight: str) -> pa.Schema:
    import pyarrow as pa

    return pa.schema([*fields, pa.field(weight, pa.int64())])


def _bits(rows: pa.Table) -> pa.Table:
    """``rows`` with each floating-point column as its values' bits (an integer of the same width): rows cancel
    only where their bits are equal (-0.0 and 0.0 do not, nor NaNs of other payloads)."""
    import pyarrow as pa

    for i, f in enumerate(rows.schema):
        if pa.types.is_floating(f.type):
            width = pa.int64() if f.type.bit_width == 64 else pa.int32() if f.type.bit_width == 32 else pa.int16()
            col = pa.chunked_array([c.view(width) for c in rows.column(i).chunks], width)
            rows = rows.set_column(i, f.name, col)
    return rows


def _exact(t: pa.DataType) -> bool:
    """Can the consolidation compare values of this type exactly (floating point as bits; nothing nested)?"""
    import pyarrow as pa

    from mvsink.engines.duckdb import arrow_groupable

    return bool(pa.types.is_floating(t) or arrow_groupable(t))
