"""mint: read the frontiers, pick the batch description ``(lower, upper)``. Cheap, no Spark."""

from __future__ import annotations

import dataclasses
import logging
import time
import uuid

from mvsink.core.batch import BatchDescription, NothingToDo, SourceRead, make_batch_id
from mvsink.core.probe import check_conditional_writes
from mvsink.core.staging import collect_garbage, list_staged
from mvsink.core.table import ViewTable, open_readable, table_id, version_at
from mvsink.definitions.catalog import Catalog
from mvsink.definitions.view import ViewDefinition
from mvsink.times import format_duration, format_time

log = logging.getLogger(__name__)

SHORTCUT_HISTORY_LIMIT = 50


def mint(
    view: ViewDefinition,
    refresh_time: int,
    *,
    catalog: Catalog | None = None,
    run_id: str | None = None,
    dry_run: bool = False,
) -> BatchDescription | NothingToDo:
    """Mint the batch that brings ``view`` up to ``refresh_time``, or say why there is none."""
    run_id = run_id or f"cli-{uuid.uuid4().hex[:12]}"
    table = ViewTable.open(view)
    frontier = table.frontier
    if not table.exists and not dry_run:
        # before anything is staged there: a store without put-if-absent is refused up front
        check_conditional_writes(view.target)
    if table.exists and list_staged(view.target):
        collect_garbage(view.target, upper=frontier.upper, active=table.active_paths())
    lower = max(frontier.upper, view.as_of)
    desired = refresh_time + 1
    if desired <= view.as_of:
        return NothingToDo(
            view.name,
            frontier.upper,
            refresh_time,
            "before_as_of",
            f"refresh time {format_time(refresh_time)} is before as_of {format_time(view.as_of)}",
        )
    if desired <= lower:
        return NothingToDo(
            view.name,
            frontier.upper,
            refresh_time,
            "up_to_date",
            f"up to date through {format_time(frontier.upper - 1)} (upper {frontier.upper})",
        )

    sources: list[SourceRead] = []
    capped_by: list[str] = []
    for s in view.sources:
        role = f"view {view.name}: source '{s.name}'"
        if s.kind == "path":
            assert s.path is not None
            v = version_at(s.path, refresh_time, role=role)
            sdt = open_readable(s.path, version=v, role=role)
            sources.append(SourceRead(name=s.name, kind="path", path=s.path, version=v, table_id=table_id(sdt)))
        else:
            if catalog is None:
                raise ValueError(f"view {view.name}: source '{s.name}' is a view; mint needs the catalog")
            up = catalog.upstream(view, s)
            ufr = ViewTable.open(up, check=False).frontier
            if ufr.upper < desired:
                desired = ufr.upper
                capped_by.append(f"{up.name} (upper {ufr.upper})")
            sources.append(
                SourceRead(name=s.name, kind="view", path=up.target, version=ufr.version, upper=ufr.upper, view=up.name)
            )
    if desired <= lower:
        return NothingToDo(
            view.name,
            frontier.upper,
            refresh_time,
            "waiting_for_inputs",
            f"inputs are final only below {desired}: {', '.join(capped_by)}; the view stays at upper {frontier.upper}",
        )

    desc = BatchDescription(
        view=view.name,
        target=view.target,
        lower=lower,
        upper=desired,
        refresh_time=refresh_time,
        table_version=frontier.version,
        sources=tuple(sources),
        run_id=run_id,
        batch_id=make_batch_id(view.name, lower, desired, run_id),
        definition=view.definition_hash(),
        dry_run=dry_run,
        minted_at=int(time.time() * 1000),
    )
    base = last_refresh_sources(desc, table) if table.exists else None
    base_checks = last_refresh_checks(table) if base is not None and view.checks else None
    if base is not None and base == {s.name: s.version for s in desc.sources}:
        desc = dataclasses.replace(desc, empty=True, base_checks=base_checks)
    elif base is not None and view.incremental:
        due = full_refresh_due(view, table, desc.refresh_time)
        if due is not None:
            desc = dataclasses.replace(desc, full_reason=due)
        else:
            desc = dataclasses.replace(desc, base_versions=base, base_checks=base_checks)
    log.info(
        "view %s: minted [%d, %d) at refresh time %s%s",
        view.name,
        lower,
        desired,
        format_time(refresh_time),
        " (no source changed: nothing to write)" if desc.empty else "",
    )
    return desc


def last_refresh_sources(desc: BatchDescription, table: ViewTable) -> dict[str, int] | None:
    """Source versions the table's contents are the query over, if that is known; else None.

    Known when the last content-changing commit is our append of the same definition: it made
    the contents equal to the query over the source versions it recorded. A foreign commit (a hand
    edit, another writer) or a changed definition makes it unknown, so self-correction is never
    skipped. Views over views never qualify: an upstream's contents change with time even at one
    Delta version.
    """
    if any(s.kind == "view" for s in desc.sources):
        return None
    last = table.last_content_change(limit=SHORTCUT_HISTORY_LIMIT)
    info = last.info if last is not None else None
    if info is None or info.operation != "append" or info.definition != desc.definition:
        return None
    if not isinstance(info.sources, dict) or info.source_ids != {s.name: s.table_id for s in desc.sources}:
        return None  # a source table was re-created (same path, new table): its versions are not comparable
    return {k: int(v) for k, v in info.sources.items()}


def full_refresh_due(view: ViewDefinition, table: ViewTable, refresh_time: int) -> str | None:
    """Why the view's ``full_refresh_every`` asks for the full diff now, or None (not set, or not due).

    Counts from the newest append that took the full diff (within the last
    :data:`SHORTCUT_HISTORY_LIMIT` commits; none found there: due).
    """
    every = view.full_refresh_every
    if every is None:
        return None
    since_full = 0
    for h in table.history(SHORTCUT_HISTORY_LIMIT):
        info = h.info
        if info is None or info.operation != "append":
            continue
        if info.mode == "full":
            kind, n = every
            if kind == "refreshes" and since_full + 1 >= n:
                return f"full_refresh_every: {n} refreshes (the last full diff was {since_full} refresh(es) ago)"
            if kind == "ms" and info.refresh_time is not None and refresh_time - info.refresh_time >= n:
                return (
                    f"full_refresh_every: {format_duration(n)} (the last full diff was at "
                    f"{format_time(info.refresh_time)})"
                )
            return None
        since_full += 1
    return f"full_refresh_every: no full diff in the last {SHORTCUT_HISTORY_LIMIT} commits"


def last_refresh_checks(table: ViewTable) -> dict[str, object] | None:
    """Check counts (totals over desired) the last append recorded, or None."""
    last = table.last_content_change(limit=SHORTCUT_HISTORY_LIMIT)
    info = last.info if last is not None else None
    if info is None or info.operation != "append":
        return None
    return info.checks if isinstance(info.checks, dict) else None
