"""A correlated scalar subquery compared in a WHERE, refreshed through an intermediate table of its value per
correlation key (definitions/correlated.py; TPC-H Q2's shape): the view equal to Spark computing the user's query
(types included) and to DuckDB's oracle at every refresh of randomized histories (inserts, updates, deletes of the
current MIN and MAX and of a key's last row, dimension moves), the intermediate refreshed from its state and the
view from the changes of its sources and of the intermediate."""

from __future__ import annotations

import random

import pytest

from mvsink.core.sourceschema import source_columns
from mvsink.definitions.catalog import Catalog
from mvsink.definitions.intermediate import INNER_FOLDER, intermediate_split
from mvsink.write.runners import refresh
from tests.spark.test_intermediate import _refreshed_exactly, _views_over_sources
from tests.support import aggdata
from tests.support.aggdata import appends
from tests.support.delta import BASE
from tests.support.viewfiles import write_view

pytestmark = pytest.mark.spark

VIEWS = {
    # TPC-H Q2's shape: the rows of each customer's least quantity outside a region, the first 5 by quantity
    # (a top-k with a declared key), the subquery over the same join as the query (a dimension move changes both)
    "q2": (
        "SELECT o.id, o.cust, o.qty, c.region FROM orders o, customers c "
        "WHERE o.cust = c.id AND (c.region <> 'us' OR c.region IS NULL) "
        "AND o.qty = (SELECT min(o2.qty) FROM orders o2, customers c2 WHERE o2.cust = c2.id "
        "AND (c2.region <> 'us' OR c2.region IS NULL) AND o2.cust = c.id) "
        "ORDER BY o.qty DESC, o.id LIMIT 5",
        ["id"],
    ),
    # every row within one of its status's greatest quantity (a MAX minus a literal; a string key), no LIMIT
    "near_max": (
        "SELECT o.id, o.status, o.qty FROM orders o "
        "WHERE (SELECT max(o2.qty) - 1 FROM orders o2 WHERE o2.status = o.status) <= o.qty",
        None,
    ),
    # TPC-H Q20's shape: the correlated sum in the WHERE of an IN subquery (two keys), beside an uncorrelated IN
    "in_sum": (
        "SELECT c.id, c.region FROM customers c WHERE c.id IN (SELECT o.cust FROM orders o "
        "WHERE o.status IN (SELECT o3.status FROM orders o3 WHERE o3.qty > 5) "
        "AND o.qty * 2 > (SELECT 0.5 * sum(o2.qty) FROM orders o2 WHERE o2.cust = o.cust AND o2.status = o.status))",
        None,
    ),
}
OUTER_MODES = {"incremental", "incremental:topk", "incremental:partitioned", "unchanged", "full"}
INNER_MODES = {"incremental:aggregate", "incremental:groups", "incremental:partitioned", "unchanged"}


@pytest.mark.parametrize("seed", [3, 19])
def test_a_correlated_scalar_subquery_refreshes_through_its_intermediate(spark, env, monkeypatch, seed):
    monkeypatch.setenv("MVSINK_INTERMEDIATE_CORRELATED", "true")  # (off by default: slower at TPC-H SF 1)
    queries = {n: q for n, (q, _) in VIEWS.items()}
    keys = {n: k for n, (_, k) in VIEWS.items() if k}
    data, catalog, srcs, rng = _views_over_sources(env, monkeypatch, seed, queries, keys)
    for name in VIEWS:
        view = catalog.get(name)
        assert intermediate_split(view) is None  # (without the sources' columns: no correlated split)
        split = intermediate_split(view, columns_of=source_columns)
        assert split is not None and split.kind == "correlated", name
        assert "MV_SCALAR" in split.outer.query.upper() and "SUM(" not in split.outer.query.upper(), name
        assert split.outer.query.upper().count("(SELECT") == (2 if name == "in_sum" else 0), name  # (INs stay)
    reported, _ = _refreshed_exactly(spark, catalog, {n: q for n, (q, _) in VIEWS.items()}, srcs, rng)
    for name in VIEWS:
        outer = appends(str(data / "views" / name))
        inner = appends(str(data / "views" / name / INNER_FOLDER))
        assert len(inner) == len(outer), name
        assert outer[0]["mode"] == "full" and inner[0]["mode"] == "full", name
        assert {a["mode"] for a in inner[1:]} <= INNER_MODES | {"full"}, (name, [a["mode_reason"] for a in inner])
        # (a full diff of the intermediate only where a deleted extreme's groups are most of its few rows)
        assert all("the full diff is cheaper" in a["mode_reason"] for a in inner[1:] if a["mode"] == "full"), inner
        assert {a["mode"] for a in outer[1:]} <= OUTER_MODES, (name, [a["mode_reason"] for a in outer])
        # the subquery's values per key refreshed from their state, and the view from the changes, mostly
        assert sum(a["mode"].startswith("incremental") for a in inner[1:]) >= 3, (name, inner)
        if name == "in_sum":  # (an IN is not linear, and its partitioned recompute reads more: full diffs by DuckDB)
            assert all("in DuckDB" in a["mode_reason"] for a in outer[1:] if a["mode"] == "full"), outer
            assert any("without Spark" in a["mode_reason"] for a in outer[1:]), [a["mode_reason"] for a in outer]
        else:
            assert sum(a["mode"].startswith("incremental") for a in outer[1:]) >= 3, (name, outer)
        # ('' where no source of the view changed: a step that moved customers only, which near_max does not read)
        assert all(m.startswith("incremental") or m in ("full", "") for m in reported[name]), reported[name]


def test_without_the_correlated_split_the_view_is_refreshed_as_one_query(spark, env, monkeypatch):
    data, views = env
    rng = random.Random(2)
    orders, customers = aggdata.write_sources(data, rng, 40)
    q, key = VIEWS["q2"]
    write_view(
        views,
        "q2",
        query=q,
        sources={"orders": "orders", "customers": "customers"},
        target="views/q2",
        as_of=BASE,
        key=key,
    )
    catalog = Catalog(views)
    assert intermediate_split(catalog.get("q2"), columns_of=source_columns) is None  # (off by default)
    monkeypatch.setenv("MVSINK_INTERMEDIATE_CORRELATED", "true")
    assert intermediate_split(catalog.get("q2"), columns_of=source_columns) is not None
    monkeypatch.setenv("MVSINK_INTERMEDIATE_CORRELATED", "false")
    assert intermediate_split(catalog.get("q2"), columns_of=source_columns) is None
    res = refresh(catalog.get("q2"), BASE + 3_600_000, catalog=catalog, runner="inprocess", spark=spark)
    assert res.status == "appended" and "intermediate table" not in res.mode_reason, res
    assert not (data / "views" / "q2" / INNER_FOLDER).exists()
