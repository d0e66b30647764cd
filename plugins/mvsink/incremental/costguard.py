"""The scan guard's answer, decided by the cost model (:mod:`mvsink.incremental.costmodel`) where it is on.

The scan guard (:func:`mvsink.incremental.scanguard.scan_reasons`) refuses an incremental mode's change terms when
they would read more than the full diff. With ``MVSINK_COST_MODEL`` on, each of its factors (the change terms on
an engine: Spark's, or DuckDB's in the driver) is a candidate against the full diff, and the view's refresh history
(:mod:`mvsink.core.costrecord`) may override the byte ratio: an incremental candidate its history makes more
expensive than the full diff is refused (the reason gives both estimates), a refused one it makes cheaper runs.
Without a fitted history the answers are the guard's own. Either way the guard's inputs and the estimates are noted
for the refresh's record (:func:`mvsink.core.costrecord.note`). Correctness never depends on the answer: every
mode gives the same rows.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from mvsink import settings
from mvsink.core.costrecord import current_notes, note, read_history
from mvsink.incremental.costmodel import FULL, Candidate, Pick, pick

if TYPE_CHECKING:
    from mvsink.core.batch import SourceRead
    from mvsink.core.costrecord import CostRecord
    from mvsink.core.table import ViewTable

log = logging.getLogger(__name__)

GUARDED = ("incremental:aggregate", "incremental:groups")  # the modes whose change terms the scan guard weighs


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
    names = {s.name for s in changed}
    change = sum(
        int(c.get("bytes", 0)) for n, c in ((current_notes() or {}).get("changes") or {}).items() if n in names
    )
    candidates = [
        Candidate(f"{mode}/{engine}", terms, change, speed=ratio * factor)
        for factor, engine in zip(factors, engines, strict=True)
    ]
    full_c = Candidate(FULL, full)
    on = settings.cost_model()
    if history is None:
        history = read_history(table.path) if on and table.exists else []
    overall = pick([*candidates, full_c], history if on else [])
    note(**overall.to_notes(), why=overall.why, model="on" if on else "off")
    if not on:
        return reasons
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


def change_estimates(
    mode: str,
    source: str,
    sources: list[SourceRead],
    table: ViewTable,
    *,
    driver_factor: float | None = None,
    history: list[CostRecord] | None = None,
) -> Pick | None:
    """The cost model's estimates for a change of ``source`` alone taking ``mode`` or the full diff (for ``mvsink
    explain``), or None where ``mode`` has no scan guard (the model does not choose for it).

    No change is read: the change terms read the other sources whole (their pruning by the change's join keys is
    known only at refresh time, so this is an upper bound), the change's size is the last recorded change of
    ``source`` (else none); ``driver_factor``: the scan guard's multiple for change terms DuckDB evaluates in the
    driver (``DRIVER_SCAN_FACTOR``; None: no such candidate); ``history``: the view's (default: read beside
    ``table``)."""
    from mvsink.core.deltalog import active_bytes

    if mode not in GUARDED:
        return None
    if history is None:
        history = read_history(table.path) if table.exists else []
    sizes = {s.name: active_bytes(s.path, s.version) for s in sources}
    table_bytes = active_bytes(table.path, table.version) if table.exists else 0
    terms = sum(n for name, n in sizes.items() if name != source)
    change = next((int(r.changes[source].get("bytes", 0)) for r in reversed(history) if source in r.changes), 0)
    ratio = settings.incremental_max_scan_ratio()
    candidates = [Candidate(f"{mode}/spark", terms, change, speed=ratio)]
    if mode == "incremental:aggregate" and driver_factor is not None and settings.incremental_driver_terms():
        candidates.append(Candidate(f"{mode}/duckdb", terms, change, speed=ratio * driver_factor))
    return pick([*candidates, Candidate(FULL, sum(sizes.values()) + table_bytes)], history)
