"""Reading a view: its consolidated contents as of a time, and its changes between two times."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Literal

from mvsink.core.table import Frontier, check_readable, open_table, read_frontier
from mvsink.definitions.view import Catalog, ViewDefinition
from mvsink.exceptions import ReadTimeError
from mvsink.spark.checks import split_errors
from mvsink.spark.job import DIFF, TIME
from mvsink.times import format_time

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)


def resolve_view(view: ViewDefinition | str, views_dir: str | None = None) -> ViewDefinition:
    """A view definition, or a view name looked up in ``views_dir`` (default: $MVSINK_VIEWS_DIR)."""
    return view if isinstance(view, ViewDefinition) else Catalog(views_dir).get(view)


def check_read_time(name: str, fr: Frontier, as_of_view: int, as_of: int | None) -> int:
    """The time to read (default ``upper - 1``), refusing times outside ``[max(since, as_of), upper)``."""
    lowest = max(fr.since, as_of_view)
    if fr.upper <= lowest:
        raise ReadTimeError(f"view {name}: nothing is readable yet (upper {fr.upper}, oldest readable time "
                            f"{format_time(lowest)} ({lowest})). Fix: refresh the view at or after "
                            f"{format_time(lowest)}.")
    t = fr.upper - 1 if as_of is None else as_of
    if t >= fr.upper:
        raise ReadTimeError(f"view {name}: {format_time(t)} ({t}) is at or past the upper {fr.upper}: the view is "
                            f"final only through {format_time(fr.upper - 1)}. Fix: read at an earlier time, or "
                            f"refresh the view at {format_time(t)} first.")
    if t < as_of_view:
        raise ReadTimeError(f"view {name}: {format_time(t)} is before the view's as_of "
                            f"{format_time(as_of_view)}; the view has no contents then. Fix: read at or after as_of.")
    if t < fr.since:
        raise ReadTimeError(f"view {name}: {format_time(t)} ({t}) is below since {format_time(fr.since)}: older "
                            f"history was compacted; the oldest readable time is {format_time(fr.since)} "
                            f"({fr.since}). Fix: read at {format_time(fr.since)} or later.")
    return t


def readable_time(view: ViewDefinition, as_of: int | None) -> tuple[int, object]:
    """Check ``as_of`` against since/as_of/upper; return the time to read and the table handle."""
    dt, fr = open_view_table(view)
    return check_read_time(view.name, fr, view.as_of, as_of), dt


def open_view_table(view: ViewDefinition) -> tuple[Any, Frontier]:
    """The view's table and its frontiers; a clear error if it does not exist yet or cannot be read."""
    dt = open_table(view.target)
    if dt is None:
        raise ReadTimeError(f"view {view.name}: table {view.target} does not exist yet. "
                            f"Fix: refresh the view first (mvsink refresh {view.name} --at TIME).")
    check_readable(dt, path=view.target, role=f"view {view.name}: target table")
    return dt, read_frontier(dt, app_id=view.app_id, since_app_id=view.since_app_id)


def consolidated(updates: pa.Table, *, through: int) -> pa.Table:
    """Per distinct row, the sum of ``_mv_diff`` over updates with ``time <= through`` (non-zero only)."""
    import duckdb

    cols = [c for c in updates.column_names if c not in (TIME, DIFF)]
    qcols = ", ".join(f'"{c}"' for c in cols)
    con = duckdb.connect()
    con.register("updates", updates)
    sql = (f"SELECT {qcols}, CAST(sum({DIFF}) AS BIGINT) AS {DIFF} FROM updates WHERE {TIME} <= {int(through)} "
           f"GROUP BY ALL HAVING sum({DIFF}) <> 0")
    return con.sql(sql).to_arrow_table()


def expand_rows(table: pa.Table) -> pa.Table:
    """Rows repeated by their positive multiplicity, without the diff column."""
    import numpy as np
    import pyarrow as pa

    diffs = np.asarray(table.column(DIFF).to_numpy(zero_copy_only=False), dtype=np.int64)
    idx = np.repeat(np.arange(len(diffs)), np.clip(diffs, 0, None))
    return table.drop_columns([DIFF]).take(pa.array(idx, type=pa.int64()))


def read_updates(view: ViewDefinition) -> pa.Table:
    """Every update of the view's table: user columns, ``_mv_time``, ``_mv_diff``."""
    import pyarrow as pa

    dt = open_table(view.target)
    if dt is None:
        raise ReadTimeError(f"view {view.name}: table {view.target} does not exist yet. Fix: refresh the view first.")
    return pa.table(dt.to_pyarrow_table())


def read_view(view: ViewDefinition | str, *, as_of: int | None = None, views_dir: str | None = None,
              to: Literal["arrow", "pandas"] = "arrow", errors: str = "fail") -> Any:
    """The view's contents at ``as_of`` (default: its newest final time), one row per copy.

    A pyarrow Table (``to="arrow"``) or a pandas DataFrame (``to="pandas"``). ``errors`` (views
    with checks): ``fail`` raises :class:`~mvsink.exceptions.ViewErrorsError` if the contents hold error
    rows, else returns the ok rows; ``include`` returns every row with its ``_mv_error``; ``ignore``
    returns the ok rows only.
    """
    table = _read_view(resolve_view(view, views_dir), as_of, errors)
    return table.to_pandas() if to == "pandas" else table


def _read_view(view: ViewDefinition, as_of: int | None, errors: str = "fail") -> pa.Table:
    import pyarrow as pa

    t, dt = readable_time(view, as_of)
    updates = pa.table(dt.to_pyarrow_table())  # type: ignore[attr-defined]
    cons = consolidated(updates, through=t)
    negative = pa.compute.sum(pa.compute.less(cons.column(DIFF), 0)).as_py() if cons.num_rows else 0
    if negative:
        log.warning("view %s: %d row(s) have negative multiplicity at %s (the table was damaged); the next "
                    "refresh repairs it", view.name, negative, format_time(t))
    return split_errors(view.name, expand_rows(cons), errors, at=format_time(t))


def changes(view: ViewDefinition | str, from_time: int, to_time: int | None = None, *,
            views_dir: str | None = None) -> pa.Table:
    """The view's consolidated updates ``(row, _mv_time, _mv_diff)`` with ``from_time <= time < to_time``.

    ``to_time`` defaults to the upper (times below it are final); later is refused, and so is a
    ``from_time`` below ``since``. Summing the diffs per row gives ``contents(to_time - 1) -
    contents(from_time - 1)``. Updates at time ``since`` hold the consolidated history before it,
    so a feed from ``since`` starts with the contents at ``since`` (as a subscription would).
    One update per distinct row and time, zero sums dropped, ordered by time, then by the row.
    """
    import duckdb
    import pyarrow as pa

    v = resolve_view(view, views_dir)
    dt, fr = open_view_table(v)
    end = fr.upper if to_time is None else to_time
    if end > fr.upper:
        raise ReadTimeError(f"view {v.name}: changes up to {format_time(end)} ({end}) are not final: the upper is "
                            f"{fr.upper} (final through {format_time(fr.upper - 1)}). Fix: pass --to at or below "
                            f"{fr.upper}, or refresh the view first.")
    if from_time < fr.since:
        raise ReadTimeError(f"view {v.name}: changes from {format_time(from_time)} ({from_time}) are gone: history "
                            f"below since {format_time(fr.since)} was compacted; the oldest readable time is "
                            f"{format_time(fr.since)} ({fr.since}). Fix: pass --from {fr.since} or later.")
    if from_time > end:
        raise ReadTimeError(f"view {v.name}: --from {format_time(from_time)} is after --to {format_time(end)}. "
                            "Fix: swap them.")
    updates = pa.table(dt.to_pyarrow_table())
    cols = ", ".join('"' + c.replace('"', '""') + '"' for c in updates.column_names if c not in (TIME, DIFF))
    con = duckdb.connect()
    con.register("updates", updates)
    out = con.sql(f"SELECT {cols}, {TIME}, CAST(sum({DIFF}) AS BIGINT) AS {DIFF} FROM updates "
                  f"WHERE {TIME} >= {int(from_time)} AND {TIME} < {int(end)} GROUP BY {cols}, {TIME} "
                  f"HAVING sum({DIFF}) <> 0 ORDER BY {TIME}, {cols}").to_arrow_table()
    return out.cast(updates.schema)
