"""Issue 35: a small change's terms evaluated by DuckDB in the driver, with sources and views on object storage.

The local-disk version is tests/spark/test_driver_terms.py. Here two sources (orders, items) written by delta-rs
live on SeaweedFS (``s3://``) or Azurite (``az://``), with an aggregate view (a join, GROUP BY, SUM of a decimal
expression, COUNT(*), AVG of a decimal) and a linear view (a join's projection with a filter) on the same store.
A seeded random history of inserts, deletes and updates (delta-rs rewrites the files: copy-on-write) on both
sources is refreshed step by step through the in-process runner on the shared Spark session; after every refresh:

- the view's table holds exactly what an independent oracle computes: DuckDB over delta-rs snapshots of the
  sources at the refresh time, cast to the view's expected Arrow types (Spark's type rules, written out here),
  values compared exactly (decimals as decimals), and the table's Arrow types are the expected ones;
- the refresh was incremental (``incremental:aggregate``, ``incremental``), as the append's commit info records,
  with its change terms evaluated in the driver, and from the second incremental refresh on without Spark (the plan
  facts the first one kept beside the table, on the store);
- the refresh made exactly one append commit, and nothing is left staged.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import random
from collections import Counter
from typing import Any

import duckdb
import pyarrow as pa
import pytest

from mvsink.definitions.catalog import Catalog
from mvsink.readers.arrow import read_view
from mvsink.write.runners import refresh
from tests.support.objectstores import (
    delta_table,
    next_second,
    now_ms,
    operations,
    snapshot,
    staged_leftovers,
    write_source,
)
from tests.support.viewfiles import write_view

pytestmark = [pytest.mark.storage, pytest.mark.spark]

SEEDS = {"seaweedfs": 3501, "azurite": 3502}  # one history per store (the seed is in the test's id)
STEPS = 5  # refreshes after the first (full) one
IN_DRIVER = "change terms evaluated in the driver"
WITHOUT_SPARK = "without Spark"

ORDERS = pa.schema([("o_id", pa.int64()), ("o_cust", pa.int32()), ("o_status", pa.string()), ("o_date", pa.date32())])
ITEMS = pa.schema(
    [
        ("i_id", pa.int64()),
        ("i_order", pa.int64()),
        ("qty", pa.int32()),
        ("price", pa.decimal128(12, 2)),
        ("discount", pa.decimal128(4, 2)),
    ]
)

AGG = """SELECT o_status, o_cust, sum(price * (1 - discount)) AS revenue, count(*) AS n, avg(price) AS avg_price
FROM orders JOIN items ON i_order = o_id
WHERE qty > 0
GROUP BY o_status, o_cust"""
# Spark's types: 1 - DECIMAL(4,2) is DECIMAL(5,2); DECIMAL(12,2) * DECIMAL(5,2) is DECIMAL(18,4), its SUM
# DECIMAL(28,4); AVG of DECIMAL(12,2) is DECIMAL(16,6)
AGG_SCHEMA = pa.schema(
    [
        ("o_status", pa.string()),
        ("o_cust", pa.int32()),
        ("revenue", pa.decimal128(28, 4)),
        ("n", pa.int64()),
        ("avg_price", pa.decimal128(16, 6)),
    ]
)
# The oracle's AVG: DuckDB's AVG of a decimal is a DOUBLE; the exact sum and count of the values instead, divided
# here and rounded half up to the AVG's scale, as Spark's decimal AVG does.
AGG_ORACLE = """SELECT o_status, o_cust, sum(price * (1 - discount)) AS revenue, count(*) AS n,
  sum(price) AS price_sum, count(price) AS price_count
FROM orders JOIN items ON i_order = o_id
WHERE qty > 0
GROUP BY o_status, o_cust"""

LIN = """SELECT i_id, o_id, o_status, qty, price * qty AS amount, o_date
FROM orders JOIN items ON i_order = o_id
WHERE qty >= 2 AND (o_status IN ('A', 'B') OR o_status IS NULL)"""
# DECIMAL(12,2) * INT (as DECIMAL(10,0)) is DECIMAL(23,2)
LIN_SCHEMA = pa.schema(
    [
        ("i_id", pa.int64()),
        ("o_id", pa.int64()),
        ("o_status", pa.string()),
        ("qty", pa.int32()),
        ("amount", pa.decimal128(23, 2)),
        ("o_date", pa.date32()),
    ]
)

VIEWS = {  # name: (query, oracle query, expected schema, expected mode)
    "agg": (AGG, AGG_ORACLE, AGG_SCHEMA, "incremental:aggregate"),
    "lin": (LIN, LIN, LIN_SCHEMA, "incremental"),
}


# ---------------------------------------------------------------- random sources and changes


def _orders(rng: random.Random, ids: range) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {
                "o_id": i,
                "o_cust": rng.choice([1, 2, 3, 4]),
                "o_status": rng.choice(["A", "B", "C", None]),
                "o_date": dt.date(2025, 1, 1) + dt.timedelta(days=rng.randint(0, 400)),
            }
            for i in ids
        ],
        schema=ORDERS,
    )


def _price(rng: random.Random) -> decimal.Decimal | None:
    if rng.random() < 0.08:
        return None
    # now and then the type's largest value: sums and products near their types' limits
    return decimal.Decimal("9999999999.99") if rng.random() < 0.05 else decimal.Decimal(rng.randint(1, 99999)) / 100


def _items(rng: random.Random, ids: range, orders: int) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {
                "i_id": i,
                "i_order": rng.randint(0, orders + 3),  # some items of no order (yet)
                "qty": rng.choice([0, 1, 2, 3, 5, 8]),
                "price": _price(rng),
                "discount": None if rng.random() < 0.08 else decimal.Decimal(rng.randint(0, 25)) / 100,
            }
            for i in ids
        ],
        schema=ITEMS,
    )


CHANGES = ("insert items", "insert orders", "delete items", "delete orders", "update items", "update orders")


class History:
    """The sources on a store and the random changes made to them."""

    def __init__(self, rng: random.Random, prefix: str) -> None:
        self.rng = rng
        self.orders = f"{prefix}/orders"
        self.items = f"{prefix}/items"
        self.next_order = 0
        self.next_item = 0

    def new_orders(self, n: int) -> None:
        write_source(self.orders, _orders(self.rng, range(self.next_order, self.next_order + n)))
        self.next_order += n

    def new_items(self, n: int) -> None:
        write_source(self.items, _items(self.rng, range(self.next_item, self.next_item + n), self.next_order))
        self.next_item += n

    def plan(self, steps: int) -> list[list[str]]:
        """The kinds of change of each step: one to three, every kind in some step."""
        kinds = list(CHANGES)
        self.rng.shuffle(kinds)
        plan: list[list[str]] = [[] for _ in range(steps)]
        for i, kind in enumerate(kinds):
            plan[i if i < steps else self.rng.randrange(steps)].append(kind)
        for step in plan:
            step += [self.rng.choice(CHANGES) for _ in range(self.rng.randint(0, max(0, 3 - len(step))))]
        return plan

    def change(self, op: str) -> str:
        """A change of one source (one commit) of kind ``op``: what it was."""
        rng = self.rng
        if op == "insert items":
            n = rng.randint(1, 6)
            self.new_items(n)
            return f"{n} items inserted"
        if op == "insert orders":
            n = rng.randint(1, 3)
            self.new_orders(n)
            return f"{n} orders inserted"
        if op == "delete items":
            k = rng.randint(5, 9)
            where = f"i_id % {k} = {rng.randrange(k)}"
            delta_table(self.items).delete(where)
            return f"items deleted where {where}"
        if op == "delete orders":
            where = f"o_id = {rng.randrange(self.next_order)}"
            delta_table(self.orders).delete(where)
            return f"orders deleted where {where}"
        if op == "update items":
            k = rng.randint(4, 7)
            where = f"i_id % {k} = {rng.randrange(k)}"
            updates = rng.choice(
                [
                    {"qty": "qty + 1"},
                    {"price": "CAST(price - 1.25 AS DECIMAL(12, 2))", "qty": "qty * 2"},
                    {"discount": "NULL"},
                    {"i_order": f"{rng.randrange(self.next_order)}"},  # items move to another order
                ]
            )
            delta_table(self.items).update(updates=updates, predicate=where)
            return f"items updated {updates} where {where}"
        # an order's items move between the aggregate's groups, into or out of the linear view's filter
        where = f"o_id % 6 = {rng.randrange(6)}"
        updates = {"o_status": rng.choice(["'A'", "'B'", "'C'", "NULL"]), "o_cust": f"{rng.randint(1, 5)}"}
        delta_table(self.orders).update(updates=updates, predicate=where)
        return f"orders updated {updates} where {where}"


# ---------------------------------------------------------------- the oracle, exactly


def _finished(name: str, rows: pa.Table) -> pa.Table:
    """The oracle's rows as the view's: the aggregate's AVG from its exact sum and count."""
    if name != "agg":
        return rows
    scale = decimal.Decimal(1).scaleb(-AGG_SCHEMA.field("avg_price").type.scale)
    avg = [
        None if c == 0 else (s / decimal.Decimal(c)).quantize(scale, rounding=decimal.ROUND_HALF_UP)
        for s, c in zip(rows.column("price_sum").to_pylist(), rows.column("price_count").to_pylist(), strict=True)
    ]
    return rows.drop_columns(["price_sum", "price_count"]).append_column(
        "avg_price", pa.array(avg, pa.decimal128(38, 6))
    )


def _oracle(name: str, sources: dict[str, str], at: int) -> pa.Table:
    """The view's rows from DuckDB over the sources' delta-rs snapshots as of ``at``, cast (safely: a value that
    does not fit fails) to the view's expected Arrow types."""
    _, query, schema, _ = VIEWS[name]
    con = duckdb.connect()
    try:
        for source, uri in sources.items():
            con.register(source, snapshot(uri, at))
        with decimal.localcontext(prec=60):
            got = _finished(name, con.sql(query).to_arrow_table())
    finally:
        con.close()
    return got.select(schema.names).cast(schema)


def _rows(table: pa.Table, names: list[str]) -> Counter[tuple[Any, ...]]:
    """The rows of ``table``'s columns ``names``, exact Python values (decimals as Decimal), with their counts."""
    return Counter(tuple(r[c] for c in names) for r in table.select(names).to_pylist())


def _differences(got: Counter[tuple[Any, ...]], want: Counter[tuple[Any, ...]]) -> str:
    return f"rows not in the oracle's: {dict(got - want)}; the oracle's rows missing: {dict(want - got)}"


def _last_commit(target: str) -> dict[str, Any]:
    last = max(delta_table(target).history(), key=lambda h: h["version"])
    return {k.removeprefix("mvsink."): json.loads(v) for k, v in last.items() if k.startswith("mvsink.")}


# ---------------------------------------------------------------- the test


@pytest.mark.parametrize(
    ("store", "seed"), list(SEEDS.items()), ids=[f"{k}-seed{v}" for k, v in SEEDS.items()], indirect=["store"]
)
def test_random_changes_refreshed_with_driver_terms_are_exact(store, spark, tmp_path, monkeypatch, seed):
    s, prefix = store
    assert SEEDS[s.name] == seed  # (the store the id names)
    monkeypatch.setenv("MVSINK_INCREMENTAL_PRUNE_MIN_BYTES", "0")  # the test's tables are small
    monkeypatch.setenv("MVSINK_INCREMENTAL_MAX_FRACTION", "100")  # (a change rewrites most of a tiny source)
    monkeypatch.setenv("MVSINK_INCREMENTAL_DRIVER_TERMS", "true")
    rng = random.Random(seed)
    h = History(rng, prefix)
    h.new_orders(12)
    for _ in range(4):  # several files each: a delete or an update rewrites some, not all
        h.new_orders(4)
        h.new_items(15)
    sources = {"orders": h.orders, "items": h.items}
    views = tmp_path / "views"
    views.mkdir()
    as_of = now_ms()
    for name, (query, *_) in VIEWS.items():
        write_view(views, name, query=query, sources=sources, target=f"{prefix}/views/{name}", as_of=as_of)
    catalog = Catalog(views)
    targets = {name: f"{prefix}/views/{name}" for name in VIEWS}

    plan = h.plan(STEPS)
    history: list[list[str]] = []
    for step in range(STEPS + 1):
        if step:
            next_second()  # the changes' commits (the store's whole-second times) fall after the last refresh
            history.append([h.change(op) for op in plan[step - 1]])
        at = now_ms()
        # the first build keeps no plan facts here (as before it could), so that the first incremental refresh
        # evaluates its terms in DuckDB on Spark's path; tests/spark/test_spark_free_refresh.py has the build's facts
        monkeypatch.setenv("MVSINK_SPARK_FREE", "true" if step else "false")
        for name, (_, _, schema, mode) in VIEWS.items():
            where = f"{s.name} seed={seed} step={step} view={name} changes={history}"
            before = operations(targets[name]) if step else []
            res = refresh(
                catalog.get(name), at, catalog=catalog, runner="inprocess", spark=spark, run_id=f"{name}{step}"
            )
            info = _last_commit(targets[name])
            assert res.status == "appended", (where, res)
            # one append commit per refresh (the first one creates the table), nothing left staged
            assert operations(targets[name]) == (before + ["append"] if step else ["create", "bump", "append"]), where
            assert info["operation"] == "append" and info["batch_id"] == res.batch_id, (where, info)
            assert staged_leftovers(targets[name]) == [], where
            # exactly the oracle's rows, of the expected types
            got = read_view(catalog.get(name), as_of=at)
            user = [f for f in got.schema if f.name not in ("_mv_time", "_mv_diff")]
            assert pa.schema(user) == schema, (where, got.schema)
            rows, want = _rows(got, schema.names), _rows(_oracle(name, sources, at), schema.names)
            assert rows == want and want, (where, _differences(rows, want))
            # the first refresh computes the view; every later one is incremental, with the change terms evaluated
            # in the driver (as the append's commit info records)
            assert info["mode"] == res.mode == (mode if step else "full"), (where, info.get("mode_reason"))
            assert (IN_DRIVER in (info.get("mode_reason") or "")) is (step > 0), (where, info.get("mode_reason"))
            # the first incremental refresh is Spark's and keeps the plan facts beside the table on the store; the
            # later ones run without Spark (write/driver.py): no Spark job, the facts read from the store
            assert (WITHOUT_SPARK in (info.get("mode_reason") or "")) is (step > 1), (where, info.get("mode_reason"))
            if step > 1:
                assert res.spark_jobs == 0, (where, res)
