"""Validation of a view against Spark: result columns, types, determinism, schema changes."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from mvsink.columns import DIFF, ERROR, RESERVED_PREFIX, TIME, is_hidden
from mvsink.definitions.view import ViewDefinition
from mvsink.exceptions import QueryError, SchemaChangedError
from mvsink.spark.declaredchecks import plan_deterministic, validate_checks
from mvsink.spark.messages import first_paragraph

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import DataType, StructType


_BAD_NAME_CHARS = re.compile(r"[ ,;{}()\n\t=]")


def unsupported_type(dt: DataType) -> str | None:
    """Why Spark-side grouping or Delta cannot hold this type, or None."""
    from pyspark.sql import types as T

    if isinstance(dt, T.MapType):
        return "MAP (Spark cannot group rows by a map)"
    if isinstance(dt, T.NullType):
        return "VOID (an untyped NULL)"
    if isinstance(dt, (T.CalendarIntervalType, T.DayTimeIntervalType, T.YearMonthIntervalType)):
        return "INTERVAL (Delta has no interval type)"
    name = type(dt).__name__
    if name in ("VariantType", "TimeType", "ObjectType", "GeographyType", "GeometryType"):
        return f"{dt.simpleString().upper()} (not supported by Delta tables written here)"
    if isinstance(dt, T.ArrayType):
        return unsupported_type(dt.elementType)
    if isinstance(dt, T.StructType):
        for f in dt.fields:
            why = unsupported_type(f.dataType)
            if why:
                return why
    return None


_TYPE_FIX = {
    "MAP": "convert it, e.g. to_json(col) or map_entries(col)",
    "VOID": "cast it to a type, e.g. CAST(NULL AS STRING)",
    "INTERVAL": "convert it to a number, e.g. a count of seconds",
}


def validate_output(view: ViewDefinition, schema: StructType) -> None:
    """Refuse result columns the table cannot hold or the diff cannot group on."""
    seen: dict[str, str] = {}
    for f in schema.fields:
        low = f.name.lower()
        if low.startswith(RESERVED_PREFIX):
            raise QueryError(
                f"view {view.name}: the query returns column {f.name!r}; names starting with "
                f"{RESERVED_PREFIX} are reserved. Fix: alias the column to another name."
            )
        if _BAD_NAME_CHARS.search(f.name) or not f.name:
            raise QueryError(
                f"view {view.name}: the query returns column {f.name!r}, whose name a Delta table "
                "cannot hold (spaces, commas, parentheses, =). Fix: give it an alias, e.g. "
                "count(*) AS n."
            )
        if low in seen:
            raise QueryError(f"view {view.name}: the query returns column {f.name!r} twice. Fix: alias one of them.")
        seen[low] = f.name
        why = unsupported_type(f.dataType)
        if why:
            fix = next((v for k, v in _TYPE_FIX.items() if why.startswith(k)), "cast it to a supported type")
            raise QueryError(f"view {view.name}: column {f.name!r} has type {why}. Fix: {fix}.")
    missing = [k for k in view.key if k.lower() not in seen]
    if missing:
        raise QueryError(
            f"view {view.name}: key column(s) {missing} are not in the query's result "
            f"{list(seen.values())}. Fix: correct `key` in the view file."
        )


def analyse(spark: SparkSession, view: ViewDefinition) -> DataFrame:
    """The view's query as a DataFrame, validated (analysis errors become QueryError)."""
    from pyspark.errors import PySparkException

    try:
        desired = spark.sql(view.query)
        schema = desired.schema
    except PySparkException as exc:
        raise QueryError(
            f"view {view.name}: the query does not analyse: {first_paragraph(exc)}. "
            f"Fix: correct the SQL in {view.file or 'the view file'}; sources are available "
            f"as {[s.name for s in view.sources]}."
        ) from None
    validate_output(view, schema)
    validate_checks(view, desired)
    deterministic = plan_deterministic(desired)
    if deterministic is False:
        raise QueryError(
            f"view {view.name}: the query is not deterministic (it uses a random, time- or "
            "file-dependent expression). Fix: make the view a function of its sources."
        )
    return desired


def compare_schema(view: ViewDefinition, desired: StructType, table: StructType) -> None:
    """Refuse a query whose columns (names, types) differ from the table's. A string's collation is not
    compared: the table stores plain strings (its Delta schema has no collations)."""
    want = [(f.name.lower(), _stored(f.dataType.simpleString())) for f in desired.fields]
    have = [
        (f.name.lower(), _stored(f.dataType.simpleString()))
        for f in table.fields
        if f.name not in (TIME, DIFF, ERROR) and not is_hidden(f.name)
    ]
    if want != have:
        raise SchemaChangedError(
            f"view {view.name}: the query now returns columns {want} but table {view.target} holds {have}. "
            "Fix: restore the query's columns and types, or point `target` at a new table path "
            "(or delete the old table) to rebuild the view with the new shape."
        )


def _stored(type_string: str) -> str:
    """A Spark type's simple string as the table stores it: without string collations."""
    import re

    return re.sub(r"string collate \w+", "string", type_string)
