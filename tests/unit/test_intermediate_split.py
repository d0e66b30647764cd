"""Which queries mvsink.definitions.intermediate splits into an aggregate and a top-k over it (failing closed), and
the texts it writes."""

from __future__ import annotations

import pytest

from mvsink.definitions.intermediate import split_cte, split_having, split_query

pytestmark = pytest.mark.unit


def test_a_top_k_over_an_aggregate_keeps_the_users_text_and_writes_spark_defaults_out():
    q = (
        "SELECT c_custkey, sum(l_price * (1 - l_discount)) AS revenue, c_name\n"
        "FROM customer, orders, lineitem WHERE c_custkey = o_custkey AND DATE '1993-10-01' <= o_orderdate\n"
        "GROUP BY c_custkey, c_name\nORDER BY revenue DESC, C_CUSTKEY LIMIT 20;"
    )
    inner, outer = split_query(q, key=("c_custkey",))
    assert inner == q[: q.index("\nORDER BY")]  # the user's own text (FROM a, b; DATE literals), not a rendering
    assert outer == (
        "SELECT `c_custkey`, `revenue`, `c_name` FROM {source} "
        "ORDER BY `revenue` DESC NULLS LAST, `c_custkey` ASC NULLS FIRST LIMIT 20"
    )


def test_nulls_placement_and_ctes_are_kept():
    inner, outer = split_query(
        "WITH t AS (SELECT a, b FROM x ORDER BY a LIMIT 3) SELECT a, count(*) AS n FROM t GROUP BY a HAVING n > 1 "
        "ORDER BY n DESC NULLS FIRST, a ASC NULLS LAST LIMIT 5",
        key=("a",),
    )
    assert (
        inner
        == "WITH t AS (SELECT a, b FROM x ORDER BY a LIMIT 3) SELECT a, count(*) AS n FROM t GROUP BY a HAVING n > 1"
    )
    assert outer.endswith("ORDER BY `n` DESC NULLS FIRST, `a` ASC NULLS LAST LIMIT 5")


@pytest.mark.parametrize(
    "query",
    [
        "SELECT a, count(*) FROM t GROUP BY a ORDER BY a LIMIT 5",  # an item without a name of its own
        "SELECT a, sum(b) AS n FROM t GROUP BY a ORDER BY a LIMIT 5 OFFSET 2",
        "SELECT a, sum(b) AS n FROM t GROUP BY a ORDER BY n + 1, a LIMIT 5",  # an expression
        "SELECT t.a, sum(b) AS n FROM t GROUP BY t.a ORDER BY n, t.a LIMIT 5",  # a qualified name
        "SELECT a, sum(b) AS n FROM t GROUP BY a ORDER BY n, b LIMIT 5",  # not a column of the view
        "SELECT a, sum(b) AS n FROM t ORDER BY n, a LIMIT 5",  # no GROUP BY
        "SELECT a, sum(b) AS n FROM t GROUP BY a ORDER BY n, a",  # no LIMIT
        "SELECT a, sum(b) AS n FROM t GROUP BY a LIMIT 5",  # no ORDER BY
        "SELECT DISTINCT a, sum(b) AS n FROM t GROUP BY a ORDER BY n, a LIMIT 5",
        "SELECT a, rank() OVER (ORDER BY a) AS n FROM t GROUP BY a ORDER BY n, a LIMIT 5",
        "SELECT *, count(*) AS n FROM t GROUP BY a ORDER BY n, a LIMIT 5",
        "SELECT a, sum(b) AS a FROM t GROUP BY a ORDER BY a LIMIT 5",  # a name used twice
        "SELECT a, sum(b) AS _mv_n FROM t GROUP BY a ORDER BY _mv_n, a LIMIT 5",  # a reserved name
        "SELECT a, sum(b) AS n FROM t GROUP BY a UNION ALL SELECT a, 1 AS n FROM u ORDER BY n, a LIMIT 5",
        "SELECT a, sum(b) AS n FROM t GROUP BY a ORDER BY n, a LIMIT 5 + 1",
        "SELECT a, sum(b) AS n FROM t GROUP BY a ORDER BY n, a LIMIT 5; SELECT 1",
    ],
)
def test_other_queries_are_not_split(query):
    assert split_query(query, key=("a",)) is None


def test_the_key_must_be_a_column_of_the_view():
    assert split_query("SELECT a, sum(b) AS n FROM t GROUP BY a ORDER BY n, a LIMIT 5", key=("b",)) is None
    assert split_query("SELECT a, sum(b) AS n FROM t GROUP BY a ORDER BY n, a LIMIT 5", key=("A",)) is not None


Q15 = """WITH revenue0 AS (
  SELECT l_suppkey AS supplier_no, sum(l_extendedprice * (1 - l_discount)) AS total_revenue FROM lineitem
  WHERE l_shipdate >= DATE '1996-01-01' AND l_shipdate < DATE '1996-04-01' GROUP BY l_suppkey)
SELECT s_suppkey, s_name, s_address, s_phone, total_revenue FROM supplier, revenue0
WHERE s_suppkey = supplier_no AND total_revenue = (SELECT max(total_revenue) FROM revenue0);"""


def test_an_aggregate_in_a_with_clause_is_cut_into_the_users_texts():
    got = split_cte(Q15, sources=["lineitem", "supplier", "nation"])
    assert got is not None
    assert got.name == "revenue0"
    assert got.inner == Q15[Q15.index("SELECT l_suppkey") : Q15.index(")\nSELECT")]
    assert got.outer == Q15[Q15.index("SELECT s_suppkey") : -1]  # (the ';' dropped)
    assert got.inner_reads == {"lineitem"}
    assert got.outer_reads == {"supplier"}  # (nation is read by neither: no source of either view)


@pytest.mark.parametrize(
    "query",
    [
        "WITH r AS (SELECT a, b FROM t) SELECT a FROM r",  # no GROUP BY in the CTE
        "WITH r AS (SELECT a, count(*) FROM t GROUP BY a) SELECT a FROM r",  # an item without a name
        "WITH r AS (SELECT a, sum(b) AS n FROM t GROUP BY a ORDER BY n LIMIT 3) SELECT a FROM r",
        "WITH r AS (SELECT a, sum(b) AS n FROM t GROUP BY a), q AS (SELECT a FROM r) SELECT a FROM q",  # two CTEs
        "WITH r (x, n) AS (SELECT a, sum(b) FROM t GROUP BY a) SELECT x FROM r",  # a column list
        "WITH r AS (SELECT a, sum(b) AS n FROM t GROUP BY a) SELECT a FROM t",  # the CTE not read
        "WITH r AS (SELECT a, sum(b) AS n FROM t GROUP BY a) SELECT a FROM r, other",  # not a source
        "WITH r AS (SELECT a, sum(b) AS n FROM db.t GROUP BY a) SELECT a FROM r",  # a qualified table
        "WITH t AS (SELECT a, sum(b) AS n FROM u GROUP BY a) SELECT a FROM t",  # named as a source
        "WITH _mv_r AS (SELECT a, sum(b) AS n FROM t GROUP BY a) SELECT a FROM _mv_r",  # a reserved name
        "WITH r AS (SELECT a, sum(b) AS n FROM t GROUP BY a) SELECT a FROM (WITH s AS (SELECT 1 AS a) SELECT a FROM s)",
        "WITH r AS (SELECT DISTINCT a, sum(b) AS n FROM t GROUP BY a) SELECT a FROM r",
        "SELECT a, sum(b) AS n FROM t GROUP BY a",  # no WITH
    ],
)
def test_other_with_clauses_are_not_split(query):
    assert split_cte(query, sources=["t", "u"]) is None


Q11 = """SELECT ps_partkey, sum(ps_supplycost * ps_availqty) AS value
FROM partsupp, supplier, nation
WHERE ps_suppkey = s_suppkey AND s_nationkey = n_nationkey AND n_name = 'GERMANY'
GROUP BY ps_partkey HAVING sum(ps_supplycost * ps_availqty) > (
  SELECT sum(ps_supplycost * ps_availqty) * 0.0001 FROM partsupp, supplier, nation
  WHERE ps_suppkey = s_suppkey AND s_nationkey = n_nationkey AND n_name = 'GERMANY')
ORDER BY value DESC;"""
Q11_SOURCES = ["partsupp", "supplier", "nation", "lineitem"]


def test_a_having_over_a_scalar_subquery_is_cut_into_groups_a_total_and_a_filter():
    got = split_having(Q11, sources=Q11_SOURCES, view="q11")
    assert got is not None
    assert got.inner == Q11[: Q11.index(" HAVING")]  # the user's text: every group
    assert got.inner_reads == {"partsupp", "supplier", "nation"}
    sub = Q11[Q11.index("SELECT sum(ps_supplycost * ps_availqty) * 0.0001") : Q11.index("'GERMANY')") + 9]
    assert got.scalars == ((sub.replace(" FROM", " AS scalar_1 FROM", 1), frozenset(got.inner_reads)),)
    assert got.outer == (
        "SELECT `ps_partkey`, `value` FROM `q11__mv_inner`, `q11__mv_inner2` "
        "WHERE `value` > `q11__mv_inner2`.`scalar_1`"  # (an ORDER BY without a LIMIT: left out)
    )


def test_a_having_with_group_keys_counts_and_two_subqueries():
    q = (
        "SELECT a, count(*) AS n, sum(b) AS s FROM t WHERE b > 0 GROUP BY a "
        "HAVING a <> 3 AND COUNT(*) > 2 AND sum(b) < (SELECT avg(b) AS mean FROM t) * 3 "
        "OR sum(b) = (select max(b) from t, u where t.a = u.a)"
    )
    got = split_having(q, sources=["t", "u"], view="v")
    assert got is not None
    assert got.inner == "SELECT a, count(*) AS n, sum(b) AS s FROM t WHERE b > 0 GROUP BY a"
    assert [s for s, _ in got.scalars] == [
        "SELECT avg(b) AS mean FROM t",  # (its own name)
        "select max(b) AS scalar_1 from t, u where t.a = u.a",
    ]
    assert [r for _, r in got.scalars] == [{"t"}, {"t", "u"}]
    assert got.outer == (
        "SELECT `a`, `n`, `s` FROM `v__mv_inner`, `v__mv_inner2`, `v__mv_inner3` WHERE a <> 3 AND `n` > 2 AND "
        "`s` < `v__mv_inner2`.`mean` * 3 OR `s` = `v__mv_inner3`.`scalar_1`"
    )


@pytest.mark.parametrize(
    "query",
    [
        "SELECT a, sum(b) AS s FROM t GROUP BY a HAVING sum(b) > 5",  # no subquery: the aggregate mode's
        "SELECT a, sum(b) AS s FROM t GROUP BY a HAVING sum(b) > (SELECT avg(c) FROM u)",  # t not read: correlated?
        "SELECT a, sum(b) AS s FROM t x GROUP BY a HAVING sum(b) > (SELECT avg(b) FROM t WHERE t.a = x.a)",
        "SELECT a, sum(b) AS s FROM t GROUP BY a HAVING a IN (SELECT a FROM t)",
        "SELECT a, sum(b) AS s FROM t GROUP BY a HAVING EXISTS (SELECT 1 FROM t)",
        "SELECT a, sum(b) AS s FROM t GROUP BY a HAVING sum(b) > (SELECT max(b) FROM t GROUP BY a)",
        "SELECT a, sum(b) AS s FROM t GROUP BY a HAVING sum(b) > (SELECT b FROM t)",  # not one row
        "SELECT a, sum(b) AS s FROM t GROUP BY a HAVING sum(b) > (SELECT b + max(b) FROM t)",
        "SELECT a, sum(b) AS s FROM t GROUP BY a HAVING max(b) > (SELECT avg(b) FROM t)",  # not a view's column
        "SELECT a, sum(b) AS s FROM t GROUP BY a HAVING s > (SELECT avg(b) FROM t)",  # an alias (ambiguous)
        "SELECT a, sum(b) AS s FROM t GROUP BY a HAVING sum(b) > (SELECT avg(s) FROM t)",  # an alias's name
        "SELECT a, sum(b) AS s FROM t GROUP BY a HAVING sum(b) > (SELECT avg(b) FROM t) LIMIT 3",
        "SELECT a, sum(b) AS s FROM t GROUP BY a HAVING sum(b) > (SELECT avg(b) FROM t) ORDER BY s + 1",
        "SELECT a, sum(b) AS s FROM t GROUP BY a HAVING sum(b) > (SELECT avg(b) FROM (SELECT b FROM t))",
        "SELECT DISTINCT a, sum(b) AS s FROM t GROUP BY a HAVING sum(b) > (SELECT avg(b) FROM t)",
        "SELECT a, sum(b) FROM t GROUP BY a HAVING sum(b) > (SELECT avg(b) FROM t)",  # an item without a name
        "SELECT a, sum(b) AS s FROM db.t GROUP BY a HAVING sum(b) > (SELECT avg(b) FROM db.t)",
        "SELECT a, sum(b) AS s FROM t GROUP BY a HAVING sum(b) > (SELECT avg(b) FROM t, other)",  # not a source
        "SELECT a, sum(b) AS s, max(b) AS scalar_1 FROM t GROUP BY a HAVING sum(b) > (SELECT avg(b) AS s FROM t)",
        "WITH w AS (SELECT a, b FROM t) SELECT a, sum(b) AS s FROM w GROUP BY a HAVING sum(b) > (SELECT 1 FROM t)",
        "SELECT a, sum(b) AS s FROM t GROUP BY a HAVING sum(b) > (SELECT avg(b) OVER () FROM t)",
    ],
)
def test_other_havings_are_not_split(query):
    assert split_having(query, sources=["t", "u"], view="v") is None
