"""A small aggregate refresh without Spark (write/driver.py, incremental/driverfacts.py): once the first build (or a
Spark refresh) kept the plan facts, the next refreshes of the same definition over the same source schemas compute and stage their
corrections in the refreshing process. Each refresh is exact against DuckDB's oracle and leaves the table (visible
columns and hidden state) equal to a twin refreshed by Spark (``MVSINK_SPARK_FREE=false``); the facts expire with
a source's schema change and with ``MVSINK_PLAN_FACTS_MAX_AGE``; a command-line refresh without Spark imports no
pyspark and needs no Spark Connect server."""

from __future__ import annotations

import logging
import random
from collections import Counter

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from mvsink.columns import DIFF, TIME
from mvsink.core.table import ViewTable
from mvsink.definitions.catalog import Catalog
from mvsink.incremental import decodedcopies, sharedreads
from mvsink.incremental.driverfacts import FOLDER
from mvsink.readers.arrow import read_view
from mvsink.write.explain import explain_view
from mvsink.write.runners import refresh
from tests.spark.test_pruned_joins import BAND, BANDS, banded_lake, rf_pair
from tests.support.cli import refresh_without_server
from tests.support.delta import BASE, HOUR, delete_at, stamp, update_at
from tests.support.oracle import multiset, oracle
from tests.support.viewfiles import write_view

pytestmark = pytest.mark.spark

JOIN = """SELECT o_custkey, o_orderdate, sum(l_price * (1 - l_qty)) AS revenue, count(*) AS n, avg(l_price) AS p,
       avg(l_qty) AS q, count(l_suppkey) AS s, 100.00 * sum(l_price * (1 - l_qty)) / sum(l_price) AS share
FROM customer JOIN orders ON c_custkey = o_custkey JOIN lineitem ON l_orderkey = o_orderkey
WHERE c_mktsegment = 'B' AND l_price > 20
GROUP BY o_custkey, o_orderdate"""
GLOBAL = "SELECT count(*) AS n, sum(l_price) AS s, avg(l_price) AS p, avg(l_qty) AS q FROM lineitem"
ONE = "SELECT l_suppkey, sum(l_qty) AS qty, count(*) AS n FROM lineitem WHERE l_qty > 1 GROUP BY l_suppkey"
SCALED = """SELECT o_custkey, sum(l_price) * 2 AS p2, round(sum(l_price), 1) AS r
FROM orders JOIN lineitem ON l_orderkey = o_orderkey GROUP BY o_custkey"""
# MIN/MAX kept in the state (RF2 deletes the oldest orders: never a supplier's newest order nor all its lines of
# its highest line number), finalised in Python
MINMAX = """SELECT l_suppkey, max(l_orderkey) AS newest, max(l_line) AS top_line, min(l_qty) AS least_qty, count(*) AS n
FROM lineitem GROUP BY l_suppkey"""
LINEAR = """SELECT o_orderkey, o_custkey, o_orderdate, l_line, l_price * l_qty AS v, c_mktsegment
FROM customer JOIN orders ON c_custkey = o_custkey JOIN lineitem ON l_orderkey = o_orderkey WHERE l_qty > 1"""

VIEWS = {  # name: (query, sources, refreshed without Spark once facts are kept?)
    "join": (JOIN, ("customer", "orders", "lineitem"), True),
    "global": (GLOBAL, ("lineitem",), True),
    "one": (ONE, ("lineitem",), True),
    # decimal arithmetic over SUMs is finalised in Python (join's share, Spark's decimal division), ROUND by Spark
    "scaled": (SCALED, ("orders", "lineitem"), False),
    "minmax": (MINMAX, ("lineitem",), True),
    "linear": (LINEAR, ("customer", "orders", "lineitem"), True),  # the linear mode
}
WITHOUT = "without Spark"


def _reason(view) -> str:
    info = ViewTable.open(view).history(limit=1)[0].info
    return (info.mode_reason if info else None) or ""


def _state(view, t: int) -> Counter:
    """The table's consolidated rows at ``t``, hidden state included."""
    table = ViewTable.open(view)
    rows = table.updates_before([c for c in table.column_names if c not in (TIME, DIFF)], lower=t + 1)
    return Counter({k: v for k, v in multiset_signed(rows).items() if v})


def multiset_signed(rows: pa.Table) -> Counter:
    out: Counter = Counter()
    for r in rows.to_pylist():
        d = r.pop(DIFF)
        out[tuple(r.values())] += d
    return out


def _lake(data, views, rng: random.Random) -> tuple[Catalog, dict[str, str]]:
    banded_lake(data, rng, BANDS)  # (with the change data feed: updates and deletes leave change files)
    for name, (query, sources, _) in VIEWS.items():
        for suffix in ("", "_spark"):
            write_view(
                views,
                name + suffix,
                query=query,
                sources={s: s for s in sources},
                target=f"views/{name}{suffix}",
                as_of=BASE,
            )
    return Catalog(views), {n: str(data / n) for n in ("customer", "orders", "lineitem")}


def _refresh_both(spark, catalog: Catalog, name: str, t: int, monkeypatch):
    monkeypatch.setenv("MVSINK_SPARK_FREE", "true")
    res = refresh(catalog.get(name), t, catalog=catalog, runner="inprocess", spark=spark)
    monkeypatch.setenv("MVSINK_SPARK_FREE", "false")
    twin = refresh(catalog.get(name + "_spark"), t, catalog=catalog, runner="inprocess", spark=spark)
    monkeypatch.setenv("MVSINK_SPARK_FREE", "true")
    assert res.status == twin.status == "appended", (name, res, twin)
    return res, twin


def _check(catalog: Catalog, paths: dict[str, str], name: str, t: int) -> None:
    query, sources, _ = VIEWS[name]
    view, twin = catalog.get(name), catalog.get(name + "_spark")
    got = multiset(read_view(view, as_of=t))
    assert got == oracle(query, {s: paths[s] for s in sources}, t), name
    assert got == multiset(read_view(twin, as_of=t)), name
    assert read_view(view, as_of=t).schema == read_view(twin, as_of=t).schema, name
    assert _state(view, t) == _state(twin, t), name  # the hidden state too
    assert WITHOUT not in _reason(twin), name


def test_small_aggregate_refreshes_run_without_spark_once_facts_are_kept(spark, env, monkeypatch, caplog):
    data, views = env
    monkeypatch.setenv("MVSINK_INCREMENTAL_PRUNE_MIN_BYTES", "0")  # the test's tables are small
    monkeypatch.setattr(sharedreads, "SHARE_MIN_BYTES", 0)  # (and customer, which two terms read, is read once)
    caplog.set_level(logging.INFO, logger="mvsink.incremental")
    monkeypatch.setenv("MVSINK_INCREMENTAL_MAX_FRACTION", "0.9")
    rng = random.Random(23)
    catalog, paths = _lake(data, views, rng)
    t = BASE + HOUR
    for name, (_, _, spark_free) in VIEWS.items():  # the first build keeps the facts where the terms translate
        res, twin = _refresh_both(spark, catalog, name, t, monkeypatch)
        assert res.mode == twin.mode == "full"
        assert (data / "views" / name / FOLDER).exists() is spark_free, name
        assert not (data / "views" / (name + "_spark") / FOLDER).exists(), name  # (MVSINK_SPARK_FREE=false)
    next_key, oldest = 1 + BANDS * BAND, 1
    for step in range(5):
        t += HOUR // 2
        if step == 3:  # an update: rows move between groups, sums change in place
            where = f"l_line = 1 AND l_orderkey > {BAND} AND l_orderkey <= {2 * BAND}"  # (one band: one file)
            update_at(data / "lineitem", {"l_price": "l_price + 1.25", "l_qty": "l_qty + 1"}, where, t)
            delete_at(data / "lineitem", f"l_orderkey = {oldest + 5}", t + 1)
        else:
            rf_pair(data, rng, range(next_key, next_key + 6), oldest, t)
            next_key, oldest = next_key + 6, oldest + 4
        t += HOUR
        for name, (_, _, spark_free) in VIEWS.items():
            caplog.clear()
            res, twin = _refresh_both(spark, catalog, name, t, monkeypatch)
            shared = "2 terms read customer once" in caplog.text
            assert shared is (step != 3 and name in ("join", "linear")), (name, step, caplog.text)  # (3: one term)
            # customer's rows come from its decoded copy, which the first shared read wrote (customer never changes)
            assert (" written: " in caplog.text) is (shared and step == 0), (name, step, caplog.text)
            mode = "incremental" if name == "linear" else "incremental:aggregate"
            assert res.mode == twin.mode == mode, (name, step, res.reason, twin.reason)
            said = _reason(catalog.get(name))
            assert "change terms evaluated in the driver" in said, (name, said)
            assert res.mode_reason == said and res.to_dict()["mode_reason"] == said  # (the CLI's JSON says it too)
            # the facts the first build kept: no refresh needs Spark
            assert (WITHOUT in said) is spark_free, (name, step, said)
            assert (data / "views" / name / FOLDER).exists() is spark_free, name
            if WITHOUT in said:
                assert res.spark_jobs == 0 and res.timings.get("write.stage") is not None, res
                assert set(res.reads) == set(twin.reads), (res.reads, twin.reads)
            _check(catalog, paths, name, t)
    files = len(list((data / "customer").glob("*.parquet")))  # (customer never changes: all its files live)
    for name in ("join", "linear"):  # a copy per customer file a shared read kept, no more
        assert 1 <= len(list((data / "views" / name / decodedcopies.FOLDER).glob("*.arrow"))) <= files, name


def test_kept_facts_expire_with_a_source_schema_change_and_their_max_age(spark, env, monkeypatch):
    data, views = env
    monkeypatch.setenv("MVSINK_INCREMENTAL_MAX_FRACTION", "0.9")
    rng = random.Random(5)
    catalog, paths = _lake(data, views, rng)
    name = "join"
    t = BASE + HOUR
    _refresh_both(spark, catalog, name, t, monkeypatch)
    next_key, oldest = 1 + BANDS * BAND, 1

    def step(t: int) -> tuple[int, str]:
        nonlocal next_key, oldest
        rf_pair(data, rng, range(next_key, next_key + 6), oldest, t + HOUR // 2)
        next_key, oldest = next_key + 6, oldest + 4
        t += 2 * HOUR
        _refresh_both(spark, catalog, name, t, monkeypatch)
        _check(catalog, paths, name, t)
        return t, _reason(catalog.get(name))

    def outlook() -> str:  # what `mvsink explain` says of the next small refresh
        return explain_view(catalog.get(name), catalog=catalog, spark=spark).without_spark

    # the first build kept the facts
    assert outlook().startswith("yes: a small change of a source is refreshed without Spark"), outlook()
    t, said = step(t)
    assert WITHOUT in said
    t, said = step(t)
    assert WITHOUT in said
    monkeypatch.setenv("MVSINK_SPARK_FREE", "false")
    assert outlook() == "no: refreshes without Spark are off (MVSINK_SPARK_FREE)"
    monkeypatch.setenv("MVSINK_SPARK_FREE", "true")
    # a column added to customer: another schema, so other facts (Spark's refresh again, then without Spark)
    extra = pa.table(
        {
            "c_custkey": pa.array([41], pa.int64()),
            "c_nationkey": pa.array([3], pa.int64()),
            "c_mktsegment": ["B"],
            "c_note": ["new"],
        }
    )
    write_deltalake(str(data / "customer"), extra, mode="append", schema_mode="merge")
    stamp(data / "customer", t + HOUR // 2)
    assert outlook().startswith("no: no plan facts kept"), outlook()  # (another schema: another key)
    t += HOUR  # (the schema change's commit is in this range: the change set is unknown, so the full diff)
    _refresh_both(spark, catalog, name, t, monkeypatch)
    _check(catalog, paths, name, t)
    t, said = step(t)
    assert WITHOUT not in said and "evaluated in the driver" in said, said
    t, said = step(t)
    assert WITHOUT in said
    assert len(list((data / "views" / name / FOLDER).iterdir())) == 2  # one per schema
    monkeypatch.setenv("MVSINK_PLAN_FACTS_MAX_AGE", "0")
    assert "MVSINK_PLAN_FACTS_MAX_AGE" in outlook() and outlook().startswith("no: "), outlook()
    t, said = step(t)
    assert WITHOUT not in said, said  # too old: Spark's refresh, which keeps them again
    monkeypatch.delenv("MVSINK_PLAN_FACTS_MAX_AGE")
    t, said = step(t)
    assert WITHOUT in said


def test_a_command_line_refresh_without_spark_imports_no_pyspark_and_needs_no_server(spark, env, monkeypatch):
    """Issue 35: a refresh whose work runs outside Spark opens no Connect connection: the command line's refresh
    through a Spark Connect address where nothing listens succeeds, importing neither pyspark nor sqlglot."""
    data, views = env
    monkeypatch.setenv("MVSINK_INCREMENTAL_MAX_FRACTION", "0.9")
    rng = random.Random(8)
    catalog, paths = _lake(data, views, rng)
    view = catalog.get("join")
    t = BASE + HOUR
    next_key, oldest = 1 + BANDS * BAND, 1
    for _ in range(2):  # the full diff, then Spark's incremental refresh, which keeps the facts
        assert refresh(view, t, catalog=catalog, runner="inprocess", spark=spark).status == "appended"
        rf_pair(data, rng, range(next_key, next_key + 6), oldest, t + HOUR // 2)
        next_key, oldest = next_key + 6, oldest + 4
        t += 2 * HOUR
    result, heavy = refresh_without_server(
        views,
        "join",
        t,
        env_extra={"MVSINK_DATA_ROOT": str(data), "MVSINK_INCREMENTAL_MAX_FRACTION": "0.9"},
        heavy=("pyspark", "sqlglot", "py4j", "grpc"),
    )
    assert heavy == []
    assert (result["status"], result["mode"], result["spark_jobs"]) == ("appended", "incremental:aggregate", 0)
    assert WITHOUT in _reason(view)
    assert multiset(read_view(view, as_of=t)) == oracle(JOIN, paths, t)
