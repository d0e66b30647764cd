"""The full diff computed by DuckDB in the refreshing process (issue 38; incremental/modes/duckdbdiff.py).

A randomized history over a join + projection (NULLs, decimals, dates, strings, duplicates): source inserts, updates
and deletes, and hand edits of the view's table (inserted, deleted, duplicated and altered rows). Each refresh of the
view runs the DuckDB diff (its reason and no Spark job prove it), and its twin (the same view) runs Spark's diff
(``MVSINK_DUCKDB_FULL_DIFF=false``); after each step both tables hold exactly the same rows, equal to the DuckDB
oracle, and each batch's corrections are equal. Then the refusals: a DOUBLE column, a view with checks, a source with
deletion vectors (written by delta-spark), more corrections than the bound: Spark's diff, the reason logged."""

from __future__ import annotations

import datetime as dt
import logging
import random
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from mvsink.columns import DIFF, TIME
from mvsink.definitions.catalog import Catalog
from mvsink.engines import arrow as driver
from mvsink.incremental.modes import duckdbdiff, full
from mvsink.readers.arrow import read_view
from mvsink.write.runners import refresh
from tests.support.delta import BASE, HOUR, delete_at, mvsink_history, stamp, update_at, write_at
from tests.support.oracle import batch_rows, multiset, oracle, table_rows, zero_signs
from tests.support.viewfiles import write_view

pytestmark = pytest.mark.spark

ORDERS = pa.schema(
    [
        ("id", pa.int64()),
        ("cust", pa.int32()),
        ("amount", pa.decimal128(10, 2)),
        ("day", pa.date32()),
        ("note", pa.string()),
        ("price", pa.float64()),
    ]
)
CUSTOMERS = pa.schema([("cust", pa.int32()), ("name", pa.string()), ("region", pa.string())])
# a join + projection: duplicates (many orders of a customer on a day), NULLs, decimal arithmetic, dates, strings
QUERY = (
    "SELECT c.name, c.region, o.day, o.amount * 3 AS amt3, o.amount - 1 AS less, o.note "
    "FROM orders o JOIN customers c ON o.cust = c.cust WHERE o.note IS NULL OR o.note <> 'skip'"
)
DUCK_REASON = "a full diff in DuckDB"


def _orders(rng: random.Random, start: int, n: int) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {
                "id": start + i,
                "cust": rng.choice([1, 2, 3, 4, None]),
                "amount": rng.choice([Decimal("1.50"), Decimal("-2.25"), Decimal("9999999.99"), None]),
                "day": rng.choice([dt.date(2026, 1, 1), dt.date(1999, 12, 31), None]),
                "note": rng.choice(["a", "b", "skip", None, "ü"]),
                "price": rng.choice([0.0, -0.0, 2.5]),
            }
            for i in range(n)
        ],
        schema=ORDERS,
    )


def _customers() -> pa.Table:
    rows = [(1, "ann", "eu"), (2, "bob", None), (3, None, "us"), (4, "dee", "eu"), (4, "dee2", "eu")]
    return pa.Table.from_pylist([dict(zip(CUSTOMERS.names, r)) for r in rows], schema=CUSTOMERS)


EDITS = ("delete", "insert", "duplicate", "alter", "negative")


def _hand_edit(rng: random.Random, target: str, at: int, op: str) -> None:
    """A foreign edit ``op`` of the view's table (``rng`` seeded alike for the twins: the same edit)."""
    table = DeltaTable(target)
    rows = table.to_pyarrow_table().sort_by([(c, "ascending") for c in ("name", "note", "day", "amt3", TIME)])
    if op == "delete":
        table.delete("region IS NULL" if rng.random() < 0.5 else "amt3 < 0")
        return
    if op == "alter":
        table.update(updates={"name": "'zz'"}, predicate="name = 'ann'")
        return
    picked = rows.take(sorted(rng.sample(range(rows.num_rows), min(rows.num_rows, rng.randint(1, 4)))))
    if op == "insert":  # rows the query never gives: NULLs, a new name
        picked = picked.set_column(0, "name", pa.array([rng.choice([None, "new"]) for _ in range(picked.num_rows)]))
    _append_edited(rng, target, picked, at, op)


def _append_edited(rng: random.Random, target: str, picked: pa.Table, at: int, op: str) -> None:
    """Rows ``picked`` of a view's table appended by a foreign writer at ``at``, each with a diff ``op`` allows."""
    diffs = {"insert": [1, 2], "duplicate": [1], "negative": [-1, 0, -2]}[op]
    picked = picked.set_column(
        picked.column_names.index(DIFF), DIFF, pa.array([rng.choice(diffs) for _ in range(picked.num_rows)], pa.int64())
    ).set_column(picked.column_names.index(TIME), TIME, pa.array([at] * picked.num_rows, pa.int64()))
    write_deltalake(target, picked, mode="append")


def _refresh(catalog: Catalog, name: str, t: int, spark: Any) -> Any:
    res = refresh(catalog.get(name), t, catalog=catalog, runner="inprocess", spark=spark, run_id=f"r{t}")
    assert res.status == "appended" and res.mode == "full", (name, res)
    return res


@pytest.mark.parametrize("seed", [3, 11])
def test_randomized_history_equals_spark_and_the_oracle(spark, env, monkeypatch, seed):
    data, views = env
    rng = random.Random(seed)
    orders, customers = str(data / "orders"), str(data / "customers")
    write_at(orders, _orders(rng, 0, 80), BASE)
    write_at(customers, _customers(), BASE)
    for name in ("duck", "twin"):
        write_view(
            views,
            name,
            query=QUERY,
            sources={"orders": "orders", "customers": "customers"},
            target=f"views/{name}",
            as_of=BASE,
            incremental=False,
        )
    catalog = Catalog(views)
    t = BASE + HOUR
    _refresh(catalog, "duck", t, spark)  # a first build: the query's rows by DuckDB, the table not read
    with monkeypatch.context() as mp:
        mp.setenv("MVSINK_DUCKDB_FULL_DIFF", "false")
        _refresh(catalog, "twin", t, spark)  # Spark's first build
    for name, by_duckdb in (("duck", True), ("twin", False)):
        reason = str(mvsink_history(str(data / "views" / name))[0]["mode_reason"])
        assert full.FIRST_BUILD in reason and reason.endswith(", by DuckDB)") is by_duckdb, (name, reason)
    assert table_rows(str(data / "views" / "duck")) == table_rows(str(data / "views" / "twin"))
    assert multiset(read_view(catalog.get("duck"), as_of=t)) == oracle(
        QUERY, {"orders": orders, "customers": customers}, t
    )
    next_id = 1000
    edits = {name: random.Random(seed * 7) for name in ("duck", "twin")}  # the same edits on both tables
    for step in range(6):
        write_at(orders, _orders(rng, next_id, rng.randint(0, 6)), t + 10)
        next_id += 10
        if rng.random() < 0.6:
            delete_at(orders, f"id % 7 = {rng.randint(0, 6)}", t + 11)
        if rng.random() < 0.6:
            update_at(orders, {"amount": "amount + 1", "note": "'b'"}, f"id % 5 = {rng.randint(0, 4)}", t + 12)
        op = EDITS[(step + seed) % len(EDITS)]
        for name in ("duck", "twin"):
            _hand_edit(edits[name], str(data / "views" / name), t - 5, op)
        t += HOUR
        res = _refresh(catalog, "duck", t, spark)
        reason = str(mvsink_history(str(data / "views" / "duck"))[0]["mode_reason"])
        assert DUCK_REASON in reason, (step, reason)
        assert res.spark_jobs in (0, -1), res  # no Spark job: DuckDB computed the corrections
        with monkeypatch.context() as mp:  # the twin: Spark's diff (not DuckDB's, not the small view's in the driver)
            mp.setenv("MVSINK_DUCKDB_FULL_DIFF", "false")
            mp.setattr(driver, "MAX_DRIVER_ROWS", 0)
            _refresh(catalog, "twin", t, spark)
        twin_reason = str(mvsink_history(str(data / "views" / "twin"))[0]["mode_reason"])
        assert twin_reason == "incremental: false in the view file", twin_reason
        reads = [mvsink_history(str(data / "views" / n))[0]["reads"] for n in ("duck", "twin")]
        assert set(reads[0]) == {"orders", "customers", "_table"}, reads
        assert all(reads[0][s] == reads[1][s] for s in ("orders", "customers")), reads  # each source once, whole
        duck, twin = str(data / "views" / "duck"), str(data / "views" / "twin")
        assert batch_rows(duck, t) == batch_rows(twin, t), (step, op)
        assert table_rows(duck) == table_rows(twin), (step, op)
        assert all(v > 0 for v in table_rows(duck).values()), (step, op)
        want = oracle(QUERY, {"orders": orders, "customers": customers}, t)
        assert multiset(read_view(catalog.get("duck"), as_of=t)) == want, (step, op)


def test_refusals_fall_back_to_spark(spark, env, monkeypatch, caplog):
    """A DOUBLE column, checks, a source with deletion vectors, more corrections than the bound: Spark's diff (or
    the small view's driver diff), the reason logged; the rows exact either way."""
    data, views = env
    rng = random.Random(5)
    orders, customers = str(data / "orders"), str(data / "customers")
    write_at(orders, _orders(rng, 0, 40), BASE)
    write_at(customers, _customers(), BASE)
    dv = str(data / "dv")
    spark.createDataFrame(_orders(rng, 0, 40).drop_columns(["price"]).to_pandas()).write.format("delta").save(dv)
    stamp(dv, BASE - 2)
    spark.sql(f"ALTER TABLE delta.`{dv}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    stamp(dv, BASE - 1)
    sources = {"orders": "orders", "customers": "customers"}
    kinds: dict[str, dict[str, Any]] = {
        "double": dict(query="SELECT o.note, o.price FROM orders o", sources={"orders": "orders"}),
        "checked": dict(
            query=QUERY, sources=sources, checks=[{"name": "named", "expr": "name IS NOT NULL", "action": "warn"}]
        ),
        "dv": dict(query="SELECT note, amount FROM orders", sources={"orders": "dv"}),
        "many": dict(query=QUERY, sources=sources),
        "failing": dict(query=QUERY, sources=sources),
        "plain": dict(query=QUERY, sources=sources),
    }
    for name, spec in kinds.items():
        write_view(views, name, target=f"views/{name}", as_of=BASE, incremental=False, **spec)
    catalog = Catalog(views)
    t = BASE + HOUR
    for name in kinds:
        _refresh(catalog, name, t, spark)
    update_at(orders, {"note": "'c'"}, "id % 3 = 0", t + 10)
    spark.sql(f"DELETE FROM delta.`{dv}` WHERE id % 3 = 1")
    stamp(dv, t + 11)
    assert DeltaTable(dv).version() >= 2
    t += HOUR
    why = {
        "double": "column 'price' is of type double",
        "checked": "the view has checks",
        "dv": "source 'orders' needs Delta's reader",
        "many": "corrections (~0 MiB), more than the process holds",
        "failing": "DuckDB failed",
    }
    for name in kinds:
        caplog.clear()
        with monkeypatch.context() as mp, caplog.at_level(logging.INFO, logger="mvsink.incremental.modes.full"):
            if name == "many":  # (and not small enough for the driver's diff: Spark's)
                mp.setattr(duckdbdiff, "MAX_CORRECTION_ROWS", 0)
                mp.setattr(driver, "MAX_DRIVER_ROWS", 0)
            if name == "failing":  # a DuckDB error (its memory limit too small to run at all): Spark's diff
                mp.setattr(duckdbdiff, "MEMORY_LIMIT", "1KB")
                mp.setattr(driver, "MAX_DRIVER_ROWS", 0)
            _refresh(catalog, name, t, spark)
        reason = str(mvsink_history(str(data / "views" / name))[0]["mode_reason"])
        assert (DUCK_REASON in reason) is (name == "plain"), (name, reason)
        if name in ("many", "failing"):
            assert reason == "incremental: false in the view file", (name, reason)  # Spark's diff
        if name in why:
            assert any(why[name] in r.getMessage() for r in caplog.records), (
                name,
                [r.getMessage() for r in caplog.records],
            )
        q, src = kinds[name]["query"], {k: str(data / v) for k, v in kinds[name]["sources"].items()}
        if name != "dv":  # (the oracle reads delta-rs snapshots: no deletion vectors)
            got = zero_signs(multiset(read_view(catalog.get(name), as_of=t, errors="ignore")))
            assert got == zero_signs(oracle(q, src, t)), name


def test_over_spark_connect_the_same_path(env, connect_url):
    """Through a Spark Connect server (a fresh CLI process, as a DAG's task): the first build and the full diff after
    a source change and a hand edit run in DuckDB in the client process, exact against the oracle."""
    import json

    from tests.support.cli import run_cli_process

    data, views = env
    rng = random.Random(8)
    orders, customers = str(data / "orders"), str(data / "customers")
    write_at(orders, _orders(rng, 0, 50), BASE)
    write_at(customers, _customers(), BASE)
    sources = {"orders": "orders", "customers": "customers"}
    write_view(views, "v", query=QUERY, sources=sources, target="views/v", as_of=BASE, incremental=False)
    catalog = Catalog(views)
    for k, t in enumerate((BASE + HOUR, BASE + 2 * HOUR)):
        if k:
            write_at(orders, _orders(rng, 500, 5), t - 60_000)
            _hand_edit(random.Random(1), str(data / "views" / "v"), t - HOUR - 5, "duplicate")  # below the upper
        out = run_cli_process(views, "refresh", "v", "--at", str(t), "--remote", connect_url, "--json", timeout=300)
        assert json.loads(out.stdout)["mode"] == "full"
        reason = str(mvsink_history(str(data / "views" / "v"))[0]["mode_reason"])
        assert reason.endswith(", by DuckDB)") if k == 0 else DUCK_REASON in reason, reason
        assert multiset(read_view(catalog.get("v"), as_of=t)) == oracle(
            QUERY, {"orders": orders, "customers": customers}, t
        )
