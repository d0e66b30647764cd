"""A write step's pruned reads are made once (incremental/telescope.py: term_reads): the modes it tries in turn (the
aggregate state, then the affected groups) ask for the same terms' reads, whose key sets may each cost a Spark job."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from mvsink.incremental import telescope
from mvsink.incremental.telescope import ChangeFrames, ChangeTerms, term_reads
from mvsink.plan.joinkeys import Column, Edge

pytestmark = pytest.mark.unit


def _source(name: str, version: int) -> Any:
    return SimpleNamespace(name=name, kind="path", path=f"/lake/{name}", version=version)


def _terms(*, lower: int = 10, orders: int = 5, base_orders: int = 4) -> ChangeTerms:
    sources = [_source("orders", orders), _source("lineitem", 7)]
    desc = SimpleNamespace(target="/lake/views/v", lower=lower, time=20, sources=sources)
    view = SimpleNamespace(query="SELECT 1", name="v")
    base = {"orders": base_orders, "lineitem": 7}
    return ChangeTerms(None, view, desc, base, [sources[0]], ChangeFrames())


def test_the_same_batchs_term_reads_are_made_once_whichever_mode_asks(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[int] = []
    edges = [Edge(Column("orders", "o_orderkey"), Column("lineitem", "l_orderkey"))]

    class Pruning:  # (the plan's edges and threshold; no Spark)
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.edges, self.min_bytes = edges, 0

    monkeypatch.setattr(telescope.pruning, "TermPruning", Pruning)

    def pruned(*args: Any) -> dict[str, list[Any]]:
        made.append(1)
        return {"orders": []}

    monkeypatch.setattr(telescope, "_pruned", pruned)
    monkeypatch.setattr(telescope, "_LAST_READS", [])
    first = term_reads(_terms())
    assert term_reads(_terms()) is first and len(made) == 1  # another mode's terms of the same batch: kept
    term_reads(_terms(lower=11))  # another batch
    term_reads(_terms(orders=6))  # another version of a source
    term_reads(_terms(base_orders=3))  # another last refresh
    assert len(made) == 4
    edges.append(Edge(Column("lineitem", "l_orderkey"), Column("orders", "o_orderkey")))  # another plan's edges
    term_reads(_terms(base_orders=3))
    assert len(made) == 5
