"""mvsink: self-correcting materialized views on Spark, Delta Lake and Airflow.

The refresh protocol (mint -> write -> append) of Materialize's materialized-view sink,
as a batch pipeline. Heavy imports (pyspark, deltalake, pandas) happen inside functions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from mvsink.maintenance.compaction import compact
    from mvsink.maintenance.vacuum import vacuum
    from mvsink.readers.arrow import changes, read_view
    from mvsink.write.runners import refresh

__all__ = ["__version__", "changes", "compact", "read_view", "refresh", "vacuum"]


def __getattr__(name: str) -> Any:
    """The entry points, imported on first use: ``read_view`` and ``changes`` (the view's contents and its
    changefeed, :mod:`mvsink.readers.arrow`), ``refresh``, ``compact``, ``vacuum``."""
    if name in ("read_view", "changes"):
        from mvsink.readers import arrow

        return getattr(arrow, name)
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
