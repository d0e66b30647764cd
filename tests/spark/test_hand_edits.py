"""Acceptance 3: hand edits of a view's table (deleted rows, junk rows, a removed file) are corrected by the next
refresh; one landing between write and append reschedules the refresh."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from mvsink.core.append import append
from mvsink.core.mint import mint
from mvsink.core.staging import list_staged
from mvsink.readers.arrow import read_view
from mvsink.write.job import run_write
from mvsink.write.runners import refresh
from tests.support.data import PROJECT, make_orders
from tests.support.delta import BASE, HOUR, staged_leftovers, write_at
from tests.support.oracle import multiset, oracle

pytestmark = pytest.mark.spark


def _remove_file_from_log(target: str) -> str:
    """Commit a Delta `remove` of one data file by hand, as a careless operator would."""
    dt = DeltaTable(target)
    acts = pa.table(dt.get_add_actions(flatten=True))
    path = acts.column("path")[0].as_py()
    size = acts.column("size_bytes")[0].as_py()
    v = dt.version() + 1
    now = int(time.time() * 1000)
    lines = [
        {"commitInfo": {"timestamp": now, "operation": "DELETE", "operationParameters": {}}},
        {
            "remove": {
                "path": path,
                "deletionTimestamp": now,
                "dataChange": True,
                "extendedFileMetadata": True,
                "partitionValues": {},
                "size": size,
            }
        },
    ]
    (Path(target) / "_delta_log" / f"{v:020d}.json").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return path


@pytest.mark.parametrize("edit", ["delete_rows", "junk_rows", "remove_file", "all"])
def test_hand_edits_are_corrected_by_next_refresh(spark, proj, edit):
    catalog, view, orders = proj
    r1 = BASE + HOUR
    assert refresh(view, r1, catalog=catalog, runner="inprocess", spark=spark).status == "appended"
    good = oracle(PROJECT, {"orders": orders}, r1)
    assert multiset(read_view(view)) == good

    if edit in ("delete_rows", "all"):
        DeltaTable(view.target).delete("qty = 3")
    if edit in ("junk_rows", "all"):
        junk = pa.table(
            {
                "cust_id": pa.array([77, None], pa.int32()),
                "status": ["Z", None],
                "qty": pa.array([9, 9], pa.int32()),
                "_mv_time": [r1, BASE - 5],
                "_mv_diff": [3, -2],
            }
        )
        write_deltalake(view.target.uri, junk, mode="append")
    if edit in ("remove_file", "all"):
        _remove_file_from_log(view.target)
    assert multiset(read_view(view, as_of=r1)) != good  # the table is damaged now

    # no source changed: the no-change shortcut must not apply after a foreign commit
    r2 = BASE + 2 * HOUR
    res = refresh(view, r2, catalog=catalog, runner="inprocess", spark=spark)
    assert res.status == "appended" and res.files >= 1, res
    assert multiset(read_view(view, as_of=r2)) == oracle(PROJECT, {"orders": orders}, r2)
    assert staged_leftovers(view.target) == []


def test_hand_edit_between_write_and_append_reschedules(spark, proj):
    catalog, view, orders = proj
    refresh(view, BASE + HOUR, catalog=catalog, runner="inprocess", spark=spark)
    write_at(orders, make_orders(random.Random(8), 100, 5), BASE + HOUR + 10)
    desc = mint(view, BASE + 2 * HOUR, catalog=catalog)
    report = run_write(spark, view, desc)
    assert report.status == "staged" and list_staged(view.target) == [desc.batch_id]
    DeltaTable(view.target).delete("qty = 3")  # lands after write read the table, before append
    res = append(view, desc, report)
    assert res.status == "rescheduled" and "changed after write read it" in res.reason
    assert res.upper == BASE + HOUR + 1
    assert staged_leftovers(view.target) == []
    again = refresh(view, BASE + 2 * HOUR, catalog=catalog, runner="inprocess", spark=spark)
    assert again.status == "appended"
    assert multiset(read_view(view)) == oracle(PROJECT, {"orders": orders}, BASE + 2 * HOUR)


def test_rows_a_hand_edit_stamps_after_the_frontier_are_corrected_at_the_refresh_time_they_reach(spark, proj):
    """Rows appended by hand at times past the table's frontier (inside the next batch's window, and past it) are
    visible at those times: the full diff of a batch compares the query with every row up to its refresh time, so
    each refresh time that reaches them sees them corrected."""
    catalog, view, orders = proj
    r1, r2, r3 = BASE + HOUR, BASE + 2 * HOUR, BASE + 4 * HOUR
    assert refresh(view, r1, catalog=catalog, runner="inprocess", spark=spark).status == "appended"
    junk = pa.table(
        {
            "cust_id": pa.array([77, 78, 79], pa.int32()),
            "status": ["Z", "Y", None],
            "qty": pa.array([9, 8, 7], pa.int32()),
            "_mv_time": [r1 + 10, r2, r2 + HOUR],  # (inside the next batch's window, at its refresh time, past it)
            "_mv_diff": [2, 1, 1],
        }
    )
    write_deltalake(view.target.uri, junk, mode="append")
    for r in (r2, r3):
        res = refresh(view, r, catalog=catalog, runner="inprocess", spark=spark)
        assert res.status == "appended" and res.mode == "full", res
        assert multiset(read_view(view, as_of=r)) == oracle(PROJECT, {"orders": orders}, r), r
    assert staged_leftovers(view.target) == []
