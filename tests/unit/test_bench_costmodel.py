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
