"""The scan guard's answer, decided by the cost model (:mod:`mvsink.incremental.costmodel`) where it is on.

The scan guard (:func:`mvsink.incremental.scanguard.scan_reasons`) refuses an incremental mode's change terms when
they would read more than the full diff. With ``MVSINK_COST_MODEL`` on, each of its factors (the change terms on
an engine: Spark's, or DuckDB's in the driver) is a candidate against the full diff, and the view's refresh history
(:mod:`mvsink.core.costrecord`) may override the byte ratio: an incremental candidate its history makes more
expensive than the full diff is refused (the reason gives both estimates), a refused one it makes cheaper runs.
Without a fitted history the answers are the guard's own. Either way the guard's inputs and the estimates are noted
for the refresh's record (:func:`mvsink.core.costrecord.note`). The partitioned recompute's own guard
(:data:`mvsink.incremental.partitioned.SCAN_FACTOR`) is decided the same way (:func:`partition_reason`). Correctness
never depends on the answer: every mode gives the same rows.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from mvsink import settings
from mvsink.core.costrecord import current_notes, note, read_history
from mvsink.incremental.costmodel import FULL, Candidate, Pick, Recheck, pick, recheck_due, record_key

if TYPE_CHECKING:
    from mvsink.core.batch import SourceRead
    from mvsink.core.costrecord import CostRecord
    from mvsink.core.table import ViewTable

log = logging.getLogger(__name__)

GUARDED = ("incremental:aggregate", "incremental:groups")  # the modes whose change terms the scan guard weighs
PARTITIONED = "incremental:partitioned"  # the partitioned recompute: its own guard (partitioned.SCAN_FACTOR)


def _change_bytes(names: set[str]) -> int:
    """The noted change sets' bytes of the sources ``names``."""
    changes = (current_notes() or {}).get("changes") or {}
    return sum(int(c.get("bytes", 0)) for n, c in changes.items() if n in names)


def model_reasons(
    reasons: tuple[str | None, ...],
    changed: list[SourceRead],
    table: ViewTable,
    *,
    figures: tuple[int, int, int],
    factors: tuple[float, ...],
    mode: str,
    engines: tuple[str, ...],
    history: list[CostRecord] | None = None,
) -> tuple[str | None, ...]:
    """The guard's ``reasons`` (one per factor, None: the terms may run), as the cost model decides them.

    ``figures``: the guard's inputs (the terms' bytes, the full diff's, the table's); ``mode``: the mode the
    terms are of; ``engines``: the engine of each factor's terms; ``history``: the view's (default: read beside
    ``table``, only when the model is on)."""
    terms, full, table_bytes = figures
    note(guard={"terms_bytes": terms, "full_bytes": full, "table_bytes": table_bytes})
    ratio = settings.incremental_max_scan_ratio()
    change = _change_bytes({s.name for s in changed})
    candidates = [
        Candidate(f"{mode}/{engine}", terms, change, speed=ratio * factor)
        for factor, engine in zip(factors, engines, strict=True)
    ]
    full_c = Candidate(FULL, full)
    on = settings.cost_model()
    if history is None:
        history = read_history(table.path) if on and table.exists else []
    overall = pick([*candidates, full_c], history if on else [])
    rc = _recheck(overall, history, on=on)
    note(**overall.to_notes(), why=overall.why, model="on" if on else "off")
    if not on:
        return reasons
    if rc is not None and rc.kind == "alternative":  # the candidate passed over runs (the others refused)
        return tuple(None if c.key == rc.ran else _recheck_reason(rc) for c in candidates)
    out: list[str | None] = []
    for c, reason in zip(candidates, reasons, strict=True):
        got = pick([c, full_c], history)
        if got.basis == "prior":  # (the guard's own answer, word for word)
            out.append(reason)
        elif got.picked == FULL:
            out.append(reason or f"the cost model picks the full diff: {got.why}")
        else:
            if reason is not None:
                log.info("cost model: %s runs although the scan guard refused it: %s", c.key, got.why)
            out.append(None)
    return tuple(out)


def _recheck(got: Pick, history: list[CostRecord], *, on: bool) -> Recheck | None:
    """This refresh's re-check of the model's choice (:func:`mvsink.incremental.costmodel.recheck_due`), noted (a
    refresh without one notes ``recheck: None``, over an earlier mode's note)."""
    rc = recheck_due(got, history, every=settings.cost_recheck_every()) if on else None
    note(recheck=None if rc is None else rc.to_notes())
    if rc is not None:
        log.info(
            "cost model: a re-check of its choice %s: %s runs (estimated %.2f s)", got.picked, rc.ran, rc.estimate_s
        )
    return rc


def _recheck_reason(rc: Recheck) -> str:
    return (
        f"a re-check of the cost model ({settings.COST_RECHECK_EVERY.name}): {rc.ran} runs instead of "
        f"{rc.instead_of}, its estimate ({rc.estimate_s:.2f} s) measured again"
    )


def partition_reason(
    reason: str | None,
    changed: list[SourceRead],
    table: ViewTable,
    *,
    read_bytes: float,
    full: int,
    factor: float,
    mode: str = PARTITIONED,
    history: list[CostRecord] | None = None,
) -> str | None:
    """The partitioned recompute's guard (``reason``: its refusal, or None) as the cost model decides it: the
    recompute (``<mode>/spark``: ``mode`` is the refresh mode it serves, ``incremental:partitioned`` or the
    aggregate state's or a top-k's input; reading ``read_bytes`` by the guard's measure, at speed ``factor`` times
    ``MVSINK_INCREMENTAL_MAX_SCAN_RATIO``) against the full diff (``full`` bytes with the table); the same
    prior-then-fit treatment as :func:`model_reasons`, noted for the refresh's record."""
    note(guard={"terms_bytes": int(read_bytes), "full_bytes": full})
    on = settings.cost_model()
    if history is None:
        history = read_history(table.path) if on and table.exists else []
    mine = Candidate(
        f"{mode}/spark",
        int(read_bytes),
        _change_bytes({s.name for s in changed}),
        speed=settings.incremental_max_scan_ratio() * factor,
    )
    got = pick([mine, Candidate(FULL, full)], history if on else [])
    rc = _recheck(got, history, on=on)
    note(**got.to_notes(), why=got.why, model="on" if on else "off")
    if rc is not None and rc.kind == "alternative":
        return None if rc.ran == mine.key else _recheck_reason(rc)
    if not on or got.basis == "prior":
        return reason
    if got.picked == FULL:
        return reason or f"the cost model picks the full diff: {got.why}"
    if reason is not None:
        log.info("cost model: %s runs although its scan guard refused it: %s", mine.key, got.why)
    return None


def change_estimates(
    mode: str,
    source: str,
    sources: list[SourceRead],
    table: ViewTable,
    *,
    driver_factor: float | None = None,
    partition_factor: float = 1.0,
    history: list[CostRecord] | None = None,
) -> Pick | None:
    """The cost model's estimates for a change of ``source`` alone taking ``mode`` or the full diff (for ``mvsink
    explain``), or None where ``mode`` has no scan guard (the model does not choose for it).

    No change is read: the change terms read the other sources whole (their pruning by the change's join keys is
    known only at refresh time, so this is an upper bound), the change's size is the last recorded change of
    ``source`` (else none); ``driver_factor``: the scan guard's multiple for change terms DuckDB evaluates in the
    driver (``DRIVER_SCAN_FACTOR``; None: no such candidate); ``partition_factor``: the partitioned recompute's
    guard's multiple (``partitioned.SCAN_FACTOR``); ``history``: the view's (default: read beside
    ``table``)."""
    from mvsink.core.deltalog import active_bytes

    if mode not in (*GUARDED, PARTITIONED):
        return None
    if history is None:
        history = read_history(table.path) if table.exists else []
    sizes = {s.name: active_bytes(s.path, s.version) for s in sources}
    table_bytes = active_bytes(table.path, table.version) if table.exists else 0
    if mode == PARTITIONED:  # the last recorded recompute's reads, else both versions of every source read whole
        key = f"{PARTITIONED}/spark"
        last = next((r for r in reversed(history) if record_key(r) == key and "terms_bytes" in r.guard), None)
        reads = int(last.guard["terms_bytes"]) if last is not None else 2 * sum(sizes.values())
        change = next((int(r.changes[source].get("bytes", 0)) for r in reversed(history) if source in r.changes), 0)
        mine = Candidate(key, reads, change, speed=settings.incremental_max_scan_ratio() * partition_factor)
        return pick([mine, Candidate(FULL, sum(sizes.values()) + table_bytes)], history)
    terms = sum(n for name, n in sizes.items() if name != source)
    change = next((int(r.changes[source].get("bytes", 0)) for r in reversed(history) if source in r.changes), 0)
    ratio = settings.incremental_max_scan_ratio()
    candidates = [Candidate(f"{mode}/spark", terms, change, speed=ratio)]
    if mode == "incremental:aggregate" and driver_factor is not None and settings.incremental_driver_terms():
        candidates.append(Candidate(f"{mode}/duckdb", terms, change, speed=ratio * driver_factor))
    return pick([*candidates, Candidate(FULL, sum(sizes.values()) + table_bytes)], history)
