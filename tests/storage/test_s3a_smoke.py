"""SMOKE TEST (issue 13, acceptance 2): the Spark side of a refresh on ``s3a://``, with mismatched jars.

The source and the view's table live on SeaweedFS as ``s3://`` locations, configured only through the
standard ``AWS_*`` variables. Each refresh's write step is real Spark in a spark-submit subprocess (the
runner the CLI and the DAG use; the test session's shared in-process Spark session is not touched): it
reads the source's Delta snapshot, its change files and the view's own table through ``s3a://`` and
stages the corrections' Parquet through ``s3a://``; mvsink lists the staged files, reads their footers
and commits them (the commit side, unchanged) through delta-rs and pyarrow on ``s3://``.

The only s3a connector jars reachable on these machines are ``hadoop-aws-3.3.1.jar`` and
``aws-java-sdk-bundle-1.11.901.jar`` from the PyPI sdist ``sagemaker-pyspark`` 1.4.5
(``tests/support/s3ajars.py``, fetched once into ``.storage-servers/jars/``), loaded into pyspark's
Hadoop 3.5 client. Hadoop does not support that mix.

What it proves: mvsink's Spark side (read_delta, the incremental path's change-file reads, the
staging write) works on ``s3a://`` URIs with the ``spark.hadoop.fs.s3a.*`` settings mvsink derives from
the ``AWS_*`` variables (endpoint, path-style access, SSL off, region), and the result is exact
(the DuckDB oracle) and committed by mvsink's appends.

What it does not prove: that any supported Hadoop/hadoop-aws/AWS SDK combination works (the jars are
3.3.1 inside 3.5; production clusters must bring hadoop-aws matching their Hadoop and its AWS SDK); the
credentials provider mvsink derives (it names the AWS SDK v2 class of Hadoop 3.4+; the 3.3.1 jars need the
SDK v1 class, which this test sets); Hadoop 3.5's "60s"/"64m" defaults that 3.3.1 cannot parse are
overridden here with plain numbers, a workaround no real cluster needs; a Spark cluster (local master
only); Azure or GCS.
"""

from __future__ import annotations

import json
import random
import time
import uuid

import pyarrow as pa
import pytest

from mvsink.core import storage
from mvsink.core.deltalog import read_commit
from mvsink.core.refresh import run_refresh
from mvsink.definitions.catalog import Catalog
from mvsink.readers.arrow import read_view
from mvsink.spark.conf import spark_conf_for
from mvsink.spark.runners import write_step
from tests.support.data import PROJECT, make_orders
from tests.support.objectstores import delta_table, next_second, now_ms, operations, oracle, staged_leftovers
from tests.support.oracle import multiset
from tests.support.s3ajars import s3a_jars
from tests.support.viewfiles import write_view

pytestmark = [pytest.mark.storage, pytest.mark.smoke]

# Hadoop 3.5's core-default.xml writes these as durations ("60s", "24h"); hadoop-aws 3.3.1 reads them as
# plain numbers (NumberFormatException: "60s"). Milliseconds, except keepalivetime and purge.age (seconds).
HADOOP_331_NUMBERS = {
    "fs.s3a.connection.timeout": "200000",
    "fs.s3a.connection.establish.timeout": "5000",
    "fs.s3a.connection.request.timeout": "0",
    "fs.s3a.connection.acquisition.timeout": "60000",
    "fs.s3a.connection.idle.time": "60000",
    "fs.s3a.connection.ttl": "300000",
    "fs.s3a.threads.keepalivetime": "60",
    "fs.s3a.multipart.purge.age": "86400",
}
# the SDK v1 class of the 3.3.1 jars (mvsink derives the SDK v2 class of Hadoop 3.4+)
V1_ENV_CREDENTIALS = "com.amazonaws.auth.EnvironmentVariableCredentialsProvider"


def smoke_conf() -> dict[str, str]:
    """The spark-submit settings that load the mismatched jars into the write step's own Spark."""
    jars = s3a_jars()
    return {
        "spark.jars": ",".join(str(p) for p in jars),
        **{f"spark.hadoop.{k}": v for k, v in HADOOP_331_NUMBERS.items()},
        "spark.hadoop.fs.s3a.aws.credentials.provider": V1_ENV_CREDENTIALS,
        "spark.driver.memory": "768m",
    }


def _partitioned_write(uri: str, table: pa.Table) -> None:
    """Append to the source, partitioned by status (read_delta's basePath and the change files'
    partition values are then on the s3a path too), with the change data feed on (a delete then writes
    change files, which the incremental write step reads through s3a)."""
    from deltalake import write_deltalake

    write_deltalake(
        uri,
        table,
        mode="append",
        partition_by=["status"],
        configuration={"delta.enableChangeDataFeed": "true"},
        storage_options=storage.delta_options(uri),
    )


def _spark_files(target: str, batch_id: str | None) -> list[str]:
    """The add-action paths of the append of ``batch_id``: files Spark's Parquet writer named."""
    assert batch_id
    paths = [p.as_py() for p in pa.table(delta_table(target).get_add_actions()).column("path")]
    return [p for p in paths if p.startswith(f"batches/{batch_id}/")]


def test_spark_reads_and_stages_through_s3a(seaweedfs, monkeypatch, tmp_path):
    from tests.storage.conftest import use_store

    conf = smoke_conf()  # before the clock starts: a first run downloads the jars (once per machine)
    use_store(monkeypatch, seaweedfs)
    monkeypatch.setenv("MVSINK_DATA_ROOT", str(tmp_path))
    # tiny tables: a delete rewrites most of a source's bytes; let the size guard pass (the write step
    # inherits the variable) so that the second refresh takes the incremental path
    monkeypatch.setenv("MVSINK_INCREMENTAL_MAX_FRACTION", "2")
    prefix = seaweedfs.uri(f"s3a-smoke-{uuid.uuid4().hex[:8]}")
    orders = f"{prefix}/orders"
    rng = random.Random(1313)
    for start in (0, 40, 80):
        _partitioned_write(orders, make_orders(rng, start, 40))
    views = tmp_path / "views"
    views.mkdir()
    write_view(views, "proj", query=PROJECT, sources={"orders": orders}, target=f"{prefix}/views/proj", as_of=now_ms())
    catalog = Catalog(views)
    view = catalog.get("proj")

    # what mvsink itself derives for Spark from the AWS_* variables, and what the smoke test adds
    derived = spark_conf_for(view)
    endpoint = seaweedfs.env["AWS_ENDPOINT_URL"]
    assert derived["spark.hadoop.fs.s3a.endpoint"] == endpoint
    assert derived["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert derived["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "false"
    assert not any(v == seaweedfs.env["AWS_SECRET_ACCESS_KEY"] for v in derived.values())
    assert storage.spark_uri(view.target).startswith("s3a://lake/")
    write = write_step(runner="submit", master="local[1]", spark_conf=conf)

    timings: dict[str, float] = {}
    # refresh 1: a full diff; Spark reads the source's files and stages the view's through s3a
    r1 = now_ms()
    t = time.monotonic()
    res = run_refresh(view, r1, write=write, catalog=catalog, run_id="smoke-1")
    timings["refresh 1"] = time.monotonic() - t
    assert res.status == "appended" and res.mode == "full" and res.files > 0 and res.rows_added > 0, res
    assert operations(view.target) == ["create", "bump", "append"]
    assert multiset(read_view(view, as_of=r1)) == oracle(PROJECT, {"orders": orders}, r1)
    files = _spark_files(view.target, res.batch_id)
    assert files and all(f.split("/")[-1].startswith("part-") and f.endswith(".parquet") for f in files), files
    assert staged_leftovers(view.target) == []

    # refresh 2 after inserts and deletes: incremental, Spark reads the change files and the view's
    # own table through s3a
    next_second()
    _partitioned_write(orders, make_orders(rng, 120, 10))
    delta_table(orders).delete("id < 8")
    deleted = read_commit(orders, int(delta_table(orders).version()))
    assert deleted is not None and deleted.cdc, "the delete should have written change data files"
    r2 = now_ms()
    t = time.monotonic()
    res2 = run_refresh(view, r2, write=write, catalog=catalog, run_id="smoke-2")
    timings["refresh 2"] = time.monotonic() - t
    assert res2.status == "appended" and res2.rows_added + res2.rows_retracted > 0, res2
    hist = sorted(delta_table(view.target).history(), key=lambda h: h["version"])
    assert res2.mode == "incremental", hist[-1].get("mvsink.mode_reason")
    assert operations(view.target) == ["create", "bump", "append", "append"]
    assert [json.loads(h["mvsink.batch_id"]) for h in hist if "mvsink.batch_id" in h][-2:] == [
        res.batch_id,
        res2.batch_id,
    ]
    assert multiset(read_view(view, as_of=r2)) == oracle(PROJECT, {"orders": orders}, r2)
    assert multiset(read_view(view, as_of=r1)) == oracle(PROJECT, {"orders": orders}, r1)
    assert _spark_files(view.target, res2.batch_id)
    assert staged_leftovers(view.target) == []
    print(f"s3a smoke: {', '.join(f'{k} {v:.1f} s' for k, v in timings.items())}")


def test_without_the_jars_the_write_step_names_the_missing_connector(seaweedfs, monkeypatch, tmp_path):
    """The negative control: the same write step without spark.jars fails, and says which jars are missing."""
    from mvsink.exceptions import SparkJobError
    from tests.storage.conftest import use_store

    conf = {k: v for k, v in smoke_conf().items() if k != "spark.jars"}
    use_store(monkeypatch, seaweedfs)
    monkeypatch.setenv("MVSINK_DATA_ROOT", str(tmp_path))
    prefix = seaweedfs.uri(f"s3a-nojars-{uuid.uuid4().hex[:8]}")
    orders = f"{prefix}/orders"
    _partitioned_write(orders, make_orders(random.Random(5), 0, 10))
    views = tmp_path / "views"
    views.mkdir()
    write_view(views, "proj", query=PROJECT, sources={"orders": orders}, target=f"{prefix}/views/proj", as_of=now_ms())
    catalog = Catalog(views)
    write = write_step(runner="submit", master="local[1]", spark_conf=conf)
    with pytest.raises(SparkJobError) as err:
        run_refresh(catalog.get("proj"), now_ms(), write=write, catalog=catalog, run_id="nojars")
    msg = str(err.value)
    assert "org.apache.hadoop.fs.s3a.S3AFileSystem" in msg and "hadoop-aws" in msg and "Fix:" in msg, msg
