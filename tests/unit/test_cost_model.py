"""The cost model's estimates and choice on recorded histories (pure: no I/O)."""

from __future__ import annotations

import pytest

from mvsink.core.costrecord import CostRecord
from mvsink.incremental.costmodel import (
    FULL,
    MIN_POINTS,
    Candidate,
    estimate,
    fit,
    pick,
    prior_pick,
)

pytestmark = pytest.mark.unit

INCR = "incremental:aggregate/spark"
MB = 1_000_000
FULL_BYTES = 200 * MB  # the full diff reads the sources and the table: 200 MB


def _incr_seconds(change: int) -> float:
    """A view whose change terms cost 0.5 s plus 40 ms per MB they read (they grow with the change)."""
    return 0.5 + 0.04 * change / MB


def _full_seconds() -> float:
    return 3.0  # the full diff: about flat


def _rec(v: int, mode: str, *, terms: int = 0, change: int = 0, seconds: float) -> CostRecord:
    return CostRecord(
        version=v,
        at=v,
        mode=mode,
        engine="spark",
        write_s=seconds,
        changes={"orders": {"bytes": change, "files": 1}},
        guard={"terms_bytes": terms, "full_bytes": FULL_BYTES, "table_bytes": 10 * MB},
    )


def _candidates(terms: int, change: int = 0) -> list[Candidate]:
    return [Candidate(INCR, terms, change, speed=1.0), Candidate(FULL, FULL_BYTES)]


def _history() -> list[CostRecord]:
    """Recorded refreshes: incremental ones of small and growing changes, full diffs of large ones."""
    out = []
    for v, mb in enumerate((5, 10, 20, 40), start=1):
        out.append(
            _rec(v, "incremental:aggregate", terms=mb * MB // 2, change=mb * MB // 2, seconds=_incr_seconds(mb * MB))
        )
    for v in (5, 6, 7):
        out.append(_rec(v, FULL, seconds=_full_seconds() + (v - 6) * 0.05))
    return out


def test_the_prior_is_the_scan_guard():
    assert prior_pick(_candidates(150 * MB)) == INCR
    assert prior_pick(_candidates(FULL_BYTES)) == INCR  # at the ratio: the guard lets it run
    assert prior_pick(_candidates(FULL_BYTES + 1)) == FULL
    # a candidate's speed is the ratio (times the driver factor): 2x lets terms read twice the full diff
    assert prior_pick([Candidate(INCR, 2 * FULL_BYTES, speed=2.0), Candidate(FULL, FULL_BYTES)]) == INCR
    assert prior_pick([Candidate(INCR, 5, speed=1.0), Candidate(FULL, 0)]) == INCR  # nothing to compare with
    got = pick(_candidates(FULL_BYTES + 1), [])
    assert (got.picked, got.basis) == (FULL, "prior")
    assert [e.basis for e in got.estimates] == ["prior", "prior"]


def test_fit_is_least_squares_and_robust():
    line = fit([(1.0, 2.0), (2.0, 4.0), (3.0, 6.0)])
    assert line is not None and line.slope == pytest.approx(2.0) and line.intercept == pytest.approx(0.0)
    assert fit([(1.0, 2.0), (2.0, 4.0)]) is None  # fewer than MIN_POINTS
    flat = fit([(5.0, 1.0), (5.0, 2.0), (5.0, 3.0)])  # one size only: the mean
    assert flat is not None and flat.at(100.0) == pytest.approx(2.0)
    falling = fit([(1.0, 3.0), (2.0, 2.0), (3.0, 1.0)])  # time never falls with size: the mean
    assert falling is not None and falling.slope == 0.0 and falling.at(9.0) == pytest.approx(2.0)


def test_crossover_at_the_right_size():
    """The incremental cost grows with the change (0.5 s + 40 ms/MB), the full diff's is 3 s: the model picks the
    change terms below 62.5 MB read and the full diff above it (with the margin: beyond 62.5 MB * 1.1 + ...)."""
    history = _history()
    crossover = (3.0 - 0.5) / 0.04  # MB read where both cost the same
    for mb in (1, 10, 30, 50, 55):
        got = pick(_candidates(mb * MB // 2, mb * MB // 2), history)
        assert got.picked == INCR, (mb, got)
        assert got.estimate(INCR).seconds == pytest.approx(_incr_seconds(mb * MB), rel=1e-6)
    for mb in (75, 90, 150, 190):  # the byte ratio lets these run (terms < full); the history says full diff
        cands = _candidates(mb * MB // 2, mb * MB // 2)
        assert prior_pick(cands) == INCR
        got = pick(cands, history)
        assert got.picked == FULL, (mb, got)
        assert got.basis == "history" and "cheaper" in got.why
        assert got.next_best is not None and got.next_best.key == INCR
    assert 55 < crossover < 75
    # just above the crossover, within the margin, the prior's choice stands
    near = pick(_candidates(int(crossover * MB * 1.02) // 2, int(crossover * MB * 1.02) // 2), history)
    assert near.picked == INCR


def test_the_history_overrides_a_refusal_the_other_way():
    """Terms over the byte ratio the guard refuses, but this view's recorded terms are cheap: the model runs them."""
    history = [_rec(v, "incremental:aggregate", terms=v * 100 * MB, seconds=0.2 + 0.001 * v) for v in (1, 2, 3)]
    history += [_rec(v, FULL, seconds=5.0) for v in (4, 5, 6)]
    cands = _candidates(250 * MB)
    assert prior_pick(cands) == FULL
    got = pick(cands, history)
    assert got.picked == INCR and got.prior_picked == FULL


def test_one_mode_fitted_scales_the_others_prior():
    history = [_rec(v, "incremental:aggregate", terms=100 * MB, seconds=2.0) for v in (1, 2, 3)]
    ests = {e.key: e for e in estimate(_candidates(100 * MB), history)}
    assert ests[INCR].basis == "history" and ests[INCR].points == 3
    assert ests[INCR].seconds == pytest.approx(2.0)
    # measured 2 s where the prior said 1 s (100 MB at 100 MB/s): the full diff's prior (2 s) doubled
    assert ests[FULL].basis == "scaled prior" and ests[FULL].seconds == pytest.approx(4.0)


def test_a_history_deleted_mid_way_falls_back_to_the_prior_and_recovers():
    """The stream: refreshes record history; the history is deleted; the next choices are the prior's (the scan
    guard's) until MIN_POINTS refreshes of each candidate are recorded again, then the history's."""
    cands = _candidates(80 * MB // 2, 80 * MB // 2)  # a change where the history says full, the guard incremental
    history = _history()
    assert pick(cands, history).picked == FULL
    history = []  # deleted
    choices = []
    v = 100
    for _round in range(8):
        got = pick(cands, history)
        choices.append((got.picked, got.basis))
        # what ran is recorded (the chosen mode), plus, as the stream's rounds alternate, a large change's full diff
        v += 1
        if got.picked == INCR:
            history.append(
                _rec(
                    v, "incremental:aggregate", terms=80 * MB // 2, change=80 * MB // 2, seconds=_incr_seconds(80 * MB)
                )
            )
        else:
            history.append(_rec(v, FULL, seconds=_full_seconds()))
        v += 1
        history.append(_rec(v, FULL, seconds=_full_seconds()))
    assert choices[0] == (INCR, "prior")
    recovered = next(i for i, (_, basis) in enumerate(choices) if basis == "history")
    assert recovered <= MIN_POINTS
    assert all(picked == FULL for picked, _ in choices[recovered:]), choices


def test_notes_of_a_pick():
    got = pick(_candidates(80 * MB // 2, 80 * MB // 2), _history())
    notes = got.to_notes()
    assert notes["picked"] == FULL and notes["basis"] == "history"
    assert set(notes["estimates"]) == {INCR, FULL}  # type: ignore[arg-type]


def test_a_fit_is_not_weighed_against_a_nominal_prior():
    """The history of tests/spark/test_incremental_view_sources.py's ``agg`` (seed 5), as recorded: an aggregate
    over one view source (its terms read no other source: 0 bytes) fitted at about 0.75 s, the full diff only
    refreshed once (the first build, before the guard's figures were recorded: no scale). The full diff's estimate
    is the nominal prior (31 kB at 100 MB/s: 0.3 ms), not seconds this view measured: the guard's choice stands."""
    first = CostRecord(version=2, at=2, mode=FULL, write_s=1.009, reads={"up": {"bytes": 11826, "files": 2}})
    guard = {"terms_bytes": 0, "full_bytes": 18256, "table_bytes": 6837}
    terms = [
        CostRecord(version=v, at=v, mode="incremental:aggregate", write_s=s, guard=guard)
        for v, s in ((3, 0.99), (4, 0.676), (5, 0.595))
    ]
    cands = [Candidate(INCR, 0, 0, speed=1000.0), Candidate(FULL, 31108)]
    got = pick(cands, [first, *terms])
    assert [e.basis for e in got.estimates] == ["history", "prior"]
    assert got.estimate(FULL).seconds < 0.001 < got.estimate(INCR).seconds  # (the units differ)
    assert got.picked == INCR and "not compared" in got.why
    # with the full diff measured too (3 refreshes), the fit decides: here the full diff is cheaper
    fulls = [CostRecord(version=v, at=v, mode=FULL, write_s=0.3, guard=guard) for v in (6, 7, 8)]
    got = pick(cands, [first, *terms, *fulls])
    assert got.picked == FULL and got.basis == "history"


def test_a_fit_never_estimates_below_half_its_fastest_refresh():
    """bench/costmodel.py's SF 0.1 smoke, Q9 after the hand-edit round: the full diff's points (the first build and
    a hand edit's repair measured by what they read, a guarded full diff by the guard's figure) gave a line whose
    value at the next change's size was 0 s, so the model refused change terms estimated at 0.17 s (they took
    0.29 s, the full diff 0.66 s). The line stops at half the fastest refresh it was fitted on."""
    fulls = [
        CostRecord(version=1, at=1, mode=FULL, write_s=0.3, reads={"orders": {"bytes": 20 * MB, "files": 1}}),
        CostRecord(version=5, at=5, mode=FULL, write_s=0.54, guard={"full_bytes": 28 * MB}),
        CostRecord(version=7, at=7, mode=FULL, write_s=1.07, reads={"orders": {"bytes": 29 * MB, "files": 1}}),
    ]
    line = fit([(20.0 * MB, 0.3), (28.0 * MB, 0.54), (29.0 * MB, 1.07)])
    assert line is not None and line.intercept + line.slope * 5 * MB < 0  # (the bare line: below 0 at 5 MB)
    assert line.at(5 * MB) == pytest.approx(0.15)
    # change terms this view measured at 0.1 s: the full diff's bare line (0 s) would refuse them; its floor does not
    terms = [_rec(v, "incremental:aggregate", terms=4 * MB, seconds=0.1) for v in (2, 3, 4)]
    got = pick([Candidate(INCR, 4 * MB, speed=1.0), Candidate(FULL, 5 * MB)], [*fulls, *terms])
    assert got.estimate(FULL).seconds == pytest.approx(0.15) and got.estimate(FULL).basis == "history"
    assert got.picked == INCR and got.estimate(INCR).seconds == pytest.approx(0.1)
