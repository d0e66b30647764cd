"""Fields of the benchmarks' raw rows taken from a refresh's reports (pure: no Spark, no I/O)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_READ = {"bytes_read", "files_read"}


def mode_name(reported: str) -> str:
    """The refresh mode as the issue names them: full, incremental, aggregate, groups, topk (else as reported:
    unchanged, up_to_date, ...)."""
    return reported.removeprefix("incremental:")


def read_stats(*reports: Mapping[str, Any] | None) -> tuple[int | None, int | None, dict[str, Any] | None]:
    """Bytes and files a refresh read from its sources, in total and per source, from the first of
    ``reports`` (the refresh result's dict, the write report's) that carries them: ``bytes_read`` and
    ``files_read`` as totals or as {source: n}, or per source as {source: {"bytes_read", "files_read"}}
    under any key. None where no report says (read with ``.get()``)."""
    for d in reports:
        if not d:
            continue
        per: dict[str, Any] | None = None
        for v in d.values():  # {source: {"bytes_read": .., "files_read": ..}} under whichever key
            if isinstance(v, Mapping) and v and all(isinstance(x, Mapping) and _READ & set(x) for x in v.values()):
                per = {
                    str(s): {"bytes_read": x.get("bytes_read"), "files_read": x.get("files_read")} for s, x in v.items()
                }
                break
        b, f = d.get("bytes_read"), d.get("files_read")
        if isinstance(b, Mapping) or isinstance(f, Mapping):
            bm = b if isinstance(b, Mapping) else {}
            fm = f if isinstance(f, Mapping) else {}
            per = {str(s): {"bytes_read": bm.get(s), "files_read": fm.get(s)} for s in dict.fromkeys([*bm, *fm])}
            b = f = None
        if per is not None:
            if b is None and any(x["bytes_read"] is not None for x in per.values()):
                b = sum(int(x["bytes_read"] or 0) for x in per.values())
            if f is None and any(x["files_read"] is not None for x in per.values()):
                f = sum(int(x["files_read"] or 0) for x in per.values())
        if b is not None or f is not None or per is not None:
            return (None if b is None else int(b)), (None if f is None else int(f)), per
    return None, None, None
