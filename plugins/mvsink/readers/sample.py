"""A view's schema and first rows for the Airflow page (issue 39): read as ``mvsink read`` reads them
(:func:`mvsink.readers.arrow.read_view`, as of the view's newest final time, ``upper - 1``), its hidden ``_mv_``
columns left out, and size-bounded (a cap of characters per cell and per row, a cap of rows) so a wide or
large table never makes a large page."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mvsink.core.table import ViewTable
from mvsink.definitions.view import ViewDefinition
from mvsink.exceptions import MvSinkError
from mvsink.readers.arrow import read_view

if TYPE_CHECKING:
    import pyarrow as pa

SAMPLE_ROWS = 20
CELL_CHARS = 120  # a longer value is cut, an ellipsis after it
ROW_CHARS = 1_000  # once a row's cells reach this, its later cells show only the ellipsis
HIDDEN_PREFIX = "_mv_"  # the table's own columns (time, diff, error, aggregate state)
CUT = "…"


def cut(text: str, limit: int) -> tuple[str, bool]:
    """``text`` cut to ``limit`` characters (an ellipsis after it), and whether it was cut."""
    return (text, False) if len(text) <= limit else (text[: max(0, limit - 1)] + CUT, True)


def cell_text(value: Any) -> str:
    """A value as the page shows it (``NULL`` for a null; bytes as hex)."""
    if value is None:
        return "NULL"
    if isinstance(value, bytes | bytearray):
        return "0x" + bytes(value).hex()
    return str(value)


def bounded_rows(
    rows: list[list[Any]], *, cell_chars: int = CELL_CHARS, row_chars: int = ROW_CHARS
) -> tuple[list[list[str]], int]:
    """Rows as bounded text (pure): each cell cut to ``cell_chars``, each row to ``row_chars`` in all; and how many
    cells were cut."""
    out, cuts = [], 0
    for row in rows:
        used, shown = 0, []
        for value in row:
            room = min(cell_chars, row_chars - used)
            text, was_cut = cut(cell_text(value), max(room, 1))
            cuts += was_cut
            used += len(text)
            shown.append(text)
        out.append(shown)
    return out, cuts


def view_sample(view: ViewDefinition, *, rows: int = SAMPLE_ROWS) -> dict[str, Any]:
    """``{"as_of", "columns": [{"name", "type"}], "rows": [[text]], "total_rows", "cut_cells"}`` of the view's
    contents as of its upper - 1 (``as_of`` None and no rows when nothing is final yet); ``{"error"}`` when it
    cannot be read (the message names the view and the fix)."""
    try:
        table = ViewTable.open(view, check=False)
        upper = table.frontier.upper if table.exists else 0
        if upper <= 0:
            return {"as_of": None, "columns": [], "rows": [], "total_rows": 0, "cut_cells": 0}
        data = read_view(view, as_of=upper - 1, errors="ignore")
    except MvSinkError as exc:
        return {"error": str(exc)}
    keep = [n for n in data.column_names if not n.startswith(HIDDEN_PREFIX)]
    data = in_order(data.select(keep))
    head = data.slice(0, rows).to_pylist()
    shown, cuts = bounded_rows([[r[c] for c in keep] for r in head])
    return {
        "as_of": upper - 1,
        "columns": [{"name": f.name, "type": str(f.type)} for f in data.schema],
        "rows": shown,
        "total_rows": data.num_rows,
        "cut_cells": cuts,
    }


def in_order(data: pa.Table) -> pa.Table:
    """``data`` sorted by its columns, left to right (the first rows then stay the same from one read to the next:
    a read's row order is not fixed); as it is where a column's type does not sort."""
    import pyarrow as pa

    try:
        return data.sort_by([(c, "ascending") for c in data.column_names]) if data.num_columns else data
    except (pa.ArrowNotImplementedError, pa.ArrowTypeError, pa.ArrowInvalid):
        return data
