"""Acceptance 1 of issue 13: views and sources on object storage, the commit side on real servers.

Sources and target live on SeaweedFS (``s3://``) or Azurite (``az://``), reached only through the
standard variables (set with monkeypatch). The write step is the Spark-free stand-in of
:mod:`tests.support.sparkfree` (the pyspark wheel cannot reach s3a/abfss); mint, append, the
no-change shortcut, compaction, gc, vacuum and the readers are mvsink's own. Every refresh is checked
against the DuckDB oracle over the same source snapshot (the store's commit times).
"""

from __future__ import annotations

import multiprocessing
import random

import pyarrow as pa
import pytest

from mvsink import location
from mvsink.core import storage
from mvsink.core.append import append
from mvsink.core.mint import mint
from mvsink.core.refresh import run_refresh
from mvsink.core.staging import list_staged
from mvsink.definitions.catalog import Catalog
from mvsink.exceptions import ReadTimeError, UnsafeStoreError
from mvsink.maintenance.compaction import compact
from mvsink.maintenance.gc import gc
from mvsink.maintenance.vacuum import vacuum
from mvsink.readers.arrow import changes, read_view
from mvsink.readers.status import view_status
from tests.support import sparkfree
from tests.support.data import PROJECT, make_orders
from tests.support.objectstores import (
    delta_table,
    next_second,
    now_ms,
    operations,
    oracle,
    staged_leftovers,
    write_source,
)
from tests.support.oracle import minus, multiset, signed
from tests.support.sparkfree import sparkfree_write
from tests.support.viewfiles import write_view

pytestmark = pytest.mark.storage


def _view(tmp_path, prefix: str, *, as_of: int):
    views = tmp_path / "views"
    views.mkdir(exist_ok=True)
    write_view(
        views,
        "proj",
        query=PROJECT,
        sources={"orders": f"{prefix}/orders"},
        target=f"{prefix}/views/proj",
        as_of=as_of,
    )
    catalog = Catalog(views)
    return catalog, catalog.get("proj")


def _refresh(view, catalog, t: int, run_id: str):
    return run_refresh(view, t, write=sparkfree_write, catalog=catalog, run_id=run_id)


def _exact(view, orders: location.Where, t: int) -> None:
    assert multiset(read_view(view, as_of=t)) == oracle(PROJECT, {"orders": orders}, t)


def test_protocol_end_to_end(store, tmp_path):
    s, prefix = store
    rng = random.Random(13)
    orders = f"{prefix}/orders"
    write_source(orders, make_orders(rng, 0, 30))
    t0 = now_ms()
    catalog, view = _view(tmp_path, prefix, as_of=t0)
    assert view.target.uri == f"{prefix}/views/proj" and view.source("orders").path.uri == orders

    # mint + write + append: the first refresh creates the table (after the probe) on the store
    r1 = now_ms()
    res = _refresh(view, catalog, r1, "r1")
    assert res.status == "appended" and res.upper == r1 + 1, res
    assert operations(view.target) == ["create", "bump", "append"]
    _exact(view, orders, r1)
    assert staged_leftovers(view.target) == []
    assert not storage.list_files(location.joinpath(view.target, "_mvsink_probe")) or True  # probe objects removed
    assert not [p for p, _ in storage.list_files(view.target) if "_mvsink_probe_" in p]

    # a retried refresh at the same time is a no-op
    again = _refresh(view, catalog, r1, "r1-retry")
    assert again.status == "up_to_date" and operations(view.target).count("append") == 1

    # the no-change shortcut: no source moved, so write is not called and append only moves the upper
    calls = len(sparkfree.CALLS)
    r2 = now_ms()
    res = _refresh(view, catalog, r2, "r2")
    assert res.status == "appended" and res.upper == r2 + 1 and len(sparkfree.CALLS) == calls, res
    assert res.reason.startswith("no source changed")
    _exact(view, orders, r2)

    # a source change: inserted and deleted rows, time travel by the store's commit times
    next_second()
    write_source(orders, make_orders(rng, 30, 10))
    delta_table(orders).delete("id < 5")
    r3 = now_ms()
    res = _refresh(view, catalog, r3, "r3")
    assert res.status == "appended" and res.rows_added + res.rows_retracted > 0, res
    _exact(view, orders, r3)
    _exact(view, orders, r2)  # older times stay readable and exact
    # changes: the changefeed between two final times
    feed = changes(view, r2 + 1, r3 + 1)
    assert signed(feed) == minus(oracle(PROJECT, {"orders": orders}, r3), oracle(PROJECT, {"orders": orders}, r2))

    # a hand edit of the target is repaired by the next refresh (a full diff)
    next_second()
    delta_table(view.target).delete("qty = 3")
    assert multiset(read_view(view)) != oracle(PROJECT, {"orders": orders}, r3)
    r4 = now_ms()
    res = _refresh(view, catalog, r4, "r4")
    assert res.status == "appended" and res.rows_added > 0, res
    assert "foreign" in operations(view.target)
    _exact(view, orders, r4)

    # status
    st = view_status(view)
    assert st["exists"] and st["upper"] == r4 + 1 and st["staged_batches"] == []
    assert [c["operation"] for c in st["last_commits"][:2]] == ["append", "DELETE"]

    # compaction advances since; contents at and after since are unchanged, reads below are refused
    at_r3 = multiset(read_view(view, as_of=r3))  # as damaged by the hand edit: compaction must keep it
    comp = compact(view, since=r3, catalog=catalog)
    assert comp.status == "compacted" and comp.since == r3, comp
    assert view_status(view)["since"] == r3
    assert multiset(read_view(view, as_of=r3)) == at_r3
    _exact(view, orders, r4)
    with pytest.raises(ReadTimeError, match="compacted"):
        read_view(view, as_of=r2)

    # a refresh after compaction (content-preserving) keeps the shortcut
    calls = len(sparkfree.CALLS)
    r5 = now_ms()
    res = _refresh(view, catalog, r5, "r5")
    assert res.status == "appended" and len(sparkfree.CALLS) == calls, res
    _exact(view, orders, r5)

    # a lost race: a second run of the same refresh time stages, loses to the first, and cleans up
    next_second()
    write_source(orders, make_orders(rng, 40, 5))
    r6 = now_ms()
    a = mint(view, r6, catalog=catalog, run_id="loser")
    ra = sparkfree_write(view, a)
    assert ra.status == "staged" and list_staged(view.target) == [a.batch_id]
    assert _refresh(view, catalog, r6, "winner").status == "appended"
    lost = append(view, a, ra)
    assert lost.status == "rescheduled" and lost.upper == r6 + 1
    assert staged_leftovers(view.target) == []
    _exact(view, orders, r6)

    # gc: a batch folder no manifest and no commit names (a crash between deleting files and manifest)
    orphan = location.joinpath(view.target, "batches", "proj__1_2__crashed-0123abcd", "part-0.parquet")
    storage.write_bytes(orphan, b"junk")
    done = gc(view.target, upper=r6 + 1, active=set(), grace_seconds=0)
    assert done["orphans"] == ["proj__1_2__crashed-0123abcd"] and not storage.exists(orphan)

    # vacuum deletes the files compaction removed (by their add-action paths), never active ones
    active_before = {a.as_py() for a in pa.table(delta_table(view.target).get_add_actions()).column("path")}
    vac = vacuum(view, retention_hours=0, enforce_retention=False)
    assert vac.deleted and not set(vac.deleted) & active_before
    for rel in vac.deleted:
        assert not storage.exists(location.joinpath(view.target, rel))
    _exact(view, orders, r6)
    assert multiset(read_view(view)) == oracle(PROJECT, {"orders": orders}, r6)


def _racer(env: dict[str, str], views: str, t: int, i: int, barrier, out) -> None:
    import os

    os.environ.update(env)
    from mvsink.core.refresh import run_refresh
    from mvsink.definitions.catalog import Catalog
    from tests.support.sparkfree import sparkfree_write

    catalog = Catalog(views)
    view = catalog.get("proj")
    barrier.wait(timeout=120)
    res = run_refresh(view, t, write=sparkfree_write, catalog=catalog, run_id=f"racer-{i}")
    out.put((res.status, res.upper))


def test_four_processes_race_on_one_refresh_time(store, tmp_path):
    import os

    s, prefix = store
    orders = f"{prefix}/orders"
    write_source(orders, make_orders(random.Random(7), 0, 30))
    t0 = now_ms()
    catalog, view = _view(tmp_path, prefix, as_of=t0)
    r = now_ms()
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(4), ctx.Queue()
    env = {k: v for k, v in os.environ.items() if k.startswith(("AWS_", "AZURE", "AZURITE", "MVSINK_"))}
    procs = [ctx.Process(target=_racer, args=(env, str(tmp_path / "views"), r, i, barrier, out)) for i in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=240)
        assert p.exitcode == 0
    results = [out.get(timeout=5) for _ in procs]
    statuses = sorted(x[0] for x in results)
    assert statuses.count("appended") == 1, results
    assert set(statuses) <= {"appended", "rescheduled", "up_to_date"}, results
    assert all(upper == r + 1 for _, upper in results), results
    ops = operations(view.target)
    assert ops.count("append") == 1 and ops.count("create") == 1 and ops.count("bump") == 1, ops
    assert delta_table(view.target).transaction_version("mvsink:upper:proj") == r + 1
    assert staged_leftovers(view.target) == []
    _exact(view, orders, r)


def test_store_without_conditional_writes_is_refused(s3rver, monkeypatch, tmp_path):
    from tests.storage.conftest import use_store

    use_store(monkeypatch, s3rver)
    monkeypatch.setenv("MVSINK_DATA_ROOT", str(tmp_path))
    prefix = s3rver.uri("unsafe")
    orders = f"{prefix}/orders"
    write_source(orders, make_orders(random.Random(3), 0, 10))
    t0 = now_ms()
    catalog, view = _view(tmp_path, prefix, as_of=t0)
    with pytest.raises(UnsafeStoreError) as err:
        _refresh(view, catalog, now_ms(), "unsafe")
    msg = str(err.value)
    assert view.target.uri in msg and s3rver.env["AWS_ENDPOINT_URL"] in msg
    assert "If-None-Match" in msg and "locking provider" in msg and "Fix:" in msg
    assert not storage.list_files(view.target)  # nothing committed, staged or left by the probe


def test_missing_or_broken_tables_are_bad_input_and_an_unreachable_store_is_retryable(seaweedfs, monkeypatch):
    from mvsink.core.table import open_delta, open_readable
    from mvsink.exceptions import SourceError, StoreError
    from tests.storage.conftest import use_store
    from tests.support.objectstores import free_port

    use_store(monkeypatch, seaweedfs)
    prefix = seaweedfs.uri("errors")
    assert open_delta(f"{prefix}/missing") is None
    with pytest.raises(SourceError, match="no Delta table"):
        open_readable(f"{prefix}/missing", role="view v: source 'orders'")
    storage.write_text(f"{prefix}/broken/_delta_log/00000000000000000000.json", "{not json\n")
    with pytest.raises(SourceError, match="cannot be opened"):
        open_delta(f"{prefix}/broken")
    # the same location on a store that does not answer: a runtime error (Airflow retries it)
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_port()}")
    with pytest.raises(StoreError, match="Fix: check the store is reachable"):
        open_delta(f"{prefix}/broken")


def test_view_storage_options_reach_the_store_by_reference(seaweedfs, monkeypatch, tmp_path):
    """Only the view file's storage_options (secrets as {env: ...} references) point mvsink at the store."""
    from tests.storage.conftest import STORE_VARS, use_store

    use_store(monkeypatch, seaweedfs)
    monkeypatch.setenv("MVSINK_DATA_ROOT", str(tmp_path))
    prefix = seaweedfs.uri("by-view-options")
    orders = f"{prefix}/orders"
    write_source(orders, make_orders(random.Random(11), 0, 20))  # written with the standard variables
    t0 = now_ms()
    env = seaweedfs.env
    monkeypatch.setenv("LAKE_KEY_ID", env["AWS_ACCESS_KEY_ID"])
    monkeypatch.setenv("LAKE_SECRET", env["AWS_SECRET_ACCESS_KEY"])
    for name in STORE_VARS:
        monkeypatch.delenv(name, raising=False)
    views = tmp_path / "views"
    views.mkdir()
    write_view(
        views,
        "proj",
        query=PROJECT,
        sources={"orders": orders},
        target=f"{prefix}/views/proj",
        as_of=t0,
        storage_options={
            "AWS_ENDPOINT_URL": env["AWS_ENDPOINT_URL"],
            "AWS_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": {"env": "LAKE_KEY_ID"},
            "AWS_SECRET_ACCESS_KEY": {"env": "LAKE_SECRET"},
        },
    )
    catalog = Catalog(views)
    view = catalog.get("proj")
    r = now_ms()
    res = _refresh(view, catalog, r, "by-options")
    assert res.status == "appended", res
    assert operations(view.target) == ["create", "bump", "append"]
    _exact(view, view.source("orders").path, r)  # the oracle's read, too, with the view's options (no variables)
