"""The aggregate's input C that DuckDB's change terms evaluate for the affected groups (incremental:groups): its
keys and every column its aggregates read, over the query's FROM/WHERE; no Spark."""

from __future__ import annotations

import pytest
import sqlglot

from mvsink.incremental.groups import keys_query

pytestmark = pytest.mark.unit


def _select(sql: str) -> list[str]:
    return [e.sql(dialect="spark") for e in sqlglot.parse_one(sql, dialect="spark").expressions]


def test_the_keys_and_every_column_the_aggregates_read_over_from_and_where():
    q = (
        "SELECT o.status AS st, min(o.qty) AS lo, count(DISTINCT o.cust) AS k, sum(o.qty * o.price) AS s, "
        "count(*) FILTER (WHERE o.flag = 1) AS f "
        "FROM orders o JOIN customers c ON o.cust = c.id WHERE c.region = 'eu' "
        "GROUP BY o.status HAVING max(o.day) > 3 ORDER BY st"
    )
    got = keys_query(q, ["st"])
    assert got is not None
    tree = sqlglot.parse_one(got, dialect="spark")
    assert _select(got) == [
        "o.status AS _mv_key_0",
        "o.qty AS _mv_col_0",
        "o.cust AS _mv_col_1",
        "o.price AS _mv_col_2",
        "o.flag AS _mv_col_3",
        "o.day AS _mv_col_4",
    ]
    assert tree.args.get("group") is None and tree.args.get("having") is None and tree.args.get("order") is None
    assert "WHERE c.region = 'eu'" in got and "JOIN customers AS c ON o.cust = c.id" in got


def test_keys_in_the_views_order_and_count_star_alone():
    got = keys_query("SELECT count(*) AS n, b, a FROM t GROUP BY a, b", ["a", "b"])
    assert got is not None and _select(got) == ["a AS _mv_key_0", "b AS _mv_key_1"]


@pytest.mark.parametrize(
    "query,keys",
    [
        ("SELECT a, count(*) AS n FROM t", ["a"]),  # no GROUP BY
        ("SELECT a + 1 AS k, count(*) AS n FROM t GROUP BY a + 1", ["k"]),  # an expression key
        ("SELECT a, count(*) AS n FROM t GROUP BY a", ["n"]),  # not a grouping key
        ("WITH s AS (SELECT * FROM t) SELECT a, count(*) AS n FROM s GROUP BY a", ["a"]),
        ("SELECT a, count(*) AS n FROM t GROUP BY a UNION ALL SELECT a, 1 AS n FROM u", ["a"]),
        ("SELECT a, count(*) AS n FROM t GROUP BY ROLLUP (a)", ["a"]),
        ("SELECT a, count(*) AS n FROM t WHERE b IN (SELECT b FROM u) GROUP BY a", ["a"]),
        ("SELECT a, sum(b) OVER (PARTITION BY a) AS w FROM t GROUP BY a, b", ["a"]),
        ("SELECT a, count(*) AS n FROM t GROUP BY a LIMIT 3", ["a"]),
        ("SELECT DISTINCT a, count(*) AS n FROM t GROUP BY a", ["a"]),
        ("SELECT a FROM", ["a"]),  # does not parse
    ],
)
def test_anything_else_is_left_to_spark(query, keys):
    assert keys_query(query, keys) is None
