"""Reading a view: its consolidated contents as of a time, and its changes between two times."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Literal

from mvsink.columns import DIFF, ERROR
from mvsink.core.checks import check_errors_mode, view_errors, worst_check
from mvsink.core.frontier import check_read_time
from mvsink.core.table import ViewTable
from mvsink.definitions.catalog import resolve_view
from mvsink.definitions.view import ViewDefinition
from mvsink.exceptions import ReadTimeError
from mvsink.readers.sql import consolidation_sql
from mvsink.times import format_time

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)


def consolidated(updates: pa.Table, *, through: int) -> pa.Table:
    """Per distinct row, the sum of ``_mv_diff`` over updates with ``time <= through`` (non-zero only)."""
    import duckdb

    con = duckdb.connect()
    con.register("updates", updates)
    return con.sql(consolidation_sql(updates.column_names, through=through)).to_arrow_table()


def expand_rows(table: pa.Table) -> pa.Table:
    """Rows repeated by their positive multiplicity, without the diff column."""
    import numpy as np
    import pyarrow as pa

    diffs = np.asarray(table.column(DIFF).to_numpy(zero_copy_only=False), dtype=np.int64)
    idx = np.repeat(np.arange(len(diffs)), np.clip(diffs, 0, None))
    return table.drop_columns([DIFF]).take(pa.array(idx, type=pa.int64()))


def read_updates(view: ViewDefinition) -> pa.Table:
    """Every update of the view's table: user columns, ``_mv_time``, ``_mv_diff``."""
    return ViewTable.open(view, check=False).updates()


def read_view(
    view: ViewDefinition | str,
    *,
    as_of: int | None = None,
    views_dir: str | None = None,
    to: Literal["arrow", "pandas"] = "arrow",
    errors: str = "fail",
) -> Any:
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

    table = ViewTable.open(view).require()
    t = check_read_time(view.name, table.frontier, view.as_of, as_of)
    cons = consolidated(table.updates(), through=t)
    negative = pa.compute.sum(pa.compute.less(cons.column(DIFF), 0)).as_py() if cons.num_rows else 0
    if negative:
        log.warning(
            "view %s: %d row(s) have negative multiplicity at %s (the table was damaged); the next refresh repairs it",
            view.name,
            negative,
            format_time(t),
        )
    return split_errors(view.name, expand_rows(cons), errors, at=format_time(t))


def changes(
    view: ViewDefinition | str, from_time: int, to_time: int | None = None, *, views_dir: str | None = None
) -> pa.Table:
    """The view's consolidated updates ``(row, _mv_time, _mv_diff)`` with ``from_time <= time < to_time``.

    ``to_time`` defaults to the upper (times below it are final); later is refused, and so is a
    ``from_time`` below ``since``. Summing the diffs per row gives ``contents(to_time - 1) -
    contents(from_time - 1)``. Updates at time ``since`` hold the consolidated history before it,
    so a feed from ``since`` starts with the contents at ``since`` (as a subscription would).
    One update per distinct row and time, zero sums dropped, ordered by time, then by the row.
    """
    import duckdb

    v = resolve_view(view, views_dir)
    table = ViewTable.open(v).require()
    fr = table.frontier
    end = fr.upper if to_time is None else to_time
    if end > fr.upper:
        raise ReadTimeError(
            f"view {v.name}: changes up to {format_time(end)} ({end}) are not final: the upper is "
            f"{fr.upper} (final through {format_time(fr.upper - 1)}). Fix: pass --to at or below "
            f"{fr.upper}, or refresh the view first."
        )
    if from_time < fr.since:
        raise ReadTimeError(
            f"view {v.name}: changes from {format_time(from_time)} ({from_time}) are gone: history "
            f"below since {format_time(fr.since)} was compacted; the oldest readable time is "
            f"{format_time(fr.since)} ({fr.since}). Fix: pass --from {fr.since} or later."
        )
    if from_time > end:
        raise ReadTimeError(
            f"view {v.name}: --from {format_time(from_time)} is after --to {format_time(end)}. Fix: swap them."
        )
    updates = table.updates()
    con = duckdb.connect()
    con.register("updates", updates)
    out = con.sql(
        consolidation_sql(updates.column_names, from_time=from_time, to_time=end, per_time=True)
    ).to_arrow_table()
    return out.cast(updates.schema)


def split_errors(view_name: str, table: pa.Table, errors: str = "fail", *, at: str = "") -> pa.Table:
    """Contents (rows already expanded) -> what a reader asked for.

    ``fail`` (default): the ok rows, without ``_mv_error``; raise :class:`ViewErrorsError`
    naming the checks and a sample row if there is any error row. ``include``: every row, with
    ``_mv_error`` (NULL on ok rows; added as NULL for a table without checks). ``ignore``: the
    ok rows only, without ``_mv_error``.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    check_errors_mode(view_name, errors)
    if ERROR not in table.column_names:
        if errors == "include":
            return table.append_column(pa.field(ERROR, pa.string()), pa.nulls(table.num_rows, pa.string()))
        return table
    if errors == "include":
        return table
    bad = pc.is_valid(table.column(ERROR))
    n_bad = pc.sum(bad).as_py() or 0
    if n_bad and errors == "fail":
        err_rows = table.filter(bad)
        per = {
            r[ERROR]: int(r["count_all"]) for r in err_rows.group_by(ERROR).aggregate([([], "count_all")]).to_pylist()
        }
        first = worst_check(per)
        of_first = err_rows.filter(pc.equal(err_rows.column(ERROR), first))
        raise view_errors(view_name, per, of_first.slice(0, 1).drop_columns([ERROR]).to_pylist()[0], at=at)
    return table.filter(pc.invert(bad)).drop_columns([ERROR])
