"""One refresh: mint, write, append."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from mvsink.core.append import RefreshResult, append
from mvsink.core.batch import NothingToDo
from mvsink.core.mint import mint
from mvsink.definitions.view import Catalog, ViewDefinition
from mvsink.spark.runners import Runner, run_write_inprocess, run_write_submit

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


def refresh(
    view: ViewDefinition,
    refresh_time: int,
    *,
    catalog: Catalog | None = None,
    dry_run: bool = False,
    run_id: str | None = None,
    runner: Runner = "submit",
    spark: SparkSession | None = None,
    master: str = "local[2]",
    spark_conf: Mapping[str, str] | None = None,
    remote: str | None = None,
) -> RefreshResult:
    """Make ``view`` equal to its query as of ``refresh_time`` (or say why not)."""
    t0 = time.monotonic()
    desc = mint(view, refresh_time, catalog=catalog, run_id=run_id, dry_run=dry_run)
    t_mint = time.monotonic() - t0
    if isinstance(desc, NothingToDo):
        return RefreshResult(view=view.name, status="up_to_date", refresh_time=refresh_time, upper=desc.upper,
                             reason=desc.detail if desc.reason == "up_to_date"
                             else f"{desc.reason.replace('_', ' ')}: {desc.detail}", timings={"mint": t_mint})
    report = None
    t1 = time.monotonic()
    if not desc.empty:
        if runner == "submit":
            report = run_write_submit(view, desc, master=master, conf=spark_conf)
        elif runner == "connect":
            from mvsink.spark.connect import remote_session
            from mvsink.spark.job import run_write

            if not remote:
                raise ValueError("runner='connect' needs remote='sc://host:port'")
            report = run_write(spark or remote_session(remote, conf={**view.spark_conf, **(spark_conf or {})}),
                               view, desc)
        else:
            report = run_write_inprocess(view, desc, spark=spark)
    t_write = time.monotonic() - t1
    t2 = time.monotonic()
    result = append(view, desc, report)
    timings = {"mint": t_mint, "write": t_write, "append": time.monotonic() - t2}
    return dataclasses.replace(result, timings=timings)
