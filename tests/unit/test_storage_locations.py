"""The storage layer's pure parts: locations, delta-rs options, Spark's view, allowed locations, view storage_options."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mvsink import location
from mvsink.core import sparklocation, storage
from mvsink.exceptions import StoreError, UnsafePathError, ViewDefinitionError
from tests.support.viewfiles import doc, parse

pytestmark = pytest.mark.unit

VARS = (
    *storage.S3_ENV,
    *storage.AZURE_ENV,
    *storage.GCS_ENV,
    "MVSINK_ALLOWED_LOCATIONS",
    "MVSINK_ALLOW_OUTSIDE_DATA_ROOT",
    "AZURITE_BLOB_STORAGE_URL",
)


@pytest.fixture
def clean(monkeypatch):
    for v in VARS:
        monkeypatch.delenv(v, raising=False)
    return monkeypatch


def test_locations_parse_and_join():
    assert location.parse("/data/t").is_local and location.parse("file:///data/t").key == "/data/t"
    s3 = location.parse("s3a://lake/views/t/")
    assert (s3.kind, s3.uri, s3.bucket, s3.key) == ("s3", "s3://lake/views/t", "lake", "views/t")
    az = location.parse("abfss://c@acct.dfs.core.windows.net/v/t")
    assert (az.kind, az.bucket, az.key, az.account) == ("azure", "c", "v/t", "acct")
    assert location.parse("gs://b/t").kind == "gcs"
    assert location.joinpath("s3://lake/t", "_mv_staging", "b.json") == "s3://lake/t/_mv_staging/b.json"
    assert location.joinpath("/data/t", "batches") == "/data/t/batches"
    with pytest.raises(StoreError, match="hdfs:// is not supported"):
        location.parse("hdfs://nn/t")


def test_delta_options_from_the_standard_variables(clean):
    assert storage.delta_options("/data/t") is None
    clean.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:8333")
    clean.setenv("AWS_ACCESS_KEY_ID", "id")
    clean.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    clean.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    clean.setenv("AZURE_STORAGE_ACCOUNT_NAME", "not-for-s3")
    opts = storage.delta_options("s3://lake/t")
    assert opts == {
        "AWS_ENDPOINT_URL": "http://127.0.0.1:8333",
        "AWS_ACCESS_KEY_ID": "id",
        "AWS_SECRET_ACCESS_KEY": "secret",
        "AWS_REGION": "eu-west-1",
        "AWS_ALLOW_HTTP": "true",  # an http:// endpoint needs it
    }
    clean.setenv("AZURE_STORAGE_USE_EMULATOR", "true")
    az = storage.delta_options("az://c/t")
    assert az is not None and az["AZURE_STORAGE_ACCOUNT_NAME"] == "not-for-s3" and "AWS_REGION" not in az


def test_a_location_carries_its_options_and_keeps_them_when_joined(clean):
    clean.setenv("AWS_REGION", "us-east-1")
    clean.setenv("AWS_ACCESS_KEY_ID", "env-id")
    loc = location.parse("s3a://other-lake/views", {"aws_region": "eu-central-1"})
    assert storage.delta_options(loc) == {"AWS_REGION": "eu-central-1", "AWS_ACCESS_KEY_ID": "env-id"}
    child = location.joinpath(loc, "t", "_delta_log")
    assert isinstance(child, location.Location) and child.uri == "s3://other-lake/views/t/_delta_log"
    assert child.key == "views/t/_delta_log" and storage.delta_options(child)["AWS_REGION"] == "eu-central-1"
    assert storage.delta_options("s3://other-lake/views/t")["AWS_REGION"] == "us-east-1"  # a plain URI: env only
    assert child.origin("AWS_REGION") == "storage_options.AWS_REGION in the view file"
    assert child.origin("AWS_ACCESS_KEY_ID") == "AWS_ACCESS_KEY_ID"
    clean.setenv("AWS_SECRET_ACCESS_KEY", "do-not-leak")
    assert "do-not-leak" not in repr(location.parse("s3://lake/t"))  # a Location may be logged


def test_two_views_on_one_bucket_reach_it_with_their_own_options(clean):
    """Views with different storage_options for the same bucket (and the same source) in one process: every
    path derived from a view's locations (a file its log names, a batch's folder and manifest, a staged file)
    carries that view's options, and so do the pyarrow filesystems reads of them get."""
    from mvsink.core import deltalog, staging

    clean.setenv("AWS_REGION", "us-east-1")
    clean.setenv("MVSINK_ALLOWED_LOCATIONS", "s3://one-lake/")

    def view(name: str, region: str):
        return parse(
            doc(
                name=name,
                target=f"s3://one-lake/views/{name}",
                sources="{orders: s3://one-lake/src/orders}",
                storage_options=f"{{AWS_REGION: {region}}}",
            )
        )

    a, b = view("a", "eu-central-1"), view("b", "ap-south-1")
    for v, region in ((a, "eu-central-1"), (b, "ap-south-1")):
        orders = v.source("orders").path
        derived = [
            deltalog.absolute_path(orders, "part-0.parquet"),
            deltalog.absolute_path(orders, "s3a://one-lake/src/orders/p%3D1/part-1.parquet"),
            orders.file("s3://one-lake/src/orders/_change_data/cdc-0.parquet"),
            staging.batch_location(v.target, "b1").joinpath("part-0.parquet"),
            staging.manifest_location(v.target, "b1"),
        ]
        for loc in derived:
            assert storage.delta_options(loc)["AWS_REGION"] == region, loc
            fs, _ = storage.filesystem(loc)
            assert fs.region == region, loc
    # the same file, reached by either view: each with its own options
    fa = deltalog.absolute_path(a.source("orders").path, "part-0.parquet")
    fb = deltalog.absolute_path(b.source("orders").path, "part-0.parquet")
    assert fa.uri == fb.uri and fa != fb
    assert storage.filesystem(fa)[0] is not storage.filesystem(fb)[0]
    # a file a table names outside its location, and a plain URI: the environment's options only
    outside = a.target.file("s3://one-lake/elsewhere/part-0.parquet")
    assert storage.delta_options(outside)["AWS_REGION"] == "us-east-1"
    assert storage.delta_options("s3://one-lake/views/a/_delta_log")["AWS_REGION"] == "us-east-1"


def test_spark_view_of_a_location(clean):
    clean.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:8333")
    clean.setenv("AWS_ACCESS_KEY_ID", "id")
    clean.setenv("AWS_SECRET_ACCESS_KEY", "do-not-leak")
    clean.setenv("AWS_REGION", "us-east-1")
    assert sparklocation.spark_uri("s3://lake/t/part-0.parquet") == "s3a://lake/t/part-0.parquet"
    assert sparklocation.spark_uri("/data/t") == "/data/t" and sparklocation.spark_uri("gs://b/t") == "gs://b/t"
    conf = sparklocation.spark_hadoop_conf("s3://lake/t")
    b = "spark.hadoop.fs.s3a.bucket.lake."  # scoped to the bucket: views on other stores share a session
    assert conf[b + "endpoint"] == "http://127.0.0.1:8333"
    assert conf[b + "path.style.access"] == "true"
    assert conf[b + "connection.ssl.enabled"] == "false"
    assert conf[b + "endpoint.region"] == "us-east-1"
    # credentials explicitly, and only under names that split_secret_conf keeps off command lines
    assert conf[b + "access.key"] == "id" and conf[b + "secret.key"] == "do-not-leak"
    assert conf[b + "aws.credentials.provider"] == "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
    from mvsink.spark.conf import split_secret_conf

    public, secret = split_secret_conf(conf)
    assert {b + "access.key", b + "secret.key"} <= set(secret) and "do-not-leak" not in str(public)
    assert sparklocation.spark_hadoop_conf("/data/t") == {}
    clean.setenv("AZURE_STORAGE_ACCOUNT_NAME", "acct")
    assert sparklocation.spark_uri("az://c/v/t") == "abfss://c@acct.dfs.core.windows.net/v/t"
    clean.setenv("AZURE_STORAGE_ACCOUNT_KEY", "a2V5LWRvLW5vdC1sZWFr")
    clean.setenv("AZURE_STORAGE_USE_EMULATOR", "true")
    clean.setenv("AZURITE_BLOB_STORAGE_URL", "http://127.0.0.1:10123")
    assert sparklocation.spark_uri("az://c/v/t") == "abfs://c@acct.dfs.core.windows.net/v/t"  # Azurite: plain http
    az = sparklocation.spark_hadoop_conf("az://c/v/t")
    host = "acct.dfs.core.windows.net"
    assert az[f"spark.hadoop.fs.azure.account.key.{host}"] == "a2V5LWRvLW5vdC1sZWFr"
    assert az[f"spark.hadoop.fs.azure.abfs.endpoint.{host}"] == "127.0.0.1:10123"
    assert az[f"spark.hadoop.fs.azure.fns.account.service.type.{host}"] == "BLOB"
    assert az["spark.hadoop.fs.azure.always.use.https"] == "false"
    assert set(split_secret_conf(az)[1]) == {f"spark.hadoop.fs.azure.account.key.{host}"}
    for name in ("AZURE_STORAGE_ACCOUNT_KEY", "AZURE_STORAGE_USE_EMULATOR", "AZURITE_BLOB_STORAGE_URL"):
        clean.delenv(name)
    clean.delenv("AZURE_STORAGE_ACCOUNT_NAME")
    with pytest.raises(StoreError, match="AZURE_STORAGE_ACCOUNT_NAME"):
        sparklocation.spark_uri("az://c/v/t")


def test_object_storage_locations_must_be_allowed(clean):
    text = doc(target="s3a://lake/views/v", sources="{orders: s3://lake/src/orders}")
    with pytest.raises(UnsafePathError, match="MVSINK_ALLOWED_LOCATIONS") as err:
        parse(text)
    assert "not under an allowed location" in str(err.value)
    clean.setenv("MVSINK_ALLOWED_LOCATIONS", "s3://lake/")
    v = parse(text)
    assert v.target.uri == "s3://lake/views/v" and v.source("orders").path.uri == "s3://lake/src/orders"
    clean.setenv("MVSINK_ALLOWED_LOCATIONS", "s3://lake/views")
    with pytest.raises(UnsafePathError, match="sources.orders"):
        parse(text)  # the source is outside the allowed prefix
    with pytest.raises(UnsafePathError, match="plain location"):
        parse(doc(target="s3://lake/views/../other", sources="{orders: s3://lake/views/o}"))
    with pytest.raises(UnsafePathError, match="hdfs://"):
        parse(doc(target="hdfs://nn/v", sources="{orders: s3://lake/views/o}"))


def test_local_paths_keep_the_data_root_rule_and_may_use_allowed_folders(clean, tmp_path):
    shared = tmp_path / "shared"
    text = doc(target=str(shared / "v"), sources="{orders: orders}")
    with pytest.raises(UnsafePathError, match="outside the data root"):
        parse(text, root=tmp_path / "root")
    clean.setenv("MVSINK_ALLOWED_LOCATIONS", f"s3://lake/,{shared}")
    assert parse(text, root=tmp_path / "root").target.uri == str(shared.resolve() / "v")
    assert parse(
        doc(target=f"file://{shared}/w", sources="{orders: orders}"), root=tmp_path / "root"
    ).target.uri == str(Path(shared).resolve() / "w")


def test_view_storage_options_take_secrets_only_by_reference(clean):
    clean.setenv("MVSINK_ALLOWED_LOCATIONS", "s3://lake/")
    base = dict(target="s3://lake/views/v", sources="{orders: s3://lake/src/orders}")
    v = parse(doc(**base, storage_options="{AWS_REGION: eu-west-1, AWS_SECRET_ACCESS_KEY: {env: LAKE_SECRET}}"))
    assert v.storage_options == {"AWS_REGION": ("value", "eu-west-1"), "AWS_SECRET_ACCESS_KEY": ("env", "LAKE_SECRET")}
    with pytest.raises(ViewDefinitionError, match="LAKE_SECRET"):
        v.resolved_storage_options()
    clean.setenv("LAKE_SECRET", "s3cr3t-value")
    assert v.resolved_storage_options()["AWS_SECRET_ACCESS_KEY"] == "s3cr3t-value"
    with pytest.raises(ViewDefinitionError) as err:
        parse(doc(**base, storage_options="{AWS_SECRET_ACCESS_KEY: hunter2-inline}"))
    msg = str(err.value)
    assert "storage_options.AWS_SECRET_ACCESS_KEY" in msg and "{env: VARIABLE}" in msg
    assert "hunter2-inline" not in msg  # the secret is never echoed
    with pytest.raises(ViewDefinitionError, match="reference must be"):
        parse(doc(**base, storage_options="{AZURE_STORAGE_ACCOUNT_KEY: {vault: x}}"))


def test_commit_times_prefer_in_commit_timestamps(tmp_path):
    """A table that writes in-commit timestamps is time-travelled by them, not by its files' times."""
    import json

    import pyarrow as pa
    from deltalake import write_deltalake

    from mvsink.core import deltalog

    t = str(tmp_path / "t")
    for i in range(3):
        write_deltalake(t, pa.table({"a": [i]}), mode="append")
        deltalog.set_commit_time(t, 1_000_000 + i)  # file times that must lose to the ICTs
    assert deltalog.commit_times(t) == {0: 1_000_000, 1: 1_000_001, 2: 1_000_002}
    log_dir = tmp_path / "t" / "_delta_log"
    for v in range(3):
        f = log_dir / f"{v:020d}.json"
        lines = f.read_text().splitlines()
        info = next(json.loads(x) for x in lines if "commitInfo" in x)
        info["commitInfo"]["inCommitTimestamp"] = 5_000_000 + 10 * v
        rest = [x for x in lines if "commitInfo" not in x]
        f.write_text("\n".join([json.dumps(info), *rest]) + "\n")  # ICT tables put commitInfo first
    deltalog._ICT_CACHE.clear()
    assert deltalog.commit_times(t) == {0: 5_000_000, 1: 5_000_010, 2: 5_000_020}
    commit = deltalog.read_commit(t, 1)
    assert commit is not None and commit.timestamp == 5_000_010


def test_a_write_on_object_storage_gets_the_s3a_settings(clean):
    from mvsink.spark.conf import spark_conf_for, split_secret_conf

    clean.setenv("MVSINK_ALLOWED_LOCATIONS", "s3://lake/")
    clean.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:8333")
    clean.setenv("AWS_SECRET_ACCESS_KEY", "do-not-leak")
    v = parse(doc(target="s3://lake/views/v", sources="{orders: s3://lake/src/orders}"))
    clean.setenv("AWS_ACCESS_KEY_ID", "the-id")
    conf = spark_conf_for(v, {"spark.hadoop.fs.s3a.path.style.access": "false"})
    assert conf["spark.hadoop.fs.s3a.bucket.lake.endpoint"] == "http://127.0.0.1:8333"
    # explicit settings still win: the derived bucket-scoped key would override the global one in Hadoop
    assert conf["spark.hadoop.fs.s3a.path.style.access"] == "false"
    assert "spark.hadoop.fs.s3a.bucket.lake.path.style.access" not in conf
    public, secret = split_secret_conf(conf)
    assert (
        "do-not-leak" not in public.values() and secret["spark.hadoop.fs.s3a.bucket.lake.secret.key"] == "do-not-leak"
    )
    local = spark_conf_for(parse(doc()))
    assert not any(k.startswith("spark.hadoop.fs.s3a") for k in local)


def test_a_location_travels_in_the_batch_description_json_without_secret_values(clean):
    from mvsink.core.batch import BatchDescription, SourceRead

    clean.setenv("MVSINK_ALLOWED_LOCATIONS", "s3://lake/")
    clean.setenv("LAKE_SECRET", "s3cr3t-value")
    v = parse(
        doc(
            target="s3://lake/views/v",
            sources="{orders: s3://lake/src/orders}",
            storage_options="{AWS_REGION: eu-west-1, AWS_SECRET_ACCESS_KEY: {env: LAKE_SECRET}}",
        )
    )
    assert v.target.from_view == {"AWS_REGION", "AWS_SECRET_ACCESS_KEY"} and "s3cr3t" not in repr(v)
    orders = v.source("orders").path
    assert orders is not None
    desc = BatchDescription(
        view=v.name,
        target=v.target,
        lower=0,
        upper=1,
        refresh_time=1,
        table_version=-1,
        sources=(SourceRead(name="orders", kind="path", path=orders, version=0),),
        run_id="r",
        batch_id="b",
        definition=v.definition_hash(),
    )
    text = desc.to_json()
    assert "s3cr3t-value" not in text and "LAKE_SECRET" in text  # a reference, never the value
    back = BatchDescription.from_json(text)
    assert back == desc
    assert storage.delta_options(back.target)["AWS_SECRET_ACCESS_KEY"] == "s3cr3t-value"  # resolved where used
    assert storage.delta_options(back.sources[0].path)["AWS_REGION"] == "eu-west-1"
    # a location without view options stays a plain string in the JSON (the format of earlier descriptions)
    plain = BatchDescription.from_dict({**json.loads(text), "target": "s3://lake/views/v"})
    assert plain.target.uri == "s3://lake/views/v" and not plain.target.storage_options


@pytest.mark.parametrize("scheme", ["adl", "azure", "abfs", "abfss", "az", "s3a", "gs"])
def test_a_view_file_takes_every_scheme_the_storage_layer_reaches(clean, scheme):
    clean.setenv("MVSINK_ALLOWED_LOCATIONS", f"{scheme}://lake/")
    v = parse(doc(target=f"{scheme}://lake/views/v", sources=f"{{orders: {scheme}://lake/src/o}}"))
    assert v.target == location.parse(f"{scheme}://lake/views/v") and not v.target.is_local


def test_a_local_listing_and_delete_are_pyarrows_without_pyarrow(tmp_path):
    """A local folder is listed and a local file deleted with ``os`` (a refresh with nothing to write then imports
    no pyarrow): the same names, kinds, sizes and times as pyarrow's local filesystem gives; a missing folder lists
    empty; a missing file deletes quietly."""
    import pyarrow.fs as pafs

    (tmp_path / "sub").mkdir()
    (tmp_path / "a.parquet").write_bytes(b"x" * 123)
    (tmp_path / ".hidden.json").write_text("{}")
    (tmp_path / "sub" / "inner").write_text("not listed")
    got = sorted(storage.list_dir(str(tmp_path)), key=lambda e: e.name)
    infos = pafs.LocalFileSystem().get_file_info(pafs.FileSelector(str(tmp_path), recursive=False))
    want = list(
        storage.Entry(
            i.base_name,
            i.type == pafs.FileType.Directory,
            int(i.size or 0) if i.type != pafs.FileType.Directory else 0,
            (i.mtime_ns or 0) // 1_000_000,
        )
        for i in infos
    )
    want.sort(key=lambda e: e.name)
    assert got == want and [e.name for e in got] == [".hidden.json", "a.parquet", "sub"]
    assert storage.list_dir(str(tmp_path / "missing")) == []
    storage.delete_file(str(tmp_path / "a.parquet"))
    storage.delete_file(str(tmp_path / "a.parquet"))  # (gone: nothing to do)
    assert sorted(e.name for e in storage.list_dir(str(tmp_path))) == [".hidden.json", "sub"]


def test_a_local_read_is_pyarrows_without_pyarrow(tmp_path):
    """A local file is read with ``open`` (a refresh without Spark reads its plan facts so): the same bytes as
    pyarrow's local filesystem reads; a missing file, or one under a missing folder, reads None."""
    import pyarrow.fs as pafs

    (tmp_path / "f.json").write_bytes(b'{"a": 1}\n\xc3\xa9')
    with pafs.LocalFileSystem().open_input_stream(str(tmp_path / "f.json")) as f:
        assert storage.read_bytes(str(tmp_path / "f.json")) == bytes(f.read())
    assert storage.read_text(str(tmp_path / "f.json")) == '{"a": 1}\né'
    assert storage.read_bytes(str(tmp_path / "missing.json")) is None
    assert storage.read_bytes(str(tmp_path / "gone" / "x.json")) is None
    assert storage.read_bytes(str(tmp_path / "f.json" / "x")) is None  # (a file where a folder would be)
