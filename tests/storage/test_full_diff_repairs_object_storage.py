"""Repairs of hand edits by the full diff on SeaweedFS (issue 38's test list): sources and the view's table on
``s3://``, so DuckDB's full diff refuses (its reads are local files only) and Spark's diff runs. Randomized source
changes and hand edits of the tables (deleted, inserted, duplicated and altered rows, negative counts) of an
aggregate view and of a projection with duplicates; after each refresh the view equals the DuckDB oracle over the
sources' snapshots on the store, and the table holds no negative count."""

from __future__ import annotations

import random
import uuid
from collections import Counter
from typing import Any

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from mvsink.columns import DIFF, TIME
from mvsink.core import storage
from mvsink.definitions.catalog import Catalog
from mvsink.engines import arrow as driver
from mvsink.readers.arrow import read_view
from mvsink.write.runners import refresh
from tests.storage.conftest import use_store
from tests.support.data import make_customers, make_orders
from tests.support.objectstores import Store, delta_table, next_second, now_ms, oracle, write_source
from tests.support.oracle import multiset
from tests.support.viewfiles import write_view

pytestmark = pytest.mark.storage

VIEWS = {
    "agg": (
        "SELECT c.region, o.status, count(*) AS n, sum(o.price) AS total, min(o.price) AS low, max(o.qty) AS top "
        "FROM orders o JOIN customers c ON o.cust_id = c.id GROUP BY c.region, o.status"
    ),
    "dupes": "SELECT o.status, o.qty, o.price FROM orders o",
}
EDITS = ("delete", "insert", "duplicate", "alter", "negative")


def _hand_edit(rng: random.Random, target: str, at: int, op: str) -> None:
    """A foreign edit ``op`` of the view's table on the store, below the next batch (``_mv_time`` ``at``)."""
    table = delta_table(target)
    rows = table.to_pyarrow_table()
    if op == "delete":
        table.delete("status IS NULL OR status = 'A'")
        return
    if op == "alter":
        table.update(updates={"status": "'zz'"}, predicate="status = 'B'")
        return
    if rows.num_rows == 0:
        return
    picked = rows.take(sorted(rng.sample(range(rows.num_rows), min(rows.num_rows, rng.randint(1, 3)))))
    if op == "insert":  # rows the query never gives
        picked = picked.set_column(picked.column_names.index("status"), "status", pa.array(["new"] * picked.num_rows))
    diffs = {"insert": [1, 2], "duplicate": [1], "negative": [-1, -2]}[op]
    picked = picked.set_column(
        picked.column_names.index(DIFF), DIFF, pa.array([rng.choice(diffs) for _ in range(picked.num_rows)], pa.int64())
    ).set_column(picked.column_names.index(TIME), TIME, pa.array([at] * picked.num_rows, pa.int64()))
    write_deltalake(target, picked, mode="append", storage_options=storage.delta_options(target))


def _summed(target: str) -> Counter[tuple[Any, ...]]:
    out: Counter[tuple[Any, ...]] = Counter()
    for r in delta_table(target).to_pyarrow_table().to_pylist():
        out[tuple(v for k, v in sorted(r.items()) if k not in (TIME, DIFF))] += r[DIFF]
    return Counter({k: v for k, v in out.items() if v})


def test_randomized_repairs_on_seaweedfs(spark, seaweedfs: Store, monkeypatch, tmp_path, caplog):
    import logging

    use_store(monkeypatch, seaweedfs)
    monkeypatch.setenv("MVSINK_DATA_ROOT", str(tmp_path))
    monkeypatch.setattr(driver, "MAX_DRIVER_ROWS", 0)  # (Spark's diff, not the small view's in the driver)
    run = uuid.uuid4().hex[:8]
    orders, customers = seaweedfs.uri(f"fd-{run}", "orders"), seaweedfs.uri(f"fd-{run}", "customers")
    rng = random.Random(38)
    write_source(orders, make_orders(rng, 0, 40))
    write_source(customers, make_customers(rng))
    views = tmp_path / "views"
    views.mkdir()
    start = now_ms()
    targets = {name: seaweedfs.uri(f"fd-{run}", "views", name) for name in VIEWS}
    for name, query in VIEWS.items():
        used = {k: v for k, v in {"orders": orders, "customers": customers}.items() if k in query}
        write_view(views, name, query=query, sources=used, target=targets[name], as_of=start, incremental=False)
    catalog = Catalog(views)
    sources = {"orders": orders, "customers": customers}
    next_id, last = 1000, start
    for step in range(4):
        if step:
            next_second()
            write_source(orders, make_orders(rng, next_id, rng.randint(1, 5)))
            next_id += 10
            if rng.random() < 0.5:
                delta_table(orders).delete(f"id % 5 = {rng.randint(0, 4)}")
            op = EDITS[(step + rng.randint(0, 4)) % len(EDITS)]
            for name in VIEWS:
                _hand_edit(rng, targets[name], last - 1, op)
        next_second()
        t = now_ms()
        for name, query in VIEWS.items():
            caplog.clear()
            with caplog.at_level(logging.INFO, logger="mvsink.incremental.modes.full"):
                res = refresh(catalog.get(name), t, catalog=catalog, runner="inprocess", spark=spark, run_id=f"s{step}")
            assert res.status == "appended" and res.mode == "full", (name, res)
            messages = [r.getMessage() for r in caplog.records]
            assert any("is not on the local disk (DuckDB reads local files only)" in m for m in messages), messages
            assert multiset(read_view(catalog.get(name), as_of=t)) == oracle(query, sources, t), (name, step)
            assert all(v > 0 for v in _summed(targets[name]).values()), (name, step)
        last = t
