"""View files: one YAML file per view, read and validated into a :class:`~mvsink.definitions.view.ViewDefinition`.

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
    notify:                       # optional: Airflow notifiers told of a failed run or a breach of max_lag
      - {notifier: airflow.providers.smtp.notifications.smtp.SmtpNotifier, args: {to: ops@example.com},
         events: [failure, stale]}    # events: default both
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

import os
import re
from pathlib import Path
from typing import Any, Literal

from mvsink.definitions import cache
from mvsink.definitions.confinement import contained, data_root_for
from mvsink.definitions.view import (
    DEFAULT_RETAIN_HISTORY_MS,
    IDENT_RE,
    NAME_RE,
    NOTIFY_EVENTS,
    RESERVED_PREFIX,
    Notify,
    Schedule,
    Source,
    ViewDefinition,
)
from mvsink.definitions.viewsql import field_error, parse_checks, parse_query, strip_literals
from mvsink.exceptions import ViewDefinitionError
from mvsink.location import Location, parse
from mvsink.times import parse_duration, parse_time

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
    "notify",
}


def parse_view(text: str, *, file: str = "<string>", data_root: Path | None = None) -> ViewDefinition:
    """Parse and validate the YAML text of one view file."""
    path = Path(file)
    root = data_root if data_root is not None else data_root_for(path)
    doc = _load_yaml(text, file)
    name = doc.get("name")
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise field_error(
            file,
            "name",
            f"{name!r} is not a valid view name",
            "use lower-case letters, digits and _, starting with a letter (max 63)",
        )
    description = doc.get("description", "") or ""
    if not isinstance(description, str):
        raise field_error(file, "description", "must be text", "write the description as a string")

    query = parse_query(doc, file, path, name)
    sources = _parse_sources(doc.get("sources"), file, root, name)
    _check_sources_used(query, sources, file)
    target_path = _parse_target(doc.get("target"), file, root, name, sources)
    as_of = _parse_as_of(doc, file)
    conf = doc.get("spark_conf", {}) or {}
    if not isinstance(conf, dict) or not all(isinstance(k, str) for k in conf):
        raise field_error(
            file,
            "spark_conf",
            "must be a mapping of Spark settings",
            "write e.g. spark_conf: {spark.driver.memory: 2g}",
        )
    incremental = doc.get("incremental", True)
    if not isinstance(incremental, bool):
        raise field_error(
            file,
            "incremental",
            f"{incremental!r} is not true or false",
            "write incremental: true (default) or incremental: false",
        )
    tags = doc.get("tags", []) or []
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise field_error(file, "tags", "must be a list of strings", "write e.g. tags: [finance]")

    storage_options = _parse_storage_options(doc.get("storage_options"), file)
    if storage_options:  # every location of the view carries them (as written: references stay references)
        specs = tuple(sorted((k, kind, v) for k, (kind, v) in storage_options.items()))
        target_path = parse(target_path, storage_options=specs, view=name)
        sources = tuple(
            Source(s.name, s.kind, parse(s.path, storage_options=specs, view=name), s.view) if s.path is not None else s
            for s in sources
        )
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
        checks=parse_checks(doc.get("checks"), file),
        max_lag_ms=_parse_max_lag(doc.get("max_lag"), file),
        full_refresh_every=_parse_full_refresh_every(doc.get("full_refresh_every"), file),
        storage_options=storage_options,
        notify=_parse_notify(doc.get("notify"), file),
    )


_SECRET_RE = re.compile(r"KEY|SECRET|TOKEN|PASSWORD|SAS|CREDENTIAL|SIGNATURE", re.IGNORECASE)
_OPTION_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*\Z")


def _parse_storage_options(raw: object, file: str) -> dict[str, tuple[str, str]]:
    """``storage_options``: option -> inline text, or ``{env: VARIABLE}``; a secret only by reference."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise field_error(
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
            raise field_error(file, field, "not an option name", "use delta-rs's option names, e.g. AWS_REGION")
        if isinstance(value, dict):
            if set(value) != {"env"} or not isinstance(value["env"], str) or not _OPTION_RE.match(value["env"]):
                raise field_error(file, field, "a reference must be {env: VARIABLE}", "write e.g. {env: LAKE_SECRET}")
            out[key.upper()] = ("env", value["env"])
        elif isinstance(value, (str, int, float, bool)):
            if _SECRET_RE.search(key):
                # never echo the value: it is a secret written where it must not be
                raise field_error(
                    file,
                    field,
                    "holds a secret inline (view files are not secret stores; the value is not shown)",
                    f"remove it from the file and write {key}: {{env: VARIABLE}} with the secret in that "
                    "environment variable",
                )
            out[key.upper()] = ("value", str(value).lower() if isinstance(value, bool) else str(value))
        else:
            raise field_error(file, field, "must be text or {env: VARIABLE}", "write e.g. AWS_REGION: eu-west-1")
    return out


_IMPORT_PATH_RE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)+\Z")
_NOTIFY_EXAMPLE = "notify: [{notifier: my_pkg.notifiers.OpsNotifier, args: {channel: ops}, events: [failure, stale]}]"


def _parse_notify(raw: object, file: str) -> tuple[Notify, ...]:
    """``notify``: a list of notifiers, each an import path or {notifier, args, events}."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise field_error(file, "notify", "must be a list of notifiers", f"write e.g. {_NOTIFY_EXAMPLE}")
    out: list[Notify] = []
    for i, item in enumerate(raw):
        where = f"notify[{i}]"
        entry = {"notifier": item} if isinstance(item, str) else item
        if not isinstance(entry, dict):
            raise field_error(file, where, "must be an import path or a mapping", f"write e.g. {_NOTIFY_EXAMPLE}")
        unknown = sorted(set(map(str, entry)) - {"notifier", "args", "events"})
        if unknown:
            raise field_error(file, where, f"unknown key {unknown[0]!r}", "use notifier, args and events")
        path, args, on = entry.get("notifier"), entry.get("args") or {}, entry.get("events", list(NOTIFY_EVENTS))
        if not isinstance(path, str) or not _IMPORT_PATH_RE.match(path):
            raise field_error(
                file,
                f"{where}.notifier",
                f"{path!r} is not an import path",
                "name an Airflow BaseNotifier class as module.Class, e.g. "
                "airflow.providers.smtp.notifications.smtp.SmtpNotifier",
            )
        if not isinstance(args, dict) or not all(isinstance(k, str) for k in args):
            raise field_error(
                file,
                f"{where}.args",
                "must be a mapping of keyword arguments",
                "write e.g. args: {to: ops@example.com}",
            )
        events = [on] if isinstance(on, str) else on
        if not isinstance(events, list) or not events or not set(events) <= set(NOTIFY_EVENTS):
            raise field_error(
                file, f"{where}.events", f"{on!r} is not a list of events", f"use some of {list(NOTIFY_EVENTS)}"
            )
        out.append(Notify(notifier=path, args=dict(args), events=tuple(dict.fromkeys(events))))
    return tuple(out)


def _safe_load(text: str) -> Any:
    """PyYAML's safe load of ``text``: libyaml's loader where PyYAML has it (about 30x faster: the UI loads every
    view file per page)."""
    import yaml

    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # a safe loader


def _load_yaml(text: str, file: str) -> dict[str, Any]:
    """The view file's mapping of fields (valid YAML, a mapping, only known fields)."""
    try:
        doc = cache.yaml_document(text, _safe_load)  # (PyYAML imported only for a text not read before)
    except Exception as exc:
        import yaml

        if not isinstance(exc, yaml.YAMLError):
            raise
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
        raise field_error(file, unknown[0], "unknown field", f"remove it or use one of {sorted(KNOWN_FIELDS)}")
    return doc


def _parse_target(target: object, file: str, root: Path, name: str, sources: tuple[Source, ...]) -> Location:
    """``target``: the view's table path, inside the data root and not one of its sources."""
    if not isinstance(target, str) or not target.strip():
        raise field_error(
            file, "target", "missing or empty", "give the Delta table path of the view, e.g. views/my_view"
        )
    target_path = contained(target, root, file=file, view=name, field="target")
    for s in sources:
        if s.kind == "path" and s.path == target_path:
            raise field_error(
                file, "target", f"{target_path} is also source '{s.name}'", "write the view to its own table path"
            )
    return target_path


def _parse_as_of(doc: dict[str, Any], file: str) -> int:
    """``as_of`` (required): the first time the view may hold output."""
    if "as_of" not in doc:
        raise field_error(
            file, "as_of", "missing", "give the first time the view may hold output, e.g. 2026-01-01T00:00:00Z"
        )
    try:
        as_of = parse_time(doc["as_of"], what="as_of")
    except ValueError as exc:
        raise field_error(file, "as_of", str(exc), "write ISO-8601 (UTC if no zone) or epoch milliseconds") from None
    if as_of < 0:
        raise field_error(file, "as_of", "negative time", "use a time after 1970-01-01")
    return as_of


def _parse_until(raw: object, file: str, as_of: int) -> int | None:
    """``until`` (optional): no scheduled refresh after this time."""
    if raw is None:
        return None
    try:
        until = parse_time(raw, what="until")
    except ValueError as exc:
        raise field_error(file, "until", str(exc), "write ISO-8601 (UTC if no zone) or epoch milliseconds") from None
    if until < as_of:
        raise field_error(file, "until", "is before as_of", "give a time at or after as_of, or remove until")
    return until


def _parse_key(raw: object, file: str) -> tuple[str, ...]:
    """``key`` (optional): columns unique in the result."""
    key_raw = [raw] if isinstance(raw, str) else raw
    if not isinstance(key_raw, list) or not all(isinstance(k, str) and IDENT_RE.match(k) for k in key_raw):
        raise field_error(file, "key", f"{key_raw!r} is not a list of column names", "write e.g. key: [customer_id]")
    if any(k.lower().startswith(RESERVED_PREFIX) for k in key_raw):
        raise field_error(file, "key", "columns starting with _mv_ are reserved", "rename the column in the query")
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
        raise field_error(
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
        raise field_error(
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
        raise field_error(file, "full_refresh_every", f"{raw!r} is neither a duration nor a count", fix)
    if isinstance(raw, int):
        if raw < 1:
            raise field_error(file, "full_refresh_every", f"{raw} refreshes is not a positive count", fix)
        return ("refreshes", raw)
    try:
        return ("ms", parse_duration(raw, what="full_refresh_every"))
    except ValueError as exc:
        raise field_error(file, "full_refresh_every", str(exc), fix) from None


def _parse_sources(raw: object, file: str, root: Path, view_name: str) -> tuple[Source, ...]:
    if not isinstance(raw, dict) or not raw:
        raise field_error(
            file, "sources", "missing or empty", "name each table the query reads, e.g. sources: {orders: data/orders}"
        )
    out = []
    for sname, spec in raw.items():
        sname = str(sname)
        if not IDENT_RE.match(sname):
            raise field_error(file, f"sources.{sname}", "not a valid SQL identifier", "use letters, digits and _")
        if isinstance(spec, str):
            spec = {"path": spec}
        if not isinstance(spec, dict) or len(spec) != 1 or next(iter(spec)) not in ("path", "view"):
            raise field_error(
                file,
                f"sources.{sname}",
                f"{spec!r} is neither a path nor a view",
                "write a Delta table path, {path: PATH} or {view: VIEW_NAME}",
            )
        ((kind, value),) = spec.items()
        if not isinstance(value, str) or not value.strip():
            raise field_error(file, f"sources.{sname}.{kind}", "empty", f"give the {kind}")
        if kind == "view":
            if not NAME_RE.match(value):
                raise field_error(
                    file,
                    f"sources.{sname}.view",
                    f"{value!r} is not a view name",
                    "give the name of another view file's view",
                )
            if value == view_name:
                raise field_error(
                    file, f"sources.{sname}.view", "a view cannot read itself", "read another view or a table"
                )
            out.append(Source(name=sname, kind="view", view=value))
        else:
            resolved = contained(value, root, file=file, view=view_name, field=f"sources.{sname}.{kind}")
            out.append(Source(name=sname, kind="path", path=resolved))
    return tuple(out)


def _check_sources_used(query: str, sources: tuple[Source, ...], file: str) -> None:
    text = strip_literals(query).lower()
    for s in sources:
        if not re.search(rf"\b{re.escape(s.name.lower())}\b", text):
            raise field_error(
                file,
                f"sources.{s.name}",
                "not used by the query",
                f"refer to it in the query as `{s.name}`, or remove it",
            )


def _parse_catchup(raw: dict[Any, Any], file: str) -> bool:
    catchup = raw.get("catchup", False)
    if not isinstance(catchup, bool):
        raise field_error(
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
        raise field_error(
            file,
            "schedule",
            f"{raw!r} is not a cron expression",
            "write a cron string like '0 * * * *', {every: 1h}, {at: [TIME, ...]}, {on_commit: [view]} or manual",
        )
    if isinstance(raw, dict) and "every" in raw:
        extra = set(raw) - {"every", "aligned_to", "catchup"}
        if extra:
            raise field_error(
                file, "schedule", f"unknown key {sorted(extra)[0]!r}", "use every, aligned_to and catchup"
            )
        catchup = _parse_catchup(raw, file)
        try:
            every = parse_duration(raw["every"], what="schedule.every")
            aligned = parse_time(raw.get("aligned_to", 0), what="schedule.aligned_to")
        except ValueError as exc:
            raise field_error(
                file, "schedule", str(exc), "write e.g. {every: 1h, aligned_to: 2026-01-01T00:00:00Z}"
            ) from None
        return Schedule(kind="interval", every_ms=every, aligned_to_ms=aligned, catchup=catchup)
    if isinstance(raw, dict) and "at" in raw and set(raw) <= {"at", "catchup"}:
        catchup = _parse_catchup(raw, file)
        at = raw["at"] if isinstance(raw["at"], list) else [raw["at"]]
        try:
            times = tuple(sorted(parse_time(t, what="schedule.at") for t in at))
        except ValueError as exc:
            raise field_error(file, "schedule", str(exc), "list times as ISO-8601 or epoch milliseconds") from None
        if not times:
            raise field_error(file, "schedule", "empty list of times", "list at least one refresh time")
        return Schedule(kind="at", at_ms=times, catchup=catchup)
    if isinstance(raw, dict) and set(raw) == {"on_commit"}:
        views = raw["on_commit"] if isinstance(raw["on_commit"], list) else [raw["on_commit"]]
        if not views or not all(isinstance(v, str) and NAME_RE.match(v) for v in views):
            raise field_error(
                file,
                "schedule",
                f"on_commit {views!r} is not a list of view names",
                "write e.g. {on_commit: [orders_clean]}",
            )
        return Schedule(kind="on_commit", on_commit=tuple(views))
    raise field_error(
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
