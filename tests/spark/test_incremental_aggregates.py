"""Aggregates refreshed from their hidden accumulable state (mode incremental:aggregate).

After every refresh: contents == the DuckDB oracle == the same view refreshed with ``incremental: false``,
and the mode is incremental:aggregate wherever the rules say so. Hidden state never reaches a reader.
"""

from __future__ import annotations

import datetime
import random
from collections import Counter
from decimal import Decimal

import duckdb
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from mvsink.definitions.catalog import Catalog
from mvsink.engines import arrow as driver
from mvsink.incremental.statequeries import state_queries
from mvsink.readers.arrow import changes, read_view
from mvsink.spark.viewreader import read_view as spark_read_view
from mvsink.write.runners import refresh
from tests.support.aggdata import CDF, agg_change, agg_customers, agg_orders, appends
from tests.support.delta import BASE, HOUR, delete_at, snapshot, stamp, update_at, write_at
from tests.support.oracle import multiset, oracle
from tests.support.viewfiles import write_view

pytestmark = pytest.mark.spark


@pytest.fixture(autouse=True)
def _no_scan_guard(monkeypatch):
    """These tests check what the incremental modes compute; the scan guard has its own test."""
    monkeypatch.setenv("MVSINK_INCREMENTAL_MAX_SCAN_RATIO", "1000")


STATEFUL = {
    # COUNT/SUM/AVG over a join: a customer changing region moves its orders between groups
    "join_agg": "SELECT c.region, count(*) AS n, sum(o.qty) AS s, avg(o.qty) AS a, count(o.qty) AS k "
    "FROM orders o JOIN customers c ON o.cust = c.id GROUP BY c.region",
    # a global aggregate keeps exactly one row, also when every row is gone
    "global": "SELECT count(*) AS n, sum(qty) AS s, avg(qty) AS a FROM orders WHERE status = 'C'",
    # DECIMAL sums and averages (Spark's result types), expressions over aggregates, a renamed key
    "decimal": "SELECT status AS st, sum(CAST(qty AS DECIMAL(12,2)) * 1.5) AS ds, "
    "avg(CAST(qty AS DECIMAL(12,2))) AS da, round(sum(qty) / count(*), 3) AS ratio, "
    # near the argument's precision limit: the sums outgrow DECIMAL(20,2), not SUM's DECIMAL(30,2)
    "sum(CAST(qty * 100000000000000000 AS DECIMAL(20,2))) AS big "
    "FROM orders WHERE qty IS NULL OR qty < 9 GROUP BY status",
    # decimal AVGs, finalised to Spark's last digit: TPC-H Q1's avg(price * (1 - discount)) over
    # DECIMAL(15,2) (DECIMAL(32,4) in, DECIMAL(36,8) out) and AVG of a DECIMAL(38,10) (out DECIMAL(38,14))
    "wide": "SELECT status, avg(CAST(price AS DECIMAL(15,2)) * (1 - CAST(qty * 0.03 AS DECIMAL(15,2)))) AS dp, "
    "avg(CAST(price * qty / 7 AS DECIMAL(38,10))) AS a38, sum(CAST(price * qty / 7 AS DECIMAL(38,10))) AS s38, "
    # AVG of DECIMAL(p <= 11, s): Spark's optimizer averages it as a DOUBLE (DecimalAggregates)
    "avg(CAST(qty AS DECIMAL(5,2))) AS a5, count(*) AS n FROM orders GROUP BY status",
    # two keys with NULLs, not first in the output
    "two_keys": "SELECT count(*) AS n, sum(o.qty) AS s, c.seg, o.status FROM orders o "
    "JOIN customers c ON o.cust = c.id GROUP BY c.seg, o.status",
}


@pytest.mark.unit
@pytest.mark.parametrize(
    "query,why",
    [
        ("SELECT status, stddev(qty) AS m FROM orders GROUP BY status", "STDDEV(...)"),
        ("SELECT status, max(DISTINCT qty) AS m FROM orders GROUP BY status", "MAX(...)"),
        ("SELECT status, count(DISTINCT cust) AS k FROM orders GROUP BY status", "COUNT(DISTINCT"),
        ("SELECT status, count(*) AS n FROM orders GROUP BY status HAVING count(*) > 1", "HAVING"),
        ("SELECT DISTINCT status, count(*) AS n FROM orders GROUP BY status", "DISTINCT"),
        ("SELECT DISTINCT upper(status) AS u FROM orders", "not a plain column"),
        ("SELECT upper(status) AS u, count(*) AS n FROM orders GROUP BY upper(status)", "not a plain column"),
        ("SELECT status, count(*) AS n FROM orders GROUP BY status, cust", "not a column of the view"),
        ("SELECT status, cust, count(*) AS n FROM orders GROUP BY status", "neither a grouping key"),
        ("SELECT status FROM orders UNION ALL SELECT status FROM orders", "not one SELECT"),
        ("SELECT status, count(*) OVER () AS n FROM orders", "window"),
    ],
)
def test_state_queries_refuse(query, why):
    got = state_queries(query)
    assert isinstance(got, str) and why in got, got


@pytest.mark.unit
def test_state_queries_split_a_join_aggregate():
    q = state_queries(STATEFUL["join_agg"])
    assert not isinstance(q, str)
    assert q.keys == ("region",)
    assert q.input_query == (
        "SELECT c.region AS _mv_k0, o.qty AS _mv_a0 FROM orders AS o JOIN customers AS c ON o.cust = c.id"
    )
    assert q.state_columns == ("_mv_agg_count", "_mv_agg_n0", "_mv_agg_s0")
    assert q.state_query.endswith(
        "COUNT(*) AS _mv_agg_count, COUNT(o.qty) AS _mv_agg_n0, SUM(o.qty) AS _mv_agg_s0 "
        "FROM orders AS o JOIN customers AS c ON o.cust = c.id GROUP BY c.region"
    )


def _setup(data, views, rng, *, cdf: bool):
    orders, customers = str(data / "orders"), str(data / "customers")
    write_deltalake(orders, agg_orders(rng, 0, 40), configuration=CDF if cdf else None)
    stamp(orders, BASE)
    write_deltalake(customers, agg_customers(rng), configuration=CDF if cdf else None)
    stamp(customers, BASE + 1)
    for name, q in STATEFUL.items():
        used = {"orders": "orders", "customers": "customers"} if "customers" in q else {"orders": "orders"}
        for suffix, inc in (("", True), ("_full", False)):
            write_view(
                views, name + suffix, query=q, sources=used, target=f"views/{name}{suffix}", as_of=BASE, incremental=inc
            )
    return orders, customers


@pytest.mark.parametrize(
    "seed,cdf,driver_groups",
    [(11, True, driver.MAX_DRIVER_ROWS), (29, False, driver.MAX_DRIVER_ROWS), (5, True, 0)],
    ids=["cdf-driver", "nocdf-driver", "cdf-spark"],
)
def test_randomized_histories_from_state_match_oracle_and_full_diff(spark, env, monkeypatch, seed, cdf, driver_groups):
    """driver_groups 0: every refresh merges the state by Spark (the path of many affected groups)."""
    monkeypatch.setattr(driver, "MAX_DRIVER_ROWS", driver_groups)
    monkeypatch.setenv("MVSINK_INCREMENTAL_MAX_FRACTION", "100")  # the change-set size guard: never
    monkeypatch.setenv("MVSINK_INCREMENTAL_AGGREGATE", "true")
    data, views = env
    rng = random.Random(seed)
    orders, customers = _setup(data, views, rng, cdf=cdf)
    srcs = {"orders": orders, "customers": customers}
    catalog = Catalog(views)
    next_id, t = [40], BASE + HOUR
    ops: list[str] = []
    for step in range(4):
        for _ in range(rng.randint(1, 3)):
            t += rng.randint(1, 10) * 60_000
            ops.append(agg_change(rng, orders, customers, next_id, t))
        t += HOUR
        for name, q in STATEFUL.items():
            expected = oracle(q, srcs if "customers" in q else {"orders": orders}, t)
            exact = []
            for suffix in ("", "_full"):
                view = catalog.get(name + suffix)
                res = refresh(view, t, catalog=catalog, runner="inprocess", spark=spark, run_id=f"s{step}")
                assert res.status == "appended", res
                got = read_view(view, as_of=t)
                assert not [c for c in got.column_names if c.startswith("_mv_")], got.column_names
                assert multiset(got) == expected, (name + suffix, step, ops)
                exact.append((got.schema, Counter(tuple(r.values()) for r in got.to_pylist())))
            assert exact[0] == exact[1], (name, step)  # the same values and types as the full diff, exactly
    for name in STATEFUL:
        history = appends(str(data / "views" / name))
        assert "incremental:aggregate" in str(history), history
        assert history[0]["mode"] == "full"
        for a in history[1:]:
            assert a["mode"] in ("incremental:aggregate", "unchanged"), (name, a["mode"], a["mode_reason"])
        assert any(a["mode"] == "incremental:aggregate" for a in history), name
        twin = appends(str(data / "views" / f"{name}_full"))
        assert all(a["mode"] in ("full", "unchanged") for a in twin), name
        # the twin keeps no state: its table has only the user's columns
        assert not [
            c for c in DeltaTable(str(data / "views" / f"{name}_full")).schema().to_arrow().names if "_agg_" in c
        ]


def test_hand_edits_are_repaired_and_state_stays_hidden(spark, env, monkeypatch):
    """A hand edit of the table (a deleted row, a forged state): the next refresh takes the full diff and
    rebuilds the state; readers, changefeeds and a view over the view never see the state columns."""
    monkeypatch.setenv("MVSINK_INCREMENTAL_MAX_FRACTION", "100")
    monkeypatch.setenv("MVSINK_INCREMENTAL_AGGREGATE", "true")
    data, views = env
    rng = random.Random(3)
    orders, customers = _setup(data, views, rng, cdf=True)
    q = STATEFUL["join_agg"]
    write_view(
        views,
        "over",
        query="SELECT region, n FROM up",
        sources={"up": {"view": "join_agg"}},
        target="views/over",
        as_of=BASE,
    )
    catalog = Catalog(views)
    view, over = catalog.get("join_agg"), catalog.get("over")
    srcs = {"orders": orders, "customers": customers}
    t = BASE + HOUR
    refresh(view, t, catalog=catalog, runner="inprocess", spark=spark)
    refresh(over, t, catalog=catalog, runner="inprocess", spark=spark)
    target = str(data / "views" / "join_agg")
    DeltaTable(target).delete("region = 'eu'")  # a hand edit: the row of one group is gone
    update_at(orders, {"qty": "qty + 1"}, "id < 30", t + 10)
    t += HOUR
    res = refresh(view, t, catalog=catalog, runner="inprocess", spark=spark)
    assert res.mode == "full", res  # a foreign commit: the full diff, which rebuilds the state
    assert multiset(read_view(view, as_of=t)) == oracle(q, srcs, t)
    # (coalesce: a NULL qty would stay NULL, a change of no value, which writes nothing: mode incremental)
    update_at(orders, {"qty": "coalesce(qty, 0) + 2"}, "id = 5", t + 10)
    t += HOUR
    assert refresh(view, t, catalog=catalog, runner="inprocess", spark=spark).mode == "incremental:aggregate"
    assert multiset(read_view(view, as_of=t)) == oracle(q, srcs, t)
    # readers never see the state
    assert spark_read_view(spark, view, as_of=t).columns == ["region", "n", "s", "a", "k"]
    feed = changes(view, BASE + HOUR)
    assert [c for c in feed.column_names if not c.startswith("_mv_")] == ["region", "n", "s", "a", "k"]
    assert set(feed.column_names) - {"region", "n", "s", "a", "k"} == {"_mv_time", "_mv_diff"}
    refresh(over, t, catalog=catalog, runner="inprocess", spark=spark)
    assert multiset(read_view(over, as_of=t)) == oracle("SELECT region, n FROM (" + q + ")", srcs, t)


def test_a_table_without_state_stays_without(spark, env, monkeypatch):
    """A view first refreshed with ``incremental: false`` has no state; turned incremental, it keeps its table
    (no schema change) and refreshes without state (the full diff, or affected groups when enabled)."""
    monkeypatch.setenv("MVSINK_INCREMENTAL_MAX_FRACTION", "100")
    monkeypatch.setenv("MVSINK_INCREMENTAL_AGGREGATE", "true")
    data, views = env
    rng = random.Random(4)
    orders, _ = _setup(data, views, rng, cdf=True)
    q = STATEFUL["global"]
    write_view(views, "g", query=q, sources={"orders": "orders"}, target="views/g", as_of=BASE, incremental=False)
    t = BASE + HOUR
    refresh(Catalog(views).get("g"), t, runner="inprocess", spark=spark)
    write_view(views, "g", query=q, sources={"orders": "orders"}, target="views/g", as_of=BASE, incremental=True)
    view = Catalog(views).get("g")
    update_at(orders, {"qty": "qty + 1"}, "id < 3", t + 10)
    t += HOUR
    res = refresh(view, t, runner="inprocess", spark=spark)
    assert res.status == "appended" and res.mode == "full", res
    assert multiset(read_view(view, as_of=t)) == oracle(q, {"orders": orders}, t)
    assert DeltaTable(str(data / "views" / "g")).schema().to_arrow().names == ["n", "s", "a", "_mv_time", "_mv_diff"]


@pytest.mark.parametrize(
    "every,modes", [(3, ["full", "A", "A", "full", "A"]), ("2h", ["full", "A", "full", "A", "full"])]
)
def test_full_refresh_every_forces_a_periodic_full_diff(spark, env, monkeypatch, every, modes):
    """``full_refresh_every`` (a count of refreshes or a duration of refresh time): the full diff, with the reason."""
    monkeypatch.setenv("MVSINK_INCREMENTAL_MAX_FRACTION", "100")
    monkeypatch.setenv("MVSINK_INCREMENTAL_AGGREGATE", "true")
    data, views = env
    orders, _ = _setup(data, views, random.Random(8), cdf=True)
    q = STATEFUL["global"]
    write_view(
        views, "p", query=q, sources={"orders": "orders"}, target="views/p", as_of=BASE, full_refresh_every=every
    )
    view = Catalog(views).get("p")
    t = BASE
    for i, want in enumerate(modes):
        update_at(orders, {"qty": "qty + 1"}, f"id = {i}", t + 10)
        t += HOUR
        res = refresh(view, t, runner="inprocess", spark=spark)
        assert res.mode == ("incremental:aggregate" if want == "A" else "full"), (i, res)
        assert multiset(read_view(view, as_of=t)) == oracle(q, {"orders": orders}, t)
    reasons = [a["mode_reason"] for a in appends(str(data / "views" / "p")) if a["mode"] == "full"][1:]
    assert reasons and all(str(r).startswith("full_refresh_every: ") for r in reasons), reasons


def test_switched_off_the_state_is_kept_and_the_full_diff_used(spark, env, monkeypatch):
    """With MVSINK_INCREMENTAL_AGGREGATE=false the table still keeps the state (turning it back on needs no
    rebuild); the refresh takes the full diff and says how to enable the state path. On by default."""
    monkeypatch.setenv("MVSINK_INCREMENTAL_MAX_FRACTION", "100")
    monkeypatch.setenv("MVSINK_INCREMENTAL_AGGREGATE", "false")
    data, views = env
    orders, _ = _setup(data, views, random.Random(9), cdf=True)
    q = STATEFUL["global"]
    view = Catalog(views).get("global")
    t = BASE + HOUR
    refresh(view, t, runner="inprocess", spark=spark)
    update_at(orders, {"qty": "qty + 1"}, "id < 5", t + 10)
    t += HOUR
    assert refresh(view, t, runner="inprocess", spark=spark).mode == "full"
    assert "MVSINK_INCREMENTAL_AGGREGATE=true enables it" in str(appends(str(data / "views" / "global"))[-1])
    names = DeltaTable(str(data / "views" / "global")).schema().to_arrow().names
    assert [c for c in names if c.startswith("_mv_agg_")] == ["_mv_agg_count", "_mv_agg_n0", "_mv_agg_s0"]
    monkeypatch.delenv("MVSINK_INCREMENTAL_AGGREGATE")
    update_at(orders, {"qty": "qty + 1"}, "id < 5", t + 10)
    t += HOUR
    assert refresh(view, t, runner="inprocess", spark=spark).mode == "incremental:aggregate"
    assert multiset(read_view(view, as_of=t)) == oracle(q, {"orders": orders}, t)


def test_scan_guard_takes_the_full_diff_when_the_terms_read_more(spark, env, monkeypatch):
    """With both sources of a join changed, each change term reads the other source whole (orders + customers
    together); with orders alone, only customers. A ratio between the two, against what the full diff reads
    (both sources and the table): the full diff with the reason when both changed, the state when one did.
    (Spark's terms: terms that run in DuckDB in the driver may read more, test_driver_terms.py.)"""
    from mvsink.core.deltalog import active_bytes
    from mvsink.core.table import ViewTable

    monkeypatch.setenv("MVSINK_INCREMENTAL_MAX_FRACTION", "100")
    monkeypatch.setenv("MVSINK_INCREMENTAL_DRIVER_TERMS", "false")
    data, views = env
    orders, customers = _setup(data, views, random.Random(13), cdf=True)
    q = STATEFUL["join_agg"]
    srcs = {"orders": orders, "customers": customers}
    view = Catalog(views).get("join_agg")

    def between_one_and_both() -> None:
        o, c = (active_bytes(p, DeltaTable(p).version()) for p in (orders, customers))
        t = ViewTable.open(view)
        full = o + c + active_bytes(t.path, t.version)
        monkeypatch.setenv("MVSINK_INCREMENTAL_MAX_SCAN_RATIO", str((c + o / 2) / full))

    t = BASE + HOUR
    refresh(view, t, runner="inprocess", spark=spark)
    update_at(orders, {"qty": "qty + 1"}, "id < 5", t + 10)
    update_at(customers, {"region": "'eu'"}, "id = 1", t + 20)
    t += HOUR
    between_one_and_both()
    assert refresh(view, t, runner="inprocess", spark=spark).mode == "full"
    reason = appends(str(data / "views" / "join_agg"))[-1]["mode_reason"]
    assert "MVSINK_INCREMENTAL_MAX_SCAN_RATIO=" in reason and "more than the full diff reads" in reason, reason
    assert multiset(read_view(view, as_of=t)) == oracle(q, srcs, t)
    update_at(orders, {"qty": "qty + 1"}, "id < 9", t + 10)
    t += HOUR
    between_one_and_both()
    assert refresh(view, t, runner="inprocess", spark=spark).mode == "incremental:aggregate"
    assert multiset(read_view(view, as_of=t)) == oracle(q, srcs, t)
    # both changed again, the terms in DuckDB: they read at most twice the ratio's share, so the state still serves
    monkeypatch.setenv("MVSINK_INCREMENTAL_DRIVER_TERMS", "true")
    update_at(orders, {"qty": "qty + 1"}, "id < 5", t + 10)
    update_at(customers, {"region": "'us'"}, "id = 2", t + 20)
    t += HOUR
    between_one_and_both()
    assert refresh(view, t, runner="inprocess", spark=spark).mode == "incremental:aggregate"
    reason = appends(str(data / "views" / "join_agg"))[-1]["mode_reason"]
    assert "change terms evaluated in the driver" in reason, reason
    assert multiset(read_view(view, as_of=t)) == oracle(q, srcs, t)


# ---------------------------------------------------------------- MIN and MAX from the state

FACTS = pa.schema(
    [
        ("id", pa.int64()),
        ("g", pa.string()),
        ("i", pa.int32()),
        ("d", pa.decimal128(10, 2)),
        ("dt", pa.date32()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("s", pa.string()),
    ]
)
_DAY = datetime.date(2026, 1, 1)
_TS = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
EXTREMES = {  # column: its values (duplicates and NULLs likely)
    "i": [None, -3, 0, 2, 2, 9],
    "d": [None, Decimal("-1.50"), Decimal("0.00"), Decimal("2.25"), Decimal("99999999.99")],
    "dt": [None, _DAY, _DAY + datetime.timedelta(days=40), datetime.date(1999, 12, 31)],
    "ts": [None, _TS, _TS + datetime.timedelta(microseconds=1), _TS - datetime.timedelta(days=400)],
    "s": [None, "", "a", "ä", "b ", "Z"],
}
MINMAX = {
    # every argument type kept, an expression over MIN and MAX, a NULL key
    "mm": "SELECT g, count(*) AS n, min(i) AS lo_i, max(i) AS hi_i, min(d) AS lo_d, max(d) AS hi_d, "
    "min(dt) AS lo_dt, max(dt) AS hi_dt, min(ts) AS lo_ts, max(ts) AS hi_ts, min(s) AS lo_s, max(s) AS hi_s, "
    "max(i) - min(i) AS span FROM facts GROUP BY g",
    # a global aggregate (one row, also over no row), an expression argument under a filter
    "mm_global": "SELECT min(i) AS lo, max(s) AS hi, max(d) - min(d) AS spread, max(CAST(i AS BIGINT) * 2) AS hi2 "
    "FROM facts WHERE i IS NULL OR i < 9",
}


def _facts_rows(rng: random.Random, start: int, n: int, groups: list[str | None] | None = None) -> pa.Table:
    rows = [{"id": start + k, "g": rng.choice(groups or ["a", "b", "c", None])} for k in range(n)]
    for r in rows:
        r.update({c: rng.choice(vals) for c, vals in EXTREMES.items()})
    return pa.Table.from_pylist(rows, schema=FACTS)


def _facts_change(rng: random.Random, path: str, next_id: list[int], t: int, op: str | None = None) -> str:
    """One change of the facts table at ``t`` (``op``, else a random one): what was done."""
    rows = DeltaTable(path).to_pyarrow_table().to_pylist()
    op = op or rng.choice(["insert", "delete_one", "delete_all", "update", "nulls", "kill", "revive", "insert"])
    col = rng.choice(list(EXTREMES))
    held = [r for r in rows if r[col] is not None]
    if op in ("delete_one", "delete_all") and held:
        g = rng.choice(held)["g"]
        vals = [r[col] for r in held if r["g"] == g]
        m = rng.choice([min(vals), max(vals)])
        same = [r["id"] for r in held if r["g"] == g and r[col] == m]
        ids = same[:1] if op == "delete_one" else same  # one copy of the group's extreme, or all of them
        delete_at(path, f"id IN ({', '.join(map(str, ids))})", t)
        return f"{op} {col}={m!r} of {g!r}"
    if op == "update":
        update_at(path, {"i": "i + 1", "s": "concat(s, 'x')"}, f"id % 3 = {rng.randint(0, 2)}", t)
    elif op == "nulls":
        update_at(path, {col: "NULL"}, f"id % 4 = {rng.randint(0, 3)}", t)
    elif op == "kill":
        delete_at(path, "g = 'c'", t)
    else:
        new = _facts_rows(rng, next_id[0], rng.randint(1, 4), groups=["c"] if op == "revive" else None)
        next_id[0] += new.num_rows
        write_at(path, new, t)
    return f"{op} {col}"


def _exhausted(path: str, before: int, after: int, query: str) -> bool:
    """Does the change from ``before`` to ``after`` delete every row holding some group's MIN/MAX (of the view's
    query), leaving the group a worse one: the refresh cannot take it from the state."""
    import re

    where = "i IS NULL OR i < 9" if "WHERE" in query else "TRUE"
    keys = ["g"] if "GROUP BY g" in query else []
    args = set(re.findall(r"(min|max)\((\w+|CAST\(i AS BIGINT\) \* 2)\)", query))
    con = duckdb.connect()
    for name, ts in (("old", before), ("new", after)):
        con.register(name + "_raw", snapshot(path, ts))
        con.execute(f"CREATE TEMP VIEW {name} AS SELECT * FROM {name}_raw WHERE {where}")
    for kind, arg in args:
        by = f"GROUP BY {', '.join(keys)}" if keys else ""
        on = " AND ".join([f"o.{k} IS NOT DISTINCT FROM n.{k}" for k in keys] or ["TRUE"])
        worse = ">" if kind == "min" else "<"
        sql = (
            f"SELECT count(*) FROM (SELECT {', '.join(keys + [''])} {kind}({arg}) AS m FROM old {by}) o "
            f"JOIN (SELECT {', '.join(keys + [''])} {kind}({arg}) AS m FROM new {by}) n ON {on} "
            f"WHERE o.m IS NOT NULL AND n.m {worse} o.m"
        )
        if con.execute(sql).fetchone()[0]:
            return True
    return False


@pytest.mark.parametrize(
    "seed,cdf,where",
    [(17, True, "driver"), (41, False, "driver"), (3, True, "spark"), (8, False, "spark terms, driver merge")],
)
def test_min_max_from_state_match_oracle_and_full_diff(spark, env, monkeypatch, seed, cdf, where):
    """Randomized histories of inserts, deletes of a group's extreme (one copy, every copy), updates, NULLs and
    groups dying and coming back: after every refresh the view equals the oracle and its full-diff twin exactly;
    the mode is incremental:aggregate unless the change deleted every row of some group's kept extreme, when the
    mode refuses with its reason and the full diff recomputes (affected groups, on by default, are turned off here:
    the full diff's reason then says why the state could not serve)."""
    monkeypatch.setenv("MVSINK_INCREMENTAL_MAX_FRACTION", "100")
    monkeypatch.setenv("MVSINK_INCREMENTAL_AGGREGATE", "true")
    monkeypatch.setenv("MVSINK_INCREMENTAL_GROUPS", "false")
    if where == "spark":
        monkeypatch.setattr(driver, "MAX_DRIVER_ROWS", 0)
    elif where != "driver":
        monkeypatch.setenv("MVSINK_INCREMENTAL_DRIVER_TERMS", "false")
    data, views = env
    rng = random.Random(seed)
    path = str(data / "facts")
    write_deltalake(path, _facts_rows(rng, 0, 30), configuration=CDF if cdf else None)
    stamp(path, BASE)
    for name, q in MINMAX.items():
        for suffix, inc in (("", True), ("_full", False)):
            write_view(
                views,
                name + suffix,
                query=q,
                sources={"facts": "facts"},
                target=f"views/{name}{suffix}",
                as_of=BASE,
                incremental=inc,
            )
    catalog = Catalog(views)
    next_id, t, last = [30], BASE + HOUR, None
    ops: list[str] = []
    for step in range(6):
        if last is not None:
            for k in range(rng.randint(1, 2)):
                t += rng.randint(1, 10) * 60_000
                forced = "delete_all" if step == 3 and k == 0 else None  # (some group's extreme goes)
                ops.append(_facts_change(rng, path, next_id, t, forced))
            t += HOUR
        for name, q in MINMAX.items():
            exact = []
            for suffix in ("", "_full"):
                view = catalog.get(name + suffix)
                res = refresh(view, t, catalog=catalog, runner="inprocess", spark=spark, run_id=f"m{step}")
                assert res.status == "appended", res
                got = read_view(view, as_of=t)
                assert multiset(got) == oracle(q, {"facts": path}, t), (name + suffix, step, ops)
                exact.append((got.schema, Counter(tuple(r.values()) for r in got.to_pylist())))
            assert exact[0] == exact[1], (name, step, ops)
            info = appends(str(data / "views" / name))[-1]
            if last is None:
                assert info["mode"] == "full"
                continue
            if _exhausted(path, last, t, q):
                assert info["mode"] == "full" and "was deleted" in str(info["mode_reason"]), (name, step, ops, info)
            else:
                assert info["mode"] in ("incremental:aggregate", "unchanged"), (name, step, ops, info)
        last = t
    modes = [a["mode"] for name in MINMAX for a in appends(str(data / "views" / name))[1:]]
    assert "full" in modes, ops  # (the history deletes some kept extreme: the refusal is exercised)
    for name in MINMAX:
        assert any(a["mode"] == "incremental:aggregate" for a in appends(str(data / "views" / name))), name
        state = DeltaTable(str(data / "views" / name)).schema().to_arrow().names
        assert "_mv_agg_min0" in state or "_mv_agg_max0" in state, state


def test_min_max_modes_step_by_step(spark, env, monkeypatch):
    """A new extreme, one of two copies of the extreme deleted, a group gone: from the state; every copy deleted:
    the mode refuses (the full diff, or affected groups when they are on); a DOUBLE MIN keeps no state."""
    monkeypatch.setenv("MVSINK_INCREMENTAL_MAX_FRACTION", "100")
    monkeypatch.setenv("MVSINK_INCREMENTAL_GROUPS", "false")  # (on by default; turned on below for one step)
    monkeypatch.setenv("MVSINK_INCREMENTAL_PARTITIONED", "false")  # (a GROUP BY of a column: partitioned by it)
    data, views = env
    path = str(data / "facts")
    rows = [
        {"id": k, "g": g, "i": i, "d": None, "dt": None, "ts": None, "s": s}
        for k, (g, i, s) in enumerate([("a", 1, "m"), ("a", 1, "m"), ("a", 5, "q"), ("b", 2, "x"), (None, 3, None)])
    ]
    write_deltalake(path, pa.Table.from_pylist(rows, schema=FACTS), configuration=CDF)
    stamp(path, BASE)
    q = "SELECT g, min(i) AS lo, max(s) AS hi, count(*) AS n FROM facts GROUP BY g"
    write_view(views, "v", query=q, sources={"facts": "facts"}, target="views/v", as_of=BASE)
    view = Catalog(views).get("v")
    t = BASE + HOUR
    assert refresh(view, t, runner="inprocess", spark=spark).mode == "full"

    def step(change, mode: str, reason: str = "") -> None:
        nonlocal t
        change(t + 10)
        t += HOUR
        res = refresh(view, t, runner="inprocess", spark=spark)
        info = appends(view.target)[-1]
        assert res.mode == mode and reason in str(info["mode_reason"]), info
        assert multiset(read_view(view, as_of=t)) == oracle(q, {"facts": path}, t)

    new = [{"id": 10, "g": "b", "i": 0, "d": None, "dt": None, "ts": None, "s": "y"}]
    step(lambda at: write_at(path, pa.Table.from_pylist(new, schema=FACTS), at), "incremental:aggregate")
    step(lambda at: delete_at(path, "id = 0", at), "incremental:aggregate")  # one of two copies of a's MIN
    step(lambda at: delete_at(path, "id = 1", at), "full", "the MIN of 1 affected group(s) was deleted")
    # b's MIN and MAX both
    step(lambda at: delete_at(path, "id = 10", at), "full", "the MAX of 1 affected group(s) and the MIN of 1")
    monkeypatch.setenv("MVSINK_INCREMENTAL_GROUPS", "true")
    step(lambda at: update_at(path, {"i": "i + 10"}, "id = 2", at), "incremental:groups")  # a's MIN moves up
    monkeypatch.setenv("MVSINK_INCREMENTAL_GROUPS", "false")
    step(lambda at: delete_at(path, "id = 3", at), "incremental:aggregate")  # b's last row: the group is gone
    step(lambda at: update_at(path, {"i": "i - 10"}, "id = 4", at), "incremental:aggregate")  # a new MIN
    # a FLOAT argument: no state, the reason says why
    write_view(
        views,
        "f",
        query="SELECT g, min(CAST(i AS DOUBLE)) AS lo FROM facts GROUP BY g",
        sources={"facts": "facts"},
        target="views/f",
        as_of=BASE,
    )
    fview = Catalog(views).get("f")
    refresh(fview, t, runner="inprocess", spark=spark)
    update_at(path, {"i": "i + 1"}, "id = 4", t + 10)
    t += HOUR
    res = refresh(fview, t, runner="inprocess", spark=spark)
    assert res.mode == "full", res
    assert multiset(read_view(fview, as_of=t)) == oracle(
        "SELECT g, min(CAST(i AS DOUBLE)) AS lo FROM facts GROUP BY g", {"facts": path}, t
    )
    assert not [c for c in DeltaTable(str(data / "views" / "f")).schema().to_arrow().names if "_agg_" in c]
