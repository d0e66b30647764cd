"""A top-k of one upstream view's columns refreshed in the driver, without Spark (mode ``incremental:topk``).

A view ``SELECT c1, ..., cn FROM up ORDER BY ... LIMIT k`` whose one source is a view (the form a top-k over an
aggregate takes through its intermediate table, :mod:`mvsink.definitions.intermediate`) has for M, the ORDER BY's
input, ``up``'s contents projected to its columns. Its change since the last refresh is ``up``'s update log between
the two reads (:func:`mvsink.core.viewchanges.view_changes`: the files of the batches appended in between, no Spark),
projected and summed per row; T is the view's table. Step 2 of :mod:`mvsink.incremental.topk` then runs in the driver
(:func:`mvsink.incremental.duckdbtopk.top_k_corrections`), and its recompute (a deleted row of T and too few
candidates) is the top k of ``up``'s contents at the batch's time, read with pyarrow.

The query is read on sqlglot's tree and fails closed: one view source, named once in FROM; every select item a plain
column of it (no alias, no expression); the ORDER BY of plain names of the view's columns; an integer LIMIT; a
declared key listed in the ORDER BY. pyarrow must order as Spark does: every ORDER BY column and key column an
integer, decimal, date, timestamp, boolean or string (the upstream table's strings carry no collation); else the
Spark refresh runs. Also refused: no earlier refresh of this definition, the view's checks, a table past
:data:`~mvsink.incremental.duckdbtopk.MAX_DRIVER_SCAN_BYTES` to recompute from, a change set the upstream's log does
not prove (a compaction past the last read, a foreign commit).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from mvsink.columns import DIFF, ERROR, TIME
from mvsink.incremental.duckdbtopk import CHANGE_COUNT, MAX_DRIVER_SCAN_BYTES, OrderKeys

if TYPE_CHECKING:
    import pyarrow as pa

    from mvsink.core.batch import BatchDescription
    from mvsink.core.table import ViewTable
    from mvsink.definitions.view import ViewDefinition


@dataclasses.dataclass(frozen=True)
class ViewTopK:
    """``SELECT columns FROM source ORDER BY order LIMIT limit`` (names as written in the query)."""

    source: str
    columns: tuple[str, ...]
    order: tuple[tuple[str, bool, bool], ...]  # (column, descending, NULLs first)
    limit: int


def view_topk(query: str) -> ViewTopK | None:
    """The query (Spark SQL) as a top-k of one table's plain columns, or None."""
    import sqlglot
    from sqlglot import exp

    from mvsink.definitions.querytext import limit_of, order_by

    try:
        tree = sqlglot.parse_one(query, dialect="spark")
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError):
        return None
    if not isinstance(tree, exp.Select) or any(
        tree.args.get(a) for a in ("with", "joins", "where", "group", "having", "distinct", "offset", "qualify")
    ):
        return None
    frm = tree.args.get("from_") or tree.args.get("from")  # (sqlglot's name for it changed)
    table = frm.this if isinstance(frm, exp.From) else None
    if not isinstance(table, exp.Table) or table.args.get("db") or table.alias or not tree.args.get("order"):
        return None
    columns = []
    for e in tree.expressions:
        if not isinstance(e, exp.Column) or e.table or not isinstance(e.this, exp.Identifier):
            return None
        columns.append(e.name)
    lower = [c.lower() for c in columns]
    if len(set(lower)) != len(lower):
        return None
    order = order_by(tree, columns)
    limit = limit_of(tree)
    if order is None or limit is None:
        return None
    return ViewTopK(table.name, tuple(columns), tuple(order), limit)


def _sortable(t: pa.DataType) -> bool:
    """Does pyarrow order values of this type as Spark does (and never tie two different ones)? Those it groups
    as Spark does (:func:`~mvsink.engines.duckdb.arrow_groupable`), binary aside."""
    import pyarrow as pa

    from mvsink.engines.duckdb import arrow_groupable

    return arrow_groupable(t) and not (pa.types.is_binary(t) or pa.types.is_large_binary(t))


def topk_without_spark(view: ViewDefinition, desc: BatchDescription) -> tuple[pa.Table, str, ViewTable] | str:
    """The corrections of ``desc`` for a top-k of one view source (the module's docstring), their reason and the
    view's table they were computed against; or why the Spark refresh must compute them."""
    from mvsink.core.table import ViewTable
    from mvsink.core.viewchanges import view_changes

    spec = view_topk(view.query)
    if spec is None:
        return "the query is not a top-k of one view source's columns"
    if view.checks or len(desc.sources) != 1 or desc.sources[0].kind != "view":
        return "the view has checks, or its one source is not a view"
    s = desc.sources[0]
    if s.name.lower() != spec.source.lower():
        return "the query reads another name than its source"
    if desc.base_versions is None or desc.base_time is None or s.name not in desc.base_versions:
        return "no earlier refresh of this definition to start from"
    table = ViewTable.open_path(desc.target, view.name)
    if not table.exists or table.frontier.upper > desc.lower or ERROR in table.column_names:
        return "the view's table is missing, ahead of the batch, or keeps check results"
    up = ViewTable.open_path(s.path, s.view or s.name, version=s.version, check=False)
    schema = _schema(view, spec, up, table)
    if isinstance(schema, str):
        return schema
    changes = view_changes(s, base_version=desc.base_versions[s.name], base_time=desc.base_time, time=desc.time)
    if isinstance(changes, str):
        return changes
    if changes.total_bytes > MAX_DRIVER_SCAN_BYTES:
        return f"view {s.view}'s table is over {MAX_DRIVER_SCAN_BYTES >> 20} MB"
    delta = _change(changes.files, spec, schema, after=desc.base_time, through=desc.time)
    if delta is None:
        return f"a file of view {s.view}'s change lacks a column"
    return _corrections(view, desc, spec, schema, table, up, delta)


def _schema(view: ViewDefinition, spec: ViewTopK, up: ViewTable, table: ViewTable) -> pa.Schema | str:
    """The view's table schema (its columns, ``_mv_time``, ``_mv_diff``), where its columns are ``spec``'s, of the
    upstream's types, and every ORDER BY and key column orders in pyarrow as in Spark; else why not."""
    import pyarrow as pa

    upstream = {f.name.lower(): f for f in up.arrow_schema()}
    fields = []
    for c in spec.columns:
        f = upstream.get(c.lower())
        if f is None or c.lower().startswith("_mv_"):
            return f"column {c!r} is not a column of the upstream view"
        if f.metadata and any(b"collation" in k.lower() or b"collation" in v.lower() for k, v in f.metadata.items()):
            return f"column {c!r} has a collation"
        fields.append(pa.field(c, f.type, True))
    own = table.arrow_schema()
    mine = [f for f in own if f.name not in (TIME, DIFF)]
    if [(f.name.lower(), f.type) for f in mine] != [(f.name.lower(), f.type) for f in fields] or own.names != [
        *(f.name for f in mine),
        TIME,
        DIFF,
    ]:
        return "the table's columns are not the query's"
    ordered = {c.lower() for c, _, _ in spec.order}
    if not view.key or any(k.lower() not in ordered for k in view.key):
        return "ORDER BY ... LIMIT needs a declared key, listed in the ORDER BY"
    for c, _, _ in spec.order:
        if not _sortable(upstream[c.lower()].type):
            return f"ORDER BY column {c!r} has a type pyarrow does not order as Spark does"
    return own


def _change(
    files: tuple[object, ...], spec: ViewTopK, schema: pa.Schema, *, after: int, through: int
) -> pa.Table | None:
    """Δ: the upstream's updates in ``(after, through]`` from ``files``, projected to the view's columns and
    summed per row (``_mv_topk_n``), zero sums dropped; None where a file lacks a column."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from mvsink.engines.arrow import parquet_columns
    from mvsink.engines.duckdb import consolidated

    user = pa.schema([f for f in schema if f.name not in (TIME, DIFF)])
    parts = []
    for f in files:
        rows = parquet_columns(f, [*spec.columns, TIME, DIFF])  # type: ignore[arg-type]
        if rows is None:
            return None
        t = rows.column(TIME)
        rows = rows.filter(pc.and_(pc.greater(t, after), pc.less_equal(t, through)))
        parts.append(
            pa.table([*[rows.column(c) for c in spec.columns], rows.column(DIFF)], names=[*user.names, DIFF]).cast(
                pa.schema([*user, pa.field(DIFF, pa.int64())])
            )
        )
    empty = pa.schema([*user, pa.field(DIFF, pa.int64())]).empty_table()
    net = consolidated(pa.concat_tables(parts) if parts else empty)
    return net.rename_columns([CHANGE_COUNT if c == DIFF else c for c in net.column_names])


def _corrections(
    view: ViewDefinition,
    desc: BatchDescription,
    spec: ViewTopK,
    schema: pa.Schema,
    table: ViewTable,
    up: ViewTable,
    delta: pa.Table,
) -> tuple[pa.Table, str, ViewTable] | str:
    from mvsink.incremental.duckdbtopk import consolidated_top, top_k_corrections

    names = [f.name for f in schema if f.name not in (TIME, DIFF)]
    order: OrderKeys = [
        (
            names[[c.lower() for c in names].index(c.lower())],
            "descending" if d else "ascending",
            "at_start" if n else "at_end",
        )
        for c, d, n in spec.order
    ]
    key_cols = [names[[c.lower() for c in names].index(k.lower())] for k in view.key]
    persisted = consolidated_top(table, names, lower=desc.lower)
    source = desc.sources[0]

    def recompute() -> tuple[pa.Table, str]:
        return _recomputed(up, spec, schema, persisted, order, at=desc.time, through=desc.time), (
            f"over view {source.view}'s rows in the driver"
        )

    def first(candidates: pa.Table) -> pa.Table:  # (order is never None here)
        raise AssertionError("ordered by pyarrow")

    out, why = top_k_corrections(
        persisted,
        delta,
        k=spec.limit,
        key_cols=key_cols,
        out_schema=schema,
        order=order,
        at=desc.time,
        changed=f"view {source.view}",
        recompute=recompute,
        first=first,
    )
    if out is None:
        return why
    import pyarrow as pa

    assert isinstance(out, pa.Table)
    return out, f"{why}, in the driver without Spark", table


def _recomputed(
    up: ViewTable, spec: ViewTopK, schema: pa.Schema, persisted: pa.Table, order: OrderKeys, *, at: int, through: int
) -> pa.Table:
    """The top k of the upstream's contents at ``through`` (its updates up to then, summed per row, each row
    repeated by its multiplicity) diffed against T."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from mvsink.engines.arrow import row_corrections
    from mvsink.engines.duckdb import consolidated
    from mvsink.incremental.duckdbtopk import first_rows

    updates = up.updates()
    updates = updates.filter(pc.less_equal(updates.column(TIME), through))
    lower = {c.lower(): c for c in updates.column_names}
    user = pa.schema([f for f in schema if f.name not in (TIME, DIFF)])
    rows = pa.table(
        [*[updates.column(lower[c.lower()]) for c in spec.columns], updates.column(DIFF)], names=[*user.names, DIFF]
    )
    net = consolidated(rows)
    counts = np.clip(np.asarray(net.column(DIFF).to_numpy(zero_copy_only=False), dtype=np.int64), 0, None)
    m = net.drop_columns([DIFF]).take(pa.array(np.repeat(np.arange(len(counts)), counts), pa.int64())).cast(user)
    return row_corrections(first_rows(m, order, spec.limit), persisted, schema, at=at)
