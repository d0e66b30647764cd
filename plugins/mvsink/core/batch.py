"""What passes between mint, write and append: batch descriptions and manifests."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from typing import Any, Literal

from mvsink.location import Location

SourceKind = Literal["path", "view"]
# how write computed the corrections
WriteMode = Literal[
    "full", "incremental", "incremental:groups", "incremental:aggregate", "incremental:topk", "incremental:partitioned"
]


@dataclasses.dataclass(frozen=True)
class SourceRead:
    """The exact snapshot of one source a refresh reads."""

    name: str
    kind: SourceKind
    path: Location  # the Delta table's location (for a view source: the upstream view's table); a str is parsed
    version: int  # Delta version read (-1: the upstream view's table does not exist yet)
    upper: int | None = None  # upstream view's upper at that version
    view: str | None = None
    table_id: str | None = None  # the Delta table's id (metaData.id): tells a re-created table from the old one

    def __post_init__(self) -> None:
        if isinstance(self.path, str):
            object.__setattr__(self, "path", Location.from_json(self.path))

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "path": self.path.to_json()}


@dataclasses.dataclass(frozen=True)
class BatchDescription:
    """``(lower, upper)`` plus everything write and append need to act on it."""

    view: str
    target: Location  # the view's Delta table, with the view's storage_options as written (a str is parsed)
    lower: int
    upper: int
    refresh_time: int  # the requested refresh time R
    table_version: int  # Delta version of the view's table that mint read (-1: missing)
    sources: tuple[SourceRead, ...]
    run_id: str
    batch_id: str
    definition: str  # hash of the view's query and sources
    dry_run: bool = False
    empty: bool = False  # no-change shortcut: corrections known to be empty
    # Source versions the table's contents are the query over (the last append read them and nothing
    # foreign committed since); write may then compute the corrections from the sources' changes.
    base_versions: dict[str, int] | None = None
    # Check counts the last append recorded for those contents (totals per check); the no-change
    # shortcut carries them over and the incremental path adds the change's counts to them.
    base_checks: dict[str, Any] | None = None
    # The time the last append read every source at (its ``upper - 1``): a view source's change set is
    # its updates after it (core/viewchanges.py). Set with ``base_versions``.
    base_time: int | None = None
    minted_at: int | None = None  # wall-clock ms when mint made it: append records the refresh's duration
    # Why mint asks for the full diff, or None: the contents are known but ``full_refresh_every`` is due, or
    # they are not known (a foreign commit, a changed definition, a re-created source ...).
    full_reason: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.target, str):
            object.__setattr__(self, "target", Location.from_json(self.target))

    @property
    def time(self) -> int:
        """Time of the corrections and of the sources' snapshot (``upper - 1``)."""
        return self.upper - 1

    def to_dict(self) -> dict[str, Any]:
        """The description as JSON values: each location as :meth:`Location.to_json` writes it (its URI, or
        with the view file's storage_options as written: references, never a secret value)."""
        d = dataclasses.asdict(self)
        d["target"] = self.target.to_json()
        d["sources"] = [s.to_dict() for s in self.sources]
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> BatchDescription:
        d = dict(d)
        d["target"] = Location.from_json(d.get("target"))
        d["sources"] = tuple(SourceRead(**{**s, "path": Location.from_json(s.get("path"))}) for s in d["sources"])
        desc = cls(**d)
        _check_types(
            desc,
            {
                "view": str,
                "lower": int,
                "upper": int,
                "refresh_time": int,
                "table_version": int,
                "run_id": str,
                "batch_id": str,
                "definition": str,
                "dry_run": bool,
                "empty": bool,
            },
        )
        for s in desc.sources:
            _check_types(s, {"name": str, "kind": str, "version": int})
        if desc.base_time is not None and type(desc.base_time) is not int:
            raise ValueError(
                f"batch description: base_time {desc.base_time!r} is not a time. Fix: pass the description "
                "mint produced, unchanged."
            )
        if desc.base_versions is not None and not all(
            isinstance(k, str) and type(v) is int for k, v in desc.base_versions.items()
        ):
            raise ValueError(
                f"batch description: base_versions {desc.base_versions!r} is not a map of names to "
                "versions. Fix: pass the description mint produced, unchanged."
            )
        return desc

    @classmethod
    def from_json(cls, text: str) -> BatchDescription:
        return cls.from_dict(json.loads(text))


def _check_types(obj: object, types: dict[str, type]) -> None:
    """Refuse a description edited on its way (XCom, a file): every field must have its own type."""
    for name, want in types.items():
        value = getattr(obj, name)
        if type(value) is not want:  # exact: a bool is not an int here, and "1" is not 1
            raise ValueError(
                f"batch description: field {name!r} is {value!r} ({type(value).__name__}), "
                f"not {want.__name__}. Fix: pass the description mint produced, unchanged."
            )


@dataclasses.dataclass(frozen=True)
class NothingToDo:
    """mint's answer when no batch can be minted."""

    view: str
    upper: int
    refresh_time: int
    reason: Literal["up_to_date", "before_as_of", "waiting_for_inputs"]
    detail: str = ""


_TOKEN_RE = re.compile(r"[^A-Za-z0-9]+")


def make_batch_id(view: str, lower: int, upper: int, run_id: str) -> str:
    """Folder-safe, unique batch id named from view, lower, upper and run id."""
    readable = _TOKEN_RE.sub("-", run_id).strip("-")[:40]
    digest = hashlib.sha1(run_id.encode()).hexdigest()[:8]
    return f"{view}__{lower}_{upper}__{readable}-{digest}"


def parse_batch_id(batch_id: str) -> tuple[str, int, int] | None:
    """(view, lower, upper) of a batch id, or None if it is not one of ours."""
    parts = batch_id.rsplit("__", 2)
    if len(parts) != 3:
        return None
    m = re.fullmatch(r"([0-9]+)_([0-9]+)", parts[1])
    if m is None:
        return None
    return parts[0], int(m.group(1)), int(m.group(2))


@dataclasses.dataclass(frozen=True)
class StagedFile:
    path: str  # relative to the table root
    size: int
    rows: int
    stats: str  # Delta stats JSON


@dataclasses.dataclass(frozen=True)
class WriteReport:
    """What the write step produced (also the staged batch's manifest when ``staged``)."""

    view: str
    batch_id: str
    lower: int
    upper: int
    status: Literal["staged", "empty", "stale", "dry_run"]
    read_version: int  # version of the view's table the corrections were computed against
    table_upper: int  # the table's upper at that version
    schema: str  # base64 Arrow IPC schema of the table (user columns + _mv_time, _mv_diff [+ _mv_error])
    rows_added: int = 0
    rows_retracted: int = 0
    bytes: int = 0
    files: tuple[StagedFile, ...] = ()
    seconds: float = 0.0
    mode: WriteMode | Literal[""] = ""  # how the corrections were computed ("" before they were)
    mode_reason: str = ""  # why incremental was (not) used
    checks: dict[str, Any] = dataclasses.field(default_factory=dict)  # {check: {"action", "rows"}} over desired
    phases: dict[str, float] = dataclasses.field(default_factory=dict)  # seconds: plan, corrections, stage
    spark_jobs: int = -1  # Spark jobs the step ran for its query and diff (-1: unknown, e.g. through Spark Connect)
    delta_log_jobs: int = -1  # Spark jobs Delta's reader ran to load table snapshots (log replay, file skipping)
    # what the step read of each source (and of the view's own table, under "_table"): {"bytes", "files"},
    # from the Delta log's sizes and per-file statistics (the files Delta's data skipping keeps)
    reads: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)
    # what decides the step's cost (mvsink.core.costrecord): the engine, Spark jobs, phases, the change sets per
    # source, the scan guard's inputs, the affected groups, the cost model's estimates
    cost: dict[str, Any] = dataclasses.field(default_factory=dict)

    @classmethod
    def begun(
        cls, desc: BatchDescription, *, view: str, read_version: int, table_upper: int, schema: str, **more: Any
    ) -> WriteReport:
        """The report of a write step of ``desc`` that has staged nothing yet (``stale`` until it does)."""
        return cls(
            view=view,
            batch_id=desc.batch_id,
            lower=desc.lower,
            upper=desc.upper,
            status="stale",
            read_version=read_version,
            table_upper=table_upper,
            schema=schema,
            **more,
        )

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> WriteReport:
        d = json.loads(text)
        d["files"] = tuple(StagedFile(**f) for f in d["files"])
        return cls(**d)
