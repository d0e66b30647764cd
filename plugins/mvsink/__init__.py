"""mvsink: self-correcting materialized views on Spark, Delta Lake and Airflow.

The refresh protocol (mint -> write -> append) of Materialize's materialized-view sink,
as a batch pipeline. Heavy imports (pyspark, deltalake, pandas) happen inside functions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    import pyarrow as pa

    from .view import ViewDefinition


def read_view(view: ViewDefinition, *, as_of: int | None = None, errors: str = "fail") -> pa.Table:
    """The view's contents at ``as_of`` (default: its newest final time) as a pyarrow Table.

    ``errors``: ``fail`` (rows that failed an error check make the read fail), ``include`` or ``ignore``.
    """
    from .read import read_view as _read

    return _read(view, as_of=as_of, errors=errors)


def __getattr__(name: str) -> Any:
    if name in ("refresh",):
        from .refresh import refresh

        return refresh
    raise AttributeError(name)
