"""A Spark-free write step, for tests of the commit side on object storage only.

The pyspark wheel has no s3a/abfs filesystem classes, so Spark cannot write to the object-storage
servers these tests run. :func:`sparkfree_write` stands in for :func:`mvsink.write.job.run_write` in
``core.refresh.run_refresh(..., write=...)``: it computes ``desired - persisted`` with DuckDB over
delta-rs reads of the sources (at the versions mint chose) and of the view's table, and stages the
corrections through the storage layer (manifest, Parquet file, Delta stats), exactly where and how the
Spark job would. Always a full diff (mode ``full``); path sources only; no checks.
"""

from __future__ import annotations

import dataclasses
import time
import uuid

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from mvsink import location
from mvsink.columns import DIFF, TIME
from mvsink.core import storage
from mvsink.core.batch import BatchDescription, WriteReport
from mvsink.core.schema import encode_schema
from mvsink.core.staging import batch_location, discard_batch, staged_files, write_intent, write_manifest
from mvsink.core.table import ViewTable
from mvsink.definitions.view import ViewDefinition

CALLS: list[str] = []  # batch ids this write step was called for (the no-change shortcut must not call it)


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def sparkfree_write(view: ViewDefinition, desc: BatchDescription) -> WriteReport:
    """Compute and stage the corrections of ``desc`` without Spark (see the module docstring)."""
    from deltalake import DeltaTable

    CALLS.append(desc.batch_id)
    t0 = time.monotonic()
    table = ViewTable.open_path(desc.target, view.name, check=False)
    fr = table.frontier
    con = duckdb.connect()
    for s in desc.sources:
        assert s.kind == "path" and s.path is not None, "the Spark-free write step reads path sources only"
        dt = DeltaTable(s.path, version=s.version, storage_options=storage.delta_options(s.path))
        con.register(s.name, pa.table(dt.to_pyarrow_table()))
    desired = con.sql(view.query).to_arrow_table()
    cols = desired.column_names
    if table.exists:
        schema = table.arrow_schema()
        con.register("persisted_updates", table.updates())
    else:
        fields = [pa.field(f.name, f.type, nullable=True) for f in desired.schema]
        schema = pa.schema([*fields, pa.field(TIME, pa.int64()), pa.field(DIFF, pa.int64())])
        con.register("persisted_updates", schema.empty_table())
    head = WriteReport(
        view=view.name,
        batch_id=desc.batch_id,
        lower=desc.lower,
        upper=desc.upper,
        status="empty",
        read_version=fr.version,
        table_upper=fr.upper,
        schema=encode_schema(schema),
        mode="full",
        mode_reason="the Spark-free test write step always diffs in full",
    )
    if fr.upper > desc.lower:
        return dataclasses.replace(head, status="stale", seconds=time.monotonic() - t0)
    con.register("desired", desired)
    c = ", ".join(_q(x) for x in cols)
    corr = con.sql(
        f"SELECT {c}, CAST({desc.time} AS BIGINT) AS {TIME}, CAST(sum(d) AS BIGINT) AS {DIFF} FROM ("
        f"  SELECT {c}, 1 AS d FROM desired"
        f"  UNION ALL SELECT {c}, -{DIFF} AS d FROM persisted_updates WHERE {TIME} < {desc.lower}"
        f") GROUP BY ALL HAVING sum(d) <> 0"
    ).to_arrow_table()
    corr = corr.cast(schema)
    diffs = corr.column(DIFF).to_pylist()
    added, retracted = sum(d for d in diffs if d > 0), -sum(d for d in diffs if d < 0)
    if desc.dry_run:
        return dataclasses.replace(head, status="dry_run", rows_added=added, rows_retracted=retracted)
    if corr.num_rows == 0:
        return dataclasses.replace(head, seconds=time.monotonic() - t0)
    write_intent(desc.target, desc.batch_id)
    folder = batch_location(desc.target, desc.batch_id)
    sink = pa.BufferOutputStream()
    pq.write_table(corr, sink)
    storage.write_bytes(
        location.joinpath(folder, f"part-00000-{uuid.uuid4().hex}.parquet"), sink.getvalue().to_pybytes()
    )
    files = staged_files(desc.target, desc.batch_id)
    report = dataclasses.replace(
        head,
        status="staged",
        rows_added=added,
        rows_retracted=retracted,
        bytes=sum(f.size for f in files),
        files=tuple(files),
        seconds=time.monotonic() - t0,
    )
    if ViewTable.open_path(desc.target, view.name, check=False).frontier.upper > desc.lower:
        discard_batch(desc.target, desc.batch_id)  # went stale while staging, as the Spark job checks
        return dataclasses.replace(head, status="stale", seconds=time.monotonic() - t0)
    write_manifest(desc.target, report)
    return report
