"""The one-term-per-source rewrite of a query (spark/telescope.signed_query): where it applies, and not."""

from __future__ import annotations

import pytest

from mvsink.spark.telescope import signed_query

pytestmark = pytest.mark.unit


def test_a_join_carries_the_changed_sources_sign_as_the_last_column():
    q = "SELECT o.id, c.region FROM orders o JOIN customers c ON o.cust = c.id WHERE o.qty > 0"
    got = signed_query(q, "orders")
    assert got is not None
    assert got.endswith("o._mv_sign AS _mv_diff FROM orders AS o JOIN customers AS c ON o.cust = c.id WHERE o.qty > 0")
    assert "c._mv_sign AS _mv_diff" in (signed_query(q, "CUSTOMERS") or "")


def test_an_unaliased_source_and_explode():
    got = signed_query("SELECT id, explode(tags) AS tag FROM items", "items")
    assert got is not None and got.endswith("items._mv_sign AS _mv_diff FROM items")


@pytest.mark.parametrize(
    "query",
    [
        "SELECT * FROM orders",  # * would pick the sign column up
        "SELECT o.*, c.region FROM orders o JOIN customers c ON o.cust = c.id",
        "SELECT id FROM orders UNION ALL SELECT id FROM orders_archive",  # a set operation
        "WITH x AS (SELECT id FROM orders) SELECT id FROM x",  # a CTE
        "SELECT a.id FROM orders a JOIN orders b ON a.id = b.parent",  # read twice
        "SELECT id FROM (SELECT id FROM orders) t",  # in a subquery
        "SELECT id FROM db.orders",  # another catalog's table
        "SELECT id FROM customers",  # not read at all
        "SELECT id FROM orders WHERE",  # does not parse
    ],
)
def test_refused(query):
    assert signed_query(query, "orders") is None
