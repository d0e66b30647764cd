"""Linearity on golden plans (JSON and EXPLAIN text saved from Spark 4.2) and on hand-built trees: no Spark."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mvsink.plan.linearity import nonlinear_reason
from mvsink.plan.read import tree_from_explain, tree_from_json
from mvsink.plan.tree import (
    AGGREGATE,
    EXPRESSION_CATEGORY,
    KNOWN_OPERATORS,
    ROW,
    PlanExpr,
    PlanFormatError,
    PlanNode,
    expression_category,
)

pytestmark = pytest.mark.unit

PLANS = Path(__file__).resolve().parents[1] / "fixtures" / "plans"
CASES = json.loads((PLANS / "cases.json").read_text())


def _check(reason: str | None, expected: str | None) -> None:
    if expected is None:
        assert reason is None
    else:
        assert reason is not None and expected in reason, reason


def _json_nodes(name: str) -> list[dict]:
    return json.loads((PLANS / f"{name}.json").read_text())


# ---------------------------------------------------------------- golden plans


def test_there_are_enough_golden_cases():
    assert len(CASES) >= 8
    for name in CASES:
        assert (PLANS / f"{name}.json").is_file() and (PLANS / f"{name}.explain.txt").is_file()


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_json(name):
    tree = tree_from_json((PLANS / f"{name}.json").read_text())
    for source, expected in CASES[name]["expect"].items():
        _check(nonlinear_reason(tree, source), expected)


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_explain_text(name):
    """Spark Connect's path: the same verdicts from the EXPLAIN EXTENDED text."""
    tree = tree_from_explain((PLANS / f"{name}.explain.txt").read_text())
    for source, expected in CASES[name]["expect"].items():
        _check(nonlinear_reason(tree, source), expected)


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_json_and_text_give_the_same_operators(name):
    def shape(node: PlanNode) -> list:
        name = "Relation" if node.name == "LogicalRelation" else node.name
        return [name, node.attrs.get("view"), node.attrs.get("join_type"), [shape(c) for c in node.children]]

    from_json = tree_from_json((PLANS / f"{name}.json").read_text())
    from_text = tree_from_explain((PLANS / f"{name}.explain.txt").read_text())
    assert shape(from_json) == shape(from_text)
    ops = [n.name for n in from_json.walk()]
    assert set(ops) <= KNOWN_OPERATORS, set(ops) - KNOWN_OPERATORS


def test_golden_json_parses_view_join_and_cte_attributes():
    tree = tree_from_json((PLANS / "left_join.json").read_text())
    assert tree.name == "Project" and tree.children[0].name == "Join"
    assert tree.children[0].attrs["join_type"] == "LeftOuter"
    assert {n.attrs.get("view") for n in tree.walk() if n.name == "View"} == {"orders", "customers"}
    cte = tree_from_json((PLANS / "cte_read_twice.json").read_text())
    assert cte.name == "WithCTE" and [c.name for c in cte.children] == ["CTERelationDef", "Union"]
    ids = {n.attrs["cte_id"] for n in cte.walk() if n.name in ("CTERelationDef", "CTERelationRef")}
    assert len(ids) == 1


def test_golden_subquery_plan_is_kept_inside_its_expression():
    tree = tree_from_json((PLANS / "scalar_subquery.json").read_text())
    subs = [e for e in tree.all_expressions() if e.name == "ScalarSubquery"]
    assert len(subs) == 1 and subs[0].plans[0].name == "Aggregate"
    assert "customers" in {n.attrs.get("view") for n in tree.walk()}  # walk() enters subquery plans
    text = tree_from_explain((PLANS / "scalar_subquery.explain.txt").read_text())
    subs = [e for e in text.all_expressions() if e.name == "ScalarSubquery"]
    assert len(subs) == 1 and subs[0].plans[0].name == "Aggregate"


def test_golden_text_reads_a_column_named_like_a_call_as_a_name():
    # Project [id#0L, n#59L, max(region)#66] over the join: max( is an attribute's name, not an aggregate
    text = (PLANS / "aggregate_beside.explain.txt").read_text()
    assert "max(region)#" in text.split("== Analyzed Logical Plan ==")[1].splitlines()[2]
    tree = tree_from_explain(text)
    assert [e.name for e in tree.expressions] == []
    assert nonlinear_reason(tree, "orders") is None


# ---------------------------------------------------------------- failing closed on JSON surgery


def _rename(nodes: list, old: str, new: str) -> list:
    text = json.dumps(nodes).replace(f'"{old}"', f'"{new}"', 1)
    assert text != json.dumps(nodes)
    return json.loads(text)


def test_json_unknown_operator_above_the_source_is_named():
    nodes = _rename(
        _json_nodes("project_filter"),
        "org.apache.spark.sql.catalyst.plans.logical.Filter",
        "org.apache.spark.sql.catalyst.plans.logical.FancyFilter",
    )
    reason = nonlinear_reason(tree_from_json(nodes), "orders")
    assert reason == "the plan has an operator this check does not know: FancyFilter"


def test_json_unknown_expression_class_is_named():
    nodes = _rename(
        _json_nodes("project_filter"),
        "org.apache.spark.sql.catalyst.expressions.Upper",
        "org.apache.spark.sql.catalyst.expressions.Uppermost",
    )
    reason = nonlinear_reason(tree_from_json(nodes), "orders")
    assert reason == "the query has an expression this check does not know: Uppermost"


def test_json_unknown_expression_beside_the_source_still_fails():
    nodes = _rename(
        _json_nodes("aggregate_beside"),
        "org.apache.spark.sql.catalyst.expressions.aggregate.Max",
        "org.apache.spark.sql.catalyst.expressions.aggregate.MaxOfSomething",
    )
    assert "does not know: MaxOfSomething" in (nonlinear_reason(tree_from_json(nodes), "orders") or "")


def test_json_that_lost_a_projection_is_refused():
    nodes = _json_nodes("project_filter")
    assert nodes[0]["class"].endswith(".Project")
    nodes[0]["projectList"] = None
    with pytest.raises(PlanFormatError, match="lost the projectList of a Project"):
        tree_from_json(nodes)


def test_json_with_a_broken_shape_is_refused():
    nodes = _json_nodes("left_join")
    with pytest.raises(PlanFormatError):
        tree_from_json(nodes[:-3])  # ends inside a subtree
    with pytest.raises(PlanFormatError):
        tree_from_json(nodes + nodes[-1:])  # a node after the root's subtree
    with pytest.raises(PlanFormatError):
        tree_from_json([{"class": "x.y.Project"}])  # no num-children


# ---------------------------------------------------------------- hand-built trees


def attr(name: str = "AttributeReference") -> PlanExpr:
    return PlanExpr(name)


def view(name: str) -> PlanNode:
    return PlanNode("View", (PlanNode("LogicalRDD", expressions=(attr(),)),), attrs={"view": name})


def project(child: PlanNode, *exprs: PlanExpr) -> PlanNode:
    return PlanNode("Project", (child,), exprs or (attr(),))


def join(kind: str, left: PlanNode, right: PlanNode) -> PlanNode:
    cond = PlanExpr("EqualTo", (attr(), attr()))
    return PlanNode("Join", (left, right), (cond,), {"join_type": kind})


def test_hand_built_linear_tree():
    tree = project(PlanNode("Filter", (join("Inner", view("orders"), view("customers")),), (PlanExpr("IsNotNull"),)))
    assert nonlinear_reason(tree, "orders") is None
    assert nonlinear_reason(tree, "CUSTOMERS") is None  # temp view names are case-insensitive


def test_hand_built_unknown_operator_on_the_path():
    tree = project(PlanNode("MagicSort", (view("orders"),)))
    assert nonlinear_reason(tree, "orders") == "the plan has an operator this check does not know: MagicSort"


def test_hand_built_unknown_operator_beside_the_source():
    tree = join("Inner", view("orders"), PlanNode("MagicSort", (view("customers"),)))
    assert "does not know: MagicSort" in (nonlinear_reason(tree, "orders") or "")


def test_hand_built_unknown_expression_class():
    tree = project(view("orders"), PlanExpr("Alias", (PlanExpr("QuantumHash", (attr(),)),)))
    assert nonlinear_reason(tree, "orders") == "the query has an expression this check does not know: QuantumHash"


def test_hand_built_unknown_expression_inside_a_subquery_plan():
    sub = PlanNode("Project", (view("customers"),), (PlanExpr("QuantumHash"),))
    tree = project(view("orders"), PlanExpr("Alias", (PlanExpr("ScalarSubquery", plans=(sub,)),)))
    assert nonlinear_reason(tree, "orders") == "the query has a subquery (ScalarSubquery)"


@pytest.mark.parametrize("kind", ["ScalarSubquery", "Exists", "ListQuery", "InSubquery", "LateralSubquery"])
def test_hand_built_subquery_expressions(kind):
    tree = PlanNode("Filter", (view("orders"),), (PlanExpr(kind),))
    assert nonlinear_reason(tree, "orders") == f"the query has a subquery ({kind})"


def test_hand_built_correlation_and_lateral_join():
    tree = PlanNode("Filter", (view("orders"),), (PlanExpr("EqualTo", (attr(), PlanExpr("OuterReference"))),))
    assert nonlinear_reason(tree, "orders") == "the query has a subquery (OuterReference)"
    lateral = PlanNode("LateralJoin", (view("orders"),), (PlanExpr("LateralSubquery"),))
    assert "subquery (LateralJoin)" in (nonlinear_reason(project(lateral), "orders") or "")


@pytest.mark.parametrize(
    "kind,side,ok",
    [
        ("Inner", 0, True),
        ("Inner", 1, True),
        ("Cross", 1, True),
        ("LeftOuter", 0, True),
        ("LeftOuter", 1, False),
        ("LeftSemi", 0, True),
        ("LeftSemi", 1, False),
        ("LeftAnti", 0, True),
        ("LeftAnti", 1, False),
        ("RightOuter", 0, False),
        ("RightOuter", 1, True),
        ("FullOuter", 0, False),
        ("FullOuter", 1, False),
        ("ExistenceJoin", 0, False),
        ("SomeFutureJoin", 0, False),
    ],
)
def test_join_sides(kind, side, ok):
    kids = (view("orders"), view("customers")) if side == 0 else (view("customers"), view("orders"))
    reason = nonlinear_reason(project(join(kind, *kids)), "orders")
    if ok:
        assert reason is None
    else:
        assert reason == f"'orders' is on the {'left' if side == 0 else 'right'} side of a {kind} join"


@pytest.mark.parametrize(
    "op, article",
    [
        ("Aggregate", "an"),
        ("Distinct", "a"),
        ("Deduplicate", "a"),
        ("Window", "a"),
        ("Expand", "an"),
        ("Intersect", "an"),
        ("Except", "an"),
    ],
)
def test_known_nonlinear_operators_on_the_path(op, article):
    reason = nonlinear_reason(project(PlanNode(op, (view("orders"),))), "orders")
    assert reason == f"{article} {op} is computed over 'orders'"


@pytest.mark.parametrize(
    "op, article", [("GlobalLimit", "a"), ("LocalLimit", "a"), ("Offset", "an"), ("Tail", "a"), ("Sample", "a")]
)
def test_unstable_operators_on_or_beside_the_path(op, article):
    assert nonlinear_reason(PlanNode(op, (view("orders"),)), "orders") == f"{article} {op} is computed over 'orders'"
    beside = join("Inner", view("orders"), PlanNode(op, (view("customers"),)))
    assert nonlinear_reason(beside, "orders") == f"{article} {op} may return different rows each time it is evaluated"


def test_aggregate_beside_the_source_is_fine_but_not_on_its_path():
    agg = PlanNode("Aggregate", (view("customers"),), (attr(), PlanExpr("AggregateExpression", (PlanExpr("Sum"),))))
    tree = project(join("Inner", view("orders"), agg))
    assert nonlinear_reason(tree, "orders") is None
    assert nonlinear_reason(tree, "customers") == "an Aggregate is computed over 'customers'"


def test_aggregate_expression_in_a_projection_on_the_path():
    tree = project(view("orders"), PlanExpr("Alias", (PlanExpr("AggregateExpression", (PlanExpr("Max"),)),)))
    reason = nonlinear_reason(tree, "orders")
    assert reason == "an aggregate expression (AggregateExpression) in a Project is computed over 'orders'"


def test_generator_only_as_the_generator_of_a_generate():
    gen = PlanNode("Generate", (view("orders"),), (PlanExpr("Explode", (attr(),)), attr()))
    assert nonlinear_reason(project(gen), "orders") is None
    misplaced = project(view("orders"), PlanExpr("Explode", (attr(),)))
    assert "generator expression (Explode) in a Project" in (nonlinear_reason(misplaced, "orders") or "")


def test_nondeterministic_udf_and_spark_verdict():
    rand = project(view("orders"), PlanExpr("Alias", (PlanExpr("Rand"),)))
    assert "(Rand)" in (nonlinear_reason(rand, "orders") or "")
    udf = project(view("orders"), PlanExpr("Alias", (PlanExpr("PythonUDF", (attr(),)),)))
    assert "user-defined function (PythonUDF)" in (nonlinear_reason(udf, "orders") or "")
    flagged = PlanNode("Project", (view("orders"),), (attr(),), {"deterministic": False})
    assert "not deterministic" in (nonlinear_reason(flagged, "orders") or "")


def test_reads_and_ctes():
    twice = PlanNode("Union", (project(view("orders")), project(view("orders"))))
    assert nonlinear_reason(twice, "orders") is None  # reads that meet only in a UNION ALL
    self_join = PlanNode("Join", (project(view("orders")), project(view("orders"))), attrs={"join_type": "Inner"})
    assert nonlinear_reason(project(self_join), "orders") == (
        "source 'orders' is read 2 times, and two reads meet in a Join"
    )
    both = PlanNode("Union", (project(view("orders")), project(self_join)))
    assert "is read 3 times, and two reads meet in a Join" in (nonlinear_reason(both, "orders") or "")
    ctes = PlanNode("CTERelationDef", (project(view("orders")),), attrs={"cte_id": "8"})
    in_cte = PlanNode("WithCTE", (ctes, PlanNode("Union", (project(view("orders")), project(view("customers"))))))
    assert nonlinear_reason(in_cte, "orders") == "source 'orders' is read 2 times, through a CTE"
    assert nonlinear_reason(project(view("orders")), "customers") == "source 'customers' is not read"
    cte = PlanNode("CTERelationDef", (project(view("orders")),), attrs={"cte_id": "7"})

    def ref() -> PlanNode:
        return PlanNode("CTERelationRef", expressions=(attr(),), attrs={"cte_id": "7"})

    once = PlanNode("WithCTE", (cte, project(PlanNode("SubqueryAlias", (ref(),)))))
    assert nonlinear_reason(once, "orders") is None
    used_twice = PlanNode("WithCTE", (cte, PlanNode("Union", (project(ref()), project(ref())))))
    assert nonlinear_reason(used_twice, "orders") == "a CTE over 'orders' is read 2 times"
    unused = PlanNode("WithCTE", (cte, project(view("customers"))))
    assert nonlinear_reason(unused, "orders") == "a CTE over 'orders' is read 0 times"
    over_aggregate = PlanNode("WithCTE", (cte, PlanNode("Aggregate", (ref(),))))
    assert nonlinear_reason(over_aggregate, "orders") == "an Aggregate is computed over 'orders'"


# ---------------------------------------------------------------- the EXPLAIN text parser


EXPLAIN = """== Parsed Logical Plan ==
x
== Analyzed Logical Plan ==
id: bigint
{body}
== Optimized Logical Plan ==
y
"""


def _text(body: str) -> PlanNode:
    return tree_from_explain(EXPLAIN.format(body=body.strip("\n")))


def test_text_reads_children_and_inner_subquery_plans():
    tree = _text("""
Project [id#0L, scalar-subquery#48 [] AS m#49]
:  +- Aggregate [max(cust#4) AS max(cust)#55]
:     +- SubqueryAlias customers
:        +- View (`customers`, [cust#4, region#5])
:           +- LogicalRDD [cust#4, region#5], false
+- SubqueryAlias orders
   +- View (`orders`, [id#0L, cust#1])
      +- LogicalRDD [id#0L, cust#1], false
""")
    assert [c.name for c in tree.children] == ["SubqueryAlias"]
    sub = [e for e in tree.expressions if e.name == "ScalarSubquery"]
    assert len(sub) == 1 and sub[0].plans[0].name == "Aggregate"
    assert [e.name for e in sub[0].plans[0].expressions] == ["Max"]  # max(cust)#55 is a name, not a call
    assert nonlinear_reason(tree, "orders") == "the query has a subquery (ScalarSubquery)"


def test_text_join_sides_and_view_names():
    tree = _text("""
Project [k#0L]
+- Join RightOuter, (k#0L = k#1L)
   :- SubqueryAlias `my orders`
   :  +- View (`my orders`, [k#0L])
   :     +- Relation [k#0L] parquet
   +- SubqueryAlias customers
      +- View (`customers`, [k#1L])
         +- Relation [k#1L] parquet
""")
    assert nonlinear_reason(tree, "my orders") == "'my orders' is on the left side of a RightOuter join"
    assert nonlinear_reason(tree, "customers") is None


def test_text_literal_that_looks_like_a_call_fails_closed():
    tree = _text("""
Filter (status#3 = frobnicate(x))
+- View (`orders`, [status#3])
   +- LogicalRDD [status#3], false
""")
    assert nonlinear_reason(tree, "orders") == "the query has an expression this check does not know: frobnicate(...)"


def test_text_undefined_call_result_fails_closed():
    # a Python UDF prints as name(args)#id; it is not an attribute any operator defines
    tree = _text("""
Filter my_udf(status#3)#12
+- View (`orders`, [status#3])
   +- LogicalRDD [status#3], false
""")
    assert "does not know: my_udf(...)#" in (nonlinear_reason(tree, "orders") or "")


def test_text_outer_reference_and_markers():
    tree = _text("""
Filter (exists#7 [] OR cust#1 IN (list#8 []))
:  :- Project [1 AS 1#9]
:  :  +- Filter (cust#4 = outer(cust#1))
:  :     +- LocalRelation [cust#4]
:  +- Project [cust#5]
:     +- LocalRelation [cust#5]
+- View (`orders`, [cust#1])
   +- LogicalRDD [cust#1], false
""")
    names = [e.name for e in tree.expressions]
    assert names == ["Exists", "ListQuery"]
    assert [e.plans[0].name for e in tree.expressions] == ["Project", "Project"]
    inner = tree.expressions[0].plans[0].children[0]
    assert [e.name for e in inner.expressions] == ["OuterReference"]
    assert nonlinear_reason(tree, "orders") == "the query has a subquery (Exists)"


@pytest.mark.parametrize(
    "body",
    [
        "Project [a#1]\n      +- View (`orders`, [a#1])",  # jumps three levels
        "Project [a#1]\nProject [a#1]",  # two roots
        "'Project ['a]\n+- 'UnresolvedRelation [orders], [], false",  # not analysed
        "",
    ],
)
def test_text_shapes_it_cannot_read_are_refused(body):
    with pytest.raises(PlanFormatError):
        _text(body)


# ---------------------------------------------------------------- the tables


def test_every_class_has_one_category_and_unknowns_have_none():
    assert expression_category("Add") == ROW
    assert expression_category("Max") == AGGREGATE
    assert expression_category("NoSuchExpression") is None
    assert not set(EXPRESSION_CATEGORY) & KNOWN_OPERATORS
