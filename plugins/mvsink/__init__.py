"""mvsink: self-correcting materialized views on Spark, Delta Lake and Airflow.

The refresh protocol (mint -> write -> append) of Materialize's materialized-view sink,
as a batch pipeline. Heavy imports (pyspark, deltalake, pandas) happen inside functions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

__version__ = "0.1.0"

if TYPE_CHECKING:
    import pyarrow as pa

    from mvsink.definitions.view import ViewDefinition


def read_view(
    view: ViewDefinition | str,
    *,
    as_of: int | None = None,
    views_dir: str | None = None,
    to: Literal["arrow", "pandas"] = "arrow",
    errors: str = "fail",
) -> Any:
    """The view's contents at ``as_of`` (default: its newest final time): a pyarrow Table, or a
    pandas DataFrame with ``to="pandas"``. ``view`` is a definition or a name in ``views_dir``.

    ``errors``: ``fail`` (rows that failed an error check make the read fail), ``include`` or ``ignore``.
    """
    from mvsink.readers.arrow import read_view as _read

    return _read(view, as_of=as_of, views_dir=views_dir, to=to, errors=errors)


def changes(
    view: ViewDefinition | str, from_time: int, to_time: int | None = None, *, views_dir: str | None = None
) -> pa.Table:
    """The view's consolidated updates with ``from_time <= _mv_time < to_time`` (default: the upper)."""
    from mvsink.readers.arrow import changes as _changes

    return _changes(view, from_time, to_time, views_dir=views_dir)


__all__ = ["__version__", "changes", "compact", "read_view", "refresh", "vacuum"]


def __getattr__(name: str) -> Any:
    """The heavier entry points, imported on first use: ``refresh``, ``compact``, ``vacuum``."""
    if name == "refresh":
        from mvsink.write.runners import refresh

        return refresh
    if name == "compact":
        from mvsink.maintenance.compaction import compact

        return compact
    if name == "vacuum":
        from mvsink.maintenance.vacuum import vacuum

        return vacuum
    raise AttributeError(f"module 'mvsink' has no attribute {name!r}")
