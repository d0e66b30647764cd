"""Issue 39 item 8: the schema, SQL and column-lineage facets of a refresh's OpenLineage (mvsink.airflow.lineage)."""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from mvsink.airflow.lineage import column_lineage, lineage_extras, operator_lineage, table_fields

pytestmark = pytest.mark.unit

JOIN = (
    "SELECT c.region, o.status, count(*) AS n, sum(o.amount) AS revenue FROM orders o "
    "LEFT JOIN customers c ON o.cust = c.id GROUP BY c.region, o.status"
)
SOURCES = {"orders": ("file", "/d/orders"), "Customers": ("file", "/d/customers")}


def test_column_lineage_follows_each_view_column_to_its_source_columns():
    got = column_lineage(JOIN, SOURCES, ["region", "status", "n", "revenue"])
    assert got == {
        "region": [["file", "/d/customers", "region"]],
        "status": [["file", "/d/orders", "status"]],
        "revenue": [["file", "/d/orders", "amount"]],
    }  # count(*) reads no column: left out


def test_column_lineage_of_a_query_the_parser_cannot_read_is_empty():
    assert column_lineage("SELECT FROM WHERE ((", SOURCES, ["a"]) == {}
    # a table that is not a source (a CTE's name) gives no input field
    assert column_lineage("WITH x AS (SELECT 1 AS a) SELECT a FROM x", SOURCES, ["a"]) == {}


def test_table_fields_at_a_version(tmp_path):
    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"id": pa.array([1], pa.int64()), "s": ["a"]}))
    write_deltalake(
        path,
        pa.table({"id": pa.array([2], pa.int64()), "s": ["b"], "tags": pa.array([["x"]], pa.list_(pa.string()))}),
        mode="append",
        schema_mode="merge",
    )
    assert table_fields(path, 0) == [{"name": "id", "type": "long"}, {"name": "s", "type": "string"}]
    assert table_fields(path, 1)[-1] == {"name": "tags", "type": "array"}
    assert table_fields(str(tmp_path / "none"), None) == []  # never fails the refresh


def test_the_facets_on_the_events_datasets_and_job(tmp_path):
    from openlineage.client.serde import Serde

    orders, view = str(tmp_path / "orders"), str(tmp_path / "v")
    write_deltalake(orders, pa.table({"id": pa.array([1], pa.int64()), "status": ["A"]}))
    write_deltalake(view, pa.table({"status": ["A"], "_mv_time": pa.array([1], pa.int64())}))
    desc = {"target": view, "sources": [{"name": "orders", "kind": "path", "path": orders, "version": 0}]}
    summary = {"status": "appended", "version": 0, "rows_added": 1, "rows_retracted": 0, "bytes": 1, "files": 1}
    query = "SELECT status FROM orders"
    extras = lineage_extras(query, desc, summary)
    assert extras["column_lineage"] == {"status": [["file", orders, "status"]]}
    lineage = operator_lineage(desc, summary, extras)
    (inp,), (out,) = [Serde.to_dict(i) for i in lineage.inputs], [Serde.to_dict(o) for o in lineage.outputs]
    assert [(f["name"], f["type"]) for f in inp["facets"]["schema"]["fields"]] == [("id", "long"), ("status", "string")]
    assert [f["name"] for f in out["facets"]["schema"]["fields"]] == ["status", "_mv_time"]
    assert out["facets"]["columnLineage"]["fields"] == {
        "status": {"inputFields": [{"namespace": "file", "name": orders, "field": "status", "transformations": []}]}
    }
    assert Serde.to_dict(lineage.job_facets["sql"])["query"] == query
    # nothing appended: no extras, no datasets
    assert lineage_extras(query, desc, {**summary, "status": "up_to_date"}) == {}
