"""Views over views refresh from the upstream view's own update log (its changefeed since the last read).

After every refresh: the downstream's contents == the DuckDB oracle over the base sources (the upstream's
query inlined) == the same view refreshed with ``incremental: false``, and the mode recorded in the commit
info is the incremental one. A hand edit of the upstream's table, a compaction of the upstream past the
last read, and a re-created upstream table fall back to the full diff with the real reason.
"""

from __future__ import annotations

import random
import shutil
from collections import Counter
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable, write_deltalake

from mvsink.definitions.catalog import Catalog
from mvsink.exceptions import MvSinkError
from mvsink.incremental import groups
from mvsink.maintenance.compaction import compact
from mvsink.readers.arrow import read_view
from mvsink.write.runners import refresh
from tests.support.aggdata import CDF, agg_change, agg_customers, agg_orders, appends
from tests.support.delta import BASE, HOUR, snapshot, stamp, update_at, write_at
from tests.support.oracle import multiset
from tests.support.viewfiles import write_view

pytestmark = pytest.mark.spark


@pytest.fixture(autouse=True)
def _no_scan_guard(monkeypatch):
    """These tests check what the incremental modes compute; the scan guard has its own test."""
    monkeypatch.setenv("MVSINK_INCREMENTAL_MAX_SCAN_RATIO", "1000")


# The upstream: an aggregate over a join (with hidden accumulable state: it refreshes from it too).
UP = (
    "SELECT c.region, o.status, count(*) AS n, sum(o.qty) AS s "
    "FROM orders o JOIN customers c ON o.cust = c.id GROUP BY c.region, o.status"
)
# A linear upstream with an error check and duplicate rows (its updates carry diffs of +-k): downstream
# views read its ok rows only, each as many times as it occurs.
UPC = "SELECT status, qty FROM orders"
UPC_CHECKS = [{"name": "positive_qty", "expr": "qty > 0", "action": "error"}]
UPC_OK = "SELECT status, qty FROM orders WHERE qty > 0"  # the oracle's ok rows of UPC

# name -> (query, upstream view, the incremental mode it refreshes by)
DOWN = {
    # linear over the aggregate: a filter and a projection
    "filt": ("SELECT region, status, n, s FROM up WHERE n > 1 OR s IS NULL", "up", "incremental"),
    # an aggregate over the aggregate, from its own hidden state (groups die and come back)
    "agg": (
        "SELECT region, count(*) AS k, sum(n) AS n, sum(s) AS s FROM up GROUP BY region",
        "up",
        "incremental:aggregate",
    ),
    # MIN/MAX and COUNT(DISTINCT) over the aggregate: affected groups recomputed
    "grp": (
        "SELECT status, max(s) AS hi, min(n) AS lo, count(DISTINCT region) AS r FROM up GROUP BY status",
        "up",
        "incremental:groups",
    ),
    # linear over the ok rows (with duplicates) of a view with checks
    "dup": ("SELECT status, qty * 2 AS q2 FROM upc WHERE status IS NOT NULL", "upc", "incremental"),
    # an aggregate over them
    "cnt": (
        "SELECT status, count(*) AS n, sum(qty) AS q FROM upc GROUP BY status",
        "upc",
        "incremental:aggregate",
    ),
}


def _down_oracle(query: str, upstream: str, srcs: dict[str, str], t: int) -> Counter[tuple[Any, ...]]:
    """``query`` over the upstream's query over the base sources as of ``t``, all in DuckDB."""
    con = duckdb.connect()
    for name, path in srcs.items():
        con.register(name, snapshot(path, t))
    con.execute(f"CREATE TABLE up AS {UP}")
    con.execute(f"CREATE TABLE upc AS {UPC_OK}")
    return multiset(con.sql(query).to_arrow_table())


def _exact(table: pa.Table) -> tuple[pa.Schema, Counter[tuple[Any, ...]]]:
    return table.schema, Counter(tuple(r.values()) for r in table.to_pylist())


def _sources(data, rng: random.Random, *, cdf: bool) -> dict[str, str]:
    orders, customers = str(data / "orders"), str(data / "customers")
    write_deltalake(orders, agg_orders(rng, 0, 40), configuration=CDF if cdf else None)
    stamp(orders, BASE)
    write_deltalake(customers, agg_customers(rng), configuration=CDF if cdf else None)
    stamp(customers, BASE + 1)
    return {"orders": orders, "customers": customers}


def _upstreams(views) -> None:
    both = {"orders": "orders", "customers": "customers"}
    write_view(views, "up", query=UP, sources=both, target="views/up", as_of=BASE)
    write_view(views, "upc", query=UPC, sources={"orders": "orders"}, target="views/upc", as_of=BASE, checks=UPC_CHECKS)


def _down(views, name: str, query: str, upstream: str, **extra: Any) -> None:
    for suffix, inc in (("", True), ("_full", False)):
        write_view(
            views,
            name + suffix,
            query=query,
            sources={upstream: {"view": upstream}},
            target=f"views/{name}{suffix}",
            as_of=BASE,
            incremental=inc,
            **extra,
        )


def _modes_on(monkeypatch) -> None:
    monkeypatch.setenv("MVSINK_INCREMENTAL_MAX_FRACTION", "100")  # the change-set size guard: never
    monkeypatch.setenv("MVSINK_INCREMENTAL_AGGREGATE", "true")
    monkeypatch.setenv("MVSINK_INCREMENTAL_GROUPS", "true")
    monkeypatch.setattr(groups, "MAX_AFFECTED_FRACTION", 100.0)  # the cost guard: never


def _reason(target: str) -> str:
    return str(appends(target)[-1]["mode_reason"])


# ---------------------------------------------------------------- randomized histories


@pytest.mark.parametrize("seed,cdf", [(5, True), (17, False)])
def test_randomized_histories_refresh_incrementally_and_match_oracle_and_full_diff(spark, env, monkeypatch, seed, cdf):
    _modes_on(monkeypatch)
    data, views = env
    rng = random.Random(seed)
    srcs = _sources(data, rng, cdf=cdf)
    _upstreams(views)
    for name, (q, upstream, _) in DOWN.items():
        _down(views, name, q, upstream)
    catalog = Catalog(views)
    next_id, t = [40], BASE
    ops: list[str] = []
    seen: dict[str, dict[str, Any]] = {name: {} for name in DOWN}  # name -> {"t": last refresh time, "up": oracle}

    def refresh_down(at: int, step: str) -> None:
        for name, (q, upstream, mode) in DOWN.items():
            expected = _down_oracle(q, upstream, srcs, at)
            up_rows = (
                multiset(read_view(catalog.get(upstream), as_of=at, errors="ignore"))
                if upstream == "upc"
                else multiset(read_view(catalog.get(upstream), as_of=at))
            )
            exact = []
            for suffix in ("", "_full"):
                view = catalog.get(name + suffix)
                res = refresh(view, at, catalog=catalog, runner="inprocess", spark=spark, run_id=f"{step}")
                assert res.status == "appended", (name + suffix, res)
                got = read_view(view, as_of=at)
                assert not [c for c in got.column_names if c.startswith("_mv_")], got.column_names
                assert multiset(got) == expected, (name + suffix, step, ops)
                exact.append(_exact(got))
                if suffix:
                    assert res.mode in ("full", ""), (name + suffix, res)
                    continue
                last = appends(view.target)[-1]
                if seen[name]:
                    # the mode of every refresh after the first: incremental (or, when the upstream's contents
                    # did not change, the no-change shortcut)
                    allowed = (mode, "unchanged") if seen[name]["up"] == up_rows else (mode,)
                    assert last["mode"] in allowed, (name, step, last["mode"], last["mode_reason"], ops)
                else:
                    assert last["mode"] == "full", last
                seen[name] = {"t": at, "up": up_rows}
            assert exact[0] == exact[1], (name, step)  # the same values and types as the full diff, exactly

    for step in range(5):
        for _ in range(rng.randint(1, 3)):
            t += rng.randint(1, 10) * 60_000
            ops.append(agg_change(rng, srcs["orders"], srcs["customers"], next_id, t))
        mid = None
        if step in (1, 3):  # the upstream refreshes twice before the downstream views read it
            mid = t + 30 * 60_000
            for up in ("up", "upc"):
                assert refresh(catalog.get(up), mid, catalog=catalog, runner="inprocess", spark=spark).status == (
                    "appended"
                )
            t = mid + 60_000
            ops.append(agg_change(rng, srcs["orders"], srcs["customers"], next_id, t))
        t += HOUR
        for up in ("up", "upc"):
            assert refresh(catalog.get(up), t, catalog=catalog, runner="inprocess", spark=spark).status == "appended"
        if mid is not None and step == 3:
            # a downstream read between two of the upstream's appends, at the upstream's newest version
            refresh_down(mid, f"s{step}m")
        refresh_down(t, f"s{step}")
    for name, (_, _, mode) in DOWN.items():
        history = appends(str(data / "views" / name))
        assert history[0]["mode"] == "full"
        assert any(a["mode"] == mode for a in history), (name, [a["mode"] for a in history])
        assert not any("no earlier refresh" in str(a["mode_reason"]) for a in history[1:]), history
    # the upstream aggregate kept hidden state; no downstream view ever saw it
    assert [c for c in DeltaTable(str(data / "views" / "up")).schema().to_arrow().names if "_agg_" in c]
    # the upstream with duplicates wrote updates of weight k > 1 after its first refresh, which the
    # downstream views' change sets read as k rows
    log = pa.table(DeltaTable(str(data / "views" / "upc")).to_pyarrow_table())
    first = min(log["_mv_time"].to_pylist())
    later = [abs(d) for d, at in zip(log["_mv_diff"].to_pylist(), log["_mv_time"].to_pylist()) if at > first]
    assert max(later) > 1, later


# ---------------------------------------------------------------- fallbacks, with their reasons


def _orders_change(rng: random.Random, srcs: dict[str, str], next_id: list[int], ts: int) -> None:
    """A change that surely moves the upstream aggregate: new orders of known customers."""
    t = agg_orders(rng, next_id[0], 3)
    t = t.set_column(t.schema.get_field_index("cust"), "cust", pa.array([1, 2, 3], pa.int32()))
    next_id[0] += 3
    write_at(srcs["orders"], t, ts)


def _check(catalog, name: str, srcs: dict[str, str], t: int, *, upstream: str = "up") -> None:
    q = DOWN[name][0] if name in DOWN else None
    got = read_view(catalog.get(name), as_of=t)
    twin = read_view(catalog.get(name + "_full"), as_of=t)
    assert _exact(got) == _exact(twin), name
    if q is not None:
        assert multiset(got) == _down_oracle(q, upstream, srcs, t), name


def test_hand_edits_of_the_upstream_take_the_full_diff(spark, env, monkeypatch):
    """A foreign commit on the upstream's table: the downstream takes the full diff naming it, also on its first
    refresh after the upstream repaired itself when the downstream read the damaged contents in between (a
    row with a negative sum reads as absent, which the changes since could not undo)."""
    _modes_on(monkeypatch)
    data, views = env
    rng = random.Random(2)
    srcs = _sources(data, rng, cdf=True)
    _upstreams(views)
    _down(views, "filt", DOWN["filt"][0], "up")
    catalog = Catalog(views)
    up, filt = catalog.get("up"), catalog.get("filt")
    next_id = [40]

    def run(view_names: tuple[str, ...], t: int) -> None:
        for n in view_names:
            assert refresh(catalog.get(n), t, catalog=catalog, runner="inprocess", spark=spark).status == "appended"

    t1, t2, t3, t4, t5 = (BASE + k * HOUR for k in range(1, 6))
    run(("up", "filt", "filt_full"), t1)
    # 1. rows deleted from the upstream's table by hand; the upstream repairs itself, then the downstream reads
    DeltaTable(up.target).delete("n > 1")
    _orders_change(rng, srcs, next_id, t2 - 60_000)
    run(("up",), t2)
    assert appends(up.target)[-1]["mode"] == "full"
    run(("filt", "filt_full"), t2)
    assert appends(filt.target)[-1]["mode"] == "full"
    why = _reason(filt.target)
    assert "source 'up'" in why and "view up's table has a commit mvsink did not make" in why and "DELETE" in why
    _check(catalog, "filt", srcs, t2)
    # ... and the next refresh is incremental again
    _orders_change(rng, srcs, next_id, t3 - 60_000)
    run(("up", "filt", "filt_full"), t3)
    assert appends(filt.target)[-1]["mode"] == "incremental", _reason(filt.target)
    _check(catalog, "filt", srcs, t3)

    # 2. the upstream moves ahead; a hand edit gives one of its rows a negative sum below its upper; the
    # downstream reads the damaged contents, then the upstream repairs them
    _orders_change(rng, srcs, next_id, t4 - 60_000)
    run(("up",), t4)
    rows = pa.table(DeltaTable(up.target).to_pyarrow_table())
    live = pc.and_(pc.equal(rows["_mv_diff"], 1), pc.equal(rows["_mv_time"], t4))  # added by the newest append
    one = rows.filter(pc.and_(live, pc.greater(rows["n"], 1))).slice(0, 1)
    assert one.num_rows == 1
    junk = one.set_column(rows.schema.get_field_index("_mv_diff"), "_mv_diff", pa.array([-2], pa.int64()))
    junk = junk.set_column(rows.schema.get_field_index("_mv_time"), "_mv_time", pa.array([t4 - 1000], pa.int64()))
    write_deltalake(up.target.uri, junk, mode="append")
    run(("filt", "filt_full"), t4)  # reads the damaged upstream (the row is absent), as the twin does
    assert appends(filt.target)[-1]["mode"] == "full" and "did not make" in _reason(filt.target)
    assert _exact(read_view(filt, as_of=t4)) == _exact(read_view(catalog.get("filt_full"), as_of=t4))
    _orders_change(rng, srcs, next_id, t5 - 60_000)
    run(("up",), t5)  # repairs the row
    run(("filt", "filt_full"), t5)
    # the hand edit came after the upstream's append the last read saw: the change since is not the whole story
    assert appends(filt.target)[-1]["mode"] == "full", _reason(filt.target)
    assert "did not make" in _reason(filt.target)
    _check(catalog, "filt", srcs, t5)
    _orders_change(rng, srcs, next_id, t5 + HOUR - 60_000)
    run(("up", "filt", "filt_full"), t5 + HOUR)
    assert appends(filt.target)[-1]["mode"] == "incremental", _reason(filt.target)
    _check(catalog, "filt", srcs, t5 + HOUR)


def test_compaction_of_the_upstream(spark, env, monkeypatch):
    """Compaction up to the downstream's last read keeps it incremental (the read hold stops there); a
    compaction past it (by hand, without the catalog's hold) makes it take the full diff, naming it."""
    _modes_on(monkeypatch)
    data, views = env
    rng = random.Random(3)
    srcs = _sources(data, rng, cdf=False)
    _upstreams(views)
    _down(views, "filt", DOWN["filt"][0], "up")
    _down(views, "agg", DOWN["agg"][0], "up")
    catalog = Catalog(views)
    up = catalog.get("up")
    next_id = [40]
    names = ("filt", "filt_full", "agg", "agg_full")

    def step(t: int, *, compact_to: int | None = None, hold: bool = True) -> None:
        _orders_change(rng, srcs, next_id, t - 60_000)
        assert refresh(up, t, catalog=catalog, runner="inprocess", spark=spark).status == "appended"
        if compact_to is not None:
            res = compact(up, catalog=catalog if hold else None, since=compact_to)
            assert res.status == "compacted", res
        for n in names:
            assert refresh(catalog.get(n), t, catalog=catalog, runner="inprocess", spark=spark).status == "appended"
        for n in ("filt", "agg"):
            _check(catalog, n, srcs, t)

    t = BASE + HOUR
    step(t)
    # up to the last read (the hold): still incremental
    t += HOUR
    step(t, compact_to=t - HOUR)
    assert appends(str(data / "views" / "filt"))[-1]["mode"] == "incremental"
    assert appends(str(data / "views" / "agg"))[-1]["mode"] == "incremental:aggregate"
    # past it: the hold refuses it ...
    _orders_change(rng, srcs, next_id, t + HOUR - 60_000)
    t += HOUR
    assert refresh(up, t, catalog=catalog, runner="inprocess", spark=spark).status == "appended"
    with pytest.raises(MvSinkError, match="would pass view"):
        compact(up, catalog=catalog, since=t)
    # ... and without it the downstream views take the full diff, saying why
    assert compact(up, since=t).status == "compacted"
    for n in names:
        assert refresh(catalog.get(n), t, catalog=catalog, runner="inprocess", spark=spark).status == "appended"
    for n in ("filt", "agg"):
        last = appends(str(data / "views" / n))[-1]
        assert last["mode"] == "full", last
        assert "view up was compacted to since" in last["mode_reason"] and str(t) in last["mode_reason"], last
        _check(catalog, n, srcs, t)
    t += HOUR
    step(t)
    assert appends(str(data / "views" / "filt"))[-1]["mode"] == "incremental"
    assert appends(str(data / "views" / "agg"))[-1]["mode"] == "incremental:aggregate"


JOINED = {
    # the view source after the table source: its term reads the table new, the table's term the view old
    "lin": (
        "SELECT c.id, c.seg, u.status, u.n FROM customers c JOIN up u ON c.region = u.region",
        {"customers": "customers", "up": {"view": "up"}},
        "incremental",
    ),
    "jagg": (
        "SELECT c.seg, count(*) AS k, sum(u.n) AS n FROM up u JOIN customers c ON c.region = u.region GROUP BY c.seg",
        {"up": {"view": "up"}, "customers": "customers"},
        "incremental:aggregate",
    ),
}


def test_a_view_source_and_a_table_source_changing_together(spark, env, monkeypatch):
    _modes_on(monkeypatch)
    data, views = env
    rng = random.Random(4)
    srcs = _sources(data, rng, cdf=True)
    _upstreams(views)
    for name, (q, sources, _) in JOINED.items():
        for suffix, inc in (("", True), ("_full", False)):
            write_view(
                views, name + suffix, query=q, sources=sources, target=f"views/{name}{suffix}", as_of=BASE,
                incremental=inc,
            )  # fmt: skip
    catalog = Catalog(views)
    t = BASE
    for k in range(4):
        t += HOUR
        if k:
            # a customer moves region: both the upstream aggregate and the joined table change
            region = ["'eu'", "'us'", "'apac'"][k % 3]
            update_at(srcs["customers"], {"region": region}, f"id = {1 + k % 4}", t - 120_000)
            _orders_change(rng, srcs, [1000 * k], t - 60_000)
        assert refresh(catalog.get("up"), t, catalog=catalog, runner="inprocess", spark=spark).status == "appended"
        for name, (q, _, mode) in JOINED.items():
            for suffix in ("", "_full"):
                res = refresh(catalog.get(name + suffix), t, catalog=catalog, runner="inprocess", spark=spark)
                assert res.status == "appended", res
            got = read_view(catalog.get(name), as_of=t)
            assert _exact(got) == _exact(read_view(catalog.get(name + "_full"), as_of=t)), (name, k)
            con = duckdb.connect()
            for n, path in srcs.items():
                con.register(n, snapshot(path, t))
            con.execute(f"CREATE TABLE up AS {UP}")
            assert multiset(got) == multiset(con.sql(q).to_arrow_table()), (name, k)
            last = appends(str(data / "views" / name))[-1]
            if k:
                assert last["mode"] == mode, (name, k, last["mode_reason"])
                assert "up" in last["mode_reason"] and "customers" in last["mode_reason"], last["mode_reason"]


# ---------------------------------------------------------------- the reason of a full diff


def test_the_reason_of_a_full_diff_over_a_view_states_the_real_cause(spark, env, monkeypatch):
    monkeypatch.setenv("MVSINK_INCREMENTAL_MAX_FRACTION", "100")
    monkeypatch.setenv("MVSINK_INCREMENTAL_GROUPS", "false")  # (the DISTINCT below would refresh by affected groups)
    data, views = env
    rng = random.Random(6)
    srcs = _sources(data, rng, cdf=True)
    _upstreams(views)
    q = "SELECT DISTINCT upper(region) AS region FROM up"  # (an expression's DISTINCT keeps no state)
    write_view(views, "d", query=q, sources={"up": {"view": "up"}}, target="views/d", as_of=BASE)
    catalog = Catalog(views)
    up, d = catalog.get("up"), catalog.get("d")
    next_id = [40]
    t = BASE + HOUR

    def step(expect_mode: str, *needles: str) -> None:
        nonlocal t
        _orders_change(rng, srcs, next_id, t + HOUR - 60_000)
        t += HOUR
        refresh(catalog.get("up"), t, catalog=catalog, runner="inprocess", spark=spark)
        res = refresh(catalog.get("d"), t, catalog=catalog, runner="inprocess", spark=spark)
        assert res.status == "appended" and res.mode == expect_mode, res
        why = _reason(d.target)
        assert "no earlier refresh" not in why, why
        for n in needles:
            assert n in why, why
        assert multiset(read_view(catalog.get("d"), as_of=t)) == _down_oracle(catalog.get("d").query, "up", srcs, t)

    refresh(up, t, catalog=catalog, runner="inprocess", spark=spark)
    refresh(d, t, catalog=catalog, runner="inprocess", spark=spark)
    assert appends(d.target)[0]["mode_reason"].startswith("no earlier refresh of this definition to start from")
    # not linear in its view source (and no aggregate state for a DISTINCT of an expression): says so
    step("full", "not linear in 'up'")
    # the downstream's own table edited by hand
    DeltaTable(d.target).delete()
    step("full", "a commit mvsink did not make", "DELETE")
    # its definition changed
    write_view(
        views, "d", query="SELECT DISTINCT upper(region) AS region FROM up WHERE n > 0", sources={"up": {"view": "up"}},
        target="views/d", as_of=BASE,
    )  # fmt: skip
    catalog = Catalog(views)
    step("full", "definition changed")
    # a linear definition now (the same columns): incremental from its second refresh
    write_view(views, "d", query="SELECT region FROM up", sources={"up": {"view": "up"}}, target="views/d", as_of=BASE)
    catalog = Catalog(views)
    step("full", "definition changed")
    step("incremental", "from the changes of up")
    # the upstream's table re-created (same path, a new Delta table): not the table the last refresh read
    shutil.rmtree(up.target)
    t0 = t
    refresh(catalog.get("up"), t0, catalog=catalog, runner="inprocess", spark=spark)
    step("full", "source 'up' is not the table the last refresh read")
