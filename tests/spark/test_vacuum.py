"""Vacuum deletes the files compaction removed, after retention, but never a staged batch still in flight.

The view history these tests work on (a projection with duplicate rows, refreshed at 7 times over a
randomized orders history) is built once per session; each test works on its own copy (tests/spark/conftest.py)."""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest
from deltalake import DeltaTable

from mvsink.core.append import append
from mvsink.core.batch import BatchDescription
from mvsink.core.mint import mint
from mvsink.exceptions import MvSinkError
from mvsink.maintenance.compaction import compact
from mvsink.maintenance.vacuum import vacuum
from mvsink.readers.arrow import read_view
from mvsink.write.job import run_write
from tests.support.cli import run_cli_inprocess
from tests.support.data import PROJECT, make_orders
from tests.support.delta import HOUR, active_files, staged_leftovers, write_at
from tests.support.oracle import multiset, oracle

pytestmark = pytest.mark.spark


def test_vacuum_deletes_compacted_files_but_never_a_batch_in_flight(spark, copy):
    catalog, view, data, times, expected = copy
    target = view.target
    before = set(active_files(target))
    assert compact(view, since=times[4]).status == "compacted"
    removed = before - active_files(target)
    assert removed and all((Path(target) / p).exists() for p in removed)  # still there for time travel

    # a batch staged for the next refresh, not appended yet
    orders = str(data / "orders")
    r = times[-1] + HOUR
    write_at(orders, make_orders(random.Random(7), 5000, 3), r - 60_000)
    desc = mint(view, r, catalog=catalog, run_id="inflight")
    assert isinstance(desc, BatchDescription)
    report = run_write(spark, view, desc)
    assert report.status == "staged" and report.files
    staged = [Path(target) / f.path for f in report.files]
    old = time.time() - 30 * 24 * 3600  # as if staged long ago: only the manifest protects it
    for p in staged:
        import os

        os.utime(p, (old, old))
    version = DeltaTable(target).version()

    assert vacuum(view).deleted == ()  # default retention (7 days): the tombstones are fresh
    with pytest.raises(MvSinkError, match="retention"):
        vacuum(view, retention_hours=1)
    dry = vacuum(view, retention_hours=0, enforce_retention=False, dry_run=True)
    assert set(dry.deleted) == removed and all((Path(target) / p).exists() for p in removed)
    assert {str(Path(target) / p) for p in dry.protected} == {str(p) for p in staged}
    res = vacuum(view, retention_hours=0, enforce_retention=False)
    assert set(res.deleted) == removed
    assert not any((Path(target) / p).exists() for p in removed)
    assert all(p.exists() for p in staged)
    assert DeltaTable(target).version() == version  # vacuum commits nothing
    for t in times[4:]:
        assert multiset(read_view(view, as_of=t)) == expected[t]
    out = append(view, desc, report)
    assert out.status == "appended"
    assert multiset(read_view(view, as_of=r)) == oracle(PROJECT, {"orders": orders}, r)
    assert staged_leftovers(target) == []
    text = run_cli_inprocess(catalog.views_dir, "vacuum", "proj", "--retention-hours", "0", "--force", "--dry-run")
    assert "would delete" in text
