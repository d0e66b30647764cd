"""mint: read the frontiers, pick the batch description ``(lower, upper)``. Cheap, no Spark."""

from __future__ import annotations

import dataclasses
import logging
import os
import time

from mvsink.columns import TIME
from mvsink.core.batch import BatchDescription, NothingToDo, SourceRead, make_batch_id
from mvsink.core.probe import check_conditional_writes
from mvsink.core.staging import collect_garbage, list_staged
from mvsink.core.table import ViewTable, open_readable, table_id, version_at
from mvsink.core.viewchanges import view_changes
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
    run_id = run_id or f"cli-{os.urandom(6).hex()}"
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

    sources, desired, capped_by = _read_sources(view, refresh_time, desired, catalog)
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
    desc = _with_base(desc, view, table)
    log.info(
        "view %s: minted [%d, %d) at refresh time %s%s",
        view.name,
        lower,
        desired,
        format_time(refresh_time),
        " (no source changed: nothing to write)" if desc.empty else "",
    )
    return desc


def _read_sources(
    view: ViewDefinition, refresh_time: int, desired: int, catalog: Catalog | None
) -> tuple[list[SourceRead], int, list[str]]:
    """What the batch reads of each source: a table's version at ``refresh_time``, a view's newest version.

    A view source final only below ``desired`` lowers it to its upper. Returns the reads, the (possibly
    lowered) ``desired`` and the view sources that lowered it.
    """
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
            utable = ViewTable.open(up, check=False)
            ufr = utable.frontier
            if ufr.upper < desired:
                desired = ufr.upper
                capped_by.append(f"{up.name} (upper {ufr.upper})")
            sources.append(
                SourceRead(
                    name=s.name,
                    kind="view",
                    path=up.target,
                    version=ufr.version,
                    upper=ufr.upper,
                    view=up.name,
                    table_id=table_id(utable.delta) if utable.exists else None,
                )
            )
    return sources, desired, capped_by


def _with_base(desc: BatchDescription, view: ViewDefinition, table: ViewTable) -> BatchDescription:
    """``desc`` with what write starts from: empty (no source changed since the last refresh), the last
    refresh's source versions (incremental), or why it takes the full diff."""
    last = last_refresh_sources(desc, table) if table.exists else None
    if table.exists and rows_past_frontier(table, desc.lower):
        return dataclasses.replace(desc, full_reason=PAST_FRONTIER)
    base = last if isinstance(last, LastRefresh) else None
    base_checks = last_refresh_checks(table) if base is not None and view.checks else None
    if base is not None and sources_unchanged(desc, base):
        desc = dataclasses.replace(desc, empty=True, base_checks=base_checks)
    elif base is not None and view.incremental:
        due = full_refresh_due(view, table, desc.refresh_time)
        if due is not None:
            desc = dataclasses.replace(desc, full_reason=due)
        else:
            desc = dataclasses.replace(desc, base_versions=base.versions, base_time=base.time, base_checks=base_checks)
    elif isinstance(last, str):  # the contents are not known to be the query over any sources: say why
        desc = dataclasses.replace(desc, full_reason=last)
    return desc


PAST_FRONTIER = (
    "the table holds rows stamped at or past its frontier (a foreign writer's): the full diff compares every row up "
    "to the refresh time"
)


def rows_past_frontier(table: ViewTable, lower: int) -> bool:
    """Does the table hold updates stamped at or past ``lower`` (its frontier), by its files' statistics? Only a
    foreign writer puts them there (an append stamps its rows below its upper), and they become visible at their
    times, which the next refresh times reach. Files without a ``_mv_time`` maximum in their statistics are not
    seen (mvsink's own batches of a view with nested state columns have none)."""
    actions = table.delta.get_add_actions(flatten=True)  # (arro3's table: no pyarrow import for this)
    if actions.num_rows == 0:
        return False
    names = actions.column_names
    counts = actions.column("num_records").to_pylist() if "num_records" in names else [None] * actions.num_rows
    highs = actions.column(f"max.{TIME}").to_pylist() if f"max.{TIME}" in names else [None] * actions.num_rows
    return any(n != 0 and hi is not None and hi >= lower for n, hi in zip(counts, highs, strict=True))


@dataclasses.dataclass(frozen=True)
class LastRefresh:
    """What the table's contents are known to be: the query over these source versions, read at ``time``."""

    versions: dict[str, int]  # source name -> Delta version the last append read
    time: int  # the time it read them at (its batch's upper - 1)


def last_refresh_sources(desc: BatchDescription, table: ViewTable) -> LastRefresh | str:
    """The source versions (and read time) the table's contents are the query over, or why that is not known.

    Known when the last content-changing commit is our append of the same definition over the same source
    tables: it made the contents equal to the query over the source versions it recorded, read at its
    batch's time. A foreign commit (a hand edit, another writer) or a changed definition makes it unknown,
    so self-correction is never skipped.
    """
    last = table.last_content_change(limit=SHORTCUT_HISTORY_LIMIT)
    if last is None:
        return f"no earlier refresh to start from (none among the table's last {SHORTCUT_HISTORY_LIMIT} commits)"
    info = last.info
    if info is None:
        return (
            f"a commit mvsink did not make (version {last.version}, {last.operation}: a hand edit or another "
            "writer) changed the table since the last refresh; the full diff repairs it"
        )
    if info.operation != "append":
        return f"the table's last change is a {info.operation} commit (version {last.version}), not a refresh"
    if info.definition != desc.definition:
        return f"the view's definition changed since the last refresh (version {last.version})"
    if not isinstance(info.sources, dict) or not isinstance(info.upper, int):
        return f"the last refresh (version {last.version}) recorded no source versions"
    ids = info.source_ids if isinstance(info.source_ids, dict) else {}
    for s in desc.sources:
        if s.name not in info.sources:
            return f"the last refresh (version {last.version}) did not read source {s.name!r}"
        if ids.get(s.name) is None:
            return f"the last refresh (version {last.version}) recorded no table id for source {s.name!r}"
        if ids[s.name] != s.table_id:
            # a source table re-created at the same path: its versions are not comparable
            return (
                f"source {s.name!r} is not the table the last refresh read (version {last.version} recorded "
                f"table id {ids.get(s.name)}, now {s.table_id})"
            )
    return LastRefresh(versions={k: int(v) for k, v in info.sources.items()}, time=info.upper - 1)


def sources_unchanged(desc: BatchDescription, base: LastRefresh) -> bool:
    """No source changed since the last refresh read them: the no-change shortcut applies.

    A table source has the same Delta version. A view source may have a newer version, and its contents
    change with time even at one version: it is unchanged when its update log provably holds nothing
    between the last read time and this batch's (core/viewchanges.py).
    """
    for s in desc.sources:
        if s.name not in base.versions:
            return False
        if s.kind == "path":
            if base.versions[s.name] != s.version:
                return False
            continue
        changes = view_changes(s, base_version=base.versions[s.name], base_time=base.time, time=desc.time)
        if isinstance(changes, str) or not changes.empty:
            return False
    return True


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
