"""The split at the top aggregate, DISTINCT or window (incremental:groups) on hand-built plan trees: no Spark."""

from __future__ import annotations

import pytest

from mvsink.plan.splits import AggregateSplit, aggregate_split, groups_reason
from mvsink.plan.tree import PlanExpr, PlanNode

pytestmark = pytest.mark.unit


def attr(name: str, i: int) -> PlanExpr:
    return PlanExpr("AttributeReference", ref=(name, i))


def alias(name: str, i: int, child: PlanExpr) -> PlanExpr:
    return PlanExpr("Alias", (child,), ref=(name, i))


def count(name: str, i: int) -> PlanExpr:
    return alias(name, i, PlanExpr("AggregateExpression", (PlanExpr("Count", (PlanExpr("Literal"),)),)))


SOURCE = PlanNode("SubqueryAlias", (PlanNode("View", (PlanNode("LogicalRDD"),), attrs={"view": "orders"}),))


def aggregate(grouping: list[PlanExpr], aggregates: list[PlanExpr], child: PlanNode = SOURCE) -> PlanNode:
    g = len(grouping)
    return PlanNode(
        "Aggregate",
        (child,),
        tuple(grouping + aggregates),
        {"grouping": (0, g), "aggregates": (g, g + len(aggregates))},
    )


def project(items: list[PlanExpr], child: PlanNode) -> PlanNode:
    return PlanNode("Project", (child,), tuple(items), {"list": (0, len(items))})


def window(partition: list[PlanExpr], windows: list[PlanExpr], child: PlanNode = SOURCE) -> PlanNode:
    w = len(windows)
    return PlanNode(
        "Window", (child,), tuple(windows + partition), {"windows": (0, w), "partition": (w, w + len(partition))}
    )


def test_keys_through_renames_and_projections():
    # SELECT n, s AS st FROM (SELECT status AS s, count(*) AS n FROM orders GROUP BY status) ORDER BY n
    agg = aggregate([attr("status", 1)], [alias("s", 10, attr("status", 1)), count("n", 11)])
    top = PlanNode("Sort", (project([attr("n", 11), alias("st", 12, attr("s", 10))], agg),))
    split = aggregate_split(top)
    assert isinstance(split, AggregateSplit)
    assert split.key_positions == (1,) and split.keys == ("status",) and split.input is SOURCE
    assert groups_reason(top, ["orders"]) == split


@pytest.mark.parametrize(
    "tree,why",
    [
        (aggregate([], [count("n", 11)]), "global aggregate"),
        (aggregate([attr("status", 1)], [count("n", 11)]), "not a column of the view"),
        (aggregate([PlanExpr("Upper", (attr("status", 1),))], [count("n", 11)]), "is an expression"),
        (
            project(
                [alias("u", 12, PlanExpr("Upper", (attr("status", 1),))), attr("n", 11)],
                aggregate([attr("status", 1)], [attr("status", 1), count("n", 11)]),
            ),
            "not a column of the view",
        ),
        (PlanNode("Distinct", (SOURCE,)), "the columns of the DISTINCT's input could not be read"),
        (PlanNode("Union", (SOURCE, SOURCE)), "not an aggregate, DISTINCT or window (Union)"),
        (window([], [alias("rn", 12, PlanExpr("RowNumber"))]), "a window over all rows"),
        (window([PlanExpr("Upper", (attr("status", 1),))], []), "is an expression"),
        (window([attr("status", 1)], []), "no projection above the window"),
        # the EXPLAIN text path has no expression ids: fail closed
        (aggregate([PlanExpr("AttributeReference")], [PlanExpr("AttributeReference")]), "not a column"),
    ],
)
def test_not_eligible(tree, why):
    reason = aggregate_split(tree)
    assert isinstance(reason, str) and why in reason, reason


def test_input_must_be_linear():
    inner = aggregate([attr("status", 1)], [attr("status", 1), count("m", 5)])
    top = aggregate([attr("status", 1)], [attr("status", 1), count("n", 11)], child=inner)
    reason = groups_reason(top, ["orders"])
    assert isinstance(reason, str) and "not linear in 'orders'" in reason and "Aggregate" in reason


def test_having_distinct_union_and_window_split():
    # SELECT status, count(*) AS n ... GROUP BY status HAVING n > 3: a Filter above the aggregate
    having = PlanNode("Filter", (aggregate([attr("status", 1)], [attr("status", 1), count("n", 11)]),))
    split = aggregate_split(having)
    assert isinstance(split, AggregateSplit)
    assert (split.kind, split.chain, split.key_positions) == ("Aggregate", ("Filter",), (0,))
    # SELECT DISTINCT st, cust: keys are the DISTINCT's columns, found through a rename above it
    inner = project([alias("st", 20, attr("status", 1)), attr("cust", 2)], SOURCE)
    top = project([attr("cust", 2), alias("s2", 21, attr("st", 20))], PlanNode("Distinct", (inner,)))
    split = aggregate_split(top)
    assert isinstance(split, AggregateSplit)
    assert (split.kind, split.keys, split.key_positions, split.input) == ("Distinct", ("st", "cust"), (1, 0), inner)
    # UNION: a Distinct over a Union, whose columns are its first input's
    union = PlanNode("Distinct", (PlanNode("Union", (inner, project([attr("region", 7), attr("id", 8)], SOURCE))),))
    split = aggregate_split(union)
    assert isinstance(split, AggregateSplit) and split.key_positions == (0, 1)
    # ... WHERE rn <= 2 over row_number() OVER (PARTITION BY status ...): the partition key passes the window
    win = window([attr("status", 1)], [alias("rn", 12, PlanExpr("RowNumber"))])
    top = project([attr("id", 0), attr("status", 1), attr("rn", 12)], PlanNode("Filter", (win,)))
    split = aggregate_split(top)
    assert isinstance(split, AggregateSplit)
    assert (split.kind, split.chain, split.key_positions) == ("Window", ("Project", "Filter"), (1,))
