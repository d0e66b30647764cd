"""The scan guard's answer, decided by the cost model (:mod:`mvsink.incremental.costmodel`) where it is on.

The scan guard (:func:`mvsink.incremental.telescope.scan_reasons`) refuses an incremental mode's change terms when
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
from mvsink.incremental.costmodel import FULL, Candidate, pick

if TYPE_CHECKING:
    from mvsink.core.batch import SourceRead
    from mvsink.core.costrecord import CostRecord
    from mvsink.core.table import ViewTable

log = logging.getLogger(__name__)


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
        if got.picked == FULL:
            out.append(reason or f"the cost model picks the full diff: {got.why}")
        else:
            if reason is not None:
                log.info("cost model: %s runs although the scan guard refused it: %s", c.key, got.why)
            out.append(None)
    return tuple(out)
