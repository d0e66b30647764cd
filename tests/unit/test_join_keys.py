"""Which sources a change term may read pruned by join keys (plan/joinkeys.py), on plan trees read from
EXPLAIN text (what Spark Connect gives) and on the keys' ranges (incremental/pruning.py): pure logic."""

from __future__ import annotations

import datetime as dt

import pytest

from mvsink.incremental.keyreads import key_ranges
from mvsink.incremental.pruning import pruned_reads
from mvsink.plan.joinkeys import Column, Edge, join_edges
from mvsink.plan.read import tree_from_explain

pytestmark = pytest.mark.unit

Q3_TEXT = """== Analyzed Logical Plan ==
k: bigint, r: decimal(20,2)
Aggregate [l_orderkey#7L], [l_orderkey#7L AS k#9L, sum(l_price#8) AS r#10]
+- Filter ((c_custkey#1L = o_custkey#5L) AND (c_mktsegment#2 = B))
   +- Join Inner, (l_orderkey#7L = o_orderkey#4L)
      :- Join Inner
      :  :- SubqueryAlias customer
      :  :  +- View (`customer`, [c_custkey#1L, c_mktsegment#2])
      :  :     +- Project [id#0L AS c_custkey#1L, B AS c_mktsegment#2]
      :  :        +- Range (0, 10, step=1, splits=Some(1))
      :  +- SubqueryAlias orders
      :     +- View (`orders`, [o_orderkey#4L, o_custkey#5L])
      :        +- Project [id#3L AS o_orderkey#4L, id#3L AS o_custkey#5L]
      :           +- Range (0, 10, step=1, splits=Some(1))
      +- SubqueryAlias lineitem
         +- View (`lineitem`, [l_orderkey#7L, l_price#8])
            +- Project [id#6L AS l_orderkey#7L, cast((id#6L * cast(2 as bigint)) as decimal(10,2)) AS l_price#8]
               +- Range (0, 10, step=1, splits=Some(1))
"""

LEFT_TEXT = """== Analyzed Logical Plan ==
a: bigint, b: bigint
Project [o_orderkey#4L AS a#20L, l_orderkey#7L AS b#21L]
+- Join LeftOuter, (l_orderkey#7L = o_orderkey#4L)
   :- SubqueryAlias orders
   :  +- View (`orders`, [o_orderkey#4L, o_custkey#5L])
   :     +- Range (0, 10, step=1, splits=Some(1))
   +- SubqueryAlias lineitem
      +- View (`lineitem`, [l_orderkey#7L, l_price#8])
         +- Range (0, 10, step=1, splits=Some(1))
"""


def e(keys: str, target: str) -> Edge:
    (ks, kc), (ts, tc) = keys.split("."), target.split(".")
    return Edge(Column(ks, kc), Column(ts, tc))


def test_comma_and_on_joins_give_edges_both_ways_from_the_explain_text():
    edges = set(join_edges(tree_from_explain(Q3_TEXT)))
    assert edges == {
        e("orders.o_orderkey", "lineitem.l_orderkey"),
        e("lineitem.l_orderkey", "orders.o_orderkey"),
        e("orders.o_custkey", "customer.c_custkey"),
        e("customer.c_custkey", "orders.o_custkey"),
    }


def test_terms_chain_their_lookups():
    edges = join_edges(tree_from_explain(Q3_TEXT))
    # a change of lineitem prunes orders, whose pruned rows then prune customer
    assert pruned_reads(edges, "lineitem") == [
        e("lineitem.l_orderkey", "orders.o_orderkey"),
        e("orders.o_custkey", "customer.c_custkey"),
    ]
    assert {x.target.source for x in pruned_reads(edges, "customer")} == {"orders", "lineitem"}


def test_a_left_join_prunes_only_its_right_side():
    assert join_edges(tree_from_explain(LEFT_TEXT)) == [e("orders.o_orderkey", "lineitem.l_orderkey")]


def test_a_source_read_twice_gives_no_edge():
    text = LEFT_TEXT.replace("`lineitem`, [l_orderkey#7L, l_price#8]", "`orders`, [l_orderkey#7L, l_price#8]")
    assert join_edges(tree_from_explain(text)) == []


def test_an_equality_through_an_expression_gives_no_edge():
    text = Q3_TEXT.replace("(l_orderkey#7L = o_orderkey#4L)", "((l_orderkey#7L + 1) = o_orderkey#4L)")
    edges = join_edges(tree_from_explain(text))
    assert all("lineitem" not in (x.keys.source, x.target.source) for x in edges)


def test_keys_are_split_into_ranges_at_their_largest_gaps():
    # RF1 adds a band of new keys, RF2 deletes the oldest: two narrow ranges, not one over the table
    got = key_ranges([1, 2, 3, 5, 7, 6_000_001, 6_000_003, 6_000_004], max_ranges=2)
    assert got.ranges == ((1, 7), (6_000_001, 6_000_004))
    assert got.values == (1, 2, 3, 5, 7, 6_000_001, 6_000_003, 6_000_004)
    assert got.may_hold(8, 100) is False and got.may_hold(0, 1) is True and got.may_hold(None, 5) is True
    assert key_ranges([None]).empty
    dates = key_ranges([dt.date(1995, 1, 1), dt.date(1995, 1, 2), dt.date(1998, 1, 1)], max_ranges=2)
    assert dates.ranges == ((dt.date(1995, 1, 1), dt.date(1995, 1, 2)), (dt.date(1998, 1, 1), dt.date(1998, 1, 1)))
    words = key_ranges(["b", "a", "z"])
    assert words.ranges == (("a", "z"),)  # no distance between strings: one range, and the exact list
    assert words.values == ("a", "b", "z")
    many = key_ranges(list(range(0, 100_000, 2)))
    assert len(many.ranges) == 32 and many.values is None


def test_integer_keys_become_one_sql_predicate():
    from mvsink.incremental.keyreads import KeyRanges

    few = key_ranges([7, 1, 2, 3, 40], max_ranges=2)
    assert (
        few.sql("l_orderkey")
        == "(((`l_orderkey` >= 1 AND `l_orderkey` <= 7) OR `l_orderkey` = 40) AND `l_orderkey` IN (1, 2, 3, 7, 40))"
    )
    assert key_ranges([5]).sql("a`b") == "(`a``b` = 5)"
    assert KeyRanges(((1, 9),), None).sql("k") == "((`k` >= 1 AND `k` <= 9))"
    # other key types keep the Column built over py4j
    assert key_ranges(["x", "y"]).sql("k") is None
    assert key_ranges([1.5, 2.5]).sql("k") is None
