"""Issue 5: compaction (since) keeps contents from since on, races a refresh without loss, settles committed
batches, runs from the append task when due, and is foreign to an append when it passes its lower.

The view history these tests work on (a projection with duplicate rows, refreshed at 7 times over a
randomized orders history) is built once per session; each test works on its own copy (tests/spark/conftest.py)."""

from __future__ import annotations

import json
import multiprocessing as mp
import random
import time
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from mvsink.core.append import append
from mvsink.core.batch import BatchDescription
from mvsink.core.mint import mint
from mvsink.core.staging import collect_garbage, list_staged, manifest_path
from mvsink.definitions.catalog import Catalog
from mvsink.exceptions import InjectedFault, MvSinkError, ReadTimeError
from mvsink.maintenance.compaction import compact
from mvsink.readers.arrow import read_view
from mvsink.times import format_time
from mvsink.write.job import run_write
from mvsink.write.runners import refresh
from tests.support.cli import run_cli_inprocess
from tests.support.data import PROJECT, make_orders, project_views
from tests.support.delta import HOUR, active_files, staged_leftovers, write_at
from tests.support.oracle import multiset, oracle, signed

pytestmark = pytest.mark.spark


def _log_rows(target: str) -> int:
    acts = pa.table(DeltaTable(target).get_add_actions(flatten=True))
    return sum(acts.column("num_records").to_pylist())


def _log_actions(target: str, version: int) -> list[dict]:
    text = (Path(target) / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _all_updates(target: str) -> pa.Table:
    return pa.table(DeltaTable(target).to_pyarrow_table())


def test_compaction_keeps_contents_from_since_and_refuses_older_reads(spark, copy):
    catalog, view, data, times, expected = copy
    target = view.target
    dt = DeltaTable(target)
    upper, version = dt.transaction_version(view.app_id), dt.version()
    assert upper == times[-1] + 1
    since = times[3]
    before = _all_updates(target)
    rows_before = _log_rows(target)
    after_since = sum(1 for t in before.column("_mv_time").to_pylist() if t > since)
    live_at_since = len(signed(before.filter(pa.compute.less_equal(before["_mv_time"], since))))

    t0 = time.monotonic()
    res = compact(view, catalog=catalog, since=since)
    seconds = time.monotonic() - t0
    assert res.status == "compacted", res
    assert res.version == version + 1 and res.since == since and res.previous_since == 0 and res.upper == upper
    assert res.rows_before == rows_before
    rows_after = _log_rows(target)
    assert rows_after == res.rows_after <= live_at_since + after_since < rows_before
    print(
        f"compaction: {rows_before} -> {rows_after} rows in the log (live at since {live_at_since}, "
        f"updates after since {after_since}), {res.files_removed} files removed, {seconds:.2f} s"
    )

    # the commit: since set, upper untouched, our operation in the commit info, old files removed
    dt = DeltaTable(target)
    assert dt.version() == version + 1
    assert dt.transaction_version(view.since_app_id) == since
    assert dt.transaction_version(view.app_id) == upper
    entry = dt.history(1)[0]
    assert json.loads(entry["mvsink.operation"]) == "compact" and json.loads(entry["mvsink.since"]) == since
    actions = _log_actions(target, version + 1)
    assert [a["txn"] for a in actions if "txn" in a] == [{"appId": view.since_app_id, "version": since}]
    removes = [a["remove"] for a in actions if "remove" in a]
    assert removes and all(r["dataChange"] for r in removes)
    assert all(r["path"] not in active_files(target) for r in removes)
    # files wholly after since were not touched
    assert all(t > since for t in pa.table(dt.to_pyarrow_table()).column("_mv_time").to_pylist() if t != since)

    # contents at every refresh time >= since (and between refreshes) are unchanged
    for r in times:
        if r >= since:
            assert multiset(read_view(view, as_of=r)) == expected[r], format_time(r)
            if r != times[-1]:
                assert multiset(read_view(view, as_of=r + 1)) == expected[r]
        else:
            with pytest.raises(ReadTimeError) as err:
                read_view(view, as_of=r)
            assert format_time(since) in str(err.value) and f"({since})" in str(err.value)
    # mvsink read / status name since
    st = json.loads(run_cli_inprocess(catalog.views_dir, "status", "proj", "--json"))
    assert st["since"] == since and st["last_commits"][0]["operation"] == "compact"

    # refreshes after compaction stay correct, and the no-change shortcut still applies
    orders = str(data / "orders")
    t = times[-1] + HOUR
    write_at(orders, make_orders(random.Random(99), 1000, 5), t - 60_000)
    r1 = refresh(view, t, catalog=catalog, runner="inprocess", spark=spark)
    assert r1.status == "appended" and r1.rows_added > 0
    assert multiset(read_view(view, as_of=t)) == oracle(PROJECT, {"orders": orders}, t)
    r2 = refresh(view, t + HOUR, catalog=catalog, runner="inprocess", spark=spark)
    assert r2.status == "appended" and r2.files == 0 and r2.timings["write"] < 0.5  # shortcut: no Spark step
    assert multiset(read_view(view)) == oracle(PROJECT, {"orders": orders}, t + HOUR)

    # compacting again to the newest final time leaves one update per live row
    res2 = compact(view, catalog=catalog, since=t + HOUR)
    assert res2.status == "compacted" and res2.previous_since == since
    assert _log_rows(target) == len(signed(_all_updates(target)))
    assert multiset(read_view(view)) == oracle(PROJECT, {"orders": orders}, t + HOUR)
    # a since past the newest final time is refused, one at or below since is a no-op
    with pytest.raises(MvSinkError, match="final only through"):
        compact(view, since=t + HOUR + 1)
    assert compact(view, since=since).status == "nothing_to_do"


# ---------------------------------------------------------------- acceptance 2: compaction racing a refresh


def _child_env(point: str, sync_dir: str) -> None:
    import os

    os.environ["MVSINK_FAIL_POINTS"] = f"{point}:sync"
    os.environ["MVSINK_SYNC_DIR"] = sync_dir


def _append_child(views_dir: str, desc_json: str, report_json: str, sync_dir: str, q) -> None:
    import traceback

    from mvsink.core.batch import BatchDescription, WriteReport

    try:
        _child_env("append:before_commit", sync_dir)
        view = Catalog(views_dir).get("proj")
        res = append(view, BatchDescription.from_json(desc_json), WriteReport.from_json(report_json))
        q.put(("append", res.to_dict()))
    except BaseException:
        q.put(("append", {"error": traceback.format_exc()}))


def _compact_child(views_dir: str, since: int, sync_dir: str, q) -> None:
    import traceback

    try:
        _child_env("compact:before_commit", sync_dir)
        catalog = Catalog(views_dir)
        res = compact(catalog.get("proj"), catalog=catalog, since=since)
        q.put(("compact", res.to_dict()))
    except BaseException:
        q.put(("compact", {"error": traceback.format_exc()}))


def _wait_for(path: Path, procs, q, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if any(not p.is_alive() for p in procs):
            pytest.fail(f"a child ended before {path.name}: {q.get(timeout=10)}")
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


@pytest.mark.slow
def test_compaction_racing_a_refresh_loses_nothing_and_keeps_the_upper(spark, copy, tmp_path):
    """Append and compaction read the same version in two spawned processes, then commit in a chosen
    order (compaction first, append first, or released together): the second gets CommitFailedError."""
    catalog, view, data, times, expected = copy
    orders = str(data / "orders")
    ctx = mp.get_context("spawn")
    refresh_times = list(times)
    orders_of_release = ["compact", "append", "together", "together"]
    for k, first in enumerate(orders_of_release):
        r = refresh_times[-1] + HOUR
        write_at(orders, make_orders(random.Random(100 + k), 2000 + 10 * k, 3), r - 60_000)
        expected[r] = oracle(PROJECT, {"orders": orders}, r)
        desc = mint(view, r, catalog=catalog, run_id=f"race{k}")
        assert isinstance(desc, BatchDescription) and desc.lower == refresh_times[-1] + 1
        report = run_write(spark, view, desc)
        assert report.status == "staged"
        dt = DeltaTable(view.target)
        n, since_before = dt.version(), dt.transaction_version(view.since_app_id) or 0
        assert report.read_version == n
        since = refresh_times[-1] - (k % 2) * 60_000  # above the current since, at most lower - 1
        sync = tmp_path / f"sync{k}"
        sync.mkdir()
        q = ctx.Queue()
        pa_ = ctx.Process(
            target=_append_child, args=(str(catalog.views_dir), desc.to_json(), report.to_json(), str(sync), q)
        )
        pc = ctx.Process(target=_compact_child, args=(str(catalog.views_dir), since, str(sync), q))
        pa_.start()
        pc.start()
        _wait_for(sync / "append-before_commit.ready", (pa_, pc), q)
        _wait_for(sync / "compact-before_commit.ready", (pa_, pc), q)
        assert DeltaTable(view.target).version() == n  # both validated version n and hold before committing
        if first == "together":
            (sync / "compact-before_commit.go").touch()
            (sync / "append-before_commit.go").touch()
        else:
            winner, loser = ("compact", "append") if first == "compact" else ("append", "compact")
            (sync / f"{winner}-before_commit.go").touch()
            (pc if winner == "compact" else pa_).join(180)
            (sync / f"{loser}-before_commit.go").touch()
        results = dict(q.get(timeout=300) for _ in range(2))
        pa_.join(60)
        pc.join(60)
        assert "error" not in results["append"], results["append"]["error"]
        assert "error" not in results["compact"], results["compact"]["error"]
        app, com = results["append"], results["compact"]
        assert app["status"] == "appended" and app["upper"] == r + 1, app
        assert com["status"] == "compacted" and com["since"] == since, com

        dt = DeltaTable(view.target)
        assert dt.version() == n + 2  # exactly one append and one compaction landed
        hist = {h["version"]: h for h in dt.history(2)}
        ops = {json.loads(hist[v]["mvsink.operation"]): v for v in (n + 1, n + 2)}
        assert set(ops) == {"append", "compact"}
        if first == "compact":
            assert ops["compact"] == n + 1 and com["attempts"] == 1  # the append lost, re-validated, retried
        elif first == "append":
            assert ops["append"] == n + 1 and com["attempts"] == 2  # the compaction lost and started over
        # the compaction carried only the since; the upper moved only with the append
        cv = ops["compact"]
        assert [a["txn"] for a in _log_actions(view.target, cv) if "txn" in a] == [
            {"appId": view.since_app_id, "version": since}
        ]
        assert DeltaTable(view.target, version=cv).transaction_version(view.app_id) == DeltaTable(
            view.target, version=cv - 1
        ).transaction_version(view.app_id)
        assert dt.transaction_version(view.app_id) == r + 1
        assert dt.transaction_version(view.since_app_id) == max(since, since_before)
        # the batch is in the log exactly once, nothing is left staged
        appends = [
            h
            for h in dt.history()
            if h.get("mvsink.operation") == '"append"' and json.loads(h["mvsink.batch_id"]) == desc.batch_id
        ]
        assert len(appends) == 1
        assert staged_leftovers(view.target) == [] and list_staged(view.target) == []
        refresh_times.append(r)
        for t in refresh_times:
            if t >= dt.transaction_version(view.since_app_id):
                assert multiset(read_view(view, as_of=t)) == expected[t], (k, first, format_time(t))
        print(
            f"race round {k} ({first} released first): versions append={ops['append']} "
            f"compact={ops['compact']}, compaction attempts {com['attempts']}"
        )


# ---------------------------------------------------------------- a committed batch compacted away


def test_committed_batch_compacted_away_is_settled_not_discarded_or_recommitted(spark, copy, monkeypatch):
    catalog, view, data, times, expected = copy
    target = view.target
    orders = str(data / "orders")
    r = times[-1] + HOUR
    write_at(orders, make_orders(random.Random(8), 6000, 4), r - 60_000)
    desc = mint(view, r, catalog=catalog, run_id="lostreply")
    assert isinstance(desc, BatchDescription)
    report = run_write(spark, view, desc)
    monkeypatch.setenv("MVSINK_FAIL_POINTS", "append:after_commit:raise")
    with pytest.raises(InjectedFault):
        append(view, desc, report)  # committed, then "crashed" before cleaning up its manifest
    monkeypatch.delenv("MVSINK_FAIL_POINTS")
    manifest = manifest_path(target, desc.batch_id)
    assert manifest.exists()
    saved = manifest.read_text()

    res = compact(view, since=r)  # consolidates the batch (time r) away
    assert res.status == "compacted"
    assert not manifest.exists()  # compaction settled the committed batch before removing its files
    assert not any(p.startswith(f"batches/{desc.batch_id}/") for p in active_files(target))

    manifest.write_text(saved)  # a manifest that outlived its batch's files (e.g. compacted by hand)
    done = collect_garbage(target, upper=r + 1, active=active_files(target))
    assert done == {"discarded": [], "settled": [desc.batch_id]}
    assert all((Path(target) / f.path).exists() for f in report.files)  # left for vacuum, not deleted

    manifest.write_text(saved)
    version = DeltaTable(target).version()
    again = append(view, desc, report)  # a retried append task
    assert again.status == "appended" and "already committed" in again.reason
    assert DeltaTable(target).version() == version
    assert multiset(read_view(view, as_of=r)) == oracle(PROJECT, {"orders": orders}, r)
    assert not manifest.exists()


# ---------------------------------------------------------------- the DAG's append task compacts when due


class _TI:
    def __init__(self, pulls: dict[str, str]):
        self.pulls, self.pushed = pulls, {}

    def xcom_pull(self, task_ids: str, key: str) -> str:
        return self.pulls[key]

    def xcom_push(self, key: str, value) -> None:
        self.pushed[key] = value


class _Events:
    def __init__(self):
        self.added = []

    def __getitem__(self, alias):
        return self

    def add(self, asset, extra=None):
        self.added.append(extra)


def test_append_task_compacts_when_retain_history_says_it_is_due(spark, copy, tmp_path):
    from mvsink.airflow.tasks import append_step

    catalog, view, data, times, expected = copy
    catalog = project_views(data, Path(catalog.views_dir), retain_history="2h")
    view = catalog.get("proj")
    assert view.retain_history_ms == 2 * HOUR
    orders = str(data / "orders")

    def run(r: int) -> _TI:
        desc = mint(view, r, catalog=catalog, run_id=f"dag-{r}")
        assert isinstance(desc, BatchDescription)
        report_path = tmp_path / f"{desc.batch_id}.json"
        if not desc.empty:
            report_path.write_text(run_write(spark, view, desc).to_json())
        ti = _TI({"description": desc.to_json(), "report_path": str(report_path)})
        ctx = {"ti": ti, "outlet_events": _Events(), "dag_run": type("R", (), {"conf": {}})()}
        assert append_step("proj", str(catalog.views_dir), ctx, asset=None, alias=None, max_reschedules=3) == []
        return ti

    r = times[-1] + HOUR
    write_at(orders, make_orders(random.Random(9), 7000, 2), r - 60_000)
    ti = run(r)
    assert ti.pushed["summary"]["status"] == "appended"
    comp = ti.pushed["compaction"]
    assert comp["status"] == "compacted" and comp["since"] == r - 2 * HOUR  # upper - 1 - retain_history
    dt = DeltaTable(view.target)
    assert dt.transaction_version(view.since_app_id) == r - 2 * HOUR
    assert dt.transaction_version(view.app_id) == r + 1
    assert multiset(read_view(view, as_of=r)) == oracle(PROJECT, {"orders": orders}, r)
    # 10 minutes later since would advance by less than retain_history / 4: not due
    ti2 = run(r + 600_000)
    assert ti2.pushed["compaction"]["status"] == "not_due"
    assert DeltaTable(view.target).transaction_version(view.since_app_id) == r - 2 * HOUR


def test_append_treats_a_compaction_past_its_lower_as_foreign(spark, copy):
    """Only a compaction that leaves contents at lower - 1 unchanged is benign to an append."""
    from deltalake import write_deltalake
    from deltalake.transaction import CommitProperties

    catalog, view, data, times, expected = copy
    r = times[-1] + HOUR

    def fake_compaction(since: int) -> None:
        empty = pa.schema(DeltaTable(view.target).schema().to_arrow()).empty_table()
        write_deltalake(
            view.target.uri,
            empty,
            mode="append",
            commit_properties=CommitProperties(
                custom_metadata={"mvsink.operation": '"compact"', "mvsink.since": json.dumps(since)}
            ),
        )

    desc = mint(view, r, catalog=catalog, run_id="past-lower")
    assert isinstance(desc, BatchDescription)
    report = run_write(spark, view, desc)
    fake_compaction(desc.lower)  # claims history up to lower was consolidated: not benign
    res = append(view, desc, report)
    assert res.status == "rescheduled" and "compact" in res.reason and res.upper == times[-1] + 1

    desc = mint(view, r, catalog=catalog, run_id="below-lower")
    assert isinstance(desc, BatchDescription)
    report = run_write(spark, view, desc)
    fake_compaction(desc.lower - 1)
    res = append(view, desc, report)
    assert res.status == "appended" and res.upper == r + 1
    assert multiset(read_view(view, as_of=r)) == expected[times[-1]]
