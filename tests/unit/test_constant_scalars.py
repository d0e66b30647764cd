"""Which scalar subqueries a partitioned recompute may evaluate once (incremental/scalars.py): uncorrelated, over
unchanged sources only, resolved by SQL's scoping; and the literals written for their values."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from pyspark.sql import types as T

from mvsink.incremental.scalars import constant_candidates, has_scalar_subquery, literal

pytestmark = pytest.mark.unit

COLUMNS = {
    "customer": {"c_custkey", "c_acctbal", "c_phone"},
    "orders": {"o_orderkey", "o_custkey", "o_totalprice"},
    "nation": {"n_nationkey", "n_name"},
}
Q22 = (
    "SELECT cntrycode, count(*) AS n FROM (SELECT substring(c_phone, 1, 2) AS cntrycode, c_acctbal FROM customer "
    "WHERE c_acctbal > (SELECT avg(c_acctbal) FROM customer WHERE c_acctbal > 0.00) "
    "AND NOT EXISTS (SELECT * FROM orders WHERE o_custkey = c_custkey)) AS t GROUP BY cntrycode"
)


def test_q22s_average_is_a_constant_when_customer_did_not_change():
    assert has_scalar_subquery(Q22)
    got = constant_candidates(Q22, COLUMNS, {"customer", "nation"})
    assert len(got) == 1 and "avg(c_acctbal)" in got[0].lower() and "exists" not in got[0].lower()
    assert constant_candidates(Q22, COLUMNS, {"orders", "nation"}) == []  # (customer changed)


@pytest.mark.parametrize(
    "query",
    [
        # correlated: o_custkey is not customer's, so it resolves outside the subquery
        "SELECT * FROM orders WHERE o_totalprice > (SELECT max(c_acctbal) FROM customer WHERE c_custkey = o_custkey)",
        # correlated through a qualifier naming the outer table
        "SELECT * FROM customer c WHERE c_acctbal > (SELECT avg(c_acctbal) FROM customer c2 WHERE c2.c_phone = c.c_phone)",
        # two columns
        "SELECT * FROM customer WHERE c_acctbal > (SELECT c_acctbal, c_phone FROM nation)",
        # a column no source of the subquery has
        "SELECT * FROM customer WHERE c_acctbal > (SELECT max(n_nationkey) + c_custkey FROM nation)",
    ],
)
def test_correlated_or_odd_subqueries_are_not_constants(query):
    assert constant_candidates(query, COLUMNS, {"customer", "orders", "nation"}) == []


def test_in_and_exists_subqueries_are_not_scalars():
    q = "SELECT * FROM customer WHERE c_custkey IN (SELECT o_custkey FROM orders) AND EXISTS (SELECT 1 FROM nation)"
    assert not has_scalar_subquery(q)
    assert constant_candidates(q, COLUMNS, {"customer", "orders", "nation"}) == []


def test_a_nested_constant_is_evaluated_once_with_its_outer_one():
    q = (
        "SELECT * FROM orders WHERE o_totalprice > "
        "(SELECT max(c_acctbal) FROM customer WHERE c_acctbal < (SELECT avg(c_acctbal) FROM customer))"
    )
    got = constant_candidates(q, COLUMNS, {"customer"})
    assert len(got) == 1 and got[0].lower().startswith("select max(c_acctbal)")


@pytest.mark.parametrize(
    "value,dtype,expected",
    [
        (None, T.DecimalType(19, 6), "CAST(NULL AS DECIMAL(19,6))"),
        (Decimal("4999.998700"), T.DecimalType(19, 6), "CAST('4999.998700' AS DECIMAL(19,6))"),
        (Decimal("1E+2"), T.DecimalType(10, 0), "CAST('100' AS DECIMAL(10,0))"),
        (-3, T.IntegerType(), "CAST(-3 AS INT)"),
        (2**40, T.LongType(), "CAST(1099511627776 AS BIGINT)"),
        (0.1, T.DoubleType(), "CAST('0.1' AS DOUBLE)"),
        (float("nan"), T.DoubleType(), "CAST('NaN' AS DOUBLE)"),
        (float("-inf"), T.DoubleType(), "CAST('-Infinity' AS DOUBLE)"),
        (True, T.BooleanType(), "TRUE"),
        (dt.date(1998, 12, 1), T.DateType(), "DATE '1998-12-01'"),
        ("BRAZIL", T.StringType(), "CAST('BRAZIL' AS STRING)"),
        ("it's", T.StringType(), None),
        (dt.datetime(2020, 1, 1), T.TimestampType(), None),
    ],
)
def test_literals_are_exact_or_refused(value, dtype, expected):
    assert literal(value, dtype) == expected
