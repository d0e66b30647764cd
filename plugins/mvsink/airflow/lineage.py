"""OpenLineage of a refresh, for ``apache-airflow-providers-openlineage`` (docs/airflow.md, "Lineage").

The append task's operator (:class:`mvsink.airflow.operators.ViewAppendOperator`) hands the provider, when it
completes, the refresh's inputs (each source table at the Delta version mint read) and its output (the view's
table at the Delta version the append committed), with the provider's facets: ``version``
(``DatasetVersionDatasetFacet``) on each, ``outputStatistics`` on the output. A run that appended nothing (up
to date, a retry of an already-committed refresh, a dry run, a lost race) reports no datasets.

Dataset names follow OpenLineage's naming: a local table is ``file`` + its absolute path; a table on object
storage is ``<scheme>://<bucket or container>`` + its key (``s3a`` is reported as ``s3``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mvsink.exceptions import StoreError
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


def operator_lineage(description: Mapping[str, Any] | None, summary: Mapping[str, Any] | None) -> Any:
    """The provider's ``OperatorLineage`` of one append (empty when it committed nothing)."""
    from airflow.providers.openlineage.extractors import OperatorLineage
    from openlineage.client.event_v2 import InputDataset, OutputDataset
    from openlineage.client.facet_v2 import dataset_version_dataset, output_statistics_output_dataset

    if not description or not summary:
        return OperatorLineage()
    got = refresh_datasets(description, summary)

    def version(d: Mapping[str, Any]) -> dict[str, Any]:
        if d["version"] is None:
            return {}
        return {"version": dataset_version_dataset.DatasetVersionDatasetFacet(datasetVersion=str(d["version"]))}

    inputs = [InputDataset(namespace=d["namespace"], name=d["name"], facets=version(d)) for d in got["inputs"]]
    outputs = [
        OutputDataset(
            namespace=d["namespace"],
            name=d["name"],
            facets=version(d),
            outputFacets={
                "outputStatistics": output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
                    rowCount=d["rows"], size=d["bytes"], fileCount=d["files"]
                )
            },
        )
        for d in got["outputs"]
    ]
    return OperatorLineage(inputs=inputs, outputs=outputs)
