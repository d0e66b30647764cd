"""Incremental refresh: corrections from the sources' changes equal the full diff's, checked by an oracle."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from deltahelp import BASE, HOUR, delete_at, multiset, oracle, stamp, update_at, write_at, write_view
from mvsink.core.deltalog import change_set
from mvsink.definitions.catalog import Catalog
from mvsink.readers.arrow import read_view
from mvsink.spark.plan import linearity, nonlinear_reason, tree_from_explain
from mvsink.spark.runners import refresh

pytestmark = pytest.mark.spark

CDF = {"delta.enableChangeDataFeed": "true"}
ORDERS = pa.schema([("id", pa.int64()), ("cust", pa.int32()), ("status", pa.string()), ("qty", pa.int32())])
CUSTOMERS = pa.schema([("id", pa.int32()), ("region", pa.string()), ("tier", pa.int32())])

JOIN = ("SELECT o.id, o.status, o.qty, c.region FROM orders o JOIN customers c ON o.cust = c.id "
        "WHERE o.qty IS NULL OR o.qty > 0")
PROJ = "SELECT status, qty FROM orders UNION ALL SELECT region AS status, tier AS qty FROM customers"
LEFT = "SELECT o.status, c.region FROM orders o LEFT JOIN customers c ON o.cust = c.id"
AGG = "SELECT o.status, c.region, count(*) AS n FROM orders o JOIN customers c ON o.cust = c.id GROUP BY 1, 2"


def _orders(rng: random.Random, start: int, n: int) -> pa.Table:
    return pa.Table.from_pylist([{"id": start + i, "cust": rng.choice([1, 2, 3, None]),
                                  "status": rng.choice(["A", "B", None]), "qty": rng.choice([0, 1, 1, 2, None])}
                                 for i in range(n)], schema=ORDERS)


def _customers(rng: random.Random) -> pa.Table:
    return pa.Table.from_pylist([{"id": i, "region": rng.choice(["eu", "us", None]), "tier": rng.choice([1, 2])}
                                 for i in (1, 2, 3)], schema=CUSTOMERS)


def _join_setup(env, rng: random.Random, n: int, **orders_kw) -> tuple[object, dict[str, str]]:
    """Sources orders (``n`` rows, written with ``orders_kw``) and customers, and the JOIN view over them."""
    data, views = env
    orders, customers = str(data / "orders"), str(data / "customers")
    write_deltalake(orders, _orders(rng, 0, n), **orders_kw)
    stamp(orders, BASE)
    write_at(customers, _customers(rng), BASE + 1)
    write_view(views, "join", query=JOIN, sources={"orders": "orders", "customers": "customers"},
               target="views/join", as_of=BASE)
    return Catalog(views).get("join"), {"orders": orders, "customers": customers}


def _history(view_target: str) -> list[dict[str, object]]:
    return [{k.removeprefix("mvsink."): json.loads(v) for k, v in h.items() if k.startswith("mvsink.")}
            for h in DeltaTable(view_target).history()]


def _modes(view_target: str) -> list[str]:
    """Diff mode of each append, oldest first."""
    return [h.get("mode", "") for h in reversed(_history(view_target)) if h.get("operation") == "append"]


# ---------------------------------------------------------------- linearity on real Spark plans

@pytest.fixture
def plan_views(spark):
    spark.createDataFrame([(1, 1, "A", 1)], "id long, cust int, status string, qty int").createOrReplaceTempView("orders")
    spark.createDataFrame([(1, "eu", 1)], "id int, region string, tier int").createOrReplaceTempView("customers")


@pytest.mark.parametrize("query,source", [
    (JOIN, "orders"), (JOIN, "customers"), (PROJ, "orders"), (PROJ, "customers"), (LEFT, "orders"),
    ("SELECT explode(array(qty, qty)) AS q FROM orders ORDER BY q", "orders"),
    ("SELECT o.id FROM orders o LEFT ANTI JOIN customers c ON o.cust = c.id", "orders"),
    ("SELECT o.id, n FROM orders o JOIN (SELECT id, count(*) AS n FROM customers GROUP BY id) c ON o.cust = c.id",
     "orders"),
    ("WITH big AS (SELECT * FROM orders WHERE qty > 1) SELECT id FROM big", "orders"),
    ("WITH big AS (SELECT * FROM orders WHERE qty > 1), b2 AS (SELECT id FROM big) SELECT id FROM b2", "orders"),
])
def test_linear_plans(spark, plan_views, query, source):
    assert linearity(spark, query, [source]) == {source: None}
    assert linearity(spark, query, [source], desired=spark.sql(query)) == {source: None}  # the plan object


@pytest.mark.parametrize("query,source,why", [
    (AGG, "orders", "Aggregate"),
    ("SELECT DISTINCT status FROM orders", "orders", "Distinct"),
    (LEFT, "customers", "right side of a LeftOuter join"),
    ("SELECT o.id FROM orders o FULL JOIN customers c ON o.cust = c.id", "orders", "FullOuter"),
    ("SELECT a.id FROM orders a JOIN orders b ON a.cust = b.cust", "orders", "read 2 times"),
    ("SELECT id FROM orders WHERE cust IN (SELECT id FROM customers)", "customers", "subquery"),
    ("SELECT id, row_number() OVER (ORDER BY id) AS r FROM orders", "orders", "Window"),
    ("SELECT id FROM orders ORDER BY id LIMIT 3", "orders", "Limit"),
    ("SELECT o.id FROM orders o JOIN (SELECT id, count(*) AS n FROM customers GROUP BY id) c ON o.cust = c.id",
     "customers", "Aggregate"),
    ("SELECT status FROM orders UNION SELECT region FROM customers", "orders", "Distinct"),
    ("SELECT status FROM orders EXCEPT ALL SELECT region FROM customers", "customers", "Except"),
    ("WITH big AS (SELECT * FROM orders WHERE qty > 1), b2 AS (SELECT id FROM big) "
     "SELECT id FROM b2 UNION ALL SELECT id FROM big", "orders", "CTE over 'orders' is read 2 times"),
])
def test_nonlinear_plans(spark, plan_views, query, source, why):
    reason = linearity(spark, query, [source])[source]
    assert reason is not None and why in reason, reason
    assert linearity(spark, query, [source], desired=spark.sql(query))[source] == reason


@pytest.mark.unit
def test_plan_parser_reads_sides_and_depths():
    text = """== Parsed Logical Plan ==
x
== Analyzed Logical Plan ==
k: bigint
Project [k#0L]
+- Join LeftOuter, (k#0L = k#1L)
   :- SubqueryAlias orders
   :  +- View (`orders`, [k#0L])
   :     +- Relation [k#0L] parquet
   +- SubqueryAlias customers
      +- View (`customers`, [k#1L])
         +- Relation [k#1L] parquet

== Optimized Logical Plan ==
y
"""
    tree = tree_from_explain(text)
    assert tree.name == "Project" and tree.children[0].name == "Join"
    assert [c.name for c in tree.children[0].children] == ["SubqueryAlias", "SubqueryAlias"]
    assert nonlinear_reason(tree, "orders") is None
    assert "right side of a LeftOuter join" in (nonlinear_reason(tree, "customers") or "")


# ---------------------------------------------------------------- change sets from the log

def test_change_set_uses_cdf_files_or_added_and_removed_files(tmp_path):
    rng = random.Random(1)
    cdf, plain = tmp_path / "cdf", tmp_path / "plain"
    write_deltalake(str(cdf), _orders(rng, 0, 50), configuration=CDF)
    write_deltalake(str(plain), _orders(rng, 0, 50))
    for p in (cdf, plain):
        DeltaTable(str(p)).update(updates={"qty": "7"}, predicate="id < 3")
        write_deltalake(str(p), _orders(rng, 100, 2), mode="append")
    cs = change_set(str(cdf), 0, 2)
    assert not isinstance(cs, str)
    assert len(cs.cdc) == 1 and len(cs.inserted) == 1 and not cs.deleted  # update via CDF, insert via add
    cs = change_set(str(plain), 0, 2)
    assert not isinstance(cs, str)
    assert not cs.cdc and len(cs.inserted) == 2 and len(cs.deleted) == 1  # the rewritten file both ways
    assert "no longer in the log" in str(change_set(str(plain), 0, 5))
    for f in cs.deleted:
        Path(f.path).unlink()
    assert "gone" in str(change_set(str(plain), 0, 2))


# ---------------------------------------------------------------- end to end, against the oracle

def _change(rng: random.Random, orders: str, customers: str, next_id: list[int], ts: int) -> None:
    op = rng.choice(["insert", "insert", "delete", "update", "customers", "dupes"])
    if op == "insert":
        t = _orders(rng, next_id[0], rng.randint(1, 5))
        next_id[0] += t.num_rows
        write_at(orders, t, ts)
    elif op == "dupes":
        t = _orders(random.Random(3), next_id[0], 3)
        next_id[0] += 3
        write_at(orders, t, ts)
    elif op == "delete":
        delete_at(orders, f"id % 7 = {rng.randint(0, 6)}", ts)
    elif op == "update":
        update_at(orders, {"status": "'B'", "qty": "qty + 1"}, f"id % 4 = {rng.randint(0, 3)}", ts)
    else:
        update_at(customers, {"region": "'apac'"}, f"id = {rng.randint(1, 3)}", ts)


@pytest.mark.parametrize("seed,cdf", [(5, True), (17, False)])
def test_randomized_histories_incremental_matches_oracle(spark, env, monkeypatch, seed, cdf):
    """Linear views refresh incrementally and equal the oracle; the aggregate falls back to the full diff."""
    monkeypatch.setenv("MVSINK_INCREMENTAL_MAX_FRACTION", "100")  # always incremental when allowed
    data, views = env
    rng = random.Random(seed)
    orders, customers = str(data / "orders"), str(data / "customers")
    write_deltalake(orders, _orders(rng, 0, 30), configuration=CDF if cdf else None)
    stamp(orders, BASE)
    write_deltalake(customers, _customers(rng), configuration=CDF if cdf else None)
    stamp(customers, BASE + 1)
    queries = {"join": JOIN, "proj": PROJ, "left": LEFT, "agg": AGG}
    for name, q in queries.items():
        write_view(views, name, query=q, sources={"orders": "orders", "customers": "customers"},
                   target=f"views/{name}", as_of=BASE)
    catalog = Catalog(views)
    next_id, t = [30], BASE + HOUR
    srcs = {"orders": orders, "customers": customers}
    for step in range(6):
        for _ in range(rng.randint(1, 3)):
            t += rng.randint(1, 10) * 60_000
            _change(rng, orders, customers, next_id, t)
        t += HOUR
        for name, q in queries.items():
            view = catalog.get(name)
            res = refresh(view, t, catalog=catalog, runner="inprocess", spark=spark, run_id=f"s{step}")
            assert res.status == "appended", res
            assert multiset(read_view(view, as_of=t)) == oracle(q, srcs, t), f"{name} at step {step}"
    modes = {name: _modes(str(data / "views" / name)) for name in queries}
    assert set(modes["agg"]) <= {"full", "unchanged"}
    for name in ("join", "proj"):
        assert modes[name][0] == "full" and "incremental" in modes[name], modes[name]
        assert "full" not in modes[name][1:], modes[name]
    # LEFT is linear in orders only: incremental when only orders changed, full when customers did
    appends = [h for h in reversed(_history(str(data / "views" / "left"))) if h.get("operation") == "append"]
    for prev, cur in zip(appends, appends[1:]):
        customers_moved = prev["sources"]["customers"] != cur["sources"]["customers"]  # type: ignore[index]
        assert cur["mode"] == ("full" if customers_moved else "incremental"), (prev, cur)


def test_hand_edit_forces_full_diff_and_repairs(spark, env):
    rng = random.Random(2)
    view, srcs = _join_setup(env, rng, 20)
    orders = srcs["orders"]
    refresh(view, BASE + HOUR, runner="inprocess", spark=spark)
    # someone deletes rows of the view by hand, then the source changes
    DeltaTable(view.target).delete("id < 5")
    write_at(orders, _orders(rng, 100, 3), BASE + HOUR + 5)
    res = refresh(view, BASE + 2 * HOUR, runner="inprocess", spark=spark)
    assert res.mode == "full"
    assert multiset(read_view(view, as_of=BASE + 2 * HOUR)) == oracle(JOIN, srcs, BASE + 2 * HOUR)
    write_at(orders, _orders(rng, 200, 3), BASE + 2 * HOUR + 5)
    res = refresh(view, BASE + 3 * HOUR, runner="inprocess", spark=spark)
    assert res.mode == "incremental" and res.rows_retracted == 0
    assert multiset(read_view(view, as_of=BASE + 3 * HOUR)) == oracle(JOIN, srcs, BASE + 3 * HOUR)


def test_fallbacks_to_full_diff(spark, env, monkeypatch):
    """Vacuumed change files, a source schema change, a too-large change set, `incremental: false`."""
    rng = random.Random(4)
    view, srcs = _join_setup(env, rng, 40)
    orders = srcs["orders"]
    write_view(env[1], "off", query=JOIN, sources={"orders": "orders", "customers": "customers"},
               target="views/off", as_of=BASE, incremental=False)
    off = Catalog(env[1]).get("off")
    t = BASE + HOUR
    refresh(view, t, runner="inprocess", spark=spark)
    refresh(off, t, runner="inprocess", spark=spark)

    def step(expect: str, reason: str) -> None:
        nonlocal t
        t += HOUR
        for v, want in ((view, expect), (off, "full")):
            res = refresh(v, t, runner="inprocess", spark=spark)
            assert res.mode == want, (v.name, res)
            assert multiset(read_view(v, as_of=t)) == oracle(JOIN, srcs, t)
        assert reason in str(_history(view.target)[0]["mode_reason"])
        assert "incremental: false" in str(_history(off.target)[0]["mode_reason"])

    # a small change: incremental (rewrites a 40-row file, so allow a large fraction)
    monkeypatch.setenv("MVSINK_INCREMENTAL_MAX_FRACTION", "100")
    update_at(orders, {"qty": "5"}, "id = 3", t + 10)
    step("incremental", "from the changes of orders")
    # the same kind of change over the default limit: the rewritten file is most of the table
    monkeypatch.delenv("MVSINK_INCREMENTAL_MAX_FRACTION")
    update_at(orders, {"qty": "6"}, "id = 4", t + 10)
    step("full", "over 50%")
    # a removed file vacuumed away before the refresh
    monkeypatch.setenv("MVSINK_INCREMENTAL_MAX_FRACTION", "100")
    before = set(DeltaTable(orders).file_uris())
    delete_at(orders, "id = 5", t + 10)
    for gone in before - set(DeltaTable(orders).file_uris()):
        Path(gone.removeprefix("file://")).unlink()
    step("full", "gone")
    # a new column in the source (schema change in the log)
    extra = _orders(rng, 500, 2).append_column("note", pa.array(["x", "y"]))
    write_deltalake(orders, extra, mode="append", schema_mode="merge")
    stamp(orders, t + 10)
    step("full", "schema")
    write_at(orders, _orders(rng, 600, 2).append_column("note", pa.array(["z", None])), t + 10)
    step("incremental", "from the changes of orders")


def test_incremental_over_partitioned_source_with_null_partition(spark, env, monkeypatch):
    monkeypatch.setenv("MVSINK_INCREMENTAL_MAX_FRACTION", "100")
    rng = random.Random(9)
    view, srcs = _join_setup(env, rng, 30, partition_by=["status"], configuration=CDF)
    orders = srcs["orders"]
    refresh(view, BASE + HOUR, runner="inprocess", spark=spark)
    t = BASE + HOUR
    for i in range(3):
        update_at(orders, {"qty": "qty + 1"}, f"id % 3 = {i}", t + 10)
        delete_at(orders, f"id % 5 = {i}", t + 20)
        write_at(orders, _orders(rng, 100 + 10 * i, 4), t + 30)
        t += HOUR
        res = refresh(view, t, runner="inprocess", spark=spark)
        assert res.mode == "incremental", res
        assert multiset(read_view(view, as_of=t)) == oracle(JOIN, srcs, t)
    shutil.rmtree(env[0] / "views")


def test_recreated_source_is_not_mistaken_for_the_old_one(spark, env):
    """A source deleted and written anew reaches the same version numbers: no shortcut, no incremental diff."""
    rng = random.Random(8)
    view, srcs = _join_setup(env, rng, 10)
    orders = srcs["orders"]
    write_at(orders, _orders(rng, 10, 10), BASE + 2)
    refresh(view, BASE + HOUR, runner="inprocess", spark=spark)
    shutil.rmtree(orders)  # same path, a new table with as many commits (versions 0 and 1 again)
    for ts in (BASE + HOUR + 10, BASE + HOUR + 20):  # versions 0 and 1 again
        write_at(orders, _orders(rng, 50, 10), ts)
    res = refresh(view, BASE + 2 * HOUR, runner="inprocess", spark=spark)
    assert res.mode == "full" and res.rows_added > 0, res
    assert multiset(read_view(view, as_of=BASE + 2 * HOUR)) == oracle(JOIN, srcs, BASE + 2 * HOUR)
