"""A top-k over an aggregate refreshed through an intermediate table (mvsink.definitions.intermediate): the aggregate,
every group, kept in ``<target>/_mv_inner`` and refreshed from its state; the view its top k, refreshed from the
intermediate's change. Exact against Spark computing the user's query and against DuckDB's oracle at every refresh of
randomized histories (inserts, updates, deletes of the current MAX and of a group's last row, dimension moves)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from mvsink.core.table import ViewTable
from mvsink.definitions.catalog import Catalog
from mvsink.definitions.intermediate import FILTER_RECOMPUTED, INNER_FOLDER, described_view, intermediate_split
from mvsink.maintenance.compaction import compact
from mvsink.readers.arrow import read_view
from mvsink.write.runners import refresh
from tests.support import aggdata
from tests.support.aggdata import appends
from tests.support.delta import BASE, HOUR, update_at
from tests.support.oracle import multiset, oracle
from tests.support.viewfiles import write_view

pytestmark = pytest.mark.spark

# name: (query, key, the intermediate's incremental modes). Every ORDER BY item says where its NULLs go: DuckDB's
# oracle places them last by default, Spark first when ascending.
VIEWS = {
    # TPC-H Q10's shape: a top-k of customers by the sum over their orders (a dimension move changes a group's region)
    "q10": (
        "SELECT c.id AS cid, c.region, sum(o.qty) AS q, count(*) AS n FROM orders o JOIN customers c ON o.cust = c.id "
        "WHERE o.status <> 'B' OR o.status IS NULL GROUP BY c.id, c.region ORDER BY q DESC NULLS LAST, cid NULLS FIRST LIMIT 2",
        ["cid"],
        {"incremental:aggregate"},
    ),
    # MIN/MAX: a delete of a group's current extreme recomputes that group (affected groups), not the full diff
    "extremes": (
        "SELECT status, max(qty) AS mx, min(price) AS mn FROM orders GROUP BY status "
        "ORDER BY mx DESC NULLS FIRST, status NULLS FIRST LIMIT 2",
        ["status"],
        {"incremental:aggregate", "incremental:groups", "incremental:partitioned"},
    ),
    # TPC-H Q21's shape: a count under an EXISTS correlated on the join key, ranked
    "q21": (
        "SELECT c.region, count(*) AS n FROM customers c JOIN orders o ON o.cust = c.id "
        "WHERE EXISTS (SELECT 1 FROM orders o2 WHERE o2.cust = o.cust AND o2.id <> o.id) "
        "GROUP BY c.region ORDER BY n DESC, region NULLS LAST LIMIT 1",
        ["region"],
        {"incremental:aggregate", "incremental:groups"},
    ),
    # a HAVING: groups enter and leave the aggregate
    "having": (
        "SELECT cust, sum(qty) AS s FROM orders GROUP BY cust HAVING count(*) > 2 ORDER BY s DESC NULLS LAST, cust NULLS FIRST LIMIT 2",
        ["cust"],
        {"incremental:aggregate", "incremental:groups", "incremental:partitioned"},
    ),
}


def _spark_rows(spark, query: str, sources: dict[str, str]) -> tuple[list[str], list[tuple[Any, ...]]]:
    """The query computed by Spark itself over the sources' newest versions (delta-spark): the column types and the
    sorted rows, typed (Decimal, int, str, float: exact)."""
    session = spark.newSession()
    for name, path in sources.items():
        session.read.format("delta").load(path).createOrReplaceTempView(name)
    df = session.sql(query)
    return [f.dataType.simpleString() for f in df.schema.fields], sorted(map(tuple, df.collect()), key=repr)


def _view_rows(view, t: int) -> tuple[list[str], list[tuple[Any, ...]]]:
    got = read_view(view, as_of=t)
    return [str(f.type) for f in got.schema], sorted((tuple(r.values()) for r in got.to_pylist()), key=repr)


def _types_match(spark_types: list[str], arrow_types: list[str]) -> bool:
    same = {"bigint": "int64", "int": "int32", "string": "string", "double": "double", "float": "float"}
    for s, a in zip(spark_types, arrow_types, strict=True):
        if s.startswith("decimal"):
            if a.replace(" ", "") != s.replace("decimal", "decimal128"):
                return False
        elif same.get(s) != a and not (s == "string" and a == "large_string"):
            return False
    return True


def _history(rng: random.Random, orders: str, customers: str, *, next_id: int, steps: int = 6):
    """The refresh times of a randomized history, with the changes so far (``ops``): before each refresh but the
    first, one to three changes of the sources (aggdata.agg_change) a few minutes apart."""
    ids, t, ops = [next_id], BASE + HOUR, []
    for step in range(steps):
        if step:
            for _ in range(rng.randint(1, 3)):
                t += rng.randint(1, 10) * 60_000
                ops.append(aggdata.agg_change(rng, orders, customers, ids, t))
        t += HOUR
        yield step, t, ops


@pytest.mark.parametrize("seed", [11, 23])
def test_randomized_histories_match_spark_and_the_oracle(spark, env, monkeypatch, seed):
    monkeypatch.setenv("MVSINK_INCREMENTAL_MAX_SCAN_RATIO", "1000")  # (the scan guards have their own tests)
    monkeypatch.setenv("MVSINK_INCREMENTAL_MAX_FRACTION", "100")
    data, views = env
    rng = random.Random(seed)
    orders, customers = aggdata.write_sources(data, rng, 40)
    srcs = {"orders": orders, "customers": customers}
    for name, (q, key, _) in VIEWS.items():
        used = {s: s for s in srcs if s in q}
        write_view(views, name, query=q, sources=used, target=f"views/{name}", as_of=BASE, key=key)
    catalog = Catalog(views)
    for step, t, ops in _history(rng, orders, customers, next_id=40):
        for name, (q, _, _) in VIEWS.items():
            view = catalog.get(name)
            res = refresh(view, t, catalog=catalog, runner="inprocess", spark=spark, run_id=f"s{step}")
            assert res.status == "appended", res
            assert "intermediate table" in res.mode_reason, res.mode_reason
            used = {s: p for s, p in srcs.items() if s in q}
            types, rows = _view_rows(view, t)
            spark_types, spark_rows = _spark_rows(spark, q, used)
            assert rows == spark_rows, (name, step, ops)
            assert _types_match(spark_types, types), (name, spark_types, types)
            assert multiset(read_view(view, as_of=t)) == oracle(q, used, t), (name, step, ops)
    for name, (_, _, inner_modes) in VIEWS.items():
        outer = appends(str(data / "views" / name))
        inner = appends(str(data / "views" / name / INNER_FOLDER))
        assert outer[0]["mode"] == "full" and inner[0]["mode"] == "full", (name, outer[0], inner[0])
        # the view: its top k from the intermediate's change; the intermediate: from its state or its groups
        assert {a["mode"] for a in outer[1:]} <= {"incremental:topk", "unchanged"}, (name, outer)
        assert "incremental:topk" in {a["mode"] for a in outer[1:]}, (name, outer)
        # (the view's top k from the intermediate's log, in the driver: mvsink.incremental.viewtopk)
        assert any("in the driver without Spark" in str(a["mode_reason"]) for a in outer[1:]), (name, outer)
        assert {a["mode"] for a in inner[1:]} <= inner_modes | {"unchanged"}, (name, [a["mode_reason"] for a in inner])
        assert {a["mode"] for a in inner[1:]} & inner_modes, (name, inner)


# name: (query, the view's modes besides the intermediate's). An aggregate in a WITH clause: the CTE is the
# intermediate, the query's body the view over it.
def _views_over_sources(
    env, monkeypatch, seed: int, queries: dict[str, str], keys: dict[str, list[str]] | None = None, **options: Any
):
    """The randomized sources (40 orders, the customers) and a view per query over the sources it names (``keys``: a
    view's declared key), the scan guards opened: (the data folder, the catalog, {source: path}, the history's random
    generator)."""
    monkeypatch.setenv("MVSINK_INCREMENTAL_MAX_SCAN_RATIO", "1000")
    monkeypatch.setenv("MVSINK_INCREMENTAL_MAX_FRACTION", "100")
    data, views = env
    rng = random.Random(seed)
    orders, customers = aggdata.write_sources(data, rng, 40)
    srcs = {"orders": orders, "customers": customers}
    for name, q in queries.items():
        sources = {s: s for s in srcs if s in q}
        key = {"key": (keys or {})[name]} if name in (keys or {}) else {}
        write_view(views, name, query=q, sources=sources, target=f"views/{name}", as_of=BASE, **key, **options)
    return data, Catalog(views), srcs, rng


def _refreshed_exactly(
    spark, catalog: Catalog, queries: dict[str, str], srcs: dict[str, str], rng: random.Random
) -> tuple[dict[str, list[str]], int]:
    """Each view refreshed through a randomized history (:func:`_history`) and checked at every refresh against Spark
    computing its query (types included) and DuckDB's oracle: the modes each view's refreshes reported, and the last
    refresh time."""
    reported: dict[str, list[str]] = {n: [] for n in queries}
    t = BASE
    for step, t, ops in _history(rng, srcs["orders"], srcs["customers"], next_id=40):
        for name, q in queries.items():
            view = catalog.get(name)
            res = refresh(view, t, catalog=catalog, runner="inprocess", spark=spark, run_id=f"s{step}")
            assert res.status == "appended", res
            assert "intermediate table" in res.mode_reason, res.mode_reason
            reported[name].append(res.mode)
            types, rows = _view_rows(view, t)
            spark_types, spark_rows = _spark_rows(spark, q, srcs)
            assert rows == spark_rows, (name, step, ops)
            assert _types_match(spark_types, types), (name, spark_types, types)
            assert multiset(read_view(view, as_of=t)) == oracle(q, srcs, t), (name, step, ops)
    return reported, t


CTE_VIEWS = {
    # TPC-H Q15's shape: the rows of the greatest sum per customer, joined with the customer (a scalar MAX over the
    # intermediate: the body's full diff over the intermediate's rows, reported as the intermediate's mode)
    "q15": (
        "WITH rev AS (SELECT cust, sum(qty) AS total, count(*) AS n FROM orders WHERE status <> 'B' OR status IS NULL "
        "GROUP BY cust) SELECT c.id, c.region, rev.total, rev.n FROM customers c, rev "
        "WHERE c.id = rev.cust AND rev.total = (SELECT max(total) FROM rev)",
        {"full", "incremental:partitioned"},  # (partitioned by the customer, where only customers changed)
    ),
    # an aggregate over a join of the intermediate with a dimension (MIN/MAX and counts of a grouped CTE)
    "rollup": (
        "WITH per AS (SELECT cust, count(*) AS n, max(price) AS mx, min(qty) AS mn FROM orders GROUP BY cust) "
        "SELECT c.region, sum(per.n) AS n, max(per.mx) AS mx, min(per.mn) AS mn, count(*) AS custs "
        "FROM customers c JOIN per ON per.cust = c.id GROUP BY c.region",
        {"full", "incremental:aggregate", "incremental:groups", "incremental:partitioned", "incremental"},
    ),
}


@pytest.mark.parametrize("seed", [7, 31])
def test_an_aggregate_in_a_with_clause_refreshes_through_its_intermediate(spark, env, monkeypatch, seed):
    """Randomized histories: the view equal to Spark computing the user's query (types included) and to DuckDB's
    oracle at every refresh; the intermediate refreshed from its state or its groups, the body over it."""
    data, catalog, srcs, rng = _views_over_sources(env, monkeypatch, seed, {n: q for n, (q, _) in CTE_VIEWS.items()})
    customers = srcs["customers"]
    split = intermediate_split(catalog.get("q15"))
    assert split is not None and split.kind == "cte"
    assert [s.name for s in split.inner.sources] == ["orders"]  # (customers is read by the body only)
    assert sorted(s.name for s in split.outer.sources) == ["customers", "rev"]
    reported, t = _refreshed_exactly(spark, catalog, {n: q for n, (q, _) in CTE_VIEWS.items()}, srcs, rng)
    # an update of a column neither part reads (customers.seg): nothing to write, without Spark, though the body
    # has a view source (it did not change)
    t += HOUR
    update_at(customers, {"seg": "'z'"}, "id = 1", t - 60_000)
    for name in CTE_VIEWS:
        res = refresh(catalog.get(name), t, catalog=catalog, runner="inprocess", spark=spark, run_id="seg")
        assert res.status == "appended", res
        assert "touches no column the query reads" in res.mode_reason, (name, res.mode_reason)
        assert res.spark_jobs == 0, res
    for name, (_, outer_modes) in CTE_VIEWS.items():
        outer = appends(str(data / "views" / name))[:-1]
        inner_all = appends(str(data / "views" / name / INNER_FOLDER))
        assert inner_all[-1]["mode"] == "unchanged", inner_all[-1]  # (orders did not change)
        inner = inner_all[:-1]
        assert outer[0]["mode"] == "full" and inner[0]["mode"] == "full", (name, outer[0], inner[0])
        assert {a["mode"] for a in outer[1:]} <= outer_modes | {"unchanged"}, (name, outer)
        inner_modes = {"incremental:aggregate", "incremental:groups", "incremental:partitioned", "unchanged"}
        assert {a["mode"] for a in inner[1:]} <= inner_modes, (name, [a["mode_reason"] for a in inner])
        assert {a["mode"] for a in inner[1:]} - {"unchanged"}, (name, inner)  # (some refreshed incrementally)
        if name == "q15":  # (the body's full diff by DuckDB without Spark, from the facts its first build kept)
            free = [a for a in outer[1:] if "a full diff in DuckDB without Spark" in str(a["mode_reason"])]
            assert free, outer
            assert all("customers" in a["reads"] and "_table" in a["reads"] for a in free), free  # (read whole)
        # where the intermediate refreshed incrementally and the body's full diff read a small table beside it,
        # the view's refresh is reported as the intermediate's
        for a, o, mode in zip(inner[1:], outer[1:], reported[name][1:], strict=True):
            if a["mode"].startswith("incremental") and o["mode"] in ("full", "unchanged"):
                assert mode == a["mode"], (name, a, o, mode)


HAVING_VIEWS = {
    # TPC-H Q11's shape: the groups above a fraction of the total over the same join (a dimension move changes both)
    # and its types: a DECIMAL(36,2) sum against a DECIMAL(38,6) fraction, which Spark compares at DECIMAL(38,4)
    # (the filter then runs in DuckDB with Spark's casts written out)
    "q11": (
        "SELECT o.cust, sum(CAST(o.qty AS DECIMAL(15,2)) * o.qty) AS value, count(*) AS n FROM orders o, customers c "
        "WHERE o.cust = c.id AND (c.region <> 'us' OR c.region IS NULL) GROUP BY o.cust "
        "HAVING sum(CAST(o.qty AS DECIMAL(15,2)) * o.qty) > (SELECT sum(CAST(o.qty AS DECIMAL(15,2)) * o.qty) "
        "* 0.2500000000 FROM orders o, customers c "
        "WHERE o.cust = c.id AND (c.region <> 'us' OR c.region IS NULL)) ORDER BY value DESC",
        2,
    ),
    # two subqueries (two one-row intermediates), a count and a MAX against an AVG (of integers: an AVG of doubles
    # is recomputed, a full diff where it has no group keys)
    "two": (
        "SELECT status, count(*) AS n, max(price) AS mx FROM orders GROUP BY status "
        "HAVING count(*) * 4 >= (SELECT count(*) FROM orders) AND max(price) >= (SELECT avg(qty) FROM orders)",
        3,
    ),
}


@pytest.mark.parametrize("seed", [5, 17])
def test_a_having_over_scalar_subqueries_refreshes_through_its_intermediates(spark, env, monkeypatch, seed):
    """Randomized histories: the view equal to Spark computing the user's query (types included) and to DuckDB's
    oracle at every refresh; its groups and each subquery's one row kept in intermediate tables refreshed from their
    state, the HAVING's filter over them."""
    monkeypatch.setenv("MVSINK_INTERMEDIATE_HAVING", "true")
    queries = {n: q for n, (q, _) in HAVING_VIEWS.items()}
    data, catalog, srcs, rng = _views_over_sources(env, monkeypatch, seed, queries, retain_history="30m")
    split = intermediate_split(catalog.get("two"))
    assert split is not None and split.kind == "having"
    assert [v.name for v in split.inners] == ["two__mv_inner", "two__mv_inner2", "two__mv_inner3"]
    assert [s.name for s in split.outer.sources] == [v.name for v in split.inners]
    reported, t = _refreshed_exactly(spark, catalog, {n: q for n, (q, _) in HAVING_VIEWS.items()}, srcs, rng)
    for name, (_, parts) in HAVING_VIEWS.items():
        outer = appends(str(data / "views" / name))
        folders = [INNER_FOLDER] + [f"{INNER_FOLDER}{i}" for i in range(2, parts + 1)]
        inners = [appends(str(data / "views" / name / f)) for f in folders]
        assert all(len(h) == len(outer) for h in inners), (name, [len(h) for h in inners])
        assert outer[0]["mode"] == "full" and all(h[0]["mode"] == "full" for h in inners), name
        modes = {"incremental:aggregate", "incremental:groups", "incremental:partitioned", "unchanged"}
        for h in inners:
            assert {a["mode"] for a in h[1:]} <= modes, (name, [a["mode_reason"] for a in h])
        assert any(a["mode"].startswith("incremental") for h in inners for a in h[1:]), name
        # the filter reads the intermediates only: where they refreshed incrementally, so did the view
        for a in outer[1:]:
            assert set(a["reads"]) <= {v.name for v in intermediate_split(catalog.get(name)).inners} | {"_table"}, a
            assert a["mode"] == "unchanged" or FILTER_RECOMPUTED in str(a["mode_reason"]), a
            if name == "q11" and a["mode"] != "unchanged":  # (Spark's rounding casts carried into DuckDB's text)
                assert "in DuckDB" in str(a["mode_reason"]), a["mode_reason"]
        for i, mode in enumerate(reported[name][1:], start=1):
            steps = [h[i]["mode"] for h in inners]
            if "full" not in steps and any(m.startswith("incremental") for m in steps):
                assert mode.startswith("incremental"), (name, i, steps, outer[i], mode)
    # compacting the view compacts every intermediate, each by the view's retain_history; the next refresh is exact
    view = catalog.get("two")
    compact(view, catalog=catalog)
    for part in intermediate_split(view).inners:
        assert ViewTable.open(part).frontier.since == ViewTable.open(view).frontier.since == t - 30 * 60_000, part.name
    t += HOUR
    aggdata.agg_change(rng, srcs["orders"], srcs["customers"], [1000], t - 60_000)
    assert refresh(view, t, catalog=catalog, runner="inprocess", spark=spark, run_id="after").status == "appended"
    assert _view_rows(view, t)[1] == _spark_rows(spark, HAVING_VIEWS["two"][0], srcs)[1]


def test_switching_the_intermediate_off_and_on_keeps_the_view_exact(spark, env, monkeypatch):
    """The view refreshed as one query, then through its intermediate (a new definition: the full diff, over the
    intermediate), then as one query again: equal to Spark's answer each time; the view's name and table unchanged."""
    monkeypatch.setenv("MVSINK_INCREMENTAL_MAX_SCAN_RATIO", "1000")
    monkeypatch.setenv("MVSINK_INCREMENTAL_MAX_FRACTION", "100")
    data, views = env
    rng = random.Random(5)
    orders, customers = aggdata.write_sources(data, rng, 30)
    srcs = {"orders": orders, "customers": customers}
    q, key, _ = VIEWS["q10"]
    write_view(
        views, "v", query=q, sources={s: s for s in srcs}, target="views/v", as_of=BASE, key=key, retain_history="30m"
    )
    view = Catalog(views).get("v")
    next_id, t = [30], BASE + HOUR
    expected_modes = []
    for step, on in enumerate(["false", "false", "true", "true", "false", "true"]):
        monkeypatch.setenv("MVSINK_INTERMEDIATE", on)
        t += HOUR
        aggdata.agg_change(rng, orders, customers, next_id, t - 60_000)
        res = refresh(view, t, runner="inprocess", spark=spark, run_id=f"s{step}")
        assert res.status == "appended", res
        assert ("intermediate table" in res.mode_reason) == (on == "true"), res.mode_reason
        assert _view_rows(view, t)[1] == _spark_rows(spark, q, srcs)[1], step
        expected_modes.append(res.mode)
    history = appends(str(data / "views" / "v"))
    for a, mode in zip(history, expected_modes, strict=True):  # (a top k that did not move: the intermediate's mode)
        assert a["mode"] == mode or (a["mode"] == "unchanged" and mode.startswith("incremental")), (a, mode)
    # a new definition (through the intermediate, or not any more) starts with the full diff
    assert expected_modes[2] == "full" and expected_modes[4] == "full", expected_modes
    assert expected_modes[3] == "incremental:topk", history[3]
    assert Path(data / "views" / "v" / INNER_FOLDER / "_delta_log").is_dir()
    # the intermediate's table is its own, refreshed at the steps that went through it
    assert len(appends(str(data / "views" / "v" / INNER_FOLDER))) == 3
    # compacting the view compacts its intermediate too, by the view's retain_history, held back by the view's upper
    compact(view, catalog=Catalog(views))
    inner_view = intermediate_split(view).inner
    inner_since = ViewTable.open(inner_view).frontier.since
    assert ViewTable.open(view).frontier.since == inner_since == t - 30 * 60_000, inner_since
    assert _view_rows(view, t)[1] == _spark_rows(spark, q, srcs)[1]
    t += HOUR
    aggdata.agg_change(rng, orders, customers, next_id, t - 60_000)
    res = refresh(view, t, runner="inprocess", spark=spark, run_id="after-compaction")
    assert res.mode == "incremental:topk", res
    assert _view_rows(view, t)[1] == _spark_rows(spark, q, srcs)[1]


@pytest.mark.parametrize(
    ("query", "setting"),
    [(CTE_VIEWS["q15"][0], "MVSINK_INTERMEDIATE"), (HAVING_VIEWS["q11"][0], "MVSINK_INTERMEDIATE_HAVING")],
    ids=["with-clause", "having"],
)
def test_switching_a_split_off_and_on_keeps_the_view_exact(spark, env, monkeypatch, query, setting):
    """A WITH clause's or a HAVING's split turned off and on between refreshes: each switch is a new definition (the
    full diff, over the intermediates or the sources), and the view equals Spark's answer after every refresh."""
    monkeypatch.setenv("MVSINK_INTERMEDIATE_HAVING", "false")
    data, views = env
    rng = random.Random(9)
    orders, customers = aggdata.write_sources(data, rng, 30)
    srcs = {"orders": orders, "customers": customers}
    write_view(views, "v", query=query, sources={s: s for s in srcs}, target="views/v", as_of=BASE)
    view = Catalog(views).get("v")
    next_id, t, modes = [30], BASE + HOUR, []
    for step, on in enumerate(["false", "true", "true", "false", "true"]):
        monkeypatch.setenv(setting, on)
        t += HOUR
        aggdata.agg_change(rng, orders, customers, next_id, t - 60_000)
        res = refresh(view, t, runner="inprocess", spark=spark, run_id=f"s{step}")
        assert res.status == "appended", res
        assert ("intermediate table" in res.mode_reason) == (on == "true"), (step, res.mode_reason)
        assert _view_rows(view, t)[1] == _spark_rows(spark, query, srcs)[1], step
        modes.append(appends(str(data / "views" / "v"))[-1]["mode"])
    assert modes[1] == "full" and modes[3] == "full" and modes[4] == "full", modes  # (each switch: a new definition)
    assert len(appends(str(data / "views" / "v" / INNER_FOLDER))) == 3  # (refreshed at the steps through it)


@pytest.mark.unit
def test_the_write_step_in_another_process_finds_the_definition_its_batch_names(tmp_path, monkeypatch):
    from mvsink.definitions.viewfile import load_view_file

    monkeypatch.setenv("MVSINK_DATA_ROOT", str(tmp_path))
    monkeypatch.delenv("MVSINK_INTERMEDIATE", raising=False)
    path = write_view(
        tmp_path,
        "v",
        query=VIEWS["q10"][0],
        sources={"orders": "orders", "customers": "customers"},
        target="views/v",
        as_of=BASE,
        key=["cid"],
    )
    view = load_view_file(path)
    split = intermediate_split(view)
    assert split is not None

    class Desc:
        def __init__(self, name: str, definition: str):
            self.view, self.definition = name, definition

    assert described_view(view, Desc(split.inner.name, split.inner.definition_hash())) == split.inner
    assert described_view(view, Desc("v", split.outer.definition_hash())) == split.outer
    assert described_view(view, Desc("v", view.definition_hash())) == view
    monkeypatch.setenv("MVSINK_INTERMEDIATE", "false")
    assert intermediate_split(view) is None
    assert described_view(view, Desc("v", split.outer.definition_hash())) == view
