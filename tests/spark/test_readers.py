"""Issue 5, acceptance 5: the Spark, pandas (and polars) readers agree with `mvsink read` at every readable time.

The view history these tests work on (a projection with duplicate rows, refreshed at 7 times over a
randomized orders history) is built once per session; each test works on its own copy (tests/spark/conftest.py)."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from mvsink.exceptions import ReadTimeError
from mvsink.maintenance.compaction import compact
from mvsink.readers.arrow import read_view
from tests.support.cli import run_cli_inprocess
from tests.support.oracle import multiset

pytestmark = pytest.mark.spark


def test_spark_and_pandas_readers_agree_with_mvsink_read(spark, copy):
    import mvsink
    import mvsink.spark.viewreader as mvspark

    catalog, view, data, times, expected = copy
    compact(view, since=times[2])
    try:
        import polars as pl
    except ImportError:
        pl = None
    for t in (times[2], times[4], times[-1], None):
        args = [] if t is None else ["--as-of", str(t)]
        cli_rows = [
            json.loads(x)
            for x in run_cli_inprocess(catalog.views_dir, "read", "proj", "--format", "jsonl", *args).splitlines()
        ]
        from_cli = multiset(pa.Table.from_pylist(cli_rows))
        assert from_cli == expected[t if t is not None else times[-1]]
        df = mvspark.read_view(spark, view, as_of=t)
        assert type(df).__name__ == "DataFrame" and df.columns == ["cust_id", "status", "qty"]
        assert multiset(pa.Table.from_pylist([r.asDict() for r in df.collect()])) == from_cli
        by_path = mvspark.read_view(spark, view.target, as_of=t)
        assert multiset(pa.Table.from_pylist([r.asDict() for r in by_path.collect()])) == from_cli
        frame = mvsink.read_view("proj", as_of=t, views_dir=str(catalog.views_dir), to="pandas")
        assert type(frame).__name__ == "DataFrame"
        assert multiset(pa.Table.from_pandas(frame, preserve_index=False)) == from_cli
        if pl is not None:
            assert multiset(pl.from_arrow(mvsink.read_view(view, as_of=t)).to_arrow()) == from_cli
    with_diff = mvspark.read_view(spark, view, as_of=times[4], with_diff=True)
    assert sum(r["_mv_diff"] for r in with_diff.collect()) == sum(expected[times[4]].values())
    for bad in (times[1], times[-1] + 1):
        with pytest.raises(ReadTimeError):
            mvspark.read_view(spark, view, as_of=bad)
        with pytest.raises(ReadTimeError):
            read_view(view, as_of=bad)
