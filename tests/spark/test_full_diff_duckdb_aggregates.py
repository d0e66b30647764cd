"""The DuckDB full diff and first build of views that keep aggregate state (issue 38; incremental/duckdbagg.py).

Randomized histories of two aggregate views (GROUP BY over a join, and a global aggregate: COUNT, SUM, AVG, MIN,
MAX over decimals, integers, dates and strings; NULL groups, NULL values, duplicates): source inserts, updates and
deletes, and hand edits of the view's table (deleted, inserted, duplicated and negated rows, visible and hidden
columns altered). Each refresh runs DuckDB's diff (its reason and no Spark job prove it) and its twin Spark's
(``MVSINK_DUCKDB_FULL_DIFF=false``); after each step both tables hold exactly the same rows, hidden state included,
each batch's corrections are the same, and the visible rows equal the DuckDB oracle. Then the refusals, each with
its reason logged and Spark's diff exact: a DOUBLE average, an AVG of a small decimal, a SUM that might overflow
Spark's type under ANSI, a HAVING."""

from __future__ import annotations

import datetime as dt
import logging
import random
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from mvsink.definitions.catalog import Catalog
from mvsink.engines import arrow as driver
from mvsink.incremental.modes import full
from mvsink.readers.arrow import read_view
from tests.spark.test_full_diff_duckdb import _append_edited, _customers, _refresh
from tests.support.delta import BASE, HOUR, delete_at, mvsink_history, stamp, update_at, write_at
from tests.support.oracle import batch_rows, multiset, oracle, table_rows
from tests.support.viewfiles import write_view

pytestmark = pytest.mark.spark

ORDERS = pa.schema(
    [
        ("id", pa.int64()),
        ("cust", pa.int32()),
        ("amount", pa.decimal128(18, 2)),
        ("small", pa.decimal128(9, 2)),
        ("qty", pa.int32()),
        ("day", pa.date32()),
        ("note", pa.string()),
        ("price", pa.float64()),
    ]
)
GROUPED = (
    "SELECT c.region, o.day, count(*) AS n, count(o.note) AS notes, sum(o.amount) AS total, avg(o.amount) AS mean, "
    "sum(o.qty) AS q, min(o.note) AS first_note, max(o.day) AS last_day, min(o.amount) AS low, "
    "max(o.amount * 3) AS high3 "
    "FROM orders o JOIN customers c ON o.cust = c.cust WHERE o.note IS NULL OR o.note <> 'skip' "
    "GROUP BY c.region, o.day"
)
GLOBAL = "SELECT count(*) AS n, sum(amount) AS total, avg(amount) AS mean, max(note) AS top, sum(qty) AS q FROM orders"
# (query, whether the table keeps the aggregate's hidden state: built with ``incremental: true``, then refreshed
# with ``incremental: false`` so that each refresh is a full diff)
VIEWS = {"grp": (GROUPED, False), "glob": (GLOBAL, False), "grps": (GROUPED, True), "globs": (GLOBAL, True)}
DUCK_REASON = "a full diff in DuckDB"
AMOUNTS = [Decimal("1.50"), Decimal("-2.25"), Decimal("99999.99"), Decimal("0.07"), Decimal("-0.01"), None]


def _orders(rng: random.Random, start: int, n: int) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {
                "id": start + i,
                "cust": rng.choice([1, 2, 3, 4, None]),
                "amount": rng.choice(AMOUNTS),
                "small": rng.choice([Decimal("1.25"), None]),
                "qty": rng.choice([0, 3, -7, None]),
                "day": rng.choice([dt.date(2026, 1, 1), dt.date(1999, 12, 31), None]),
                "note": rng.choice(["a", "b", "skip", None, "ü"]),
                "price": rng.choice([0.5, 2.5]),
            }
            for i in range(n)
        ],
        schema=ORDERS,
    )


EDITS = ("delete", "visible", "hidden", "insert", "duplicate", "negative")


def _hand_edit(rng: random.Random, target: str, at: int, op: str) -> None:
    """A foreign edit ``op`` of an aggregate view's table (``rng`` seeded alike for the twins: the same edit)."""
    table = DeltaTable(target)
    rows = table.to_pyarrow_table().sort_by([(c, "ascending") for c in sorted(table.schema().to_arrow().names)])
    if op == "delete":
        table.delete("n > 3" if rng.random() < 0.5 else "total IS NULL OR total < 0")
        return
    if op == "visible":  # a visible column altered: the full diff puts the query's value back
        table.update(updates={"total": "total + 1", "n": "n * 2"}, predicate="n % 2 = 1")
        return
    if op == "hidden":  # the hidden state altered alone (the visible columns right): repaired too
        table.update(updates={"_mv_agg_count": "_mv_agg_count + 5"}, predicate="n > 1")
        return
    picked = rows.take(sorted(rng.sample(range(rows.num_rows), min(rows.num_rows, rng.randint(1, 3)))))
    if op == "insert":  # rows the query never gives: another count, visible and hidden
        for c in [c for c in ("n", "_mv_agg_count") if c in picked.column_names]:
            picked = picked.set_column(picked.column_names.index(c), c, pa.array([999] * picked.num_rows, pa.int64()))
    _append_edited(rng, target, picked, at, op)


def _reason(data: Any, name: str) -> str:
    return str(mvsink_history(str(data / "views" / name))[0]["mode_reason"])


@pytest.mark.parametrize("seed", [4, 17])
def test_randomized_aggregate_history_equals_spark_and_the_oracle(spark, env, monkeypatch, seed):
    data, views = env
    rng = random.Random(seed)
    orders, customers = str(data / "orders"), str(data / "customers")
    write_at(orders, _orders(rng, 0, 60), BASE)
    write_at(customers, _customers(), BASE)
    sources = {"orders": "orders", "customers": "customers"}

    def define(*, first: bool) -> None:
        for view, (query, stateful) in VIEWS.items():
            for name in (view, f"{view}_twin"):
                incremental = stateful and first
                write_view(
                    views,
                    name,
                    query=query,
                    sources={k: v for k, v in sources.items() if k in query},
                    target=f"views/{name}",
                    as_of=BASE,
                    incremental=incremental,
                )

    define(first=True)
    catalog = Catalog(views)
    paths = {"orders": orders, "customers": customers}

    def check(t: int, step: Any) -> None:
        for view, (query, stateful) in VIEWS.items():
            duck, twin = str(data / "views" / view), str(data / "views" / f"{view}_twin")
            assert batch_rows(duck, t) == batch_rows(twin, t), (view, step)
            assert table_rows(duck) == table_rows(twin), (view, step)  # visible and hidden columns, exactly
            hidden = [c for c in DeltaTable(duck).schema().to_arrow().names if c.startswith("_mv_agg_")]
            assert bool(hidden) is stateful, (view, hidden)
            assert all(v > 0 for v in table_rows(duck).values()), (view, step)
            assert multiset(read_view(catalog.get(view), as_of=t)) == oracle(query, paths, t), (view, step)

    t = BASE + HOUR
    for view in VIEWS:  # a first build: the query's rows and their state by DuckDB, the table not read
        _refresh(catalog, view, t, spark)
        with monkeypatch.context() as mp:
            mp.setenv("MVSINK_DUCKDB_FULL_DIFF", "false")
            _refresh(catalog, f"{view}_twin", t, spark)
        assert _reason(data, view).endswith(f"{full.FIRST_BUILD}, by DuckDB)"), _reason(data, view)
        assert _reason(data, f"{view}_twin").endswith(f"{full.FIRST_BUILD})")
    check(t, "first build")
    define(first=False)  # (each refresh a full diff from here on)
    catalog = Catalog(views)
    edits = {name: random.Random(seed * 7) for view in VIEWS for name in (view, f"{view}_twin")}
    stateless = [name for name in edits if not VIEWS[name.removesuffix("_twin")][1]]
    next_id = 1000
    for step in range(6):
        write_at(orders, _orders(rng, next_id, rng.randint(0, 6)), t + 10)
        next_id += 10
        if rng.random() < 0.6:
            delete_at(orders, f"id % 7 = {rng.randint(0, 6)}", t + 11)
        if rng.random() < 0.6:
            update_at(orders, {"amount": "amount + 1", "note": "'b'"}, f"id % 5 = {rng.randint(0, 4)}", t + 12)
        op = EDITS[(step + seed) % len(EDITS)]
        for name, edit_rng in edits.items():
            _hand_edit(
                edit_rng, str(data / "views" / name), t - 5, "visible" if op == "hidden" and name in stateless else op
            )
        t += HOUR
        for view in VIEWS:
            res = _refresh(catalog, view, t, spark)
            why = _reason(data, view)  # (a hand edit that deleted every row: a first build, by DuckDB too)
            assert DUCK_REASON in why or why.endswith(", by DuckDB)"), (view, step, why)
            assert res.spark_jobs in (0, -1), res  # no Spark job: DuckDB computed the corrections
            with monkeypatch.context() as mp:  # the twin: Spark's diff (not DuckDB's, not the driver's)
                mp.setenv("MVSINK_DUCKDB_FULL_DIFF", "false")
                mp.setattr(driver, "MAX_DRIVER_ROWS", 0)
                _refresh(catalog, f"{view}_twin", t, spark)
            assert "DuckDB" not in _reason(data, f"{view}_twin"), _reason(data, f"{view}_twin")
        check(t, (step, op))


def _big(rows: list[tuple[str, Decimal]]) -> pa.Table:
    return pa.table(
        {
            "g": pa.array([g for g, _ in rows]),
            "v": pa.array([v for _, v in rows], pa.decimal128(38, 2)),
        }
    )


def test_aggregate_refusals_fall_back_to_spark(spark, env, monkeypatch, caplog):
    """A DOUBLE average, an AVG of a small decimal, a SUM that might overflow Spark's type, a HAVING: Spark's diff,
    the reason logged, the rows exact against the oracle."""
    data, views = env
    rng = random.Random(9)
    orders, big = str(data / "orders"), str(data / "big")
    write_at(orders, _orders(rng, 0, 40), BASE)
    # a DECIMAL(38,2) (its SUM too): +huge and -huge sum to little, their absolute values to over 10^36 (not -huge:
    # Decimal rounds it to 28 digits)
    huge = Decimal("9" * 36 + ".99")
    write_at(big, _big([(g, v) for g in ("a", "b") for v in (huge, Decimal(f"-{huge}"), Decimal("1.00"))]), BASE)
    kinds = {
        "double": ("SELECT note, avg(price) AS p FROM orders GROUP BY note", "orders", "column 'p' is of type double"),
        "intavg": ("SELECT note, avg(qty) AS a FROM orders GROUP BY note", "orders", "column 'a' is of type double"),
        "small": (
            "SELECT note, avg(small) AS a FROM orders GROUP BY note",
            "orders",
            "an AVG of a DECIMAL of 9 digits, which Spark computes as a DOUBLE",
        ),
        "overflow": ("SELECT g, sum(v) AS s, count(*) AS n FROM big GROUP BY g", "big", "a SUM might overflow"),
        "having": (
            "SELECT note, count(*) AS n FROM orders GROUP BY note HAVING count(*) > 1",
            "orders",
            "keeps no state DuckDB computes",
        ),
        "plain": ("SELECT note, sum(amount) AS s, count(*) AS n FROM orders GROUP BY note", "orders", None),
    }
    for name, (query, source, _) in kinds.items():
        write_view(
            views, name, query=query, sources={source: source}, target=f"views/{name}", as_of=BASE, incremental=False
        )
    catalog = Catalog(views)
    t = BASE + HOUR
    for name in kinds:
        _refresh(catalog, name, t, spark)
    update_at(orders, {"note": "'c'"}, "id % 3 = 0", t + 10)
    write_at(big, _big([("a", Decimal("2.00"))]), t + 10)
    t += HOUR
    for name, (query, source, why) in kinds.items():
        caplog.clear()
        with monkeypatch.context() as mp, caplog.at_level(logging.INFO, logger="mvsink.incremental.modes.full"):
            mp.setattr(driver, "MAX_DRIVER_ROWS", 0)  # (not the small view's driver diff: Spark's)
            _refresh(catalog, name, t, spark)
        reason = _reason(data, name)
        assert (DUCK_REASON in reason) is (why is None), (name, reason)
        if why is not None:
            assert reason == "incremental: false in the view file", (name, reason)
            assert any(why in r.getMessage() for r in caplog.records), (name, [r.getMessage() for r in caplog.records])
        got = multiset(read_view(catalog.get(name), as_of=t))
        assert got == oracle(query, {source: str(data / source)}, t), name


def test_a_column_added_to_a_source_keeps_the_full_diff_exact(spark, env, monkeypatch):
    """A source gains a column (delta-rs's schema merge; its older files lack it): the aggregate's and a projection's
    full diffs after it run in DuckDB (the columns the query names are in every file) and equal Spark's and the
    oracle."""
    data, views = env
    rng = random.Random(21)
    orders, customers = str(data / "orders"), str(data / "customers")
    write_at(orders, _orders(rng, 0, 40), BASE)
    write_at(customers, _customers(), BASE)
    sources = {"orders": "orders", "customers": "customers"}
    projection = "SELECT o.id, o.amount, c.region FROM orders o JOIN customers c ON o.cust = c.cust"
    queries = {"agg": GROUPED, "agg_twin": GROUPED, "proj": projection}
    for name, query in queries.items():
        write_view(views, name, query=query, sources=sources, target=f"views/{name}", as_of=BASE, incremental=False)
    catalog = Catalog(views)
    t = BASE + HOUR
    for name in queries:
        _refresh(catalog, name, t, spark)
    wider = _orders(rng, 500, 8)
    wider = wider.append_column("channel", pa.array([rng.choice(["web", None]) for _ in range(wider.num_rows)]))
    write_deltalake(orders, wider, mode="append", schema_mode="merge")
    stamp(orders, t + 10)
    update_at(orders, {"amount": "amount + 1"}, "id % 3 = 0", t + 20)
    t += HOUR
    for name, query in queries.items():
        with monkeypatch.context() as mp:
            if name.endswith("_twin"):
                mp.setenv("MVSINK_DUCKDB_FULL_DIFF", "false")
                mp.setattr(driver, "MAX_DRIVER_ROWS", 0)
            _refresh(catalog, name, t, spark)
        assert (DUCK_REASON in _reason(data, name)) is not name.endswith("_twin"), (name, _reason(data, name))
        got = multiset(read_view(catalog.get(name), as_of=t))
        assert got == oracle(query, {"orders": orders, "customers": customers}, t), name
    assert table_rows(str(data / "views" / "agg")) == table_rows(str(data / "views" / "agg_twin"))


def test_over_spark_connect_an_aggregate_takes_the_same_path(env, connect_url):
    """Through a Spark Connect server (a fresh CLI process, as a DAG's task): an aggregate's first build and its full
    diffs after a source change and after a hand edit run in DuckDB in the client process, exact against the oracle."""
    import json

    from tests.support.cli import run_cli_process

    data, views = env
    rng = random.Random(12)
    orders, customers = str(data / "orders"), str(data / "customers")
    write_at(orders, _orders(rng, 0, 50), BASE)
    write_at(customers, _customers(), BASE)
    sources = {"orders": "orders", "customers": "customers"}
    write_view(views, "v", query=GROUPED, sources=sources, target="views/v", as_of=BASE, incremental=False)
    catalog = Catalog(views)
    for k, t in enumerate((BASE + HOUR, BASE + 2 * HOUR, BASE + 3 * HOUR)):
        if k == 1:
            write_at(orders, _orders(rng, 500, 5), t - 60_000)
        if k == 2:
            _hand_edit(random.Random(1), str(data / "views" / "v"), t - HOUR - 5, "duplicate")
        out = run_cli_process(views, "refresh", "v", "--at", str(t), "--remote", connect_url, "--json", timeout=300)
        assert json.loads(out.stdout)["mode"] == "full"
        reason = _reason(data, "v")
        assert reason.endswith(", by DuckDB)") if k == 0 else DUCK_REASON in reason, reason
        assert multiset(read_view(catalog.get("v"), as_of=t)) == oracle(
            GROUPED, {"orders": orders, "customers": customers}, t
        )
