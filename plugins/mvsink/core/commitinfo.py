"""What our commits record in their Delta commit info: ``mvsink.<key>`` entries, JSON-encoded.

Every commit mvsink makes to a view's table carries these keys beside delta-rs's own
(``timestamp``, ``operation``, ...), so ``history()`` reads as a refresh log with lineage.
:class:`CommitInfo` is the one encoder (:meth:`CommitInfo.to_metadata`) and decoder
(:meth:`CommitInfo.from_history`) of that format. The format is fixed: each value is
``json.dumps`` of the field (``"mvsink.lower": "1767225600000"``, ``"mvsink.view": "\\"v\\""``),
keys with no value are left out; tables written by earlier versions decode unchanged. :class:`HistoryEntry` is one
commit as ``history()`` lists it, its commit info decoded.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from mvsink.core.batch import BatchDescription

META = "mvsink."

Operation = Literal["create", "bump", "append", "compact", "evolve"]
# Commit kinds of ours that leave contents at every time unchanged.
CONTENT_PRESERVING = frozenset({"create", "bump", "compact", "evolve"})


@dataclasses.dataclass(frozen=True)
class CommitInfo:
    """The ``mvsink.*`` keys of one of our commits (None: the key is not recorded).

    Which keys each operation records:

    - ``create``: operation, view.
    - ``bump`` (the upper moves to as_of with an empty commit): the batch's keys (view, lower,
      upper, refresh_time, run_id, batch_id) and ``from_upper``.
    - ``append``: the batch's keys, the lineage (``sources``: Delta version read per source,
      ``source_ids``: each source table's id, ``definition``: hash of the view's definition),
      rows_added, rows_retracted, bytes, mode, mode_reason, ``checks`` (counts per check, when
      the view has checks), ``reads`` (bytes and files read per source by the write step), ``duration_ms`` (from mint to the commit) and ``write_ms`` (the write step),
      ``cost`` (what decides the write step's cost and the cost model's estimates: :mod:`mvsink.core.costrecord`).
    - ``evolve`` (``_mv_error`` added): the batch's keys.
    - ``compact``: view, since, previous_since, upper_seen, run_id, rows_before.
    """

    operation: str
    view: str | None = None
    lower: int | None = None
    upper: int | None = None
    refresh_time: int | None = None
    run_id: str | None = None
    batch_id: str | None = None
    sources: dict[str, int] | None = None
    source_ids: dict[str, str | None] | None = None
    definition: str | None = None
    rows_added: int | None = None
    rows_retracted: int | None = None
    bytes: int | None = None
    mode: str | None = None
    mode_reason: str | None = None
    checks: dict[str, Any] | None = None
    reads: dict[str, dict[str, int]] | None = None  # append: bytes and files the write step read per source
    duration_ms: int | None = None  # append: wall time from mint to the commit
    write_ms: int | None = None  # append: the write step's own time (0: no write step)
    cost: dict[str, Any] | None = None  # append: what decides its cost (mvsink.core.costrecord; older: absent)
    from_upper: int | None = None
    since: int | None = None
    previous_since: int | None = None
    upper_seen: int | None = None
    rows_before: int | None = None
    # mvsink.* keys this version does not know (a newer writer's): kept, and written back as they were
    extra: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    # ------------------------------------------------------------ builders of our commits

    @classmethod
    def for_batch(cls, desc: BatchDescription, operation: Operation, **fields: Any) -> CommitInfo:
        """The commit info of a commit made for batch ``desc`` (append, bump, evolve).

        An append also records the lineage: each source's version and table id, and the definition.
        """
        base: dict[str, Any] = dict(
            operation=operation,
            view=desc.view,
            lower=desc.lower,
            upper=desc.upper,
            refresh_time=desc.refresh_time,
            run_id=desc.run_id,
            batch_id=desc.batch_id,
        )
        if operation == "append":
            base.update(
                sources={s.name: s.version for s in desc.sources},
                source_ids={s.name: s.table_id for s in desc.sources},
                definition=desc.definition,
            )
        return cls(**{**base, **fields})

    # ------------------------------------------------------------ the format

    def to_dict(self) -> dict[str, Any]:
        """The recorded keys (without the ``mvsink.`` prefix) and their values; unset keys left out."""
        out = {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if f.name != "extra" and getattr(self, f.name) is not None
        }
        out.update(self.extra)
        return out

    def to_metadata(self) -> dict[str, str]:
        """Commit-info entries (``custom_metadata`` of a delta-rs commit): ``mvsink.<key>`` -> JSON."""
        return {META + k: json.dumps(v) for k, v in self.to_dict().items()}

    @classmethod
    def from_history(cls, entry: Mapping[str, Any]) -> CommitInfo | None:
        """Decode a ``history()`` entry or a log file's ``commitInfo`` action; None for a foreign commit."""
        decoded = {k[len(META) :]: _decode(v) for k, v in entry.items() if k.startswith(META)}
        op = decoded.pop("operation", None)
        if op is None:
            return None
        known = {f.name for f in dataclasses.fields(cls)} - {"operation", "extra"}
        fields = {k: v for k, v in decoded.items() if k in known}
        extra = {k: v for k, v in decoded.items() if k not in known}
        return cls(operation=str(op), extra=extra, **fields)

    # ------------------------------------------------------------ what the protocol asks of a commit

    @property
    def content_preserving(self) -> bool:
        """A commit of ours that leaves contents at every time unchanged (create, bump, compact, evolve)."""
        return self.operation in CONTENT_PRESERVING


def format_reads(reads: dict[str, dict[str, int]]) -> str:
    """What a refresh read, per source: ``lineitem 3 files 1.2 MB, orders 1 file 0.1 MB``."""
    parts = []
    for name, r in sorted(reads.items()):
        files, size = int(r.get("files", 0)), int(r.get("bytes", 0))
        label = "the view's table" if name == "_table" else name
        parts.append(f"{label} {files} file{'' if files == 1 else 's'} {size / 1e6:.1f} MB")
    return ", ".join(parts)


def _decode(raw: Any) -> Any:
    """One value: JSON text (what we write); anything else is returned as it is."""
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            return raw
    return raw


# A recorded mode reason's words -> what would let the refresh take an incremental mode (for a refusal of the linear
# path): the hints `mvsink explain` and the UI page (mvsink.readers.modefix) give; presentation only, the modes'
# choice never reads the reasons
REASON_HINTS: tuple[tuple[tuple[str, ...], str], ...] = (
    (
        ("not deterministic", "depends on the time"),
        "compute that value where the data is written (a column of the source) instead of in the query: the "
        "query must be a function of its sources",
    ),
    (("subquery",), "rewrite the subquery as a join (a correlated or scalar subquery is not linear)"),
    (("user-defined function",), "use built-in functions instead of the UDF (its determinism is only a promise)"),
    (
        ("side of a",),
        "an inner join, or the changing source on the preserved side of the outer join, refreshes incrementally",
    ),
    (("is read 2 times", "CTE over"), "read the source once (e.g. join a derived table instead of a self-join)"),
    (
        ("does not know",),
        "the plan check does not know that operator or function yet: rewrite with built-in functions, or report it",
    ),
)


@dataclasses.dataclass(frozen=True)
class HistoryEntry:
    """One commit of the view's table as ``history()`` lists it."""

    version: int
    timestamp: int  # commit time, ms
    operation: str  # delta-rs's operation (WRITE, DELETE, CREATE TABLE, ...)
    info: CommitInfo | None  # ours; None for a foreign commit (a hand edit, another writer)
    metrics: dict[str, Any] = dataclasses.field(default_factory=dict)  # delta-rs's operationMetrics

    @property
    def op(self) -> str | None:
        """Our operation (create, bump, append, compact, evolve), None for a foreign commit."""
        return self.info.operation if self.info is not None else None

    @classmethod
    def of(cls, entry: dict[str, Any]) -> HistoryEntry:
        return cls(
            version=int(entry.get("version", -1)),
            timestamp=int(entry.get("timestamp", 0)),
            operation=str(entry.get("operation", "unknown")),
            info=CommitInfo.from_history(entry),
            metrics=dict(entry.get("operationMetrics") or {}),
        )
