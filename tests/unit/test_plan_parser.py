"""The analyzed-plan text parser: node depths and join sides, and the non-linearity it finds from them."""

from __future__ import annotations

import pytest

from mvsink.spark.incremental import analyzed_plan, nonlinear_reason

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
    nodes = analyzed_plan(text)
    assert [(n.depth, n.side, n.name) for n in nodes][:4] == [
        (0, "", "Project"), (1, "right", "Join"), (2, "left", "SubqueryAlias"), (3, "right", "View")]
    assert nonlinear_reason(nodes, "orders") is None
    assert "right side of a LeftOuter join" in (nonlinear_reason(nodes, "customers") or "")
