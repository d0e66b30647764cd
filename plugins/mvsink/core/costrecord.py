"""What decides a refresh's cost, recorded per refresh: the write step's notes, the append's commit info
(``mvsink.cost``) and a bounded history beside the view's table (this module owns its format:
``<target>/_mv_history/refreshes.jsonl``, one JSON object per line, the last :data:`KEEP` refreshes).

While the write step runs, the modes :func:`note` what they know (the change sets' sizes per source, the scan
guard's inputs, the affected groups, the cost model's estimates) into the :func:`noting` context; the step puts the
notes on its report (``WriteReport.cost``), the append records them in its commit info and, after its commit, adds
the refresh to the history (:func:`add_to_history`), which never fails a refresh: a history that cannot be read or
written is no history (:func:`read_history` gives none, the cost model falls back to its prior).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import json
import logging
from collections.abc import Iterator, Mapping
from typing import Any, Final

from mvsink.location import Where, joinpath

log = logging.getLogger(__name__)

FOLDER: Final = "_mv_history"
FILE: Final = "refreshes.jsonl"
FORMAT: Final = 1  # bumped whenever what a record means changes: older records are then not read
KEEP: Final = 50  # refreshes the history keeps (the newest)

_NOTES: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("mvsink_cost_notes", default=None)


@contextlib.contextmanager
def noting() -> Iterator[dict[str, Any]]:
    """Collect what the write step notes (:func:`note`, :func:`note_change`) into the yielded dict."""
    got: dict[str, Any] = {}
    token = _NOTES.set(got)
    try:
        yield got
    finally:
        _NOTES.reset(token)


def note(**facts: Any) -> None:
    """Note ``facts`` (JSON values) of the running write step (nothing outside :func:`noting`)."""
    notes = _NOTES.get()
    if notes is not None:
        notes.update(facts)


def note_change(source: str, *, bytes_changed: int, files: int) -> None:
    """Note source ``source``'s change set: its files' bytes and count."""
    notes = _NOTES.get()
    if notes is not None:
        notes.setdefault("changes", {})[source] = {"bytes": int(bytes_changed), "files": int(files)}


def current_notes() -> dict[str, Any] | None:
    """The notes :func:`noting` collects (None outside it)."""
    return _NOTES.get()


@dataclasses.dataclass(frozen=True)
class CostRecord:
    """One refresh as the cost model reads it.

    ``mode``: how the corrections were computed; ``engine``: ``spark`` (a Spark write step), ``duckdb`` (a Spark
    step whose change terms DuckDB evaluated in the driver), ``driver`` (no Spark at all); ``write_s``: the write
    step's seconds (the cost the model estimates); ``wall_s``: from mint to the commit; ``changes``: per changed
    source ``{"bytes", "files"}`` of its change set; ``reads``: per source ``{"bytes", "files"}`` read;
    ``guard``: the scan guard's inputs (``terms_bytes``: what the change terms read, ``full_bytes``: what the full
    diff reads, sources and table, ``table_bytes``: the table's share); ``estimates``: the model's seconds per
    candidate (``picked``: the one it chose, ``basis``: ``prior`` or ``history``); ``recheck``: where this refresh
    re-checked the model's choice (:class:`mvsink.incremental.costmodel.Recheck`: ``kind``, ``ran``,
    ``instead_of``, ``estimate_s``).
    """

    version: int
    at: int  # epoch milliseconds of the commit
    mode: str
    engine: str = "spark"
    write_s: float = 0.0
    wall_s: float | None = None
    spark_jobs: int = -1
    groups: int | None = None
    phases: Mapping[str, float] = dataclasses.field(default_factory=dict)
    changes: Mapping[str, Mapping[str, int]] = dataclasses.field(default_factory=dict)
    reads: Mapping[str, Mapping[str, int]] = dataclasses.field(default_factory=dict)
    guard: Mapping[str, int] = dataclasses.field(default_factory=dict)
    estimates: Mapping[str, float] = dataclasses.field(default_factory=dict)
    picked: str | None = None
    basis: str | None = None
    recheck: Mapping[str, Any] | None = None

    @property
    def change_bytes(self) -> int:
        return sum(int(c.get("bytes", 0)) for c in self.changes.values())

    @property
    def read_bytes(self) -> int:
        return sum(int(r.get("bytes", 0)) for r in self.reads.values())

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, **dataclasses.asdict(self)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CostRecord:
        """A record from :meth:`to_dict`'s output; raises ValueError (or KeyError, TypeError) when it is not one."""
        if d.get("format") != FORMAT:
            raise ValueError(f"a history record of format {d.get('format')!r}, not {FORMAT}")
        known = {f.name for f in dataclasses.fields(cls)}
        got = cls(**{k: v for k, v in d.items() if k in known})
        if not isinstance(got.mode, str) or not isinstance(got.write_s, int | float):
            raise ValueError("a history record without a mode or a time")
        return got


def commit_cost(
    notes: Mapping[str, Any], *, engine: str, spark_jobs: int, phases: Mapping[str, float]
) -> dict[str, Any]:
    """The commit info's ``mvsink.cost`` of a write step: its notes, its engine, Spark jobs and phase seconds."""
    out = dict(notes)
    out.update(engine=engine, spark_jobs=spark_jobs, phases={k: round(v, 4) for k, v in phases.items()})
    return out


def record_of(
    cost: Mapping[str, Any] | None,
    *,
    version: int,
    at: int,
    mode: str,
    write_ms: int | None,
    duration_ms: int | None,
    reads: Mapping[str, Mapping[str, int]] | None,
) -> CostRecord:
    """The history record of an append: its commit info's cost, mode, times and reads."""
    c = dict(cost or {})
    return CostRecord(
        version=version,
        at=at,
        mode=mode,
        engine=str(c.get("engine", "spark")),
        write_s=(write_ms or 0) / 1000,
        wall_s=None if duration_ms is None else duration_ms / 1000,
        spark_jobs=int(c.get("spark_jobs", -1)),
        groups=None if c.get("groups") is None else int(c["groups"]),
        phases=dict(c.get("phases") or {}),
        changes=dict(c.get("changes") or {}),
        reads=dict(reads or {}),
        guard=dict(c.get("guard") or {}),
        estimates=dict(c.get("estimates") or {}),
        picked=c.get("picked"),
        basis=c.get("basis"),
        recheck=c.get("recheck") or None,
    )


def history_path(target: Where) -> Where:
    return joinpath(target, FOLDER, FILE)


def read_history(target: Where) -> list[CostRecord]:
    """The refreshes the history beside the table at ``target`` keeps, oldest first; none where there is no
    history or it cannot be read (a line that is not a record is left out)."""
    from mvsink.core import storage

    try:
        text = storage.read_text(history_path(target))
    except Exception as exc:  # noqa: BLE001 (an unreadable history is no history)
        log.info("the refresh history under %s could not be read (%s): none used", target, type(exc).__name__)
        return []
    return parse_history(text or "")


def parse_history(text: str) -> list[CostRecord]:
    """The records of a history file's ``text``, oldest first (lines that are not records left out)."""
    out: list[CostRecord] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            out.append(CostRecord.from_dict(json.loads(line)))
        except (ValueError, KeyError, TypeError, AttributeError):
            continue
    return out


def add_to_history(target: Where, record: CostRecord, *, keep: int = KEEP) -> bool:
    """Add ``record`` to the history beside the table at ``target``, keeping the newest ``keep`` records (a
    record of a version already kept replaces nothing: a retried append adds none). Never raises: False (logged)
    when it could not be written."""
    from mvsink.core import storage

    try:
        kept = read_history(target)
        if any(r.version == record.version for r in kept):
            return True
        rows = [*kept, record][-keep:]
        storage.write_text(history_path(target), "".join(json.dumps(r.to_dict()) + "\n" for r in rows))
    except Exception:  # noqa: BLE001 (the refresh is committed; the history only informs the next choice)
        log.warning("the refresh history under %s was not written", target, exc_info=True)
        return False
    return True
