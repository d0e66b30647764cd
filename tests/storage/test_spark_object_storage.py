"""Spark on object storage with matching connector jars (issue 21, item 5).

Hadoop 3.5.0's hadoop-aws (with the AWS SDK v2 bundle) and hadoop-azure, as pyspark 4.2.0's own Hadoop, from
``.jars/``. Sources and targets are on SeaweedFS (``s3a://``) and Azurite (``abfs://`` over its Blob endpoint:
Azurite serves no DFS API, and Hadoop 3.5 has no WASB driver left), reached with the settings mvsink derives
from the standard variables, credentials passed explicitly (secrets through a 0600 properties file for
spark-submit, as session settings in a running session). Each refresh goes through Spark: in this process,
through spark-submit, and through a Spark Connect server started once for the module; after several rounds
of source changes the view is checked against the DuckDB oracle over the sources' snapshots (read by
delta-rs), with the refresh mode in the commit info and the commit log.
"""

from __future__ import annotations

import json
import random
import uuid
from types import SimpleNamespace

import pyarrow as pa
import pytest

from mvsink import location
from mvsink.core import sparklocation
from mvsink.core.refresh import run_refresh
from mvsink.definitions.catalog import Catalog
from mvsink.exceptions import SparkJobError
from mvsink.readers.arrow import read_view
from mvsink.spark.conf import apply_storage_conf, storage_conf
from mvsink.write.runners import write_step
from tests.storage.conftest import STORE_VARS
from tests.support.cli import run_cli_process
from tests.support.data import make_customers, make_orders
from tests.support.objectstores import (
    Store,
    delta_table,
    next_second,
    now_ms,
    operations,
    oracle,
    staged_leftovers,
    write_source,
)
from tests.support.oracle import multiset
from tests.support.viewfiles import write_view

pytestmark = pytest.mark.storage

# Orders (on one store) joined (inner: linear in both, so refreshes after the first are incremental) to customers (on the other): both sources and the target cross stores.
QUERY = (
    "SELECT o.id, o.status, o.qty, c.region FROM orders o JOIN customers c ON o.cust_id = c.id "
    "WHERE o.qty > 1 OR o.qty IS NULL"
)


@pytest.fixture
def stores(seaweedfs: Store, azurite: Store, monkeypatch, tmp_path) -> dict[str, Store]:
    """Both stores' standard variables at once (they do not overlap), both buckets allowed."""
    for name in STORE_VARS:
        monkeypatch.delenv(name, raising=False)
    for s in (seaweedfs, azurite):
        for k, v in s.env.items():
            monkeypatch.setenv(k, v)
    monkeypatch.setenv("MVSINK_ALLOWED_LOCATIONS", f"{seaweedfs.root}/,{azurite.root}/")
    monkeypatch.setenv("MVSINK_DATA_ROOT", str(tmp_path))
    monkeypatch.delenv("MVSINK_FAIL_POINTS", raising=False)
    # tiny tables: a delete rewrites most of a source's bytes; let the size guard pass (spark-submit inherits it)
    monkeypatch.setenv("MVSINK_INCREMENTAL_MAX_FRACTION", "100")
    return {"seaweedfs": seaweedfs, "azurite": azurite}


def _view(tmp_path, orders: str, customers: str, target: str):
    views = tmp_path / "views"
    views.mkdir(exist_ok=True)
    write_view(
        views, "xv", query=QUERY, sources={"orders": orders, "customers": customers}, target=target, as_of=now_ms()
    )
    catalog = Catalog(views)
    return catalog, catalog.get("xv")


def _last_commit(target: str) -> dict:
    return max(delta_table(target).history(), key=lambda h: h["version"])


@pytest.mark.parametrize("runner", ["inprocess", "submit", "connect"])
@pytest.mark.parametrize("target_store", ["seaweedfs", "azurite"])
def test_refreshes_through_spark_across_stores_match_the_oracle(runner, target_store, stores, tmp_path, request):
    other = "azurite" if target_store == "seaweedfs" else "seaweedfs"
    run = uuid.uuid4().hex[:8]
    orders = stores[target_store].uri(f"sp-{run}", "orders")
    customers = stores[other].uri(f"sp-{run}", "customers")
    target = stores[target_store].uri(f"sp-{run}", "views", "xv")
    rng = random.Random(2100 + len(runner) + len(target_store))
    write_source(orders, make_orders(rng, 0, 40))
    write_source(customers, make_customers(rng))
    catalog, view = _view(tmp_path, orders, customers, target)
    remote = request.getfixturevalue("connect_url") if runner == "connect" else None
    write = write_step(runner=runner, master="local[2]") if remote is None else None  # type: ignore[arg-type]
    sources = {"orders": orders, "customers": customers}

    expected_ops = ["create", "bump"]
    batches = []
    for k in range(3):
        if k == 1:  # inserts on one store, a customer's region changed on the other
            next_second()
            write_source(orders, make_orders(rng, 100, 12))
            delta_table(customers).update({"region": "'ap'"}, predicate="id = 2")
        if k == 2:  # deletes and inserts
            next_second()
            delta_table(orders).delete("id % 4 = 0")
            write_source(orders, make_orders(rng, 200, 6))
        r = now_ms()
        if remote is not None:
            # a process of its own, as a CLI call or an Airflow task is: a Connect client cannot share a
            # process with the classic session the in-process tests keep in this one
            out = run_cli_process(
                catalog.views_dir, "refresh", "xv", "--at", str(r), "--remote", remote, "--json", timeout=300
            )
            res = SimpleNamespace(**json.loads(out.stdout))
        else:
            try:
                res = run_refresh(view, r, write=write, catalog=catalog, run_id=f"{runner}-{k}")
            except SparkJobError as exc:  # show what the job printed
                pytest.fail(f"{exc}\n{exc.output}")
        assert res.status == "appended" and res.rows_added + res.rows_retracted > 0, res
        assert res.mode == ("full" if k == 0 else "incremental"), (k, _last_commit(target).get("mvsink.mode_reason"))
        last = _last_commit(target)
        assert json.loads(last["mvsink.mode"]) == res.mode and json.loads(last["mvsink.batch_id"]) == res.batch_id
        expected_ops.append("append")
        batches.append(res.batch_id)
        assert operations(target) == expected_ops
        assert multiset(read_view(view, as_of=r)) == oracle(QUERY, sources, r), (runner, k)
        assert staged_leftovers(target) == []
    appended = [
        json.loads(h["mvsink.batch_id"])
        for h in sorted(delta_table(target).history(), key=lambda h: h["version"])
        if "mvsink.batch_id" in h
    ]
    assert appended[-3:] == batches
    # the appended files are the ones Spark's Parquet writer named in the batch folders
    paths = [p.as_py() for p in pa.table(delta_table(target).get_add_actions()).column("path")]
    assert any(p.startswith(f"batches/{batches[0]}/part-") and p.endswith(".parquet") for p in paths), paths


def test_plain_delta_loads_on_both_stores_with_the_derived_settings(stores, tmp_path):
    """What the Spark reader of sources does: ``spark.read.format("delta")`` (latest, and ``versionAsOf``) of
    ``s3a://`` and ``abfs://`` tables written by delta-rs, and a Delta write back, in a session whose only
    store settings are the ones mvsink derives."""
    from mvsink.write.runners import local_session

    run = uuid.uuid4().hex[:8]
    uris = {name: s.uri(f"plain-{run}", "t") for name, s in stores.items()}
    rng = random.Random(77)
    for uri in uris.values():
        write_source(uri, make_orders(rng, 0, 10))
        write_source(uri, make_orders(rng, 10, 5))
    _, view = _view(tmp_path, uris["seaweedfs"], uris["azurite"], stores["seaweedfs"].uri(f"plain-{run}", "v"))
    spark = local_session("local[2]", storage_conf(view))
    apply_storage_conf(spark, view)  # a session started earlier (another test's) gets them at run time
    for name, uri in uris.items():
        spark_uri = sparklocation.spark_uri(uri)
        assert spark_uri.split("://")[0] == {"seaweedfs": "s3a", "azurite": "abfs"}[name]
        latest = spark.read.format("delta").load(spark_uri)
        rows = sorted((r.id, r.status, r.qty) for r in latest.select("id", "status", "qty").collect())
        want = pa.table(delta_table(uri).to_pyarrow_table()).select(["id", "status", "qty"]).to_pylist()
        assert rows == sorted((w["id"], w["status"], w["qty"]) for w in want) and len(rows) == 15, name
        v0 = spark.read.format("delta").option("versionAsOf", 0).load(spark_uri)
        assert sorted(r.id for r in v0.select("id").collect()) == list(range(10)), name
        out = sparklocation.spark_uri(stores[name].uri(f"plain-{run}", "copy"))
        latest.where("id < 12").write.format("delta").mode("overwrite").save(out)
        assert spark.read.format("delta").load(out).count() == 12, name
        assert (
            delta_table(location.normalize(out) if name == "seaweedfs" else uris[name][: -len("t")] + "copy").version()
            == 0
        )
