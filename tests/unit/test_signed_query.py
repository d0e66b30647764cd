"""The one-term-per-source rewrite of a query (spark/telescope.signed_query): where it applies, and not."""

from __future__ import annotations

import pytest

from mvsink.incremental.telescope import signed_query

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
        "SELECT id FROM (SELECT id FROM orders GROUP BY id) t",  # under an aggregate
        "SELECT id FROM (SELECT sum(id) AS id FROM orders) t",
        "SELECT id, count(*) AS n FROM (SELECT id FROM orders) t GROUP BY id",
        "SELECT DISTINCT id FROM (SELECT id FROM orders) t",
        "SELECT id FROM (SELECT id FROM orders LIMIT 3) t",
        "SELECT t.id FROM (SELECT id FROM orders) t JOIN customers c ON t.id = c.id",  # a join beside it
        "SELECT id FROM (SELECT id FROM orders) t WHERE id IN (SELECT id FROM orders)",  # read twice
        "SELECT id FROM (SELECT id FROM (SELECT id, 1 AS x FROM customers) u) t",  # not read
        "SELECT id FROM db.orders",  # another catalog's table
        "SELECT id FROM customers",  # not read at all
        "SELECT id FROM orders WHERE",  # does not parse
    ],
)
def test_refused(query):
    assert signed_query(query, "orders") is None


def test_a_derived_table_carries_the_sign_through_its_alias():
    """TPC-H Q7/Q8/Q9's shape: a projection (and filter) of one SELECT block over the sources."""
    got = signed_query(
        "SELECT y, CASE WHEN n = 'B' THEN v ELSE 0 END AS a FROM (SELECT extract(year FROM o.d) AS y, c.n, o.v "
        "FROM orders o JOIN customers c ON o.cust = c.id WHERE o.v > 1) AS t WHERE y > 1990",
        ("orders", "customers"),
    )
    assert got == (
        "SELECT y, CASE WHEN n = 'B' THEN v ELSE 0 END AS a, t._mv_diff AS _mv_diff FROM (SELECT EXTRACT(YEAR FROM "
        "o.d) AS y, c.n, o.v, o._mv_sign * c._mv_sign AS _mv_diff FROM orders AS o JOIN customers AS c ON o.cust = "
        "c.id WHERE o.v > 1) AS t WHERE y > 1990"
    )
    nested = signed_query("SELECT id FROM (SELECT id FROM (SELECT id FROM orders) u) t", "orders")
    assert (
        nested
        == "SELECT id, t._mv_diff AS _mv_diff FROM (SELECT id, u._mv_diff AS _mv_diff FROM (SELECT id, orders._mv_sign AS _mv_diff FROM orders) AS u) AS t"
    )


def test_several_sources_carry_the_product_of_their_signs():
    q = (
        "SELECT o.id, l.qty FROM orders o JOIN lineitem l ON l.oid = o.id JOIN customers c ON o.cust = c.id "
        "WHERE c.seg = 'B'"
    )
    got = signed_query(q, ("orders", "lineitem"))
    assert got is not None
    assert "o._mv_sign * l._mv_sign AS _mv_diff FROM orders AS o" in got
    three = signed_query(q, ("orders", "LINEITEM", "customers")) or ""
    assert "o._mv_sign * l._mv_sign * c._mv_sign AS _mv_diff" in three


@pytest.mark.parametrize(
    ("query", "sources"),
    [
        # a NATURAL join would also join on the two sign columns
        ("SELECT id, qty FROM orders NATURAL JOIN lineitem", ("orders", "lineitem")),
        ("SELECT o.id FROM orders o JOIN lineitem l ON l.oid = o.id", ("orders", "orders")),  # the same source twice
        ("SELECT o.id FROM orders o JOIN (SELECT oid FROM lineitem) l ON l.oid = o.id", ("orders", "lineitem")),
        ("SELECT o.id FROM orders o", ("orders", "lineitem")),  # one of them not read
    ],
)
def test_several_sources_refused(query, sources):
    assert signed_query(query, sources) is None


def test_natural_join_is_fine_for_one_signed_source():
    assert signed_query("SELECT id, qty FROM orders NATURAL JOIN lineitem", "orders") is not None
