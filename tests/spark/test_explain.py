"""``mvsink explain``: per source, the mode a change of it would take, why not an incremental one, and the fix;
on real Spark over real Delta tables, for the view shapes each mode serves and the ones none does."""

from __future__ import annotations

import json
import random

import pytest
from deltalake import write_deltalake

from mvsink.cli.app import main
from mvsink.definitions.catalog import Catalog
from mvsink.write.explain import ExplainReport, explain_view
from mvsink.write.runners import refresh
from tests.support.data import INC_JOIN, INC_LEFT, INC_UNION, inc_customers, inc_orders
from tests.support.delta import BASE, HOUR, stamp, write_at
from tests.support.viewfiles import write_view

GROUPS = "MVSINK_INCREMENTAL_GROUPS"
TOPK = "MVSINK_INCREMENTAL_TOPK"
PARTITIONED = "MVSINK_INCREMENTAL_PARTITIONED"

SHAPES = {
    "proj": "SELECT id, status FROM orders WHERE qty > 1",
    "union": INC_UNION,
    "join": INC_JOIN,
    "left": INC_LEFT,
    "agg": "SELECT status, count(*) AS n, sum(qty) AS q, avg(qty) AS a FROM orders GROUP BY status",
    "minmax": "SELECT status AS st, min(qty) AS lo, max(qty) AS hi FROM orders GROUP BY status",
    "cdistinct": "SELECT status AS st, count(DISTINCT qty) AS k, max(qty) AS hi FROM orders GROUP BY status",
    "topk": "SELECT id, status, qty FROM orders ORDER BY qty DESC NULLS LAST, id LIMIT 3",
    "window": (
        "SELECT id, status, qty, rn FROM (SELECT id, status, qty, row_number() OVER "
        "(PARTITION BY status ORDER BY qty DESC, id) AS rn FROM orders) WHERE rn <= 2"
    ),
    "distinct": "SELECT DISTINCT status FROM orders",
    "session": "SELECT id, status, current_user() AS who FROM orders",
    "subquery": "SELECT id FROM orders WHERE cust IN (SELECT id FROM customers WHERE tier = 1)",
}


@pytest.fixture
def catalog(env, monkeypatch):
    """orders (with Change Data Feed) and customers (without), a view of each shape, and ``over``, a view over
    the view ``proj`` (refreshed, so it has a table)."""
    monkeypatch.delenv(GROUPS, raising=False)
    monkeypatch.delenv(TOPK, raising=False)
    monkeypatch.delenv("MVSINK_INCREMENTAL_AGGREGATE", raising=False)
    data, views = env
    rng = random.Random(3)
    write_deltalake(str(data / "orders"), inc_orders(rng, 0, 20), configuration={"delta.enableChangeDataFeed": "true"})
    stamp(data / "orders", BASE)
    write_at(data / "customers", inc_customers(rng), BASE + 1)
    both = {"orders": "orders", "customers": "customers"}
    for name, query in SHAPES.items():
        sources = both if "customers" in query else {"orders": "orders"}
        write_view(views, name, query=query, sources=sources, target=f"views/{name}", as_of=BASE)
    write_view(
        views, "keyed", query=SHAPES["topk"], sources={"orders": "orders"}, target="views/keyed", as_of=BASE, key=["id"]
    )
    write_view(
        views,
        "ranked",
        query="SELECT status, sum(qty) AS q FROM orders GROUP BY status ORDER BY q DESC NULLS LAST, status LIMIT 2",
        sources={"orders": "orders"},
        target="views/ranked",
        as_of=BASE,
        key=["status"],
    )
    write_view(
        views,
        "checked",
        query=SHAPES["agg"],
        sources={"orders": "orders"},
        target="views/checked",
        as_of=BASE,
        checks=[{"name": "some", "expr": "n > 0", "action": "error"}],
    )
    write_view(
        views,
        "over",
        query="SELECT status, count(*) AS n FROM up GROUP BY status",
        sources={"up": {"view": "proj"}},
        target="views/over",
        as_of=BASE,
    )
    return Catalog(views)


def _explain(spark, catalog: Catalog, name: str) -> ExplainReport:
    return explain_view(catalog.get(name), catalog=catalog, spark=spark)


def _modes(report: ExplainReport) -> dict[str, str]:
    return {s.source: s.mode for s in report.sources}


def test_linear_shapes_take_the_linear_mode_and_name_the_change_feed_fix(spark, catalog):
    for name in ("proj", "union", "join"):
        r = _explain(spark, catalog, name)
        want = {"orders": "incremental", **({"customers": "incremental"} if name != "proj" else {})}
        assert _modes(r) == want, r
        assert all(s.why is None and s.label == "incremental (linear)" for s in r.sources)
    r = _explain(spark, catalog, "join")
    by = {s.source: s for s in r.sources}
    assert by["orders"].change_data_feed is True and not by["orders"].fixes  # already on
    assert by["customers"].change_data_feed is False
    assert any("delta.enableChangeDataFeed" in f for f in by["customers"].fixes), by["customers"]
    assert "MVSINK_INCREMENTAL_MAX_FRACTION" in str(by["customers"].guard)
    # each side's change term reads the other side filtered by the join's keys
    assert by["orders"].pruned == ("`customers` where id is among the keys of orders.cust",)
    assert by["customers"].pruned == ("`orders` where cust is among the keys of customers.id",)
    assert "reads `customers` where id is among the keys of orders.cust" in r.summary()


def test_a_left_join_is_linear_in_its_preserved_side_only(spark, catalog, monkeypatch):
    monkeypatch.setenv(PARTITIONED, "false")  # (the null-supplying side: a partitioned recompute, below)
    r = _explain(spark, catalog, "left")
    by = {s.source: s for s in r.sources}
    assert by["orders"].mode == "incremental"
    c = by["customers"]
    assert c.mode == "full" and c.label == "full diff"
    assert "not linear in 'customers'" in str(c.why) and "LeftOuter join" in str(c.why)
    assert any("preserved side" in f for f in c.fixes), c.fixes
    assert by["orders"].pruned == ("`customers` where id is among the keys of orders.cust",)
    monkeypatch.delenv(PARTITIONED)  # on by default: the join's key partitions the query
    c = {s.source: s for s in _explain(spark, catalog, "left").sources}["customers"]
    assert c.mode == "incremental:partitioned" and c.label == "partitioned recompute", c


def test_an_accumulable_aggregate_keeps_state_and_refreshes_from_it(spark, catalog):
    r = _explain(spark, catalog, "agg")
    assert _modes(r) == {"orders": "incremental:aggregate"}
    assert r.sources[0].label == "aggregate state"
    assert "_mv_agg_count" in r.state_columns and r.state_reason is None
    assert r.group_keys == ("status",)
    linear = r.sources[0].decisions[0]
    assert (linear.mode, linear.applies, linear.kind) == ("incremental", False, "shape")


def test_min_max_refresh_from_the_aggregate_state(spark, catalog):
    r = _explain(spark, catalog, "minmax")
    assert _modes(r) == {"orders": "incremental:aggregate"}, r
    assert {"_mv_agg_min0", "_mv_agg_minc0", "_mv_agg_max0", "_mv_agg_maxc0"} <= set(r.state_columns)


def test_count_distinct_needs_the_groups_setting_and_says_so(spark, catalog, monkeypatch):
    monkeypatch.setenv(GROUPS, "false")  # (on by default)
    monkeypatch.setenv(PARTITIONED, "false")  # (a GROUP BY of a column: partitioned by it, on by default)
    r = _explain(spark, catalog, "cdistinct")
    s = r.sources[0]
    assert s.mode == "full" and not r.state_columns and r.state_reason
    assert "not linear in 'orders'" in str(s.why)
    assert "MVSINK_INCREMENTAL_GROUPS=true enables it" in str(s.why)
    assert any(f.startswith(f"set {GROUPS}=true") and "affected groups" in f for f in s.fixes), s.fixes
    groups = next(d for d in s.decisions if d.mode == "incremental:groups")
    assert (groups.kind, groups.setting, groups.fits_when_on) == ("disabled", GROUPS, True)
    monkeypatch.setenv(GROUPS, "true")
    r = _explain(spark, catalog, "cdistinct")
    assert _modes(r) == {"orders": "incremental:groups"} and r.group_keys == ("st",)
    assert "half the view's rows" in str(r.sources[0].guard)


def test_a_window_refreshes_by_affected_groups_and_a_distinct_from_its_row_counts(spark, catalog, monkeypatch):
    monkeypatch.setenv(GROUPS, "true")
    r = _explain(spark, catalog, "window")
    assert _modes(r) == {"orders": "incremental:groups"}, r
    assert r.group_keys == ("status",) and r.sources[0].label == "affected groups"
    for groups in ("true", "false"):  # a DISTINCT keeps each row's count of input rows: the aggregate state
        monkeypatch.setenv(GROUPS, groups)
        r = _explain(spark, catalog, "distinct")
        assert _modes(r) == {"orders": "incremental:aggregate"}, r
        assert r.state_columns == ("_mv_agg_count",) and r.group_keys == ("status",), r


def test_top_k_needs_a_declared_key(spark, catalog, monkeypatch):
    monkeypatch.setenv(TOPK, "false")
    s = _explain(spark, catalog, "topk").sources[0]  # the mode is off, and would not apply either
    topk = next(d for d in s.decisions if d.mode == "incremental:topk")
    assert topk.kind == "disabled" and topk.fits_when_on is False and "declare" in str(topk.when_on_reason)
    assert any("declare the view's `key`" in f and f"set {TOPK}=true" in f for f in s.fixes), s.fixes
    monkeypatch.delenv(TOPK)  # on by default
    s = _explain(spark, catalog, "topk").sources[0]
    assert s.mode == "full" and "and not as a top-k" in str(s.why) and "declare the view's `key`" in str(s.why)
    assert any("declare the view's `key`" in f for f in s.fixes), s.fixes
    r = _explain(spark, catalog, "keyed")
    assert _modes(r) == {"orders": "incremental:topk"} and r.key == ("id",) and r.sources[0].label == "top-k"


def test_a_top_k_over_an_aggregate_is_explained_by_its_intermediate_table(spark, catalog, monkeypatch):
    monkeypatch.delenv("MVSINK_INTERMEDIATE", raising=False)
    r = _explain(spark, catalog, "ranked")
    assert r.view == "ranked" and r.key == ("status",) and "intermediate table ranked__mv_inner" in r.intermediate
    assert "intermediate table ranked__mv_inner" in r.summary().splitlines()[1]
    assert _modes(r) == {"orders": "incremental:aggregate"} and r.state_columns, r.summary()
    monkeypatch.setenv("MVSINK_INTERMEDIATE", "false")  # the query as one: a top-k over an aggregate of the changes
    r = _explain(spark, catalog, "ranked")
    assert not r.intermediate and _modes(r)["orders"] != "incremental:aggregate", r.summary()


def test_a_session_function_or_a_subquery_takes_the_full_diff_with_a_rewrite(spark, catalog, monkeypatch):
    s = _explain(spark, catalog, "session").sources[0]
    assert s.mode == "full" and "depends on the time or session" in str(s.why), s
    assert any("where the data is written" in f for f in s.fixes), s.fixes
    monkeypatch.setenv(PARTITIONED, "false")
    r = _explain(spark, catalog, "subquery")
    assert set(_modes(r).values()) == {"full"}
    assert all("subquery" in str(s.why) and any("join" in f for f in s.fixes) for s in r.sources), r
    monkeypatch.delenv(PARTITIONED)  # on by default: the IN's value and column partition the query
    assert set(_modes(_explain(spark, catalog, "subquery")).values()) == {"incremental:partitioned"}


def test_checks_keep_an_aggregate_from_its_state_and_groups(spark, catalog, monkeypatch):
    monkeypatch.setenv(PARTITIONED, "false")  # (a GROUP BY of a column is partitioned by it: checks apply per row)
    s = _explain(spark, catalog, "checked").sources[0]  # (affected groups would not apply either)
    assert s.mode == "full" and any("move the view's checks" in f for f in s.fixes), s.fixes
    monkeypatch.setenv(GROUPS, "true")
    r = _explain(spark, catalog, "checked")
    s = r.sources[0]
    assert r.checks == ("some",) and not r.state_columns and r.state_reason == "the view has checks"
    assert s.mode == "full" and "and not by affected groups: the view has checks" in str(s.why), s
    assert any("move the view's checks" in f for f in s.fixes), s.fixes


def test_a_view_over_a_view_and_the_cli(spark, catalog, capsys, monkeypatch):
    monkeypatch.setenv(PARTITIONED, "false")  # (the left join's null-supplying side would be partitioned)
    proj = catalog.get("proj")
    with pytest.raises(Exception, match="refresh proj first"):
        _explain(spark, catalog, "over")
    assert refresh(proj, BASE + HOUR, catalog=catalog, runner="inprocess", spark=spark).status == "appended"
    r = _explain(spark, catalog, "over")
    s = r.sources[0]
    assert (s.source, s.kind, s.change_data_feed, s.mode) == ("up", "view", None, "incremental:aggregate")
    # the command line: the same report, as JSON and as text
    views = str(catalog.views_dir)
    assert main(["explain", "over", "--views-dir", views, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["view"] == "over" and doc["sources"][0]["mode"] == "incremental:aggregate"
    assert main(["explain", "left", "--views-dir", views]) == 0
    out = capsys.readouterr().out
    assert "a change of `orders` (table) → incremental (linear)" in out
    assert "a change of `customers` (table) → full diff" in out and "why: not linear in 'customers'" in out
