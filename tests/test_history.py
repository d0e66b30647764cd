"""Issue 5: compaction (since), vacuum, changefeed and readers, against the DuckDB oracle.

One view history (a projection with duplicate rows, refreshed at 7 times over a randomized
orders history) is built once per module; each test works on its own copy of it.
"""

from __future__ import annotations

import io
import json
import random
import shutil
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from deltahelp import BASE, HOUR, _norm, multiset, oracle, write_at, write_view
from mvsink import cli
from mvsink.errors import MvSinkError, ReadTimeError
from mvsink.history import compact
from mvsink.read import read_view
from mvsink.refresh import refresh
from mvsink.table import active_paths
from mvsink.times import format_time
from mvsink.view import Catalog
from test_oracle import PROJECT, _orders, _random_change

pytestmark = pytest.mark.spark

N_REFRESHES = 7


def _views(root: Path, views: Path, **extra) -> Catalog:
    views.mkdir(exist_ok=True)
    write_view(views, "proj", query=PROJECT, sources={"orders": str(root / "orders")},
               target=str(root / "views" / "proj"), as_of=BASE, **extra)
    return Catalog(views)


@pytest.fixture(scope="module")
def history(spark, tmp_path_factory):
    """A refreshed view: (data folder, refresh times, oracle per refresh time)."""
    root = tmp_path_factory.mktemp("history") / "data"
    rng = random.Random(41)
    orders = str(root / "orders")
    write_at(orders, _orders(rng, 0, 25), BASE)
    catalog = _views(root, root.parent / "views")
    view = catalog.get("proj")
    next_id = [25]
    t = BASE + HOUR
    times, expected = [], {}
    for step in range(N_REFRESHES):
        for _ in range(1 + step % 2):
            t += rng.randint(1, 10) * 60_000
            _random_change(rng, orders, str(root / "customers"), next_id, t)
        t += HOUR
        res = refresh(view, t, catalog=catalog, runner="inprocess", spark=spark, run_id=f"h{step}")
        assert res.status == "appended", res
        times.append(t)
        expected[t] = oracle(PROJECT, {"orders": orders}, t)
    return root, times, expected


@pytest.fixture
def copy(history, tmp_path):
    """This test's own copy of the history (commit times of the sources preserved)."""
    root, times, expected = history
    data = tmp_path / "data"
    shutil.copytree(root, data)
    catalog = _views(data, tmp_path / "views")
    return catalog, catalog.get("proj"), data, times, expected


def _log_rows(target: str) -> int:
    acts = pa.table(DeltaTable(target).get_add_actions(flatten=True))
    return sum(acts.column("num_records").to_pylist())


def _log_actions(target: str, version: int) -> list[dict]:
    text = (Path(target) / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _all_updates(target: str) -> pa.Table:
    return pa.table(DeltaTable(target).to_pyarrow_table())


def _signed(table: pa.Table) -> Counter:
    """Rows with signed multiplicities: row -> summed _mv_diff (zeros dropped)."""
    cols = [c for c in table.column_names if c not in ("_mv_time", "_mv_diff")]
    out: Counter = Counter()
    for row in table.to_pylist():
        out[tuple(_norm(row[c]) for c in cols)] += row["_mv_diff"]
    return Counter({k: v for k, v in out.items() if v})


def _minus(a: Counter, b: Counter) -> Counter:
    out: Counter = Counter(a)
    for k, v in b.items():
        out[k] -= v
    return Counter({k: v for k, v in out.items() if v})


# ---------------------------------------------------------------- acceptance 1: compaction


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
    live_at_since = len(_signed(before.filter(pa.compute.less_equal(before["_mv_time"], since))))

    t0 = time.monotonic()
    res = compact(view, catalog=catalog, since=since)
    seconds = time.monotonic() - t0
    assert res.status == "compacted", res
    assert res.version == version + 1 and res.since == since and res.previous_since == 0 and res.upper == upper
    assert res.rows_before == rows_before
    rows_after = _log_rows(target)
    assert rows_after == res.rows_after <= live_at_since + after_since < rows_before
    print(f"compaction: {rows_before} -> {rows_after} rows in the log (live at since {live_at_since}, "
          f"updates after since {after_since}), {res.files_removed} files removed, {seconds:.2f} s")

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
    assert all(r["path"] not in active_paths(dt) for r in removes)
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
    st = json.loads(_run_cli(catalog, "status", "proj", "--json"))
    assert st["since"] == since and st["last_commits"][0]["operation"] == "compact"

    # refreshes after compaction stay correct, and the no-change shortcut still applies
    orders = str(data / "orders")
    t = times[-1] + HOUR
    write_at(orders, _orders(random.Random(99), 1000, 5), t - 60_000)
    r1 = refresh(view, t, catalog=catalog, runner="inprocess", spark=spark)
    assert r1.status == "appended" and r1.rows_added > 0
    assert multiset(read_view(view, as_of=t)) == oracle(PROJECT, {"orders": orders}, t)
    r2 = refresh(view, t + HOUR, catalog=catalog, runner="inprocess", spark=spark)
    assert r2.status == "appended" and r2.files == 0 and r2.timings["write"] < 0.5  # shortcut: no Spark step
    assert multiset(read_view(view)) == oracle(PROJECT, {"orders": orders}, t + HOUR)

    # compacting again to the newest final time leaves one update per live row
    res2 = compact(view, catalog=catalog, since=t + HOUR)
    assert res2.status == "compacted" and res2.previous_since == since
    assert _log_rows(target) == len(_signed(_all_updates(target)))
    assert multiset(read_view(view)) == oracle(PROJECT, {"orders": orders}, t + HOUR)
    # a since past the newest final time is refused, one at or below since is a no-op
    with pytest.raises(MvSinkError, match="final only through"):
        compact(view, since=t + HOUR + 1)
    assert compact(view, since=since).status == "nothing_to_do"


def _run_cli(catalog: Catalog, *args: str) -> str:
    import contextlib

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = cli.main([*args, "--views-dir", str(catalog.views_dir)])
    assert rc == 0, out.getvalue()
    return out.getvalue()
