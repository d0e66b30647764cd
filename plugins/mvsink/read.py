"""Reading a view: its consolidated contents as of a time."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from .checks import split_errors
from .errors import ReadTimeError
from .table import check_readable, open_table, read_frontier
from .times import format_time
from .view import ViewDefinition
from .write import DIFF, TIME

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)



def readable_time(view: ViewDefinition, as_of: int | None) -> tuple[int, object]:
    """Check ``as_of`` against since/as_of/upper; return the time to read and the table handle."""
    dt = open_table(view.target)
    if dt is None:
        raise ReadTimeError(f"view {view.name}: table {view.target} does not exist yet. "
                            f"Fix: refresh the view first (mvsink refresh {view.name} --at TIME).")
    check_readable(dt, path=view.target, role=f"view {view.name}: target table")
    fr = read_frontier(dt, app_id=view.app_id, since_app_id=view.since_app_id)
    lowest = max(fr.since, view.as_of)
    if fr.upper <= lowest:
        raise ReadTimeError(f"view {view.name}: nothing is readable yet (upper {fr.upper}, as_of "
                            f"{format_time(view.as_of)}). Fix: refresh the view at or after its as_of.")
    t = fr.upper - 1 if as_of is None else as_of
    if t >= fr.upper:
        raise ReadTimeError(f"view {view.name}: {format_time(t)} ({t}) is at or past the upper {fr.upper}: the view is "
                            f"final only through {format_time(fr.upper - 1)}. Fix: read at an earlier time, or "
                            f"refresh the view at {format_time(t)} first.")
    if t < view.as_of:
        raise ReadTimeError(f"view {view.name}: {format_time(t)} is before the view's as_of "
                            f"{format_time(view.as_of)}; the view has no contents then. Fix: read at or after as_of.")
    if t < fr.since:
        raise ReadTimeError(f"view {view.name}: {format_time(t)} is below since {format_time(fr.since)}: older "
                            f"history was compacted. Fix: read at {format_time(fr.since)} ({fr.since}) or later.")
    return t, dt


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


def read_view(view: ViewDefinition, *, as_of: int | None = None, errors: str = "fail") -> pa.Table:
    """The view's contents at ``as_of`` (default: its newest final time), one row per copy.

    ``errors`` (views with checks): ``fail`` raises :class:`~mvsink.errors.ViewErrorsError` if the
    contents hold error rows, else returns the ok rows; ``include`` returns every row with its
    ``_mv_error``; ``ignore`` returns the ok rows only.
    """
    import pyarrow as pa

    t, dt = readable_time(view, as_of)
    updates = pa.table(dt.to_pyarrow_table())  # type: ignore[attr-defined]
    cons = consolidated(updates, through=t)
    negative = pa.compute.sum(pa.compute.less(cons.column(DIFF), 0)).as_py() if cons.num_rows else 0
    if negative:
        log.warning("view %s: %d row(s) have negative multiplicity at %s (the table was damaged); the next "
                    "refresh repairs it", view.name, negative, format_time(t))
    return split_errors(view.name, expand_rows(cons), errors, at=format_time(t))
