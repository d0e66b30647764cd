"""Which sources a query is linear in, read from Spark's analyzed plan (incremental refresh needs linearity)."""

from __future__ import annotations

import pytest

from mvsink.plan.linearity import linearity
from tests.support.data import (
    INC_AGG,
    INC_JOIN,
    INC_LEFT,
    INC_UNION,
)

pytestmark = pytest.mark.spark


@pytest.fixture
def plan_views(spark):
    spark.createDataFrame([(1, 1, "A", 1)], "id long, cust int, status string, qty int").createOrReplaceTempView(
        "orders"
    )
    spark.createDataFrame([(1, "eu", 1)], "id int, region string, tier int").createOrReplaceTempView("customers")


@pytest.mark.parametrize(
    "query,source",
    [
        (INC_JOIN, "orders"),
        (INC_JOIN, "customers"),
        (INC_UNION, "orders"),
        (INC_UNION, "customers"),
        (INC_LEFT, "orders"),
        ("SELECT explode(array(qty, qty)) AS q FROM orders ORDER BY q", "orders"),
        ("SELECT o.id FROM orders o LEFT ANTI JOIN customers c ON o.cust = c.id", "orders"),
        (
            "SELECT o.id, n FROM orders o JOIN (SELECT id, count(*) AS n FROM customers GROUP BY id) c ON o.cust = c.id",
            "orders",
        ),
        ("WITH big AS (SELECT * FROM orders WHERE qty > 1) SELECT id FROM big", "orders"),
        ("WITH big AS (SELECT * FROM orders WHERE qty > 1), b2 AS (SELECT id FROM big) SELECT id FROM b2", "orders"),
    ],
)
def test_linear_plans(spark, plan_views, query, source):
    assert linearity(spark, query, [source]) == {source: None}
    assert linearity(spark, query, [source], desired=spark.sql(query)) == {source: None}  # the plan object


@pytest.mark.parametrize(
    "query,source,why",
    [
        (INC_AGG, "orders", "Aggregate"),
        ("SELECT DISTINCT status FROM orders", "orders", "Distinct"),
        (INC_LEFT, "customers", "right side of a LeftOuter join"),
        ("SELECT o.id FROM orders o FULL JOIN customers c ON o.cust = c.id", "orders", "FullOuter"),
        ("SELECT a.id FROM orders a JOIN orders b ON a.cust = b.cust", "orders", "two reads meet in a Join"),
        ("SELECT id FROM orders WHERE cust IN (SELECT id FROM customers)", "customers", "subquery"),
        ("SELECT id, row_number() OVER (ORDER BY id) AS r FROM orders", "orders", "Window"),
        ("SELECT id FROM orders ORDER BY id LIMIT 3", "orders", "Limit"),
        (
            "SELECT o.id FROM orders o JOIN (SELECT id, count(*) AS n FROM customers GROUP BY id) c ON o.cust = c.id",
            "customers",
            "Aggregate",
        ),
        ("SELECT status FROM orders UNION SELECT region FROM customers", "orders", "Distinct"),
        ("SELECT status FROM orders EXCEPT ALL SELECT region FROM customers", "customers", "Except"),
        (
            "WITH big AS (SELECT * FROM orders WHERE qty > 1), b2 AS (SELECT id FROM big) "
            "SELECT id FROM b2 UNION ALL SELECT id FROM big",
            "orders",
            "CTE over 'orders' is read 2 times",
        ),
    ],
)
def test_nonlinear_plans(spark, plan_views, query, source, why):
    reason = linearity(spark, query, [source])[source]
    assert reason is not None and why in reason, reason
    assert linearity(spark, query, [source], desired=spark.sql(query))[source] == reason
