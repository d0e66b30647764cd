"""The cost model: an estimate of each applicable mode's write-step seconds, and the choice among them.

**The prior** is what the scan guard knows (:func:`mvsink.incremental.scanguard.scan_reasons`): the bytes a
candidate reads (an incremental mode's change terms; the full diff's sources and table) over a nominal throughput,
:data:`THROUGHPUT` (a documented default: only the ratio between candidates matters to the prior's choice), an
incremental candidate's time divided by its speed (``MVSINK_INCREMENTAL_MAX_SCAN_RATIO`` times, for change terms
DuckDB evaluates in the driver, ``DRIVER_SCAN_FACTOR``). The prior's choice is exactly the scan guard's: a
candidate whose terms read more than its speed times the full diff's bytes is refused.

**The history** (:mod:`mvsink.core.costrecord`) corrects it: per view and per candidate (``<mode>/<engine>`` for
an incremental one, ``full`` for the full diff), a least-squares line of the write step's seconds against the bytes
read (the terms' estimate plus the change sets' bytes; the full diff's bytes), used once the candidate has
:data:`MIN_POINTS` refreshes; a candidate with fewer has its prior scaled by the view's measured seconds per
prior second (the median over the refreshes of the candidates). A fit that does not hold (one size only, a
negative slope) falls back to the history's mean time or the scaled prior.

**The choice** (:func:`pick`): the prior's, unless a history-based estimate says another candidate is cheaper by
more than :data:`MARGIN` (so a noisy fit does not flip a choice back and forth). Only measured seconds are compared
(a fit, or a prior scaled by the view's measurements): a candidate whose estimate is the nominal prior (no scale:
fewer than :data:`MIN_POINTS` refreshes whose prior is not 0) is never weighed against a fitted one, whose seconds
include fixed costs (a Spark job's start) that the prior's bytes know nothing of. Pure functions: no I/O.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Final, Literal

if TYPE_CHECKING:
    from mvsink.core.costrecord import CostRecord

FULL: Final = "full"
THROUGHPUT: Final = 100e6  # bytes per second of the prior (a documented default: only ratios matter to it)
MIN_POINTS: Final = 3  # refreshes of a candidate before its own fit is used
MARGIN: Final = 0.10  # how much cheaper the history must make another candidate to override the prior's choice
RECHECK_BUDGET: Final = 1.5  # a re-check runs the alternative only where its estimate is at most this times the pick's
FLOOR: Final = 0.5  # a fitted line's estimate is at least this times the fastest refresh it was fitted on
DRIFT: Final = 0.5  # a re-check's time this far (relative) from its estimate restarts the candidate's fit from it

Basis = Literal["prior", "scaled prior", "history"]


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One way to compute a refresh: ``key`` (``<mode>/<engine>`` or :data:`FULL`), the bytes the scan guard
    says it reads (``scan_bytes``), the change sets' bytes it also reads (``change_bytes``; 0 for the full diff)
    and its prior speed (1 for the full diff; the scan ratio, times the driver factor for DuckDB's terms)."""

    key: str
    scan_bytes: int
    change_bytes: int = 0
    speed: float = 1.0

    @property
    def size(self) -> int:
        """The bytes the history's fit reads its time against."""
        return self.scan_bytes + self.change_bytes

    @property
    def prior_seconds(self) -> float:
        return self.scan_bytes / (THROUGHPUT * max(self.speed, 1e-9))


@dataclasses.dataclass(frozen=True)
class Estimate:
    """A candidate's estimated seconds, on what ``basis``, from how many of its own refreshes (``points``)."""

    key: str
    seconds: float
    basis: Basis
    points: int = 0


@dataclasses.dataclass(frozen=True)
class Pick:
    """The model's choice: every candidate's estimate (in the candidates' order), the one picked, the prior's
    choice and why, in words."""

    estimates: tuple[Estimate, ...]
    picked: str
    prior_picked: str
    why: str

    @property
    def basis(self) -> Basis:
        """``history`` where the history decided (some estimate is a fit), else ``prior``."""
        return "history" if any(e.basis == "history" for e in self.estimates) else "prior"

    def estimate(self, key: str) -> Estimate | None:
        return next((e for e in self.estimates if e.key == key), None)

    @property
    def next_best(self) -> Estimate | None:
        """The cheapest estimate of a candidate not picked."""
        rest = [e for e in self.estimates if e.key != self.picked]
        return min(rest, key=lambda e: e.seconds) if rest else None

    def to_notes(self) -> dict[str, object]:
        """What a refresh records of the choice (the commit info's ``mvsink.cost``)."""
        return {
            "estimates": {e.key: round(e.seconds, 4) for e in self.estimates},
            "picked": self.picked,
            "basis": self.basis,
        }


def record_key(r: CostRecord) -> str:
    """The candidate a recorded refresh ran as: :data:`FULL` for the full diff, else ``<mode>/<engine>``."""
    return FULL if r.mode == FULL else f"{r.mode}/{r.engine}"


def record_size(r: CostRecord) -> int:
    """The bytes a recorded refresh read, as :attr:`Candidate.size` counts them: the scan guard's estimate (plus
    the change sets) where the refresh recorded it, else what it read."""
    g = r.guard
    if r.mode == FULL and g.get("full_bytes") is not None:
        return int(g["full_bytes"])
    if r.mode != FULL and g.get("terms_bytes") is not None:
        return int(g["terms_bytes"]) + r.change_bytes
    return r.read_bytes


@dataclasses.dataclass(frozen=True)
class Line:
    """seconds = ``intercept`` + ``slope`` * bytes, fitted on ``points`` refreshes, never below ``floor``
    (:data:`FLOOR` times the fastest of them: a refresh's fixed costs do not vanish below the sizes measured, where
    a line of noisy points can reach 0)."""

    intercept: float
    slope: float
    points: int
    floor: float = 0.0

    def at(self, size: float) -> float:
        return max(self.floor, self.intercept + self.slope * size)


def fit(points: Sequence[tuple[float, float]]) -> Line | None:
    """The least-squares line through ``points`` (bytes, seconds), or None for fewer than :data:`MIN_POINTS`.
    Robust: with one size only, or a negative slope (time does not fall with size), the mean time."""
    n = len(points)
    if n < MIN_POINTS:
        return None
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    if sxx <= 0:
        return Line(my, 0.0, n)
    slope = sum((x - mx) * (y - my) for x, y in points) / sxx
    if slope < 0:
        return Line(my, 0.0, n)
    return Line(my - slope * mx, slope, n, FLOOR * min(y for _, y in points))


def since_drift(key: str, rows: Sequence[CostRecord]) -> list[CostRecord]:
    """Candidate ``key``'s recorded refreshes (``rows``, oldest first) from its latest re-check (:func:`recheck_due`)
    whose measured time was more than :data:`DRIFT` off its estimate: the fit restarts there (the older points
    describe a view, or a machine, that has changed)."""
    start = 0
    for i, r in enumerate(rows):
        rc = r.recheck or {}
        est = float(rc.get("estimate_s") or 0.0)
        if rc.get("ran") == key and est > 0 and abs(r.write_s - est) > DRIFT * est:
            start = i
    return list(rows[start:])


def estimate(candidates: Sequence[Candidate], history: Sequence[CostRecord]) -> tuple[Estimate, ...]:
    """Each candidate's estimate (the module's docstring): its own fit from :data:`MIN_POINTS` refreshes, else its
    prior scaled by the history's seconds per prior second, else the prior. A candidate whose fit a re-check
    restarted (:func:`since_drift`) has, until it has :data:`MIN_POINTS` refreshes again, the mean of its new ones."""
    by_key: dict[str, list[CostRecord]] = {}
    for r in history:
        by_key.setdefault(record_key(r), []).append(r)
    restarted = {k for k, rows in by_key.items() if len(since_drift(k, rows)) < len(rows)}
    by_key = {k: since_drift(k, rows) for k, rows in by_key.items()}
    scale = _scale(candidates, by_key)
    out: list[Estimate] = []
    for c in candidates:
        rows = by_key.get(c.key, [])
        line = fit([(float(record_size(r)), float(r.write_s)) for r in rows])
        if line is not None:
            out.append(Estimate(c.key, line.at(c.size), "history", line.points))
        elif c.key in restarted:
            out.append(Estimate(c.key, statistics.fmean(r.write_s for r in rows), "history", len(rows)))
        elif scale is not None:
            out.append(Estimate(c.key, c.prior_seconds * scale, "scaled prior", len(rows)))
        else:
            out.append(Estimate(c.key, c.prior_seconds, "prior", len(rows)))
    return tuple(out)


def _scale(candidates: Sequence[Candidate], by_key: Mapping[str, list[CostRecord]]) -> float | None:
    """The median of measured seconds over prior seconds across the candidates' recorded refreshes (each at its
    candidate's speed), or None with fewer than :data:`MIN_POINTS` of them."""
    ratios = []
    for c in candidates:
        for r in by_key.get(c.key, []):
            prior = record_size(r) / (THROUGHPUT * max(c.speed, 1e-9))
            if prior > 0:
                ratios.append(r.write_s / prior)
    return statistics.median(ratios) if len(ratios) >= MIN_POINTS else None


def prior_pick(candidates: Sequence[Candidate]) -> str:
    """The scan guard's choice: the first incremental candidate whose terms read at most its speed times the full
    diff's bytes (every one where the full diff reads nothing), else :data:`FULL`."""
    full = next((c for c in candidates if c.key == FULL), None)
    full_bytes = full.scan_bytes if full is not None else 0
    for c in candidates:
        if c.key != FULL and (not full_bytes or c.scan_bytes <= c.speed * full_bytes):
            return c.key
    return FULL


def pick(candidates: Sequence[Candidate], history: Sequence[CostRecord], *, margin: float = MARGIN) -> Pick:
    """The model's choice among ``candidates`` (the incremental ones in the order the mode tries them, the full
    diff among them): the prior's, unless the history makes another cheaper by more than ``margin``."""
    ests = estimate(candidates, history)
    prior = prior_pick(candidates)
    by = {e.key: e for e in ests}
    if all(e.basis != "history" for e in ests):
        return Pick(ests, prior, prior, f"the prior (the scan guard's byte ratio) picks {prior}: no fitted history")
    mine = by[prior]
    measured = [e for e in ests if e.basis != "prior"]  # seconds this view measured (a fit, or a scaled prior)
    if mine.basis == "prior" or len(measured) < 2:
        return Pick(
            ests,
            prior,
            prior,
            f"the prior (the scan guard's byte ratio) picks {prior}: the history measures "
            + ("no other candidate" if mine.basis != "prior" else f"no time of {prior}")
            + " (a nominal prior is not compared with measured seconds)",
        )
    cheapest = min(measured, key=lambda e: e.seconds)
    if cheapest.key != prior and cheapest.seconds * (1 + margin) < mine.seconds:
        return Pick(
            ests,
            cheapest.key,
            prior,
            f"the view's history estimates {cheapest.key} at {cheapest.seconds:.2f} s against {prior}'s "
            f"{mine.seconds:.2f} s (the scan guard's choice), cheaper by more than {margin:.0%}",
        )
    return Pick(ests, prior, prior, f"the view's history keeps the scan guard's choice {prior} ({mine.seconds:.2f} s)")


@dataclasses.dataclass(frozen=True)
class Recheck:
    """A re-check of the model's choice (:func:`recheck_due`): ``kind`` ``alternative`` (the candidate passed over,
    ``ran``, runs instead of the pick, ``instead_of``) or ``choice`` (the pick runs; its time is checked against its
    estimate); ``estimate_s``: the estimate of the candidate that runs, against which its measured time is judged
    after the fact (:func:`since_drift`)."""

    kind: Literal["alternative", "choice"]
    ran: str
    instead_of: str | None
    estimate_s: float

    def to_notes(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "ran": self.ran,
            "instead_of": self.instead_of,
            "estimate_s": round(self.estimate_s, 4),
        }


def recheck_due(got: Pick, history: Sequence[CostRecord], *, every: int) -> Recheck | None:
    """Whether this refresh re-checks the model's choice ``got``, and how; None where not.

    Only choices the history made (:attr:`Pick.basis` ``history``, the pick's estimate measured) are re-checked, once
    ``every`` refreshes of the view have passed without one (``every`` <= 0: never). The cheapest measured candidate
    passed over runs instead where it has not run in those refreshes and its estimate is at most
    :data:`RECHECK_BUDGET` times the pick's (so a re-check costs little): its time is measured again. Else the pick
    runs, its time to be judged against its estimate. Either way, a time more than :data:`DRIFT` off the estimate
    restarts that candidate's fit (:func:`since_drift`): a drifted estimate corrects itself."""
    if every <= 0 or got.basis != "history" or len(history) < every:
        return None
    recent = history[-every:]
    if any(r.recheck for r in recent):
        return None
    mine = got.estimate(got.picked)
    if mine is None or mine.basis == "prior":
        return None
    rest = [e for e in got.estimates if e.key != got.picked and e.basis != "prior"]
    alt = min(rest, key=lambda e: e.seconds) if rest else None
    if (
        alt is not None
        and alt.seconds <= RECHECK_BUDGET * mine.seconds
        and not any(record_key(r) == alt.key for r in recent)
    ):
        return Recheck("alternative", alt.key, got.picked, alt.seconds)
    return Recheck("choice", got.picked, None, mine.seconds)
