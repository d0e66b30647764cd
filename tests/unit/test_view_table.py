"""ViewTable: a missing table as a state; each of our commits checked in the data *and* the commit log.

delta-rs only (no Spark): files are staged by hand the way the write step stages them.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from mvsink.columns import DIFF, ERROR, TIME
from mvsink.core import deltalog
from mvsink.core.batch import StagedFile
from mvsink.core.commitinfo import CommitInfo
from mvsink.core.frontier import MISSING, Frontier
from mvsink.core.staging import stats_json
from mvsink.core.table import ViewTable
from mvsink.definitions.viewfile import parse_view
from mvsink.exceptions import ReadTimeError, UnsupportedFeatureError

pytestmark = pytest.mark.unit

BASE = 1_767_225_600_000
SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), (TIME, pa.int64()), (DIFF, pa.int64())])


def _view(data: Path):
    return parse_view(
        "name: v\nquery: SELECT id, name FROM orders\nsources: {orders: orders}\ntarget: v\n"
        "as_of: 2026-01-01T00:00:00Z\n",
        file=str(data / "views" / "v.yaml"),
        data_root=data,
    )


def _stage(target: str, batch: str, rows: list[tuple[int, str, int, int]]) -> StagedFile:
    folder = Path(target) / "batches" / batch
    folder.mkdir(parents=True)
    p = folder / "part-0.parquet"
    pq.write_table(pa.Table.from_pylist([dict(zip(SCHEMA.names, r)) for r in rows], schema=SCHEMA), p)
    n, stats = stats_json(str(p))
    return StagedFile(path=f"batches/{batch}/part-0.parquet", size=p.stat().st_size, rows=n, stats=stats)


def _rows(table: ViewTable) -> list[tuple]:
    return sorted(tuple(r.values()) for r in table.updates().select(["id", "name", TIME, DIFF]).to_pylist())


def test_a_missing_table_is_a_state(tmp_path):
    view = _view(tmp_path)
    table = ViewTable.open(view)
    assert not table.exists and table.frontier == MISSING == Frontier(0, 0, -1) and table.version == -1
    assert table.history() == [] and table.commits_after(-1) == [] and table.active_paths() == set()
    assert table.column_names == [] and table.last_content_change(limit=5) is None
    assert table.app_id == view.app_id and table.since_app_id == view.since_app_id
    with pytest.raises(ReadTimeError, match=r"view v: table .*/v does not exist yet\. Fix: refresh the view first"):
        table.require()
    with pytest.raises(ReadTimeError, match="does not exist yet"):
        table.updates()
    with pytest.raises(ReadTimeError, match="no Delta table at .*Fix: pass a view's table path or its name"):
        ViewTable.open_path(str(tmp_path / "nothing"))
    assert not ViewTable.open_path(str(tmp_path / "nothing"), "v").exists


def test_every_commit_of_ours_in_the_data_and_the_log(tmp_path):
    view = _view(tmp_path)
    table = ViewTable.create(view, SCHEMA)
    assert table.exists and table.frontier == Frontier(upper=0, since=0, version=0)
    assert ViewTable.open_path(view.target).name == "v"  # the name from the table's metadata
    assert table.history()[0].info == CommitInfo(operation="create", view="v")

    # bump: no files, the upper to as_of
    bump = CommitInfo(operation="bump", view="v", lower=BASE, upper=BASE + 10, from_upper=0)
    assert table.commit_files(bump, (), upper=BASE) == 1
    assert table.frontier.upper == 0  # the handle does not follow its own commits ...
    assert table.reload().frontier == Frontier(upper=BASE, since=0, version=1)  # ... until reloaded
    c = deltalog.read_commit(view.target, 1)
    assert c is not None and c.transactions == {view.app_id: BASE} and not c.adds and c.info == bump

    # append: files and the upper in one commit
    f = _stage(view.target, "b1", [(1, 'a"b', BASE + 9, 1), (2, "x", BASE + 9, 1), (2, "x", BASE + 9, 1)])
    append = CommitInfo(
        operation="append",
        view="v",
        lower=BASE,
        upper=BASE + 10,
        batch_id="b1",
        sources={"orders": 3},
        rows_added=3,
        rows_retracted=0,
        bytes=f.size,
        mode="full",
    )
    stale = ViewTable.open(view)  # a second handle at version 1
    assert table.commit_files(append, [f], upper=BASE + 10) == 2
    table.reload()
    assert table.frontier == Frontier(upper=BASE + 10, since=0, version=2)
    assert _rows(table) == [(1, 'a"b', BASE + 9, 1), (2, "x", BASE + 9, 1), (2, "x", BASE + 9, 1)]
    assert table.active_paths() == {f.path}
    c = deltalog.read_commit(view.target, 2)
    assert c is not None and c.info == append and c.transactions == {view.app_id: BASE + 10}
    assert [(a["path"], a["size"], a["dataChange"]) for a in c.adds] == [(f.path, f.size, True)]
    assert c.adds[0]["stats"] == f.stats
    assert deltalog.batches_committed(view.target, ["b1", "b2"]) == {"b1"}

    # a commit from a handle that missed version 2 loses, and leaves no trace
    g = _stage(view.target, "b2", [(3, "y", BASE + 9, 1)])
    assert stale.commit_files(append, [g], upper=BASE + 10) is None
    assert table.reload().version == 2 and deltalog.read_commit(view.target, 3) is None

    # evolve: _mv_error added, content-preserving
    evolve = CommitInfo(operation="evolve", view="v", lower=BASE + 10, upper=BASE + 20)
    assert table.add_error_column(evolve)
    table.reload()
    assert table.column_names == ["id", "name", TIME, DIFF, ERROR]
    c = deltalog.read_commit(view.target, 3)
    assert c is not None and c.info == evolve and c.metadata is not None and not c.adds
    assert not stale.add_error_column(evolve)  # from a handle behind the table: lost, nothing committed
    assert table.reload().version == 3

    # compact to since BASE + 9: the duplicate rows consolidate into one update with diff 2
    schema = table.arrow_schema()
    consolidated = pa.Table.from_pylist(
        [
            {"id": 1, "name": 'a"b', TIME: BASE + 9, DIFF: 1, ERROR: None},
            {"id": 2, "name": "x", TIME: BASE + 9, DIFF: 2, ERROR: None},
        ],
        schema=schema,
    )
    compact = CommitInfo(
        operation="compact",
        view="v",
        since=BASE + 9,
        previous_since=0,
        upper_seen=BASE + 10,
        run_id="c1",
        rows_before=3,
    )
    assert table.commit_compaction(consolidated.to_reader(), predicate=f"{TIME} <= {BASE + 9}", info=compact) == 4
    table.reload()
    assert table.frontier == Frontier(upper=BASE + 10, since=BASE + 9, version=4)
    assert _rows(table) == [(1, 'a"b', BASE + 9, 1), (2, "x", BASE + 9, 2)]
    c = deltalog.read_commit(view.target, 4)
    assert c is not None and c.info == compact and c.transactions == {view.since_app_id: BASE + 9}
    assert [r["path"] for r in c.removes] == [f.path] and len(c.adds) == 1
    assert table.at_version(2).frontier == Frontier(upper=BASE + 10, since=0, version=2)

    # history: our commits decoded, newest first; the last content change is the append
    hist = table.history()
    assert [h.version for h in hist] == [4, 3, 2, 1, 0]
    assert [h.op for h in hist] == ["compact", "evolve", "append", "bump", "create"]
    assert hist[0].metrics.get("num_added_rows") == 2
    assert [h.version for h in table.commits_after(2)] == [3, 4]
    last = table.last_content_change(limit=50)
    assert last is not None and last.version == 2 and last.info == append

    # a hand edit is foreign: no info, and it is now the last content change
    write_deltalake(
        view.target.uri,
        pa.Table.from_pylist([{"id": 9, "name": "z", TIME: BASE, DIFF: 1, ERROR: None}], schema=schema),
        mode="append",
    )
    last = table.reload().last_content_change(limit=50)
    assert last is not None and last.version == 5 and last.info is None and last.op is None
    assert last.operation == "WRITE"


def test_open_refuses_unreadable_features_unless_asked_not_to_check(tmp_path):
    view = _view(tmp_path)
    write_deltalake(
        view.target.uri, pa.Table.from_pylist([], schema=SCHEMA), configuration={"delta.enableDeletionVectors": "true"}
    )
    if "deletionVectors" not in (DeltaTable(view.target).protocol().reader_features or []):
        pytest.skip("this delta-rs does not enable deletion vectors on create")
    with pytest.raises(UnsupportedFeatureError, match="view v: target table: .* deletion vectors"):
        ViewTable.open(view)
    assert ViewTable.open(view, check=False).exists


def test_one_refresh_shares_a_handle_per_version_that_no_commit_moves(tmp_path):
    view = _view(tmp_path)
    ViewTable.create(view, SCHEMA)
    bump = CommitInfo(operation="bump", view="v", lower=BASE, upper=BASE + 10, from_upper=0)
    with deltalog.snapshot_cache():
        first = ViewTable.open(view)
        again = ViewTable.open(view)
        assert first.delta is again.delta  # the newest version, opened once
        assert ViewTable.open(view, version=0).delta is first.delta  # and shared with an open at that version
        with deltalog.snapshot_cache():  # a nested one is the same cache
            assert ViewTable.open(view).delta is first.delta
        assert again.commit_files(bump, (), upper=BASE) == 1
        assert first.version == again.version == 0  # the shared handle did not move with the commit
        newest = ViewTable.open(view)
        assert newest.version == 1 and newest.frontier.upper == BASE and newest.delta is not first.delta
        assert first.reload().version == 1 and first.delta is newest.delta
        assert again.version == 0  # reloading one table moves no other's handle
        assert ViewTable.open(view, version=0).delta is again.delta
        assert newest.add_error_column(CommitInfo(operation="evolve", view="v"))  # a write that moves its handle
        assert newest.version == first.version == 1 and ERROR not in newest.column_names
        assert ERROR in ViewTable.open(view).column_names
    outside = ViewTable.open(view)
    assert outside.delta is not ViewTable.open(view).delta  # outside a refresh, every open is new


def test_a_checkpoint_every_ten_versions_keeps_the_data_frontier_and_history(tmp_path):
    """Every 10th version of a view's table gets a checkpoint (a refresh with nothing to do commits too: without
    them each open replays every commit); what the table reads as is the same, and the log keeps every commit."""
    view = _view(tmp_path)
    ViewTable.create(view, SCHEMA)
    log_dir = Path(view.target) / "_delta_log"
    rows = []
    for v in range(1, 23):
        table = ViewTable.open(view)
        upper = BASE + 10 * v
        if v % 3:  # empty appends between appends of rows, as refreshes with nothing to do make
            info = CommitInfo(operation="append", view="v", lower=upper - 10, upper=upper, mode="unchanged")
            assert table.commit_files(info, (), upper=upper) == v
            continue
        f = _stage(view.target, f"b{v}", [(v, f"n{v}", upper - 1, 1)])
        info = CommitInfo(operation="append", view="v", lower=upper - 10, upper=upper, mode="full")
        assert table.commit_files(info, [f], upper=upper) == v
        rows.append((v, f"n{v}", upper - 1, 1))
    assert sorted(p.name for p in log_dir.glob("*.checkpoint.parquet")) == [
        "00000000000000000010.checkpoint.parquet",
        "00000000000000000020.checkpoint.parquet",
    ]
    assert len(list(log_dir.glob("*.json"))) == 23  # every commit file stays (history, time travel)
    table = ViewTable.open(view)
    assert table.frontier == Frontier(upper=BASE + 220, since=0, version=22)
    assert _rows(table) == sorted(rows)
    assert [h.version for h in table.history(25)] == list(range(22, -1, -1))
    assert table.last_content_change(limit=50).version == 22  # an empty append is a refresh: found first
    assert ViewTable.open(view, version=15).frontier.upper == BASE + 150  # a version between checkpoints
    # a table that asks for its own interval keeps it
    DeltaTable(view.target).alter.set_table_properties({"delta.checkpointInterval": "4"})
    table = ViewTable.open(view)
    info = CommitInfo(operation="append", view="v", lower=BASE + 220, upper=BASE + 230, mode="unchanged")
    assert table.commit_files(info, (), upper=BASE + 230) == 24
    assert (log_dir / "00000000000000000024.checkpoint.parquet").exists()


def test_last_content_change_looks_past_the_newest_few_commits(tmp_path):
    """The newest content change is found behind more content-preserving commits than the first look reads."""
    view = _view(tmp_path)
    ViewTable.create(view, SCHEMA)
    table = ViewTable.open(view)
    f = _stage(view.target, "b1", [(1, "a", BASE + 9, 1)])
    info = CommitInfo(operation="append", view="v", lower=BASE, upper=BASE + 10, mode="full")
    assert table.commit_files(info, [f], upper=BASE + 10) == 1
    for v in range(2, 9):  # compactions: content-preserving commits of ours
        table = ViewTable.open(view)
        compact = CommitInfo(operation="compact", view="v", since=BASE + v)
        assert table.commit_files(compact, (), upper=BASE + 10) == v
    table = ViewTable.open(view)
    assert table.last_content_change(limit=50).version == 1
    assert table.last_content_change(limit=5) is None  # not among the newest 5
