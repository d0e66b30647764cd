"""The package's public entry points resolve lazily to the modules that hold them."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.unit


def test_top_level_entry_points_resolve() -> None:
    import mvsink
    from mvsink.maintenance.compaction import compact
    from mvsink.maintenance.vacuum import vacuum
    from mvsink.write.runners import refresh

    assert (mvsink.refresh, mvsink.compact, mvsink.vacuum) == (refresh, compact, vacuum)
    assert callable(mvsink.read_view) and callable(mvsink.changes)
    assert set(mvsink.__all__) >= {"refresh", "compact", "vacuum", "read_view", "changes"}
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = mvsink.nope  # type: ignore[attr-defined]


def test_the_spark_reader_is_importable_from_the_subpackage() -> None:
    from mvsink.spark import read_view
    from mvsink.spark.viewreader import read_view as reader

    assert read_view is reader


def test_importing_the_package_and_dag_factory_loads_no_heavy_module() -> None:
    code = (
        "import sys, mvsink, mvsink.airflow.dag_factory, mvsink.spark, mvsink.definitions.catalog\n"
        "heavy = sorted(m for m in ('pyspark', 'deltalake', 'duckdb', 'pandas', 'pyarrow') if m in sys.modules)\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ""
