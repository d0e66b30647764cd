"""A view's SQL text: its query and its row checks, checked lexically (one statement, deterministic, a
check a per-row expression); Spark checks the rest when the view is refreshed."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mvsink.definitions.view import IDENT_RE, RESERVED_PREFIX, Check
from mvsink.exceptions import UnsafePathError, ViewDefinitionError

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

CHECK_ACTIONS = ("error", "drop", "warn")
CHECK_FIELDS = {"name", "expr", "action"}
_SUBQUERY_RE = re.compile(r"\bselect\b", re.IGNORECASE)
_AGGREGATE_OR_WINDOW_RE = re.compile(
    r"\bover\s*\(|\b(count|sum|avg|min|max|collect_list|collect_set|first|last"
    r"|any_value|bool_and|bool_or|every|some|stddev|variance)\s*\(",
    re.IGNORECASE,
)


def field_error(file: str, field: str, problem: str, fix: str) -> ViewDefinitionError:
    return ViewDefinitionError(f"view file {file}: field '{field}': {problem}. Fix: {fix}")


def parse_query(doc: dict[str, Any], file: str, path: Path, view_name: str) -> str:
    query, sql_file = doc.get("query"), doc.get("sql_file")
    if query is not None and sql_file is not None:
        raise field_error(file, "query", "both query and sql_file given", "keep exactly one of them")
    if sql_file is not None:
        if not isinstance(sql_file, str):
            raise field_error(file, "sql_file", "must be a file name", "write e.g. sql_file: my_view.sql")
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
            raise field_error(
                file,
                "sql_file",
                f"cannot read {sql_path}: {exc.strerror}",
                "put the SQL file beside the view file or fix the name",
            ) from None
    if not isinstance(query, str) or not query.strip():
        raise field_error(
            file,
            "query",
            "missing or empty",
            "give the view's Spark SQL SELECT inline (query:) or in a file (sql_file:)",
        )
    query = _strip_trailing(query)
    lexical = strip_literals(query)
    if ";" in lexical:
        raise field_error(file, "query", "holds more than one statement", "give exactly one SELECT statement")
    m = _NONDET_RE.search(lexical)
    if m:
        fn = (m.group(1) or m.group(2)).lower()
        raise field_error(
            file,
            "query",
            f"uses the non-deterministic function {fn}()",
            "a view must be a function of its sources: remove it, or pass times in through a source table",
        )
    return query


_CHECK_EXAMPLE = 'checks: [{name: positive_qty, expr: "qty > 0", action: error}]'


def parse_checks(raw: object, file: str) -> tuple[Check, ...]:
    """``checks:`` as a list of {name, expr, action} or a mapping name -> {expr, action} (or name -> expr)."""
    if raw is None:
        return ()
    out: list[Check] = []
    seen: dict[str, str] = {}
    for name, spec in _check_items(raw, file):
        field = f"checks.{name}"
        if not IDENT_RE.match(name):
            raise field_error(
                file,
                field,
                f"{name!r} is not a valid check name",
                "use letters, digits and _, starting with a letter or _ (it is stored in _mv_error)",
            )
        if name.lower().startswith(RESERVED_PREFIX):
            raise field_error(file, field, "names starting with _mv_ are reserved", "rename the check")
        if name.lower() in seen:
            raise field_error(
                file,
                field,
                f"the check name is used twice (also {seen[name.lower()]!r})",
                "give each check a unique name",
            )
        seen[name.lower()] = name
        if isinstance(spec, str):
            spec = {"expr": spec}
        if not isinstance(spec, dict):
            raise field_error(
                file,
                field,
                f"{spec!r} is not a mapping with expr and action",
                'write e.g. positive_qty: {expr: "qty > 0", action: error}',
            )
        unknown = sorted(set(map(str, spec)) - (CHECK_FIELDS - {"name"}))
        if unknown:
            raise field_error(file, f"{field}.{unknown[0]}", "unknown key", "a check has only name, expr and action")
        action = spec.get("action", "error")
        if action not in CHECK_ACTIONS:
            raise field_error(
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
        raise field_error(file, "checks", f"{raw!r} is not a list of checks", f"write e.g. {_CHECK_EXAMPLE}")
    items: list[tuple[str, object]] = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict):
            raise field_error(
                file,
                f"checks[{i}]",
                f"{item!r} is not a mapping with name, expr and action",
                f"write e.g. {_CHECK_EXAMPLE}",
            )
        if "name" not in item:
            raise field_error(file, f"checks[{i}]", "has no name", "give each check a name, e.g. name: positive_qty")
        items.append((str(item["name"]), {k: v for k, v in item.items() if k != "name"}))
    return items


def _check_expr(expr: object, file: str, field: str) -> str:
    """A check's ``expr``: one deterministic per-row boolean expression (lexical checks; Spark checks the rest)."""
    if not isinstance(expr, str) or not expr.strip():
        raise field_error(
            file,
            f"{field}.expr",
            "missing or empty",
            'give a Spark SQL boolean expression over the query\'s columns, e.g. expr: "qty > 0"',
        )
    expr = _strip_trailing(expr)
    lexical = strip_literals(expr)
    if ";" in lexical:
        raise field_error(file, f"{field}.expr", "holds a ';'", "give one boolean expression, without ;")
    m = _NONDET_RE.search(lexical)
    if m:
        fn = (m.group(1) or m.group(2)).lower()
        raise field_error(
            file,
            f"{field}.expr",
            f"uses the non-deterministic function {fn}()",
            "a check must be a function of the row: remove it",
        )
    if _SUBQUERY_RE.search(lexical):
        raise field_error(
            file,
            f"{field}.expr",
            "holds a subquery",
            "a check looks at one row of the result: use a per-row expression, or compute the "
            "value in the query and check the column",
        )
    if _AGGREGATE_OR_WINDOW_RE.search(lexical):
        raise field_error(
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


def strip_literals(sql: str) -> str:
    """SQL text with string literals and comments blanked out (for lexical checks)."""
    return _LEXICAL_RE.sub(lambda m: "''" if m.group(0)[0] in "'\"" else " ", sql)


_LEXICAL_RE = re.compile(r"'(?:[^'\\]|\\.|'')*'|\"(?:[^\"\\]|\\.)*\"|--[^\n]*|/\*.*?\*/", re.S)
