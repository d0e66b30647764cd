"""The analyzed-plan text parser (used over Spark Connect): the plan tree, and the non-linearity found in it."""

from __future__ import annotations

import pytest

from mvsink.plan.linearity import nonlinear_reason
from mvsink.plan.read import tree_from_explain

pytestmark = pytest.mark.spark  # the mark its test had in tests/test_incremental.py (kept as it was)


@pytest.mark.unit
def test_plan_parser_reads_sides_and_depths():
    text = """== Parsed Logical Plan ==
x
== Analyzed Logical Plan ==
k: bigint
Project [k#0L]
+- Join LeftOuter, (k#0L = k#1L)
   :- SubqueryAlias orders
   :  +- View (`orders`, [k#0L])
   :     +- Relation [k#0L] parquet
   +- SubqueryAlias customers
      +- View (`customers`, [k#1L])
         +- Relation [k#1L] parquet

== Optimized Logical Plan ==
y
"""
    tree = tree_from_explain(text)
    assert tree.name == "Project" and tree.children[0].name == "Join"
    assert [c.name for c in tree.children[0].children] == ["SubqueryAlias", "SubqueryAlias"]
    assert nonlinear_reason(tree, "orders") is None
    assert "right side of a LeftOuter join" in (nonlinear_reason(tree, "customers") or "")
