"""View definitions: one YAML file per view, parsed into a validated dataclass.

A view file looks like::

    name: revenue_by_nation
    description: Revenue per nation, refreshed hourly.
    query: |                      # or `sql_file: revenue_by_nation.sql` beside it
      SELECT n.name AS nation, sum(o.amount) AS revenue
      FROM orders o JOIN nations n ON o.nation_id = n.id GROUP BY n.name
    sources:
      orders: orders              # a Delta table path (relative to the data root)
      nations: {path: nations}
      # upstream: {view: other_view}   # another view of this project
    target: views/revenue_by_nation    # Delta table path of the view
    schedule: "0 * * * *"         # cron | {every: 1h, aligned_to: TIME} | {at: [TIME, ...]}
                                  # (every/at: optional catchup: true runs every missed instant)
                                  # | {on_commit: [view, ...]} | manual
    as_of: 2026-01-01T00:00:00Z   # first time the view may hold output
    until: 2027-01-01T00:00:00Z   # optional: no scheduled refresh after this time
    key: [nation]                 # optional: columns that are unique in the result
    spark_conf: {spark.driver.memory: 2g}   # optional
    incremental: true             # optional (default true): compute corrections from the sources'
                                  # changes when the query allows it; false always diffs in full
    retain_history: 7d            # optional: readable history behind the newest time (default 7d; or forever)
    max_lag: 2h                   # optional: freshness target; a view whose newest final time is older is stale
    full_refresh_every: 7d        # optional: a periodic full diff (a duration, or a number of refreshes)
    checks:                       # optional: named row checks over the query's columns
      - {name: positive_qty, expr: "qty > 0", action: error}   # error | drop | warn

Relative paths resolve against the data root: ``MVSINK_DATA_ROOT`` if set, else the
folder that holds the view file. Every source and target path must lie inside the data
root once resolved (``..`` and symbolic links followed), or under one of the prefixes of
``MVSINK_ALLOWED_LOCATIONS``; set ``MVSINK_ALLOW_OUTSIDE_DATA_ROOT=1`` to allow paths elsewhere.
A location may be a URI (``s3://``, ``s3a://``, ``az://``, ``abfs[s]://``, ``gs://``, ``file://``);
one on object storage must lie under an allowed prefix. An ``sql_file`` must lie in
the view file's folder.

``storage_options`` (optional) gives the location's store settings in delta-rs's names
(``AWS_ENDPOINT_URL``, ``AWS_REGION``, ``AZURE_STORAGE_ACCOUNT_NAME``, ...); a secret (a key,
secret, token, password or SAS) only by reference, ``{env: VARIABLE}``, never inline.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml

from mvsink import settings
from mvsink.exceptions import UnsafePathError, ViewDefinitionError
from mvsink.times import parse_duration, parse_time

DATA_ROOT_ENV = settings.DATA_ROOT.name
VIEWS_DIR_ENV = settings.VIEWS_DIR.name
ALLOW_OUTSIDE_ENV = settings.ALLOW_OUTSIDE_DATA_ROOT.name
ALLOWED_ENV = settings.ALLOWED_LOCATIONS.name
DEFAULT_VIEWS_DIR = "dags/views"

NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,62}\Z")
IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}\Z")
RESERVED_PREFIX = "_mv_"

# Functions whose result is not a function of the sources; a view using them could
# never be "equal to its query" and would rewrite itself on every refresh.
NONDETERMINISTIC = (
    "rand",
    "randn",
    "random",
    "uuid",
    "shuffle",
    "current_timestamp",
    "current_date",
    "current_time",
    "now",
    "localtimestamp",
    "curdate",
    "monotonically_increasing_id",
    "spark_partition_id",
    "input_file_name",
    "input_file_block_start",
    "input_file_block_length",
    "unix_timestamp",
    "randstr",
    "uniform",
)
_NONDET_RE = re.compile(
    r"\b(" + "|".join(NONDETERMINISTIC) + r")\s*\(|\b(current_timestamp|current_date|localtimestamp)\b",
    re.IGNORECASE,
)

KNOWN_FIELDS = {
    "name",
    "description",
    "query",
    "sql_file",
    "sources",
    "target",
    "schedule",
    "as_of",
    "key",
    "spark_conf",
    "tags",
    "until",
    "incremental",
    "retain_history",
    "checks",
    "max_lag",
    "full_refresh_every",
    "storage_options",
}
CHECK_ACTIONS = ("error", "drop", "warn")
CHECK_FIELDS = {"name", "expr", "action"}
_SUBQUERY_RE = re.compile(r"\bselect\b", re.IGNORECASE)
_AGGREGATE_OR_WINDOW_RE = re.compile(
    r"\bover\s*\(|\b(count|sum|avg|min|max|collect_list|collect_set|first|last"
    r"|any_value|bool_and|bool_or|every|some|stddev|variance)\s*\(",
    re.IGNORECASE,
)

# libyaml's safe loader when PyYAML has it (about 30x faster: the UI loads every view file per page)
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

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
    path: str | None = None  # absolute path, for kind == "path"
    view: str | None = None  # upstream view name, for kind == "view"


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
    target: str  # absolute path of the view's Delta table
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

    def resolved_storage_options(self) -> dict[str, str]:
        """``storage_options`` with every ``{env: NAME}`` reference read from the environment (never logged)."""
        refs = {k: v for k, (kind, v) in self.storage_options.items() if kind == "env"}
        values = settings.env_subset(refs.values())
        missing = sorted(n for n in refs.values() if n not in values)
        if missing:
            raise ViewDefinitionError(
                f"view {self.name}: storage_options refer to unset environment variable(s) {', '.join(missing)}. "
                "Fix: set them in the environment of every process that refreshes or reads the view."
            )
        return {k: (values[v] if kind == "env" else v) for k, (kind, v) in self.storage_options.items()}

    @property
    def app_id(self) -> str:
        """Delta application-transaction id that carries the table's upper."""
        return upper_app_id(self.name)

    @property
    def since_app_id(self) -> str:
        return since_app_id(self.name)

    def definition_hash(self) -> str:
        """Hash of everything that determines desired contents (query, sources and checks)."""
        doc: dict[str, Any] = {"query": self.query, "sources": [dataclasses.asdict(s) for s in self.sources]}
        if self.checks:  # views without checks keep the hash they had before checks existed
            doc["checks"] = [[c.name, c.expr, c.action] for c in self.checks]
        payload = json.dumps(doc, sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()[:16]

    def source(self, name: str) -> Source:
        for s in self.sources:
            if s.name == name:
                return s
        raise KeyError(name)


def _fail(file: str, field: str, problem: str, fix: str) -> ViewDefinitionError:
    return ViewDefinitionError(f"view file {file}: field '{field}': {problem}. Fix: {fix}")


def data_root_for(view_file: Path) -> Path:
    """The data root of a view file: ``MVSINK_DATA_ROOT`` if set, else the file's folder."""
    return settings.data_root() or view_file.parent.resolve()


def outside_data_root_allowed() -> bool:
    """True if ``MVSINK_ALLOW_OUTSIDE_DATA_ROOT`` lets view paths leave the data root."""
    return settings.allow_outside_data_root()


def _resolve_path(value: str, root: Path) -> str:
    p = Path(os.path.expandvars(value)).expanduser()
    return str((p if p.is_absolute() else root / p).resolve())


_URI_RE = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+)://(.*)\Z", re.S)
URI_SCHEMES = ("s3", "s3a", "az", "abfs", "abfss", "gs", "gcs")


def _uri_location(raw: str, *, file: str, view: str, field: str) -> str | None:
    """A location URI in its canonical form (``s3a://`` as ``s3://``, no trailing ``/``); None for a local path
    (``file://`` URIs included: their path is returned by :func:`_local_part`)."""
    m = _URI_RE.match(raw.strip())
    if m is None or m.group(1).lower() == "file":
        return None
    scheme, rest = m.group(1).lower(), m.group(2).strip("/")
    if scheme not in URI_SCHEMES:
        raise UnsafePathError(
            f"view file {file}: field '{field}': view {view}: {raw!r} has the scheme {scheme}://, which mvsink "
            "cannot reach. Fix: use a local path, file://, s3://, s3a://, az://, abfs[s]:// or gs://."
        )
    if not rest or any(seg in (".", "..") for seg in rest.split("/")):
        raise UnsafePathError(
            f"view file {file}: field '{field}': view {view}: {raw!r} is not a plain location (no bucket, or '.'/'..' "
            "in it). Fix: write scheme://bucket/path/to/table."
        )
    return f"{'s3' if scheme == 's3a' else scheme}://{rest}"


def _local_part(raw: str) -> str:
    m = _URI_RE.match(raw.strip())
    return "/" + m.group(2).lstrip("/") if m is not None and m.group(1).lower() == "file" else raw


def _under(location: str, prefix: str) -> bool:
    """``location`` is ``prefix`` or below it (whole path segments)."""
    p = prefix.rstrip("/")
    return location == p or location.startswith(p + "/")


def _allowed_prefixes() -> tuple[list[str], list[Path]]:
    """``MVSINK_ALLOWED_LOCATIONS`` split into URI prefixes (canonical) and local folders (resolved)."""
    uris, paths = [], []
    for item in settings.allowed_locations():
        m = _URI_RE.match(item)
        if m is not None and m.group(1).lower() != "file":
            scheme = m.group(1).lower()
            uris.append(f"{'s3' if scheme == 's3a' else scheme}://{m.group(2).strip('/')}")
        else:
            paths.append(Path(_local_part(item)).expanduser().resolve())
    return uris, paths


def _contained(raw: str, root: Path, *, file: str, view: str, field: str) -> str:
    """``raw`` resolved against the data root, if it stays inside it or under an allowed location (or the option
    allows any location)."""
    if "\x00" in raw:
        raise UnsafePathError(
            f"view file {file}: field '{field}': view {view}: path {raw!r} holds a NUL byte. Fix: write a plain path."
        )
    uri = _uri_location(raw, file=file, view=view, field=field)
    uri_prefixes, path_prefixes = _allowed_prefixes()
    if uri is not None:
        if outside_data_root_allowed() or any(_under(uri, p) for p in uri_prefixes):
            return uri
        raise UnsafePathError(
            f"view file {file}: field '{field}': view {view}: location {raw!r} is not under an allowed location "
            f"({', '.join(uri_prefixes) or f'{ALLOWED_ENV} is unset'}). Fix: add its bucket or a prefix of it to "
            f"{ALLOWED_ENV} (comma-separated, e.g. {ALLOWED_ENV}=s3://lake/), or correct the location."
        )
    resolved = _resolve_path(_local_part(raw), root)
    if (
        outside_data_root_allowed()
        or Path(resolved).is_relative_to(root.resolve())
        or any(Path(resolved).is_relative_to(p) for p in path_prefixes)
    ):
        return resolved
    raise UnsafePathError(
        f"view file {file}: field '{field}': view {view}: path {raw!r} resolves to {resolved}, outside the data "
        f"root {root.resolve()}. Fix: use a path inside the data root (relative paths resolve against it; "
        f"'..' may not leave it), point {DATA_ROOT_ENV} at a folder that holds it, add a folder that holds it to "
        f"{ALLOWED_ENV}, or set {ALLOW_OUTSIDE_ENV}=1 to allow paths outside the data root."
    )


def parse_view(text: str, *, file: str = "<string>", data_root: Path | None = None) -> ViewDefinition:
    """Parse and validate the YAML text of one view file."""
    path = Path(file)
    root = data_root if data_root is not None else data_root_for(path)
    doc = _load_yaml(text, file)
    name = doc.get("name")
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise _fail(
            file,
            "name",
            f"{name!r} is not a valid view name",
            "use lower-case letters, digits and _, starting with a letter (max 63)",
        )
    description = doc.get("description", "") or ""
    if not isinstance(description, str):
        raise _fail(file, "description", "must be text", "write the description as a string")

    query = _parse_query(doc, file, path, name)
    sources = _parse_sources(doc.get("sources"), file, root, name)
    _check_sources_used(query, sources, file)
    target_path = _parse_target(doc.get("target"), file, root, name, sources)
    as_of = _parse_as_of(doc, file)
    conf = doc.get("spark_conf", {}) or {}
    if not isinstance(conf, dict) or not all(isinstance(k, str) for k in conf):
        raise _fail(
            file,
            "spark_conf",
            "must be a mapping of Spark settings",
            "write e.g. spark_conf: {spark.driver.memory: 2g}",
        )
    incremental = doc.get("incremental", True)
    if not isinstance(incremental, bool):
        raise _fail(
            file,
            "incremental",
            f"{incremental!r} is not true or false",
            "write incremental: true (default) or incremental: false",
        )
    tags = doc.get("tags", []) or []
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise _fail(file, "tags", "must be a list of strings", "write e.g. tags: [finance]")

    return ViewDefinition(
        name=name,
        description=description.strip(),
        query=query,
        sources=sources,
        target=target_path,
        schedule=_parse_schedule(doc.get("schedule", "manual"), file),
        as_of=as_of,
        key=_parse_key(doc.get("key", []), file),
        spark_conf={k: str(v) for k, v in conf.items()},
        tags=tuple(tags),
        file=str(path),
        until=_parse_until(doc.get("until"), file, as_of),
        incremental=incremental,
        retain_history_ms=_parse_retain_history(doc.get("retain_history"), file),
        checks=_parse_checks(doc.get("checks"), file),
        max_lag_ms=_parse_max_lag(doc.get("max_lag"), file),
        full_refresh_every=_parse_full_refresh_every(doc.get("full_refresh_every"), file),
        storage_options=_parse_storage_options(doc.get("storage_options"), file),
    )


_SECRET_RE = re.compile(r"KEY|SECRET|TOKEN|PASSWORD|SAS|CREDENTIAL|SIGNATURE", re.IGNORECASE)
_OPTION_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*\Z")


def _parse_storage_options(raw: object, file: str) -> dict[str, tuple[str, str]]:
    """``storage_options``: option -> inline text, or ``{env: VARIABLE}``; a secret only by reference."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise _fail(
            file,
            "storage_options",
            "must be a mapping of store options",
            "write e.g. storage_options: {AWS_REGION: eu-west-1, AWS_SECRET_ACCESS_KEY: {env: LAKE_SECRET}}",
        )
    out: dict[str, tuple[str, str]] = {}
    for key, value in raw.items():
        key = str(key)
        field = f"storage_options.{key}"
        if not _OPTION_RE.match(key):
            raise _fail(file, field, "not an option name", "use delta-rs's option names, e.g. AWS_REGION")
        if isinstance(value, dict):
            if set(value) != {"env"} or not isinstance(value["env"], str) or not _OPTION_RE.match(value["env"]):
                raise _fail(file, field, "a reference must be {env: VARIABLE}", "write e.g. {env: LAKE_SECRET}")
            out[key.upper()] = ("env", value["env"])
        elif isinstance(value, (str, int, float, bool)):
            if _SECRET_RE.search(key):
                # never echo the value: it is a secret written where it must not be
                raise _fail(
                    file,
                    field,
                    "holds a secret inline (view files are not secret stores; the value is not shown)",
                    f"remove it from the file and write {key}: {{env: VARIABLE}} with the secret in that "
                    "environment variable",
                )
            out[key.upper()] = ("value", str(value).lower() if isinstance(value, bool) else str(value))
        else:
            raise _fail(file, field, "must be text or {env: VARIABLE}", "write e.g. AWS_REGION: eu-west-1")
    return out


def _load_yaml(text: str, file: str) -> dict[str, Any]:
    """The view file's mapping of fields (valid YAML, a mapping, only known fields)."""
    try:
        doc = yaml.load(text, Loader=_YAML_LOADER)  # a safe loader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ViewDefinitionError(
            f"view file {file}: not valid YAML{where}: {getattr(exc, 'problem', exc)}. "
            "Fix: correct the YAML syntax (indentation, quoting, colons)."
        ) from None
    if not isinstance(doc, dict):
        raise ViewDefinitionError(
            f"view file {file}: expected a mapping of fields (name, query, sources, target, "
            f"schedule, as_of), got {type(doc).__name__}. Fix: write one view per file as YAML fields."
        )
    unknown = sorted(set(map(str, doc)) - KNOWN_FIELDS)
    if unknown:
        raise _fail(file, unknown[0], "unknown field", f"remove it or use one of {sorted(KNOWN_FIELDS)}")
    return doc


def _parse_target(target: object, file: str, root: Path, name: str, sources: tuple[Source, ...]) -> str:
    """``target``: the view's table path, inside the data root and not one of its sources."""
    if not isinstance(target, str) or not target.strip():
        raise _fail(file, "target", "missing or empty", "give the Delta table path of the view, e.g. views/my_view")
    target_path = _contained(target, root, file=file, view=name, field="target")
    for s in sources:
        if s.kind == "path" and s.path == target_path:
            raise _fail(
                file, "target", f"{target_path} is also source '{s.name}'", "write the view to its own table path"
            )
    return target_path


def _parse_as_of(doc: dict[str, Any], file: str) -> int:
    """``as_of`` (required): the first time the view may hold output."""
    if "as_of" not in doc:
        raise _fail(file, "as_of", "missing", "give the first time the view may hold output, e.g. 2026-01-01T00:00:00Z")
    try:
        as_of = parse_time(doc["as_of"], what="as_of")
    except ValueError as exc:
        raise _fail(file, "as_of", str(exc), "write ISO-8601 (UTC if no zone) or epoch milliseconds") from None
    if as_of < 0:
        raise _fail(file, "as_of", "negative time", "use a time after 1970-01-01")
    return as_of


def _parse_until(raw: object, file: str, as_of: int) -> int | None:
    """``until`` (optional): no scheduled refresh after this time."""
    if raw is None:
        return None
    try:
        until = parse_time(raw, what="until")
    except ValueError as exc:
        raise _fail(file, "until", str(exc), "write ISO-8601 (UTC if no zone) or epoch milliseconds") from None
    if until < as_of:
        raise _fail(file, "until", "is before as_of", "give a time at or after as_of, or remove until")
    return until


def _parse_key(raw: object, file: str) -> tuple[str, ...]:
    """``key`` (optional): columns unique in the result."""
    key_raw = [raw] if isinstance(raw, str) else raw
    if not isinstance(key_raw, list) or not all(isinstance(k, str) and IDENT_RE.match(k) for k in key_raw):
        raise _fail(file, "key", f"{key_raw!r} is not a list of column names", "write e.g. key: [customer_id]")
    if any(k.lower().startswith(RESERVED_PREFIX) for k in key_raw):
        raise _fail(file, "key", "columns starting with _mv_ are reserved", "rename the column in the query")
    return tuple(key_raw)


def _parse_retain_history(raw: object, file: str) -> int | None:
    """``retain_history``: a duration (``7d``, ``12h``, ``30m``), or ``forever``; default 7 days."""
    if raw is None:
        return DEFAULT_RETAIN_HISTORY_MS
    if isinstance(raw, str) and raw.strip().lower() in ("forever", "all", "unbounded"):
        return None
    try:
        return parse_duration(raw, what="retain_history")
    except ValueError as exc:
        raise _fail(
            file,
            "retain_history",
            str(exc),
            "write how much history stays readable, e.g. retain_history: 7d (or 12h, 30m), "
            "or retain_history: forever to never compact automatically",
        ) from None


def _parse_max_lag(raw: object, file: str) -> int | None:
    """``max_lag``: the freshness target, a duration (``15m``, ``2h``, ``1d``); absent: no target."""
    if raw is None:
        return None
    try:
        return parse_duration(raw, what="max_lag")
    except ValueError as exc:
        raise _fail(
            file,
            "max_lag",
            str(exc),
            "write how far the view's newest final time may fall behind now before it counts as stale, "
            "e.g. max_lag: 2h (or 90m, 1d), or remove max_lag for no freshness target",
        ) from None


def _parse_full_refresh_every(raw: object, file: str) -> tuple[Literal["ms", "refreshes"], int] | None:
    """``full_refresh_every``: a duration (``7d``) of refresh time, or a count of refreshes (``24``)."""
    if raw is None:
        return None
    fix = (
        "write how often an incremental view takes the full diff anyway, as a duration of refresh time "
        "(e.g. full_refresh_every: 7d) or a number of refreshes (e.g. full_refresh_every: 24)"
    )
    if isinstance(raw, bool):
        raise _fail(file, "full_refresh_every", f"{raw!r} is neither a duration nor a count", fix)
    if isinstance(raw, int):
        if raw < 1:
            raise _fail(file, "full_refresh_every", f"{raw} refreshes is not a positive count", fix)
        return ("refreshes", raw)
    try:
        return ("ms", parse_duration(raw, what="full_refresh_every"))
    except ValueError as exc:
        raise _fail(file, "full_refresh_every", str(exc), fix) from None


def _parse_query(doc: dict[str, Any], file: str, path: Path, view_name: str) -> str:
    query, sql_file = doc.get("query"), doc.get("sql_file")
    if query is not None and sql_file is not None:
        raise _fail(file, "query", "both query and sql_file given", "keep exactly one of them")
    if sql_file is not None:
        if not isinstance(sql_file, str):
            raise _fail(file, "sql_file", "must be a file name", "write e.g. sql_file: my_view.sql")
        folder = path.parent.resolve()
        sql_path = (folder / sql_file).resolve()
        if not sql_path.is_relative_to(folder):
            raise UnsafePathError(
                f"view file {file}: field 'sql_file': view {view_name}: {sql_file!r} resolves to {sql_path}, "
                f"outside the view file's folder {folder}. Fix: put the SQL file beside the view file "
                "and give its name only."
            )
        try:
            query = sql_path.read_text()
        except OSError as exc:
            raise _fail(
                file,
                "sql_file",
                f"cannot read {sql_path}: {exc.strerror}",
                "put the SQL file beside the view file or fix the name",
            ) from None
    if not isinstance(query, str) or not query.strip():
        raise _fail(
            file,
            "query",
            "missing or empty",
            "give the view's Spark SQL SELECT inline (query:) or in a file (sql_file:)",
        )
    query = _strip_trailing(query)
    lexical = _strip_literals(query)
    if ";" in lexical:
        raise _fail(file, "query", "holds more than one statement", "give exactly one SELECT statement")
    m = _NONDET_RE.search(lexical)
    if m:
        fn = (m.group(1) or m.group(2)).lower()
        raise _fail(
            file,
            "query",
            f"uses the non-deterministic function {fn}()",
            "a view must be a function of its sources: remove it, or pass times in through a source table",
        )
    return query


_CHECK_EXAMPLE = 'checks: [{name: positive_qty, expr: "qty > 0", action: error}]'


def _parse_checks(raw: object, file: str) -> tuple[Check, ...]:
    """``checks:`` as a list of {name, expr, action} or a mapping name -> {expr, action} (or name -> expr)."""
    if raw is None:
        return ()
    out: list[Check] = []
    seen: dict[str, str] = {}
    for name, spec in _check_items(raw, file):
        field = f"checks.{name}"
        if not IDENT_RE.match(name):
            raise _fail(
                file,
                field,
                f"{name!r} is not a valid check name",
                "use letters, digits and _, starting with a letter or _ (it is stored in _mv_error)",
            )
        if name.lower().startswith(RESERVED_PREFIX):
            raise _fail(file, field, "names starting with _mv_ are reserved", "rename the check")
        if name.lower() in seen:
            raise _fail(
                file,
                field,
                f"the check name is used twice (also {seen[name.lower()]!r})",
                "give each check a unique name",
            )
        seen[name.lower()] = name
        if isinstance(spec, str):
            spec = {"expr": spec}
        if not isinstance(spec, dict):
            raise _fail(
                file,
                field,
                f"{spec!r} is not a mapping with expr and action",
                'write e.g. positive_qty: {expr: "qty > 0", action: error}',
            )
        unknown = sorted(set(map(str, spec)) - (CHECK_FIELDS - {"name"}))
        if unknown:
            raise _fail(file, f"{field}.{unknown[0]}", "unknown key", "a check has only name, expr and action")
        action = spec.get("action", "error")
        if action not in CHECK_ACTIONS:
            raise _fail(
                file,
                f"{field}.action",
                f"{action!r} is not one of {list(CHECK_ACTIONS)}",
                "write action: error (row goes to the error collection), drop (row left out, counted) "
                "or warn (row kept, counted)",
            )
        out.append(Check(name=name, expr=_check_expr(spec.get("expr"), file, field), action=action))
    return tuple(out)


def _check_items(raw: object, file: str) -> list[tuple[str, object]]:
    """(name, spec) of each check, from a list of mappings with ``name`` or a mapping by name."""
    if isinstance(raw, dict):
        return [(str(k), v) for k, v in raw.items()]
    if not isinstance(raw, list):
        raise _fail(file, "checks", f"{raw!r} is not a list of checks", f"write e.g. {_CHECK_EXAMPLE}")
    items: list[tuple[str, object]] = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict):
            raise _fail(
                file,
                f"checks[{i}]",
                f"{item!r} is not a mapping with name, expr and action",
                f"write e.g. {_CHECK_EXAMPLE}",
            )
        if "name" not in item:
            raise _fail(file, f"checks[{i}]", "has no name", "give each check a name, e.g. name: positive_qty")
        items.append((str(item["name"]), {k: v for k, v in item.items() if k != "name"}))
    return items


def _check_expr(expr: object, file: str, field: str) -> str:
    """A check's ``expr``: one deterministic per-row boolean expression (lexical checks; Spark checks the rest)."""
    if not isinstance(expr, str) or not expr.strip():
        raise _fail(
            file,
            f"{field}.expr",
            "missing or empty",
            'give a Spark SQL boolean expression over the query\'s columns, e.g. expr: "qty > 0"',
        )
    expr = _strip_trailing(expr)
    lexical = _strip_literals(expr)
    if ";" in lexical:
        raise _fail(file, f"{field}.expr", "holds a ';'", "give one boolean expression, without ;")
    m = _NONDET_RE.search(lexical)
    if m:
        fn = (m.group(1) or m.group(2)).lower()
        raise _fail(
            file,
            f"{field}.expr",
            f"uses the non-deterministic function {fn}()",
            "a check must be a function of the row: remove it",
        )
    if _SUBQUERY_RE.search(lexical):
        raise _fail(
            file,
            f"{field}.expr",
            "holds a subquery",
            "a check looks at one row of the result: use a per-row expression, or compute the "
            "value in the query and check the column",
        )
    if _AGGREGATE_OR_WINDOW_RE.search(lexical):
        raise _fail(
            file,
            f"{field}.expr",
            "uses an aggregate or window function",
            "a check looks at one row of the result: compute the aggregate in the query and check the column",
        )
    return expr


def _strip_trailing(sql: str) -> str:
    """The query without trailing semicolons and comments (``SELECT ...; -- done`` -> ``SELECT ...``)."""
    text = sql.strip()
    while True:
        if text.endswith(";"):
            text = text[:-1].rstrip()
            continue
        last = None
        for m in _LEXICAL_RE.finditer(text):
            last = m
        if last is not None and last.group(0)[0] in "-/" and last.end() >= len(text.rstrip()):
            text = text[: last.start()].rstrip()
            continue
        return text


def _strip_literals(sql: str) -> str:
    """SQL text with string literals and comments blanked out (for lexical checks)."""
    return _LEXICAL_RE.sub(lambda m: "''" if m.group(0)[0] in "'\"" else " ", sql)


_LEXICAL_RE = re.compile(r"'(?:[^'\\]|\\.|'')*'|\"(?:[^\"\\]|\\.)*\"|--[^\n]*|/\*.*?\*/", re.S)


def _parse_sources(raw: object, file: str, root: Path, view_name: str) -> tuple[Source, ...]:
    if not isinstance(raw, dict) or not raw:
        raise _fail(
            file, "sources", "missing or empty", "name each table the query reads, e.g. sources: {orders: data/orders}"
        )
    out = []
    for sname, spec in raw.items():
        sname = str(sname)
        if not IDENT_RE.match(sname):
            raise _fail(file, f"sources.{sname}", "not a valid SQL identifier", "use letters, digits and _")
        if isinstance(spec, str):
            spec = {"path": spec}
        if not isinstance(spec, dict) or len(spec) != 1 or next(iter(spec)) not in ("path", "view"):
            raise _fail(
                file,
                f"sources.{sname}",
                f"{spec!r} is neither a path nor a view",
                "write a Delta table path, {path: PATH} or {view: VIEW_NAME}",
            )
        ((kind, value),) = spec.items()
        if not isinstance(value, str) or not value.strip():
            raise _fail(file, f"sources.{sname}.{kind}", "empty", f"give the {kind}")
        if kind == "view":
            if not NAME_RE.match(value):
                raise _fail(
                    file,
                    f"sources.{sname}.view",
                    f"{value!r} is not a view name",
                    "give the name of another view file's view",
                )
            if value == view_name:
                raise _fail(file, f"sources.{sname}.view", "a view cannot read itself", "read another view or a table")
            out.append(Source(name=sname, kind="view", view=value))
        else:
            resolved = _contained(value, root, file=file, view=view_name, field=f"sources.{sname}.{kind}")
            out.append(Source(name=sname, kind="path", path=resolved))
    return tuple(out)


def _check_sources_used(query: str, sources: tuple[Source, ...], file: str) -> None:
    text = _strip_literals(query).lower()
    for s in sources:
        if not re.search(rf"\b{re.escape(s.name.lower())}\b", text):
            raise _fail(
                file,
                f"sources.{s.name}",
                "not used by the query",
                f"refer to it in the query as `{s.name}`, or remove it",
            )


def _parse_catchup(raw: dict[Any, Any], file: str) -> bool:
    catchup = raw.get("catchup", False)
    if not isinstance(catchup, bool):
        raise _fail(
            file,
            "schedule",
            f"catchup {catchup!r} is not true or false",
            "write catchup: true (run every missed instant from as_of) or false (default: only the latest)",
        )
    return catchup


def _parse_schedule(raw: object, file: str) -> Schedule:
    if raw in (None, "manual", "none", "None"):
        return Schedule(kind="manual")
    if isinstance(raw, str):
        text = raw.strip()
        if text.startswith("@") or len(text.split()) in (5, 6):
            return Schedule(kind="cron", cron=text)
        raise _fail(
            file,
            "schedule",
            f"{raw!r} is not a cron expression",
            "write a cron string like '0 * * * *', {every: 1h}, {at: [TIME, ...]}, {on_commit: [view]} or manual",
        )
    if isinstance(raw, dict) and "every" in raw:
        extra = set(raw) - {"every", "aligned_to", "catchup"}
        if extra:
            raise _fail(file, "schedule", f"unknown key {sorted(extra)[0]!r}", "use every, aligned_to and catchup")
        catchup = _parse_catchup(raw, file)
        try:
            every = parse_duration(raw["every"], what="schedule.every")
            aligned = parse_time(raw.get("aligned_to", 0), what="schedule.aligned_to")
        except ValueError as exc:
            raise _fail(
                file, "schedule", str(exc), "write e.g. {every: 1h, aligned_to: 2026-01-01T00:00:00Z}"
            ) from None
        return Schedule(kind="interval", every_ms=every, aligned_to_ms=aligned, catchup=catchup)
    if isinstance(raw, dict) and "at" in raw and set(raw) <= {"at", "catchup"}:
        catchup = _parse_catchup(raw, file)
        at = raw["at"] if isinstance(raw["at"], list) else [raw["at"]]
        try:
            times = tuple(sorted(parse_time(t, what="schedule.at") for t in at))
        except ValueError as exc:
            raise _fail(file, "schedule", str(exc), "list times as ISO-8601 or epoch milliseconds") from None
        if not times:
            raise _fail(file, "schedule", "empty list of times", "list at least one refresh time")
        return Schedule(kind="at", at_ms=times, catchup=catchup)
    if isinstance(raw, dict) and set(raw) == {"on_commit"}:
        views = raw["on_commit"] if isinstance(raw["on_commit"], list) else [raw["on_commit"]]
        if not views or not all(isinstance(v, str) and NAME_RE.match(v) for v in views):
            raise _fail(
                file,
                "schedule",
                f"on_commit {views!r} is not a list of view names",
                "write e.g. {on_commit: [orders_clean]}",
            )
        return Schedule(kind="on_commit", on_commit=tuple(views))
    raise _fail(
        file,
        "schedule",
        f"{raw!r} is not a schedule",
        "write a cron string, {every: DURATION, aligned_to: TIME}, {at: [TIME, ...]}, {on_commit: [VIEW, ...]} or manual",
    )


def load_view_file(path: str | os.PathLike[str], *, data_root: Path | None = None) -> ViewDefinition:
    """Read and validate one view file."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise ViewDefinitionError(f"view file {p}: cannot be read: {exc.strerror}. Fix: check the path.") from None
    return parse_view(text, file=str(p), data_root=data_root)
