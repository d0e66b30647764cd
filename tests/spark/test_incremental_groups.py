"""Aggregates refreshed by their affected groups (mode incremental:groups) equal the oracle and the full diff."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from mvsink.definitions.catalog import Catalog
from mvsink.incremental import groups
from mvsink.plan.read import plan_tree
from mvsink.plan.splits import aggregate_split, groups_reason
from mvsink.readers.arrow import read_view
from mvsink.write.runners import refresh
from tests.support.aggdata import CDF, ORDERS, agg_change, agg_customers, agg_orders, appends
from tests.support.delta import BASE, HOUR, stamp, update_at
from tests.support.oracle import multiset, oracle
from tests.support.viewfiles import write_view

pytestmark = pytest.mark.spark


@pytest.fixture(autouse=True)
def _no_scan_guard(monkeypatch):
    """These tests check what the incremental modes compute; the scan guard has its own test."""
    monkeypatch.setenv("MVSINK_INCREMENTAL_MAX_SCAN_RATIO", "1000")


ELIGIBLE = {
    # COUNT/SUM/AVG over a join, grouped by a dimension column (rows move when a customer changes region)
    "join_agg": "SELECT c.region, count(*) AS n, sum(o.qty) AS s, avg(o.qty) AS a "
    "FROM orders o JOIN customers c ON o.cust = c.id GROUP BY c.region",
    # MIN/MAX (deletions of the extreme), a renamed key, ORDER BY above the aggregate
    "minmax": "SELECT o.status AS st, min(o.qty) AS lo, max(o.qty) AS hi FROM orders o "
    "WHERE o.qty IS NULL OR o.qty < 9 GROUP BY o.status ORDER BY st",
    "cdistinct": "SELECT cust, count(DISTINCT status) AS k, count(status) AS m FROM orders GROUP BY cust",
    "dsum": "SELECT status, sum(price) AS p, avg(price) AS ap FROM orders GROUP BY status",
    # two grouping keys with NULLs, the keys not first in the output
    "two_keys": "SELECT count(*) AS n, sum(o.qty) AS s, c.seg, o.status FROM orders o "
    "JOIN customers c ON o.cust = c.id GROUP BY c.seg, o.status",
}
# Views with accumulable state (COUNT/SUM/AVG of integers) refresh from it (incremental:aggregate) first.
HAS_STATE = {"join_agg", "two_keys", "global"}
# MIN/MAX: from the state, by affected groups where a change deleted some group's extreme
EITHER = {"minmax"}
# (HAVING, DISTINCT, UNION and top-k views: tests/spark/test_incremental_shapes.py)
NOT_ELIGIBLE = {
    "global": ("SELECT count(*) AS n, sum(qty) AS s FROM orders", "global aggregate"),
}


# ---------------------------------------------------------------- the split, on real Spark plans


@pytest.mark.parametrize("name", sorted(ELIGIBLE))
def test_split_finds_the_keys_in_the_output(spark, plan_views, name):
    q = ELIGIBLE[name]
    df = spark.sql(q)
    for tree in (plan_tree(spark, q), plan_tree(spark, q, desired=df)):
        split = groups_reason(tree, ["orders", "customers"] if "customers" in q else ["orders"])
        assert not isinstance(split, str), split
        want = {
            "join_agg": ["region"],
            "minmax": ["st"],
            "cdistinct": ["cust"],
            "dsum": ["status"],
            "two_keys": ["seg", "status"],
        }[name]
        assert [df.columns[p] for p in split.key_positions] == want


@pytest.mark.parametrize(
    "query,why",
    [
        *NOT_ELIGIBLE.values(),
        ("SELECT upper(status) AS u, count(*) AS n FROM orders GROUP BY upper(status)", "is an expression"),
        ("SELECT count(*) AS n FROM orders GROUP BY status", "not a column of the view"),
        ("SELECT concat(status, 'x') AS s2, count(*) AS n FROM orders GROUP BY status", "not a column of the view"),
        (
            "SELECT o.status, count(*) AS n FROM orders o LEFT JOIN customers c ON o.cust = c.id GROUP BY o.status",
            "not linear in 'customers'",
        ),
        (
            "SELECT s, count(*) AS n FROM (SELECT status AS s, count(*) AS m FROM orders GROUP BY status) GROUP BY s",
            "not linear in 'orders'",
        ),
        ("SELECT status, count(*) AS n, rand() AS r FROM orders GROUP BY status", "not deterministic"),
    ],
)
def test_split_refuses(spark, plan_views, query, why):
    reason = groups_reason(plan_tree(spark, query), ["orders", "customers"])
    assert isinstance(reason, str) and why in reason, reason


@pytest.mark.unit
def test_split_on_the_explain_text_fails_closed(spark, plan_views):
    """Spark Connect's EXPLAIN text has no expression ids: the keys cannot be proven, so not eligible."""
    from mvsink.plan.read import tree_from_explain

    text = spark.sql("EXPLAIN EXTENDED " + ELIGIBLE["dsum"]).collect()[0][0]
    assert isinstance(aggregate_split(tree_from_explain(text)), str)


# ---------------------------------------------------------------- randomized histories, against the oracle


@pytest.mark.parametrize("seed,cdf", [(7, True), (23, False)])
def test_randomized_histories_groups_match_oracle_and_full_diff(spark, env, monkeypatch, seed, cdf):
    monkeypatch.setenv("MVSINK_INCREMENTAL_GROUPS", "true")
    monkeypatch.setenv("MVSINK_INCREMENTAL_AGGREGATE", "true")  # views with state refresh from it first
    monkeypatch.setenv("MVSINK_INCREMENTAL_MAX_FRACTION", "100")  # the change-set size guard: never
    monkeypatch.setattr(groups, "MAX_AFFECTED_FRACTION", 100.0)  # the cost guard: never
    data, views = env
    rng = random.Random(seed)
    orders, customers = str(data / "orders"), str(data / "customers")
    write_deltalake(orders, agg_orders(rng, 0, 40), configuration=CDF if cdf else None)
    stamp(orders, BASE)
    write_deltalake(customers, agg_customers(rng), configuration=CDF if cdf else None)
    stamp(customers, BASE + 1)
    srcs = {"orders": orders, "customers": customers}
    queries = {**ELIGIBLE, **{k: q for k, (q, _) in NOT_ELIGIBLE.items()}}
    for name, q in queries.items():
        for suffix, inc in (("", True), ("_full", False)):
            if suffix and (name not in ELIGIBLE or not cdf):  # the twins once (the machine is small)
                continue
            used = {"orders": "orders", "customers": "customers"} if "customers" in q else {"orders": "orders"}
            write_view(
                views, name + suffix, query=q, sources=used, target=f"views/{name}{suffix}", as_of=BASE, incremental=inc
            )
    catalog = Catalog(views)
    next_id, t = [40], BASE + HOUR
    ops: list[str] = []
    for step in range(4):
        for _ in range(rng.randint(1, 3)):
            t += rng.randint(1, 10) * 60_000
            ops.append(agg_change(rng, orders, customers, next_id, t))
        t += HOUR
        for name, q in queries.items():
            expected = oracle(q, srcs if "customers" in q else {"orders": orders}, t)
            for suffix in ("", "_full") if name in ELIGIBLE and cdf else ("",):
                view = catalog.get(name + suffix)
                res = refresh(view, t, catalog=catalog, runner="inprocess", spark=spark, run_id=f"s{step}")
                assert res.status == "appended", res
                assert multiset(read_view(view, as_of=t)) == expected, (name + suffix, step, ops)
    for name in ELIGIBLE:
        history = appends(str(data / "views" / name))
        mode = "incremental:aggregate" if name in HAS_STATE else "incremental:groups"
        allowed = {mode, "unchanged"} | ({"incremental:aggregate"} if name in EITHER else set())
        assert history[0]["mode"] == "full"
        for a in history[1:]:
            assert a["mode"] in allowed, (name, a["mode"], a["mode_reason"])
        assert any(a["mode"] in allowed - {"unchanged"} for a in history), name
        _assert_keys_engine(name, history)
        if cdf:
            assert all(a["mode"] in ("full", "unchanged") for a in appends(str(data / "views" / f"{name}_full")))
    for name, (_, why) in NOT_ELIGIBLE.items():
        for a in appends(str(data / "views" / name))[1:]:
            if name in HAS_STATE:  # not by groups, but from its hidden state
                assert a["mode"] in ("incremental:aggregate", "unchanged"), (name, a)
                continue
            assert a["mode"] in ("full", "unchanged"), (name, a)
            if a["mode"] == "full":
                assert why in str(a["mode_reason"]), (name, a["mode_reason"])


def _assert_keys_engine(name: str, history: list[dict]) -> None:
    """Where the affected keys came from: DuckDB's change terms (no Spark job) where it computes C as Spark does."""
    by_groups = [str(a["mode_reason"]) for a in history if a["mode"] == "incremental:groups"]
    if name in ("minmax", "cdistinct"):
        assert all("found by the change terms evaluated in the driver" in r for r in by_groups), (name, by_groups)
    if name == "dsum":  # DOUBLE: DuckDB might not compute it as Spark does, so Spark's terms find the keys
        assert not any("evaluated in the driver" in r for r in by_groups), (name, by_groups)


def test_cost_guard_and_hand_edit_repair(spark, env, monkeypatch):
    """Many affected groups: the full diff, with the reason; a hand edit: the full diff repairs it."""
    monkeypatch.setenv("MVSINK_INCREMENTAL_GROUPS", "true")
    monkeypatch.setenv("MVSINK_INCREMENTAL_AGGREGATE", "false")  # (the MAX would refresh from its state)
    monkeypatch.setenv("MVSINK_INCREMENTAL_MAX_FRACTION", "100")
    data, views = env
    rng = random.Random(5)
    orders = str(data / "orders")
    rows = [{"id": i, "cust": i % 20, "status": f"s{i % 20}", "qty": i % 7, "price": 1.0} for i in range(200)]
    write_deltalake(orders, pa.Table.from_pylist(rows, schema=ORDERS), configuration=CDF)
    stamp(orders, BASE)
    q = "SELECT cust, count(*) AS n, max(qty) AS hi FROM orders GROUP BY cust"
    write_view(views, "g", query=q, sources={"orders": "orders"}, target="views/g", as_of=BASE)
    view = Catalog(views).get("g")
    srcs = {"orders": orders}
    t = BASE + HOUR
    assert refresh(view, t, runner="inprocess", spark=spark).mode == "full"

    def step(change: str, mode: str, reason: str) -> None:
        nonlocal t
        if change == "few":
            update_at(orders, {"qty": "qty + 10"}, "id IN (3, 44)", t + 10)  # groups 3 and 4 of 20
        else:
            update_at(orders, {"qty": "qty + 10"}, "id < 15", t + 10)  # 15 of 20 groups
        t += HOUR
        res = refresh(view, t, runner="inprocess", spark=spark)
        assert res.mode == mode, res
        assert reason in appends(view.target)[-1]["mode_reason"], appends(view.target)[-1]
        assert multiset(read_view(view, as_of=t)) == oracle(q, srcs, t)

    step("few", "incremental:groups", "recomputed 2 affected group(s) of 20 row(s)")
    step("many", "full", "15 affected group(s) against 20 row(s) of the view (over 50%")
    step("few", "incremental:groups", "recomputed 2 affected group(s)")
    # a hand edit of the aggregate's table: the next refresh takes the full diff and repairs it
    DeltaTable(view.target).delete("cust < 5")
    update_at(orders, {"qty": "qty + 1"}, "id = 7", t + 10)
    t += HOUR
    res = refresh(view, t, runner="inprocess", spark=spark)
    assert res.mode == "full", res
    assert multiset(read_view(view, as_of=t)) == oracle(q, srcs, t)
    step("few", "incremental:groups", "recomputed 2 affected group(s)")
    del rng


def test_affected_keys_filter_is_pushed_below_the_aggregate(spark, plan_views):
    """The inlined IN filters on the view's key columns reach the scans below the aggregate and the join."""
    import re

    df = spark.sql(ELIGIBLE["two_keys"])
    pre = groups._inline_filter([("x", "A"), (None, "B")], ["seg", "status"])
    assert pre is not None
    optimized = df.where(pre)._jdf.queryExecution().optimizedPlan().toString()
    top, below = optimized.split("\n", 1)
    assert top.startswith("Aggregate"), optimized  # no filter left above the aggregate
    assert re.search(r"Filter \(status#\d+ IN \(A,B\)", below), optimized  # on the orders scan
    assert re.search(r"Filter \(\(\(seg#\d+ = x\) OR isnull\(seg#\d+\)\)", below), optimized  # customers
