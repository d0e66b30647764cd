"""Issue 5, acceptance 3: the changefeed between refresh times equals the oracle's difference, before and after
compaction; the Python API and the CLI agree.

The view history these tests work on (a projection with duplicate rows, refreshed at 7 times over a
randomized orders history) is built once per session; each test works on its own copy (tests/spark/conftest.py)."""

from __future__ import annotations

import csv
import io
import json

import pytest

from mvsink.exceptions import ReadTimeError
from mvsink.maintenance.compaction import compact
from mvsink.readers.arrow import changes
from mvsink.times import format_time
from tests.support.cli import run_cli_inprocess
from tests.support.delta import BASE
from tests.support.oracle import minus, signed

pytestmark = pytest.mark.spark


def test_changes_between_refresh_times_equal_the_oracle_difference(copy):
    catalog, view, data, times, expected = copy
    first = changes(view, BASE, times[0] + 1)
    assert first.column_names == ["cust_id", "status", "qty", "_mv_time", "_mv_diff"]
    assert signed(first) == expected[times[0]]
    pairs = [(i, i + 1) for i in range(len(times) - 1)] + [(0, len(times) - 1), (2, 5)]
    for i, j in pairs:
        feed = changes(view, times[i] + 1, times[j] + 1)
        ts = feed.column("_mv_time").to_pylist()
        assert ts == sorted(ts) and all(times[i] < t <= times[j] for t in ts)
        assert 0 not in feed.column("_mv_diff").to_pylist()
        assert signed(feed) == minus(expected[times[j]], expected[times[i]]), (i, j)
    # to defaults to the upper; the Python API at package level and the CLI agree
    import mvsink

    whole = mvsink.changes(view.name, times[2] + 1, views_dir=str(catalog.views_dir))
    assert whole.equals(changes(view, times[2] + 1, times[-1] + 1))
    lines = run_cli_inprocess(
        catalog.views_dir, "changes", "proj", "--from", str(times[2] + 1), "--to", str(times[-1] + 1)
    )
    rows = [json.loads(x) for x in lines.splitlines()]
    assert rows == whole.to_pylist()
    text = run_cli_inprocess(catalog.views_dir, "changes", "proj", "--from", str(times[2] + 1), "--format", "csv")
    assert len(list(csv.DictReader(io.StringIO(text)))) == whole.num_rows

    with pytest.raises(ReadTimeError, match="not final"):
        changes(view, times[0], times[-1] + 2)

    # after compaction: a feed from since starts with the contents at since, later changes are unchanged
    since = times[3]
    later = changes(view, since + 1, times[-1] + 1)
    assert compact(view, since=since).status == "compacted"
    assert signed(changes(view, since, since + 1)) == expected[since]
    assert signed(changes(view, since, times[-1] + 1)) == expected[times[-1]]
    assert changes(view, since + 1, times[-1] + 1).equals(later)
    with pytest.raises(ReadTimeError) as err:
        changes(view, times[1] + 1, times[-1] + 1)
    assert f"oldest readable time is {format_time(since)} ({since})" in str(err.value)
