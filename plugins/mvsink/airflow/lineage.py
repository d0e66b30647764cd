"""OpenLineage of a refresh, for ``apache-airflow-providers-openlineage`` (docs/airflow.md, "Lineage").

The append task's operator (:class:`mvsink.airflow.operators.ViewAppendOperator`) hands the provider, when it
completes, the refresh's inputs (each source table at the Delta version mint read) and its output (the view's
table at the Delta version the append committed), with the provider's facets: ``version``
(``DatasetVersionDatasetFacet``) and ``schema`` (the table's columns at that version) on each,
``outputStatistics`` and ``columnLineage`` (each view column's source columns, where OpenLineage's SQL parser can
follow them through the query) on the output, and the job's ``sql`` facet (the view's query). A run that appended
nothing (up to date, waiting for inputs, a dry run, a lost race) reports no datasets; a retry of a refresh whose
commit went through (its first try failed after the commit) reports it: the first try ended without a COMPLETE event.

Dataset names follow OpenLineage's naming: a local table is ``file`` + its absolute path; a table on object
storage is ``<scheme>://<bucket or container>`` + its key (``s3a`` is reported as ``s3``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from mvsink.exceptions import MvSinkError, StoreError
from mvsink.location import Location, Where, parse


def dataset_id(location: Where) -> tuple[str, str]:
    """OpenLineage ``(namespace, name)`` of a Delta table location (a path, a URI or a parsed location)."""
    try:
        loc = parse(location)
    except StoreError:  # a scheme mvsink cannot reach: never a view's source or target
        return "file", str(location)
    if loc.is_local:
        return "file", loc.key
    return loc.container_uri(), loc.key


def refresh_datasets(description: Mapping[str, Any], summary: Mapping[str, Any]) -> dict[str, Any]:
    """What the lineage of one append says, as plain data (pure; tested): ``inputs`` and ``outputs``, each a
    list of ``{namespace, name, version, ...}``; both empty when the append committed nothing."""
    if summary.get("status") != "appended" or summary.get("version") is None:
        return {"inputs": [], "outputs": []}
    inputs = []
    for s in description.get("sources", ()):
        ns, name = dataset_id(Location.from_json(s["path"]))
        version = s.get("version")
        inputs.append(
            {
                "namespace": ns,
                "name": name,
                "version": None if version is None or int(version) < 0 else int(version),
                "source": s.get("name"),
            }
        )
    ns, name = dataset_id(Location.from_json(description["target"]))
    output = {
        "namespace": ns,
        "name": name,
        "version": int(summary["version"]),
        "rows": int(summary.get("rows_added", 0)) + int(summary.get("rows_retracted", 0)),
        "bytes": int(summary.get("bytes", 0)),
        "files": int(summary.get("files", 0)),
    }
    return {"inputs": inputs, "outputs": [output]}


def lineage_enabled() -> bool:
    """Is the OpenLineage provider installed and configured (a transport set)? Else nothing is gathered."""
    try:
        from airflow.providers.openlineage.conf import is_disabled
    except ImportError:
        return False
    return not is_disabled()


def table_fields(location: Where, version: int | None) -> list[dict[str, str]]:
    """The columns of a Delta table at ``version``, ``{name, type}`` each (a nested type by its kind: ``struct``,
    ``array``, ``map``); ``[]`` when the table cannot be read (lineage never fails a refresh)."""
    from mvsink.core.table import open_readable

    try:
        dt = open_readable(location, version=version, role="lineage")
        doc = json.loads(dt.schema().to_json())
    except (MvSinkError, OSError, ValueError, RuntimeError):
        return []
    out = []
    for f in doc.get("fields", []):
        t = f.get("type")
        out.append({"name": str(f["name"]), "type": str(t if isinstance(t, str) else (t or {}).get("type", ""))})
    return out


def column_lineage(query: str, sources: Mapping[str, tuple[str, str]], columns: list[str]) -> dict[str, list[Any]]:
    """Each output column's input columns ``[namespace, name, field]``, as OpenLineage's SQL parser
    (``openlineage-sql``, Spark SQL dialect) follows them through ``query``, its tables named by ``sources``
    (a source name -> dataset id); columns it cannot follow are left out, a query it cannot parse gives ``{}``."""
    try:
        from openlineage_sql import parse as parse_sql

        parsed = parse_sql([query], dialect="sparksql")
    except Exception:  # the parser is best effort: a query it does not know gives no column lineage
        return {}
    if parsed is None:
        return {}
    by_source = {k.casefold(): v for k, v in sources.items()}
    by_column = {c.casefold(): c for c in columns}
    out: dict[str, list[Any]] = {}
    for cl in parsed.column_lineage:
        col = by_column.get(str(cl.descendant.name).casefold())
        if col is None:
            continue
        fields = []
        for src in cl.lineage:
            dataset = by_source.get(str(getattr(src.origin, "name", "")).casefold())
            if dataset is not None:
                fields.append([dataset[0], dataset[1], str(src.name)])
        if fields:
            out[col] = sorted(fields)
    return out


def lineage_extras(query: str, description: Mapping[str, Any], summary: Mapping[str, Any]) -> dict[str, Any]:
    """What the append task gathers for its lineage, as plain data (the provider asks for it in a forked process
    that must read nothing): the query, each dataset's columns by ``namespace name`` and the column lineage."""
    got = refresh_datasets(description, summary)
    if not got["outputs"]:
        return {}
    schemas: dict[str, list[dict[str, str]]] = {}
    sources: dict[str, tuple[str, str]] = {}
    for s in description.get("sources", ()):
        loc = Location.from_json(s["path"])
        ns, name = dataset_id(loc)
        version = s.get("version")
        schemas[f"{ns} {name}"] = table_fields(loc, None if version is None or int(version) < 0 else int(version))
        sources[str(s.get("name"))] = (ns, name)
    out = got["outputs"][0]
    target = Location.from_json(description["target"])
    schemas[f"{out['namespace']} {out['name']}"] = table_fields(target, out["version"])
    columns = [f["name"] for f in schemas[f"{out['namespace']} {out['name']}"]]
    return {"sql": query, "schemas": schemas, "column_lineage": column_lineage(query, sources, columns)}


def operator_lineage(
    description: Mapping[str, Any] | None, summary: Mapping[str, Any] | None, extras: Mapping[str, Any] | None = None
) -> Any:
    """The provider's ``OperatorLineage`` of one append (empty when it committed nothing), with the facets of
    :func:`lineage_extras` when given."""
    from airflow.providers.openlineage.extractors import OperatorLineage
    from openlineage.client.event_v2 import InputDataset, OutputDataset
    from openlineage.client.facet_v2 import (
        column_lineage_dataset,
        dataset_version_dataset,
        output_statistics_output_dataset,
        schema_dataset,
        sql_job,
    )

    if not description or not summary:
        return OperatorLineage()
    got = refresh_datasets(description, summary)
    extras = extras or {}
    schemas = extras.get("schemas") or {}

    def facets(d: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if d["version"] is not None:
            out["version"] = dataset_version_dataset.DatasetVersionDatasetFacet(datasetVersion=str(d["version"]))
        fields = schemas.get(f"{d['namespace']} {d['name']}")
        if fields:
            out["schema"] = schema_dataset.SchemaDatasetFacet(
                fields=[schema_dataset.SchemaDatasetFacetFields(name=f["name"], type=f["type"]) for f in fields]
            )
        return out

    def output_facets(d: Mapping[str, Any]) -> dict[str, Any]:
        out = facets(d)
        lineage = extras.get("column_lineage") or {}
        if lineage:
            out["columnLineage"] = column_lineage_dataset.ColumnLineageDatasetFacet(
                fields={
                    col: column_lineage_dataset.Fields(
                        inputFields=[
                            column_lineage_dataset.InputField(namespace=ns, name=name, field=field)
                            for ns, name, field in inputs
                        ]
                    )
                    for col, inputs in lineage.items()
                }
            )
        return out

    inputs = [InputDataset(namespace=d["namespace"], name=d["name"], facets=facets(d)) for d in got["inputs"]]
    outputs = [
        OutputDataset(
            namespace=d["namespace"],
            name=d["name"],
            facets=output_facets(d),
            outputFacets={
                "outputStatistics": output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
                    rowCount=d["rows"], size=d["bytes"], fileCount=d["files"]
                )
            },
        )
        for d in got["outputs"]
    ]
    job_facets = {"sql": sql_job.SQLJobFacet(query=extras["sql"], dialect="spark")} if extras.get("sql") else {}
    return OperatorLineage(inputs=inputs, outputs=outputs, job_facets=job_facets)
