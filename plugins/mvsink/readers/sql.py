"""The DuckDB SQL that consolidates a view's updates (readers and compaction share it).

Consolidating sums ``_mv_diff`` per distinct row (and per time, for a changefeed) and drops
zero sums. Column names are the view's own and may hold any character: every one is quoted
with :func:`quote_ident`. The output keeps the table's column order (``_mv_error`` comes after
``_mv_time`` and ``_mv_diff`` in tables of views with checks), so results cast back to the
table's schema.
"""

from __future__ import annotations

from collections.abc import Sequence

from mvsink.columns import DIFF, TIME


def quote_ident(name: str) -> str:
    """A DuckDB identifier: ``name`` in double quotes, inner double quotes doubled."""
    return '"' + name.replace('"', '""') + '"'


def consolidation_sql(
    columns: Sequence[str],
    *,
    through: int | None = None,
    from_time: int | None = None,
    to_time: int | None = None,
    per_time: bool = False,
    at: int | None = None,
    table: str = "updates",
) -> str:
    """A SELECT over ``table`` giving one update per distinct row: the row, and its summed ``_mv_diff``.

    ``columns``: the table's columns in order (``_mv_time`` and ``_mv_diff`` among them, else they
    go last). Rows are the other columns (``_mv_error`` included). Only updates with
    ``from_time <= _mv_time`` / ``_mv_time <= through`` / ``_mv_time < to_time`` count (each bound
    if given). Output ``_mv_time``:

    - ``per_time``: one update per row and time, times kept, ordered by time then row (a changefeed);
    - ``at``: every update stamped with time ``at`` (compaction to since ``at``);
    - neither: no ``_mv_time`` column (contents as of ``through``).
    """
    if per_time and at is not None:
        raise ValueError("consolidation_sql: per_time and at exclude each other")
    cols = list(columns)
    for c in (TIME, DIFF):
        if c not in cols:
            cols.append(c)
    row = [quote_ident(c) for c in cols if c not in (TIME, DIFF)]
    t, d = quote_ident(TIME), quote_ident(DIFF)
    select = []
    for c in cols:
        if c == DIFF:
            select.append(f"CAST(sum({d}) AS BIGINT) AS {d}")
        elif c == TIME:
            if per_time:
                select.append(t)
            elif at is not None:
                select.append(f"CAST({int(at)} AS BIGINT) AS {t}")
        else:
            select.append(quote_ident(c))
    where = (
        ([f"{t} >= {int(from_time)}"] if from_time is not None else [])
        + ([f"{t} <= {int(through)}"] if through is not None else [])
        + ([f"{t} < {int(to_time)}"] if to_time is not None else [])
    )
    group = row + ([t] if per_time else [])
    sql = f"SELECT {', '.join(select)} FROM {quote_ident(table)}"
    if where:
        sql += f" WHERE {' AND '.join(where)}"
    if group:
        sql += f" GROUP BY {', '.join(group)}"
    sql += f" HAVING sum({d}) <> 0"
    if per_time:
        sql += f" ORDER BY {', '.join([t, *row])}"
    return sql
