"""Object-storage servers for the storage tests: started once per session on 127.0.0.1, killed at the end."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from mvsink.core import storage
from tests.support.objectstores import Store, start_azurite, start_s3rver, start_seaweedfs, stop

# Every variable the storage layer reads, and Azurite's URL: cleared before a store's own are set.
STORE_VARS = (*storage.S3_ENV, *storage.AZURE_ENV, *storage.GCS_ENV, "AZURITE_BLOB_STORAGE_URL")


@pytest.fixture(scope="session")
def seaweedfs(tmp_path_factory) -> Iterator[Store]:
    store = start_seaweedfs(tmp_path_factory.mktemp("seaweedfs"))
    yield store
    stop(store.proc)


@pytest.fixture(scope="session")
def azurite(tmp_path_factory) -> Iterator[Store]:
    store = start_azurite(tmp_path_factory.mktemp("azurite"))
    yield store
    stop(store.proc)


@pytest.fixture(scope="session")
def s3rver(tmp_path_factory) -> Iterator[Store]:
    store = start_s3rver(tmp_path_factory.mktemp("s3rver"))
    yield store
    stop(store.proc)


def use_store(monkeypatch: pytest.MonkeyPatch, store: Store) -> None:
    """Point the standard variables (and nothing else) at ``store``; allow locations in its bucket."""
    for name in STORE_VARS:
        monkeypatch.delenv(name, raising=False)
    for name, value in store.env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("MVSINK_ALLOWED_LOCATIONS", store.root + "/")
    monkeypatch.delenv("MVSINK_FAIL_POINTS", raising=False)


@pytest.fixture(params=["seaweedfs", "azurite"])
def store(request, monkeypatch, tmp_path) -> tuple[Store, str]:
    """A store with conditional writes (SeaweedFS over s3://, Azurite over az://), selected through the standard
    variables: (store, a fresh prefix URI for this test)."""
    s: Store = request.getfixturevalue(request.param)
    use_store(monkeypatch, s)
    monkeypatch.setenv("MVSINK_DATA_ROOT", str(tmp_path))
    return s, s.uri(f"t-{uuid.uuid4().hex[:10]}")
