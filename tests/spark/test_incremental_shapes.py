"""View shapes refreshed incrementally: HAVING, UNION and per-group top-k by affected groups (mode
incremental:groups), a DISTINCT of columns from its row counts (incremental:aggregate), a source read twice in a
UNION ALL (incremental, and under an aggregate incremental:aggregate), ORDER BY ... LIMIT (mode incremental:topk).

After every refresh: contents == the DuckDB oracle == the same view refreshed with ``incremental: false``
(compared exactly), and every refresh after the first took the view's incremental mode.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from mvsink.definitions.catalog import Catalog
from mvsink.incremental import groups
from mvsink.incremental.topk import key_positions, topk_split
from mvsink.plan.read import plan_tree
from mvsink.plan.splits import groups_reason
from mvsink.readers.arrow import read_view
from mvsink.write.runners import refresh
from tests.support.aggdata import CDF, ORDERS, agg_change, agg_customers, agg_orders, appends
from tests.support.delta import BASE, HOUR, delete_at, stamp, update_at, write_at
from tests.support.oracle import multiset, oracle
from tests.support.viewfiles import parse, view_text, write_view

pytestmark = pytest.mark.spark

GROUPS, TOPK, AGGREGATE = "incremental:groups", "incremental:topk", "incremental:aggregate"
# name: (query, declared key, mode). NULL placement is spelled out: DuckDB's defaults differ from Spark's.
SHAPES: dict[str, tuple[str, list[str], str]] = {
    # HAVING over small groups of a join (it crosses its threshold both ways; a customer changing region
    # moves rows between groups), on an aggregate not in the output too, with MIN/MAX, COUNT(DISTINCT) and
    # a SUM over DOUBLE beside it; NULL keys and all-NULL groups
    "having": (
        "SELECT c.region, o.status, count(*) AS n, min(o.qty) AS lo, max(o.qty) AS hi, "
        "count(DISTINCT o.price) AS dp, sum(o.price) AS sp FROM orders o JOIN customers c ON o.cust = c.id "
        "GROUP BY c.region, o.status HAVING count(*) > 1 AND max(o.price) IS DISTINCT FROM 0.5",
        [],
        GROUPS,
    ),
    # DISTINCT of columns: each row's count of input rows is its aggregate state
    "distinct": ("SELECT DISTINCT c.region, o.status FROM orders o JOIN customers c ON o.cust = c.id", [], AGGREGATE),
    # one source read in two branches of a UNION ALL (a change term replaces both reads), as rows and aggregated
    "union_all": (
        "SELECT id, status, qty FROM orders WHERE qty > 2 "
        "UNION ALL SELECT o.id, c.region, o.qty FROM orders o JOIN customers c ON o.cust = c.id",
        [],
        "incremental",
    ),
    "union_all_agg": (
        "SELECT s, count(*) AS n, sum(q) AS t, count(q) AS nq FROM (SELECT status AS s, qty AS q FROM orders "
        "UNION ALL SELECT c.region AS s, o.qty AS q FROM orders o JOIN customers c ON o.cust = c.id WHERE o.qty > 1) "
        "GROUP BY s",
        [],
        AGGREGATE,
    ),
    # UNION = DISTINCT over a bag union; a row can come from either side
    "union": (
        "SELECT status AS s, cust AS k FROM orders WHERE qty > 1 UNION SELECT seg, id FROM customers",
        [],
        GROUPS,
    ),
    # per-group top-k: row_number over a total order, dense_rank with ties (over a join)
    "rownum": (
        "SELECT * FROM (SELECT id, status, qty, row_number() OVER "
        "(PARTITION BY status ORDER BY qty DESC NULLS LAST, id) AS rn FROM orders) WHERE rn <= 2",
        [],
        GROUPS,
    ),
    "dense": (
        "SELECT * FROM (SELECT o.id, c.region, o.qty, dense_rank() OVER "
        "(PARTITION BY c.region ORDER BY o.qty NULLS FIRST) AS r FROM orders o JOIN customers c ON o.cust = c.id) "
        "WHERE r <= 2",
        [],
        GROUPS,
    ),
    # ORDER BY ... LIMIT over one source's columns (one renamed): Δ read from the change files in the driver;
    # NULLs in both ORDER BY columns, placed differently
    "topcols": (
        "SELECT id AS oid, status, qty FROM orders ORDER BY qty DESC NULLS LAST, status NULLS FIRST, oid LIMIT 4",
        ["oid"],
        TOPK,
    ),
    # ORDER BY ... LIMIT over a join, the key last in the ORDER BY
    "topk": (
        "SELECT o.id, c.region, o.qty FROM orders o JOIN customers c ON o.cust = c.id "
        "ORDER BY o.qty DESC NULLS LAST, c.region NULLS FIRST, o.id DESC LIMIT 4",
        ["id"],
        TOPK,
    ),
}


def exact(table: pa.Table) -> Counter[tuple[Any, ...]]:
    """The rows of a view's contents as they are (no rounding), with their counts."""
    return Counter(tuple(r.values()) for r in table.to_pylist())


@pytest.fixture
def eager(monkeypatch):
    monkeypatch.setenv("MVSINK_INCREMENTAL_GROUPS", "true")
    monkeypatch.setenv("MVSINK_INCREMENTAL_MAX_FRACTION", "100")  # the change-set size guard: never
    monkeypatch.setattr(groups, "MAX_AFFECTED_FRACTION", 100.0)  # the cost guard: never


# ---------------------------------------------------------------- the splits, on real Spark plans


@pytest.mark.parametrize("name", [n for n, (_, _, mode) in SHAPES.items() if mode == GROUPS or n == "distinct"])
def test_groups_split_finds_the_keys(spark, plan_views, name):
    q = SHAPES[name][0]
    split = groups_reason(plan_tree(spark, q), ["orders", "customers"] if "customers" in q else ["orders"])
    assert not isinstance(split, str), split
    want = {
        "having": ("Aggregate", ["region", "status"]),
        "distinct": ("Distinct", ["region", "status"]),
        "union": ("Distinct", ["s", "k"]),
        "rownum": ("Window", ["status"]),
        "dense": ("Window", ["region"]),
    }[name]
    assert (split.kind, [spark.sql(q).columns[p] for p in split.key_positions]) == want


@pytest.mark.parametrize(
    "query,why",
    [
        ("SELECT id, sum(qty) OVER () AS s FROM orders", "a window over all rows"),
        ("SELECT id, rank() OVER (PARTITION BY upper(status) ORDER BY id) AS r FROM orders", "_w0' is not a column"),
        ("SELECT id, rank() OVER (PARTITION BY status ORDER BY id) AS r FROM orders", "not a column of the view"),
        ("SELECT DISTINCT upper(status) AS u FROM orders o LEFT JOIN customers c ON o.cust = c.id", "not linear"),
        ("SELECT status, count(*) AS n FROM orders GROUP BY status HAVING max(id) > 1 LIMIT 3", "not an aggregate"),
        ("SELECT status FROM orders INTERSECT SELECT region FROM customers", "not an aggregate, DISTINCT or window"),
        ("SELECT DISTINCT status FROM orders WHERE qty > (SELECT max(id) FROM customers)", "subquery"),
    ],
)
def test_groups_split_refuses(spark, plan_views, query, why):
    reason = groups_reason(plan_tree(spark, query), ["orders", "customers"])
    assert isinstance(reason, str) and why in reason, reason


def test_topk_split(spark, plan_views):
    q = SHAPES["topk"][0]
    split = topk_split(plan_tree(spark, q), ["orders", "customers"])
    assert not isinstance(split, str), split
    assert split.limit == 4 and split.order == ((2, True, False), (1, False, True), (0, True, False))
    # a projection and a sort above the limit
    q2 = "SELECT qty AS q, id FROM (SELECT id, qty FROM orders ORDER BY qty DESC, id LIMIT 3) ORDER BY id"
    split = topk_split(plan_tree(spark, q2), ["orders"])
    assert not isinstance(split, str) and split.order == ((0, True, False), (1, False, True)), split


@pytest.mark.parametrize(
    "query,why",
    [
        ("SELECT id, qty FROM orders WHERE qty > 1", "not ORDER BY ... LIMIT (Filter)"),
        ("SELECT id, qty FROM orders LIMIT 3", "a LIMIT without ORDER BY"),
        ("SELECT id, qty FROM orders ORDER BY qty LIMIT 3 OFFSET 1", "an OFFSET"),
        ("SELECT id FROM orders ORDER BY qty, id LIMIT 3", "ORDER BY item #1 is not a column of the view"),
        ("SELECT id, qty FROM orders ORDER BY qty + 1, id LIMIT 3", "is an expression (Add)"),
        ("SELECT * FROM (SELECT id, qty FROM orders ORDER BY qty, id LIMIT 3) WHERE qty > 1", "(Filter)"),
        (  # (grouped by a column it would be partitioned by it)
            "SELECT substr(status, 1, 1) AS s1, count(*) AS n FROM orders GROUP BY substr(status, 1, 1) "
            "ORDER BY n, s1 LIMIT 2",
            "not linear",
        ),
    ],
)
def test_topk_split_refuses(spark, plan_views, query, why):
    reason = topk_split(plan_tree(spark, query), ["orders"])
    assert isinstance(reason, str) and why in reason, reason


@pytest.mark.parametrize(
    "query,key,why",
    [
        ("SELECT id, qty FROM orders ORDER BY qty, id LIMIT 3", [], "declare the view's `key`"),
        ("SELECT id, qty FROM orders ORDER BY qty LIMIT 3", ["id"], "does not list key column 'id'"),
        ("SELECT id, price FROM orders ORDER BY price, id LIMIT 3", ["price"], "type double"),
    ],
)
def test_topk_needs_a_total_order(spark, plan_views, query, key, why):
    view = parse(view_text(query=query, key="[" + ", ".join(key) + "]"))
    split = topk_split(plan_tree(spark, query), ["orders"])
    assert not isinstance(split, str), split
    reason = key_positions(view, spark.sql(query), split)
    assert isinstance(reason, str) and why in reason, reason


# ---------------------------------------------------------------- randomized histories, against the oracle


@pytest.mark.parametrize("seed,cdf", [(11, True), (29, False)])
def test_randomized_histories_match_oracle_and_full_diff(spark, env, eager, seed, cdf):
    """Two refreshes after the first (the machine is small: refreshes cost, changes hardly): one over random
    changes of every kind and a group dying, one over inserts only (a group coming back). HAVING crosses its
    threshold both ways and the top-k refresh takes both of its ways; the last assertions check that."""
    data, views = env
    rng = random.Random(seed)
    orders, customers = str(data / "orders"), str(data / "customers")
    write_deltalake(orders, agg_orders(rng, 0, 30), configuration=CDF if cdf else None)
    stamp(orders, BASE)
    write_deltalake(customers, agg_customers(rng), configuration=CDF if cdf else None)
    stamp(customers, BASE + 1)
    srcs = {"orders": orders, "customers": customers}
    for name, (q, key, _) in SHAPES.items():
        used = {s: s for s in srcs if s in q}
        for suffix, inc in (("", True), ("_full", False)):
            target = f"views/{name}{suffix}"
            extra: dict[str, Any] = {"key": key} if key else {}
            write_view(views, name + suffix, query=q, sources=used, target=target, as_of=BASE, incremental=inc, **extra)
    catalog = Catalog(views)
    next_id, t = [30], BASE + HOUR
    ops: list[str] = []
    having_keys: list[set[tuple[Any, ...]]] = []
    for step in range(3):
        step_ops = []
        if step == 1:  # random changes of every kind, and groups dying (HAVING crossing its threshold down)
            for _ in range(rng.randint(1, 4)):
                t += rng.randint(1, 10) * 60_000
                step_ops.append(agg_change(rng, orders, customers, next_id, t))
            t += 60_000
            delete_at(orders, "status = 'C'", t)
            step_ops.append("kill_group")
        elif step == 2:  # groups reappearing and rising over the threshold; only inserts: the top-k's easy way
            for status in (["C"], None):
                t += rng.randint(1, 10) * 60_000
                write_at(orders, agg_orders(rng, next_id[0], 5, status=status), t)
                next_id[0] += 5
                step_ops.append("insert")
        ops += step_ops
        t += HOUR
        for name, (q, _, _) in SHAPES.items():
            expected = oracle(q, {s: p for s, p in srcs.items() if s in q}, t)
            got = {}
            for suffix in ("", "_full"):
                view = catalog.get(name + suffix)
                res = refresh(view, t, catalog=catalog, runner="inprocess", spark=spark, run_id=f"s{step}")
                assert res.status == "appended", res
                got[suffix] = read_view(view, as_of=t)
                assert multiset(got[suffix]) == expected, (name + suffix, step, ops)
            assert exact(got[""]) == exact(got["_full"]), (name, step, ops)
            if name == "having":
                having_keys.append({k[:2] for k in expected})
    for name, (_, _, mode) in SHAPES.items():
        history = appends(str(data / "views" / name))
        assert len(history) == 3 and history[0]["mode"] == "full"
        for a in history[1:]:
            assert a["mode"] == mode, (name, a["mode"], a["mode_reason"], ops)
        assert all(a["mode"] == "full" for a in appends(str(data / "views" / f"{name}_full")))
    # what the history is built to show: groups passing HAVING and leaving it, both ways of the top-k refresh
    assert any(b - a for a, b in zip(having_keys, having_keys[1:])), having_keys
    assert any(a - b for a, b in zip(having_keys, having_keys[1:])), having_keys
    reasons = [str(a["mode_reason"]) for a in appends(str(data / "views" / "topk"))[1:]]
    assert any("a deleted row was in the top 4" in r for r in reasons), reasons
    assert any(r.startswith("top 4 of the table's") for r in reasons), reasons


def test_topk_falls_back_when_the_declared_key_is_not_unique(spark, env, eager):
    """A key the view declares but the data breaks (two rows share it): the top-k refresh sees the duplicate
    among its candidates and takes the full diff, which is exact whatever the key."""
    data, views = env
    orders = str(data / "orders")
    rows = [{"id": i, "cust": 1, "status": s, "qty": 1, "price": 1.0} for i, s in ((1, "A"), (2, "B"), (3, "C"))]
    write_at(orders, pa.Table.from_pylist(rows, schema=ORDERS), BASE)
    q = "SELECT id, status, qty FROM orders ORDER BY status NULLS FIRST, id LIMIT 2"
    write_view(views, "tk", query=q, sources={"orders": "orders"}, target="views/tk", as_of=BASE, key=["status"])
    view = Catalog(views).get("tk")
    t = BASE + HOUR
    assert refresh(view, t, runner="inprocess", spark=spark).mode == "full"
    for new, mode, reason in (
        ((4, "0"), TOPK, "top 2 of the table's 2 row(s) and 1 inserted row(s)"),
        ((5, "0"), "full", "the declared key status is not unique among the top 2 and the inserted rows"),
    ):
        row = {"id": new[0], "cust": 1, "status": new[1], "qty": 2, "price": 1.0}
        write_at(orders, pa.Table.from_pylist([row], schema=ORDERS), t + 10)
        t += HOUR
        res = refresh(view, t, runner="inprocess", spark=spark)
        assert res.mode == mode and reason in appends(view.target)[-1]["mode_reason"], appends(view.target)[-1]
        assert multiset(read_view(view, as_of=t)) == oracle(q, {"orders": orders}, t)


@pytest.fixture
def no_aqe(spark):
    """Adaptive execution off: each action is then one Spark job (AQE runs one per shuffle stage)."""
    before = spark.conf.get("spark.sql.adaptive.enabled")
    spark.conf.set("spark.sql.adaptive.enabled", "false")
    yield
    spark.conf.set("spark.sql.adaptive.enabled", before)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_candidates_are_ordered_in_the_driver_as_spark_orders_them(spark, seed):
    """pyarrow's order of the top-k candidates is Spark's: integers, decimals, dates, booleans and strings
    (non-ASCII, case), NULLs first or last per column, either direction; floats are left to Spark."""
    import datetime as dt
    import decimal

    from pyspark.sql import functions as F

    from mvsink.incremental.duckdbtopk import first_rows, order_keys

    rng = random.Random(seed)
    n = 60

    def maybe(v):
        return None if rng.random() < 0.2 else v

    table = pa.table(
        {
            "i": pa.array([maybe(rng.randint(-3, 3)) for _ in range(n)], pa.int64()),
            "d": pa.array(
                [maybe(decimal.Decimal(rng.randint(-300, 300)) / 100) for _ in range(n)], pa.decimal128(7, 2)
            ),
            "dt": pa.array([maybe(dt.date(2026, 1, rng.randint(1, 4))) for _ in range(n)], pa.date32()),
            "b": pa.array([maybe(rng.random() < 0.5) for _ in range(n)], pa.bool_()),
            "s": pa.array([maybe(rng.choice(["a", "B", "é", "ab", "Z", ""])) for _ in range(n)], pa.string()),
            "id": pa.array(list(range(n)), pa.int64()),
            "f": pa.array([rng.random() for _ in range(n)], pa.float64()),
        }
    )
    desired = spark.createDataFrame(table)
    cols = ["i", "d", "dt", "b", "s"]
    for _ in range(4):
        picked = rng.sample(range(len(cols)), 3)
        order = [(p, rng.random() < 0.5, rng.random() < 0.5) for p in picked] + [(5, False, False)]
        keys = order_keys(desired, tuple(order))
        assert keys is not None
        got = first_rows(table, keys, 15)
        sort = []
        for p, descending, nulls_first in order:
            c = F.col(table.column_names[p])
            sort.append(
                (c.desc_nulls_first() if nulls_first else c.desc_nulls_last())
                if descending
                else (c.asc_nulls_first() if nulls_first else c.asc_nulls_last())
            )
        expected = [r["id"] for r in desired.orderBy(*sort).limit(15).collect()]
        assert got.column("id").to_pylist() == expected, order
    assert order_keys(desired, ((6, True, False), (5, False, False))) is None


def test_small_changes_take_at_most_two_spark_jobs(spark, env, eager, no_aqe):
    """The top-k refresh of a small change over a source's columns reads Δ from the change files (no Spark
    job); with a filter (or any other operator) Spark collects Δ in one job; the candidates are ordered in the
    driver, and a deleted row of the top k costs one more job (the query recomputed). The affected-groups
    refresh finds the affected keys with DuckDB's change terms and collects once: the affected groups recomputed.
    The table is read and the corrections written without Spark."""
    data, views = env
    orders = str(data / "orders")
    rows = [{"id": i, "cust": 1, "status": f"s{i % 4}", "qty": i, "price": 1.0} for i in range(20)]
    write_at(orders, pa.Table.from_pylist(rows, schema=ORDERS), BASE)
    shapes = {
        "tk": ("SELECT id AS order_id, status, qty FROM orders ORDER BY qty DESC, order_id LIMIT 3", ["order_id"]),
        "tkf": ("SELECT id, status, qty FROM orders WHERE qty > -100 ORDER BY qty DESC, id LIMIT 3", ["id"]),
        "grp": ("SELECT status, max(qty) AS hi, count(DISTINCT qty) AS k FROM orders GROUP BY status", []),
    }
    for name, (q, key) in shapes.items():
        extra: dict[str, Any] = {"key": key} if key else {}
        write_view(views, name, query=q, sources={"orders": "orders"}, target=f"views/{name}", as_of=BASE, **extra)
    catalog = Catalog(views)
    t = BASE + HOUR
    for name in shapes:
        assert refresh(catalog.get(name), t, runner="inprocess", spark=spark).mode == "full"
    jobs = {"insert 99": (0, 1), "insert -1": (0, 1), "delete 21": (0, 1), "delete 20": (0, 2)}
    for change, (from_files, from_spark) in jobs.items():
        what, ident = change.split()
        if what == "delete":  # id 21 is outside the top 3, id 20 its first row
            delete_at(orders, f"id = {ident}", t + 10)
        else:
            row = {"id": 20 if ident == "99" else 21, "cust": 1, "status": "s1", "qty": int(ident), "price": 1.0}
            write_at(orders, pa.Table.from_pylist([row], schema=ORDERS), t + 10)
        t += HOUR
        for name, (q, _) in shapes.items():
            view = catalog.get(name)
            res = refresh(view, t, runner="inprocess", spark=spark)
            assert res.mode == (GROUPS if name == "grp" else TOPK), appends(view.target)[-1]
            expected = {"tk": from_files, "tkf": from_spark, "grp": 1}[name]
            assert res.spark_jobs == expected, (name, change, res.spark_jobs)
            assert multiset(read_view(view, as_of=t)) == oracle(q, {"orders": orders}, t)
            if change == "delete 20" and name != "grp":  # the top row deleted: the query recomputed
                where = "in the driver" if name == "tk" else "by Spark"
                assert f"recomputed the query {where}" in appends(view.target)[-1]["mode_reason"]


def test_a_deleted_top_row_costs_no_recompute_while_enough_rows_rank_before_the_last(spark, env, eager):
    """A deleted row of the top k recomputes the query only when fewer than k rows of T ∪ inserted − deleted
    rank at or before T's last row (an update that keeps its row in the top does not), and never when T held
    fewer than k rows (it was all of M); each refresh exact against DuckDB."""
    data, views = env
    orders = str(data / "orders")
    rows = [{"id": i, "cust": 1, "status": f"s{i % 3}", "qty": i, "price": 1.0} for i in range(20)]
    write_at(orders, pa.Table.from_pylist(rows, schema=ORDERS), BASE)
    shapes = {
        "top3": "SELECT id, status, qty FROM orders WHERE qty >= 0 ORDER BY qty DESC, id LIMIT 3",
        "top50": "SELECT id, qty FROM orders ORDER BY qty DESC NULLS FIRST, id LIMIT 50",
    }
    for name, q in shapes.items():
        write_view(views, name, query=q, sources={"orders": "orders"}, target=f"views/{name}", as_of=BASE, key=["id"])
    catalog = Catalog(views)
    t = BASE + HOUR
    for name in shapes:
        assert refresh(catalog.get(name), t, runner="inprocess", spark=spark).mode == "full"
    steps = [  # (change, top3's reason, top50's reason)
        ("update", "top 3 of the table's 2 remaining row(s)", "top 50 of the table's 19 remaining row(s)"),
        ("delete 18", "recomputed the query by Spark", "top 50 of the table's 19 remaining row(s)"),
        ("delete 17 insert 30", "top 3 of the table's 2 remaining row(s)", "top 50 of the table's 18 remaining"),
    ]
    for change, *reasons in steps:
        if change == "update":  # the top row (id 19) moves up: deleted and inserted, still first
            update_at(orders, {"qty": "qty + 100"}, "id = 19", t + 10)
        else:
            delete_at(orders, f"id = {change.split()[1]}", t + 10)
            if "insert" in change:
                row = {"id": 30, "cust": 1, "status": "s0", "qty": None, "price": 1.0}
                write_at(orders, pa.Table.from_pylist([row, {**row, "id": 31, "qty": 50}], schema=ORDERS), t + 20)
        t += HOUR
        for (name, q), why in zip(shapes.items(), reasons):
            view = catalog.get(name)
            res = refresh(view, t, runner="inprocess", spark=spark)
            got = appends(view.target)[-1]["mode_reason"]
            assert res.mode == TOPK and why in got, (name, change, got)
            assert multiset(read_view(view, as_of=t)) == oracle(q, {"orders": orders}, t), (name, change)


@pytest.mark.parametrize("engine", ["duckdb", "pyarrow"])
@pytest.mark.parametrize("seed", [3, 8])
def test_the_top_of_a_snapshot_in_the_driver_is_sparks(spark, tmp_path, seed, engine, monkeypatch):
    """A recomputed top k over one source's columns, in the driver — by DuckDB's top-N over the files, or read
    a file at a time by pyarrow (rows dropped against the k-th best first ORDER BY value) — is Spark's ORDER BY
    ... LIMIT: NULLs first or last, either direction, k below and over a file's rows, over several files,
    strings in byte order; a partition column or a missing column is refused."""
    import datetime as dt
    import decimal

    from deltalake import WriterProperties

    from mvsink.core.batch import SourceRead
    from mvsink.incremental import duckdbtopk as topkdriver
    from mvsink.incremental.duckdbtopk import order_keys, top_of_snapshot

    engines: list[str] = []
    real = topkdriver._duckdb_top

    def duckdb_top(*a: Any) -> Any:
        got = real(*a) if engine == "duckdb" else None
        engines.append("duckdb" if got is not None else "pyarrow")
        return got

    monkeypatch.setattr(topkdriver, "_duckdb_top", duckdb_top)

    rng = random.Random(seed)
    path = str(tmp_path / "src")

    def maybe(v: Any) -> Any:
        return None if rng.random() < 0.15 else v

    def batch(start: int, n: int) -> pa.Table:
        return pa.table(
            {
                "id": pa.array(range(start, start + n), pa.int64()),
                "i": pa.array([maybe(rng.randint(-5, 5)) for _ in range(n)], pa.int32()),
                "d": pa.array(
                    [maybe(decimal.Decimal(rng.randint(-99, 99)) / 10) for _ in range(n)], pa.decimal128(5, 1)
                ),
                "dt": pa.array([maybe(dt.date(2026, 1, rng.randint(1, 9))) for _ in range(n)], pa.date32()),
                "s": pa.array([maybe(rng.choice(["a", "B", "é", "ab", ""])) for _ in range(n)], pa.string()),
            }
        )

    props = WriterProperties(max_row_group_size=16)
    for f in range(3):
        write_deltalake(path, batch(f * 70, 70), mode="append", writer_properties=props)
    version = 2
    source = SourceRead(name="src", kind="path", path=path, version=version)
    everything = _delta_rows(path)
    desired = spark.createDataFrame(everything)
    schema = everything.schema
    columns = [(c, c) for c in schema.names]
    by_id = {r["id"]: r for r in everything.to_pylist()}
    for k in (1, 7, 16, 40, 300):
        picked = rng.sample(["i", "d", "dt", "s"], 2)
        spec = tuple((schema.names.index(c), rng.random() < 0.5, rng.random() < 0.5) for c in picked) + (
            (0, rng.random() < 0.5, False),
        )
        keys = order_keys(desired, spec)
        assert keys is not None
        got = top_of_snapshot(source, columns, schema, keys, k)
        assert got is not None
        sort = []
        for p, descending, nulls_first in spec:
            c = desired[schema.names[p]]
            sort.append(
                (c.desc_nulls_first() if nulls_first else c.desc_nulls_last())
                if descending
                else (c.asc_nulls_first() if nulls_first else c.asc_nulls_last())
            )
        expected = [r["id"] for r in desired.orderBy(*sort).limit(k).collect()]
        assert got.column("id").to_pylist() == expected, (k, spec)
        assert got.schema == schema and got.to_pylist() == [by_id[i] for i in expected], (k, spec)
    assert set(engines) == {engine}, engines
    # the view's columns renamed; a column no file holds; a partition column
    renamed = top_of_snapshot(source, [("x", "id")], pa.schema([("x", pa.int64())]), [("x", "descending", "at_end")], 2)
    assert renamed is not None and renamed.column("x").to_pylist() == [209, 208]
    missing = [("id", "id"), ("zz", "zz")]
    zz = pa.schema([("id", pa.int64()), ("zz", pa.int64())])
    assert top_of_snapshot(source, missing, zz, [("id", "ascending", "at_end")], 2) is None
    parted = str(tmp_path / "parted")
    write_deltalake(parted, batch(0, 10), partition_by=["s"])
    psource = SourceRead(name="p", kind="path", path=parted, version=0)
    assert top_of_snapshot(psource, columns, schema, [("s", "ascending", "at_end")], 2) is None


def _delta_rows(path: str) -> pa.Table:
    from deltalake import DeltaTable

    from mvsink.engines.arrow import without_view_types

    return without_view_types(DeltaTable(path).to_pyarrow_table())
