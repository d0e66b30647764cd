"""One refresh: mint, write, append. The write step is passed in (it runs Spark; core does not)."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable

from mvsink.core.append import RefreshResult, append
from mvsink.core.batch import BatchDescription, NothingToDo, WriteReport
from mvsink.core.deltalog import snapshot_cache
from mvsink.core.mint import mint
from mvsink.core.sourceschema import source_columns
from mvsink.definitions.catalog import Catalog
from mvsink.definitions.intermediate import CTE, HAVING, OUTER_FULL_MAX_BYTES, TOPK, intermediate_split
from mvsink.definitions.view import ViewDefinition

log = logging.getLogger(__name__)

WriteStep = Callable[[ViewDefinition, BatchDescription], WriteReport]


def run_refresh(
    view: ViewDefinition,
    refresh_time: int,
    *,
    write: WriteStep,
    catalog: Catalog | None = None,
    dry_run: bool = False,
    run_id: str | None = None,
) -> RefreshResult:
    """Make ``view`` equal to its query as of ``refresh_time`` (or say why not).

    ``write`` computes and stages the corrections of a batch (see :mod:`mvsink.write.runners`);
    it is not called when mint finds nothing to do or knows the corrections are empty.
    """
    split = None if dry_run else intermediate_split(view, columns_of=source_columns)
    if split is None:
        with snapshot_cache():  # each table version mint, write and append read is opened once
            return _run_refresh(view, refresh_time, write=write, catalog=catalog, dry_run=dry_run, run_id=run_id)
    # A top-k over an aggregate, an aggregate in a WITH clause or a HAVING over scalar subqueries: the intermediate
    # tables first, then the view over them (mvsink.definitions.intermediate). One cache for them all: what it
    # keeps is per table version (a source the intermediates share is opened once), and the view finds the
    # intermediates' new versions by their newest commit files.
    inners = []
    with snapshot_cache():
        for part in split.inners:
            log.info("view %s: refreshing its intermediate table %s first", view.name, part.target)
            got = _run_refresh(part, refresh_time, write=write, catalog=catalog, dry_run=False, run_id=run_id)
            log.info("view %s: intermediate %s", view.name, got.summary())
            inners.append(got)
        outer = _run_refresh(
            split.outer, refresh_time, write=write, catalog=split.catalog(catalog), dry_run=False, run_id=run_id
        )
    return with_intermediate(outer, inners[0], kind=split.kind, more=tuple(inners[1:]))


def with_intermediate(
    outer: RefreshResult, inner: RefreshResult, *, kind: str = TOPK, more: tuple[RefreshResult, ...] = ()
) -> RefreshResult:
    """The view's result with its intermediate tables' refreshes folded in (``inner``, then ``more``: a HAVING's
    scalar subqueries): the reason says how each intermediate was refreshed, timings and Spark jobs add up
    (``inner.*``, ``inner2.*`` timings), reads are the intermediates' (the sources).

    The view's mode is the intermediates' incremental mode where the view's own refresh did no work in proportion
    to the sources: its top k did not move (``kind`` :data:`TOPK`), or (``kind`` :data:`CTE` or :data:`HAVING`) its
    query's body was recomputed over the intermediates' rows reading at most :data:`OUTER_FULL_MAX_BYTES` of tables
    besides them (TPC-H Q15: the suppliers of the greatest revenue, over the revenue per supplier and the supplier
    table; Q11: the parts above a fraction of the total, over the value per part and the total). Where any
    intermediate took the full diff, so did the view's refresh."""
    parts = (inner, *more)
    notes = []
    for r in parts:
        what = r.mode or r.status.replace("_", " ")
        notes.append(f"intermediate table {r.view}: {what}" + (f" ({r.mode_reason})" if r.mode_reason else ""))
    note = "; ".join(notes)
    timings = {
        **{f"inner{i if i > 1 else ''}.{k}": v for i, r in enumerate(parts, start=1) for k, v in r.timings.items()},
        **outer.timings,
    }
    counts = [r.spark_jobs for r in (*parts, outer)]
    jobs = -1 if -1 in counts else sum(counts)
    fulls = [r for r in parts if r.mode == "full"]
    incremental = next((r.mode for r in parts if r.mode.startswith("incremental")), "")
    inner = fulls[0] if fulls else dataclasses.replace(inner, mode=incremental or inner.mode)
    mode, reason = outer.mode, outer.mode_reason
    body = "the top k" if kind == TOPK else "the query's body"
    if inner.mode == "full" and mode in ("", "unchanged"):
        # the intermediate recomputed in full: the view's refresh is a full diff, whatever its own batch
        mode, reason = "full", f"the intermediate table's full diff; {body} is unchanged"
    elif inner.mode.startswith("incremental"):
        if mode in ("", "unchanged"):
            # the intermediate refreshed from the sources' changes and the view's rows did not move: the view's
            # refresh is the intermediate's (the view's own commit records its empty batch as unchanged)
            mode, reason = inner.mode, f"{body} is unchanged"
        elif mode == "full" and kind in (CTE, HAVING):
            names = {r.view for r in parts}
            tables = sum(r.get("bytes", 0) for s, r in outer.reads.items() if s != "_table" and s not in names)
            if tables <= OUTER_FULL_MAX_BYTES:
                mode = inner.mode
                what = "the intermediate table" if len(parts) == 1 else f"the {len(parts)} intermediate tables"
                reason = f"the query's body recomputed over {what} and {tables} bytes of other tables ({reason})"
    reads = {k: v for r in parts for k, v in r.reads.items()}
    return dataclasses.replace(
        outer,
        mode=mode,
        mode_reason=f"{reason}; {note}" if reason else note,
        timings=timings,
        spark_jobs=jobs,
        reads=(reads or outer.reads) if kind == TOPK else {**outer.reads, **reads},
    )


def _run_refresh(
    view: ViewDefinition,
    refresh_time: int,
    *,
    write: WriteStep,
    catalog: Catalog | None,
    dry_run: bool,
    run_id: str | None,
) -> RefreshResult:
    t0 = time.monotonic()
    desc = mint(view, refresh_time, catalog=catalog, run_id=run_id, dry_run=dry_run)
    t_mint = time.monotonic() - t0
    if isinstance(desc, NothingToDo):
        return RefreshResult(
            view=view.name,
            status="up_to_date",
            refresh_time=refresh_time,
            upper=desc.upper,
            reason=desc.detail if desc.reason == "up_to_date" else f"{desc.reason.replace('_', ' ')}: {desc.detail}",
            timings={"mint": t_mint},
        )
    t1 = time.monotonic()
    report = None if desc.empty else write(view, desc)
    t_write = time.monotonic() - t1
    t2 = time.monotonic()
    result = append(view, desc, report)
    timings = {"mint": t_mint, "write": t_write, "append": time.monotonic() - t2}
    if report is not None:
        timings.update({f"write.{k}": v for k, v in report.phases.items()})
    return dataclasses.replace(result, timings=timings, spark_jobs=report.spark_jobs if report is not None else 0)
