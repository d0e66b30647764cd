"""Which queries mvsink.definitions.intermediate splits into an aggregate and a top-k over it (failing closed), and
the texts it writes."""

from __future__ import annotations

import pytest

from mvsink.definitions.intermediate import split_query

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
