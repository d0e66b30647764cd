"""The cost model's periodic re-check (MVSINK_COST_RECHECK_EVERY) on recorded histories: a drifted estimate is
measured again and corrected (pure: no I/O)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from mvsink.core.costrecord import CostRecord
from mvsink.incremental.costmodel import FULL, Candidate, pick, recheck_due, record_key

pytestmark = pytest.mark.unit

INCR = "incremental:aggregate/spark"
MB = 1_000_000
GUARD = {"terms_bytes": 40 * MB, "full_bytes": 200 * MB, "table_bytes": 10 * MB}
CANDS = [Candidate(INCR, 40 * MB, speed=1.0), Candidate(FULL, 200 * MB)]  # the prior (the guard) picks INCR


def _rec(v: int, key: str, seconds: float, **kw: object) -> CostRecord:
    mode, _, engine = key.partition("/")
    return CostRecord(version=v, at=v, mode=mode, engine=engine or "spark", write_s=seconds, guard=GUARD, **kw)  # type: ignore[arg-type]


def _stream(
    history: list[CostRecord], cost: Callable[[str], float], rounds: int, *, every: int
) -> list[tuple[str, str | None]]:
    """Refresh ``rounds`` times as the write step does: pick, maybe re-check, run (the true ``cost`` of what ran),
    record what ran with the choice's notes. Returns (what ran, the re-check's kind) per round."""
    out = []
    for _ in range(rounds):
        got = pick(CANDS, history)
        rc = recheck_due(got, history, every=every)
        ran = rc.ran if rc is not None else got.picked
        v = len(history) + 1
        notes = got.to_notes()
        history.append(
            _rec(
                v,
                ran,
                cost(ran),
                estimates=notes["estimates"],
                picked=got.picked,
                basis=got.basis,
                recheck=None if rc is None else rc.to_notes(),
            )
        )
        out.append((ran, None if rc is None else rc.kind))
    return out


def test_a_drifted_alternative_is_run_again_and_corrected():
    """The full diff's fit is 4 s (measured when the table was busier); it now takes 1.5 s, the change terms 3 s.
    Without a re-check the model runs the terms for ever (the full diff never runs, its fit never moves); with
    one every 5 refreshes, the full diff runs once (its 4 s estimate within 1.5x the terms' 3 s), measures 1.5 s
    (over 50 % off): its fit restarts there, and every later refresh takes the full diff."""
    old = [_rec(v, FULL, 4.0 + 0.01 * v) for v in (1, 2, 3)] + [_rec(v, INCR, 3.0) for v in (4, 5, 6)]

    def now(key: str) -> float:
        return 1.5 if key == FULL else 3.0

    never = _stream(list(old), now, 12, every=0)
    assert {ran for ran, _ in never} == {INCR}
    history = list(old)
    runs = _stream(history, now, 12, every=5)
    # the first re-check (due at once: 6 refreshes, none a re-check) re-checks the choice: the full diff ran within
    # the last 5 refreshes; the terms' 3 s hold their estimate. The next, 5 refreshes on, runs the full diff.
    assert runs[0] == (INCR, "choice") and [kind for _, kind in runs[1:6]] == [None] * 5
    first = next(i for i, (_, kind) in enumerate(runs) if kind == "alternative")
    assert runs[first] == (FULL, "alternative") and first == 6  # 5 refreshes after the last re-check
    assert all(ran == FULL for ran, _ in runs[first:]), runs
    got = pick(CANDS, history)
    assert got.picked == FULL and got.basis == "history"
    assert got.estimate(FULL).seconds == pytest.approx(1.5)  # the restarted fit: the new measurements only
    rc = history[len(old) + first].recheck
    assert rc == {"kind": "alternative", "ran": FULL, "instead_of": INCR, "estimate_s": pytest.approx(4.02, abs=0.01)}


def test_a_drifted_choice_restarts_its_own_fit():
    """The change terms' fit rests on ten refreshes at 1 s; they now take 3.5 s (the view grew), the full diff
    2 s. The terms keep running, their least-squares mean creeping up; the re-check of the choice (the full diff
    at 2 s is not cheap enough to run: its estimate over 1.5x the terms') sees 3.5 s against the estimate, more
    than 50 % off: the terms' fit restarts at 3.5 s and the model turns to the full diff."""
    old = [_rec(v, INCR, 1.0) for v in range(1, 11)] + [_rec(v, FULL, 2.0) for v in (11, 12, 13)]

    def now(key: str) -> float:
        return 2.0 if key == FULL else 3.5

    never = _stream(list(old), now, 3, every=0)
    assert [ran for ran, _ in never] == [INCR] * 3  # the stale fit: 1.2-1.6 s, still under the full diff's 2 s
    history = list(old)
    runs = _stream(history, now, 12, every=10)
    first = next(i for i, (_, kind) in enumerate(runs) if kind is not None)
    assert runs[first] == (INCR, "choice")
    assert all(ran == FULL for ran, _ in runs[first + 1 :]), runs
    assert pick(CANDS, history).estimate(INCR).seconds == pytest.approx(3.5)


def test_no_recheck_where_the_prior_decided_or_too_soon():
    history = [_rec(v, INCR, 1.0) for v in range(1, 30)]  # the full diff never measured: the prior decides
    got = pick(CANDS, history)
    assert got.basis == "history"  # (the terms are fitted) but the full diff's estimate is the nominal prior
    rc = recheck_due(got, history, every=10)
    assert rc is not None and rc.kind == "choice"  # the pick's own time is re-checked; no nominal alternative runs
    assert recheck_due(pick(CANDS, []), [], every=10) is None  # no history: the prior's choice, nothing to check
    recent = [*history, _rec(30, INCR, 1.0, recheck={"kind": "choice", "ran": INCR, "estimate_s": 1.0})]
    assert recheck_due(pick(CANDS, recent), recent, every=10) is None  # one within the last 10 refreshes
    assert recheck_due(got, history, every=0) is None  # off
    assert all(record_key(r) == INCR for r in history)
