"""Fields of the benchmarks' raw rows taken from a refresh's reports (pure: no Spark, no I/O)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def mode_name(reported: str) -> str:
    """The refresh mode as the issue names them: full, incremental, aggregate, groups, topk (else as reported:
    unchanged, up_to_date, ...)."""
    return reported.removeprefix("incremental:")


def read_stats(*reports: Mapping[str, Any] | None) -> tuple[int | None, int | None, dict[str, Any] | None]:
    """Bytes and files a refresh read, in total and per source, from the first of ``reports`` (the refresh
    result's dict, the write report's) that has ``reads``: {source: {"bytes", "files"}} (the view's own
    table under ``_table``). None where no report says."""
    for d in reports:
        reads = (d or {}).get("reads")
        if not isinstance(reads, Mapping) or not reads:
            continue
        per = {
            str(s): {"bytes_read": int(x.get("bytes", 0)), "files_read": int(x.get("files", 0))}
            for s, x in reads.items()
        }
        return (
            sum(x["bytes_read"] for x in per.values()),
            sum(x["files_read"] for x in per.values()),
            per,
        )
    return None, None, None
