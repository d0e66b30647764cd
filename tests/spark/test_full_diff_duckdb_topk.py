"""The DuckDB full diff of a top-k view (``ORDER BY ... LIMIT k``; issue 38; incremental/modes/duckdbdiff.py).

DuckDB's top-N gives Spark's rows only where the rows ranked k and k + 1 do not tie in the ORDER BY (else Spark
picks among them). A randomized history of a top-k over a join whose ORDER BY is total (an order's id and its
customer's name; NULLs placed first by an ascending date, last by a descending amount; source inserts, updates and
deletes, hand edits of the table) runs DuckDB's diff and equals its twin's (Spark's diff) and the oracle after
every step (the name matters: customer 4 has two rows, so an order's id alone ties); a top-k whose ORDER BY ties at
the k-th row is refused with its reason, and Spark's diff computes it."""

from __future__ import annotations

import logging
import random

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from mvsink.columns import DIFF, TIME
from mvsink.definitions.catalog import Catalog
from mvsink.engines import arrow as driver
from mvsink.readers.arrow import read_view
from mvsink.write.runners import refresh
from tests.spark.test_full_diff_duckdb import _customers
from tests.spark.test_full_diff_duckdb_aggregates import _orders
from tests.support.delta import BASE, HOUR, delete_at, mvsink_history, update_at, write_at
from tests.support.oracle import multiset, oracle, table_rows
from tests.support.viewfiles import write_view

pytestmark = pytest.mark.spark

TOPK = (
    "SELECT o.id, c.name, o.amount, o.day FROM orders o JOIN customers c ON o.cust = c.cust "
    "WHERE o.note IS NULL OR o.note <> 'skip' ORDER BY o.day, o.amount DESC, o.id, c.name LIMIT 12"
)
TIED = "SELECT o.amount, o.note FROM orders o ORDER BY o.amount DESC LIMIT 5"  # (few amounts: the 5th row ties)


def _reason(data, name: str) -> str:
    return str(mvsink_history(str(data / "views" / name))[0]["mode_reason"])


def _hand_edit(rng: random.Random, target: str, at: int, step: int) -> None:
    """Deleted rows, duplicated rows, a row the query never gives (the same edit on both tables: ``rng`` alike)."""
    table = DeltaTable(target)
    if step % 3 == 0:
        table.delete("amount IS NULL OR id % 2 = 0")
        return
    rows = table.to_pyarrow_table().sort_by([("id", "ascending"), (TIME, "ascending")])
    picked = rows.take(sorted(rng.sample(range(rows.num_rows), min(rows.num_rows, 2))))
    if step % 3 == 1:
        picked = picked.set_column(picked.column_names.index("name"), "name", pa.array(["zz"] * picked.num_rows))
    picked = picked.set_column(
        picked.column_names.index(TIME), TIME, pa.array([at] * picked.num_rows, pa.int64())
    ).set_column(picked.column_names.index(DIFF), DIFF, pa.array([1] * picked.num_rows, pa.int64()))
    write_deltalake(target, picked, mode="append")


def test_randomized_top_k_equals_spark_and_the_oracle_and_ties_are_refused(spark, env, monkeypatch, caplog):
    data, views = env
    rng = random.Random(77)
    orders, customers = str(data / "orders"), str(data / "customers")
    write_at(orders, _orders(rng, 0, 60), BASE)
    write_at(customers, _customers(), BASE)
    sources = {"orders": "orders", "customers": "customers"}
    for name in ("top", "top_twin"):
        write_view(views, name, query=TOPK, sources=sources, target=f"views/{name}", as_of=BASE, incremental=False)
    write_view(
        views, "tied", query=TIED, sources={"orders": "orders"}, target="views/tied", as_of=BASE, incremental=False
    )
    catalog = Catalog(views)
    paths = {"orders": orders, "customers": customers}
    edits = {name: random.Random(5) for name in ("top", "top_twin")}
    t = BASE + HOUR
    for step in range(5):
        if step:
            write_at(orders, _orders(rng, 1000 + 10 * step, rng.randint(1, 6)), t + 10)
            if rng.random() < 0.6:
                delete_at(orders, f"id % 7 = {rng.randint(0, 6)}", t + 11)
            if rng.random() < 0.6:
                update_at(orders, {"amount": "amount + 1"}, f"id % 5 = {rng.randint(0, 4)}", t + 12)
            for name, edit_rng in edits.items():
                _hand_edit(edit_rng, str(data / "views" / name), t - 5, step)
            t += HOUR
        res = refresh(catalog.get("top"), t, catalog=catalog, runner="inprocess", spark=spark, run_id=f"r{t}")
        assert res.status == "appended" and res.mode == "full", res
        why = _reason(data, "top")
        assert "a full diff in DuckDB" in why or why.endswith(", by DuckDB)"), (step, why)
        with monkeypatch.context() as mp:  # the twin: Spark's diff
            mp.setenv("MVSINK_DUCKDB_FULL_DIFF", "false")
            mp.setattr(driver, "MAX_DRIVER_ROWS", 0)
            refresh(catalog.get("top_twin"), t, catalog=catalog, runner="inprocess", spark=spark, run_id=f"r{t}")
        assert "DuckDB" not in _reason(data, "top_twin")
        top, twin = str(data / "views" / "top"), str(data / "views" / "top_twin")
        assert table_rows(top) == table_rows(twin), step
        assert all(v == 1 for v in table_rows(top).values()), (
            step
        )  # (id and name: unique per joined row, no duplicates)
        want = oracle(TOPK.replace("ORDER BY o.day,", "ORDER BY o.day NULLS FIRST,"), paths, t)  # (Spark's NULLs)
        assert multiset(read_view(catalog.get("top"), as_of=t)) == want, step
        assert sum(want.values()) == 12
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="mvsink.incremental.modes.full"):
        res = refresh(catalog.get("tied"), t, catalog=catalog, runner="inprocess", spark=spark, run_id="tied")
    assert res.status == "appended" and res.mode == "full", res
    assert "DuckDB" not in _reason(data, "tied")
    messages = [r.getMessage() for r in caplog.records]
    assert any("the rows ranked 5 and 6 tie in the ORDER BY" in m for m in messages), messages
    assert sum(multiset(read_view(catalog.get("tied"), as_of=t)).values()) == 5
