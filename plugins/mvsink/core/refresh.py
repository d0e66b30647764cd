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
from mvsink.definitions.catalog import Catalog
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
    with snapshot_cache():  # each table version mint, write and append read is opened once
        return _run_refresh(view, refresh_time, write=write, catalog=catalog, dry_run=dry_run, run_id=run_id)


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
