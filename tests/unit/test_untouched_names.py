"""The columns a query names (incremental/untouched.py: read_names): every identifier, a star, and the queries whose
result may depend on more than their sources' named columns (refused: None)."""

from __future__ import annotations

import pytest

from mvsink.incremental.untouched import read_names

pytestmark = pytest.mark.unit


def test_every_identifier_of_the_query_is_named_casefolded() -> None:
    got = read_names(
        "SELECT p_Brand, count(DISTINCT ps_suppkey) AS n FROM partsupp JOIN part ON p_partkey = ps_partkey "
        "WHERE ps_suppkey NOT IN (SELECT s_suppkey FROM supplier WHERE s_comment LIKE '%x%') GROUP BY p_brand"
    )
    assert got is not None
    assert {"p_brand", "ps_suppkey", "p_partkey", "ps_partkey", "s_suppkey", "s_comment", "n"} <= got
    assert "p_retailprice" not in got and "x" not in got  # (a string literal names nothing)


def test_a_star_names_every_column() -> None:
    assert "*" in (read_names("SELECT * FROM t") or set())
    assert "*" in (read_names("SELECT t.*, count(*) AS n FROM t GROUP BY a") or set())


def test_an_exists_star_reads_no_column() -> None:
    """EXISTS (SELECT * ...) asks whether a row is found (TPC-H Q21 on a supplier price update: nothing to write);
    a star anywhere else still names every column."""
    q = (
        "SELECT s_name, count(*) AS n FROM supplier, lineitem l1 WHERE s_suppkey = l1.l_suppkey "
        "AND EXISTS (SELECT * FROM lineitem l2 WHERE l2.l_orderkey = l1.l_orderkey) "
        "AND NOT EXISTS (SELECT * FROM lineitem l3 WHERE l3.l_orderkey = l1.l_orderkey) GROUP BY s_name"
    )
    got = read_names(q)
    assert got is not None and "*" not in got and "s_acctbal" not in got
    assert "*" in (read_names("SELECT a FROM t WHERE a IN (SELECT * FROM u)") or set())
    assert "*" in (read_names("SELECT * FROM t WHERE EXISTS (SELECT * FROM u WHERE u.a = t.a)") or set())
    assert "*" in (read_names("SELECT a FROM t WHERE EXISTS (SELECT x FROM (SELECT * FROM u) v)") or set())


def test_count_star_reads_no_column() -> None:
    """count(*) counts rows: an update of columns the query names nowhere leaves it as it was (a delete or an insert
    changes the named columns' rows, so it is still seen)."""
    assert read_names("SELECT a, count(*) AS n FROM t GROUP BY a") == frozenset({"a", "n", "t"})


@pytest.mark.parametrize(
    "query",
    [
        "SELECT my_udf(a) FROM t",  # (an unknown function: its result may be anything)
        "SELECT a, input_file_name() FROM t",
        "SELECT a, _metadata.file_path FROM t",
        "SELECT a FROM t TABLESAMPLE (10 PERCENT)",
        "SELECT a FROM t WHERE",  # (does not parse)
    ],
)
def test_queries_that_read_more_than_named_columns_are_refused(query: str) -> None:
    assert read_names(query) is None
