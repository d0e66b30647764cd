"""bench/costmodel.py's judgement of a choice (the hit rate's rule)."""

from __future__ import annotations

import pytest

from bench.costmodel import judge, kind

pytestmark = pytest.mark.unit


def _row(mode: str, incr: tuple[str, float], full: tuple[str, float]) -> dict[str, object]:
    return {"mode": mode, "incr_mode": incr[0], "incr_s": incr[1], "full_mode": full[0], "full_s": full[1]}


def test_a_choice_is_a_hit_when_its_kind_is_cheapest_or_within_ten_percent():
    assert kind("incremental:aggregate") == "incremental" and kind("full") == "full"
    assert judge(_row("incremental:aggregate", ("incremental:aggregate", 1.0), ("full", 2.0))) is True
    assert judge(_row("full", ("incremental:aggregate", 1.0), ("full", 2.0))) is False
    assert judge(_row("full", ("incremental:aggregate", 1.0), ("full", 1.09))) is True  # within 10 %
    assert judge(_row("full", ("incremental:aggregate", 1.0), ("full", 1.11))) is False
    assert judge(_row("incremental:groups", ("incremental:groups", 3.0), ("full", 2.0))) is False


def test_one_applicable_mode_or_no_change_is_not_judged():
    assert judge(_row("full", ("full", 1.0), ("full", 1.2))) is None  # the copies could not differ
    assert judge(_row("unchanged", ("unchanged", 0.0), ("unchanged", 0.0))) is None


def test_every_applicable_mode_counts_and_the_cheapest_is_named():
    from bench.costmodel import cheapest

    row = {
        **_row("incremental:aggregate", ("incremental:aggregate", 2.0), ("full", 3.0)),
        "groups_mode": "incremental:groups",
        "groups_s": 1.0,
        "main_s": 2.0,
    }
    assert cheapest(row) == "incremental:groups"
    assert judge(row) is False  # the aggregate state at 2.0 s where affected groups took 1.0 s
    assert judge({**row, "mode": "incremental:groups"}) is True
    # a mode no copy took (a re-check's, say): the main refresh's own time is judged
    assert judge({**row, "mode": "incremental:partitioned", "main_s": 1.05}) is True


def test_recovery_after_the_history_was_deleted():
    from bench.costmodel import recovery, summary

    def r(view: str, rnd: int, hit: bool | None, basis: str | None) -> dict[str, object]:
        return {
            "view": view,
            "round": rnd,
            "hit": hit,
            "basis": basis,
            "stream": "rf",
            "main_s": 1.0,
            "guard_s": 1.0,
            "exact": True,
            "mode": "full",
        }

    rows = [
        r("q1", 1, False, "history"),
        r("q1", 5, None, None),
        r("q1", 6, False, "prior"),
        r("q1", 7, True, "prior"),
        r("q1", 8, True, "history"),
        r("q5", 6, True, "prior"),
        r("q5", 7, False, "history"),
        r("q6", 6, None, "prior"),
    ]
    got = recovery(rows, 5)
    assert got["q1"] == {"first_basis": "prior", "judged": 3, "recovered_at": 2}
    assert got["q5"] == {"first_basis": "prior", "judged": 2, "recovered_at": None}  # the last a miss
    assert got["q6"] == {"first_basis": "prior", "judged": 0, "recovered_at": None}
    text = "\n".join(summary(rows, delete_at=5))
    assert "**4 of 7** judged refreshes" not in text and "**3 of 6** judged refreshes (50%)" in text
    assert "3 of 3 views' next weighed choice fell back to the prior; 1 of 2 views" in text
    assert "q1: 2 of 3, q5: not of 2" in text and "q1 1.00" in text


def test_the_model_against_the_guard_by_the_choices_forced_times():
    from bench.costmodel import by_choice

    def row(view: str, stream: str, mode: str, guard: str) -> dict[str, object]:
        return {
            **_row(mode, ("incremental:aggregate", 1.0), ("full", 3.0)),
            "view": view,
            "stream": stream,
            "guard_mode": guard,
        }

    rows = [
        row("q4", "rf", "incremental:aggregate", "incremental:aggregate"),  # alike: 1.0 each
        row("q4", "scattered", "incremental:aggregate", "full"),  # the model 1.0, the guard 3.0
        row("q4", "rf3", "full", "incremental:aggregate"),  # not an rf or scattered round
        row("q17", "rf", "full", "incremental:aggregate"),  # the model 3.0, the guard 1.0
        row("q17", "scattered", "unchanged", "unchanged"),  # no copy took it: left out
    ]
    got = by_choice(rows)
    assert got == {"q4": pytest.approx(2.0 / 4.0), "q17": pytest.approx(3.0)}
