"""Linearity on real Spark plans: the JSON tree, the py4j walk and the EXPLAIN text agree, and fail closed."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from mvsink.plan.linearity import linearity, nonlinear_reason
from mvsink.plan.read import plan_tree, tree_from_explain, tree_from_json, tree_from_jvm
from tests.fixtures.plans.regenerate import CASES, register
from tests.support import REPO

pytestmark = pytest.mark.spark

ORD, CUS = "orders", "customers"
INNER = "SELECT o.id, o.amount, c.region FROM orders o JOIN customers c ON o.cust = c.cust WHERE o.amount > 0"
LEFT = "SELECT o.id, c.region FROM orders o LEFT JOIN customers c ON o.cust = c.cust"
RIGHT = "SELECT o.id, c.region FROM orders o RIGHT JOIN customers c ON o.cust = c.cust"
UNION_ALL = "SELECT status AS s FROM orders UNION ALL SELECT region AS s FROM customers"
TWICE_UNION = (  # orders read twice: its reads meet only in the UNION ALL
    "SELECT id, status AS s FROM orders WHERE amount > 1 "
    "UNION ALL SELECT o.id, c.region AS s FROM orders o JOIN customers c ON o.cust = c.cust"
)
UNION = "SELECT status AS s FROM orders UNION SELECT region AS s FROM customers"
CTE_ONCE = "WITH big AS (SELECT * FROM orders WHERE amount > 1) SELECT id FROM big"
CTE_CHAIN = "WITH big AS (SELECT * FROM orders WHERE amount > 1), b2 AS (SELECT id FROM big) SELECT id FROM b2"
CTE_TWICE = "WITH big AS (SELECT * FROM orders WHERE amount > 1) SELECT id FROM big UNION ALL SELECT id FROM big"
AGG_BESIDE = (
    "SELECT o.id, c.n FROM orders o JOIN (SELECT cust, count(*) AS n FROM customers GROUP BY cust) c ON o.cust = c.cust"
)

SUBQUERIES = {
    "scalar": "SELECT id, (SELECT max(cust) FROM customers) AS m FROM orders",
    "exists": "SELECT id FROM orders WHERE EXISTS (SELECT 1 FROM customers WHERE region = 'eu')",
    "in": "SELECT id FROM orders WHERE cust IN (SELECT cust FROM customers)",
    "not in": "SELECT id FROM orders WHERE cust NOT IN (SELECT cust FROM customers)",
    "lateral": "SELECT o.id, x.r FROM orders o, LATERAL (SELECT region AS r FROM customers c WHERE c.cust = o.cust) x",
    "correlated scalar": "SELECT id FROM orders o WHERE amount > (SELECT avg(amount) FROM orders i WHERE i.cust = o.cust)",
    "correlated exists": "SELECT id FROM orders o WHERE EXISTS (SELECT 1 FROM customers c WHERE c.cust = o.cust)",
    "in select list": "SELECT id, cust IN (SELECT cust FROM customers) AS known FROM orders",
}


@pytest.fixture(scope="module")
def views(spark, tmp_path_factory):
    register(spark, tmp_path_factory.mktemp("plans"))
    spark.createDataFrame([(1, [1, 2])], "id long, xs array<int>").createOrReplaceTempView("baskets")


def _all_ways(spark, query: str, source: str) -> list[str | None]:
    """The verdict from linearity() (JSON), with desired=, from the py4j walk and from EXPLAIN EXTENDED text."""
    df = spark.sql(query)
    text = spark.sql("EXPLAIN EXTENDED " + query).collect()[0][0]
    jvm = tree_from_jvm(df._jdf.queryExecution().analyzed())
    return [
        linearity(spark, query, [source])[source],
        linearity(spark, query, [source], desired=df)[source],
        nonlinear_reason(jvm, source),
        nonlinear_reason(tree_from_explain(text), source),
    ]


@pytest.mark.parametrize(
    "query,source",
    [
        ("SELECT id, amount * 2 AS a, upper(status) AS s FROM orders WHERE status = 'A' AND amount > 1", ORD),
        (INNER, ORD),
        (INNER, CUS),
        ("SELECT o.id FROM orders o CROSS JOIN customers c", CUS),
        (LEFT, ORD),
        (RIGHT, CUS),
        ("SELECT o.id FROM orders o LEFT SEMI JOIN customers c ON o.cust = c.cust", ORD),
        ("SELECT o.id FROM orders o LEFT ANTI JOIN customers c ON o.cust = c.cust", ORD),
        (UNION_ALL, ORD),
        (UNION_ALL, CUS),
        (CTE_ONCE, ORD),
        (CTE_CHAIN, ORD),
        ("SELECT id, explode(array(amount, amount + 1)) AS q FROM orders ORDER BY q", ORD),
        ("SELECT b.id, x FROM baskets b LATERAL VIEW explode(xs) t AS x", "baskets"),
        ("SELECT id, pos, x FROM baskets LATERAL VIEW OUTER posexplode(xs) t AS pos, x", "baskets"),
        (AGG_BESIDE, ORD),
        ("SELECT /*+ BROADCAST(c) */ o.id, c.region FROM orders o JOIN customers c ON o.cust = c.cust", ORD),
        ("SELECT /*+ REPARTITION(3, cust) */ * FROM orders DISTRIBUTE BY id SORT BY id", ORD),
        ("SELECT o.id, p.amount FROM orders o JOIN porders p ON o.id = p.id", "porders"),
        ("SELECT id FROM Orders WHERE CASE WHEN amount > 1 THEN true ELSE coalesce(status, 'x') = 'A' END", ORD),
        # a source read in several branches of a UNION ALL: every row comes from one read
        ("SELECT id FROM orders UNION ALL SELECT id FROM orders", ORD),
        (TWICE_UNION, ORD),
        (TWICE_UNION, CUS),
        (f"SELECT a.id FROM ({TWICE_UNION}) a JOIN orders b ON a.id = b.id", CUS),
    ],
)
def test_linear(spark, views, query, source):
    assert _all_ways(spark, query, source) == [None] * 4


@pytest.mark.parametrize(
    "query,source,why",
    [
        (LEFT, CUS, "right side of a LeftOuter join"),
        (RIGHT, ORD, "left side of a RightOuter join"),
        ("SELECT o.id FROM orders o FULL JOIN customers c ON o.cust = c.cust", ORD, "FullOuter"),
        ("SELECT o.id FROM orders o LEFT SEMI JOIN customers c ON o.cust = c.cust", CUS, "right side of a LeftSemi"),
        ("SELECT o.id FROM orders o LEFT ANTI JOIN customers c ON o.cust = c.cust", CUS, "right side of a LeftAnti"),
        (UNION, ORD, "a Distinct is computed over 'orders'"),
        (UNION, CUS, "a Distinct is computed over 'customers'"),
        ("SELECT cust, sum(amount) AS s FROM orders GROUP BY cust", ORD, "an Aggregate is computed over 'orders'"),
        ("SELECT count(*) FROM orders", ORD, "Aggregate"),
        (AGG_BESIDE, CUS, "Aggregate"),
        ("SELECT DISTINCT status FROM orders", ORD, "a Distinct is computed over 'orders'"),
        ("SELECT id, row_number() OVER (PARTITION BY cust ORDER BY id) AS r FROM orders", ORD, "a Window is computed"),
        ("SELECT id FROM orders ORDER BY id LIMIT 3", ORD, "Limit is computed over 'orders'"),
        ("SELECT id FROM orders LIMIT 3 OFFSET 1", ORD, "Offset is computed over 'orders'"),
        ("SELECT * FROM orders TABLESAMPLE (50 PERCENT)", ORD, "a Sample is computed over 'orders'"),
        ("SELECT status FROM orders EXCEPT ALL SELECT region FROM customers", CUS, "Except"),
        ("SELECT status FROM orders INTERSECT SELECT region FROM customers", ORD, "Intersect"),
        ("SELECT cust, count(*) FROM orders GROUP BY ROLLUP (cust)", ORD, "is computed over 'orders'"),
        (CTE_TWICE, ORD, "a CTE over 'orders' is read 2 times"),
        (CTE_CHAIN + " UNION ALL SELECT id FROM big", ORD, "a CTE over 'orders' is read 2 times"),
        ("SELECT a.id FROM orders a JOIN orders b ON a.cust = b.cust", ORD, "source 'orders' is read 2 times"),
        (f"SELECT a.id FROM ({TWICE_UNION}) a JOIN orders b ON a.id = b.id", ORD, "two reads meet in a Join"),
        ("SELECT id FROM orders", CUS, "source 'customers' is not read"),
        # nondeterministic, or changing between evaluations
        ("SELECT id, rand() AS r FROM orders", ORD, "not deterministic or depends on the time or session (Rand)"),
        ("SELECT id FROM orders WHERE uuid() <> ''", ORD, "(Uuid)"),
        ("SELECT id, current_timestamp() AS t FROM orders", ORD, "(CurrentTimestamp)"),
        (
            "SELECT o.id, c.r FROM orders o JOIN (SELECT cust, rand() AS r FROM customers) c ON o.cust = c.cust",
            ORD,
            "(Rand)",
        ),
        # an input beside the source that may return other rows in each change term
        ("SELECT o.id FROM orders o JOIN (SELECT * FROM customers LIMIT 1) c ON o.cust = c.cust", ORD, "Limit may"),
    ],
)
def test_not_linear(spark, views, query, source, why):
    reasons = _all_ways(spark, query, source)
    assert all(r is not None and why in r for r in reasons), reasons
    assert reasons[0] == reasons[1] == reasons[2], reasons  # the JSON and the plan object give the same tree


@pytest.mark.parametrize("kind", sorted(SUBQUERIES))
@pytest.mark.parametrize("source", [ORD, CUS])
def test_every_subquery_kind_is_not_linear_in_any_source(spark, views, kind, source):
    reasons = _all_ways(spark, SUBQUERIES[kind], source)
    assert all(r is not None and "the query has a subquery" in r for r in reasons), reasons


@pytest.mark.parametrize(
    "kind,names",
    [
        ("scalar", {"ScalarSubquery"}),
        ("exists", {"Exists"}),
        ("in", {"InSubquery", "ListQuery"}),  # JSON: InSubquery(values, ListQuery); the text shows list#
        ("lateral", {"LateralJoin", "LateralSubquery"}),
        ("correlated exists", {"Exists", "OuterReference"}),
    ],
)
def test_subquery_reason_names_the_kind(spark, views, kind, names):
    for r in _all_ways(spark, SUBQUERIES[kind], ORD):
        assert r is not None and r.split("(")[-1].rstrip(")") in names, r


def test_correlation_is_found_inside_the_subquery_plan(spark, views):
    tree = plan_tree(spark, SUBQUERIES["correlated exists"])
    assert any(e.plans for n in tree.walk() for e in n.all_expressions()), "the Exists expression carries its plan"
    assert any(e.name == "OuterReference" for n in tree.walk() for e in n.all_expressions())
    text = spark.sql("EXPLAIN EXTENDED " + SUBQUERIES["correlated exists"]).collect()[0][0]
    assert any(e.name == "OuterReference" for n in tree_from_explain(text).walk() for e in n.all_expressions())


def test_trees_agree_on_shape(spark, views):
    """JSON, py4j walk and text give the same operators in the same places."""

    def shape(node):
        return (node.name, node.attrs.get("view"), node.attrs.get("join_type"), [shape(c) for c in node.children])

    for query in (INNER, LEFT, CTE_TWICE, AGG_BESIDE, SUBQUERIES["scalar"]):
        df = spark.sql(query)
        analyzed = df._jdf.queryExecution().analyzed()
        from_json = tree_from_json(str(analyzed.toJSON()))
        from_jvm = tree_from_jvm(analyzed)
        text = spark.sql("EXPLAIN EXTENDED " + query).collect()[0][0]
        from_text = tree_from_explain(text)
        assert shape(from_json) == shape(from_jvm)
        # the text names LogicalRelation "Relation"; nothing else differs
        assert json.dumps(shape(from_json)).replace("LogicalRelation", "Relation") == json.dumps(shape(from_text))


def test_several_sources_at_once(spark, views):
    got = linearity(spark, LEFT, [ORD, CUS])
    assert got[ORD] is None and "right side of a LeftOuter join" in (got[CUS] or "")


def test_fixture_cases_hold_on_live_plans(spark, views):
    """The golden cases, analysed live: the fixtures are not stale for this Spark."""
    for name, case in CASES.items():
        for source, expected in case["expect"].items():
            got = linearity(spark, case["query"], [source])[source]
            assert (got is None) if expected is None else (got is not None and expected in got), (name, source, got)


#: How a session holds ``createDataFrame`` rows: an RDD in a classic session, a LocalRelation over Connect.
LOCAL_DATA = ("LogicalRDD", "LocalRelation")


def plan_shape(tree: Any) -> Any:
    """A plan tree without its session's expression ids and CTE ids: operators in pre-order with their attributes
    and, per operator, its expressions (class, referenced name, attributes such as a literal's type and value)."""
    out = []
    for node in tree.walk():
        attrs = sorted((k, str(v)) for k, v in node.attrs.items() if k != "cte_id")
        if node.name in LOCAL_DATA:  # (the fixture's temp views: local rows, held in either form)
            node, attrs = dataclasses.replace(node, name="local rows"), []
        exprs = [
            [e.name, e.ref[0] if e.ref else None, sorted((k, str(v)) for k, v in e.attrs.items())]
            for e in node.all_expressions()
        ]
        out.append([node.name, attrs, exprs])
    return json.loads(json.dumps(out))


def run_connect_client(script: str) -> Any:
    """Run ``script`` in a Spark Connect client process (it cannot share this process with the classic session);
    the JSON of its last line of output."""
    res = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        timeout=300,
        env=os.environ,
        cwd=REPO,  # `python -c` imports from the working folder first: `tests` is importable
    )
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_spark_connect_reads_the_same_plan_as_a_classic_session(spark, views, connect_url):
    """A real Spark Connect server with mvsink's plugin: every case's analysed plan reaches the client as the same
    tree (operators, expressions, types, literals; ids aside) a classic session reads, with Spark's determinism,
    and linearity() agrees with the expected verdicts."""
    got = run_connect_client(
        f"""
        import json, tempfile
        from pathlib import Path
        from mvsink.spark.connect import remote_session
        from mvsink.plan.linearity import linearity
        from mvsink.plan.read import connect_tree
        from tests.fixtures.plans.regenerate import CASES, register
        from tests.spark.test_plan_analysis import SUBQUERIES, plan_shape
        spark = remote_session("{connect_url}")
        assert type(spark).__module__.startswith("pyspark.sql.connect")
        register(spark, Path(tempfile.mkdtemp()))
        out = {{}}
        for name, query in [*((n, c["query"]) for n, c in CASES.items()), *SUBQUERIES.items()]:
            desired = spark.sql(query)
            tree = connect_tree(desired)
            out[name] = {{
                "shape": plan_shape(tree) if tree is not None else None,
                "deterministic": tree.attrs.get("deterministic") if tree is not None else None,
                "linearity": linearity(spark, query, ["orders", "customers", "porders"], desired=desired),
            }}
        print(json.dumps(out))
        """
    )
    for name, query in [*((n, c["query"]) for n, c in CASES.items()), *SUBQUERIES.items()]:
        classic = plan_tree(spark, query)
        assert got[name]["shape"] == plan_shape(classic), name
        assert got[name]["deterministic"] is classic.attrs["deterministic"] is True, name
        assert got[name]["linearity"] == linearity(spark, query, ["orders", "customers", "porders"]), name
    for name, case in CASES.items():
        for source, expected in case["expect"].items():
            r = got[name]["linearity"][source]
            assert (r is None) if expected is None else (r is not None and expected in r), (name, source, r)


@pytest.mark.slow
def test_spark_connect_refuses_what_is_not_deterministic(connect_url, tmp_path):
    """Over Spark Connect the plan's determinism is Spark's own, as in a classic session: rand() and a
    non-deterministic Python UDF are refused, current_timestamp() is read as depending on the time; a view over
    such a UDF (which the view file's lexical check cannot see) fails its validation with a clear error; a
    deterministic UDF passes (and is not incremental: a UDF is not known to be linear)."""
    from tests.support.delta import BASE
    from tests.support.viewfiles import write_view

    write_view(
        tmp_path,
        "nd_view",
        query="SELECT id, nd(id) AS x FROM orders",
        sources={"orders": "orders"},
        target="views/nd_view",
        as_of=BASE,
    )
    write_view(
        tmp_path,
        "dd_view",
        query="SELECT id, dd(id) AS x FROM orders",
        sources={"orders": "orders"},
        target="views/dd_view",
        as_of=BASE,
    )
    got = run_connect_client(
        f"""
        import json
        from pyspark.sql.functions import udf
        from mvsink.definitions.catalog import Catalog
        from mvsink.exceptions import QueryError
        from mvsink.spark.connect import remote_session
        from mvsink.spark.declaredchecks import plan_deterministic
        from mvsink.spark.validation import analyse
        spark = remote_session("{connect_url}")
        spark.createDataFrame([(1, "a")], "id long, s string").createOrReplaceTempView("orders")
        spark.udf.register("nd", udf(lambda x: x, "long").asNondeterministic())
        spark.udf.register("dd", udf(lambda x: x, "long"))
        from mvsink.plan.linearity import nonlinear_reason
        from mvsink.plan.read import connect_tree
        out = {{}}
        for name, query in {{
            "rand": "SELECT id, rand() AS r FROM orders",
            "now": "SELECT id, current_timestamp() AS t FROM orders",
            "nd udf": "SELECT id, nd(id) AS x FROM orders",
            "nd udf in a filter": "SELECT id FROM orders WHERE nd(id) > 0",
            "dd udf": "SELECT id, dd(id) AS x FROM orders",
            "plain": "SELECT id, upper(s) AS u FROM orders",
        }}.items():
            desired = spark.sql(query)
            out[name] = [plan_deterministic(desired), nonlinear_reason(connect_tree(desired), "orders")]
        # what a server answers for an extension no plugin takes (ours declines other types): the words
        # mvsink.spark.connectplan matches to fall back to the EXPLAIN text on a server without the plugin
        from pyspark.sql.connect.dataframe import DataFrame
        from mvsink.spark.connectplan import NO_HANDLER, _plan_class
        try:
            DataFrame(_plan_class()("type.googleapis.com/mvsink.Unknown", b""), spark).collect()
            out["unknown"] = "answered"
        except Exception as exc:
            out["unknown"] = NO_HANDLER in str(exc)
        catalog = Catalog({str(tmp_path)!r})
        for name in ("nd_view", "dd_view"):
            try:
                analyse(spark, catalog.get(name))
                out[name] = "ok"
            except QueryError as exc:
                out[name] = str(exc)
        print(json.dumps(out))
        """
    )
    # Spark's own verdict (analyzed.deterministic), as in a classic session: current_timestamp() is deterministic
    # within a query for Spark; the plan's reading names it as depending on the time (and the view file's lexical
    # check refuses it before any plan is read: tests/unit/test_view_file_errors.py)
    assert got["rand"][0] is False and "not deterministic or depends on the time or session (Rand)" in got["rand"][1]
    for name in ("nd udf", "nd udf in a filter"):
        assert got[name][0] is False and "user-defined function (PythonUDF)" in got[name][1], (name, got[name])
    assert got["now"][0] is True and "depends on the time or session (CurrentTimestamp)" in got["now"][1], got
    assert got["dd udf"][0] is True and "user-defined function (PythonUDF)" in got["dd udf"][1], got
    assert got["plain"] == [True, None], got
    assert got["nd_view"].startswith("view nd_view: the query is not deterministic"), got
    assert "Fix: make the view a function of its sources" in got["nd_view"], got
    assert got["dd_view"] == "ok", got
    assert got["unknown"] is True, got


def test_user_defined_type_columns_are_read_from_the_json(spark, views):
    """A UDT's JSON carries a "class" too; it is a data type, not a tree node."""
    pytest.importorskip("numpy")
    from pyspark.ml.linalg import Vectors

    spark.createDataFrame([(1, Vectors.dense([1.0, 2.0]))], ["id", "v"]).createOrReplaceTempView("vecs")
    plan_json = str(spark.sql("SELECT id, v FROM vecs WHERE id > 0")._jdf.queryExecution().analyzed().toJSON())
    assert '"udt"' in plan_json
    assert nonlinear_reason(tree_from_json(plan_json), "vecs") is None


def test_a_write_step_reads_the_plan_of_an_analysed_query_once(spark):
    """Within a write step (snapshot_cache) a mode's ``applies`` and its ``run`` share one read of the plan."""
    from mvsink.core.deltalog import snapshot_cache

    df = spark.sql("SELECT id, id * 2 AS twice FROM range(3)")
    with snapshot_cache():
        first = plan_tree(spark, "", desired=df)
        assert plan_tree(spark, "", desired=df) is first
        assert plan_tree(spark, "", desired=spark.sql("SELECT id FROM range(3)")) is not first
    assert plan_tree(spark, "", desired=df) is not first  # outside a write step: read anew
