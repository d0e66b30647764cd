"""The cost model where the scan guard decides (costguard.model_reasons) and what status says of a choice."""

from __future__ import annotations

from typing import Any

import pytest

from mvsink.core.batch import SourceRead
from mvsink.core.costrecord import CostRecord, noting
from mvsink.incremental.costguard import model_reasons
from mvsink.readers.status import cost_choice, format_choice

pytestmark = pytest.mark.unit

CHANGED = [SourceRead(name="orders", kind="path", path="/lake/orders", version=3)]
REFUSED = "the changes of orders would be joined with 3.0 MB of the other sources, more than ..."


def _slow_terms_history() -> list[CostRecord]:
    guard = {"terms_bytes": 1000, "full_bytes": 5000, "table_bytes": 10}
    out = [
        CostRecord(version=v, at=v, mode="incremental:aggregate", engine="spark", write_s=9.0, guard=guard)
        for v in (1, 2, 3)
    ]
    return out + [CostRecord(version=v, at=v, mode="full", write_s=0.5, guard=guard) for v in (4, 5, 6)]


def _decide(history: list[CostRecord], reasons: tuple[str | None, ...] = (None,)) -> tuple[Any, dict[str, Any]]:
    with noting() as notes:
        got = model_reasons(
            reasons,
            CHANGED,
            None,  # type: ignore[arg-type]  (the history is given: the table is not read)
            figures=(1000, 5000, 10),
            factors=(1.0,),
            mode="incremental:aggregate",
            engines=("spark",),
            history=history,
        )
    return got, notes


def test_off_the_guard_decides_and_the_prior_is_noted(monkeypatch):
    monkeypatch.setenv("MVSINK_COST_MODEL", "false")
    got, notes = _decide(_slow_terms_history())
    assert got == (None,)
    assert notes["guard"] == {"terms_bytes": 1000, "full_bytes": 5000, "table_bytes": 10}
    assert notes["model"] == "off" and notes["basis"] == "prior" and notes["picked"] == "incremental:aggregate/spark"
    assert set(notes["estimates"]) == {"incremental:aggregate/spark", "full"}
    got, _ = _decide(_slow_terms_history(), (REFUSED,))
    assert got == (REFUSED,)


def test_on_the_history_overrides_the_guard_both_ways(monkeypatch):
    monkeypatch.setenv("MVSINK_COST_MODEL", "true")
    got, notes = _decide(_slow_terms_history())
    assert got[0] is not None and got[0].startswith("the cost model picks the full diff: the view's history")
    assert notes["model"] == "on" and notes["basis"] == "history" and notes["picked"] == "full"
    fast = [
        CostRecord(version=r.version, at=r.at, mode=r.mode, engine=r.engine, write_s=0.1 if r.mode != "full" else 4.0)
        for r in _slow_terms_history()
    ]
    got, notes = _decide(fast, (REFUSED,))  # the guard refused; the history says the terms are cheap
    assert got == (None,) and notes["picked"] == "incremental:aggregate/spark"
    got, notes = _decide([], (REFUSED,))  # no history: the guard's own answer
    assert got == (REFUSED,) and notes["basis"] == "prior"


def test_status_says_the_choice_its_estimate_the_actual_and_the_next_best():
    c = {
        "operation": "append",
        "mode": "incremental:aggregate",
        "write_ms": 1200,
        "cost": {
            "engine": "duckdb",
            "estimates": {"incremental:aggregate/spark": 1.5, "incremental:aggregate/duckdb": 0.9, "full": 2.0},
            "picked": "incremental:aggregate/spark",
            "basis": "history",
        },
    }
    ch = cost_choice(c)
    assert ch == {
        "chosen": "incremental:aggregate/duckdb",
        "estimate_s": 0.9,
        "actual_s": 1.2,
        "next_best": "incremental:aggregate/spark",
        "next_best_s": 1.5,
        "model_picked": "incremental:aggregate/spark",
        "basis": "history",
        "recheck": None,
    }
    assert format_choice(ch) == (
        "incremental:aggregate/duckdb estimated 0.90 s, took 1.20 s; next best incremental:aggregate/spark 1.50 s "
        "(history)"
    )
    assert cost_choice({"operation": "append", "mode": "full"}) is None  # an older commit: no cost recorded
    full = cost_choice({**c, "mode": "full", "cost": {"estimates": {"full": 2.0}}})
    assert full is not None and format_choice(full) == "full estimated 2.00 s, took 1.20 s (prior)"
    rc = {"kind": "alternative", "ran": "full", "instead_of": "incremental:aggregate/spark", "estimate_s": 2.0}
    rechecked = cost_choice({**c, "mode": "full", "cost": {**c["cost"], "recheck": rc}})
    assert rechecked is not None and rechecked["recheck"] == rc
    assert format_choice(rechecked).endswith("(history); a re-check: ran instead of incremental:aggregate/spark")


PART = "incremental:partitioned/spark"
PART_REFUSED = "the partitioned recompute on orders.o_orderkey would read 9.0 MB, more than the full diff reads ..."


def _partition(history: list[CostRecord], reason: str | None, **kw: Any) -> tuple[str | None, dict[str, Any]]:
    from mvsink.incremental.costguard import partition_reason

    with noting() as notes:
        got = partition_reason(
            reason,
            CHANGED,
            None,  # type: ignore[arg-type]  (the history is given: the table is not read)
            read_bytes=kw.pop("read_bytes", 9000.0),
            full=kw.pop("full", 5000),
            factor=1.0,
            history=history,
            **kw,
        )
    return got, notes


def _recomputes(seconds: float, full_seconds: float, mode: str = "incremental:partitioned") -> list[CostRecord]:
    guard = {"terms_bytes": 9000, "full_bytes": 5000}
    out = [CostRecord(version=v, at=v, mode=mode, write_s=seconds + 0.01 * v, guard=guard) for v in (1, 2, 3)]
    return out + [CostRecord(version=v, at=v, mode="full", write_s=full_seconds, guard=guard) for v in (4, 5, 6)]


def test_the_partitioned_recompute_guard_prior_then_fit(monkeypatch):
    monkeypatch.setenv("MVSINK_COST_MODEL", "true")
    # no history: the guard's own answer either way, the prior noted (the recompute 9 kB against the full 5 kB)
    got, notes = _partition([], PART_REFUSED)
    assert got == PART_REFUSED and notes["basis"] == "prior" and notes["picked"] == "full"
    assert notes["guard"] == {"terms_bytes": 9000, "full_bytes": 5000}
    assert set(notes["estimates"]) == {PART, "full"}
    got, notes = _partition([], None, read_bytes=1000.0)
    assert got is None and notes["picked"] == PART
    # this view's recomputes took 1.0 s where its full diffs took 1.4 s: the history runs the refused recompute
    got, notes = _partition(_recomputes(1.0, 1.4), PART_REFUSED)
    assert got is None and notes["picked"] == PART and notes["basis"] == "history"
    # and refuses a recompute the guard lets run when its recorded recomputes cost more than the full diff
    got, notes = _partition(_recomputes(3.0, 1.0), None, read_bytes=1000.0)
    assert got is not None and got.startswith("the cost model picks the full diff: the view's history estimates full")
    # a recompute serving the aggregate state's input keeps its history under that mode
    got, notes = _partition(_recomputes(1.0, 1.4, "incremental:aggregate"), PART_REFUSED, mode="incremental:aggregate")
    assert got is None and notes["picked"] == "incremental:aggregate/spark"
    monkeypatch.setenv("MVSINK_COST_MODEL", "false")  # off: the guard alone, the estimates noted all the same
    got, notes = _partition(_recomputes(1.0, 1.4), PART_REFUSED)
    assert got == PART_REFUSED and notes["model"] == "off" and notes["basis"] == "prior"


def test_a_recheck_runs_the_alternative_and_is_noted(monkeypatch):
    """The history picks the terms (1.0 s against the full diff's 1.4 s); 10 refreshes without a re-check and the
    full diff cheap enough: this refresh runs the full diff (the terms refused, saying why), noted for the record."""
    monkeypatch.setenv("MVSINK_COST_MODEL", "true")
    guard = {"terms_bytes": 1000, "full_bytes": 5000, "table_bytes": 10}
    fulls = [CostRecord(version=v, at=v, mode="full", write_s=1.4, guard=guard) for v in (1, 2, 3)]
    terms = [CostRecord(version=v, at=v, mode="incremental:aggregate", write_s=1.0, guard=guard) for v in range(4, 14)]
    got, notes = _decide([*fulls, *terms])
    assert got[0] is not None and got[0].startswith("a re-check of the cost model (MVSINK_COST_RECHECK_EVERY): full")
    assert notes["picked"] == "incremental:aggregate/spark"
    assert notes["recheck"] == {
        "kind": "alternative",
        "ran": "full",
        "instead_of": "incremental:aggregate/spark",
        "estimate_s": 1.4,
    }
    monkeypatch.setenv("MVSINK_COST_RECHECK_EVERY", "0")  # off: the choice runs, nothing noted
    got, notes = _decide([*fulls, *terms])
    assert got == (None,) and notes["recheck"] is None
    monkeypatch.setenv("MVSINK_COST_RECHECK_EVERY", "10")
    got, notes = _decide([*fulls, *terms[:-1]])  # the full diff ran within the last 10: the choice runs, checked
    assert got == (None,) and notes["recheck"] == {
        "kind": "choice",
        "ran": "incremental:aggregate/spark",
        "instead_of": None,
        "estimate_s": 1.0,
    }
