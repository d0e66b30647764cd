"""The scan guard: whether an incremental mode's change terms (:func:`mvsink.incremental.telescope.change_terms`)
would read more than the full diff, estimated in bytes from the Delta log (pruned reads by their statistics), and the
reasons a mode is refused for it (or, where on, the cost model's: :mod:`mvsink.incremental.costguard`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mvsink.core.deltalog import active_bytes
from mvsink.incremental.telescope import change_terms

if TYPE_CHECKING:
    from mvsink.core.batch import BatchDescription, SourceRead
    from mvsink.core.table import ViewTable
    from mvsink.incremental.pruning import PrunedRead
    from mvsink.incremental.telescope import ChangeTerms


def scan_estimate(
    desc: BatchDescription,
    base: dict[str, int],
    changed: list[SourceRead],
    pruned: dict[str, list[PrunedRead]] | None,
) -> tuple[int, int]:
    """(bytes the change terms read of the sources, bytes the full diff reads of them): each change term reads
    every source that is not one of its changes, pruned where :func:`term_reads` says so (change files are
    small next to them: the change-set guard sees to that)."""
    sizes: dict[tuple[str, int], int] = {}

    def size(s: SourceRead, version: int) -> int:
        if (s.name, version) not in sizes:
            sizes[(s.name, version)] = active_bytes(s.path, version)
        return sizes[(s.name, version)]

    terms = 0
    for t in change_terms(changed, base):
        reads = {r.source: r.bytes for r in (pruned or {}).get(t.key, [])}
        mine = {s.name for s in t.changes}
        terms += sum(reads.get(o.name, size(o, t.version(o, base))) for o in desc.sources if o.name not in mine)
    return terms, sum(size(s, s.version) for s in desc.sources)


def scan_guard(
    ct: ChangeTerms,
    table: ViewTable,
    *,
    pruned: dict[str, list[PrunedRead]] | None = None,
    factor: float = 1.0,
    mode: str = "",
) -> str | None:
    """Why the change terms would cost more than the full diff, or None (``factor``: the ratio's multiple;
    ``mode``: the mode they are the terms of, which the cost model keeps its history under).

    Each change term reads every source that is not one of its changes (this module's docstring) — pruned
    by the change's join keys where ``pruned`` (:func:`term_reads`) says so, else whole — so with several
    sources changed the terms can read more than the full diff, which reads each source once and the view's
    table. Estimated in bytes of the active files (the Delta log's sizes and, for pruned reads, its per-file
    statistics; change files are small next to them, the change-set guard sees to that), against
    ``MVSINK_INCREMENTAL_MAX_SCAN_RATIO``.
    """
    return scan_guards(ct, table, pruned=pruned, factors=(factor,), mode=mode)[0]


def scan_guards(
    ct: ChangeTerms,
    table: ViewTable,
    *,
    pruned: dict[str, list[PrunedRead]] | None = None,
    factors: tuple[float, ...],
    mode: str = "",
    engines: tuple[str, ...] | None = None,
) -> tuple[str | None, ...]:
    """:func:`scan_guard` at each of ``factors``, the estimate made once."""
    return scan_reasons(ct.desc, ct.base, ct.changed, table, pruned=pruned, factors=factors, mode=mode, engines=engines)


def scan_reasons(
    desc: BatchDescription,
    base: dict[str, int],
    changed: list[SourceRead],
    table: ViewTable,
    *,
    pruned: dict[str, list[PrunedRead]] | None,
    factors: tuple[float, ...],
    mode: str = "",
    engines: tuple[str, ...] | None = None,
) -> tuple[str | None, ...]:
    """:func:`scan_guards` of the changes of ``changed`` (no Spark), as the cost model decides them
    (:func:`mvsink.incremental.costguard.model_reasons`: these very answers for a view with no history, or
    with the model off); ``engines``: per factor, the engine its change terms run on (default ``spark``)."""
    from mvsink.incremental.costguard import model_reasons

    terms, full, table_bytes = scan_figures(desc, base, changed, table, pruned=pruned)
    return model_reasons(
        guard_reasons(changed, terms, full, factors=factors),
        changed,
        table,
        figures=(terms, full, table_bytes),
        factors=factors,
        mode=mode or "incremental",
        engines=engines or ("spark",) * len(factors),
    )


def scan_figures(
    desc: BatchDescription,
    base: dict[str, int],
    changed: list[SourceRead],
    table: ViewTable,
    *,
    pruned: dict[str, list[PrunedRead]] | None,
) -> tuple[int, int, int]:
    """The scan guard's inputs: (bytes the change terms read, bytes the full diff reads with the table, the
    table's bytes)."""
    terms, sources = scan_estimate(desc, base, changed, pruned)
    table_bytes = active_bytes(table.path, table.version) if table.exists else 0
    return terms, sources + table_bytes, table_bytes


def guard_reasons(
    changed: list[SourceRead], terms: int, full: int, *, factors: tuple[float, ...]
) -> tuple[str | None, ...]:
    """The scan guard at each of ``factors``: why the change terms (``terms`` bytes) would cost more than the full
    diff (``full`` bytes) at ``MVSINK_INCREMENTAL_MAX_SCAN_RATIO`` times the factor, or None."""
    from mvsink import settings

    ratio = settings.incremental_max_scan_ratio()
    return tuple(
        (
            f"the changes of {', '.join(s.name for s in changed)} would be joined with {terms / 1e6:.1f} MB of "
            f"the other sources, more than the full diff reads ({full / 1e6:.1f} MB with the table; "
            f"{settings.INCREMENTAL_MAX_SCAN_RATIO.name}={ratio:g})"
        )
        if full and terms > factor * ratio * full
        else None
        for factor in factors
    )
