"""What talks to Spark: sessions and their conf, jars, Spark Connect, spark-submit, source reads, validation.

``from mvsink.spark import read_view`` gives the Spark reader (:func:`mvsink.spark.viewreader.read_view`);
nothing here imports pyspark until it is used.
"""

from __future__ import annotations

from typing import Any

__all__ = ["read_view"]


def __getattr__(name: str) -> Any:
    if name == "read_view":
        from mvsink.spark.viewreader import read_view

        return read_view
    raise AttributeError(f"module 'mvsink.spark' has no attribute {name!r}")
