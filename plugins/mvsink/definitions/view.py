"""A view: the validated content of one view file (:mod:`mvsink.definitions.viewfile` reads and checks the file).

A view's target and path sources are :class:`mvsink.location.Location` values, parsed once from the file
with the view's ``storage_options`` as written (a secret only by reference): they travel with the view, into
the batch description mint makes, and into each source read.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any, Literal

from mvsink import settings
from mvsink.exceptions import ViewDefinitionError
from mvsink.location import Location, parse

DATA_ROOT_ENV = settings.DATA_ROOT.name
VIEWS_DIR_ENV = settings.VIEWS_DIR.name
ALLOW_OUTSIDE_ENV = settings.ALLOW_OUTSIDE_DATA_ROOT.name
ALLOWED_ENV = settings.ALLOWED_LOCATIONS.name
DEFAULT_VIEWS_DIR = "dags/views"

NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,62}\Z")
IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}\Z")
RESERVED_PREFIX = "_mv_"
DEFAULT_RETAIN_HISTORY_MS = 7 * 86_400_000  # 7 days of readable history behind the newest final time


def upper_app_id(view: str) -> str:
    """Application-transaction id that carries the view's upper."""
    return f"mvsink:upper:{view}"


def since_app_id(view: str) -> str:
    """Application-transaction id that carries the view's since."""
    return f"mvsink:since:{view}"


@dataclasses.dataclass(frozen=True)
class Source:
    """A named input of the view: a Delta table path, or another view of this project."""

    name: str
    kind: Literal["path", "view"]
    path: Location | None = None  # the table's location, for kind == "path" (a str is parsed)
    view: str | None = None  # upstream view name, for kind == "view"

    def __post_init__(self) -> None:
        if isinstance(self.path, str):
            object.__setattr__(self, "path", parse(self.path))


@dataclasses.dataclass(frozen=True)
class Check:
    """A named row check of the view: a Spark SQL boolean expression over the query's columns.

    A row *passes* only when ``expr`` is TRUE (FALSE and NULL fail, as in a WHERE clause).
    ``error``: a failing row goes to the view's error collection (kept with ``_mv_error`` = the name);
    ``drop``: a failing row is left out of the view; ``warn``: the row is kept, failures are counted.
    """

    name: str
    expr: str
    action: Literal["error", "drop", "warn"] = "error"


NOTIFY_EVENTS = ("failure", "stale")


@dataclasses.dataclass(frozen=True)
class Notify:
    """A notifier of the view (``notify:``): an Airflow ``BaseNotifier`` by import path, its keyword arguments, and
    the events it is told of: ``failure`` (a run failed) and ``stale`` (a run left the view past its ``max_lag``)."""

    notifier: str
    args: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    events: tuple[str, ...] = NOTIFY_EVENTS


@dataclasses.dataclass(frozen=True)
class Schedule:
    """When the view refreshes. Airflow turns this into a timetable."""

    kind: Literal["cron", "interval", "at", "on_commit", "manual"]
    cron: str | None = None
    every_ms: int | None = None
    aligned_to_ms: int | None = None
    at_ms: tuple[int, ...] = ()
    on_commit: tuple[str, ...] = ()
    # every/at only: run every missed instant from as_of (Airflow's catchup); else only the latest due one
    catchup: bool = False


@dataclasses.dataclass(frozen=True)
class ViewDefinition:
    """A validated view file."""

    name: str
    description: str
    query: str
    sources: tuple[Source, ...]
    target: Location  # the view's Delta table (a str is parsed)
    schedule: Schedule
    as_of: int
    key: tuple[str, ...] = ()
    spark_conf: Mapping[str, str] = dataclasses.field(default_factory=dict)
    tags: tuple[str, ...] = ()
    file: str = ""
    until: int | None = None  # last time the schedule refreshes (Airflow DAG end_date)
    incremental: bool = True  # may write compute corrections from the sources' changes
    # How far behind the newest final time (upper - 1) reads stay valid; older updates may be
    # compacted (section 6 of DESIGN.md). None: keep all history (no automatic compaction).
    retain_history_ms: int | None = DEFAULT_RETAIN_HISTORY_MS
    checks: tuple[Check, ...] = ()  # row checks, in file order (the first failing one names an error)
    # Freshness target: the view is stale when now - its newest final time (upper - 1) exceeds it. None: no target.
    max_lag_ms: int | None = None
    # A periodic full diff: after this many ms of refresh time (an int) or this many refreshes ("n" + count)
    full_refresh_every: tuple[Literal["ms", "refreshes"], int] | None = None
    # Store settings of the view's locations: option -> ("value", text) or ("env", variable name).
    storage_options: Mapping[str, tuple[str, str]] = dataclasses.field(default_factory=dict)
    # Who is told of a failed run or a breach of max_lag (Airflow notifiers; see docs/airflow.md)
    notify: tuple[Notify, ...] = ()

    def __post_init__(self) -> None:
        if isinstance(self.target, str):
            object.__setattr__(self, "target", parse(self.target))

    def resolved_storage_options(self) -> dict[str, str]:
        """``storage_options`` with every ``{env: NAME}`` reference read from the environment (never logged)."""
        return resolve_storage_options(self.name, self.storage_options)

    def locations(self) -> dict[str, Location]:
        """The view's target and path sources (keyed by URI), each with the view's ``storage_options``."""
        out: dict[str, Location] = {}
        for loc in (self.target, *(s.path for s in self.sources if s.path is not None)):
            out.setdefault(loc.uri, loc)
        return out

    @property
    def app_id(self) -> str:
        """Delta application-transaction id that carries the table's upper."""
        return upper_app_id(self.name)

    @property
    def since_app_id(self) -> str:
        return since_app_id(self.name)

    def definition_hash(self) -> str:
        """Hash of everything that determines desired contents (query, sources and checks)."""
        doc: dict[str, Any] = {"query": self.query, "sources": [_hashed(s) for s in self.sources]}
        if self.checks:  # views without checks keep the hash they had before checks existed
            doc["checks"] = [[c.name, c.expr, c.action] for c in self.checks]
        payload = json.dumps(doc, sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()[:16]

    def source(self, name: str) -> Source:
        for s in self.sources:
            if s.name == name:
                return s
        raise KeyError(name)


def _hashed(s: Source) -> dict[str, Any]:
    """A source as the definition hash has always seen it (its location as the URI)."""
    return {"name": s.name, "kind": s.kind, "path": s.path.uri if s.path is not None else None, "view": s.view}


def resolve_storage_options(view: str, storage_options: Mapping[str, tuple[str, str]]) -> dict[str, str]:
    """A view's ``storage_options`` with every ``{env: NAME}`` reference read from the environment (never
    logged); an unset reference fails naming it."""
    refs = {k: v for k, (kind, v) in storage_options.items() if kind == "env"}
    values = settings.env_subset(refs.values())
    missing = sorted(n for n in refs.values() if n not in values)
    if missing:
        raise ViewDefinitionError(
            f"view {view}: storage_options refer to unset environment variable(s) {', '.join(missing)}. "
            "Fix: set them in the environment of every process that refreshes or reads the view."
        )
    return {k: (values[v] if kind == "env" else v) for k, (kind, v) in storage_options.items()}
