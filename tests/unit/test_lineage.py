"""Issue 23 item 3: the OpenLineage of a refresh (mvsink.airflow.lineage): dataset names, versions, and nothing
for a run that appended nothing."""

from __future__ import annotations

import pytest

from mvsink.airflow.lineage import dataset_id, operator_lineage, refresh_datasets

pytestmark = pytest.mark.unit

DESC = {
    "view": "v",
    "target": "/data/views/v",
    "sources": [
        {"name": "orders", "kind": "path", "path": "/data/orders", "version": 7},
        {"name": "up", "kind": "view", "path": "s3a://lake/views/up", "version": 3, "view": "up"},
        {"name": "new", "kind": "view", "path": "/data/views/new", "version": -1, "view": "new"},
    ],
}
APPENDED = {"status": "appended", "version": 12, "rows_added": 5, "rows_retracted": 2, "bytes": 900, "files": 2}


@pytest.mark.parametrize(
    "location, expected",
    [
        ("/data/views/v", ("file", "/data/views/v")),
        ("file:///data/views/v", ("file", "/data/views/v")),
        ("s3a://lake/views/v", ("s3://lake", "views/v")),
        ("s3://lake/views/v", ("s3://lake", "views/v")),
        ("gs://b/t", ("gs://b", "t")),
        ("abfss://c@acct.dfs.core.windows.net/t/v", ("abfss://c@acct.dfs.core.windows.net", "t/v")),
    ],
)
def test_dataset_names(location, expected):
    assert dataset_id(location) == expected


def test_an_append_reports_its_inputs_and_output_with_versions():
    got = refresh_datasets(DESC, APPENDED)
    assert got["inputs"] == [
        {"namespace": "file", "name": "/data/orders", "version": 7, "source": "orders"},
        {"namespace": "s3://lake", "name": "views/up", "version": 3, "source": "up"},
        {"namespace": "file", "name": "/data/views/new", "version": None, "source": "new"},  # not created yet
    ]
    assert got["outputs"] == [
        {"namespace": "file", "name": "/data/views/v", "version": 12, "rows": 7, "bytes": 900, "files": 2}
    ]


@pytest.mark.parametrize("status", ["up_to_date", "rescheduled", "dry_run"])
def test_nothing_appended_reports_no_datasets(status):
    assert refresh_datasets(DESC, {**APPENDED, "status": status}) == {"inputs": [], "outputs": []}
    lineage = operator_lineage(DESC, {**APPENDED, "status": status})
    assert lineage.inputs == [] and lineage.outputs == []


def test_the_providers_lineage_objects_and_facets():
    from openlineage.client.serde import Serde

    lineage = operator_lineage(DESC, APPENDED)
    (out,) = lineage.outputs
    doc = Serde.to_dict(out)
    assert doc["namespace"] == "file" and doc["name"] == "/data/views/v"
    assert doc["facets"]["version"]["datasetVersion"] == "12"
    assert doc["outputFacets"]["outputStatistics"]["rowCount"] == 7
    assert doc["outputFacets"]["outputStatistics"]["size"] == 900
    ins = [Serde.to_dict(i) for i in lineage.inputs]
    assert [(i["name"], i["facets"].get("version", {}).get("datasetVersion")) for i in ins] == [
        ("/data/orders", "7"),
        ("views/up", "3"),
        ("/data/views/new", None),
    ]
    assert operator_lineage(None, APPENDED).outputs == []
