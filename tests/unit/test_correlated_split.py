"""The decorrelation of a scalar subquery compared in a WHERE (definitions/correlated.py): the shapes it takes and
the ones it refuses (failing closed). Its equality with Spark is tests/spark/test_intermediate.py's."""

from __future__ import annotations

import pytest
import sqlglot

from mvsink.definitions.correlated import split_correlated

pytestmark = pytest.mark.unit

TPCH = {
    "part": {"p_partkey": "long", "p_mfgr": "string", "p_size": "integer", "p_type": "string"},
    "supplier": {
        "s_suppkey": "long",
        "s_name": "string",
        "s_address": "string",
        "s_nationkey": "long",
        "s_phone": "string",
        "s_acctbal": "decimal(15,2)",
        "s_comment": "string",
    },
    "partsupp": {"ps_partkey": "long", "ps_suppkey": "long", "ps_supplycost": "decimal(15,2)"},
    "nation": {"n_nationkey": "long", "n_name": "string", "n_regionkey": "long"},
    "region": {"r_regionkey": "long", "r_name": "string"},
    "orders": {"id": "long", "cust": "integer", "qty": "integer", "status": "string", "price": "double"},
    "customers": {"id": "integer", "region": "string", "code": "long"},
}

Q2 = """SELECT s_acctbal, s_name, n_name, p_partkey, p_mfgr, s_address, s_phone, s_comment
FROM part, supplier, partsupp, nation, region
WHERE p_partkey = ps_partkey AND s_suppkey = ps_suppkey AND p_size = 15 AND p_type LIKE '%BRASS'
  AND s_nationkey = n_nationkey AND n_regionkey = r_regionkey AND r_name = 'EUROPE'
  AND ps_supplycost = (SELECT min(ps_supplycost) FROM partsupp, supplier, nation, region
    WHERE p_partkey = ps_partkey AND s_suppkey = ps_suppkey AND s_nationkey = n_nationkey
      AND n_regionkey = r_regionkey AND r_name = 'EUROPE')
ORDER BY s_acctbal DESC, n_name, s_name, p_partkey LIMIT 100"""


def _split(q: str):
    return split_correlated(q, columns=TPCH, intermediate="v__mv_inner")


def test_tpch_q2_is_cut_into_the_least_cost_per_part_and_the_query_joining_it():
    got = _split(Q2)
    assert got is not None
    inner = sqlglot.parse_one(got.inner, dialect="spark")
    assert [e.alias for e in inner.expressions] == ["mv_corr_1", "mv_scalar"]
    assert inner.expressions[0].this.sql() == "ps_partkey"  # the inner side of p_partkey = ps_partkey
    assert [g.sql() for g in inner.args["group"].expressions] == ["ps_partkey"]
    assert "p_partkey" not in got.inner  # the correlation is the grouping now
    assert got.inner_reads == {"partsupp", "supplier", "nation", "region"}
    assert got.outer_reads == {"part", "supplier", "partsupp", "nation", "region"}
    outer = sqlglot.parse_one(got.outer, dialect="spark")
    assert outer.find(sqlglot.exp.Subquery) is None
    assert "ps_supplycost = `v__mv_inner`.mv_scalar" in got.outer
    assert "`v__mv_inner`.mv_corr_1 = p_partkey" in got.outer
    assert got.outer.endswith("ORDER BY s_acctbal DESC, n_name, s_name, p_partkey LIMIT 100")


def test_aliases_several_keys_and_an_aggregate_times_a_literal():
    q = (
        "SELECT o.id, o.qty FROM orders o, customers c WHERE o.cust = c.id "
        "AND (SELECT 0.5 * max(o2.qty) FROM orders o2 WHERE o2.cust = c.id AND o2.status = o.status) < o.qty"
    )
    got = _split(q)
    assert got is not None
    inner = sqlglot.parse_one(got.inner, dialect="spark")
    assert [e.this.sql() for e in inner.expressions[:2]] == ["o2.cust", "o2.status"]
    assert "`v__mv_inner`.mv_corr_1 = c.id" in got.outer and "`v__mv_inner`.mv_corr_2 = o.status" in got.outer
    assert "`v__mv_inner`.mv_scalar < o.qty" in got.outer


Q20 = """SELECT s_name, s_address FROM supplier, nation
WHERE s_suppkey IN (SELECT ps_suppkey FROM partsupp
    WHERE ps_partkey IN (SELECT p_partkey FROM part WHERE p_name LIKE 'forest%')
      AND ps_availqty > (SELECT 0.5 * sum(l_quantity) FROM lineitem
        WHERE l_partkey = ps_partkey AND l_suppkey = ps_suppkey
          AND l_shipdate >= DATE '1994-01-01' AND l_shipdate < DATE '1995-01-01'))
  AND s_nationkey = n_nationkey AND n_name = 'CANADA'"""


def test_tpch_q20_is_cut_in_its_in_subquery_and_keeps_its_other_subqueries():
    cols = {
        **TPCH,
        "part": {**TPCH["part"], "p_name": "string"},
        "partsupp": {**TPCH["partsupp"], "ps_availqty": "integer"},
        "lineitem": {"l_partkey": "long", "l_suppkey": "long", "l_quantity": "decimal(15,2)", "l_shipdate": "date"},
    }
    got = split_correlated(Q20, columns=cols, intermediate="v__mv_inner")
    assert got is not None
    inner = sqlglot.parse_one(got.inner, dialect="spark")
    assert [e.alias for e in inner.expressions] == ["mv_corr_1", "mv_corr_2", "mv_scalar"]
    assert [g.sql() for g in inner.args["group"].expressions] == ["l_partkey", "l_suppkey"]
    assert got.inner_reads == {"lineitem"}
    assert got.outer_reads == {"supplier", "nation", "partsupp", "part"}
    outer = sqlglot.parse_one(got.outer, dialect="spark")
    assert len(list(outer.find_all(sqlglot.exp.Subquery))) == 2  # the two INs stay
    host = outer.find(sqlglot.exp.In).args["query"].this
    assert "ps_availqty > `v__mv_inner`.mv_scalar" in host.sql(dialect="spark")
    assert "`v__mv_inner`.mv_corr_1 = ps_partkey AND `v__mv_inner`.mv_corr_2 = ps_suppkey" in host.sql(dialect="spark")
    assert [j.this.name for j in host.args["joins"]] == ["v__mv_inner"]
    assert outer.args.get("joins")[0].this.name == "nation"  # the query's own FROM is unchanged


@pytest.mark.parametrize(
    "q",
    [
        # COUNT is 0 over no rows, not NULL: a row without a match would be kept by Spark, dropped by the join
        "SELECT id FROM orders o WHERE o.qty > (SELECT count(*) FROM customers c WHERE c.id = o.cust)",
        "SELECT id FROM orders o WHERE o.qty > (SELECT coalesce(max(c.code), 0) FROM customers c WHERE c.id = o.cust)",
        # under an OR: a NULL comparison does not drop the row
        "SELECT id FROM orders o WHERE o.qty > 1 OR o.qty = (SELECT max(c.code) FROM customers c WHERE c.id = o.cust)",
        # not a comparison (IS NULL keeps the rows without a match)
        "SELECT id FROM orders o WHERE (SELECT max(c.code) FROM customers c WHERE c.id = o.cust) IS NULL",
        # in the select list
        "SELECT id, (SELECT max(c.code) FROM customers c WHERE c.id = o.cust) AS m FROM orders o",
        # uncorrelated
        "SELECT id FROM orders o WHERE o.qty = (SELECT max(c.code) FROM customers c)",
        # a correlation that is not an equality, or of two types (int and long)
        "SELECT id FROM orders o WHERE o.qty = (SELECT max(c.code) FROM customers c WHERE c.id < o.cust)",
        "SELECT id FROM orders o WHERE o.qty = (SELECT max(c.code) FROM customers c WHERE c.code = o.cust)",
        # an outer name outside the correlation
        "SELECT id FROM orders o WHERE o.qty = (SELECT max(c.code + o.qty) FROM customers c WHERE c.id = o.cust)",
        # an aggregate, a GROUP BY or DISTINCT in the query
        "SELECT o.cust, count(*) AS n FROM orders o WHERE o.qty = (SELECT max(c.code) FROM customers c "
        "WHERE c.id = o.cust) GROUP BY o.cust",
        "SELECT DISTINCT id FROM orders o WHERE o.qty = (SELECT max(c.code) FROM customers c WHERE c.id = o.cust)",
        # a subquery with a GROUP BY, a LIMIT, or a subquery of its own; two subqueries
        "SELECT id FROM orders o WHERE o.qty = (SELECT max(c.code) FROM customers c WHERE c.id = o.cust GROUP BY c.id)",
        "SELECT id FROM orders o WHERE o.qty = (SELECT max(c.code) FROM customers c WHERE c.id = o.cust "
        "AND c.code IN (SELECT id FROM orders))",
        "SELECT id FROM orders o WHERE o.qty = (SELECT max(c.code) FROM customers c WHERE c.id = o.cust) "
        "AND o.qty < (SELECT max(c.code) FROM customers c WHERE c.id = o.cust)",
        # nested: a host with an aggregate, a name of the query outside the host
        "SELECT id FROM orders o WHERE o.id IN (SELECT max(o2.id) FROM orders o2 WHERE o2.qty = "
        "(SELECT max(c.code) FROM customers c WHERE c.id = o2.cust))",
        "SELECT id FROM orders o WHERE o.id IN (SELECT o2.id FROM orders o2 WHERE o2.qty = "
        "(SELECT max(c.code) FROM customers c WHERE c.id = o.cust))",
        # a WITH anywhere
        "WITH x AS (SELECT * FROM customers) SELECT id FROM orders o WHERE o.qty = "
        "(SELECT max(c.code) FROM x c WHERE c.id = o.cust)",
        # a * (the intermediate's columns would be the view's), an unnamed expression
        "SELECT * FROM orders o WHERE o.qty = (SELECT max(c.code) FROM customers c WHERE c.id = o.cust)",
        "SELECT o.qty + 1 FROM orders o WHERE o.qty = (SELECT max(c.code) FROM customers c WHERE c.id = o.cust)",
        # an unknown table, a name in no table, a name two tables of one scope have
        "SELECT id FROM orders o WHERE o.qty = (SELECT max(c.code) FROM lineitem c WHERE c.id = o.cust)",
        "SELECT id FROM orders o WHERE o.qty = (SELECT max(c.code) FROM customers c WHERE c.id = o.nope)",
        "SELECT o.id FROM orders o WHERE o.qty = (SELECT max(code) FROM customers c, orders o2 WHERE id = o.cust)",
        # a join with a condition, an outer join
        "SELECT o.id FROM orders o JOIN customers c ON o.cust = c.id WHERE o.qty = (SELECT max(o2.qty) "
        "FROM orders o2 WHERE o2.cust = c.id)",
        # a DISTINCT aggregate
        "SELECT id FROM orders o WHERE o.qty = (SELECT max(DISTINCT c.code) FROM customers c WHERE c.id = o.cust)",
    ],
)
def test_other_shapes_are_refused(q):
    assert _split(q) is None, q


def test_an_intermediate_column_name_a_source_has_is_refused():
    cols = {**TPCH, "customers": {**TPCH["customers"], "mv_scalar": "long"}}
    q = "SELECT id FROM orders o WHERE o.qty = (SELECT max(c.code) FROM customers c WHERE c.id = o.cust)"
    assert split_correlated(q, columns=TPCH, intermediate="v__mv_inner") is not None
    assert split_correlated(q, columns=cols, intermediate="v__mv_inner") is None
