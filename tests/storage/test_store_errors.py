"""Errors from object storage, as the command line reports them (issue 21, item 6).

A missing bucket or container and credentials the store refuses are the user's to fix: bad input (exit 2,
no Airflow retry) with a message that names the bucket, or the variable or view option to correct, and
never a secret. ``mvsink status`` piped into a reader that stops early ends quietly.
"""

from __future__ import annotations

import random
import subprocess
import uuid

import pytest

from mvsink.exceptions import MissingBucketError, StoreAccessError
from tests.storage.conftest import use_store
from tests.support.cli import CLI, run_cli_process
from tests.support.data import PROJECT, make_orders
from tests.support.objectstores import now_ms, write_source
from tests.support.viewfiles import write_view

pytestmark = pytest.mark.storage

# valid base64 (Azure keys are), but not the account's key
WRONG_AZURE_KEY = "d3Jvbmcta2V5LXdyb25nLWtleS13cm9uZy1rZXktd3Jvbmcta2V5LXdyb25nLWtleQ=="
WRONG_S3_SECRET = "wrong-secret-9f3a7c"


def _views(tmp_path, target: str, orders: str, **extra) -> str:
    views = tmp_path / "views"
    views.mkdir(exist_ok=True)
    write_view(views, "proj", query=PROJECT, sources={"orders": orders}, target=target, as_of=now_ms(), **extra)
    return str(views)


def _refresh(views: str, **kw) -> subprocess.CompletedProcess[str]:
    return run_cli_process(views, "refresh", "proj", "--at", str(now_ms()), check=False, timeout=120, **kw)


@pytest.mark.parametrize("name", ["seaweedfs", "azurite"])
def test_a_missing_bucket_is_named_as_such(name, request, monkeypatch, tmp_path):
    s = request.getfixturevalue(name)
    use_store(monkeypatch, s)
    monkeypatch.setenv("MVSINK_DATA_ROOT", str(tmp_path))
    scheme = s.root.split("://")[0]
    missing = f"nobucket{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("MVSINK_ALLOWED_LOCATIONS", f"{s.root}/,{scheme}://{missing}/")
    views = _views(tmp_path, f"{scheme}://{missing}/views/proj", f"{scheme}://{missing}/orders")
    out = _refresh(views)
    noun = "container" if name == "azurite" else "bucket"
    assert out.returncode == 2, out.stderr
    assert (
        f"the {noun} {missing} does not exist on {s.env.get('AWS_ENDPOINT_URL') or s.env['AZURITE_BLOB_STORAGE_URL']}"
        in (out.stderr)
    ), out.stderr
    assert "no Delta table" not in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize("name", ["seaweedfs", "azurite"])
def test_refused_credentials_are_bad_input_naming_the_variable(name, request, monkeypatch, tmp_path):
    s = request.getfixturevalue(name)
    use_store(monkeypatch, s)
    monkeypatch.setenv("MVSINK_DATA_ROOT", str(tmp_path))
    prefix = s.uri(f"creds-{uuid.uuid4().hex[:8]}")
    write_source(f"{prefix}/orders", make_orders(random.Random(3), 0, 5))
    views = _views(tmp_path, f"{prefix}/views/proj", f"{prefix}/orders")
    if name == "seaweedfs":
        variable, wrong, right = "AWS_SECRET_ACCESS_KEY", WRONG_S3_SECRET, s.env["AWS_SECRET_ACCESS_KEY"]
    else:
        variable, wrong, right = "AZURE_STORAGE_ACCOUNT_KEY", WRONG_AZURE_KEY, s.env["AZURE_STORAGE_ACCOUNT_KEY"]
    for verbose in ([], ["-v"]):  # -v prints the traceback and the log: no secret there either
        out = run_cli_process(
            views,
            *verbose,
            "refresh",
            "proj",
            "--at",
            str(now_ms()),
            env_extra={variable: wrong},
            check=False,
            timeout=120,
        )
        assert out.returncode == 2, out.stderr[-3000:]
        last = out.stderr.strip().splitlines()[-1]
        assert last.startswith("mvsink: error: location ") and "refused the credentials" in last, last
        assert f"Fix: correct {variable}" in last or f", {variable}" in last, last
        assert wrong not in out.stderr + out.stdout and right not in out.stderr + out.stdout


def test_refused_credentials_from_the_view_file_name_its_option(seaweedfs, monkeypatch, tmp_path):
    """Credentials given by reference in storage_options: the message names the option, not the variable."""
    use_store(monkeypatch, seaweedfs)
    monkeypatch.setenv("MVSINK_DATA_ROOT", str(tmp_path))
    prefix = seaweedfs.uri(f"vcreds-{uuid.uuid4().hex[:8]}")
    write_source(f"{prefix}/orders", make_orders(random.Random(4), 0, 5))
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(var)
    monkeypatch.setenv("LAKE_KEY_ID", seaweedfs.env["AWS_ACCESS_KEY_ID"])
    monkeypatch.setenv("LAKE_SECRET", WRONG_S3_SECRET)
    views = _views(
        tmp_path,
        f"{prefix}/views/proj",
        f"{prefix}/orders",
        storage_options={"AWS_ACCESS_KEY_ID": {"env": "LAKE_KEY_ID"}, "AWS_SECRET_ACCESS_KEY": {"env": "LAKE_SECRET"}},
    )
    out = _refresh(views)
    assert out.returncode == 2, out.stderr[-3000:]
    assert "storage_options.AWS_SECRET_ACCESS_KEY in the view file" in out.stderr, out.stderr
    assert WRONG_S3_SECRET not in out.stderr


def test_the_storage_layer_raises_the_bad_input_classes(seaweedfs, azurite, monkeypatch):
    from mvsink.core import storage

    use_store(monkeypatch, seaweedfs)
    with pytest.raises(MissingBucketError, match="the bucket absent-bucket does not exist"):
        storage.list_dir("s3://absent-bucket/t/_delta_log")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", WRONG_S3_SECRET)
    with pytest.raises(StoreAccessError) as err:
        storage.read_text(seaweedfs.uri("any", "file.json"))
    assert "AWS_SECRET_ACCESS_KEY" in str(err.value) and WRONG_S3_SECRET not in str(err.value)
    use_store(monkeypatch, azurite)
    with pytest.raises(MissingBucketError, match="the container absent does not exist"):
        storage.list_dir("az://absent/t/_delta_log")


def test_status_piped_into_a_reader_that_stops_early_ends_quietly(seaweedfs, monkeypatch, tmp_path):
    """`mvsink status | head -1` through a real pipe; and a reader that exits before mvsink writes a byte."""
    from mvsink.core.refresh import run_refresh
    from mvsink.definitions.catalog import Catalog
    from tests.support.sparkfree import sparkfree_write

    use_store(monkeypatch, seaweedfs)
    monkeypatch.setenv("MVSINK_DATA_ROOT", str(tmp_path))
    prefix = seaweedfs.uri(f"pipe-{uuid.uuid4().hex[:8]}")
    write_source(f"{prefix}/orders", make_orders(random.Random(5), 0, 20))
    views = _views(tmp_path, f"{prefix}/views/proj", f"{prefix}/orders")
    catalog = Catalog(views)
    run_refresh(catalog.get("proj"), now_ms(), write=sparkfree_write, catalog=catalog, run_id="pipe")
    full = run_cli_process(views, "status", "proj", timeout=120)
    assert len(full.stdout.splitlines()) > 1
    for reader in (["head", "-1"], ["true"]):
        mv = subprocess.Popen(
            [*CLI, "status", "proj", "--views-dir", views],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert mv.stdout is not None and mv.stderr is not None
        rd = subprocess.Popen(reader, stdin=mv.stdout, stdout=subprocess.PIPE, text=True)
        mv.stdout.close()  # the reader holds the only read end: when it exits, mvsink's writes fail (EPIPE)
        first, _ = rd.communicate(timeout=120)
        err = mv.stderr.read()
        code = mv.wait(timeout=120)
        assert "BrokenPipeError" not in err and "Traceback" not in err and err == "", err
        assert code in (0, 141), (code, err)
        if reader[0] == "head":
            assert first == full.stdout.splitlines(keepends=True)[0]
