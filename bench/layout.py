"""Where the benchmarks write (pure: no Spark, no I/O).

Raw runs go to ``bench/results/``, one JSON file per run named by the run's date
(``<bench>-<YYYYMMDDTHHMMZ>-<variant>.json``); each benchmark's current report (Markdown, and a PNG chart
where it draws one) to ``bench/reports/<bench>[-<variant>].md``, which a new run of that variant replaces.
"""

from __future__ import annotations

import datetime as dt
import os
import shlex
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
RESULTS = BENCH / "results"
REPORTS = BENCH / "reports"


def raw_name(bench: str, when: dt.datetime, variant: str) -> str:
    """The raw run's file name: ``<bench>-<YYYYMMDDTHHMMZ>-<variant>.json`` (``when`` in UTC)."""
    return f"{bench}-{when:%Y%m%dT%H%MZ}-{variant}.json"


def command(module: str, argv: list[str] | None = None) -> str:
    """The command line that ran this benchmark (``python -m <module> <args>``; ``sys.argv`` by default)."""
    args = sys.argv[1:] if argv is None else argv
    return " ".join(["python -m", module, *(shlex.quote(a) for a in args)])


def link(target: Path | str, report: Path | str) -> str:
    """A Markdown link from ``report`` to ``target`` (a raw run), relative to the report's folder."""
    rel = os.path.relpath(Path(target).resolve(), Path(report).resolve().parent)
    return f"[`{Path(rel).name}`]({rel})"
